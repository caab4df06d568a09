"""Episodes played whole in the emulator processes, each choosing its own actions (the CPU's layout).

Where the forward runs on the same few cores as the emulators, a driving process that gathers
every slot's observation, runs one batched forward and hands the actions back pays, at every step,
a round trip to each emulator process and a barrier where the cores wait for the slowest worker
and for the process to wake up. Here each emulator process plays an episode to its end by itself:
it steps its emulator, runs the policy's forward on its one observation on one thread, and steps
again, reading the individual's weight row from shared memory. The driving process only hands out
episodes (and builds their rows) and collects each one's outcome: the design of the deep GA's and
OpenAI-ES's CPU workers (Such et al. 2017; Salimans et al. 2017), which play whole episodes with
their own copy of the policy, with the rows shared instead of sent.

Measured on the 2-core AMD EPYC VM (docs/lab/2026-11-27.md): one episode at a time
per process, one process per core, beats a batch of several episodes per process (the emulators
and the net's rows of one episode stay in the core's caches) and the lockstep pipeline.

The forward is row by row, so a row's actions are the same bits alone on one thread as in a
batch on many (the CPU and NumPy forwards compute each row apart): an episode's outcome is the
same as in every other layout.
"""

from __future__ import annotations

import os
import struct
import time
from typing import NamedTuple

import numpy as np

from nevo.atari.emulator import PLAYING, RAM_BYTES
from nevo.atari.game import NOOP
from nevo.episodes.experiences import ExperienceSample

# What the driver asks: (weight row, no-ops, episode seed, observations to keep, whether the
# episode starts the reference's way: AtariEmulator.begin; else the no-ops are NOOP steps).
ASK = struct.Struct("<qqqq?")
# What an episode's worker answers: (return, steps, game frames, steps the net acted on, seconds
# in the forward, seconds emulating, cut short), then its final RAM, then the kept observations.
ANSWER = struct.Struct("<dqqqddB")


class EpisodePlayer:
    """Plays an episode in an emulator process (the emulator pool's PLAY command, nevo.atari.worker).

    policy: a host policy (nevo.nets.kernels.HostPolicy) whose rows are `capacity` rows of
    `n_params` numbers of `dtype` in the pool's extra block; pickled into each worker without
    weights. obs_shape: one observation's shape (STACK, 84, 84)."""

    def __init__(self, policy, capacity: int, n_params: int, dtype, obs_shape: tuple):
        self.policy = policy
        self.capacity, self.n_params, self.dtype = int(capacity), int(n_params), np.dtype(dtype)
        self.obs_shape = tuple(obs_shape)

    @staticmethod
    def nbytes(capacity: int, n_params: int, dtype) -> int:
        return int(capacity) * int(n_params) * np.dtype(dtype).itemsize

    def rows(self, buffer) -> np.ndarray:
        """The (capacity, n_params) weight rows in a block of shared memory."""
        count = self.capacity * self.n_params
        return np.frombuffer(buffer, self.dtype, count).reshape(self.capacity, self.n_params)

    def warm(self, rows: np.ndarray) -> None:
        """Load these rows and run the forward once: its kernels compiled in this process, or
        loaded from Numba's cache."""
        self.policy.load(rows)
        self.policy(np.zeros(1, np.int64), np.zeros((1, *self.obs_shape), np.uint8))

    def attach(self, buffer) -> None:
        """In the worker: read the rows from the shared block, and load the forward's kernels
        (from Numba's cache: the driving process compiled them) before the first episode."""
        self.warm(self.rows(buffer))
        self.parent = os.getppid()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["policy"] = _without_weights(self.policy)
        return state

    def __call__(self, em, obs: np.ndarray, ask: bytes, halt: np.ndarray) -> bytes:
        """Play one episode on emulator em (its first observation in obs, (STACK, 84, 84)) to its
        end, the frame cap, halt[0] or the driving process's death (checked every 64 steps: a
        killed run leaves no process playing on); start the next one; the answer's bytes."""
        row, noops, seed, keep, reference = ASK.unpack(ask)
        if reference:  # the start is not a step of the episode
            em.begin(obs, noops, seed)
            noops = 0
        rows, first = np.array([row], np.int64), np.zeros(1, np.int64)
        batch = obs[None]  # (1, STACK, 84, 84): the policy's view of this slot's observation
        # the observations the net acts on: the evaluator's seeded sample, of this one episode
        sample = ExperienceSample(np.array([seed], np.int64), keep, obs.shape, obs.dtype) if keep else None
        total, steps, acted, forward_s, emulation_s = 0, 0, 0, 0.0, 0.0
        policy, step, clock, parent = self.policy, em.step, time.perf_counter, self.parent
        status = PLAYING
        while status == PLAYING:
            if halt[0] or (steps & 63 == 0 and os.getppid() != parent):
                break
            action = NOOP
            if steps >= noops:
                if sample is not None:
                    sample.offer(first, batch)
                t0 = clock()
                action = int(policy(rows, batch)[0])
                t1 = clock()
                forward_s += t1 - t0
                acted += 1
            else:
                t1 = clock()
            reward, status = step(action, obs)
            emulation_s += clock() - t1
            total += reward
            steps += 1
        frames = em.episode_frames()
        ram = np.ascontiguousarray(em.ram(), np.uint8)
        em.restart(obs)
        head = ANSWER.pack(float(total), steps, frames, acted, forward_s, emulation_s, status == PLAYING)
        tail = sample.obs[0, : sample.counts()[0]].tobytes() if keep else b""
        return head + ram.tobytes() + tail


def _without_weights(policy):
    """A copy of a host policy with no weights loaded (what is pickled into the workers)."""
    import copy

    bare = copy.copy(policy)
    bare.weights = None
    return bare


class Answer(NamedTuple):
    """A worker's answer for one episode, read (read_answer)."""

    ret: float  # the episode's return
    steps: int  # agent steps
    frames: int  # game frames, the start's included
    acted: int  # steps the net chose an action on (a sticky action repeats without it)
    forward_s: float  # seconds in the forward
    emulation_s: float  # seconds emulating
    cut: bool  # cut short: halted (a drain) or the driving process gone
    ram: np.ndarray  # (128,) uint8: the final RAM, novelty search's behaviour on Atari
    kept: np.ndarray  # (n, *obs_shape) uint8: the observations kept for safe mutations


def read_answer(answer: bytes, obs_shape: tuple) -> Answer:
    """The Answer of a worker's answer bytes."""
    ret, steps, frames, acted, forward_s, emulation_s, cut = ANSWER.unpack_from(answer)
    at = ANSWER.size
    ram = np.frombuffer(answer, np.uint8, RAM_BYTES, at)
    kept = np.frombuffer(answer, np.uint8, offset=at + RAM_BYTES).reshape(-1, *obs_shape)
    return Answer(ret, steps, frames, acted, forward_s, emulation_s, bool(cut), ram, kept)


def runs_in_workers(policy, weights) -> bool:
    """Whether the emulator processes can play episodes with this policy and these weights: a
    host policy (a picklable forward function over rows in host memory) and rows a shared block
    can hold (PooledWeights)."""
    from nevo.nets.kernels import HostPolicy

    return isinstance(policy, HostPolicy) and hasattr(weights, "share")
