"""Plain mutation against safe mutations on a deep, narrow net: several seeds each, curves and a table.

    python -m experiments.sm_compare                        # Acrobot-v1, deep net, 5 seeds x 3 operators
    python -m experiments.sm_compare --seeds 2 --frame-budget 100000 --out /tmp/sm
    python -m experiments.sm_compare --operators sm-r       # one lane; run again for the table

The demonstration of Lehman et al. 2018 (arXiv 1712.06563): a Gaussian mutation of a deep net
moves some weights' effect on the outputs by orders of magnitude more than others; scaling it by
the outputs' sensitivity (SM-G-SUM) or searching its size (SM-R) keeps children close to their
parent. Every run is the GA of run_ga at one mutation power, with the operator as the only
difference. Finished runs are reused. Writes <out>/sm_compare.md (per operator: the best
elite's validation mean, median and range over seeds; the population's mean score over the
second half of each run, low where many children are broken; agent steps until the best elite
first reaches --target; the cost of the mutations per generation) and
<out>/sm_compare.png (the best elite and the population's mean against agent steps).
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from experiments import run_ga
from nevo import runs

OPERATORS = ("gaussian", "sm-g-sum", "sm-r")


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.sm_compare", description=__doc__.split("\n")[0])
    p.add_argument("--env", default="Acrobot-v1", help="gymnasium task (default: Acrobot-v1)")
    p.add_argument("--net", default="deep", help="network (default: deep, 16 dense layers of 32)")
    p.add_argument(
        "--operators", nargs="+", default=list(OPERATORS), help=f"(default: {' '.join(OPERATORS)})"
    )
    p.add_argument("--seeds", type=int, default=5, help="seeds per operator (default: 5)")
    p.add_argument(
        "--frame-budget", type=int, default=1_000_000, help="agent steps per run (default: 1000000)"
    )
    p.add_argument("--population", type=int, default=64, help="(default: 64)")
    p.add_argument("--truncation", type=int, default=8, help="(default: 8)")
    p.add_argument("--sigma", type=float, default=0.05, help="mutation power, every operator (default: 0.05)")
    p.add_argument(
        "--target", type=float, default=-100.0, help="score whose first reach is timed (default: -100)"
    )
    p.add_argument("--runs-dir", default="runs/sm_compare", help="where the run folders go")
    p.add_argument("--out", default="docs", help="folder for the table and the figure (default: docs)")
    return p.parse_args(argv)


def one_run(op: str, seed: int, a) -> str:
    """Run one operator on one seed (or reuse a finished run); return its run folder."""
    out = os.path.join(a.runs_dir, f"{a.env}-{a.net}-{op}-{seed}")
    done = [os.path.join(out, d) for d in sorted(os.listdir(out))] if os.path.isdir(out) else []
    if done:
        argv = ["--resume", done[-1], "--frame-budget", str(a.frame_budget)]
    else:
        argv = ["--env", a.env, "--net", a.net, "--mutation", op, "--seed", str(seed)]
        argv += ["--frame-budget", str(a.frame_budget), "--population", str(a.population)]
        argv += ["--truncation", str(a.truncation), "--sigma", str(a.sigma), "--out-dir", out]
    assert run_ga.main(argv) == 0
    return done[-1] if done else os.path.join(out, os.listdir(out)[0])


def summary(op: str, folders: list[str], target: float) -> str:
    """One table row: the best validation mean's median (min..max), frames to the target, cost."""
    best, reach, cost, gen, pop = [], [], [], [], []
    for f in folders:
        m = runs.read_metrics(f)
        best.append(m[-1]["score/best_mean"])
        pop.append(np.mean([r["score/pop_mean"] for r in m[len(m) // 2 :]]))
        first = next((r["frames"] for r in m if r["score/best_mean"] >= target), None)
        reach.append(first)
        cost += [r.get("perf/mutation_s", 0.0) for r in m[1:]]
        gen += [r["perf/gen_s"] for r in m[1:]]
    got = [r for r in reach if r is not None]
    frames = f"{int(np.median(got)):,} ({len(got)} of {len(folders)})" if got else f"- (0 of {len(folders)})"
    share = 100 * np.sum(cost) / np.sum(gen) if gen else 0.0
    return (f"| {op} | {np.median(best):.1f} | {min(best):.1f} .. {max(best):.1f} | {np.median(pop):.1f} "
            f"| {frames} | {np.mean(cost) * 1000:.1f} ms ({share:.0f}%) |")  # fmt: skip


def figure(folders: dict, a, path: str) -> None:
    """Two panels against agent steps, per operator the median over seeds and the min-max band:
    the best elite's validation mean, and the population's mean score (broken children drag it
    to the task's floor)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from nevo.plots import rundata

    panels = (("score/best_mean", "Best elite (validation mean)"), ("score/pop_mean", "Population mean"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for k, (op, fs) in enumerate(folders.items()):
        color = f"C{k}"
        for ax, (key, title) in zip(axes, panels):
            xs, ys = [], []
            for f in fs:
                m = runs.read_metrics(f)
                xs.append(np.array([r["frames"] for r in m], np.float64) / 1e6)
                ys.append(np.array([r[key] for r in m], np.float64))
            band = rundata.interp_median(xs, ys)
            if band is None:
                continue
            grid, med, lo, hi = band
            ax.plot(grid, med, color=color, lw=2, label=f"{op} (median of {len(fs)})")
            ax.fill_between(grid, lo, hi, color=color, alpha=0.15, lw=0)
            ax.set_title(title)
    for ax in axes:
        ax.set_xlabel("Agent steps (millions)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Score (return per episode)")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"{a.env}, {a.net} net: the GA with plain and safe mutations, sigma {a.sigma} (band: min-max)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv=None) -> int:
    a = parse(argv)
    folders = {op: [one_run(op, s, a) for s in range(a.seeds)] for op in a.operators}
    lines = [
        f"{a.env}, net {a.net}, population {a.population}, truncation {a.truncation}, sigma {a.sigma}, "
        f"{a.frame_budget:,} agent steps per run, {a.seeds} seeds per operator.",
        "",
        f"| mutation | best elite (median) | range | population mean, 2nd half (median) "
        f"| steps to {a.target:g} (median, runs) | mutation cost per generation (share) |",
        "|---|---:|---:|---:|---:|---:|",
        *[summary(op, fs, a.target) for op, fs in folders.items()],
    ]
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "sm_compare.md"), "w") as f:
        f.write(text + "\n")
    path = os.path.join(a.out, "sm_compare.png")
    figure(folders, a, path)
    print(f"wrote {path} and {os.path.join(a.out, 'sm_compare.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
