"""fp32 against 16-bit weight rows (--weights fp16): the same runs in both formats, curves and a table.

    python -m experiments.weights_compare                      # both tasks, every seed: ~3 h on 2 cores
    python -m experiments.weights_compare --tasks frostbite --seeds 1
    python -m experiments.weights_compare --table-only         # the page from the runs there are
    python -m experiments.weights_compare --resolution         # the rounding against sigma, per layer

The runs: the GA's quick preset on Frostbite (run_ga --preset quick, 3 seeds) and OpenAI-ES on
HalfCheetah-v5 (run_es's defaults, 2 seeds), each in fp32 and in fp16, every other setting equal.
With fp16 every row is built in float32 from its genome, as with fp32, and rounded once to half
precision before the forward reads it (nevo/nets/half.py), so a pair of runs differs only in what
the forward computes with. Finished runs are reused, unfinished ones resumed; --table-only writes
the page from the finished runs alone. Writes <runs-dir>/weights16_table.md (per task and format: each
seed's final and best elite, and the medians) and <out>/weights16.png (the best elite against
frames, each seed a line, per task). Speed is measured apart (bracketed runs on a quiet machine:
docs/lab/2026-11-26.md), since these runs may share the machine.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from experiments import run_es, run_ga
from nevo import runs

TASKS = {  # name: (main, its arguments, seeds by default, the curve's x label)
    "frostbite": (run_ga.main, ["--preset", "quick", "--game", "frostbite"], 3, "Game frames"),
    "halfcheetah": (run_es.main, ["--env", "HalfCheetah-v5"], 2, "Agent steps"),
}
FORMATS = ("fp32", "fp16")


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.weights_compare", description=__doc__.split("\n")[0]
    )
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    p.add_argument(
        "--seeds", type=int, default=0, help="seeds per task and format (0: 3 Frostbite, 2 HalfCheetah)"
    )
    p.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    p.add_argument("--runs-dir", default="runs/weights_compare", help="where the run folders go")
    p.add_argument("--out", default="docs", help="folder for the page and the figure (default: docs)")
    p.add_argument("--table-only", action="store_true", help="run nothing: the page from finished runs")
    p.add_argument(
        "--resolution", action="store_true", help="run nothing: fp16's and bf16's rounding per layer"
    )
    return p.parse_args(argv)


def folder_of(task: str, fmt: str, seed: int, a) -> str:
    return os.path.join(a.runs_dir, f"{task}-{fmt}-{seed}")


def finished(out: str) -> str | None:
    """The run folder under out whose run ended (its last row reached the frame budget), or None."""
    for d in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        folder = os.path.join(out, d)
        rows = runs.read_metrics(folder) if os.path.isfile(os.path.join(folder, "metrics.jsonl")) else []
        saved = runs.read_json(os.path.join(folder, "config.json")) if rows else {}
        if rows and rows[-1]["frames"] >= saved.get("run", {}).get("frame_budget", float("inf")):
            return folder
    return None


def one_run(task: str, fmt: str, seed: int, a) -> str | None:
    """Run a task in one format on one seed (or reuse a finished run, resume an unfinished one);
    its run folder, or None with --table-only and no finished run."""
    out = folder_of(task, fmt, seed, a)
    done = finished(out)
    if done or a.table_only:
        return done
    main, argv, _, _ = TASKS[task]
    started = sorted(os.listdir(out)) if os.path.isdir(out) else []
    if started:
        assert main(["--resume", os.path.join(out, started[-1])]) == 0
    else:
        assert main([*argv, "--weights", fmt, "--seed", str(seed), "--out-dir", out]) == 0
    return finished(out)


def row(task: str, fmt: str, seed: int, folder: str) -> dict:
    """One run's figures: its frames, and its last and best validated elite."""
    m = runs.read_metrics(folder)
    scored = [r["score/elite_mean"] for r in m if "score/elite_mean" in r]  # generations validated
    return {"task": task, "format": fmt, "seed": seed, "frames": m[-1]["frames"], "final": scored[-1],
            "best": max(scored), "folder": folder}  # fmt: skip


