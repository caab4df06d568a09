"""The CUDA kernels, compiled to sm_90 machine code (H100, H200) without a GPU: no spill, no local
memory, no fp64, within the launch limits (experiments/bench/kernel_report.py; its default run adds
sm_80, the A100, which CI leaves out for time: each arch is ~2 minutes of compiling)."""

import os
import shutil
import subprocess
import sys

import pytest

from experiments.bench import kernel_report
from nevo.nets.kernels import nvvm_found

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compilers() -> bool:
    return shutil.which("ptxas") is not None and nvvm_found()


def start_early(folder: str) -> subprocess.Popen | None:
    """The report, started as the session begins (tests/conftest.py: EARLY), where it can run."""
    if not compilers():
        return None
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}  # the real compiler
    with open(os.path.join(folder, "out"), "w") as out, open(os.path.join(folder, "err"), "w") as err:
        cmd = [sys.executable, "-m", "experiments.bench.kernel_report", "--arch", "sm_90"]
        low = lambda: os.nice(10)  # noqa: E731 (run before the report's Python starts)
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=err, preexec_fn=low)


@pytest.mark.skipif(not compilers(), reason="no CUDA toolkit (ptxas, NVVM)")
@pytest.mark.slow
def test_every_kernel_compiles_without_spills_local_memory_or_fp64(tmp_path):
    from tests.conftest import started, waited

    if __name__ in started:
        proc, folder = started[__name__]
    else:
        folder = str(tmp_path)
        proc = start_early(folder)
    code = waited(proc)
    with open(os.path.join(folder, "out")) as f, open(os.path.join(folder, "err")) as g:
        run = subprocess.CompletedProcess(proc.args, code, f.read(), g.read())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = [line for line in run.stdout.splitlines() if line.endswith("  ok")]
    every = sum(len(kernel_report.kernels(net)) for net in kernel_report.NETS) + len(
        kernel_report.build_kernels()
    )
    assert len(rows) == every and every >= 40
    pools = [x for x in rows if x.startswith("mnist") and " pool" in x]
    assert len(pools) == 2 * 2  # two nets, two pools each
    for net, before in kernel_report.FIRST_CONV_BEFORE.items():  # issue 16's goal: 5x fewer
        (line,) = [x for x in run.stdout.splitlines() if x.startswith(f"{net} conv1 (sm_90):")]
        now = float(line.split(":")[1].split()[0])
        assert now <= before / 5, line


def test_the_mnist_nets_and_their_pools_are_reported():
    """Both MNIST nets are checked, each max-pool a kernel of its own within the launch limits."""
    assert {"mnist, MNIST", "mnist-large, MNIST"} <= set(kernel_report.NETS)
    small = kernel_report.kernels("mnist, MNIST")
    assert [k.name for k in small] == ["conv1", "pool2", "conv3", "pool4", "output"]
    large = [k.name for k in kernel_report.kernels("mnist-large, MNIST")]
    assert large == [
        "conv1",
        "pool2",
        "conv3",
        "pool4",
        "dense5 x2",
        "dense5_finish",
        "output",
    ]  # 2 weights a load
    assert all(k.threads <= kernel_report.MAX_THREADS for k in small)


def test_the_hot_loop_is_the_innermost_loop_with_the_most_ffmas():
    """hot_loop reads nvdisasm's listing: loops are branches back to a label; an outer loop (it
    holds another) and a loop without FFMA are not the hot one."""
    sass = """
    .L_x_0:
        /*0000*/  IADD3 R1, R1, 0x1, RZ ;
    .L_x_1:
        /*0010*/  FFMA R2, R3, R4, R2 ;
        /*0020*/  LDS R3, [R5] ;
        /*0030*/  FFMA R6, R3, R4, R6 ;
        /*0040*/  @P0 BRA `(.L_x_1) ;
        /*0050*/  FFMA R7, R3, R4, R7 ;
        /*0060*/  @P1 BRA `(.L_x_0) ;
    .L_x_2:
        /*0070*/  IADD3 R8, R8, 0x1, RZ ;
        /*0080*/  @P2 BRA `(.L_x_2) ;
        /*0090*/  @P3 BRA `(.L_x_3) ;
    .L_x_3:
        /*00a0*/  EXIT ;
    """
    assert kernel_report.hot_loop(sass) == (4, 2)
    assert kernel_report.hot_loop("/*0000*/ EXIT ;") == (0, 0)


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
    exact = kernel_report.Kernel("net", "k", None, (), threads=512, grid_y=10, unfused=True)
    assert kernel_report.problems(kernel, {**clean, "ffma": 3}) == []
    assert "fused multiply-adds" in kernel_report.problems(exact, {**clean, "ffma": 3})[0]
    wide = kernel_report.Kernel("net", "k", None, (), threads=2048, grid_y=70_000)
    assert len(kernel_report.problems(wide, clean)) == 3  # threads, registers x threads, grid y
