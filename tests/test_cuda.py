"""The numba.cuda forward pass: its checks on the CUDA simulator, and the --device choice.

The simulator must be on before numba.cuda is first imported, and this process runs the CPU
backend, so the checks (tests/cuda_checks.py) run once in a subprocess with
NUMBA_ENABLE_CUDASIM=1; each check is reported here as its own test. On a machine with a GPU,
test_full_size_on_the_gpu also runs them for real, at full size.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests import cuda_checks

ROOT = Path(__file__).resolve().parent.parent


def start_checks(out, *flags, simulate=True, nice=0) -> subprocess.Popen:
    """tests.cuda_checks started in a fresh process, its results to the file out (see results)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    if simulate:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    cmd = [sys.executable, "-m", "tests.cuda_checks", "--json", str(out), *flags]
    with open(f"{out}.log", "w") as log:  # (a file, not a pipe: nobody reads it until the end)
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)  # fmt: skip


def results(proc: subprocess.Popen, out) -> tuple[dict, str]:
    """({check: result}, its output) of a start_checks process, once it ends (20 minutes at most)."""
    from tests.conftest import waited

    waited(proc)
    output = Path(f"{out}.log").read_text()
    if not Path(out).exists():
        pytest.fail(f"`{' '.join(proc.args[1:])}` ended without results (exit {proc.returncode}):\n{output}")
    return json.loads(Path(out).read_text()), output


def run_checks(out, *flags, simulate=True):
    """Run tests.cuda_checks in a fresh process; ({check: result}, its output)."""
    return results(start_checks(out, *flags, simulate=simulate), out)


def start_early(folder: str) -> subprocess.Popen:
    """The simulator's checks, started as the session begins (tests/conftest.py: EARLY)."""
    return start_checks(os.path.join(folder, "simulated.json"), nice=10)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    """The small checks' results on the CUDA simulator (one subprocess for all of them, started as
    the session began where it could be: tests/conftest.py's EARLY)."""
    from tests.conftest import started

    if __name__ in started:
        proc, folder = started[__name__]
        return results(proc, os.path.join(folder, "simulated.json"))
    return run_checks(tmp_path_factory.mktemp("cuda") / "simulated.json")


@pytest.mark.parametrize("name", [f.__name__ for f in cuda_checks.SMALL])
@pytest.mark.slow
def test_simulated(name, simulated):
    """Each check of tests/cuda_checks.py passes on the CUDA simulator (its docstring: the property)."""
    results, output = simulated
    r = results.get(name)
    assert r is not None, f"check {name} did not run:\n{output}"
    assert r["ok"], (
        f"{name} failed on the CUDA simulator (repeat: --seed {r['seed']} --only {name}):\n{r['error']}"
    )


def gpu_present():
    from numba import cuda

    return cuda.is_available()


@pytest.mark.skipif(not gpu_present(), reason="no CUDA GPU (CI): the simulator tests above stand in")
def test_full_size_on_the_gpu(tmp_path):
    """On a real GPU, every check passes, including large and small at 84x84 with hundreds of rows."""
    results, output = run_checks(tmp_path / "gpu.json", "--full", simulate=False)
    failed = {n: r for n, r in results.items() if not r["ok"]}
    assert not failed, "\n".join(f"{n}:\n{r['error']}" for n, r in failed.items()) or output


def test_auto_is_cpu_and_cuda_is_a_clear_error_without_a_gpu(monkeypatch):
    """Without a GPU, --device auto runs on the CPU and --device cuda stops with one clear line."""
    from numba import cuda

    from nevo.nets import make_spec
    from nevo.nets.kernels import HostPolicy, make_policy, resolve_device

    monkeypatch.setattr(cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError) as e:
        resolve_device("cuda")
    msg = str(e.value)
    assert "no CUDA GPU is available" in msg and "--device cpu or auto" in msg and "\n" not in msg
    with pytest.raises(ValueError, match="no CUDA GPU"):
        make_policy("cuda", make_spec([], (1, 2, 2), 2))
    assert isinstance(make_policy("auto", make_spec([], (1, 2, 2), 2)), HostPolicy)
    with pytest.raises(ValueError, match="allowed: auto, cpu, cuda"):
        resolve_device("gpu")


