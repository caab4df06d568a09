"""ES against NSR-ES in the deceptive Humanoid trap: final positions on the walls, and a table.

    python -m experiments.trap_compare                           # 2 seeds each, 3M steps per run
    python -m experiments.trap_compare --seeds 1 --frame-budget 200000 --out /tmp/trap
    python -m experiments.trap_compare --algos ES & python -m experiments.trap_compare --algos NSR-ES
                                                                 # two lanes at once, then the figure:
    python -m experiments.trap_compare                           # (reuses the finished runs)

Conti et al. 2018 (arXiv 1712.06560): Humanoid-v5's reward pays for walking forward, and forward
lies a U-shaped wall (nevo.tasks.trap), so ES, following the reward's gradient, walks into the cup and
stays there, while NSR-ES, ranking perturbations by novelty of their final (x, y) as well as by
reward, spreads out and can find the way around. Every run uses run_es's and run_ns's defaults for
MuJoCo (the 2 x 64 tanh policy, observation normalisation, 40 perturbations a generation, sigma
0.02, Adam 0.01); NSR-ES adds a meta-population of --meta-population agents.

Prints a Markdown table (per run: best training return, the final positions' mean x, how many of
the last generation ended inside the cup or beyond its walls) and writes <out>/trap_compare.md
and <out>/trap_final_positions.png (.pdf): the last generation's final (x, y) of every seed, per
algorithm, on the walls, in the style of Conti et al.'s figure (NSR-ES's panel also shows its
novelty archive: where its agents ended, generation after generation).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from experiments import run_es, run_ns
from nevo import runs
from nevo.tasks import trap

ALGOS = {"ES": (run_es, []), "NSR-ES": (run_ns, ["--algo", "nsr-es"])}
COLOURS = {"ES": "tab:blue", "NSR-ES": "tab:orange"}


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.trap_compare", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=2, help="seeds per algorithm (default: 2)")
    p.add_argument("--frame-budget", type=int, default=3_000_000, help="steps per run (default: 3000000)")
    p.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS), help="(default: both)")
    p.add_argument("--meta-population", type=int, default=3, help="NSR-ES agents (default: 3)")
    p.add_argument("--threads", type=int, default=0, help="env threads per run; 0 = chosen by timing")
    p.add_argument("--runs-dir", default="runs/trap_compare", help="where the run folders go")
    p.add_argument("--out", default="docs", help="folder for the table and the figure (default: docs)")
    return p.parse_args(argv)


def beyond_the_walls(xy: np.ndarray) -> np.ndarray:
    """(N,) bool: final positions past the cup's front wall, or level with the cup and outside
    its side walls: forward progress that the cup did not stop (by going round it, or by
    heading off diagonally before reaching it)."""
    x, y = xy[:, 0], xy[:, 1]
    return (x > 5.6) | ((x > 2.5) & (np.abs(y) > 1.6))


def one_run(name: str, seed: int, a) -> str:
    """Run one algorithm on one seed (or resume, or reuse, a run); return its run folder."""
    out = os.path.join(a.runs_dir, f"{name}-{seed}")
    done = [os.path.join(out, d) for d in sorted(os.listdir(out))] if os.path.isdir(out) else []
    main, extra = ALGOS[name]
    argv = ["--env", trap.ENV_ID, "--seed", str(seed), "--frame-budget", str(a.frame_budget)]
    argv += ["--threads", str(a.threads), "--out-dir", out, *extra]
    if name == "NSR-ES":
        argv += ["--meta-population", str(a.meta_population)]
    if done:
        argv = ["--resume", done[-1], "--frame-budget", str(a.frame_budget), "--threads", str(a.threads)]
    assert main.main(argv) == 0, f"{name} seed {seed} failed"
    return done[-1] if done else os.path.join(out, os.listdir(out)[0])


def main(argv=None) -> int:
    a = parse(argv)
    from nevo.plots import style

    rows, finals, archives = [], {}, []
    for name in a.algos:
        for seed in range(a.seeds):
            folder = one_run(name, seed, a)
            metrics = runs.read_metrics(folder)
            best = max(m["score/pop_max"] for m in metrics)
            xy = runs.read_array(os.path.join(folder, runs.BEHAVIOURS))  # (N, 2) the last generation's
            rows.append((name, seed, best, float(xy[:, 0].mean()), int(trap.in_cup(xy).sum()),
                         int(beyond_the_walls(xy).sum()), len(xy), metrics[-1]["frames"]))  # fmt: skip
            finals.setdefault(name, []).append(xy)
            if name == "NSR-ES":  # every generation's updated agent's final (x, y), from the checkpoint
                archives.append(runs.load_checkpoint(folder, say=lambda *_: None)["archive/archive"])
    lines = [
        f"{trap.ENV_ID}, {a.frame_budget:,} steps per run, run_es/run_ns MuJoCo defaults (2 x 64 tanh, "
        f"observation normalisation, 40 perturbations, sigma 0.02); NSR-ES: {a.meta_population} agents.",
        "",
        "| algorithm | seed | steps | best training return | mean final x | in the cup | beyond the walls |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, seed, best, mean_x, cup, beyond, n, steps in rows:
        lines.append(
            f"| {name} | {seed} | {steps:,} | {best:.0f} | {mean_x:.2f} | {cup} of {n} | {beyond} of {n} |"
        )
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "trap_compare.md"), "w") as f:
        f.write(text + "\n")
    with style.paper():
        fig, axes = style.figure(len(a.algos), width=3.4 * len(a.algos), height=3.2)
        for ax, name in zip(axes, a.algos):
            xy = np.concatenate(finals[name])
            trap.plot_walls(ax)
            if name == "NSR-ES" and archives:
                arc = np.concatenate(archives)
                ax.scatter(arc[:, 0], arc[:, 1], s=3, color="0.7", label="novelty archive (whole run)")
            ax.scatter(xy[:, 0], xy[:, 1], s=6, color=COLOURS[name], alpha=0.6, label="final (x, y)")
            ax.scatter([0], [0], marker="x", color="k", s=25, label="start")
            ax.set_xlim(-2, 8)
            ax.set_ylim(-4, 4)
            ax.set_aspect("equal")
            ax.set_xlabel("x (m)")
            ax.set_ylabel("y (m)")
            ax.set_title(f"{name}: last generation, {a.seeds} seed{'s' if a.seeds > 1 else ''}")
            ax.legend(loc="lower left")
        paths = style.save(fig, os.path.join(a.out, "trap_final_positions"))
        style.close(fig)
    print(f"wrote {', '.join(paths)} and {os.path.join(a.out, 'trap_compare.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
