"""The evaluator: episodes over many emulator slots, with batched inference overlapping emulation.

Interface (narrow and serialisable, so a remote worker can serve it later): weights of the
individuals plus a list of episodes (individual, episode seed) in; per episode return,
length and game frames out.

The pipeline, in SEED RL's shape on one machine (Espeholt et al. 2019; the accelerated deep
neuroevolution of Uber AI, 2018): the slots are split into groups, each a synchronous ale-py
vector env whose C++ threads step its emulators. Groups are driven round robin: while group A's
emulators step (native threads, the GIL released), the forward pass for group B runs (Numba,
GIL released; or a GPU kernel), then B's actions are sent and A's results received. So the
emulator threads and the inference keep every core busy; neither waits for the other while
there are two or more groups.

A queue of episodes (individual, episode seed) feeds the slots: when an episode ends its slot
takes the next one at once; when the queue is empty, finished slots leave the inference batch
(active-episode compaction) and a group whose slots are all idle is no longer stepped. An
episode's outcome depends only on its individual and its seed, never on the slot that ran it.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from nevo.envs import NOOP, make_atari, noop_count


@dataclass
class Episodes:
    """What to evaluate: episode e runs individual ind[e] with seed seeds[e]."""

    ind: np.ndarray  # (E,) int64 row of the weights array
    seeds: np.ndarray  # (E,) int64 episode seeds


@dataclass
class Results:
    """Per episode outcomes, in the order of the Episodes asked for."""

    returns: np.ndarray  # (E,) float64 undiscounted, unclipped game score
    lengths: np.ndarray  # (E,) int64 agent steps, no-ops included
    frames: np.ndarray  # (E,) int64 game frames emulated, as ALE counts them
    wall_s: float = 0.0  # wall time of the evaluation
    tail_s: float = 0.0  # of which with fewer live episodes than emulator slots

    @property
    def total_frames(self) -> int:
        return int(self.frames.sum())


class Evaluator:
    """Runs Episodes on groups of Atari emulators, `policy` choosing the actions.

    slots: emulators in all; group_size: emulators per vector env (the forward batch of one
    group); overlap=False steps one group at a time with no overlap (the plain loop, kept for
    comparison and as the reference of the pipelined one).
    """

    def __init__(self, env_cfg, policy, slots: int, threads: int, group_size: int = 0, overlap: bool = True):
        self.env_cfg = env_cfg
        self.policy = policy  # nevo.kernels.make_policy(...): load(weights), (rows_ind, obs) -> actions
        self.overlap = overlap
        self.group = max(1, min(slots, group_size or -(-slots // 2)))
        n_groups = -(-slots // self.group)
        self.slots = n_groups * self.group
        self.envs = [make_atari(env_cfg, self.group, threads) for _ in range(n_groups)]

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def run(self, weights: np.ndarray, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames)."""
        batch = _Batch(self, episodes)
        if batch.n_ep == 0:
            return batch.results()
        self.policy.load(weights)
        try:
            used = batch.start()
            pending = deque(used)
            if self.overlap:
                for g in used:
                    batch.act(g)
            last_report = time.monotonic()
            while pending:
                g = pending.popleft()
                if not self.overlap:
                    batch.act(g)
                if batch.receive(g):  # the group still has a live episode
                    if self.overlap:
                        batch.act(g)  # its emulators step while the next group's forward runs
                    pending.append(g)
                if progress is not None and time.monotonic() - last_report > 0.5:
                    progress(batch.done, batch.n_ep, batch.frames_done)
                    last_report = time.monotonic()
        finally:
            batch.drain()  # on an error or Ctrl-C, no step is left in flight in the C++ threads
            self.policy.release()
        return batch.results()


