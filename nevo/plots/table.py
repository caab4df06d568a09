"""The paper-style results table: each game's final elite test score beside published numbers.

    nevo plot table RUN_DIR [RUN_DIR ...] [--latex] [--out PREFIX] [--figure PREFIX]
    nevo plot table results/atari --out results/atari/table --figure results/atari/curves
    nevo plot table results/atari results/atari100m --summary    # one row a game, a column a folder

prints a Markdown table (or LaTeX with --latex; --out writes PREFIX.md and PREFIX.tex) of the
elite's test score (the mean over the episodes of `test.json`, written by nevo replay) and,
beside it, the same elite's test under sticky actions 0.25 (`test_sticky0.25.json`, nevo replay
--sticky 0.25; n/a where a run has none), beside DQN, ES, A3C, random search and the Deep GA from
nevo/plots/data/published_atari.json (Such et al. 2017, Table 1, and the papers it cites), whose
sources are printed under the table. A run without test.json shows the validation mean of its
best elite (best.json, the individual that nevo replay tests by default; the last elite where a
run has no best.json), marked with a dagger; a test of an elite older than the run's current one
is marked with a double dagger, and a test whose episode seeds were not held out (a test.json
written before nevo replay held them out: no "seeds": "held-out" in it) with a section sign.
Under the table one line counts, for each published column, the rows whose current held-out test
score is above it (a marked row does not count), and a second line counts the same for the
sticky-actions tests. A RUN_DIR may be a results folder (nevo suite's): its run folders are read.
The hours column is each configuration's median training time (wall_s of its last generation;
the tests of nevo replay not included), and a line under the table names the machines the runs
trained on, as their config.json records each start (runs from before it kept them say nothing).
--figure draws one panel per game: the elite's validation score against frames, its test score
as a point at the run's end, and the published DQN, ES, A3C, random search and GA (1B frames)
scores as lines.

--summary makes the short table instead: one row a game, and for each RESULTS folder given (in
order) a column of its runs' test scores headed by the frames the folder's runs were set to
train for (a run short of them, still training or stopped early, shows the frames it reached)
and a column of its sticky-actions tests, then each folder's hours, and DQN, random search (1B) and
the GA (1B), with the same marks and one line counting each column's rows above RS (1B) and GA
(1B). A game missing from a folder shows n/a there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from nevo.plots import rundata, style

PUBLISHED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "published_atari.json")
COLUMN_NAMES = {"ES_1h": "ES (1 h)", "RS_1B": "RS (1B)", "GA_1B": "GA (1B)", "GA_6B": "GA (6B)"}
DAGGER, DDAGGER, SECTION = "\u2020", "\u2021", "\u00a7"
STICKY_HEADER = f"nevo sticky {rundata.STICKY:g}"
SUMMARY_METHODS = ("DQN", "RS_1B", "GA_1B")  # the summary's published columns
SUMMARY_COUNTED = ("RS_1B", "GA_1B")  # the ones its count line compares with
NOTES = {
    DAGGER: f"{DAGGER} validation mean of the best elite (best.json; the last elite where a run has "
    "none), not a test score (no test.json: run nevo replay RUN_DIR).",
    SECTION: f"{SECTION} not a held-out test: its episode seeds were drawn from the same stream as the "
    "run's training episodes (a test.json from before nevo replay held them out; nevo replay "
    "RUN_DIR tests again on held-out seeds).",
    DDAGGER: f"{DDAGGER} test of an earlier elite: the run has gone on since its test file was written.",
}


def load_published(path: str = PUBLISHED) -> dict:
    with open(path) as f:
        return json.load(f)


def fmt_score(v) -> str:
    """1,234 for whole numbers, 1,234.5 otherwise; n/a for a missing number."""
    if v is None:
        return "n/a"
    v = float(v)
    return f"{v:,.0f}" if v == round(v) else f"{v:,.1f}"


def fmt_frames(n) -> str:
    if n is None:
        return "n/a"
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def score_cell(runs: list[rundata.Run], sticky: bool = False) -> tuple[str, str, float | None]:
    """(cell, marks, counted) of some runs' scores in one column: their test.json means (a
    validation mean where a run has none), or with sticky their test_sticky0.25.json means. The
    cell is the median, with the marks of its runs' scores (validation mean, not held out, test
    of an earlier elite); counted is that median where every run has an unmarked score (the
    number the count lines compare with the published ones), else None."""
    scores, marks = [], ""
    for r in runs:
        if sticky:
            score, kind, test = rundata.sticky_score(r), "test", r.sticky
        else:
            (score, kind), test = rundata.final_score(r), r.test
        if score is None:
            continue
        scores.append(score)
        found = [DAGGER] if kind == "validation" else []
        if kind == "test" and not rundata.held_out(test):
            found.append(SECTION)
        if kind == "test" and _stale(r, test):
            found.append(DDAGGER)
        marks += "".join(m for m in found if m not in marks)
    if not scores:
        return "n/a", "", None
    score = rundata.median(scores)
    cell = fmt_score(score) + marks + (f" (median of {len(scores)})" if len(scores) > 1 else "")
    return cell, marks, score if not marks and len(scores) == len(runs) else None


def build_rows(runs: list[rundata.Run], published: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows of cells, footnotes) of the table; one row per game and configuration."""
    methods = list(next(iter(published["games"].values())).keys())
    header = ["Game", "nevo (this work)", STICKY_HEADER, "nevo frames", "nevo hours"]
    header += [COLUMN_NAMES.get(m, m) for m in methods]
    groups = rundata.group_runs(runs)
    labels = rundata.group_labels(groups)
    several_configs = len({g[0].game for g in groups}) < len(groups)
    rows, marks, tested, tested_sticky = [], "", [], []
    for group, label in sorted(zip(groups, labels), key=lambda gl: (gl[0][0].game, gl[1])):
        cell, cell_marks, counted = score_cell(group)
        sticky_cell, sticky_marks, counted_sticky = score_cell(group, sticky=True)
        marks += cell_marks + sticky_marks
        frames = [r.metrics[-1].get("frames") for r in group if r.metrics]
        hours = [r.metrics[-1].get("wall_s", float("nan")) / 3600 for r in group if r.metrics]
        game = group[0].game
        name = game.replace("_", " ").title() + (f" ({label})" if several_configs else "")
        pub = published["games"].get(game, {})
        frames_cell = fmt_frames(rundata.median(frames)) if frames else "n/a"
        hours_cell = f"{rundata.median(hours):.2f}" if hours else "n/a"
        published_cells = [fmt_score(pub.get(m)) for m in methods]
        rows.append([name, cell, sticky_cell, frames_cell, hours_cell, *published_cells])
        if counted is not None:
            tested.append((name, counted, pub))
        if counted_sticky is not None:
            tested_sticky.append((name, counted_sticky, pub))
    footnotes = [line for line in (_above_published(tested, methods),
                 _above_published(tested_sticky, methods, "Sticky-actions tests above the published score"))
                 if line]  # fmt: skip
    footnotes += [NOTES[m] for m in (DAGGER, SECTION, DDAGGER) if m in marks]
    tests = [r.test for g in groups for r in g if r.test]
    if tests:
        eps = sorted({t.get("episodes") for t in tests})
        caps = sorted({t.get("frame_cap") for t in tests})
        footnotes.append(
            f"nevo test score: mean over {'/'.join(map(str, eps))} test episodes, "
            f"cap {'/'.join(fmt_frames(c) for c in caps)} frames, 1-30 random no-ops."
        )
    footnotes.append(_sticky_note([r for g in groups for r in g], STICKY_HEADER))
    footnotes += [line for line in [_machines_note(runs)] if line]
    footnotes.append("n/a: no published number. Published protocol: " + published.get("protocol", ""))
    return header, rows, footnotes


