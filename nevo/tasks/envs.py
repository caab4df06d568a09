"""Environments stepped in this process: gymnasium tasks with vector observations (CartPole-v1,
..., MuJoCo's robots) as slots (`VectorTaskSlots` and its kin), the checks that name an unknown or
broken environment in one line, the threads that step them (`pick_threads`), and the reference
observations of virtual batch norm for such a task. nevo.tasks wraps them as tasks; Atari's
environments are nevo.atari's.
"""

from __future__ import annotations

import difflib
import functools
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from nevo.settings import ConfigError, as_numbers, raised, shown

VECTOR_TASKS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3")  # the ones checked


def registry():
    """gymnasium's registry of environments, with nevo's own (HumanoidTrap-v5) in it."""
    import gymnasium as gym

    from nevo.tasks import trap

    trap.register()
    return gym.registry


def make_vector_task(env_id: str):
    """One gymnasium env of a vector-observation task (its own time limit included)."""
    import gymnasium as gym

    if is_mujoco(env_id):  # (is_mujoco registers nevo's environments first)
        _mujoco_warnings_once()
    return gym.make(env_id)


@functools.cache
def _mujoco_warnings_once() -> None:
    """Print each distinct MuJoCo warning once per process, on stderr. MuJoCo prints a warning
    every time a model compiles, and a run compiles one per env slot: with mujoco 4, gymnasium's
    own models (HalfCheetah, Humanoid) raise a deprecation warning ('settotalmass') each time."""
    try:
        import mujoco
    except ImportError:  # gym.make says which package is missing
        return
    seen = set()

    def once(message: str) -> None:
        if message not in seen:
            seen.add(message)
            print(f"MuJoCo warning (shown once): {message}", file=sys.stderr)

    mujoco.set_mju_user_warning(once)


MUJOCO_ROBOTS = ("Humanoid-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")


def is_mujoco(env_id: str) -> bool:
    """Whether env_id is a MuJoCo task of gymnasium's (or nevo's HumanoidTrap-v5). Needs only
    gymnasium's registry, not the mujoco package."""
    from nevo.tasks import trap

    spec = registry().get(env_id)
    return spec is not None and (spec.entry_point is trap.make or "envs.mujoco" in str(spec.entry_point))


def check_registered(env_id: str) -> None:
    """Raise ConfigError (naming --env, with close names) unless gymnasium knows env_id."""
    known = list(registry())
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known + ["atari", "maze"], n=4, cutoff=0.6)
        hint = f"did you mean {', '.join(close)}?" if close else f"try {', '.join(VECTOR_TASKS[:3])}"
        raise ConfigError(
            f"--env: {env_id!r} is neither an Atari game nor a gymnasium task; {hint} (a kind of task of "
            "one's own: --env-module)"
        )


def random_actions(rng, k: int, n_actions: int, continuous: bool) -> np.ndarray:
    """k random actions: (k, n_actions) float32 uniform in [-1, 1] (a policy's continuous
    vectors, before box_action), or (k,) integers in [0, n_actions)."""
    return (
        rng.uniform(-1, 1, (k, n_actions)).astype(np.float32) if continuous else rng.integers(0, n_actions, k)
    )


def box_action(a, low, high) -> np.ndarray:
    """A policy's action vector a in [-1, 1] (tanh outputs) as the env's: low + (a + 1)(high - low)/2,
    clipped to [low, high] against float rounding at the ends."""
    a = np.asarray(a, np.float64)
    return np.clip(low + (a + 1.0) * 0.5 * (high - low), low, high).astype(np.float32)


