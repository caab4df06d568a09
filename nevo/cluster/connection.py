"""The driver's connection to a Dask cluster (`--cluster`), which nevo.cluster.evaluator's
ClusterEvaluator extends to play a generation's episodes: the scheduler reached or a local cluster
started, each worker set up once for the run (a worker plugin, nevo.cluster.worker's
Setup), the workers followed as they join, refuse and leave, and the one line of every way the
cluster fails. Dask is imported only once a connection is made.

- Before any work, each worker compares its nevo version, nevo's source and its noise table with
  the driver's, and a worker that differs refuses (one line in the driver's output) and leaves;
  so does a worker that cannot import nevo at all (the line names `nevo worker
  ADDRESS`, which starts one that can).
- The scheduler unpickles every task it is sent, and nevo's tasks name nevo's functions: a
  scheduler whose Python cannot import nevo cannot take them. The driver asks it first, and
  says so in one line (with the fix) before any run folder is written.
- Every way the cluster fails (no scheduler at the address, one that cannot import nevo, no
  worker, the scheduler lost, a chunk that fails or keeps killing its workers) is a
  ClusterError: one line that names the cause and the fix, never a traceback.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid

from nevo.settings import raised


class ClusterError(RuntimeError):
    """The cluster cannot go on (scheduler lost, no workers for too long, a chunk that keeps
    killing workers); the run stops with this one line, its last checkpoint intact."""


LOCAL = "local:"
# how to start what a cluster needs (README, docs/cluster.md), given the scheduler's address
SCHEDULER_COMMAND = "dask scheduler --host {} --port {}"
INSTALL = "`pip install -r requirements.txt` in a nevo checkout"


def one_line(text: str) -> str:
    """text (an exception's, perhaps of several lines) as one line."""
    return " ".join(str(text).split())


class _SyncCancelRace(logging.Filter):
    """Drops one log record of Dask's: the traceback of a NameError in the callback that
    distributed.utils.sync schedules to cancel its call when a KeyboardInterrupt (nevo's stop
    signals are of that kind) reaches the waiting thread before the event loop has started the
    call (distributed 2026.8 reads the call's future before it is assigned). Tornado logs it to
    stderr, after the run's one line; the run stops the same (its client, closed as it unwinds,
    ends the call)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, NameError) or error.__traceback__ is None:
            return True
        tb = error.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code
        dask_utils = code.co_filename.endswith(os.path.join("distributed", "utils.py"))
        return not (code.co_name == "cancel" and dask_utils)


def forgive_sync_cancel_race() -> None:
    """Put _SyncCancelRace on Tornado's logger of failed callbacks (once per process)."""
    logger = logging.getLogger("tornado.application")
    if not any(isinstance(f, _SyncCancelRace) for f in logger.filters):
        logger.addFilter(_SyncCancelRace())


def require_dask(what: str) -> None:
    """ValueError of one line, naming the pip install, where Dask distributed is not installed
    (a plain `pip install nevo` has no extras)."""
    if importlib.util.find_spec("distributed") is None:
        raise ValueError(
            f"{what}: Dask distributed is not installed: pip install 'nevo[cluster]' (or distributed)"
        )


def check_address(address: str) -> None:
    """ValueError unless address is local:N (N >= 1) or a scheduler address (scheme://host:port),
    and Dask distributed is installed."""
    require_dask("--cluster")
    if address.startswith(LOCAL):
        n = address[len(LOCAL) :]
        if not (n.isdigit() and int(n) >= 1):
            raise ValueError(f"--cluster: {address!r}: local:N needs a number of workers N >= 1")
    elif "://" not in address or not address.rsplit(":", 1)[-1].isdigit():
        raise ValueError(f"--cluster: {address!r} is not a scheduler address (tcp://host:8786) or local:N")


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (which a local cluster's worker processes use) with
    its stderr on /dev/null, unless it runs already: when a cluster closes after an error (a
    failed write, a stop), CPython's tracker can be told to unregister a semaphore twice and print
    a KeyError traceback, which is not the run's news (the tracker still frees what was leaked)."""
    from multiprocessing import resource_tracker

    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextlib.contextmanager
def _sigint_ignored_by_children():
    """SIGINT ignored while a local cluster starts its processes, which keep it ignored (an ignored
    signal stays ignored across exec, and Python and asyncio then install no handler of theirs):
    a terminal's Ctrl-C reaches the whole foreground process group, and the run, not its workers,
    is what stops (the driver closes the cluster), with no worker's traceback. A Ctrl-C in the
    second or two the cluster takes to start is ignored too (a blocked signal would be held, but
    the workers' Python unblocks it). (The main thread only: elsewhere signals cannot be set.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()
_LOCAL_SETTINGS = {
    "distributed.worker.daemon": False,
    **({"distributed.worker.multiprocessing-method": "forkserver"} if _FORKSERVER else {}),
}


def _start_forkserver() -> None:
    """Start the forkserver a local cluster's nannies fork their workers from (with Dask imported
    in it, as Dask's get_mp_context asks), unless it runs already. Begun with SIGINT ignored, it
    gives its children SIGINT ignored too (CPython's forkserver restores in each child the
    handlers it started with): a worker its nanny starts again after it died then ignores a
    terminal's Ctrl-C from its first instruction, not only once nevo's setup has run in it. (Under
    spawn, such a worker took SIGINT at its default while it imported Dask, and printed a
    traceback.)"""
    if not _FORKSERVER:
        return
    from multiprocessing import forkserver

    from distributed.utils import get_mp_context

    get_mp_context()  # (its preload: Dask and its packages)
    forkserver.ensure_running()


class ClusterConnection:
    """A run's Dask cluster, as the driver sees it: reached (or started), its workers set up for
    this run and followed as they come and go, closed at the end.

    address: tcp://host:port of a running scheduler, or local:N (a local cluster of N worker
    processes on 127.0.0.1, each pinned to its share of this machine's cores, stopped at close).
    timeout_s: how long the run waits for a worker (at the start, or when all are gone) before
    it stops with a ClusterError. cfg, task, ref_batch, table, population, bases, behaviours: what
    each worker's setup needs (nevo.cluster.worker.Setup); say: where refusals and
    lost workers are said.
    """

    def __init__(self, address, cfg, task, ref_batch, table, population, bases, behaviours=False,
                 timeout_s=120.0, say=print):  # fmt: skip
        from distributed import LocalCluster

        from nevo.cluster import worker as worker_side

        check_address(address)
        # The driver's client logs each reconnection attempt with a traceback; what matters
        # reaches the run's output as nevo's own lines (ClusterError, refusals).
        for name in ["distributed", *logging.root.manager.loggerDict]:
            if name.startswith("distributed"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
        forgive_sync_cancel_race()
        self.address, self.timeout_s, self.say = address, timeout_s, say
        self.cluster = None
        cores = 0
        if address.startswith(LOCAL):
            import dask

            from nevo.machine import cores as machine_cores

            n = int(address[len(LOCAL) :])
            cores = max(1, machine_cores() // n)
            _quiet_resource_tracker()
            # For the cluster's life, as its nannies read them again whenever they start a worker
            # anew: not daemonic (code in a worker may start processes of its own through
            # multiprocessing), and forked by a forkserver begun with SIGINT ignored (below).
            self._settings = contextlib.ExitStack()
            self._settings.enter_context(dask.config.set(_LOCAL_SETTINGS))
            try:
                with _sigint_ignored_by_children():
                    _start_forkserver()
                    self.cluster = LocalCluster(
                        n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                        dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0",
                        silence_logs=logging.ERROR,
                    )  # fmt: skip
            except Exception as e:  # noqa: BLE001 (ports, processes, memory: Dask's reason, one line)
                self._settings.close()
                raise ClusterError(
                    f"--cluster {address}: the local cluster did not start ({raised(e)})"
                ) from None
            target = self.cluster
        else:
            target = address
        try:
            self.client = self._connect(target)
        except BaseException:
            self._stop_local()
            raise
        try:
            self._check_scheduler()
            self.name = f"nevo-{uuid.uuid4().hex[:8]}"
            self.reported = set()
            self.plugin = worker_side.Setup(
                self.name,
                cfg,
                task,
                ref_batch,
                population,
                bases,
                behaviours,
                worker_side.fingerprint(table),
                cores,
            )
            # portable: a worker that cannot import nevo refuses in one line, as below
            self.client.register_plugin(worker_side.portable(self.plugin), name=self.name)
            self.workers = self._wait_for_workers()
            self.facts, self.machine = self._facts(address)
        except BaseException as e:  # no scheduler connection or local cluster outlives a failed start
            self.close()
            if isinstance(e, OSError):  # Dask's CommClosedError and timeouts included
                raise ClusterError(self._lost()) from None
            raise

    def _connect(self, target):
        """A Client of target (an address or a LocalCluster); a ClusterError if none in about
        timeout_s. Dask bounds the connection but not the handshake after it: a port where
        something else listens (the dashboard's, say) would hold the run for ever."""
        from distributed import Client

        made = {}

        def connect():
            try:
                made["client"] = Client(target, timeout=f"{self.timeout_s}s")
            except BaseException as e:  # noqa: BLE001 (raised below, in the caller's thread)
                made["error"] = e

        thread = threading.Thread(target=connect, name="nevo-cluster-connect", daemon=True)
        thread.start()
        thread.join(self.timeout_s + 5)
        if thread.is_alive():  # left behind: a daemon thread, stuck in a read that never ends
            raise ClusterError(
                f"--cluster: something listens at {self.address} but does not answer as a Dask scheduler "
                f"(in {self.timeout_s + 5:g} s; the dashboard's port instead of the scheduler's?): "
                f"check the address"
            )
        if isinstance(made.get("error"), OSError):
            raise ClusterError(self._unreachable(made["error"])) from None
        if "error" in made:
            raise made["error"]
        return made["client"]

    def _unreachable(self, e: OSError) -> str:
        host_port = self.address.split("://", 1)[-1].rsplit(":", 1)
        start = SCHEDULER_COMMAND.format(*host_port) if len(host_port) == 2 else "dask scheduler"
        return (
            f"--cluster: no Dask scheduler answers at {self.address} ({one_line(e)}): check the address, "
            f"or start one there (`{start}`, on that host)"
        )

    def _check_scheduler(self) -> None:
        """A ClusterError unless the scheduler's Python imports nevo (it unpickles nevo's tasks)."""
        if self.cluster is not None:  # local:N: the scheduler runs in this process
            return
        try:
            why, python = self.client.run_on_scheduler(_importer())
        except OSError:
            raise
        except Exception:  # noqa: BLE001 (a scheduler that runs no functions: the first task will tell)
            return
        if why:
            raise ClusterError(self._no_nevo_on_scheduler(why, python))

    def _no_nevo_on_scheduler(self, why: str, python: str | None = None) -> str:
        where = f" ({python})" if python else ""
        return (
            f"the Dask scheduler at {self.address} cannot import nevo ({why}), so it cannot read nevo's "
            f"tasks: install nevo for the Python that runs it{where} with {INSTALL}, and restart it"
        )

    def _lost(self) -> str:
        return (
            f"lost the Dask scheduler at {self.address} (stopped, or its host or the network down): "
            f"restart it, and its workers"
        )

    # -- the cluster's state ------------------------------------------------------------------

    def _refusals(self) -> None:
        """Say each refusal reported since the last call: one line per worker."""
        from nevo.cluster import worker as worker_side

        for _, msg in self.client.get_events(worker_side.EVENTS):
            if msg["worker"] not in self.reported:
                self.reported.add(msg["worker"])
                self.say(f"refused worker {msg['worker']}: {msg['why']}")

    def _accepted(self) -> set:
        """Addresses of the running workers that have not refused; a ClusterError when the
        scheduler is gone (any call to it may find that out first)."""
        return self._workers()[0]

    def _workers(self) -> tuple[set, set]:
        """(running, present): the workers that have not refused and run tasks now, and those
        still known to the scheduler at all (a worker paused by its memory monitor is present,
        not lost); a ClusterError when the scheduler is gone."""
        try:
            if self.client.status != "running":
                raise OSError(f"the client is {self.client.status}")
            # asked of the scheduler itself: Client.scheduler_info returns the client's cache, which
            # its own timer refreshes every 2 s without the workers, so now and then it read as a
            # cluster of none (the cause of the rare cluster/workers_lost above 0 of a cluster that
            # lost no worker: 42 of 2,000 calls at a 5 ms refresh, none this way)
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1).get("workers", {})
            self._refusals()
        except OSError:  # Dask's CommClosedError and connection timeouts included
            raise ClusterError(self._lost()) from None
        running = {a for a, w in info.items() if w.get("status", "running") == "running"}
        present = {a for a, w in info.items() if w.get("status", "running") in ("running", "paused", "init")}
        return running - self.reported, present - self.reported

    def _wait_for_workers(self, gone: bool = False) -> set:
        """The accepted workers, once there is one; a ClusterError after timeout_s without any.
        gone: the run had workers and lost them all (between two evaluations), not none yet."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            workers = self._accepted()
            if workers:
                time.sleep(0.2)  # a refusal on the way is reported before the run begins
                workers = self._accepted()
            if workers:
                return workers
            if time.monotonic() > deadline:
                raise ClusterError(self._gone() if gone else self._none_joined())
            time.sleep(0.5)

    def _none_joined(self) -> str:
        why = f" ({len(self.reported)} refused)" if self.reported else ""
        return (
            f"no nevo worker joined the cluster at {self.address} in {self.timeout_s:g} s{why}: "
            f"start one on each node with {self._start_worker()}"
        )

    def _gone(self) -> str:
        return (
            f"every worker of the cluster at {self.address} has been gone for {self.timeout_s:g} s: "
            f"start them again with {self._start_worker()}"
        )

    def _start_worker(self) -> str:
        from nevo.cluster import worker as worker_side

        return f"`{worker_side.WORKER_COMMAND.format(self.address)}` on each node (where nevo is installed)"

    def _facts(self, address: str) -> tuple[dict, dict]:
        """In one Client.run round trip: what the workers run, as config.json's facts (the first
        accepted worker's), and their machines as one start's record (nevo.machine.of_workers:
        where the generations ran, not the driver that ranks them)."""
        from nevo import machine
        from nevo.cluster import worker as worker_side

        workers = sorted(self.workers)
        each = self.client.run(worker_side.facts, self.name, workers=workers)
        first = each.get(workers[0]) or next((f for f in each.values() if f), {})
        facts = {"cluster": address, "workers": len(self.workers)}
        facts.update({f"worker {k}": v for k, v in first.get("runs", {}).items()})
        return facts, machine.of_workers([f["machine"] for f in each.values() if f])

    def close(self) -> None:
        from nevo.cluster import worker as worker_side

        try:
            if self.client.status == "running" and self.cluster is not None:  # (see quiet)
                self.client.run(worker_side.quiet)
            if self.client.status == "running" and hasattr(self, "name"):
                self.client.unregister_worker_plugin(self.name)
        except Exception:  # noqa: BLE001 (the cluster may be gone already; closing must not fail)
            pass
        self.client.close(timeout=10)
        self._stop_local()

    def _stop_local(self) -> None:
        if self.cluster is not None:
            try:
                self.cluster.close(timeout=10)
            finally:
                self.cluster = None
                self._settings.close()


def _importer():
    """A function, sent by value (cloudpickle pickles a local function itself, not a reference
    to nevo), that says whether its process imports what unpickling nevo's tasks imports:
    ("", its Python) or ("ExceptionName: why", its Python). So nothing from nevo in here."""

    def importer():
        import sys

        try:
            import nevo.cluster.worker  # noqa: F401 (run_chunk, hold, Population)
        except Exception as e:  # noqa: BLE001 (every reason is said in one line)
            return f"{type(e).__name__}: {e}", sys.executable
        return "", sys.executable

    return importer
