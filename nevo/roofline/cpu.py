"""This machine's roof: its memory bandwidth and its fp32 peak, measured on all Numba threads (or
as many as asked), and what /proc/cpuinfo and sysfs say of the CPU (model, vector ISA, clock,
last-level cache). nevo.roofline.report's docstring says how each figure is taken."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import numba
import numpy as np
from numba import prange
from threadpoolctl import threadpool_info, threadpool_limits

import nevo.nets.kernels.cpu  # noqa: F401  (it sets OpenMP's wait policy before Numba's first parallel call)
from nevo import machine

FMA_WIDTH = 256  # floats of independent FMA chains per thread
FMA_DEPTH = 16  # dependent FMAs per float per pass (written out in fma_burn)


@numba.njit(parallel=True, nogil=True, cache=True, fastmath=True)
def stream_sum(a, n_chunks):
    """Sum of a (n,) float32, chunk k by whichever thread takes it. speed: fastmath lets LLVM
    vectorise the sum and keep several partial sums, so the loop is bound by the read alone."""
    n = a.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    parts = np.zeros(n_chunks, np.float32)
    for k in prange(n_chunks):  # work = one chunk
        s = np.float32(0)
        for i in range(k * size, min(n, (k + 1) * size)):
            s += a[i]
        parts[k] = s
    return parts.sum()


@numba.njit(parallel=True, nogil=True, cache=True, fastmath={"contract"})
def fma_burn(acc, reps, m, c):
    """reps passes over acc (threads, FMA_WIDTH): each float gets FMA_DEPTH dependent FMAs per pass.

    Work = one thread's row. The j loop vectorises (8 or 16 lanes); its iterations are independent,
    so the core keeps many vector chains in flight; one load and one store per 16 FMAs. m, c keep
    the values at the fixed point c / (1 - m) (no overflow, no denormals); no reassociation, so
    LLVM cannot fold the chain."""
    for t in prange(acc.shape[0]):
        x = acc[t]
        for _ in range(reps):
            for j in range(x.shape[0]):
                v = x[j]
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                x[j] = v


ROW = 512  # floats per row of rows_read: a row of large's first dense layer


@numba.njit(parallel=True, nogil=True, cache=True, fastmath={"contract"})
def rows_read(a, n_chunks):
    """a as rows of ROW floats, each chunk's rows four at a time, each scaled and added into a
    ROW-float accumulator: the read of nevo's dense layer (four weight rows per pass, one store
    per 4 FMAs), with every row read; a.shape[0] a multiple of 4 x ROW x n_chunks."""
    per = a.shape[0] // ROW // n_chunks  # rows per chunk, a multiple of 4
    parts = np.zeros(n_chunks, np.float32)
    for k in prange(n_chunks):  # work = one chunk
        out = np.zeros(ROW, np.float32)
        b = k * per * ROW
        for r in range(b, b + per * ROW, 4 * ROW):
            v0, v1 = a[r : r + ROW], a[r + ROW : r + 2 * ROW]
            v2, v3 = a[r + 2 * ROW : r + 3 * ROW], a[r + 3 * ROW : r + 4 * ROW]
            for o in range(ROW):  # speed: slices of constant length vectorise (index sums did not)
                out[o] = (
                    out[o]
                    + v0[o]
                    + np.float32(0.5) * v1[o]
                    + np.float32(0.25) * v2[o]
                    + np.float32(0.125) * v3[o]
                )
        parts[k] = out.sum()
    return parts.sum()


def memory_bandwidth(nbytes: int, passes: int, threads: int = 0) -> float:
    """Bytes/s of a streaming read of nbytes by `threads` Numba threads (0: all): the best of
    passes passes of each of two reads, one sequential sum per chunk (stream_sum) and a dense
    layer's read of rows (rows_read)."""
    if threads:
        was = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            return memory_bandwidth(nbytes, passes)
        finally:
            numba.set_num_threads(was)
    n_chunks = 8 * numba.get_num_threads()
    n = max(nbytes // 4 // (4 * ROW * n_chunks), 1) * 4 * ROW * n_chunks
    a = np.ones(n, np.float32)  # touched: its pages exist before timing
    best = float("inf")
    for read in (stream_sum, rows_read):
        read(a, n_chunks)  # compiled (or loaded) before timing
        for _ in range(passes):
            t0 = time.perf_counter()
            read(a, n_chunks)
            best = min(best, time.perf_counter() - t0)
    return a.nbytes / best


def fma_peak(seconds: float) -> float:
    """fp32 FLOP/s of fma_burn on all Numba threads, best of 7 timed runs of ~seconds / 3 (the
    2-core VMs gave 78 to 130 GFLOP/s from one run of 3 to the next: the best is the machine's)."""
    acc = np.ones((numba.get_num_threads(), FMA_WIDTH), np.float32)
    m, c = np.float32(0.999), np.float32(0.001)
    fma_burn(acc, 10, m, c)
    reps, best = 100, 0.0
    while True:  # grow reps until one run takes ~seconds / 3
        t0 = time.perf_counter()
        fma_burn(acc, reps, m, c)
        dt = time.perf_counter() - t0
        if dt > seconds / 3:
            break
        reps *= 2
    for _ in range(7):
        t0 = time.perf_counter()
        fma_burn(acc, reps, m, c)
        best = max(best, 2 * FMA_DEPTH * acc.size * reps / (time.perf_counter() - t0))
    return best


def sgemm_peak(seconds: float, threads: int, n: int = 2048) -> tuple[float, int]:
    """(fp32 FLOP/s, BLAS threads) of NumPy's BLAS multiplying two float32 n x n matrices
    (2 n^3 FLOP) on `threads` threads, the best of up to 5 after one warm-up, stopping after
    ~seconds. The BLAS threads it ran on are read back (threadpoolctl): nevo.nets.kernels.cpu
    limits BLAS to one thread process-wide (nevo's own threads use every core), so without the
    context below the product ran on one core: 126 of the 2-core Zen 5 VM's 251
    GFLOP/s, and a sixteenth of the 16-core GPU box's."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        ran_on = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=1)
        a @ b
        best, t_end = 0.0, time.perf_counter() + seconds
        for _ in range(5):
            t0 = time.perf_counter()
            a @ b
            best = max(best, 2 * n**3 / (time.perf_counter() - t0))
            if time.perf_counter() > t_end:
                break
    return best, ran_on


OWN_CHOICE = """
import json, sys
from nevo.roofline.cpu import sgemm_peak
from nevo.machine import blas_kernels
flops, _ = sgemm_peak(float(sys.argv[1]), int(sys.argv[2]))
print(json.dumps([flops, blas_kernels()]))
"""


def own_choice_sgemm(seconds: float, threads: int) -> tuple[float, list[str]] | None:
    """(FLOP/s, kernels) of sgemm_peak in a child process without OPENBLAS_CORETYPE, that is on
    the kernel OpenBLAS itself picks for this CPU; None where the variable is not set (this
    process's sgemm is already that). OpenBLAS reads the variable once, when it loads, so only a
    new process can show what it costs: the 2-core Zen 5 VMs set it to Haswell, whose AVX2 kernels
    ran sgemm at 244-257 GFLOP/s there against 439-482 for the SkylakeX ones OpenBLAS picks."""
    if not machine.forced_blas_kernel():
        return None
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.isfile(os.path.join(root, "pyproject.toml")):  # a checkout's (an installed nevo is found)
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-c", OWN_CHOICE, str(seconds), str(threads)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise RuntimeError(f"the sgemm without OPENBLAS_CORETYPE failed: {done.stderr.strip()[-300:]}")
    flops, kernels = json.loads(done.stdout.strip().splitlines()[-1])
    return flops, kernels


@dataclasses.dataclass
class Peak:
    """The machine's fp32 peak and what it was the faster of."""

    flops: float  # the peak: the fastest figure below
    fma: float  # fma_burn, the FMA probe
    blas: float  # sgemm in this process, on its BLAS kernels
    blas_threads: int
    kernels: list[str]  # this process's OpenBLAS kernels
    own: tuple[float, list[str]] | None  # sgemm on OpenBLAS's own pick (own_choice_sgemm)


def machine_peak(seconds: float, threads: int) -> Peak:
    """The machine's fp32 peak on `threads` threads: the fastest of fma_burn, a BLAS sgemm in this
    process, and, where OPENBLAS_CORETYPE names a kernel, an sgemm on the kernel OpenBLAS itself
    picks for this CPU (own_choice_sgemm: the machine's peak, not the environment's). speed: on the
    H200 box's AVX-512 Xeon the probe reached 21% of the nominal peak (LLVM vectorises it with
    256-bit registers) while OpenBLAS uses 512-bit ones: nevo's convs, then OpenBLAS products, ran
    at up to 186% of a roof set by the probe alone. On the 2-core AMD VMs the probe is the faster on
    AVX2 (131 against 86 GFLOP/s); on Zen 5 it gave 228-437 from one run to the next, against 244-257
    for sgemm on the Haswell kernels the VMs' OPENBLAS_CORETYPE imposes and 439-482 on SkylakeX's."""
    fma = fma_peak(seconds)
    blas, blas_threads = sgemm_peak(seconds, threads)
    own = own_choice_sgemm(seconds, threads)
    flops = max(fma, blas, own[0] if own else 0.0)
    return Peak(flops, fma, blas, blas_threads, machine.blas_kernels(), own)


def nominal_peak(isa: str, mhz: float | None, cores: int) -> float | None:
    """FLOP/s of 2 FMA units per core at the reported clock: lanes (16 AVX-512, 8 AVX2) x 2 x 2."""
    lanes = {"avx512f": 16, "avx2": 8}.get(isa)
    return None if lanes is None or not mhz else 2 * lanes * 2 * mhz * 1e6 * cores


def llc_bytes() -> int:
    """The last-level cache in bytes (Linux sysfs; 32 MiB where unknown)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
            mult = {"K": 1024, "M": 2**20}.get(text[-1], 1)
            best = max(best, int(text.rstrip("KM")) * mult)
    except (OSError, ValueError):
        pass
    return best or 32 * 2**20
