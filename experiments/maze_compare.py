"""GA against GA-NS on the deceptive maze, several seeds at one frame budget: a table and a figure.

    python -m experiments.maze_compare                       # 5 seeds each, 1.5M steps per run
    python -m experiments.maze_compare --seeds 3 --frame-budget 100000 --out /tmp/maze
    python -m experiments.maze_compare --algos GA-NS &  python -m experiments.maze_compare --algos GA
                                                             # two lanes at once, then the table:
    python -m experiments.maze_compare                       # (reuses the finished runs)

As in Such et al. 2017 (Image Hard Maze): the GA, maximising -distance to the goal, is drawn into
the dead end under the goal; GA-NS, selecting on novelty alone, explores the maze and finds the
way round. Prints a Markdown table (per seed: best final distance, whether the goal was reached)
and writes <out>/maze_compare.md and <out>/maze_final_positions.png (the final positions of each
algorithm's last generation over every seed, on the maze, in the paper's style).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from experiments import run_ga, run_ns
from nevo import runs
from nevo.nets import half
from nevo.tasks import maze

ALGOS = {"GA": run_ga, "GA-NS": run_ns}


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.maze_compare", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=5, help="seeds per algorithm (default: 5)")
    p.add_argument(
        "--frame-budget", type=int, default=1_500_000, help="agent steps per run (default: 1500000)"
    )
    p.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS), help="(default: both)")
    p.add_argument("--population", type=int, default=64, help="individuals per generation (default: 64)")
    p.add_argument("--truncation", type=int, default=10, help="parents per generation, both (default: 10)")
    p.add_argument("--sigma", type=float, default=0.02, help="mutation power, both (default: 0.02)")
    p.add_argument("--archive-prob", type=float, default=0.1, help="GA-NS archive probability (default: 0.1)")
    p.add_argument(
        "--weights",
        default="fp32",
        choices=half.CHOICES,
        help="the weight rows' format (default: fp32, as docs/maze_compare.md's runs read them)",
    )
    p.add_argument("--runs-dir", default="runs/maze_compare", help="where the run folders go")
    p.add_argument("--out", default="docs", help="folder for the table and the figure (default: docs)")
    return p.parse_args(argv)


def past_the_dead_end(xy: np.ndarray) -> np.ndarray:
    """(N,) bool: final positions (N, 2) in pixels on the true route beyond the dead-end room:
    in the east corridor (east of wall B) or the top corridor (above the shelf, wall A)."""
    shelf_top, east_face = maze.WALLS[4, 1], maze.WALLS[5, 2]
    return (xy[:, 0] > east_face) | (xy[:, 1] < shelf_top)


def one_run(name: str, seed: int, a) -> str:
    """Run one algorithm on one seed (or reuse a finished run); return its run folder."""
    out = os.path.join(a.runs_dir, f"{name}-{seed}" + ("" if a.weights == "fp32" else f"-{a.weights}"))
    done = [os.path.join(out, d) for d in sorted(os.listdir(out))] if os.path.isdir(out) else []
    argv = ["--env", "maze", "--seed", str(seed), "--frame-budget", str(a.frame_budget)]
    argv += ["--population", str(a.population), "--truncation", str(a.truncation), "--sigma", str(a.sigma)]
    argv += ["--weights", a.weights, "--out-dir", out]
    if done:
        argv = ["--resume", done[-1], "--frame-budget", str(a.frame_budget)]
    elif name == "GA-NS":
        argv += ["--algo", "ga-ns", "--archive-prob", str(a.archive_prob)]
    assert ALGOS[name].main(argv) == 0
    return done[-1] if done else os.path.join(out, os.listdir(out)[0])


def main(argv=None) -> int:
    a = parse(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, finals = [], {}
    for name in a.algos:
        for seed in range(a.seeds):
            folder = one_run(name, seed, a)
            metrics = runs.read_metrics(folder)
            best = max(m["score/pop_max"] for m in metrics)
            reached = best >= -maze.GOAL_RADIUS
            first = next((m["frames"] for m in metrics if m["score/pop_max"] >= -maze.GOAL_RADIUS), None)
            last = runs.read_array(os.path.join(folder, runs.BEHAVIOURS))  # (N, 2) final (x, y) in [0, 1]
            past = int(past_the_dead_end(last * maze.SIZE).sum())
            rows.append((name, seed, abs(best), reached, first, past))  # best <= 0: abs, not -0.0
            finals.setdefault(name, []).append(last)
    lines = [
        f"Maze, population {a.population}, truncation {a.truncation}, sigma {a.sigma}, "
        f"{a.frame_budget:,} agent steps per run, small net; GA-NS archive probability {a.archive_prob}.",
        "",
        "| algorithm | seed | best final distance | reached the goal | steps to the goal "
        "| last generation past the dead end |",
        "|---|---:|---:|---|---:|---:|",
    ]
    for name, seed, dist, reached, first, past in rows:
        steps = f"{first:,}" if first else "-"
        cells = f"{dist:.1f} | {'yes' if reached else 'no'} | {steps} | {past} of {a.population}"
        lines.append(f"| {name} | {seed} | {cells} |")
    lines.append("")
    for name in a.algos:
        n = sum(r[3] for r in rows if r[0] == name)
        lines.append(f"{name}: goal reached in {n} of {a.seeds} seeds.")
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "maze_compare.md"), "w") as f:
        f.write(text + "\n")
    fig, axes = plt.subplots(1, len(a.algos), figsize=(4.2 * len(a.algos), 4.4), squeeze=False)
    for ax, name in zip(axes[0], a.algos):
        maze.plot_positions(ax, np.concatenate(finals[name]), normalised=True, size=6)
        ax.set_title(f"{name}: final positions, last generation\n({a.seeds} seeds x {a.population})")
    fig.tight_layout()
    path = os.path.join(a.out, "maze_final_positions.png")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    print(f"wrote {path} and {os.path.join(a.out, 'maze_compare.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
