"""nevo's Atari emulator pool: bare emulators in worker processes, their frames in shared memory.

Why not ale-py's vector env: on 2 cores a vector env of one emulator steps at 0.61-0.65 of a
bare `ALEInterface`'s frames/s, and its seeded reset reloads the ROM (72-191 ms) at every episode
start (docs/lab/2026-11-27.md). A bare `ALEInterface` holds the GIL while it emulates, so emulators
run in parallel only in processes. So, in the shape of the Uber GPU implementation's emulator
threads and EnvPool's workers (Weng et al. 2022):
- W worker processes (one per core by default), each owning the slots s with s % W == its index
  (a group of consecutive slots spreads over every worker), each slot one
  `nevo.atari.emulator.AtariEmulator`;
- one block of shared memory (an anonymous memfd, so nothing is left in /dev/shm when a run is
  killed) holds every slot's observation stack, action, reward, end and, at an episode's end, its
  frames and RAM: the driving process reads observations with no copy and no pickling;
- a command to a worker is a few bytes on its pipe (step or restart these slots); the worker
  answers with the command's ticket when the slots' results are in shared memory. A slot whose
  episode ends starts its next one at once (restoreState, ~0.1 ms), its first observation in place;
- or, given a `player` (an object the pool pickles into each worker), a command plays a whole
  episode in the worker: play(slot, ask) calls player(emulator, obs, ask, halt) there and answers
  with the bytes it returns. The evaluator's player runs the policy's forward in the worker
  (nevo.atari.in_worker), so nothing crosses between processes while an episode plays. A
  second block of shared memory (`extra_bytes`, e.g. the weight rows) is the player's to read.

Lifecycle: workers ignore SIGINT and SIGTERM (the driving process stops them: a terminal's Ctrl-C
reaches every process of the group, and a half-stepped worker must not print a traceback) and
exit when their pipe closes, which is also what happens when the driving process dies, however it
dies; each runs in a process group of its own, so a terminal's Ctrl-C reaches only the driver. A
worker that dies, or stays silent past its bound (STEP_BOUND_S for a step, the caller's for an
episode), is an EmulatorError naming it, never a hang; the others' episodes stop at once. A drain
after an error or a stop waits at most DRAIN_BOUND_S, and an answer is read with stop signals held,
so a stop never loses one.
"""

from __future__ import annotations

import errno
import mmap
import os
import pickle
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from multiprocessing.connection import Connection, wait

import numpy as np

from nevo.atari.emulator import compile_kernels
from nevo.atari.worker import FAILED, HEADER, PLAY, READY, RESTART, STEP, Shared, block_fd
from nevo.runs import stop
from nevo.settings import raised

START_TIMEOUT_S = 600  # a worker loads its emulators' ROMs, ~0.1 s each
# A drain (after an error or a stop) waits this long for the answers in flight, then kills the
# workers: a worker asked to halt answers at its next step (milliseconds), and an answer lost to a
# stop that landed mid-read would otherwise be waited for forever.
DRAIN_BOUND_S = 5.0
# close() gives the workers this long, all together, to exit at EOF before it kills them.
EXIT_BOUND_S = 2.0
# A step or restart command is milliseconds of emulation: a worker silent this long has stopped
# (SIGSTOP, a debugger) or is stuck (a ROM in a loop), and is named in one line, as a death is.
# NEVO_BOUND_S (seconds) sets it, and the floor of an episode's bound (nevo.atari.evaluator),
# for fault tests whose stopped workers must be named within seconds (experiments.chaos).
STEP_BOUND_S = float(os.environ.get("NEVO_BOUND_S", 60.0))
# How long a worker waiting for its next command, and the driver waiting for the first-ready steps
# (first_done), poll their pipes before they sleep in the kernel (the pool's spin_s): a sleeping
# process's wake-up costs tens of microseconds of latency a command. ale-py's vector env spins
# 10,000 times before it sleeps; EnvPool's workers spin too. Off by default: where the processes
# outnumber the cores (the default, one worker a core, plus the driver) a spinning process takes a
# core from one with work (experiments.bench.bench_driver --spin-us measures it).
SPIN_S = 0.0


class EmulatorError(RuntimeError):
    """An emulator process failed or died; the message is one line naming it."""


