"""Tiny fixtures shared by the tests."""

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from nevo import runs
from nevo.genomes.noise import NoiseSource, make_table
from tests import tiny


def RowsAreIndividuals():  # noqa: N802 (the tests' name for it)
    """An evaluator's weights for stand-in policies that need none: the policy is handed each
    slot's individual itself as its row."""
    from nevo.evaluation.slot_weights import GivenRows

    return GivenRows()


def host_weights(n_params: int):
    """The CPU evaluators' weights for individuals given as weights (Population.of_weights)."""
    from nevo.evaluation.slot_weights import PooledWeights
    from nevo.genomes.noise import WeightBuilder

    return PooledWeights(WeightBuilder(None, np.zeros(n_params, np.float32)))


def kernels_under(coretype: str) -> str:
    """The OpenBLAS kernels a new process reports (nevo.machine.blas_kernels, joined) when
    OPENBLAS_CORETYPE names coretype: OpenBLAS's own name for it (Prescott reports Katmai)."""
    import subprocess
    import sys

    code = (
        "import numpy, scipy.linalg.blas; from nevo.machine import blas_kernels; "
        "print('/'.join(blas_kernels()))"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": coretype}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


# Slow tests whose work is one subprocess, started as the session begins at a low priority (nice
# 10), beside the tests before them, when the test is selected: {test id prefix: its module, whose
# start_early(folder) starts it (or returns None where the test will skip)}. The test waits for
# its own (raising its priority); the session's end stops any still running. On a 2-core CI
# machine they are ~10 minutes (the CUDA simulator's checks) and ~3 (the kernel report) of one core.
EARLY = {
    "tests/test_cuda.py::test_simulated": "tests.test_cuda",
    "tests/test_kernel_report.py::test_every_kernel_compiles": "tests.test_kernel_report",
}
started: dict = {}  # module -> (its process, the folder of its output)


def pytest_collection_finish(session):
    for prefix, module in EARLY.items():
        if any(item.nodeid.startswith(prefix) for item in session.items):
            folder = tempfile.mkdtemp(prefix="nevo-early-")
            proc = importlib.import_module(module).start_early(folder)
            if proc is None:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                started[module] = (proc, folder)
    _compile_kernels(session)  # (beside the EARLY processes, at a higher priority: they use no CPU kernel)


def _compile_kernels(session) -> None:
    """`nevo compile` before the first test: the costly kernel families compile in parallel
    processes (a few seconds where they are in the cache already), and the tests' runs, emulator
    pools and Dask workers load them instead of each compiling them in turn (a fresh checkout's
    fast tests had spent two thirds of their time compiling: 375 s, against 116 s with the cache
    full, on the 2-core VM). One line on the terminal; a failure here is not the session's (the
    kernels then compile where first used, and tests/test_compile.py fails)."""
    if not session.items:
        return
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "nevo.tools.compile"], cwd=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), capture_output=True, text=True, timeout=1800)  # fmt: skip
    said = f"nevo compile: {time.monotonic() - t0:.0f} s" if done.returncode == 0 else (
        f"nevo compile failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")  # fmt: skip
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(said)


def pytest_sessionfinish(session):
    for proc, folder in started.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


def waited(proc: subprocess.Popen, timeout: float = 1200) -> int:
    """The exit status of an EARLY process, once it ends (killed after timeout seconds); now
    waited for, it runs at normal priority (where this process may raise it)."""
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, 0)
    except OSError:  # not allowed (not root), or it has ended
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def run_folder(main, argv, out) -> str:
    """Run an experiment's main(argv) in-process with --out-dir out; return the run folder it made."""
    assert main([*argv, "--out-dir", str(out)]) == 0
    (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
    return folder


def metrics_without_clock(folder) -> list[dict]:
    """A run's metrics without wall-clock fields (wall_s and every perf/ field) and without what
    a Dask cluster adds (cluster/ fields: bytes, chunks, workers)."""
    rows = runs.read_metrics(folder)
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith(("perf/", "cluster/"))}
        for r in rows
    ]


@pytest.fixture(scope="session")
def table():
    """A small shared noise table (1M numbers)."""
    return make_table(1_000_000, seed=7)


@pytest.fixture
def source(table):
    """A noise source for a 1,000-parameter 'net' with a non-trivial init scale."""
    scale = np.linspace(0.0, 1.0, 1000, dtype=np.float32)
    return NoiseSource(table, scale, sigma=0.01)


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """Two real tiny runs of one configuration (seeds 0 and 1), 2 generations each."""
    from experiments import run_ga

    out = str(tmp_path_factory.mktemp("tiny_runs"))
    for seed in ("0", "1"):
        assert run_ga.main([*tiny.ATARI, "--frame-budget", "8000", "--seed", seed, "--out-dir", out]) == 0
    return sorted(os.path.join(out, d) for d in os.listdir(out))
