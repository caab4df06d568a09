"""README's cluster recipe, run as a user runs it, and each way of failing to reach, deserialise on
or run on a cluster said in one line on the driver, with its fix, never a traceback.

The recipe's three lines are read from README.md and changed only in their addresses (10.0.0.x
becomes 127.0.0.1, the ports free ones) and in the run's size. Every process is started with
nothing on its PYTHONPATH, listens on 127.0.0.1 only, lives at most tests/dask_procs.LIMIT_S
(coreutils' `timeout` kills its whole process group then) and is stopped by the test that started
it, by its process group id."""

import glob
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from experiments import run_ga
from nevo import runs
from nevo.cluster.evaluator import ClusterError, ClusterEvaluator
from tests.dask_procs import LIMIT_S, ROOT, DaskProcesses, environment, free_port, listening, worker_process
from tests.fixtures.record import PATH, RUNS
from tests.helpers import metrics_without_clock
from tests.tiny import CARTPOLE


def readme_recipe() -> list[str]:
    """The command lines of README's "On a cluster" block, without their comments."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text.split("\n## On a cluster\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```bash\n(.*?)^```", section, re.S | re.M).group(1)
    return [line.split(" #")[0].strip() for line in block.splitlines() if line.strip()]


def on_this_machine(line: str, ports: dict) -> list[str]:
    """A recipe line with only its addresses changed: every node's 10.0.0.x becomes 127.0.0.1,
    ports (8786, 8787) free ones; `dask` and `python` are this Python's."""
    line = re.sub(r"\b10\.0\.0\.\d+\b", "127.0.0.1", line)
    for port, free in ports.items():
        line = re.sub(rf"\b{port}\b", str(free), line)
    argv = shlex.split(line)
    programs = {"dask": os.path.join(os.path.dirname(sys.executable), "dask"), "python": sys.executable}
    return [programs.get(argv[0], argv[0]), *argv[1:]]


