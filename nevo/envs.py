"""Environment factories: Atari with the preprocessing of the Deep GA reference.

Preprocessing (Such et al. 2017, as the reference does it; DESIGN.md): frameskip 4 with
rewards summed, max over the last two raw frames, grayscale 84x84, a stack of 4 frames, FIRE
on reset where the game needs it, the minimal action set, no reward clipping, no end-of-life
episodes, sticky actions off, a cap of 20,000 game frames. ale-py's C++ `AtariVectorEnv`
does all of it in native threads; its ROMs ship in the wheel.

The random no-ops at the start of each episode are issued by nevo, not by the vector env
(whose built-in no-ops cannot be seeded per episode): an episode's no-op count is a function
of its episode seed, so its outcome depends only on (individual, episode seed).
"""

from __future__ import annotations

import numpy as np

from nevo.config import EnvConfig
from nevo.noise import splitmix64

NOOP = 0  # index 0 of every minimal action set is NOOP


# The policy's observations: 4 stacked 84x84 grayscale frames, max over the last two raw frames.
POLICY_IMAGE = {"stack_num": 4, "img_height": 84, "img_width": 84, "grayscale": True, "maxpool": True}


def make_atari(cfg: EnvConfig, num_envs: int, threads: int, **image):
    """A synchronous AtariVectorEnv of num_envs slots that resets a slot as its episode ends.

    image overrides POLICY_IMAGE's observation settings (a recording wants the full screen);
    the emulation itself is the same, so the same actions give the same episode."""
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv(
        cfg.game,
        num_envs,
        num_threads=threads,
        max_num_frames_per_episode=cfg.frame_cap,
        repeat_action_probability=0.0,
        frameskip=cfg.frameskip,
        **{**POLICY_IMAGE, **image},
        noop_max=0,  # nevo issues the no-ops itself, from each episode's seed
        episodic_life=False,
        reward_clipping=False,
        use_fire_reset=True,
        autoreset_mode="SameStep",
    )


def atari_actions(game: str) -> int:
    """Size of the game's minimal action set."""
    import ale_py
    from ale_py import roms

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on stderr
    ale = ale_py.ALEInterface()
    ale.loadROM(roms.get_rom_path(game))
    return len(ale.getMinimalActionSet())


def noop_count(episode_seed: int, noop_max: int) -> int:
    """No-op steps (1..noop_max) that start the episode with this seed."""
    return 1 + int(splitmix64(np.uint64(episode_seed) ^ np.uint64(0x5EED)) % np.uint64(noop_max))
