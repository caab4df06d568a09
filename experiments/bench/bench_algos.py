"""Benchmark what the algorithms cost beside the evaluation they drive, in one run on one machine.

    python -m experiments.bench.bench_algos                         # ES at population 5,000, large net
    python -m experiments.bench.bench_algos --frames-per-s 150000   # against a GPU box's throughput

OpenAI-ES, per generation (Salimans et al. 2017; issue: the update must cost <= 2% of a
generation on the GPU machine, <= 5% on 2 cores):
- the update: centered ranks, the weighted sum of the perturbations read from the noise table
  (numba-parallel, no population x parameters matrix), and the Adam step;
- building the perturbed weights the evaluator reads (theta +- sigma*eps; the evaluator builds
  them as episodes take slots, timed here --chunk rows at a time), which the evaluation needs
  whatever the algorithm;
- beside them, one generation's evaluation time at a pipeline throughput (--frames-per-s; the
  default is the measured 2-core CPU figure of docs/lab/2026-11-21.md) for a few episode lengths,
  since the length of an episode sets how many frames a generation is.
Novelty search (issue: <= 1 s on 2 cores): the novelty of 1,000 behaviours against an archive of
100,000 Atari RAM vectors, as `experiments/bench/bench_novelty.py` measures it (--no-novelty skips it).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nevo import machine, nets
from nevo.algos.es import ES
from nevo.config import ESConfig
from nevo.episodes import Results
from nevo.genomes import noise

CPU_FRAMES_PER_S = 3676  # bench_pipeline, large, population 64, lockstep, 2 cores (docs/lab/2026-11-21.md)


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.bench_algos", description=__doc__.split("\n")[0]
    )
    p.add_argument("--net", default="large", help="large or small (default: large)")
    p.add_argument("--population", type=int, default=5000, help="ES perturbations (default: 5000)")
    p.add_argument("--noise-table-size", type=int, default=250_000_000, help="(default: 250M, the paper's)")
    p.add_argument("--chunk", type=int, default=250, help="rows built per timed call (default: 250)")
    p.add_argument(
        "--frames-per-s", type=float, default=CPU_FRAMES_PER_S, help="pipeline throughput to compare with"
    )
    p.add_argument(
        "--episode-frames",
        type=int,
        nargs="+",
        default=[1000, 4000, 20000],
        help="mean game frames per episode",
    )
    p.add_argument("--repeats", type=int, default=3, help="timed repeats; the best is reported (default: 3)")
    p.add_argument("--no-novelty", action="store_true", help="skip the novelty benchmark")
    return p.parse_args(argv)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    a = parse(argv)
    spec = nets.net_spec(a.net)
    print(
        f"machine: {machine.cores()} cores | net {a.net} ({spec.n_params:,} params) | "
        f"ES population {a.population}"
    )
    t0 = time.perf_counter()
    table = noise.make_table(a.noise_table_size, 42)
    print(f"noise table: {a.noise_table_size:,} numbers in {time.perf_counter() - t0:.1f} s")
    cfg = ESConfig(population=a.population)
    es = ES(cfg, 0, noise.NoiseSource(table, nets.init_scale(spec), cfg.sigma))
    rng = np.random.default_rng(0)
    returns = Results(rng.normal(size=a.population), np.ones(a.population), np.ones(a.population))

    def update():
        es.tell(returns)

    update()  # compile
    update_s = best_of(update, a.repeats)
    chunk = min(a.chunk, a.population)
    builder = noise.WeightBuilder(table, nets.init_scale(spec))
    builder.use(es.ask()[0])
    rows = np.empty((chunk, spec.n_params), np.float32)
    builder.build(np.arange(chunk), rows)  # compile
    build_s = best_of(lambda: builder.build(np.arange(chunk), rows), a.repeats) * a.population / chunk
    read_gb = a.population // 2 * spec.n_params * 4 / 1e9
    print(f"ES update (ranks + weighted noise sum + Adam): {update_s:.3f} s per generation "
          f"({read_gb:.1f} GB of noise read: {read_gb / update_s:.1f} GB/s)")  # fmt: skip
    print(
        f"building the {a.population} perturbed weight rows (chunks of {chunk}): "
        f"{build_s:.2f} s per generation"
    )
    print(f"\nevaluation at {a.frames_per_s:,.0f} frames/s, one episode per perturbation:")
    print("| episode frames | evaluation s | update % of generation | update + build % |")
    print("|---:|---:|---:|---:|")
    for ep in a.episode_frames:
        ev = a.population * ep / a.frames_per_s
        gen = ev + update_s + build_s
        print(
            f"| {ep:,} | {ev:,.0f} | {100 * update_s / gen:.2f}% | {100 * (update_s + build_s) / gen:.2f}% |"
        )
    if not a.no_novelty:
        from experiments.bench import bench_novelty

        print("\nnovelty search:")
        bench_novelty.main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
