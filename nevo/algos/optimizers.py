"""The optimizers that step a theta along a gradient estimate, as the reference's optimizers.py:
Adam and SGD with momentum (--optimizer adam, sgd), chosen once from the settings
(`make_optimizer`); the plain arrays a stepped theta is checkpointed as (`theta_state`,
`load_theta_state`); and the norm its steps are logged by (`vector_norm`).

OpenAI-ES (nevo.algos.es) and the SGD baseline (nevo.algos.sgd) step their theta with them alike.
"""

from __future__ import annotations

import numba
import numpy as np


class Adam:
    """Adam (Kingma & Ba), as the reference's optimizers.py: step = -a * m / (sqrt(v) + eps)."""

    def __init__(self, n: int, lr: float, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = np.zeros(n, np.float32)
        self.v = np.zeros(n, np.float32)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        """The step to add to theta for this gradient of the loss (descend grad)."""
        self.t += 1
        a = self.lr * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        self.m *= np.float32(self.beta1)
        self.m += np.float32(1 - self.beta1) * grad
        self.v *= np.float32(self.beta2)
        self.v += np.float32(1 - self.beta2) * grad * grad
        return (np.float32(-a) * self.m / (np.sqrt(self.v) + np.float32(self.eps))).astype(np.float32)


class Momentum:
    """The optimizer "sgd" (not the SGD algorithm, nevo.algos.sgd): SGD with momentum, as the
    reference's: v = mu * v + (1 - mu) * g; step = -lr * v."""

    def __init__(self, n: int, lr: float, momentum: float):
        self.lr, self.momentum = lr, momentum
        self.m = np.zeros(n, np.float32)
        self.v = np.zeros(0, np.float32)  # (Adam's second moment; unused, kept for one state shape)
        self.t = 0

    def step(self, grad: np.ndarray) -> np.ndarray:
        self.t += 1
        self.m *= np.float32(self.momentum)
        self.m += np.float32(1 - self.momentum) * grad
        return np.float32(-self.lr) * self.m


def make_optimizer(es_cfg, n: int):
    """The optimizer es_cfg.optimizer names (ES's settings or SGD's), for n parameters."""
    if es_cfg.optimizer == "adam":
        return Adam(n, es_cfg.lr)
    if es_cfg.optimizer == "sgd":
        return Momentum(n, es_cfg.lr, es_cfg.momentum)
    raise ValueError(f"--optimizer: got {es_cfg.optimizer!r}, allowed: adam, sgd")


def theta_state(generation: int, theta, opt, score: float) -> dict:
    """The plain arrays of a theta stepped by an optimizer (ES's, and SGD's in nevo.algos.sgd)."""
    return {
        "generation": np.int64(generation),
        "theta": theta,
        "opt_m": opt.m,
        "opt_v": opt.v,
        "opt_t": np.int64(opt.t),
        "theta_score": np.float64(score),
    }


def load_theta_state(st: dict, opt) -> tuple[int, np.ndarray, float]:
    """(generation, theta, score) of theta_state's arrays; the optimizer's moments restored in opt."""
    opt.m, opt.v = np.array(st["opt_m"], np.float32), np.array(st["opt_v"], np.float32)
    opt.t = int(st["opt_t"])
    return int(st["generation"]), np.array(st["theta"], np.float32), float(st["theta_score"])


@numba.njit(nogil=True, cache=True)
def vector_norm(x) -> float:
    """The Euclidean norm of a float32 vector, summed in float64 in index order: the same number on
    every CPU (np.linalg.norm's BLAS sums in an order that depends on the CPU's kernels, and its
    last bits differed between two machines)."""
    acc = 0.0
    for i in range(x.size):
        v = np.float64(x[i])
        acc += v * v
    return np.sqrt(acc)