def test_a_gpu_without_nvvm_is_one_line_naming_the_install(monkeypatch, capsys):
    """With a GPU but no libNVVM, --device cuda stops with one line naming requirements-gpu.txt,
    and --device auto runs on the CPU, saying why on stderr."""
    import numba
    from numba import cuda
    from numba.cuda.cudadrv import nvvm

    from nevo.nets.kernels import resolve_device

    def missing():
        raise nvvm.NvvmSupportError("libNVVM cannot be found")

    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(numba.config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(nvvm, "NVVM", missing)
    with pytest.raises(ValueError) as e:
        resolve_device("cuda")
    msg = str(e.value)
    assert "libNVVM not found" in msg and "pip install -r requirements-gpu.txt" in msg and "\n" not in msg
    assert resolve_device("auto") == "cpu"
    assert "requirements-gpu.txt" in capsys.readouterr().err


def test_a_numpy_too_new_for_numba_cuda_is_one_line(monkeypatch, capsys):
    """numba-cuda 0.30 cannot compile a kernel with numpy 2.5 (np.row_stack is gone; seen on a GPU
    image): --device cuda stops with one line naming both versions and the fix, auto picks the CPU
    and says why; numpy 2.4 or a newer numba-cuda pass."""
    import numba
    import numpy
    from numba import cuda
    from numba.cuda.cudadrv import nvvm

    from nevo.nets.kernels import numpy_too_new, resolve_device

    assert numpy_too_new("2.4.6", "0.30.4") is None and numpy_too_new("2.5.2", "0.31.0") is None
    assert numpy_too_new("2.5.0rc1", "0.30.4") and numpy_too_new("3.0", "0.29")
    monkeypatch.setattr(cuda, "is_available", lambda: True)
    monkeypatch.setattr(numba.config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(nvvm, "NVVM", lambda: None)
    monkeypatch.setattr("nevo.nets.kernels.installed_numpy_too_new", lambda: numpy_too_new("2.5.2", "0.30.4"))
    with pytest.raises(ValueError) as e:
        resolve_device("cuda")
    msg = str(e.value)
    assert "numba-cuda 0.30.4" in msg and "numpy 2.5.2" in msg and "'numpy<2.5'" in msg and "\n" not in msg
    assert resolve_device("auto") == "cpu" and "numpy 2.5.2" in capsys.readouterr().err
    monkeypatch.setattr(
        "nevo.nets.kernels.installed_numpy_too_new", lambda: numpy_too_new(numpy.__version__, "0.30.4")
    )
    assert resolve_device("cuda") == resolve_device("auto") == "cuda"  # this checkout's numpy is pinned < 2.5


def test_small_grids_do_not_warn_on_every_step():
    """numba-cuda warns for grids under 128 blocks; nevo's steps launch small grids on purpose
    (few live episodes), so that warning is silenced and any other performance warning is not."""
    import warnings

    from numba.cuda.core.errors import NumbaPerformanceWarning

    from nevo.nets.kernels import cuda as ck

    with warnings.catch_warnings(record=True) as seen:
        ck.quiet_small_grids()  # as every CudaPolicy does (and the import, which may be long past)
        # numba-cuda's message, bold codes included, as it warns at a launch
        warnings.warn(
            NumbaPerformanceWarning(
                "Grid size 14 will likely result in GPU under-utilization due to low occupancy."
            ),
            stacklevel=1,
        )
        warnings.warn(NumbaPerformanceWarning("another performance warning"), stacklevel=1)
    assert [str(w.message) for w in seen] == [str(NumbaPerformanceWarning("another performance warning"))]


def test_run_ga_refuses_cuda_without_a_gpu(monkeypatch, capsys, tmp_path):
    """`run_ga --device cuda` on a machine without a GPU prints one error line and exits 2."""
    if gpu_present():
        pytest.skip("a GPU is present")
    from experiments import run_ga
    from tests.tiny import ATARI

    code = run_ga.main([*ATARI, "--device", "cuda", "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: --device cuda: no CUDA GPU") and "\n" not in err


def test_gather_rows_is_numpy_take():
    """The gather a GPU step stages its frames with: dst[i] = src[take[i]], bytes and floats,
    repeated and scrambled slots, on one thread (a small step) and on all (a large one)."""
    from nevo.nets.kernels import cuda as kernels

    rng = np.random.default_rng(0)
    big = kernels.PARALLEL_GATHER_BYTES // (4 * 84 * 84) + 3  # rows: just over the threshold
    for src, take in (
        (rng.integers(0, 256, (9, 4 * 84 * 84), dtype=np.uint8), np.array([8, 0, 3, 3, 5])),
        (rng.standard_normal((9, 17), np.float32), np.array([8, 0, 3, 3, 5])),
        (rng.integers(0, 256, (big + 5, 4 * 84 * 84), dtype=np.uint8), rng.permutation(big + 5)[:big]),
    ):
        dst = np.zeros((len(take), src.shape[1]), src.dtype)
        kernels.gather_rows(src, take, dst)
        np.testing.assert_array_equal(dst, src[take])
        for way in (kernels._gather_one_thread, kernels._gather_all_threads):  # each path alike
            dst[:] = 0
            way(src, take, dst)
            np.testing.assert_array_equal(dst, src[take])
    assert big * 4 * 84 * 84 >= kernels.PARALLEL_GATHER_BYTES > 5 * 4 * 84 * 84


def test_a_small_step_is_gathered_on_one_thread_a_large_one_on_all(monkeypatch):
    """Below PARALLEL_GATHER_BYTES one thread gathers (a parallel region waits for threads the
    emulators hold), at and above it all of them."""
    from nevo.nets.kernels import cuda as kernels

    ran = []
    monkeypatch.setattr(kernels, "_gather_one_thread", lambda src, take, dst: ran.append("one"))
    monkeypatch.setattr(kernels, "_gather_all_threads", lambda src, take, dst: ran.append("all"))
    row = 4 * 84 * 84
    at = -(-kernels.PARALLEL_GATHER_BYTES // row)  # the fewest rows at or above the threshold
    for rows in (1, at - 1, at, at + 50):
        kernels.gather_rows(
            np.zeros((1, row), np.uint8), np.zeros(rows, np.int64), np.empty((rows, row), np.uint8)
        )
    assert ran == ["one", "one", "all", "all"]


def test_a_host_policy_on_gathered_rows_is_the_policy_on_those_rows():
    """HostPolicy(rows_ind, obs, take) acts on obs[take] (the pipeline's call)."""
    from nevo.nets import make_spec
    from nevo.nets.kernels import make_policy

    spec = make_spec([("dense", 8)], (3, 6, 6), 4)
    rng = np.random.default_rng(1)
    policy = make_policy("cpu", spec)
    policy.load(rng.standard_normal((3, spec.n_params)).astype(np.float32))
    obs = rng.integers(0, 256, (6, 3, 6, 6), dtype=np.uint8)
    take, rows_ind = np.array([5, 1, 1, 4]), np.array([0, 2, 1, 2])
    np.testing.assert_array_equal(policy(rows_ind, obs, take), policy(rows_ind, obs[take]))
    # a bad take is refused as CudaPolicy refuses it (NumPy alone would wrap -1 to the last slot)
    for bad, error in (([5, 1, 1, -1], IndexError), ([5, 1, 1, 6], IndexError), ([5, 1], ValueError),
                       (take * 1.0, ValueError)):  # fmt: skip
        with pytest.raises(error, match="take must"):
            policy(rows_ind, obs, np.asarray(bad))
