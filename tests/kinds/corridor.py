"""A corridor: a kind of task of one's own, in one file.

An agent starts on a cell of a corridor of `--length` cells (its episode's seed draws which) and
moves one cell left or right each step. Reaching the left end scores 1, the right end 10, and an
episode ends at either end (or at the frame cap). The agent sees its position (0 at the left
end, 1 at the right). Its behaviour, for novelty search, is its final position.

The task is stepped in this process (nevo.tasks.InProcess: its evaluator is nevo's synchronous
one, found through the class it extends), declares its own setting, `--length` (a section of
its own, `CorridorSettings`, which config.json keeps in the task's "env" section), and is named
`--env corridor`. Run it as any task of nevo's (docs/architecture.md, "Add a task kind"):

    nevo train ga --env-module tests/kinds/corridor.py --env corridor --length 15

or nevo.train("ga", env="corridor", env_module="tests/kinds/corridor.py", length=15).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nevo.nets import IMAGE_NETS
from nevo.settings import EnvConfig, require, setting
from nevo.tasks import InProcess
from nevo.tasks.envs import random_actions

LEFT, RIGHT = 1.0, 10.0  # what reaching each end scores


@dataclass(frozen=True)
class CorridorSettings(EnvConfig):
    """The task's section with the corridor's own setting."""

    length: int = setting(11, "cells in the corridor (a corridor task's; at least 3)")


class Corridor(InProcess):
    """The corridor of `--length` cells: observations (1, 1, 1) float32, 2 actions (left, right)."""

    KIND, LABEL = "corridor", "corridors"
    Settings = CorridorSettings
    obs_dtype = np.float32
    obs_shape = (1, 1, 1)
    n_actions = 2
    action = "argmax"
    action_box = None
    behaviour = (1, np.float32)  # the final position, in [0, 1]
    DEFAULTS = {"net": "mlp", "frame_cap": 40}  # (what no algorithm's declaration says of corridors)

    def __init__(self, env_cfg: CorridorSettings):
        self.cfg = env_cfg
        self.name = f"corridor-{env_cfg.length}"

    def check(self, net_cfg) -> None:
        require(self.cfg.length >= 3, "length", ">= 3 (a start between the two ends)", self.cfg.length)
        require(net_cfg.net not in IMAGE_NETS, "net", "a net for vectors (mlp, deep, ...)", net_cfg.net)

    def make_slots(self, slots: int, behaviours: bool = False):
        return CorridorSlots(slots, self.cfg.length)


class CorridorSlots:
    """`slots` corridor episodes stepped together (nevo.evaluation.in_process's interface)."""

    def __init__(self, slots: int, length: int):
        self.slots, self.length = slots, length
        self.obs_shape, self.obs_dtype = Corridor.obs_shape, Corridor.obs_dtype
        self.box = None  # discrete actions
        self.pos = np.zeros(slots, np.int64)

    def _obs(self, slots) -> np.ndarray:
        return (self.pos[slots] / (self.length - 1)).astype(np.float32).reshape(-1, *self.obs_shape)

    def reset(self, slots, seeds) -> np.ndarray:
        slots = np.asarray(slots, np.int64)
        for s, seed in zip(slots, seeds):  # the start: from the episode's seed alone
            self.pos[s] = np.random.default_rng(int(seed)).integers(1, self.length - 1)
        return self._obs(slots)

    def step(self, slots, actions):
        slots = np.asarray(slots, np.int64)
        self.pos[slots] += np.where(np.asarray(actions) == 1, 1, -1)
        left, right = self.pos[slots] == 0, self.pos[slots] == self.length - 1
        rewards = np.where(left, LEFT, np.where(right, RIGHT, 0.0))
        return self._obs(slots), rewards, left | right

    def behaviour(self, slots) -> np.ndarray:
        return self._obs(np.asarray(slots, np.int64)).reshape(-1, 1)

    def random_actions(self, rng, k: int) -> np.ndarray:
        return random_actions(rng, k, 2, False)

    def close(self) -> None:
        pass
