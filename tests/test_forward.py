"""The Numba CPU forward pass against the NumPy reference, and that it releases the GIL."""

import json
import os
import pickle
import subprocess
import sys
import threading
import time

import numba
import numpy as np
import pytest

from nevo.nets import init_scale, make_spec, net_spec
from nevo.nets.kernels import cpu, reference
from tests.helpers import SPECS, TINY, assert_matches_reference


def random_weights(spec, n, rng, init):
    """(n, n_params) float32: the reference init (scale * N(0,1)) or plain N(0,1)."""
    w = rng.standard_normal((n, spec.n_params), dtype=np.float32)
    return w * init_scale(spec) if init else w


@pytest.mark.parametrize("init", [True, False], ids=["init-scaled", "normal"])
@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("rows", [1, 3, 9])
def test_cpu_matches_reference(name, rows, init):
    """The Numba forward picks the reference's actions, logits within float32 tolerance."""
    spec = SPECS[name]
    rng = np.random.default_rng(rows)
    weights = random_weights(spec, 4, rng, init)
    rows_ind = rng.integers(0, 4, rows)  # repeated and shuffled individuals
    obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    assert_matches_reference(spec, weights, rows_ind, obs)


def test_rows_do_not_interact():
    """A row's logits are bit-identical whether run alone or in a shuffled batch (any thread count)."""
    spec = SPECS["large-tiny"]
    rng = np.random.default_rng(1)
    weights = random_weights(spec, 3, rng, True)
    rows_ind = np.array([2, 0, 2, 2, 1, 0, 2, 1])
    obs = rng.integers(0, 256, (8, *spec.obs_shape), dtype=np.uint8)
    _, batch = cpu.forward(spec, weights, rows_ind, obs)
    for r in range(8):
        _, alone = cpu.forward(spec, weights, rows_ind[r : r + 1], obs[r : r + 1])
        np.testing.assert_array_equal(alone[0], batch[r])
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        np.testing.assert_array_equal(cpu.forward(spec, weights, rows_ind, obs)[1], batch)
    finally:
        numba.set_num_threads(threads)


def test_an_unpickled_spec_runs_the_kernel_its_original_runs():
    """An emulator or Dask worker gets the spec pickled: its table comes back read-only, so the
    forward finds the kernel compiled for the original (a writable table was a new kind of input,
    compiled afresh in every worker of a fresh install)."""
    spec = net_spec("small")
    copy = pickle.loads(pickle.dumps(spec))
    assert not copy.table.flags.writeable and np.array_equal(copy.table, spec.table)
    w = np.random.default_rng(0).standard_normal((2, spec.n_params)).astype(np.float32) * 0.05
    obs = np.random.default_rng(1).integers(0, 256, (3, *spec.obs_shape)).astype(np.uint8)
    _, here = cpu.forward(spec, w, np.array([0, 1, 0]), obs)
    kinds = len(cpu._forward.signatures)
    _, there = cpu.forward(copy, w, np.array([0, 1, 0]), obs)
    assert len(cpu._forward.signatures) == kinds
    np.testing.assert_array_equal(there, here)


def test_zero_rows():
    """rows = 0 gives empty actions and (0, n_actions) logits."""
    spec = SPECS["small-tiny"]
    weights = np.zeros((2, spec.n_params), np.float32)
    actions, logits = cpu.forward(spec, weights, np.zeros(0, np.int64), np.zeros((0, *TINY), np.uint8))
    assert actions.shape == (0,) and logits.shape == (0, spec.n_actions)
    assert actions.dtype == np.int64 and logits.dtype == np.float32


def test_ties_go_to_the_first_action():
    """With all-zero weights every logit ties and the greedy action is 0, as np.argmax."""
    spec = SPECS["small-tiny"]
    obs = np.full((3, *TINY), 255, np.uint8)
    actions, logits = cpu.forward(spec, np.zeros((1, spec.n_params), np.float32), np.zeros(3, np.int64), obs)
    assert not actions.any() and not logits.any()


def test_bad_inputs_are_refused():
    """Wrong weight dtype, obs shape or individual index raise instead of computing garbage."""
    spec = SPECS["small-tiny"]
    weights = np.zeros((2, spec.n_params), np.float32)
    obs = np.zeros((1, *TINY), np.uint8)
    with pytest.raises(TypeError):
        cpu.forward(spec, weights.astype(np.float64), np.zeros(1, np.int64), obs)
    with pytest.raises(ValueError):
        cpu.forward(spec, weights, np.zeros(1, np.int64), obs[:, :2])
    with pytest.raises(IndexError):
        cpu.forward(spec, weights, np.array([2]), obs)


