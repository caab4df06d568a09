"""Virtual batch norm folded into the weights (Salimans et al. 2016, arXiv 1606.03498; ES: 1703.03864)."""

# Every hidden layer i computes z = conv_or_dense(x, W_i) without its bias, then
# h = relu((z - mean_i) / sqrt(var_i + EPS) + b_i), where b_i sits in the layer's bias slot (so the
# parameter layout is unchanged) and mean_i, var_i (per output channel; biased, over the reference
# batch and every output position) are measured with this individual's own weights, the reference
# batch having gone through the already-normalised earlier layers. The output layer is plain.
# Why fold: during an episode the statistics are fixed, so the net is an ordinary net with
# W'_i = W_i * inv_i per output channel, b'_i = b_i - mean_i * inv_i (inv_i = 1 / sqrt(var_i + EPS)),
# and every forward kernel (NumPy, Numba CPU, CUDA) runs it unchanged, at no cost per step.

import numba
import numpy as np
from numba import prange

from nevo.nets import (
    ACT,
    B_OFF,
    CIN,
    CONV,
    COUT,
    IN_W,
    KIND,
    LINEAR,
    OUT_H,
    OUT_W,
    PAD_L,
    PAD_R,
    PAD_T,
    W_OFF,
    require_no_pool,
    require_relu,
)
from nevo.nets.kernels.cpu import ZERO, cols_size, conv_rows, dense_block, input_table, load_obs, segments
from nevo.nets.kernels.reference import conv_same

EPS = 1e-3  # added to the variance, as the reference ES Atari model (ModelVirtualBN) does


# ---- NumPy reference: explicit normalisation, float64, one image at a time (the truth) ----


def _linear(lay, w, x):
    """Layer output without bias: x (H, W, Cin) -> (OH, OW, Cout) conv, or flat -> (Cout,) dense."""
    if lay.kind == "conv":
        return conv_same(x, w, 0.0, lay.stride, lay.pad)
    return x.reshape(-1) @ w  # flattens (H, W, C) in TF order


def reference_stats(spec, theta, ref):
    """[(mean, var)], each (Cout,) float64, per hidden layer of one individual over ref (B, C, H, W)."""
    require_relu(spec, "virtual batch norm")
    require_no_pool(spec, "virtual batch norm")  # its fold lays out convs and dense layers only
    params = spec.unflatten(np.asarray(theta, np.float64))
    xs = np.stack([o.transpose(1, 2, 0) for o in ref]).astype(np.float64) / spec.obs_div  # (B, H, W, C)
    stats = []
    for lay, (w, b) in zip(spec.layers[:-1], params[:-1]):
        z = np.stack([_linear(lay, w, x) for x in xs])  # (B, OH, OW, Cout) or (B, Cout)
        flat = z.reshape(-1, lay.cout)  # (B * OH * OW, Cout): channels over batch and positions
        mean, var = flat.mean(axis=0), flat.var(axis=0)
        stats.append((mean, var))
        xs = np.maximum((z - mean) / np.sqrt(var + EPS) + b, 0.0)  # the next layer's batch
    return stats


def reference_forward(spec, weights, rows_ind, obs, ref):
    """Greedy actions (rows,) int64 and logits (rows, n_actions) float32 of the VBN net, not folded.

    weights (n_individuals, n_params) float32, rows_ind (rows,) int64, obs (rows, C, H, W) and
    ref (B, C, H, W) of spec.obs_dtype; each individual's statistics come from ref.
    """
    stats = {int(k): reference_stats(spec, weights[k], ref) for k in np.unique(rows_ind)}
    logits = np.zeros((len(rows_ind), spec.n_actions), dtype=np.float32)
    for r, k in enumerate(rows_ind):
        params = spec.unflatten(weights[k].astype(np.float64))
        x = obs[r].transpose(1, 2, 0).astype(np.float64) / spec.obs_div  # (H, W, C), as TF's NHWC
        for i, (lay, (w, b)) in enumerate(zip(spec.layers, params)):
            z = _linear(lay, w, x)
            if lay.relu:
                mean, var = stats[int(k)][i]
                x = np.maximum((z - mean) / np.sqrt(var + EPS) + b, 0.0)
            else:
                x = z + b
        logits[r] = x
    actions = np.argmax(logits, axis=1).astype(np.int64)  # first max on ties
    return actions, logits


