"""pytest's hooks and fixtures for the suite (the helpers tests share are tests/helpers.py's), and
the suite's runner on a 2-core machine: the EARLY processes, started as the session begins, the
kernels compiled once before the tests, and the BESIDE tests run in a second pytest process at
the lowest priority, reported in this session.

Why this runner and not pytest-xdist (`-n 2`), which the runner resembles: xdist's workers are
peers at one priority, and it hands any worker any test (its `--dist loadgroup` keeps a group's
tests on one worker, but that worker gets others too). Here the second process holds only
untimed tests, at nice 19, so that the tests that bound a time (a stop within 10 s, a stuck
worker's deadline) keep the cores as if alone; and the EARLY processes (minutes of the CUDA
simulator's checks and the kernel report, one subprocess each) start before any test, which no
xdist option does. What xdist would add, a test's own process on a crash, the suite does not
need: a test that can kill its process runs its work in a subprocess of its own."""

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from nevo.genomes.noise import NoiseSource, make_table
from tests import tiny

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

# Slow tests that time nothing and share nothing with the others (installs into fresh venvs,
# compiles for other targets or into empty caches, short trainings on one core): a module's path
# names all its tests. When selected they run, in the session's order, in one pytest process of
# their own beside the session at the lowest priority (nice 19: the session's tests, some of them
# timed, lose next to nothing to it; in the session's own terminal session, since Linux's autogroup
# scheduler shares the cores equally between sessions whatever their processes' nice values: in a
# session of its own it made the cluster tests 1.4x slower), and the session reports each after its
# own tests (waiting for any not done, that process's priority raised meanwhile); their fixtures
# are set up there alone. On the 2-core CI machine they are ~11 minutes of one core that the
# session's idle moments take instead of its turn (the whole suite measured 33.7 min without this
# process beside it, 27.1 with it; docs/lab/2026-11-29.md).
BESIDE = [
    "tests/test_atari_emulator.py",
    "tests/test_atari_ram.py",
    "tests/test_command.py::test_a_plain_install_into_a_fresh_venv_gives_the_whole_command",
    "tests/test_compile.py::test_check_names_each_kernel_that_had_to_compile",
    "tests/test_continuous.py",
    "tests/test_damaged_files.py",
    "tests/test_es.py::test_es_learns_cartpole_on_a_small_budget",
    "tests/test_fixtures.py",
    "tests/test_forward_bits.py::test_the_forward_is_the_same_bits_for_every_cpu_target_and_blas_kernel",
    "tests/test_half.py",
    "tests/test_in_process.py::test_ga_learns_cartpole_on_a_small_budget",
    "tests/test_install.py::test_pip_install_editable_in_a_fresh_venv_then_import_from_elsewhere",
    "tests/test_loggers.py",
    "tests/test_mujoco.py",
    "tests/test_own_algorithm.py",
    "tests/test_readme.py::test_the_five_line_example_trains_then_plays_the_elite_in_a_gymnasium_loop",
    "tests/test_roofline.py::test_ab_forward_compares_a_checkout_with_itself",
    "tests/test_run_ns.py",
    "tests/test_run_safe.py",
    "tests/test_supervised.py",
]
BESIDE_ENV = "NEVO_TESTS_BESIDE"  # set in that process: the folder its results go to
beside: dict = {}  # "proc" and "folder" of the process beside, once started


def _is_beside(nodeid: str) -> bool:
    return any(nodeid == b or nodeid.startswith(b + "::") for b in BESIDE)


def of_the_process_beside(pid: int) -> bool:
    """Whether process pid is the process beside or one it started: a test that counts this
    process's descendants leaves those out."""
    import psutil

    if not beside:
        return False
    try:
        return pid == beside["proc"].pid or any(
            p.pid == beside["proc"].pid for p in psutil.Process(pid).parents()
        )
    except psutil.Error:  # gone
        return False


def _nice_beside(value: int) -> None:
    """The process beside and every process it started now, at nice value (a process it starts
    later inherits its parent's). Where not allowed (not root, to lower it), as they were."""
    import psutil

    try:
        tree = [
            beside["proc"].pid,
            *(c.pid for c in psutil.Process(beside["proc"].pid).children(recursive=True)),
        ]
    except psutil.Error:  # it has ended
        return
    for pid in tree:
        try:
            os.setpriority(os.PRIO_PROCESS, pid, value)
        except OSError:
            pass


