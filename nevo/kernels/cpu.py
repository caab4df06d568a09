"""The Numba CPU forward pass: a batch of rows, each row run by its own individual's weights.

This is the CPU box's bottleneck (DESIGN.md, performance model): the convs are compute bound, the
first dense layer is memory bound (every row generally has different weights; `large` reads
7,744 x 512 floats = 15.9 MB per row). Choices, each marked where it is made:
- activations are HWC (channels innermost): the innermost loops run over contiguous output
  channels, as do TF's HWIO weights, so they vectorise; the last conv's (H, W, C) output is already
  TF's flatten order;
- each conv writes into the interior of the next layer's zero-padded input, so no loop checks
  bounds: a kernel row (kx, ci) is one contiguous run in both the padded input and the weights;
- zero inputs (half of every ReLU output) are skipped: the dense layer then does not read the
  weight rows they would multiply, which halves its memory traffic, and the convs do half the FMAs;
- the dense layers take the rows of one individual together, so shared weights are read once.
Scratch is one (rows, total) float32 array per call. All entry points release the GIL (nogil).
"""

import numba
import numpy as np
from numba import prange

from nevo.kernels.common import argmax_row, relu, scale_pixel
from nevo.nets import B_OFF, CIN, CONV, COUT, IN_H, IN_W, KH, KIND, KW, OUT_H, OUT_W
from nevo.nets import PAD_B, PAD_L, PAD_R, PAD_T, RELU, STRIDE, W_OFF

_MIN_BLOCK = 16  # dense output block: a multiple of 16 floats = one 64-byte cache line


@numba.njit(nogil=True, cache=True)
def _segments(table):
    """(n_layers + 2,) starts of each layer's input in a row's scratch, then logits, then the end."""
    n = table.shape[0]
    seg = np.zeros(n + 2, np.int64)
    for i in range(n):
        if table[i, KIND] == CONV:
            hp = table[i, IN_H] + table[i, PAD_T] + table[i, PAD_B]
            wp = table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]
            seg[i + 1] = seg[i] + hp * wp * table[i, CIN]
        else:
            seg[i + 1] = seg[i] + table[i, CIN]
    seg[n + 1] = seg[n] + table[n - 1, COUT]
    return seg


@numba.njit(nogil=True, cache=True)
def _load_obs(table, obs, act, r):
    """Row r: (C, H, W) uint8 -> the first layer's zero-padded (H, W, C) float32 input."""
    c_n, h_n, w_n = obs.shape[1], obs.shape[2], obs.shape[3]
    pt, pl = table[0, PAD_T], table[0, PAD_L]
    wp = w_n + pl + table[0, PAD_R]
    for y in range(h_n):
        for x in range(w_n):
            d = ((y + pt) * wp + x + pl) * c_n
            for c in range(c_n):
                act[r, d + c] = scale_pixel(obs[r, c, y, x])


@numba.njit(nogil=True, cache=True)
def _conv_rows(table, seg, i, w, act, r, y0, y1):
    """Conv layer i of row r, output rows y0..y1: work = (row, output-y range), all x and channels."""
    kh, kw, s = table[i, KH], table[i, KW], table[i, STRIDE]
    cin, cout, ow = table[i, CIN], table[i, COUT], table[i, OUT_W]
    wp = table[i, IN_W] + table[i, PAD_L] + table[i, PAD_R]  # padded input width
    w_off, b_off, do_relu = table[i, W_OFF], table[i, B_OFF], table[i, RELU]
    # Destination: the next conv's padded input, or the flat (H, W, C) features of a dense layer.
    if table[i + 1, KIND] == CONV:
        dpt, dpl = table[i + 1, PAD_T], table[i + 1, PAD_L]
        dwp = table[i + 1, IN_W] + dpl + table[i + 1, PAD_R]
    else:
        dpt, dpl, dwp = 0, 0, ow
    run = kw * cin  # (kx, ci) is contiguous in the padded HWC input and in the HWIO weights
    x = act[r]  # speed: 1-D views indexed from 0 let Numba drop its negative-index checks
    for oy in range(y0, y1):
        for ox in range(ow):
            d = seg[i + 1] + ((oy + dpt) * dwp + ox + dpl) * cout
            out = x[d : d + cout]  # (Cout,) output pixel, in the next layer's padded input
            out[:] = w[b_off : b_off + cout]
            for ky in range(kh):
                # padded input (oy*s + ky, ox*s): SAME padding is already in the buffer
                p = seg[i] + ((oy * s + ky) * wp + ox * s) * cin
                wk = w_off + ky * run * cout
                for j in range(run):
                    a = x[p + j]
                    if a != 0:  # speed: skip zero inputs (half of a ReLU output)
                        wj = w[wk + j * cout : wk + (j + 1) * cout]
                        for co in range(cout):  # contiguous: vectorises
                            out[co] += a * wj[co]
            if do_relu:
                for co in range(cout):
                    out[co] = relu(out[co])


