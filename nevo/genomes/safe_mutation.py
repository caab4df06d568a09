"""Safe mutations (Lehman et al. 2018, "Safe Mutations for Deep and Recurrent Neural Networks
through Output Gradients", arXiv 1712.06563): output gradients of a net and the SM operators.

A Gaussian mutation theta + delta of a deep net changes some weights' effect on the outputs by
orders of magnitude more than others, so most mutations of deep nets break the policy. The SM
operators scale each weight's perturbation by how sensitive the outputs are to it, measured on
stored experiences x_1..x_T (observations the parent has seen):

    y_k(x_t)  output k of the net: the softmax over its actions' logits (nevo's nets output
              logits and act greedily; the softmax is the policy the paper differentiates)
    SM-G-SUM  s_i = sqrt( sum_k ( sum_t dy_k(x_t)/dw_i )^2 )
    SM-G-ABS  s_i = sqrt( sum_k ( (1/T) sum_t |dy_k(x_t)/dw_i| )^2 )
    SM-G-SO   s_i = sqrt(|(H v)_i|), H the Hessian of D(w) = mean_t sum_k (y_k(x_t; w) - y_k(x_t; theta))^2
              at w = theta, v = delta / |delta|
    all SM-G  s_i = 1 where s_i = 0, then s_i = max(s_i, 0.01); child = theta + delta / s
    SM-R      child = theta + alpha * delta, alpha found by a line search (at most 15 forward
              passes) so that the divergence mean_t |y(x_t; child) - y(x_t; theta)|_2 equals
              the target (sigma, as the paper's code uses its mutation magnitude)
and every child's change is clipped to [-10, 10] per weight, as the paper's code does.

SM-G-SO's Hessian at w = theta is exact without second derivatives: D's residuals are zero
there, so H = (2/T) sum_t J_t^T J_t with J_t = dy(x_t)/dw, and H v is a forward-mode product
(J_t v) followed by a reverse-mode one (J_t^T of it).

This module is the NumPy reference, in float64: a batched forward that keeps what the backward
pass needs (`Trace`), the reverse-mode product `vjp` (cotangents on the logits -> a gradient over
the weights, summed over experiences), the forward-mode product `jvp`, and the operators built
on them. tests/test_safe_mutation.py checks each against finite differences. Through a max-pool
layer (no parameters) the gradient goes to each window's winning cell, the first largest in
row-major order as every forward picks it (a subgradient where cells tie).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from nevo.nets import require_relu

SCALE_FLOOR = 0.01  # s_i below this is raised to it (the paper's code)
WEIGHT_CLIP = 10.0  # a child's change per weight is clipped to +-this (the paper's code)
SEARCH_STEPS = 15  # SM-R: forward passes its line search may take (the paper's code)


# ---- the batched forward and its trace ------------------------------------------------------


def _patches(x, lay):
    """(T*OH*OW, KH*KW*Cin) im2col of x (T, H, W, Cin) under the layer's SAME padding, columns
    in (ky, kx, c) order: the rows of the HWIO weights reshaped to (KH*KW*Cin, Cout)."""
    top, bottom, left, right = lay.pad
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    k, s = lay.kernel, lay.stride
    oh, ow = lay.out_hw
    win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, : s * (oh - 1) + 1 : s, : s * (ow - 1) + 1 : s]
    # win (T, OH, OW, Cin, KH, KW) -> (T, OH, OW, KH, KW, Cin)
    return np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3)).reshape(-1, k * k * lay.cin)


def _unpatch(dcols, lay, n):
    """The adjoint of _patches: column gradients (T*OH*OW, KH*KW*Cin) summed back into the
    input's gradient (T, H, W, Cin)."""
    top, bottom, left, right = lay.pad
    (h, w), (oh, ow), k, s = lay.in_hw, lay.out_hw, lay.kernel, lay.stride
    d = dcols.reshape(n, oh, ow, k, k, lay.cin)
    dxp = np.zeros((n, h + top + bottom, w + left + right, lay.cin))
    for ky in range(k):
        for kx in range(k):
            dxp[:, ky : ky + s * (oh - 1) + 1 : s, kx : kx + s * (ow - 1) + 1 : s] += d[:, :, :, ky, kx]
    return dxp[:, top : top + h, left : left + w]