class _Batch:
    """The state of one run(): which episode each slot plays, and the per-episode results.

    Slot s = group g * G + k. A slot is live while slot_ep[s] >= 0.
    """

    def __init__(self, ev: Evaluator, episodes: Episodes):
        self.ev, self.G, S = ev, ev.group, ev.slots
        self.n_ep = len(episodes.ind)
        self.ind = np.asarray(episodes.ind, np.int64)
        self.noops = np.array([noop_count(s, ev.env_cfg.noop_max) for s in episodes.seeds], np.int64)
        self.returns = np.zeros(self.n_ep, np.float64)
        self.lengths = np.zeros(self.n_ep, np.int64)
        self.frames = np.zeros(self.n_ep, np.int64)
        self.slot_ep = np.full(S, -1, np.int64)
        self.slot_steps = np.zeros(S, np.int64)
        self.slot_ret = np.zeros(S, np.float64)
        # ALE's cumulative and per-episode frame counters when the slot's episode started.
        self.start_total = np.zeros(S, np.int64)
        self.start_episode = np.zeros(S, np.int64)
        self.obs = np.zeros((S, *ev.envs[0].single_observation_space.shape), np.uint8)  # (S, 4, 84, 84)
        self.actions = np.zeros(S, np.int64)
        self.next_ep = 0
        self.in_flight: set[int] = set()  # groups whose step was sent and not yet received
        self.done = 0
        self.frames_done = 0
        # Straggler tail: wall time with fewer live episodes than slots.
        self.t0 = time.monotonic()
        self.t_last = self.t0
        self.tail_s = 0.0

    def start(self) -> list[int]:
        """Reset the groups that get episodes and give each slot its first episode."""
        G = self.G
        first = min(self.ev.slots, self.n_ep)
        self.slot_ep[:first] = np.arange(first)
        self.next_ep = first
        used = list(range(-(-first // G)))
        for g in used:
            # A fixed reset seed: an unseeded reset draws a random one, and ALE's reset then
            # differs from a fresh emulator's (sticky actions are off and no-ops are nevo's, so
            # the seed changes nothing else).
            o, info = self.ev.envs[g].reset(seed=np.zeros(G, np.int64))
            sl = slice(g * G, (g + 1) * G)
            self.obs[sl] = o
            self.start_total[sl], self.start_episode[sl] = info["frame_number"], info["episode_frame_number"]
        return used

    def act(self, g: int) -> None:
        """Choose group g's actions (the net for live slots past their no-ops) and send them."""
        sl = slice(g * self.G, (g + 1) * self.G)
        ep = self.slot_ep[sl]
        acting = np.flatnonzero((ep >= 0) & (self.slot_steps[sl] >= self.noops[np.maximum(ep, 0)]))
        actions = self.actions[sl]
        actions[:] = NOOP
        if acting.size:  # compaction: only these rows go through the net
            actions[acting] = self.ev.policy(self.ind[ep[acting]], self.obs[sl][acting])
        self.ev.envs[g].send(actions)
        self.in_flight.add(g)

    def receive(self, g: int) -> bool:
        """Collect group g's step; end, record and refill slots; True if g has a live episode."""
        G, env = self.G, self.ev.envs[g]
        sl = slice(g * G, (g + 1) * G)
        o, reward, term, trunc, info = env.recv()
        self.in_flight.discard(g)
        self._clock()
        self.obs[sl] = o
        live = self.slot_ep[sl] >= 0
        self.slot_ret[sl] += np.where(live, reward, 0)
        self.slot_steps[sl] += live
        ended = np.flatnonzero(term | trunc)
        for k in ended:
            s = g * G + k
            e = self.slot_ep[s]
            if e < 0:
                continue
            # The env auto-reset this slot in the same step: its counters now belong to a new
            # episode that has episode_frame_number frames of its own so far.
            total, fresh = int(info["frame_number"][k]), int(info["episode_frame_number"][k])
            self.frames[e] = total - fresh - self.start_total[s] + self.start_episode[s]
            self.returns[e], self.lengths[e] = self.slot_ret[s], self.slot_steps[s]
            self.frames_done += int(self.frames[e])
            self.done += 1
            self.slot_ret[s], self.slot_steps[s] = 0.0, 0
            self.slot_ep[s] = self.next_ep if self.next_ep < self.n_ep else -1
            self.next_ep = min(self.next_ep + 1, self.n_ep)
        if ended.size:
            # ALE's auto-reset draws its own seed, and some games' starts then depend on what
            # ran in the slot before (seen on Frostbite); a seeded reset does not. So every
            # ended slot is reset again, seeded, before its next episode.
            mask = np.zeros(G, bool)
            mask[ended] = True
            o, info = env.reset(seed=np.zeros(ended.size, np.int64), options={"reset_mask": mask})
            self.obs[sl] = o
            self.start_total[g * G + ended] = info["frame_number"][ended]
            self.start_episode[g * G + ended] = info["episode_frame_number"][ended]
        return bool((self.slot_ep[sl] >= 0).any())

    def drain(self) -> None:
        """Receive every step still in flight (their results are discarded)."""
        for g in list(self.in_flight):
            self.ev.envs[g].recv()
        self.in_flight.clear()

    def _clock(self) -> None:
        now = time.monotonic()
        if (self.slot_ep >= 0).sum() < self.ev.slots:
            self.tail_s += now - self.t_last
        self.t_last = now

    def results(self) -> Results:
        wall = time.monotonic() - self.t0
        return Results(self.returns, self.lengths, self.frames, wall_s=wall, tail_s=self.tail_s)
