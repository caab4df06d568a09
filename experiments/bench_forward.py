"""Benchmark the Numba CPU forward: forwards/s and weight GB/s, distinct and shared individuals.

    python -m experiments.bench_forward [--net large|small] [--rows 1 8 64] [--individuals N]

"distinct": every row has its own individual, and each timed call uses individuals the previous
calls did not (rotating through all N), so the weights come from memory, not from a warm cache.
"shared": validation's shape, --per-ind rows (default 30) of each of --groups individuals.
GB/s counts every weight byte of each individual a call uses once (the kernel skips the rows of
zero inputs, so it moves fewer bytes than this nominal figure).
"""

import argparse
import time

import numba
import numpy as np

from nevo.kernels.cpu import forward
from nevo.nets import init_scale, net_spec

# Settings (command line overrides)
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--net", default="large", choices=["large", "small"])
parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 8, 32, 64, 128])
parser.add_argument("--individuals", type=int, default=0, help="0: enough for the largest call")
parser.add_argument("--groups", type=int, default=10, help="shared case: individuals")
parser.add_argument("--per-ind", type=int, default=30, help="shared case: rows per individual")
parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
parser.add_argument("--max-gb", type=float, default=4.0, help="cap on the weights array")
args = parser.parse_args()

spec = net_spec(args.net)
bytes_per_ind = spec.n_params * 4
cap = max(1, int(args.max_gb * 1e9 // bytes_per_ind))
n_ind = min(args.individuals or max(max(args.rows), args.groups), cap)
rng = np.random.default_rng(0)
weights = np.empty((n_ind, spec.n_params), np.float32)  # (n_individuals, n_params)
scale = init_scale(spec)
for k in range(n_ind):
    weights[k] = rng.standard_normal(spec.n_params, dtype=np.float32) * scale
print(
    f"net {args.net}: {spec.n_params:,} params, {n_ind} individuals "
    f"({weights.nbytes / 1e9:.2f} GB of weights), {numba.get_num_threads()} Numba threads"
)


def measure(rows_for_call, rows):
    """forwards/s and calls/s of forward over rows_for_call(k), k = 0, 1, ... for ~args.seconds."""
    obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)  # (rows, C, H, W)
    forward(spec, weights, rows_for_call(0), obs)  # warm up: compile or load the cache
    calls, t0 = 0, time.perf_counter()
    while True:
        forward(spec, weights, rows_for_call(calls + 1), obs)
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed > args.seconds and calls >= 3:
            return calls * rows / elapsed, calls / elapsed


forward(spec, weights, np.zeros(1, np.int64), np.zeros((1, *spec.obs_shape), np.uint8))
print(f"threading layer {numba.threading_layer()}")
print(f"{'case':>10} {'rows':>6} {'inds/call':>9} {'forwards/s':>11} {'ms/call':>9} {'GB/s':>7}")
for rows in args.rows:
    inds = min(rows, n_ind)
    fps, cps = measure(lambda k, rows=rows: (np.arange(rows) + k * rows) % n_ind, rows)
    gbs = cps * inds * bytes_per_ind / 1e9
    print(f"{'distinct':>10} {rows:>6} {inds:>9} {fps:>11.0f} {1e3 / cps:>9.2f} {gbs:>7.2f}")
groups = min(args.groups, n_ind)
rows = groups * args.per_ind
fps, cps = measure(lambda k: (np.repeat(np.arange(groups), args.per_ind) + k * groups) % n_ind, rows)
gbs = cps * groups * bytes_per_ind / 1e9
print(f"{'shared':>10} {rows:>6} {groups:>9} {fps:>11.0f} {1e3 / cps:>9.2f} {gbs:>7.2f}")
