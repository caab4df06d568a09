"""Safe mutations' output gradients and operators (nevo.genomes.safe_mutation) against finite
differences and the paper's definitions, on small nets of every layer kind (max-pools too)."""

import os

import numpy as np
import pytest

from nevo import nets
from nevo.genomes import safe_mutation as sm
from nevo.genomes.operators import NAMES
from nevo.nets.kernels import reference

EPS = 1e-6


def _net(kind):
    if kind == "conv":  # two convs (one strided with uneven SAME padding), a dense, the output
        spec = nets.make_spec((("conv", 3, 3, 2), ("conv", 2, 2, 1), ("dense", 5)), (2, 7, 7), 4)
        obs = np.random.default_rng(1).integers(0, 256, (5, 2, 7, 7)).astype(np.uint8)
    elif kind == "pool":  # max-pools on an odd size (SAME: a padded row and column) and before a conv
        layers = (("conv", 3, 3, 1), ("pool", 2), ("conv", 2, 2, 1), ("pool", 2), ("dense", 5))
        spec = nets.make_spec(layers, (2, 7, 7), 4)
        obs = np.random.default_rng(1).integers(0, 256, (5, 2, 7, 7)).astype(np.uint8)
    else:  # the mlp of vector tasks
        spec = nets.make_spec((("dense", 6), ("dense", 5)), (3, 1, 1), 3, obs_dtype=np.float32)
        obs = np.random.default_rng(1).normal(size=(5, 3, 1, 1)).astype(np.float32)
    theta = np.random.default_rng(2).normal(size=spec.n_params) * 0.7
    return spec, theta, obs


def _logits(spec, theta, obs):
    return sm.trace(spec, theta, obs).logits


def _probs(spec, theta, obs):
    return sm.trace(spec, theta, obs).probs


def _fd(f, theta, direction, eps=EPS):
    return (f(theta + eps * direction) - f(theta - eps * direction)) / (2 * eps)


def _some(spec, k=30):
    """Parameters to check: a random sample of every layer's weights and biases."""
    rng = np.random.default_rng(3)
    idx = [
        rng.choice(
            np.arange(lay.w_offset, lay.b_offset + lay.cout),
            min(k, lay.b_offset + lay.cout - lay.w_offset),
            replace=False,
        )
        for lay in spec.layers
        if lay.kind != "pool"  # no parameters
    ]
    return np.concatenate(idx)


