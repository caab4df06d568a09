"""The CUDA checks of the forward kernels' results: every layer kind, conv tiles, pixels per thread,
continuous actions, float32 observations, row independence, and the full-size nets.

Run by tests/cuda_checks.py in a process of its own: the CUDA simulator must be switched on before
numba.cuda is first imported, and the rest of the test suite runs the real CPU backend.
"""

import numpy as np

from nevo.nets import make_spec, net_spec
from nevo.nets.kernels import reference
from tests.cuda_checks_common import TINY, assert_matches, check_case, random_case, run_poisoned, small_specs


def forward_matches_reference(rng, full):
    """The CUDA forward picks the reference's actions, logits within float32 tolerance, for every
    layer kind, random active-row subsets and repeated individuals (tiles of shared rows)."""
    from nevo.nets.kernels.cuda import TILE_ROWS

    for name, spec in small_specs().items():
        heavy = name in ("large-tiny", "small-tiny", "pool")  # ~300-1,000 simulated threads per row
        cases = [(3, 0)] if heavy else [(3, 0), (TILE_ROWS + 3, TILE_ROWS + 2)]
        for rows, shared in [(9, 0), (40, 19)] if full else cases:
            check_case(name, spec, rng, 4, rows, shared)


def conv_tiles_match_reference(rng, full):
    """A conv whose input window does not fit one block's shared memory is computed in tiles of
    output rows (the last one shorter), each staging its own window: same results as one tile."""
    from nevo.nets.kernels import cuda as ck

    spec = make_spec([("conv", 4, 3, 2), ("conv", 5, 3, 1), ("dense", 6)], (3, 13, 9), 4)  # 7x5 outputs
    assert ck.conv_tiling(3, 2, 3, 7, 5)[0] == 7  # at the usual budget: one tile of all 7 rows
    budget = ck.WINDOW_BYTES
    ck.WINDOW_BYTES = 4 * 11 * 3 * 5  # 5 rows of the first conv's window (11 columns, 3 channels)
    ck.conv_kernel.cache_clear()
    try:
        tiles = [ck.conv_tiling(lay.kernel, lay.stride, lay.cin, *lay.out_hw)[0] for lay in spec.layers[:2]]
        assert tiles == [2, 3], tiles  # 7 rows as 2+2+2+1 and as 3+3+1
        check_case("tiled", spec, rng, 3, 4 if not full else 40, 0)
    finally:
        ck.WINDOW_BYTES = budget
        ck.conv_kernel.cache_clear()


def conv_tiles_bound_threads_per_block(rng, full):
    """A conv with more output pixels than a block's threads can take (MNIST's 28x28 stride-1 first
    conv: 3,136 threads in one tile) is tiled to stay within CONV_MAX_THREADS, with the same results
    (checked here under a small limit, on a 12x12 net with max-pools)."""
    from nevo.nets.kernels import cuda as ck

    for name in ("mnist", "mnist-large"):
        lay = net_spec(name, (1, 28, 28), 10).layers[0]
        geom = (
            lay.kernel,
            lay.kernel,
            1,
            1,
            lay.cout,
            28,
            28,
            28,
            28,
            2,
            2,
            lay.w_offset,
            lay.b_offset,
            1,
            255.0,
        )
        _, n_tiles, (co_t, pg_t) = ck.conv_kernel(*geom)
        assert co_t * pg_t <= ck.CONV_MAX_THREADS and n_tiles == 4, (name, n_tiles, co_t, pg_t)
    spec = small_specs()["pool"]  # first conv: 3 channel lanes, 12x12 outputs
    most = ck.CONV_MAX_THREADS
    ck.CONV_MAX_THREADS = 45  # 15 pixel groups of 4: 5 rows of 12, cut as 4+4+4
    ck.conv_kernel.cache_clear()
    try:
        lay = spec.layers[0]
        assert ck.conv_tiling(lay.kernel, lay.stride, lay.cin, *lay.out_hw, 3)[0] == 4
        check_case("thread-tiled", spec, rng, 3, 3 if not full else 40, 0)
    finally:
        ck.CONV_MAX_THREADS = most
        ck.conv_kernel.cache_clear()


