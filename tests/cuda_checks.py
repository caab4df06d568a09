"""The numba.cuda forward (nevo/nets/kernels/cuda.py) against the NumPy reference, as checks in a process.

    NUMBA_ENABLE_CUDASIM=1 python -m tests.cuda_checks   # small shapes on the CUDA simulator (CI,
                                                          # through tests/test_cuda.py)
    python -m tests.cuda_checks --full                    # on a GPU: the same, plus large and
                                                          # small at 84x84 with hundreds of rows

The simulator must be switched on before numba.cuda is first imported, and the rest of the test
suite runs with the real CPU backend, so these checks run in a process of their own. Each check is
a function whose docstring states its property. Every run draws fresh random weights, inputs and
active-row subsets (the seed is printed; --seed repeats a run), and every launch writes into
buffers poisoned with NaN (actions -1) first, so an element no kernel writes fails the check.
"""

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

# tiny test grids are meant: no "under-utilization" warnings on a real GPU (read at numba's import)
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

from nevo.evaluation.setup import evaluator_for
from nevo.nets import init_scale, make_spec, net_spec  # noqa: E402
from nevo.nets.kernels import reference  # noqa: E402

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


# ---- the checks ---------------------------------------------------------------------------------


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


def device_build_matches_host_build(rng, full):
    """Rows built on the GPU (nevo.genomes.cuda_build) equal the host's build_rows bit for bit:
    fresh networks, copies and children of seed-list parents (GA), theta +- sigma eps (ES);
    a builder with a host-side fold builds on the host."""
    from nevo.episodes import Population
    from nevo.evaluation.slot_weights import AllWeights, for_device
    from nevo.genomes.cuda_build import DeviceWeights
    from nevo.genomes.noise import WeightBuilder

    p = 1000 if full else 150
    table = rng.standard_normal(20 * p).astype(np.float32)
    init = (0.1 + rng.random(p)).astype(np.float32)
    seeds = rng.integers(0, 2**31, 12)
    new_seed = np.array([seeds[3], -1, seeds[4], seeds[5], seeds[6], seeds[7]])  # row 1: a copy
    ga = Population([np.array(seeds[:1]), np.array(seeds[1:3])], np.array([-1, 0, 1, 1, 0, -1]), new_seed,
                    np.full(6, 0.02, np.float32), 0.02)  # fmt: skip
    theta = rng.standard_normal((1, p)).astype(np.float32)
    es = Population(theta, np.zeros(4, np.int64), np.array([seeds[8], seeds[8], seeds[9], seeds[9]]),
                    np.array([0.05, -0.05, 0.05, -0.05], np.float32))  # fmt: skip
    device = DeviceWeights(WeightBuilder(table, init))
    assert isinstance(for_device(device.builder, "cuda"), DeviceWeights)
    host = WeightBuilder(table, init)
    for pop in (ga, es, ga.rows(np.array([4, 1])), ga):
        got = device.start(pop, np.arange(len(pop)), 4).copy_to_host()
        assert got.shape[1] % 32 == 0 and got.shape[1] >= p  # rows padded to 128 bytes
        got = got[:, :p]
        host.use(pop)
        want = host.build(np.arange(len(pop)), np.empty((len(pop), p), np.float32))
        np.testing.assert_array_equal(got, want)
    folded = WeightBuilder(table, init, fold=lambda w: None)
    assert isinstance(for_device(folded, "cuda"), AllWeights)


