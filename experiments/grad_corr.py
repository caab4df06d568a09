"""How well ES's gradient estimate follows the true one at fixed parameters on MNIST, against the
number of offspring: the correlation study of Zhang, Clune & Stanley 2017 (arXiv 1712.06564: about
4% with 10,000 offspring, 20% with about 274,000, growing like sqrt(N)).

    python -m experiments.grad_corr --sgd-examples 30000 --max-offspring 4000 --out grad_corr
    python -m experiments.grad_corr --net mnist-large --sgd-examples 0 --max-offspring 100000 --step 1000
    python -m experiments.grad_corr --run runs/<folder> --seeds 3

The nets measured: ES's initial theta and, with --sgd-examples E, the nets SGD (nevo.algos.sgd,
the run_sgd defaults, the same batches) reaches after E/10 and E training examples (E = 0:
theta_0 alone); with --run, a run folder's last theta instead (its net and noise table; sigma its
ES sigma, else --sigma). At
each, for every seed s: one batch of --examples training examples drawn from s, perturbations
drawn from s, and N = --step, 2 --step, ... --max-offspring offspring, pairs added and earlier
returns kept (nevo.studies.grad_corr.correlation_curve: Pearson's r between ES's shaped-fitness
estimate and minus the batch's cross-entropy gradient). Written: OUT.json (every (N, r), per net
the c of r = c sqrt(N) fitted through the seeds' mean, and the N where that line reaches 20%)
and OUT.png/.pdf (log-log, the fitted lines dashed, the locally linear fitness's
sqrt(K / (K + P + 1)) dotted). The paper's 100,000+ offspring of its 3.27M-parameter net are a
GPU job; the default, the 28,938-parameter mnist net up to 4,000 offspring, takes minutes on 2
cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from nevo import nets
from nevo.config import ConfigError, SGDConfig
from nevo.evaluation.supervised import batch_of
from nevo.genomes.noise import NoiseSource, make_table
from nevo.studies import grad_corr as gc

TARGET = 0.2  # the paper's "SGD-equivalent" correlation


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--run", metavar="RUN_DIR", help="measure this run folder's last theta (and theta_0)")
    which.add_argument(
        "--sgd-examples",
        type=int,
        default=30_000,
        help="train by SGD this many examples; measure at 0, 1/10, all",
    )
    p.add_argument("--net", default="mnist", help="mnist (28,938 parameters) or mnist-large (3,274,634)")
    p.add_argument("--max-offspring", type=int, default=4000, help="largest N (offspring, two per pair)")
    p.add_argument("--step", type=int, default=500, help="offspring added at a time (even)")
    p.add_argument("--seeds", type=int, default=2, help="seeds: each its own batch and perturbations")
    p.add_argument("--examples", type=int, default=100, help="the batch: training examples (our pick)")
    p.add_argument("--sigma", type=float, default=0.002, help="ES's noise std (Zhang et al.: 0.002)")
    p.add_argument("--out", default="grad_corr", help="prefix of OUT.json, OUT.png and OUT.pdf")
    a = p.parse_args(argv)
    if a.step < 2 or a.step % 2 or a.max_offspring < a.step:
        p.error("--step: an even number >= 2, at most --max-offspring")
    return a


def accuracy(spec, theta, data) -> float:
    """theta's share of the test set classified right."""
    from nevo.nets.kernels import make_policy

    policy = make_policy("cpu", spec)
    policy.load(np.asarray(theta, np.float32)[None])
    right = 0
    for lo in range(0, len(data.test_y), 2000):
        actions, _ = policy.forward(
            np.zeros(len(data.test_y[lo : lo + 2000]), np.int64), data.test_x[lo : lo + 2000]
        )
        right += int(np.sum(np.asarray(actions) == data.test_y[lo : lo + 2000]))
    return right / len(data.test_y)


