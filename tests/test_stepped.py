"""The pipelines whose emulators the driving process steps (nevo.atari.stepped): what a
received step does to the episode book, a GPU policy's submitted step, and the overlap pipeline's
first-ready units."""

import numpy as np
import pytest

from nevo.config import EnvConfig
from nevo.episodes import Episodes
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


@pytest.fixture(scope="module")
def reference():
    """Each of EPISODES played alone: (return, length, frames)."""
    return [play_alone(i, s) for i, s in zip(EPISODES.ind, EPISODES.seeds)]


def test_a_received_step_counts_the_tail_from_the_slots_still_playing():
    """The lockstep and overlap pipelines' receive: an ended slot takes the queue's next episode;
    once the queue is empty an ended slot goes idle, and from then on the time counts as tail."""
    from types import SimpleNamespace

    from nevo.atari.stepped import Stepped
    from nevo.episodes import Episodes
    from nevo.episodes.book import EpisodeBook

    S = 2
    pool = SimpleNamespace(obs=np.zeros((S, 1), np.uint8), reward=np.ones(S), done=np.zeros(S, np.uint8),
                           frames=np.full(S, 4), seed=np.zeros(S, np.int64),
                           wait=lambda ticket: None)  # fmt: skip
    ev = SimpleNamespace(policy=FakePolicy(), env_cfg=EnvConfig(game="pong"), slots=S, pool=pool)
    book = EpisodeBook(Episodes(np.arange(3), np.arange(3)), S, RowsAreIndividuals(), (1,), np.uint8)
    stepped = Stepped(ev, book)
    book.start()
    pool.done[:] = [1, 0]  # slot 0's episode ends: the queue's last episode takes it
    book.t_last -= 1.0
    stepped.receive((np.arange(S), None))
    assert list(book.slot_ep) == [2, 1] and book.tail_s == 0.0 and book.done == 1
    assert pool.seed[0] == 2  # (the refilled slot's new episode's seed, for its start's sticky actions)
    book.t_last -= 1.0  # the queue is empty, both slots play: no tail
    pool.done[:] = [0, 1]
    stepped.receive((np.arange(S), None))
    assert list(book.slot_ep) == [2, -1] and book.tail_s == 0.0
    book.t_last -= 1.0  # one slot idle: a second of tail
    pool.done[:] = [1, 0]
    stepped.receive((np.array([0]), None))
    assert 1.0 <= book.tail_s < 2.0 and list(book.slot_ep) == [-1, -1] and book.done == 3
    # (the reference start's step, which the pool plays, is not counted in a length)
    assert list(book.lengths) == [0, 1, 1] and list(book.returns) == [1.0, 2.0, 2.0]


class SubmittingPolicy(FakePolicy):
    """A stand-in with CudaPolicy's submit/collect: the actions of a step are computed at submit,
    handed out at collect; it counts the steps in flight (CudaPolicy takes at most two)."""

    def __init__(self):
        self.in_flight = self.most = 0

    def submit(self, ind, obs, take=None):
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        assert self.in_flight <= 2, "a third step in flight"
        return policy(obs if take is None else obs[take], ind)

    def collect(self, step):
        self.in_flight -= 1
        return step


@pytest.mark.slow
@pytest.mark.parametrize("slots, group", [(4, 2), (6, 2), (8, 2)])
def test_a_submitted_step_is_collected_after_the_next_group_is_staged(reference, slots, group):
    """With a policy that submits and collects (the GPU's), a group's actions are collected and sent
    after the next group's step is submitted: two steps in flight, never three, and the outcomes of
    each episode alone."""
    pol = SubmittingPolicy()
    ev = atari_evaluator(CFG, pol, RowsAreIndividuals(), slots=slots, processes=2, group=group)
    try:
        res = ev.run(None, EPISODES)
    finally:
        ev.close()
    assert pol.most == 2 and pol.in_flight == 0
    np.testing.assert_array_equal(res.returns, [r for r, _, _ in reference])
    np.testing.assert_array_equal(res.lengths, [n for _, n, _ in reference])
    np.testing.assert_array_equal(res.frames, [f for _, _, f in reference])


