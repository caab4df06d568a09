"""The worker side of nevo's emulator pool (nevo.atari.pool): the process that owns a
share of the slots' emulators, the shared block they write into, and the messages on its pipe.

A worker is a new interpreter (`python -m nevo.atari.worker PIPE BLOCK EXTRA`, the file
descriptors the pool passes it). Its first message is its setup (pickled: the game, its slots,
its index among the workers, a player); it answers READY once its emulators are made, or FAILED
with one line. Then each command is a HEADER (ticket, command) and the slots as int32 (PLAY: one
slot, then the player's ask); the worker steps, restarts or plays them, writes their results into
the shared block (`Shared`) and answers ANSWER with the header and the player's bytes. The block
itself the pool makes (`block_fd`: an anonymous memfd) and passes to each worker it starts.
"""

from __future__ import annotations

import errno
import mmap
import os
import pickle
import select
import signal
import struct
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from nevo.atari.emulator import FRAME, RAM_BYTES, STACK
from nevo.settings import raised

STEP, RESTART, PLAY = 1, 2, 3
# What a worker's message to the driving process begins with: it failed (one line follows), it
# is ready (its emulators made), or a command's answer (its header, then any answer bytes).
FAILED, READY, ANSWER = b"E", b"R", b"T"
HEADER = struct.Struct("<IB")  # (ticket, command), then the slots as int32 (PLAY: one slot, then the ask)


class Shared:
    """Every slot's arrays in one block of shared memory (views; nothing is copied).

    obs (S, STACK, 84, 84) uint8: the observation the next action acts on; actions (S,) int32:
    action indices the driver writes before a step (-n: the reference's start with n no-ops, of
    the episode whose seed is in seed (S,) int64, which draws its sticky actions); reward (S,)
    float64 and done (S,) int8 (nevo.atari.emulator's PLAYING / TERMINATED / TRUNCATED) of the last
    step; frames (S,) int64 and ram (S, 128) uint8: of the episode the last step ended."""

    FIELDS = (
        ("obs", np.uint8, (STACK, *FRAME)),
        ("actions", np.int32, ()),
        ("seed", np.int64, ()),
        ("reward", np.float64, ()),
        ("done", np.int8, ()),
        ("frames", np.int64, ()),
        ("ram", np.uint8, (RAM_BYTES,)),
        ("halt", np.int8, ()),  # (S,) set: the slot's episode in PLAY stops at its next step
    )

    def __init__(self, buffer, slots: int):
        for (name, dtype, shape), offset in zip(self.FIELDS, self.offsets(slots)):
            count = slots * int(np.prod(shape, dtype=np.int64))
            setattr(self, name, np.frombuffer(buffer, dtype, count, offset).reshape(slots, *shape))

    @classmethod
    def offsets(cls, slots: int) -> list[int]:
        """Where each field starts in the block (64-byte aligned), then the block's size."""
        ends = [0]
        for _, dtype, shape in cls.FIELDS:
            n = slots * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            ends.append(ends[-1] + -(-n // 64) * 64)
        return ends

    @classmethod
    def nbytes(cls, slots: int) -> int:
        return cls.offsets(slots)[-1]


def block_fd(name: str) -> int:
    """A file descriptor of a new block of shared memory: an anonymous memfd, or an unlinked
    temporary file where the system has none."""
    try:
        return os.memfd_create(name)
    except (AttributeError, OSError) as e:
        if isinstance(e, OSError) and e.errno != errno.ENOSYS:
            raise
        return _temp_fd()


def _temp_fd() -> int:
    """A file descriptor of an unlinked temporary file (where memfd_create does not exist)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="nevo-emulators-")
    os.unlink(path)
    return fd


def serve(conn, fd: int, extra_fd: int):
    """A worker process: read its setup (the pool's first message), make this worker's emulators,
    then step, restart or play slots on command."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driving process stops the pool
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        setup = pickle.loads(conn.recv_bytes())
        slots, index, workers = setup["slots"], setup["index"], setup["workers"]
        if setup["nice"]:
            os.nice(setup["nice"])
        if hasattr(os, "sched_setscheduler"):
            # speed: a woken worker no longer preempts the driving process mid-command (Linux's
            # SCHED_BATCH: no wakeup preemption, the same share of the cores); the driver's time in
            # step commands fell from 0.9-1.3 s to 0.15-0.17 s a generation, 1.08x frames/s
            # (2 cores, docs/lab/2026-11-27.md)
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        from nevo.atari.emulator import AtariEmulator

        block = mmap.mmap(fd, Shared.nbytes(slots))
        os.close(fd)
        shared = Shared(block, slots)
        player = setup["player"]
        if player is not None:
            extra = None
            if extra_fd >= 0:
                extra = mmap.mmap(extra_fd, setup["extra_bytes"])
                os.close(extra_fd)
            player.attach(extra)
        mine = range(index, slots, workers)
        game, frameskip, frame_cap = setup["game"], setup["frameskip"], setup["frame_cap"]
        emulators = [AtariEmulator(game, frameskip, frame_cap, setup["sticky"]) for _ in mine]
        for s, em in zip(mine, emulators):
            em.restart(shared.obs[s])
    except Exception as e:  # a bad game or ROM: one line back to the driver
        send(conn, FAILED + raised(e).encode())
        return
    if not send(conn, READY):
        return
    obs, actions, seed, reward, done = shared.obs, shared.actions, shared.seed, shared.reward, shared.done
    frames, ram, halt = shared.frames, shared.ram, shared.halt
    spin_s, pipe = setup["spin_s"], select.poll()
    pipe.register(conn.fileno(), select.POLLIN)
    while True:
        if spin_s:  # poll the pipe for spin_s before sleeping in recv (SPIN_S)
            until = time.perf_counter() + spin_s
            while not pipe.poll(0) and time.perf_counter() < until:
                pass
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):  # the pool closed, or the driving process died
            return
        ticket, command = HEADER.unpack_from(msg)
        answer = b""
        try:
            if command == PLAY:
                s = int(np.frombuffer(msg, np.int32, 1, HEADER.size)[0])
                answer = player(emulators[s // workers], obs[s], msg[HEADER.size + 4 :], halt[s : s + 1])
            else:
                for s in np.frombuffer(msg, np.int32, offset=HEADER.size).tolist():
                    em = emulators[s // workers]
                    if command == STEP and actions[s] < 0:  # -n: the reference's start, n no-ops
                        em.begin(obs[s], -int(actions[s]), int(seed[s]))
                        reward[s], done[s] = 0, 0
                    elif command == STEP:
                        r, d = em.step(int(actions[s]), obs[s])
                        reward[s], done[s] = r, d
                        if d:  # the episode's end: its frames and RAM, then the next episode's start
                            frames[s] = em.episode_frames()
                            ram[s] = em.ram()
                            em.restart(obs[s])
                    else:
                        em.restart(obs[s])
                        reward[s], done[s] = 0, 0
        except Exception as e:
            send(conn, FAILED + raised(e).encode())
            return
        if not send(conn, ANSWER + HEADER.pack(ticket, command) + answer):
            return


def send(conn, message: bytes) -> bool:
    """Send to the driving process; False when it is gone (it closed the pipe or died, e.g. a
    Ctrl-C during the pool's start): the worker then ends quietly, with no traceback."""
    try:
        conn.send_bytes(message)
        return True
    except OSError:
        return False


if __name__ == "__main__":  # a worker process, started by EmulatorPool
    serve(Connection(int(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3]))
