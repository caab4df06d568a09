"""The optimizers that step a theta along a gradient estimate, as the reference's optimizers.py:
Adam and SGD with momentum (--optimizer adam, sgd), chosen once from the settings
(`make_optimizer`); what a stepped theta holds, logs and is checkpointed as (`SteppedTheta`);
and the norm its steps are logged by (`vector_norm`).

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


class SteppedTheta:
    """What OpenAI-ES and the SGD baseline share, written once: a theta (P,) float32 stepped by an
    optimizer (`opt`), the steps done (`generation`: ES's generations, SGD's iterations), theta's
    last score (`elite_score`: ES's validation mean, SGD's test-set score), the last step's sizes
    (`grad_norm`, `step_norm`), its checkpoint arrays; theta is the run's elite, and no other
    elite is kept."""

    best_elite = None

    @property
    def elite(self) -> np.ndarray:
        """(P,) float32: theta itself."""
        return self.theta

    def step_metrics(self, prefix: str) -> dict:
        """The last step's sizes and theta's norm, as PREFIX/grad_norm, step_norm and theta_norm."""
        return {
            f"{prefix}/grad_norm": self.grad_norm,
            f"{prefix}/step_norm": self.step_norm,
            f"{prefix}/theta_norm": float(vector_norm(self.theta)),
        }

    def state(self) -> dict:
        """The plain arrays of theta, the optimizer's moments, the steps done and the score
        (the score's key, theta_score, as checkpoints have always named it)."""
        opt = self.opt
        return {
            "generation": np.int64(self.generation),
            "theta": self.theta,
            "opt_m": opt.m,
            "opt_v": opt.v,
            "opt_t": np.int64(opt.t),
            "theta_score": np.float64(self.elite_score),
        }

    def load_state(self, st: dict) -> None:
        """state()'s arrays back, the optimizer's moments included."""
        self.opt.m, self.opt.v = np.array(st["opt_m"], np.float32), np.array(st["opt_v"], np.float32)
        self.opt.t = int(st["opt_t"])
        self.generation, self.theta = int(st["generation"]), np.array(st["theta"], np.float32)
        self.elite_score = float(st["theta_score"])


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
