"""The shared noise table, seed-list genomes, mutation and reconstruction.

Compact encoding of Such et al. 2017 (arXiv 1712.06567): an individual is its list of seeds
(init seed, mutation seed 1, mutation seed 2, ...) and its weights are
    theta = init_scale * eps(s0) + sigma * eps(s1) + sigma * eps(s2) + ...
where eps(s) is the slice of one shared table of N(0,1) float32 numbers that starts at an
offset derived from s. The table is rebuilt from (size, noise seed) on any machine, so a
genome of a few integers is the whole network.

Every weight row is written by one kernel, `build_rows`, whether it is a fresh network, a
copy or a mutated child; reconstruction from a seed list applies the same kernel seed by
seed, so the cached incremental path and a rebuild give bit-identical float32 weights,
whatever the thread count (each element's arithmetic has a fixed order).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from nevo.machine import cores
from nevo.nets.half import round_rows

# Fixed chunking: the table's content depends on (size, seed) only, never on thread count.
TABLE_CHUNKS = 64
# 16-bit weights (--weights fp16): rows are built in float32 this many at a time, then rounded
ROUND_ROWS = 16
# Seeds are drawn from [0, SEED_LIMIT): genomes fit in int64 arrays and JSON.
SEED_LIMIT = 2**31


def make_table(size: int, seed: int, threads: int = 0) -> np.ndarray:
    """(size,) float32 N(0,1), filled in fixed chunks by a thread pool (numpy frees the GIL)."""
    table = np.empty(size, dtype=np.float32)
    bounds = np.linspace(0, size, TABLE_CHUNKS + 1).astype(np.int64)
    streams = np.random.SeedSequence(seed).spawn(TABLE_CHUNKS)

    def fill(c: int) -> None:
        rng = np.random.Generator(np.random.PCG64(streams[c]))
        rng.standard_normal(dtype=np.float32, out=table[bounds[c] : bounds[c + 1]])

    workers = threads or min(TABLE_CHUNKS, cores())
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(fill, range(TABLE_CHUNKS)))
    return table


@numba.njit(cache=True)
def splitmix64(x):
    """A well-mixed 64-bit hash of x (Steele et al.'s SplitMix64 finaliser)."""
    z = np.uint64(x) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True)
def offset_of(seed, table_size, n_params):
    """Start of seed's slice in the table: uniform over every full-length slice."""
    return np.int64(splitmix64(seed) % np.uint64(table_size - n_params + 1))


def offsets_of(seeds, table_size: int, n_params: int) -> np.ndarray:
    """(n,) int64 offsets of (n,) seeds."""
    return np.array([offset_of(int(s), table_size, n_params) for s in seeds], dtype=np.int64)


# Row-building work is split in this many pieces per row so that 2..16 cores stay busy
# even when only one row is built (reconstruction).
_PIECES = 16


@numba.njit(parallel=True, nogil=True, cache=True)
def build_rows(out, base, base_idx, offsets, init_scale, scale, table):
    """Write each out row i (threads map to (row, piece of the row)):
    base_idx[i] < 0            -> fresh network: init_scale * eps(offsets[i])
    offsets[i] < 0             -> copy of base[base_idx[i]]
    otherwise                  -> child: base[base_idx[i]] + scale[i] * eps(offsets[i])
    scale (n,) float32: sigma for a GA child, +-sigma for a mirrored ES pair.
    out may alias base (in-place mutation of a row by itself)."""
    n, p = out.shape
    for k in numba.prange(n * _PIECES):
        i = k // _PIECES
        lo = (k % _PIECES) * p // _PIECES
        hi = (k % _PIECES + 1) * p // _PIECES
        b = base_idx[i]
        o = offsets[i]
        sig = scale[i]
        # speed: 1-D views indexed by range() alone vectorise; out[i, j] and table[o + j] did not
        # (Numba checks an index of unknown sign for wraparound): one large row, one thread, on the
        # 2-core Zen 5 VM, 7.2 ms before, 0.9 after. The same sums (no fastmath), bit for bit.
        dst = out[i, lo:hi]
        if b < 0:
            scales, eps = init_scale[lo:hi], table[o + lo : o + hi]
            for j in range(hi - lo):
                dst[j] = scales[j] * eps[j]
        elif o < 0:
            src = base[b, lo:hi]
            for j in range(hi - lo):
                dst[j] = src[j]
        else:
            src, eps = base[b, lo:hi], table[o + lo : o + hi]
            for j in range(hi - lo):
                dst[j] = src[j] + sig * eps[j]