def start(argv: list[str], cwd, log) -> subprocess.Popen:
    """argv in cwd, bounded in time, in a session of its own (its process group id is its pid)."""
    with open(log, "w") as out:
        return subprocess.Popen(["timeout", "-s", "KILL", str(LIMIT_S), *argv], cwd=cwd, env=environment(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def kill(p: subprocess.Popen) -> None:
    """SIGKILL p's whole process group (`timeout`, the program, whatever it started)."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:  # nothing of it is left
        pass
    p.wait(30)


def group(p: subprocess.Popen) -> list[int]:
    """The pids of p's process group, `timeout` aside: the program and the processes it started."""
    import psutil

    return [c.pid for c in psutil.Process(p.pid).children(recursive=True)]


@pytest.mark.slow
def test_the_readme_recipe_runs_as_written_and_a_killed_worker_costs_nothing(tmp_path):
    """README's stock `dask scheduler` (started outside the checkout), two of its workers (in the
    checkout) and its run_ga line (a tiny run instead of --preset paper): every server on
    127.0.0.1 only; one worker's whole process group SIGKILLed after the first generation; the
    run ends with the metrics of the same run on one machine (tests/fixtures/short_runs.json)."""
    scheduler_line, worker_line, run_line = readme_recipe()
    assert scheduler_line.startswith("dask scheduler ") and worker_line.startswith(
        "python -m experiments.cluster_worker "
    )
    assert run_line.startswith("python -m experiments.run_ga ") and "--preset paper" in run_line
    port = free_port()
    ports = {8786: port, 8787: free_port()}
    module, tiny = RUNS["ga-frostbite"]
    run = on_this_machine(run_line.replace("--preset paper", shlex.join(tiny)), ports)
    run += ["--out-dir", str(tmp_path / "runs")]
    head = tmp_path / "head"  # the scheduler's folder: outside the checkout
    head.mkdir()
    procs = []
    try:
        scheduler = start(on_this_machine(scheduler_line, ports), head, tmp_path / "scheduler.log")
        procs.append(scheduler)
        workers = [
            start(on_this_machine(worker_line, ports), ROOT, tmp_path / f"worker{i}.log") for i in range(2)
        ]
        procs += workers
        from distributed import Client

        with Client(f"tcp://127.0.0.1:{port}", timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            facts = list(client.run(worker_process).values())
            servers = [client.run_on_scheduler(os.getpid), *client.run(os.getpid).values()]
        assert facts == 2 * [
            {"daemon": False, "nthreads": 1, "nevo": os.path.join(ROOT, "nevo", "__init__.py")}
        ]
        pids = [pid for p in procs for pid in group(p)]  # scheduler, nannies, their workers and helpers
        assert set(servers) <= set(pids)
        assert all(listening(pid) <= {"127.0.0.1"} for pid in pids)
        assert all(listening(pid) for pid in servers)

        with open(tmp_path / "run.log", "w") as out:
            driver = subprocess.Popen(run, cwd=ROOT, env=environment(), stdout=out, stderr=subprocess.STDOUT)
        procs.append(driver)
        deadline = time.monotonic() + LIMIT_S
        while not any(os.path.getsize(m) for m in glob.glob(str(tmp_path / "runs" / "*" / runs.METRICS))):
            assert driver.poll() is None and time.monotonic() < deadline, (tmp_path / "run.log").read_text()
            time.sleep(0.05)
        kill(workers[1])
        assert driver.wait(LIMIT_S) == 0, (tmp_path / "run.log").read_text()
    finally:
        for p in procs:
            kill(p)
    output = (tmp_path / "run.log").read_text()
    assert "Traceback" not in output and "error" not in output
    (folder,) = glob.glob(str(tmp_path / "runs" / "*"))
    rows = runs.read_metrics(folder)
    assert len(rows) > 1 and rows[0]["cluster/workers"] == 2 and rows[-1]["cluster/workers"] == 1
    with open(PATH) as f:
        assert metrics_without_clock(folder) == json.load(f)["ga-frostbite"]


def run_ga_process(argv: list[str], out) -> subprocess.CompletedProcess:
    """`python -m experiments.run_ga argv --out-dir out` in the checkout, as a user runs it."""
    argv = [sys.executable, "-m", "experiments.run_ga", *argv, "--out-dir", str(out)]
    return subprocess.run(argv, cwd=ROOT, env=environment(), capture_output=True, text=True, timeout=300)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    """The run's error line, once it is sure that it is all the run said on stderr."""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and "Traceback" not in p.stdout, p
    return p.stderr.strip()


SCHEDULER_WITHOUT_NEVO = (
    r"error: the Dask scheduler at {} cannot import nevo \(ModuleNotFoundError: No module named 'nevo'\), "
    r"so it cannot read nevo's tasks: install nevo for the Python that runs it( \(.+\))? with "
    r"`pip install -r requirements\.txt` in a nevo checkout, and restart it"
)


@pytest.mark.slow
def test_a_scheduler_that_cannot_import_nevo_stops_the_run_in_one_line_before_it_begins(tmp_path):
    """The scheduler unpickles nevo's tasks: one whose Python lacks nevo is found at the start
    (before any worker is waited for), and the run stops with one line naming the cause and the
    fix; exit 2, no run folder."""
    with DaskProcesses(workers=0, scheduler_nevo=False) as c:
        p = run_ga_process([*CARTPOLE, "--cluster", c.address, "--cluster-timeout", "30"], tmp_path)
    assert p.returncode == 2
    line = one_error_line(p)
    assert re.fullmatch(SCHEDULER_WITHOUT_NEVO.format(re.escape(c.address)), line), line
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_a_task_graph_the_scheduler_cannot_deserialise_is_one_line(tmp_path, monkeypatch, capsys):
    """Should the check at the start be passed (here: skipped), Dask's own "Error during
    deserialization of the task graph" on the first generation's chunks is one line too, with
    its cause; exit 3."""
    monkeypatch.setattr(ClusterEvaluator, "_check_scheduler", lambda self: None)
    module, argv = RUNS["ga-maze"]
    with DaskProcesses(workers=0, scheduler_nevo=False) as c:
        c.start_worker()
        c.wait_for_workers(1)
        code = run_ga.main(
            [*argv, "--out-dir", str(tmp_path), "--cluster", c.address, "--cluster-timeout", "30"]
        )
    captured = capsys.readouterr()
    assert code == 3 and "Traceback" not in captured.out + captured.err
    assert captured.err.count("\n") == 1
    line = captured.err.split("; the run folder")[0]
    assert re.fullmatch(SCHEDULER_WITHOUT_NEVO.format(re.escape(c.address)), line), line


@pytest.mark.slow
def test_something_else_at_the_address_is_one_line(tmp_path):
    """A port where something listens but never answers as a Dask scheduler (Dask's handshake
    has no timeout of its own): one line after about --cluster-timeout, exit 2, no run folder."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        p = run_ga_process([*CARTPOLE, "--cluster", address, "--cluster-timeout", "2"], tmp_path)
    assert p.returncode == 2 and time.monotonic() - t0 < 60
    line = one_error_line(p)
    assert line == (
        f"error: --cluster: something listens at {address} but does not answer as a Dask scheduler "
        "(in 7 s; the dashboard's port instead of the scheduler's?): check the address"
    )
    assert not os.listdir(tmp_path)


def test_no_scheduler_at_the_address_is_one_line_that_says_how_to_start_one(tmp_path, capsys):
    address = f"tcp://127.0.0.1:{free_port()}"
    assert (
        run_ga.main([*CARTPOLE, "--cluster", address, "--cluster-timeout", "2", "--out-dir", str(tmp_path)])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"error: --cluster: no Dask scheduler answers at {address} ("
    )
    port = address.rsplit(":", 1)[1]
    assert err.endswith(f"): check the address, or start one there (`dask scheduler --host 127.0.0.1 "
                        f"--port {port}`, on that host)\n")  # fmt: skip
    assert not os.listdir(tmp_path)


class Failed:
    """A future whose result raises e."""

    def __init__(self, e):
        self.e = e

    def result(self):
        raise self.e


def test_what_a_chunk_can_raise_on_the_driver_is_one_line():
    """Dask's deserialisation error (its cause kept), a worker's exception, a chunk that killed
    its workers: each a ClusterError of one line naming the cause and the fix."""
    from distributed import KilledWorker

    ev = ClusterEvaluator.__new__(ClusterEvaluator)
    ev.address = "tcp://127.0.0.1:8786"
    graph = RuntimeError("Error during deserialization of the task graph. This frequently\noccurs if ...")
    graph.__cause__ = ModuleNotFoundError("No module named 'nevo'")
    cases = [
        (graph, "cannot import nevo (ModuleNotFoundError: No module named 'nevo'), so it cannot read"),
        (
            ValueError("bad\nshape"),
            "a chunk of episodes failed on a worker (ValueError: bad shape): the worker's log",
        ),
        (
            KilledWorker("key", SimpleNamespace(address="tcp://127.0.0.1:1"), 3),
            "ended every worker that ran it",
        ),
    ]
    for e, says in cases:
        with pytest.raises(ClusterError) as raised:
            ev._result(Failed(e))
        assert says in str(raised.value) and "\n" not in str(raised.value)
