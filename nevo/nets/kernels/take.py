"""Which observations a policy call acts on: `policy(rows_ind, obs, take)` runs row i on
obs[take[i]] (every slot's frame in obs, a slot per row), checked alike by every backend."""

import numpy as np


def checked_take(take, rows: int, slots: int) -> np.ndarray:
    """take as an integer array, one slot in [0, slots) per row; a one-line error otherwise (the
    same for every backend: NumPy would wrap a negative slot around, a GPU gather would not)."""
    take = np.asarray(take)
    if take.dtype.kind not in "iu":
        raise ValueError(f"take must be integer slot indices, got {take.dtype}")
    if take.shape != (rows,):
        raise ValueError(f"take must be ({rows},) (a slot per row), got {take.shape}")
    if rows and (take.min() < 0 or take.max() >= slots):
        raise IndexError(f"take must lie in [0, {slots})")
    return take