# ---- Numba fold: the reference batch through the Numba CPU layers, statistics in float64 ----


@numba.njit(nogil=True, cache=True)
def _out_layout(table, i):
    """(top, left, width): layer i writes output (oy, ox, c) at ((oy + top) * width + ox + left) * Cout + c.

    A conv followed by a conv writes inside the next one's zero padding; otherwise the output is
    flat (H, W, C) (dense layers have OH = OW = 1).
    """
    if table[i, KIND] == CONV and table[i + 1, KIND] == CONV:
        top, left = table[i + 1, PAD_T], table[i + 1, PAD_L]
        return top, left, table[i + 1, IN_W] + left + table[i + 1, PAD_R]
    return 0, 0, table[i, OUT_W]


@numba.njit(nogil=True, cache=True)
def _measure(table, i, act, y0, mean, inv):
    """mean[:Cout] and inv[:Cout] = 1 / sqrt(var + EPS) of layer i's output z over batch and positions.

    act (B, width) float32 holds each reference row's z at act[j, y0:]. Two passes in float64 in a
    fixed order (rows, then positions), so the result does not depend on the thread running it.
    """
    top, left, width = _out_layout(table, i)
    cout, oh, ow = table[i, COUT], table[i, OUT_H], table[i, OUT_W]
    n = act.shape[0] * oh * ow
    mean[:cout] = 0.0
    inv[:cout] = 0.0  # first the sum of squared deviations
    for j in range(act.shape[0]):
        for oy in range(oh):
            for ox in range(ow):
                p = y0 + ((oy + top) * width + ox + left) * cout
                for c in range(cout):
                    mean[c] += act[j, p + c]
    for c in range(cout):
        mean[c] /= n
    for j in range(act.shape[0]):
        for oy in range(oh):
            for ox in range(ow):
                p = y0 + ((oy + top) * width + ox + left) * cout
                for c in range(cout):
                    d = act[j, p + c] - mean[c]
                    inv[c] += d * d
    for c in range(cout):
        inv[c] = 1.0 / np.sqrt(inv[c] / n + EPS)  # biased (population) variance


@numba.njit(nogil=True, cache=True)
def _normalise(table, i, act, y0, bias, mean, inv):
    """act[:, y0:] z -> relu((z - mean) * inv + bias): the next layer's reference batch, in place."""
    top, left, width = _out_layout(table, i)
    cout, oh, ow = table[i, COUT], table[i, OUT_H], table[i, OUT_W]
    for j in range(act.shape[0]):
        for oy in range(oh):
            for ox in range(ow):
                p = y0 + ((oy + top) * width + ox + left) * cout
                for c in range(cout):
                    v = (act[j, p + c] - mean[c]) * inv[c] + bias[c]
                    act[j, p + c] = v if v > 0.0 else 0.0


