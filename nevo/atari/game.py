"""An Atari game as a kind of task (`AtariGame`), and what defines its episodes: the minimal action
set, the seeded no-ops that start an episode, ale-py's vector env with the Deep GA's
preprocessing (the truth nevo's own emulator is tested against, and a benchmark's baseline) and
the reference observations of virtual batch norm.

Preprocessing (Such et al. 2017's steps): frameskip 4 with rewards summed, max over the last two
raw frames, grayscale 84x84 (ALE's uint8 grayscale and OpenCV's INTER_AREA resize, where the
reference has the palette's float luminance and a bilinear resize: docs/reference_start.md), a
stack of 4 frames, the minimal action set, no reward clipping, no end-of-life episodes, sticky
actions off in the vector env (nevo's emulator has them: nevo.atari.emulator), a cap of 20,000
game frames; its ROMs ship in ale-py's wheel. Training does not play Atari in the vector env:
nevo's own emulator processes (nevo.atari.emulator, nevo.atari.pool) do, and the vector env made
here is their truth, bit for bit, in the tests (`--start vector`: its FIRE on reset, then NOOP
steps).

The random no-ops at the start of each episode are issued by nevo, not by the vector env (whose
built-in no-ops cannot be seeded per episode): an episode's no-op count is a function of its
episode seed, so its outcome depends only on (individual, episode seed).
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import replace

import numpy as np

from nevo.genomes.noise import SEED_LIMIT, splitmix64
from nevo.kinds import Kind
from nevo.settings import ConfigError, EnvConfig


@functools.cache
def _atari_games() -> list[str]:
    from ale_py import roms

    return sorted(roms.get_all_rom_ids())


class AtariGame(Kind):
    """An Atari game from pixels: 4 stacked 84x84 grayscale frames, the minimal action set."""

    KIND, LABEL = "atari", "Atari"
    obs_dtype = np.uint8
    behaviour = None  # set in __init__: (128, uint8), the final RAM
    device = "auto"  # a GPU where there is one
    action = "argmax"  # the net's outputs choose one of the minimal action set
    action_box = None  # discrete actions
    FRAMES = "game frames"  # (an agent step is --frameskip of them)
    sticky_actions = True  # --sticky: the emulator repeats an action now and then (nevo.atari.emulator)
    starts_of_seeds = True  # an episode's no-ops are drawn from its seed (noop_count)

    @classmethod
    def matches(cls, env: str) -> bool:
        """atari (the game of --game), or an Atari game's ROM id."""
        return env == "atari" or env in _atari_games()

    @classmethod
    def normalize(cls, env_cfg: EnvConfig) -> EnvConfig:
        """`--env frostbite` is `--env atari --game frostbite`: one spelling for the rest of nevo."""
        return env_cfg if env_cfg.env == "atari" else replace(env_cfg, env="atari", game=env_cfg.env)

    def __init__(self, env_cfg: EnvConfig):
        from nevo.atari.emulator import RAM_BYTES
        from nevo.nets import OBS_SHAPE

        self.cfg = env_cfg
        self.name = env_cfg.game
        self.obs_shape = OBS_SHAPE
        self.behaviour = (RAM_BYTES, np.uint8)
        self._n_actions = None

    @property
    def n_actions(self) -> int:
        if self._n_actions is None:  # loads the ROM: only when asked
            self._n_actions = atari_actions(self.cfg.game)
        return self._n_actions

    def check(self, net_cfg) -> None:
        """ConfigError naming --game unless the game exists."""
        games = _atari_games()
        if self.cfg.game not in games:
            close = difflib.get_close_matches(self.cfg.game, games, n=5, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else "see ale_py.roms.get_all_rom_ids()"
            raise ConfigError(f"--game: unknown Atari game {self.cfg.game!r}; {hint}")

    def reference_batch(self, size: int, seed: int) -> np.ndarray:
        return atari_reference_batch(self.cfg, size, seed)

    def validation(self, episodes):
        """A validation's episodes, each start in turn where --validation-starts each asks it
        (seeds_for_starts), else as asked."""
        if self.cfg.validation_starts != "each":
            return episodes
        moved = seeds_for_starts(episodes.seeds, places_of(episodes.ind), self.cfg.noop_max)
        return replace(episodes, seeds=moved)


NOOP = 0  # index 0 of every minimal action set is NOOP


# The policy's observations: 4 stacked 84x84 grayscale frames, max over the last two raw frames.
_POLICY_IMAGE = {"stack_num": 4, "img_height": 84, "img_width": 84, "grayscale": True, "maxpool": True}


def make_atari(cfg: EnvConfig, num_envs: int, threads: int, **image):
    """A synchronous AtariVectorEnv of num_envs slots that resets a slot as its episode ends.

    image overrides _POLICY_IMAGE's observation settings (a recording wants the full screen);
    the emulation itself is the same, so the same actions give the same episode."""
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv(
        cfg.game,
        num_envs,
        num_threads=threads,
        max_num_frames_per_episode=cfg.frame_cap,
        repeat_action_probability=0.0,
        frameskip=cfg.frameskip,
        **{**_POLICY_IMAGE, **image},
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


def noop_counts(episode_seeds, noop_max: int) -> np.ndarray:
    """(E,) int64 the no-ops that start each of these episodes (noop_count of each seed)."""
    return np.array([noop_count(s, noop_max) for s in episode_seeds], np.int64)


def seeds_for_starts(episode_seeds, places, noop_max: int) -> np.ndarray:
    """The seeds of a validation, each moved to one that starts with the no-op count of its place:
    the seed of a candidate's k-th episode (places[e] = k) to the first of s, s + 1, ... (modulo
    SEED_LIMIT, so a run's seeds stay below the tests') whose noop_count is 1 + (k mod noop_max).
    Thirty episodes with noop_max 30 then play each start once: without sticky actions an Atari
    episode is decided by its start, so the validation mean is the candidate's exact mean over
    its 30 starts, with no luck in it (Such et al. 2017 pick the elite on 30 random episodes; the
    highest of many noisy means overstates the elite). Candidates on the same seed at the same
    place play the same moved seed."""
    seeds, places = np.asarray(episode_seeds, np.int64), np.asarray(places, np.int64)
    pairs, back = np.unique(np.stack([seeds, places % noop_max], axis=1), axis=0, return_inverse=True)
    moved = np.empty(len(pairs), np.int64)
    for i, (s, k) in enumerate(pairs.tolist()):
        while noop_count(s, noop_max) != 1 + k:
            s = (s + 1) % SEED_LIMIT
        moved[i] = s
    return moved[back.ravel()]


def places_of(ind) -> np.ndarray:
    """(E,) each episode's place among its individual's episodes (0, 1, ... in the order given)."""
    ind = np.asarray(ind, np.int64)
    order = np.argsort(ind, kind="stable")
    firsts = np.flatnonzero(np.r_[True, np.diff(ind[order]) != 0])
    places = np.empty(len(ind), np.int64)
    places[order] = np.arange(len(ind)) - np.repeat(firsts, np.diff(np.r_[firsts, len(ind)]))
    return places


def atari_reference_batch(env_cfg, size: int, seed: int, keep: float = 0.05) -> np.ndarray:
    """(size, 4, 84, 84) uint8 observations for virtual batch norm, collected once before training.

    As the reference ES does: play uniformly random actions and keep each observation with
    probability `keep` (so the batch spans whole episodes, not just their starts). Every
    episode starts with a seeded reset, so the batch is a function of (env, size, seed)."""
    from nevo.atari.emulator import STACK, AtariEmulator

    rng = np.random.default_rng([seed, 0xBA7C])
    batch, episode = [], 0
    em = AtariEmulator(env_cfg.game, env_cfg.frameskip, env_cfg.frame_cap)
    n_actions = len(em.actions)
    obs = np.zeros((STACK, *em.resize.out), np.uint8)
    em.reset(obs, seed)
    while len(batch) < size:
        ended = em.step(int(rng.integers(0, n_actions, 1)[0]), obs)[1]
        if ended:  # the observation an ending step gives: its autoreset's (as the vector env's)
            em.reset(obs, None)
        if rng.random() < keep:
            batch.append(obs.copy())
        if ended:  # then a seeded reset: the autoreset's is not deterministic
            episode += 1
            em.reset(obs, seed + episode)
    return np.stack(batch)
