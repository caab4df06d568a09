"""One evaluation's episodes, kept alike by every evaluator: the in-process one (the maze,
gymnasium, MuJoCo) and the Atari pipelines (workers, lockstep, overlap), on one machine or in
each chunk a cluster worker plays.

The queue: episodes start in their order, each slot given the queue's next episode when its own
ends (slots in slot order), and a slot whose episode ends when the queue is empty goes idle
(active-episode compaction: idle slots are neither stepped nor run through the net). Each
episode's weight row is taken when it starts and given back when it ends (nevo.episodes.weights).
The outcomes: per episode return, length, game frames and behaviour, in the Episodes' order; the
seeded sample of the observations each episode acted on (nevo.episodes.experiences); the
straggler tail (wall time with the queue empty and fewer live episodes than slots), the time in
the forward; progress at most twice a second. An evaluator steps its slots its own way and tells
the book what happened through its methods, the one way in for results (`stepped`: a step's
rewards, where an evaluator counts them as they come; `end`: what ended, with its outcomes and the
observations it kept; `forward`: time in the policy): no evaluator writes the book's fields.
"""

from __future__ import annotations

import time

import numpy as np

from nevo.episodes import Episodes, Results
from nevo.episodes.experiences import sample_for
from nevo.episodes.weights import mutation_s

REPORT_S = 0.5  # seconds between two progress calls


class EpisodeBook:
    """The episodes of one run(episodes) over `slots` slots, their rows from `weights`.

    slot_ep[s]: the episode slot s plays (-1: idle); slot_row[s]: its weight row. returns, lengths,
    frames (E,): each episode's outcome once it ended. behaviours: (E, d) where the episodes have
    one (given up front as (d, dtype), or made by the first end that brings them)."""

    def __init__(self, episodes: Episodes, slots: int, weights, obs_shape: tuple, obs_dtype, behaviour=None):
        self.ind = np.asarray(episodes.ind, np.int64)
        self.seeds = np.asarray(episodes.seeds, np.int64)
        self.n_ep, self.slots, self.weights = len(self.ind), slots, weights
        self.returns = np.zeros(self.n_ep, np.float64)
        self.lengths = np.zeros(self.n_ep, np.int64)
        self.frames = np.zeros(self.n_ep, np.int64)
        self.behaviours = None if behaviour is None else np.zeros((self.n_ep, behaviour[0]), behaviour[1])
        self.slot_ep = np.full(slots, -1, np.int64)
        self.slot_row = np.zeros(slots, np.int64)
        # With Episodes.record: a seeded sample of each episode's observations
        self.sample = sample_for(episodes, obs_shape, obs_dtype)
        self.next_ep = self.done = self.frames_done = 0
        self.t0 = self.t_last = self.last_report = time.monotonic()
        self.tail_s = self.forward_s = 0.0
        self.mutation_s0 = mutation_s(weights)

    def start(self) -> int:
        """Each slot its first episode, in slot order, and its row; how many slots got one."""
        first = min(self.slots, self.n_ep)
        self.slot_ep[:first] = np.arange(first)
        self.slot_row[:first] = self.weights.take(self.ind[:first])
        self.next_ep = first
        return first

    def live(self) -> np.ndarray:
        """The slots playing an episode."""
        return np.flatnonzero(self.slot_ep >= 0)

    def stepped(self, eps: np.ndarray, rewards: np.ndarray) -> None:
        """Episodes eps (k, each once) took a step with these rewards: their returns and lengths so
        far, for an evaluator that counts them as they come (the in-process one)."""
        self.returns[eps] += rewards
        self.lengths[eps] += 1

    def forward(self, seconds: float) -> None:
        """Time in the policy's forward (the emulator processes': the mean process's)."""
        self.forward_s += seconds

    def end(self, eps: np.ndarray, returns=None, lengths=None, frames=None, behaviours=None,
            kept=None) -> None:  # fmt: skip
        """Episodes eps (k,) ended with these outcomes (None: as counted by `stepped`); kept: for
        one episode, (the observations it kept of those it acted on, how many it acted on), where
        its observations were sampled where it played (an emulator process); their rows are given
        back."""
        eps = np.asarray(eps, np.int64)
        if kept is not None:
            (e,), (obs, acted) = eps, kept
            self.sample.obs[e, : len(obs)] = obs
            self.sample.seen[e] = acted
        for name, value in (("returns", returns), ("lengths", lengths), ("frames", frames)):
            if value is not None:
                getattr(self, name)[eps] = value
        if behaviours is not None:
            if self.behaviours is None:
                self.behaviours = np.zeros((self.n_ep, behaviours.shape[1]), behaviours.dtype)
            self.behaviours[eps] = behaviours
        self.frames_done += int(self.frames[eps].sum())
        self.done += eps.size
        for e in eps:
            self.weights.done(self.ind[e])

    def refill(self, slots: np.ndarray) -> np.ndarray:
        """The slots whose episodes ended take the queue's next episodes, in slot order, with their
        rows; the rest go idle. Returns the slots that took one."""
        take = slots[: self.n_ep - self.next_ep]
        self.slot_ep[slots] = -1
        if take.size:
            new = np.arange(self.next_ep, self.next_ep + take.size)
            self.next_ep += take.size
            self.slot_ep[take] = new
            self.slot_row[take] = self.weights.take(self.ind[new])
        return take

    def clock(self, live: int) -> None:
        """Count the time since the last call into the straggler tail if the queue is empty and
        fewer than every slot (live of them) played in it."""
        now = time.monotonic()
        if self.next_ep >= self.n_ep and live < self.slots:
            self.tail_s += now - self.t_last
        self.t_last = now

    def report(self, progress, frames: int | None = None) -> None:
        """Call progress(done, total, frames) at most every REPORT_S; frames: those played so far
        where the evaluator counts them as they go, else the ended episodes'."""
        now = time.monotonic()
        if progress is not None and now - self.last_report > REPORT_S:
            progress(self.done, self.n_ep, self.frames_done if frames is None else frames)
            self.last_report = now

    def results(self, **more) -> Results:
        """The outcomes of the run's episodes (more: Results' fields an evaluator adds)."""
        return Results(
            self.returns,
            self.lengths,
            self.frames,
            wall_s=time.monotonic() - self.t0,
            tail_s=self.tail_s,
            forward_s=self.forward_s,
            behaviours=self.behaviours,
            experiences=None if self.sample is None else self.sample.obs,
            experience_counts=None if self.sample is None else self.sample.counts(),
            mutation_s=mutation_s(self.weights) - self.mutation_s0,
            **more,
        )
