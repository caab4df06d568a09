"""Network specs: parameter counts, SAME padding, the flat layout and the initialisation scale."""

import numpy as np
import pytest

from nevo.nets import NAMED_LAYERS, init_scale, make_spec, net_spec, same_padding


@pytest.mark.parametrize(
    "name, n_actions, n_params",
    [("large", 18, 4_052_658), ("small", 18, 1_008_450), ("large", 4, 4_045_476), ("small", 6, 1_005_366)],
)
def test_parameter_counts(name, n_actions, n_params):
    """The named nets have the paper's parameter counts (18 actions) and scale with the actions."""
    assert net_spec(name, n_actions=n_actions).n_params == n_params


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
    with pytest.raises(ValueError, match="conv"):
        make_spec([("pool", 2)], (4, 12, 12), 3)
    with pytest.raises(ValueError, match="first"):
        make_spec([("dense", 8), ("conv", 4, 3, 1)], (4, 12, 12), 3)
    assert sorted(NAMED_LAYERS) == ["deep", "large", "mlp", "mlp-tanh", "mlp-tanh-256", "small"]


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
