"""Network specs: parameter counts, SAME padding, the flat layout and the initialisation scale."""

import numpy as np
import pytest

from nevo.nets import IMAGE_NETS, NAMED_LAYERS, POOL, init_scale, make_spec, net_spec, same_padding


@pytest.mark.parametrize(
    "name, n_actions, n_params",
    [("large", 18, 4_052_658), ("small", 18, 1_008_450), ("large", 4, 4_045_476), ("small", 6, 1_005_366)],
)
def test_parameter_counts(name, n_actions, n_params):
    """The named nets have the paper's parameter counts (18 actions) and scale with the actions."""
    assert net_spec(name, n_actions=n_actions).n_params == n_params


@pytest.mark.parametrize("name, n_params", [("mnist", 28_938), ("mnist-large", 3_274_634)])
def test_mnist_parameter_counts(name, n_params):
    """The MNIST nets of Zhang, Clune & Stanley 2017 (1x28x28 digits, 10 classes) have the
    paper's parameter counts; their pools have none, and 28 -> 14 -> 7 leaves 7x7 features."""
    spec = net_spec(name, (1, 28, 28), 10)
    assert spec.n_params == n_params and name in IMAGE_NETS
    pools = [lay for lay in spec.layers if lay.kind == "pool"]
    assert [(lay.in_hw, lay.out_hw) for lay in pools] == [((28, 28), (14, 14)), ((14, 14), (7, 7))]
    assert all(lay.b_offset == lay.w_offset and lay.n_bias == 0 and lay.act == "linear" for lay in pools)
    conv2 = spec.layers[2]
    assert spec.layers[4].cin == 7 * 7 * conv2.cout and spec.layers[4].w_offset == conv2.b_offset + conv2.cout


def test_pool_sizes_and_table():
    """A pool's table row: its own kind, window = stride, channels in = out, TF SAME padding
    (out = ceil(in / k), the pad after for 2x2, on both sides for 3x3) and no parameters."""
    spec = make_spec([("conv", 3, 3, 1), ("pool", 2), ("pool", 3), ("dense", 4)], (2, 9, 7), 5)
    p2, p3 = spec.layers[1], spec.layers[2]
    assert (p2.in_hw, p2.out_hw, p2.pad) == ((9, 7), (5, 4), (0, 1, 0, 1))
    assert (p3.in_hw, p3.out_hw, p3.pad) == ((5, 4), (2, 2), (0, 1, 1, 1))
    assert spec.layers[3].cin == 2 * 2 * 3
    row = spec.table[1]
    assert (
        list(row[:10]) == [POOL, 2, 2, 2, 3, 3, 9, 7, 5, 4]
        and row[14] == row[15] == spec.layers[0].b_offset + 3
    )
    w, b = spec.unflatten(np.arange(spec.n_params))[1]
    assert w.size == 0 and b.size == 0
    assert spec.n_params == (3 * 3 * 2 * 3 + 3) + (12 * 4 + 4) + (4 * 5 + 5)


def test_same_padding_sizes():
    """SAME padding maps 84 -> 21 -> 11 -> 11 in `large`, the smaller half of the pad first."""
    spec = net_spec("large")
    assert [lay.out_hw for lay in spec.layers[:3]] == [(21, 21), (11, 11), (11, 11)]
    assert [lay.pad for lay in spec.layers[:3]] == [(2, 2, 2, 2), (1, 2, 1, 2), (1, 1, 1, 1)]
    assert spec.layers[3].cin == 7744 and net_spec("small").layers[2].cin == 3872
    assert same_padding(21, 4, 2) == (11, 1, 2) and same_padding(5, 1, 3) == (2, 0, 0)


def test_flat_layout_is_contiguous():
    """Each layer's weights then bias follow the previous layer's, ending at n_params."""
    spec = net_spec("large", (4, 12, 12), 5)
    offset = 0
    for lay, (w, b) in zip(spec.layers, spec.unflatten(np.arange(spec.n_params))):
        assert lay.w_offset == offset and lay.b_offset == offset + w.size
        assert w.shape == lay.w_shape and b.shape == (lay.cout,)
        offset = lay.b_offset + lay.cout
    assert offset == spec.n_params and spec.table.shape[0] == len(spec.layers)


def test_init_scale():
    """Init scale is 1/sqrt(fan_in) for weights, x0.1 on the output layer, 0 for biases."""
    spec = net_spec("small")
    scale = init_scale(spec)
    assert scale.dtype == np.float32 and scale.shape == (spec.n_params,)
    for i, (lay, (w, b)) in enumerate(zip(spec.layers, spec.unflatten(scale))):
        expect = (0.1 if i == len(spec.layers) - 1 else 1.0) / np.sqrt(lay.fan_in)
        np.testing.assert_allclose(w, expect, rtol=1e-6)
        assert not b.any()
    assert spec.layers[0].fan_in == 8 * 8 * 4 and spec.layers[2].fan_in == 3872


def test_unknown_names_are_refused():
    """An unknown net name or layer kind raises ValueError naming the valid choices."""
    with pytest.raises(ValueError, match="large"):
        net_spec("huge")
    with pytest.raises(ValueError, match="'conv', 'pool' or 'dense'"):
        make_spec([("norm", 2)], (4, 12, 12), 3)
    for bad in ([("pool", 2)], [("dense", 8), ("pool", 2)]):  # a pool pools a conv's ReLU
        with pytest.raises(ValueError, match="must follow a conv"):
            make_spec(bad, (4, 12, 12), 3)
    with pytest.raises(ValueError, match="first"):
        make_spec([("dense", 8), ("conv", 4, 3, 1)], (4, 12, 12), 3)
    named = ["deep", "large", "mlp", "mlp-tanh", "mlp-tanh-256", "mnist", "mnist-large", "small"]
    assert sorted(NAMED_LAYERS) == named


def test_mlp_reads_float32_vectors():
    """The mlp net is 4 -> 64 -> 64 -> 2 on float32 vectors used as given; image nets divide by 255."""
    spec = net_spec("mlp", (4, 1, 1), 2, np.float32)
    assert spec.n_params == (4 * 64 + 64) + (64 * 64 + 64) + (64 * 2 + 2) == 4610
    assert [lay.kind for lay in spec.layers] == ["dense"] * 3
    assert spec.obs_dtype == np.float32 and spec.obs_div == 1.0
    for name in ("large", "small"):
        image = net_spec(name)
        assert image.obs_dtype == np.uint8 and image.obs_div == 255.0
    with pytest.raises(ValueError, match="obs_dtype"):
        net_spec("mlp", (4, 1, 1), 2, np.float64)