def table(rows: list[dict]) -> list[str]:
    """The page's table: a line per run, then per task and format the medians over seeds."""
    lines = [
        "| task | weights | seed | frames | final elite | best elite |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['task']} | {r['format']} | {r['seed']} | {r['frames']:,} | {r['final']:.1f} | "
                     f"{r['best']:.1f} |")  # fmt: skip
    for task in dict.fromkeys(r["task"] for r in rows):
        for fmt in FORMATS:
            got = [r for r in rows if r["task"] == task and r["format"] == fmt]
            if got:
                final, best = np.median([r["final"] for r in got]), np.median([r["best"] for r in got])
                lines.append(f"| {task} | {fmt} | median of {len(got)} | | {final:.1f} | {best:.1f} |")
    return lines


def figure(rows: list[dict], path: str) -> None:
    """Per task, the best elite so far against frames: each run a line, fp32 solid, fp16 dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        for r in (r for r in rows if r["task"] == task):
            m = [q for q in runs.read_metrics(r["folder"]) if "score/elite_mean" in q]
            x = np.array([q["frames"] for q in m], np.float64) / 1e6
            y = np.maximum.accumulate([q["score/elite_mean"] for q in m])
            ax.plot(x, y, color=f"C{r['seed']}", ls="-" if r["format"] == "fp32" else "--", lw=1.6,
                    label=f"{r['format']}, seed {r['seed']}")  # fmt: skip
        ax.set_title(task)
        ax.set_xlabel(f"{TASKS[task][3]} (millions)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel("Best elite (validation mean)")
    fig.suptitle("fp32 (solid) against fp16 (dashed) weight rows, the same seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


RESOLUTION = {  # net (with the task it runs) -> (obs shape, actions, the default sigma of its algorithm)
    "large (Atari, GA)": ("large", (4, 84, 84), 18, 0.002),
    "small (Atari, GA)": ("small", (4, 84, 84), 18, 0.002),
    "mlp-tanh (HalfCheetah, ES)": ("mlp-tanh", (17, 1, 1), 6, 0.02),
    "mnist-large (MNIST, ES)": ("mnist-large", (1, 28, 28), 10, 0.002),
}


def resolution() -> list[str]:
    """Per layer of each net: a typical weight (the median |w| of the reference init, 0.674 x its
    scale), the spacing of fp16 and of bf16 numbers there (a weight is rounded to within half of
    it), and the mutation's typical change sigma * E|eps| = 0.798 sigma in units of that spacing."""
    from nevo import nets

    lines = [
        "| net | layer | typical weight | fp16 spacing | 0.8 sigma / fp16 spacing | bf16 spacing "
        "| 0.8 sigma / bf16 spacing |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, (net, shape, actions, sigma) in RESOLUTION.items():
        spec = nets.net_spec(
            net, shape, actions, np.uint8 if len(shape) == 3 and shape[1] > 1 else np.float32
        )
        scale = nets.init_scale(spec)
        for lay in spec.layers:
            if lay.kind == "pool":
                continue
            w = np.float32(0.674 * scale[lay.w_offset])
            fp16 = float(np.spacing(np.float16(w)))
            bf16 = 2.0 ** (np.floor(np.log2(w)) - 7)  # 8 significant bits
            step = 0.798 * sigma
            kind = f"{lay.kind} {lay.cin}x{lay.cout}"
            lines.append(f"| {name} | {kind} | {w:.3g} | {fp16:.2g} | {step / fp16:,.0f} | {bf16:.2g} "
                         f"| {step / bf16:,.0f} |")  # fmt: skip
    return lines


def main(argv=None) -> int:
    a = parse(argv)
    if a.resolution:
        print("\n".join(resolution()))
        return 0
    rows = []
    for task in a.tasks:
        for seed in range(a.seeds or TASKS[task][2]):
            for fmt in a.formats:
                folder = one_run(task, fmt, seed, a)
                if folder:
                    rows.append(row(task, fmt, seed, folder))
    if not rows:
        print("no finished runs yet")
        return 1
    lines = table(rows)
    print("\n".join(lines))
    os.makedirs(a.out, exist_ok=True)
    table_path = os.path.join(a.runs_dir, "weights16_table.md")  # beside the runs: the page quotes it
    with open(table_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    path = os.path.join(a.out, "weights16.png")
    figure(rows, path)
    print(f"wrote {path} and {table_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
