"""The novelty-search core (Lehman & Stanley 2011) as the deep-neuroevolution papers use it.

- Such et al. 2017 (GA-NS, arXiv 1712.06567): novelty replaces fitness in the GA's selection; it is
  measured against the archive *and the current population*; behaviours of a random sample of the
  population (each individual with probability p) join the archive every generation.
- Conti et al. 2018 (NS-ES / NSR-ES / NSRA-ES, arXiv 1712.06560): novelty is measured against the
  archive only; the meta-population member to update is drawn with probability proportional to its
  novelty; the behaviour of the updated member (theta) joins the archive every generation; NSR-ES
  averages the centered ranks of reward and novelty, NSRA-ES adapts that weight.

The novelty of a behaviour is the mean Euclidean distance to its k nearest neighbours in a
reference set. `knn_novelty` takes one generic reference set; callers concatenate what their paper
measures against (Conti: the archive; Such: archive + population). Behaviours are (d,) vectors:
float32 positions (the maze's final (x, y), d = 2) or uint8 RAM (Atari, d = 128; distances on the
integer values, exactly).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.extending import overload

from nevo.algos.ranking import centered_ranks

_INT8_MAX_DIM = (2**31 - 1) // (255 * 255)  # 8-bit behaviours: int32 squared distances are exact to here
_TILE = 16  # queries per work item of _knn_kernel (see there)


def _wide_dtype(dtype) -> np.dtype:
    """The dtype distances are computed in: int16 for 8-bit behaviours (their differences fit),
    int64 for other integers (exact while squared distances fit int64), float64 for floats."""
    if np.issubdtype(dtype, np.integer):
        return np.dtype(np.int16 if dtype.itemsize == 1 else np.int64)
    return np.dtype(np.float64)


# ---- distances: per-pair math in small helpers ------------------------------------------------
def _sq_dist(a, b):
    """Squared Euclidean distance of behaviours a, b (d,) in their _wide_dtype; numba uses the
    overload below (int32 for widened 8-bit behaviours, int64 for other integers, else float64)."""
    return ((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2).sum()


@overload(_sq_dist, jit_options={"nogil": True})
def _sq_dist_numba(a, b):
    if a.dtype == types.int16:  # widened 8-bit behaviours: every difference fits int16

        def sq_bytes(a, b):
            # speed: the truncations tell LLVM that the differences are int16 and the sum int32
            # (exact for d <= _INT8_MAX_DIM): it subtracts with vpsubw and squares-and-pair-adds
            # with vpmaddwd, 8 bytes per instruction.
            s = np.int32(0)
            for j in range(a.shape[0]):
                x = np.int32(np.int16(a[j] - b[j]))
                s = np.int32(s + x * x)
            return s

        return sq_bytes
    if isinstance(a.dtype, types.Integer):

        def sq_int(a, b):
            s = np.int64(0)
            for j in range(a.shape[0]):
                x = a[j] - b[j]
                s += x * x
            return s

        return sq_int

    def sq_float(a, b):
        s = 0.0
        for j in range(a.shape[0]):  # in order: a fixed summation order
            x = a[j] - b[j]
            s += x * x
        return s

    return sq_float


@numba.njit(nogil=True, cache=True)
def insert_smallest(best, d):
    """Insert squared distance d into best (m,) float64, ascending, dropping the largest."""
    m = best.shape[0]
    if d < best[m - 1]:
        j = m - 1
        while j > 0 and best[j - 1] > d:
            best[j] = best[j - 1]
            j -= 1
        best[j] = d


@numba.njit(nogil=True, cache=True)
def _novelty_of(best, k, exclude_self):
    """Mean of the square roots of the first k of best (m,) ascending, past the query's own 0."""
    lo = 1 if exclude_self and best[0] == 0.0 else 0
    cnt = min(k, best.shape[0] - lo)
    s = 0.0
    for j in range(lo, lo + cnt):  # ascending: a fixed summation order
        s += np.sqrt(best[j])
    return s / cnt if cnt > 0 else 0.0


