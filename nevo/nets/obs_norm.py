"""Observation normalisation as OpenAI-ES does it for MuJoCo (Salimans et al. 2017, arXiv 1703.03864).

The policy sees (x - mean) / std, mean and std running statistics of the observations of a share
of the episodes played so far (the paper's code records them from 1% of the episodes, and floors
the variance at 1e-2). Within a generation the statistics are fixed, so the net is an ordinary
net whose first layer is folded:
    z_j = sum_i (x_i - m_i) / s_i * W_ij + b_j = sum_i x_i * (W_ij / s_i) + (b_j - sum_i (m_i / s_i) * W_ij)
and every forward kernel runs it unchanged, as virtual batch norm is folded (nevo.nets.vbn). The
statistics are updated after each generation from its training episodes, kept in the checkpoint
(an exact resume), and saved beside the elite (`obs_norm.gG.npy`: the mean and std its validation
used), so that the run folder rebuilds the policy. The paper's code also clips normalised
observations to [-5, 5]; a clip cannot be folded into weights, and nevo leaves it out.
"""

from __future__ import annotations

import numpy as np

VAR_FLOOR = 1e-2  # std = sqrt(max(var, 1e-2)) (the paper's code)
SHARE = 0.01  # the share of training episodes whose observations count (at least one a generation)


class RunningStat:
    """Count, sum and sum of squares of observations (float64), merged from evaluations."""

    def __init__(self, n: int):
        self.count = 0.0
        self.sum = np.zeros(n)  # (n,)
        self.sumsq = np.zeros(n)  # (n,)

    def update(self, stats) -> None:
        """Add an evaluation's per-episode (sums (k, n), sumsqs (k, n), counts (k,))
        (Results.obs_stats), episode after episode; None adds nothing."""
        if stats is None:
            return
        s, sq, c = (np.asarray(a) for a in stats)
        for i in range(len(c)):  # in episode order: the same sum on one machine or a cluster
            self.sum += s[i]
            self.sumsq += sq[i]
            self.count += float(c[i])

    @property
    def mean(self) -> np.ndarray:
        return self.sum / self.count if self.count else np.zeros_like(self.sum)

    @property
    def std(self) -> np.ndarray:
        """sqrt(max(var, VAR_FLOOR)); 1 before any observation (the identity fold)."""
        if not self.count:
            return np.ones_like(self.sum)
        var = self.sumsq / self.count - self.mean**2
        return np.sqrt(np.maximum(var, VAR_FLOOR))

    def state(self, prefix: str = "obs_norm/") -> dict:
        return {
            prefix + "count": np.float64(self.count),
            prefix + "sum": self.sum,
            prefix + "sumsq": self.sumsq,
        }

    def load_state(self, st: dict, prefix: str = "obs_norm/") -> None:
        self.count = float(st[prefix + "count"])
        self.sum = np.array(st[prefix + "sum"], np.float64)
        self.sumsq = np.array(st[prefix + "sumsq"], np.float64)


def fold(spec, weights: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """weights (rows, P) float32, in place: the first (dense) layer folded with (x - mean) / std.
    In float64, rounded to float32 once."""
    lay = spec.layers[0]
    n_in, n_out = lay.cin, lay.cout
    w = weights[:, lay.w_offset : lay.b_offset].reshape(len(weights), n_in, n_out).astype(np.float64)
    inv = 1.0 / np.asarray(std, np.float64)  # (n_in,)
    shift = np.einsum("i,rij->rj", np.asarray(mean, np.float64) * inv, w)  # (rows, n_out)
    weights[:, lay.b_offset : lay.b_offset + n_out] -= shift.astype(np.float32)
    weights[:, lay.w_offset : lay.b_offset] = (w * inv[None, :, None]).reshape(len(weights), -1)
    return weights


def fold_population(spec):
    """A WeightBuilder's fold for --obs-norm 1: each built row folded with the statistics its
    Population carries (Population.obs_norm; none: rows as built)."""

    def fold_rows(weights: np.ndarray, population) -> None:
        if population is not None and population.obs_norm is not None:
            fold(spec, weights, population.obs_norm[0], population.obs_norm[1])

    return fold_rows


def check(spec, task_name: str) -> None:
    """ValueError unless the net reads float32 vectors with a dense first layer (foldable)."""
    if spec.obs_dtype != np.float32 or not spec.layers or spec.layers[0].kind != "dense":
        raise ValueError(
            f"--obs-norm: normalises vector observations through a dense first layer; {task_name}'s "
            f"net {spec.name} reads {spec.obs_dtype} images"
        )


class ObsNorm:
    """The run's statistics, and the mean and std in use (frozen per generation: what every row's
    fold uses, sent to the evaluator in the Population)."""

    def __init__(self, spec):
        self.spec = spec
        self.stat = RunningStat(spec.layers[0].cin)
        self.mean, self.std = self.stat.mean, self.stat.std  # what the fold uses now

    def freeze(self) -> None:
        """Use the statistics gathered so far from now on (the next generation's)."""
        self.mean, self.std = self.stat.mean, self.stat.std

    def mark(self, episodes, seed: int, generation: int) -> None:
        """Choose the share of a generation's training episodes whose observations count
        (episodes.obs_stats), from the run's seed and the generation alone."""
        episodes.obs_stats = choose(len(episodes.ind), np.random.default_rng([seed, generation, 0x0B5]))

    def advance(self, results) -> None:
        """Add a generation's counted observations (Results.obs_stats), and use them from now on."""
        self.stat.update(results.obs_stats)
        self.freeze()

    def resume(self, checkpoint: dict) -> None:
        """The statistics of a checkpoint (RunningStat.state's keys), in use."""
        self.stat.load_state(checkpoint)
        self.freeze()


def choose(n_episodes: int, rng: np.random.Generator) -> np.ndarray:
    """(E,) bool: the episodes whose observations count, SHARE of them (at least one)."""
    mask = np.zeros(n_episodes, bool)
    mask[rng.choice(n_episodes, max(1, int(round(SHARE * n_episodes))), replace=False)] = True
    return mask
