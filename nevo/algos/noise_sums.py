"""ES's gradient sums over the shared noise table (nevo.algos.es, nevo.studies.grad_corr): the
weighted sum of perturbations read straight from the table, numba-parallel over blocks of
parameters, its limited-perturbation variant over buckets, and the plain NumPy twin."""

from __future__ import annotations

import numba
import numpy as np

_BLOCK = 4096  # parameters per work item of weighted_noise_sum: 16 KB of accumulators, in L1


@numba.njit(parallel=True, nogil=True, cache=True)
def weighted_noise_sum(out, coeffs, offsets, table):
    """out (P,) float32 = sum_k coeffs[k] * table[offsets[k] : offsets[k] + P].

    Threads map to blocks of _BLOCK parameters; each block sums the perturbations in the order
    k = 0, 1, ... (float32 accumulators), so the result does not depend on the thread count.
    speed: memory bound (every perturbation's slice is read once); a block's accumulators stay
    in L1 while the slices stream past, and two perturbations are added per pass.
    """
    p, n = out.shape[0], coeffs.shape[0]
    n_blocks = (p + _BLOCK - 1) // _BLOCK
    for b in numba.prange(n_blocks):
        lo = b * _BLOCK
        hi = min(lo + _BLOCK, p)
        acc = out[lo:hi]
        acc[:] = 0.0
        k = 0
        while k + 2 <= n:
            c0, c1 = coeffs[k], coeffs[k + 1]
            t0 = table[offsets[k] + lo : offsets[k] + hi]
            t1 = table[offsets[k + 1] + lo : offsets[k + 1] + hi]
            for j in range(hi - lo):
                acc[j] = acc[j] + c0 * t0[j] + c1 * t1[j]
            k += 2
        if k < n:
            c0 = coeffs[k]
            t0 = table[offsets[k] + lo : offsets[k] + hi]
            for j in range(hi - lo):
                acc[j] += c0 * t0[j]


@numba.njit(nogil=True, cache=True)
def bucketed_noise_sum(out, coeffs, offsets, table, lo, hi):
    """out (P,) float32 = sum_k coeffs[k] * eps_k restricted to [lo[k], hi[k]) (limited-perturbation
    ES): each perturbation adds only its bucket's slice, in the order k = 0, 1, ... (speed: a
    perturbation costs its bucket, not P: Zhang et al.'s update is that much cheaper to aggregate)."""
    out[:] = 0.0
    for k in range(coeffs.shape[0]):
        c, o = coeffs[k], offsets[k]
        dst, eps = out[lo[k] : hi[k]], table[o + lo[k] : o + hi[k]]  # speed: 1-D views vectorise
        for j in range(hi[k] - lo[k]):
            dst[j] += c * eps[j]


def bucket_edges(n_params: int, size: int) -> np.ndarray:
    """(B + 1,) int64 edges of B contiguous buckets of at most `size` parameters, as even as can be."""
    n = -(-n_params // size)
    return np.round(np.linspace(0, n_params, n + 1)).astype(np.int64)


def weighted_noise_sum_reference(coeffs, offsets, table, n_params) -> np.ndarray:
    """The plain NumPy twin of weighted_noise_sum, in float64."""
    out = np.zeros(n_params, np.float64)
    for c, o in zip(coeffs, offsets):
        out += float(c) * table[o : o + n_params]
    return out
