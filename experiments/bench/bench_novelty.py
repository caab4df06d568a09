"""Benchmark knn_novelty: Atari RAM behaviours (uint8, 128 bytes) against a large archive.

    python -m experiments.bench.bench_novelty                    # 1,000 queries vs 100,000, k = 10
    python -m experiments.bench.bench_novelty --threads 1        # one thread

Goal (issue): the novelty of 1,000 RAM behaviours against an archive of 100,000 in <= 1 s on the
2-core machine. Prints, for the best of a few repeats after a warm-up (compilation or cache load),
the wall clock and the process's CPU time of
- before: the first version, one query per thread, bytes unpacked in the inner loop (kept here);
- after: nevo.algos.novelty.knn_novelty, tiles of queries widened to int16 once;
and checks both against the NumPy reference on a few queries.
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from nevo import machine
from nevo.algos.novelty import insert_smallest, knn_novelty, knn_novelty_reference


@numba.njit(nogil=True, cache=True)
def _sq_bytes(a, b):
    s = np.int32(0)
    for j in range(a.shape[0]):
        x = np.int32(a[j]) - np.int32(b[j])
        s = np.int32(s + x * x)
    return s


@numba.njit(parallel=True, nogil=True, cache=True)
def one_query_per_thread(out, queries, reference, k):
    """The 'before' kernel: threads map to queries; each scans the uint8 reference set itself."""
    for i in numba.prange(queries.shape[0]):
        best = np.full(k, np.inf)  # (k,) squared distances, ascending
        for j in range(reference.shape[0]):
            insert_smallest(best, _sq_bytes(queries[i], reference[j]))
        out[i] = np.sqrt(best).mean()


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.bench_novelty", description=__doc__.split("\n")[0]
    )
    p.add_argument("--queries", type=int, default=1000, help="behaviours to score (default: 1000)")
    p.add_argument("--archive", type=int, default=100_000, help="archive size (default: 100000)")
    p.add_argument("--dim", type=int, default=128, help="bytes per behaviour (default: 128, the RAM)")
    p.add_argument("--k", type=int, default=10, help="nearest neighbours (default: 10)")
    p.add_argument("--threads", type=int, default=0, help="numba threads (default: all)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats; the best is reported (default: 5)")
    return p.parse_args(argv)


def timed(fn, repeats: int) -> tuple[float, float]:
    """(best wall s, best process CPU s) of fn over repeats."""
    walls, cpus = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus)


def main(argv=None) -> int:
    a = parse(argv)
    if a.threads:
        numba.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    archive = rng.integers(0, 256, (a.archive, a.dim), dtype=np.uint8)  # (n, d)
    queries = rng.integers(0, 256, (a.queries, a.dim), dtype=np.uint8)  # (q, d)
    print(
        f"machine: {machine.cores()} cores, {numba.get_num_threads()} numba threads | "
        f"{a.queries:,} queries x {a.archive:,} archive x {a.dim} B, k = {a.k}"
    )
    before, after = np.empty(a.queries), np.empty(a.queries)
    t0 = time.perf_counter()
    one_query_per_thread(before[:2], queries[:2], archive[:100], a.k)  # warm-up: compile or load
    knn_novelty(queries[:2], archive[:100], a.k)
    print(f"warm-up (compile or cache load): {time.perf_counter() - t0:.2f} s")

    def run_before():
        one_query_per_thread(before, queries, archive, a.k)

    def run_after():
        after[:] = knn_novelty(queries, archive, a.k)

    pairs = a.queries * a.archive
    for name, fn in (
        ("before (one query per thread)", run_before),
        ("after  (knn_novelty)         ", run_after),
    ):
        wall, cpu = timed(fn, a.repeats)
        rate = pairs / wall / 1e6
        print(f"{name}: {wall:.3f} s wall, {cpu:.3f} s CPU (best of {a.repeats}) | {rate:.0f}M pairs/s")
    check = knn_novelty_reference(queries[:4], archive, a.k)
    assert np.allclose(before[:4], check, rtol=1e-12, atol=0), (before[:4], check)
    assert np.allclose(after[:4], check, rtol=1e-12, atol=0), (after[:4], check)
    print(f"goal <= 1 s: {'met' if wall <= 1.0 else 'NOT met'}; both match the NumPy reference on 4 queries")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
