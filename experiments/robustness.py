"""Robustness to parameter noise: how a run's final policy scores when its weights are perturbed.

    python -m experiments.robustness RUN [RUN ...]
    python -m experiments.robustness runs/Hopper-v5__es__* runs/Hopper-v5__ga__* --sigmas 0 0.01 0.05

Lehman et al. 2018 ("ES Is More Than Just a Traditional Finite-Difference Approximator", arXiv
1712.06568) show that ES, which optimises the mean reward of a cloud of perturbed policies, finds
policies whose reward survives parameter noise, where the GA's and TRPO's Humanoid walkers do not.
This measures it for any runs: each run's final policy (an ES run's theta, a GA run's best elite,
rebuilt from its run folder) gets Gaussian noise of each --sigmas value added to every parameter,
--perturbations times, and each perturbed policy plays --episodes episodes. With observation
normalisation (ES --obs-norm 1) the noise is added to theta and the run's statistics are then
folded in, as training perturbs theta. Noise and episode seeds come from --seed alone, so every
run meets the same perturbation draws' seeds.

Prints a Markdown table (mean return and its share of the unperturbed return per sigma), and
writes <out>.json (every return) and <out>.png and .pdf: the mean return against sigma, and the same as a
share of the return at sigma 0, one line per run, coloured by algorithm.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

import numpy as np

from nevo import config, tasks
from nevo.episodes import Episodes, Population
from nevo.evaluation import setup
from nevo.evaluation.setup import evaluator_for
from nevo.genomes import noise
from nevo.loops.elite import load as load_elite
from nevo.loops.elite import obs_stats
from nevo.nets import obs_norm
from nevo.nets.kernels import make_policy

SIGMAS = (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
COLOURS = {"es": "tab:blue", "ga": "tab:red", "rs": "tab:gray"}


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.robustness", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run folders (run_es, run_ga, run_ns)")
    listed = " ".join(map(str, SIGMAS))
    p.add_argument("--sigmas", type=float, nargs="+", default=list(SIGMAS),
                   help=f"noise standard deviations, 0 = the policy itself (default: {listed})")  # fmt: skip
    p.add_argument("--perturbations", type=int, default=20, help="perturbed policies per sigma (default: 20)")
    p.add_argument("--episodes", type=int, default=1, help="episodes per perturbed policy (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the noise and the episodes (default: 0)")
    p.add_argument("--frame-cap", type=int, default=0, help="episode cap in steps; 0 = the run's (default)")
    p.add_argument("--threads", type=int, default=0, help="env threads; 0 = chosen by timing (default)")
    p.add_argument(
        "--out",
        default="docs/robustness",
        help="path prefix of the .json, .png and .pdf (default: docs/robustness)",
    )
    a = p.parse_args(argv)
    if any(s < 0 for s in a.sigmas):
        raise config.ConfigError(f"--sigmas: got {a.sigmas}, allowed: numbers >= 0")
    for name in ("perturbations", "episodes"):
        if getattr(a, name) < 1:
            raise config.ConfigError(f"--{name}: got {getattr(a, name)}, allowed: an integer >= 1")
    if a.seed < 0 or a.frame_cap < 0:
        raise config.ConfigError("--seed and --frame-cap: integers >= 0")
    return a


def perturbed(theta: np.ndarray, sigmas, n: int, seed: int) -> np.ndarray:
    """(len(sigmas) * n, P) float32: theta + sigma * N(0, I), n draws per sigma (sigma 0: copies).
    Draw j of every sigma uses the same N(0, I), so the sigmas differ only in scale."""
    eps = np.random.default_rng([seed, 0x0B05]).standard_normal((n, theta.size), dtype=np.float32)
    return np.concatenate([theta[None] + np.float32(s) * eps for s in sigmas]).astype(np.float32)


def measure(run_dir: str, a) -> dict:
    """{"run", "algo", "env", "sigmas", "returns" (sigmas, perturbations) list}: one run's table."""
    cfg, elite, spec, theta = load_elite(run_dir, "best", fold=False)
    cap = a.frame_cap or cfg.env.frame_cap
    task = tasks.task_for(replace(cfg.env, frame_cap=cap))
    rows = perturbed(theta, a.sigmas, a.perturbations, a.seed)
    stats = obs_stats(run_dir, elite, spec)
    if stats is not None:  # the noise is theta's; the policy then normalises as it was validated
        obs_norm.fold(spec, rows, stats[0], stats[1])
    cfg = replace(cfg, run=replace(cfg.run, device="cpu", threads=a.threads, env_slots=0))
    policy = make_policy("cpu", spec)
    builder = setup.weight_builder(cfg, task, spec, run_dir, None)
    n = len(rows) * a.episodes
    evaluator, _ = evaluator_for(task, cfg.run, policy, builder, "cpu", n)
    ind = np.repeat(np.arange(len(rows)), a.episodes)
    seeds = np.random.default_rng([a.seed, 0xE915]).integers(0, noise.SEED_LIMIT, n).astype(np.int64)
    try:
        res = evaluator.run(Population.of_weights(rows), Episodes(ind, seeds))
    finally:
        evaluator.close()
    per_policy = res.returns.reshape(len(rows), a.episodes).mean(axis=1)
    returns = per_policy.reshape(len(a.sigmas), a.perturbations)
    algo = cfg.algo
    return {"run": run_dir, "algo": algo, "obs_norm": stats is not None, "env": task.name,
            "sigmas": list(a.sigmas), "returns": returns.tolist(),
            "frames": int(res.total_frames)}  # fmt: skip