def _episodes(tests: list[dict]) -> str:
    """The test files' numbers of episodes, 200 or 50/200; 200 (nevo replay's) where there are none."""
    return "/".join(map(str, sorted({t.get("episodes") for t in tests}))) or "200"


def _sticky_note(runs: list[rundata.Run], label: str) -> str:
    """What a sticky-actions column (headed label) is."""
    eps = _episodes([r.sticky for r in runs if r.sticky])
    return (
        f"{label}: the same elite's mean over {eps} held-out test episodes "
        f"under sticky actions {rundata.STICKY:g} (Machado et al. 2018: each frame repeats the previous "
        f"frame's action with probability {rundata.STICKY:g}), from {rundata.STICKY_FILE} (nevo replay "
        f"RUN_DIR --sticky {rundata.STICKY:g}; n/a: none yet); the published scores were played without "
        "sticky actions."
    )


def _machines_note(runs: list[rundata.Run]) -> str:
    """Where the runs trained, from their recorded starts (config.json's "starts"), so that hours
    from different machines are read as such; "" where no run recorded any."""
    counts, unrecorded, earlier = {}, 0, 0
    for r in runs:
        names, before = r.machines
        for name in names:
            counts[name] = counts.get(name, 0) + 1
        unrecorded += not names
        earlier += before and bool(names)
    if not counts:
        return ""
    parts = [f"{name} ({n} run{'s' * (n > 1)})" for name, n in counts.items()]
    missing = [f"{unrecorded} run{'s' * (unrecorded > 1)}"] if unrecorded else []
    missing += [f"the generations of {earlier} before their first recorded start"] if earlier else []
    also = f" Not recorded (started before runs kept it): {' and '.join(missing)}." if missing else ""
    return "Machines, from the runs' recorded starts (config.json's starts): " + "; ".join(parts) + "." + also


