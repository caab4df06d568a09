"""What the CUDA checks (tests/cuda_checks.py) share: the tiny nets they run, random cases, the
comparison with the NumPy reference, and a call on buffers poisoned with NaN.

Imported by the check modules, which run in tests/cuda_checks.py's process (under the CUDA simulator
in the test suite, where numba.cuda must not be imported by the suite's own process).
"""

import numpy as np

from nevo.nets import init_scale, make_spec, net_spec
from nevo.nets.kernels import reference

TINY = (4, 12, 12)


def small_specs():
    """Tiny nets (few threads under the simulator) covering every layer kind and geometry."""
    return {
        # conv + dense with few channels: stride 2 and 1, SAME padding on both sides
        "conv-dense": make_spec([("conv", 4, 4, 2), ("conv", 6, 3, 1), ("dense", 16)], TINY, 5),
        # the named nets' layers (their channel counts and kernels) on a tiny input
        "large-tiny": net_spec("large", TINY, 6),
        "small-tiny": net_spec("small", TINY, 5),
        # odd sizes: 3 channels, non-square 9x7, kernel > input, two hidden dense layers
        "odd": make_spec([("conv", 5, 3, 1), ("conv", 7, 8, 3), ("dense", 9), ("dense", 3)], (3, 9, 7), 4),
        # a dense layer reading the uint8 obs, 300 inputs: two input chunks, the last partial
        "dense-first": make_spec([("dense", 8)], (3, 10, 10), 4),
        # no hidden layer: the output layer reads the obs
        "output-only": make_spec([], (2, 4, 3), 3),
        # max-pools (the MNIST nets' layers, few channels): an even and an odd input (SAME: the
        # padded cell never wins), a pool before a conv and one before the dense layer
        "pool": make_spec(
            [("conv", 3, 5, 1), ("pool", 2), ("conv", 4, 3, 1), ("pool", 2), ("dense", 8)], (1, 12, 12), 4
        ),
        "pool-odd": make_spec([("conv", 3, 3, 1), ("pool", 2), ("pool", 3)], (2, 9, 7), 3),
    }


def random_case(spec, rng, n_ind, rows, shared=0):
    """(weights, rows_ind, obs): fresh init-scaled weights, rows of repeated random individuals.

    obs has spec.obs_dtype: random uint8 pixels, or float32 values of either sign (a fifth exactly
    0, which the dense kernel skips). With shared > 0, individual 0 has `shared` of the rows
    (validation runs many episodes of one individual; more than TILE_ROWS of them span several
    dense tiles).
    """
    w = rng.standard_normal((n_ind, spec.n_params), dtype=np.float32) * init_scale(spec)
    rows_ind = rng.integers(1 if shared else 0, n_ind, rows)
    rows_ind[rng.choice(rows, min(shared, rows), replace=False)] = 0
    if spec.obs_dtype == np.uint8:
        obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    else:
        obs = (3 * rng.standard_normal((rows, *spec.obs_shape))).astype(np.float32)
        obs[rng.random(obs.shape) < 0.2] = 0
    return w, rows_ind, obs


def assert_matches(spec, actions, logits, weights, rows_ind, obs):
    """Logits within float32 tolerance of the reference; same actions where not near-tied."""
    ref_actions, ref_logits = reference.forward(spec, weights, rows_ind, obs)
    rows = len(rows_ind)
    assert actions.dtype == np.int64 and actions.shape == (rows,), (actions.dtype, actions.shape)
    assert logits.dtype == np.float32 and logits.shape == (rows, spec.n_actions)
    assert np.all(np.isfinite(logits)), (
        f"unwritten (NaN) logits in rows {np.flatnonzero(~np.isfinite(logits).all(1))}"
    )
    tol = 1e-4 * np.abs(ref_logits).max(axis=1, keepdims=True) + 1e-6  # (rows, 1)
    err = np.abs(logits - ref_logits)
    assert np.all(err <= tol), f"max logit error {err.max():.3g} over tolerance; rows_ind {rows_ind}"
    if spec.n_actions > 1:
        top2 = np.sort(ref_logits, axis=1)[:, -2:]
        clear = top2[:, 1] - top2[:, 0] > 2 * tol[:, 0]
        np.testing.assert_array_equal(actions[clear], ref_actions[clear])
    np.testing.assert_array_equal(actions, np.argmax(logits, axis=1))


def run_poisoned(policy, rows_ind, obs):
    """(actions, logits) of one policy call on poisoned buffers; every layer's output is written."""
    policy.upload(rows_ind, obs)
    policy.poison()
    policy.launch()
    actions, logits = policy.fetch_actions(), policy.activations(len(policy.spec.layers) - 1)
    for i in range(len(policy.spec.layers)):
        act = policy.activations(i)
        assert np.all(np.isfinite(act)), (
            f"layer {i} left {np.count_nonzero(~np.isfinite(act))} outputs unwritten"
        )
    return actions, logits


def check_case(name, spec, rng, n_individuals, rows, shared, fmt="fp32"):
    """One random case (see random_case) on a fresh CudaPolicy, poisoned, against the reference;
    its weights in the --weights format fmt (fp16: rounded once, and the reference reads the same
    halves)."""
    from nevo.nets import half
    from nevo.nets.kernels.cuda import CudaPolicy

    weights, rows_ind, obs = random_case(spec, rng, n_individuals, rows, shared)
    weights = half.rounded(weights, fmt)
    policy = CudaPolicy(spec)
    policy.load(weights)
    try:
        assert_matches(spec, *run_poisoned(policy, rows_ind, obs), weights, rows_ind, obs)
    except AssertionError as e:
        raise AssertionError(f"net {name} ({fmt} weights), rows_ind {rows_ind.tolist()}: {e}") from None
