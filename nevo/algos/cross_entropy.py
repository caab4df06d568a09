"""The gradient of a net's mean cross-entropy on a labelled batch, by back-propagation through the
same trace and vector-Jacobian product that safe mutations use (nevo.genomes.safe_mutation):
the SGD baseline's step (nevo.algos.sgd) and the true gradient that ES's estimate is compared
with (nevo.algos.gradient_correlation), after Zhang, Clune & Stanley 2017."""

from __future__ import annotations

import numpy as np

from nevo.genomes.safe_mutation import trace, vjp


def loss_gradient(spec, theta, x, y) -> tuple[np.ndarray, float, float]:
    """(gradient (P,) float64 of the mean cross-entropy of the batch, that loss, the accuracy) of
    theta (P,) on images x (B, C, H, W) with labels y (B,)."""
    tr = trace(spec, theta, x, backend="numba")
    y = np.asarray(y, np.int64)
    b = len(y)
    cot = tr.probs.copy()
    cot[np.arange(b), y] -= 1.0  # d(cross-entropy)/d(logits) = softmax - one-hot
    loss = -float(np.mean(np.log(np.maximum(tr.probs[np.arange(b), y], 1e-300))))
    accuracy = float(np.mean(np.argmax(tr.logits, axis=1) == y))
    return vjp(tr, cot / b), loss, accuracy
