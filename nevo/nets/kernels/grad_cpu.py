"""Numba CPU kernels for safe mutations' output gradients (nevo.genomes.safe_mutation): each layer's
forward, its weights' gradient and its input's gradient, in float64, numba-parallel.

Every output element is summed by one thread in a fixed order of operations (no fastmath, so no
reassociated or fused sums, and no BLAS, whose sums depend on the machine's SIMD width and
thread count). These products are therefore the same, bit for bit, whatever the thread count,
which safe-mutated genomes need to rebuild exactly (nevo.genomes.safe_build; whether they also agree
across CPU models, with NumPy's softmax around them, is argued there, not tested). The parallel
loop runs over experiences (forward), over inputs or kernel taps (input and weight gradients);
the innermost loops run over independent sums (output channels, input channels, experiences)
that the compiler may vectorize without reordering any of them.

Layouts as nevo.genomes.safe_mutation's: activations (T, H, W, C) or (T, n), conv weights HWIO, dense
weights (in, out); SAME padding given as (pad top, pad left) and the output size. A max-pool's
gradient goes to the cell that won each window (the first largest, as every forward picks it):
its forward returns those cells, its backward scatters to them and its tangent gathers from them.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange


@numba.njit(parallel=True, cache=True)
def conv_forward(x, w, b, stride, pt, pl, oh, ow):
    """z (T, OH, OW, Cout) = SAME conv of x (T, H, W, Cin) with w (KH, KW, Cin, Cout) plus b."""
    n, h, wd, cin = x.shape
    kh, kw, _, cout = w.shape
    z = np.empty((n, oh, ow, cout))
    for t in prange(n):
        for oy in range(oh):
            for ox in range(ow):
                z[t, oy, ox, :] = b
                for ky in range(kh):
                    iy = oy * stride + ky - pt
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * stride + kx - pl
                        if ix < 0 or ix >= wd:
                            continue
                        for ci in range(cin):
                            v = x[t, iy, ix, ci]
                            if v != 0.0:  # ReLU zeros: a zero term changes no sum
                                for co in range(cout):
                                    z[t, oy, ox, co] += v * w[ky, kx, ci, co]
    return z


@numba.njit(parallel=True, cache=True)
def conv_input_grad(g, w, h, wd, stride, pt, pl):
    """dx (T, H, W, Cin): g (T, OH, OW, Cout) through the conv's weights back to its input.

    Each tap's contribution to dx[t, iy, ix, ci] is the sum over co of g * w, in co order, then
    added in (oy, ox, ky, kx) order. The Cin sums of one tap run side by side over a transposed
    copy of the weights (KH, KW, Cout, Cin), so that the compiler vectorizes across channels
    without reordering any sum (speed: the sum over co alone is one long dependency chain)."""
    n, oh, ow, cout = g.shape
    kh, kw, cin, _ = w.shape
    wt = np.empty((kh, kw, cout, cin))
    for ky in range(kh):
        for kx in range(kw):
            wt[ky, kx] = w[ky, kx].T
    dx = np.zeros((n, h, wd, cin))
    for t in prange(n):
        acc = np.empty(cin)
        for oy in range(oh):
            for ox in range(ow):
                for ky in range(kh):
                    iy = oy * stride + ky - pt
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * stride + kx - pl
                        if ix < 0 or ix >= wd:
                            continue
                        acc[:] = 0.0
                        for co in range(cout):
                            gv = g[t, oy, ox, co]
                            if gv != 0.0:  # ReLU zeros: a zero term changes no sum
                                for ci in range(cin):
                                    acc[ci] += gv * wt[ky, kx, co, ci]
                        for ci in range(cin):
                            dx[t, iy, ix, ci] += acc[ci]
    return dx


@numba.njit(parallel=True, cache=True)
def dense_forward(x, w, b):
    """z (T, m) = x (T, n) @ w (n, m) + b."""
    n_t, n_in = x.shape
    z = np.empty((n_t, w.shape[1]))
    for t in prange(n_t):
        zt = z[t]
        zt[:] = b
        for i in range(n_in):
            v = x[t, i]
            if v != 0.0:
                # speed: a loop over 1-D views, not the array expression z[t] += v * w[i]: the
                # large net's fc layer over 100 experiences, 0.100 s -> 0.049 s on the 2-core Zen 5
                # VM; the same sums in the same order
                wi = w[i]
                for o in range(zt.shape[0]):
                    zt[o] += v * wi[o]
    return z


@numba.njit(parallel=True, cache=True)
def dense_input_grad(g, w):
    """dx (T, n) = g (T, m) @ w (n, m)^T, each element summed over m in order.

    Threads map to inputs i; the T sums of one input run side by side over a transposed copy
    of g (m, T), vectorized across experiences without reordering any sum, while w's row i is
    read once, in order (speed: one sum over m at a time is one long dependency chain)."""
    n_t, m = g.shape
    n_in = w.shape[0]
    gt = np.ascontiguousarray(g.T)  # (m, T): small
    dx = np.empty((n_t, n_in))
    for i in prange(n_in):
        acc = np.zeros(n_t)
        for j in range(m):
            wv = w[i, j]
            for t in range(n_t):
                acc[t] += gt[j, t] * wv
        for t in range(n_t):
            dx[t, i] = acc[t]
    return dx


@numba.njit(parallel=True, cache=True)
def column_sums(g):
    """(C,) sums of g (N, C) over its rows, in row order (a bias's gradient)."""
    n, c = g.shape
    out = np.zeros(c)
    for j in prange(c):
        acc = 0.0
        for r in range(n):
            acc += g[r, j]
        out[j] = acc
    return out


@numba.njit(parallel=True, cache=True)
def conv_weight_grads(x, g, kh, kw, stride, pt, pl):
    """dW (K, KH, KW, Cin, Cout): for each of K cotangents g (K, T, OH, OW, Cout), the sum over
    experiences and positions of x's (T, H, W, Cin) patch times g[k]; every element is summed in
    the order (t, oy, ox) whatever K is.

    Threads map to kernel taps (ky, kx), each with every input channel: a row g[k, t, oy, ox]
    is read once for all Cin channels (speed: reading it once per channel streamed the whole
    cotangent from memory Cin times; 64x fewer reads on the third conv)."""
    n, h, wd, cin = x.shape
    n_k, _, oh, ow, cout = g.shape
    dw = np.zeros((n_k, kh, kw, cin, cout))
    for q in prange(kh * kw):
        ky, kx = q // kw, q % kw
        for t in range(n):
            for oy in range(oh):
                iy = oy * stride + ky - pt
                if iy < 0 or iy >= h:
                    continue
                for ox in range(ow):
                    ix = ox * stride + kx - pl
                    if ix < 0 or ix >= wd:
                        continue
                    for ci in range(cin):
                        v = x[t, iy, ix, ci]
                        if v != 0.0:
                            for k in range(n_k):
                                for co in range(cout):
                                    dw[k, ky, kx, ci, co] += v * g[k, t, oy, ox, co]
    return dw


# Dense weight gradient: input rows per block, so that each cotangent row read serves them all.
_DENSE_BLOCK = 16


@numba.njit(parallel=True, cache=True)
def dense_weight_grads(x, g):
    """dW (K, n, m): x (T, n)^T @ g[k] (T, m) for each of K cotangents, every element summed
    over experiences in order.

    Threads map to blocks of _DENSE_BLOCK input rows (speed: a row g[k, t] is read once per
    block, not once per input; the large net's fc layer read its 100 x 512 cotangent 7,744
    times from memory before)."""
    n_t, n_in = x.shape
    n_k = g.shape[0]
    dw = np.zeros((n_k, n_in, g.shape[2]))
    n_blocks = (n_in + _DENSE_BLOCK - 1) // _DENSE_BLOCK
    for blk in prange(n_blocks):
        lo = blk * _DENSE_BLOCK
        hi = min(lo + _DENSE_BLOCK, n_in)
        for t in range(n_t):
            for i in range(lo, hi):
                v = x[t, i]
                if v != 0.0:
                    for k in range(n_k):
                        # speed: a loop over 1-D views, not the array expression dw[k, i] += v * g[k, t]:
                        # the large net's fc layer, 100 experiences, on the 2-core Zen 5 VM, 0.043 s
                        # -> 0.012 s (1 cotangent), 0.10 -> 0.041 (2); the same sums in the same order
                        d, gr = dw[k, i], g[k, t]
                        for o in range(d.shape[0]):
                            d[o] += v * gr[o]
    return dw


@numba.njit(parallel=True, cache=True)
def pool_forward(x, k, stride, pt, pl, oh, ow):
    """(z, arg), each (T, OH, OW, C): SAME max-pool of x (T, H, W, C) over k x k windows, and each
    output's winning input cell iy * W + ix: the first largest of the window's cells inside x in
    row-major order (the padding never wins), as the forward kernels pick it."""
    n, h, wd, c = x.shape
    z = np.empty((n, oh, ow, c))
    arg = np.empty((n, oh, ow, c), np.int64)
    for t in prange(n):
        for oy in range(oh):
            y0, y1 = max(oy * stride - pt, 0), min(oy * stride - pt + k, h)
            for ox in range(ow):
                x0, x1 = max(ox * stride - pl, 0), min(ox * stride - pl + k, wd)
                for ch in range(c):
                    best, at = x[t, y0, x0, ch], y0 * wd + x0
                    for iy in range(y0, y1):
                        for ix in range(x0, x1):
                            if x[t, iy, ix, ch] > best:  # strict: the first largest stays
                                best, at = x[t, iy, ix, ch], iy * wd + ix
                    z[t, oy, ox, ch] = best
                    arg[t, oy, ox, ch] = at
    return z, arg


@numba.njit(parallel=True, cache=True)
def pool_input_grad(g, arg, h, wd):
    """dx (K, T, H, W, C): each element of the K cotangents g (K, T, OH, OW, C) added to its
    window's winning cell arg (T, OH, OW, C) (pool_forward's), in (oy, ox) order. Threads map to
    (cotangent, experience): each owns its slice of dx."""
    n_k, n, oh, ow, c = g.shape
    dx = np.zeros((n_k, n, h, wd, c))
    for q in prange(n_k * n):
        kk, t = q // n, q % n
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    a = arg[t, oy, ox, ch]
                    dx[kk, t, a // wd, a % wd, ch] += g[kk, t, oy, ox, ch]
    return dx


@numba.njit(parallel=True, cache=True)
def pool_gather(dx, arg):
    """(T, OH, OW, C): the tangent dx (T, H, W, C) of a pool's input at each window's winning cell
    arg (T, OH, OW, C): the pool's tangent (the max moves with its winner)."""
    n, oh, ow, c = arg.shape
    wd = dx.shape[2]
    dz = np.empty((n, oh, ow, c))
    for t in prange(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    a = arg[t, oy, ox, ch]
                    dz[t, oy, ox, ch] = dx[t, a // wd, a % wd, ch]
    return dz
