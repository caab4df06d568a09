"""The CUDA checks of the weight rows: built on the device from the noise table (GA, ES, fp16) as
the host builds them, read in words of 2 or 4 weights, and loaded without a copy where they can be.

Run by tests/cuda_checks.py in a process of its own: the CUDA simulator must be switched on before
numba.cuda is first imported, and the rest of the test suite runs the real CPU backend.
"""

import numpy as np

from nevo.evaluation.setup import evaluator_for
from nevo.nets import make_spec
from tests.cuda_checks_common import assert_matches, check_case, random_case, run_poisoned, small_specs


def device_build_matches_host_build(rng, full):
    """Rows built on the GPU (nevo.genomes.cuda_build) equal the host's build_rows bit for bit:
    fresh networks, copies and children of seed-list parents (GA), theta +- sigma eps (ES);
    a builder with a host-side fold builds on the host."""
    from nevo.episodes import Population
    from nevo.episodes.weights import AllWeights, for_device
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
