"""The evaluator: runs a batch of episodes over many env slots with batched inference.

Interface (narrow and serialisable, so a remote worker can serve it later): weights of the
individuals plus a list of episodes (individual, episode seed) in; per episode return,
length and game frames out.

This is the plain loop of the foundation: groups of synchronous vector envs; each step the
forward pass runs only on the slots whose episode is active and past its no-ops (active-episode
compaction), and only groups with a live episode are stepped; a slot whose episode ends takes
the next queued episode at once. The threaded pipeline that overlaps emulation and inference
replaces this loop in a later step.
"""

from __future__ import annotations

import time
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

    @property
    def total_frames(self) -> int:
        return int(self.frames.sum())


class Evaluator:
    """Runs Episodes on `slots` Atari emulators in groups, `policy` choosing the actions.

    speed: the slots are split into groups, each its own synchronous vector env; a group whose
    slots are all idle (the queue is empty and its episodes have ended) is no longer stepped,
    so the straggler tail of a generation costs at most one group's worth of idle emulators.
    """

    def __init__(self, env_cfg, policy, slots: int, threads: int, group_size: int = 0):
        self.env_cfg = env_cfg
        self.policy = policy  # nevo.kernels.make_policy(...): load(weights), (rows_ind, obs) -> actions
        self.group = max(1, min(slots, group_size or 4 * threads))
        n_groups = -(-slots // self.group)
        self.slots = n_groups * self.group
        self.envs = [make_atari(env_cfg, self.group, threads) for _ in range(n_groups)]

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def run(self, weights: np.ndarray, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames)."""
        n_ep, S, G = len(episodes.ind), self.slots, self.group
        returns = np.zeros(n_ep, np.float64)
        lengths = np.zeros(n_ep, np.int64)
        frames = np.zeros(n_ep, np.int64)
        if n_ep == 0:
            return Results(returns, lengths, frames)
        ind = np.asarray(episodes.ind, np.int64)
        self.policy.load(weights)
        noops = np.array([noop_count(s, self.env_cfg.noop_max) for s in episodes.seeds], np.int64)

        # Per slot (slot = group * G + k): its episode (-1 = idle), steps, return so far, and
        # ALE's cumulative / per-episode frame counters when its episode started.
        slot_ep = np.full(S, -1, np.int64)
        slot_steps = np.zeros(S, np.int64)
        slot_ret = np.zeros(S, np.float64)
        start_total = np.zeros(S, np.int64)
        start_episode = np.zeros(S, np.int64)
        obs = np.zeros((S, *self.envs[0].single_observation_space.shape), np.uint8)  # (S, 4, 84, 84)

        first = min(S, n_ep)
        slot_ep[:first] = np.arange(first)
        next_ep = first
        for g in range(-(-first // G)):
            # A fixed reset seed: an unseeded reset draws a random one, and ALE's reset then
            # differs from a fresh emulator's (sticky actions are off and no-ops are nevo's, so
            # the seed changes nothing else).
            o, info = self.envs[g].reset(seed=np.zeros(G, np.int64))
            sl = slice(g * G, (g + 1) * G)
            obs[sl], start_total[sl], start_episode[sl] = (
                o,
                info["frame_number"],
                info["episode_frame_number"],
            )

        done_count, frames_done, last_report = 0, 0, time.monotonic()
        actions = np.zeros(S, np.int64)
        while done_count < n_ep:
            running = slot_ep >= 0
            # Compaction: only slots with a live episode past its no-ops run the net.
            acting = running & (slot_steps >= noops[np.maximum(slot_ep, 0)])
            actions[:] = NOOP
            rows = np.flatnonzero(acting)
            if rows.size:
                actions[rows] = self.policy(ind[slot_ep[rows]], obs[rows])
            for g in np.flatnonzero(running.reshape(-1, G).any(axis=1)):
                sl = slice(g * G, (g + 1) * G)
                o, reward, term, trunc, info = self.envs[g].step(actions[sl])
                obs[sl] = o
                live = running[sl]
                slot_ret[sl] += np.where(live, reward, 0)
                slot_steps[sl] += live
                ended = np.flatnonzero(term | trunc)
                for k in ended:
                    s = g * G + k
                    e = slot_ep[s]
                    if e < 0:
                        continue
                    # The env auto-reset this slot in the same step: its counters now belong
                    # to a new episode that has episode_frame_number frames of its own so far.
                    total, fresh = int(info["frame_number"][k]), int(info["episode_frame_number"][k])
                    frames[e] = total - fresh - start_total[s] + start_episode[s]
                    returns[e], lengths[e] = slot_ret[s], slot_steps[s]
                    frames_done += frames[e]
                    done_count += 1
                    slot_ret[s], slot_steps[s] = 0.0, 0
                    slot_ep[s] = next_ep if next_ep < n_ep else -1
                    next_ep = min(next_ep + 1, n_ep)
                if ended.size:
                    # ALE's auto-reset draws its own seed, and some games' starts then depend on
                    # what ran in the slot before (seen on Frostbite); a seeded reset does not.
                    # So every ended slot is reset again, seeded, before its next episode.
                    mask = np.zeros(G, bool)
                    mask[ended] = True
                    o, info = self.envs[g].reset(
                        seed=np.zeros(ended.size, np.int64), options={"reset_mask": mask}
                    )
                    obs[sl] = o
                    start_total[g * G + ended] = info["frame_number"][ended]
                    start_episode[g * G + ended] = info["episode_frame_number"][ended]
            if progress is not None and time.monotonic() - last_report > 0.5:
                progress(done_count, n_ep, frames_done)
                last_report = time.monotonic()
        self.policy.release()
        return Results(returns, lengths, frames)
