"""The GPU at hand: its memory bandwidth and fp32 peak, measured by probes that check their own
values (gpu_bandwidth, gpu_peak), and nevo's CUDA forward timed against that roof (GpuForward)."""

from __future__ import annotations

import os
import time

import numpy as np
from numba import cuda, float32, int32, uint64

from nevo.nets import half
from nevo.roofline.layers import rate_of, roofline_rate, rotated_weights

GPU_THREADS = 256  # threads per block of the probes
GPU_BLOCKS_PER_SM = 8  # 2,048 threads an SM: as many as a Hopper SM holds
GPU_CHAINS = 8  # independent FMA chains per thread of gpu_burn
GPU_ROUNDS = 4  # FMAs per chain in one pass of gpu_burn's loop


@cuda.jit
def gpu_fill(x):
    """x[i] = i, so that gpu_read's sum says every word was read once."""
    i, stride = cuda.grid(1), cuda.gridsize(1)
    while i < x.size:
        x[i] = uint64(i)
        i += stride


@cuda.jit
def gpu_read(x, out):
    """out[t]: the sum of the words thread t read of x (uint64), in a grid-stride loop.

    speed: four independent 8-byte loads a pass per thread, so that enough bytes are in flight for
    HBM (Little's law: ~4.8 TB/s x ~0.6 us is ~3 MB; a resident grid of 270K threads holds ~8.6
    MB); a warp's 32 loads of one pass are adjacent words, so they coalesce."""
    t, stride = cuda.grid(1), cuda.gridsize(1)
    n, s, i = x.size, uint64(0), t
    while i + 3 * stride < n:
        s += x[i] + x[i + stride] + x[i + 2 * stride] + x[i + 3 * stride]
        i += 4 * stride
    while i < n:
        s += x[i]
        i += stride
    out[t] = s


@cuda.jit
def gpu_burn(out, m, c, iters):
    """GPU_CHAINS independent chains of x * m + c per thread, GPU_ROUNDS x iters times each (NVVM contracts
    each to one fma.rn.f32; with 8 chains a warp's next FMA never waits on its last); m, c hold the
    values near c / (1 - m). out[t]: the chains' start (x, x + 1/8, ...), then their sum.

    speed: `for _ in range(iters)` left 6 instructions of 64-bit loop bookkeeping for every 8 FMAs
    (35 TFLOP/s of the H200's 67); four rounds a pass and an int32 count leave 3 for 32."""
    t = cuda.grid(1)
    x0 = out[t]
    # (float32 constants: a Python float or int would make the chains float64)
    x1, x2, x3 = x0 + float32(0.125), x0 + float32(0.25), x0 + float32(0.375)
    x4, x5 = x0 + float32(0.5), x0 + float32(0.625)
    x6, x7 = x0 + float32(0.75), x0 + float32(0.875)
    k, n = int32(0), int32(iters)
    while k < n:
        for _ in range(GPU_ROUNDS):  # (a constant trip count: unrolled)
            x0 = x0 * m + c
            x1 = x1 * m + c
            x2 = x2 * m + c
            x3 = x3 * m + c
            x4 = x4 * m + c
            x5 = x5 * m + c
            x6 = x6 * m + c
            x7 = x7 * m + c
        k += int32(1)
    out[t] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


def gpu_grid(blocks: int | None) -> int:
    """Blocks of the probes' grids: GPU_BLOCKS_PER_SM per multiprocessor unless given."""
    return blocks or GPU_BLOCKS_PER_SM * cuda.get_current_device().MULTIPROCESSOR_COUNT


def gpu_timed(launch) -> float:
    """Seconds of launch() on the GPU, between two events of the default stream (the wall clock
    under the CUDA simulator, whose events measure nothing)."""
    start, end = cuda.event(), cuda.event()
    t0 = time.perf_counter()
    start.record()
    launch()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    return ms / 1e3 if ms > 0 else time.perf_counter() - t0