def conv_pixels_per_thread_give_the_same_outputs(rng, full):
    """A conv thread's output pixels (CudaPolicy's conv_px, PX by default; a benchmark may try
    others) change who sums a pixel, not the order of its sum: 1, 3 (tiles that leave a thread's
    last pixels past the tile) and 8 give the default's logits bit for bit, poisoned buffers
    every layer writes."""
    from nevo.nets.kernels.cuda import PX, CudaPolicy

    specs = small_specs()
    names = ["conv-dense", "pool"] + (["odd", "large-tiny", "small-tiny"] if full else [])
    for name in names:
        spec = specs[name]
        weights, rows_ind, obs = random_case(spec, rng, 3, 6 if full else 3)
        want = CudaPolicy(spec)
        want.load(weights)
        want_a, want_l = want.forward(rows_ind, obs)
        for px in (1, 3, 8):
            policy = CudaPolicy(spec, conv_px=px)
            policy.load(weights)
            got_a, got_l = run_poisoned(policy, rows_ind, obs)
            where = f"net {name}, {px} pixels a thread against {PX}"
            np.testing.assert_array_equal(got_l, want_l, err_msg=where)
            np.testing.assert_array_equal(got_a, want_a, err_msg=where)


def continuous_actions_match_reference(rng, full):
    """A net with continuous actions (NetSpec.action "tanh") and tanh hidden units (OpenAI-ES's
    MuJoCo policy) gives the reference's action vectors, tanh of its logits, (rows, n_actions)
    float32 in [-1, 1]."""
    from nevo.nets.kernels.cuda import CudaPolicy

    spec = make_spec([("dense", 12, "tanh")], (5, 1, 1), 3, obs_dtype=np.float32, action="tanh")
    weights, rows_ind, obs = random_case(spec, rng, 3, 7)
    weights *= 20  # outputs past tanh's linear range, some near +-1
    policy = CudaPolicy(spec)
    policy.load(weights)
    actions = policy(rows_ind, obs)
    ref_actions, ref_logits = reference.forward(spec, weights, rows_ind, obs)
    assert actions.dtype == np.float32 and actions.shape == (7, 3), (actions.dtype, actions.shape)
    np.testing.assert_allclose(actions, ref_actions, atol=1e-5)
    assert np.abs(actions).max() <= 1 and np.abs(ref_logits).max() > 1
    policy.release()
    # "bins": each of 2 components the first largest of its 10 outputs, mapped on the host
    spec = make_spec([("dense", 12, "tanh")], (5, 1, 1), 20, obs_dtype=np.float32, action="bins")
    weights, rows_ind, obs = random_case(spec, rng, 3, 7)
    policy = CudaPolicy(spec)
    policy.load(weights)
    actions = policy(rows_ind, obs)
    ref_actions, ref_logits = reference.forward(spec, weights, rows_ind, obs)
    assert actions.shape == (7, 2), actions.shape
    top2 = np.sort(ref_logits.reshape(7, 2, 10), axis=2)[:, :, -2:]
    clear = (top2[:, :, 1] - top2[:, :, 0] > 1e-4).all(axis=1)
    np.testing.assert_array_equal(actions[clear], ref_actions[clear])
    policy.release()


def float32_vectors_match_reference(rng, full):
    """On float32 observations (used as given, not /255) the CUDA forward matches the reference: the
    mlp on vectors (n, 1, 1), and each layer kind reading float32 obs first (a conv, a dense layer
    over two input chunks, the output layer); obs of another dtype than the spec's are refused."""
    from nevo.nets.kernels.cuda import TILE_ROWS, CudaPolicy

    f32 = np.float32
    mlps = {f"mlp-{n}-{a}": net_spec("mlp", (n, 1, 1), a, f32) for n, a in ((4, 2), (8, 3))}
    mlps["mlp-tanh-6-2"] = net_spec("mlp-tanh", (6, 1, 1), 2, f32)
    first = {  # ~30-60 simulated threads per row each: one small case is enough
        "conv-first": make_spec([("conv", 4, 3, 1), ("dense", 8)], (2, 5, 5), 3, obs_dtype=f32),
        "dense-first": make_spec([("dense", 8)], (300, 1, 1), 4, obs_dtype=f32),
        "output-only": make_spec([], (6, 1, 1), 3, obs_dtype=f32),
    }
    for name, spec in {**mlps, **first}.items():
        cases = [(1, 0), (TILE_ROWS + 3, TILE_ROWS + 2)] if name in mlps else [(3, 0)]
        for rows, shared in [(1, 0), (40, 19)] if full else cases:
            check_case(name, spec, rng, 5, rows, shared)
    for spec, dtype, expect in (
        (mlps["mlp-4-2"], np.uint8, "float32"),
        (mlps["mlp-4-2"], np.float64, "float32"),
        (small_specs()["output-only"], np.float32, "uint8"),
    ):
        policy = CudaPolicy(spec)
        policy.load(np.zeros((1, spec.n_params), np.float32))
        try:
            policy(np.zeros(2, np.int64), np.zeros((2, *spec.obs_shape), dtype))
            raise AssertionError(f"{np.dtype(dtype)} obs were accepted by a {expect} net")
        except ValueError as e:
            assert expect in str(e), e


