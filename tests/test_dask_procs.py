"""The tests' own Dask processes: none outlives the test's process, however that process ends."""

import os
import signal
import subprocess
import sys
import time

from tests.dask_procs import ROOT, free_port

STARTER = """
import sys, time
from tests.dask_procs import DaskProcesses
d = DaskProcesses(workers=1, port=int(sys.argv[1])).__enter__()
print(d.scheduler.pid, d.workers[0].pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """pid exists and is not a zombie waiting for its parent."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_tests_scheduler_and_workers_end_with_it():
    """A process that started a scheduler and a worker, killed by SIGKILL (no handler, no exit
    code of its own runs): both end within 10 s, not at their idle timeout or lifetime."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(free_port())], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        pids = [int(p) for p in starter.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
    finally:
        starter.kill()
        starter.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == []
