"""Sticky actions (Machado et al. 2018) in nevo's emulator: ALE's meaning frame for frame, drawn
from the episode's seed alone; and the settings that allow them."""

import re

import ale_py
import numpy as np
import pytest
from ale_py import roms

from nevo import cli
from nevo.atari.emulator import PLAYING, STACK, AtariEmulator
from nevo.settings import ConfigError

P = 0.25  # Machado et al.'s recommendation


class AleDraws:
    """The uniform draws ALE's StellaEnvironment::act makes for player A, from its generator's
    state: ALE's Random is a std::mt19937 whose nextDouble is next() / 2**32, drawn twice a raw
    frame (player A's, then player B's)."""

    def __init__(self, state: bytes):
        # a state cloned with include_rng carries the generators as std::mt19937's text (624
        # words, then the position in them): the system's, then the environment's, which act draws
        words = [int(w) for w in re.findall(rb"(?:\d+ ){624}\d+", state)[-1].split()]
        self.mt = np.random.MT19937()
        self.mt.state = {"bit_generator": "MT19937", "state": {"key": np.array(words[:624], np.uint32),
                                                                "pos": words[624]}}  # fmt: skip

    def random(self, n: int) -> np.ndarray:
        return self.mt.random_raw(2 * n)[0::2] / 2.0**32


def ale_with_sticky_actions(game: str) -> ale_py.ALEInterface:
    """ALE's own sticky actions: a fresh emulator (random_seed 0, as nevo's start) at its reset."""
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.setFloat("repeat_action_probability", P)
    ale.setInt("random_seed", 0)
    ale.loadROM(roms.get_rom_path(game))
    ale.reset_game()
    return ale


@pytest.mark.parametrize("game, noops", [("frostbite", 7), ("space_invaders", 3)])
def test_sticky_actions_reach_the_emulator_as_ales_for_the_same_draws(game, noops):
    """Fed the draws ALE makes, nevo's emulator (ALE's stickiness off, nevo's on) plays the
    reference's start and 300 agent steps with the same RAM and rewards as ALE's own sticky
    actions, step for step; and the draws did repeat actions (without them the RAM differs)."""
    ale = ale_with_sticky_actions(game)
    em = AtariEmulator(game, 4, 20_000, sticky=P)
    em.sticky_draws = lambda seed: AleDraws(ale.cloneState(include_rng=True).serialize())
    plain = AtariEmulator(game, 4, 20_000)
    obs, plain_obs = np.zeros((STACK, 84, 84), np.uint8), np.zeros((STACK, 84, 84), np.uint8)
    em.begin(obs, noops, seed=0)
    plain.begin(plain_obs, noops)
    start = [em.actions[0]] * noops
    if em.reference_fire:
        start += [em.actions[1]] * 4 + [em.actions[2]] * 4
    for a in start:
        ale.act(a)
    np.testing.assert_array_equal(em.ram(), ale.getRAM())
    actions = np.random.default_rng(5).integers(0, len(em.actions), 300)
    differed = False
    for t, a in enumerate(actions.tolist()):
        reward, done = em.step(a, obs)
        plain.step(a, plain_obs)
        want = sum(ale.act(em.actions[a]) for _ in range(4) if not ale.game_over())
        assert reward == want, f"step {t}"
        np.testing.assert_array_equal(em.ram(), ale.getRAM(), err_msg=f"step {t}")
        differed |= not np.array_equal(em.ram(), plain.ram())
        if done != PLAYING:
            break
    assert t > 100 and differed


def play(em: AtariEmulator, seed: int, steps: int = 200) -> tuple[float, np.ndarray]:
    """(return, final RAM) of an episode begun with 5 no-ops and seed, its actions cycling."""
    obs = np.zeros((STACK, 84, 84), np.uint8)
    em.begin(obs, 5, seed)
    total = 0.0
    for t in range(steps):
        r, done = em.step(t * 7 % len(em.actions), obs)
        total += r
        if done != PLAYING:
            break
    return total, em.ram().copy()


def test_an_episodes_sticky_actions_depend_on_its_seed_alone():
    """The same seed gives the same episode on a fresh emulator and on one that played other
    episodes before; another seed gives other draws, so another episode."""
    fresh, used = AtariEmulator("frostbite", sticky=P), AtariEmulator("frostbite", sticky=P)
    play(used, 11)
    play(used, 12, steps=37)
    ret, ram = play(fresh, 3)
    again, ram_again = play(used, 3)
    assert ret == again
    np.testing.assert_array_equal(ram, ram_again)
    assert not np.array_equal(play(fresh, 4)[1], ram)
    with pytest.raises(ValueError, match="seed"):
        fresh.begin(np.zeros((STACK, 84, 84), np.uint8), 5)


def test_sticky_actions_off_play_as_before():
    """With sticky 0 the emulator sends the agent's action on every frame: the same episode with
    or without an episode seed."""
    a, b = AtariEmulator("frostbite"), AtariEmulator("frostbite")
    obs = np.zeros((STACK, 84, 84), np.uint8)
    a.begin(obs, 5)
    b.begin(obs.copy(), 5, seed=99)
    for t in range(120):
        a.step(t % 18, obs)
        b.step(t % 18, obs)
    np.testing.assert_array_equal(a.ram(), b.ram())


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--sticky", "1.0"], "--sticky: got 1.0, allowed: a probability in [0, 1)"),
        (["--sticky", "0.25", "--start", "vector"], "--sticky: 0.25 needs --start reference"),
        (["--sticky", "0.25", "--env", "CartPole-v1"], "--sticky: sticky actions are an Atari game's"),
    ],
)
def test_sticky_settings_that_cannot_be_are_one_line(flags, message):
    with pytest.raises(ConfigError) as e:
        cli.parse_args(["--algo", "ga", *flags], "")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
