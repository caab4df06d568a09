"""nevo's emulator pool: the emulators' own steps through shared memory, and a clean end however it ends."""

import errno
import os
import re
import signal
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from nevo.atari.emulator import AtariEmulator
from nevo.atari.pool import EmulatorError, EmulatorPool
from tests.helpers import Forever, alive, default_sigint, survivors_of_a_killed_owner


@pytest.mark.slow
def test_slots_step_as_lone_emulators_do():
    """5 slots over 2 workers (slot s on worker s % 2): each slot's observations, rewards, ends,
    frames and RAM are those of an AtariEmulator of its own stepped with the same actions, and an
    ended slot has started its next episode (its first observation in place)."""
    n = 5
    pool = EmulatorPool("frostbite", 4, 200, n, 2)  # 200 frames: every episode ends at step 50
    try:
        alone = [AtariEmulator("frostbite", 4, 200) for _ in range(n)]
        obs = np.zeros((n, 4, 84, 84), np.uint8)
        for s in range(n):
            alone[s].restart(obs[s])
        np.testing.assert_array_equal(pool.obs, obs)
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(120):
            some = np.flatnonzero(rng.random(n) < 0.8)  # a few slots sit out each step
            actions = rng.integers(0, len(alone[0].actions), n)
            pool.actions[some] = actions[some]
            pool.wait(pool.step(some))
            for s in some:
                r, done = alone[s].step(int(actions[s]), obs[s])
                assert (pool.reward[s], pool.done[s]) == (r, done)
                if done:
                    ends += 1
                    assert pool.frames[s] == alone[s].episode_frames()
                    np.testing.assert_array_equal(pool.ram[s], alone[s].ram())
                    alone[s].restart(obs[s])
            np.testing.assert_array_equal(pool.obs, obs)
        assert ends >= n
    finally:
        pool.close()


@pytest.mark.slow
def test_tickets_in_flight_finish_in_order():
    """Several commands may be in flight; waiting for the last waits for the ones before."""
    pool = EmulatorPool("pong", 4, 20_000, 4, 2)
    try:
        tickets = [pool.step(np.arange(4)) for _ in range(5)]
        pool.wait(tickets[-1])
        assert tickets[-1] not in pool._open  # (waited for)
        assert all(pool._open[t] == set() for t in tickets[:-1])  # every worker answered each
        pool.drain()
        assert not pool._open
    finally:
        pool.close()


@pytest.mark.slow
def test_a_killed_worker_is_one_line_naming_it_and_never_a_hang():
    """kill -9 of an emulator process: the next wait raises an EmulatorError of one line naming
    the process, its pid and the signal, within seconds; close() still ends the others."""
    pool = EmulatorPool("frostbite", 4, 20_000, 4, 2)
    victim = pool.procs[1]
    try:
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(EmulatorError) as e:
            for _ in range(100):
                pool.wait(pool.step(np.arange(4)))
        assert time.monotonic() - t0 < 10
        assert str(e.value) == f"emulator process 1 (pid {victim.pid}) died (killed by signal 9)"
    finally:
        pool.close()
    assert not any(alive(p.pid) for p in pool.procs)


def test_a_bad_rom_is_one_line():
    """A game ale-py cannot load stops the pool's start in one line, with no process left."""
    with pytest.raises(EmulatorError) as e:
        EmulatorPool("no_such_game", 4, 20_000, 2, 2)
    assert "\n" not in str(e.value) and "no_such_game" in str(e.value)
    assert str(e.value).startswith("emulator process 0: ")


@pytest.mark.slow
def test_workers_ignore_ctrl_c_and_end_with_the_pool():
    """SIGINT (a terminal's Ctrl-C reaches the whole process group) leaves a worker running and
    answering; close() ends every worker at once."""
    pool = EmulatorPool("pong", 4, 20_000, 2, 2)
    try:
        os.kill(pool.procs[0].pid, signal.SIGINT)
        os.kill(pool.procs[1].pid, signal.SIGTERM)
        time.sleep(0.3)
        pool.wait(pool.step(np.arange(2)))
    finally:
        t0 = time.monotonic()
        pool.close()
    assert time.monotonic() - t0 < 5
    assert not any(alive(p.pid) for p in pool.procs)


OWNER = textwrap.dedent("""
    import sys, time
    import numpy as np
    from nevo.atari.pool import EmulatorPool
    pool = EmulatorPool("frostbite", 4, 20_000, 4, 2)
    print(*[p.pid for p in pool.procs], flush=True)
    while True:  # stepping when it is killed
        pool.wait(pool.step(np.arange(4)))
""")


