"""Environment factories: Atari with the preprocessing of the Deep GA reference, and gymnasium
tasks with vector observations (CartPole-v1, ...) for checks that take minutes.

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

import difflib

import numpy as np

from nevo.config import ConfigError, EnvConfig
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


# ---- gymnasium tasks with vector observations ------------------------------------------------

VECTOR_TASKS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3")  # the ones checked


def make_vector_task(env_id: str):
    """One gymnasium env of a vector-observation task (its own time limit included)."""
    import gymnasium as gym

    return gym.make(env_id)


def check_vector_task(env_id: str) -> None:
    """Raise ConfigError (naming --env) unless env_id makes a gymnasium env with a flat Box
    observation and Discrete actions."""
    import gymnasium as gym
    from gymnasium import spaces

    known = list(gym.registry)
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known + ["atari"], n=4, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"try {', '.join(VECTOR_TASKS[:3])}"
        raise ConfigError(f"--env: {env_id!r} is neither an Atari game nor a gymnasium task; {hint}")
    try:
        env = make_vector_task(env_id)
    except gym.error.DependencyNotInstalled as e:
        raise ConfigError(f"--env: {env_id} needs a package that is not installed: {e}") from None
    except Exception as e:  # noqa: BLE001 (any failure to build the env is the user's to see)
        raise ConfigError(f"--env: gymnasium could not make {env_id!r}: {e}") from None
    obs, act = env.observation_space, env.action_space
    env.close()
    if not (isinstance(obs, spaces.Box) and len(obs.shape) == 1 and isinstance(act, spaces.Discrete)):
        raise ConfigError(
            f"--env: {env_id} has observations {obs} and actions {act}; nevo's vector tasks need a "
            "1-D Box observation and Discrete actions"
        )


def task_io(env_cfg):
    """(obs_shape (C, H, W), n_actions, obs_dtype) of what the net sees in this environment."""
    if env_cfg.env == "atari":
        from nevo.nets import OBS_SHAPE

        return OBS_SHAPE, atari_actions(env_cfg.game), np.uint8
    if env_cfg.env == "maze":
        from nevo import maze

        return (maze.STACK, maze.SIZE, maze.SIZE), maze.N_ACTIONS, np.uint8
    env = make_vector_task(env_cfg.env)
    n_obs, n_act = env.observation_space.shape[0], int(env.action_space.n)
    env.close()
    return (n_obs, 1, 1), n_act, np.float32


def behaviour_space(env_cfg) -> tuple[int, type]:
    """(d, dtype) of an episode's behaviour in novelty search: the maze's final (x, y) in [0, 1],
    an Atari game's final 128-byte RAM. Vector tasks have none (a ConfigError naming --env)."""
    if env_cfg.env == "atari":
        from nevo.atari_ram import RAM_BYTES

        return RAM_BYTES, np.uint8
    if env_cfg.env == "maze":
        return 2, np.float32
    raise ConfigError(
        f"--env: novelty search needs a behaviour per episode; {env_cfg.env} has none here "
        "(use maze or an Atari game)"
    )


def make_task(env_cfg, slots: int):
    """The in-process task (see nevo.sync_eval) of a non-Atari env: the maze or a gymnasium one."""
    if env_cfg.env == "maze":
        from nevo.maze import MazeSlots

        return MazeSlots(slots)
    return VectorTaskSlots(env_cfg.env, slots)


class VectorTaskSlots:
    """`slots` gymnasium envs of one task, reset with an episode seed and stepped together.

    Observations are float32 (slots, n, 1, 1), the net's (C, H, W) input layout. Python steps
    each env in turn: these tasks cost microseconds a step, the forward pass dominates.
    """

    def __init__(self, env_id: str, slots: int):
        self.envs = [make_vector_task(env_id) for _ in range(slots)]
        self.slots = slots
        self.obs_shape = (self.envs[0].observation_space.shape[0], 1, 1)  # (C, H, W) = (n, 1, 1)
        self.obs_dtype = np.float32

    def reset(self, slots, seeds) -> np.ndarray:
        """(k, n, 1, 1) first observations of new episodes with these seeds in these slots."""
        out = np.empty((len(slots), *self.obs_shape), np.float32)
        for j, (s, seed) in enumerate(zip(slots, seeds)):
            obs, _ = self.envs[s].reset(seed=int(seed))
            out[j, :, 0, 0] = obs
        return out

    def step(self, slots, actions):
        """(obs (k, n, 1, 1) float32, rewards (k,) float64, ended (k,) bool) of one step each."""
        k = len(slots)
        obs = np.empty((k, *self.obs_shape), np.float32)
        rewards, ended = np.empty(k, np.float64), np.empty(k, bool)
        for j, (s, a) in enumerate(zip(slots, actions)):
            o, r, term, trunc, _ = self.envs[s].step(int(a))
            obs[j, :, 0, 0], rewards[j], ended[j] = o, r, term or trunc
        return obs, rewards, ended

    def close(self) -> None:
        for env in self.envs:
            env.close()


def reference_batch(env_cfg, size: int, seed: int, keep: float = 0.05) -> np.ndarray:
    """(size, C, H, W) observations for virtual batch norm, collected once before training.

    As the reference ES does: play uniformly random actions and keep each observation with
    probability `keep` (so the batch spans whole episodes, not just their starts). Every
    episode starts with a seeded reset, so the batch is a function of (env, size, seed)."""
    rng = np.random.default_rng([seed, 0xBA7C])
    batch, episode = [], 0
    if env_cfg.env == "atari":
        env = make_atari(env_cfg, 1, 1)
        n_actions = env.single_action_space.n
        obs, _ = env.reset(seed=np.array([seed], np.int64))
        try:
            while len(batch) < size:
                obs, _, term, trunc, _ = env.step(rng.integers(0, n_actions, 1))
                if rng.random() < keep:
                    batch.append(obs[0].copy())
                if term[0] or trunc[0]:  # a seeded reset: the autoreset's is not deterministic
                    episode += 1
                    obs, _ = env.reset(seed=np.array([seed + episode], np.int64))
        finally:
            env.close()
        return np.stack(batch)
    task = make_task(env_cfg, 1)
    n_actions = task_io(env_cfg)[1]
    obs = task.reset([0], [seed])
    steps = 0
    while len(batch) < size:
        obs, _, ended = task.step([0], rng.integers(0, n_actions, 1))
        steps += 1
        if rng.random() < keep:
            batch.append(obs[0].copy())
        if ended[0] or steps >= env_cfg.frame_cap:
            episode, steps = episode + 1, 0
            obs = task.reset([0], [seed + episode])
    task.close()
    return np.stack(batch)