def pytest_collection_finish(session):
    if os.environ.get(BESIDE_ENV):  # the process beside runs its tests only
        return
    for prefix, module in EARLY.items():
        if any(item.nodeid.startswith(prefix) for item in session.items):
            folder = tempfile.mkdtemp(prefix="nevo-early-")
            proc = importlib.import_module(module).start_early(folder)
            if proc is None:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                started[module] = (proc, folder)
    _compile_kernels(session)  # (beside the EARLY processes, at a higher priority: they use no CPU kernel)
    _start_beside(session)  # (after the compile: its tests load the kernels it put in the cache)
    _early_last(session)


def _early_last(session) -> None:
    """The EARLY tests after the session's other own tests (before the reports from beside): in
    their place in the order, test_cuda's checks come early, and the session reached them 67 s
    before their process ended and waited; by its last own test they are long done."""
    own = [item for item in session.items if not isinstance(item, Beside)]
    early = [item for item in own if item.nodeid.startswith(tuple(EARLY))]
    session.items[:] = [item for item in own if item not in early] + early + [
        item for item in session.items if isinstance(item, Beside)]  # fmt: skip


def _start_beside(session) -> None:
    """The selected tests of BESIDE started in the process beside; in the session, each replaced
    by a Beside item of its name (no fixtures: they are the other process's), after the session's
    own tests."""
    ids = [item.nodeid for item in session.items if _is_beside(item.nodeid)]
    if not ids:
        return
    folder = tempfile.mkdtemp(prefix="nevo-beside-")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env[BESIDE_ENV] = folder
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
           os.path.join(folder, "tmp"), *ids]  # fmt: skip
    with open(os.path.join(folder, "log"), "w") as log:
        proc = subprocess.Popen(cmd, cwd=str(session.config.rootpath), env=env, stdout=log,
                                stderr=subprocess.STDOUT, process_group=0,
                                preexec_fn=lambda: os.nice(19))  # fmt: skip
    beside.update(proc=proc, folder=folder)
    # the session's own tests first, then the reports from beside: the session never waits on a
    # test beside while it has work of its own (it reached test_atari_emulator, second in its
    # order, ~100 s before the process beside had done it, and waited)
    here = [item for item in session.items if not _is_beside(item.nodeid)]
    session.items[:] = here + [Beside.of(item) for item in session.items if _is_beside(item.nodeid)]


def _result_file(folder: str, nodeid: str) -> str:
    import hashlib

    return os.path.join(folder, hashlib.sha256(nodeid.encode()).hexdigest()[:16] + ".json")


def pytest_runtest_logreport(report):
    """In the process beside: each test's outcome (its first phase not passed, else passed) to a
    file of its own, written once its teardown is done."""
    folder = os.environ.get(BESIDE_ENV)
    if not folder:
        return
    import json

    path = _result_file(folder, report.nodeid)
    partial = f"{path}.part"
    if report.outcome != "passed" and not os.path.exists(partial):
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")  # (pytest.skip adds it again)
        with open(partial, "w") as f:
            json.dump({"outcome": report.outcome, "when": report.when, "text": report.longreprtext,
                       "reason": reason}, f)  # fmt: skip
    if report.when == "teardown":
        if not os.path.exists(partial):
            with open(partial, "w") as f:
                json.dump({"outcome": "passed"}, f)
        os.replace(partial, path)


class BesideFailed(Exception):
    """A test that failed in the process beside: its report there."""


class Beside(pytest.Item):
    """A test of BESIDE in the session: the outcome it had in the process beside, once known."""

    @classmethod
    def of(cls, item):
        made = cls.from_parent(item.parent, name=item.name)
        made.own_markers = list(item.own_markers)
        made.origin = item.reportinfo()  # (its file, line and name: where a report points)
        return made

    def runtest(self):
        import json

        proc, folder = beside["proc"], beside["folder"]
        path = _result_file(folder, self.nodeid)
        if not os.path.exists(path):  # (mostly it has ended there already)
            _nice_beside(0)
            while not os.path.exists(path) and proc.poll() is None:
                time.sleep(0.1)
            _nice_beside(19)  # low again for the tests after this one
        if not os.path.exists(path):
            with open(os.path.join(folder, "log")) as f:
                raise BesideFailed(f"the process beside the session ended (exit {proc.returncode}) before "
                                   f"this test's end:\n{f.read()[-3000:]}")  # fmt: skip
        with open(path) as f:
            result = json.load(f)
        if result["outcome"] == "skipped":
            pytest.skip(result["reason"])
        if result["outcome"] == "failed":
            raise BesideFailed(f"(run beside the session, in its {result['when']})\n{result['text']}")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, BesideFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.origin


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
    if beside:
        if beside["proc"].poll() is None:
            try:
                os.killpg(beside["proc"].pid, 9)
            except OSError:
                pass
            beside["proc"].wait()
        shutil.rmtree(beside["folder"], ignore_errors=True)
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
