"""Tasks: what an agent plays, one small class per kind, asked by the rest of nevo instead of
switching on the environment's name. Beside them: `envs` (gymnasium and MuJoCo slots stepped in
this process), `maze` (the deceptive image maze), `trap` (the deceptive Humanoid trap),
`supervised` (a labelled data set as a task, `--env mnist`) and `mnist_data` (MNIST, fetched and
checked by nevo itself). What a kind declares of itself, and the registry that finds the kind an
--env names, are nevo.kinds'; Atari's kind and backend are nevo.atari's, whose kind is imported
here (so that the registry knows it) and re-exported.

Each kind (nevo.kinds.Kind) says which names it takes (`matches`), and each task knows its
observations (shape and dtype, as the net's (C, H, W) input), its number of actions and their
kind (`action`: "argmax", discrete; "tanh", a continuous vector), its behaviour for novelty search
(or None), the device that suits it, its checks of the settings and its reference observations
for virtual batch norm; its evaluator declares that it plays it (nevo.episodes.players):
- `AtariGame` (nevo.atari.game): an Atari game from pixels on nevo's emulator pool, with the Deep
  GA reference's preprocessing (nevo.atari.emulator); behaviour = the console's final RAM; takes
  `atari` and every ROM id;
- `Maze`: the deceptive image maze (nevo.tasks.maze); behaviour = the final (x, y);
- `GymTask`: a gymnasium environment with a flat Box observation and Discrete actions or a
  bounded Box of continuous ones, either a registered id (CartPole-v1, Pendulum-v1, ...) or a
  user's own environment class or factory; the catch-all, asked last;
- `MuJoCo`: a GymTask that is a MuJoCo robot (Humanoid-v5, HalfCheetah-v5, ..., and nevo's
  deceptive HumanoidTrap-v5); behaviour = the final (x, y) of its centre of mass;
- `Supervised` (nevo.tasks.supervised): a labelled data set, `--env mnist`.
The maze and gymnasium's tasks are stepped in this process (`InProcess`), as a kind of one's own
may be. `task_for(env_cfg)` makes the task an EnvConfig names.
"""

from __future__ import annotations

import functools

import numpy as np

# (Atari's kind first: the kinds are asked newest first, so its matcher, which reads ale-py's ROM
# list, is asked after the others: --env mnist loads no emulator)
from nevo.atari import AtariGame
from nevo.kinds import Kind, kind_of, kinds, normalize_env
from nevo.settings import ConfigError, EnvConfig, require
from nevo.tasks import envs
from nevo.tasks.supervised import Supervised

__all__ = ["AtariGame", "GymTask", "InProcess", "Kind", "Maze", "MuJoCo", "Supervised", "kind_of", "kinds",
           "normalize_env", "task_for"]  # fmt: skip


class InProcess(Kind):
    """What the tasks stepped in this process share: the synchronous evaluator
    (nevo.evaluation.in_process) over the slots their `make_slots(n, behaviours)` makes (its
    interface: reset, step, close, and behaviour where novelty search asks), frames = agent steps."""

    device = "cpu"  # a GPU launch costs more than a step of these tasks' small nets
    FRAMES = "agent steps"

    def reference_batch(self, size: int, seed: int) -> np.ndarray:
        return envs.task_reference_batch(self.make_slots(1), self.n_actions, self.cfg.frame_cap, size, seed)


class Maze(InProcess):
    """The deceptive image maze: an 84x84 top-down image, 4 stacked frames, 5 moves."""

    KIND, LABEL = "maze", "maze"

    obs_dtype = np.uint8
    behaviour = (2, np.float32)  # the final (x, y) in [0, 1]
    action = "argmax"  # one of its 5 moves
    action_box = None

    def __init__(self, env_cfg: EnvConfig):
        from nevo.tasks import maze

        self.cfg = env_cfg
        self.name = "maze"
        self.obs_shape = (maze.STACK, maze.SIZE, maze.SIZE)
        self.n_actions = maze.N_ACTIONS

    def check(self, net_cfg) -> None:
        from nevo.nets import IMAGE_NETS
        from nevo.tasks.maze import STEPS

        require(net_cfg.net in IMAGE_NETS, "net", "large or small (the maze is an image)", net_cfg.net)
        require(
            self.cfg.frame_cap >= STEPS,
            "frame_cap",
            f">= {STEPS} (a maze episode's steps)",
            self.cfg.frame_cap,
        )

    def make_slots(self, slots: int, behaviours: bool = False):
        from nevo.tasks.maze import MazeSlots

        return MazeSlots(slots)


class GymTask(InProcess):
    """A gymnasium environment with a flat Box observation and Discrete actions or a bounded Box
    of continuous ones (Pendulum-v1, MountainCarContinuous-v0, ...): a registered id
    (env_cfg.env, e.g. CartPole-v1) or, from Python, a user's own environment class or any
    function that makes one (`make_env`), registered or not. Observations are float32 (n, 1, 1).
    Its behaviour for novelty search is `behaviour_of(observation, info)` at an episode's last step
    (a user's function; default: the final observation)."""

    KIND, LABEL = "gymnasium", "gymnasium tasks"
    CATCH_ALL = True  # any name no other kind takes: gymnasium's registry says (check_registered)
    obs_dtype = np.float32
    behaviour = None  # (d, float32), set in __init__

    def __init__(self, env_cfg: EnvConfig, make_env=None, behaviour=None):
        import gymnasium as gym
        from gymnasium import spaces

        self.cfg = env_cfg
        self.name = env_cfg.env
        if make_env is None:
            envs.check_registered(env_cfg.env)
            make_env = functools.partial(envs.make_vector_task, env_cfg.env)
        self.make_env = make_env
        try:
            env = make_env()
        except gym.error.DependencyNotInstalled as e:
            raise ConfigError(f"--env: {self.name} needs a package that is not installed: {e}") from None
        except Exception as e:  # noqa: BLE001 (any failure to build the env is the user's to see)
            raise ConfigError(f"--env: could not make {self.name!r}: {e}") from None
        obs, act = env.observation_space, env.action_space
        box = isinstance(act, spaces.Box) and len(act.shape) == 1 and np.isfinite([act.low, act.high]).all()
        if not (
            isinstance(obs, spaces.Box) and len(obs.shape) == 1 and (isinstance(act, spaces.Discrete) or box)
        ):
            env.close()
            raise ConfigError(
                f"--env: {self.name} has observations {obs} and actions {act}; nevo's gymnasium "
                "tasks need a 1-D Box observation, and Discrete actions or a bounded 1-D Box"
            )
        try:  # a first step: the env works, and a user's behaviour meets a real step's info
            first = probe_step(env, act)
        finally:
            env.close()
        self.behaviour_of = None  # (observation, info) at an episode's end -> its behaviour
        if behaviour is not None:  # a user's: its size from the first step's observation and info
            self.behaviour_of = behaviour
            where = "on the observation and info of a first step (reset(seed=0), then one step)"
            self.behaviour = (envs.behaviour_vector(behaviour, *first, None, where).size, np.float32)
        elif type(self).behaviour is None:  # MuJoCo keeps its own: the centre of mass
            self.behaviour_of, self.behaviour = final_observation, (obs.shape[0], np.float32)
        self.obs_shape = (obs.shape[0], 1, 1)  # (C, H, W) = (n, 1, 1)
        self.n_actions = int(act.shape[0]) if box else int(act.n)
        self.action = "tanh" if box else "argmax"  # continuous: the net's outputs through tanh
        self.action_box = (act.low.tolist(), act.high.tolist()) if box else None  # the env's bounds

    @classmethod
    def matches(cls, env: str) -> bool:
        return True  # (asked last; an id gymnasium does not know is refused when the task is made)

    def check(self, net_cfg) -> None:
        from nevo.nets import IMAGE_NETS

        allowed = (
            "mlp, mlp-tanh, mlp-tanh-256 or deep (a gymnasium vector task has no image for the conv nets)"
        )
        require(net_cfg.net not in IMAGE_NETS, "net", allowed, net_cfg.net)

    def make_slots(self, slots: int, behaviours: bool = False):
        if behaviours:  # novelty search: each episode's end, through behaviour_of
            return envs.EpisodeEndSlots(self.make_env, slots, self.behaviour_of, size=self.behaviour[0])
        return envs.VectorTaskSlots(self.make_env, slots)


class MuJoCo(GymTask):
    """A MuJoCo task of gymnasium's: the locomotion robots (Humanoid-v5, HalfCheetah-v5,
    Hopper-v5, Walker2d-v5, Ant-v5, Swimmer-v5), the deceptive HumanoidTrap-v5 of nevo.tasks.trap, and
    the others (InvertedPendulum-v5, Reacher-v5, ...), which get the same defaults. A GymTask
    whose behaviour, for novelty search, is the final (x, y) of the model's centre of mass
    (Conti et al. 2018's for the humanoid)."""

    KIND, LABEL = "mujoco", "MuJoCo"
    # Salimans et al. 2017 discretised the actions of the hopping and swimming tasks for ES, for
    # exploration (their section 4.1): with tanh actions ES stalls on Hopper-v5 at standing still
    # (~1,180; docs/mujoco.md), with 10 bins per component it reaches ~3,370 (nevo.algos.es).
    BINNED = ("Hopper-v5", "Swimmer-v5")
    behaviour = (2, np.float32)  # the final (x, y) of the centre of mass

    @classmethod
    def matches(cls, env: str) -> bool:
        return envs.is_mujoco(env)

    def make_slots(self, slots: int, behaviours: bool = False):
        if behaviours and self.behaviour_of is not None:  # a user's behaviour instead of the centre of mass
            return envs.EpisodeEndSlots(self.make_env, slots, self.behaviour_of, size=self.behaviour[0])
        return envs.MujocoSlots(self.make_env, slots)


def probe_step(env, action_space) -> tuple:
    """(observation, info) of one step of env after reset(seed=0), with the first discrete action
    or the middle of a Box; a ConfigError naming the env if reset or step raises."""
    try:
        env.reset(seed=0)
    except Exception as e:  # noqa: BLE001 (the env's own code: one line naming it)
        raise envs.env_failed(env, "reset(seed=0)", e) from e
    if hasattr(action_space, "n"):
        action = int(getattr(action_space, "start", 0))
    else:
        action = ((action_space.low + action_space.high) / 2).astype(action_space.dtype)
    try:
        observation, _, _, _, info = env.step(action)
    except Exception as e:  # noqa: BLE001
        raise envs.env_failed(env, f"step({action!r}) after reset(seed=0)", e) from e
    return observation, info


def final_observation(observation, info) -> np.ndarray:
    """A gymnasium task's default behaviour: the episode's final observation (float32)."""
    return np.asarray(observation, np.float32).ravel()


def check_sticky(task, env_cfg: EnvConfig) -> None:
    """ConfigError of one line where env_cfg asks for sticky actions (--sticky) that task cannot
    have: a task of no emulator, or an Atari game with the vector env's start (nevo draws sticky
    actions for the reference's start)."""
    if not env_cfg.sticky:
        return
    if not task.sticky_actions:
        raise ConfigError(f"--sticky: sticky actions are an Atari game's; {task.name} has none (allowed: 0)")
    if env_cfg.start != "reference":
        raise ConfigError(
            f"--sticky: {env_cfg.sticky} needs --start reference (the start whose frames nevo draws "
            f"sticky actions for); got --start {env_cfg.start}"
        )


def check_validation_starts(task, env_cfg: EnvConfig, algo: str, validation_episodes: int) -> None:
    """ConfigError of one line where env_cfg asks a validation to play each start in turn
    (--validation-starts each) and cannot: a task whose starts are not drawn from episode seeds,
    an algorithm that validates no episodes (validation_episodes 0), or validation episodes that
    are not whole rounds of the starts."""
    if env_cfg.validation_starts != "each":
        return
    if not task.starts_of_seeds:
        raise ConfigError(
            f"--validation-starts: each start in turn is an Atari game's (its no-ops); {task.name} has "
            "no such starts (allowed: random)"
        )
    if validation_episodes <= 0:
        raise ConfigError(f"--validation-starts: {algo} validates no episodes (allowed: random)")
    if validation_episodes % env_cfg.noop_max:
        raise ConfigError(
            f"--validation-starts: each needs validation episodes in whole rounds of the {env_cfg.noop_max} "
            f"starts (--noop-max); got --validation-episodes {validation_episodes} (allowed: random)"
        )


def task_for(env_cfg: EnvConfig, make_env=None, behaviour=None):
    """The task an EnvConfig names: atari (its game), maze, or a gymnasium id; make_env: a user's
    own gymnasium environment class or factory (then env_cfg.env is only its name); behaviour: a
    gymnasium task's behaviour for novelty search, a function of (observation, info) at an
    episode's last step (default: the final observation; MuJoCo's: the centre of mass)."""
    if make_env is not None:
        return GymTask(env_cfg, make_env, behaviour)
    kind = kind_of(env_cfg)
    if behaviour is None:
        return kind(env_cfg)
    if not issubclass(kind, GymTask):
        raise ConfigError(
            f"behaviour: a function of the last step is for gymnasium tasks; {env_cfg.env} has its own"
        )
    return kind(env_cfg, behaviour=behaviour)
