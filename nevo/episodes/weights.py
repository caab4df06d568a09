"""The weights an evaluator's policy reads: built from the genomes of a Population where they are used.

Two ways, one interface (`start`, `take`, `done`):
- `PooledWeights` (host backends: the Numba CPU and NumPy forwards): an individual's row is
  built when its first episode takes a slot and freed when its last one ends, so memory scales
  with the emulator slots, not with the population (the paper's 1,000 large nets are 16 GB of
  weights; 256 slots' worth is 4 GB, 32 slots' 0.5 GB);
- `AllWeights` (a device backend, which copies weights to the GPU once per evaluation): every
  row the episodes use is built before the first step;
- `GivenRows` (benchmarks and tests): the rows are given, one per individual, or there are none
  (a stand-in policy that reads no weights).
The policy reads row `take(ind)` for a slot playing individual ind.
"""

from __future__ import annotations

import numpy as np


class PooledWeights:
    """A pool of rows, one per individual with an episode in a slot (or still to come)."""

    max_rows = None  # any population at once

    def __init__(self, builder):
        self.builder = builder  # nevo.genomes.noise.WeightBuilder
        self.pool = np.empty((0, builder.n_params), builder.dtype)  # (rows, P), kept between evaluations
        self.shared = False

    def share(self, rows: np.ndarray) -> None:
        """Keep the rows in this (capacity, P) array from now on (shared memory that emulator
        processes read: nevo.atari.in_worker); start() then needs no more than capacity."""
        self.pool, self.shared = rows, True

    def start(self, population, ind: np.ndarray, slots: int) -> np.ndarray:
        """Begin an evaluation of these episodes' individuals (ind (E,) rows of population) on
        `slots` slots; returns the (rows, P) array the policy loads. One row more than the
        slots: an individual whose episodes are not all over keeps its row a while."""
        self.builder.use(population)
        n = len(population)
        if self.pool.shape[0] < min(slots + 1, n):
            if self.shared:
                raise ValueError(f"{len(self.pool)} shared weight rows, {min(slots + 1, n)} needed")
            self.pool = np.empty((min(slots + 1, n), self.builder.n_params), self.builder.dtype)
        self.left = np.bincount(ind, minlength=n)  # (N,) episodes of each individual not yet ended
        self.live = np.zeros(n, np.int64)  # (N,) episodes of each individual in a slot now
        self.row_of = np.full(n, -1, np.int64)  # (N,) its pool row, -1: not built
        self.owner = np.full(len(self.pool), -1, np.int64)  # (capacity,) individual of each row
        return self.pool

    def take(self, inds) -> np.ndarray:
        """Pool rows (k,) for episodes of individuals inds (k,) starting in slots; builds the
        missing ones (all in one pass)."""
        inds = np.asarray(inds, np.int64)
        np.add.at(self.live, inds, 1)  # first: a row being handed out here is never evicted below
        missing = np.unique(inds[self.row_of[inds] < 0])
        if missing.size:
            rows = np.empty(missing.size, np.int64)
            for j, i in enumerate(missing):
                rows[j] = self._free_row()
                self.owner[rows[j]], self.row_of[i] = i, rows[j]
            if (np.diff(rows) == 1).all():  # one contiguous block: build in place
                self.builder.build(missing, self.pool[rows[0] : rows[-1] + 1])
            else:
                self.pool[rows] = self.builder.build(
                    missing, np.empty((missing.size, self.pool.shape[1]), self.pool.dtype)
                )
        return self.row_of[inds]

    def _free_row(self) -> int:
        """A row no individual holds, or else one whose individual has no episode in a slot now
        (its later episodes, if any, build it again)."""
        idle = np.flatnonzero(self.owner < 0)
        if idle.size:
            return int(idle[0])
        waiting = np.flatnonzero(self.live[self.owner] == 0)
        r = int(waiting[0])  # exists: there are more rows than slots
        self.row_of[self.owner[r]] = -1
        self.owner[r] = -1
        return r

    def done(self, ind: int) -> None:
        """An episode of individual ind ended: its row is freed after its last episode."""
        self.live[ind] -= 1
        self.left[ind] -= 1
        if self.left[ind] == 0:
            self.owner[self.row_of[ind]] = -1
            self.row_of[ind] = -1


