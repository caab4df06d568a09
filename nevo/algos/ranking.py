"""The one fitness rule of nevo: higher is better, and a NaN fitness ranks below every number (it
never becomes a parent or the elite). `fitness_order` is the only place that ranks."""

from __future__ import annotations

import numpy as np


def fitness_order(fitness: np.ndarray) -> np.ndarray:
    """Indices from best to worst; NaN last; ties keep the lower index first (stable)."""
    f = np.asarray(fitness, np.float64)
    # lexsort is stable and sorts by its last key first: NaN-ness, then descending score.
    return np.lexsort((-np.nan_to_num(f, nan=0.0), np.isnan(f)))
