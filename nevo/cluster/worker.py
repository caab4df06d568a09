"""The worker side of nevo on a Dask cluster (nevo.cluster.evaluator is the driver's side).

Imported by the driver only with --cluster, and by each worker when it loads the plugin:
`Setup` sets a worker up once per run (noise table, net, compiled kernels, its own evaluator on
its cores, a WeightBuilder whose cache holds the current parents' weights), `run_chunk` plays a
chunk of episodes on it. The driver sends `Setup` inside `portable(...)`, which any Dask worker
can unpickle: one that cannot import nevo refuses in one line, as one with other nevo code does.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading

import numpy as np
from distributed import Reschedule, WorkerPlugin, get_worker

from nevo import version
from nevo.episodes import Episodes, Results
from nevo.machine import cores

EVENTS = "nevo-refused"  # the topic on which a refusing worker says why
# how to start a worker that imports nevo (README, docs/cluster.md), given the scheduler's address
WORKER_COMMAND = "nevo worker {}"


def source_digest() -> str:
    """A digest of nevo's own source files: two installs give the same results only if it agrees."""
    root = os.path.dirname(os.path.abspath(version.__file__))  # the nevo package's folder
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, root).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def table_digest(table: np.ndarray) -> str:
    """A digest of the noise table: about a million numbers spread over all of it, and its end."""
    step = max(1, table.size // 2**20)
    h = hashlib.sha256(np.ascontiguousarray(table[::step]).tobytes())
    h.update(table[-4096:].tobytes())
    h.update(str(table.size).encode())
    return h.hexdigest()[:16]


def fingerprint(table: np.ndarray) -> dict:
    return {"nevo": version.__version__, "source": source_digest(), "noise table": table_digest(table)}


def differences(mine: dict, theirs: dict) -> str:
    """'' if the fingerprints agree, else what differs, e.g. 'nevo 0.1.0 here, 0.2.0 there'."""
    return "; ".join(f"{k} {theirs.get(k)} here, {v} there" for k, v in mine.items() if theirs.get(k) != v)


class Setup(WorkerPlugin):
    """A Dask worker plugin: sets the worker up once for a run (see the module's text)."""

    def __init__(self, name, cfg, task, ref_batch, population, bases, behaviours, expected, cores):
        self.name = name  # unique per run: several runs may share one cluster
        # (cfg before task: unpickled first, its config rebuilt through from_dict imports a module
        # of one's own, --env-module or --algo-module, in which the task's class is then found)
        self.cfg, self.task, self.ref_batch = cfg, task, ref_batch
        self.population, self.bases, self.behaviours = population, bases, behaviours
        self.expected = expected  # the driver's fingerprint
        self.cores = cores  # local:N: cores of this worker's own (CPU affinity); 0: the machine's
        self.refused = ""
        self.evaluator = None

    def setup(self, worker):
        import numba

        from nevo.evaluation import setup
        from nevo.genomes import noise

        if self.cores and threading.current_thread() is threading.main_thread():
            # local:N: a terminal's Ctrl-C is the run's to handle (it closes the cluster). The
            # first workers start with SIGINT ignored; one its nanny started again after it died
            # took it at its default, and would print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if self.cores and hasattr(os, "sched_setaffinity"):  # local:N: worker i on its share
            every = sorted(os.sched_getaffinity(0))
            i = int(worker.name) if str(worker.name).isdigit() else 0
            mine = every[(i * self.cores) % len(every) :][: self.cores] or every
            os.sched_setaffinity(0, mine)
        cfg = self.cfg
        table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
        self.refused = differences(fingerprint(table), self.expected)
        if not self.refused:
            try:  # the settings' and this machine's checks, as a run on one machine makes them
                spec = setup.net_for(cfg, self.task)
                device = setup.check_machine(cfg, self.task, spec, self.population, self.bases)
            except (ValueError, MemoryError) as e:  # ConfigError included
                self.refused = str(e)
        if self.refused:  # say why where the driver reads it, then leave the cluster
            worker.log_event(EVENTS, {"worker": worker.address, "why": self.refused})
            worker.loop.add_callback(worker.close, nanny=True, reason="nevo: refused")
            return
        self.device = device
        self.threads = min(cores(), numba.config.NUMBA_NUM_THREADS)  # cores(): after the affinity above
        # the evaluator a run on one machine makes (no run folder: safe mutations stay on one machine)
        self.evaluator, self.layout = setup.local_evaluator(
            cfg, self.task, spec, device, table, self.ref_batch, None, self.population
        )
        self.lock = threading.Lock()  # one chunk at a time, whatever the worker's thread count

    def teardown(self, worker):
        if self.evaluator is not None:
            self.evaluator.close()


def portable(plugin: Setup) -> WorkerPlugin:
    """plugin in a wrapper that a Dask worker unpickles without importing nevo (see _loader)."""
    from distributed.protocol.pickle import dumps

    return _loader()(dumps(plugin))


def _loader() -> type:
    """The class of portable()'s wrapper. Made in a function so that cloudpickle sends the class
    itself rather than a reference to this module: a worker that cannot import nevo still loads
    it, and refuses in one line (unpickling Setup directly would fail inside Dask, before any
    nevo code runs, with a long traceback on the driver). So nothing from nevo in here."""

    class Loader(WorkerPlugin):
        """Unpickles nevo's Setup on the worker and runs it; refuses if nevo cannot load."""

        def __init__(self, payload: bytes):
            self.payload = payload  # Setup, pickled
            self.inner = None  # Setup, once loaded

        def setup(self, worker):
            import pickle

            try:
                self.inner = pickle.loads(self.payload)
            except Exception as e:  # noqa: BLE001 (every reason is said in one line, below)
                if isinstance(e, ModuleNotFoundError) and e.name == "nevo":
                    command = WORKER_COMMAND.format(worker.scheduler.address)
                    why = f"cannot import nevo ({e}); start it where nevo is installed with `{command}`"
                else:  # nevo's requirements missing there, or a nevo whose code differs
                    why = f"cannot load nevo's setup ({type(e).__name__}: {e}); give it the driver's nevo"
                worker.log_event(EVENTS, {"worker": worker.address, "why": why})
                worker.loop.add_callback(worker.close, nanny=True, reason="nevo: refused")
                return None
            return self.inner.setup(worker)

        def teardown(self, worker):
            if self.inner is not None:
                return self.inner.teardown(worker)
            return None

    return Loader


def _setup_of(name: str) -> Setup | None:
    """This worker's Setup for the run name; None if it could not load it (and is leaving)."""
    return get_worker().plugins[name].inner


def hold(population):
    """The generation's population as a task's result: it is sent to the scheduler once, fetched
    by each worker once, and made again from the task if every worker holding it is lost."""
    return population


def run_chunk(name: str, population, ind: np.ndarray, seeds: np.ndarray, obs_stats=None,
              validation: bool = False) -> Results:  # fmt: skip
    """Play one chunk of episodes on this worker's evaluator (obs_stats: the chunk's share of
    Episodes.obs_stats, the episodes whose observations count, --obs-norm 1)."""
    import numba

    setup = _setup_of(name)
    if setup is None or setup.evaluator is None:  # refused (and leaving): another worker takes the chunk
        raise Reschedule()
    with setup.lock:
        numba.set_num_threads(setup.threads)
        return setup.evaluator.run(
            population, Episodes(ind, seeds, obs_stats=obs_stats, validation=validation)
        )


def quiet() -> None:
    """Silence this worker's Dask logs: before a local cluster (local:N, whose workers write to the
    run's own terminal) is closed mid-generation, where the chunks still playing fail as their
    evaluators close, and the run has already said in one line why it ended."""
    import logging

    for name in ["distributed", *logging.root.manager.loggerDict]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def facts(name: str, dask_worker=None) -> dict:
    """What this worker runs ("runs": its device and evaluator layout) and its machine ("machine":
    nevo.machine.here, CPU model, cores after its affinity, device); {} if it refused. Called with
    Client.run, which passes the worker."""
    from nevo import machine

    setup = dask_worker.plugins[name].inner
    if setup is None or setup.evaluator is None:
        return {}
    return {"runs": {"device": setup.device, **setup.layout}, "machine": machine.here(setup.device)}