def memfds(pid: int) -> set[str]:
    """The inodes of nevo's shared blocks that process pid maps (an anonymous memfd shows in
    /proc/PID/maps as /memfd:nevo-emulators (deleted), or nevo-rows; never in /dev/shm)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {line.split()[4] for line in f if "/memfd:nevo-" in line}
    except OSError:  # (gone, or not ours to read)
        return set()


def mapping(inodes: set[str]) -> list[int]:
    """Every process that maps one of these memfds."""
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return [p for p in pids if memfds(p) & inodes]


@pytest.mark.slow
def test_a_process_killed_with_sigkill_leaves_no_emulator_and_no_shared_memory():
    """kill -9 of the process that owns a pool (mid-step): its emulator processes exit within a
    few seconds (their pipe closes) and no process maps its shared block any more (an anonymous
    memfd, freed with its last mapping), which the owner and both workers mapped before."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    blocks = set()

    def inspect(pid, workers):
        blocks.update(memfds(pid))
        assert blocks and all(memfds(w) == blocks for w in workers)

    try:
        assert not survivors_of_a_killed_owner(owner, 0.5, inspect)
        assert blocks and mapping(blocks) == []
    finally:
        owner.kill()


@pytest.mark.slow
@pytest.mark.parametrize("where", ["between the header and the payload", "after the read"])
def test_a_stop_mid_read_loses_no_answer_and_never_hangs(where, monkeypatch):
    """SIGTERM (nevo's handlers installed, as in a run) landing inside the read of an answer
    stops the waiting at once, after the answer is read and recorded: the drain that follows
    needs no bound (nothing was lost) and the pipes keep their framing (the pool steps on)."""
    from nevo.atari import pool as emulator_pool
    from nevo.runs import stop

    pool = EmulatorPool("pong", 4, 20_000, 4, 2)
    fired = []
    if where == "after the read":
        real = emulator_pool.recv_within

        def hooked(*args):
            msg = real(*args)
            if not fired:
                fired.append(os.kill(os.getpid(), signal.SIGTERM))
            return msg

        monkeypatch.setattr(emulator_pool, "recv_within", hooked)
    else:
        real = emulator_pool._read_chunk

        def hooked(fd, n):
            got = real(fd, n)
            if n == 4 and not fired:  # the header: the payload is still in the pipe
                fired.append(os.kill(os.getpid(), signal.SIGTERM))
            return got

        monkeypatch.setattr(emulator_pool, "_read_chunk", hooked)
    try:
        with stop.on_signals():
            with pytest.raises(stop.Stopped):
                for _ in range(20):
                    pool.wait(pool.step(np.arange(4)))
            assert fired
            t0 = time.monotonic()
            pool.drain()
            assert time.monotonic() - t0 < 1 and not pool._open
            monkeypatch.undo()
            pool.wait(pool.step(np.arange(4)))
    finally:
        pool.close()
    assert not any(alive(p.pid) for p in pool.procs)


@pytest.mark.slow
def test_a_drain_gives_up_on_a_worker_that_stopped_answering():
    """A worker stopped (SIGSTOP) while a step is in flight: the drain ends after its bound,
    killing the workers; the next command is one line, never a hang."""
    from nevo.atari import pool as emulator_pool

    pool = EmulatorPool("pong", 4, 20_000, 2, 2)
    try:
        os.kill(pool.procs[1].pid, signal.SIGSTOP)
        pool.step(np.arange(2))
        t0 = time.monotonic()
        pool.drain()
        assert emulator_pool.DRAIN_BOUND_S - 0.1 < time.monotonic() - t0 < emulator_pool.DRAIN_BOUND_S + 5
        assert not any(alive(p.pid) for p in pool.procs)
        with pytest.raises(EmulatorError, match="^the emulator pool was closed"):
            pool.wait(pool.step(np.arange(2)))
    finally:
        pool.close()


@pytest.mark.slow
def test_a_dead_worker_halts_the_others_at_once():
    """kill -9 of one of 8 workers each playing an endless episode: the driver's wait is one line
    naming it, and the drain and close that follow end every other worker within 5 s (their
    episodes halted at once, the exits awaited together)."""
    pool = EmulatorPool("pong", 4, 20_000, 8, 8, player=Forever(), extra_bytes=64)
    try:
        tickets = [pool.play(s, b"ask") for s in range(8)]
        time.sleep(0.5)
        victim = pool.procs[3]
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(EmulatorError, match=f"emulator process 3 \\(pid {victim.pid}\\) died"):
            pool.answers(tickets)
        pool.drain()
        pool.close()
        assert time.monotonic() - t0 < 5
        assert not any(alive(p.pid) for p in pool.procs)
    finally:
        pool.close()