def label(r: dict) -> str:
    """ES, ES (obs-norm), GA, ...: what a result's line is called."""
    return r["algo"].upper() + (" (obs-norm)" if r.get("obs_norm") else "")


def table(results: list[dict]) -> str:
    sigmas = results[0]["sigmas"]
    lines = ["| run | policy | " + " | ".join(f"sigma {s:g}" for s in sigmas) + " |",
             "|---|---|" + "---:|" * len(sigmas)]  # fmt: skip
    for r in results:
        means = np.mean(r["returns"], axis=1)
        base = means[0] if sigmas[0] == 0 and means[0] != 0 else None
        cells = [f"{m:.0f}" + (f" ({m / base:.0%})" if base is not None else "") for m in means]
        lines.append(f"| {os.path.basename(r['run'].rstrip('/'))} | {label(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(results: list[dict], prefix: str) -> list[str]:
    """prefix.png and .pdf: mean return against sigma, and as a share of sigma 0's, per run."""
    from nevo.plots import style

    with style.paper():
        fig, (raw, share) = style.figure(2, height=2.8)
        seen = set()
        for r in results:
            s = np.asarray(r["sigmas"])
            means = np.mean(r["returns"], axis=1)
            x = np.where(s > 0, s, s[s > 0].min() / 2) if (s > 0).any() else s  # sigma 0 on a log axis
            colour = COLOURS.get(r["algo"], "tab:green")
            name = None if label(r) in seen else label(r)
            seen.add(label(r))
            plain_es = r["algo"] == "es" and not r.get("obs_norm")
            line = "s--" if plain_es else "o-"  # ES without observation normalisation: dashed
            raw.plot(x, means, line, color=colour, label=name, alpha=0.85, ms=3)
            if s[0] == 0 and means[0] > 0:
                share.plot(x, means / means[0], line, color=colour, label=name, alpha=0.85, ms=3)
        s = np.asarray(results[0]["sigmas"])
        for ax, name in ((raw, "mean return"), (share, "share of the unperturbed return")):
            if (s > 0).any():
                ax.set_xscale("log")
                # a tick at each sigma; sigma 0 sits at half the smallest other one
                ax.set_xticks(np.where(s > 0, s, s[s > 0].min() / 2), [f"{v:g}" for v in s], fontsize=7)
                ax.minorticks_off()
            ax.set_xlabel("parameter noise sigma")
            ax.set_ylabel(name)
            ax.legend()
        raw.set_title(f"{', '.join(sorted({r['env'] for r in results}))}: perturbed final policies")
        share.axhline(1.0, color="0.6", lw=0.8)
        paths = style.save(fig, prefix)
        style.close(fig)
    return paths


def main(argv=None) -> int:
    try:
        a = parse(argv)
        results = []
        for run_dir in a.runs:
            what = f"{len(a.sigmas)} sigmas x {a.perturbations} perturbations x {a.episodes} episodes"
            print(f"{run_dir}: {what}", flush=True)
            results.append(measure(run_dir, a))
    except (config.ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(table(results))
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump({"perturbations": a.perturbations, "episodes": a.episodes, "seed": a.seed,
                   "results": results}, f, indent=1)  # fmt: skip
        f.write("\n")
    paths = figure(results, a.out)
    print(f"wrote {a.out}.json and {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