def _pool(x, lay):
    """(arg, z): z (T, OH, OW, C) the SAME max-pool of x (T, H, W, C), arg each output's winning
    cell iy * W + ix, the first largest of its window in row-major order (the padding never wins)."""
    top, bottom, left, right = lay.pad
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=-np.inf)
    k, s = lay.kernel, lay.stride
    oh, ow = lay.out_hw
    win = sliding_window_view(xp, (k, k), axis=(1, 2))[:, : s * (oh - 1) + 1 : s, : s * (ow - 1) + 1 : s]
    flat = win.reshape(*win.shape[:4], k * k)  # (T, OH, OW, C, KH*KW), the window row-major
    j = flat.argmax(axis=-1)  # the first largest
    z = np.take_along_axis(flat, j[..., None], axis=-1)[..., 0]
    iy = (np.arange(oh) * s - top)[:, None, None] + j // k
    ix = (np.arange(ow) * s - left)[None, :, None] + j % k
    return iy * lay.in_hw[1] + ix, z


def _unpool(g, arg, lay):
    """The adjoint of the pool: g (T, OH, OW, C) added to each window's winning cell arg, as the
    gradient of the pool's input (T, H, W, C)."""
    n, c = len(g), lay.cin
    dx = np.zeros((n, lay.in_hw[0] * lay.in_hw[1], c))
    t, ch = np.arange(n)[:, None, None, None], np.arange(c)
    np.add.at(dx, (t, arg, ch), g)
    return dx.reshape(n, *lay.in_hw, c)


def _pool_tangent(dx, arg):
    """The pool's tangent: dx (T, H, W, C) of its input at each window's winning cell arg."""
    n, c = dx.shape[0], dx.shape[3]
    return np.take_along_axis(dx.reshape(n, -1, c), arg.reshape(n, -1, c), axis=1).reshape(arg.shape)


@dataclass
class Trace:
    """A batched forward pass of one net on T observations, kept for the products below."""

    spec: object
    params: list  # [(w, b)] float64 views, per layer
    inputs: list  # per layer: its input as the matmul sees it (im2col columns, or (T, n)); a
    # pool's: each output's winning input cell (T, OH, OW, C) int64
    pre: list  # per layer: its output before the ReLU, (T, ...) float64
    logits: np.ndarray  # (T, A)
    probs: np.ndarray  # (T, A) softmax(logits): the outputs y the operators differentiate
    backend: str = (
        "numpy"  # "numba": inputs are activations (not im2col columns) for nevo.nets.kernels.grad_cpu
    )

    @property
    def n(self) -> int:
        return len(self.logits)


def trace(spec, theta, obs, backend: str = "numpy") -> Trace:
    """Forward theta (P,) on obs (T, C, H, W) (as the evaluator gives them), keeping the trace.
    backend "numpy": im2col and BLAS (the reference); "numba": nevo.nets.kernels.grad_cpu's
    parallel kernels, whose sums have a fixed order (the same bits whatever the thread count)."""
    require_relu(spec, "safe mutations' output gradients")
    params = spec.unflatten(np.asarray(theta, np.float64))
    x = np.asarray(obs).transpose(0, 2, 3, 1).astype(np.float64) / spec.obs_div  # (T, H, W, C)
    inputs, pre = [], []
    for lay, (w, b) in zip(spec.layers, params):
        cols, z = _layer_forward(lay, w, b, x, backend)
        inputs.append(cols)
        pre.append(z)
        x = np.maximum(z, 0.0) if lay.relu else z
    return Trace(spec, params, inputs, pre, x, _softmax(x), backend)


def _layer_forward(lay, w, b, x, backend):
    """(what the layer's products need of its input, its output before the ReLU) for x (T, ...)."""
    n = len(x)
    if backend == "numba":
        from nevo.nets.kernels import grad_cpu

        if lay.kind == "pool":
            z, arg = grad_cpu.pool_forward(np.ascontiguousarray(x), lay.kernel, lay.stride, lay.pad[0],
                                           lay.pad[2], *lay.out_hw)  # fmt: skip
            return arg, z
        if lay.kind == "conv":
            x = np.ascontiguousarray(x)
            return x, grad_cpu.conv_forward(x, np.ascontiguousarray(w), b, lay.stride, lay.pad[0], lay.pad[2],
                                            *lay.out_hw)  # fmt: skip
        x = np.ascontiguousarray(x.reshape(n, -1))
        return x, grad_cpu.dense_forward(x, np.ascontiguousarray(w), b)
    if backend != "numpy":
        raise ValueError(f"unknown backend {backend!r}; allowed: numpy, numba")
    if lay.kind == "pool":
        return _pool(x, lay)
    if lay.kind == "conv":
        cols = _patches(x, lay)
        return cols, (cols @ w.reshape(-1, lay.cout)).reshape(n, *lay.out_hw, lay.cout) + b
    cols = x.reshape(n, -1)
    return cols, cols @ w + b