@numba.njit(parallel=True, nogil=True, cache=True)
def keep_outside(out, bases, base_idx, bucket):
    """out (n, P) float32, in place: outside row i's bucket [bucket[i, 0], bucket[i, 1]) the values
    of its base row bases[base_idx[i]] (a row built with its noise everywhere keeps it only inside).
    Threads map to rows."""
    p = out.shape[1]
    for i in numba.prange(out.shape[0]):
        lo, hi, b = bucket[i, 0], bucket[i, 1], base_idx[i]
        dst, src = out[i], bases[b]  # speed: 1-D views vectorise (build_rows)
        for j in range(lo):
            dst[j] = src[j]
        for j in range(hi, p):
            dst[j] = src[j]


class NoiseSource:
    """The table plus what a genome needs to become weights: parameter count, init scale, sigma."""

    def __init__(self, table: np.ndarray, init_scale: np.ndarray, sigma: float):
        if table.size < init_scale.size:
            raise ValueError(
                f"noise table of {table.size:,} numbers is smaller than the net ({init_scale.size:,})"
            )
        self.table = table
        self.init_scale = np.ascontiguousarray(init_scale, dtype=np.float32)
        self.sigma = float(sigma)
        self.n_params = init_scale.size

    def offsets(self, seeds) -> np.ndarray:
        return offsets_of(seeds, self.table.size, self.n_params)

    def build(self, out, base, base_idx, seeds) -> None:
        """Fill out (rows, P): base_idx -1 = fresh from seed, seed -1 = copy, else mutate."""
        seeds = np.asarray(seeds, dtype=np.int64)
        offs = np.where(seeds >= 0, self.offsets(np.maximum(seeds, 0)), -1).astype(np.int64)
        scale = np.full(len(offs), self.sigma, np.float32)
        build_rows(out, base, np.asarray(base_idx, dtype=np.int64), offs, self.init_scale, scale, self.table)

    def rebuild(self, genome, out=None) -> np.ndarray:
        """(P,) float32 weights of a seed list, applying the seeds one by one."""
        genome = np.asarray(genome, dtype=np.int64)
        w = np.empty((1, self.n_params), np.float32) if out is None else out.reshape(1, -1)
        self.build(w, w, [-1], genome[:1])
        for s in genome[1:]:
            self.build(w, w, [0], [s])
        return w[0]

    def rebuild_many(self, genomes) -> np.ndarray:
        """(len(genomes), P) float32 weights of several seed lists."""
        out = np.empty((len(genomes), self.n_params), np.float32)
        for i, g in enumerate(genomes):
            self.rebuild(g, out[i])
        return out


