"""The Numba CPU forward pass: a batch of rows, each row run by its own individual's weights.

This is a CPU-only machine's bottleneck (every row has its own weights, so the forward, not the
emulators, sets the pace; docs/performance.md measures it): the convs are compute bound, the
first dense layer is memory bound (every row generally has different weights; `large` reads
7,744 x 512 floats = 15.9 MB per row). Choices, each marked where it is made:
- activations are HWC (channels innermost): the innermost loops run over contiguous output
  channels, as do TF's HWIO weights, so they vectorise; the last conv's (H, W, C) output is already
  TF's flatten order;
- each conv (and max-pool) writes into the interior of the next conv's zero-padded input, so no
  conv loop checks bounds: a kernel row (kx, ci) is one contiguous run in both the padded input
  and the weights; a pool's own input is unpadded (its SAME padding never wins the max);
- a conv is nevo's own kernel (`conv_sums`): tiles of 6 output pixels by 16 channels held in
  registers of 8 lanes (nevo.nets.kernels.lanes), reading the padded input in place (no im2col
  copy). It replaced im2col and OpenBLAS's sgemm (through `np.dot`), whose results depended on
  the BLAS kernel (OPENBLAS_CORETYPE) and the matrix's shape, at 1.4-1.9x their speed;
- the dense layers skip zero inputs (half of every ReLU output) and so never read the weight rows
  they would multiply, about halving their memory traffic;
- every multiply-add is written as a fused one (`fma`, `fma8`: LLVM's llvm.fma, rounded once on
  any CPU), no fastmath flag is set, and every sum's order is fixed in the source: a row's result
  is the same bits on any thread count, in any batch, and on any CPU (AVX2, AVX-512, or none;
  tests/test_forward_bits.py compiles it for other targets in subprocesses);
- the dense layers take the rows of one individual together, so shared weights are read once;
- with enough individuals per thread, one parallel pass per individual runs its convs then its
  dense layers: no barrier between layers, and one thread's convs overlap the other's dense reads;
- 16-bit weight rows (--weights fp16, nevo/nets/half.py) arrive as their uint16 bits, and every
  layer widens each weight as it reads it (F16C converts 8 at once); the sums are the fp32
  forward's, so the result is the fp32 forward's on the widened weights, bit for bit, from half
  the bytes (speed: no float32 copy of a row's conv weights, which cost small's one-row forward
  5-7 us and made its convs no faster).
Scratch is allocated once per call: the conv buffers and sums per thread, the dense
layers' inputs and outputs per row.
Every kernel here releases the GIL (nogil), so an emulator thread runs beside the forward.

One module, past the 450 lines others keep to: the conv kernels and the dense one would part
cleanly, but Numba's cache (cache=True) keeps `_forward` with the kernels it calls compiled into
it, and knows only this file's date: a kernel edited in another file would leave `_forward`
running the old one until nevo/nets/kernels/__pycache__ is cleared (numba 0.68.1, checked). So
the kernels most often tuned stay in one file with their caller, and
experiments/bench/ab_forward.py compares two versions of them by swapping this one file.
"""

import os

# speed: OpenMP workers that spin-wait steal the core the emulator thread needs (2 cores: a
# parallel region then waits out whole scheduler slices, ~50 ms per call, measured). Must be set
# before Numba first loads its OpenMP layer; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg.cython_blas  # noqa: E402, F401 (SciPy's BLAS, loaded now: the limit below covers it)
from llvmlite import ir  # noqa: E402
from numba import prange, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.core.extending import intrinsic, overload  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from nevo.nets import (
    ACT,
    B_OFF,
    CIN,
    CONV,
    COUT,
    DENSE,
    IN_H,
    IN_W,
    KH,
    KIND,
    KW,
    OUT_H,
    OUT_W,
    PAD_B,
    PAD_L,
    PAD_R,
    PAD_T,
    POOL,
    STRIDE,
    W_OFF,
)
from nevo.nets.half import DTYPES, is_half_bits, kernel_view, widen
from nevo.nets.kernels.actions import actions_of
from nevo.nets.kernels.common import activate, argmax_row, scale_input
from nevo.nets.kernels.lanes import bcast8, fma, fma8, load8, store8, zeros8

# speed: nevo's threads and emulator processes use every core; BLAS threads of NumPy's products
# elsewhere in the process would oversubscribe them. Process-wide, whichever package loaded BLAS.
threadpool_limits(limits=1, user_api="blas")