@numba.njit(nogil=True, cache=True)
def _dense_block(table, seg, i, w, act, order, g0, g1, o0, o1):
    """Dense layer i for the rows order[g0:g1] (one individual), outputs o0..o1."""
    n_in, n_out = table[i, CIN], table[i, COUT]
    w_off, b_off = table[i, W_OFF], table[i, B_OFF]
    x0, y0 = seg[i], seg[i + 1]
    for g in range(g0, g1):
        r = order[g]
        act[r, y0 + o0 : y0 + o1] = w[b_off + o0 : b_off + o1]
    n = o1 - o0
    for k in range(n_in):
        wk = w[w_off + k * n_out + o0 : w_off + k * n_out + o1]
        for g in range(g0, g1):  # speed: one weight row, read once for every row of this group
            r = order[g]
            a = act[r, x0 + k]
            if a != 0:  # speed: a zero input's weight row is never read from memory
                out = act[r, y0 + o0 : y0 + o1]  # 1-D view: no negative-index checks
                for o in range(n):  # contiguous: vectorises
                    out[o] += a * wk[o]
    if table[i, RELU]:
        for g in range(g0, g1):
            out = act[order[g], y0 + o0 : y0 + o1]
            for o in range(n):
                out[o] = relu(out[o])


@numba.njit(parallel=True, nogil=True, cache=True)
def _forward(table, weights, rows_ind, obs, n_threads):
    """(actions (rows,) int64, logits (rows, n_actions) float32); see `forward`."""
    rows, n_layers = rows_ind.shape[0], table.shape[0]
    n_actions = table[n_layers - 1, COUT]
    seg = _segments(table)
    act = np.empty((rows, seg[n_layers + 1]), np.float32)  # (rows, all layer inputs + logits)

    # Work = one row: zero the padded buffers (their borders are the SAME padding), load pixels.
    for r in prange(rows):
        act[r, : seg[n_layers]] = 0
        _load_obs(table, obs, act, r)

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

    for i in range(n_layers):
        if table[i, KIND] == CONV:
            # Work = (row, band of output rows); bands only when rows are too few for the threads.
            oh = table[i, OUT_H]
            bands = min(oh, max(1, (2 * n_threads + rows - 1) // max(rows, 1)))
            for it in prange(rows * bands):
                r, b = it // bands, it % bands
                y0, y1 = b * oh // bands, (b + 1) * oh // bands
                _conv_rows(table, seg, i, weights[rows_ind[r]], act, r, y0, y1)
        else:
            # Work = (individual's group of rows, block of outputs); blocks only when groups are
            # too few for the threads, and a multiple of 16 floats so no cache line is split.
            n_out = table[i, COUT]
            want = max(1, (2 * n_threads + n_groups - 1) // max(n_groups, 1))
            blocks = max(1, min(want, n_out // (4 * _MIN_BLOCK)))
            size = -(-(-(-n_out // blocks)) // _MIN_BLOCK) * _MIN_BLOCK
            blocks = -(-n_out // size)
            for it in prange(n_groups * blocks):
                g, b = it // blocks, it % blocks
                ind = rows_ind[order[starts[g]]]
                o1 = min((b + 1) * size, n_out)
                _dense_block(
                    table, seg, i, weights[ind], act, order, starts[g], starts[g + 1], b * size, o1
                )

    logits = np.empty((rows, n_actions), np.float32)
    actions = np.empty(rows, np.int64)
    for r in range(rows):
        for a in range(n_actions):
            logits[r, a] = act[r, seg[n_layers] + a]
        actions[r] = argmax_row(logits, r, n_actions)
    return actions, logits


def forward(spec, weights, rows_ind, obs):
    """Greedy actions (rows,) int64 and logits (rows, n_actions) float32 for a batch of rows.

    weights (n_individuals, n_params) float32 C-contiguous; rows_ind (rows,) int64, each row's
    individual; obs (rows, C, H, W) uint8, as AtariVectorEnv returns it. Only checks happen here:
    the work runs in `_forward`, which releases the GIL.
    """
    if weights.dtype != np.float32 or weights.ndim != 2 or not weights.flags.c_contiguous:
        raise TypeError("weights must be a C-contiguous (n_individuals, n_params) float32 array")
    if weights.shape[1] != spec.n_params:
        raise ValueError(f"weights have {weights.shape[1]} params, the spec {spec.n_params}")
    rows_ind = np.ascontiguousarray(rows_ind, dtype=np.int64)
    obs = np.ascontiguousarray(obs)
    if obs.dtype != np.uint8 or obs.shape != (len(rows_ind), *spec.obs_shape):
        raise ValueError(
            f"obs must be uint8 of shape {(len(rows_ind), *spec.obs_shape)}, "
            f"got {obs.dtype} {obs.shape}"
        )
    if len(rows_ind) and (rows_ind.min() < 0 or rows_ind.max() >= weights.shape[0]):
        raise IndexError(f"rows_ind must lie in [0, {weights.shape[0]})")
    # numba.get_num_threads() is read here: inside _forward it would stop cache=True working.
    return _forward(spec.table, weights, rows_ind, obs, numba.get_num_threads())