def _above_published(tested: list, methods, lead: str = "Tested rows above the published score") -> str:
    """One line: for each published column, how many rows with a current held-out test score
    beat it, and which; a row showing a validation mean, a test of an older elite or a test that
    was not held out does not count."""
    parts = []
    for m in methods:
        rows = [(name, score, float(pub[m])) for name, score, pub in tested if pub.get(m) is not None]
        if rows:
            won = [name for name, score, published in rows if score > published]
            parts.append(f"{COLUMN_NAMES.get(m, m)} {len(won)} of {len(rows)}"
                         + (f" ({', '.join(won)})" if won else ""))  # fmt: skip
    return f"{lead}: " + "; ".join(parts) + "." if parts else ""


def _stale(run: rundata.Run, test: dict | None = None) -> bool:
    """True if a test file (by default test.json) tested an elite older than the run's current
    one (its best elite, or its last one, whichever file the test was of)."""
    test = run.test if test is None else test
    tested = rundata.tested_elite(run, test)
    if tested is None:
        return False
    return test.get("elite_generation") != tested.get("generation")


def _budget(runs: list[rundata.Run]) -> str:
    """The frames a results folder's runs were set to train for: 25M, or 25M-100M where they differ."""
    budgets = sorted({r.frame_budget for r in runs if r.frame_budget})
    if not budgets:
        return "?"
    return fmt_frames(budgets[0]) + (f"-{fmt_frames(budgets[-1])}" if len(budgets) > 1 else "")


def _populations(runs: list[rundata.Run]) -> str:
    """The populations a results folder's runs had (the population of the algorithm's own section
    of config.json): N=256, or N=64/256 where they differ; "" where none says."""
    sizes = sorted({r.settings[k] for r in runs for k in rundata.population_keys(r.settings)})
    return "N=" + "/".join(map(str, sizes)) if sizes else ""


def folder_labels(folders: list[tuple[str, list[rundata.Run]]]) -> list[str]:
    """Each results folder's name in the summary and the figure: "nevo " and its budget (25M,
    25M-100M), with its population where the folders' populations differ (the setting the presets
    differ in most; a preset's name is not enough: a run may set the population itself), and its
    folder's name where two would read the same."""
    populations = [_populations(runs) for _, runs in folders]
    named = len(set(populations)) > 1
    labels = [f"nevo {p + ' ' if named and p else ''}{_budget(runs)}"
              for p, (_, runs) in zip(populations, folders)]  # fmt: skip
    return [lab if labels.count(lab) == 1 else f"{lab} ({os.path.basename(os.path.normpath(path))})"
            for lab, (path, _) in zip(labels, folders)]  # fmt: skip


