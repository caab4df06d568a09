"""nevo on a Dask cluster: the same metrics as on one machine, lost workers and schedulers,
refused workers. Every scheduler and worker here listens on 127.0.0.1, lives at most
tests/dask_procs.LIMIT_S and is stopped by the test that started it."""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import run_es, run_ga, run_ns
from nevo import cli, machine, runs, tasks
from nevo.cluster.connection import check_address
from nevo.cluster.evaluator import ClusterError, ClusterEvaluator
from nevo.cluster.worker import differences, fingerprint
from nevo.episodes import Episodes, Population
from nevo.evaluation import setup
from nevo.genomes import noise
from nevo.loops import elite as elite_files
from tests.dask_procs import ROOT, DaskProcesses, listening
from tests.fixtures.record import PATH, RUNS
from tests.helpers import metrics_without_clock, run_folder

MAIN = {"run_ga": run_ga.main, "run_es": run_es.main, "run_ns": run_ns.main}


@pytest.fixture(scope="module")
def recorded():
    with open(PATH) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def two_workers():
    """A scheduler and two worker processes, shared by the runs that leave them alone."""
    with DaskProcesses(workers=2) as c:
        yield c


# ga-maze: local:2, below; the runs by the default format repeat ga-maze-fp16's and the ES family's
# fp16 paths (ga-maze-fp16, es-cartpole-fp16), so they run on one machine only. So do ga-frostbite
# (the episode start before the reference's: the same chunks, another EnvConfig field, which
# ga-frostbite-reference's start already carries to the workers) and NSR-ES and NSRA-ES (NS-ES's
# chunks exactly: returns and behaviours of thetas; how they are weighed is the driver's).
ON_ONE_MACHINE_ONLY = {"ga-maze", "ga-frostbite", "nsr-es-maze", "nsra-es-maze"}


@pytest.mark.parametrize(
    "name", [n for n in RUNS if n not in ON_ONE_MACHINE_ONLY and not n.endswith("-default")]
)
@pytest.mark.slow
def test_a_run_on_a_cluster_gives_the_metrics_of_one_machine(name, recorded, two_workers, tmp_path):
    """The recorded single-machine metrics, exactly, from a run whose episodes two worker
    processes played. The GA family sends seed lists, never weights; the ES family sends its
    thetas (weights), and results come back per episode."""
    module, argv = RUNS[name]
    folder = run_folder(MAIN[module], [*argv, "--cluster", two_workers.address], tmp_path)
    assert metrics_without_clock(folder) == recorded[name]
    rows = runs.read_metrics(folder)
    with open(os.path.join(folder, runs.CONFIG)) as f:
        n_params = json.load(f)["n_params"]
    seen = [(r["generation"], r["cluster/workers"], r["cluster/workers_lost"]) for r in rows]
    assert all(w == 2 and lost == 0 for _, w, lost in seen), seen
    if name.startswith("ga"):  # less than one individual's weights out
        assert all(0 < r["cluster/bytes_sent"] < 4 * n_params for r in rows)
    else:
        assert all(r["cluster/bytes_sent"] > 4 * n_params for r in rows)
    assert all(0 < r["cluster/bytes_received"] < 4 * n_params for r in rows)


@pytest.mark.slow
def test_observation_statistics_on_a_cluster_give_one_machines_run(two_workers, tmp_path):
    """ES with --obs-norm 1 on Pendulum-v1: the workers fold the statistics each Population carries
    and send back each counted episode's sums, so the run's metrics, statistics and theta equal
    one machine's bit for bit (chunks of 3 episodes, so the counted ones land on either worker)."""
    argv = ["--env", "Pendulum-v1", "--population", "40", "--validation-episodes", "2", "--obs-norm", "1",
            "--noise-table-size", "1000000", "--frame-budget", "30000"]  # fmt: skip
    here = run_folder(run_es.main, argv, tmp_path / "here")
    there = run_folder(run_es.main, [*argv, "--cluster", two_workers.address, "--cluster-chunk", "3"],
                       tmp_path / "there")  # fmt: skip
    assert metrics_without_clock(there) == metrics_without_clock(here)
    assert runs.read_metrics(here)[-1]["obs_norm/count"] > 0
    for key in ("obs_norm", "theta"):
        np.testing.assert_array_equal(runs.read_array(elite_files.array_path(there, key)),
                                      runs.read_array(elite_files.array_path(here, key)))  # fmt: skip


