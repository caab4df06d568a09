"""The numba.cuda forward pass: many different networks at once, only for the episodes still running.

Uber's "Accelerating Deep Neuroevolution" (2018) batches the population's *different* networks on
the GPU and runs only the rows whose episodes are still going. Here a step's rows are the active
episodes: their observations (NetSpec.obs_dtype: uint8 pixels as the emulator gives them, or float32
vectors) and a row -> individual index; finished episodes are simply not rows, so nothing is
computed for them.

Memory: the population's weights go to the device once per evaluation (`load`) and stay there;
each step uploads the rows' observations and a small int32 index block and downloads only
the int32 actions. Row buffers are allocated for a capacity of rows and reused; they grow
geometrically (x2) only when a step has more rows than ever before, and never shrink.

Why one file (about a thousand lines): every kernel here shares the policy's device buffers and the launch
arithmetic that maps threads to (row, channel, pixel); split by layer, a kernel would sit apart from
the launch code that sizes its grid, and that pairing is what a reader checks first.

Kernels, launched in this order each step (one per layer; thread maps are stated at each kernel):
  conv          one per conv layer; the first reads the observations directly (obs / obs_div)
  pool          one per max-pool layer (after a conv's ReLU): one thread per output element
  dense         hidden dense layers: partial sums over chunks of K_CHUNK inputs, rows of one
                individual together in tiles, so each weight is read once per tile
  dense_finish  bias + the chunks' partial sums (a fixed order: deterministic) + ReLU
  output        the output layer and the greedy action (first argmax)
Activations are HWC, as the CPU kernels and TF, so the last conv output is already flat in TF's
flatten order. Per-element math comes from nevo/nets/kernels/common.py, shared with the CPU backend.
Each layer's kernel is compiled for its geometry (the sizes are closure constants), so loops have
constant bounds and the small per-thread arrays live in registers.

Where the time goes (`large`, 1,000 rows of 1,000 individuals): the first dense layer reads
7,744 x 512 float32 = 15.9 MB per individual, 16 GB per step; the convs are 12M MACs per row and
compute bound. The dense kernel is therefore written for bandwidth (coalesced weight rows, two
weights a load, loads in flight, zero inputs' weight rows skipped), the conv kernel for few loads
per FMA. Measured on an H200 (1,000 rows): the dense layer is ~40% of `large`'s kernel time, its
three convs ~60%, at ~9 TFLOP/s.
"""

import functools
import warnings
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda, float32, int32
from numba.cuda.core.errors import NumbaPerformanceWarning

from nevo.nets import ACT_CODES, half
from nevo.nets.kernels import common
from nevo.nets.kernels.take import checked_take


def quiet_small_grids():
    """Silence numba-cuda's warning for grids under 128 blocks (and no other warning).

    A step launches one block row per live episode, so late in a generation, and for small
    populations, grids are small on purpose: that warning would print on most steps of a run
    (seen on an H200: ~20 distinct warnings in three generations). Called at import and by every
    CudaPolicy (a caller's warnings.catch_warnings may have dropped the first filter); adding the
    same filter again replaces it.
    """
    warnings.filterwarnings(
        "ignore", r".*Grid size \d+ will likely result in GPU under-utilization", NumbaPerformanceWarning
    )


quiet_small_grids()


def _shared(f):
    """A common.py helper as a kernel calls it: compiled for the GPU, its Python under the simulator.

    (The simulator runs kernels as Python threads; a compiled njit function cannot take its arrays.)
    """
    return f.py_func if numba.config.ENABLE_CUDASIM else f


activate, scale_input, inside, argmax_row = map(
    _shared, (common.activate, common.scale_input, common.inside, common.argmax_row)
)

PX = 4  # conv: output pixels per thread (each weight load feeds PX FMAs)
CONV_MAX_THREADS = 1024  # conv: threads per block at most (CUDA's limit): taller outputs are tiled
K_CHUNK = 256  # dense: inputs per block; the partial sums split the input dimension in chunks
TILE_ROWS = 8  # dense: at most this many rows of one individual per block (weights read once)
DENSE_THREADS = 256  # dense: threads per block, over the outputs
UNROLL = 4  # dense: weight rows loaded before any is used (loads in flight per thread)
OUT_THREADS = 128  # output layer: threads per block (one block per row)
POOL_THREADS = 128  # max-pool: threads per block, over a row's (pixel, channel) outputs
# speed: an unsigned index skips Numba's negative-index wraparound (3 more instructions a load);
# hot loops index with U(i) where i >= 0 is known (a cast, no instruction).
U = numba.uint64


class DeviceMemoryError(MemoryError):
    """The population (or the row buffers) does not fit in the GPU's free memory."""


def check_fits(need, free, what, device="the GPU"):
    """Raise DeviceMemoryError, naming the GiB needed and free, when need > free bytes."""
    if need > free:
        raise DeviceMemoryError(
            f"--device cuda: {what} need {need / 2**30:.2f} GiB on {device}, but only "
            f"{free / 2**30:.2f} GiB is free; use a smaller --population, --net small or --device cpu"
        )