def test_the_overlap_units_split_each_process_as_asked(monkeypatch):
    """Two units a process by default (the 16-core GPU layout: 512 slots in 16 processes, groups of
    128, units of 16), UNITS_PER_PROCESS others, a group smaller than a unit cutting it; every
    unit within one process, and every slot in one unit."""
    from nevo.atari import stepped
    from nevo.atari.pool import EmulatorPool

    class Layout:
        slots, workers = 512, 16
        units = EmulatorPool.units

    def check(units, size):
        assert all(len(u) == size for u in units)
        assert sorted(np.concatenate(units).tolist()) == list(range(512))
        assert all(len(set((u % 16).tolist())) == 1 for u in units)  # (slot s is in process s % 16)

    check(stepped.overlap_units(Layout(), 128), 16)
    monkeypatch.setattr(stepped, "UNITS_PER_PROCESS", 4)
    check(stepped.overlap_units(Layout(), 128), 8)
    check(stepped.overlap_units(Layout(), 4), 4)


class DonePolicy(SubmittingPolicy):
    """The submitting stand-in with CudaPolicy's `done`: every step is done at once. It counts the
    collects made while its step was the only one in flight."""

    def __init__(self):
        super().__init__()
        self.asked = self.alone = self.collects = 0

    def done(self, step):
        self.asked += 1
        return True

    def collect(self, step):
        self.collects += 1
        self.alone += self.in_flight == 1
        return super().collect(step)


@pytest.mark.slow
def test_a_submitted_step_that_is_done_is_sent_without_waiting_for_the_next_batch(reference):
    """A policy that says its step is done (CudaPolicy.done: the GPU finished it) has its actions
    collected and sent at once, not after the next batch is staged: most collects find their step
    alone in flight (without `done`, only the last batch's can), and every episode's outcome is
    its own."""
    pol = DonePolicy()
    ev = atari_evaluator(CFG, pol, RowsAreIndividuals(), slots=8, processes=2, group=2)
    try:
        res = ev.run(None, EPISODES)
    finally:
        ev.close()
    assert pol.in_flight == 0 and pol.asked > 0
    assert pol.alone > pol.collects / 2, (pol.alone, pol.collects)
    np.testing.assert_array_equal(res.returns, [r for r, _, _ in reference])
    np.testing.assert_array_equal(res.lengths, [n for _, n, _ in reference])
    np.testing.assert_array_equal(res.frames, [f for _, _, f in reference])


class StoppingPolicy(FakePolicy):
    """A stand-in that, at its 10th call, stops emulator process 1 (SIGSTOP) for `pause_s` (a
    thread sends SIGCONT) and records the slots of every call meanwhile."""

    def __init__(self, pause_s: float):
        self.pause_s, self.calls, self.while_stopped, self.stopped = pause_s, 0, [], False
        self.pid = None  # emulator process 1's, set once the pool is up

    def __call__(self, ind, obs, take=None):
        import os
        import signal
        import threading

        self.calls += 1
        if self.stopped:
            self.while_stopped.append(np.asarray(take).tolist())
        if self.calls == 10:
            os.kill(self.pid, signal.SIGSTOP)
            self.stopped = True

            def go_on():
                self.stopped = False
                os.kill(self.pid, signal.SIGCONT)

            threading.Timer(self.pause_s, go_on).start()
        return super().__call__(ind, obs, take)


@pytest.mark.slow
def test_the_overlap_pipeline_goes_on_while_one_process_is_stopped():
    """Batches are the first-ready units: while one of the two emulator processes is stopped for
    a second, the policy keeps choosing for the other's slots (odd slots are process 1's), and the
    outcomes are each episode's alone. (Groups that wait on every process, as before, made no call
    in that second.)"""
    episodes = Episodes(np.repeat(EPISODES.ind, 3), np.arange(100, 100 + 3 * len(EPISODES.ind)))
    pol = StoppingPolicy(pause_s=1.0)
    ev = atari_evaluator(CFG, pol, RowsAreIndividuals(), slots=8, processes=2, group=2)
    try:
        pol.pid = ev.pool.procs[1].pid
        res = ev.run(None, episodes)
    finally:
        ev.close()
    assert len(pol.while_stopped) >= 10, pol.while_stopped
    # process 1's slots only where it had answered before the signal landed: at most once for
    # each of its two units (slots 1, 3, 5, 7 in units of two), never again until it goes on
    late = [call for call in pol.while_stopped if any(s % 2 for s in call)]
    assert len(late) <= 2, pol.while_stopped
    want = [play_alone(i, s) for i, s in zip(episodes.ind, episodes.seeds)]
    assert_outcomes(res, want)