_K_CHUNK = 256  # dense inputs per chunk, for rows that share an individual
_MIN_BLOCK = 16  # dense output block: a multiple of 16 floats = one 64-byte cache line
# 0 as an int64 argument of a kernel: a literal 0 would compile the callee once more, for that
# constant (Numba types a literal argument as Literal[int](0)); one dense_block compile per
# weight type where there were two
ZERO = np.int64(0)


@numba.njit(nogil=True, cache=True)
def segments(table):
    """(n_layers + 2,) int64: where each layer's input starts in a row's scratch, then the logits.

    Conv inputs are zero-padded (H + pads, W + pads, Cin) HWC buffers, pool inputs unpadded
    (H, W, C), dense inputs flat. The conv and pool part, seg[:n_conv + 1] (n_conv: the layers
    before the first dense one), is scratch reused by the next row; the rest is kept per row.
    """
    n = table.shape[0]
    seg = np.zeros(n + 2, np.int64)
    for i in range(n):
        if table[i, KIND] == CONV:
            hp = table[i, IN_H] + table[i, PAD_T] + table[i, PAD_B]
            wp = table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]
            seg[i + 1] = seg[i] + hp * wp * table[i, CIN]
        elif table[i, KIND] == POOL:
            seg[i + 1] = seg[i] + table[i, IN_H] * table[i, IN_W] * table[i, CIN]
        else:
            seg[i + 1] = seg[i] + table[i, CIN]
    seg[n + 1] = seg[n] + table[n - 1, COUT]
    return seg


@numba.njit(nogil=True, cache=True)
def first_dense(table):
    """The index of the first dense layer: the convs and pools before it run row by row in a
    thread's scratch, the dense layers after it on rows kept per row."""
    i = 0
    while i < table.shape[0] and table[i, KIND] != DENSE:
        i += 1
    return i


def _is_byte(dtype) -> bool:
    return isinstance(dtype, types.Integer) and dtype.bitwidth == 8 and not dtype.signed


def input_table(obs, div):
    """The net's input of each of the 256 values of a uint8 observation (scale_input of each),
    or an empty array for other observations, which scale_input one by one. Built once per
    forward call (load_obs takes it)."""
    if obs.dtype != np.uint8:
        return np.empty(0, np.float32)
    return np.array([scale_input(np.uint8(v), div) for v in range(256)], np.float32)


@overload(input_table, inline="always")
def _input_table(obs, div):
    if _is_byte(obs.dtype):

        def table_of(obs, div):
            t = np.empty(256, np.float32)
            for v in range(256):
                t[v] = scale_input(np.uint8(v), div)
            return t

        return table_of
    return lambda obs, div: np.empty(0, np.float32)


def input_value(v, table, div):
    """An observation element as the net's input: table[v] for uint8 v (input_table), else
    scale_input(v, div); the same float32 either way."""
    return table[v] if isinstance(v, np.uint8) else scale_input(v, div)


@overload(input_value, inline="always")
def _input_value(v, table, div):
    if _is_byte(v):
        return lambda v, table, div: table[v]
    return lambda v, table, div: scale_input(v, div)


@numba.njit(nogil=True, cache=True)
def load_obs(table, obs, r, dst, div, quotients):
    """obs[r] (C, H, W) -> dst (contiguous), the first layer's zero-padded (H, W, C) float32
    input (obs / div); quotients = input_table(obs, div).

    speed: uint8 pixels are looked up in the table of their quotients, which are the divisions'
    own results (a division per pixel: 41-69 us a Frostbite frame on the 2-core AMD VM, 14 us
    with the table and the views); each image line is written through a (W, C) view of dst,
    indexed by range() alone, so no index needs Numba's check for negatives."""
    c_n, h_n, w_n = obs.shape[1], obs.shape[2], obs.shape[3]
    pt, pl = table[0, PAD_T], table[0, PAD_L]
    wp = w_n + pl + table[0, PAD_R]
    o = obs[r]
    for y in range(h_n):
        d = ((y + pt) * wp + pl) * c_n
        line = dst[d : d + w_n * c_n].reshape((w_n, c_n))  # (W, C) of image line y
        for c in range(c_n):
            src = o[c, y]
            for x in range(w_n):
                line[x, c] = input_value(src[x], quotients, div)


_TILE_PX = 6  # output pixels per tile of conv_sums
_TILE_CO = 16  # output channels per tile: two 8-lane registers


