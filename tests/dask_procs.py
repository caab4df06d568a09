"""A Dask scheduler and workers as processes of the test's own, on 127.0.0.1 only, each bounded
in time (the scheduler's idle timeout, the workers' lifetime) and stopped by process id by the
test that started them. A worker imports nevo only from the folder it starts in (`python -m`
puts that folder on its path), as on a cluster: never from the test's environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT_S = 900  # no process of a test outlives this, whatever happens to the test


def environment() -> dict:
    """The test's environment without PYTHONPATH: what a process imports depends on its folder."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker_process(dask_worker=None) -> dict:
    """For Client.run on a worker: is its process daemonic, its thread count, the nevo it imports."""
    import multiprocessing

    import nevo

    return {"daemon": multiprocessing.current_process().daemon, "nthreads": dask_worker.state.nthreads,
            "nevo": nevo.__file__}  # fmt: skip


class DaskProcesses:
    """`with DaskProcesses(workers=2) as c:` a scheduler at c.address and its workers."""

    def __init__(self, workers: int = 2, worker_cwd: str = ROOT, log_dir: str | None = None,
                 port: int | None = None, scheduler_options: list[str] | None = None):  # fmt: skip
        """scheduler_options: `dask scheduler`'s options, which give it port (default: 127.0.0.1 only)."""
        self.n_workers, self.worker_cwd, self.log_dir = workers, worker_cwd, log_dir
        self.port = port or free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler_options = scheduler_options or [
            "--host", "127.0.0.1", "--port", str(self.port),
            "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
        ]  # fmt: skip
        self.scheduler, self.workers = None, []

    def _start(self, args, cwd, name):
        log = open(os.path.join(self.log_dir, name + ".log"), "w") if self.log_dir else subprocess.DEVNULL
        # a session of its own: its process group id is its pid, which also names a nanny's worker
        return subprocess.Popen([sys.executable, "-m", *args], cwd=cwd, stdout=log, stderr=log,
                                env=environment(), start_new_session=True)  # fmt: skip

    def start_scheduler(self):
        self.scheduler = self._start(
            ["distributed.cli.dask_scheduler", *self.scheduler_options, "--idle-timeout", f"{LIMIT_S}s"],
            ROOT, "scheduler")  # fmt: skip

    def start_worker(self, cwd: str | None = None, nanny: bool = False) -> subprocess.Popen:
        """One worker process, one thread; without a nanny (default) a kill is final."""
        w = self._start(
            ["distributed.cli.dask_worker", self.address, "--host", "127.0.0.1", "--nthreads", "1",
             "--nanny" if nanny else "--no-nanny", "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
             "--lifetime", f"{LIMIT_S}s", "--name", f"w{len(self.workers)}"],
            cwd or self.worker_cwd, f"worker{len(self.workers)}")  # fmt: skip
        self.workers.append(w)
        return w

    def start_nevo_worker(self, cwd: str = ROOT) -> subprocess.Popen:
        """A worker started as README and docs/cluster.md say (`python -m experiments.cluster_worker
        ADDRESS` in the checkout: a nanny and its worker process), on 127.0.0.1, with a lifetime."""
        w = self._start(
            ["experiments.cluster_worker", self.address, "--host", "127.0.0.1", "--lifetime", f"{LIMIT_S}s",
             "--name", f"w{len(self.workers)}"], cwd, f"worker{len(self.workers)}")  # fmt: skip
        self.workers.append(w)
        return w

    def wait_for_workers(self, n: int, timeout: float = 60) -> None:
        from distributed import Client

        with Client(self.address, timeout="30s") as c:
            c.wait_for_workers(n, timeout=timeout)

    def __enter__(self):
        self.start_scheduler()
        for _ in range(self.n_workers):
            self.start_worker()
        if self.n_workers:
            self.wait_for_workers(self.n_workers)
        return self

    def kill(self, proc) -> None:
        """SIGKILL proc and the processes it started (a nanny's worker): its process group."""
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        self._kill_group(proc)

    @staticmethod
    def _kill_group(proc) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group made by start_new_session: pgid == pid
        except (ProcessLookupError, PermissionError):  # none of it is left
            pass

    def __exit__(self, *exc):
        for p in [*self.workers, self.scheduler]:
            if p is not None and p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + 10
        for p in [*self.workers, self.scheduler]:
            if p is not None:
                try:
                    p.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pass
                self.kill(p)  # what is left of it, a nanny's worker included
