"""Throughput over a run: game frames per second against wall-clock hours, the straggler tail and
the forward pass's share.

    nevo plot throughput RUN_DIR [RUN_DIR ...] [--out PREFIX]

writes PREFIX.png and PREFIX.pdf: `perf/frames_per_s` of each generation (all game frames the
generation emulated, training and validation, over its wall time) and, where the metrics hold it,
`perf/tail_fraction` (the share of a generation's time spent waiting on its last episodes) and
`perf/forward_fraction` (the share spent choosing actions: near 1, the net is the limit; low, the
emulators are) and `perf/cores_busy` (the process's CPU time over the wall time and the machine's
cores: near 1, every core was working, so a long tail cost nothing; low, cores idled).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from nevo.plots import rundata, style
from nevo.plots.curves import load_or_fail

TAIL = "perf/tail_fraction"
FORWARD = "perf/forward_fraction"
BUSY = "perf/cores_busy"


def plot_throughput(runs: list[rundata.Run]):
    """The Figure: frames/s against hours, plus tail, forward and cores-busy panels where runs
    have them."""
    groups = rundata.group_runs(runs)
    labels = rundata.group_labels(groups)
    keys = [("perf/frames_per_s", "Throughput", "Game frames per second (thousands)", 1e-3)]
    if any(r.has(TAIL) for r in runs):
        keys.append((TAIL, "Straggler tail", "Fraction of generation time in the tail", 1.0))
    if any(r.has(FORWARD) for r in runs):
        keys.append((FORWARD, "Forward pass", "Fraction of generation time in the net", 1.0))
    if any(r.has(BUSY) for r in runs):
        keys.append((BUSY, "Cores busy", "Fraction of the machine's cores working", 1.0))
    with style.paper():
        fig, axes = style.figure(len(keys), width=3.5 * len(keys), height=2.7)
        for ax, (key, title, ylabel, scale) in zip(axes, keys):
            for i, (group, label) in enumerate(zip(groups, labels)):
                for j, r in enumerate(group):
                    hours, y = r.column("wall_s") / 3600.0, r.column(key) * scale
                    ok = np.isfinite(hours) & np.isfinite(y)
                    name = label if len(group) == 1 else f"{label}, seed {r.seed}"
                    ax.plot(hours[ok], y[ok], color=style.COLORS[i % len(style.COLORS)],
                            alpha=1.0 if j == 0 else 0.6, marker="o", markersize=2, label=name)  # fmt: skip
            ax.set_title(title)
            ax.set_xlabel("Wall-clock time (hours)")
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
        axes[0].legend(loc="best")
    return fig


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo plot throughput", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (config.json, metrics.jsonl)")
    p.add_argument(
        "--out", default="throughput", metavar="PREFIX", help="output prefix (default: throughput)"
    )
    args = p.parse_args(argv)
    try:
        runs = load_or_fail(args.runs)
    except rundata.NotARunFolder as e:
        return style.fail(str(e))
    fig = plot_throughput(runs)
    for path in style.save(fig, args.out):
        print(path)
    style.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