KINDS = ["conv", "pool", "mlp"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_trace_gives_the_reference_logits(kind):
    spec, theta, obs = _net(kind)
    _, ref = reference.forward(spec, theta.astype(np.float32)[None], np.zeros(len(obs), np.int64), obs)
    np.testing.assert_allclose(_logits(spec, theta.astype(np.float32), obs), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_vjp_is_the_gradient_of_cotangent_times_logits(kind):
    spec, theta, obs = _net(kind)
    cot = np.random.default_rng(4).normal(size=(len(obs), spec.n_actions))
    grad = sm.vjp(sm.trace(spec, theta, obs), cot)
    for i in _some(spec):
        e = np.zeros(spec.n_params)
        e[i] = 1
        fd = _fd(lambda t: (cot * _logits(spec, t, obs)).sum(), theta, e)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-7), i


@pytest.mark.parametrize("kind", KINDS)
def test_jvp_is_the_directional_derivative_of_the_logits(kind):
    spec, theta, obs = _net(kind)
    v = np.random.default_rng(5).normal(size=spec.n_params)
    fd = _fd(lambda t: _logits(spec, t, obs), theta, v)
    np.testing.assert_allclose(sm.jvp(sm.trace(spec, theta, obs), v), fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kind", KINDS)
def test_grad_sums_and_abs_means_are_the_outputs_gradients(kind):
    """SM-G-SUM's G[k] = sum_t dy_k(x_t)/dw and SM-G-ABS's M[k] = mean_t |dy_k(x_t)/dw|, y the softmax."""
    spec, theta, obs = _net(kind)
    tr = sm.trace(spec, theta, obs)
    sums, means = sm.grad_sums(tr), sm.abs_grad_means(tr)
    for i in _some(spec, 8):
        e = np.zeros(spec.n_params)
        e[i] = 1
        per = _fd(lambda t: _probs(spec, t, obs), theta, e)  # (T, A): dy_k(x_t)/dw_i
        np.testing.assert_allclose(sums[:, i], per.sum(axis=0), rtol=1e-5, atol=1e-8)
        np.testing.assert_allclose(means[:, i], np.abs(per).mean(axis=0), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("kind", KINDS)
def test_the_divergence_hessian_vector_product_matches_second_differences(kind):
    """H v of D(w) = mean_t sum_k (y_k(w) - y_k(theta))^2 at theta, against (a) the central
    difference of D's gradient along v, (b) a second difference of D itself."""
    spec, theta, obs = _net(kind)
    tr = sm.trace(spec, theta, obs)
    v = np.random.default_rng(6).normal(size=spec.n_params)
    hv = sm.divergence_hvp(tr, v)

    def grad_d(w):
        t = sm.trace(spec, w, obs)
        resid = t.probs - tr.probs
        return sm.vjp(t, np.einsum("tkj,tk->tj", sm.softmax_jacobian(t.probs), resid) * (2.0 / t.n))

    np.testing.assert_allclose(hv, _fd(grad_d, theta, v), rtol=1e-4, atol=1e-8)

    def d(w):
        return ((_probs(spec, w, obs) - tr.probs) ** 2).sum(axis=1).mean()

    h = 1e-4
    for i in _some(spec, 3):
        e = np.zeros(spec.n_params)
        e[i] = h
        second = (
            d(theta + h * v + e) - d(theta + h * v - e) - d(theta - h * v + e) + d(theta - h * v - e)
        ) / (4 * h * h)
        assert hv[i] == pytest.approx(second, rel=1e-3, abs=1e-7), i


def test_the_sm_g_rule_floors_and_replaces_zeros():
    np.testing.assert_array_equal(sm.scaling([0.0, 1e-5, 0.5, 3.0]), [1.0, 0.01, 0.5, 3.0])


def test_operators_follow_their_definitions():
    spec, theta, obs = _net("conv")
    tr = sm.trace(spec, theta, obs)
    delta = np.random.default_rng(7).normal(size=spec.n_params) * 0.05
    np.testing.assert_array_equal(sm.mutate("gaussian", spec, theta, obs, delta, 0.05), theta + delta)
    s = np.sqrt((sm.grad_sums(tr) ** 2).sum(axis=0))
    np.testing.assert_allclose(sm.mutate("sm-g-sum", spec, theta, obs, delta, 0.05),
                               theta + np.clip(delta / sm.scaling(s), -10, 10))  # fmt: skip
    s = np.sqrt((sm.abs_grad_means(tr) ** 2).sum(axis=0))
    np.testing.assert_allclose(sm.mutate("sm-g-abs", spec, theta, obs, delta, 0.05),
                               theta + np.clip(delta / sm.scaling(s), -10, 10))  # fmt: skip
    s = np.sqrt(np.abs(sm.divergence_hvp(tr, delta / np.linalg.norm(delta))))
    np.testing.assert_allclose(sm.mutate("sm-g-so", spec, theta, obs, delta, 0.05),
                               theta + np.clip(delta / sm.scaling(s), -10, 10))  # fmt: skip
    with pytest.raises(ValueError, match="unknown SM-G operator"):
        sm.sensitivity("sm-g-max", tr)


@pytest.mark.parametrize("target", [0.01, 0.05, 0.2])
def test_sm_r_moves_the_policy_by_the_target_divergence(target):
    """SM-R scales a random direction until the outputs move by the target: within 1% after
    its 15 forward passes (the divergence grows smoothly with the step here)."""
    spec, theta, obs = _net("conv")
    tr = sm.trace(spec, theta, obs)
    delta = np.random.default_rng(8).normal(size=spec.n_params) * 0.01
    child = sm.mutate("sm-r", spec, theta, obs, delta, target, tr=tr)
    assert sm.divergence(tr, child) == pytest.approx(target, rel=0.01)
    direction = (child - theta) / delta
    assert np.allclose(direction, direction[0])  # a multiple of delta: the direction is kept


@pytest.mark.slow
def test_the_divergence_demonstration_runs_on_a_ga_run(tiny_runs, tmp_path, capsys):
    """experiments.sm_divergence on a real run's best elite: every operator's children, the
    figure and the numbers; SM-R lands on its target, the SM-G operators follow the definitions."""
    import json

    from experiments import sm_divergence

    out = str(tmp_path / "div")
    argv = [tiny_runs[0], "--mutations", "4", "--experiences", "6", "--record", "12", "--out", out]
    assert sm_divergence.main(argv) == 0
    with open(out + ".json") as f:
        got = json.load(f)
    assert set(got["results"]) == set(NAMES) and got["experiences"] == 6
    assert all(len(r["divergence"]) == 4 for r in got["results"].values())
    assert np.allclose(got["results"]["sm-r"]["divergence"], got["target"], rtol=0.02)
    assert os.path.getsize(out + ".png") > 10_000
    assert "SM-R target divergence" in capsys.readouterr().out


@pytest.mark.parametrize("kind", KINDS)
def test_the_numba_products_match_the_reference(kind):
    """nevo.nets.kernels.grad_cpu's forward, reverse- and forward-mode products, and every
    sensitivity built on them, against the NumPy reference."""
    spec, theta, obs = _net(kind)
    ref, fast = sm.trace(spec, theta, obs), sm.trace(spec, theta, obs, backend="numba")
    rng = np.random.default_rng(9)
    cot, v = rng.normal(size=(len(obs), spec.n_actions)), rng.normal(size=spec.n_params)
    np.testing.assert_allclose(fast.logits, ref.logits, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sm.vjp(fast, cot), sm.vjp(ref, cot), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sm.jvp(fast, v), sm.jvp(ref, v), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sm.grad_sums(fast), sm.grad_sums(ref), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(sm.abs_grad_means(fast), sm.abs_grad_means(ref), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(sm.divergence_hvp(fast, v), sm.divergence_hvp(ref, v), rtol=1e-9, atol=1e-14)
    child = theta + 0.01 * v
    assert sm.divergence(fast, child) == pytest.approx(sm.divergence(ref, child), rel=1e-10)


@pytest.mark.parametrize("kind", ["conv", "pool"])
def test_the_numba_products_are_the_same_bits_whatever_the_thread_count(kind):
    import numba

    spec, theta, obs = _net(kind)
    cot = np.random.default_rng(10).normal(size=(len(obs), spec.n_actions))
    before = numba.get_num_threads()
    try:
        got = []
        for threads in (1, before):
            numba.set_num_threads(threads)
            tr = sm.trace(spec, theta, obs, backend="numba")
            got.append((tr.logits, sm.vjp(tr, cot), sm.jvp(tr, cot[0, 0] * np.ones(spec.n_params))))
    finally:
        numba.set_num_threads(before)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kind", ["conv", "pool"])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_vjp_many_is_vjp_row_by_row(backend, kind):
    """The Numba backward pass of K cotangents at once gives each row's vjp bit for bit."""
    spec, theta, obs = _net(kind)
    tr = sm.trace(spec, theta, obs, backend=backend)
    cots = np.random.default_rng(11).normal(size=(3, len(obs), spec.n_actions))
    many = sm.vjp_many(tr, cots)
    for k in range(3):
        one = sm.vjp(sm.trace(spec, theta, obs, backend=backend), cots[k])
        if backend == "numba":
            np.testing.assert_array_equal(many[k], one)
        else:
            np.testing.assert_allclose(many[k], one, rtol=1e-12)


def test_a_pool_gradient_goes_to_the_first_largest_cell_of_its_window():
    """On inputs full of ties, both backends' pools pick each window's first largest cell in
    row-major order (as the forwards do; the SAME padding never wins) and take the forward's
    values; the backward sends each output's cotangent to that cell and its tangent comes from it."""
    from nevo.nets.kernels import grad_cpu
    from nevo.nets.kernels.reference import max_pool_same

    spec = nets.make_spec((("conv", 2, 1, 1), ("pool", 2), ("pool", 3)), (2, 7, 5), 3)
    rng = np.random.default_rng(12)
    for lay in spec.layers[1:3]:
        x = rng.integers(0, 3, (4, *lay.in_hw, 2)).astype(np.float64)  # (T, H, W, C): many ties
        arg, z = sm._pool(x, lay)
        fast_z, fast_arg = grad_cpu.pool_forward(
            x, lay.kernel, lay.stride, lay.pad[0], lay.pad[2], *lay.out_hw
        )
        np.testing.assert_array_equal(fast_arg, arg)
        np.testing.assert_array_equal(fast_z, z)
        for t in range(4):
            np.testing.assert_array_equal(z[t], max_pool_same(x[t], lay.kernel, lay.stride, lay.pad))
        k, (pt, _, pl, _), (h, w) = lay.kernel, lay.pad, lay.in_hw
        for t, oy, ox, c in np.ndindex(z.shape):  # the first largest of the window's cells inside x
            ys, xs = range(oy * k - pt, oy * k - pt + k), range(ox * k - pl, ox * k - pl + k)
            cells = [y * w + xx for y in ys for xx in xs if 0 <= y < h and 0 <= xx < w]  # row-major
            values = [x[t, q // w, q % w, c] for q in cells]
            assert arg[t, oy, ox, c] == cells[int(np.argmax(values))]
        g = rng.normal(size=(2, *z.shape))
        back = grad_cpu.pool_input_grad(g, arg, *lay.in_hw)
        for q in range(2):
            np.testing.assert_array_equal(back[q], sm._unpool(g[q], arg, lay))
        assert back[0].sum() == pytest.approx(g[0].sum())  # every cotangent lands on one cell
        dx = rng.normal(size=x.shape)
        np.testing.assert_array_equal(grad_cpu.pool_gather(dx, arg), sm._pool_tangent(dx, arg))
        np.testing.assert_array_equal(sm._pool_tangent(x, arg), z)  # the winners' values are the max