def evaluator_builds_its_rows_on_the_device(rng, full):
    """A task's evaluator on --device cuda builds its population's rows on the GPU (the host
    never holds them) and plays its episodes with them: every episode ends and the rows the
    policy read equal the host's build."""
    from nevo import nets, tasks
    from nevo.config import EnvConfig, RunConfig
    from nevo.episodes import Episodes, Population
    from nevo.genomes.cuda_build import DeviceWeights
    from nevo.genomes.noise import WeightBuilder
    from nevo.nets.kernels import make_policy

    task = tasks.task_for(EnvConfig(env="CartPole-v1", frame_cap=3))
    spec = nets.net_spec("mlp", task.obs_shape, task.n_actions, task.obs_dtype)
    table = rng.standard_normal(3 * spec.n_params).astype(np.float32)
    builder = WeightBuilder(table, nets.init_scale(spec))
    ev, _ = evaluator_for(task, RunConfig(env_slots=3), make_policy("cuda", spec), builder, "cuda", 3)
    try:
        assert isinstance(ev.weights, DeviceWeights)
        pop = Population(
            [np.array([7])], np.array([-1, 0, 0]), np.array([3, -1, 5]), np.full(3, 0.1, np.float32), 0.1
        )
        res = ev.run(pop, Episodes(np.array([0, 1, 2, 1]), np.arange(4)))
        assert (res.lengths >= 1).all() and (res.lengths <= 3).all(), res.lengths
        host = WeightBuilder(table, nets.init_scale(spec))
        host.use(pop)
        want = host.build(np.arange(3), np.empty((3, spec.n_params), np.float32))
        np.testing.assert_array_equal(ev.weights.rows[:3].copy_to_host()[:, : spec.n_params], want)
    finally:
        ev.close()


def fp16_weights_match_reference(rng, full):
    """16-bit weight rows (--weights fp16): the CUDA forward reads the halves, sums in float32 and
    matches the reference on the same halves, for every layer kind; rows built on the device in
    fp16 are the host's float32 build rounded once (nevo.nets.half.round_rows), bit for bit, in
    rows padded to 128 bytes."""
    from nevo.episodes import Population
    from nevo.genomes.cuda_build import DeviceWeights
    from nevo.genomes.noise import WeightBuilder

    for name, spec in small_specs().items():
        check_case(name, spec, rng, 4, 9 if full else 3, 0, "fp16")

    p = 1000 if full else 150
    table = rng.standard_normal(20 * p).astype(np.float32)
    init = (0.1 + rng.random(p)).astype(np.float32)
    seeds = rng.integers(0, 2**31, 6)
    new = np.array([seeds[1], -1, seeds[2], seeds[3]])  # a fresh row, a copy, children, a fresh row
    pop = Population([np.array(seeds[:1])], np.array([-1, 0, 0, -1]), new, np.full(4, 0.02, np.float32), 0.02)
    device = DeviceWeights(WeightBuilder(table, init, dtype=np.float16))
    got = device.start(pop, np.arange(4), 4).copy_to_host()
    assert got.dtype == np.float16 and got.shape[1] % 64 == 0 and got.shape[1] >= p, (got.dtype, got.shape)
    host = WeightBuilder(table, init, dtype=np.float16)
    host.use(pop)
    want = host.build(np.arange(4), np.empty((4, p), np.float16))
    np.testing.assert_array_equal(got[:, :p].view(np.uint16), want.view(np.uint16))


