"""The pipelines whose emulators this process steps (nevo.atari.evaluator's "lockstep" and
"overlap"): the policy runs here over the slots' observations in the pool's shared memory, and the
pool's processes step the slots (nevo.atari.pool).

"lockstep" runs one forward over every live slot, then every live slot steps. "overlap" (the GPU's)
splits the slots into units, each within one emulator process (`overlap_units`), and runs the
policy on whichever units' steps are in first, a group's worth at a time, while the others step
(EnvPool's asynchronous mode); a GPU policy's step is submitted, and its actions collected once
the GPU is done with it, or after the next batch has been submitted.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from nevo.atari.game import NOOP, noop_counts
from nevo.atari.pool import EmulatorPool
from nevo.episodes.book import EpisodeBook


@dataclass
class Played:
    """A pipeline's figures of one run of episodes, handed back to its evaluator: the policy's
    seconds (in the emulator processes: the mean process's) and the rows it was asked for; in the
    emulator processes, the mean process's seconds emulating (None where this process steps the
    pool: its caller times the pool) and the slowest frames/s a timed episode played at."""

    forward_s: float
    rows: int
    emulation_s: float | None = None
    slowest_rate: float = float("inf")


# The overlap pipeline's units a process: while some wait for their batch's forward, a process
# steps its others. speed: two on the H200 box left a process idle when both waited (2026-12-04:
# its generation at 74% of the pool's first-ready limit); `nevo roofline --units-per-process`
# measures other counts.
UNITS_PER_PROCESS = 2


def overlap_units(pool: EmulatorPool, group: int) -> list[np.ndarray]:
    """The overlap pipeline's units of the pool's slots (EmulatorPool.units): UNITS_PER_PROCESS a
    process, or more where a group is smaller than that share of a process's slots."""
    per_process = -(-pool.slots // pool.workers)
    return pool.units(min(group, -(-per_process // UNITS_PER_PROCESS)))


class Stepped:
    """Lockstep and overlap: this process runs the policy over the slots' observations in shared
    memory, and the pool steps the slots; an episode's start is played by the pool, not the net.

    A pipeline, as nevo.atari.evaluator.AtariEvaluator asks one (Lockstep, Overlap, and
    nevo.atari.evaluator.Workers): its layout (`slots`, `group`, `processes`), what its pool needs (`check`,
    `pool_args`, `attach`), whether this process steps the emulators (`steps_here`), and
    Pipeline(evaluator, book).play(progress) -> Played.

    Per slot: the steps and return of its episode so far."""

    steps_here = True  # this process runs the policy and steps the pool (the roofline times both here)
    first_ready = False  # its units step as they come in (the roofline measures the pool that way too)

    @staticmethod
    def slots(population: int, device: str, cores: int, processes: int) -> int:
        """The slots where --env-slots leaves them: 32 a core with a GPU, 16 without, no more than
        the individuals."""
        return min(population, (32 if device == "cuda" else 16) * cores)

    @staticmethod
    def processes(slots: int, asked: int) -> int:
        """The emulator processes: as asked, at most one a slot."""
        return max(1, min(asked, slots))

    @staticmethod
    def check(policy, weights) -> None:
        """Every policy serves it."""

    @staticmethod
    def pool_args(policy, weights, slots: int) -> dict:
        """Nothing for the pool beyond its emulators."""
        return {}

    @staticmethod
    def attach(pool, weights, args: dict) -> None:
        """Nothing to share with the pool's processes."""

    def __init__(self, ev, book: EpisodeBook):
        self.ev, self.book, self.pool = ev, book, ev.pool
        self.submits = hasattr(ev.policy, "submit")  # a step submitted, its actions collected later
        noops = noop_counts(book.seeds, ev.env_cfg.noop_max)
        # an episode's first steps, before the net acts: the reference's start is one step (the
        # pool's action -n: n no-op frames, then FIRE and action 2), which is not counted in its
        # length; the vector env's start is n NOOP steps, which are
        self.reference = ev.env_cfg.start == "reference"
        self.opening = np.ones_like(noops) if self.reference else noops
        self.opening_action = -noops if self.reference else np.full_like(noops, NOOP)
        self.slot_steps = np.zeros(ev.slots, np.int64)
        self.slot_ret = np.zeros(ev.slots, np.float64)
        self.obs = self.pool.obs  # (S, 4, 84, 84) uint8, in shared memory: the workers write it
        self.rows = 0  # the rows the policy was asked for

    def played(self) -> Played:
        return Played(self.book.forward_s, self.rows)

    def start(self) -> None:
        """Give each slot its first episode, each from a fresh start."""
        first = self.book.start()
        self._seeded(np.arange(first))
        # (slots left mid-episode by an interrupted run start afresh too)
        self.pool.wait(self.pool.restart(np.arange(first)))

    def _seeded(self, slots: np.ndarray) -> None:
        """Give these slots' new episodes' seeds to the pool (a reference start draws its sticky
        actions from its episode's seed)."""
        self.pool.seed[slots] = self.book.seeds[self.book.slot_ep[slots]]

    def choose(self, slots: np.ndarray) -> tuple | None:
        """Start choosing the actions of these slots' live ones (None if none is): the policy's
        step for the slots past their episode's start, submitted where the policy can (its actions
        collected by act), else run here; the start's action for the others."""
        book = self.book
        live = slots[book.slot_ep[slots] >= 0]
        if not live.size:
            return None
        acting = live[self.slot_steps[live] >= self.opening[book.slot_ep[live]]]
        self.pool.actions[live] = self.opening_action[book.slot_ep[live]]
        step = None
        if acting.size:  # compaction: only these rows go through the net
            self.rows += acting.size
            if book.sample is not None:  # the observations the net acts on
                book.sample.offer(book.slot_ep[acting], self.obs[acting])
            t0 = time.monotonic()
            # the policy gathers the acting slots' frames itself (on a GPU, straight into the
            # page-locked buffer it uploads from)
            policy = self.ev.policy
            call = policy.submit if self.submits else policy
            step = call(book.slot_row[acting], self.obs, take=acting)
            book.forward(time.monotonic() - t0)
        return live, acting, step

    def collectable(self, choice: tuple) -> bool:
        """Whether a submitted choice's actions are in, so that act would not wait (a policy
        without `done` says so only at act)."""
        step = choice[2]
        done = getattr(self.ev.policy, "done", None)
        return step is None or (done is not None and done(step))

    def act(self, choice: tuple) -> np.ndarray:
        """Collect a choice's actions (a submitted step's) into the pool's actions: its live slots,
        ready to step."""
        live, acting, step = choice
        if acting.size:
            if self.submits:
                t0 = time.monotonic()
                step = self.ev.policy.collect(step)
                self.book.forward(time.monotonic() - t0)
            self.pool.actions[acting] = step
        return live

    def receive(self, sent: tuple) -> None:
        """Collect a step of these slots; end, record and refill the slots whose episodes ended
        (the pool has started their next episode already: the queue's next one plays it)."""
        live, ticket = sent
        pool, book = self.pool, self.book
        pool.wait(ticket)
        book.clock((book.slot_ep >= 0).sum())
        self.slot_ret[live] += pool.reward[live]
        self.slot_steps[live] += 1
        ended = live[pool.done[live] != 0]
        if not ended.size:
            return
        ram = None if book.behaviours is None else pool.ram[ended]
        lengths = self.slot_steps[ended] - int(self.reference)  # (the start's step)
        book.end(book.slot_ep[ended], self.slot_ret[ended], lengths, pool.frames[ended], ram)
        self.slot_ret[ended], self.slot_steps[ended] = 0.0, 0
        self._seeded(book.refill(ended))  # the queue's next episodes, in slot order; the rest go idle


class Lockstep(Stepped):
    """One forward pass over every live slot, then those slots step at once.

    speed: where the forward and the emulators share the same few cores (the CPU backend),
    running each on all cores in turn beats overlapping them (measured: docs/lab/2026-11-21.md)."""

    @staticmethod
    def group(slots: int, asked: int) -> int:
        """One slot a group unless asked (the size only names the slots' split)."""
        return asked or 1

    def play(self, progress) -> Played:
        every = np.arange(self.ev.slots)
        self.start()
        while (choice := self.choose(every)) is not None:
            live = self.act(choice)
            self.receive((live, self.pool.step(live)))
            self.book.report(progress)
        return self.played()


class Overlap(Stepped):
    """First-ready batches, in the shape of EnvPool's asynchronous mode (Weng et al. 2022): the
    slots are split into units, each the slots of one emulator process (overlap_units: two or more a
    process, so that a process steps one while another's actions are chosen), each unit stepped
    on its own ticket. The loop takes whichever units' steps are in first (EmulatorPool.first_done)
    until they hold a group's live slots (the batch: emulators_per_group) or no other step is in flight,
    chooses their actions in one forward and sends each unit's step: no batch waits on the slowest
    process, and the other units step while its forward runs.

    With a policy that submits a step and collects its actions later (CudaPolicy), the GPU runs one
    batch's forward while this thread receives and stages the next: a batch's actions are
    collected and sent as soon as the policy says they are in (its `done`), or at the latest after
    the next batch's step is submitted. speed: a GPU generation's driving thread spent most of its
    time in policy calls (docs/lab/2026-11-26.md); and a batch held until the next one was staged
    kept its units idle a batch's fill time longer, so that with two units a process a quarter of
    the processes had none stepping (on 16 cores the generation ran at 74% of the pool's
    first-ready limit, docs/lab/2026-12-04d.md; on the 2-core VM, with a stand-in policy, sending it
    when done gave 1.06-1.08x)."""

    first_ready = True

    @staticmethod
    def group(slots: int, asked: int) -> int:
        """Four groups unless asked: three quarters of the slots step while a batch's forward runs."""
        return asked or -(-slots // 4)

    def play(self, progress) -> Played:
        pool, book, batch = self.pool, self.book, self.ev.group
        units = overlap_units(pool, batch)
        in_flight = {}  # ticket -> (unit, its live slots stepping)
        ready = deque()  # units received (or not yet started), their next actions not chosen
        held = None  # (units, choice): their step submitted, their actions not yet collected and sent

        def send(us, choice):  # the actions in the pool, then each unit's live slots step
            self.act(choice)
            for u in us:
                live = units[u][book.slot_ep[units[u]] >= 0]
                if live.size:
                    in_flight[pool.step(live)] = (u, live)

        def send_held():
            nonlocal held
            if held is not None:
                send(*held)
                held = None

        def go(us):  # these units' actions chosen and sent (or their step submitted, the held batch's sent)
            nonlocal held
            choice = self.choose(np.concatenate([units[u] for u in us]))
            if choice is None:  # no live slot left in them (the held batch goes on its way)
                send_held()
                return
            if not self.submits:
                send(us, choice)
                return
            send_held()
            held = (us, choice)

        def playing(u):  # the unit's slots playing an episode
            return int((book.slot_ep[units[u]] >= 0).sum())

        self.start()
        ready.extend(range(len(units)))
        while ready or in_flight or held is not None:
            if ready and (not in_flight or sum(playing(u) for u in ready) >= batch):
                us, n = [], 0
                while ready and n < batch:  # the first-ready units, a batch's live slots
                    us.append(ready.popleft())
                    n += playing(us[-1])
                go(us)
            elif held is not None and self.collectable(held[1]):
                send_held()  # the GPU is done with it: its units step now, not after the next batch
            elif in_flight:
                for ticket in pool.first_done(in_flight):
                    u, live = in_flight.pop(ticket)
                    self.receive((live, ticket))
                    ready.append(u)
                book.report(progress)
            else:  # nothing else to receive: the held batch's actions now
                send_held()
        return self.played()
