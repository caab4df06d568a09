"""A stop signal that meets a Numba compile or cache load (nevo.runs.stop): raised in llvmlite's
Python code it would be dropped by ctypes or leave LLVM half-built, so it is sent again until it
lands outside; a second stop meanwhile ends the run at once, and a retry never outlives its run."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import default_sigint


def test_a_stop_that_meets_a_compile_stops_the_run_once_it_is_done(capfd):
    """A stop signal while Numba's or llvmlite's Python code runs (a compile, a cache load, LLVM's
    callbacks, where a raised Stopped is dropped by ctypes or leaves LLVM half-built) is sent again
    until it lands outside: the run stops right after the compile, having said so in one line
    at once, nothing on stderr."""
    code = compile(
        "def compiling(events):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    t0 = time.monotonic()\n"
        "    while time.monotonic() - t0 < 0.3:  # Python of llvmlite's, the signal handled meanwhile\n"
        "        pass\n"
        "    events.append('compiled')\n",
        "<llvmlite's callback>",
        "exec",
    )
    fake = {"__name__": "llvmlite.binding.executionengine", "os": os, "signal": signal, "time": time}
    exec(code, fake)
    from nevo.runs import stop

    events = []
    with stop.on_signals():
        t0 = time.monotonic()
        with pytest.raises(stop.Stopped):
            fake["compiling"](events)
            events.append("after")
            time.sleep(5)
        took = time.monotonic() - t0
    out, err = capfd.readouterr()
    assert events == ["compiled", "after"] and 0.3 <= took < 2, (events, took, out, err)  # (the sleep: 5)
    assert out == "SIGTERM: stopping once Numba's compile under way is done; send it again to end now\n", err
    assert err == "", out


def _sigterm_in_a_compile() -> None:
    """SIGTERM to this process from code that stop takes for llvmlite's (its module's name), which
    then runs on 0.2 s: the stop meets a compile and is sent again until it lands outside."""
    code = compile(
        "def compiling():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    t0 = time.monotonic()\n"
        "    while time.monotonic() - t0 < 0.2:\n"
        "        pass\n",
        "<llvmlite's callback>",
        "exec",
    )
    fake = {"__name__": "llvmlite.binding.executionengine", "os": os, "signal": signal, "time": time}
    exec(code, fake)
    fake["compiling"]()


def test_a_stop_sent_again_goes_to_the_main_thread(monkeypatch):
    """The stop that met a compile is sent again to the main thread itself, not to the process: a
    signal the process gets may be taken by another thread (the retry's own), and then the main
    thread's blocking call (here a sleep of 5 s) is not interrupted and the stop waits for it."""
    import threading

    from nevo.runs import stop

    sent = []  # (the sending thread is the main one, the thread the signal is sent to, or None)
    kill, pthread_kill = os.kill, signal.pthread_kill

    def to_process(pid, signum):
        sent.append((threading.current_thread() is threading.main_thread(), None))
        kill(pid, signum)

    def to_thread(ident, signum):
        sent.append((threading.current_thread() is threading.main_thread(), ident))
        pthread_kill(ident, signum)

    monkeypatch.setattr(os, "kill", to_process)
    monkeypatch.setattr(signal, "pthread_kill", to_thread)
    with stop.on_signals(), pytest.raises(stop.Stopped):
        _sigterm_in_a_compile()
        time.sleep(5)
    resent = sent[1:]  # (the first: the test's own, to the process)
    assert sent[0] == (True, None) and resent, sent
    assert all(not main and ident == threading.main_thread().ident for main, ident in resent), sent


def test_a_retry_lost_on_the_way_into_a_blocking_call_is_sent_once_more(monkeypatch):
    """A retry's signal that lands as the main thread enters a blocking call is handled only when
    the call returns (CPython's sleep does not look at its signals before it starts): a send that
    no handling followed within LOST_S is sent once more, so the stop ends the 5 s sleep at once.
    The race is made here by losing the first retry's send; and a send more is no second stop."""
    from nevo.runs import stop

    pthread_kill, lost = signal.pthread_kill, []

    def losing_the_first(ident, signum):
        if not lost:
            lost.append(signum)  # (as if handled by the C handler just before the sleep began)
            return
        pthread_kill(ident, signum)

    monkeypatch.setattr(signal, "pthread_kill", losing_the_first)
    t0 = time.monotonic()
    with stop.on_signals(), pytest.raises(stop.Stopped):
        _sigterm_in_a_compile()
        time.sleep(5)
    took = time.monotonic() - t0
    assert lost == [signal.SIGTERM] and took < 2, (lost, took)


COMPILING = '''
import os, signal, sys, time
from nevo.runs import stop
code = compile("""
def compiling(seconds, *signals):
    for s in signals:
        os.kill(os.getpid(), s)
        time.sleep(0.05)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        pass
""", "<llvmlite's callback>", "exec")
fake = {"__name__": "llvmlite.binding.executionengine", "os": os, "signal": signal, "time": time}
exec(code, fake)
'''


def test_a_second_stop_while_the_first_waits_out_a_compile_ends_at_once():
    """SIGTERM, then Ctrl-C, both during a compile of 5 s: the second ends the run at once, in one
    line, as a second stop does anywhere else."""
    script = COMPILING + "with stop.on_signals():\n    fake['compiling'](5.0, signal.SIGTERM, signal.SIGINT)"
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=default_sigint)  # fmt: skip
    assert time.monotonic() - t0 < 4
    assert done.returncode == 130, done.stderr
    assert (
        done.stdout == "SIGTERM: stopping once Numba's compile under way is done; send it again to end now\n"
    )
    assert done.stderr.startswith("stopped by SIGINT (Ctrl-C) a second time: ended at once")
    assert len(done.stderr.splitlines()) == 1


def test_a_stop_waiting_out_a_compile_never_reaches_the_next_run():
    """A run whose stop met a compile and that then ended on its own (its retry not yet sent):
    the next run in the same process (a suite, a notebook) is not stopped by it."""
    script = COMPILING + (
        "with stop.on_signals():\n"
        "    fake['compiling'](0.0, signal.SIGTERM)\n"  # (the retry is due 20 ms after the signal)
        "with stop.on_signals():\n"
        "    time.sleep(0.3)\n"
        "print('the next run went on')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "the next run went on", done.stderr