@numba.njit(parallel=True, nogil=True, cache=True)
def _knn_kernel(out, queries, reference, k, exclude_self, wide):
    """out (q,) float64 = novelty of queries (q, d) against reference (n, d), n >= 1.

    wide: a (0,) array of the dtype to compute in (_wide_dtype).
    Threads map to tiles of _TILE queries; a tile scans the reference set in order, and each of
    its queries keeps its own top-k buffer of squared distances (a sorted array; insertion, no
    sort). A query's result is computed by one thread in one fixed order, so it does not depend on
    the thread count.
    speed: compute bound. A tile widens its queries once and each reference row once (to int16
    for RAM), so the inner loop is load-subtract-multiply-add with no byte unpacking, and a row
    is read from memory once per tile, not once per query (1.5x the one-query-per-thread loop).
    """
    q, d = queries.shape
    n = reference.shape[0]
    m = min(k + 1 if exclude_self else k, n)  # buffer size: one more to drop the query's own 0
    for t in numba.prange((q + _TILE - 1) // _TILE):
        lo = t * _TILE
        nt = min(_TILE, q - lo)
        qw = np.empty((nt, d), wide.dtype)  # (nt, d) the tile's queries, widened
        for u in range(nt):
            for j in range(d):
                qw[u, j] = queries[lo + u, j]
        row = np.empty(d, wide.dtype)  # (d,) the reference row being scanned, widened
        best = np.full((nt, m), np.inf)  # (nt, m) squared distances, ascending: top-k buffers
        for i in range(n):
            for j in range(d):
                row[j] = reference[i, j]
            for u in range(nt):
                insert_smallest(best[u], _sq_dist(qw[u], row))
        for u in range(nt):
            out[lo + u] = _novelty_of(best[u], k, exclude_self)


def _check(queries, reference, k):
    if queries.ndim != 2 or reference.ndim != 2 or queries.shape[1] != reference.shape[1]:
        shapes = f"{queries.shape} and {reference.shape}"
        raise ValueError(f"knn_novelty: need queries (q, d) and reference (n, d), got {shapes}")
    if queries.dtype != reference.dtype:
        raise ValueError(f"knn_novelty: queries are {queries.dtype}, the reference set {reference.dtype}")
    if not (np.issubdtype(reference.dtype, np.integer) or np.issubdtype(reference.dtype, np.floating)):
        raise ValueError(f"knn_novelty: behaviours must be integers or floats, got {reference.dtype}")
    if reference.shape[0] == 0:
        raise ValueError("knn_novelty: the reference set is empty")
    if int(k) < 1:
        raise ValueError(f"knn_novelty: k must be >= 1, got {k}")
    if reference.dtype.itemsize == 1 and np.issubdtype(reference.dtype, np.integer):
        if reference.shape[1] > _INT8_MAX_DIM:
            raise ValueError(f"knn_novelty: 8-bit behaviours of d > {_INT8_MAX_DIM} overflow int32")
    elif np.issubdtype(reference.dtype, np.floating):
        if not (np.isfinite(queries).all() and np.isfinite(reference).all()):
            raise ValueError("knn_novelty: behaviours must be finite")


def knn_novelty(queries, reference, k: int, exclude_self: bool = False) -> np.ndarray:
    """(q,) float64 novelty of each query: its mean Euclidean distance to its k nearest neighbours.

    queries (q, d) and reference (n, d) share one dtype: integer behaviours (uint8 RAM) are compared
    exactly on their integer values, float ones in float64. The reference set is generic: pass the
    archive (Conti et al.) or the archive and the current population concatenated (Such et al.).
    A query that is itself in the reference set counts a distance of 0 to itself: with k = 1 an
    archive member's novelty against the archive is 0 (Uber's NS-ES code scores its agents so, their
    own behaviours being in the archive). With exclude_self, one zero distance per query is dropped
    instead, as if one copy of the query were taken out of the reference set. With fewer than k
    (other) points, the mean is over all of them (0.0 when there are none).
    """
    queries = np.ascontiguousarray(queries)
    reference = np.ascontiguousarray(reference)
    _check(queries, reference, k)
    out = np.empty(queries.shape[0], np.float64)
    if out.size:
        wide = np.zeros(0, _wide_dtype(reference.dtype))
        _knn_kernel(out, queries, reference, int(k), bool(exclude_self), wide)
    return out


def knn_novelty_reference(queries, reference, k: int, exclude_self: bool = False) -> np.ndarray:
    """The plain NumPy twin of knn_novelty: all distances, a full sort."""
    q, r = np.asarray(queries), np.asarray(reference)
    wide = np.int64 if np.issubdtype(r.dtype, np.integer) else np.float64
    diff = q[:, None, :].astype(wide) - r[None, :, :].astype(wide)  # (q, n, d)
    dist = np.sort(np.sqrt((diff * diff).sum(axis=2).astype(np.float64)), axis=1)  # (q, n)
    out = np.empty(len(q), np.float64)
    for i, row in enumerate(dist):
        if exclude_self and row[0] == 0.0:
            row = row[1:]
        out[i] = row[:k].mean() if row.size else 0.0
    return out


# ---- the archive ------------------------------------------------------------------------------
class Archive:
    """Behaviours (n, d) of a fixed dtype in a capacity-doubling buffer (appends are amortised O(1))."""

    def __init__(self, dim: int, dtype, capacity: int = 1024):
        self.dim = int(dim)
        self.dtype = np.dtype(dtype)  # uint8 for RAM, float32 for positions
        self._buf = np.empty((max(int(capacity), 1), self.dim), self.dtype)  # (capacity, d)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def data(self) -> np.ndarray:
        """(n, d) view of the filled part, in insertion order; valid until the next add."""
        return self._buf[: self._n]

    def add(self, behaviours) -> None:
        """Append one behaviour (d,) or several (m, d), in order."""
        b = np.asarray(behaviours)
        b = b.reshape(1, -1) if b.ndim == 1 else b
        if b.ndim != 2 or b.shape[1] != self.dim:
            raise ValueError(f"Archive.add: need (m, {self.dim}) behaviours, got {np.shape(behaviours)}")
        if not np.can_cast(b.dtype, self.dtype, "same_kind"):
            raise ValueError(f"Archive.add: {b.dtype} behaviours do not fit an archive of {self.dtype}")
        end = self._n + b.shape[0]
        if end > self._buf.shape[0]:
            grown = np.empty((max(2 * self._buf.shape[0], end), self.dim), self.dtype)
            grown[: self._n] = self._buf[: self._n]
            self._buf = grown
        self._buf[self._n : end] = b
        self._n = end

    # ---- checkpoint -------------------------------------------------------------------------
    def state(self) -> dict:
        return {"archive": self.data.copy()}

    def load_state(self, st: dict) -> None:
        a = np.asarray(st["archive"])
        if a.ndim != 2 or a.shape[1] != self.dim or a.dtype != self.dtype:
            raise ValueError(
                f"Archive.load_state: need (n, {self.dim}) {self.dtype}, got {a.shape} {a.dtype}"
            )
        self._buf = np.empty((max(self._buf.shape[0], a.shape[0]), self.dim), self.dtype)
        self._buf[: a.shape[0]] = a
        self._n = a.shape[0]


def sample_for_archive(n: int, p: float, rng: np.random.Generator) -> np.ndarray:
    """GA-NS insertion (Such et al.): indices of the individuals (of n) whose behaviours join the
    archive this generation, each with probability p. Always draws n uniforms, so the stream of rng
    does not depend on p."""
    return np.flatnonzero(rng.random(n) < p)


# ---- NS-ES meta-population -------------------------------------------------------------------
def pick_agent(novelties, rng: np.random.Generator) -> int:
    """NS-ES (Conti et al.): the meta-population member to update, with probability proportional to
    its novelty (uniform when all are 0); an agent of novelty 0 is never picked when others are > 0."""
    nov = np.asarray(novelties, np.float64).ravel()
    if nov.size == 0 or not np.isfinite(nov).all() or (nov < 0).any():
        raise ValueError(f"pick_agent: need finite novelties >= 0, got {nov}")
    total = nov.sum()
    if total == 0.0:
        return int(rng.integers(nov.size))
    return int(rng.choice(nov.size, p=nov / total))  # inverse CDF: zero-probability entries never win


# ---- NSR-ES / NSRA-ES -------------------------------------------------------------------------
def mix_ranks(reward, novelty, w: float) -> np.ndarray:
    """(n,) float32 = w * centered_ranks(reward) + (1 - w) * centered_ranks(novelty).

    NSR-ES uses w = 0.5; NSRA-ES adapts w (NSRAWeight); w = 1 is plain ES, w = 0 is NS-ES.
    """
    r, nv = np.asarray(reward).ravel(), np.asarray(novelty).ravel()
    if r.size != nv.size:
        raise ValueError(f"mix_ranks: {r.size} rewards and {nv.size} novelties")
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"mix_ranks: w must be in [0, 1], got {w}")
    return np.float32(w) * centered_ranks(r) + np.float32(1.0 - w) * centered_ranks(nv)