@pytest.mark.parametrize(
    "what, code, says",
    [
        ("memfd_create", errno.ENOMEM, "OSError: [Errno 12] Cannot allocate memory (out of memory: "),
        ("memfd_create", errno.EMFILE, "(too many open files: raise the limit, ulimit -n, or fewer"),
        ("Popen", errno.EAGAIN, "(no more processes: raise the limit, ulimit -u, or fewer --processes)"),
    ],
)
def test_a_pool_that_cannot_start_is_one_line_and_leaves_no_process(what, code, says, monkeypatch):
    """No memory, no file descriptors, no process for the second worker: an EmulatorError of one
    line naming the cause and its remedy; the worker that did start is gone."""
    from nevo.atari import pool as emulator_pool

    started = []
    if what == "Popen":
        real = subprocess.Popen

        def popen(*args, **kwargs):
            if started:
                raise OSError(code, os.strerror(code))
            started.append(real(*args, **kwargs))
            return started[-1]

        monkeypatch.setattr(emulator_pool.subprocess, "Popen", popen)
    else:

        def memfd_create(name):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(emulator_pool.os, "memfd_create", memfd_create)
    with pytest.raises(EmulatorError) as e:
        EmulatorPool("pong", 4, 20_000, 2, 2)
    assert str(e.value).startswith("the emulator pool could not start: ")
    assert says in str(e.value) and "\n" not in str(e.value)
    assert all(p.poll() is not None for p in started)


CTRL_C_AT_START = textwrap.dedent("""
    import os, signal, subprocess, threading
    from nevo.atari.pool import EmulatorPool
    real, started = subprocess.Popen, []

    def popen(*args, **kwargs):  # Ctrl-C at the terminal (SIGINT to the whole foreground process
        started.append(real(*args, **kwargs))  # group) while the second worker imports
        if len(started) == 2:
            threading.Timer(0.05, os.killpg, (os.getpgid(0), signal.SIGINT)).start()
        return started[-1]

    subprocess.Popen = popen
    try:
        EmulatorPool("pong", 4, 20_000, 2, 2)
    except KeyboardInterrupt:
        print("stopped", flush=True)
""")


@pytest.mark.slow
def test_ctrl_c_while_the_pool_starts_prints_no_worker_traceback():
    """A terminal's Ctrl-C during the workers' start (their imports take ~0.4 s) reaches only the
    driving process: no worker prints a traceback, and none is left."""
    run = subprocess.run([sys.executable, "-c", CTRL_C_AT_START], capture_output=True, text=True,
                         timeout=120, start_new_session=True, preexec_fn=default_sigint)  # fmt: skip
    assert run.stdout == "stopped\n"
    assert "Traceback" not in run.stderr and "KeyboardInterrupt" not in run.stderr, run.stderr


def test_units_split_each_workers_slots_and_hold_every_slot_once():
    """EmulatorPool.units: every slot in exactly one unit, each unit of one worker's slots (slot s
    is worker s % W's), at most `size` slots, every worker's first unit before any second."""
    from types import SimpleNamespace

    for slots, workers, size in [(32, 2, 8), (512, 16, 16), (1000, 16, 32), (12, 2, 3), (5, 2, 4), (7, 3, 1)]:
        pool = SimpleNamespace(slots=slots, workers=workers)
        units = EmulatorPool.units(pool, size)
        flat = np.concatenate(units)
        assert sorted(flat.tolist()) == list(range(slots))
        assert all(len(u) <= size and len(set((u % workers).tolist())) == 1 for u in units)
        firsts = [u[0] for u in units]
        assert firsts[:workers] == list(range(workers))  # each worker's first unit leads


@pytest.mark.slow
def test_first_done_takes_the_ready_step_not_the_oldest():
    """Two units' steps in flight, the older one's worker stopped (SIGSTOP): first_done returns the
    younger one at once (waiting on the oldest, as wait does, would hang until SIGCONT); both once
    the worker goes on; a worker silent past STEP_BOUND_S is one line naming it, while the other
    answers."""
    from nevo.atari import pool as emulator_pool

    pool = EmulatorPool("pong", 4, 20_000, 4, 2)
    try:
        zero, one = pool.units(2)  # worker 0's slots 0, 2; worker 1's 1, 3
        assert zero.tolist() == [0, 2] and one.tolist() == [1, 3]
        os.kill(pool.procs[0].pid, signal.SIGSTOP)
        try:
            older, younger = pool.step(zero), pool.step(one)
            t0 = time.monotonic()
            assert pool.first_done([older, younger]) == [younger]
            assert time.monotonic() - t0 < 5
        finally:
            os.kill(pool.procs[0].pid, signal.SIGCONT)
        assert pool.first_done([older]) == [older]
        older, younger = pool.step(zero), pool.step(one)
        while len(done := pool.first_done([older, younger])) < 2:  # both answered, each once
            assert done in ([older], [younger])
            older, younger = [t for t in (older, younger) if t not in done] * 2
        os.kill(pool.procs[1].pid, signal.SIGSTOP)
        emulator_pool.STEP_BOUND_S, saved = 1.0, emulator_pool.STEP_BOUND_S
        try:  # the other worker answering all the while: the stopped one is named all the same
            stuck, t0 = pool.step(one), time.monotonic()
            pid = pool.procs[1].pid
            said = rf"^emulator process 1 \(pid {pid}\) did not answer in 1 s: stopped"
            with pytest.raises(EmulatorError, match=said):
                while time.monotonic() - t0 < 10:
                    assert stuck not in pool.first_done([stuck, pool.step(zero)])
            assert time.monotonic() - t0 < 3
        finally:
            emulator_pool.STEP_BOUND_S = saved
    finally:
        pool.close()