@pytest.mark.parametrize("n_actions", [2, 3])
@pytest.mark.parametrize("obs_shape", [(4, 1, 1), (8, 1, 1)])
@pytest.mark.parametrize("rows", [1, 7, 40])
def test_mlp_on_float32_vectors_matches_reference(obs_shape, n_actions, rows):
    """On float32 vector observations (used as given, not /255) the Numba mlp matches the reference."""
    spec = net_spec("mlp", obs_shape, n_actions, np.float32)
    rng = np.random.default_rng([rows, obs_shape[0], n_actions])
    weights = random_weights(spec, 5, rng, True)
    rows_ind = rng.integers(0, 5, rows)  # repeated and shuffled individuals
    obs = (3 * rng.standard_normal((rows, *obs_shape))).astype(np.float32)  # (rows, n, 1, 1)
    assert_matches_reference(spec, weights, rows_ind, obs)


def test_wrong_obs_dtype_is_refused():
    """Observations of another dtype than the spec's are a ValueError naming the expected dtype."""
    mlp = net_spec("mlp", (4, 1, 1), 2, np.float32)
    weights = np.zeros((1, mlp.n_params), np.float32)
    rows_ind = np.zeros(2, np.int64)
    for dtype in (np.uint8, np.float64):
        with pytest.raises(ValueError, match="float32"):
            cpu.forward(mlp, weights, rows_ind, np.zeros((2, 4, 1, 1), dtype))
    small = SPECS["small-tiny"]
    with pytest.raises(ValueError, match="uint8"):
        cpu.forward(
            small, np.zeros((1, small.n_params), np.float32), rows_ind, np.zeros((2, *TINY), np.float32)
        )


MNIST = ((1, 28, 28), 10)  # one 28x28 grayscale digit, ten classes


@pytest.mark.parametrize("name, rows, shape", [("small", 5, ()), ("large", 3, ()), ("mnist", 6, MNIST),
                                               ("mnist-large", 4, MNIST)])  # fmt: skip
def test_full_size_matches_reference(name, rows, shape):
    """At full size (4x84x84, 18 actions; MNIST's 1x28x28, 10 classes) the Numba forward matches
    the reference."""
    spec = net_spec(name, *shape)
    rng = np.random.default_rng(7)
    weights = random_weights(spec, 2, rng, True)
    obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    assert_matches_reference(spec, weights, rng.integers(0, 2, rows), obs)


def python_ticks_during(fn):
    """Main-thread loop iterations while fn runs in another thread, in the middle half of its run.

    A function holding the GIL lets no Python run until it returns, so the count is then 0 (the
    main thread's ticks land after the end); a GIL-free one leaves the main thread ticking.
    """
    span, started = [], threading.Event()

    def worker():
        started.set()
        t0 = time.perf_counter()
        fn()
        span.extend([t0, time.perf_counter()])

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait()
    ticks = []
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    (t0, t1), ticks = span, np.array(ticks)
    quarter = (t1 - t0) / 4
    return np.count_nonzero((ticks > t0 + quarter) & (ticks < t1 - quarter))


@numba.njit(nogil=False)
def _hold_gil_for(seconds):
    """Spin for about `seconds` without releasing the GIL (the harness's negative control).

    Each square root waits for the one before (about 15 cycles each), so the compiler cannot
    vectorise the loop away: a sum of independent roots ran in a tenth of the time on a fast CI
    machine, short enough that the worker's wait for the GIL after it dominated the span.
    """
    t, x = 0, 1.0
    while t < seconds * 2e8:
        x = np.sqrt(x + t)
        t += 1
    return x


def test_forward_releases_the_gil():
    """Python code keeps running in another thread during a forward call (the emulator's thread)."""
    spec = net_spec("small")
    rng = np.random.default_rng(3)
    weights = random_weights(spec, 2, rng, True)
    rows = 256  # ~0.1 s of work
    rows_ind = rng.integers(0, 2, rows)
    obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    cpu.forward(spec, weights, rows_ind[:1], obs[:1])  # compile (or load) first
    _hold_gil_for(0.0)
    # the harness can tell (best of 3: on a loaded machine the main thread may be descheduled
    # while it holds the GIL, after the worker took its start time)
    assert min(python_ticks_during(lambda: _hold_gil_for(0.3)) for _ in range(3)) == 0
    assert python_ticks_during(lambda: cpu.forward(spec, weights, rows_ind, obs)) >= 10
    # Parallel regions may release the GIL by themselves; the serial parts need nogil on the entry.
    assert cpu._forward.targetoptions["nogil"]


def test_many_groups_match_few_groups():
    """Logits are bit-identical whether a batch has many individuals (one pass per individual) or few."""
    spec = SPECS["large-tiny"]
    rng = np.random.default_rng(2)
    weights = random_weights(spec, 8, rng, True)
    rows_ind = np.array([5, 1, 7, 0, 3, 6, 2, 4, 1, 5])  # 8 groups: >= 2 per thread
    obs = rng.integers(0, 256, (10, *spec.obs_shape), dtype=np.uint8)
    _, many = cpu.forward(spec, weights, rows_ind, obs)
    for r in range(10):
        _, alone = cpu.forward(spec, weights, rows_ind[r : r + 1], obs[r : r + 1])
        np.testing.assert_array_equal(alone[0], many[r])
    _, two = cpu.forward(spec, weights, rows_ind[[0, 9, 1, 8]], obs[[0, 9, 1, 8]])  # 2 groups
    np.testing.assert_array_equal(two, many[[0, 9, 1, 8]])


