"""The CUDA checks of CudaPolicy's calls: gathered rows, steps in flight and the overlap pipeline
on them, reused buffers, the --device choice, and the out-of-memory error.

Run by tests/cuda_checks.py in a process of its own: the CUDA simulator must be switched on before
numba.cuda is first imported, and the rest of the test suite runs the real CPU backend.
"""

import time

import numpy as np

from nevo.nets import init_scale, make_spec
from tests.cuda_checks_common import assert_matches, random_case, run_poisoned, small_specs


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
        t0 = time.monotonic()
        while not policy.done(b):  # done never waits, and says so once the GPU has finished
            assert time.monotonic() - t0 < 10, "done() still False after 10 s"
        assert policy.done(a)  # (the stream runs the steps in order)
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
    """The overlap pipeline on a CudaPolicy (a group's step collected once it is done or after the
    next group's is submitted, reset groups' steps among them) plays exactly the episodes it plays when every
    call waits for its own actions: each row's frames get the same action, and the returns,
    lengths and frames are the same."""
    from nevo.config import EnvConfig
    from nevo.episodes import Episodes
    from nevo.episodes.weights import GivenRows
    from nevo.nets import OBS_SHAPE
    from nevo.nets.kernels.cuda import CudaPolicy
    from tests.helpers import atari_evaluator

    class Recording:  # each row's (individual, frames' hash) and action; submits only if asked
        def __init__(self, policy, submits):
            self.policy, self.seen = policy, []
            self.load, self.release = policy.load, policy.release
            if submits:  # (and the GPU's done: the pipeline sends a batch as soon as it is)
                self.submit, self.collect = self._submit, self._collect
                self.done = lambda step: policy.done(step[1])

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

    # 11x11x2 features, then the 18 logits: a 4x4 kernel at stride 8 simulates in half the time of
    # an 8x8 one, and 8 steps an episode are enough (the simulator's cost is ~1 s a row)
    spec = make_spec([("conv", 2, 4, 8)], OBS_SHAPE, 18)
    weights = rng.standard_normal((6, spec.n_params), dtype=np.float32) * init_scale(spec)

    cfg = EnvConfig(game="frostbite", frame_cap=32, noop_max=1)
    episodes = Episodes(np.array([0, 1, 2, 3, 4, 5]), np.arange(300, 306))
    results, policies = [], [Recording(CudaPolicy(spec), True), Recording(CudaPolicy(spec), False)]
    for policy in policies:
        ev = atari_evaluator(
            cfg, policy, GivenRows(weights), slots=4, processes=2, group=2, pipeline="overlap"
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
