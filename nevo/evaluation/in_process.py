"""The synchronous evaluator, for environments stepped in this process (nevo.tasks.InProcess: the
maze, gymnasium and MuJoCo tasks, and a kind of one's own that extends it).

Same interface and results as `nevo.atari.evaluator.AtariEvaluator` (a Population and Episodes in, Results
out; weights built per slot by nevo.episodes.weights),
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

from nevo import machine
from nevo.episodes import Episodes, Results
from nevo.episodes.book import EpisodeBook
from nevo.episodes.players import plays
from nevo.tasks import InProcess
from nevo.tasks.envs import pick_threads


@plays(InProcess)
class InProcessEvaluator:
    """Runs Episodes on a task's slots, `policy` (nevo.nets.kernels.make_policy) choosing actions."""

    def __init__(self, task, policy, weights, frame_cap: int):
        self.task = task
        self.policy = policy
        self.weights = weights  # nevo.episodes.weights: the rows the policy reads, built from genomes
        self.slots = task.slots
        self.frame_cap = frame_cap  # an episode is cut after this many steps

    @classmethod
    def for_task(cls, task, run_cfg, policy, weights, device: str, population: int, behaviours: bool):
        """(this evaluator for a task stepped here, facts for config.json): --env-slots slots
        (default min(population, 256)), each with its behaviour where novelty search needs one;
        envs whose step may free the GIL stepped in --threads threads (default: where they pay)."""
        n = run_cfg.env_slots or min(population, 256)
        slots = task.make_slots(n, behaviours)
        facts = {"env_slots": n, "pipeline": "sync"}
        if hasattr(slots, "use_threads"):
            if run_cfg.threads:
                slots.use_threads(run_cfg.threads)
            else:
                pick_threads(slots, machine.cores())
            facts["threads"] = slots.threads
        return cls(slots, policy, weights, task.cfg.frame_cap), facts

    def close(self) -> None:
        self.task.close()

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames).
        population: nevo.episodes.Population, whose rows episodes.ind name."""
        task, S = self.task, self.slots
        book = EpisodeBook(episodes, S, self.weights, task.obs_shape, task.obs_dtype)
        if book.n_ep == 0:
            return book.results()
        has_bc = hasattr(task, "behaviour")
        stats = _ObservationStatistics(episodes, task.obs_shape)
        self.policy.load(self.weights.start(population, book.ind, S))
        first = book.start()
        obs = np.zeros((S, *task.obs_shape), task.obs_dtype)
        obs[:first] = task.reset(np.arange(first), book.seeds[:first])
        steps = 0  # frames played so far (agent steps), for the progress line
        try:
            while (live := book.live()).size:  # compaction: only these rows run
                ep, acting = book.slot_ep[live], obs[live]  # the observations the net acts on
                if book.sample is not None:
                    book.sample.offer(ep, acting)
                stats.add(ep, acting)
                t_fwd = time.monotonic()  # the forward alone (as the pipeline times it)
                actions = self.policy(book.slot_row[live], acting)
                book.forward(time.monotonic() - t_fwd)
                o, r, ended = task.step(live, actions)
                obs[live] = o
                book.stepped(ep, r)
                steps += live.size
                ended |= book.lengths[ep] >= self.frame_cap
                if ended.any():  # (the behaviour read before the slots are reset)
                    over = ep[ended]
                    book.end(
                        over,
                        frames=book.lengths[over],
                        behaviours=task.behaviour(live[ended]) if has_bc else None,
                    )
                    refill = book.refill(live[ended])
                    if refill.size:
                        obs[refill] = task.reset(refill, book.seeds[book.slot_ep[refill]])
                book.clock(live.size)
                book.report(progress, steps)
        finally:
            self.policy.release()
        return book.results(obs_stats=stats.sums())


class _ObservationStatistics:
    """Observation statistics per counted episode (Episodes.obs_stats; nevo.nets.obs_norm): (k, n)
    sums and sums of squares and (k,) counts, each episode's summed in its own step order: the
    same numbers whatever the slots or the machine that played it."""

    def __init__(self, episodes: Episodes, obs_shape: tuple):
        self.counted = None if episodes.obs_stats is None else np.asarray(episodes.obs_stats, bool)  # (E,)
        self.n = int(np.prod(obs_shape))
        k = 0 if self.counted is None else int(self.counted.sum())
        self.row_of = None if self.counted is None else np.cumsum(self.counted) - 1  # episode -> its row
        self.sum, self.sumsq, self.count = np.zeros((k, self.n)), np.zeros((k, self.n)), np.zeros(k, np.int64)

    def add(self, ep: np.ndarray, obs: np.ndarray) -> None:
        """Episodes ep act on observations obs now."""
        if self.counted is None or not self.counted[ep].any():
            return
        rows = self.row_of[ep[self.counted[ep]]]
        seen = obs[self.counted[ep]].reshape(-1, self.n).astype(np.float64)
        self.sum[rows] += seen
        self.sumsq[rows] += seen**2
        self.count[rows] += 1

    def sums(self) -> tuple | None:
        return None if self.counted is None else (self.sum, self.sumsq, self.count)