@pytest.mark.slow
def test_a_driver_paused_past_the_bound_is_not_a_stuck_worker():
    """Steps sent, then the driver away for longer than STEP_BOUND_S (Ctrl-Z and fg, swap, a
    debugger) while its workers answered: first_done takes the answers waiting in the pipes, and
    wait too, with no error."""
    from nevo.atari import pool as emulator_pool

    pool = EmulatorPool("pong", 4, 20_000, 4, 2)
    emulator_pool.STEP_BOUND_S, saved = 0.5, emulator_pool.STEP_BOUND_S
    try:
        for _ in range(2):
            zero, one = pool.units(2)
            tickets = [pool.step(zero), pool.step(one)]
            time.sleep(1.5)  # (the driver paused; its workers answered long ago)
            done = []
            while len(done) < 2:
                done += pool.first_done([t for t in tickets if t not in done])
            assert sorted(done) == sorted(tickets)
        ticket = pool.step(np.arange(4))
        time.sleep(1.5)
        pool.wait(ticket)
    finally:
        emulator_pool.STEP_BOUND_S = saved
        pool.close()


@pytest.mark.slow
def test_spinning_workers_step_as_sleeping_ones_do():
    """A pool whose workers and driver poll their pipes before sleeping (spin_s) gives the same
    observations, rewards and ends as one that sleeps at once."""
    seen = []
    for spin_s in (0.0, 0.002):
        pool = EmulatorPool("frostbite", 4, 400, 4, 2, spin_s=spin_s)
        try:
            rng, out = np.random.default_rng(1), []
            for _ in range(120):
                pool.actions[:] = rng.integers(0, 18, 4)
                tickets = [pool.step(u) for u in pool.units(1)]
                done = []
                while len(done) < len(tickets):
                    done += pool.first_done([t for t in tickets if t not in done])
                out.append((pool.obs.copy(), pool.reward.copy(), pool.done.copy()))
            seen.append(out)
        finally:
            pool.close()
    for (o0, r0, d0), (o1, r1, d1) in zip(*seen):
        np.testing.assert_array_equal(o0, o1)
        np.testing.assert_array_equal(r0, r1)
        np.testing.assert_array_equal(d0, d1)
    assert sum(int(d.sum()) for _, _, d in seen[0]) > 0  # episodes ended (400 frames: every 100 steps)


def test_an_answer_is_read_whole_or_its_stopped_sender_named_within_the_bound():
    """recv_within reads what Connection.send_bytes sends (short, and longer than a pipe's
    buffer), and a sender stopped mid-message is a TimeoutError at the bound, not a wait for
    ever."""
    import socket
    import threading
    from multiprocessing.connection import Connection

    from nevo.atari.pool import recv_within

    a, b = socket.socketpair()
    mine, theirs = Connection(a.detach()), Connection(b.detach())
    try:
        for message in (b"T" + bytes(10), os.urandom(3_000_000)):
            sender = threading.Thread(target=theirs.send_bytes, args=(message,))
            sender.start()
            assert recv_within(mine, 10.0) == message
            sender.join()
        whole = struct.pack("!i", 1_000_000)  # a header of a megabyte, then a tenth of it
        os.write(theirs.fileno(), whole + bytes(100_000))
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            recv_within(mine, 0.5)
        assert time.monotonic() - t0 < 3
    finally:
        mine.close()
        theirs.close()


def test_a_worker_that_cannot_import_is_one_line_with_its_reason(tmp_path, capfd):
    """An emulator process that fails at import (a broken install) ends the pool's start in one
    EmulatorError naming its exception, and prints no traceback on the terminal."""
    broken = tmp_path / "numpy"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('numpy is broken here')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with pytest.raises(EmulatorError) as e:
        EmulatorPool("pong", 4, 400, 2, 2, worker_env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{root}"})
    said = r"emulator process \d \(pid \d+\) died \(exit status 1\): ImportError: numpy is broken here$"
    assert re.match(said, str(e.value)), str(e.value)
    assert "Traceback" not in capfd.readouterr().err
