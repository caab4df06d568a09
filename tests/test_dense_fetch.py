"""experiments/dense_fetch.py: a dense layer's time on one thread for three kinds of input row."""

import numpy as np

from experiments import dense_fetch, roofline
from nevo import nets
from nevo.nets import B_OFF, CIN, COUT, W_OFF, half
from nevo.nets.kernels import cpu


def test_patterns_keep_the_real_values_and_counts():
    """`all` makes every input nonzero and keeps the real nonzero values; `front` moves each row's
    nonzero values, in order, to the front: the same count, so the same bytes asked for."""
    real = np.array([[0, 2, 0, 3, 0], [1, 0, 0, 0, 5]], np.float32)
    every = dense_fetch.pattern_rows(real, "all")
    front = dense_fetch.pattern_rows(real, "front")
    assert np.array_equal(dense_fetch.pattern_rows(real, "real"), real)
    assert (every != 0).all() and np.array_equal(every[real != 0], real[real != 0])
    assert np.array_equal(front, [[2, 3, 0, 0, 0], [1, 5, 0, 0, 0]])


def test_the_timed_calls_run_the_layer_on_each_calls_individual():
    """dense_calls' call k runs row k % n_real through individual (first + k)'s weights: the output
    it leaves is that layer's ReLU(x W + b), in either weight format."""
    spec = nets.net_spec("small", nets.OBS_SHAPE, 18)
    table, seg = spec.table, cpu.segments(spec.table)
    i = 2  # small's first dense layer
    n_in, n_out = int(table[i, CIN]), int(table[i, COUT])
    rng = np.random.default_rng(1)
    for fmt in half.FORMATS:
        weights = half.rounded(rng.standard_normal((5, spec.n_params), np.float32) * 0.02, fmt)
        act = np.zeros((3, seg[-1] - seg[i]), np.float32)
        act[:, :n_in] = np.where(rng.random((3, n_in)) < 0.5, rng.random((3, n_in)), 0)
        nz = np.empty((1, n_in), np.int32)
        # 7 calls from individual 4: the last, k = 6, is row 0 through individual (4 + 6) % 5 = 0
        dense_fetch.dense_calls(table, i, half.kernel_view(weights), act, 0, n_in, 4, 7, 3, nz)
        w = weights[0].astype(np.float64)
        wo, bo = table[i, W_OFF], table[i, B_OFF]
        want = np.maximum(act[0, :n_in] @ w[wo:bo].reshape(n_in, n_out) + w[bo : bo + n_out], 0)
        np.testing.assert_allclose(act[0, n_in : n_in + n_out], want, rtol=1e-4, atol=1e-5)


def test_the_table_asks_the_same_bytes_of_real_and_front_rows(monkeypatch):
    """On real Frostbite inputs about half of the small net's dense inputs are zero; `real` and
    `front` ask for the same bytes, `all` for every row; each pattern was timed."""
    monkeypatch.setattr(roofline, "VALUE_SOURCES", 4)  # a handful of individuals: a quick table
    (r,) = dense_fetch.main(["--nets", "small", "--weights", "fp16", "--seconds", "0.01", "--max-gb", "0.02",
                             "--bandwidth-mb", "8"])  # fmt: skip
    p = r["patterns"]
    assert r["layer"] == "dense 3872x256" and r["weights"] == "fp16" and r["one_thread_Bps"] > 0
    assert p["all"]["kept"] == 1.0 and 0.2 < p["real"]["kept"] == p["front"]["kept"] < 0.8
    assert p["all"]["asked_bytes"] == (3872 + 1) * 256 * 2  # every fp16 weight row and the bias
    assert p["real"]["asked_bytes"] == p["front"]["asked_bytes"] < p["all"]["asked_bytes"]
    assert abs(p["real"]["bytes_of_all"] - p["real"]["kept"]) < 0.01
    assert all(q["us_per_row"] > 0 for q in p.values())