def ceil_div(a, b):
    return -(-a // b)


# ---- reading a layer's input: the first layer reads the observations -----------------------------


@functools.cache
def flat_obs_reader(div):
    """The dense layers' reader of the observations, as the first layer: scale_input(v, div).

    div is NetSpec.obs_div (255.0 for uint8 pixels, 1.0 for float32 vectors). It is a closure
    constant, not an argument: each kernel divides by a compiled-in constant (a division by 1.0
    folds away), and kernels for the two observation kinds are compiled apart (cached per div).
    (A first conv does not divide per input: it sums raw values and divides once per output.)
    """

    @cuda.jit(device=True, inline=True)
    def flat_obs(src, r, k):
        """Flat input k of row r from obs (rows, C, H, W) / div, in (H, W, C) order as TF flattens."""
        n_c, n_w = src.shape[1], src.shape[3]
        return scale_input(src[r, k % n_c, k // (n_c * n_w), (k // n_c) % n_w], div)

    return flat_obs


@cuda.jit(device=True, inline=True)
def _flat_act(src, r, k):
    """Flat input k of row r from an activation (rows, n) float32."""
    return src[r, k]


# ---- the kernels, one factory per layer kind (sizes are compile-time constants) ------------------


# conv: the input window a block stages in shared memory, at most this many bytes (of the 48 KB
# a block may hold statically; the rest is left so that two blocks fit on one SM).
WINDOW_BYTES = 32 * 1024


def conv_tiling(kh, s, cin, oh, ow, co_t=1, px=PX):
    """(output rows per block, window rows, window columns) of a SAME conv: a block computes
    `tile` output rows and stages their input window, padding included, in shared memory. Rows
    per tile: as many as the window's bytes allow (WINDOW_BYTES) and its threads (co_t channel
    lanes x a thread per px pixels, at most CONV_MAX_THREADS: MNIST's 28x28 stride-1 first conv
    would need 3,136 in one tile)."""
    cols = (ow - 1) * s + kh  # the padded input columns every output row reads
    by_bytes = ((WINDOW_BYTES // (4 * cols * cin)) - kh) // s + 1
    by_threads = (CONV_MAX_THREADS // co_t) * px // ow
    most = max(1, min(oh, by_bytes, by_threads))
    n_tiles = ceil_div(oh, most)
    tile = ceil_div(oh, n_tiles)  # balanced: tiles of equal height but the last
    return tile, (tile - 1) * s + kh, cols


@functools.cache
def conv_kernel(kh, kw, s, cin, cout, ih, iw, oh, ow, pt, pl, w_off, b_off, act, obs_div, px=PX):
    """(kernel, grid_x, block) of a SAME conv layer with these sizes; see `obs_div` below.

    obs_div None: a later layer, reading the previous activation; else the first layer, reading
    the observations, whose raw values it sums and divides by obs_div once per output
    (NetSpec.obs_div: 255 for pixels). kernel(src, dst, weights, rows_ind): src obs (rows, C, H, W)
    (uint8 or float32) or (rows, IH, IW, Cin) float32, dst (rows, OH, OW, Cout) float32; launch
    with grid (grid_x, rows). px: output pixels per thread (PX unless a benchmark tries another;
    a pixel's sum runs in the same order whatever px is, so the outputs are the same bit for bit).
    """
    first = obs_div is not None
    inv_div = float32(1.0 / obs_div) if first else float32(1.0)
    cg = max(1, min(4, cout // 16))  # output channels per thread
    co_t = ceil_div(cout, cg)  # threads across the output channels
    tile, win_h, win_w = conv_tiling(kh, s, cin, oh, ow, co_t, px)
    n_tiles = ceil_div(oh, tile)
    tile_pix = tile * ow
    pg_t = ceil_div(tile_pix, px)  # threads across a tile's output pixels, px each
    # The last thread's pixels past the tile (tile_pix not a multiple of px) are computed and
    # never written; the window holds the rows they read, so every pixel's window offset is
    # that of its own index p = ty * px + i. (Replacing such a p by 0 made one kernel fault on
    # an H200 with CUDA_ERROR_MISALIGNED_ADDRESS: ptxas pairs a pixel's shared loads into 64-
    # and 128-bit ones from the alignment p = ty * px + i gives, which the 0 did not keep.)
    win_h = max(win_h, ((pg_t * px - 1) // ow) * s + kh)
    win = win_h * win_w * cin  # (win_h, win_w, cin) float32 in shared memory
    threads = co_t * pg_t
    exact = cout % cg == 0  # every thread's channels exist: no bounds test (a constant)

    @cuda.jit
    def conv(src, dst, weights, rows_ind):
        # Threads: grid (tiles, rows), block (co_t, pg_t). Block (bt, r) computes output rows
        # bt*tile .. bt*tile + tile-1 of row r. First every thread helps copy the tile's input
        # window, SAME padding as zeros, into shared memory (HWC); then thread (tx, ty) computes
        # the tile's output pixels ty*px .. ty*px + px-1 (flat (oy, ox) order) for the output
        # channels tx, tx + co_t, ... (cg of them): px x cg sums in registers.
        # speed:
        # - the inner loop reads the window at offsets fixed per thread and per tap: no bounds
        #   test (the padding is in the window), no index division, int32 arithmetic;
        # - per (tap, input channel) a thread loads cg weights and px window values for px*cg
        #   FMAs; consecutive tx read consecutive weights (HWIO: Cout innermost: coalesced);
        # - the first layer sums raw pixel values and divides once per output, not per input.
        r, bt = cuda.blockIdx.y, cuda.blockIdx.x
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        t = ty * co_t + tx
        w = weights[rows_ind[r]]  # (n_params,) this row's individual
        x_r = src[r]  # (C, H, W) obs or (H, W, C) float32
        window = cuda.shared.array(win, float32)
        y0 = bt * tile * s - pt  # input row of the window's first row
        for e in range(t, win, threads):
            if first:  # obs (C, H, W): consecutive threads read consecutive pixels
                c = e // (win_h * win_w)
                y = (e // win_w) % win_h
                x = e % win_w
            else:  # activations (H, W, C): consecutive threads read consecutive channels
                c = e % cin
                y = e // (win_w * cin)
                x = (e // cin) % win_w
            iy, ix = y0 + y, x - pl
            v = float32(0)
            if inside(iy, ih) and inside(ix, iw):
                v = float32(x_r[c, iy, ix]) if first else x_r[iy, ix, c]
            window[(y * win_w + x) * cin + c] = v
        cuda.syncthreads()

        acc = cuda.local.array((px, cg), float32)
        wv = cuda.local.array(cg, float32)
        at = cuda.local.array(px, int32)  # each pixel's window offset at tap (0, 0)
        for i in range(px):
            p = ty * px + i  # past the tile: computed from the window's extra rows, never written
            at[i] = int32(((p // ow) * s * win_w + (p % ow) * s) * cin)
            for j in range(cg):
                acc[i, j] = float32(0)
        for ky in range(kh):
            for kx in range(kw):
                tap = w_off + (ky * kw + kx) * cin * cout + tx
                shift = int32((ky * win_w + kx) * cin)
                for ci in range(cin):
                    at_ci = tap + ci * cout
                    for j in range(cg):
                        co = tx + j * co_t
                        wv[j] = float32(w[U(at_ci + j * co_t)]) if exact or co < cout else float32(0)
                    for i in range(px):
                        a = window[U(at[i] + shift + ci)]
                        for j in range(cg):
                            acc[i, j] += a * wv[j]
        for i in range(px):
            p = ty * px + i
            oy = bt * tile + p // ow
            if p < tile_pix and oy < oh:
                ox = p % ow
                for j in range(cg):
                    co = tx + j * co_t
                    if exact or co < cout:
                        bias = float32(w[b_off + co])
                        v = acc[i, j] * inv_div + bias if first else acc[i, j] + bias
                        dst[r, oy, ox, co] = activate(v, act)

    return conv, n_tiles, (co_t, pg_t)


@functools.cache
def pool_kernel(k, s, c, ih, iw, oh, ow, pt, pl):
    """(kernel, grid_x, threads) of a SAME max-pool layer, k x k windows at stride s.

    kernel(src, dst): src (rows, IH, IW, C), dst (rows, OH, OW, C) float32; launch with grid
    (grid_x, rows). Each output is the first largest of its window's cells inside the input (the
    SAME padding never wins), as the CPU's pool_rows and safe mutations' gradient pick it.
    """
    n = oh * ow * c  # outputs per row
    threads = min(POOL_THREADS, ceil_div(n, 32) * 32)

    @cuda.jit
    def pool(src, dst):
        # Threads: one per (row, output pixel, channel): grid (blocks of a row's outputs, rows);
        # consecutive threads take consecutive channels of a pixel, then the next pixel (HWC), so
        # reads and writes are coalesced. A window is a few loads: no shared memory.
        e, r = cuda.blockIdx.x * threads + cuda.threadIdx.x, cuda.blockIdx.y
        if e < n:
            ch, ox, oy = e % c, (e // c) % ow, e // (c * ow)
            y0, x0 = oy * s - pt, ox * s - pl
            best = src[r, max(y0, 0), max(x0, 0), ch]  # the first cell inside the input
            for ky in range(k):
                for kx in range(k):
                    if inside(y0 + ky, ih) and inside(x0 + kx, iw):
                        v = src[r, y0 + ky, x0 + kx, ch]
                        if v > best:  # strict: the first largest stays
                            best = v
            dst[r, oy, ox, ch] = best

    return pool, ceil_div(n, threads), threads


@cuda.jit(device=True)
def _compact(flag, tmp, out, t, threads):
    """out[:n] = the k in [0, K_CHUNK) with flag[k] = 1, in increasing order; returns n.

    Block-wide (every thread calls it); flag is overwritten by its prefix sum (Hillis-Steele:
    log2(K_CHUNK) rounds), which gives each kept k its place: deterministic, unlike atomics.
    """
    off = 1
    while off < K_CHUNK:
        for k in range(t, K_CHUNK, threads):
            tmp[k] = flag[k] + (flag[k - off] if k >= off else 0)
        cuda.syncthreads()
        for k in range(t, K_CHUNK, threads):
            flag[k] = tmp[k]
        cuda.syncthreads()
        off *= 2
    for k in range(t, K_CHUNK, threads):
        before = flag[k - 1] if k > 0 else 0
        if flag[k] > before:
            out[before] = k
    cuda.syncthreads()
    return flag[K_CHUNK - 1]


# ---- weights loaded several at a time (the dense layer's words) -------------------------------------
#
# The dense kernel can load its weights as words: a float16 row read as uint32 (2 halves a load) or
# uint64 (4), a float32 row as uint64 (2 floats). A warp's load of 32 words then covers 128-256
# bytes, so fewer load instructions (and their latency) move a row's bytes. On an H200 (1,000 rows,
# `bench_forward --device cuda --word-bytes`), 2 weights a load ran the kernels 1.02-1.05x faster
# for `large` and 1.13-1.19x for `small` than 1 a load, in either format; 4 halves a load were
# slower than 2. Hence DENSE_WORD.


def _nth_half_py(word, g):
    """float32 of the g-th IEEE half (from the low bits) packed in the integer `word`."""
    return np.float32(np.uint16((int(word) >> (16 * g)) & 0xFFFF).view(np.float16))


def _nth_float_py(word, g):
    """The g-th float32 (from the low bits) packed in the integer `word`."""
    return np.uint32((int(word) >> (32 * g)) & 0xFFFFFFFF).view(np.float32)


def _nth_codegen(bits):
    """An intrinsic's codegen: the g-th `bits`-wide field of an integer word, as float32."""

    def codegen(context, builder, signature, args):
        word, g = args
        if g.type.width != word.type.width:  # g: an int64 loop index; word: uint32 or uint64
            g = builder.zext(g, word.type) if g.type.width < word.type.width else builder.trunc(g, word.type)
        shift = builder.mul(g, ir.Constant(word.type, bits))
        field = builder.trunc(builder.lshr(word, shift), ir.IntType(bits))
        if bits == 32:
            return builder.bitcast(field, ir.FloatType())
        # IEEE half to float32 as numba-cuda converts float16 (cvt.f32.f16: exact)
        cvt = ir.InlineAsm(ir.FunctionType(ir.FloatType(), [ir.IntType(16)]), "cvt.f32.f16 $0, $1;", "=f,h")
        return builder.call(cvt, [field])

    return codegen


if numba.config.ENABLE_CUDASIM:  # the simulator runs kernels as Python
    _nth_half, _nth_float = _nth_half_py, _nth_float_py
else:
    from llvmlite import ir
    from numba.cuda.extending import intrinsic

    @intrinsic
    def _nth_half(typingctx, word, g):
        if word in (numba.uint32, numba.uint64) and isinstance(g, numba.types.Integer):
            return float32(word, g), _nth_codegen(16)
        return None

    @intrinsic
    def _nth_float(typingctx, word, g):
        if word == numba.uint64 and isinstance(g, numba.types.Integer):
            return float32(word, g), _nth_codegen(32)
        return None


@cuda.jit(device=True, inline=True)
def _as_float32(word, g):
    """A word of one weight (float32 or float16) as float32."""
    return float32(word)


# The dense layers' load width in bytes, by weight size (CudaPolicy's word_bytes overrides it).
DENSE_WORD = {4: 8, 2: 4}
WORDS = {(4, 8): np.uint64, (2, 4): np.uint32, (2, 8): np.uint64}  # (weight bytes, word bytes): dtype


def dense_loads(lay, itemsize, word_bytes=None):
    """(per_word, halves): how many weights a load the dense kernel reads for layer lay with
    weights of itemsize bytes, at word_bytes (None: DENSE_WORD's) where the layer's outputs and
    offset are whole words, else 1; halves: the words hold IEEE halves. (The rows' pitch is
    word_view's to check.)"""
    per_word = max(1, (word_bytes or DENSE_WORD[itemsize]) // itemsize)
    if lay.cout % per_word or lay.w_offset % per_word:
        per_word = 1
    return per_word, itemsize == 2 and per_word > 1


def word_view(weights, word_bytes):
    """weights (n, pitch) on the device as words of word_bytes (a copy-free view), or None where its
    rows cannot be read so (a row not a whole number of words, a start not aligned to a word, or
    not C-contiguous)."""
    itemsize = weights.dtype.itemsize
    if word_bytes == itemsize:
        return weights
    if (itemsize, word_bytes) not in WORDS or (weights.shape[1] * itemsize) % word_bytes:
        return None
    start = getattr(weights, "__cuda_array_interface__", {"data": (0,)})["data"][0]  # (none: simulator)
    if start % word_bytes:  # (an array handed in at an offset)
        return None
    try:
        return weights.view(WORDS[itemsize, word_bytes])
    except ValueError:  # not C-contiguous
        return None


@functools.cache
def dense_kernel(n_in, n_out, w_off, obs_div, per_word=1, halves=False):
    """(kernel, n_chunks, threads) of a hidden dense layer's partial sums; obs_div as conv_kernel's.

    kernel(src, partial, weights, rows_ind, order, tile_start, tile_count): src (rows, n_in)
    (or obs), partial (n_chunks, rows, n_out) float32; launch with grid (n_chunks, n_tiles).
    Tile t is the rows order[tile_start[t] : tile_start[t] + tile_count[t]], one individual's.
    weights: the rows, read per_word weights a load: per_word 1 reads them as they are (float32
    or float16); per_word 2 or 4 reads them from a word_view (halves: the words hold IEEE halves,
    else float32), which needs n_out and w_off to be multiples of per_word.
    """
    if n_out % per_word or w_off % per_word:
        raise ValueError(f"dense_kernel: {per_word} weights a load need n_out and w_off multiples of it")
    read = _flat_act if obs_div is None else flat_obs_reader(obs_div)
    G = per_word
    nth = _as_float32 if G == 1 else _nth_half if halves else _nth_float  # word, g -> a weight
    units = n_out // G  # words in a weight row
    threads = min(DENSE_THREADS, ceil_div(units, 32) * 32)
    per_t = ceil_div(units, threads)  # words per thread
    n_o = per_t * G  # outputs per thread
    exact = units % threads == 0  # every thread's words exist: no bounds test (a constant)
    w_base = w_off // G

    @cuda.jit
    def dense(src, partial, weights, rows_ind, order, tile_start, tile_count):
        # Threads: grid (input chunks, tiles), block (threads,). Block (c, tile) sums inputs
        # c*K_CHUNK .. c*K_CHUNK + K_CHUNK-1 for the tile's rows (<= TILE_ROWS rows of one
        # individual) into partial[c, row, :]; thread x owns the words x, x + threads, ... of
        # each weight row, that is outputs G*x .. G*x + G-1, G*(x + threads) ...
        # speed (bandwidth bound: these weights are most of the bytes of a step):
        # - consecutive threads read consecutive words of one input row ((in, out) row-major):
        #   every warp load is one or more full 128-byte lines;
        # - each weight is read once per tile, for all its rows (validation: 30 rows of one
        #   individual read it 4 times, not 30);
        # - inputs that are zero in every row of the tile are skipped, so their weight rows are
        #   never read (ReLU zeroes about half of them);
        # - UNROLL weight rows are loaded before any is used: several loads in flight per thread;
        # - the input split gives n_chunks x n_tiles blocks, enough to fill the card at 64 rows.
        c, tile, t = cuda.blockIdx.x, cuda.blockIdx.y, cuda.threadIdx.x
        start, count = tile_start[tile], tile_count[tile]
        w = weights[rows_ind[order[start]]]  # (words,) the tile's individual
        k0 = c * K_CHUNK
        xs = cuda.shared.array((TILE_ROWS, K_CHUNK), float32)  # the tile's inputs in this chunk
        flag = cuda.shared.array(K_CHUNK, int32)  # 1 where some row's input is nonzero
        tmp = cuda.shared.array(K_CHUNK, int32)
        ks = cuda.shared.array(K_CHUNK, int32)  # the nonzero inputs of the chunk, in order
        for k in range(t, K_CHUNK, threads):
            nz = 0
            for j in range(TILE_ROWS):
                v = float32(0)
                if j < count and k0 + k < n_in:
                    v = read(src, order[start + j], k0 + k)
                xs[j, k] = v
                if v != 0:
                    nz = 1
            flag[k] = nz
        cuda.syncthreads()
        n_nz = _compact(flag, tmp, ks, t, threads)

        acc = cuda.local.array((TILE_ROWS, n_o), float32)
        wv = cuda.local.array((UNROLL, n_o), float32)  # weights of UNROLL rows, unused ones 0
        for j in range(TILE_ROWS):
            for u in range(n_o):
                acc[j, u] = 0
        for v in range(UNROLL):
            for u in range(n_o):
                wv[v, u] = 0
        base = w_base + k0 * units + t  # word (k0 + k, t + u*threads) is w[base + k*units + u*threads]
        q = 0
        while q + UNROLL <= n_nz:  # UNROLL weight rows: all their loads first, then the FMAs
            for v in range(UNROLL):
                for u in range(per_t):
                    if exact or t + u * threads < units:
                        word = w[U(base + ks[q + v] * units + u * threads)]
                        for g in range(G):
                            wv[v, u * G + g] = nth(word, g)
            for v in range(UNROLL):
                k = ks[q + v]
                for j in range(TILE_ROWS):
                    if j < count:
                        for u in range(n_o):
                            acc[j, u] += xs[j, U(k)] * wv[v, u]
            q += UNROLL
        while q < n_nz:  # the last n_nz % UNROLL rows, one at a time
            k = ks[q]
            for u in range(per_t):
                if exact or t + u * threads < units:
                    word = w[U(base + k * units + u * threads)]
                    for g in range(G):
                        wv[0, u * G + g] = nth(word, g)
            for j in range(TILE_ROWS):
                if j < count:
                    for u in range(n_o):
                        acc[j, u] += xs[j, U(k)] * wv[0, u]
            q += 1
        for j in range(TILE_ROWS):
            if j < count:
                row = order[start + j]
                for u in range(per_t):
                    if exact or t + u * threads < units:
                        for g in range(G):
                            partial[c, row, (t + u * threads) * G + g] = acc[j, u * G + g]

    return dense, ceil_div(n_in, K_CHUNK), threads


@functools.cache
def dense_finish_kernel(n_out, b_off, act, n_chunks):
    """(kernel, threads) adding bias and partial sums: launch with grid (ceil_div(n_out, threads), rows)."""
    threads = min(128, ceil_div(n_out, 32) * 32)

    @cuda.jit
    def dense_finish(partial, dst, weights, rows_ind):
        # Threads: one per (row, output): grid (output blocks, rows); consecutive threads,
        # consecutive outputs (coalesced). Chunks are summed in order: deterministic.
        o = cuda.blockIdx.x * threads + cuda.threadIdx.x
        r = cuda.blockIdx.y
        if o < n_out:
            v = float32(weights[rows_ind[r], b_off + o])
            for c in range(n_chunks):
                v += partial[c, r, o]
            dst[r, o] = activate(v, act)

    return dense_finish, threads


@functools.cache
def output_kernel(n_in, n_out, w_off, b_off, act, obs_div):
    """(kernel, block) of the output layer + greedy action: launch with grid (rows,).

    kernel(src, logits, actions, weights, rows_ind): src (rows, n_in) float32 (or obs, with
    obs_div as conv_kernel's), logits (rows, n_out) float32, actions (rows,) int32 (the first
    argmax of the logits).
    """
    read = _flat_act if obs_div is None else flat_obs_reader(obs_div)
    o_pad = ceil_div(n_out, 32) * 32
    split = max(1, min(OUT_THREADS // o_pad, n_in // 128))  # input slices per output

    @cuda.jit
    def output(src, logits, actions, weights, rows_ind):
        # Threads: one block per row; thread (o, sl) sums output o over inputs sl, sl + split, ...
        # (consecutive o read consecutive weights, every o the same input: a broadcast), then the
        # split partial sums are added in a fixed order and one thread takes the argmax.
        r, o, sl = cuda.blockIdx.x, cuda.threadIdx.x, cuda.threadIdx.y
        part = cuda.shared.array((split, o_pad), float32)
        ind = rows_ind[r]
        acc = float32(0)
        if o < n_out:
            for k in range(sl, n_in, split):
                acc += read(src, r, k) * float32(weights[ind, w_off + k * n_out + o])
        part[sl, o] = acc
        cuda.syncthreads()
        if sl == 0 and o < n_out:
            v = float32(weights[ind, b_off + o])
            for q in range(split):
                v += part[q, o]
            logits[r, o] = activate(v, act)
        cuda.syncthreads()  # the block's logits writes are visible to the block after this
        if sl == 0 and o == 0:
            actions[r] = argmax_row(logits, r, n_out)

    return output, (o_pad, split)


def tiles(rows_ind):
    """(order, tile_start, tile_count): the rows sorted by individual (stable), cut into tiles of
    at most TILE_ROWS rows of one individual; tile t is order[tile_start[t]:][:tile_count[t]]."""
    rows = len(rows_ind)
    order = np.argsort(rows_ind, kind="stable")
    by_ind = rows_ind[order]
    group_start = np.flatnonzero(np.r_[True, by_ind[1:] != by_ind[:-1]])
    pos = np.arange(rows) - np.repeat(group_start, np.diff(np.r_[group_start, rows]))  # within its group
    tile_start = np.flatnonzero(pos % TILE_ROWS == 0)
    return order, tile_start, np.diff(np.r_[tile_start, rows])


# ---- the policy: weights on the device, rows in, actions out ---------------------------------------


# Below this many bytes a step's frames are gathered on one thread, above it on all (gather_rows).
PARALLEL_GATHER_BYTES = 8 << 20  # 297 Atari rows of 4 x 84 x 84


def gather_rows(src, take, dst):
    """dst[i] = src[take[i]] for 2-D src and dst (rows of bytes or numbers): in one pass, straight
    into dst. speed: a GPU step's 1,000 rows of Atari frames are 28 MB; NumPy's obs[take], then
    its copy into page-locked memory, were two single-threaded passes (4.7 ms for the second
    alone on an H200 machine, as long as the kernels). A small step's rows are gathered on one
    thread: the evaluator calls the policy while other groups' emulator threads hold the cores,
    and a parallel region then waits for its last thread to be scheduled (on the 2-core VM, with
    16 emulators stepping, 64 rows took 0.95-1.27 ms on average on both threads against 0.22-0.26
    on one; idle, 0.04 against 0.06: `python -m experiments.bench.bench_forward --staging --load 16`)."""
    if dst.nbytes < PARALLEL_GATHER_BYTES:
        _gather_one_thread(src, take, dst)
    else:
        _gather_all_threads(src, take, dst)


@numba.njit(nogil=True, cache=True)
def _gather_one_thread(src, take, dst):
    n = src.shape[1]
    for i in range(len(take)):
        k = take[i]
        for j in range(n):  # (a plain loop: LLVM vectorises it; a row slice's copy is far slower)
            dst[i, j] = src[k, j]


@numba.njit(parallel=True, nogil=True, cache=True)
def _gather_all_threads(src, take, dst):
    n = src.shape[1]
    for i in numba.prange(len(take)):  # the same loop, rows split over the threads
        k = take[i]
        for j in range(n):
            dst[i, j] = src[k, j]


class _HostSet(NamedTuple):
    """One step's page-locked host buffers: obs, the index block, actions, logits."""

    obs: np.ndarray
    index: np.ndarray
    actions: np.ndarray
    logits: np.ndarray


class _Ticket(NamedTuple):
    """A submitted step: its host set, rows, and the event recorded after its download."""

    turn: int
    rows: int
    done: object
    host: _HostSet | None


class CudaPolicy:
    """The evaluator's policy on a CUDA GPU (see nevo.nets.kernels): load once, call every step.

    Per step: `upload(rows_ind, obs)` stages the active rows, `launch()` runs the kernels, and
    `__call__` does both and returns the actions; `forward` also returns the logits. `submit`
    does the same but returns at once, `collect` waiting for the actions: the evaluator stages
    the next group while the GPU runs a step.
    """

    def __init__(self, spec, rows=0, word_bytes=None, conv_px=PX):
        quiet_small_grids()
        self.spec = spec
        self.word_bytes = word_bytes  # the dense layers' load width (None: DENSE_WORD's)
        self.conv_px = conv_px  # the convs' output pixels per thread
        self.stream = cuda.stream()
        self.weights = None  # device (n_individuals, n_params) float32 the kernels read
        self._owned = None  # the device copy of host weights, kept between loads
        self.n_ind = 0  # individuals of the current load (0: not loaded)
        self.capacity = 0  # rows the row buffers hold
        self.allocations = 0  # times the row buffers were (re)allocated
        self.rows = 0  # rows of the staged step
        self.n_tiles = 0
        self._kernels = self._build()
        self._dense = {}  # layer -> its partial sums' kernel for the loaded weights (_dense_for)
        self._host = []  # two _HostSets (see _reserve)
        self._turn = 0  # the host set the next step stages into
        self._in_flight = [None, None]  # each set's submitted, uncollected step (_Ticket)
        self._done = [cuda.event(), cuda.event()]  # each set's: recorded after its step's download
        if rows:
            self._reserve(rows)

    def _build(self):
        """One (kind, kernel and launch sizes) per layer, compiled for this spec's geometry."""
        out, layers = [], self.spec.layers
        for i, lay in enumerate(layers):
            last = i == len(layers) - 1
            div = self.spec.obs_div if i == 0 else None  # only the first layer reads the obs
            if lay.kind == "conv":
                (ih, iw), (oh, ow), (pt, _, pl, _) = lay.in_hw, lay.out_hw, lay.pad
                geom = (lay.kernel, lay.kernel, lay.stride, lay.cin, lay.cout, ih, iw, oh, ow, pt, pl)
                act = ACT_CODES[lay.act]
                out.append(("conv", conv_kernel(*geom, lay.w_offset, lay.b_offset, act, div, self.conv_px)))
            elif lay.kind == "pool":
                (ih, iw), (oh, ow), (pt, _, pl, _) = lay.in_hw, lay.out_hw, lay.pad
                out.append(("pool", pool_kernel(lay.kernel, lay.stride, lay.cin, ih, iw, oh, ow, pt, pl)))
            elif last:
                sizes = (lay.cin, lay.cout, lay.w_offset, lay.b_offset, ACT_CODES[lay.act], div)
                out.append(("output", output_kernel(*sizes)))
            else:
                n_chunks = ceil_div(lay.cin, K_CHUNK)
                finish = dense_finish_kernel(lay.cout, lay.b_offset, ACT_CODES[lay.act], n_chunks)
                out.append(("dense", (lay, div, finish)))  # its partial sums' kernel: _dense_for
        return out

    def _dense_for(self, weights):
        """Per dense layer, (kernel, n_chunks, threads, words, per_word): its partial sums' kernel
        for weights of this dtype and layout, and the weights as that kernel reads them: words
        (dense_loads, word_view) where the layer and the rows' pitch allow, else one weight a load."""
        out = {}
        for i, (kind, k) in enumerate(self._kernels):
            if kind != "dense":
                continue
            lay, div, _ = k
            size = weights.dtype.itemsize
            per_word, halves = dense_loads(lay, size, self.word_bytes)
            words = word_view(weights, size * per_word) if per_word > 1 else None
            if words is None:
                per_word, halves, words = 1, False, weights
            kernel, n_chunks, threads = dense_kernel(lay.cin, lay.cout, lay.w_offset, div, per_word, halves)
            out[i] = (kernel, n_chunks, threads, words, per_word)
        return out

    # -- memory ------------------------------------------------------------------------------------

    def _row_bytes(self, cap):
        """Device bytes of the row buffers for cap rows."""
        obs_bytes = int(np.prod(self.spec.obs_shape)) * self.spec.obs_dtype.itemsize
        per_row = obs_bytes + 4 * 4 + 4  # obs, index block, action (host: two sets of them, pinned)
        for lay in self.spec.layers:
            per_row += 4 * lay.cout * lay.out_hw[0] * lay.out_hw[1]
            if lay.kind == "dense":
                per_row += 4 * lay.cout * ceil_div(lay.cin, K_CHUNK)  # partial sums
        return per_row * cap

    def _reserve(self, rows):
        """Row buffers for at least `rows` rows: kept when they fit, else x2 (never per step)."""
        if rows <= self.capacity:
            return
        cap = max(rows, 2 * self.capacity)
        spec, self.capacity = self.spec, cap
        self.allocations += 1
        self.stream.synchronize()  # no step in flight reads the buffers replaced here
        self.obs = cuda.device_array((cap, *spec.obs_shape), spec.obs_dtype)  # (rows, C, H, W)
        # one upload per step: rows_ind | order | tile_start | tile_count, each (cap,) int32
        self.index = cuda.device_array(4 * cap, np.int32)
        self._views = {}  # (rows, tiles) -> the index block's four device views (see _index_views)
        self.actions_dev = cuda.device_array(cap, np.int32)
        # Two sets of host buffers, so that a step can be submitted while the one before it is in
        # flight (submit/collect); the device buffers are shared, the stream running steps in order.
        # speed: observations go up from page-locked memory, a DMA the stream runs on its own
        # (from pageable memory the driver stages them itself, and the host waits for it)
        self._host = [
            _HostSet(
                cuda.pinned_array((cap, *spec.obs_shape), spec.obs_dtype),
                cuda.pinned_array(4 * cap, np.int32),
                cuda.pinned_array(cap, np.int32),
                cuda.pinned_array((cap, spec.n_actions), np.float32),  # continuous actions
            )
            for _ in range(2)
        ]
        self.act, self.flat, self.partial = [], [], []
        for lay in spec.layers:
            if lay.kind in ("conv", "pool"):
                a = cuda.device_array((cap, *lay.out_hw, lay.cout), np.float32)  # (rows, H, W, C)
            else:
                a = cuda.device_array((cap, lay.cout), np.float32)  # (rows, out)
            self.act.append(a)
            self.flat.append(a.reshape(cap, -1))  # the same memory, as (rows, features)
            n_chunks = ceil_div(lay.cin, K_CHUNK) if lay.kind == "dense" else 0
            self.partial.append(cuda.device_array((max(n_chunks, 1), cap, lay.cout), np.float32))

    def load(self, weights):
        """Use these (n_individuals, n_params) float32 or float16 (--weights fp16) weights until
        the next load; the kernels widen 16-bit weights as they read them and sum in float32.

        A host array is copied to the device here, once per evaluation, into memory kept from the
        previous load when it fits; a device array (numba or __cuda_array_interface__) is used as
        it is, and its rows may be longer than the net (a pitch: nevo.genomes.cuda_build). Raises
        DeviceMemoryError, before allocating, when the weights do not fit.
        """
        n_params = self.spec.n_params
        on_device = _device_array(weights)
        if on_device is not None:
            weights = on_device
            if weights.dtype not in half.DTYPES or weights.ndim != 2 or weights.shape[1] < n_params:
                raise ValueError(f"device weights must be (n_individuals, >= {n_params}) float32 or float16")
            self.weights, self.n_ind = weights, weights.shape[0]
            self._dense = self._dense_for(weights)
            return
        weights = np.ascontiguousarray(weights)
        if weights.dtype not in half.DTYPES or weights.ndim != 2 or weights.shape[1] != n_params:
            raise ValueError(
                f"weights must be (n_individuals, {n_params}) float32 or float16, got {weights.dtype} "
                f"{weights.shape}"
            )
        n = weights.shape[0]
        if self._owned is None or self._owned.shape[0] < n or self._owned.dtype != weights.dtype:
            self.weights = self._owned = None
            self._dense = {}  # (its word views hold the old copy too)
            ctx = cuda.current_context()
            if hasattr(ctx, "deallocations"):  # (the simulator has none)
                ctx.deallocations.clear()  # free the old copy now, not at a later collection
            rows_later = 0 if self.capacity else self._row_bytes(256)  # row buffers still to come
            check_fits(
                weights.nbytes + rows_later,
                ctx.get_memory_info().free,
                f"the population's weights ({n:,} x {n_params:,} {weights.dtype}) and the row buffers",
                device_name(),
            )
            self._owned = cuda.device_array((n, n_params), weights.dtype)
        self._owned[:n].copy_to_device(weights, stream=self.stream)
        self.stream.synchronize()
        self.weights, self.n_ind = self._owned, n
        self._dense = self._dense_for(self._owned)

    def release(self):
        """End of an evaluation: the weights are no longer used (their device memory is kept); a
        step still in flight (an evaluation stopped by an error) is waited for and dropped."""
        self.n_ind = 0
        if any(t is not None for t in self._in_flight):
            self.stream.synchronize()
            self._in_flight = [None, None]

    # -- one step ----------------------------------------------------------------------------------

    def upload(self, rows_ind, obs, take=None):
        """Stage a step's rows: obs (rows, C, H, W) of spec.obs_dtype and rows_ind (rows,) (individuals);
        with take (rows,), the rows' observations are obs[take] (obs: every slot's, (slots, C, H, W)).

        Host work: the rows sorted by individual and cut into tiles of <= TILE_ROWS rows (cheap:
        rows are few), packed with rows_ind into one int32 block; obs copied into page-locked
        memory (with take, gathered there in one pass by gather_rows: no copy of obs[take] first); one
        upload for each, from the host buffers of the current set (see submit).
        """
        if self.n_ind == 0:
            raise RuntimeError("CudaPolicy: call load(weights) before running rows")
        if self._in_flight[self._turn] is not None:  # (submit picks a free set before it uploads)
            raise RuntimeError("CudaPolicy: a submitted step still uses these buffers; collect it first")
        rows_ind = np.asarray(rows_ind)
        rows = len(rows_ind)
        obs = np.asarray(obs)
        if take is not None:
            take = checked_take(take, rows, len(obs))
        if (
            obs.dtype != self.spec.obs_dtype
            or obs.shape[1:] != self.spec.obs_shape
            or (take is None and len(obs) != rows)
        ):
            want = ("slots" if take is not None else rows, *self.spec.obs_shape)
            raise ValueError(
                f"obs must be {self.spec.obs_dtype} of shape {want}, got {obs.dtype} {obs.shape}"
            )
        if rows and (rows_ind.min() < 0 or rows_ind.max() >= self.n_ind):
            raise IndexError(f"rows_ind must lie in [0, {self.n_ind})")
        self._reserve(rows)
        self.rows = rows
        if rows == 0:
            return
        order, tile_start, tile_count = tiles(rows_ind)
        self.n_tiles = len(tile_start)
        host = self._host[self._turn]
        h = host.index
        h[:rows] = rows_ind
        h[rows : 2 * rows] = order
        h[2 * rows : 2 * rows + self.n_tiles] = tile_start
        h[2 * rows + self.n_tiles : 2 * rows + 2 * self.n_tiles] = tile_count
        n = 2 * rows + 2 * self.n_tiles
        self.index[:n].copy_to_device(h[:n], stream=self.stream)
        # free: the set's last step was collected (submit), or synchronised (fetch_actions)
        if take is None:
            host.obs[:rows] = obs
        else:
            gather_rows(obs.reshape(len(obs), -1), take, host.obs[:rows].reshape(rows, -1))
        self.obs[:rows].copy_to_device(host.obs[:rows], stream=self.stream)

    def _index_views(self, rows, tiles):
        """(rows_ind, order, tile_start, tile_count): device views of the index block, made once per
        (rows, tiles) (speed: a device array view costs tens of microseconds of Python; a
        run's steps repeat a few hundred shapes)."""
        views = self._views.get((rows, tiles))
        if views is None:
            if len(self._views) >= 4096:  # bounded: rows and tiles are at most the capacity each
                self._views.clear()
            i = self.index
            views = (i[:rows], i[rows : 2 * rows], i[2 * rows : 2 * rows + tiles], i[2 * rows + tiles :])
            self._views[(rows, tiles)] = views
        return views

    def launch(self, marks=None):
        """Run every layer's kernels on the staged rows (asynchronous, on self.stream); with marks
        (a list), append a recorded CUDA event after each layer's kernels (for timing them)."""
        rows, s, tiles = self.rows, self.stream, self.n_tiles
        if rows == 0:
            return
        rows_ind, order, tile_start, tile_count = self._index_views(rows, tiles)
        w, src, flat = self.weights, self.obs, self.obs
        for i, (kind, k) in enumerate(self._kernels):
            if kind == "conv":
                kernel, gx, block = k
                kernel[(gx, rows), block, s](src, self.act[i], w, rows_ind)
            elif kind == "pool":
                kernel, gx, threads = k
                kernel[(gx, rows), threads, s](src, self.act[i])
            elif kind == "dense":
                finish, f_threads = k[2]
                dense, n_chunks, threads, words, _ = self._dense[i]
                dense[(n_chunks, tiles), threads, s](
                    flat, self.partial[i], words, rows_ind, order, tile_start, tile_count
                )
                finish[(ceil_div(self.spec.layers[i].cout, f_threads), rows), f_threads, s](
                    self.partial[i], self.act[i], w, rows_ind
                )
            else:
                kernel, block = k
                kernel[rows, block, s](flat, self.act[i], self.actions_dev, w, rows_ind)
            src, flat = self.act[i], self.flat[i]
            if marks is not None:
                marks.append(cuda.event())
                marks[-1].record(s)

    def __call__(self, rows_ind, obs, take=None):
        """(rows,) int64 greedy actions of rows_ind's individuals on obs (rows, C, H, W), or on
        obs[take] (see upload)."""
        return self.collect(self.submit(rows_ind, obs, take))

    def submit(self, rows_ind, obs, take=None):
        """Start a step and return at once: its rows staged (upload), its kernels launched and its
        actions' download queued on the stream; `collect` of the returned ticket waits for them.

        Two steps may be in flight, each with its own set of host buffers (the device buffers are
        shared: the stream runs the steps in order), so the evaluator can receive and stage one
        group while the GPU runs another's forward. A third submit before either is collected
        raises RuntimeError."""
        turn = self._turn if self._in_flight[self._turn] is None else 1 - self._turn  # a free set
        if self._in_flight[turn] is not None:
            raise RuntimeError("CudaPolicy: two steps are in flight; collect one before submitting another")
        self._turn = turn
        self.upload(rows_ind, obs, take)
        self.launch()
        rows, host = self.rows, self._host[turn] if self.capacity else None
        done = None
        if rows:
            self._download(host, rows)
            done = self._done[turn]
            done.record(self.stream)
        ticket = _Ticket(turn, rows, done, host)
        self._in_flight[turn] = ticket
        self._turn = 1 - turn
        return ticket

    def done(self, ticket) -> bool:
        """Whether a submitted step's download is done (collect would not wait), without waiting.
        (The simulator runs each step at once, and its events have no query.)"""
        query = getattr(ticket.done, "query", None)
        return not ticket.rows or query is None or bool(query())

    def collect(self, ticket):
        """The actions of a submitted step (waits for its download): as fetch_actions returns them."""
        if self._in_flight[ticket.turn] is not ticket:
            raise RuntimeError("CudaPolicy: this step was collected already")
        self._in_flight[ticket.turn] = None
        if ticket.rows:
            ticket.done.synchronize()
        return self._actions(ticket.host, ticket.rows)

    def fetch_actions(self):
        """The launched step's actions (after upload and launch, not submit): the one download of a
        step (waits for it). (rows,) int64 greedy actions, or for continuous actions the logits,
        through nevo.nets.kernels.actions_of (rows, n_actions) float32, as the CPU backends map them."""
        host = self._host[self._turn] if self.capacity else None
        if self.rows:
            self._download(host, self.rows)
            self.stream.synchronize()
        return self._actions(host, self.rows)

    def _download(self, host, rows):
        """Queue the step's download into a host set: the actions, or for continuous actions the
        logits (mapped on the host)."""
        if self.spec.action != "argmax":
            self.act[-1][:rows].copy_to_host(host.logits[:rows], stream=self.stream)
        else:
            self.actions_dev[:rows].copy_to_host(host.actions[:rows], stream=self.stream)

    def _actions(self, host, rows):
        """The actions of a downloaded step, read from its host set (see fetch_actions)."""
        from nevo.nets.kernels.actions import actions_of

        if rows == 0:
            return actions_of(
                self.spec, np.zeros(0, np.int64), np.zeros((0, self.spec.n_actions), np.float32)
            )
        if self.spec.action != "argmax":
            return actions_of(self.spec, None, host.logits[:rows].copy())
        return host.actions[:rows].astype(np.int64)

    def forward(self, rows_ind, obs):
        """(actions, logits (rows, n_actions) float32), as nevo.nets.kernels.reference."""
        actions = self(rows_ind, obs)
        return actions, self.activations(len(self.spec.layers) - 1)

    def activations(self, i):
        """Host copy of layer i's output for the staged rows: (rows, H, W, C) or (rows, out)."""
        lay = self.spec.layers[i]
        if self.rows == 0:
            spatial = lay.kind in ("conv", "pool")
            return np.zeros((0, *lay.out_hw, lay.cout) if spatial else (0, lay.cout), np.float32)
        self.stream.synchronize()
        return self.act[i][: self.rows].copy_to_host()

    def poison(self):
        """Fill every row buffer with NaN (actions with -1), so an element no kernel writes shows.

        For tests, between upload and launch (upload allocates the buffers on first use).
        """
        self.stream.synchronize()
        for a in (*self.act, *self.partial):
            a.copy_to_device(np.full(a.shape, np.nan, np.float32))
        self.actions_dev.copy_to_device(np.full(self.capacity, -1, np.int32))


def _device_array(x):
    """x as a numba device array if it is one (or has __cuda_array_interface__), else None."""
    if isinstance(x, np.ndarray):
        return None
    if numba.config.ENABLE_CUDASIM:
        return x
    return cuda.as_cuda_array(x) if cuda.is_cuda_array(x) else None


def device_name():
    """The current GPU's name (for messages)."""
    if numba.config.ENABLE_CUDASIM:
        return "the simulated GPU"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def forward(spec, weights, rows_ind, obs):
    """Greedy actions (rows,) int64 and logits (rows, n_actions) float32, as reference.forward.

    Uploads the weights on every call (a fresh CudaPolicy): for tests and benchmarks; the
    evaluator keeps a CudaPolicy and loads the weights once per evaluation.
    """
    policy = CudaPolicy(spec)
    policy.load(weights)
    actions, logits = policy.forward(np.asarray(rows_ind, np.int64), obs)
    policy.release()
    return actions, logits