@numba.njit(parallel=True, nogil=True, cache=True)
def _fold(table, weights, ref, div, out, n_threads):
    """out[k] = weights[k] with each hidden layer's VBN over ref folded in; see `fold`."""
    n, n_layers, n_ref = weights.shape[0], table.shape[0], ref.shape[0]
    seg = segments(table)
    n_conv = 0
    while n_conv < n_layers and table[n_conv, KIND] == CONV:
        n_conv += 1
    # Layer i's input of reference row j sits at act[t, j, seg[i] - lo:], zero-padded for convs
    # (zero borders written once: only interiors are overwritten). A conv net's first input is
    # loaded per row into first[t] instead (saves B x 31k floats per thread for `large`).
    lo = seg[1] if n_conv > 0 else 0
    act = np.zeros((n_threads, n_ref, seg[n_layers] - lo), np.float32)  # (threads, B, width)
    first = np.zeros((n_threads, seg[1]), np.float32)  # (threads, first conv's padded input)
    max_in, max_out = 1, 1
    for i in range(n_layers):
        max_in = max(max_in, table[i, CIN])  # dense inputs, for the nonzero-index scratch
        max_out = max(max_out, table[i, COUT])
    nz = np.empty((n_threads, n_ref, max_in), np.int32)  # (threads, B, inputs)
    stat = np.empty((n_threads, 3, max_out), np.float64)  # (threads, [bias, mean, inv], Cout)
    cols = np.empty((n_threads, cols_size(table)), np.float32)  # (threads, conv patch scratch)
    order = np.arange(n_ref)  # every reference row shares the individual: one dense group
    quotients = input_table(ref, div)  # uint8 pixels' inputs (load_obs)
    plain = table.copy()
    plain[:, ACT] = LINEAR  # z is measured before the ReLU, which _normalise applies
    # Work = one individual (static round robin over threads): its layers in order, every
    # reference row per layer. Per-thread scratch, so each result is the same for any thread count.
    for t in prange(n_threads):
        a = act[t]  # (B, width)
        if n_conv == 0:
            for j in range(n_ref):
                load_obs(table, ref, j, a[j], div, quotients)  # stays: no layer writes the input segment
        for k in range(t, n, n_threads):
            w = out[k]
            w[:] = weights[k]
            for i in range(n_layers - 1):
                cout, w_off, b_off = table[i, COUT], table[i, W_OFF], table[i, B_OFF]
                bias, mean, inv = stat[t, 0], stat[t, 1], stat[t, 2]
                for c in range(cout):  # z without the bias: the slot is the post-norm bias
                    bias[c] = w[b_off + c]
                    w[b_off + c] = 0.0
                y0 = seg[i + 1] - lo
                if i < n_conv:
                    for j in range(n_ref):
                        if i == 0:
                            load_obs(table, ref, j, first[t], div, quotients)
                            src = first[t]
                        else:
                            src = a[j, seg[i] - lo : y0]
                        conv_rows(plain, i, w, src, a[j, y0 : seg[i + 2] - lo], cols[t])
                else:
                    dense_block(plain, i, w, a, seg[i] - lo, y0, order, ZERO, n_ref, ZERO, cout, nz[t])
                _measure(table, i, a, y0, mean, inv)
                for q in range(b_off - w_off):  # HWIO / (in, out): the output channel is innermost
                    w[w_off + q] = np.float32(w[w_off + q] * inv[q % cout])
                for c in range(cout):
                    w[b_off + c] = np.float32(bias[c] - mean[c] * inv[c])
                _normalise(table, i, a, y0, bias, mean, inv)


def fold(spec, weights, ref, out=None):
    """(n, n_params) float32: each individual's weights with VBN over ref folded in, for any forward.

    weights (n, n_params) float32 C-contiguous (not modified); ref (B, C, H, W) of spec.obs_dtype,
    the reference batch; out, if given, (n, n_params) float32 C-contiguous (may be weights itself).
    Only checks happen here: the work runs in `_fold`, which releases the GIL.
    """
    require_relu(spec, "virtual batch norm")
    require_no_pool(spec, "virtual batch norm")  # its fold lays out convs and dense layers only
    if weights.dtype != np.float32 or weights.ndim != 2 or not weights.flags.c_contiguous:
        raise TypeError("weights must be a C-contiguous (n_individuals, n_params) float32 array")
    if weights.shape[1] != spec.n_params:
        raise ValueError(f"weights have {weights.shape[1]} params, the spec {spec.n_params}")
    ref = np.ascontiguousarray(ref)
    if ref.dtype != spec.obs_dtype or ref.ndim != 4 or ref.shape[1:] != spec.obs_shape or len(ref) < 1:
        raise ValueError(
            f"ref must be {spec.obs_dtype} of shape (B >= 1, {', '.join(map(str, spec.obs_shape))}), "
            f"got {ref.dtype} {ref.shape}"
        )
    if out is None:
        out = np.empty_like(weights)
    elif out.dtype != np.float32 or out.shape != weights.shape or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous float32 array of shape {weights.shape}")
    # numba.get_num_threads() is read here: inside _fold it would stop cache=True working.
    n_threads = max(1, min(numba.get_num_threads(), len(weights)))
    _fold(spec.table, weights, ref, spec.obs_div, out, n_threads)
    return out
