"""The forward pass: `reference` (NumPy, the truth) and `cpu` (Numba), one signature for both.

forward(spec, weights, rows_ind, obs) -> (actions, logits): weights (n_individuals, n_params)
float32, rows_ind (rows,) int64 (each row's individual), obs (rows, C, H, W) uint8; actions
(rows,) int64 are the first argmax of logits (rows, n_actions) float32.

The evaluator does not call a forward function directly but a *policy*: `load(weights)` once
per evaluation (a GPU backend copies the weights to the device there, once, never per step),
then `policy(rows_ind, obs) -> actions` every step, then `release()`.
"""

BACKENDS = ("reference", "cpu")


def get_forward(backend):
    """The forward function of a backend by name ("reference" or "cpu")."""
    if backend == "reference":
        from nevo.kernels.reference import forward
    elif backend == "cpu":
        from nevo.kernels.cpu import forward
    else:
        raise ValueError(f"unknown backend {backend!r}; valid: {list(BACKENDS)}")
    return forward


class HostPolicy:
    """A policy whose weights stay in host memory (the NumPy and Numba CPU backends)."""

    def __init__(self, spec, forward):
        self.spec = spec
        self.forward = forward
        self.weights = None

    def load(self, weights):
        """Use these (n_individuals, n_params) float32 weights until the next load."""
        self.weights = weights

    def __call__(self, rows_ind, obs):
        """(rows,) int64 greedy actions of rows_ind's individuals on obs (rows, C, H, W) uint8."""
        return self.forward(self.spec, self.weights, rows_ind, obs)[0]

    def release(self):
        self.weights = None


def make_policy(device, spec):
    """The policy of a backend by name: "cpu" (Numba) or "reference" (NumPy)."""
    return HostPolicy(spec, get_forward(device))