def test_pool_takes_the_window_max_and_its_padding_never_wins():
    """A 2x2 max-pool of a 3x3 input (SAME: 2x2 outputs, one padded row and column after) gives
    each window's largest input, also where every input is negative (the padding is no 0)."""
    spec = make_spec([("conv", 1, 1, 1), ("pool", 2)], (1, 3, 3), 1)
    assert [lay.out_hw for lay in spec.layers] == [(3, 3), (2, 2), (1, 1)] and spec.layers[1].pad == (
        0,
        1,
        0,
        1,
    )
    obs = np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3) * 20  # 0, 20, ..., 160
    weights = np.zeros((1, spec.n_params), np.float32)
    conv, out = spec.layers[0], spec.layers[2]
    weights[0, conv.w_offset] = 255.0  # the conv passes the pixel (ReLU: >= 0)
    weights[0, out.w_offset : out.b_offset] = [1.0, 10.0, 100.0, 1000.0]  # logit = sum of weighted maxima
    want = 1 * 80 + 10 * 100 + 100 * 140 + 1000 * 160
    for forward in (reference.forward, cpu.forward):
        np.testing.assert_allclose(
            forward(spec, weights, np.zeros(1, np.int64), obs)[1][0, 0], want, rtol=1e-6
        )
    from nevo.nets.kernels.reference import max_pool_same

    x = -np.arange(1.0, 10.0).reshape(3, 3, 1)  # all negative: the padded cells must not win with 0
    np.testing.assert_array_equal(max_pool_same(x, 2, 2, (0, 1, 0, 1))[..., 0], [[-1, -3], [-7, -9]])


@numba.njit
def _compiled_table(obs, div):
    return cpu.input_table(obs, div)


@pytest.mark.parametrize(
    "dtype, div",
    [
        (np.uint8, 255.0),
        (np.uint8, 7.0),
        (np.float32, 1.0),
        (np.float32, 3.0),
        (np.uint16, 255.0),
        (np.int8, 2.0),
    ],
)
@pytest.mark.parametrize("name", ["large-tiny", "odd", "dense-only", "asymmetric"])
def test_the_input_is_the_padded_hwc_quotient_bit_for_bit(name, dtype, div):
    """load_obs writes obs[r] / div (float32, the reference's division) transposed to HWC inside
    the first conv's padding and nowhere else; uint8 pixels go through a table of their quotients,
    which must be those divisions bit for bit (every one of the 256 values is fed)."""
    # asymmetric: SAME padding of an 8x8/4 conv on 13x11 is 3 above, 4 below, 2 left, 3 right
    spec = (
        make_spec([("conv", 3, 8, 4), ("dense", 4)], (2, 13, 11), 3) if name == "asymmetric" else SPECS[name]
    )
    c, h, w = spec.obs_shape
    lay = spec.layers[0]
    pt, pb, pl, pr = lay.pad if lay.kind == "conv" else (0, 0, 0, 0)
    if name == "asymmetric":
        assert (pt, pb, pl, pr) == (3, 4, 2, 3)
    rows = -(-256 // (c * h * w)) + 1  # enough rows that every uint8 value appears
    values = np.random.default_rng(3).permutation(np.resize(np.arange(256), rows * c * h * w))
    obs = values.reshape(rows, c, h, w).astype(dtype)  # int8: -128..127 (a wrapped cast)
    quotients = _compiled_table(obs, div)
    if dtype == np.uint8:
        want = np.arange(256, dtype=np.float32) / np.float32(div)
        np.testing.assert_array_equal(quotients.view(np.uint32), want.view(np.uint32))
    else:
        assert quotients.size == 0  # other observations are divided one by one
    for r in range(rows):
        dst = np.full(cpu.segments(spec.table)[1], np.nan, np.float32)  # NaN: never written
        cpu.load_obs(spec.table, obs, r, dst, div, quotients)
        got = dst.reshape(h + pt + pb, w + pl + pr, c)
        inside = obs[r].transpose(1, 2, 0).astype(np.float32) / np.float32(div)
        np.testing.assert_array_equal(got[pt : pt + h, pl : pl + w].view(np.uint32), inside.view(np.uint32))
        got[pt : pt + h, pl : pl + w] = np.nan
        assert np.isnan(got).all()  # the padding: left as it was


def test_blas_runs_one_thread_even_if_loaded_first():
    """The convs' BLAS calls run in Numba's threads: BLAS threads of its own would oversubscribe the
    cores. Importing the CPU kernels limits every loaded BLAS to one thread, also when SciPy came
    first (as it does under EvoTorch or in a notebook)."""
    code = (
        "import scipy.linalg, json\n"
        "import nevo.nets.kernels.cpu\n"
        "from threadpoolctl import threadpool_info\n"
        "print(json.dumps([d['num_threads'] for d in threadpool_info() if d['user_api'] == 'blas']))"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)
    assert run.returncode == 0, run.stderr
    threads = json.loads(run.stdout.strip().splitlines()[-1])
    assert threads and all(n == 1 for n in threads), threads