class EmulatorPool:
    """`slots` emulators of one game in `workers` processes (see the module's docstring).

    step(slots) / restart(slots) send a command and return its ticket (an action of -n in
    self.actions begins the slot's episode the reference's way, AtariEmulator.begin with n no-ops,
    and counts as a step of no reward); wait(ticket) returns when
    those slots' results are in the shared arrays (self.obs, self.reward, self.done, ...). Any
    number of tickets may be in flight; a worker runs its commands in the order sent.

    player: plays whole episodes in the workers (play(slot, ask), then answers(tickets)); it is
    pickled into each worker, which calls player.attach(the extra block, or None) once, then
    player(emulator, obs, ask, halt) -> answer bytes per PLAY command. extra_bytes: the size of a
    second shared block, self.extra (a bytes-like view; None without). worker_env: variables set
    in the workers' environment (e.g. NUMBA_NUM_THREADS, read when Numba loads). spin_s: how long
    the workers and first_done poll before they sleep (None: SPIN_S).

    Overlapped steps (the GPU's pipeline): `units(n)` splits the slots into units of at most n,
    each within one worker; step each unit on its own ticket and take whichever are answered first
    with first_done(tickets): a unit waits on its own worker only, never on the slowest of all."""

    def __init__(
        self,
        game: str,
        frameskip: int,
        frame_cap: int,
        slots: int,
        workers: int,
        nice: int = 0,
        player=None,
        extra_bytes: int = 0,
        worker_env: dict | None = None,
        spin_s: float | None = None,
        sticky: float = 0.0,
    ):
        self.slots, self.workers = slots, max(1, min(workers, slots))
        self.spin_s = spin_s = SPIN_S if spin_s is None else spin_s
        compile_kernels()  # here once, so that the workers load them from Numba's cache
        size = Shared.nbytes(slots)
        self.conns, self.procs, self.extra = [], [], None
        # each worker's stderr, kept (not shown): the last line of a worker that dies (a failed
        # import, a crash) goes into its one-line error instead of a traceback on the terminal
        self.errs: list = []
        self._closer = weakref.finalize(self, _stop, self.conns, self.procs, self.errs)
        fd = extra_fd = -1
        try:
            fd = block_fd("nevo-emulators")
            os.ftruncate(fd, size)
            self._block = mmap.mmap(fd, size)
            self.shared = Shared(self._block, slots)
            if extra_bytes:
                extra_fd = block_fd("nevo-rows")
                os.ftruncate(extra_fd, extra_bytes)
                self.extra = mmap.mmap(extra_fd, extra_bytes)
            env = {**_importing_nevo(), **(worker_env or {})}
            for _ in range(self.workers):
                # A new interpreter, not fork (the driver runs native threads) nor multiprocessing's
                # spawn (which imports the user's main script again, unless it is guarded); in a
                # process group of its own, so that a terminal's Ctrl-C reaches only the driver
                # (never a worker still importing, which would print a traceback).
                parent, child = socket.socketpair()
                fds = (child.fileno(), fd, *([extra_fd] if extra_fd >= 0 else []))
                argv = [
                    sys.executable,
                    "-m",
                    "nevo.atari.worker",
                    str(child.fileno()),
                    str(fd),
                    str(extra_fd),
                ]
                try:
                    self.errs.append(tempfile.TemporaryFile())
                    p = subprocess.Popen(
                        argv, pass_fds=fds, stdin=subprocess.DEVNULL, stderr=self.errs[-1], env=env,
                        process_group=0,
                    )  # fmt: skip
                except BaseException:
                    parent.close()
                    raise
                finally:
                    child.close()  # (so that the worker's death reads as EOF here)
                self.conns.append(Connection(parent.detach()))
                self.procs.append(p)
        except OSError as e:  # memory, file descriptors, processes: one line with the remedy
            self._closer()
            raise EmulatorError(f"the emulator pool could not start: {raised(e)}{_remedy(e)}") from None
        finally:
            for f in (fd, extra_fd):
                if f >= 0:
                    os.close(f)
        self._ticket = 0
        self._dead = False  # a worker died or the pool was closed: no command is answered again
        self._open: dict[int, set[int]] = {}  # ticket -> workers not yet answered
        self._sent: dict[int, float] = {}  # ticket in flight -> when it was sent (time.monotonic)
        self._answers: dict[int, bytes] = {}  # PLAY ticket -> its answer, once in
        setup = dict(game=game, frameskip=frameskip, frame_cap=frame_cap, sticky=sticky, slots=slots,
                     workers=self.workers, nice=nice, player=player, extra_bytes=extra_bytes,
                     spin_s=spin_s)  # fmt: skip
        try:
            for w, conn in enumerate(self.conns):
                try:
                    conn.send_bytes(pickle.dumps({**setup, "index": w}))
                except OSError:
                    raise self._died(w) from None
            for w in range(self.workers):
                self._reply(w, timeout=START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        for name, _, _ in Shared.FIELDS:
            setattr(self, name, getattr(self.shared, name))

    def _usable(self) -> None:
        """EmulatorError of one line where the pool can take no command."""
        if self._dead:
            raise EmulatorError("the emulator pool was closed after a worker failed or a stop")

    def _send(self, command: int, slots: np.ndarray) -> int:
        self._usable()
        slots = np.asarray(slots, np.int32)
        self._ticket += 1
        head = HEADER.pack(self._ticket, command)
        owners = slots % self.workers
        busy = set()
        for w in np.unique(owners).tolist():
            try:
                self.conns[w].send_bytes(head + slots[owners == w].tobytes())
            except OSError:  # its end of the pipe closed: it died
                raise self._died(w) from None
            busy.add(w)
        self._open[self._ticket] = busy
        self._sent[self._ticket] = time.monotonic()
        return self._ticket

    def step(self, slots) -> int:
        """These slots play the actions in self.actions[slots]: a ticket for wait()."""
        return self._send(STEP, slots)

    def restart(self, slots) -> int:
        """These slots start a new episode (their first observation in self.obs): a ticket."""
        return self._send(RESTART, slots)

    def play(self, slot: int, ask: bytes) -> int:
        """The slot's worker plays an episode with its player (player(emulator, obs, ask, halt)):
        a ticket for answers()."""
        self._usable()
        w = slot % self.workers
        self._ticket += 1
        try:
            self.conns[w].send_bytes(HEADER.pack(self._ticket, PLAY) + struct.pack("<i", slot) + ask)
        except OSError:
            raise self._died(w) from None
        self._open[self._ticket] = {w}
        self._sent[self._ticket] = time.monotonic()
        return self._ticket

    def answers(self, tickets, bound_s: float | None = None) -> list[tuple[int, bytes]]:
        """(ticket, answer) of the PLAY tickets among these that are in, waiting until one is.
        bound_s: the longest an episode may take, from its play(); a worker whose episode takes
        longer is an EmulatorError of one line naming it (None: no bound)."""
        tickets = list(tickets)
        while True:
            done = [(t, self._answers.pop(t)) for t in tickets if t in self._answers]
            if done:
                for t, _ in done:
                    self._open.pop(t, None)
                    self._sent.pop(t, None)
                return done
            waiting = {self.conns[w]: w for t in tickets for w in self._open.get(t, ())}
            if not waiting:
                raise ValueError(f"no answer is awaited for tickets {tickets}")
            timeout = None
            first = min(tickets, key=lambda t: self._sent.get(t, float("inf")))
            if bound_s is not None and first in self._sent:
                timeout = max(0.0, self._sent[first] + bound_s - time.monotonic())
            ready = wait(list(waiting), timeout)
            if not ready:
                raise self._stuck(min(self._open[first]), bound_s)
            for conn in ready:
                self._reply(waiting[conn])

    def units(self, size: int) -> list[np.ndarray]:
        """The slots in units of at most `size`, each unit the slots of one worker (in slot order):
        every worker's first unit, then every worker's second, ... A unit's step waits on its own
        worker only."""
        own = [np.arange(w, self.slots, self.workers) for w in range(self.workers)]
        size = max(1, size)
        return [o[i : i + size] for i in range(0, len(own[0]), size) for o in own if i < len(o)]

    def first_done(self, tickets) -> list[int]:
        """The tickets among these whose every slot is done (in the order given), waiting until one
        is: the first-ready of several steps in flight. The oldest of them still open after
        STEP_BOUND_S (its worker stopped or stuck, while the others answer) is an EmulatorError of
        one line naming its worker."""
        tickets = list(tickets)
        if not tickets:
            raise ValueError("first_done: no ticket given")
        self._usable()
        while True:
            done = [t for t in tickets if not self._open.get(t)]
            if done:
                for t in done:
                    self._open.pop(t, None)
                    self._sent.pop(t, None)
                return done
            oldest = min(tickets)  # (tickets are numbered in the order sent)
            left = self._sent.get(oldest, time.monotonic()) + STEP_BOUND_S - time.monotonic()
            waiting = {self.conns[w].fileno(): w for t in tickets for w in self._open[t]}
            # the pipes polled before the bound is judged: a driver paused past it (Ctrl-Z, swap,
            # a debugger) finds its workers' answers waiting, and is not a stuck worker
            ready = _ready(waiting, self.spin_s, max(left, 0.0))
            if not ready and left <= 0:
                raise self._stuck(min(self._open[oldest]), STEP_BOUND_S)
            for w in ready:
                self._reply(w)

    def wait(self, ticket: int) -> None:
        """Return when every slot of the ticket's command is done (earlier tickets of its workers
        too); a worker silent for STEP_BOUND_S is an EmulatorError of one line naming it."""
        for w in sorted(self._open.get(ticket, ())):
            while w in self._open[ticket]:
                if not wait([self.conns[w]], STEP_BOUND_S):
                    raise self._stuck(w, STEP_BOUND_S)
                self._reply(w)
        self._open.pop(ticket, None)
        self._sent.pop(ticket, None)

    def _broken(self) -> None:
        """A worker failed: the tickets in flight are dropped, no command is taken again, and the
        episodes still in play stop at their next step."""
        self._open.clear()
        self._dead = True
        self.shared.halt[:] = 1

    def _stuck(self, w: int, bound_s: float) -> EmulatorError:
        """The error of worker w, silent past its bound: the pool takes no more commands, and the
        other workers' episodes stop (the pool is to be closed)."""
        self._broken()
        pid = self.procs[w].pid
        return EmulatorError(
            f"emulator process {w} (pid {pid}) did not answer in {bound_s:.0f} s: stopped (SIGSTOP, a "
            "debugger) or stuck in its game"
        )

    def drain(self) -> None:
        """Wait for every ticket in flight (after an error or a stop: their results are not
        wanted); episodes being played stop at their next step. Answers still missing after
        DRAIN_BOUND_S (one lost to a stop mid-read, a worker that stopped answering) close the
        pool: its workers are killed, and a later command is an EmulatorError."""
        if self._open:
            self.halt[:] = 1
        deadline = time.monotonic() + DRAIN_BOUND_S
        try:
            for t in sorted(self._open):
                for w in sorted(self._open.get(t, ())):
                    while not self._dead and w in self._open.get(t, ()):
                        self._reply(w, timeout=max(0.0, deadline - time.monotonic()), drain=True)
                self._open.pop(t, None)
        except _Late:
            self.close()
        finally:
            self._answers.clear()
            self._sent.clear()
            if not self._dead:
                self.halt[:] = 0

    def _reply(self, w: int, timeout: float | None = None, drain: bool = False) -> None:
        """Read worker w's next answer; an error or its death is an EmulatorError (in a drain,
        no answer within timeout is _Late)."""
        conn, proc = self.conns[w], self.procs[w]
        self._usable()
        if not wait([conn], timeout):
            if drain:
                raise _Late
            raise EmulatorError(f"emulator process {w} (pid {proc.pid}) did not answer in {timeout:.0f} s")
        # A stop signal waits until the answer is read and recorded: cut between a message's
        # header and payload, the pipe's framing would be lost; cut after the read, the answer.
        with stop.held(reraise=False):
            try:
                msg = recv_within(conn, STEP_BOUND_S)
            except TimeoutError:  # stopped mid-send (an answer longer than the pipe's buffer)
                raise self._stuck(w, STEP_BOUND_S) from None
            except (EOFError, OSError):  # its end of the pipe closed: it died
                msg = None
            except BaseException:  # a stop that nevo's handlers do not hold: the framing is lost
                self._dead = True
                raise
            if msg is None:
                raise self._died(w)
            if msg[:1] == FAILED:
                raise EmulatorError(f"emulator process {w}: {msg[1:].decode(errors='replace')}")
            if msg[:1] == READY:
                return
            ticket, command = HEADER.unpack_from(msg, 1)
            self._open.get(ticket, set()).discard(w)
            if command == PLAY and ticket in self._open:
                self._answers[ticket] = msg[1 + HEADER.size :]
            elif command != PLAY and not self._open.get(ticket):  # (every worker's in: no bound left)
                self._sent.pop(ticket, None)

    def _died(self, w: int) -> EmulatorError:
        """The error of worker w, whose pipe closed: how it ended. The tickets in flight are
        dropped (a drain after the error waits for nothing: the pool is to be closed), and the
        other workers' episodes stop at their next step (halt), so that they exit at once."""
        self._broken()
        proc = self.procs[w]
        try:
            code = proc.wait(2)
        except subprocess.TimeoutExpired:
            code = None
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        said = _last_line(self.errs[w]) if w < len(self.errs) else ""
        return EmulatorError(
            f"emulator process {w} (pid {proc.pid}) died ({how}){f': {said}' if said else ''}"
        )

    def close(self) -> None:
        """Stop every worker (at once; they hold no state worth saving)."""
        self._dead = True
        if hasattr(self, "shared"):  # (episodes in play stop at their next step)
            self.shared.halt[:] = 1
        self._closer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _importing_nevo() -> dict:
    """This process's environment, with the folder this nevo is imported from first on
    PYTHONPATH: a worker imports the same nevo, installed or not."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _remedy(e: OSError) -> str:
    """What to do about a start that failed with e, by its errno."""
    return {
        errno.ENOMEM: " (out of memory: fewer --env-slots, or free memory)",
        errno.EMFILE: " (too many open files: raise the limit, ulimit -n, or fewer --env-slots)",
        errno.ENFILE: " (the system's open files are used up: fewer --env-slots)",
        errno.EAGAIN: " (no more processes: raise the limit, ulimit -u, or fewer --processes)",
    }.get(e.errno, "")


def _ready(waiting: dict[int, int], spin_s: float, timeout_s: float) -> list[int]:
    """The values of waiting ({pipe's file descriptor: worker}) whose pipes can be read, polled
    for spin_s, then waited for up to timeout_s (empty if none by then)."""
    pipes = select.poll()
    for fd in waiting:
        pipes.register(fd, select.POLLIN)
    until = time.perf_counter() + spin_s
    while not (events := pipes.poll(0)) and time.perf_counter() < until:
        pass
    if not events:
        events = pipes.poll(timeout_s * 1000)
    return sorted(waiting[fd] for fd, _ in events)


def recv_within(conn: Connection, bound_s: float) -> bytes:
    """conn.recv_bytes(), whose message has begun to arrive, read within bound_s: TimeoutError
    where its sender stops mid-message (SIGSTOP, or stuck), which recv_bytes would wait on for
    ever. The framing is multiprocessing's: a 4-byte big-endian length (-1: an 8-byte one follows),
    then the bytes; EOFError where the sender's end closes."""
    fd, deadline = conn.fileno(), time.monotonic() + bound_s
    pipe = select.poll()
    pipe.register(fd, select.POLLIN)

    def read(n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0 or not pipe.poll(left * 1000):
                raise TimeoutError(f"no whole message in {bound_s:.0f} s")
            chunk = _read_chunk(fd, n - got)
            if not chunk:
                raise EOFError
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    (size,) = struct.unpack("!i", read(4))
    if size == -1:
        (size,) = struct.unpack("!Q", read(8))
    return read(size)


def _read_chunk(fd: int, n: int) -> bytes:
    """Up to n bytes from the pipe fd (where a stop signal can land between a message's parts)."""
    return os.read(fd, n)


class _Late(Exception):
    """A drain's answers did not come within DRAIN_BOUND_S."""


def _last_line(err) -> str:
    """The last line a worker wrote to its stderr file (a traceback's: the exception), or ""."""
    try:
        err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))
        lines = err.read().decode(errors="replace").strip().splitlines()
    except (OSError, ValueError):
        return ""
    return lines[-1].strip() if lines else ""


def _stop(conns, procs, errs=()) -> None:
    """Close the pipes (a worker exits at EOF), then make sure every worker is gone: those still
    running EXIT_BOUND_S later, all together, are killed."""
    for c in conns:
        c.close()
    for e in errs:
        e.close()
    deadline = time.monotonic() + EXIT_BOUND_S
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