def rows_do_not_interact(rng, full):
    """A row's logits are bit-identical whether it runs alone or in a shuffled batch that shares
    its individual's dense tile with other rows (the sums keep a fixed order: deterministic)."""
    from nevo.nets.kernels.cuda import CudaPolicy

    spec = small_specs()["dense-first"]
    weights, _, obs = random_case(spec, rng, 3, 4)
    rows_ind = np.array([1, 0, 1, 1])
    policy = CudaPolicy(spec)
    policy.load(weights)
    _, batch = run_poisoned(policy, rows_ind, obs)
    for r in range(len(rows_ind)):
        _, alone = run_poisoned(policy, rows_ind[r : r + 1], obs[r : r + 1])
        np.testing.assert_array_equal(alone[0], batch[r])


def zero_rows_and_ties(rng, full):
    """No rows gives no actions; all-zero weights tie every logit and the action is 0 (np.argmax)."""
    from nevo.nets.kernels import cuda as kc

    spec = small_specs()["conv-dense"]
    weights = np.zeros((2, spec.n_params), np.float32)
    actions, logits = kc.forward(spec, weights, np.zeros(0, np.int64), np.zeros((0, *TINY), np.uint8))
    assert actions.shape == (0,) and actions.dtype == np.int64 and logits.shape == (0, spec.n_actions)
    actions, logits = kc.forward(spec, weights, np.array([1, 0]), np.full((2, *TINY), 255, np.uint8))
    assert not actions.any() and not logits.any()


def module_forward_has_reference_signature(rng, full):
    """nevo.nets.kernels.get_forward("cuda") is a forward(spec, weights, rows_ind, obs) like reference's."""
    from nevo.nets.kernels import get_forward

    spec = small_specs()["output-only"]
    weights, rows_ind, obs = random_case(spec, rng, 3, 4)
    assert_matches(spec, *get_forward("cuda")(spec, weights, rows_ind, obs), weights, rows_ind, obs)


def full_size_matches_reference(rng, full):
    """At full size (4x84x84, 18 actions; the MNIST nets on 1x28x28, 10 classes; hundreds of
    rows; large and small with fp16 weights too) the CUDA forward matches the reference, as the
    active rows shrink and grow within one load (random subsets of the rows)."""
    from nevo.nets.kernels.cuda import CudaPolicy

    mnist = ((1, 28, 28), 10)
    from nevo.nets import half

    for name, rows, shape, fmt in (("small", 400, (), "fp32"), ("large", 300, (), "fp32"),
                                   ("mnist", 400, mnist, "fp32"), ("mnist-large", 300, mnist, "fp32"),
                                   ("large", 300, (), "fp16"),
                                   ("small", 400, (), "fp16")):  # fmt: skip
        spec = net_spec(name, *shape)
        weights, rows_ind, obs = random_case(spec, rng, 40, rows, shared=30)
        weights = half.rounded(weights, fmt)
        policy = CudaPolicy(spec)
        policy.load(weights)
        for keep in (len(rows_ind), 37, len(rows_ind)):
            sub = np.sort(rng.choice(len(rows_ind), keep, replace=False))
            allocations = policy.allocations
            got = run_poisoned(policy, rows_ind[sub], obs[sub])
            assert policy.allocations == allocations or keep == len(rows_ind)
            assert_matches(spec, *got, weights, rows_ind[sub], obs[sub])
