"""A Dask scheduler and workers as processes of the test's own, on 127.0.0.1 only, each bounded
in time (the scheduler's idle timeout, the workers' lifetime) and stopped by process id by the
test that started them; if the test's process dies first (a SIGTERM, a SIGKILL), the kernel
kills each of them (`PR_SET_PDEATHSIG`), so none waits for its bound. Nothing is put on
their PYTHONPATH: they import nevo as any process of this Python does (`pip install -r
requirements.txt` installs the checkout in place), or, started `without_nevo`, not at all."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIMIT_S = 900  # no process of a test outlives this, whatever happens to the test


def environment() -> dict:
    """The test's environment without PYTHONPATH: what a process imports depends on its folder."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def without_nevo(module: str) -> list[str]:
    """`python -m module` for a Python where nevo is not installed: site's .pth files, among them
    the editable install's, are not read (-S, which multiprocessing passes on to the processes it
    spawns), and only site-packages, where Dask and the rest are, goes on the path (not the
    current folder, which may be a checkout)."""
    paths = list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    run = f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    code = f"import runpy, sys; sys.path[:] = [p for p in sys.path if p] + {paths!r}; {run}"  # not cwd
    return [sys.executable, "-S", "-c", code]


# Exec'd in front of every process: asks Linux for SIGKILL when its parent (the test's process)
# dies, a request that survives the exec of the real command; a parent already gone ends it at once.
# SIGKILL, not SIGTERM: a worker's graceful close could wait on its gone scheduler (one outlived
# the test's 10 s in a CI run).
ORPHAN_GUARD = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit('the test that started this process is gone')\n"
    "os.execv(sys.argv[2], sys.argv[2:])"
)


def orphan_guarded(argv: list[str]) -> list[str]:
    """argv, run so that it is killed when the process that starts it dies."""
    return [sys.executable, "-S", "-c", ORPHAN_GUARD, str(os.getpid()), *argv]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(pid: int) -> set:
    """The addresses on which process pid listens."""
    import psutil

    return {c.laddr.ip for c in psutil.Process(pid).net_connections("inet") if c.status == psutil.CONN_LISTEN}


def worker_process(dask_worker=None) -> dict:
    """For Client.run on a worker: is its process daemonic, its thread count, the nevo it imports."""
    import multiprocessing

    import nevo

    return {"daemon": multiprocessing.current_process().daemon, "nthreads": dask_worker.state.nthreads,
            "nevo": nevo.__file__}  # fmt: skip


class DaskProcesses:
    """`with DaskProcesses(workers=2) as c:` a scheduler at c.address and its workers."""

    def __init__(self, workers: int = 2, worker_cwd: str = ROOT, log_dir: str | None = None,
                 port: int | None = None, scheduler_options: list[str] | None = None,
                 scheduler_nevo: bool = True):  # fmt: skip
        """scheduler_options: `dask scheduler`'s options, which give it port (default: 127.0.0.1 only);
        scheduler_nevo=False: the scheduler runs in a Python without nevo."""
        self.n_workers, self.worker_cwd, self.log_dir = workers, worker_cwd, log_dir
        self.scheduler_nevo = scheduler_nevo
        self.port = port or free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler_options = scheduler_options or [
            "--host", "127.0.0.1", "--port", str(self.port),
            "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
        ]  # fmt: skip
        self.scheduler, self.workers = None, []

    def _start(self, args, cwd, name, nevo=True):
        """`python -m args` (nevo=False: in a Python without nevo) in cwd, in a session of its own,
        in the test's environment."""
        log = open(os.path.join(self.log_dir, name + ".log"), "w") if self.log_dir else subprocess.DEVNULL
        python = [sys.executable, "-m", args[0]] if nevo else without_nevo(args[0])
        # a session of its own: its process group id is its pid, which also names a nanny's worker
        return subprocess.Popen(orphan_guarded([*python, *args[1:]]), cwd=cwd, stdout=log, stderr=log,
                                env=environment(), start_new_session=True)  # fmt: skip

    def start_scheduler(self):
        self.scheduler = self._start(
            ["distributed.cli.dask_scheduler", *self.scheduler_options, "--idle-timeout", f"{LIMIT_S}s"],
            ROOT, "scheduler", self.scheduler_nevo)  # fmt: skip

    def start_worker(self, cwd: str | None = None, nanny: bool = False, nevo: bool = True):
        """One worker process (its Popen), one thread; without a nanny (default) a kill is final."""
        w = self._start(
            ["distributed.cli.dask_worker", self.address, "--host", "127.0.0.1", "--nthreads", "1",
             "--nanny" if nanny else "--no-nanny", "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
             "--lifetime", f"{LIMIT_S}s", "--name", f"w{len(self.workers)}",
             "--memory-limit", "0"],  # no pause by a memory monitor whose limit depends on the host
            cwd or self.worker_cwd, f"worker{len(self.workers)}", nevo)  # fmt: skip
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
