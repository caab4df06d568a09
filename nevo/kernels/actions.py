"""What a net's outputs choose, the same for every forward backend (reference, cpu, cuda).

This module imports nothing of nevo's, so that the backends and the package can all use it.
"""

import numpy as np


def actions_of(spec, greedy, logits):
    """A forward's actions: the argmax it computed (rows,) int64, or for NetSpec.action "tanh"
    the action vectors tanh(logits) (rows, n_actions) float32, in [-1, 1]. (Why tanh: the
    action stays inside its box however far a mutation moves the output layer, without a clip
    that would flatten every perturbation past a bound.)"""
    if spec.action == "tanh":
        return np.tanh(logits).astype(np.float32)
    return greedy
