"""Atari RAM behaviours: the pipeline's final RAM equals a lone ALEInterface's for the same episode."""

import ale_py
import numpy as np
import pytest
from ale_py import roms

from nevo.atari.game import NOOP, make_atari, noop_count
from nevo.episodes import Episodes
from tests.helpers import CFG, FakePolicy, RowsAreIndividuals, atari_evaluator, policy

SCREEN = {"img_height": 210, "img_width": 160, "stack_num": 1, "maxpool": False}  # ALE's own screen


def play_beside_ale(ind, seed):
    """One episode on a 1-slot vector env with a fresh ALEInterface stepped beside it, frame for
    frame, the policy choosing from the vector env's observations; returns (the ALEInterface's
    RAM at the end, return, actions). Asserts both show the same screen at every step."""
    obs_env = make_atari(CFG, 1, 1)  # what the policy sees
    screen_env = make_atari(CFG, 1, 1, **SCREEN)  # the same emulation, full-size screens
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path(CFG.game))
    action_set = ale.getMinimalActionSet()
    ale.reset_game()
    ale.act(ale_py.Action.FIRE)  # Frostbite has FIRE: the vector env presses it on reset
    obs, _ = obs_env.reset(seed=np.zeros(1, np.int64))
    screen, _ = screen_env.reset(seed=np.zeros(1, np.int64))
    assert np.array_equal(screen[0, 0], ale.getScreenGrayscale())
    noops, ret, env_ret, actions = noop_count(seed, CFG.noop_max), 0.0, 0.0, []
    while True:
        a = NOOP if len(actions) < noops else int(policy(obs, [ind])[0])
        actions.append(a)
        obs, r, term, trunc, _ = obs_env.step(np.array([a]))
        screen, *_ = screen_env.step(np.array([a]))
        env_ret += float(r[0])
        for _ in range(CFG.frameskip):
            ret += ale.act(action_set[a])
            if ale.game_over():
                break
        if term[0] or trunc[0]:  # the vector env has reset itself: no screen to compare
            obs_env.close()
            screen_env.close()
            assert env_ret == ret
            return ale.getRAM().copy(), ret, np.array(actions, np.uint8)
        assert np.array_equal(screen[0, 0], ale.getScreenGrayscale()), f"differ at step {len(actions)}"


EPISODES = Episodes(np.array([0, 1, 2, 0, 1]), np.arange(200, 205))


@pytest.fixture(scope="module")
def alone():
    return [play_beside_ale(i, s) for i, s in zip(EPISODES.ind, EPISODES.seeds)]


@pytest.mark.slow
@pytest.mark.parametrize("slots, group, overlap", [(2, 1, True), (3, 3, False)])
def test_pipeline_ram_behaviours_equal_a_single_ale_interface(alone, slots, group, overlap):
    """With slots reused and groups pipelined or not, each episode's behaviour is the RAM a lone
    ALEInterface ends that episode with, and its return matches."""
    ev = atari_evaluator(
        CFG,
        FakePolicy(),
        RowsAreIndividuals(),
        slots=slots,
        processes=1,
        group=group,
        pipeline="overlap" if overlap else "lockstep",
        ram=True,
    )
    try:
        res = ev.run(None, EPISODES)
    finally:
        ev.close()
    assert res.behaviours.shape == (len(EPISODES.ind), 128) and res.behaviours.dtype == np.uint8
    for e, (ram, ret, actions) in enumerate(alone):
        np.testing.assert_array_equal(res.behaviours[e], ram)
        assert res.returns[e] == ret and res.lengths[e] == len(actions)
    assert len({r.tobytes() for r in res.behaviours}) > 1, "different episodes should end in different RAM"


@pytest.mark.slow
def test_without_ram_there_are_no_behaviours():
    """Without ram the pipeline gives no behaviours."""
    ev = atari_evaluator(CFG, FakePolicy(), RowsAreIndividuals(), slots=2, processes=1)
    try:
        assert ev.run(None, Episodes(np.array([0]), np.array([1]))).behaviours is None
    finally:
        ev.close()
