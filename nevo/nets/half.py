"""16-bit weight rows: the format a run's forward reads its weights in (--weights auto, fp32 or fp16).

Every row is built in float32 from its genome, exactly as with fp32 weights, then rounded once to
IEEE half precision (round to nearest, ties to even: NumPy's astype(np.float16)); every forward
(the NumPy reference, the Numba CPU kernels, the numba.cuda kernels) reads the 16-bit weights and
accumulates in float32. Genomes, checkpoints and elites stay exact: only what the forward reads is
rounded, so a run's weights in either format come from the same genomes.

Why fp16 and not bfloat16 (docs/weights16.md): the same 2 bytes a weight, no slower on the CPU
(one F16C instruction widens 8 halves; bf16 is a shift, and was not faster in a scratch copy of
the dense loop), and 3 more bits of mantissa. A weight w is rounded to within 2^-11 |w| (bf16:
2^-8 |w|): for the large net's dense layer (|w| ~ 1/sqrt(7,744) = 0.011) that is 4e-6, 500 times
below the Deep GA's mutation step sigma = 0.002 (bf16: 60 times). fp16's range (|w| < 65,520)
holds any weight a run makes; a larger one is refused when its row is rounded.

Numba has no float16 type on the CPU, so its kernels read a float16 array's bits as uint16 and
widen each weight with `widen` (the LLVM conversion the F16C instructions implement).
"""

import numba
import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.core.extending import intrinsic, overload

FORMATS = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16)}
DTYPES = tuple(FORMATS.values())  # the dtypes a forward takes its weights in
FP16_MAX = 65504.0  # the largest finite half; anything from 65,520 up rounds to inf

# --weights auto: fp16 for the nets whose forward is bound by reading every row's weights, the
# Atari nets `large` (8 MB of fp32 weights a forward) and `small` (2 MB), on whatever task runs them
# (Atari, the maze): in fp16 the CPU forward of `large` ran 1.5x as fast, the quick preset's
# generation (`small`) 1.09x, the H200's kernels 1.08x and 1.06x; and 16-bit rows learned as well
# as fp32 (the GA's quick preset on Frostbite, 3 seeds; ES on HalfCheetah, 2; docs/weights16.md).
# fp32 for the others: an MLP's forward is a few microseconds of overhead, not bytes, and the MNIST
# nets' learning was not compared.
HALF_BY_DEFAULT = ("large", "small")
CHOICES = ("auto", *FORMATS)  # what --weights takes


def format_of(weights: str, net: str) -> str:
    """The format (fp32 or fp16) that --weights `weights` means for the net named `net`: itself,
    or for auto fp16 on the nets of HALF_BY_DEFAULT and fp32 on every other."""
    if weights != "auto":
        return weights
    return "fp16" if net in HALF_BY_DEFAULT else "fp32"


def dtype_of(name: str, net: str | None = None) -> np.dtype:
    """The NumPy dtype of a --weights format ("fp32" or "fp16"; "auto" as format_of resolves it for
    the net named `net`, which auto needs)."""
    if name == "auto" and net is None:
        raise ValueError("--weights auto: the format depends on the net; give the net's name")
    return FORMATS[format_of(name, net)]


@intrinsic
def _half_bits_to_f32(typingctx, bits):
    """float32 of the IEEE half whose bits are the uint16 `bits` (exact)."""
    if bits != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _f32_to_half_bits(typingctx, x):
    """The bits (uint16) of float32 x rounded to the nearest IEEE half, ties to even."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


def widen(v):
    """A weight as float32: v itself (float32), or the half whose bits are v (uint16). For Numba
    kernels, which see a float16 row as its uint16 bits."""
    return np.float32(v) if not isinstance(v, np.uint16) else np.uint16(v).view(np.float16).astype(np.float32)


@overload(widen, inline="always")
def _widen(v):
    if v == types.uint16:
        return lambda v: _half_bits_to_f32(v)
    if v == types.float32:
        return lambda v: v
    return None


def is_half_bits(w):
    """Whether the row w holds 16-bit weights' bits (uint16, as `widen` reads them): in Numba code
    a constant of w's type, so a kernel's branch on it compiles away for float32 rows."""
    return w.dtype == np.uint16


@overload(is_half_bits, inline="always")
def _is_half_bits(w):
    half_bits = isinstance(w, types.Array) and w.dtype == types.uint16
    return lambda w: half_bits


@numba.njit(parallel=True, nogil=True, cache=True)
def _round_rows(src, dst):
    """dst (n, P) uint16 = the half bits of src (n, P) float32; returns how many finite weights
    became infinite (|w| >= 65,520)."""
    n, p = src.shape
    over = np.zeros(n, np.int64)
    for r in prange(n):
        # speed: 1-D views and a count without a branch vectorise: one large row on the 2-core
        # Zen 5 VM in 0.66 ms, against 1.24 with src[r, j] and a conditional count
        s, d = src[r], dst[r]
        count = 0
        for j in range(p):
            h = _f32_to_half_bits(s[j])
            d[j] = h
            count += (h & 0x7FFF) == 0x7C00 and np.isfinite(s[j])
        over[r] = count
    return over.sum()


def round_rows(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """dst (n, P) float16 = src (n, P) float32 rounded to nearest, ties to even (bit for bit
    src.astype(np.float16)); ValueError, one line, if a finite weight is too large for fp16."""
    if src.dtype != np.float32 or dst.dtype != np.float16 or src.shape != dst.shape:
        raise TypeError(f"round_rows: float32 rows into float16 rows of one shape, got {src.dtype} "
                        f"{src.shape} and {dst.dtype} {dst.shape}")  # fmt: skip
    over = _round_rows(np.ascontiguousarray(src), dst.view(np.uint16))
    if over:
        big = float(np.abs(src[np.isfinite(src)]).max())
        raise ValueError(
            f"--weights fp16: {over} weight(s) up to {big:.4g} exceed fp16's range (|w| <= {FP16_MAX:.0f}); "
            "use --weights fp32"
        )
    return dst


def rounded(weights: np.ndarray, name: str) -> np.ndarray:
    """float32 weights (n, P) or (P,) in the --weights format `name`, fp32 or fp16 (a new array for
    fp16, the same one for fp32); auto is refused: format_of resolves it for a net first."""
    weights = np.ascontiguousarray(weights, np.float32)
    if dtype_of(name) == np.float32:
        return weights
    flat = weights.reshape(-1, weights.shape[-1]) if weights.ndim else weights.reshape(1, 1)
    out = np.empty(flat.shape, np.float16)
    return round_rows(flat, out).reshape(weights.shape)


def kernel_view(weights: np.ndarray) -> np.ndarray:
    """The array a Numba CPU kernel reads: float32 weights as they are, float16 ones as their
    uint16 bits (Numba has no float16 on the CPU; `widen` reads them)."""
    return weights.view(np.uint16) if weights.dtype == np.float16 else weights