def build_summary(folders: list[tuple[str, list[rundata.Run]]], published: dict):
    """(header, rows, footnotes) of the summary: one row per game; for each (path, runs) of a
    results folder a column of its test scores (with the frames a run reached where it is short
    of its budget) and one of its sticky-actions tests, then each folder's hours, and the
    published DQN, RS (1B) and GA (1B). A column is headed by its folder's label (folder_labels)."""
    labels = folder_labels(folders)
    sticky_labels = [f"{lab}, sticky {rundata.STICKY:g}" for lab in labels]
    columns = [c for pair in zip(labels, sticky_labels) for c in pair]
    header = ["Game", *columns, *(f"hours {lab[5:]}" for lab in labels)]
    header += [COLUMN_NAMES.get(m, m) for m in SUMMARY_METHODS]
    games = sorted({r.game for _, runs in folders for r in runs})
    rows, marks, short = [], "", False
    tested = {lab: [] for lab in columns}
    for game in games:
        name, pub = game.replace("_", " ").title(), published["games"].get(game, {})
        scores, hours = [], []
        for (_, runs), lab, sticky_label in zip(folders, labels, sticky_labels):
            mine = [r for r in runs if r.game == game]
            done = [r for r in mine if r.metrics]
            reached = rundata.median([r.metrics[-1].get("frames", 0) for r in done]) if done else None
            early = reached is not None and reached < rundata.median([r.frame_budget or 0 for r in done])
            for sticky, column in ((False, lab), (True, sticky_label)):
                cell, cell_marks, counted = score_cell(mine, sticky=sticky)
                if early and not sticky:
                    cell, short = cell + f" at {fmt_frames(reached)}", True
                scores.append(cell)
                marks += cell_marks
                if counted is not None:
                    tested[column].append((name, counted, pub))
            wall = [r.metrics[-1].get("wall_s", float("nan")) / 3600 for r in done]
            hours.append(f"{rundata.median(wall):.2f}" if wall else "n/a")
        rows.append([name, *scores, *hours, *(fmt_score(pub.get(m)) for m in SUMMARY_METHODS)])
    counts = [
        _above_published(mine, SUMMARY_COUNTED, lab) or f"{lab}: none yet." for lab, mine in tested.items()
    ]
    lead = "Current held-out tests above the published score (marked ones not counted)."
    footnotes = [" ".join([lead, *counts])]
    if marks:  # (one note for the marks: the summary is short)
        footnotes.append(" ".join(NOTES[m] for m in (DAGGER, SECTION, DDAGGER) if m in marks))
    everything = [r for _, runs in folders for r in runs]
    episodes = _episodes([r.test for r in everything if r.test])
    at = "; at N: the frames a run has reached, where short of its budget (still training, or stopped early)"
    footnotes.append(
        f"nevo: the elite's test mean over {episodes} test episodes (1-30 random no-ops, cap 400K frames)"
        + (at if short else "")
        + "; "
        + _sticky_note(everything, f"the sticky {rundata.STICKY:g} columns")
        + " Hours: wall-clock hours of training, the tests not included. n/a: no run, test or "
        "published number."
    )
    footnotes += [line for line in [_machines_note(everything)] if line]
    wanted = [COLUMN_NAMES.get(m, m) for m in SUMMARY_METHODS]
    sources = [f"{k}: {v}" for k, v in published["sources"].items() if any(m in k for m in SUMMARY_METHODS)]
    footnotes.append(f"Published ({', '.join(wanted)}): " + "; ".join(sources) + ".")
    return header, rows, footnotes


