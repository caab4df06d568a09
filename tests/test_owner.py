"""One owner per run folder (nevo.runs.owner): a second process that wants a held folder is
refused before it writes anything; the lock goes with its process; reading never waits."""

import errno
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from experiments import run_ga
from nevo import load_policy, runs
from nevo.runs import owner
from tests.fixtures.record import RUNS
from tests.helpers import run_folder

HOLD = "import sys; from nevo.runs import owner; owner.claim(sys.argv[1]); print('held', flush=True); input()"


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory):
    """A finished maze GA run of a few generations."""
    _, argv = RUNS["ga-maze"]
    return run_folder(run_ga.main, [a if a != "7000" else "2000" for a in argv], tmp_path_factory.mktemp("m"))


def _holder(folder):
    """Another process that holds folder until its stdin closes."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, folder], stdin=pipe, stdout=pipe, text=True, cwd=root
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def _bytes(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def test_a_second_process_is_refused_in_one_line_and_the_folder_is_untouched(maze_run, capsys):
    """--resume of a folder that another process holds: exit 2, one line naming the folder and the
    holder's process id and host, and every file of the folder byte for byte as it was."""
    proc = _holder(maze_run)
    try:
        before = _bytes(maze_run)
        capsys.readouterr()
        assert run_ga.main(["--resume", maze_run, "--frame-budget", "7000"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1, err
        assert err.startswith(
            f"error: {maze_run}: in use by process {proc.pid} on host {socket.gethostname()}"
        )
        assert _bytes(maze_run) == before
        # reading needs no lock and never waits
        assert load_policy(maze_run).spec.n_params > 0 and runs.read_metrics(maze_run)
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_goes_with_its_process(maze_run, tmp_path):
    """A holder killed with SIGKILL leaves no stale lock: the folder can be taken at once."""
    proc = _holder(maze_run)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    owner.claim(maze_run)
    try:
        facts = json.load(open(os.path.join(maze_run, owner.LOCK)))
        assert facts["pid"] == os.getpid() and facts["host"] == socket.gethostname()
    finally:
        owner.release(maze_run)


def test_a_process_claims_its_own_folder_once(tmp_path):
    """claim is a no-op where this process holds the folder already; release lets it go."""
    owner.claim(str(tmp_path))
    owner.claim(str(tmp_path))  # no deadlock on itself
    owner.release(str(tmp_path))
    fd = os.open(tmp_path / owner.LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
    finally:
        os.close(fd)


def test_a_file_system_without_locks_warns_once_and_goes_on(tmp_path, monkeypatch):
    said = []

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    owner.claim(str(tmp_path), said.append)
    owner.release(str(tmp_path))
    assert said == [
        f"warning: {tmp_path}: its file system cannot lock files (ENOLCK); nothing stops a second process "
        "from running this folder at the same time"
    ]
