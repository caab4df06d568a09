"""The forward pass: `reference` (NumPy, the truth) and `cpu` (Numba), one signature for both.

forward(spec, weights, rows_ind, obs) -> (actions, logits): weights (n_individuals, n_params)
float32, rows_ind (rows,) int64 (each row's individual), obs (rows, C, H, W) uint8; actions
(rows,) int64 are the first argmax of logits (rows, n_actions) float32.
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