@numba.njit(nogil=True, cache=True)
def cols_size(table):
    """Floats of scratch `conv_rows` needs for any conv layer of this table: its sums, (output
    pixels, Cout), the pixels rounded up to a whole tile of conv_sums."""
    size = 0
    for i in range(table.shape[0]):
        if table[i, KIND] == CONV:
            m = table[i, OUT_H] * table[i, OUT_W]
            size = max(size, (m + _TILE_PX - 1) // _TILE_PX * _TILE_PX * table[i, COUT])
    return size


@numba.njit(nogil=True, cache=True, inline="always")
def patch_start(p, table, i):
    """Where the patch of conv layer i's output pixel p starts in its padded HWC input; a pixel
    past the last one gives the last one's (a tile's spare lanes read real data)."""
    ow, s, cin = table[i, OUT_W], table[i, STRIDE], table[i, CIN]
    wp = table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]
    p = min(p, table[i, OUT_H] * ow - 1)
    return ((p // ow) * s * wp + (p % ow) * s) * cin


@numba.njit(nogil=True, cache=True)
def conv_sums_one(table, i, w, src, sums):
    """conv_sums one output at a time: the twin of its tiles, and the path for a Cout that is not
    a multiple of 16. The same sums in the same order, so the same bits."""
    kh, run, cout = table[i, KH], table[i, KW] * table[i, CIN], table[i, COUT]
    line = (table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]) * table[i, CIN]
    w_off = table[i, W_OFF]
    for p in range(table[i, OUT_H] * table[i, OUT_W]):
        b = patch_start(p, table, i)
        for co in range(cout):
            acc = numba.float32(0.0)
            for ky in range(kh):
                for j in range(run):
                    acc = fma(src[b + ky * line + j], widen(w[w_off + (ky * run + j) * cout + co]), acc)
            sums[p * cout + co] = acc


@numba.njit(nogil=True, cache=True)
def conv_sums(table, i, w, src, sums):
    """The sums of conv layer i of one row, before its bias: sums[p * Cout + co] for output pixel p
    (row-major) and channel co. src is the layer's zero-padded HWC input; sums holds
    cols_size(table) floats.

    w is the row's weights: float32, or a 16-bit row's uint16 bits (each weight widened as it is
    loaded). The order of every sum is fixed here, so a row's result is the same bits on any x86
    or ARM CPU, alone or in any batch: from +0.0, the patch's terms in TF's HWIO order (ky, then
    kx and ci, which are one contiguous run of the padded input), each added by a fused
    multiply-add that rounds once (nevo.nets.kernels.lanes.fma8). conv_sums_one is its twin.
    speed: a tile is 6 output pixels by 16 channels, 12 registers of 8 lanes that stay in
    registers across the whole patch; each term loads two registers of weights and broadcasts one
    input per pixel. Sums of one row on the 2-core AMD EPYC VM: 58 us for small's first conv
    (BLAS's product with its im2col copy: 108), 26 for its second (45); 94-120 us for large's
    convs (128-185).
    """
    cout = table[i, COUT]
    if cout % _TILE_CO != 0:
        conv_sums_one(table, i, w, src, sums)
        return
    kh, run = table[i, KH], table[i, KW] * table[i, CIN]
    line = (table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]) * table[i, CIN]
    w_off = table[i, W_OFF]
    n_px = table[i, OUT_H] * table[i, OUT_W]
    for t0 in range(0, n_px, _TILE_PX):
        b0, b1, b2 = patch_start(t0, table, i), patch_start(t0 + 1, table, i), patch_start(t0 + 2, table, i)
        b3, b4, b5 = (
            patch_start(t0 + 3, table, i),
            patch_start(t0 + 4, table, i),
            patch_start(t0 + 5, table, i),
        )
        for c0 in range(0, cout, _TILE_CO):
            s00, s01, s10, s11, s20, s21 = zeros8(), zeros8(), zeros8(), zeros8(), zeros8(), zeros8()
            s30, s31, s40, s41, s50, s51 = zeros8(), zeros8(), zeros8(), zeros8(), zeros8(), zeros8()
            for ky in range(kh):
                x0, k0 = ky * line, w_off + ky * run * cout + c0
                for j in range(run):
                    x, k = x0 + j, k0 + j * cout  # the term's input (from a patch's start), weight
                    w0, w1 = load8(w, k), load8(w, k + 8)
                    a = bcast8(src, b0 + x)
                    s00, s01 = fma8(a, w0, s00), fma8(a, w1, s01)
                    a = bcast8(src, b1 + x)
                    s10, s11 = fma8(a, w0, s10), fma8(a, w1, s11)
                    a = bcast8(src, b2 + x)
                    s20, s21 = fma8(a, w0, s20), fma8(a, w1, s21)
                    a = bcast8(src, b3 + x)
                    s30, s31 = fma8(a, w0, s30), fma8(a, w1, s31)
                    a = bcast8(src, b4 + x)
                    s40, s41 = fma8(a, w0, s40), fma8(a, w1, s41)
                    a = bcast8(src, b5 + x)
                    s50, s51 = fma8(a, w0, s50), fma8(a, w1, s51)
            o = t0 * cout + c0  # the tile's spare pixels land in sums' spare room
            store8(sums, o, s00)
            store8(sums, o + 8, s01)
            store8(sums, o + cout, s10)
            store8(sums, o + cout + 8, s11)
            store8(sums, o + 2 * cout, s20)
            store8(sums, o + 2 * cout + 8, s21)
            store8(sums, o + 3 * cout, s30)
            store8(sums, o + 3 * cout + 8, s31)
            store8(sums, o + 4 * cout, s40)
            store8(sums, o + 4 * cout + 8, s41)
            store8(sums, o + 5 * cout, s50)
            store8(sums, o + 5 * cout + 8, s51)


