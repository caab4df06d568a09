"""The one fitness rule of nevo: higher is better, and a NaN fitness ranks below every number (it
never becomes a parent or the elite). `fitness_order` is the only place that ranks; `centered_ranks`
turns its order into ES's fitness shaping (also novelty search's and the gradient analysis')."""

from __future__ import annotations

import numpy as np


def fitness_order(fitness: np.ndarray) -> np.ndarray:
    """Indices from best to worst; NaN last; ties keep the lower index first (stable)."""
    f = np.asarray(fitness, np.float64)
    # lexsort is stable and sorts by its last key first: NaN-ness, then descending score.
    return np.lexsort((-np.nan_to_num(f, nan=0.0), np.isnan(f)))


def centered_ranks(x) -> np.ndarray:
    """(n,) float32 ranks of x scaled to [-0.5, 0.5]: best 0.5, worst -0.5, NaN ranked lowest."""
    x = np.asarray(x, np.float64).ravel()
    ranks = np.empty(x.size, np.float64)
    ranks[fitness_order(x)] = np.arange(x.size - 1, -1, -1)  # best gets n - 1
    return (ranks / max(x.size - 1, 1) - 0.5).astype(np.float32)