class WeightBuilder:
    """Builds the weights of a Population's rows where they are used (an evaluator, a worker).

    `use(population)` readies its bases: a genome is taken from the bases of the last two
    populations used, or built in one pass from its parent's weights there (a GA parent is a
    child, or a copy, of last generation's), or else rebuilt seed by seed (after a resume).
    `build(rows, out)` then writes rows' weights in one `build_rows` pass, bit-identical to a
    rebuild from their seed lists. With `safe` (nevo.genomes.safe_build) and a population whose operator
    is a safe mutation, `use` also measures each base's sensitivity, once, and `build` makes the
    children with it. `fold(rows, population)`, when given, changes built rows in place (virtual
    batch norm, or the population's frozen observation statistics, folded into the weights).
    `dtype` is what the forward reads (--weights): float32, or float16, each row built in float32
    as always, then rounded once (nevo.nets.half).
    """

    def __init__(self, table: np.ndarray | None, init_scale: np.ndarray, fold=None, safe=None,
                 dtype=np.float32):  # fmt: skip
        # table None: only copies of weights given as they are (a replay of ES's theta)
        self.table = table if table is not None else np.zeros(0, np.float32)
        self.init_scale = np.ascontiguousarray(init_scale, dtype=np.float32)
        self.n_params = self.init_scale.size
        self.fold = fold  # fold(weights (n, P) float32, population) -> None, in place
        # nevo.genomes.safe_build.SafeMutation: builds the children of populations whose operator is a
        # safe mutation (None: Gaussian children only)
        self.safe = safe
        self._known: list[dict[bytes, np.ndarray]] = [{}, {}]  # genome bytes -> (P,): last two uses
        self._pop = None
        self._bases = np.zeros((0, self.n_params), np.float32)  # (K, P) of the population in use
        self._offsets = np.zeros(0, np.int64)
        self.dtype = np.dtype(dtype)  # of the rows `build` writes
        self._wide = np.zeros((0, self.n_params), np.float32)  # float32 rows before rounding (fp16)

    def use(self, pop) -> None:
        """Make pop the population whose rows `build` builds."""
        seeds = np.asarray(pop.seed, np.int64)
        self._offsets = np.full(seeds.size, -1, np.int64)
        noisy = seeds >= 0
        self._offsets[noisy] = offsets_of(seeds[noisy], self.table.size, self.n_params)
        same_bases = self._pop is not None and pop.bases is self._pop.bases  # e.g. validation rows
        self._pop = pop
        if same_bases:
            return
        if isinstance(pop.bases, np.ndarray):  # weights as they are
            self._bases = np.ascontiguousarray(pop.bases, dtype=np.float32).reshape(-1, self.n_params)
            return
        safe = self._safe_for(pop)
        source = NoiseSource(self.table, self.init_scale, pop.sigma)
        bases = np.empty((len(pop.bases), self.n_params), np.float32)
        known = {**self._known[0], **self._known[1]}
        genomes = [np.asarray(g, np.int64) for g in pop.bases]
        keys = [g.tobytes() for g in genomes]
        for k, (g, key) in enumerate(zip(genomes, keys)):
            parent = known.get(g[:-1].tobytes())
            if key in known:
                bases[k] = known[key]
            elif parent is not None and safe:  # one pass: the parent's weights and the last seed
                self.safe.child_of(pop.mutation.name, parent, g, pop.sigma, bases[k])
            elif parent is not None:
                source.build(bases[k : k + 1], parent[None], [0], g[-1:])
            elif safe:
                self.safe.rebuild(pop.mutation.name, g, pop.sigma, self.init_scale, bases[k])
            else:
                source.rebuild(g, out=bases[k])
        self._known = [self._known[1], dict(zip(keys, bases))]
        self._bases = bases
        if safe:
            self.safe.prepare(pop, bases)

    def _safe_for(self, pop) -> bool:
        """Whether pop's children are safe mutations (ValueError if this builder cannot make them)."""
        if not pop.mutation.safe:
            return False
        if self.safe is None:
            raise ValueError(f"a population with {pop.mutation} mutations needs a builder of safe mutations")
        return True

    @property
    def mutation_s(self) -> float:
        """Seconds spent on safe mutations so far (0 without them)."""
        return 0.0 if self.safe is None else self.safe.mutation_s

    @property
    def bases(self) -> np.ndarray:
        """(K, P) float32 the weights of the population in use's bases (one array per `use`)."""
        return self._bases

    def plan(self, rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(base index (n,) int64, noise offset (n,) int64 (-1: none), scale (n,) float32) of
        these rows of the population in use: `build_rows`' arguments, wherever it runs."""
        rows = np.asarray(rows, np.int64)
        pop = self._pop
        base = np.ascontiguousarray(pop.base[rows], np.int64)
        scale = np.ascontiguousarray(pop.scale[rows], np.float32)
        return base, np.ascontiguousarray(self._offsets[rows]), scale

    def build(self, rows, out: np.ndarray) -> np.ndarray:
        """out (len(rows), P) = the weights of these rows of the population in use, built in
        float32 and, for float16 rows, rounded once."""
        if out.dtype == np.float16:  # a few rows at a time: float32 scratch of ROUND_ROWS rows at most
            rows = np.asarray(rows, np.int64)
            if not len(self._wide):
                self._wide = np.empty((ROUND_ROWS, self.n_params), np.float32)
            for a in range(0, len(rows), ROUND_ROWS):
                part = rows[a : a + ROUND_ROWS]
                round_rows(self.build(part, self._wide[: len(part)]), out[a : a + len(part)])
            return out
        rows = np.asarray(rows, np.int64)
        pop = self._pop
        base, offsets, scale = self.plan(rows)
        build_rows(out, self._bases, base, offsets, self.init_scale, scale, self.table)
        if pop.bucket is not None:  # limited-perturbation ES: the noise in each row's bucket alone
            keep_outside(out, self._bases, base, np.ascontiguousarray(pop.bucket[rows], np.int64))
        if pop.mutation.safe:  # the children again, safely
            self.safe.build(pop, rows, out, offsets)
        if self.fold is not None:
            self.fold(out, pop)
        return out
