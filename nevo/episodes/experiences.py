"""Experiences: a bounded, seeded sample of the observations each episode's policy acted on.

Safe mutations (Lehman et al. 2018, arXiv 1712.06563) measure how sensitive a parent's outputs
are to each weight on observations the parent has seen; the paper's code keeps up to 400 per
individual and samples 100. Here each episode keeps a uniform sample of at most `k` of the
observations its net chose actions on (reservoir sampling, Vitter's algorithm R): the t-th
observation (t = 0, 1, ...) takes place j = h(seed, t) mod (t + 1) when j < k, h a hash of the
episode's seed and t. The sample is then a function of the episode alone (its individual and
seed), whatever the slot, thread or machine that played it, as the episode's outcome is.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def places(seeds: np.ndarray, t: np.ndarray) -> np.ndarray:
    """(n,) int64 reservoir place of observation t (n,) of the episodes with seeds (n,): uniform
    in [0, t]."""
    with np.errstate(over="ignore"):
        h = _mix(_mix(seeds.astype(np.uint64) + _GOLDEN) ^ (t.astype(np.uint64) * _GOLDEN))
    return (h % (t.astype(np.uint64) + np.uint64(1))).astype(np.int64)


class ExperienceSample:
    """Up to k observations of each of E episodes, filled as the episodes run."""

    def __init__(self, seeds: np.ndarray, k: int, obs_shape: tuple, dtype):
        self.seeds = np.asarray(seeds, np.int64)  # (E,)
        self.k = int(k)
        self.obs = np.zeros((len(self.seeds), self.k, *obs_shape), dtype)  # (E, k, *obs)
        self.seen = np.zeros(len(self.seeds), np.int64)  # (E,) observations offered so far

    def offer(self, eps: np.ndarray, obs: np.ndarray) -> None:
        """Episodes eps (n,) (distinct) act on observations obs (n, *obs) now."""
        t = self.seen[eps]
        place = np.where(t < self.k, t, places(self.seeds[eps], t))
        keep = place < self.k
        self.obs[eps[keep], place[keep]] = obs[keep]
        self.seen[eps] += 1

    def counts(self) -> np.ndarray:
        """(E,) int64 observations kept per episode (its first rows are filled)."""
        return np.minimum(self.seen, self.k)


def sample_for(episodes, obs_shape: tuple, dtype) -> ExperienceSample | None:
    """The sample an evaluation keeps for these Episodes (None unless they ask for one)."""
    k = int(getattr(episodes, "record", 0) or 0)
    return ExperienceSample(episodes.seeds, k, obs_shape, dtype) if k > 0 else None