class NSRAWeight:
    """NSRA-ES's reward weight w (Conti et al.): starts at w (theirs: 1, all reward); after `patience`
    generations in a row without a new best reward it moves `delta` toward novelty (w -= delta),
    and each new best reward moves it `delta` back (w += delta); w stays in [0, 1].

    `update(score)` takes the reward of the agent updated this generation; a NaN never improves.
    """

    def __init__(self, w: float, delta: float, patience: int):
        self.w, self.delta, self.patience = float(w), float(delta), int(patience)
        self.best = -np.inf  # best reward seen
        self.stalled = 0  # generations since the last new best (or the last move toward novelty)

    def update(self, score: float) -> float:
        """Adapt w to this generation's reward; returns the new w."""
        if score > self.best:
            self.best = float(score)
            self.stalled = 0
            self.w += self.delta
        else:
            self.stalled += 1
            if self.stalled >= self.patience:
                self.stalled = 0
                self.w -= self.delta
        self.w = min(1.0, max(0.0, round(self.w, 12)))  # round: 20 steps of 0.05 land on 0 exactly
        return self.w

    def state(self) -> dict:
        return {
            "nsra_w": np.float64(self.w),
            "nsra_best": np.float64(self.best),
            "nsra_stalled": np.int64(self.stalled),
        }

    def load_state(self, st: dict) -> None:
        self.w = float(st["nsra_w"])
        self.best = float(st["nsra_best"])
        self.stalled = int(st["nsra_stalled"])
