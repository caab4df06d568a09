"""The evaluator: episodes over many emulator slots, with batched inference overlapping emulation.

Interface (narrow and serialisable, as a cluster's worker serves it too: nevo.cluster): the
individuals as genomes (a Population) plus a list of episodes (individual, episode seed) in; per episode
return, length and game frames out. Weights are built here, where they are used
(nevo.episodes.weights): on the CPU when an individual's first episode takes a slot.

The pipeline, in SEED RL's shape on one machine (Espeholt et al. 2019; the accelerated deep
neuroevolution of Uber AI, 2018): nevo's emulator pool (nevo.atari.pool) steps the slots in
worker processes, one per core, and writes their observations into shared memory, where the policy
reads them. Where the forward runs on a GPU ("overlap"), the slots are split into units, each within
one emulator process, and the policy runs on whichever units' steps are in first, a group's worth at
a time, while the others step (EnvPool's asynchronous mode); the GPU runs one batch's forward while
this thread receives and stages the next. Where the forward runs on the same few cores as the
emulators (the CPU backend), a round trip per step only costs: there each emulator process plays
whole episodes with its own forward ("workers", nevo.atari.in_worker), and this process hands
out episodes and collects their outcomes. "lockstep" (one forward over every live slot, then every
live slot steps) serves the policies the emulator processes cannot run (nevo.atari.stepped
holds it and "overlap").

A queue of episodes (individual, episode seed) feeds the slots: when an episode ends its slot starts
the next one at once (the pool restores the seeded reset's state in the same step); when the queue
is empty, finished slots leave the inference batch (active-episode compaction) and are no longer
stepped. An episode's outcome depends only on its individual and its seed, never on the slot that
ran it.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

import numpy as np

from nevo import machine
from nevo.atari.emulator import FRAME, STACK
from nevo.atari.game import AtariGame, noop_counts
from nevo.atari.in_worker import ASK, EpisodePlayer, read_answer, runs_in_workers
from nevo.atari.pool import EmulatorPool
from nevo.atari.stepped import Lockstep, Overlap, Played
from nevo.episodes import Episodes, Results
from nevo.episodes.book import EpisodeBook
from nevo.episodes.players import plays
from nevo.episodes.weights import in_parts

# From this many slots on, starting the emulators takes long enough to say so: each worker process
# loads its emulators' ROMs one after another (~0.1 s each).
SAY_START_SLOTS = 128

# The emulator processes run this much nicer than the process that drives them. speed: the
# driving thread (the forward's calls, sends, receives, bookkeeping) is the pipeline's one serial
# path, and where emulators outnumber the cores it waited for a slice behind them. A GPU run's
# generation is bound by it; with a stand-in GPU policy on 2 cores the overlap pipeline ran 1.21x
# faster with the emulators nicer (experiments.bench.bench_driver; docs/lab/2026-11-26.md).
EMULATOR_NICE = 10


# How long an episode may take in the workers pipeline before its worker is named as stopped or
# stuck (nevo.atari.pool): the longest of BOUND_FLOOR_S, its frames at FLOOR_RATE, and
# BOUND_SLACK times its frames at the slowest frames/s an episode has played at here (FIRST_RATE
# before any has). FLOOR_RATE holds for a healthy episode on a busy machine: the large net's
# forward on one core of the 2-core VMs plays ~4,700 frames/s (28 MFLOP a step at ~50 GFLOP/s,
# with the emulation), a tenth of a core (emulators run nicer than the rest) ~470, and 50 is a
# tenth of that; so a 20,000-frame episode may take 400 s and a 400,000-frame test episode 2.2 h
# (no ceiling: a slow healthy episode is never named, a stuck one is, later).
# (NEVO_BOUND_S sets the floor and takes FLOOR_RATE's part away, for fault tests: experiments.chaos.)
BOUND_SLACK, FIRST_RATE, BOUND_FLOOR_S, FLOOR_RATE = 4.0, 1000.0, 180.0, 50.0
if "NEVO_BOUND_S" in os.environ:
    BOUND_FLOOR_S, FLOOR_RATE = float(os.environ["NEVO_BOUND_S"]), float("inf")


def start_frames(env_cfg) -> int:
    """The most game frames an episode's start takes beyond its frame cap: the reference's no-ops
    of one raw frame each (the vector env's: NOOP steps of frameskip frames), then FIRE and action
    2 for frameskip frames each, and the vector env's one FIRE frame."""
    per_noop = 1 if env_cfg.start == "reference" else env_cfg.frameskip
    return env_cfg.noop_max * per_noop + 2 * env_cfg.frameskip + 1


def episode_bound(frame_cap: int, slowest_rate: float) -> float:
    """Seconds an episode of up to frame_cap frames may take, the slowest seen at slowest_rate
    frames/s."""
    return max(BOUND_FLOOR_S, frame_cap / FLOOR_RATE, BOUND_SLACK * frame_cap / slowest_rate)


def processes_of(run_cfg) -> int:
    """--processes (0: one per core); a run folder from before the flag had it as --threads."""
    return run_cfg.processes or run_cfg.threads


class Layout(NamedTuple):
    """Where a run's episodes play: emulator slots in all, slots per group, emulator processes, and
    the pipeline by name (`PIPELINES`)."""

    slots: int
    group: int
    processes: int
    pipeline: str


def layout(device: str, cores: int, population: int, run_cfg) -> Layout:
    """The Layout of the settings, 0s and "auto" chosen from the machine: the one rule for all of
    it, which a run, the roofline and the benchmarks read alike.

    The pipeline: "overlap" where the forward runs on a GPU, "workers" on the CPU: each emulator
    process plays whole episodes with its own forward on one thread, one episode at a time
    (nevo.atari.in_worker), one process per core (--processes) unless --env-slots says
    otherwise. "lockstep" (asked for by name): every live slot steps together, then one forward
    over them all. Slots: one per core in "workers", 16 per core in "lockstep", 32 per core with a
    GPU. A group's size as the pipeline has it (its `group`: "overlap" four groups, "lockstep" one
    slot a group, unless --emulators-per-group says; "workers" one), the slots rounded up to whole
    groups. Processes: --processes (default one per core), as the pipeline takes them (its
    `processes`: in "workers" one a slot, otherwise at most one a slot).
    """
    if run_cfg.pipeline not in (*PIPELINES, "auto"):
        raise ValueError(f"pipeline: got {run_cfg.pipeline!r}, allowed: auto, {', '.join(PIPELINES)}")
    pipeline = run_cfg.pipeline if run_cfg.pipeline in PIPELINES else AUTO[device]
    kind, processes = PIPELINES[pipeline], processes_of(run_cfg)
    slots = run_cfg.env_slots or kind.slots(population, device, cores, processes)
    group = max(1, min(slots, kind.group(slots, run_cfg.emulators_per_group)))
    slots = -(-slots // group) * group
    return Layout(slots, group, kind.processes(slots, processes or cores), pipeline)


@plays(AtariGame)
class AtariEvaluator:
    """Runs Episodes on Atari emulator slots, `policy` choosing the actions.

    Built for a run by `for_task`, from the run's settings (`layout`). Its pipeline: "overlap" runs
    a group's worth of first-ready slots through the forward while the others step, "lockstep" one
    forward over every live slot, then all of them step (both nevo.atari.stepped's); "workers" has
    each emulator process play whole episodes with its own copy of the policy (a host policy over
    PooledWeights only). ram: each episode's final RAM is its behaviour (Results.behaviours; Such et
    al. 2017's GA-NS on Atari).
    """

    def __init__(self, env_cfg, policy, weights, pool: EmulatorPool, where: Layout, ram=False):
        self.env_cfg = env_cfg
        # nevo.nets.kernels.make_policy(...): load(weights), (rows_ind, obs, take) -> actions
        self.policy = policy
        self.weights = weights  # nevo.episodes.weights: the rows the policy reads, built from genomes
        self.pool = pool  # the emulators, `where.processes` processes of them (nevo.atari.pool)
        self.slots, self.group, self.processes, self.pipeline = where
        self.ram = ram
        self.slowest_rate = FIRST_RATE  # frames/s of the slowest timed episode (episode_bound)
        self.played: Played | None = None  # the last run's figures, as its pipeline handed them back

    @classmethod
    def for_task(cls, task, run_cfg, policy, weights, device: str, population: int, behaviours: bool):
        """(this evaluator for an Atari game, facts for config.json): the emulator pool of
        `layout`'s slots, groups, processes and pipeline, and each episode's final RAM with
        behaviours (novelty search)."""
        where = layout(device, machine.cores(), population, run_cfg)
        kind = PIPELINES[where.pipeline]
        kind.check(policy, weights)
        if where.slots >= SAY_START_SLOTS:
            print(
                f"starting {where.slots} Atari emulators in {where.processes} processes (~0.1 s each)",
                file=sys.stderr,
                flush=True,
            )
        env_cfg = task.cfg
        args = kind.pool_args(policy, weights, where.slots)
        pool = EmulatorPool(env_cfg.game, env_cfg.frameskip, env_cfg.frame_cap, where.slots, where.processes,
                            nice=EMULATOR_NICE, sticky=env_cfg.sticky, **args)  # fmt: skip
        try:
            kind.attach(pool, weights, args)
        except BaseException:
            pool.close()
            raise
        facts = {
            "env_slots": where.slots,
            "emulators_per_group": where.group,
            "processes": where.processes,
            "pipeline": where.pipeline,
            **({"behaviour": "final RAM"} if behaviours else {}),
        }
        return cls(env_cfg, policy, weights, pool, where, ram=behaviours), facts

    def close(self) -> None:
        self.pool.close()

    def run(self, population, episodes: Episodes, progress=None) -> Results:
        """Play every episode to its end (or the frame cap); progress(done, total, frames).
        population: nevo.episodes.Population, whose rows episodes.ind name."""

        def run_part(pop, eps):
            return self._run(pop, eps, progress)

        return in_parts(run_part, population, episodes, self.weights.max_rows)

    def _run(self, population, episodes: Episodes, progress) -> Results:
        ram = (self.pool.ram.shape[1], np.uint8) if self.ram else None
        book = EpisodeBook(episodes, self.slots, self.weights, self.pool.obs.shape[1:], np.uint8, ram)
        if book.n_ep == 0:
            return book.results()
        self.policy.load(self.weights.start(population, book.ind, self.slots))
        try:
            self.played = PIPELINES[self.pipeline](self, book).play(progress)
            self.slowest_rate = min(self.slowest_rate, self.played.slowest_rate)
        finally:
            try:
                self.pool.drain()  # on an error or Ctrl-C, no step is left in flight in the workers
            finally:
                self.policy.release()  # (a GPU step left in flight too)
        return book.results()


class Workers:
    """Each emulator process plays one episode at a time to its end, its own forward choosing the
    actions (nevo.atari.in_worker); when one ends, its slot gets the queue's next. A
    pipeline as nevo.atari.stepped.Stepped describes one."""

    steps_here = False  # the emulator processes run the policy and step their emulators
    first_ready = False  # (no units: each process plays whole episodes)

    @staticmethod
    def slots(population: int, device: str, cores: int, processes: int) -> int:
        """One slot an emulator process: --processes (or one a core), no more than the individuals."""
        return min(population, processes or cores)

    @staticmethod
    def group(slots: int, asked: int) -> int:
        """One slot a group: each process plays its own episode."""
        return 1

    @staticmethod
    def processes(slots: int, asked: int) -> int:
        """One a slot: each plays one episode at a time."""
        return slots

    @staticmethod
    def check(policy, weights) -> None:
        if not runs_in_workers(policy, weights):
            raise ValueError(
                "pipeline workers: the emulator processes run only a host policy over pooled rows"
            )

    @staticmethod
    def pool_args(policy, weights, slots: int) -> dict:
        """The episode player the processes run (its forward compiled here once: they load it
        from Numba's cache), the shared memory of its weight rows, and one thread a process (the
        processes are the parallelism, and a row's forward is the same bits on one thread as on
        many)."""
        b = weights.builder
        player = EpisodePlayer(policy, slots + 1, b.n_params, b.dtype, (STACK, *FRAME))
        try:
            player.warm(np.zeros((1, b.n_params), b.dtype))
        finally:
            policy.release()
        return {
            "player": player,
            "extra_bytes": EpisodePlayer.nbytes(slots + 1, b.n_params, b.dtype),
            "worker_env": {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
        }

    @staticmethod
    def attach(pool, weights, args: dict) -> None:
        """The weight rows in the pool's shared memory, where the processes read them."""
        weights.share(args["player"].rows(pool.extra))

    def __init__(self, ev: AtariEvaluator, book: EpisodeBook):
        self.ev, self.book = ev, book
        self.noops = noop_counts(book.seeds, ev.env_cfg.noop_max)
        self.reference = ev.env_cfg.start == "reference"
        self.keep = 0 if book.sample is None else book.sample.k
        self.playing = {}  # ticket -> (slot, episode)

    def _give(self, s: int) -> None:
        """Slot s plays its episode: what the process is asked (nevo.atari.in_worker.ASK)."""
        e, row = int(self.book.slot_ep[s]), int(self.book.slot_row[s])
        ask = ASK.pack(row, int(self.noops[e]), int(self.book.seeds[e]), self.keep, self.reference)
        self.playing[self.ev.pool.play(s, ask)] = (s, e)

    def play(self, progress) -> Played:
        ev, book, pool = self.ev, self.book, self.ev.pool
        forward_s = emulation_s = 0.0
        rows, slowest = 0, ev.slowest_rate
        for s in range(book.start()):
            self._give(s)
        while self.playing:
            bound = episode_bound(ev.env_cfg.frame_cap + start_frames(ev.env_cfg), slowest)
            answers = pool.answers(list(self.playing), bound)
            book.clock(live=len(self.playing))  # (the time until now had these many in play)
            for ticket, answer in answers:
                s, e = self.playing.pop(ticket)
                a = read_answer(answer, pool.obs.shape[1:])
                ram = None if book.behaviours is None else a.ram[None]
                kept = (a.kept, a.acted) if self.keep else None
                book.end([e], returns=a.ret, lengths=a.steps, frames=a.frames, behaviours=ram, kept=kept)
                forward_s, emulation_s = forward_s + a.forward_s, emulation_s + a.emulation_s
                rows += a.acted
                played_s = a.forward_s + a.emulation_s
                if played_s > 1.0:  # (an episode long enough to time)
                    slowest = min(slowest, a.frames / played_s)
                if book.refill(np.array([s])).size:
                    self._give(s)
            book.report(progress)
        book.forward(forward_s / ev.processes)  # the mean process's: a share of the wall time
        return Played(book.forward_s, rows, emulation_s / ev.processes, slowest)


# Each pipeline: one small class (its layout, what its pool needs, Pipeline(evaluator, book).play).
PIPELINES = {"overlap": Overlap, "lockstep": Lockstep, "workers": Workers}
# --pipeline auto: overlap where the forward runs on a GPU, workers on the emulators' own cores
AUTO = {"cuda": "overlap", "cpu": "workers"}