class VectorTaskSlots:
    """`slots` gymnasium envs of one task (make_env() makes one), reset with an episode seed and
    stepped together.

    Observations are float32 (slots, n, 1, 1), the net's (C, H, W) input layout. Actions are
    discrete (the policy's int64 choices), or for a Box action space the policy's vectors in
    [-1, 1], mapped linearly onto the box (`box_action`).

    With threads > 1, a step's envs are split into that many runs of slots stepped in threads,
    each writing its own rows. It pays where the env's own code frees the GIL for long enough:
    MuJoCo's physics does (measured on 2 cores, random actions: Humanoid-v5 1.53x faster in 2
    threads, Hopper-v5 1.26x), classic control does not (HalfCheetah-v5, whose physics is
    cheap: 0.80x). `pick_threads` measures which. An env's outcome never depends on the thread
    that steps it.
    """

    def __init__(self, make_env, slots: int, threads: int = 1):
        from gymnasium import spaces

        self.envs = [make_env() for _ in range(slots)]
        self.slots = slots
        self.obs_shape = (self.envs[0].observation_space.shape[0], 1, 1)  # (C, H, W) = (n, 1, 1)
        self.obs_dtype = np.float32
        space = self.envs[0].action_space
        self.box = (space.low, space.high) if isinstance(space, spaces.Box) else None
        self.infos = [{}] * slots  # each slot's last step's info
        self.seeds = [0] * slots  # each slot's episode seed
        self.threads, self._pool = 1, None
        self.use_threads(threads)

    def random_actions(self, rng, k: int) -> np.ndarray:
        """k random actions for these envs (see random_actions)."""
        if self.box is None:
            return random_actions(rng, k, int(self.envs[0].action_space.n), False)
        return random_actions(rng, k, len(self.box[0]), True)

    def use_threads(self, threads: int) -> None:
        """Step in this many threads from now on (1: in this one)."""
        if self._pool is not None:
            self._pool.shutdown()
        self.threads = max(1, min(int(threads), self.slots))
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def reset(self, slots, seeds) -> np.ndarray:
        """(k, n, 1, 1) first observations of new episodes with these seeds in these slots."""
        out = np.empty((len(slots), *self.obs_shape), np.float32)
        for j, (s, seed) in enumerate(zip(slots, seeds)):
            self.seeds[s] = int(seed)
            try:
                obs, _ = self.envs[s].reset(seed=int(seed))
            except Exception as e:  # noqa: BLE001 (the env's own code: one line naming it)
                raise env_failed(self.envs[s], f"reset(seed={int(seed)})", e) from e
            out[j, :, 0, 0] = obs
        return out

    def step(self, slots, actions):
        """(obs (k, n, 1, 1) float32, rewards (k,) float64, ended (k,) bool) of one step each."""
        k = len(slots)
        obs = np.empty((k, *self.obs_shape), np.float32)
        rewards, ended = np.empty(k, np.float64), np.empty(k, bool)

        def run(lo: int, hi: int) -> None:  # rows lo..hi-1: its own rows of the outputs
            for j in range(lo, hi):
                a = actions[j]
                env = self.envs[slots[j]]
                try:
                    o, r, term, trunc, info = env.step(
                        int(a) if self.box is None else box_action(a, *self.box)
                    )
                except Exception as e:  # noqa: BLE001 (the env's own code: one line naming it)
                    raise env_failed(env, f"step in the episode with seed {self.seeds[slots[j]]}", e) from e
                obs[j, :, 0, 0], rewards[j], ended[j] = o, r, term or trunc
                self.infos[slots[j]] = info

        if self._pool is None or k < 2 * self.threads:
            run(0, k)
        else:
            cuts = np.linspace(0, k, self.threads + 1).astype(int)
            list(self._pool.map(run, cuts[:-1], cuts[1:]))
        return obs, rewards, ended

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        for env in self.envs:
            env.close()


def env_name(env) -> str:
    """A gymnasium env's registered id, or its class's name (a user's own env)."""
    return getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__


def env_failed(env, call: str, e: Exception) -> ConfigError:
    """The one-line error of an env whose reset or step raised e."""
    return ConfigError(f"env {env_name(env)}: {call} raised {raised(e)}")


def behaviour_vector(behaviour_of, observation, info, size: int | None, where: str) -> np.ndarray:
    """behaviour_of(observation, info) as a (size,) float32 vector (size None: any size >= 1),
    or a ConfigError naming `behaviour`, what it raised or returned, and where (`where`: "at the
    end of the episode with seed 7")."""
    try:
        value = behaviour_of(observation, info)
    except Exception as e:  # noqa: BLE001 (the user's function: one line naming it)
        raise ConfigError(f"behaviour: raised {raised(e)} {where}") from e
    vector = as_numbers(value)
    if vector is None:
        raise ConfigError(f"behaviour: returned {shown(value)} {where}; allowed: numbers (a vector)")
    vector = vector.astype(np.float32).ravel()
    if vector.size == 0 or (size is not None and vector.size != size):
        wanted = (
            f"{size} number{'s' * (size != 1)}, as on the first step it was probed on" if size else "numbers"
        )
        raise ConfigError(
            f"behaviour: returned {vector.size} numbers ({shown(value)}) {where}; allowed: {wanted}"
        )
    return vector


