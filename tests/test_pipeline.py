"""The evaluator: episodes attributed right, outcomes independent of slots, frames exact."""

import time
from dataclasses import replace

import numpy as np
import pytest

from nevo.atari.game import noop_count
from nevo.config import EnvConfig
from nevo.episodes import Episodes, Population
from nevo.episodes.weights import PooledWeights
from nevo.genomes.noise import WeightBuilder
from tests.helpers import (
    CFG,
    EPISODES,
    FakePolicy,
    RowsAreIndividuals,
    assert_outcomes,
    atari_evaluator,
    play_alone,
    policy,
)

REFERENCE_CFG = EnvConfig(game="frostbite", frame_cap=400, start="reference")


def play_alone_from_the_reference_start(ind, seed, sticky=0.0):
    """One episode on a brand-new AtariEmulator started the reference's way (AtariEmulator.begin,
    the reference's ALE calls step for step: tests/test_atari_emulator.py), then stepped one
    action at a time: (return, agent steps after the start, frames with the start's)."""
    from nevo.atari.emulator import PLAYING, AtariEmulator

    em = AtariEmulator(CFG.game, CFG.frameskip, CFG.frame_cap, sticky)
    obs = np.zeros((4, 84, 84), np.uint8)
    em.begin(obs, noop_count(seed, CFG.noop_max), seed)
    ret, steps, done = 0.0, 0, PLAYING
    while done == PLAYING:
        r, done = em.step(int(policy(obs[None], [ind])[0]), obs)
        ret, steps = ret + float(r), steps + 1
    return ret, steps, em.episode_frames()


