"""A run's elites as files: written by the generation loop, read by replay, robustness and
`nevo.load_policy` (this module is the only one that knows their fields).

    elite.json   the last generation's elite: a seed list (the GA, GA-NS) with what rebuilds its
                 weights (sigma, the noise table, the net, a safe mutation's name), or, for the ES
                 families, the name of the array that holds theta (theta.gG.npy, G its
                 generation) and, with --obs-norm 1, of the observation mean and std its
                 validation used (obs_norm.gG.npy)
    best.json    the GA: the best elite of the run so far (by validation mean), same fields
    elites.jsonl seed-list elites: every validated generation's elite.json, a line each (a resume
                 drops the lines past its checkpoint, with the metrics' rows)

Every file is written atomically (nevo.runs); a damaged or incomplete one is a one-line
DamagedFile naming it. An elite is written as one unit: its arrays first, under names of their
generation that no earlier label points to, then the label (elite.json) that names them, then the
arrays no label names any more are removed. A kill or a failed write at any moment leaves a label
whose arrays are its own (before 2026-12-02 the arrays were theta.npy and obs_norm.npy, which
a kill between the writes could leave a generation ahead of their label; such folders still read).
"""

from __future__ import annotations

import os

import numpy as np

from nevo import config, nets, runs, tasks
from nevo.algos import declared
from nevo.config import ConfigError
from nevo.evaluation import setup
from nevo.genomes import noise, safe_build
from nevo.genomes.operators import GAUSSIAN, mutation
from nevo.nets import obs_norm
from nevo.runs import BEST, CONFIG, ELITE, ELITES, THETA, DamagedFile, read_array, read_json


def write(run_dir: str, cfg, generation: int, algo, extras: dict | None = None) -> None:
    """elite.json (and best.json where the algorithm keeps a best elite; theta.gG.npy for a theta)
    after `generation`. extras: the run's extensions' files beside the elite, {key: (file name,
    array)} (nevo.algos.contract.Extension.elite: the observation statistics of --obs-norm 1),
    each saved and named in the record under its key."""
    kept = [(ELITE, generation, algo.elite, algo.elite_score)]
    if algo.best_elite is not None:  # None only while every validation mean was NaN
        kept.append((BEST, *algo.best_elite))
    common = {"validation_episodes": algo.validation_episodes, "net": cfg.net.net, "vbn": cfg.net.vbn}
    records = []
    for name, gen, elite, score in kept:
        record = {"generation": gen, "validation_mean": score, **common}
        if elite.dtype == np.int64:  # a seed list: what rebuilds its weights
            record |= {
                "seeds": [int(s) for s in elite],
                "sigma": declared(cfg).sigma(cfg),
                "noise_table_size": cfg.run.noise_table_size,
                "noise_seed": cfg.run.noise_seed,
            }
            if config.mutation_of(cfg).safe:  # its rebuild reads experiences/
                record["mutation"] = config.mutation_of(cfg).name
        else:  # the ES families: theta as it is
            record["theta"] = of_generation(THETA, gen)
            runs.save_array(run_dir, record["theta"], elite)
        for key, (file, array) in (extras or {}).items():
            record[key] = of_generation(file, generation)
            runs.save_array(run_dir, record[key], array)
        records.append((name, record))
    if "seeds" in records[0][1]:  # a seed list is small: every generation's is kept
        runs.append_line(run_dir, ELITES, records[0][1])
    for name, record in records:  # the labels last
        runs.write_json(run_dir, name, record)
    _remove_unnamed(run_dir, [r for _, r in records], [THETA, *[f for f, _ in (extras or {}).values()]])


def of_generation(file: str, generation: int) -> str:
    """An elite array's name in the generation that wrote it: theta.npy -> theta.g12.npy."""
    stem, ext = os.path.splitext(file)
    return f"{stem}.g{generation}{ext}"


def _remove_unnamed(run_dir: str, records: list[dict], files: list[str]) -> None:
    """Remove the elite arrays (of these names, any generation's, or the unversioned ones of
    older folders) that no label names any more."""
    named = {v for r in records for v in r.values() if isinstance(v, str)}
    for entry in os.listdir(run_dir):
        if entry in named:
            continue
        for file in files:
            stem, ext = os.path.splitext(file)
            if entry == file or (entry.startswith(stem + ".g") and entry.endswith(ext)):
                os.remove(os.path.join(run_dir, entry))
                break


def array_path(run_dir: str, key: str = "theta", label: str = ELITE) -> str:
    """The path of the array that the label (elite.json, best.json) names under key: theta, or
    obs_norm (--obs-norm 1)."""
    return os.path.join(run_dir, read_json(os.path.join(run_dir, label))[key])


def elite_file(run_dir: str, which: str = "best") -> str:
    """The file that holds the individual to test: best.json for "best" where the run has one
    (the GA), else elite.json."""
    if which == "best" and os.path.isfile(os.path.join(run_dir, BEST)):
        return BEST
    return ELITE