def word_loads_match_single_loads(rng, full):
    """The dense layers read 2 or 4 weights a load (fp16 rows as uint32 or uint64 words, fp32 rows
    as uint64; CudaPolicy's word_bytes) where the rows' pitch and the layer's offsets allow it, and
    one weight a load elsewhere: the logits are bit for bit those of one weight a load, for rows
    padded to 128 bytes (as the device build makes them) and for unpadded host rows."""
    from numba import cuda

    from nevo.genomes.cuda_build import pitch
    from nevo.nets import half
    from nevo.nets.kernels.cuda import CudaPolicy

    specs = small_specs()
    # dense only (fast on the simulator): the first layer's 6 outputs take no 4-half words, the
    # second's offset and 8 outputs take any; 539 parameters: unpadded host rows take none
    specs["two-dense"] = make_spec([("dense", 6), ("dense", 8)], (3, 5, 5), 3)
    # 1,032 outputs: more words than threads, so each thread holds several (and the last ones few)
    specs["wide"] = make_spec([("dense", 1032)], (2, 3, 3), 3)
    names = ["two-dense", "dense-first", "wide"] if not full else list(specs)
    for name in names:
        spec = specs[name]
        weights, rows_ind, obs = random_case(spec, rng, 4, 12 if full else 4, 2)
        for fmt, words in (("fp32", (8,)), ("fp16", (4, 8) if full else (4,))):  # (8: 4 halves a load)
            w = half.rounded(weights, fmt)
            padded = np.zeros((len(w), pitch(spec.n_params, w.itemsize)), w.dtype)
            padded[:, : spec.n_params] = w
            on_device = cuda.to_device(padded)
            one = CudaPolicy(spec, word_bytes=w.itemsize)
            one.load(on_device)
            want_a, want_l = one.forward(rows_ind, obs)
            for word in words:
                for rows in (on_device, w):  # padded on the device; unpadded from the host
                    policy = CudaPolicy(spec, word_bytes=word)
                    policy.load(rows)
                    got_a, got_l = run_poisoned(policy, rows_ind, obs)
                    layout = "padded" if rows is on_device else "unpadded"
                    where = f"net {name}, {fmt} rows {layout}, {word}-byte words"
                    np.testing.assert_array_equal(got_l, want_l, err_msg=where)
                    np.testing.assert_array_equal(got_a, want_a, err_msg=where)
                    n = word // w.itemsize
                    for i, k in policy._dense.items():  # padded: words wherever the layer's sizes allow
                        lay = spec.layers[i]
                        fits = lay.cout % n == 0 and lay.w_offset % n == 0
                        fits &= rows is on_device or (spec.n_params * w.itemsize) % word == 0
                        assert k[4] == (n if fits else 1), f"{where}: layer {i} reads {k[4]} a load"


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


def gathered_rows_match_given_rows(rng, full):
    """policy(rows_ind, obs, take) (the pipeline's call: every slot's frames, a slot per row,
    gathered into the page-locked buffer) gives the actions and logits of policy(rows_ind,
    obs[take]) bit for bit, for uint8 frames and float32 vectors; a take out of range or of the
    wrong length is a one-line error."""
    from nevo.nets.kernels.cuda import CudaPolicy

    for spec in (small_specs()["dense-first"], make_spec([("dense", 6)], (5, 1, 1), 3, obs_dtype=np.float32)):
        weights, rows_ind, obs = random_case(spec, rng, 3, 7)
        take = rng.permutation(len(obs))[:5]  # 5 of the 7 slots, in a scrambled order
        given = CudaPolicy(spec)
        given.load(weights)
        want = given.forward(rows_ind[:5], obs[take])
        policy = CudaPolicy(spec)
        policy.load(weights)
        policy.forward(rows_ind[:5], obs[::-1][:5])  # other frames in its buffers first
        policy.upload(rows_ind[:5], obs, take)
        policy.launch()
        got = policy.fetch_actions(), policy.activations(len(spec.layers) - 1)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
        bad_takes = (
            (np.array([0, 1, 2, 3, 7]), IndexError),
            (take[:4], ValueError),
            (take * 1.0, ValueError),
        )
        for bad, error in bad_takes:
            try:
                policy.upload(rows_ind[:5], obs, bad)
            except error as e:
                assert "take must" in str(e) and "\n" not in str(e), e
            else:
                raise AssertionError(f"take {bad.tolist()}: no error")


