"""The CPU's "workers" pipeline: whole episodes played in the emulator processes, each with its own
forward, give the outcomes of the lockstep pipeline bit for bit; its faults are one line."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from nevo import nets
from nevo.atari.emulator import FRAME, STACK, AtariEmulator
from nevo.atari.game import atari_actions
from nevo.atari.in_worker import ASK, EpisodePlayer, read_answer
from nevo.atari.pool import EmulatorError, EmulatorPool
from nevo.config import EnvConfig
from nevo.episodes import Episodes, Population
from nevo.episodes.weights import PooledWeights
from nevo.genomes import noise
from nevo.nets.kernels import make_policy
from tests.helpers import Forever, RowsAreIndividuals, atari_evaluator, survivors_of_a_killed_owner

CFG = EnvConfig(game="frostbite", frame_cap=400)
SPEC = nets.net_spec("small", nets.OBS_SHAPE, atari_actions("frostbite"))
N = 6


def fresh(dtype):
    """(a GA's first generation of N small nets, their pooled weights)."""
    table = noise.make_table(SPEC.n_params + 1_000_000, seed=11)
    pop = Population([], np.full(N, -1, np.int64), np.arange(N, dtype=np.int64), np.zeros(N, np.float32))
    return pop, PooledWeights(noise.WeightBuilder(table, nets.init_scale(SPEC), dtype=dtype))


# two episodes of each individual, so an individual's row serves two slots at once, and a sample
# of each episode's observations (safe mutations' experiences)
EPISODES = Episodes(np.repeat(np.arange(N), 2), np.arange(2 * N, dtype=np.int64) + 40, record=7)
FIELDS = ("returns", "lengths", "frames", "behaviours", "experiences", "experience_counts")


def evaluate(pipeline, slots, dtype, runs=1, start="reference", sticky=0.0):
    pop, weights = fresh(dtype)
    cfg = replace(CFG, start=start, sticky=sticky)
    ev = atari_evaluator(cfg, make_policy("cpu", SPEC), weights, slots, 2, 1, pipeline, ram=True)
    try:
        return [ev.run(pop, EPISODES) for _ in range(runs)], ev
    finally:
        ev.close()


@pytest.mark.parametrize(
    "dtype, slots, start",
    [(np.float16, 2, "reference"), (np.float32, 3, "reference"), (np.float16, 1, "vector")],
)
@pytest.mark.slow
def test_workers_give_the_outcomes_of_lockstep(dtype, slots, start):
    """Returns, lengths, frames, final RAM and the sampled observations equal the lockstep
    pipeline's (one batched forward in this process) bit for bit, on 1 to 3 processes, and again
    when the evaluator runs a second time, with either episode start."""
    (want,), lock = evaluate("lockstep", 4, dtype, start=start)
    got, ev = evaluate("workers", slots, dtype, runs=2, start=start)
    assert ev.processes == slots and ev.pipeline == "workers"
    assert want.total_frames > 0 and want.experience_counts.min() > 0
    for res in got:
        for f in FIELDS:
            assert np.array_equal(getattr(res, f), getattr(want, f)), f
    # the figures each pipeline hands back: the forward's rows (one a step the net acted on), the
    # same in both; the emulator processes' emulating seconds (lockstep's pool is timed by its caller)
    assert ev.played.rows == lock.played.rows > 0 and 0 < got[-1].forward_s < got[-1].wall_s
    assert 0 < ev.played.emulation_s < got[-1].wall_s and lock.played.emulation_s is None


@pytest.mark.slow
def test_sticky_actions_give_the_same_episodes_in_every_layout():
    """Under sticky actions 0.25 the workers pipeline gives the lockstep pipeline's outcomes bit
    for bit (each episode's draws come from its seed, whatever process plays it), and other
    outcomes than without them."""
    (want,), _ = evaluate("lockstep", 4, np.float16, sticky=0.25)
    (got,), _ = evaluate("workers", 2, np.float16, sticky=0.25)
    (plain,), _ = evaluate("lockstep", 4, np.float16)
    for f in FIELDS:
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    assert not np.array_equal(plain.behaviours, want.behaviours)


def test_workers_refuse_a_policy_they_cannot_run():
    """A stand-in policy (no host forward to pickle) cannot play in the workers: one line."""

    class StandIn:
        def load(self, weights):
            pass

        def __call__(self, ind, obs, take=None):
            return np.zeros(len(ind), np.int64)

    with pytest.raises(ValueError) as e:
        atari_evaluator(CFG, StandIn(), RowsAreIndividuals(), 2, 2, 1, "workers")
    assert "\n" not in str(e.value) and "workers" in str(e.value)


def player_and_emulator():
    """An EpisodePlayer attached to a block of rows in this process, row 0 a fresh net, and an
    emulator at an episode's start."""
    pop, weights = fresh(np.float16)
    player = EpisodePlayer(make_policy("cpu", SPEC), 2, SPEC.n_params, np.float16, (STACK, *FRAME))
    block = bytearray(EpisodePlayer.nbytes(2, SPEC.n_params, np.float16))
    weights.share(player.rows(block))
    weights.start(pop, np.arange(N), 1)
    row = int(weights.take(np.array([0]))[0])
    player.attach(block)
    em = AtariEmulator("frostbite", 4, 400)
    obs = np.zeros((STACK, *FRAME), np.uint8)
    em.restart(obs)
    return player, em, obs, row


@pytest.mark.parametrize("reference", [True, False])
def test_a_halted_episode_or_a_dead_driver_stops_the_episode_at_once(reference):
    """halt (the pool's drain after an error or Ctrl-C) and the driving process's death (the
    parent's pid changed: a killed run) each stop an episode before its next step, cut short;
    the emulator starts afresh, so the next episode plays in full."""
    player, em, obs, row = player_and_emulator()
    ask = ASK.pack(row, 3, 40, 0, reference)
    halted = read_answer(player(em, obs, ask, np.ones(1, np.int8)), obs.shape)
    assert halted.steps == 0 and halted.cut
    player.parent, parent = -1, player.parent  # as if the driving process had died
    orphan = read_answer(player(em, obs, ask, np.zeros(1, np.int8)), obs.shape)
    assert orphan.steps == 0 and orphan.cut
    player.parent = parent
    whole = read_answer(player(em, obs, ask, np.zeros(1, np.int8)), obs.shape)
    assert whole.steps > 3 and not whole.cut and whole.frames > 0


@pytest.mark.slow
def test_the_pool_plays_with_its_player_answers_and_drains_a_playing_slot():
    """play() reaches the slot's worker's player with the ask and the pool's extra block; the
    answer comes back with its ticket; drain() stops an episode still playing (halt) and throws
    its answer away."""
    pool = EmulatorPool("pong", 4, 20_000, 2, 2, player=Forever(), extra_bytes=64)
    try:
        pool.extra[:4] = b"rows"
        pool.play(1, b"ask!")
        time.sleep(0.3)
        t0 = time.monotonic()
        pool.drain()  # the slot plays until halted
        assert time.monotonic() - t0 < 5 and not pool._open and not pool.halt.any()
        pool.halt[1] = 1  # the next play stops at once: an answer, with the block's bytes
        answer = pool.answers([pool.play(1, b"ask?")])[0][1]
        assert answer[:4] == b"ask?" and answer[-4:] == b"rows"
    finally:
        pool.close()


@pytest.mark.slow
def test_a_killed_worker_mid_episode_is_one_line_and_never_a_hang():
    """kill -9 of an emulator process while it plays: the run raises an EmulatorError of one line
    naming it within seconds, and the evaluator closes."""
    pop, weights = fresh(np.float16)
    ev = atari_evaluator(EnvConfig(game="frostbite"), make_policy("cpu", SPEC), weights, 2, 2, 1, "workers")
    victim = ev.pool.procs[1]
    timer = threading.Timer(1.0, os.kill, (victim.pid, signal.SIGKILL))
    try:
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(EmulatorError) as e:  # (many episodes: far more than a second's play)
            ev.run(pop, Episodes(np.arange(N).repeat(20), np.arange(20 * N, dtype=np.int64)))
        assert time.monotonic() - t0 < 20
        assert str(e.value) == f"emulator process 1 (pid {victim.pid}) died (killed by signal 9)"
    finally:
        timer.cancel()
        ev.close()


OWNER = textwrap.dedent("""
    import numpy as np
    from nevo import nets
    from nevo.config import EnvConfig
    from nevo.episodes import Episodes
    from tests.helpers import atari_evaluator
    from nevo.nets.kernels import make_policy
    from tests.test_in_worker import SPEC, fresh
    pop, weights = fresh(np.float16)
    ev = atari_evaluator(EnvConfig(game="frostbite"), make_policy("cpu", SPEC), weights, 2, 2, 1, "workers")
    print(*[p.pid for p in ev.pool.procs], flush=True)
    ev.run(pop, Episodes(np.arange(6).repeat(20), np.arange(120, dtype=np.int64)))  # playing when killed
""")


@pytest.mark.slow
def test_a_run_killed_mid_episode_leaves_no_emulator_process():
    """kill -9 of the process that drives the workers while they play: they stop within a few
    seconds (each checks its parent every 64 steps), not at their episodes' ends."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, env=env, cwd=root
    )
    try:
        assert not survivors_of_a_killed_owner(owner, 1.0)
    finally:
        owner.kill()


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["workers", "lockstep", "overlap"])
def test_a_worker_that_stops_answering_is_one_line_in_every_pipeline(pipeline, monkeypatch):
    """SIGSTOP of an emulator process mid-generation: past its bound (2 s for a step here, 5 s for
    an episode; in a run 60 s, and for an episode its frames at 50 frames/s or 4x at the slowest
    frames/s seen, at least 3 min) the run is an EmulatorError of one line naming the process,
    and close() leaves no process."""
    from nevo.atari import evaluator
    from nevo.atari import pool as emulator_pool
    from tests.helpers import FakePolicy

    bound = 5 if pipeline == "workers" else 2  # (a whole episode: up to 2,000 frames here)
    monkeypatch.setattr(emulator_pool, "STEP_BOUND_S", 2.0)
    monkeypatch.setattr(evaluator, "BOUND_FLOOR_S", 5.0)
    monkeypatch.setattr(evaluator, "FLOOR_RATE", 1e9)
    monkeypatch.setattr(evaluator, "FIRST_RATE", 1e9)
    cfg = replace(CFG, frame_cap=2_000)
    if pipeline == "workers":
        pop, weights = fresh(np.float16)
        policy = make_policy("cpu", SPEC)
    else:
        pop, weights, policy = None, RowsAreIndividuals(), FakePolicy()
    ev = atari_evaluator(cfg, policy, weights, 2, 2, 1, pipeline)
    victim = ev.pool.procs[1]
    timer = threading.Timer(1.0, os.kill, (victim.pid, signal.SIGSTOP))
    try:
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(EmulatorError) as e:
            ev.run(pop, Episodes(np.repeat(np.arange(N), 2), np.arange(2 * N, dtype=np.int64)))
        assert time.monotonic() - t0 < 15
        assert str(e.value) == (
            f"emulator process 1 (pid {victim.pid}) did not answer in {bound} s: stopped (SIGSTOP, a "
            "debugger) or stuck in its game"
        )
    finally:
        timer.cancel()
        ev.close()
    assert all(p.poll() is not None for p in ev.pool.procs)


def test_an_episodes_bound_follows_its_cap_and_the_slowest_rate():
    """The cap's frames at 50 frames/s, or 4x at the slowest frames/s seen where that is longer,
    never below 3 min, with no ceiling: a test episode's 400,000 frames may take 2.2 h."""
    from nevo.atari.evaluator import episode_bound

    assert episode_bound(20_000, 10_000.0) == 400.0
    assert episode_bound(5_000, 10_000.0) == 180.0
    assert episode_bound(400_000, 10_000.0) == 8_000.0
    assert episode_bound(100_000, 100.0) == 4_000.0
