"""Read run folders (config.json, metrics.jsonl, elite.json, best.json, test.json,
test_sticky0.25.json and the tests of single generations' elites, test.gG.json) for figures and
tables.

nevo.plots reads only the files a run writes and never imports training code, so a figure can be
remade from a folder alone. Runs still going (a half-written last line) and
resumed runs (a generation written twice) read correctly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import statistics
from dataclasses import dataclass, field

import numpy as np

# config.json keys that do not change a run's results (nevo.config.RESUMABLE and the facts
# written beside the settings), so runs differing only in these and the seed are one configuration.
NOT_CONFIG = {
    ("run", "seed"),
    ("run", "out_dir"),
    ("run", "frame_budget"),
    ("run", "env_slots"),
    ("run", "emulators_per_group"),
    ("run", "batch_size"),  # emulators_per_group's name before 2026-11-22
    ("run", "pipeline"),
    ("run", "threads"),
    ("run", "device"),
    ("emulators_per_group",),
    ("batch_size",),
    ("git_commit",),
    ("obs_shape",),  # facts of the task, the same for every run of it (nevo.loops.loop writes them)
    ("obs_dtype",),
    ("action",),
    ("action_box",),
    ("env_slots",),
    ("threads",),
    ("processes",),
    ("counts",),  # what a row's frames and generation count, in words (below)
    ("preset",),  # the preset's name: config.json holds the settings it resolved to, beside it
    ("starts",),  # each start of the run: its generation, date, commit and machine
}


# The test under sticky actions that nevo suite writes beside test.json (nevo.tools.replay's
# test_file(STICKY), named here so that nevo.plots imports no training code), and the "seeds" of a
# test played on held-out episode seeds (replay.HELD_OUT; older tests drew the run's own stream).
STICKY = 0.25
STICKY_FILE = "test_sticky0.25.json"
HELD_OUT = "held-out"
# A GA run's row of generation g holds generation g - 1's elite on generation g's validation
# episodes (logged since 2026-12-04): seeds it was not picked on where a task's episodes differ
# by seed (Atari, gymnasium), so no winner's curse; a data set's or the maze's repeat its mean.
PREVIOUS_ELITE = "score/previous_elite_mean"
NEXT_VALIDATION = "Elite on the next validation"
# nevo replay --elite G's test of generation G's elite (replay.test_file(0.0, G)), the points of
# a held-out test curve: drawn under this name as a metric of its own.
GENERATION_TEST = re.compile(r"test\.g(\d+)\.json")
TEST_CURVE = "test/held_out_mean"
HELD_OUT_TEST = "Elite on held-out test episodes"


class NotARunFolder(Exception):
    """A path without config.json and metrics.jsonl; the message is one line for the user."""


@dataclass
class Run:
    """One run folder's files, parsed."""

    path: str
    config: dict  # config.json as written
    metrics: list[dict]  # one dict per finished generation, sorted by generation
    elite: dict | None  # elite.json, or None before the first generation ends
    best: dict | None  # best.json (the GA's best elite so far), or None
    test: dict | None  # test.json written by nevo replay, or None
    settings: dict = field(default_factory=dict)  # flattened config without NOT_CONFIG keys
    sticky: dict | None = None  # test_sticky0.25.json (nevo replay --sticky 0.25), or None
    generation_tests: dict = field(default_factory=dict)  # test.gG.json by G (nevo replay --elite G)

    @property
    def game(self) -> str:
        """The Atari game, or the task's name for others (maze, CartPole-v1, ...)."""
        env = self.config.get("env", {})
        return env.get("game", "?") if env.get("env", "atari") == "atari" else env.get("env", "?")

    @property
    def counts(self) -> dict:
        """What the run's frames and generations count, in words, as config.json says ({"frames":
        "examples", "generation": "iteration"} for SGD on a data set); a folder from before it says:
        game frames on Atari, frames elsewhere, and generations."""
        env = self.config.get("env", {}).get("env", "atari")
        before = {"frames": "game frames" if env == "atari" else "frames", "generation": "generation"}
        return {**before, **self.config.get("counts", {})}

    @property
    def machines(self) -> tuple[list[str], bool]:
        """(the machines the run's recorded starts ran on, each once: "CPU model, N cores" and the
        device where it is not the CPU; whether generations before its first recorded start ran
        where nothing says: a folder from before config.json kept its starts, or resumed since)."""
        starts = [s for s in self.config.get("starts", []) if isinstance(s, dict)]
        names = []
        for s in starts:
            device = s.get("device", "cpu")
            name = f"{s.get('cpu', 'unknown CPU')}, {s.get('cores', '?')} cores" + (
                f", {device}" if device != "cpu" else ""
            )
            names += [name] if name not in names else []
        return names, not starts or starts[0].get("generation", 0) > 0

    @property
    def seed(self) -> int:
        return self.config.get("run", {}).get("seed", 0)

    @property
    def frame_budget(self) -> int | None:
        """The frames the run was set to train for (config.json's run.frame_budget)."""
        return self.config.get("run", {}).get("frame_budget")

    @property
    def name(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(generations, values) float64 of one metric; rows without it are left out."""
        gens = [r["generation"] for r in self.metrics if _number(r.get(key)) is not None]
        vals = [_number(r.get(key)) for r in self.metrics if _number(r.get(key)) is not None]
        return np.asarray(gens, np.float64), np.asarray(vals, np.float64)

    def next_validation(self) -> tuple[np.ndarray, np.ndarray]:
        """(generations, values) float64: each elite's mean on the next generation's validation
        episodes, at the elite's own generation (PREVIOUS_ELITE sits on the row after)."""
        gens, vals = self.series(PREVIOUS_ELITE)
        return gens - 1, vals

    def test_curve(self) -> tuple[np.ndarray, np.ndarray]:
        """(generations, test means) float64 of the elites tested one generation at a time on
        held-out episodes (test.gG.json), in generation order."""
        tests = sorted((g, _number(t.get("mean"))) for g, t in self.generation_tests.items())
        tests = [(g, m) for g, m in tests if m is not None]
        return np.array([g for g, _ in tests], np.float64), np.array([m for _, m in tests], np.float64)

    def column(self, key: str) -> np.ndarray:
        """(generations,) float64 of one metric, NaN where a row lacks it."""
        return np.array([_number(r.get(key), np.nan) for r in self.metrics], np.float64)

    def has(self, key: str) -> bool:
        if key == TEST_CURVE:
            return self.test_curve()[0].size > 0
        return any(_number(r.get(key)) is not None for r in self.metrics)


def _number(v, default=None):
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


def read_json(path: str) -> dict | None:
    """A JSON file, or None if it is missing or being replaced right now."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def read_metrics(path: str) -> list[dict]:
    """Complete lines of metrics.jsonl, one per generation (the last written wins), sorted."""
    by_gen = {}
    with open(path) as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a kill, or still being written
            if isinstance(row, dict) and isinstance(row.get("generation"), int):
                by_gen[row["generation"]] = row
    return [by_gen[g] for g in sorted(by_gen)]


def flatten(d: dict, prefix=()) -> dict:
    """{("run", "seed"): 0, ...} of a nested dict."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, (*prefix, k)))
        else:
            out[(*prefix, k)] = v
    return out


def _not_config(key: tuple) -> bool:
    """A flattened key that is or lies under one of NOT_CONFIG's (("counts", "frames") under ("counts",))."""
    return any(key[:i] in NOT_CONFIG for i in range(1, len(key) + 1))


def load_run(path: str) -> Run:
    """Parse one run folder; raise NotARunFolder (one-line message) if it is not one."""
    if not os.path.isdir(path):
        raise NotARunFolder(f"{path}: no such folder")
    missing = [n for n in ("config.json", "metrics.jsonl") if not os.path.isfile(os.path.join(path, n))]
    if missing:
        raise NotARunFolder(f"{path}: not a run folder (no {' or '.join(missing)})")
    config = read_json(os.path.join(path, "config.json"))
    if config is None:
        raise NotARunFolder(f"{path}: config.json is not valid JSON")
    settings = {k: v for k, v in flatten(config).items() if not _not_config(k)}
    return Run(
        path=path,
        config=config,
        metrics=read_metrics(os.path.join(path, "metrics.jsonl")),
        elite=read_json(os.path.join(path, "elite.json")),
        best=read_json(os.path.join(path, "best.json")),
        test=read_json(os.path.join(path, "test.json")),
        settings=settings,
        sticky=read_json(os.path.join(path, STICKY_FILE)),
        generation_tests=generation_tests(path),
    )


def generation_tests(path: str) -> dict[int, dict]:
    """The run folder's tests of single generations' elites without sticky actions (test.gG.json:
    held-out episode seeds, or a data set's test split), by generation; unreadable ones left out."""
    tests = {}
    for name in os.listdir(path):
        m = GENERATION_TEST.fullmatch(name)
        test = read_json(os.path.join(path, name)) if m else None
        if isinstance(test, dict) and not test.get("sticky"):
            tests[int(m.group(1))] = test
    return tests


def load_runs(paths) -> list[Run]:
    """The run folders among paths: each a run folder, or a results folder whose run folders are
    its subfolders (nevo suite's), read in name order."""
    return [load_run(p) for p in expand(paths)]


def expand(paths) -> list[str]:
    """paths with each results folder (no config.json of its own, run folders inside) replaced
    by its run folders, sorted by name."""
    out = []
    for p in paths:
        inner = []
        if os.path.isdir(p) and not os.path.isfile(os.path.join(p, "config.json")):
            inner = sorted(os.path.join(p, d) for d in os.listdir(p))
            inner = [d for d in inner if os.path.isfile(os.path.join(d, "config.json"))]
        out += inner or [p]
    return out


def sections(settings: dict) -> set[tuple]:
    """The sections of flattened settings (("run",), ("env",), ...; () for the top level)."""
    return {(), *(k[:-1] for k in settings)}


def same_configuration(a: dict, b: dict) -> bool:
    """Two runs' settings (Run.settings) are one configuration: equal where both have a setting;
    a setting one of them lacks in a section both have came or went with a version of nevo (a
    run of an older one lacks it, and ran as its default then did), so it tells them apart only
    where the other run's value is not that default (of the task's, net's and run's sections,
    whose defaults nevo knows: a run with sticky actions is not a run of before them)."""
    both = sections(a) & sections(b)

    def same(k) -> bool:
        if k in a and k in b:
            return a[k] == b[k]
        if k[:-1] not in both:
            return False
        if k not in _DEFAULTS:  # (a setting whose default nevo does not know: an algorithm's)
            return True
        return a.get(k, _DEFAULTS[k]) == b.get(k, _DEFAULTS[k])

    return all(same(k) for k in {*a, *b})


def _defaults() -> dict:
    """{(section, name): default} of the settings every run folder's task, net and run sections hold."""
    from nevo.settings import EnvConfig, NetConfig, RunConfig

    return {
        (section, f.name): f.default
        for section, cls in (("env", EnvConfig), ("net", NetConfig), ("run", RunConfig))
        for f in dataclasses.fields(cls)
    }


_DEFAULTS = _defaults()


def group_runs(runs: list[Run]) -> list[list[Run]]:
    """Runs of one configuration (same_configuration: equal settings apart from seed, NOT_CONFIG
    and settings of a later version), in input order."""
    groups: list[list[Run]] = []
    for r in runs:
        for g in groups:
            if same_configuration(g[0].settings, r.settings):
                g.append(r)
                break
        else:
            groups.append([r])
    return groups


def population_keys(settings: dict) -> list[tuple]:
    """The key of the population in flattened settings: that of the algorithm's own section
    (config.json holds only its sections; SGD has none, so none)."""
    return [k for k in settings if len(k) == 2 and k[1] == "population"]


def group_labels(groups: list[list[Run]]) -> list[str]:
    """Short legend labels: algorithm and population (and game), plus settings that differ between groups."""
    firsts = [g[0].settings for g in groups]
    keys = sorted({k for s in firsts for k in s})
    # a setting missing from a section that every group has came or went with a version of nevo
    # (a run of an older one lacks it): not something that tells these runs apart
    shared = set.intersection(*(sections(s) for s in firsts)) if firsts else {()}
    differ = [k for k in keys if len({json.dumps(s.get(k)) for s in firsts}) > 1
              and (all(k in s for s in firsts) or k[:-1] not in shared)]  # fmt: skip
    labels = []
    for s in firsts:
        population = population_keys(s)
        base = [str(s.get(("algo",), "")).upper(), *(f"N={s[k]}" for k in population[:1])]
        if ("env", "game") in differ:
            base.insert(0, str(s.get(("env", "game"))))
        skip = {("env", "game"), ("algo",), *population}
        # settings another family's runs have and this one lacks are left out (no "sigma=None")
        extra = [f"{k[-1]}={s[k]}" for k in differ if k not in skip and k[-1] != "population" and k in s]
        labels.append(" ".join([*base, *extra[:3]]))
    return labels


def interp_median(xs: list[np.ndarray], ys: list[np.ndarray], points: int = 200):
    """Median, min and max of several curves on a shared x grid (where every curve has data)."""
    lo = max(x[0] for x in xs)
    hi = min(x[-1] for x in xs)
    if not hi > lo:
        return None
    grid = np.unique(np.concatenate([x[(x >= lo) & (x <= hi)] for x in xs]))
    if grid.size > points:
        grid = np.linspace(lo, hi, points)
    stack = np.stack([np.interp(grid, x, y) for x, y in zip(xs, ys)])  # (runs, grid)
    return grid, np.median(stack, axis=0), stack.min(axis=0), stack.max(axis=0)


def final_score(run: Run) -> tuple[float | None, str]:
    """(score, kind): the replay test mean ("test"); else the validation mean ("validation") of
    the best elite (best.json, which nevo replay tests by default), or of the last elite
    where the run has no best.json."""
    if run.test is not None and _number(run.test.get("mean")) is not None:
        return float(run.test["mean"]), "test"
    if run.best is not None and _number(run.best.get("validation_mean")) is not None:
        return float(run.best["validation_mean"]), "validation"
    _, vals = run.series("score/elite_mean")
    if vals.size:
        return float(vals[-1]), "validation"
    if run.elite is not None and _number(run.elite.get("validation_mean")) is not None:
        return float(run.elite["validation_mean"]), "validation"
    return None, "none"


def tested_elite(run: Run, test: dict | None = None) -> dict | None:
    """The elite file's contents (best.json or elite.json) that a test file (test, or by default
    test.json) says it tested."""
    test = run.test if test is None else test
    if test is None:
        return None
    return run.best if test.get("elite_file") == "best.json" else run.elite


def held_out(test: dict) -> bool:
    """Whether a test file's episodes were played on held-out seeds (its "seeds" is "held-out");
    an older test's seeds came from the stream the run's training episodes were drawn from."""
    return test.get("seeds") == HELD_OUT


def sticky_score(run: Run) -> float | None:
    """The mean of the run's test under sticky actions 0.25, or None where it has none."""
    return None if run.sticky is None else _number(run.sticky.get("mean"))


def median(values: list[float]) -> float:
    return float(statistics.median(values))
