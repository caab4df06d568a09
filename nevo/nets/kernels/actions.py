"""What a net's outputs choose, the same for every forward backend (reference, cpu, cuda).

This module imports nothing of nevo's, so that the backends and the package can all use it.
"""

import numpy as np


def actions_of(spec, greedy, logits):
    """A forward's actions: the argmax it computed (rows,) int64, or for NetSpec.action "tanh"
    the action vectors tanh(logits) (rows, n_actions) float32, in [-1, 1], or for "bins" the
    action vectors (rows, n_actions / BINS) float32 whose component j is -1 + 2k/(BINS - 1), k
    the first largest of outputs j*BINS .. j*BINS + BINS - 1. (Why tanh: the
    action stays inside its box however far a mutation moves the output layer, without a clip
    that would flatten every perturbation past a bound.)"""
    if spec.action == "tanh":
        return np.tanh(logits).astype(np.float32)
    if spec.action == "bins":  # each component: the first largest of its outputs, as a value in [-1, 1]
        bins = logits.shape[1] // spec.action_dims if spec.action_dims else 1
        k = np.argmax(logits.reshape(len(logits), spec.action_dims, bins), axis=2)
        return (-1.0 + 2.0 * k / (bins - 1)).astype(np.float32)
    return greedy
