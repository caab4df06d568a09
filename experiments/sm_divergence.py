"""How far 1,000 mutations of one trained network move its policy, per mutation operator: the
first demonstration of Lehman et al. 2018 (arXiv 1712.06563), on a nevo run's best elite.

    python -m experiments.sm_divergence runs/<folder> --out docs/sm_divergence

The elite (best.json, rebuilt from its seed list) plays one seeded episode; a seeded reservoir
keeps up to --record of its observations and --experiences of those are the experiences, as
the paper's code keeps 400 per individual and samples 100. Then each operator makes --mutations
children from the same Gaussian perturbations delta = sigma * N(0, I) (sigma: the run's) and
each child's divergence is measured: mean over the experiences of |y(child) - y(elite)|_2, y the
softmax over actions (nevo.genomes.safe_mutation). SM-R's target divergence is the median divergence of
plain Gaussian mutation (our pick: SM-R then makes changes of plain mutation's typical size,
with none of its spread). Printed: each operator's divergence quantiles, the cost of its
sensitivity (once per parent) and of a child. Written: OUT.png (histograms of log10 divergence)
and OUT.json (the numbers).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from nevo import nets, tasks
from nevo.config import ConfigError
from nevo.episodes import Population
from nevo.genomes import safe_mutation as sm
from nevo.genomes.operators import NAMES
from nevo.loops.elite import load as load_elite
from nevo.nets.kernels import make_policy


def record(cfg, spec, weights, n_record: int, seed: int) -> np.ndarray:
    """(<= n_record, C, H, W) observations of one greedy episode of weights (at most the run's
    frame cap of steps), kept by a seeded reservoir."""
    from nevo.episodes.weights import PooledWeights
    from nevo.genomes.noise import WeightBuilder

    task = tasks.task_for(cfg.env)
    policy = make_policy("cpu", spec)
    weights_src = PooledWeights(WeightBuilder(None, np.zeros(spec.n_params, np.float32)))
    policy.load(weights_src.start(Population.of_weights(weights[None]), np.zeros(1, np.int64), 1))
    row = weights_src.take([0])
    rng = np.random.default_rng([seed, 0x5AFE])
    kept, seen = [], 0
    if isinstance(task, tasks.AtariGame):
        from nevo.atari.emulator import AtariEmulator

        env = AtariEmulator(cfg.env.game, cfg.env.frameskip, cfg.env.frame_cap)
        obs = np.zeros((1, *task.obs_shape), np.uint8)
        env.reset(obs[0], seed)
    else:
        env = task.make_slots(1)
        obs = env.reset([0], [seed])
    try:
        for _ in range(cfg.env.frame_cap):
            o = np.asarray(obs)[0]
            seen += 1
            if len(kept) < n_record:  # reservoir sampling: every observation equally likely kept
                kept.append(o.copy())
            elif (j := rng.integers(0, seen)) < n_record:
                kept[j] = o.copy()
            action = policy(row, np.asarray(obs))
            if isinstance(task, tasks.AtariGame):
                ended = env.step(int(action[0]), obs[0])[1] != 0
            else:
                obs, _, ended_a = env.step([0], action)
                ended = bool(ended_a[0])
            if ended:
                break
    finally:
        policy.release()
        if hasattr(env, "close"):
            env.close()
    return np.stack(kept)


def divergences(kind, spec, theta, tr, deltas, target):
    """(divergence of each child, seconds of the parent's sensitivity, seconds per child)."""
    t0 = time.perf_counter()
    s = sm.sensitivity(kind, tr) if kind in ("sm-g-sum", "sm-g-abs") else None
    parent_s = time.perf_counter() - t0
    out = np.empty(len(deltas))
    t0 = time.perf_counter()
    for i, delta in enumerate(deltas):
        child = sm.mutate(kind, spec, theta, None, delta, target, tr=tr, s=s)
        out[i] = sm.divergence(tr, child)
    return out, parent_s, (time.perf_counter() - t0) / len(deltas)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a GA run folder (its best.json is mutated)")
    p.add_argument("--mutations", type=int, default=1000, help="children per operator (default: 1000)")
    p.add_argument("--experiences", type=int, default=100, help="experiences sampled (default: 100)")
    p.add_argument(
        "--record", type=int, default=400, help="observations kept from the episode (default: 400)"
    )
    p.add_argument("--sigma", type=float, default=0.0, help="mutation power (default: the run's)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episode, samples and perturbations")
    p.add_argument("--operators", default=",".join(NAMES), help="operators to compare (default: all)")
    p.add_argument("--out", default="sm_divergence", help="OUT.png and OUT.json (default: sm_divergence)")
    a = p.parse_args(argv)
    try:
        cfg, elite, spec, weights = load_elite(a.run_dir)
        if cfg.net.vbn:  # nevo.genomes.safe_mutation differentiates plain weights, without VBN's fold
            raise ConfigError(
                f"{a.run_dir}: a run with --vbn; safe mutations are measured on nets without it"
            )
        if spec.action != "argmax":  # the divergence is between softmaxes over discrete actions
            raise ConfigError(f"{a.run_dir}: a run with continuous actions; safe mutations measure "
                              "discrete policies (the softmax over their actions)")  # fmt: skip
        nets.require_relu(spec, "safe mutations' output gradients")
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sigma = a.sigma or float(elite.get("sigma", 0.0)) or cfg.settings.sigma
    rng = np.random.default_rng([a.seed, 0xD17])
    seen = record(cfg, spec, weights, a.record, a.seed)
    exp = seen[rng.choice(len(seen), min(a.experiences, len(seen)), replace=False)]
    theta = weights.astype(np.float64)
    tr = sm.trace(spec, theta, exp)
    deltas = rng.standard_normal((a.mutations, spec.n_params)).astype(np.float32) * sigma
    print(f"sm_divergence | {a.run_dir} | {elite['file']} (generation {elite['generation']}) | net "
          f"{cfg.net.net} ({spec.n_params:,} params) | {len(exp)} experiences of {len(seen)} kept | "
          f"sigma {sigma} | {a.mutations} mutations per operator")  # fmt: skip
    results, target = {}, None
    for kind in a.operators.split(","):
        if kind == "sm-r" and target is None:
            plain, _, _ = divergences("gaussian", spec, theta, tr, deltas, 0.0)
            target = float(np.median(plain))
            results.setdefault("gaussian", {"divergence": plain.tolist(), "parent_s": 0.0})
        if kind in results:
            continue
        div, parent_s, child_s = divergences(kind, spec, theta, tr, deltas, target or 0.0)
        results[kind] = {"divergence": div.tolist(), "parent_s": parent_s, "child_s": child_s}
    print(f"SM-R target divergence: {target}  (the median of plain mutation's)" if target else "")
    print(
        f"{'operator':10} {'5%':>10} {'median':>10} {'95%':>10} {'95%/5%':>8} {'parent s':>9} {'child s':>8}"
    )
    for kind, r in results.items():
        q = np.quantile(r["divergence"], [0.05, 0.5, 0.95])
        print(f"{kind:10} {q[0]:>10.3g} {q[1]:>10.3g} {q[2]:>10.3g} {q[2] / max(q[0], 1e-300):>8.1f} "
              f"{r['parent_s']:>9.2f} {r.get('child_s', 0.0):>8.3f}")  # fmt: skip
    with open(a.out + ".json", "w") as f:
        json.dump({"run": a.run_dir, "sigma": sigma, "target": target, "experiences": len(exp),
                   "results": results}, f)  # fmt: skip
    plot(results, target, sigma, a.out + ".png")
    print(f"wrote {a.out}.png and {a.out}.json")
    return 0


def plot(results, target, sigma, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(6, 1.4 * len(results) + 0.6), sharex=True)
    axes = np.atleast_1d(axes)
    every = np.log10(np.concatenate([np.maximum(r["divergence"], 1e-12) for r in results.values()]))
    bins = np.linspace(every.min(), every.max(), 60)
    for ax, (kind, r) in zip(axes, results.items()):
        ax.hist(np.log10(np.maximum(r["divergence"], 1e-12)), bins=bins, color="tab:blue")
        ax.set_ylabel(kind, rotation=0, ha="right", va="center")
        ax.set_yticks([])
        if target:
            ax.axvline(np.log10(target), color="tab:red", lw=1)
    axes[-1].set_xlabel("log10 divergence: mean over experiences of |y(child) - y(parent)|")
    axes[0].set_title(f"{len(next(iter(results.values()))['divergence'])} mutations per operator, "
                      f"sigma {sigma}; red: SM-R's target", fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
