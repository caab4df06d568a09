"""How well ES's gradient estimate follows the true gradient: the correlation study of Zhang, Clune &
Stanley 2017 (arXiv 1712.06564, section 4.1: at fixed parameters and one mini-batch of MNIST, ES's
estimate g_ES from 10,000 offspring correlates about 4% with the back-propagated g_True; 20%,
which they call SGD-equivalent, takes about 274,000, found by adding 1,000 evaluations at a time;
the correlation grows like sqrt(N)).

g_ES is computed exactly as nevo.algos.es.ES.step computes it: mirrored pairs theta +- sigma*eps_k
with eps_k the noise table's slice for seed k, returns shaped as ES.tell shapes them (centered
ranks by default), g_ES = sum_k (f(2k) - f(2k+1)) eps_k / N by `weighted_noise_sum`. A return is
minus the mean cross-entropy of the perturbed net on the batch, scored by the supervised
evaluator (nevo.evaluation.supervised), as in an ES run; g_True = minus the gradient of the
batch's mean cross-entropy (nevo.algos.cross_entropy.loss_gradient), so both point uphill in fitness.
Neither includes the L2 term.

Our choices, where the paper does not give its formula: the correlation is Pearson's r between
g_ES and g_True taken over the parameter vector; the fitness is the shaped one ES steps along;
N counts evaluated offspring (individuals, two per mirrored pair). N grows by adding pairs; the
earlier pairs' returns are kept and the whole set is shaped again at each N, as an ES population
of N would be.

For a locally linear fitness and raw returns, r is about sqrt(K / (K + P + 1)) with K = N/2
pairs and P parameters (each pair's term (g.eps) eps has mean g and covariance |g|^2 I + g g^T),
so r grows like sqrt(N) while it is small: the 3,274,634-parameter net gives 4% at N = 10,000
and 20% near N = 270,000, the paper's numbers; `linear_r` is that line.
"""

from __future__ import annotations

import numpy as np

from nevo.algos.cross_entropy import loss_gradient
from nevo.algos.es import weighted_noise_sum
from nevo.algos.gradient_correlation import pearson
from nevo.algos.ranking import centered_ranks
from nevo.episodes import Episodes, Population
from nevo.episodes.weights import for_device
from nevo.evaluation.supervised import SupervisedEvaluator
from nevo.genomes.noise import SEED_LIMIT, WeightBuilder, offsets_of
from nevo.nets.kernels import make_policy
from nevo.tasks.supervised import DataSet

NOISE_STREAM = 0x6C0  # the study's perturbation seeds: default_rng([seed, NOISE_STREAM])


def shaped_fitness(returns: np.ndarray, fitness_shaping: str = "centered_ranks") -> np.ndarray:
    """(N,) float32 returns shaped as ES.tell shapes them (centered ranks, or raw with NaN the worst)."""
    returns = np.asarray(returns, np.float64)
    if fitness_shaping == "centered_ranks":
        return centered_ranks(returns)
    finite = returns[np.isfinite(returns)]
    return np.nan_to_num(returns, nan=finite.min() if finite.size else 0.0).astype(np.float32)


def es_gradient(shaped: np.ndarray, seeds: np.ndarray, noise, mirrored: bool = True) -> np.ndarray:
    """(P,) float32 ES's estimate from shaped fitness (N,) of the offspring of perturbation seeds
    (N/2,) mirrored or (N,) not, exactly as ES.step computes it: sum_k coeff_k eps_k / N."""
    shaped = np.asarray(shaped, np.float32)
    coeffs = shaped[0::2] - shaped[1::2] if mirrored else shaped
    offsets = offsets_of(seeds, noise.table.size, noise.n_params)
    g = np.empty(noise.n_params, np.float32)
    weighted_noise_sum(g, np.ascontiguousarray(coeffs, np.float32), offsets, noise.table)
    g /= np.float32(shaped.size)
    return g


def offspring(theta: np.ndarray, seeds: np.ndarray, sigma: float, mirrored: bool = True) -> Population:
    """ES's population around theta (P,): theta +- sigma*eps_k in pairs (2k, 2k+1), as ES.ask asks."""
    seeds = np.asarray(seeds, np.int64)
    if mirrored:
        seed, scale = np.repeat(seeds, 2), np.tile(np.float32([sigma, -sigma]), seeds.size)
    else:
        seed, scale = seeds, np.full(seeds.size, sigma, np.float32)
    theta = np.asarray(theta, np.float32)[None]
    return Population(theta, np.zeros(seed.size, np.int64), seed, scale.astype(np.float32))


def batch_evaluator(spec, noise, x, y, device: str = "cpu"):
    """A supervised evaluator whose every training episode is the batch (x (B, C, H, W) uint8, y (B,))."""

    data = DataSet.of(x, y, x[:1], y[:1])
    weights = for_device(WeightBuilder(noise.table, noise.init_scale), device)
    return SupervisedEvaluator(data, make_policy(device, spec), weights, len(y))


def correlation_curve(spec, noise, theta, x, y, counts, seed: int = 0, mirrored: bool = True,
                      fitness_shaping: str = "centered_ranks", evaluator=None) -> list[dict]:  # fmt: skip
    """[{"offspring": N, "r": corr(g_ES, g_True)}] for each N of counts (increasing), at theta (P,)
    on the batch (x, y): the offspring of N are those of the previous N plus new pairs, whose
    returns alone are evaluated; the perturbation seeds are drawn from `seed`."""
    counts = [int(n) for n in counts]
    per = 2 if mirrored else 1
    if any(n % per or n < 2 for n in counts) or counts != sorted(counts):
        raise ValueError(f"counts: increasing, each >= 2{' and even (mirrored pairs)' if mirrored else ''}")
    evaluator = evaluator or batch_evaluator(spec, noise, x, y)
    g_true = -loss_gradient(spec, theta, x, y)[0]  # uphill in fitness (minus the cross-entropy)
    seeds = np.random.default_rng([seed, NOISE_STREAM]).integers(0, SEED_LIMIT, counts[-1] // per)
    returns = np.zeros(0)
    out = []
    for n in counts:
        new = seeds[len(returns) // per : n // per]
        if new.size:
            pop = offspring(theta, new, noise.sigma, mirrored)
            got = evaluator.run(
                pop, Episodes(np.arange(len(pop), dtype=np.int64), np.zeros(len(pop), np.int64))
            )
            returns = np.concatenate([returns, got.returns])
        g = es_gradient(shaped_fitness(returns[:n], fitness_shaping), seeds[: n // per], noise, mirrored)
        out.append({"offspring": n, "r": pearson(g, g_true)})
    return out


def linear_r(offspring, n_params: int) -> np.ndarray:
    """The correlation of a locally linear fitness's estimate from raw returns of mirrored pairs:
    sqrt(K / (K + P + 1)), K = offspring / 2."""
    k = np.asarray(offspring, np.float64) / 2
    return np.sqrt(k / (k + n_params + 1))


def sqrt_fit(offspring, r) -> float:
    """c of the line r = c sqrt(N) fitted through the points (least squares on log r)."""
    n, r = np.asarray(offspring, np.float64), np.asarray(r, np.float64)
    ok = r > 0
    return float(np.exp(np.mean(np.log(r[ok]) - 0.5 * np.log(n[ok]))))


def offspring_for(r: float, c: float) -> float:
    """N where c sqrt(N) reaches r."""
    return (r / c) ** 2