def steps_in_flight_keep_their_own_actions(rng, full):
    """Two steps submitted before either is collected (the evaluator stages one group while the
    GPU runs another's forward) each get their own actions, those of a synchronous call, for
    greedy and continuous actions, whichever is collected first; a third submit, or a second
    collect of one step, is a one-line error; release() drops a step left in flight (a run
    stopped by an error)."""
    from nevo.nets.kernels.cuda import CudaPolicy

    continuous = make_spec([("dense", 6)], (5, 1, 1), 3, obs_dtype=np.float32, action="tanh")
    for spec in (small_specs()["dense-first"], continuous):
        weights, rows_ind, obs = random_case(spec, rng, 4, 9)
        policy = CudaPolicy(spec)
        policy.load(weights)
        want = []
        for part in (slice(0, 3), slice(3, None)):  # the second has more rows: covers the first
            policy.upload(rows_ind[part], obs[part])  # the step-by-step path, without submit/collect
            policy.launch()
            want.append(policy.fetch_actions())
        want_a, want_b = want
        a = policy.submit(rows_ind[:3], obs[:3])
        b = policy.submit(rows_ind[3:], obs[3:])
        try:
            policy.submit(rows_ind[:1], obs[:1])
        except RuntimeError as e:
            assert "in flight" in str(e) and "\n" not in str(e), e
        else:
            raise AssertionError("a third step in flight: no error")
        np.testing.assert_array_equal(policy.collect(a), want_a)
        np.testing.assert_array_equal(policy.collect(b), want_b)
        try:
            policy.collect(a)
        except RuntimeError as e:
            assert "collected already" in str(e), e
        else:
            raise AssertionError("a step collected twice: no error")
        # a step collected out of turn frees its own host set: the next one takes that set
        a, b = policy.submit(rows_ind[:3], obs[:3]), policy.submit(rows_ind[3:], obs[3:])
        np.testing.assert_array_equal(policy.collect(b), want_b)
        c = policy.submit(rows_ind[3:], obs[3:])
        np.testing.assert_array_equal(policy.collect(a), want_a)
        np.testing.assert_array_equal(policy.collect(c), want_b)
        policy.submit(rows_ind[:3], obs[:3])  # left in flight
        policy.release()
        policy.load(weights)
        c, d = policy.submit(rows_ind[3:], obs[3:]), policy.submit(rows_ind[:3], obs[:3])
        np.testing.assert_array_equal(policy.collect(d), want_a)
        np.testing.assert_array_equal(policy.collect(c), want_b)


def pipeline_with_steps_in_flight_plays_the_synchronous_episodes(rng, full):
    """The overlap pipeline on a CudaPolicy (a group's step collected after the next group's is
    submitted, reset groups' steps among them) plays exactly the episodes it plays when every
    call waits for its own actions: each row's frames get the same action, and the returns,
    lengths and frames are the same."""
    from nevo.config import EnvConfig
    from nevo.episodes import Episodes
    from nevo.evaluation.pipeline import AtariEvaluator
    from nevo.evaluation.slot_weights import GivenRows
    from nevo.nets import OBS_SHAPE
    from nevo.nets.kernels.cuda import CudaPolicy

    class Recording:  # each row's (individual, frames' hash) and action; submits only if asked
        def __init__(self, policy, submits):
            self.policy, self.seen = policy, []
            self.load, self.release = policy.load, policy.release
            if submits:
                self.submit, self.collect = self._submit, self._collect

        def keys(self, rows_ind, obs, take):
            frames = obs if take is None else obs[take]
            return [(int(i), hash(frames[k].tobytes())) for k, i in enumerate(rows_ind)]

        def __call__(self, rows_ind, obs, take=None):
            actions = self.policy(rows_ind, obs, take)
            self.seen += zip(self.keys(rows_ind, obs, take), actions.tolist())
            return actions

        def _submit(self, rows_ind, obs, take=None):
            return self.keys(rows_ind, obs, take), self.policy.submit(rows_ind, obs, take)

        def _collect(self, step):
            keys, ticket = step
            actions = self.policy.collect(ticket)
            self.seen += zip(keys, actions.tolist())
            return actions

    spec = make_spec([("conv", 2, 8, 8)], OBS_SHAPE, 18)  # 11x11x2 features, then the 18 logits
    weights = rng.standard_normal((6, spec.n_params), dtype=np.float32) * init_scale(spec)

    cfg = EnvConfig(game="frostbite", frame_cap=48, noop_max=1)
    episodes = Episodes(np.array([0, 1, 2, 3, 4, 5]), np.arange(300, 306))
    results, policies = [], [Recording(CudaPolicy(spec), True), Recording(CudaPolicy(spec), False)]
    for policy in policies:
        ev = AtariEvaluator(
            cfg, policy, GivenRows(weights), slots=4, threads=2, group_size=2, pipeline="overlap"
        )
        try:
            results.append(ev.run(None, episodes))
        finally:
            ev.close()
    submitted, waited = results
    assert (submitted.lengths > 2).all(), submitted.lengths  # the net chose actions in every episode
    # every row got the action of the same frames in both runs (the episodes' scores alone would
    # not show a mix-up: 12 steps of Frostbite score nothing)
    assert len(policies[0].seen) > 30 and len({a for _, a in policies[0].seen}) > 1
    assert sorted(policies[0].seen) == sorted(policies[1].seen)
    np.testing.assert_array_equal(submitted.returns, waited.returns)
    np.testing.assert_array_equal(submitted.lengths, waited.lengths)
    np.testing.assert_array_equal(submitted.frames, waited.frames)


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


