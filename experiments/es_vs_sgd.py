"""ES against SGD on MNIST (Zhang, Clune & Stanley 2017, arXiv 1712.06564): SGD and its proxies
against mini-batch ES and NMB-ES at equal evaluations, in about two hours on 2 cores.

    python -m experiments.es_vs_sgd                          # the comparison: ~2 hours on 2 cores
    python -m experiments.es_vs_sgd --seeds 1 --es-examples 3000000      # a quicker look
    python -m experiments.es_vs_sgd --tiny --runs-dir /tmp/evs --out /tmp/evs   # seconds: the test's

Five methods on the 28,938-parameter mnist net, each on --seeds seeds. SGD (nevo's own
gradients) and the SGD proxy g_True + m g_Noise at rho 0.2 and 0.04 (the correlations of ES's
gradient with about 274,000 and 10,000 offspring in the paper) train on --sgd-examples examples
in mini-batches of --batch, the same batch sequence for all three. Mini-batch ES (every
offspring scored on one shared batch) and NMB-ES (each mirrored pair on its own) train on
--es-examples offspring-examples each (--population offspring x --es-batch examples a
generation): equal evaluations between the two, as in the paper's section 4.2. Every run
measures theta on the whole test set --points times (SGD: --validate-every; ES: its
validate_every, the last generation always), never counted as training examples. A finished
run folder in --runs-dir is reused, an unfinished one resumed.

Writes OUT/es_vs_sgd.md (final test accuracy, mean +- std over the seeds, beside the paper's
Table 1; the commands; the machine) and OUT/es_vs_sgd.png (test accuracy against training
examples and against updates); with --grad-corr also experiments.grad_corr at the first SGD
run's last theta, OUT/es_vs_sgd_grad_corr.png. A rerun rewrites the page whole.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import subprocess
import sys
import time

import numpy as np

from experiments import grad_corr, run_es, run_sgd
from nevo import runs

TEST_SET = 10_000  # MNIST's test examples: every validation of theta runs all of them
# ES's shape where the paper is silent below 10,000 offspring, chosen for 2 cores by short runs
# (docs/es_vs_sgd.md, "Our choices"): many cheap generations beat few costly ones at equal
# evaluations, since each Adam step moves theta by about its step size.
POPULATION, ES_BATCH, ES_LR, ES_EXAMPLES = 1000, 10, 0.003, 10_000_000
# name -> (command module, its flags, slug of the run folders, Zhang et al. 2017's Table 1)
METHODS = {
    "SGD": (run_sgd, [], "sgd", "99.11 +- 0.10 (40,000 iterations, 20 runs)"),
    "SGD proxy rho=0.2": (run_sgd, ["--proxy-rho", "0.2"], "proxy0.2", "98.99 +- 0.11"),
    "SGD proxy rho=0.04": (run_sgd, ["--proxy-rho", "0.04"], "proxy0.04", "98.39 +- 0.13"),
    "mini-batch ES": (
        run_es,
        ["--common-episodes", "1"],
        "mbes",
        "96.99 (10,000 offspring, 2,000 iterations)",
    ),
    "NMB-ES": (
        run_es,
        ["--common-episodes", "0"],
        "nmbes",
        "97.44 (10,000 offspring, 2,000 iterations); 99 with 50,000",
    ),
}
TAIL = 5  # the last test-set evaluations of a run whose mean and spread the table gives
TINY = {"sgd_examples": 1_000, "batch": 50, "es_examples": 2_000, "population": 10, "es_batch": 20,
        "points": 2, "seeds": 1}  # fmt: skip


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.es_vs_sgd", description=__doc__.split("\n")[0])
    p.add_argument(
        "--sgd-examples",
        type=int,
        default=300_000,
        help="training examples of each SGD and proxy run (default: 300000)",
    )
    p.add_argument("--batch", type=int, default=100, help="SGD's mini-batch (default: 100)")
    p.add_argument(
        "--es-examples",
        type=int,
        default=ES_EXAMPLES,
        help=f"offspring-examples of each ES run, both ES methods (default: {ES_EXAMPLES})",
    )
    p.add_argument(
        "--population",
        type=int,
        default=POPULATION,
        help=f"ES offspring per generation (default: {POPULATION})",
    )
    p.add_argument(
        "--es-batch",
        type=int,
        default=ES_BATCH,
        help=f"examples each ES offspring is scored on (default: {ES_BATCH})",
    )
    p.add_argument("--es-lr", type=float, default=ES_LR, help=f"ES's Adam step (default: {ES_LR})")
    p.add_argument("--points", type=int, default=20, help="test-set evaluations of each run (default: 20)")
    p.add_argument("--seeds", type=int, default=2, help="seeds per method (default: 2)")
    slugs = [m[2] for m in METHODS.values()]
    p.add_argument("--methods", nargs="+", default=slugs, choices=slugs, help="(default: all)")
    p.add_argument("--grad-corr", action="store_true", help="also run experiments.grad_corr, briefly")
    p.add_argument("--tiny", action="store_true", help="seconds: the test's sizes, one seed")
    p.add_argument("--runs-dir", default="runs/es_vs_sgd", help="where the run folders go")
    p.add_argument("--out", default="docs", help="folder for the table and the figures (default: docs)")
    a = p.parse_args(argv)  # fmt: skip
    if a.tiny:
        vars(a).update(TINY)
    a.methods = [name for name, m in METHODS.items() if m[2] in a.methods]
    return a


def iterations(a) -> int:
    """SGD's (and the proxies') iterations."""
    return math.ceil(a.sgd_examples / a.batch)


def generations(a) -> int:
    """Each ES run's generations."""
    return math.ceil(a.es_examples / (a.population * a.es_batch))


