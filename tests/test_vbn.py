"""Virtual batch norm folded into the weights, against its explicit NumPy twin."""

import numba
import numpy as np
import pytest

from nevo.episodes import Population
from nevo.genomes.noise import WeightBuilder
from nevo.nets import init_scale, make_spec, net_spec, vbn
from nevo.nets.kernels import HostPolicy, cpu, reference
from nevo.nets.kernels.reference import conv_same

N_REF = 16  # reference batch rows
SPECS = {
    # two convs (the first writes inside the second's padding, the second writes the flat
    # features), then two dense layers: every kind of hidden layer VBN normalises
    "conv": make_spec([("conv", 3, 3, 2), ("conv", 4, 3, 1), ("dense", 8)], (2, 12, 12), 4),
    "mlp": net_spec("mlp", (5, 1, 1), 3, np.float32),
}


def random_weights(spec, n, rng):
    """(n, n_params) float32: the reference init (scale * N(0,1)), biases N(0, 0.5^2) so they matter."""
    w = rng.standard_normal((n, spec.n_params), dtype=np.float32) * init_scale(spec)
    for lay in spec.layers:
        w[:, lay.b_offset : lay.b_offset + lay.cout] = rng.normal(0.0, 0.5, (n, lay.cout))
    return w


def random_obs(spec, rows, rng):
    """(rows, C, H, W) observations of spec.obs_dtype: uint8 pixels or N(0,1) float32 vectors."""
    if spec.obs_dtype == np.uint8:
        return rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    return rng.standard_normal((rows, *spec.obs_shape), dtype=np.float32)


def setup(name, n, seed):
    """(spec, weights (n, n_params), ref (N_REF, C, H, W)) for a named test net."""
    spec = SPECS[name]
    rng = np.random.default_rng(seed)
    return spec, random_weights(spec, n, rng), random_obs(spec, N_REF, rng)


def assert_logits_close(logits, want):
    """Logits within float32 tolerance of want, relative to each row's logit scale."""
    tol = 1e-4 * np.abs(want).max(axis=1, keepdims=True) + 1e-5  # (rows, 1)
    err = np.abs(logits - want)
    assert np.all(err <= tol), f"max error {err.max()} over tolerance"


def clear_rows(logits):
    """(rows,) bool: rows whose two best logits differ by more than the tolerance (no near-tie)."""
    top2 = np.sort(logits, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0] > 2e-4 * np.abs(logits).max(axis=1) + 2e-5


@pytest.mark.parametrize("name", list(SPECS))
def test_fold_then_reference_forward_matches_explicit_vbn(name):
    """The plain NumPy forward of the folded weights gives the explicit VBN net's logits."""
    spec, weights, ref = setup(name, 3, 0)
    rows_ind = np.array([0, 1, 2, 2, 1])
    obs = random_obs(spec, len(rows_ind), np.random.default_rng(1))
    _, want = vbn.reference_forward(spec, weights, rows_ind, obs, ref)
    _, logits = reference.forward(spec, vbn.fold(spec, weights, ref), rows_ind, obs)
    assert_logits_close(logits, want)


@pytest.mark.parametrize("name", list(SPECS))
def test_fold_then_cpu_forward_picks_explicit_vbn_actions(name):
    """The Numba CPU forward of the folded weights picks the explicit VBN net's actions."""
    spec, weights, ref = setup(name, 4, 2)
    rng = np.random.default_rng(3)
    rows_ind = rng.integers(0, 4, 24)
    obs = random_obs(spec, len(rows_ind), rng)
    want_actions, want = vbn.reference_forward(spec, weights, rows_ind, obs, ref)
    actions, logits = cpu.forward(spec, vbn.fold(spec, weights, ref), rows_ind, obs)
    assert_logits_close(logits, want)
    clear = clear_rows(want)
    assert clear.sum() >= len(rows_ind) // 2  # the check below is not vacuous
    np.testing.assert_array_equal(actions[clear], want_actions[clear])


