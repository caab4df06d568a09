"""Individuals built on the GPU: the noise table resident there and `build_rows` as a CUDA kernel.

The compact genomes of Such et al. 2017 (arXiv 1712.06567) make a child its parent plus
sigma * eps(seed), eps a slice of one shared table. Built on the host, a generation's weights
(1,000 x 4M float32 for the large net: 16 GB) would cross to the GPU every evaluation; built
here, what crosses is the parents' weights (or ES's theta) and each row's (base, offset, scale),
and host memory never holds the population.

Bit for bit the CPU build (nevo.genomes.noise.build_rows): each element is one float32 product and one
float32 sum, each rounded. NVVM fuses `a + b * c` into one FMA (rounded once) unless told not
to, so the kernel multiplies and adds with libdevice's fmul_rn and fadd_rn, which it never fuses.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import cuda

from nevo.nets.kernels.cuda import ceil_div, check_fits, device_name

if numba.config.ENABLE_CUDASIM:  # the simulator's libdevice functions are stubs

    def mul_rn(a, b):
        return np.float32(np.float32(a) * np.float32(b))

    def add_rn(a, b):
        return np.float32(np.float32(a) + np.float32(b))

else:
    from numba.cuda.libdevice import fadd_rn as add_rn
    from numba.cuda.libdevice import fmul_rn as mul_rn

BUILD_THREADS = 256  # threads per block, over a row's elements
ROW_BLOCKS = 64  # at most this many blocks per row (each thread then strides over the row)
LINE = 128  # bytes: a row's length in memory is a multiple of this


def pitch(n_params: int, itemsize: int = 4) -> int:
    """Numbers between the starts of two individuals' rows on the device: n_params rounded up to
    128 bytes, so that every row, and the 128-byte lines its kernels read, start aligned (the
    large net's 4,052,658 parameters are 18 mod 32: unpadded, most rows start mid-line and a
    warp's 128-byte load of a weight row touches two lines)."""
    per_line = LINE // itemsize
    return ceil_div(n_params, per_line) * per_line


@cuda.jit
def build_rows_kernel(out, base, base_idx, offsets, init_scale, scale, table):
    """Write each out row i as nevo.genomes.noise.build_rows does:
    base_idx[i] < 0   fresh network: init_scale * eps(offsets[i])
    offsets[i] < 0    copy of base[base_idx[i]]
    otherwise         child: base[base_idx[i]] + scale[i] * eps(offsets[i]).
    out float16 (--weights fp16): each element computed in float32 as above, then rounded to
    nearest (ties to even) as it is stored, as nevo.nets.half.round_rows rounds on the host."""
    # Threads: grid (blocks per row, rows), block (BUILD_THREADS,). Block (q, i) writes row i's
    # elements q*BUILD_THREADS + t, then a grid-row stride on: consecutive threads write, and
    # read the table and the base at, consecutive elements (coalesced).
    i = cuda.blockIdx.y
    n_params = init_scale.shape[0]  # out's rows may be longer (a pitch): the rest is left as is
    b, o, sig = base_idx[i], offsets[i], scale[i]
    stride = cuda.gridDim.x * cuda.blockDim.x
    for j in range(cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, n_params, stride):
        if b < 0:
            out[i, j] = mul_rn(init_scale[j], table[o + j])
        elif o < 0:
            out[i, j] = base[b, j]
        else:
            out[i, j] = add_rn(base[b, j], mul_rn(sig, table[o + j]))


def launch_build(out, base, base_idx, offsets, init_scale, scale, table, stream=0) -> None:
    """build_rows_kernel over every row of out (device arrays; rows may be padded), on stream."""
    n, p = out.shape[0], init_scale.shape[0]
    if n == 0:
        return
    threads = min(BUILD_THREADS, ceil_div(p, 32) * 32)
    blocks = min(ROW_BLOCKS, ceil_div(p, threads))
    build_rows_kernel[(blocks, n), threads, stream](out, base, base_idx, offsets, init_scale, scale, table)


class DeviceWeights:
    """A population's rows built on the GPU where the policy reads them (nevo.episodes.weights'
    interface: start, take, done). The builder (nevo.genomes.noise.WeightBuilder) readies the bases on
    the host (parents: cached or rebuilt; ES: theta); they, the table (once) and the rows'
    (base, offset, scale) go up, and one launch writes every row."""

    def __init__(self, builder):
        self.builder = builder
        self.stream = cuda.stream()
        self._table = self._init = None  # device copies, uploaded on first use
        self._bases = None  # device (K, P) of the host bases last uploaded ...
        self._bases_of = None  # ... which host array they are
        self.rows = None  # device (capacity, pitch(P)) of the builder's dtype (--weights)

    @property
    def max_rows(self) -> int:
        """Rows that fit in the GPU's free memory after the table and the rows held now."""
        free = cuda.current_context().get_memory_info().free
        held = 0 if self.rows is None else self.rows.nbytes
        table = 0 if self._table is not None else self.builder.table.nbytes
        size = self.builder.dtype.itemsize
        row = size * pitch(self.builder.n_params, size)
        return max(1, int(0.9 * (free + held - table)) // row - 2 * len(self.builder.bases))

    def start(self, population, ind: np.ndarray, slots: int):
        """Build every row of population on the device; returns the (rows, pitch(P)) device array
        (CudaPolicy.load takes rows longer than the net: a pitch)."""
        b, s = self.builder, self.stream
        b.use(population)
        if self._table is None:
            check_fits(b.table.nbytes, cuda.current_context().get_memory_info().free,
                       f"the noise table ({b.table.size:,} float32)", device_name())  # fmt: skip
            self._table = cuda.to_device(b.table, stream=s)
            self._init = cuda.to_device(b.init_scale, stream=s)
        if self._bases_of is not b.bases:
            self._bases = cuda.to_device(np.ascontiguousarray(b.bases), stream=s) if len(b.bases) else None
            self._bases_of = b.bases
        n = len(population)
        size = b.dtype.itemsize
        if self.rows is None or self.rows.shape[0] < n:
            self.rows = None
            need = size * n * pitch(b.n_params, size)
            check_fits(need, cuda.current_context().get_memory_info().free,
                       f"the weights of {n:,} individuals", device_name())  # fmt: skip
            self.rows = cuda.device_array((n, pitch(b.n_params, size)), b.dtype)
        base_idx, offsets, scale = b.plan(np.arange(n))
        bases = self._bases if self._bases is not None else self.rows  # no base: fresh rows only (unread)
        up = [cuda.to_device(a, stream=s) for a in (base_idx, offsets, scale)]  # a few KB
        launch_build(self.rows[:n], bases, up[0], up[1], self._init, up[2], self._table, s)
        s.synchronize()
        return self.rows[:n]

    def take(self, inds) -> np.ndarray:
        return np.asarray(inds, np.int64)

    def done(self, ind: int) -> None:
        pass
