"""What safe mutations cost per parent and per child, beside a generation's time.

    python -m experiments.bench.bench_safe                      # the large net, 100 Frostbite observations
    python -m experiments.bench.bench_safe --net small --experiences 50 --operators sm-g-sum sm-r

Times nevo.genomes.safe_build as a run uses it (the Numba backend: float64, fixed-order sums): a
parent's trace and sensitivity (SM-G-SUM, SM-G-ABS: once per parent per generation) and a
child's line search or second-order product (SM-R, SM-G-SO: once per child), on a freshly
initialised net and observations from random play. Then the share of a generation at the
paper's population and truncation (--population, --truncation) whose time is --generation-s
(default: 926 s, the large net's generation on 2 cores: 1,300 episodes of 750 agent steps at
1.9 core-ms a step, docs/cluster.md).
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import numpy as np

from nevo import nets, tasks
from nevo.config import EnvConfig
from nevo.genomes import safe_build
from nevo.genomes.noise import offsets_of


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.bench_safe", description=__doc__.split("\n")[0]
    )
    p.add_argument("--net", default="large", help="an image net (default: large)")
    p.add_argument("--game", default="frostbite", help="Atari game of the observations (default: frostbite)")
    p.add_argument("--experiences", type=int, default=100, help="observations per parent (default: 100)")
    p.add_argument("--operators", nargs="+", default=["sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"])
    p.add_argument("--population", type=int, default=1000, help="(default: 1000)")
    p.add_argument("--truncation", type=int, default=20, help="(default: 20)")
    p.add_argument("--sigma", type=float, default=0.002, help="(default: 0.002)")
    p.add_argument("--generation-s", type=float, default=926.0, help="a generation's time (default: 926)")
    p.add_argument("--repeats", type=int, default=2, help="timed repeats, the fastest kept (default: 2)")
    return p.parse_args(argv)


def fastest(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None) -> int:
    a = parse(argv)
    task = tasks.task_for(EnvConfig(game=a.game))
    spec = nets.net_spec(a.net, task.obs_shape, task.n_actions, task.obs_dtype)
    rng = np.random.default_rng(0)
    theta = (rng.normal(size=spec.n_params) * nets.init_scale(spec)).astype(np.float32)
    obs = task.reference_batch(a.experiences, 0)  # (T, 4, 84, 84) from random play
    table = rng.normal(size=spec.n_params + 100_000).astype(np.float32)
    offs = offsets_of([7], table.size, spec.n_params)
    scale = np.array([a.sigma], np.float32)
    print(f"net {a.net} ({spec.n_params:,} params, {spec.n_actions} actions), {len(obs)} experiences "
          f"of {a.game}, sigma {a.sigma}; fastest of {a.repeats}")  # fmt: skip
    print(f"{'operator':10} {'per parent':>11} {'per child':>10} {'per generation':>15} {'share':>7}")
    for op in a.operators:
        safe_build.parent(op, spec, theta, obs[:2])  # compile
        per_parent = fastest(partial(safe_build.parent, op, spec, theta, obs), a.repeats)
        q = safe_build.parent(op, spec, theta, obs)
        out = np.empty((1, spec.n_params), np.float32)
        child = partial(safe_build.children, op, [q], out, [0], offs, scale, table, a.sigma)
        per_child = fastest(child, a.repeats)
        gen = a.truncation * per_parent + a.population * per_child
        share = 100 * gen / a.generation_s
        print(f"{op:10} {per_parent:10.2f}s {per_child:9.3f}s {gen:14.1f}s {share:6.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