def run_argv(name: str, seed: int, a) -> list[str]:
    """The flags of one run. SGD's frame budget is its training examples. ES's adds the test-set
    validations before its last generation, so that it stops after exactly generations(a): a
    run's last generation always validates, once its training examples reach the budget."""
    module, extra, slug, _ = METHODS[name]
    argv = ["--env", "mnist", "--seed", str(seed), *extra]
    if module is run_sgd:
        every = max(1, iterations(a) // a.points)
        argv += [
            "--examples",
            str(a.batch),
            "--frame-budget",
            str(a.sgd_examples),
            "--validate-every",
            str(every),
        ]
    else:
        g = generations(a)
        every = max(1, g // a.points)
        budget = g * a.population * a.es_batch + (g - 1) // every * TEST_SET
        argv += ["--examples", str(a.es_batch), "--population", str(a.population), "--lr", str(a.es_lr)]
        argv += ["--validate-every", str(every), "--frame-budget", str(budget)]
    return argv + ["--out-dir", os.path.join(a.runs_dir, f"{slug}-{seed}")]


def training_examples(rows: list[dict]) -> np.ndarray:
    """(rows,) training examples seen by each metrics row: ES's frames less its validations."""
    if rows and "frames_train" in rows[0]:
        return np.cumsum([r["frames_train"] for r in rows])
    return np.array([r["frames"] for r in rows])


def one_run(name: str, seed: int, a, commands: list[str]) -> str:
    """Run one method on one seed, or reuse (resume) its run folder; return the folder."""
    module, _, _, _ = METHODS[name]
    argv = run_argv(name, seed, a)
    out = argv[-1]
    commands.append(f"python -m {module.__name__} {shlex.join(argv)}")
    done = [os.path.join(out, d) for d in sorted(os.listdir(out))] if os.path.isdir(out) else []
    if done:
        rows = runs.read_metrics(done[-1])
        wanted = a.sgd_examples if module is run_sgd else generations(a) * a.population * a.es_batch
        if rows and training_examples(rows)[-1] >= wanted:
            print(f"{name}, seed {seed}: reusing {done[-1]}")
            return done[-1]
        budget = argv[argv.index("--frame-budget") + 1]
        argv = ["--resume", done[-1], "--frame-budget", budget]
    assert module.main(argv) == 0, f"{name}, seed {seed} failed"
    return done[-1] if done else os.path.join(out, os.listdir(out)[0])


def tested(rows: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(training examples, updates, test accuracy) at the rows that measured theta on the test
    set (every SGD row; ES's validated generations)."""
    x, keep = training_examples(rows), ["score/test_accuracy" in r for r in rows]
    updates = np.array([r["generation"] + 1 for r in rows])
    y = np.array([r.get("score/test_accuracy", np.nan) for r in rows])
    return x[keep], updates[keep], y[keep]


def machine() -> str:
    """Cores, load and date, for the record."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average (1, 5, 15 min) {load}"


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def corr_lines(path: str) -> list[str]:
    """grad_corr's result in a few lines: per net, r at its most offspring and where r = c sqrt(N)
    reaches 20%."""
    with open(path) as f:
        result = json.load(f)
    lines = ["| net | its test accuracy % | offspring | r (mean over seeds) | fitted N for r = 20% |"]
    lines.append("|---|---:|---:|---:|---:|")
    for p in result["points"]:
        label = "theta_0" if p["label"] == "theta_0" else "the SGD run's last theta"
        n, r = p["offspring"][-1], p["r_mean"][-1]
        lines.append(
            f"| {label} | {100 * p['test_accuracy']:.2f} | {n:,} | {r:.3f} | {p['offspring_for_20']:,.0f} |"
        )
    return [*lines, ""]


def corr_figure(path: str, out: str) -> None:
    """grad_corr's r against offspring (log-log), per net the seeds' mean and the fitted c sqrt(N)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(path) as f:
        result = json.load(f)
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    for i, p in enumerate(result["points"]):
        label = "theta_0" if p["label"] == "theta_0" else "SGD run's last theta"
        n = np.array(p["offspring"])
        ax.plot(n, p["r_mean"], "o", color=f"C{i}", label=f"{label} ({100 * p['test_accuracy']:.1f}% test)")
        ax.plot(n, p["sqrt_c"] * np.sqrt(n), "--", color=f"C{i}", lw=1)
    ax.axhline(result["target"], color="gray", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offspring N")
    ax.set_ylabel("corr(g_ES, g_True)")
    ax.set_title(f"{result['net']} net, batch {result['examples']}; dashed: c sqrt(N)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def es_lead(curves: dict) -> list[str]:
    """A line comparing NMB-ES with mini-batch ES at each shared test point (the seeds' mean
    accuracy after the same generations): at how many NMB-ES is ahead, and by how much."""
    if not {"NMB-ES", "mini-batch ES"} <= curves.keys():
        return []

    def by_update(lines):  # updates -> the seeds' mean test accuracy, where every seed has it
        shared = set.intersection(*(set(u.tolist()) for _, u, _ in lines))
        return {g: np.mean([y[list(u).index(g)] for _, u, y in lines]) for g in sorted(shared)}

    nmb, mb = by_update(curves["NMB-ES"]), by_update(curves["mini-batch ES"])
    diff = np.array([nmb[g] - mb[g] for g in nmb if g in mb])
    if diff.size == 0:
        return []
    return [
        "",
        f"NMB-ES against mini-batch ES after the same generations: ahead at {int(np.sum(diff > 0))} of "
        f"{diff.size} test points (the seeds' mean), by {100 * diff.mean():+.2f} points on average (from "
        f"{100 * diff.min():+.2f} to {100 * diff.max():+.2f}).",
    ]


def figure(curves: dict, path: str, a) -> None:
    """Test accuracy against training examples (log axis) and against updates (SGD's iterations,
    ES's generations), one colour per method, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.0), sharey=True)
    for i, (name, lines) in enumerate(curves.items()):
        for j, (x, updates, y) in enumerate(lines):
            for ax, xs in zip(axes, (x, updates)):
                ax.plot(xs, 100 * y, color=f"C{i}", lw=1.4, alpha=0.85, marker=".", ms=3,
                        label=name if j == 0 else None)  # fmt: skip
    axes[0].set_xscale("log")
    axes[0].set_xlabel("training examples (ES: offspring x examples; validations not counted)")
    axes[1].set_xlabel("updates of theta (SGD: iterations; ES: generations)")
    axes[0].set_ylabel("test accuracy (%)")
    for ax in axes:
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=8, loc="lower right")
    es = f"ES {a.population} offspring x {a.es_batch} examples"
    fig.suptitle(f"MNIST, mnist net; SGD batch {a.batch}; {es}; {a.seeds} seed(s)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    a = parse(argv)
    started, load_before, t0 = datetime.datetime.now(datetime.UTC), machine(), time.time()
    commands: list[str] = []
    rows, curves = [], {}
    for name in a.methods:
        accs, tails, wobbles, examples, updates, minutes = [], [], [], [], [], []
        for seed in range(a.seeds):
            folder = one_run(name, seed, a, commands)
            metrics = runs.read_metrics(folder)
            x, u, y = tested(metrics)
            curves.setdefault(name, []).append((x, u, y))
            accs.append(100 * y[-1])
            tails.append(100 * np.mean(y[-TAIL:]))  # the run's last TAIL test evaluations
            wobbles.append(100 * np.std(y[-TAIL:]))
            examples.append(int(x[-1]))
            updates.append(int(u[-1]))
            minutes.append(metrics[-1]["wall_s"] / 60)
        acc = f"{np.mean(accs):.2f}" + (f" +- {np.std(accs, ddof=1):.2f}" if len(accs) > 1 else "")
        rows.append(
            (name, acc, np.mean(tails), np.mean(wobbles), len(accs), examples, updates, np.mean(minutes))
        )
    os.makedirs(a.out, exist_ok=True)
    fig_path = os.path.join(a.out, "es_vs_sgd.png")
    figure(curves, fig_path, a)
    corr = None
    if a.grad_corr:
        sgd_run = next((c for c in [os.path.join(a.runs_dir, "sgd-0")] if os.path.isdir(c)), None)
        gargv = ["--max-offspring", "1000", "--step", "200", "--seeds", "2", "--examples", str(a.batch)]
        if sgd_run:
            gargv += ["--run", os.path.join(sgd_run, sorted(os.listdir(sgd_run))[-1])]
        gargv += ["--out", os.path.join(a.runs_dir, "grad_corr")]
        commands.append(f"python -m experiments.grad_corr {shlex.join(gargv)}")
        assert grad_corr.main(gargv) == 0
        corr = os.path.join(a.out, "es_vs_sgd_grad_corr.png")
        corr_figure(os.path.join(a.runs_dir, "grad_corr.json"), corr)
    total = (time.time() - t0) / 60
    this = "python -m experiments.es_vs_sgd " + shlex.join(argv if argv is not None else sys.argv[1:])
    g = generations(a)
    lines = [
        "# ES against SGD on MNIST",
        "",
        "Zhang, Clune & Stanley 2017 (arXiv 1712.06564), Table 1, against nevo on 2 cores. SGD and the "
        f"proxies: {iterations(a):,} iterations of {a.batch} examples ({a.sgd_examples:,} training "
        f"examples, the same batches for all three). Mini-batch ES and NMB-ES at equal evaluations: "
        f"{g:,} generations of {a.population:,} offspring x {a.es_batch} examples "
        f"({g * a.population * a.es_batch:,} offspring-examples each). Test accuracy is theta's on the "
        "whole 10,000-image test set after the last update; those validations are not counted as "
        "training examples.",
        "",
        "| method | test accuracy % (mean +- std) | last 5 tests % | their std | seeds | training examples "
        "| updates | minutes per run | paper, Table 1 (%) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, acc, tail, wobble, n, examples, updates, minutes in rows:
        ex = ", ".join(f"{e:,}" for e in sorted(set(examples)))
        up = ", ".join(f"{u:,}" for u in sorted(set(updates)))
        lines.append(f"| {name} | {acc} | {tail:.2f} | {wobble:.2f} | {n} | {ex} | {up} | {minutes:.1f} "
                     f"| {METHODS[name][3]} |")  # fmt: skip
    lines += [
        "",
        f"Test accuracy: theta's after the last update; mean +- std over the seeds. Last {TAIL} tests: each "
        f"run's last {TAIL} test-set evaluations, their mean and their standard deviation (how much the "
        "curve wobbles at its end), averaged over the seeds.",
    ]
    lines += [
        *es_lead(curves),
        "",
        f"![test accuracy against training examples and updates]({os.path.basename(fig_path)})",
        "",
    ]
    if corr:
        lines += [
            "The correlation of ES's gradient estimate with the true gradient against the offspring, "
            "at the SGD run's last theta and at theta_0 (experiments.grad_corr, its command below):",
            "",
            f"![gradient correlation]({os.path.basename(corr)})",
            "",
            *corr_lines(os.path.join(a.runs_dir, "grad_corr.json")),
        ]
    lines += [
        "## Our choices",
        "",
        "The paper does not give its optimizer, step size, mini-batch or subset size, or (below 10,000) "
        f"population; ours: Adam with L2 0.0002 for every method; SGD and the proxies lr 0.001, batch "
        f"{a.batch}; ES lr {a.es_lr}, {a.population:,} offspring (mirrored pairs, a pair on one batch), "
        f"{a.es_batch} examples each, sigma 0.002 (the paper's), centered-rank fitness shaping; NMB-ES's "
        "subsets as large as mini-batch ES's batch. The proxy: nevo's g_True + m g_Noise at the stated "
        "correlation, on SGD's batch sequence.",
        "",
        "## What this budget does not show",
        "",
        f"The paper's ES runs 10,000 offspring for 2,000 iterations; here ES gets {g:,} generations of "
        f"{a.population:,}, and SGD {iterations(a):,} of the paper's 40,000 iterations. This table says "
        "where each method stands after this budget, not where it would end; the paper's scale is a GPU "
        "job: `bash experiments/bench/gpu_bench.sh mnist`."
        + (" With one seed there is no spread to compare." if a.seeds == 1 else ""),
        "",
        "## Commands",
        "",
        "The table and the figure (the runs below, in process; a finished run folder is reused):",
        "",
        "```",
        this.strip(),
        *commands,
        "```",
        "",
        "## Machine",
        "",
        f"Run {started:%Y-%m-%d %H:%M} UTC, commit {git_commit()}, {total:.1f} min in all "
        f"(reused runs take none). At the start: {load_before}; at the end: {machine()}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "es_vs_sgd.md"), "w") as f:
        f.write(text)
    print(f"wrote {os.path.join(a.out, 'es_vs_sgd.md')} and {fig_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
