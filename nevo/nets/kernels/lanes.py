"""Eight float32 lanes as a Numba value, and fused multiply-adds that round the same on every CPU.

The CPU forward's sums are written with these, so that its bits depend on nothing but the order
of operations in nevo/nets/kernels/cpu.py:
- `fma(a, b, c)` and `fma8` are LLVM's `llvm.fma` intrinsic: a * b + c rounded once, by IEEE 754's
  definition. Where the CPU has FMA instructions (x86 since Haswell and Zen, every AVX-512 CPU,
  AArch64) it is one instruction; elsewhere LLVM calls the C library's `fmaf`, exact as well, only
  slower. Numba 0.68 on Python 3.11 has no `math.fma`, and a `fastmath={"contract"}` multiply-add
  is fused only where the target has FMA instructions (and where LLVM chooses to), so its bits
  depend on the CPU a kernel is compiled for.
- `F32x8` is LLVM's `<8 x float>` held in a Numba variable: eight accumulators of a conv's output
  channels stay in one register (AVX2's ymm; an AVX-512 CPU runs the same 8-lane instructions, and
  a CPU without AVX splits each into two 4-lane ones) without relying on LLVM's SLP vectoriser,
  which Numba leaves off by default (`NUMBA_SLP_VECTORIZE=0`). The lanes are independent sums, so
  their width never changes a result.
The loads and stores take a flat float32 array and an element index and check nothing: the
caller's loops keep them inside the array (the conv's tests read every output against a twin that
indexes NumPy arrays). `load8` also reads a 16-bit weight row's uint16 bits, each half widened to
float32 exactly (LLVM's fpext of `<8 x half>`: one F16C instruction), so a conv reads a --weights
fp16 row in place.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.extending import intrinsic, models, register_model

LANES = 8
_F32 = ir.FloatType()
_VEC = ir.VectorType(_F32, LANES)
_HALVES = ir.VectorType(ir.HalfType(), LANES)


class F32x8(types.Type):
    """Numba's type of eight float32 lanes (LLVM's <8 x float>)."""

    def __init__(self):
        super().__init__(name="f32x8")


f32x8 = F32x8()


@register_model(F32x8)
class _F32x8Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VEC)


def _is_f32_vector(arr) -> bool:
    return isinstance(arr, types.Array) and arr.dtype == types.float32 and arr.ndim == 1


def _element(context, builder, arrty, arr, i):
    """A pointer to arr[i] (no check)."""
    return builder.gep(context.make_array(arrty)(context, builder, arr).data, [i])


def _splat(builder, x):
    v = builder.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.IntType(32)(0))
    zeros = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)
    return builder.shuffle_vector(v, ir.Constant(_VEC, ir.Undefined), zeros)


@intrinsic
def zeros8(typingctx):
    """Eight lanes of +0.0."""

    def codegen(context, builder, sig, args):
        return ir.Constant(_VEC, [0.0] * LANES)

    return f32x8(), codegen


@intrinsic
def load8(typingctx, arr, i):
    """arr[i : i + 8] of a 1-D float32 array as eight lanes, or of a 1-D uint16 array (half bits,
    nevo.nets.half) widened to float32, exactly."""
    halves = isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint16
    if not ((_is_f32_vector(arr) or halves) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        element = _element(context, builder, sig.args[0], args[0], args[1])
        if halves:
            return builder.fpext(builder.load(builder.bitcast(element, _HALVES.as_pointer()), align=2), _VEC)
        return builder.load(builder.bitcast(element, _VEC.as_pointer()), align=4)

    return f32x8(arr, i), codegen


@intrinsic
def store8(typingctx, arr, i, v):
    """arr[i : i + 8] = the eight lanes of v."""
    if not (_is_f32_vector(arr) and isinstance(i, types.Integer) and v == f32x8):
        return None

    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(_element(context, builder, sig.args[0], args[0], args[1]), _VEC.as_pointer())
        builder.store(args[2], ptr, align=4)
        return context.get_dummy_value()

    return types.void(arr, i, v), codegen


@intrinsic
def bcast8(typingctx, arr, i):
    """arr[i] of a 1-D float32 array in all eight lanes."""
    if not (_is_f32_vector(arr) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        return _splat(
            builder, builder.load(_element(context, builder, sig.args[0], args[0], args[1]), align=4)
        )

    return f32x8(arr, i), codegen


def _fma(name, ty):
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * 3), name)
        return builder.call(fn, args)

    return codegen


@intrinsic
def fma8(typingctx, a, b, c):
    """a * b + c in each lane, rounded once (LLVM's llvm.fma.v8f32)."""
    if not (a == b == c == f32x8):
        return None
    return f32x8(a, b, c), _fma("llvm.fma.v8f32", _VEC)


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c for float32 a, b, c, rounded once (LLVM's llvm.fma.f32; a loop of them vectorises)."""
    if not (a == b == c == types.float32):
        return None
    return types.float32(a, b, c), _fma("llvm.fma.f32", _F32)


__all__ = ["LANES", "F32x8", "f32x8", "zeros8", "load8", "store8", "bcast8", "fma8", "fma"]
