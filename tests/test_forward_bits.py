"""The CPU forward gives the same bits on every CPU: its convs are nevo's own tiles (no BLAS), every
multiply-add is a fused one written in the source (nevo.nets.kernels.lanes), and every sum's order
is fixed. Checked by compiling it for other targets in subprocesses (Numba's NUMBA_CPU_NAME): x86-64's
baseline, without AVX or FMA instructions (LLVM then calls the C library's fmaf), AVX2 (Haswell), AVX-512
where this CPU runs it, and under either OpenBLAS kernel."""

import concurrent.futures
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from nevo.nets import make_spec, net_spec
from nevo.nets.kernels import cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def digest(fp16: bool = True) -> str:
    """sha256 of the logits of `small` (its two convs, the dense layers) on Atari frames, in fp32
    and (fp16) 16-bit weights, five rows of three individuals. (One net: a target compiled afresh
    costs a minute or two of the test's time per kind of input.)"""
    rng = np.random.default_rng(0)
    h = hashlib.sha256()
    spec = net_spec("small")
    w = (rng.standard_normal((3, spec.n_params)) * 0.05).astype(np.float32)
    obs = rng.integers(0, 256, (5, *spec.obs_shape)).astype(np.uint8)
    for weights in (w, w.astype(np.float16)) if fp16 else (w,):
        _, logits = cpu.forward(spec, weights, np.array([0, 1, 2, 1, 0]), obs)
        h.update(logits.tobytes())
    return h.hexdigest()


def _digest_in_child(tmp_path, name: str, fp16: bool = True, **env) -> str:
    """digest() in a new interpreter with env's changes (a value None removes the variable); for
    another target, its Numba cache in a folder of its own (name)."""
    child = {k: v for k, v in os.environ.items() if k not in env}
    child.update({k: v for k, v in env.items() if v is not None})
    if "NUMBA_CPU_NAME" in env:
        child["NUMBA_CACHE_DIR"] = str(tmp_path / name)
    child["PYTHONPATH"] = ROOT
    done = subprocess.run(
        [sys.executable, "-c", f"from tests.test_forward_bits import digest; print(digest({fp16}))"],
        env=child,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.slow
def test_the_forward_is_the_same_bits_for_every_cpu_target_and_blas_kernel(tmp_path):
    """The failure this prevents: with FMA contraction left to LLVM and the convs in OpenBLAS, a
    target without FMA instructions (or another BLAS kernel) gave other last bits, so a cluster of
    mixed CPUs ran different episodes from the same genomes. (The children run two at a time: each
    is one core's compile.)"""
    here, here_fp32 = digest(), digest(fp16=False)  # (this process's cache, which the BLAS children load)
    targets = ["haswell"]  # AVX2 with FMA
    if _has_avx512():
        targets.append("skylake-avx512")
    # NUMBA_CPU_FEATURES empty: the target's own features, not this CPU's added to them
    children = {name: (name, True, dict(NUMBA_CPU_NAME=name, NUMBA_CPU_FEATURES="")) for name in targets}
    # x86-64's baseline (SSE2: no AVX, no FMA; LLVM calls the C library's fmaf). It has no F16C
    # either, and Numba's JIT lacks the library call LLVM then makes for a 16-bit weight
    # (__extendhfsf2): fp32 weights only.
    children["generic"] = ("generic", False, dict(NUMBA_CPU_NAME="generic", NUMBA_CPU_FEATURES=""))
    children["OPENBLAS_CORETYPE=Haswell"] = ("blas-haswell", True, dict(OPENBLAS_CORETYPE="Haswell"))
    children["OpenBLAS's own pick"] = ("blas-own", True, dict(OPENBLAS_CORETYPE=None))
    with concurrent.futures.ThreadPoolExecutor(2) as lanes:
        done = {
            k: lanes.submit(_digest_in_child, tmp_path, name, fp16, **env)
            for k, (name, fp16, env) in children.items()
        }
        got = {k: f.result() for k, f in done.items()}
    assert got == {k: here if children[k][1] else here_fp32 for k in got}


def _conv_spec(cout, kernel, stride, size, cin):
    return make_spec(
        [("conv", cout, kernel, stride), ("dense", 8)],
        obs_shape=(cin, size, size),
        obs_dtype=np.float32,
        n_actions=3,
    )


@pytest.mark.parametrize(
    "cout,kernel,stride,size,cin",
    [
        (16, 8, 4, 84, 4),
        (32, 4, 2, 21, 16),
        (64, 3, 1, 11, 64),
        (16, 5, 1, 13, 1),
        (48, 3, 2, 9, 3),
        (16, 1, 1, 5, 2),
    ],
)
def test_the_conv_tiles_are_their_one_output_twin_bit_for_bit(cout, kernel, stride, size, cin):
    """conv_sums' tiles of 6 pixels by 16 channels against conv_sums_one, output by output: the
    same bits, for pixel counts that leave a part tile (84 -> 441 pixels, 5 -> 25, 9 -> 25, 13 ->
    169) and strides 1, 2 and 4; and both within float32 rounding of a float64 sum."""
    spec = _conv_spec(cout, kernel, stride, size, cin)
    t = spec.table
    rng = np.random.default_rng(cout + kernel)
    hp, wp = t[0, 6] + t[0, 10] + t[0, 11], t[0, 7] + t[0, 12] + t[0, 13]
    src = rng.standard_normal(hp * wp * cin).astype(np.float32)
    w = rng.standard_normal(spec.n_params).astype(np.float32)
    tiles, one = (np.full(cpu.cols_size(t), np.nan, np.float32) for _ in range(2))
    cpu.conv_sums(t, 0, w, src, tiles)
    cpu.conv_sums_one(t, 0, w, src, one)
    oh, ow = t[0, 8], t[0, 9]
    n = oh * ow * cout
    assert tiles[:n].tobytes() == one[:n].tobytes()
    x = np.lib.stride_tricks.sliding_window_view(src.reshape(hp, wp, cin), (kernel, kernel, cin))
    x = x[::stride, ::stride, 0][:oh, :ow].astype(np.float64)
    want = np.einsum(
        "yxabc,abco->yxo", x, w[t[0, 14] : t[0, 15]].reshape(kernel, kernel, cin, cout).astype(np.float64)
    )
    np.testing.assert_allclose(
        one[:n].reshape(oh, ow, cout), want, rtol=1e-4, atol=1e-4 * np.sqrt(kernel * kernel * cin)
    )