def pre_relu(spec, theta, ref, raw):
    """[(z, z_raw)] per hidden layer of net theta over ref: z its pre-ReLU output (batch, ..., Cout),
    z_raw the same inputs through raw's weights without bias (what VBN measured), float64."""
    params = spec.unflatten(theta.astype(np.float64))
    raw_params = spec.unflatten(raw.astype(np.float64))
    xs = [o.transpose(1, 2, 0).astype(np.float64) / spec.obs_div for o in ref]  # B x (H, W, C)
    out = []
    for lay, (w, b), (w_raw, _) in zip(spec.layers[:-1], params, raw_params):
        if lay.kind == "conv":
            z = np.stack([conv_same(x, w, b, lay.stride, lay.pad) for x in xs])
            z_raw = np.stack([conv_same(x, w_raw, 0.0, lay.stride, lay.pad) for x in xs])
        else:
            flat = np.stack([x.reshape(-1) for x in xs])  # (B, in), TF flatten order
            z, z_raw = flat @ w + b, flat @ w_raw
        out.append((z, z_raw))
        xs = list(np.maximum(z, 0.0))
    return out


@pytest.mark.parametrize("name", list(SPECS))
def test_folded_hidden_layers_are_normalised_over_the_reference_batch(name):
    """Over ref, each folded hidden layer's pre-ReLU channels have mean b_i and variance var/(var + eps)."""
    spec, weights, ref = setup(name, 2, 4)
    folded = vbn.fold(spec, weights, ref)
    for k in range(len(weights)):
        layers = pre_relu(spec, folded[k], ref, weights[k])
        for lay, (z, z_raw) in zip(spec.layers, layers):
            z, z_raw = z.reshape(-1, lay.cout), z_raw.reshape(-1, lay.cout)  # (samples, Cout)
            b = weights[k, lay.b_offset : lay.b_offset + lay.cout]
            var = z_raw.var(axis=0)
            assert var.min() > 1e-3  # a live channel: the unit variance below is a real check
            np.testing.assert_allclose(z.mean(axis=0), b, rtol=0, atol=1e-4)
            np.testing.assert_allclose(z.var(axis=0), var / (var + vbn.EPS), rtol=1e-4)


def test_fold_is_thread_count_independent_and_keeps_its_input():
    """fold gives bit-identical weights on 1 or 2 threads and modifies neither weights nor ref."""
    spec, weights, ref = setup("conv", 5, 5)
    weights_before, ref_before = weights.copy(), ref.copy()
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = vbn.fold(spec, weights, ref)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = vbn.fold(spec, weights, ref)
    finally:
        numba.set_num_threads(threads)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(weights, weights_before)
    np.testing.assert_array_equal(ref, ref_before)
    assert not np.array_equal(one, weights)  # it did fold something


def test_weights_built_with_the_fold_pick_explicit_vbn_actions(table):
    """A WeightBuilder folding VBN in (as nevo.evaluation.setup makes it for --vbn), under the Numba CPU
    policy, picks the explicit VBN net's actions, one row or several built at a time."""
    spec, weights, ref = setup("conv", 4, 6)
    builder = WeightBuilder(
        table, np.ones(spec.n_params, np.float32), lambda w, population: vbn.fold(spec, w, ref, out=w)
    )
    builder.use(Population.of_weights(weights))
    policy = HostPolicy(spec, cpu.forward)
    rng = np.random.default_rng(7)
    for rows in ([0, 1, 2, 3], [2], [3, 0]):
        built = builder.build(rows, np.empty((len(rows), spec.n_params), np.float32))
        rows_ind = rng.integers(0, len(rows), 12)
        obs = random_obs(spec, len(rows_ind), rng)
        want_actions, want = vbn.reference_forward(spec, weights[rows], rows_ind, obs, ref)
        policy.load(built)
        clear = clear_rows(want)
        np.testing.assert_array_equal(policy(rows_ind, obs)[clear], want_actions[clear])


def test_a_net_with_pools_is_refused():
    """VBN's fold knows convs and dense layers only: a net with max-pools (the MNIST nets) is a
    one-line ValueError naming the pool layers, from the fold and from the reference alike."""
    spec = net_spec("mnist", (1, 12, 12), 10)
    weights = np.zeros((1, spec.n_params), np.float32)
    ref = np.zeros((2, 1, 12, 12), np.uint8)
    for call in (lambda: vbn.fold(spec, weights, ref), lambda: vbn.reference_stats(spec, weights[0], ref)):
        with pytest.raises(ValueError, match=r"pool layers.*layers \[1, 3\]") as e:
            call()
        assert "\n" not in str(e.value)