def policy_reuses_buffers(rng, full):
    """One load serves calls whose row counts shrink and grow: row buffers are reallocated only
    when a call has more rows than ever before (x2), never on shrinking; the weights stay put."""
    from nevo.nets.kernels.cuda import CudaPolicy

    spec = small_specs()["dense-first"]  # cheap to simulate; the buffers are the same for any net
    weights = rng.standard_normal((5, spec.n_params), dtype=np.float32) * init_scale(spec)
    policy = CudaPolicy(spec)
    policy.load(weights)
    device_weights = policy.weights
    seen = []
    for rows in (3, 1, 4, 2, 0, 7):
        rows_ind = rng.integers(0, 5, rows)
        obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
        before = (policy.allocations, policy.capacity)
        if rows:
            assert_matches(spec, *run_poisoned(policy, rows_ind, obs), weights, rows_ind, obs)
        else:
            assert policy(rows_ind, obs).shape == (0,)
        grew = rows > before[1]
        assert policy.allocations == before[0] + grew, (
            f"rows {rows}: allocations {before} -> {policy.allocations}"
        )
        assert policy.capacity >= rows and (not grew or policy.capacity >= 2 * before[1])
        assert policy.weights is device_weights, "the weights were uploaded again"
        seen.append((rows, policy.allocations, policy.capacity))
    assert seen[-1][1] == 3, f"expected 3 allocations (for 3, then 6, then 12 rows): {seen}"


def same_device_memory(a, b) -> bool:
    """Whether two device arrays hold the same memory: their data pointers on a GPU (where
    cuda.as_cuda_array wraps a caller's array in a new object each time), the object itself under
    the simulator (whose arrays have no pointer)."""
    import numba

    if numba.config.ENABLE_CUDASIM:
        return a is b
    return a.__cuda_array_interface__["data"][0] == b.__cuda_array_interface__["data"][0]


def load_reuses_weight_memory(rng, full):
    """A later, smaller load (validation's candidates) reuses the device weights' memory, and a
    device array (as the benchmark fills) is used as it is, without a copy, its rows padded or not."""
    from numba import cuda

    from nevo.nets.kernels.cuda import CudaPolicy

    spec = small_specs()["dense-first"]
    policy = CudaPolicy(spec)
    big = rng.standard_normal((6, spec.n_params), dtype=np.float32)
    policy.load(big)
    held = policy.weights
    small = rng.standard_normal((2, spec.n_params), dtype=np.float32)
    policy.load(small)
    assert policy.weights is held and policy.n_ind == 2
    rows_ind, obs = np.array([1, 0, 1]), rng.integers(0, 256, (3, *spec.obs_shape), dtype=np.uint8)
    assert_matches(spec, *run_poisoned(policy, rows_ind, obs), small, rows_ind, obs)
    try:
        policy(np.array([2]), obs[:1])
        raise AssertionError("an individual beyond the load was accepted")
    except IndexError:
        pass
    device = cuda.to_device(big)
    policy.load(device)
    assert same_device_memory(policy.weights, device)  # used as it is: no copy
    assert_matches(spec, *run_poisoned(policy, rows_ind, obs), big, rows_ind, obs)
    padded = np.full((6, spec.n_params + 5), np.nan, np.float32)  # rows with a pitch: NaN past the net
    padded[:, : spec.n_params] = big
    policy.load(cuda.to_device(padded))
    assert_matches(spec, *run_poisoned(policy, rows_ind, obs), big, rows_ind, obs)
    policy.load(small)  # back to host weights: the caller's device array is left as it was
    assert policy.weights is held
    np.testing.assert_array_equal(device.copy_to_host(), big)
    policy.release()
    try:
        policy(rows_ind, obs)
        raise AssertionError("a call after release() ran")
    except RuntimeError:
        pass


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


