"""Safe mutations where the weights are built: each parent's sensitivity, its children's float32
rows, and the exact rebuild of a genome (Lehman et al. 2018, "Safe Mutations for Deep and
Recurrent Neural Networks through Output Gradients", arXiv 1712.06563).

A child of parent theta (float32) with seed s is, for delta = sigma * eps(s) (the noise table's
slice, as a Gaussian child's):
    sm-g-sum, sm-g-abs   theta + clip(delta / s_theta)      s_theta: the parent's, once per parent
    sm-g-so              theta + clip(delta / s(delta))     per child (a Hessian-vector product)
    sm-r                 theta + clip(alpha * delta)        alpha: SM-R's line search, per child
with the operators of nevo.genomes.safe_mutation, measured on the parent's experiences (the observations
of its first training episode, nevo.episodes.experiences), clip to +-10 per weight, and the sum rounded
to float32 once (`safe_rows`). A parent without experiences has Gaussian children.

Exact genomes. A seed list no longer says the weights alone: each mutation also depends on its
parent's experiences. Our choice: the run folder keeps the experiences of every genome that is an
ancestor of a living one (nevo.runs, experiences/), written when the genome first becomes a
parent, and a rebuild reads them. The other way, replaying the parent's training episode,
would need every device's forward pass to pick the same actions bit for bit (a GPU's sums, in
another order, can tip an argmax and with it the whole episode). What a rebuild computes is then
the same on any machine: the sensitivities come from nevo.nets.kernels.grad_cpu's fixed-order float64
kernels (the same whatever the thread count), rounded to float32, so that an ulp of float64 from
another CPU's exp (the softmax) almost never changes them; alpha is dyadic (doubling from 1,
then bisection), exact in float64; each child element is one fixed sequence of IEEE operations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba
import numpy as np

from nevo.genomes import safe_mutation as sm
from nevo.genomes.noise import NoiseSource, offsets_of
from nevo.genomes.operators import NAMES, Mutation
from nevo.nets import require_relu

# Row-building work is split in this many pieces per row (as nevo.genomes.noise.build_rows).
_PIECES = 16


@numba.njit(parallel=True, nogil=True, cache=True)
def safe_rows(out, base, base_idx, offsets, scale, alpha, sens, sens_idx, table, clip):
    """out[i] = float32(base[b] + clip(alpha[i] * (scale[i] * eps) / sens[r], +-clip)) with
    b = base_idx[i], r = sens_idx[i] (r < 0: no division), eps = table[offsets[i]:], all in
    float64 (threads map to (row, piece of the row)); the same bits whatever the thread count."""
    n, p = out.shape
    for k in numba.prange(n * _PIECES):
        i = k // _PIECES
        lo = (k % _PIECES) * p // _PIECES
        hi = (k % _PIECES + 1) * p // _PIECES
        b, o, r = base_idx[i], offsets[i], sens_idx[i]
        sg, a = np.float64(scale[i]), alpha[i]
        # speed: 1-D views indexed by range() alone (as nevo.genomes.noise.build_rows)
        dst, src, eps = out[i, lo:hi], base[b, lo:hi], table[o + lo : o + hi]
        div = sens[r, lo:hi] if r >= 0 else src  # src: a stand-in of the same type, never read
        for j in range(hi - lo):
            d = a * (sg * np.float64(eps[j]))
            if r >= 0:
                d = d / np.float64(div[j])
            if d > clip:
                d = clip
            elif d < -clip:
                d = -clip
            dst[j] = np.float32(np.float64(src[j]) + d)


def rows_twin(base, base_idx, offsets, scale, alpha, sens, sens_idx, table, clip):
    """safe_rows in NumPy, the reference twin: (n, P) float32."""
    p = base.shape[1]
    eps = np.stack([table[o : o + p] for o in offsets]).astype(np.float64)
    d = np.asarray(alpha, np.float64)[:, None] * (
        np.asarray(scale, np.float32).astype(np.float64)[:, None] * eps
    )
    div = np.ones_like(d)
    has = np.asarray(sens_idx) >= 0
    div[has] = sens[np.asarray(sens_idx)[has]].astype(np.float64)
    d = np.clip(d / np.where(has[:, None], div, 1.0), -clip, clip)
    return (base[base_idx].astype(np.float64) + d).astype(np.float32)


@dataclass
class Parent:
    """What a parent's children need: its weights, its trace (SM-R, SM-G-SO) or its rule-applied
    sensitivity s (SM-G-SUM, SM-G-ABS), on its experiences."""

    theta: np.ndarray  # (P,) float32
    trace: sm.Trace | None  # None: no experiences (Gaussian children), or not needed
    sens: np.ndarray | None  # (P,) float32 s after the SM-G rule (floor 0.01), or None


def parent(kind: str, spec, theta, experiences) -> Parent:
    """The Parent of theta (P,) float32 measured on experiences (T, *obs) (T may be 0)."""
    theta = np.asarray(theta, np.float32)
    if experiences is None or len(experiences) == 0:
        return Parent(theta, None, None)
    tr = sm.trace(spec, theta, experiences, backend="numba")
    if kind in ("sm-g-sum", "sm-g-abs"):
        return Parent(theta, None, sm.scaling(sm.sensitivity(kind, tr)).astype(np.float32))
    return Parent(theta, tr, None)


def stacked(kind: str, parents: list, bases=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(K, P) float32 the parents' weights (bases, when the caller has them as one array), and
    for SM-G-SUM and SM-G-ABS their (K, P) s (ones for a parent without experiences), else None."""
    bases = np.stack([q.theta for q in parents]) if bases is None else bases
    if kind not in ("sm-g-sum", "sm-g-abs"):
        return bases, None
    if not parents:  # generation 0: fresh networks only
        return bases, np.zeros_like(bases)
    return bases, np.stack(
        [q.sens if q.sens is not None else np.ones(len(q.theta), np.float32) for q in parents]
    )


