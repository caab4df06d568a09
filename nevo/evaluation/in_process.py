"""The synchronous evaluator, for environments stepped in this process: gymnasium vector tasks.

Same interface and results as `nevo.evaluation.pipeline.AtariEvaluator` (a Population and Episodes in, Results
out; weights built per slot by nevo.evaluation.slot_weights),
and the same episode queue and active-episode compaction: every step, one forward pass over the
slots whose episode is still running, then those slots step; an ended slot takes the next queued
episode at once (a reset with that episode's seed), and when the queue is empty it leaves the
batch. Tasks such as CartPole cost microseconds a step, so there is nothing to overlap: the
forward pass is the work. An episode's outcome depends only on (individual, episode seed).

A task is an object with `slots`, `obs_shape`, `obs_dtype`, `reset(slots, seeds) -> obs (k, *obs_shape)`,
`step(slots, actions) -> (obs, rewards (k,), ended (k,) bool)` and `close()`, e.g.
`nevo.tasks.envs.VectorTaskSlots`. A task with `behaviour(slots) -> (k, d)` (the maze: the final
position) has it read when each episode ends, into Results.behaviours. Frames are agent steps.
"""

from __future__ import annotations

import time

import numpy as np

from nevo.episodes import Episodes, Results
from nevo.evaluation.experiences import sample_for
from nevo.evaluation.slot_weights import mutation_s


class InProcessEvaluator:
    """Runs Episodes on a task's slots, `policy` (nevo.nets.kernels.make_policy) choosing actions."""

    def __init__(self, task, policy, weights, frame_cap: int):
        self.task = task
        self.policy = policy
        self.weights = weights  # nevo.evaluation.slot_weights: the rows the policy reads, built from genomes
        self.slots = task.slots
        self.frame_cap = frame_cap  # an episode is cut after this many steps

    def close(self) -> None:
        self.task.close()

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames).
        population: nevo.episodes.Population, whose rows episodes.ind name."""
        ind, seeds = np.asarray(episodes.ind, np.int64), np.asarray(episodes.seeds, np.int64)
        n_ep, S = len(ind), self.slots
        returns, lengths = np.zeros(n_ep, np.float64), np.zeros(n_ep, np.int64)
        t0 = last_report = time.monotonic()
        tail_s = forward_s = 0.0
        if n_ep == 0:
            return Results(returns, lengths, lengths.copy())
        slot_ep = np.full(S, -1, np.int64)  # the episode each slot plays (-1: idle)
        slot_row = np.zeros(S, np.int64)  # the policy's weight row of each live slot
        obs = np.zeros((S, *self.task.obs_shape), self.task.obs_dtype)
        first = min(S, n_ep)
        slot_ep[:first] = np.arange(first)
        obs[:first] = self.task.reset(np.arange(first), seeds[:first])
        next_ep, done, frames = first, 0, 0
        has_bc = hasattr(self.task, "behaviour")
        behaviours = None
        sample = sample_for(episodes, self.task.obs_shape, self.task.obs_dtype)  # None unless asked
        counted = None if episodes.obs_stats is None else np.asarray(episodes.obs_stats, bool)  # (E,)
        n_obs = int(np.prod(self.task.obs_shape))
        # Observation statistics per counted episode (k, n), each summed in its own step order: the
        # same numbers whatever the slots or the machine that played it (nevo.nets.obs_norm).
        row_of = None if counted is None else np.cumsum(counted) - 1  # (E,) counted episode -> its row
        k = 0 if counted is None else int(counted.sum())
        obs_sum, obs_sumsq, obs_count = np.zeros((k, n_obs)), np.zeros((k, n_obs)), np.zeros(k, np.int64)
        mutation_s0 = mutation_s(self.weights)
        self.policy.load(self.weights.start(population, ind, S))
        slot_row[:first] = self.weights.take(ind[:first])
        try:
            while True:
                live = np.flatnonzero(slot_ep >= 0)  # compaction: only these rows run
                if live.size == 0:
                    break
                tick = time.monotonic()
                ep, acting = slot_ep[live], obs[live]  # the observations the net acts on
                if sample is not None:
                    sample.offer(ep, acting)
                if counted is not None and counted[ep].any():  # observation statistics (nevo.nets.obs_norm)
                    rows = row_of[ep[counted[ep]]]
                    seen = acting[counted[ep]].reshape(-1, n_obs).astype(np.float64)
                    obs_sum[rows] += seen
                    obs_sumsq[rows] += seen**2
                    obs_count[rows] += 1
                t_fwd = time.monotonic()  # the forward alone (as the pipeline times it)
                actions = self.policy(slot_row[live], acting)
                forward_s += time.monotonic() - t_fwd
                o, r, ended = self.task.step(live, actions)
                obs[live] = o
                returns[ep] += r
                lengths[ep] += 1
                frames += live.size
                ended |= lengths[ep] >= self.frame_cap
                if has_bc and ended.any():  # read before the slots are reset
                    bc = self.task.behaviour(live[ended])
                    if behaviours is None:
                        behaviours = np.zeros((n_ep, bc.shape[1]), bc.dtype)
                    behaviours[ep[ended]] = bc
                refill, refill_seeds = [], []
                for s in live[ended]:
                    done += 1
                    self.weights.done(ind[slot_ep[s]])
                    if next_ep < n_ep:
                        slot_ep[s] = next_ep
                        slot_row[s] = self.weights.take(ind[next_ep : next_ep + 1])[0]
                        refill.append(s)
                        refill_seeds.append(seeds[next_ep])
                        next_ep += 1
                    else:
                        slot_ep[s] = -1
                if refill:
                    obs[refill] = self.task.reset(np.array(refill), np.array(refill_seeds))
                now = time.monotonic()
                if live.size < S:
                    tail_s += now - tick
                if progress is not None and now - last_report > 0.5:
                    progress(done, n_ep, frames)
                    last_report = now
        finally:
            self.policy.release()
        wall = time.monotonic() - t0
        return Results(
            returns,
            lengths,
            lengths.copy(),
            wall_s=wall,
            tail_s=tail_s,
            forward_s=forward_s,
            behaviours=behaviours,
            experiences=None if sample is None else sample.obs,
            experience_counts=None if sample is None else sample.counts(),
            mutation_s=mutation_s(self.weights) - mutation_s0,
            obs_stats=None if counted is None else (obs_sum, obs_sumsq, obs_count),
        )