def gpu_bandwidth(nbytes: int, passes: int, blocks: int | None = None, threads: int = GPU_THREADS) -> float:
    """Bytes/s of a streaming read of nbytes of the GPU's memory (uint64 words; the best of passes
    timed reads after one checked read: the sum of the words must be that of 0..n-1)."""
    blocks = gpu_grid(blocks)
    n = max(nbytes // 8, 1)
    x, out = cuda.device_array(n, np.uint64), cuda.device_array(blocks * threads, np.uint64)
    gpu_fill[blocks, threads](x)
    gpu_read[blocks, threads](x, out)
    with np.errstate(over="ignore"):
        got = int(out.copy_to_host().sum(dtype=np.uint64))
    if got != (n * (n - 1) // 2) % 2**64:
        raise RuntimeError(f"the GPU's bandwidth probe read wrong values (sum {got} for 0..{n - 1})")
    best = min(gpu_timed(lambda: gpu_read[blocks, threads](x, out)) for _ in range(passes))
    return 8 * n / best


def gpu_peak(seconds: float, blocks: int | None = None, threads: int = GPU_THREADS, iters: int = 0) -> float:
    """fp32 FLOP/s of gpu_burn (2 FLOP per FMA), the best of 5 timed runs of ~seconds / 5 (iters
    doubled from 256 until one run takes that long, unless given); the values are checked
    against the same chains in float64 first."""
    blocks = gpu_grid(blocks)
    m, c = np.float32(0.999), np.float32(0.001)
    start = (np.arange(blocks * threads) % 64 / 64).astype(np.float32)
    out = cuda.to_device(start)
    gpu_burn[blocks, threads](out, m, c, 100)
    x0 = start.astype(np.float64)[:, None] + np.arange(GPU_CHAINS) / GPU_CHAINS
    fixed = float(c) / (1 - float(m))
    want = (fixed + (x0 - fixed) * float(m) ** (GPU_ROUNDS * 100)).sum(axis=1)
    if not np.allclose(out.copy_to_host(), want, rtol=1e-4, atol=1e-4):
        raise RuntimeError("the GPU's FMA probe computed wrong values")

    def run(n):
        return gpu_timed(lambda: gpu_burn[blocks, threads](out, m, c, n))

    n = iters or 256
    while not iters and run(n) < seconds / 5:
        n *= 2
    best = min(run(n) for _ in range(5))
    return 2 * GPU_CHAINS * GPU_ROUNDS * n * blocks * threads / best


class GpuForward:
    """nevo's CUDA policy on the GPU at hand, timed as the CPU forward is (distinct rows, rotated),
    and the GPU's own roof: its memory's streaming read and its fp32 FMA peak, measured."""

    def __init__(self, max_gb: float, seconds: float = 0.3):
        from nevo.nets.kernels.cuda import device_name

        self.name, self.max_gb = device_name(), max_gb
        self.bandwidth = gpu_bandwidth(int(min(max_gb, 2.0) * 2**30), 5)
        self.peak = gpu_peak(seconds)

    def roof(self, flops: float, nbytes: float) -> tuple[float, str]:
        """(forwards/s, bound) of this GPU's roofline for a forward of flops and nbytes."""
        return roofline_rate(flops, nbytes, self.bandwidth, self.peak)

    def forward_rate(self, spec, rows: int, obs, seconds: float, fmt: str = "fp32") -> float:
        from nevo.nets.kernels import make_policy

        weights = half.rounded(rotated_weights(spec, rows, self.max_gb, np.random.default_rng(1), fmt), fmt)
        policy = make_policy("cuda", spec)
        policy.load(weights)
        try:
            n = len(weights)
            return rate_of(lambda k: policy((np.arange(rows) + k * rows) % n, obs), rows, seconds)
        finally:
            policy.release()


def find_gpu(max_gb: float):
    """A GpuForward where a real CUDA GPU (not the simulator) can run nevo's kernels, else None."""
    try:
        from nevo.nets.kernels import resolve_device

        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or resolve_device("auto") != "cuda":
            return None
        return GpuForward(max_gb)
    except Exception:
        return None