class EpisodeEndSlots(VectorTaskSlots):
    """VectorTaskSlots whose behaviour (novelty search's) is behaviour_of(observation, info) of
    each slot's last step (a user's function, or the final observation), size numbers each."""

    def __init__(self, make_env, slots: int, behaviour_of, threads: int = 1, size: int | None = None):
        super().__init__(make_env, slots, threads)
        self.behaviour_of, self.size = behaviour_of, size
        self.last = [(None, {})] * slots  # (observation, info) of each slot's last step

    def step(self, slots, actions):
        obs, rewards, ended = super().step(slots, actions)
        for j, s in enumerate(slots):
            self.last[s] = (obs[j, :, 0, 0].copy(), self.infos[s])
        return obs, rewards, ended

    def behaviour(self, slots) -> np.ndarray:
        """(k, d) float32 of these slots' last steps (an ended episode: before its reset)."""
        return np.stack(
            [
                behaviour_vector(self.behaviour_of, *self.last[s], self.size,
                                 f"at the end of the episode with seed {self.seeds[s]}")
                for s in slots
            ]
        )  # fmt: skip


def centre_of_mass_xy(env) -> np.ndarray:
    """(2,) float32: the (x, y) of a MuJoCo env's centre of mass, its bodies weighted by mass."""
    model, data = env.unwrapped.model, env.unwrapped.data
    mass = model.body_mass  # (bodies,)
    return (mass @ data.xipos[:, :2] / mass.sum()).astype(np.float32)


class MujocoSlots(VectorTaskSlots):
    """VectorTaskSlots of a MuJoCo robot, whose behaviour (novelty search's) is where it ended:
    the (x, y) of its centre of mass (Conti et al. 2018's for the humanoid)."""

    def behaviour(self, slots) -> np.ndarray:
        """(k, 2) float32 of these slots' envs as they are now (an ended episode: before its reset)."""
        return np.stack([centre_of_mass_xy(self.envs[s]) for s in slots])


def pick_threads(task_slots, cores: int, steps: int = 300) -> int:
    """1 or `cores`: whichever steps these slots faster, timed on `steps` steps of every slot
    with random actions (a few tenths of a second; every episode later starts with a seeded
    reset, so this play leaves no trace in a run)."""
    if cores < 2 or task_slots.slots < 2 * cores:
        return 1
    rng = np.random.default_rng(0)
    every = np.arange(task_slots.slots)
    task_slots.reset(every, np.zeros(task_slots.slots, np.int64))
    times = {}
    for threads in (1, cores, 1, cores):  # twice each, the faster kept: noise on a busy machine
        task_slots.use_threads(threads)
        t0 = time.perf_counter()
        for _ in range(steps // 4):
            _, _, ended = task_slots.step(every, task_slots.random_actions(rng, task_slots.slots))
            if ended.any():
                task_slots.reset(every[ended], np.zeros(int(ended.sum()), np.int64))
        times[threads] = min(times.get(threads, np.inf), time.perf_counter() - t0)
    best = min(times, key=times.get)
    task_slots.use_threads(best)
    return best


def task_reference_batch(task, n_actions: int, frame_cap: int, size: int, seed: int, keep: float = 0.05):
    """nevo.atari.game.atari_reference_batch for an in-process task of one slot
    (nevo.evaluation.in_process's interface)."""
    rng = np.random.default_rng([seed, 0xBA7C])
    batch, episode, steps = [], 0, 0
    obs = task.reset([0], [seed])
    box = getattr(task, "box", None) is not None  # continuous actions: uniform in [-1, 1]
    while len(batch) < size:
        obs, _, ended = task.step([0], random_actions(rng, 1, n_actions, box))
        steps += 1
        if rng.random() < keep:
            batch.append(obs[0].copy())
        if ended[0] or steps >= frame_cap:
            episode, steps = episode + 1, 0
            obs = task.reset([0], [seed + episode])
    task.close()
    return np.stack(batch)
