"""The evaluator: runs a batch of episodes over many env slots with batched inference.

Interface (narrow and serialisable, so a remote worker can serve it later): weights of the
individuals plus a list of episodes (individual, episode seed) in; per episode return,
length and game frames out.

This is the plain loop of the foundation: one synchronous vector env; each step the forward
pass runs only on the slots whose episode is active and past its no-ops (active-episode
compaction); a slot whose episode ends takes the next queued episode at once (the vector
env resets it in the same step). The threaded pipeline that overlaps emulation and inference
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
    """Runs Episodes on `slots` Atari emulators, `forward` choosing the actions."""

    def __init__(self, env_cfg, spec, forward, slots: int, threads: int):
        self.env_cfg = env_cfg
        self.spec = spec
        self.forward = forward
        self.slots = slots
        self.env = make_atari(env_cfg, slots, threads)

    def close(self) -> None:
        self.env.close()

    def run(self, weights: np.ndarray, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames)."""
        n_ep = len(episodes.ind)
        S = self.slots
        returns = np.zeros(n_ep, np.float64)
        lengths = np.zeros(n_ep, np.int64)
        frames = np.zeros(n_ep, np.int64)
        if n_ep == 0:
            return Results(returns, lengths, frames)
        ind = np.asarray(episodes.ind, np.int64)
        noops = np.array([noop_count(s, self.env_cfg.noop_max) for s in episodes.seeds], np.int64)

        slot_ep = np.full(S, -1, np.int64)  # episode running in each slot, -1 = idle
        slot_steps = np.zeros(S, np.int64)
        slot_ret = np.zeros(S, np.float64)
        # ALE's cumulative and per-episode frame counters when the slot's episode started.
        start_total = np.zeros(S, np.int64)
        start_episode = np.zeros(S, np.int64)

        # Every slot starts a fresh episode. An unseeded reset draws a random seed, and ALE's
        # reset then differs from a fresh emulator; a fixed seed makes it the same. (With
        # sticky actions off and no built-in no-ops the seed changes nothing else.)
        obs, info = self.env.reset(seed=np.zeros(S, np.int64))
        next_ep = min(S, n_ep)
        slot_ep[:next_ep] = np.arange(next_ep)
        start_total[:] = info["frame_number"]
        start_episode[:] = info["episode_frame_number"]

        done_count, frames_done, last_report = 0, 0, time.monotonic()
        actions = np.zeros(S, np.int64)
        while done_count < n_ep:
            running = slot_ep >= 0
            # Compaction: only slots with a live episode past its no-ops run the net.
            policy = running & (slot_steps >= noops[np.maximum(slot_ep, 0)])
            actions[:] = NOOP
            rows = np.flatnonzero(policy)
            if rows.size:
                acts, _ = self.forward(self.spec, weights, ind[slot_ep[rows]], obs[rows])
                actions[rows] = acts
            obs, reward, term, trunc, info = self.env.step(actions)
            slot_ret += np.where(running, reward, 0)
            slot_steps += running

            ended = np.flatnonzero(term | trunc)
            for s in ended:
                if slot_ep[s] < 0:
                    continue
                e = slot_ep[s]
                # The env has auto-reset this slot in the same step: its counters now belong
                # to a new episode that has episode_frame_number frames of its own so far.
                total, fresh = int(info["frame_number"][s]), int(info["episode_frame_number"][s])
                frames[e] = total - fresh - start_total[s] + start_episode[s]
                returns[e], lengths[e] = slot_ret[s], slot_steps[s]
                frames_done += frames[e]
                done_count += 1
                slot_ret[s], slot_steps[s] = 0.0, 0
                if next_ep < n_ep:
                    slot_ep[s] = next_ep
                    next_ep += 1
                else:
                    slot_ep[s] = -1
            if ended.size:
                # ALE's auto-reset draws its own seed, and some games' starts then depend on
                # what ran in the slot before; a reset with a fixed seed does not. So every
                # ended slot is reset again, seeded, before its next episode.
                mask = np.zeros(S, bool)
                mask[ended] = True
                obs, info = self.env.reset(seed=np.zeros(ended.size, np.int64), options={"reset_mask": mask})
                start_total[ended] = info["frame_number"][ended]
                start_episode[ended] = info["episode_frame_number"][ended]
            if progress is not None and time.monotonic() - last_report > 0.5:
                progress(done_count, n_ep, frames_done)
                last_report = time.monotonic()
        return Results(returns, lengths, frames)