def children(kind: str, parents: list, out, base_idx, offsets, scale, table, target: float,
             stack: tuple | None = None) -> None:  # fmt: skip
    """Write out (n, P) float32: child i of parents[base_idx[i]] with noise offset offsets[i]
    and mutation power scale[i]; target: SM-R's divergence; stack: `stacked(kind, parents)`,
    when the caller keeps it for many calls."""
    n, p = out.shape
    base_idx = np.asarray(base_idx, np.int64)
    alpha = np.ones(n)
    sens_idx = np.full(n, -1, np.int64)
    bases, sens = stack if stack is not None else stacked(kind, parents)
    if sens is not None:  # SM-G-SUM, SM-G-ABS: the parent's s
        sens_idx = base_idx.copy()
    else:
        sens = np.zeros((0, p), np.float32)
    if kind in ("sm-r", "sm-g-so"):
        rows = []
        for i in range(n):
            q = parents[base_idx[i]]
            if q.trace is None:
                continue
            delta = np.float64(np.float32(scale[i])) * table[offsets[i] : offsets[i] + p].astype(np.float64)
            theta = q.theta.astype(np.float64)
            if kind == "sm-r":
                alpha[i] = sm.line_search(q.trace, theta, delta, target)
            else:
                sens_idx[i] = len(rows)
                rows.append(sm.scaling(sm.sensitivity(kind, q.trace, delta)).astype(np.float32))
        if rows:
            sens = np.stack(rows)
    elif kind not in ("sm-g-sum", "sm-g-abs", "gaussian"):
        raise ValueError(f"unknown mutation {kind!r}; allowed: {', '.join(NAMES)}")
    safe_rows(out, bases, base_idx, np.asarray(offsets, np.int64), np.asarray(scale, np.float32), alpha,
              sens, sens_idx, table, sm.WEIGHT_CLIP)  # fmt: skip