@pytest.mark.slow
def test_a_local_cluster_in_chunks_of_one_episode_gives_the_same_metrics(recorded, tmp_path):
    """local:2 starts its own workers on 127.0.0.1 (and stops them); one episode per chunk puts
    every episode's result back in its place."""
    module, argv = RUNS["ga-maze"]
    folder = run_folder(MAIN[module], [*argv, "--cluster", "local:2", "--cluster-chunk", "1"], tmp_path)
    assert metrics_without_clock(folder) == recorded["ga-maze"]
    with open(os.path.join(folder, runs.CONFIG)) as f:
        facts = json.load(f)
    assert facts["cluster"] == "local:2" and facts["workers"] == 2
    assert facts["worker device"] == "cpu"  # what the workers run, from the same round trip
    # the start names the workers' machine (each pinned to its half of this one), not the driver
    (start,) = facts["starts"]
    cpu, share = machine.cpu_facts()["model"], max(1, machine.cores() // 2)
    assert (start["cpu"], start["cores"], start["device"]) == (f"{cpu} x2", 2 * share, "cluster of 2 workers")


def test_a_clusters_start_records_its_workers_machines_added_up():
    """nevo.machine.of_workers: one start's record of a cluster's workers: each CPU model with
    its count where several workers ran, the cores added up, the devices where not the CPU."""
    xeon, epyc = {"cpu": "Xeon", "cores": 2, "device": "cpu"}, {"cpu": "EPYC", "cores": 8, "device": "cpu"}
    assert machine.of_workers([xeon]) == {"cpu": "Xeon", "cores": 2, "device": "cluster of 1 worker"}
    assert machine.of_workers([xeon, epyc, xeon]) == {
        "cpu": "EPYC x1 + Xeon x2",
        "cores": 12,
        "device": "cluster of 3 workers",
    }
    gpu = {**epyc, "device": "cuda"}
    assert machine.of_workers([epyc, gpu])["device"] == "cluster of 2 workers (cpu x1, cuda x1)"


def _maze_setup(tmp_path, n=12):
    cfg, _, _, _ = cli.parse_args(["--env", "maze", "--noise-table-size", "1100000", "--env-slots", "4"], "")
    task = tasks.task_for(cfg.env)
    spec = setup.net_for(cfg, task)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    population = Population(
        [], np.full(n, -1, np.int64), np.arange(n, dtype=np.int64) + 100, np.zeros(n, np.float32)
    )
    episodes = Episodes(np.repeat(np.arange(n, dtype=np.int64), 2), np.arange(2 * n, dtype=np.int64) + 7)
    local, _ = setup.local_evaluator(cfg, task, spec, "cpu", table, None, str(tmp_path), n)
    try:
        expected = local.run(population, episodes)
    finally:
        local.close()
    return cfg, task, table, population, episodes, expected


@pytest.mark.slow
def test_a_worker_killed_mid_generation_costs_no_evaluation(tmp_path):
    """SIGKILL one of two workers while chunks are out: its chunks run again on the other, the
    results are those of an undisturbed evaluation on one machine, and the loss is one line."""
    cfg, task, table, population, episodes, expected = _maze_setup(tmp_path)
    said = []
    with DaskProcesses(workers=2) as c:
        ev = ClusterEvaluator(
            c.address, cfg, task, None, table, len(population), 1, timeout_s=30, chunk=1, say=said.append
        )
        killed_at = []

        def progress(done, total, frames):
            if not killed_at:
                c.kill(c.workers[1])
                killed_at.append(done)

        try:
            got = ev.run(population, episodes, progress)
        finally:
            ev.close()
    assert killed_at[0] < len(episodes.ind)  # the kill came with chunks still out
    assert got.cluster["workers_lost"] == 1 and got.cluster["workers"] == 1
    assert len(said) == 1 and said[0].startswith("lost worker tcp://127.0.0.1:"), said
    assert "\n" not in said[0] and "its chunks go to the others" in said[0]
    np.testing.assert_array_equal(got.returns, expected.returns)
    np.testing.assert_array_equal(got.lengths, expected.lengths)
    np.testing.assert_array_equal(got.behaviours, expected.behaviours)


def _run_until_first_generation(c, argv, out):
    """Start run_ga in a process on cluster c; return it and its run folder once a generation ended."""
    p = subprocess.Popen(
        [sys.executable, "-m", "experiments.run_ga", *argv, "--out-dir", str(out), "--cluster", c.address,
         "--cluster-timeout", "3"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not glob.glob(os.path.join(out, "*", runs.METRICS)):
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.02)
    return p, glob.glob(os.path.join(out, "*"))[0]


@pytest.mark.parametrize("lost", ["every worker", "the scheduler"])
@pytest.mark.slow
def test_a_lost_cluster_stops_the_run_in_one_line_and_resume_finishes_it(lost, recorded, tmp_path):
    """Workers gone longer than --cluster-timeout, or the scheduler gone: exit 3 with one line,
    the checkpoint intact; --resume on one machine (or on another cluster) ends the run with
    the metrics of a run never stopped."""
    module, argv = RUNS["ga-maze"]
    with DaskProcesses(workers=1) as c:
        p, folder = _run_until_first_generation(c, argv, tmp_path / "out")
        c.kill(c.workers[0] if lost == "every worker" else c.scheduler)
        out, err = p.communicate(timeout=120)
    assert p.returncode == 3, err
    assert err.count("\n") == 1 and err.startswith("error: ") and "--resume" in err
    assert ("has been gone for 3 s" if lost == "every worker" else "lost the Dask scheduler") in err
    done = len(runs.read_metrics(folder))
    assert int(runs.load_checkpoint(folder)["generation"]) == done >= 1
    elsewhere = [] if lost == "every worker" else ["--cluster", "local:1"]
    assert run_ga.main(["--resume", folder, *elsewhere]) == 0
    assert metrics_without_clock(folder) == recorded["ga-maze"]


def _other_nevo(tmp_path):
    """A folder holding a copy of nevo whose version (and so source) differs."""
    other = tmp_path / "other"
    shutil.copytree(os.path.join(ROOT, "nevo"), other / "nevo", ignore=shutil.ignore_patterns("__pycache__"))
    # wherever nevo defines its version (nevo/__init__.py or a module of its own)
    (path,) = [p for p in (other / "nevo").glob("*.py") if '__version__ = "' in p.read_text()]
    path.write_text(path.read_text().replace('__version__ = "', '__version__ = "9.9.9+'))
    return other


@pytest.mark.slow
def test_a_worker_with_other_nevo_code_is_refused_before_any_work(tmp_path, capsys):
    """A worker whose nevo differs (here its version and so its source) says why in one line
    and leaves; with no other worker the run stops with one line and leaves no run folder."""
    other = _other_nevo(tmp_path)
    module, argv = RUNS["ga-maze"]
    with DaskProcesses(workers=0) as c:
        c.start_worker(cwd=str(other))
        c.wait_for_workers(1)
        code = run_ga.main([*argv, "--out-dir", str(tmp_path / "runs"), "--cluster", c.address,
                            "--cluster-timeout", "5"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2
    (refusal,) = [
        line for line in captured.out.splitlines() if line.startswith("refused worker tcp://127.0.0.1")
    ]
    assert "nevo" in refusal and "9.9.9+" in refusal and "source" in refusal
    assert captured.err.strip().startswith("error: no nevo worker joined") and captured.err.count("\n") == 1
    assert not os.listdir(tmp_path / "runs")


NO_NEVO = (
    r"refused worker tcp://127\.0\.0\.1:\d+: cannot import nevo \(No module named 'nevo'\); "
    r"start it where nevo is installed with `nevo worker {}`"
)


@pytest.mark.slow
def test_a_worker_that_cannot_import_nevo_is_refused_in_one_line(tmp_path, capsys):
    """Plain `dask worker` in a Python without nevo (nanny and all): one line names the
    worker and the command that starts one that imports nevo, no traceback, and the worker leaves;
    with no other worker the run stops with one line and leaves no run folder."""
    module, argv = RUNS["ga-maze"]
    with DaskProcesses(workers=0) as c:
        w = c.start_worker(nanny=True, nevo=False)
        c.wait_for_workers(1)
        code = run_ga.main([*argv, "--out-dir", str(tmp_path / "runs"), "--cluster", c.address,
                            "--cluster-timeout", "5"])  # fmt: skip
        assert w.wait(30) == 0  # it left
    captured = capsys.readouterr()
    assert code == 2
    (refusal,) = [line for line in captured.out.splitlines() if line.startswith("refused worker")]
    assert re.fullmatch(NO_NEVO.format(re.escape(c.address)), refusal), refusal
    assert "Traceback" not in captured.out + captured.err
    assert captured.err.startswith("error: no nevo worker joined") and captured.err.count("\n") == 1
    assert not os.listdir(tmp_path / "runs")


@pytest.mark.slow
def test_a_worker_that_cannot_import_nevo_joining_later_is_refused_in_one_line(tmp_path):
    """A worker without nevo that joins after the run registered its setup (Dask then sets the
    worker up as it starts) says why in one line too, and leaves."""
    cfg, task, table, _, _, _ = _maze_setup(tmp_path, n=2)
    lines = []
    with DaskProcesses(workers=0) as c:
        c.start_worker(nevo=False)

        def say(line):  # the first refusal came during registration: the second worker joins after it
            lines.append(line)
            if len(c.workers) == 1:
                c.start_worker(nanny=True, nevo=False)

        c.wait_for_workers(1)
        with pytest.raises(ClusterError, match=r"no nevo worker joined .* \(2 refused\)"):
            ClusterEvaluator(c.address, cfg, task, None, table, 2, 1, timeout_s=15, say=say)
        assert all(w.wait(30) == 0 for w in c.workers)  # both left
    assert len(lines) == 2 and all(re.fullmatch(NO_NEVO.format(re.escape(c.address)), x) for x in lines)


NS_ATARI = ["--env", "frostbite", "--algo", "ga-ns", "--net", "small", "--population", "4",
            "--truncation", "2", "--frame-cap", "200", "--noise-table-size", "1100000", "--env-slots", "2",
            "--processes", "1", "--frame-budget", "1500"]  # fmt: skip


@pytest.mark.slow
def test_novelty_search_on_atari_replays_ram_in_a_local_clusters_workers(tmp_path):
    """GA-NS on Atari replays episodes in processes of the worker's own: local:N's workers are
    not daemonic, and the run equals one on this machine."""
    one = run_folder(run_ns.main, NS_ATARI, tmp_path / "one")
    two = run_folder(run_ns.main, [*NS_ATARI, "--cluster", "local:1"], tmp_path / "cluster")
    assert metrics_without_clock(two) == metrics_without_clock(one)


@pytest.mark.slow
def test_a_daemonic_worker_runs_novelty_search_on_atari(tmp_path):
    """A worker under a nanny (Dask's default: a daemonic process, which multiprocessing forbids
    children) still starts nevo's emulator processes (they are not multiprocessing's) and reads
    each episode's final RAM: the run ends well."""
    with DaskProcesses(workers=0) as c:
        c.start_worker(nanny=True)
        c.wait_for_workers(1)
        argv = [*NS_ATARI, "--out-dir", str(tmp_path), "--cluster", c.address, "--cluster-timeout", "5"]
        assert run_ns.main(argv) == 0


@pytest.mark.slow
def test_schedulers_and_workers_listen_on_127_0_0_1_only(two_workers, tmp_path):
    """Every server a test or local:N starts: its scheduler, its workers and their HTTP ends."""
    pids = [p.pid for p in [two_workers.scheduler, *two_workers.workers]]
    cfg, task, table, population, episodes, _ = _maze_setup(tmp_path, n=2)
    ev = ClusterEvaluator("local:2", cfg, task, None, table, 2, 1)
    try:
        pids += [os.getpid(), *ev.client.run(os.getpid).values()]
        assert len(pids) == 6
        assert all(listening(pid) <= {"127.0.0.1"} for pid in pids)
        assert listening(two_workers.scheduler.pid) and listening(pids[-1])
    finally:
        ev.close()
    assert all(not psutil_alive(pid) for pid in pids[-2:])  # local:N's workers are gone


def psutil_alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_a_worker_with_other_code_joining_mid_run_is_refused_and_the_run_goes_on(tmp_path):
    """A worker that joins a running run and differs says why in one line and leaves; its chunks,
    if it was handed any, run on the others (Reschedule), and the metrics are those of the same
    run on this machine alone."""
    other = _other_nevo(tmp_path)
    _, argv = RUNS["ga-maze"]
    argv = [a if a != "7000" else "20000" for a in argv]  # long enough for the worker to join
    with DaskProcesses(workers=1) as c:
        p, folder = _run_until_first_generation(c, argv, tmp_path / "out")
        c.start_worker(cwd=str(other))
        out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert sum(line.startswith("refused worker tcp://127.0.0.1") for line in out.splitlines()) == 1
    alone = run_folder(run_ga.main, argv, tmp_path / "alone")
    assert metrics_without_clock(folder) == metrics_without_clock(alone)


def test_a_paused_worker_is_present_and_a_gone_one_lost():
    """A worker whose memory monitor paused it takes no new task but is still the cluster's: it
    is not counted in cluster/workers_lost (only a worker gone from the scheduler is), nor one
    that refused."""

    class Client:
        status = "running"

        class scheduler:
            @staticmethod
            def identity(n_workers):
                statuses = {"a": "running", "b": "paused", "c": "closing_gracefully", "d": "running"}
                return {"workers": {w: {"status": s} for w, s in statuses.items()}}

        def sync(self, call, **kwargs):
            return call(**kwargs)

        def get_events(self, topic):
            return [(0.0, {"worker": "d", "why": "other nevo code"})]

    ev = ClusterEvaluator.__new__(ClusterEvaluator)
    ev.client, ev.reported, ev.say = Client(), set(), lambda line: None
    assert ev._workers() == ({"a"}, {"a", "b"})
    assert ev.reported == {"d"}


def test_the_workers_are_asked_of_the_scheduler_not_of_the_clients_cache():
    """The cause of a rare cluster/workers_lost above 0 on a cluster that lost no worker: Dask's
    Client.scheduler_info returns the client's cached identity, which the client's own timer
    refreshes without the workers, so a look could find none and count them all lost. With that
    timer at 5 ms (2 s by default) every one of 2,000 looks must still see both workers (an
    in-process cluster: nothing listens on a port)."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
        with LocalCluster(n_workers=2, processes=False, threads_per_worker=1, dashboard_address=None) as lc:
            with Client(lc) as client:
                client.wait_for_workers(2)
                ev = ClusterEvaluator.__new__(ClusterEvaluator)
                ev.client, ev.reported, ev.say = client, set(), lambda line: None
                seen = [ev._workers() for _ in range(2000)]
    both = seen[0][0]
    assert len(both) == 2
    assert sum(s != (both, both) for s in seen) == 0


def test_fingerprints_name_what_differs():
    a, b = noise.make_table(100_000, seed=1), noise.make_table(100_000, seed=2)
    assert differences(fingerprint(a), fingerprint(a)) == ""
    why = differences(fingerprint(a), fingerprint(b))
    assert why.startswith("noise table ") and "nevo" not in why
    c = a.copy()
    c[50_000:50_100] += 1.0  # a change deep inside the table
    assert differences(fingerprint(a), fingerprint(c)).startswith("noise table")


@pytest.mark.parametrize(
    "address, message",
    [
        ("local:0", "local:N needs"),
        ("cluster.example", "not a scheduler address"),
        ("tcp://host", "not a scheduler"),
    ],
)
def test_a_bad_cluster_address_is_one_line(address, message, capsys, tmp_path):
    with pytest.raises(ValueError, match=message):
        check_address(address)
    assert run_ga.main(["--env", "CartPole-v1", "--cluster", address, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --cluster") and err.count("\n") == 1 and not os.listdir(tmp_path)


@pytest.mark.slow
def test_without_cluster_dask_is_not_imported(tmp_path):
    argv = ["--env", "CartPole-v1", "--frame-budget", "2000", "--out-dir", str(tmp_path)]
    code = (
        f"import sys; from experiments import run_ga; assert run_ga.main({argv!r}) == 0; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("forgiven", [True, False])
def test_a_stop_before_dasks_call_starts_logs_nothing(forgiven, caplog):
    """A stop signal that reaches the driver while distributed.utils.sync waits for its event loop
    to start the call (the loop busy) makes Dask's cancel callback fail with a NameError, which
    Tornado logs (once on stderr in CI, after a stopped cluster run's one line). With nevo's filter
    the record is gone; without it (the control) it is there, so the moment is the one that fails."""
    import asyncio
    import logging
    import signal
    import threading

    from distributed.utils import LoopRunner, sync

    from nevo.cluster import connection as cluster_connection
    from nevo.runs.stop import Stopped, on_signals

    logger = logging.getLogger("tornado.application")
    before = list(logger.filters)
    if forgiven:
        cluster_connection.forgive_sync_cancel_race()
    else:
        for f in before:
            logger.removeFilter(f)

    async def call():
        await asyncio.sleep(0.05)

    runner = LoopRunner(asynchronous=False)
    runner.start()
    try:
        with caplog.at_level(logging.ERROR, logger="tornado.application"):
            runner.loop.add_callback(time.sleep, 0.6)  # the loop busy: sync's call waits
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
            with on_signals(), pytest.raises(Stopped):
                sync(runner.loop, call)
            time.sleep(0.8)  # the loop free again: the cancel callback runs
    finally:
        runner.stop()
        for f in list(logger.filters):
            logger.removeFilter(f)
        for f in before:
            logger.addFilter(f)
    failed = [r for r in caplog.records if r.name == "tornado.application"]
    if forgiven:
        assert failed == []
    else:
        assert len(failed) == 1 and isinstance(failed[0].exc_info[1], NameError)


def test_without_dask_the_cluster_and_the_worker_are_one_line_naming_the_install(
    tmp_path, monkeypatch, capsys
):
    """A plain `pip install nevo` has no Dask: --cluster (before any folder) and `nevo worker`
    (even its --help) say so in one line with the pip install, not a ModuleNotFoundError."""
    import importlib.util

    from nevo.tools import worker

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "distributed" else real(name, *a)
    )
    want = "Dask distributed is not installed: pip install 'nevo[cluster]' (or distributed)"
    with pytest.raises(ValueError, match=re.escape(f"--cluster: {want}")):
        check_address("local:2")
    code = run_ga.main(["--env", "CartPole-v1", "--cluster", "local:2", "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: --cluster: {want}"] and not os.listdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        worker.main(["--help"])
    assert e.value.code == 2 and capsys.readouterr().err.strip().splitlines() == [
        f"error: nevo worker: {want}"
    ]


def test_a_local_cluster_that_does_not_start_is_one_line(monkeypatch):
    """LocalCluster failing (no ports, processes or memory) is a ClusterError of one line."""
    import distributed

    from nevo.cluster.connection import ClusterConnection

    def refuse(**kwargs):
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    with pytest.raises(ClusterError) as e:
        ClusterConnection("local:2", None, None, None, None, 4, 1)
    assert str(e.value).startswith(
        "--cluster local:2: the local cluster did not start ("
    ) and "\n" not in str(e.value)
