"""What crosses the evaluation boundary: the episodes to play in, their outcomes out; and the
toolkit every evaluator shares.

Every algorithm hands an evaluator `Episodes` and gets `Results` back, whatever runs them (the
Atari pipelines, the synchronous evaluator of in-process tasks, a cluster). Both are plain
arrays, so they can be sent to another process or machine. Beside them, for the evaluators:
`book` (`EpisodeBook`, one evaluation's bookkeeping: the episodes to hand out, their returns,
lengths and clocks), `weights` (the weights a policy reads, built per slot or for the whole
population), `experiences` (the observations kept per episode for safe mutations) and `players`
(`plays`: an evaluator declares the kinds of task it plays). This package imports nothing of
nevo's above the genomes (the mutation operator, the CUDA weight builder), the machine and the
settings: the tasks, the Atari backend and the evaluators that use it sit above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from nevo.genomes.operators import GAUSSIAN, Mutation


@dataclass
class Episodes:
    """What to evaluate: episode e runs individual ind[e] with seed seeds[e]."""

    ind: np.ndarray  # (E,) int64 row of the Population
    seeds: np.ndarray  # (E,) int64 episode seeds
    record: int = 0  # observations to keep per episode, a seeded uniform sample (nevo.episodes.experiences)
    obs_stats: np.ndarray | None = None  # (E,) bool: episodes whose observations nevo.nets.obs_norm counts
    # A validation's episodes (ask_validation's): a supervised task scores them on its test set,
    # every other task plays them as it plays training episodes.
    validation: bool = False


@dataclass
class Results:
    """Per episode outcomes, in the order of the Episodes asked for."""

    returns: np.ndarray  # (E,) float64 undiscounted, unclipped game score
    lengths: np.ndarray  # (E,) int64 agent steps, no-ops included
    frames: np.ndarray  # (E,) int64 game frames emulated, as ALE counts them
    wall_s: float = 0.0  # wall time of the evaluation
    tail_s: float = 0.0  # of which with the queue empty and fewer live episodes than slots
    forward_s: float = 0.0  # of which in the forward pass (choosing actions)
    behaviours: np.ndarray | None = None  # (E, d) behaviour at each episode's end, where the task gives one
    cluster: dict | None = (
        None  # on a Dask cluster: bytes sent and received, chunks, workers (nevo.cluster.evaluator)
    )
    experiences: np.ndarray | None = None  # (E, record, *obs) the observations kept, when Episodes.record > 0
    experience_counts: np.ndarray | None = None  # (E,) int64 how many of each episode's are filled
    mutation_s: float = 0.0  # of the wall time, building safe mutations' children (nevo.genomes.safe_build)
    # (sums (k, n), sums of squares (k, n), counts (k,)) of the observations of each of the k
    # episodes Episodes.obs_stats counted, in episode order (summed once, by nevo.nets.obs_norm)
    obs_stats: tuple | None = None
    accuracy: np.ndarray | None = (
        None  # (E,) supervised tasks: the share of each episode's examples classified right
    )

    @property
    def total_frames(self) -> int:
        return int(self.frames.sum())

    def select(self, which) -> Results:
        """The outcomes of episodes `which`, in that order (times and observation statistics stay
        the whole evaluation's)."""
        which = np.asarray(which, np.int64)
        bc = None if self.behaviours is None else self.behaviours[which]
        exp, counts = None, None
        if self.experiences is not None:
            exp, counts = self.experiences[which], self.experience_counts[which]
        acc = None if self.accuracy is None else self.accuracy[which]
        return Results(self.returns[which], self.lengths[which], self.frames[which], self.wall_s,
                       self.tail_s, self.forward_s, bc, experiences=exp, experience_counts=counts,
                       mutation_s=self.mutation_s, obs_stats=self.obs_stats, accuracy=acc)  # fmt: skip

    @staticmethod
    def concat(parts: list[Results]) -> Results:
        """The results of several evaluations, one after the other (times add up)."""
        return Results(
            np.concatenate([p.returns for p in parts]),
            np.concatenate([p.lengths for p in parts]),
            np.concatenate([p.frames for p in parts]),
            wall_s=sum(p.wall_s for p in parts),
            tail_s=sum(p.tail_s for p in parts),
            forward_s=sum(p.forward_s for p in parts),
            behaviours=None if parts[0].behaviours is None else np.concatenate([p.behaviours for p in parts]),
            experiences=None
            if parts[0].experiences is None
            else np.concatenate([p.experiences for p in parts]),
            experience_counts=None
            if parts[0].experience_counts is None
            else np.concatenate([p.experience_counts for p in parts]),
            mutation_s=sum(p.mutation_s for p in parts),
            obs_stats=_summed([p.obs_stats for p in parts]),
            accuracy=None if parts[0].accuracy is None else np.concatenate([p.accuracy for p in parts]),
        )


def _summed(stats: list):
    """Several evaluations' per-episode (sums, sumsqs, counts), one after the other (None where
    none has any)."""
    have = [s for s in stats if s is not None]
    if not have:
        return None
    return tuple(np.concatenate([s[i] for s in have]) for i in range(3))


@dataclass
class Population:
    """Who to evaluate, as genomes, never as weights: whoever evaluates builds each row where it
    is used (nevo.genomes.noise.WeightBuilder), so only seeds cross the boundary.

    Row i is built from base[i] and seed[i] (eps(s): the noise table's slice for seed s):
        base[i] < 0    a fresh network: init_scale * eps(seed[i])
        seed[i] < 0    a copy of base row base[i] (the GA's elite; ES's theta)
        otherwise      base row base[i] + scale[i] * eps(seed[i])  (a GA child; ES's theta +- sigma eps)
    bases: the few rows the others are built from, either genomes (int64 seed lists, rebuilt
    with `sigma`: init_scale * eps(s0) + sigma * (eps(s1) + eps(s2) + ...)) or, as they are, a
    (K, P) float32 array (ES's theta; weights a caller already has).
    """

    bases: list | np.ndarray  # [(L_k,) int64 seed lists] or (K, P) float32
    base: np.ndarray  # (N,) int64 index into bases, -1: fresh
    seed: np.ndarray  # (N,) int64 noise seed, -1: copy of the base
    scale: np.ndarray  # (N,) float32 the noise's multiplier (sigma, or -sigma for a mirrored ES row)
    sigma: float = 0.0  # the mutation power of the seed lists in bases
    # How a child (base >= 0, seed >= 0) comes from its base: Gaussian (base + scale * eps) or
    # a safe mutation (nevo.genomes.safe_build), measured on the base's experiences.
    mutation: Mutation = GAUSSIAN
    experiences: list | None = None  # [(T_k, *obs)] per base: the observations its sensitivity is measured on
    # --obs-norm 1: (2, n) float64 the observation mean and std, frozen for this population, that
    # every built row folds into its first layer (nevo.nets.obs_norm); None: no normalisation.
    obs_norm: np.ndarray | None = None
    # Limited-perturbation ES: (N, 2) int64 [lo, hi) of the parameters each row's noise may change
    # (the others keep their base's values); None: every parameter.
    bucket: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.base)

    def rows(self, which) -> Population:
        """The population of rows `which` (in that order), over the same bases."""
        which = np.asarray(which, np.int64)
        return Population(self.bases, self.base[which], self.seed[which], self.scale[which], self.sigma,
                          self.mutation, self.experiences, self.obs_norm,
                          None if self.bucket is None else self.bucket[which])  # fmt: skip

    @staticmethod
    def of_weights(weights: np.ndarray) -> Population:
        """The individuals whose (N, P) float32 weights the caller already has (benchmarks, tests)."""
        n = len(weights)
        return Population(
            weights, np.arange(n, dtype=np.int64), np.full(n, -1, np.int64), np.zeros(n, np.float32)
        )


@runtime_checkable
class Evaluator(Protocol):
    """The contract every evaluator meets (the Atari pipeline, the in-process evaluator, a Dask
    cluster): play `episodes` of `population`'s rows, building each row's weights from its genome
    where it is used, and return one outcome per episode, in their order. progress(done, total,
    frames) may be called while it runs. An episode's outcome depends only on (individual, episode
    seed), whatever the evaluator."""

    def run(self, population: Population, episodes: Episodes, progress=None) -> Results: ...

    def close(self) -> None: ...
