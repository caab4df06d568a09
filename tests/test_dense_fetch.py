"""experiments/bench/dense_fetch.py: a dense layer's time on one thread for three kinds of input row."""

import numpy as np

from experiments.bench import dense_fetch
from nevo import nets
from nevo.nets import B_OFF, CIN, COUT, W_OFF, half
from nevo.nets.kernels import cpu
from nevo.roofline import layers


def test_patterns_keep_the_real_values_and_counts():
    """`all` makes every input nonzero and keeps the real nonzero values; `front` moves each row's
    nonzero values, in order, to the front: the same count, so the same bytes asked for."""
    real = np.array([[0, 2, 0, 3, 0], [1, 0, 0, 0, 5]], np.float32)
    every = dense_fetch.pattern_rows(real, "all")
    front = dense_fetch.pattern_rows(real, "front")
    assert np.array_equal(dense_fetch.pattern_rows(real, "real"), real)
    assert (every != 0).all() and np.array_equal(every[real != 0], real[real != 0])
    assert np.array_equal(front, [[2, 3, 0, 0, 0], [1, 5, 0, 0, 0]])


def test_the_timed_work_feeds_each_pattern_to_the_layer():
    """The work dense_fetch times for a pattern holds that pattern as the dense layer's inputs, and
    the roofline's driver on it (one thread, more individuals than rows) leaves the layer's
    ReLU(x W + b) of the pattern through each row's last individual, in either weight format."""
    spec = nets.net_spec("small", nets.OBS_SHAPE, 18)
    table, seg = spec.table, cpu.segments(spec.table)
    i = 2  # small's first dense layer
    n_in, n_out = int(table[i, CIN]), int(table[i, COUT])
    rng = np.random.default_rng(1)
    full = np.zeros((2, seg[-1]), np.float32)
    full[:, seg[i] : seg[i + 1]] = np.where(rng.random((2, n_in)) < 0.5, rng.random((2, n_in)), 0)
    obs = np.zeros((2, *spec.obs_shape), np.uint8)
    for fmt in half.FORMATS:
        weights = half.rounded(rng.standard_normal((5, spec.n_params), np.float32) * 0.02, fmt)
        for kind in dense_fetch.PATTERNS:
            work = dense_fetch.pattern_work(full, seg[i], seg[i + 1], kind)
            x = work[:, seg[i] : seg[i + 1]].astype(np.float64)
            assert np.array_equal(x, dense_fetch.pattern_rows(full[:, seg[i] : seg[i + 1]], kind))
            # rows 0..3 through individuals 1..4: work row 0 ends with individual 3's, row 1 with 4's
            layers.one_layer(table, i, half.kernel_view(weights), np.arange(1, 5), obs, spec.obs_div, work, 1)
            wo, bo = table[i, W_OFF], table[i, B_OFF]
            for r, ind in ((0, 3), (1, 4)):
                w = weights[ind].astype(np.float64)
                want = np.maximum(x[r] @ w[wo:bo].reshape(n_in, n_out) + w[bo : bo + n_out], 0)
                got = work[r, seg[i + 1] : seg[i + 1] + n_out]
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{fmt} {kind}")


def test_the_table_asks_the_same_bytes_of_real_and_front_rows(monkeypatch):
    """On real Frostbite inputs about half of the small net's dense inputs are zero; `real` and
    `front` ask for the same bytes, `all` for every row; each pattern was timed."""
    monkeypatch.setattr(layers, "VALUE_SOURCES", 4)  # a handful of individuals: a quick table
    (r,) = dense_fetch.main(["--nets", "small", "--weights", "fp16", "--seconds", "0.01", "--max-gb", "0.02",
                             "--bandwidth-mb", "8"])  # fmt: skip
    p = r["patterns"]
    assert r["layer"] == "dense 3872x256" and r["weights"] == "fp16" and r["one_thread_Bps"] > 0
    assert p["all"]["kept"] == 1.0 and 0.2 < p["real"]["kept"] == p["front"]["kept"] < 0.8
    assert p["all"]["asked_bytes"] == (3872 + 1) * 256 * 2  # every fp16 weight row and the bias
    assert p["real"]["asked_bytes"] == p["front"]["asked_bytes"] < p["all"]["asked_bytes"]
    assert abs(p["real"]["bytes_of_all"] - p["real"]["kept"]) < 0.01
    assert all(q["us_per_row"] > 0 for q in p.values())
