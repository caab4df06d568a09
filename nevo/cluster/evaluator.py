"""Evaluation on a Dask cluster (`distributed`), when one machine is not enough.

The papers nevo reproduces ran on 720 CPU cores. `--cluster ADDRESS` hands a run's evaluations
to a Dask scheduler (`tcp://host:8786`) or to a local cluster of N worker processes on
127.0.0.1 (`local:N`); without it nothing here is used and Dask is not imported.

Shape:
- The driver (the run script) keeps the algorithm, writes the run folder and checkpoints as on
  one machine. `ClusterEvaluator` has the evaluators' interface: a Population and Episodes in,
  Results out.
- Each worker process sets up once (a worker plugin, `nevo.cluster.worker.Setup`): the noise
  table, the net and its compiled kernels, its own evaluator (emulator pipeline) on its cores,
  and a WeightBuilder whose cache holds the current parents' weights. It builds individuals
  from genomes, so only genomes (seed lists, or ES's theta), episode seeds and per-episode
  results cross the network, as NumPy arrays.
- A generation's episodes go out in chunks, two per worker; Dask's scheduler hands a queued
  chunk to whichever worker frees up first, so a slow worker or a long episode holds up one
  chunk, not the generation. More chunks balance better but each ends in a tail with fewer live
  episodes than slots: on 2 cores, Frostbite at N=1,000 took 2.8% longer than without Dask in
  2 chunks and 6.6% in 4 (experiments/bench/bench_cluster.py, docs/cluster.md).
- An episode's outcome depends only on (individual, episode seed), so a chunk lost with its
  worker runs again elsewhere with the same result, and a run on a cluster of any size gives the
  metrics of the same run on one machine (with the same kind of forward: the CPU's and a GPU's
  float rounding can differ).
- The cluster itself is ClusterConnection's (nevo.cluster.connection), which
  ClusterEvaluator extends: the scheduler reached or a local cluster started, each worker's
  checks against the driver before any work (nevo version, source, noise table), the workers as
  they join, refuse and leave, and every way the cluster fails as a ClusterError of one line; a
  chunk that fails, or keeps killing its workers, is one too (`ClusterEvaluator._result`).
"""

from __future__ import annotations

import math
import pickle
import time
import warnings
from concurrent.futures import CancelledError

import numpy as np

from nevo.cluster.connection import ClusterConnection, ClusterError, one_line
from nevo.episodes import Episodes, Results


def nbytes(obj) -> int:
    """Bytes of obj pickled (protocol 5, as Dask sends NumPy arrays)."""
    return len(pickle.dumps(obj, protocol=5))