class AllWeights:
    """Every row the episodes use, built before the first step; row of individual i is i. An
    evaluator gives it populations of at most max_rows rows (a larger one, in parts)."""

    def __init__(self, builder, max_rows: int):
        self.builder = builder
        self.max_rows = max(1, int(max_rows))
        self.rows = np.empty((0, builder.n_params), builder.dtype)

    def start(self, population, ind: np.ndarray, slots: int) -> np.ndarray:
        self.builder.use(population)
        n = len(population)
        if self.rows.shape[0] != n:
            self.rows = np.empty((n, self.builder.n_params), self.builder.dtype)
        used = np.unique(ind)
        if used.size == n:
            self.builder.build(used, self.rows)
        elif used.size:
            part = np.empty((used.size, self.rows.shape[1]), self.rows.dtype)
            self.rows[used] = self.builder.build(used, part)
        return self.rows

    def take(self, inds) -> np.ndarray:
        return np.asarray(inds, np.int64)

    def done(self, ind: int) -> None:
        pass


class GivenRows:
    """Rows given up front, individual i's weights row i (or none: rows=None, for a stand-in
    policy that reads no weights, which then gets each slot's individual as its row)."""

    max_rows = None

    def __init__(self, rows=None):
        self.rows = rows

    def start(self, population, ind: np.ndarray, slots: int):
        return self.rows

    def take(self, inds) -> np.ndarray:
        return np.asarray(inds, np.int64)

    def done(self, ind: int) -> None:
        pass


def in_parts(run, population, episodes, max_rows):
    """run(population, episodes) over parts of at most max_rows individuals (None: all at once),
    the Results in the episodes' order. An episode's outcome depends only on its individual and
    seed, so the parts change nothing but memory."""
    from nevo.episodes import Episodes, Results

    if max_rows is None or len(population) <= max_rows:
        return run(population, episodes)
    n = len(population)
    ind = np.asarray(episodes.ind, np.int64)
    parts, order = [], []
    for lo in range(0, n, max_rows):
        hi = min(lo + max_rows, n)
        chosen = np.flatnonzero((ind >= lo) & (ind < hi))
        mask = None if episodes.obs_stats is None else np.asarray(episodes.obs_stats)[chosen]
        seeds = np.asarray(episodes.seeds, np.int64)[chosen]
        sub = Episodes(ind[chosen] - lo, seeds, episodes.record, mask, episodes.validation)
        parts.append(run(population.rows(np.arange(lo, hi)), sub))
        order.append(chosen)
    back = np.empty(len(ind), np.int64)
    back[np.concatenate(order)] = np.arange(len(ind))
    return Results.concat(parts).select(back)


def rows_that_fit(n_params: int, itemsize: int = 4) -> int:
    """Weight rows of n_params numbers of itemsize bytes that a quarter of the free memory holds
    (at least 2)."""
    from nevo.machine import available_memory

    avail = available_memory() or 8 * 2**30
    return max(2, int(0.25 * avail) // (itemsize * n_params))


def builds_on_device(builder) -> bool:
    """Whether a GPU can build this builder's rows itself (nevo.genomes.cuda_build): Gaussian
    children from a noise table, with no host-side step after the build (no virtual batch norm
    fold, no safe mutation)."""
    return builder.table.size > 0 and builder.fold is None and builder.safe is None


def for_device(builder, device: str, max_rows: int = 0):
    """The weights an evaluator on this device uses: PooledWeights on the CPU; on a GPU the rows
    built there (DeviceWeights) where it can build them, else AllWeights of at most max_rows
    rows at a time (0: as many as a quarter of the free memory holds)."""
    if device == "cuda" and builds_on_device(builder) and not max_rows:
        from nevo.genomes.cuda_build import DeviceWeights

        return DeviceWeights(builder)
    if device == "cuda":
        return AllWeights(builder, max_rows or rows_that_fit(builder.n_params, builder.dtype.itemsize))
    return PooledWeights(builder)


def mutation_s(weights) -> float:
    """Seconds the weights' builder has spent on safe mutations so far (0 without one)."""
    return float(getattr(getattr(weights, "builder", None), "mutation_s", 0.0))