def markdown(header, rows, footnotes, sources: dict, notes_as_list: bool = False) -> str:
    """The table, its footnotes (paragraphs, or with notes_as_list one list) and its sources."""
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if notes_as_list and footnotes:
        lines += ["", *(f"- {note}" for note in footnotes)]
    for note in footnotes if not notes_as_list else []:
        lines += ["", note]  # a blank line between notes: Markdown would join them into one paragraph
    if sources:
        lines += ["", "Sources:", ""]
        lines += [f"- {k}: {v}" for k, v in sources.items()]
    return "\n".join(lines) + "\n"


TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
       "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
       DAGGER: r"$^\dagger$", DDAGGER: r"$^\ddagger$", SECTION: r"$^\S$"}  # fmt: skip


def _tex(s: str) -> str:
    """s with LaTeX's special characters escaped, character by character."""
    return "".join(TEX.get(c, c) for c in s)


def latex(header, rows, footnotes, sources: dict) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{cols}}}", r"\toprule"]
    lines.append(" & ".join(_tex(h) for h in header) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(_tex(c) for c in r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\par\smallskip\footnotesize"]
    lines += [_tex(f) + r"\\" for f in footnotes]
    if sources:
        lines.append(r"Sources: " + "; ".join(f"{_tex(k)}: {_tex(v)}" for k, v in sources.items()) + ".")
    lines += [r"\end{table}"]
    return "\n".join(lines) + "\n"


# The published lines of each game's panel: (published_atari.json key, label, colour, style).
LINES = (("GA_1B", "GA 1B", "C3", "-"), ("RS_1B", "RS 1B", "C7", "-"), ("DQN", "DQN 200M", "C0", "--"),
         ("ES_1h", "ES 1B", "C2", "--"), ("A3C", "A3C", "C4", ":"))  # fmt: skip


def figure(folders: list[tuple[str, list[rundata.Run]]], published: dict, prefix: str) -> list[str]:
    """One panel per game: each run's elite validation score against frames (the score/elite_mean
    of its generations) and, where the run logs it, that elite's mean on the next generation's
    validation episodes (dotted: seeds it was not picked on), its test score as a point at its last
    frame, the published scores as horizontal lines; PREFIX.png and PREFIX.pdf. folders: the
    (path, runs) of each results folder (or run folder) given; where there are two or more, each
    folder's runs are drawn in one colour and named by its label (folder_labels), against the
    published scores the summary counts (RS 1B, GA 1B)."""
    runs = [r for _, mine in folders for r in mine]
    legend = {}  # id(run) -> (colour index, label), where the runs come from named folders
    if len(folders) > 1:
        legend = {id(r): (i, lab) for i, ((_, mine), lab) in enumerate(zip(folders, folder_labels(folders)))
                  for r in mine}  # fmt: skip
    # Beside several folders, only the scores the summary counts (the goal's), so that the panels'
    # scales show where the runs stall rather than DQN's and A3C's far larger scores.
    lines = [line for line in LINES if line[0] in SUMMARY_COUNTED] if legend else LINES
    games = sorted({r.game for r in runs})
    cols = min(4, len(games))
    rows = -(-len(games) // cols)
    with style.paper():
        fig, axes = style.plt.subplots(rows, cols, figsize=(7.0, 1.75 * rows + 0.4), squeeze=False,
                                       layout="constrained")  # fmt: skip
        for ax in axes.flat[len(games) :]:
            ax.set_visible(False)
        for ax, game in zip(axes.flat, games):
            for k, run in enumerate(r for r in runs if r.game == game):
                gens, vals = run.series("score/elite_mean")
                frames = {row["generation"]: row.get("frames", 0) for row in run.metrics}
                x = np.array([frames[int(g)] for g in gens], np.float64) / 1e6
                c, name = legend.get(id(run), (k, "nevo"))
                color = style.COLORS[c % len(style.COLORS)]
                ax.plot(x, vals, color=color, lw=1.0,
                        marker="." if len(x) == 1 else None,  # (one generation: no line to draw)
                        label=f"{name} elite (validation)" if k == 0 or legend else None)  # fmt: skip
                gens, vals = run.next_validation()
                x = np.array([frames.get(int(g), np.nan) for g in gens], np.float64) / 1e6
                if x.size:
                    ax.plot(x, vals, color=color, lw=0.8, ls=":", marker="." if len(x) == 1 else None,
                            gid=rundata.PREVIOUS_ELITE)  # fmt: skip
                score, kind = rundata.final_score(run)
                if kind == "test" and run.metrics:
                    ax.plot([run.metrics[-1]["frames"] / 1e6], [score], "o", ms=3.5, mec="k",
                            color=color if legend else "k",
                            label=f"{name} test" if k == 0 or legend else None)  # fmt: skip
            pub = published["games"].get(game, {})
            for key, label, color, ls in lines:
                if pub.get(key) is not None:
                    ax.axhline(pub[key], color=color, ls=ls, lw=0.8, label=label)
            ax.set_title(game.replace("_", " ").title())
            ax.set_xlabel("frames (M)")
            ax.set_xlim(left=0)  # (a run's first generations: frames from 0, not a sliver)
        handles = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        if legend:  # each folder's pair (elite, test) in a column of its own, then the published
            handles = dict(sorted(handles.items(), key=lambda item: not item[0].startswith("nevo")))
        entries, ncol = list(handles.items()), min(4 if legend else 7, len(handles))
        if any(ln.get_gid() == rundata.PREVIOUS_ELITE for ax in axes.flat for ln in ax.get_lines()):
            dotted = style.plt.Line2D([], [], color="0.3", lw=0.8, ls=":")
            entries.append(("next validation (dotted)", dotted))
            if legend:  # columns of 3 rows: each folder's pair and a blank, then the rest
                names = dict.fromkeys(name for _, name in legend.values())
                columns = [
                    [e for e in entries if e[0] in (f"{n} elite (validation)", f"{n} test")] for n in names
                ]
                rest = [e for e in entries if not any(e in c for c in columns)]
                columns += [rest[k : k + 3] for k in range(0, len(rest), 3)]
                blank = style.plt.Line2D([], [], alpha=0)
                entries = [
                    e for c in columns for e in (c + [(" " * (k + 1), blank) for k in range(3 - len(c))])
                ]
                ncol = len(columns)
            else:
                ncol = min(8, len(entries))
        fig.legend(
            [h for _, h in entries],
            [lab for lab, _ in entries],
            loc="outside lower center",
            ncol=ncol,
        )  # (the folders' labels are long)
        paths = style.save(fig, prefix)
        style.close(fig)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo plot table", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (config.json, metrics.jsonl)")
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of Markdown")
    p.add_argument("--out", metavar="PREFIX", help="also write PREFIX.md and PREFIX.tex")
    p.add_argument(
        "--figure",
        metavar="PREFIX",
        help="also draw each game's panel: PREFIX.png, .pdf (several folders: a colour each)",
    )
    p.add_argument("--published", default=PUBLISHED, help="published scores (default: %(default)s)")
    p.add_argument(
        "--summary",
        action="store_true",
        help="the short table: one row a game, a column of test scores for each RESULTS folder given "
        "(headed by its frames), the last one's sticky-actions tests, hours, DQN, RS (1B), GA (1B)",
    )
    args = p.parse_args(argv)
    try:
        folders = [(path, rundata.load_runs([path])) for path in args.runs]
    except rundata.NotARunFolder as e:
        return style.fail(str(e))
    runs = [r for _, mine in folders for r in mine]
    published = load_published(args.published)
    if args.summary:
        header, rows, footnotes = build_summary(folders, published)
        sources = {}  # (the summary names its own, in its last note)
    else:
        header, rows, footnotes = build_rows(runs, published)
        sources = published["sources"]
    md = markdown(header, rows, footnotes, sources, notes_as_list=args.summary)
    tex = latex(header, rows, footnotes, sources)
    print(tex if args.latex else md, end="")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        for ext, text in ((".md", md), (".tex", tex)):
            with open(args.out + ext, "w") as f:
                f.write(text)
            print(args.out + ext, file=sys.stderr)
    if args.figure:
        for path in figure(folders, published, args.figure):
            print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