def resolve_device_picks_cpu_under_the_simulator(rng, full):
    """ "auto" never picks the simulator; an explicit "cuda" does, and make_policy gives a CudaPolicy."""
    import numba

    from nevo.nets.kernels import make_policy, resolve_device
    from nevo.nets.kernels.cuda import CudaPolicy

    spec = small_specs()["output-only"]
    if numba.config.ENABLE_CUDASIM:
        assert resolve_device("auto") == "cpu"
    else:
        assert resolve_device("auto") == "cuda"
    assert resolve_device("cuda") == "cuda" and resolve_device("cpu") == "cpu"
    assert isinstance(make_policy("cuda", spec), CudaPolicy)


def memory_error_is_clear(rng, full):
    """A population larger than the free GPU memory is refused before allocating, naming both sizes."""
    from nevo.nets.kernels.cuda import DeviceMemoryError, check_fits

    check_fits(2**30, 2**31, "weights")
    try:
        check_fits(16 * 2**30, 10 * 2**30, "the population's weights (1,000 x 4,052,658 float32)", "GPU 0")
        raise AssertionError("no error")
    except DeviceMemoryError as e:
        msg = str(e)
        assert "16.00 GiB" in msg and "10.00 GiB" in msg and "GPU 0" in msg and "\n" not in msg, msg


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


SMALL = [
    forward_matches_reference,
    conv_tiles_match_reference,
    conv_tiles_bound_threads_per_block,
    device_build_matches_host_build,
    fp16_weights_match_reference,
    word_loads_match_single_loads,
    conv_pixels_per_thread_give_the_same_outputs,
    gathered_rows_match_given_rows,
    steps_in_flight_keep_their_own_actions,
    pipeline_with_steps_in_flight_plays_the_synchronous_episodes,
    continuous_actions_match_reference,
    evaluator_builds_its_rows_on_the_device,
    float32_vectors_match_reference,
    policy_reuses_buffers,
    load_reuses_weight_memory,
    rows_do_not_interact,
    zero_rows_and_ties,
    module_forward_has_reference_signature,
    resolve_device_picks_cpu_under_the_simulator,
    memory_error_is_clear,
]
FULL = [full_size_matches_reference]
CHECKS = {f.__name__: f for f in SMALL + FULL}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--full", action="store_true", help="also the full-size checks (needs a GPU)")
    p.add_argument("--seed", type=int, default=None, help="repeat a run (default: a fresh seed)")
    p.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run only these checks")
    p.add_argument("--json", help="also write {check: {ok, error, seconds, seed}} here")
    args = p.parse_args(argv)
    import numba

    if args.full and numba.config.ENABLE_CUDASIM:
        p.error("--full needs a real GPU: unset NUMBA_ENABLE_CUDASIM")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    mode = "CUDA simulator" if numba.config.ENABLE_CUDASIM else "GPU"
    print(f"cuda checks on the {mode}, seed {seed} (repeat with --seed {seed})", flush=True)
    names = args.only or [f.__name__ for f in SMALL + (FULL if args.full else [])]
    results = {}
    for k, name in enumerate(names):
        rng = np.random.default_rng([seed, k])
        t0 = time.perf_counter()
        try:
            CHECKS[name](rng, args.full)
            ok, error = True, ""
        except Exception:
            ok, error = False, traceback.format_exc()
        seconds = time.perf_counter() - t0
        results[name] = {"ok": ok, "error": error, "seconds": round(seconds, 2), "seed": seed}
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.1f} s)", flush=True)
        if error:
            print(error, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    failed = [n for n, r in results.items() if not r["ok"]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