def _softmax(logits) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_jacobian(probs) -> np.ndarray:
    """(T, A, A): dy_k/dlogit_j = y_k (delta_kj - y_j), per experience (symmetric)."""
    return probs[:, :, None] * np.eye(probs.shape[1]) - probs[:, :, None] * probs[:, None, :]


# ---- products with the Jacobian of the logits -----------------------------------------------


def vjp(tr: Trace, cot) -> np.ndarray:
    """(P,) sum_t cot[t] . dlogits(x_t)/dtheta: the reverse-mode product for cotangents cot (T, A)
    on the logits (one backward pass over the batch)."""
    if tr.backend == "numba":
        return _vjp_numba(tr, cot)
    spec, n = tr.spec, tr.n
    grad = np.zeros(spec.n_params)
    g = np.asarray(cot, np.float64)  # d/d(this layer's output), before its ReLU below
    for i in range(len(spec.layers) - 1, -1, -1):
        lay, (w, _) = spec.layers[i], tr.params[i]
        if lay.kind == "pool":  # no parameters: on to its input (never the first layer)
            g = _unpool(g, tr.inputs[i], lay)
            continue
        if lay.relu:
            g = g * (tr.pre[i] > 0)
        g_flat = g.reshape(-1, lay.cout)
        grad[lay.w_offset : lay.b_offset] = (tr.inputs[i].T @ g_flat).ravel()
        grad[lay.b_offset : lay.b_offset + lay.cout] = g_flat.sum(axis=0)
        if i == 0:
            break
        if lay.kind == "conv":
            g = _unpatch(g_flat @ w.reshape(-1, lay.cout).T, lay, n)
        else:
            g = (g_flat @ w.T).reshape(tr.pre[i - 1].shape)  # back to (T, H, W, C) or (T, n)
    return grad


def _vjp_numba(tr: Trace, cot) -> np.ndarray:
    """vjp with nevo.nets.kernels.grad_cpu (tr.inputs are the layers' input activations)."""
    return vjp_many(tr, np.asarray(cot, np.float64)[None])[0]


def vjp_many(tr: Trace, cots) -> np.ndarray:
    """(K, P) vjp of K cotangents (K, T, A) at once. With the Numba backend in one backward pass
    whose weight gradients read each activation once for all K (each sum in vjp's own order, so
    row k equals vjp(tr, cots[k]) bit for bit); with NumPy, vjp K times."""
    cots = np.asarray(cots, np.float64)
    if tr.backend != "numba":
        return np.stack([vjp(tr, c) for c in cots])
    from nevo.nets.kernels import grad_cpu

    spec, n_k, n = tr.spec, len(cots), tr.n
    grad = np.zeros((n_k, spec.n_params))
    g = np.ascontiguousarray(cots)  # (K, T, ...): d/d(this layer's output), before its ReLU
    for i in range(len(spec.layers) - 1, -1, -1):
        lay, (w, _) = spec.layers[i], tr.params[i]
        if lay.kind == "pool":  # no parameters: on to its input (never the first layer)
            g = grad_cpu.pool_input_grad(g, tr.inputs[i], *lay.in_hw)
            continue
        if lay.relu:
            g = np.ascontiguousarray(g * (tr.pre[i] > 0))
        x, wc = tr.inputs[i], np.ascontiguousarray(w)
        if lay.kind == "conv":
            top, left = lay.pad[0], lay.pad[2]
            dw = grad_cpu.conv_weight_grads(x, g, lay.kernel, lay.kernel, lay.stride, top, left)
        else:
            dw = grad_cpu.dense_weight_grads(x, g)
        grad[:, lay.w_offset : lay.b_offset] = dw.reshape(n_k, -1)
        for k in range(n_k):
            grad[k, lay.b_offset : lay.b_offset + lay.cout] = grad_cpu.column_sums(g[k].reshape(-1, lay.cout))
        if i == 0:
            break
        flat = g.reshape(n_k * n, *g.shape[2:])  # K x T experiences: the input gradient is per row
        if lay.kind == "conv":
            flat = grad_cpu.conv_input_grad(flat, wc, *lay.in_hw, lay.stride, lay.pad[0], lay.pad[2])
        else:
            flat = grad_cpu.dense_input_grad(flat, wc)
        g = np.ascontiguousarray(flat.reshape(n_k, *tr.pre[i - 1].shape))
    return grad


