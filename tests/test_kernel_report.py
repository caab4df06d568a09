"""The CUDA kernels, compiled to sm_90 and sm_80 machine code without a GPU: no spill, no local
memory, no fp64, within the launch limits (experiments/kernel_report.py)."""

import os
import shutil
import subprocess
import sys

import pytest

from experiments import kernel_report
from nevo.kernels import nvvm_found

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(shutil.which("ptxas") is None or not nvvm_found(), reason="no CUDA toolkit (ptxas, NVVM)")
def test_every_kernel_compiles_without_spills_local_memory_or_fp64():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}  # the real compiler
    run = subprocess.run(
        [sys.executable, "-m", "experiments.kernel_report"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.endswith("  ok")]
    expected = sum(len(kernel_report.kernels(net)) for net in kernel_report.NETS) * 2  # two archs
    assert len(rows) == expected and expected >= 40


def test_a_spill_fp64_or_too_many_registers_is_a_problem():
    """The checks can fail: each resource over its limit is named."""
    kernel = kernel_report.Kernel("net", "k", None, (), threads=512, grid_y=10_000)
    clean = {"registers": 64, "smem": 0, "stack": 0, "spill_stores": 0, "spill_loads": 0, "fp64": 0}
    assert kernel_report.problems(kernel, clean) == []
    over = [("spill_stores", 8, "spills"), ("stack", 16, "local memory"), ("fp64", 2, "fp64"),
            ("registers", 255, "registers"), ("smem", 64 * 1024, "shared memory")]  # fmt: skip
    for key, value, word in over:
        (problem,) = kernel_report.problems(kernel, {**clean, key: value})
        assert word in problem
    wide = kernel_report.Kernel("net", "k", None, (), threads=2048, grid_y=70_000)
    assert len(kernel_report.problems(wide, clean)) == 3  # threads, registers x threads, grid y
