"""Learning curves: score against frames (game frames on Atari), generations and wall-clock hours.

    nevo plot curves RUN_DIR [RUN_DIR ...] [--out PREFIX]

writes PREFIX_frames, PREFIX_generations and PREFIX_hours (.png and .pdf), each with three panels:
the population's best and mean single-episode score of each generation, and the elite's
validation mean; a GA run that logs it adds a fourth, each elite's mean on the next generation's
validation episodes (on Atari and gymnasium, seeds it was not picked on: no winner's curse), and
a run with tests of single generations' elites (`nevo replay RUN_DIR --elite G`: test.gG.json)
one more, their held-out test means at those generations. One
line per run; runs of one configuration with different seeds also get their median with a min-max
band (as Such et al. 2017 report medians over runs).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from nevo.plots import rundata, style

PANELS = (
    ("score/pop_max", "Population best"),
    ("score/pop_mean", "Population mean"),
    ("score/elite_mean", "Elite (validation mean)"),
)
# x axis name -> (label with unit, function of a run giving (generations,) x values); the labels of
# frames and generations say what the runs count (x_label)
X_AXES = {
    "frames": ("{frames} (millions)", lambda r: r.column("frames") / 1e6),
    "generations": ("{generation}", lambda r: r.column("generation")),
    "hours": ("Wall-clock time (hours)", lambda r: r.column("wall_s") / 3600.0),
}
Y_LABEL = "Score (points per episode)"
NEXT = (rundata.PREVIOUS_ELITE, rundata.NEXT_VALIDATION)  # GA runs: drawn at the elite's generation
TESTS = (rundata.TEST_CURVE, rundata.HELD_OUT_TEST)  # nevo replay --elite G's tests (test.gG.json)
# A supervised run (a labelled data set: score = minus the mean cross-entropy) adds its test accuracy.
ACCURACY = ("score/test_accuracy", "Test accuracy")


def x_label(runs: list[rundata.Run], x: str) -> str:
    """The x axis's label: what the runs' frames or generations count (Run.counts: "Game frames
    (millions)" on Atari, "Examples (millions)" and "Iteration" for SGD on a data set), or the
    plain word where the runs differ."""
    said = {}
    for what in ("frames", "generation"):
        words = {r.counts[what] for r in runs}
        said[what] = (words.pop() if len(words) == 1 else what).capitalize()
    return X_AXES[x][0].format(**said)


def _xy(run, x: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    """x and y of one metric, rows where either is missing dropped, sorted by x (the elite on the
    next validation at its own generation's x)."""
    xs, ys = X_AXES[x][1](run), run.column(key)
    if key in (rundata.PREVIOUS_ELITE, rundata.TEST_CURVE):
        at = dict(zip(run.column("generation"), xs))
        gens, ys = run.next_validation() if key == rundata.PREVIOUS_ELITE else run.test_curve()
        xs = np.array([at.get(g, np.nan) for g in gens], np.float64)
    ok = np.isfinite(xs) & np.isfinite(ys)
    order = np.argsort(xs[ok], kind="stable")
    return xs[ok][order], ys[ok][order]


def draw_groups(ax, groups, labels, x: str, key: str) -> None:
    """One line per run; for a group of several seeds, thin seed lines plus median and band."""
    for i, (group, label) in enumerate(zip(groups, labels)):
        color = style.COLORS[i % len(style.COLORS)]
        curves = [c for c in (_xy(r, x, key) for r in group) if c[0].size]
        if not curves:
            continue
        few = max(c[0].size for c in curves) <= 40  # markers help only when points are sparse
        if len(curves) == 1:
            ax.plot(*curves[0], color=color, marker="o" if few else None, markersize=2.5, label=label)
            continue
        for j, (cx, cy) in enumerate(curves):
            ax.plot(cx, cy, color=color, alpha=0.35, linewidth=0.7,
                    label=f"{label}: each seed (n={len(curves)})" if j == 0 else None)  # fmt: skip
        med = rundata.interp_median([c[0] for c in curves], [c[1] for c in curves])
        if med is not None:
            grid, mid, lo, hi = med
            ax.fill_between(grid, lo, hi, color=color, alpha=0.18, linewidth=0,
                            label=f"{label}: min-max of {len(curves)} seeds")  # fmt: skip
            ax.plot(grid, mid, color=color, linewidth=1.8, label=f"{label}: median of {len(curves)} seeds")


def plot_curves(runs: list[rundata.Run], x: str = "frames"):
    """The Figure of the score panels (three, and the elite on the next validation and the test
    accuracy where runs log them) against one x axis ("frames", "generations", "hours")."""
    groups = rundata.group_runs(runs)
    labels = rundata.group_labels(groups)
    panels = PANELS + tuple(p for p in (NEXT, TESTS, ACCURACY) if any(r.has(p[0]) for r in runs))
    with style.paper():
        fig, axes = style.figure(len(panels), height=2.7)
        for ax, (key, title) in zip(axes, panels):
            draw_groups(ax, groups, labels, x, key)
            ax.set_title(title)
            ax.set_xlabel(x_label(runs, x))
            ax.set_ylabel("Accuracy" if key == ACCURACY[0] else Y_LABEL)
        # the legend on the panel that names the most (a panel where seeds share too little of
        # the x axis has no median); of equal ones the last
        named = [len(ax.get_legend_handles_labels()[1]) for ax in axes]
        axes[max(range(len(axes)), key=lambda i: (named[i], i))].legend(loc="best")
        games = sorted({r.game for r in runs})
        fig.suptitle(
            ", ".join(g if "-" in g else g.replace("_", " ").title() for g in games)
        )  # ids as they are
    return fig


def load_or_fail(paths: list[str]) -> list[rundata.Run]:
    """The runs with at least one finished generation; NotARunFolder if there are none."""
    runs = rundata.load_runs(paths)
    empty = [r for r in runs if not r.metrics]
    for r in empty:
        print(f"note: {r.path} has no finished generation yet; left out", file=sys.stderr)
    runs = [r for r in runs if r.metrics]
    if not runs:
        raise rundata.NotARunFolder("no finished generation in any of the run folders")
    return runs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo plot curves", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (config.json, metrics.jsonl)")
    p.add_argument("--out", default="curves", metavar="PREFIX", help="output prefix (default: curves)")
    args = p.parse_args(argv)
    try:
        runs = load_or_fail(args.runs)
    except rundata.NotARunFolder as e:
        return style.fail(str(e))
    for x in X_AXES:
        fig = plot_curves(runs, x)
        for path in style.save(fig, f"{args.out}_{x}"):
            print(path)
        style.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