def jvp(tr: Trace, v) -> np.ndarray:
    """(T, A) dlogits(x_t)/dtheta . v: the forward-mode product along v (P,)."""
    if tr.backend == "numba":
        return _jvp_numba(tr, v)
    spec, n = tr.spec, tr.n
    dparams = spec.unflatten(np.asarray(v, np.float64))
    dx = None  # tangent of the current layer's input (none for the observations)
    for i, (lay, (w, _), (dw, db)) in enumerate(zip(spec.layers, tr.params, dparams)):
        if lay.kind == "pool":  # the max moves with its winning cell
            dx = _pool_tangent(dx, tr.inputs[i])
            continue
        if lay.kind == "conv":
            dz = tr.inputs[i] @ dw.reshape(-1, lay.cout)
            if dx is not None:
                dz = dz + _patches(dx, lay) @ w.reshape(-1, lay.cout)
            dz = dz.reshape(n, *lay.out_hw, lay.cout) + db
        else:
            dz = tr.inputs[i] @ dw + db
            if dx is not None:
                dz = dz + dx.reshape(n, -1) @ w
        dx = dz * (tr.pre[i] > 0) if lay.relu else dz
    return dx


# ---- the sensitivities ------------------------------------------------------------------------


def _jvp_numba(tr: Trace, v) -> np.ndarray:
    """jvp with nevo.nets.kernels.grad_cpu: each layer's tangent is its forward with the weights'
    tangent (and the bias's) on its input, plus its forward of the input's tangent (no bias)."""
    from nevo.nets.kernels import grad_cpu

    spec = tr.spec
    dparams = spec.unflatten(np.asarray(v, np.float64))
    dx = None
    for i, (lay, (w, _), (dw, db)) in enumerate(zip(spec.layers, tr.params, dparams)):
        if lay.kind == "pool":  # the max moves with its winning cell
            dx = grad_cpu.pool_gather(np.ascontiguousarray(dx), tr.inputs[i])
            continue
        _, dz = _layer_forward(lay, dw, db, tr.inputs[i], "numba")
        if dx is not None:
            _, through = _layer_forward(lay, w, np.zeros(lay.cout), dx, "numba")
            dz = dz + through
        dx = dz * (tr.pre[i] > 0) if lay.relu else dz
    return dx


def grad_sums(tr: Trace) -> np.ndarray:
    """(A, P) G[k] = sum_t dy_k(x_t)/dtheta: one backward pass per output over the batch."""
    sj = softmax_jacobian(tr.probs)
    # one pass per output: over a whole batch this is faster than vjp_many's joint pass
    # (5.7 s against 7.0 s for the large net and 100 experiences, Numba, 2 cores)
    return np.stack([vjp(tr, sj[:, k, :]) for k in range(sj.shape[1])])


def abs_grad_means(tr: Trace) -> np.ndarray:
    """(A, P) M[k] = (1/T) sum_t |dy_k(x_t)/dtheta|: per-experience gradients."""
    sj = softmax_jacobian(tr.probs)
    n_out = sj.shape[1]
    out = np.zeros((n_out, tr.spec.n_params))
    for t in range(tr.n):  # one experience's outputs in one joint pass: 2.5-4x faster than one by one
        out += np.abs(vjp_many(_one(tr, t), sj[t][:, None, :]))  # (K, 1, A): each output's row
    return out / tr.n


def _one(tr: Trace, t: int) -> Trace:
    """The trace of experience t alone (slices of the batch's)."""
    if tr.backend == "numba":  # activations: the experience's own slice
        cols = [c[t : t + 1] for c in tr.inputs]
    else:  # im2col columns: the experience's block of rows
        cols = [c.reshape(tr.n, -1, c.shape[-1])[t] if lay.kind == "conv" else c[t : t + 1]
                for lay, c in zip(tr.spec.layers, tr.inputs)]  # fmt: skip
    return Trace(tr.spec, tr.params, cols, [p[t : t + 1] for p in tr.pre], tr.logits[t : t + 1],
                 tr.probs[t : t + 1], tr.backend)  # fmt: skip


