"""The forward pass: `reference` (NumPy, the truth), `cpu` (Numba) and `cuda` (numba.cuda), one signature.

forward(spec, weights, rows_ind, obs) -> (actions, logits): weights (n_individuals, n_params)
float32, rows_ind (rows,) int64 (each row's individual), obs (rows, C, H, W) of spec.obs_dtype
(uint8 pixels, or float32 vectors as (rows, n, 1, 1)); actions are the first argmax (rows,) int64
of logits (rows, n_actions) float32, or for a net with continuous actions (NetSpec.action "tanh")
tanh(logits) (rows, n_actions) float32 (`actions_of`: one place, for every backend).

The evaluator does not call a forward function directly but a *policy*: `load(weights)` once
per evaluation (a GPU backend copies the weights to the device there, once, never per step),
then `policy(rows_ind, obs) -> actions` every step (or `policy(rows_ind, obs, take)` on obs[take]),
then `release()`.
"""

import sys

from nevo.nets.kernels.actions import actions_of  # noqa: F401 (the backends' one mapping, here for users)
from nevo.nets.kernels.take import checked_take

BACKENDS = ("reference", "cpu", "cuda")
GPU_INSTALL = "pip install -r requirements-gpu.txt"  # NVVM and the CUDA runtime pieces beside the driver
NO_GPU = (
    "--device cuda: no CUDA GPU is available (numba.cuda.is_available() is False: no NVIDIA driver or "
    f"no GPU; with both, {GPU_INSTALL}); use --device cpu or auto"
)
NO_NVVM = (
    f"--device cuda: numba.cuda cannot compile kernels here (libNVVM not found): {GPU_INSTALL} "
    "(numba-cuda[cu12]; numba-cuda[cu13] with an NVIDIA driver 580 or newer)"
)

# numba-cuda 0.30 registers an overload for np.row_stack, which numpy 2.5 removed: with both, the
# first kernel compile fails (seen on a GPU image with numpy 2.5.2, docs/lab/2026-11-26.md).
NUMPY_TOO_NEW = (
    "--device cuda: numba-cuda {cuda} cannot compile kernels with numpy {numpy} (it needs numpy < 2.5, "
    "as nevo pins it): pip install 'numpy<2.5', or {install}"
)


def numpy_too_new(numpy_version: str, numba_cuda_version: str) -> str | None:
    """NUMPY_TOO_NEW filled in where this numpy breaks this numba-cuda, else None."""

    def major_minor(v):
        parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in v.split(".")[:2]]
        return tuple(parts + [0] * (2 - len(parts)))

    if major_minor(numpy_version) >= (2, 5) and major_minor(numba_cuda_version) <= (0, 30):
        return NUMPY_TOO_NEW.format(cuda=numba_cuda_version, numpy=numpy_version, install=GPU_INSTALL)
    return None


def installed_numpy_too_new() -> str | None:
    """numpy_too_new for the installed numpy and numba-cuda (None where numba-cuda has no version)."""
    from importlib.metadata import PackageNotFoundError, version

    import numpy

    try:
        return numpy_too_new(numpy.__version__, version("numba-cuda"))
    except PackageNotFoundError:
        return None


def get_forward(backend):
    """The forward function of a backend by name ("reference", "cpu" or "cuda")."""
    if backend == "reference":
        from nevo.nets.kernels.reference import forward
    elif backend == "cpu":
        from nevo.nets.kernels.cpu import forward
    elif backend == "cuda":
        from nevo.nets.kernels.cuda import forward
    else:
        raise ValueError(f"unknown backend {backend!r}; valid: {list(BACKENDS)}")
    return forward


class HostPolicy:
    """A policy whose weights stay in host memory (the NumPy and Numba CPU backends)."""

    def __init__(self, spec, forward):
        self.spec = spec
        self.forward_fn = forward  # the backend's forward(spec, weights, rows_ind, obs)
        self.weights = None

    def load(self, weights):
        """Use these (n_individuals, n_params) float32 weights until the next load."""
        self.weights = weights

    def __call__(self, rows_ind, obs, take=None):
        """The actions (see actions_of) of rows_ind's individuals on obs (rows, C, H, W) of
        spec.obs_dtype, or on obs[take] (obs: every slot's observation, take: a slot per row)."""
        if take is not None:
            obs = obs[checked_take(take, len(rows_ind), len(obs))]
        return self.forward_fn(self.spec, self.weights, rows_ind, obs)[0]

    def forward(self, rows_ind, obs):
        """(actions, logits (rows, n_actions) float32) of rows_ind's individuals on obs."""
        return self.forward_fn(self.spec, self.weights, rows_ind, obs)

    def release(self):
        self.weights = None


def resolve_device(name):
    """The backend a --device value names: "auto" is "cuda" where a GPU is present, else "cpu".

    Under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) numba.cuda.is_available() is True, but
    "auto" still picks "cpu": the simulator is for tests, only an explicit "cuda" gets it.
    Raises ValueError (one line, naming requirements-gpu.txt) for "cuda" without a GPU, without
    NVVM or with a numpy too new for numba-cuda, and for unknown names; "auto" with a GPU that
    cannot be compiled for says why on stderr and picks "cpu".
    """
    if name in ("cpu", "reference"):
        return name
    if name not in ("auto", "cuda"):
        raise ValueError(f"--device: got {name!r}, allowed: auto, cpu, cuda")
    import numba
    from numba import cuda

    available = cuda.is_available()
    if name == "auto":
        if not available or numba.config.ENABLE_CUDASIM:
            return "cpu"
        blocked = compile_blocked()
        if blocked:  # a GPU that cannot be compiled for: the CPU, and say why
            print(f"note: {blocked.replace('--device cuda: ', '')}; running on the CPU", file=sys.stderr)
            return "cpu"
        return "cuda"
    if not available:
        raise ValueError(NO_GPU)
    if not numba.config.ENABLE_CUDASIM and (blocked := compile_blocked()):
        raise ValueError(blocked)
    return "cuda"


def compile_blocked() -> str | None:
    """Why numba.cuda cannot compile kernels here (no libNVVM, or a numpy too new for numba-cuda),
    as --device cuda's one line, or None."""
    return NO_NVVM if not nvvm_found() else installed_numpy_too_new()


def nvvm_found() -> bool:
    """Whether numba.cuda finds libNVVM, the compiler it needs beside the driver."""
    from numba.cuda.cudadrv import nvvm

    try:
        nvvm.NVVM()
    except nvvm.NvvmSupportError:
        return False
    return True


def make_policy(device, spec):
    """The policy of a backend by name: "cuda" (numba.cuda), "cpu" (Numba), "reference" (NumPy)
    or "auto" (see resolve_device)."""
    device = resolve_device(device)
    if device == "cuda":
        from nevo.nets.kernels.cuda import CudaPolicy

        return CudaPolicy(spec)
    return HostPolicy(spec, get_forward(device))
