"""Tiny fixtures shared by the tests."""

import os
import shutil
import tempfile

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


# (the process, its results file) of the CUDA simulator's checks when started as the session began
simulated_checks = None


def pytest_collection_finish(session):
    """Start test_cuda's simulator checks (about 10 minutes of one core on a 2-core CI machine) at a
    low priority (nice 10) as soon as they are selected, so they run beside the tests before them;
    test_cuda's fixture waits for them (raising their priority), and the session's end stops them
    if it came first."""
    global simulated_checks
    if any(item.nodeid.startswith("tests/test_cuda.py::test_simulated") for item in session.items):
        from tests import test_cuda

        out = os.path.join(tempfile.mkdtemp(prefix="nevo-cuda-"), "simulated.json")
        simulated_checks = (test_cuda.start_checks(out, nice=10), out)


def pytest_sessionfinish(session):
    if simulated_checks is not None and simulated_checks[0].poll() is None:
        simulated_checks[0].kill()
        simulated_checks[0].wait()
    if simulated_checks is not None:
        shutil.rmtree(os.path.dirname(simulated_checks[1]), ignore_errors=True)


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