def divergence_hvp(tr: Trace, v) -> np.ndarray:
    """(P,) H v for H the Hessian of D(w) = mean_t sum_k (y_k(x_t; w) - y_k(x_t; theta))^2 at
    w = theta: (2/T) sum_t J_t^T (J_t v), exact there (D's residuals are zero)."""
    sj = softmax_jacobian(tr.probs)
    dy = np.einsum("tkj,tj->tk", sj, jvp(tr, v))  # J_t v on the outputs y
    return vjp(tr, np.einsum("tkj,tk->tj", sj, dy) * (2.0 / tr.n))


def divergence(tr: Trace, theta_new) -> float:
    """mean_t |y(x_t; theta_new) - y(x_t; theta)|_2: how far a child's policy moved on the experiences."""
    new = _probs(tr.spec, theta_new, tr)
    return float(np.sqrt(((new - tr.probs) ** 2).sum(axis=1)).mean())


def _probs(spec, theta, tr: Trace) -> np.ndarray:
    """softmax outputs of theta on the experiences of tr (its first layer's input reused)."""
    params = spec.unflatten(np.asarray(theta, np.float64))
    x = None
    for i, (lay, (w, b)) in enumerate(zip(spec.layers, params)):
        if i == 0 and tr.backend == "numpy":  # the first layer's im2col columns, as traced
            cols = tr.inputs[0]
            z = cols @ w.reshape(-1, lay.cout) + b
            z = z.reshape(tr.n, *lay.out_hw, lay.cout) if lay.kind == "conv" else z
        else:
            _, z = _layer_forward(lay, w, b, tr.inputs[0] if i == 0 else x, tr.backend)
        x = np.maximum(z, 0.0) if lay.relu else z
    return _softmax(x)


def scaling(s) -> np.ndarray:
    """The SM-G rule: s_i = 1 where s_i = 0, then s_i = max(s_i, 0.01)."""
    s = np.array(s, np.float64)
    s[s == 0] = 1.0
    return np.maximum(s, SCALE_FLOOR)


def sensitivity(kind: str, tr: Trace, delta=None) -> np.ndarray:
    """(P,) s of an SM-G operator (before `scaling`); SM-G-SO needs the perturbation delta."""
    if kind == "sm-g-sum":
        return np.sqrt((grad_sums(tr) ** 2).sum(axis=0))
    if kind == "sm-g-abs":
        return np.sqrt((abs_grad_means(tr) ** 2).sum(axis=0))
    if kind == "sm-g-so":
        return np.sqrt(np.abs(divergence_hvp(tr, delta / np.linalg.norm(delta))))
    raise ValueError(f"unknown SM-G operator {kind!r}; allowed: sm-g-sum, sm-g-abs, sm-g-so")


def line_search(tr: Trace, theta, delta, target: float) -> float:
    """SM-R's alpha: divergence(theta + alpha delta) = target, in at most SEARCH_STEPS forward
    passes (our pick of method: alpha doubles from 1 until the divergence passes the target,
    then bisection; alpha = 0 never moves the policy, so a root lies in the last bracket)."""
    theta = np.asarray(theta, np.float64)

    def div(alpha):
        return divergence(tr, theta + np.clip(alpha * delta, -WEIGHT_CLIP, WEIGHT_CLIP))

    lo, hi, steps = 0.0, 1.0, 1
    d_hi = div(hi)
    while d_hi < target and steps < SEARCH_STEPS // 2:
        lo, hi, steps = hi, 2 * hi, steps + 1
        d_hi = div(hi)
    if d_hi < target:
        return hi  # the policy moves less than the target even this far: take the largest step
    while steps < SEARCH_STEPS:
        mid = 0.5 * (lo + hi)
        steps += 1
        if div(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mutate(kind: str, spec, theta, obs, delta, target: float, tr: Trace | None = None,
           s: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """theta (P,) + the operator's change for the Gaussian perturbation delta (P,) = N(0, sigma^2),
    measured on experiences obs (T, C, H, W); float64. tr: the parent's trace, s: its SM-G-SUM or
    SM-G-ABS sensitivity (both belong to the parent: pass them to mutate many children)."""
    theta = np.asarray(theta, np.float64)
    delta = np.asarray(delta, np.float64)
    if kind == "gaussian":
        return theta + delta
    tr = tr if tr is not None else trace(spec, theta, obs)
    if kind == "sm-r":
        step = line_search(tr, theta, delta, target) * delta
    else:
        if s is None or kind == "sm-g-so":
            s = sensitivity(kind, tr, delta)
        step = delta / scaling(s)
    return theta + np.clip(step, -WEIGHT_CLIP, WEIGHT_CLIP)
