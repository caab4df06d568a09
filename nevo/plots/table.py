"""The paper-style results table: each game's final elite test score beside published numbers.

    nevo plot table RUN_DIR [RUN_DIR ...] [--latex] [--out PREFIX] [--figure PREFIX]
    nevo plot table results/atari --out results/atari/table --figure results/atari/curves

prints a Markdown table (or LaTeX with --latex; --out writes PREFIX.md and PREFIX.tex) of the
elite's test score (the mean over the episodes of `test.json`, written by nevo replay),
beside DQN, ES, A3C, random search and the Deep GA from nevo/plots/data/published_atari.json (Such et
al. 2017, Table 1, and the papers it cites), whose sources are printed under the table. A run
without test.json shows the validation mean of its best elite (best.json, the individual that
nevo replay tests by default; the last elite where a run has no best.json), marked with
a dagger. Under the table one line counts, for each published column, the rows whose current test
score is above it (a validation mean does not count). A RUN_DIR may be a results folder (nevo
suite's): its run folders are read. The hours column is each configuration's median training time
(wall_s of its last generation; the tests of nevo replay not included). --figure draws one panel
per game: the elite's validation score against frames, its test score as a point at the run's end,
and the published DQN, ES, A3C, random search and GA (1B frames) scores as lines.
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
DAGGER, DDAGGER = "\u2020", "\u2021"


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


def build_rows(runs: list[rundata.Run], published: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """(header, rows of cells, footnotes) of the table; one row per game and configuration."""
    methods = list(next(iter(published["games"].values())).keys())
    header = ["Game", "nevo (this work)", "nevo frames", "nevo hours"]
    header += [COLUMN_NAMES.get(m, m) for m in methods]
    groups = rundata.group_runs(runs)
    labels = rundata.group_labels(groups)
    several_configs = len({g[0].game for g in groups}) < len(groups)
    rows, notes, tested = [], set(), []
    for group, label in sorted(zip(groups, labels), key=lambda gl: (gl[0][0].game, gl[1])):
        scores, marks, frames, hours = [], "", [], []
        for r in group:
            score, kind = rundata.final_score(r)
            if score is None:
                continue
            scores.append(score)
            if kind == "validation":
                marks += DAGGER if DAGGER not in marks else ""
                notes.add(DAGGER)
            elif _stale(r):
                marks += DDAGGER if DDAGGER not in marks else ""
                notes.add(DDAGGER)
            if r.metrics:
                frames.append(r.metrics[-1].get("frames"))
                hours.append(r.metrics[-1].get("wall_s", float("nan")) / 3600)
        cell = "n/a"
        if scores:
            cell = fmt_score(rundata.median(scores)) + marks
            if len(scores) > 1:
                cell += f" (median of {len(scores)})"
        game = group[0].game
        name = game.replace("_", " ").title() + (f" ({label})" if several_configs else "")
        pub = published["games"].get(game, {})
        frames_cell = fmt_frames(rundata.median(frames)) if frames else "n/a"
        hours_cell = f"{rundata.median(hours):.2f}" if hours else "n/a"
        rows.append([name, cell, frames_cell, hours_cell] + [fmt_score(pub.get(m)) for m in methods])
        if scores and not marks and len(scores) == len(group):
            tested.append((name, rundata.median(scores), pub))
    footnotes = []
    above = _above_published(tested, methods)
    if above:
        footnotes.append(above)
    if DAGGER in notes:
        footnotes.append(
            f"{DAGGER} validation mean of the best elite (best.json; the last elite where a run has "
            "none), not a test score (no test.json: run nevo replay RUN_DIR)."
        )
    if DDAGGER in notes:
        footnotes.append(
            f"{DDAGGER} test of an earlier elite: the run has gone on since test.json was written."
        )
    tests = [r.test for g in groups for r in g if r.test]
    if tests:
        eps = sorted({t.get("episodes") for t in tests})
        caps = sorted({t.get("frame_cap") for t in tests})
        footnotes.append(
            f"nevo test score: mean over {'/'.join(map(str, eps))} test episodes, "
            f"cap {'/'.join(fmt_frames(c) for c in caps)} frames, 1-30 random no-ops."
        )
    footnotes.append("n/a: no published number. Published protocol: " + published.get("protocol", ""))
    return header, rows, footnotes


def _above_published(tested: list, methods: list) -> str:
    """One line: for each published column, how many rows with a current test score beat it,
    and which; a row showing a validation mean or a test of an older elite does not count."""
    parts = []
    for m in methods:
        rows = [(name, score, float(pub[m])) for name, score, pub in tested if pub.get(m) is not None]
        if rows:
            won = [name for name, score, published in rows if score > published]
            parts.append(f"{COLUMN_NAMES.get(m, m)} {len(won)} of {len(rows)}"
                         + (f" ({', '.join(won)})" if won else ""))  # fmt: skip
    return "Tested rows above the published score: " + "; ".join(parts) + "." if parts else ""


def _stale(run: rundata.Run) -> bool:
    """True if test.json tested an elite older than the run's current one (its best elite, or
    its last one, whichever file the test was of)."""
    tested = rundata.tested_elite(run)
    if tested is None:
        return False
    return run.test.get("elite_generation") != tested.get("generation")


def markdown(header, rows, footnotes, sources: dict) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    for note in footnotes:  # a blank line between notes: Markdown would join them into one paragraph
        lines += ["", note]
    lines += ["", "Sources:", ""]
    lines += [f"- {k}: {v}" for k, v in sources.items()]
    return "\n".join(lines) + "\n"


TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
       "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
       DAGGER: r"$^\dagger$", DDAGGER: r"$^\ddagger$"}  # fmt: skip


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
    lines.append(r"Sources: " + "; ".join(f"{_tex(k)}: {_tex(v)}" for k, v in sources.items()) + ".")
    lines += [r"\end{table}"]
    return "\n".join(lines) + "\n"


# The published lines of each game's panel: (published_atari.json key, label, colour, style).
LINES = (("GA_1B", "GA 1B", "C3", "-"), ("RS_1B", "RS 1B", "C7", "-"), ("DQN", "DQN 200M", "C0", "--"),
         ("ES_1h", "ES 1B", "C2", "--"), ("A3C", "A3C", "C4", ":"))  # fmt: skip


def figure(runs: list[rundata.Run], published: dict, prefix: str) -> list[str]:
    """One panel per game: each run's elite validation score against frames (the score/elite_mean
    of its generations), its test score as a point at its last frame, the published scores as
    horizontal lines; PREFIX.png and PREFIX.pdf."""
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
                ax.plot(x, vals, color=style.COLORS[k % len(style.COLORS)], lw=1.0,
                        marker="." if len(x) == 1 else None,  # (one generation: no line to draw)
                        label="nevo elite (validation)" if k == 0 else None)  # fmt: skip
                score, kind = rundata.final_score(run)
                if kind == "test" and run.metrics:
                    ax.plot([run.metrics[-1]["frames"] / 1e6], [score], "o", ms=3.5, color="k",
                            label="nevo test" if k == 0 else None)  # fmt: skip
            pub = published["games"].get(game, {})
            for key, label, color, ls in LINES:
                if pub.get(key) is not None:
                    ax.axhline(pub[key], color=color, ls=ls, lw=0.8, label=label)
            ax.set_title(game.replace("_", " ").title())
            ax.set_xlabel("frames (M)")
            ax.set_xlim(left=0)  # (a run's first generations: frames from 0, not a sliver)
        handles = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
        fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncol=min(7, len(handles)))
        paths = style.save(fig, prefix)
        style.close(fig)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo plot table", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (config.json, metrics.jsonl)")
    p.add_argument("--latex", action="store_true", help="print LaTeX instead of Markdown")
    p.add_argument("--out", metavar="PREFIX", help="also write PREFIX.md and PREFIX.tex")
    p.add_argument("--figure", metavar="PREFIX", help="also draw each game's panel: PREFIX.png, .pdf")
    p.add_argument("--published", default=PUBLISHED, help="published scores (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        runs = rundata.load_runs(args.runs)
    except rundata.NotARunFolder as e:
        return style.fail(str(e))
    published = load_published(args.published)
    header, rows, footnotes = build_rows(runs, published)
    md = markdown(header, rows, footnotes, published["sources"])
    tex = latex(header, rows, footnotes, published["sources"])
    print(tex if args.latex else md, end="")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        for ext, text in ((".md", md), (".tex", tex)):
            with open(args.out + ext, "w") as f:
                f.write(text)
            print(args.out + ext, file=sys.stderr)
    if args.figure:
        for path in figure(runs, published, args.figure):
            print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