@pytest.mark.parametrize(
    "slots, group, overlap, workers, sticky",
    [
        (3, 3, False, 2, 0.0),
        (8, 2, True, 2, 0.0),
        (1, 1, True, 1, 0.0),
        (3, 3, False, 2, 0.25),
        (8, 2, True, 2, 0.25),
    ],
)
@pytest.mark.slow
def test_the_reference_start_gives_the_outcomes_of_one_episode_at_a_time(
    slots, group, overlap, workers, sticky
):
    """With --start reference, returns, lengths (agent steps after the start) and frames (the
    start's included) equal each episode's alone on a fresh emulator, whatever the layout, with
    sticky actions too (drawn from each episode's seed); the frame cap counts after the start."""
    want = [play_alone_from_the_reference_start(i, s, sticky) for i, s in zip(EPISODES.ind, EPISODES.seeds)]
    pipeline = "overlap" if overlap else "lockstep"
    cfg = replace(REFERENCE_CFG, sticky=sticky)
    ev = atari_evaluator(cfg, FakePolicy(), RowsAreIndividuals(), slots, workers, group, pipeline)
    try:
        res = ev.run(None, EPISODES)
    finally:
        ev.close()
    assert_outcomes(res, want)
    steps, frames = (np.array(column) for column in list(zip(*want))[1:])
    assert (steps == CFG.frame_cap // CFG.frameskip).any() and (frames > CFG.frame_cap + 8).any()


@pytest.fixture(scope="module")
def reference():
    return [play_alone(i, s) for i, s in zip(EPISODES.ind, EPISODES.seeds)]


@pytest.mark.parametrize(
    "slots, group, overlap, workers",
    [(1, 1, True, 1), (3, 3, False, 2), (8, 2, True, 2), (6, 3, False, 2), (3, 3, True, 3), (4, 1, False, 1)],
)
@pytest.mark.slow
def test_outcomes_equal_one_episode_at_a_time(reference, slots, group, overlap, workers):
    """Returns, lengths and frames equal those of each episode alone on a fresh vector env (ale-py's,
    a seeded reset each), whatever the number of slots, groups and emulator processes, pipelined
    or not: an episode started by restoring the reset's state on a slot that played others is
    the same episode."""
    pol, ind = FakePolicy(), RowsAreIndividuals()
    ev = atari_evaluator(
        CFG,
        pol,
        ind,
        slots=slots,
        processes=workers,
        group=group,
        pipeline="overlap" if overlap else "lockstep",
    )
    try:
        res = ev.run(None, EPISODES)
        again = ev.run(None, EPISODES)  # the same evaluator, reused, gives the same again
    finally:
        ev.close()
    assert_outcomes(res, reference)
    assert_outcomes(again, reference)


def test_frames_respect_the_cap(reference):
    """No episode runs past the frame cap (plus ALE's one reset frame)."""
    frames = np.array([f for _, _, f in reference])
    assert frames.max() <= CFG.frame_cap + 1
    assert (frames == CFG.frame_cap + 1).any(), "some test episode should hit the cap"


def test_noop_counts_span_one_to_noop_max():
    """No-op counts are 1..noop_max, a function of the episode seed alone."""
    counts = [noop_count(s, 30) for s in range(3000)]
    assert min(counts) == 1 and max(counts) == 30
    assert counts == [noop_count(s, 30) for s in range(3000)]
    assert len(set(counts)) == 30


@pytest.mark.slow
def test_the_policy_sees_only_its_own_rows():
    """Rows given to the forward are the live, post-no-op episodes with their own individuals."""
    seen = []

    class Spy(FakePolicy):
        def __call__(self, ind, obs, take=None):
            seen.append(np.asarray(ind).copy())
            return super().__call__(ind, obs, take)

    ev = atari_evaluator(CFG, Spy(), RowsAreIndividuals(), slots=4, processes=1)
    try:
        ev.run(None, Episodes(np.array([5, 6]), np.array([1, 2])))
    finally:
        ev.close()
    assert all(set(s) <= {5, 6} and len(s) <= 2 for s in seen)
    assert {5, 6} <= set(np.concatenate(seen))


@pytest.mark.slow
def test_an_error_in_the_policy_stops_the_run_and_leaves_the_evaluator_usable():
    """An exception raised mid-evaluation propagates (no hang); the emulators can run again."""
    calls = []

    class Failing(FakePolicy):
        def __call__(self, ind, obs, take=None):
            calls.append(1)
            if len(calls) == 40:
                raise RuntimeError("boom")
            return super().__call__(ind, obs, take)

    ev = atari_evaluator(CFG, Failing(), RowsAreIndividuals(), slots=4, processes=1, group=2)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            ev.run(None, EPISODES)
        res = ev.run(None, Episodes(np.array([1]), np.array([101])))
        assert res.lengths[0] > 0
    finally:
        ev.close()


@pytest.mark.slow
def test_tail_and_forward_times_are_parts_of_the_wall_time():
    """The straggler tail (fewer live episodes than slots) and the time in the policy are measured
    within the run's wall time; a policy that sleeps 2 ms a call shows in forward_s."""

    class SlowPolicy(FakePolicy):
        calls = 0

        def __call__(self, rows_ind, obs, take=None):
            self.calls += 1
            time.sleep(0.002)
            return super().__call__(rows_ind, obs, take)

    slow = SlowPolicy()
    ev = atari_evaluator(CFG, slow, RowsAreIndividuals(), slots=4, processes=1, group=2)
    try:
        res = ev.run(None, Episodes(np.array([0, 1, 2, 3, 4]), np.arange(5)))
    finally:
        ev.close()
    assert 0 < res.tail_s <= res.wall_s
    assert slow.calls > 0 and 0.002 * slow.calls <= res.forward_s < res.wall_s


def test_layout_overlaps_on_a_gpu_and_plays_in_the_workers_on_the_cpu():
    """auto picks overlap with four groups on a GPU; on the CPU each emulator process plays whole
    episodes (one process a core, no more than the individuals, one process a slot); settings win;
    the slots are whole groups, and no process has no slot."""
    from nevo.atari.evaluator import Layout, layout
    from nevo.config import RunConfig

    assert layout("cpu", 2, 1000, RunConfig()) == Layout(2, 1, 2, "workers")
    assert layout("cuda", 16, 1000, RunConfig()) == Layout(512, 128, 16, "overlap")
    assert layout("cpu", 16, 10, RunConfig()) == (10, 1, 10, "workers")  # no more slots than individuals
    assert layout("cpu", 16, 1000, RunConfig(threads=4)) == (
        4,
        1,
        4,
        "workers",
    )  # (a folder from before --processes)
    assert layout("cpu", 16, 1000, RunConfig(processes=4)) == (4, 1, 4, "workers")
    assert layout("cpu", 2, 1000, RunConfig(env_slots=6)) == (6, 1, 6, "workers")
    assert layout("cpu", 2, 1000, RunConfig(pipeline="lockstep")) == (32, 1, 2, "lockstep")
    assert layout("cpu", 2, 10, RunConfig(pipeline="lockstep")) == (10, 1, 2, "lockstep")
    assert layout("cpu", 2, 1000, RunConfig(pipeline="overlap", env_slots=12, emulators_per_group=3)) == (
        12, 3, 2, "overlap")  # fmt: skip
    assert layout("cpu", 2, 1000, RunConfig(pipeline="overlap", env_slots=10, emulators_per_group=4)) == (
        12, 4, 2, "overlap")  # fmt: skip
    assert layout("cpu", 2, 1000, RunConfig(pipeline="lockstep", env_slots=2, processes=3)) == (
        2,
        1,
        2,
        "lockstep",
    )
    with pytest.raises(ValueError, match="pipeline"):
        layout("cpu", 2, 1000, RunConfig(pipeline="fast"))


@pytest.mark.slow
def test_weights_built_per_slot_give_the_outcomes_of_one_episode_at_a_time(reference):
    """With the CPU evaluator's pooled weights (built as an episode takes a slot, fewer rows than
    individuals), the policy reads each episode's own individual: the reference outcomes."""

    class ReadsItsRow(FakePolicy):
        def load(self, weights):
            self.weights = weights

        def __call__(self, rows, obs, take=None):
            obs = obs if take is None else obs[take]
            return policy(obs, self.weights[rows, 0].astype(np.int64))  # row k holds individual k's id

    n = int(EPISODES.ind.max()) + 1
    ids = Population.of_weights(np.repeat(np.arange(n, dtype=np.float32)[:, None], 3, axis=1))
    weights = PooledWeights(WeightBuilder(None, np.zeros(3, np.float32)))
    ev = atari_evaluator(CFG, ReadsItsRow(), weights, slots=2, processes=1, group=1, pipeline="lockstep")
    try:
        res = ev.run(ids, EPISODES)
    finally:
        ev.close()
    assert len(weights.pool) == 3 < n
    ret, steps, frames = map(np.array, zip(*reference))
    np.testing.assert_array_equal(res.returns, ret)
    np.testing.assert_array_equal(res.lengths, steps)
    np.testing.assert_array_equal(res.frames, frames)


@pytest.mark.slow
def test_many_emulators_say_that_they_are_starting(monkeypatch, capsys):
    """Each emulator loads its ROM (~0.1 s), so a layout of many slots (512 on a 16-core GPU
    machine) says so on stderr before it starts them; few stay quiet."""
    from nevo.atari import evaluator

    ev = atari_evaluator(CFG, FakePolicy(), RowsAreIndividuals(), slots=2, processes=1, group=2)
    ev.close()
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(evaluator, "SAY_START_SLOTS", 2)  # 2 slots count as many here
    ev = atari_evaluator(CFG, FakePolicy(), RowsAreIndividuals(), slots=2, processes=1, group=2)
    ev.close()
    assert capsys.readouterr().err.startswith("starting 2 Atari emulators")


@pytest.mark.slow
def test_emulator_processes_run_nicer_than_the_driving_process():
    """The emulator processes run EMULATOR_NICE nicer than the process that drives them, which
    keeps its own priority, and as batch work (a woken one does not preempt the driver): the
    driving thread (the pipeline's one serial path) must not wait for a slice behind them."""
    import os

    from nevo.atari import evaluator

    driver = os.getpriority(os.PRIO_PROCESS, 0)
    lowered = min(19, driver + evaluator.EMULATOR_NICE)
    assert evaluator.EMULATOR_NICE > 0 and lowered > driver or driver == 19
    ev = atari_evaluator(CFG, FakePolicy(), RowsAreIndividuals(), slots=4, processes=2, group=2)
    try:
        assert len(ev.pool.procs) == 2
        assert {os.getpriority(os.PRIO_PROCESS, p.pid) for p in ev.pool.procs} == {lowered}
        assert {os.sched_getscheduler(p.pid) for p in ev.pool.procs} == {os.SCHED_BATCH}
        assert os.getpriority(os.PRIO_PROCESS, 0) == driver
    finally:
        ev.close()


def test_the_tail_is_counted_once_the_queue_is_empty():
    """The straggler tail is wall time with the queue empty and a slot idle; before, it is not
    (the episode book every evaluator keeps)."""
    from nevo.episodes.book import EpisodeBook

    book = EpisodeBook(Episodes(np.arange(10), np.arange(10)), 4, RowsAreIndividuals(), (1,), np.uint8)
    book.next_ep, book.t_last = 6, 0.0  # four episodes queued
    book.clock(live=2)
    assert book.tail_s == 0.0 and book.t_last > 0
    book.next_ep, book.t_last = 10, book.t_last - 2.0  # the queue is empty: a tail, 2 s of it
    book.clock(live=2)
    assert 2.0 <= book.tail_s < 3.0
    before = book.tail_s
    book.t_last -= 1.0
    book.clock(live=4)  # every slot playing: no tail
    assert book.tail_s == before
    book.t_last -= 1.0  # 3 of 4 slots: 1 s more of tail
    book.clock(live=3)
    assert 3.0 <= book.tail_s < 4.0


@pytest.mark.slow
def test_bench_driver_plays_the_same_episodes_at_either_priority(capsys):
    """experiments.bench.bench_driver's stand-in GPU runs the overlap pipeline at each priority in turn:
    the emulator processes' priority changes when they run, never what they play."""
    import re

    from experiments.bench import bench_driver

    argv = "--slots 4 --groups 2 --population 4 --frame-cap 200 --python-ms 0.1 --wait-ms 0.1 --rounds 1"
    assert bench_driver.main(argv.split()) == 0
    out = capsys.readouterr().out
    runs = re.findall(r"nicer by +(\d+), submit calls: ([\d,]+) frames, ([\d,]+) f", out)
    assert [n for n, _, _ in runs] == ["0", "10"]
    assert runs[0][1] == runs[1][1] and int(runs[0][1].replace(",", "")) > 4 * 50
    assert re.search(r"nicer by 10, submit calls against nicer by  0, submit calls: [\d.]+x", out)
