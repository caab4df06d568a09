"""Compile nevo's CPU kernels into Numba's cache once, on every core, before the first run needs them.

    nevo compile                      # every kernel family, one process per core
    nevo compile --processes 1        # one at a time
    nevo compile --check              # in this process: exit 1 naming each kernel not in the cache

Numba compiles a kernel the first time a process calls it with new argument types, and keeps the
machine code in its cache (`__pycache__` beside the source, or $NUMBA_CACHE_DIR), where every later
process loads it in well under a second. A fresh install therefore spends its first run compiling:
the forward alone takes 20-40 s a kind of input on a 2-core VM (four kinds: 8-bit pixels or float32
vectors, 32- or 16-bit weights), and a cluster's or an emulator pool's worker processes that start
together each compile the same kernel at once. This command compiles the costly families in
parallel processes (a family's kinds in one process, one after the other: two processes writing one
function's cache index at once could lose an entry) and says how long each took; run it after an
install or an edit of a kernel, on every machine of a cluster whose cache is its own. The test suite
runs it before its first test. What it leaves out (the maze's steps, the noise table's row
builders: a second or two each) compiles at its first use as before.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import sys
import time

import numpy as np


def _forward():
    """The batched forward for its four kinds of input: Atari pixels (uint8) and float32 vectors,
    each with 32- and 16-bit weights."""
    from nevo.nets import make_spec, net_spec
    from nevo.nets.kernels import cpu

    atari = net_spec("small")
    vector = make_spec([("dense", 8)], obs_shape=(4, 1, 1), n_actions=2, obs_dtype=np.float32)
    for spec in (atari, vector):
        obs = np.zeros((2, *spec.obs_shape), spec.obs_dtype)
        for dtype in (np.float32, np.float16):
            cpu.forward(spec, np.zeros((2, spec.n_params), dtype), np.array([0, 1]), obs)
    return [cpu._forward]


def _vbn():
    """Virtual batch norm's fold (OpenAI-ES on Atari), over a reference batch of pixels or vectors."""
    from nevo.nets import make_spec, net_spec, vbn

    atari = net_spec("small")
    vector = make_spec([("dense", 8)], obs_shape=(4, 1, 1), n_actions=2, obs_dtype=np.float32)
    for spec in (atari, vector):
        ref = np.ones((2, *spec.obs_shape), spec.obs_dtype)
        vbn.fold(spec, np.full((1, spec.n_params), 0.01, np.float32), ref)
    return [vbn._fold]


def _roofline():
    """nevo roofline's layers timed alone (and the inputs it gives them), 32- and 16-bit weights."""
    import numba

    from nevo.nets import half, net_spec
    from nevo.roofline.layers import layer_inputs, one_layer

    spec = net_spec("small")
    obs = np.zeros((2, *spec.obs_shape), np.uint8)
    for fmt in ("fp32", "fp16"):
        bits = half.kernel_view(half.rounded(np.zeros((2, spec.n_params), np.float32), fmt))
        rows = np.arange(2)
        work = layer_inputs(spec.table, bits, rows, obs, spec.obs_div)
        one_layer(spec.table, 0, bits, rows, obs, spec.obs_div, work, numba.get_num_threads())
    return [layer_inputs, one_layer]


def _safe():
    """Safe mutations' gradients (SM-G-SUM, SM-G-ABS, SM-G-SO, SM-R) and the rows they build, on a
    net with a conv, a pool and a dense layer."""
    from nevo.genomes import safe_build
    from nevo.nets import make_spec
    from nevo.nets.kernels import grad_cpu

    spec = make_spec([("conv", 2, 3, 1), ("pool", 2), ("dense", 4)], obs_shape=(1, 6, 6), n_actions=2,
                     obs_dtype=np.float32)  # fmt: skip
    rng = np.random.default_rng(0)
    theta = (rng.standard_normal(spec.n_params) * 0.1).astype(np.float32)
    experiences = rng.standard_normal((3, *spec.obs_shape)).astype(np.float32)
    table = rng.standard_normal(spec.n_params + 10).astype(np.float32)
    out = np.empty((1, spec.n_params), np.float32)
    for kind in ("sm-g-sum", "sm-g-abs", "sm-g-so", "sm-r"):
        parents = [safe_build.parent(kind, spec, theta, experiences)]
        safe_build.children(kind, parents, out, [0], [0], [0.01], table, 0.1)
    names = ("conv_forward", "pool_forward", "dense_forward", "conv_input_grad", "pool_input_grad",
             "dense_input_grad", "conv_weight_grads", "dense_weight_grads", "column_sums")  # fmt: skip
    return [getattr(grad_cpu, n) for n in names] + [safe_build.safe_rows]


def _small():
    """The rest that every Atari or novelty run calls: the observation's resize, novelty's k-NN
    (RAM bytes and float behaviours)."""
    from nevo.algos import novelty
    from nevo.atari import emulator as atari_emulator

    atari_emulator.compile_kernels()
    for dtype in (np.uint8, np.float32):
        novelty.knn_novelty(np.zeros((2, 3), dtype), np.zeros((4, 3), dtype), 2)
    return [atari_emulator.push_frame, novelty._knn_kernel]


# {name: (the job, its rough cost in seconds on a 2-core VM: the order the processes take them)}
JOBS = {
    "forward": (_forward, 100),
    "vbn": (_vbn, 50),
    "roofline": (_roofline, 45),
    "safe": (_safe, 30),
    "small": (_small, 15),
}


def _run(name: str) -> tuple[str, float, list[str]]:
    """(name, seconds, kernels that compiled rather than loaded) of one job, in this process."""
    t0 = time.perf_counter()
    kernels = JOBS[name][0]()
    missed = [f"{k.py_func.__module__}.{k.__name__}" for k in kernels if sum(k.stats.cache_misses.values())]
    return name, time.perf_counter() - t0, missed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo compile", description=__doc__.split("\n")[0])
    p.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="at most this many at once")
    p.add_argument("--only", nargs="+", choices=list(JOBS), help="these families (default: all)")
    p.add_argument("--check", action="store_true", help="load each family here; exit 1 if any compiles")
    a = p.parse_args(argv)
    if a.processes < 1:
        p.error(f"--processes {a.processes}: at least 1")
    names = sorted(a.only or JOBS, key=lambda n: -JOBS[n][1])
    t0 = time.perf_counter()
    if a.check:
        missed = [k for n in names for k in _run(n)[2]]
        if missed:
            print(f"nevo compile --check: not in Numba's cache: {', '.join(missed)}", file=sys.stderr)
            return 1
        took = time.perf_counter() - t0
        print(f"every kernel of {', '.join(names)} loaded from Numba's cache ({took:.1f} s)")
        return 0
    # new interpreters (spawn): a fork of a process that has run Numba's threads is unsafe
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(a.processes, len(names)), mp_context=context) as pool:
        for name, took, missed in pool.map(_run, names):
            how = "compiled" if missed else "loaded from the cache"
            print(f"{name}: {how} in {took:.1f} s", flush=True)
    families = f"{len(names)} kernel famil{'y' if len(names) == 1 else 'ies'}"
    print(f"nevo compile: {families} in {time.perf_counter() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