def nets_to_measure(a, data):
    """(spec, noise source, [(label, examples trained, theta)])."""
    from nevo.algos.sgd import SGD

    if a.run:
        from nevo.loops.elite import load

        cfg, _, spec, theta = load(a.run, "last")
        sigma = cfg.settings.sigma if cfg.algo == "es" else a.sigma
        table = make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
        noise = NoiseSource(table, nets.init_scale(spec), sigma)
        theta_0 = SGD(SGDConfig(), cfg.run.seed, noise, spec).theta  # ES's and SGD's theta_0
        return spec, noise, [("theta_0", 0, theta_0), (f"{a.run} (last)", None, theta)]
    spec = nets.net_spec(a.net, data.train_x.shape[1:], data.classes, np.uint8)
    noise = NoiseSource(make_table(max(32_000_000, spec.n_params), 42), nets.init_scale(spec), a.sigma)
    sgd = SGD(SGDConfig(), 0, noise, spec)
    points, seen = [("theta_0", 0, sgd.theta.copy())], 0
    for stop in sorted({a.sgd_examples // 10, a.sgd_examples} - {0}):  # --sgd-examples 0: theta_0 alone
        while seen < stop:
            pick = batch_of(sgd.batch_seed(), len(data.train_y), a.examples)
            sgd.step(data.train_x[pick], data.train_y[pick])
            seen += len(pick)
        points.append((f"SGD, {seen:,} examples", seen, sgd.theta.copy()))
    return spec, noise, points


def measure(a, spec, noise, theta, data) -> dict:
    """Every seed's curve at theta, their mean, the sqrt(N) fit and its N for 20%."""
    counts = list(range(a.step, a.max_offspring + 1, a.step))
    curves = []
    for s in range(a.seeds):
        pick = batch_of(s, len(data.train_y), a.examples)
        x, y = data.train_x[pick], data.train_y[pick]
        curves.append([p["r"] for p in gc.correlation_curve(spec, noise, theta, x, y, counts, seed=s)])
    mean = np.mean(curves, axis=0)
    c = gc.sqrt_fit(counts, mean)
    reached = [n for n, r in zip(counts, mean) if r >= TARGET]
    return {"offspring": counts, "r": curves, "r_mean": mean.tolist(), "sqrt_c": c,
            "offspring_for_20": gc.offspring_for(TARGET, c),
            "reached_20_at": reached[0] if reached else None}  # fmt: skip


def figure(result: dict, prefix: str) -> list[str]:
    from nevo.plots import style

    with style.paper():
        fig, (ax,) = style.figure(1, width=4.2, height=3.0)
        n = np.asarray(result["points"][0]["offspring"], np.float64)
        for i, pt in enumerate(result["points"]):
            colour = style.COLORS[i % len(style.COLORS)]
            r = np.asarray(pt["r"])
            ax.fill_between(n, r.min(axis=0), r.max(axis=0), color=colour, alpha=0.2, lw=0)
            ax.plot(n, pt["r_mean"], "o", color=colour, ms=3,
                    label=f"{pt['label']}: 20% at N ~ {pt['offspring_for_20']:,.0f}")  # fmt: skip
            fit = "c sqrt(N), fitted" if i == 0 else None
            ax.plot(n, pt["sqrt_c"] * np.sqrt(n), "--", color=colour, lw=0.9, label=fit)
        ax.plot(n, gc.linear_r(n, result["n_params"]), ":", color="0.3", label="linear fitness, raw returns")
        ax.axhline(TARGET, color="0.6", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offspring N")
        ax.set_ylabel("corr(g_ES, g_True)")
        ax.set_title(f"{result['net']} ({result['n_params']:,} params), batch {result['examples']}")
        ax.legend(loc="upper left", fontsize=7)
        paths = style.save(fig, prefix)
        style.close(fig)
    return paths


def main(argv=None) -> int:
    a = parse(argv)
    from nevo.tasks.supervised import mnist

    try:
        data = mnist()
        spec, noise, points = nets_to_measure(a, data)
    except (ConfigError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    result = {"net": spec.name, "n_params": spec.n_params, "sigma": noise.sigma, "examples": a.examples,
              "fitness_shaping": "centered_ranks", "mirrored": True, "target": TARGET,
              "linear_offspring_for_20": float(2 * TARGET**2 / (1 - TARGET**2) * (spec.n_params + 1)),
              "points": []}  # fmt: skip
    for label, trained, theta in points:
        t0 = time.monotonic()
        pt = {"label": label, "sgd_examples": trained, "test_accuracy": accuracy(spec, theta, data)}
        pt.update(measure(a, spec, noise, theta, data))
        pt["wall_s"] = round(time.monotonic() - t0, 1)
        result["points"].append(pt)
        print(f"{label}: test accuracy {pt['test_accuracy']:.4f}; r at N = {pt['offspring'][0]:,}: "
              f"{pt['r_mean'][0]:.4f}, at {pt['offspring'][-1]:,}: {pt['r_mean'][-1]:.4f}; 20% at "
              f"N ~ {pt['offspring_for_20']:,.0f} by the sqrt(N) line ({pt['wall_s']:.0f} s)")  # fmt: skip
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    paths = figure(result, a.out)
    print(
        f"linear fitness: 20% at N ~ {result['linear_offspring_for_20']:,.0f}; wrote {a.out}.json, "
        + ", ".join(paths)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