class SafeMutation:
    """The WeightBuilder's safe mutations: the population's parents, prepared once per use, and
    the experiences of every genome seen (experiences_of(genome) answers for the others: the
    run folder's, after a resume or in a replay)."""

    def __init__(self, spec, table: np.ndarray, experiences_of=None):
        require_relu(spec, "safe mutations")
        self.spec = spec
        self.table = table  # (size,) float32 the noise table
        self.experiences_of = experiences_of  # genome (int64 seeds) -> (T, *obs); None: only those given
        self.mutation_s = 0.0  # time spent on sensitivities, line searches and safe children, in all
        # genome bytes -> its experiences, for the bases of the last two populations prepared
        self._seen: list[dict[bytes, np.ndarray]] = [{}, {}]
        self._parents: list[Parent] = []

    def experiences(self, genome) -> np.ndarray:
        key = np.asarray(genome, np.int64).tobytes()
        for seen in self._seen:
            if key in seen:
                return seen[key]
        if self.experiences_of is None:
            raise KeyError(f"no experiences for the genome {list(np.asarray(genome))}")
        return self.experiences_of(np.asarray(genome, np.int64))

    def prepare(self, pop, bases: np.ndarray) -> None:
        """Parents of pop (its bases' weights (K, P) float32): sensitivities once per parent."""
        t0 = time.monotonic()
        genomes = pop.bases if isinstance(pop.bases, list) else None
        if pop.experiences is not None and genomes is not None:
            mine = {np.asarray(g, np.int64).tobytes(): e for g, e in zip(genomes, pop.experiences)}
            self._seen = [self._seen[1], mine]  # bounded: older ones are the run folder's
        exps = pop.experiences or [None] * len(bases)
        self._parents = [parent(pop.mutation.name, self.spec, b, e) for b, e in zip(bases, exps)]
        self._stack = stacked(pop.mutation.name, self._parents, bases)  # once, for every build of pop
        self.mutation_s += time.monotonic() - t0

    def build(self, pop, rows, out, offsets) -> None:
        """Overwrite out's rows that are children (base >= 0, seed >= 0) of pop's rows `rows`."""
        t0 = time.monotonic()
        base, seed = pop.base[rows], pop.seed[rows]
        child = np.flatnonzero((base >= 0) & (seed >= 0))
        if child.size:
            made = np.empty((child.size, out.shape[1]), np.float32)
            kind, scale = pop.mutation.name, pop.scale[rows][child]
            children(kind, self._parents, made, base[child], offsets[child], scale, self.table, pop.sigma,
                     self._stack)  # fmt: skip
            out[child] = made
        self.mutation_s += time.monotonic() - t0

    def child_of(self, kind: str, theta, genome, sigma: float, out) -> None:
        """out (P,) = the child genome[-1] of theta, the weights of genome[:-1]."""
        t0 = time.monotonic()
        q = parent(kind, self.spec, theta, self.experiences(genome[:-1]))
        offs = offsets_of(genome[-1:], self.table.size, out.size)
        children(kind, [q], out.reshape(1, -1), [0], offs, np.array([sigma], np.float32), self.table, sigma)
        self.mutation_s += time.monotonic() - t0

    def rebuild(self, kind: str, genome, sigma: float, init_scale, out) -> np.ndarray:
        """out (P,) float32 = the weights of genome under `kind`, step by step from its first seed."""
        genome = np.asarray(genome, np.int64)
        NoiseSource(self.table, init_scale, sigma).rebuild(genome[:1], out=out)
        for j in range(2, len(genome) + 1):
            self.child_of(kind, out.copy(), genome[:j], sigma, out)
        return out


def rebuild(op: Mutation, spec, genome, table, init_scale, sigma: float, experiences_of) -> np.ndarray:
    """(P,) float32 weights of a genome whose mutations are `op`'s (a Gaussian genome: as
    NoiseSource.rebuild); experiences_of(prefix genome) -> its experiences (the run folder's)."""
    if not op.safe:
        return NoiseSource(table, init_scale, sigma).rebuild(genome).copy()
    safe = SafeMutation(spec, table, experiences_of)
    return safe.rebuild(op.name, genome, sigma, init_scale, np.empty(spec.n_params, np.float32))
