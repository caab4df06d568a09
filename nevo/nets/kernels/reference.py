"""The NumPy reference forward pass: plain, obviously correct, the truth the fast kernels match.

It computes in float64 one row at a time (clarity over speed) and returns float32 logits.
"""

import numpy as np


def conv_same(x, w, b, stride, pad):
    """TF "SAME" conv of one image: x (H, W, Cin), w (KH, KW, Cin, Cout) -> (OH, OW, Cout)."""
    top, bottom, left, right = pad
    xp = np.pad(x, ((top, bottom), (left, right), (0, 0)))
    kh, kw, _, cout = w.shape
    oh = (xp.shape[0] - kh) // stride + 1
    ow = (xp.shape[1] - kw) // stride + 1
    out = np.zeros((oh, ow, cout))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[ky : ky + stride * (oh - 1) + 1 : stride, kx : kx + stride * (ow - 1) + 1 : stride]
            out += patch @ w[ky, kx]  # (OH, OW, Cin) @ (Cin, Cout)
    return out + b


def max_pool_same(x, k, stride, pad):
    """TF "SAME" max-pool of one image: x (H, W, C), k x k windows -> (OH, OW, C); the padding
    (-inf) never wins."""
    top, bottom, left, right = pad
    xp = np.pad(x, ((top, bottom), (left, right), (0, 0)), constant_values=-np.inf)
    oh = (xp.shape[0] - k) // stride + 1
    ow = (xp.shape[1] - k) // stride + 1
    out = np.full((oh, ow, x.shape[2]), -np.inf)
    for ky in range(k):
        for kx in range(k):
            out = np.maximum(
                out, xp[ky : ky + stride * (oh - 1) + 1 : stride, kx : kx + stride * (ow - 1) + 1 : stride]
            )
    return out


def forward(spec, weights, rows_ind, obs):
    """(actions, logits (rows, n_actions) float32); row r uses rows_ind[r]. Actions: the greedy
    (rows,) int64, or tanh(logits) for a net with continuous actions (nevo.nets.kernels.actions_of)."""
    rows = len(rows_ind)
    logits = np.zeros((rows, spec.n_actions), dtype=np.float32)
    for r in range(rows):
        params = spec.unflatten(weights[rows_ind[r]].astype(np.float64))
        x = obs[r].transpose(1, 2, 0).astype(np.float64) / spec.obs_div  # (H, W, C), as TF's NHWC
        for lay, (w, b) in zip(spec.layers, params):
            if lay.kind == "conv":
                x = conv_same(x, w, b, lay.stride, lay.pad)
            elif lay.kind == "pool":
                x = max_pool_same(x, lay.kernel, lay.stride, lay.pad)
            else:
                x = x.reshape(-1) @ w + b  # flattens (H, W, C) in TF order
            if lay.act == "relu":
                x = np.maximum(x, 0.0)
            elif lay.act == "tanh":
                x = np.tanh(x)
        logits[r] = x
    from nevo.nets.kernels.actions import actions_of

    actions = np.argmax(logits, axis=1).astype(np.int64)  # first max on ties
    return actions_of(spec, actions, logits), logits
