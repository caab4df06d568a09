"""Where each Atari run's elite stops climbing: its validation level at frame marks, the frames of
its last rise, and its test against the deep GA's published 1B-frame score.

    python -m experiments.plateaus results/atari100m

For each run folder (sorted by game), one row: the frames it reached; at each mark (25M, 50M,
75M and 100M game frames by default, --marks), the median of its elite's validation means over
the generations of the 10M frames up to that mark (--window), a level that one lucky validation
does not move, where the best validation so far (score/best_mean, the highest of many noisy
means) does; the frames at which that best validation last rose, and how much the level rose
over the run's last half; the held-out test (test.json) and the GA's 1B score of Such et al. 2017
(Table 1, nevo/plots/data/published_atari.json) with the test's share of it (where that score is
positive: not Skiing's). A mark past a run's frames is n/a. numpy only; reads run folders, plays nothing.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from nevo.plots import rundata, table

MARKS = (25e6, 50e6, 75e6, 100e6)
WINDOW = 10e6


def level(run: rundata.Run, at: float, window: float = WINDOW) -> float | None:
    """The median of the elite's validation means over the generations whose frames lie in
    (at - window, at]; None where the run has not reached `at` (or logged nothing there)."""
    frames, means = run.column("frames"), run.column("score/elite_mean")
    if not frames.size or frames.max() < at - 1:  # (a mark reached to the frame counts)
        return None
    if frames[-1] < at:  # the run ended within the window's last generation of the mark
        at = frames[-1]
    inside = (frames > at - window) & (frames <= at) & np.isfinite(means)
    return float(np.median(means[inside])) if inside.any() else None


def last_rise(run: rundata.Run) -> float | None:
    """The frames of the generation where the best validation so far (score/best_mean) last rose."""
    frames, best = run.column("frames"), run.column("score/best_mean")
    ok = np.isfinite(best)
    if not ok.any():
        return None
    frames, best = frames[ok], best[ok]
    rose = np.flatnonzero(np.diff(best) > 0)
    return float(frames[rose[-1] + 1] if rose.size else frames[0])


def row(run: rundata.Run, published: dict, marks=MARKS, window: float = WINDOW) -> dict:
    """One run's numbers (the module's docstring)."""
    frames = run.column("frames")
    end = float(frames[-1]) if frames.size else 0.0
    half = level(run, end / 2, window) if end else None
    last = level(run, end, window) if end else None
    test = run.test.get("mean") if run.test and not run.test.get("sticky") else None
    ga = published.get(run.game, {}).get("GA_1B")
    return {
        "game": run.game,
        "frames": end,
        "levels": [level(run, m, window) for m in marks],
        "last_rise": last_rise(run),
        "second_half": None if half is None or last is None else last - half,
        "test": test,
        "ga": ga,
        "share": None if test is None or not ga or ga <= 0 else test / ga,  # (Skiing's are negative)
    }


def _fmt(v, spec=",.1f") -> str:
    return "n/a" if v is None else format(v, spec)


def _frames(v) -> str:
    return "n/a" if v is None else f"{v / 1e6:.1f}M"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="+", help="run folders, or folders of run folders")
    p.add_argument("--marks", default="25,50,75,100", help="frame marks in millions (default: 25,50,75,100)")
    p.add_argument("--window", type=float, default=10.0, help="the level's window in millions of frames (10)")
    args = p.parse_args(argv)
    try:
        marks = [float(m) * 1e6 for m in args.marks.split(",")]
    except ValueError:
        print(f"plateaus: --marks: got {args.marks}, allowed: numbers separated by commas", file=sys.stderr)
        return 2
    if not marks or min(marks) <= 0 or args.window <= 0:
        print("plateaus: --marks and --window: allowed: numbers > 0", file=sys.stderr)
        return 2
    try:
        runs = [r for r in rundata.load_runs(args.paths) if r.metrics]
    except rundata.NotARunFolder as e:
        print(f"plateaus: {e}", file=sys.stderr)
        return 1
    if not runs:
        print("plateaus: no finished generation in " + ", ".join(args.paths), file=sys.stderr)
        return 1
    published = table.load_published()["games"]
    heads = [f"level at {m / 1e6:g}M" for m in marks]
    print("| Game | frames | " + " | ".join(heads) + " | best validation last rose at | level, last half | "
          "test | GA (1B) | test / GA |")  # fmt: skip
    print("| --- | ---: | " + " | ".join("---:" for _ in heads) + " | ---: | ---: | ---: | ---: | ---: |")
    for run in sorted(runs, key=lambda r: (r.game, r.path)):
        r = row(run, published, marks, args.window * 1e6)
        share = "n/a" if r["share"] is None else f"{100 * r['share']:.0f}%"
        cells = [r["game"].replace("_", " ").title(), _frames(r["frames"]), *map(_fmt, r["levels"]),
                 _frames(r["last_rise"]), _fmt(r["second_half"], "+,.1f"), _fmt(r["test"]),
                 _fmt(r["ga"], ",.0f"), share]  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
