"""Per-element math shared by the CPU kernels and the numba.cuda kernels: scalar, branch-light.

Plain `@numba.njit` functions can be called from `@cuda.jit` kernels too, so the math is edited
once here. Keep them scalar (no array allocation, no NumPy calls) so both backends can inline them.
"""

import math

import numba


@numba.njit(inline="always")
def relu(x):
    """max(x, 0) for float32 x (NaN stays NaN, as np.maximum keeps it)."""
    return numba.float32(0.0) if x < 0 else x


@numba.njit(inline="always")
def activate(x, act):
    """float32 x after a layer's activation: act is its NetSpec.table ACT code (nevo.nets: 0
    linear, 1 ReLU, 2 tanh)."""
    if act == 1:
        return relu(x)
    if act == 2:
        return numba.float32(math.tanh(x))
    return x


@numba.njit(inline="always")
def scale_input(v, div):
    """An observation element as the net's float32 input: v / div, as the reference divides.

    div is NetSpec.obs_div: 255 maps uint8 pixels to [0, 1]; 1 leaves float32 vectors exact."""
    return numba.float32(v) / numba.float32(div)


@numba.njit(inline="always")
def inside(i, size):
    """Whether input coordinate i lies inside [0, size) (outside reads are the zero padding)."""
    return 0 <= i < size


@numba.njit(inline="always")
def argmax_row(x, r, n):
    """Index of the first maximum of x[r, :n] (ties go to the lowest index, as np.argmax)."""
    best, best_v = 0, x[r, 0]
    for j in range(1, n):
        if x[r, j] > best_v:
            best, best_v = j, x[r, j]
    return best