@numba.njit(nogil=True, cache=True)
def conv_rows(table, i, w, src, dst, cols):
    """Conv layer i of one row: src its padded input, dst the next layer's input (the next conv's
    padded input, written inside its padding, or, before a pool or a dense layer, flat (H, W, C)).
    cols is float32 scratch of at least cols_size(table) floats. Each output is its sum
    (conv_sums) plus its bias, then the activation."""
    cout, ow = table[i, COUT], table[i, OUT_W]
    if table[i + 1, KIND] == CONV:
        dpt, dpl = table[i + 1, PAD_T], table[i + 1, PAD_L]
        dwp = table[i + 1, IN_W] + dpl + table[i + 1, PAD_R]
    else:
        dpt, dpl, dwp = 0, 0, ow
    conv_sums(table, i, w, src, cols)
    b_off = table[i, B_OFF]
    bias = w[b_off : b_off + cout]
    code = table[i, ACT]
    for oy in range(table[i, OUT_H]):
        d = ((oy + dpt) * dwp + dpl) * cout
        out = dst[d : d + ow * cout].reshape((ow, cout))  # (OW, Cout)
        for ox in range(ow):
            z = cols[(oy * ow + ox) * cout : (oy * ow + ox + 1) * cout]
            for co in range(cout):
                out[ox, co] = activate(z[co] + widen(bias[co]), code)


@numba.njit(nogil=True, cache=True)
def pool_rows(table, i, src, dst):
    """Max-pool layer i of one row: src its (H, W, C) input, dst the next layer's input (a conv's
    padded one, written inside its padding, or flat (H, W, C)).

    Each output is the first largest of its window's cells inside the input (the SAME padding
    never wins), as nevo.genomes.safe_mutation's gradient picks it. Work = one row, every pixel
    and channel; the innermost loop runs over contiguous channels.
    """
    k, s, c = table[i, KH], table[i, STRIDE], table[i, CIN]
    ih, iw, oh, ow = table[i, IN_H], table[i, IN_W], table[i, OUT_H], table[i, OUT_W]
    pt, pl = table[i, PAD_T], table[i, PAD_L]
    if table[i + 1, KIND] == CONV:
        dpt, dpl = table[i + 1, PAD_T], table[i + 1, PAD_L]
        dwp = table[i + 1, IN_W] + dpl + table[i + 1, PAD_R]
    else:
        dpt, dpl, dwp = 0, 0, ow
    # speed: cells and outputs are (C,) views indexed by range() (as in conv_rows), and every
    # output is stored (a select, not a branch) so that the channel loop can vectorise; the pool
    # was not timed apart (mnist's whole forward: 1.46-1.58x with the copies of conv_rows)
    for oy in range(oh):
        y0, y1 = max(oy * s - pt, 0), min(oy * s - pt + k, ih)
        for ox in range(ow):
            x0, x1 = max(ox * s - pl, 0), min(ox * s - pl + k, iw)
            out = dst[((oy + dpt) * dwp + ox + dpl) * c : ((oy + dpt) * dwp + ox + dpl + 1) * c]  # (C,)
            first = src[(y0 * iw + x0) * c : (y0 * iw + x0 + 1) * c]
            for ch in range(c):
                out[ch] = first[ch]
            for iy in range(y0, y1):
                for ix in range(x0, x1):
                    cell = src[(iy * iw + ix) * c : (iy * iw + ix + 1) * c]
                    for ch in range(c):
                        v, m = cell[ch], out[ch]
                        out[ch] = v if v > m else m  # strict: the first largest stays


