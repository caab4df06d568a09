"""How a run stops before its budget (nevo.runs.stop, nevo.runs.WriteFailed): a stop signal or a
write that fails ends it in one line saying where it stopped and the --resume command, the files
already written whole, and the resumed run gives the uninterrupted run's generations."""

import concurrent.futures
import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from experiments import run_ga
from experiments.chaos import dask_workers, marked
from nevo import runs
from nevo.atari import worker as emulator_worker
from nevo.loops import progress
from tests.fixtures.record import PATH, RUNS
from tests.helpers import default_sigint, metrics_without_clock, run_folder
from tests.tiny import ATARI


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory):
    """A maze GA run stopped after a few generations (its folder, to copy), and the whole run's metrics."""
    with open(PATH) as f:
        whole = json.load(f)["ga-maze"]
    _, argv = RUNS["ga-maze"]
    folder = run_folder(
        run_ga.main, [a if a != "7000" else "2000" for a in argv], tmp_path_factory.mktemp("m")
    )
    return folder, whole


def _copy(folder, tmp_path):
    dest = str(tmp_path / os.path.basename(folder))
    shutil.copytree(folder, dest)
    return dest


def _resumes_to_the_whole_run(folder, whole):
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 0
    assert metrics_without_clock(folder) == whole


@pytest.fixture
def python_ctrl_c():
    """SIGINT handled as Python does from a terminal, even where the tests run with it ignored (a
    job started in the background: a run leaves an ignored SIGINT alone, as nohup asks)."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _signal_at(monkeypatch, signum, generation, phase):
    """Send this process signum when the loop starts `phase` ("train", "validate") of generation."""
    start = progress.Progress.start_phase

    def start_phase(self, gen, name, frames):
        start(self, gen, name, frames)
        if (gen, name) == (generation, phase):
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(progress.Progress, "start_phase", start_phase)


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.usefixtures("python_ctrl_c")
def test_a_stop_signal_mid_generation_stops_at_once_in_one_line(signum, status, maze_run, tmp_path,
                                                                 monkeypatch, capsys):  # fmt: skip
    """SIGTERM or SIGINT while a generation is evaluated: exit 128 + the signal, one line naming
    the generation and the exact --resume command, the generation in flight not written."""
    folder = _copy(maze_run[0], tmp_path)
    first = len(runs.read_metrics(folder))
    _signal_at(monkeypatch, signum, first + 1, "validate")
    capsys.readouterr()
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == status
    out, err = capsys.readouterr()
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT (Ctrl-C)"
    assert out.splitlines()[-1] == (
        f"stopped by {name} in generation {first + 1}; the run folder holds every generation before "
        f"{first + 1}; continue with: nevo train --resume {folder}"
    )
    assert err == ""
    assert [r["generation"] for r in runs.read_metrics(folder)] == list(range(first + 1))
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]
    monkeypatch.undo()
    _resumes_to_the_whole_run(folder, maze_run[1])


def test_a_stop_signal_while_a_generation_is_written_waits_for_its_files(maze_run, tmp_path, monkeypatch,
                                                                          capsys):  # fmt: skip
    """A signal that arrives while a generation's row, elite and checkpoint are written stops the
    run once they all are: never half a generation."""
    folder = _copy(maze_run[0], tmp_path)
    first = len(runs.read_metrics(folder))
    append = runs.append_metrics

    def append_metrics(run_dir, row):
        if row["generation"] == first:
            os.kill(os.getpid(), signal.SIGTERM)
        append(run_dir, row)

    monkeypatch.setattr(runs, "append_metrics", append_metrics)
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 143
    assert (
        f"in generation {first + 1}; the run folder holds every generation before {first + 1};"
        in (capsys.readouterr().out.splitlines()[-1])
    )
    assert int(runs.load_checkpoint(folder)["generation"]) == first + 1
    assert json.load(open(os.path.join(folder, runs.ELITE)))["generation"] == first
    monkeypatch.undo()
    _resumes_to_the_whole_run(folder, maze_run[1])


def _fails(monkeypatch, owner, name, code, after):
    """owner.name works `after` times, then raises OSError(code) for good (a disk that filled up)."""
    real, calls = getattr(owner, name), []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) > after:
            if name == "savez":  # half a file first, as a full disk leaves it
                args[0].write(b"PK\x03\x04 cut")
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, failing)


@pytest.mark.parametrize(
    "owner, name, code, after, file, cause",
    [
        (np, "savez", errno.ENOSPC, 3, runs.CHECKPOINT, "no space left on device (ENOSPC); "),
        (
            os,
            "fsync",
            errno.EDQUOT,
            3,
            runs.BEHAVIOURS,
            "disk quota exceeded (EDQUOT); ",
        ),  # a generation's first
        (
            os,
            "fsync",
            errno.EDQUOT,
            7,
            runs.ELITES,
            "disk quota exceeded (EDQUOT); ",
        ),  # after its metrics line
        (os, "replace", errno.EROFS, 3, runs.ELITE, "read-only file system (EROFS); "),  # after behaviours
    ],
)
def test_a_failed_write_stops_the_run_in_one_line(owner, name, code, after, file, cause, maze_run, tmp_path,
                                                   monkeypatch, capsys):  # fmt: skip
    """No space, no quota, no permission: exit 4, one line naming the file, the cause and what to
    do, no temporary file left, the files written before whole; freed, the run resumes to the
    uninterrupted one."""
    folder = _copy(maze_run[0], tmp_path)
    first = len(runs.read_metrics(folder))
    _fails(monkeypatch, owner, name, code, after)
    capsys.readouterr()
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 4
    out, err = capsys.readouterr()
    monkeypatch.undo()
    assert "Traceback" not in out + err and err.count("\n") == 1, err
    held = int(runs.load_checkpoint(folder)["generation"])
    remedy = "free space" if code != errno.EROFS else "make the folder writable"
    assert err == (
        f"error: cannot write {os.path.join(folder, file)}: {cause}the run folder holds every generation "
        f"before {held}: {remedy}, then continue with: nevo train --resume {folder}\n"
    )
    assert held >= first and not [n for n in os.listdir(folder) if n.endswith(".tmp")]
    rows = runs.read_metrics(folder)
    assert metrics_without_clock(folder) == maze_run[1][: len(rows)]
    _resumes_to_the_whole_run(folder, maze_run[1])


def test_a_new_run_where_no_folder_can_be_made_says_so(tmp_path, monkeypatch, capsys):
    def denied(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "makedirs", denied)
    _, argv = RUNS["ga-maze"]
    assert run_ga.main([*argv, "--out-dir", str(tmp_path / "runs")]) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {tmp_path / 'runs'}{os.sep}maze__ga__0__") and err.endswith(
        ": permission denied (EACCES); nothing of the run was written: make the folder writable, then start "
        "it again\n"
    )


def test_a_metrics_row_that_fails_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    runs.append_metrics(str(tmp_path), {"generation": 0})
    before = (tmp_path / runs.METRICS).read_bytes()
    _fails(monkeypatch, os, "fsync", errno.ENOSPC, 0)
    with pytest.raises(runs.WriteFailed, match="no space left on device"):
        runs.append_metrics(str(tmp_path), {"generation": 1})
    assert (tmp_path / runs.METRICS).read_bytes() == before


@pytest.fixture(scope="module")
def atari_run(tmp_path_factory):
    """The tiny Atari GA run, uninterrupted (4 generations)."""
    out = tmp_path_factory.mktemp("atari")
    return run_folder(run_ga.main, [*ATARI, "--frame-budget", "16000"], out)


def _left_behind(mark: str) -> list[int]:
    """Processes whose environment holds mark (a run's children inherit it)."""
    return marked(mark)


def _atari(out, *args):
    """The command of the tiny Atari GA run with args, its run folder made in out."""
    return [sys.executable, "-m", "experiments.run_ga", *ATARI, *args, "--out-dir", out]


def _started(cmd, in_a_thread=False):
    """(the process, the environment mark its children inherit) of cmd started in a subprocess,
    SIGINT at its default, stdout and stderr piped as text. in_a_thread: started from a thread,
    where no Python may run between fork and exec (preexec_fn); SIGINT is then the child's default
    by _children_take_sigint_at_its_default."""
    mark = f"NEVO_STOP_TEST={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=None if in_a_thread else default_sigint)  # fmt: skip
    return proc, mark


@contextlib.contextmanager
def _children_take_sigint_at_its_default():
    """While in it, a child this process starts begins with SIGINT at its default: a handled signal
    is reset to its default by exec, where an ignored one (tests run in the background) stays
    ignored. (In the main thread.)"""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _ended(proc, signum, pid=None):
    """proc sent signum (or, given pid, that one of its processes sent it) and waited for, at most 60 s:
    (its stdout, its stderr, seconds from the signal to its end)."""
    if pid is None:
        proc.send_signal(signum)
    else:
        os.kill(pid, signum)
    sent = time.monotonic()
    stdout, stderr = proc.communicate(timeout=60)
    return stdout, stderr, time.monotonic() - sent


def _stopped(cmd, signum, delay, in_a_thread=False):
    """cmd (a tiny Atari run, see _atari) started by _started and sent signum delay seconds after its
    header line: (the process, its mark, its stdout after the header, its stderr, seconds from the
    signal to its end)."""
    proc, mark = _started(cmd, in_a_thread)
    header = proc.stdout.readline()  # the run has begun: its stop handlers are in place
    assert header.startswith("nevo ga | frostbite"), header
    time.sleep(delay)
    return (proc, mark, *_ended(proc, signum))


def _atari_run_after_its_first_generation(tmp_path):
    """(the process, its run folder, the environment mark its children inherit) of the tiny Atari
    run started by _started (in a subprocess, SIGINT at its default), once its first generation is
    written."""
    out = str(tmp_path / "runs")
    proc, mark = _started(_atari(out, "--frame-budget", "16000"))
    folder, deadline = None, time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        folders = os.listdir(out) if os.path.isdir(out) else []
        if folders and runs.read_metrics(folder := os.path.join(out, folders[0])):
            break
        time.sleep(0.05)
    return proc, folder, mark


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stop_signal_ends_an_atari_run_and_everything_it_started(signum, status, atari_run, tmp_path):
    """SIGTERM or SIGINT to a running Atari run: within seconds, exit 128 + the signal, one line,
    nothing on stderr, no process of it left; --resume gives the
    uninterrupted run's generations."""
    proc, folder, mark = _atari_run_after_its_first_generation(tmp_path)
    stdout, stderr, took = _ended(proc, signum)
    assert took < 10
    assert proc.returncode == status, stderr
    assert stderr == "" and stdout.splitlines()[-1].startswith(f"stopped by {signal.Signals(signum).name}")
    assert stdout.splitlines()[-1].endswith(f"; continue with: nevo train --resume {folder}")
    assert len(runs.read_metrics(folder)) < 4, "the run finished before the signal"
    assert _left_behind(mark) == []
    assert run_ga.main(["--resume", folder]) == 0
    assert metrics_without_clock(folder) == metrics_without_clock(atari_run)


@pytest.mark.slow
def test_an_emulator_process_killed_mid_run_is_one_line_and_the_run_resumes(atari_run, tmp_path):
    """kill -9 of one of a running Atari run's emulator processes: the run stops within seconds,
    exit 5, one line on stderr naming the process, no process of it left; --resume gives the
    uninterrupted run's generations."""
    proc, folder, mark = _atari_run_after_its_first_generation(tmp_path)

    def emulators():
        found = []
        for pid in _left_behind(mark):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if emulator_worker.__name__.encode() in f.read():  # the module a worker runs
                        found.append(pid)
            except OSError:
                pass
        return found

    victim = emulators()[0]
    stdout, stderr, took = _ended(proc, signal.SIGKILL, victim)
    assert took < 10
    assert proc.returncode == 5, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: emulator process ") and f"(pid {victim}) died (killed by signal 9)" in line
    assert line.endswith(f": continue with nevo train --resume {folder}")
    assert _left_behind(mark) == []
    assert run_ga.main(["--resume", folder]) == 0
    assert metrics_without_clock(folder) == metrics_without_clock(atari_run)


SECOND_STOP = """
import os, signal, time
from nevo.runs import stop
with stop.on_signals():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    finally:  # unwinding (a drain, the emulators' close): a second Ctrl-C ends at once
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        print("not reached")
"""


def test_a_second_stop_while_the_first_unwinds_ends_at_once_in_one_line():
    """SIGTERM, then Ctrl-C while the run unwinds: exit 130 at once with one line, no traceback.
    (SIGINT at its default in the child, as from a terminal: a test run started in the background
    has it ignored, which a run leaves alone.)"""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SECOND_STOP], capture_output=True, text=True, timeout=60,
                          preexec_fn=default_sigint)  # fmt: skip
    assert time.monotonic() - t0 < 4
    assert done.returncode == 130 and done.stdout == ""
    assert done.stderr.startswith("stopped by SIGINT (Ctrl-C) a second time: ended at once; the run folder")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_stops_at_random_moments_end_every_pipeline_in_one_line_within_10_s(atari_run, tmp_path):
    """15 stops at moments drawn at random (a fixed seed, printed on failure) 0-4 s after a tiny
    Atari run's header line (its emulators' start and its first generations), 5 in each pipeline
    (workers, lockstep, overlap), SIGTERM and SIGINT in turn, two runs at a time (each run is about
    one core's work: a run and its one emulator process take turns): each ends within 10 s with
    exit 128 + the signal, its one line naming --resume (also while the emulators start), nothing
    on stderr, no process of the run left; one resumed run per pipeline gives the uninterrupted
    run's metrics. (When it drew 21, all 21 stopped mid-run, beside a training run on 2 cores.)"""
    rng = random.Random(55)
    budget = ["--frame-budget", "80000"]  # 20 generations: the moments fall well inside the run
    pipelines, signals = ("workers", "lockstep", "overlap"), (signal.SIGTERM, signal.SIGINT)
    trials = [(t, pipelines[t % 3], signals[t // 3 % 2], rng.uniform(0.0, 4.0)) for t in range(15)]

    def stop(trial, pipeline, signum, delay):
        """The trial's run folder and its last line, or None where it finished first."""
        out = str(tmp_path / f"runs{trial}")
        said = f"trial {trial}: {pipeline}, {signal.Signals(signum).name} {delay:.2f} s after the header"
        cmd = _atari(out, *budget, "--pipeline", pipeline)
        proc, mark, rest, stderr, took = _stopped(cmd, signum, delay, in_a_thread=True)
        if "\ndone: " in rest:  # it finished first (the signal may meet Python's own exit: killed)
            assert proc.returncode in (0, -signum) and stderr == "", f"{said}: {stderr}"
            return None
        assert took < 10, said
        assert proc.returncode == 128 + signum, f"{said}: {stderr}"
        assert stderr == "", f"{said}: {stderr}"
        assert _left_behind(mark) == [], said
        (name,) = os.listdir(out)
        folder, last = os.path.join(out, name), rest.splitlines()[-1]
        assert last.startswith(f"stopped by {signal.Signals(signum).name}"), f"{said}: {rest}"
        assert last.endswith(f"; continue with: nevo train --resume {folder}"), f"{said}: {last}"
        return folder, last.split("; ")[0]

    with _children_take_sigint_at_its_default(), concurrent.futures.ThreadPoolExecutor(2) as lanes:
        ended = list(lanes.map(lambda t: stop(*t), trials))
    stopped = [e for e in ended if e is not None]
    print("\n".join(last for _, last in stopped))
    assert len(stopped) >= 14, "too few runs stopped before their end: draw earlier moments"
    for (trial, pipeline, _, _), e in list(zip(trials, ended))[-3:]:  # the last of each pipeline
        assert e is not None, f"trial {trial} ({pipeline}) finished before its stop"
        assert run_ga.main(["--resume", e[0], "--frame-budget", "16000"]) == 0, pipeline
        whole = metrics_without_clock(atari_run)  # the resumed run is the uninterrupted one
        assert metrics_without_clock(e[0])[: len(whole)] == whole, pipeline


@pytest.mark.slow
@pytest.mark.parametrize("where", ["local:2", "a scheduler"])
def test_stops_at_random_moments_end_a_cluster_run_in_one_line_within_10_s(where, atari_run, tmp_path):
    """A run on a cluster (local:2, whose workers are the run's own processes and write to its
    terminal; or a scheduler with two workers of the test's), stopped by SIGTERM, then SIGINT, at a
    moment drawn 0-6 s after its header: within 10 s, exit 128 + the signal, its one line naming
    --resume, nothing on stderr (no worker's log of the chunks that fail as the cluster closes), no
    process of the run left; resumed on this machine it gives the uninterrupted run's metrics."""
    from tests.dask_procs import DaskProcesses

    rng = random.Random(56 if where == "local:2" else 57)
    with contextlib.ExitStack() as stack:
        address = where if where == "local:2" else stack.enter_context(DaskProcesses(workers=2)).address
        for trial, signum in enumerate((signal.SIGTERM, signal.SIGINT)):
            out, delay = str(tmp_path / f"runs{trial}"), rng.uniform(0.0, 6.0)
            said = f"{where}: {signal.Signals(signum).name} {delay:.2f} s after the header"
            cmd = _atari(out, "--frame-budget", "40000", "--cluster", address)
            proc, mark, rest, stderr, took = _stopped(cmd, signum, delay)
            assert took < 10, said
            assert proc.returncode == 128 + signum and stderr == "", f"{said}: {stderr}"
            (name,) = os.listdir(out)
            folder, last = os.path.join(out, name), rest.splitlines()[-1]
            assert last.startswith(f"stopped by {signal.Signals(signum).name}"), f"{said}: {rest}"
            assert last.endswith(f"; continue with: nevo train --resume {folder}"), f"{said}: {last}"
            assert _left_behind(mark) == [], said
    assert run_ga.main(["--resume", folder, "--frame-budget", "16000"]) == 0
    whole = metrics_without_clock(atari_run)
    assert metrics_without_clock(folder)[: len(whole)] == whole


@pytest.mark.slow
@pytest.mark.parametrize("when", ["set up", "importing"])
def test_ctrl_c_in_a_terminal_stops_a_local_cluster_run_in_one_line(when, tmp_path):
    """Ctrl-C in a terminal signals the whole foreground process group, the local:2 cluster's
    worker processes too, one of them started again by its nanny after it was killed (once nevo's
    setup has run in it, or while it still imports Dask): the run ends in one line naming
    --resume, with nothing on stderr (no worker's KeyboardInterrupt traceback) and no process
    left."""
    out = str(tmp_path / "runs")
    mark = f"NEVO_STOP_TEST={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    cmd = _atari(out, "--frame-budget", "40000", "--cluster", "local:2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint, start_new_session=True)  # fmt: skip
    header = proc.stdout.readline()
    assert header.startswith("nevo ga | frostbite"), header
    before = set(dask_workers(proc.pid))
    (first, *_) = before
    os.kill(first, signal.SIGKILL)  # (its nanny starts it again, and nevo's setup runs in it again)
    if when == "set up":
        time.sleep(6.0)
    else:  # the moment its new process has begun to import
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not set(dask_workers(proc.pid)) - before:
            time.sleep(0.01)
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # (a terminal's Ctrl-C: the whole group)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and stderr == "", stderr
    (name,) = os.listdir(out)
    last = stdout.splitlines()[-1]
    assert last.startswith("stopped by SIGINT (Ctrl-C)") and last.endswith(
        f"; continue with: nevo train --resume {os.path.join(out, name)}"
    ), stdout
    assert _left_behind(mark) == []
