"""How long building a generation's individuals takes: on the host (build_rows) and on a GPU.

    python -m experiments.bench.bench_build                          # the host: large net, 64 rows
    python -m experiments.bench.bench_build --device cuda            # a GPU: 1,000 rows built there

A GA generation of --population children of --truncation parents (the elite copied, the rest
parent + sigma * eps), built as the evaluators build them: on the CPU by nevo.genomes.noise.WeightBuilder
(--rows of them, as a pooled evaluator builds a slot's worth at a time), on a GPU by
nevo.genomes.cuda_build.DeviceWeights (every row, the parents and the rows' seeds uploaded; the
noise table is uploaded before timing, once per run). Prints the time per generation, per row,
the bytes written per second, and the share of a generation whose time is --generation-s (on a
GPU machine with 16 emulator cores: 1,300 episodes of 750 agent steps at ~150K frames/s, 26 s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nevo import nets
from nevo.algos.ga import GA
from nevo.config import GAConfig
from nevo.episodes import Results
from nevo.genomes import noise


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.bench_build", description=__doc__.split("\n")[0]
    )
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--net", default="large", choices=["large", "small"])
    p.add_argument("--population", type=int, default=1000, help="(default: 1000)")
    p.add_argument("--truncation", type=int, default=20, help="(default: 20)")
    p.add_argument("--rows", type=int, default=64, help="cpu: rows built per call (default: 64)")
    p.add_argument("--noise-table-size", type=int, default=250_000_000, help="(default: 250000000)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats, the fastest kept (default: 3)")
    p.add_argument("--generation-s", type=float, default=26.0, help="a generation's time (default: 26)")
    return p.parse_args(argv)


def second_generation(a, n_params):
    """A GA's generation-1 population (children of the parents chosen from random scores)."""
    ga = GA(GAConfig(population=a.population, truncation=a.truncation, elite_candidates=1,
                     validation_episodes=1), seed=0)  # fmt: skip
    ga.ask()
    ga.tell(Results(np.random.default_rng(0).normal(size=a.population), np.ones(a.population, np.int64),
                    np.ones(a.population, np.int64)))  # fmt: skip
    ga.ask_validation()
    ga.tell_validation(Results(np.zeros(1), np.ones(1, np.int64), np.ones(1, np.int64)))
    return ga.ask()[0]


def main(argv=None) -> int:
    a = parse(argv)
    spec = nets.net_spec(a.net, nets.OBS_SHAPE, 18)
    table = noise.make_table(a.noise_table_size, 42)
    builder = noise.WeightBuilder(table, nets.init_scale(spec))
    pop = second_generation(a, spec.n_params)
    builder.use(pop)  # the parents' weights: rebuilt once (a run has them from the last generation)
    times = []
    if a.device == "cpu":
        rows = np.arange(1, a.rows + 1)  # children, the elite copy aside
        out = np.empty((len(rows), spec.n_params), np.float32)
        builder.build(rows, out)  # compile
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            builder.build(rows, out)
            times.append(time.perf_counter() - t0)
        n = len(rows)
    else:
        from numba import cuda

        from nevo.genomes.cuda_build import DeviceWeights

        device = DeviceWeights(builder)
        device.start(pop, np.arange(len(pop)), 0)  # compile, upload the table and the parents
        for _ in range(a.repeats):
            device._bases_of = None  # time the parents' upload too, as a new generation has it
            t0 = time.perf_counter()
            device.start(pop, np.arange(len(pop)), 0)
            cuda.synchronize()
            times.append(time.perf_counter() - t0)
        n = len(pop)
    best = min(times)
    per_gen = best / n * a.population
    gb = 4 * spec.n_params * n / best / 1e9
    print(f"{a.device}: {a.net} net ({spec.n_params:,} params), {n} rows in {best * 1e3:.1f} ms "
          f"({best / n * 1e3:.2f} ms per row, {gb:.1f} GB/s written); a generation of {a.population}: "
          f"{per_gen:.2f} s, {100 * per_gen / a.generation_s:.2f}% of {a.generation_s:g} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