class ClusterEvaluator(ClusterConnection):
    """Runs Episodes on a Dask cluster's workers; the interface of nevo's evaluators.

    address, timeout_s and the rest: the cluster's (ClusterConnection). chunk: episodes per
    chunk (0: two chunks per worker).
    """

    def __init__(self, address, cfg, task, ref_batch, table, population, bases, behaviours=False,
                 timeout_s=120.0, chunk=0, say=print):  # fmt: skip
        super().__init__(address, cfg, task, ref_batch, table, population, bases, behaviours, timeout_s, say)
        self.chunk, self.runs = chunk, 0

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Play every episode on the cluster; results in the order of episodes (see Results)."""
        from distributed import wait

        from nevo.cluster import worker as worker_side

        t0 = time.monotonic()
        ind, seeds = np.asarray(episodes.ind, np.int64), np.asarray(episodes.seeds, np.int64)
        n_ep = len(ind)
        if n_ep == 0:
            empty = np.zeros(0, np.int64)
            return Results(np.zeros(0), empty, empty.copy())
        workers = self._accepted() or self._wait_for_workers(gone=True)
        size = self.chunk or max(1, math.ceil(n_ep / (2 * len(workers))))
        starts = list(range(0, n_ep, size))
        self.runs += 1
        tag = f"{self.name}-{self.runs}"
        with warnings.catch_warnings():  # ES's thetas are weights: Dask warns of a "large graph"
            warnings.simplefilter("ignore", UserWarning)
            held = self.client.submit(worker_side.hold, population, key=f"{tag}-population", pure=False)
        counted = None if episodes.obs_stats is None else np.asarray(episodes.obs_stats, bool)  # (E,)
        futures = [
            self.client.submit(
                worker_side.run_chunk,
                self.name,
                held,
                ind[a : a + size],
                seeds[a : a + size],
                None if counted is None else counted[a : a + size],
                episodes.validation,
                key=f"{tag}-chunk-{c}",
                pure=False,
            )  # fmt: skip
            for c, a in enumerate(starts)
        ]
        sent = nbytes(population) + sum(nbytes((ind[a : a + size], seeds[a : a + size])) for a in starts)
        order = {f.key: c for c, f in enumerate(futures)}
        parts: list = [None] * len(futures)
        pending, done, frames, received = set(futures), 0, 0, 0
        ends = []  # when each chunk came back
        seen, lost, empty_since = set(workers), set(), None
        while pending:
            try:
                finished, pending = wait(pending, timeout=2.0, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing came back in 2 s: look at the cluster below
                finished = set()
            except CancelledError:  # the client cancels every future when it loses the scheduler
                raise ClusterError(self._lost()) from None
            for f in finished:
                parts[order[f.key]] = part = self._result(f)
                received += nbytes(part)
                done, frames = done + len(part.returns), frames + part.total_frames
                ends.append(time.monotonic())
            if progress is not None and finished:
                progress(done, n_ep, frames)
            if pending:  # is anyone still working on them?
                now_workers, present = self._workers()
                for gone in sorted(seen - present - lost):  # one line each, as it goes
                    self.say(f"lost worker {gone} mid-generation: the scheduler lists it no more; "
                             "its chunks go to the others")  # fmt: skip
                lost |= seen - present
                seen |= now_workers
                if now_workers:
                    empty_since = None
                elif empty_since is None:
                    empty_since = time.monotonic()
                elif time.monotonic() - empty_since > self.timeout_s:
                    raise ClusterError(self._gone())
        try:
            held.release()
        except Exception:  # noqa: BLE001 (the next call to the scheduler will say if it is gone)
            pass
        wall = time.monotonic() - t0
        out = Results.concat(parts)
        n_workers = len(seen - lost) or 1
        # after the last chunk left the queue some worker stood idle: from the (chunks - workers)-th end
        tail_from = sorted(ends)[max(0, len(ends) - n_workers)]
        out.wall_s = wall
        out.tail_s = t0 + wall - tail_from if len(ends) > n_workers else wall
        out.forward_s /= n_workers  # per worker, as on one machine
        out.cluster = {
            "bytes_sent": sent,
            "bytes_received": received,
            "chunks": len(futures),
            "workers": len(seen - lost),
            "workers_lost": len(lost),
        }
        return out

    def _result(self, future) -> Results:
        """The chunk's Results, or a ClusterError (one line: the cause and the fix) when the
        cluster lost it or could not run it."""
        from distributed import KilledWorker

        try:
            return future.result()
        except KilledWorker as e:
            last = getattr(getattr(e, "last_worker", None), "address", "?")
            raise ClusterError(
                f"a chunk of episodes ended every worker that ran it (the last: {last}; its log says "
                f"why): out of memory? Give the workers more memory, or smaller chunks (--cluster-chunk)"
            ) from None
        except CancelledError:  # Dask's FutureCancelledError: the client lost the scheduler
            raise ClusterError(self._lost()) from None
        except Exception as e:  # noqa: BLE001 (said in one line; the worker's log has the traceback)
            cause = e.__cause__
            if "deserialization of the task graph" in str(e):  # the scheduler could not unpickle it
                why = f"{type(cause).__name__}: {one_line(cause)}" if cause else one_line(e)
                raise ClusterError(self._no_nevo_on_scheduler(why)) from None
            raise ClusterError(
                f"a chunk of episodes failed on a worker ({type(e).__name__}: {one_line(e)}): the worker's "
                f"log has the traceback, and the same run without --cluster shows it here"
            ) from None