@numba.njit(nogil=True, cache=True)
def spatial_rows(table, i, w, src, dst, cols):
    """Layer i (a conv or a pool, before the dense layers) of one row: src its input, dst the next's."""
    if table[i, KIND] == POOL:
        pool_rows(table, i, src, dst)
    else:
        conv_rows(table, i, w, src, dst, cols)


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask for the cache line of arr[idx] (a contiguous 1-D array: the line idx items past its
    start) to be fetched into every cache level (LLVM's prefetch: x86's prefetcht0). A hint only:
    nothing is read into the program, and no index check is needed since a prefetch never faults."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]), "llvm.prefetch.p0"
        )
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])  # a read, kept in every level, data
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@numba.njit(nogil=True, cache=True)
def dense_block(table, i, w, act, x0, y0, order, g0, g1, o0, o1, nz):
    """Dense layer i for the rows order[g0:g1] (one individual), outputs o0..o1.

    Work = (group of rows sharing an individual, block of outputs). act[r, x0:] is row r's
    input, act[r, y0:] its output.
    nz is (g1 - g0, n_in) int32 scratch for the indices of each row's nonzero inputs. w is
    float32, or a float16 row's uint16 bits (--weights fp16), each weight widened as it is read.
    """
    n_in, n_out = table[i, CIN], table[i, COUT]
    w0 = table[i, W_OFF] + o0  # weight (k, o0) sits at w0 + k * n_out
    n = o1 - o0
    bias = w[table[i, B_OFF] + o0 : table[i, B_OFF] + o1]
    n_rows = g1 - g0
    count = np.zeros(n_rows, np.int64)  # nonzero inputs of each row
    done = np.zeros(n_rows, np.int64)  # of those, how many are summed so far
    for g in range(n_rows):
        r = order[g0 + g]
        x = act[r, x0 : x0 + n_in]
        # speed: a zero input's weight row is never read from memory. The list of the nonzero
        # ones is built without a branch (every index is written, the count moves on nonzero
        # ones): ReLU zeroes inputs at random, so a branch was mispredicted about every other
        # input (the dense layer alone, 2-core Zen 5 VM: mnist's 1.4x, small's and large's 1.05-1.2x)
        row_nz, c = nz[g], 0
        for k in range(n_in):
            row_nz[c] = k
            c += x[k] != 0
        count[g] = c
        out = act[r, y0 + o0 : y0 + o1]
        for o in range(n):
            out[o] = widen(bias[o])
    # speed: inputs in chunks of _K_CHUNK, every row of the group per chunk: the chunk's weights
    # (256 x 512 floats = 512 KB) come from memory once and from L2 for the group's other rows
    for k_end in range(_K_CHUNK, n_in + _K_CHUNK, _K_CHUNK):
        for g in range(n_rows):
            r = order[g0 + g]
            x = act[r, x0 : x0 + n_in]
            out = act[r, y0 + o0 : y0 + o1]  # 1-D view: vectorises
            q = done[g]
            # speed: four weight rows per pass: four memory streams in flight, one store per 4 FMAs
            while q + 4 <= count[g] and nz[g, q + 3] < k_end:
                k0, k1, k2, k3 = nz[g, q], nz[g, q + 1], nz[g, q + 2], nz[g, q + 3]
                if is_half_bits(w) and q + 8 <= count[g]:  # (a constant: fp32 rows compile without)
                    # speed: 16-bit rows are short (512 bytes in small, 1 KB in large), too short for
                    # the hardware's prefetcher to find before they end, and the next nonzero input's
                    # row is anywhere: ask for the next pass's four rows now. On the 2-core Zen 5 VM
                    # the fp16 dense layer read 22 GB/s against 17-18 (small), 26 against 22 (large);
                    # fp32 rows, twice as long, lost 8% with it (33-35 GB/s without)
                    for j in range(q + 4, q + 8):
                        row = w0 + nz[g, j] * n_out
                        for line in range(0, n, 32):  # a 64-byte line holds 32 halves
                            prefetch(w, row + line)
                a0, a1, a2, a3 = x[k0], x[k1], x[k2], x[k3]
                v0 = w[w0 + k0 * n_out : w0 + k0 * n_out + n]
                v1 = w[w0 + k1 * n_out : w0 + k1 * n_out + n]
                v2 = w[w0 + k2 * n_out : w0 + k2 * n_out + n]
                v3 = w[w0 + k3 * n_out : w0 + k3 * n_out + n]
                for o in range(n):
                    out[o] = fma(
                        a3,
                        widen(v3[o]),
                        fma(a2, widen(v2[o]), fma(a1, widen(v1[o]), fma(a0, widen(v0[o]), out[o]))),
                    )
                q += 4
            while q < count[g] and nz[g, q] < k_end:
                a, v = x[nz[g, q]], w[w0 + nz[g, q] * n_out : w0 + nz[g, q] * n_out + n]
                for o in range(n):
                    out[o] = fma(a, widen(v[o]), out[o])
                q += 1
            done[g] = q
    code = table[i, ACT]
    if code:
        for g in range(n_rows):
            out = act[order[g0 + g], y0 + o0 : y0 + o1]
            for o in range(n):
                out[o] = activate(out[o], code)


