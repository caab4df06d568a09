"""MuJoCo learning speed: nevo's runs against OpenAI-ES's published timesteps, and their curves.

    nevo plot mujoco RUN_DIR [RUN_DIR ...] [--out PREFIX]

Salimans et al. 2017 (supplement, Table 3) give, for each MuJoCo task, the score TRPO reached at
25/50/75/100% of its learning progress at 5M timesteps, and how many timesteps TRPO and ES needed
to reach each (nevo/plots/data/published_mujoco.json). This prints the same table for each run: the
steps and wall-clock minutes at which its validation score (score/elite_mean: ES's theta, the
GA's elite) first reached each level, beside the published steps. It writes PREFIX.png (.pdf):
the validation score against steps and against minutes, one row of two panels per task, the
levels drawn as dotted lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from nevo.plots import rundata, style
from nevo.plots.curves import load_or_fail

PUBLISHED = os.path.join(os.path.dirname(__file__), "data", "published_mujoco.json")
KEY = "score/elite_mean"


def published() -> dict:
    with open(PUBLISHED) as f:
        return json.load(f)


def task_of(run) -> str | None:
    """The published table's task name of a run (HalfCheetah-v5 -> HalfCheetah), or None."""
    base = run.game.split("-v")[0]
    return base if base in published()["tasks"] else None


def first_reached(run, level: float) -> tuple[float | None, float | None]:
    """(steps, minutes) when the run's validation score first reached level, or (None, None)."""
    scores, frames, wall = run.column(KEY), run.column("frames"), run.column("wall_s")
    hit = np.flatnonzero(np.isfinite(scores) & (scores >= level))
    if hit.size == 0:
        return None, None
    return float(frames[hit[0]]), float(wall[hit[0]]) / 60.0


def table(runs) -> str:
    pub = published()
    lines = [
        "| run | task | level (share of TRPO's progress) | TRPO steps | ES steps (published) | "
        "this run: steps | this run: minutes |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for run in runs:
        task = task_of(run)
        if task is None:
            continue
        t = pub["tasks"][task]
        for frac, level, trpo, es in zip(pub["fractions"], t["level"], t["trpo_steps"], t["es_steps"]):
            steps, minutes = first_reached(run, level)
            mine = f"{steps / 1e6:.2f}M | {minutes:.1f}" if steps is not None else "not reached | -"
            lines.append(f"| {run.name} | {task} | {level:.0f} ({frac:.0%}) | {trpo / 1e6:.2f}M | "
                         f"{es / 1e6:.2f}M | {mine} |")  # fmt: skip
        best = np.nanmax(run.column(KEY))
        frames, wall = run.column("frames")[-1], run.column("wall_s")[-1] / 60
        lines.append(f"| {run.name} | {task} | best: {best:.0f} | | | {frames / 1e6:.2f}M | {wall:.1f} |")
    return "\n".join(lines)


def figure(runs, prefix: str) -> list[str]:
    pub = published()
    tasks = sorted({task_of(r) for r in runs if task_of(r)})
    with style.paper():
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(len(tasks), 2, figsize=(7.0, 2.6 * len(tasks)), squeeze=False,
                                 layout="constrained")  # fmt: skip
        for i, task in enumerate(tasks):
            by_steps, by_minutes = axes[i]
            for j, run in enumerate(r for r in runs if task_of(r) == task):
                score = run.column(KEY)
                colour = style.COLORS[j % len(style.COLORS)]
                bins = ", binned actions" if run.config.get("net", {}).get("actions") == "bins" else ""
                label = f"{run.config.get('algo', '?').upper()}{bins} seed {run.seed}"
                by_steps.plot(run.column("frames") / 1e6, score, color=colour, label=label)
                by_minutes.plot(run.column("wall_s") / 60, score, color=colour, label=label)
            for ax, x in ((by_steps, "Steps (millions)"), (by_minutes, "Wall-clock minutes")):
                for frac, level in zip(pub["fractions"], pub["tasks"][task]["level"]):
                    ax.axhline(level, color="0.5", lw=0.7, ls=":")
                    ax.text(
                        ax.get_xlim()[1], level, f" TRPO {frac:.0%}", fontsize=6, va="center", color="0.4"
                    )
                ax.set_xlabel(x)
                ax.set_ylabel("Validation return")
                ax.set_title(task)
            by_steps.legend(loc="lower right")
        paths = style.save(fig, prefix)
        style.close(fig)
    return paths


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo plot mujoco", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders of MuJoCo tasks")
    p.add_argument("--out", default="mujoco", metavar="PREFIX", help="output prefix (default: mujoco)")
    a = p.parse_args(argv)
    try:
        runs = load_or_fail(a.runs)  # runs without a finished generation are left out, saying so
    except rundata.NotARunFolder as e:
        return style.fail(str(e))
    known = [r for r in runs if task_of(r)]
    if not known:
        names = ", ".join(published()["tasks"])
        return style.fail(f"none of the runs is of a task with published numbers ({names})")
    print(table(known))
    print(f"wrote {', '.join(figure(known, a.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