def net_of(run_dir: str, cfg) -> nets.NetSpec:
    """The NetSpec a run's config.json says it trained (from the observation and action facts it
    wrote, so that a user's own environment need not be made again; older run folders: from its
    task)."""

    facts = read_json(os.path.join(run_dir, CONFIG))
    if "obs_shape" in facts:
        shape, dtype = tuple(facts["obs_shape"]), np.dtype(facts["obs_dtype"])
        return nets.net_spec(cfg.net.net, shape, facts["n_actions"], dtype, facts["action"])
    return setup.net_for(cfg, tasks.task_for(cfg.env))


def generation_elite(run_dir: str, generation: int) -> dict:
    """The line of elites.jsonl of that generation's elite; a ConfigError naming the generations
    the run keeps where it has none (ES runs, and GA runs before 2026-12-04, keep no elites.jsonl)."""
    path = os.path.join(run_dir, ELITES)
    if not os.path.isfile(path):
        raise ConfigError(f"{run_dir}: no {ELITES} (a run keeps every generation's elite where its "
                          f"elites are seed lists, since 2026-12-04): test best or last")  # fmt: skip
    kept = {r.get("generation"): r for r in runs.read_metrics(run_dir, ELITES) if isinstance(r, dict)}
    if generation not in kept:
        have = runs.spans(sorted(g for g in kept if isinstance(g, int)))
        raise ConfigError(f"{path}: no elite of generation {generation} (it keeps {have or 'none'})")
    return kept[generation]


def load(run_dir: str, which: str | int = "best", fold: bool = True):
    """(config, elite dict, NetSpec, (P,) float32 weights): rebuilt from the seed list of
    elite_file(run_dir, which), or of generation `which` (an int: its line of elites.jsonl), or
    for an ES run, theta as saved; with --obs-norm 1, folded with the observation statistics it
    was validated with unless fold=False (obs_stats reads them)."""

    for name in (CONFIG, ELITE):
        if not os.path.isfile(os.path.join(run_dir, name)):
            why = "not a run folder" if name == CONFIG else "no elite yet (no generation finished)"
            raise ConfigError(f"{run_dir}: {why} (no {name})")
    generation = isinstance(which, int) and not isinstance(which, bool) and which >= 0
    if which not in ("best", "last") and not generation:
        raise ConfigError(f"which: got {which!r}, allowed: 'best', 'last' or a generation (an int >= 0)")
    cfg = config.load(os.path.join(run_dir, CONFIG))
    if generation:
        name, elite = ELITES, {**generation_elite(run_dir, which), "file": ELITES}
    else:
        name = elite_file(run_dir, which)
        elite = {**read_json(os.path.join(run_dir, name)), "file": name}
    need = ("generation", "validation_mean")
    need += ("theta",) if "theta" in elite else ("seeds", "noise_table_size", "noise_seed", "sigma")
    missing = [k for k in need if k not in elite]
    if missing:
        raise DamagedFile(f"{os.path.join(run_dir, name)}: damaged, no {', '.join(missing)}")
    spec = net_of(run_dir, cfg)
    if "theta" in elite:  # ES: the elite is theta itself
        theta = read_array(os.path.join(run_dir, elite["theta"]))
        if theta.shape != (spec.n_params,):
            path = os.path.join(run_dir, elite["theta"])
            raise DamagedFile(f"{path}: damaged, shape {theta.shape} for a net of {spec.n_params:,}")
        stats = obs_stats(run_dir, elite, spec)
        if stats is not None and fold:  # the observation statistics theta was validated with
            theta = obs_norm.fold(spec, theta[None].astype(np.float32), stats[0], stats[1])[0]
        return cfg, elite, spec, theta
    table = noise.make_table(elite["noise_table_size"], elite["noise_seed"])
    # A safe mutation's step also reads its parent's experiences, kept in the run folder.
    try:
        op = mutation(elite.get("mutation", GAUSSIAN.name))
    except ValueError as e:
        raise DamagedFile(f"{os.path.join(run_dir, name)}: damaged, {e}") from None

    def experiences(genome):
        if generation and not os.path.exists(runs.experiences_path(run_dir, genome)):  # pruned, not damaged
            raise ConfigError(f"{run_dir}: generation {which}'s elite cannot be rebuilt: a safe "
                              "mutation's run keeps only its living genomes' ancestors' experiences "
                              "(test best or last)")  # fmt: skip
        return runs.load_experiences(run_dir, genome)

    weights = safe_build.rebuild(op, spec, elite["seeds"], table,
                                 nets.init_scale(spec), elite["sigma"], experiences)  # fmt: skip
    return cfg, elite, spec, weights


def obs_stats(run_dir: str, elite: dict, spec) -> np.ndarray | None:
    """(2, n) the observation mean and std an ES elite with --obs-norm 1 was validated with, or None."""
    if "obs_norm" not in elite:
        return None
    path = os.path.join(run_dir, elite["obs_norm"])
    stats = read_array(path)
    if stats.shape != (2, spec.layers[0].cin):
        raise DamagedFile(f"{path}: damaged, shape {stats.shape} for {spec.layers[0].cin} inputs")
    return stats