@numba.njit(parallel=True, nogil=True, cache=True)
def _forward(table, weights, rows_ind, obs, div, n_threads):
    """(actions (rows,) int64, logits (rows, n_actions) float32); see `forward`."""
    rows, n_layers = rows_ind.shape[0], table.shape[0]
    n_actions = table[n_layers - 1, COUT]
    seg = segments(table)
    n_conv = first_dense(table)  # the convs and pools, before the first dense layer
    base = seg[n_conv]  # dense inputs, outputs and logits of a row: act[r, seg[i] - base]
    act = np.empty((rows, seg[n_layers + 1] - base), np.float32)
    quotients = input_table(obs, div)  # uint8 pixels' inputs, once per call

    # Rows of one individual form a group (stable order): the dense layers share its weights.
    order = np.argsort(rows_ind, kind="mergesort")
    n_groups = 0
    for g in range(rows):
        if g == 0 or rows_ind[order[g]] != rows_ind[order[g - 1]]:
            n_groups += 1
    starts = np.empty(n_groups + 1, np.int64)
    n_groups = 0
    for g in range(rows):
        if g == 0 or rows_ind[order[g]] != rows_ind[order[g - 1]]:
            starts[n_groups] = g
            n_groups += 1
    starts[n_groups] = rows

    if n_groups >= 2 * n_threads:
        # Work = one group: its rows' convs in the thread's scratch (zero borders = SAME padding,
        # written once: only interiors are overwritten, so the buffers stay in the core's L2), then
        # its dense layers. speed: one parallel region, no barrier between the layers, and one
        # thread's convs (compute bound) overlap the other's dense layers (memory bound).
        scr = np.zeros((n_threads, base), np.float32)
        cols = np.empty((n_threads, cols_size(table)), np.float32)
        for t in prange(n_threads):
            for g in range(t, n_groups, n_threads):  # static round robin
                g0, g1 = starts[g], starts[g + 1]
                w = weights[rows_ind[order[g0]]]
                for q in range(g0, g1):
                    r = order[q]
                    if n_conv == 0:
                        load_obs(table, obs, r, act[r], div, quotients)
                        continue
                    load_obs(table, obs, r, scr[t, : seg[1]], div, quotients)
                    for i in range(n_conv):
                        dst = scr[t, seg[i + 1] : seg[i + 2]] if i + 1 < n_conv else act[r]
                        src = scr[t, seg[i] : seg[i + 1]]
                        spatial_rows(table, i, w, src, dst, cols[t])
                for i in range(n_conv, n_layers):
                    nz = np.empty((g1 - g0, table[i, CIN]), np.int32)
                    x0, y0 = seg[i] - base, seg[i + 1] - base
                    dense_block(table, i, w, act, x0, y0, order, g0, g1, ZERO, table[i, COUT], nz)
    else:
        # Few groups (rows shared by individuals): the convs by row, then each dense layer by
        # (group, block of outputs).
        if n_conv == 0:
            for r in prange(rows):  # work = one row
                load_obs(table, obs, r, act[r], div, quotients)
        else:
            # Work = one row, every conv layer, in its thread's scratch (as above). Rows are not
            # split into bands of output rows when they are too few for the threads: steps with
            # that few live rows are under 1% of a generation.
            scr = np.zeros((n_threads, base), np.float32)
            cols = np.empty((n_threads, cols_size(table)), np.float32)
            for t in prange(n_threads):
                for r in range(t, rows, n_threads):  # all rows cost the same: static round robin
                    w = weights[rows_ind[r]]
                    load_obs(table, obs, r, scr[t, : seg[1]], div, quotients)
                    for i in range(n_conv):
                        dst = scr[t, seg[i + 1] : seg[i + 2]] if i + 1 < n_conv else act[r]
                        src = scr[t, seg[i] : seg[i + 1]]
                        spatial_rows(table, i, w, src, dst, cols[t])
        for i in range(n_conv, n_layers):
            # Work = (group, block of outputs); blocks only when groups are too few for the
            # threads, each a multiple of 16 floats so no cache line is split between threads.
            # speed: one thread takes a group whole (two blocks read the nonzero inputs twice and
            # each weight row in two parts: small's one-row dense layer 49 -> 41 us, large's
            # 194 -> 153, the 2-core AMD EPYC VM)
            n_out = table[i, COUT]
            want = max(1, (2 * n_threads + n_groups - 1) // max(n_groups, 1)) if n_threads > 1 else 1
            blocks = max(1, min(want, n_out // (4 * _MIN_BLOCK)))
            per_block = (n_out + blocks - 1) // blocks
            size = (per_block + _MIN_BLOCK - 1) // _MIN_BLOCK * _MIN_BLOCK
            blocks = (n_out + size - 1) // size
            for it in prange(n_groups * blocks):
                g, b = it // blocks, it % blocks
                g0, g1 = starts[g], starts[g + 1]
                nz = np.empty((g1 - g0, table[i, CIN]), np.int32)
                w = weights[rows_ind[order[g0]]]
                x0, y0 = seg[i] - base, seg[i + 1] - base
                o1 = min((b + 1) * size, n_out)
                dense_block(table, i, w, act, x0, y0, order, g0, g1, b * size, o1, nz)

    logits = np.empty((rows, n_actions), np.float32)
    actions = np.empty(rows, np.int64)
    for r in range(rows):
        for a in range(n_actions):
            logits[r, a] = act[r, seg[n_layers] - base + a]
        actions[r] = argmax_row(logits, r, n_actions)
    return actions, logits


def forward(spec, weights, rows_ind, obs):
    """(actions, logits (rows, n_actions) float32) for a batch of rows; actions: greedy (rows,)
    int64, or tanh(logits) for continuous actions (nevo.nets.kernels.actions_of).

    weights (n_individuals, n_params) float32 or float16 (--weights fp16: read as 16 bits, summed in
    float32) C-contiguous; rows_ind (rows,) int64, each row's
    individual; obs (rows, C, H, W) of spec.obs_dtype (uint8 as AtariVectorEnv returns it, or
    float32 vectors as (rows, n, 1, 1)). Only checks happen here:
    the work runs in `_forward`, which releases the GIL.
    """
    if weights.dtype not in DTYPES or weights.ndim != 2 or not weights.flags.c_contiguous:
        raise TypeError("weights must be a C-contiguous (n_individuals, n_params) float32 or float16 array")
    if weights.shape[1] != spec.n_params:
        raise ValueError(f"weights have {weights.shape[1]} params, the spec {spec.n_params}")
    rows_ind = np.ascontiguousarray(rows_ind, dtype=np.int64)
    obs = np.ascontiguousarray(obs)
    if obs.dtype != spec.obs_dtype or obs.shape != (len(rows_ind), *spec.obs_shape):
        raise ValueError(
            f"obs must be {spec.obs_dtype} of shape {(len(rows_ind), *spec.obs_shape)}, "
            f"got {obs.dtype} {obs.shape}"
        )
    if len(rows_ind) and (rows_ind.min() < 0 or rows_ind.max() >= weights.shape[0]):
        raise IndexError(f"rows_ind must lie in [0, {weights.shape[0]})")
    # numba.get_num_threads() is read here: inside _forward it would stop cache=True working.
    threads = numba.get_num_threads()
    greedy, logits = _forward(spec.table, kernel_view(weights), rows_ind, obs, spec.obs_div, threads)
    return actions_of(spec, greedy, logits), logits
