"""Stop signals: SIGTERM (what a batch scheduler sends at a job's time limit, before SIGKILL) and
SIGINT (Ctrl-C) become a `Stopped` exception in the main thread, of KeyboardInterrupt's kind, so
a run unwinds through the same finally paths for both: the evaluator's close() ends its
emulators, workers and threads, whatever they are, and the generation loop says in one line where
it stopped and how to go on (nevo.loops.loop.stopped).

A generation's files (its metrics row, the elite files, the checkpoint) are written with the
signals held (`held`): a signal that arrives then stops the run once they are all written, so a
stop never leaves half a generation. A signal that arrives while Numba compiles or loads a kernel
from its cache waits until it is done (`_in_compiler`), saying so in one line at once. Any other
moment, it stops the run at once: the generation in flight is dropped, as a kill drops it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stopped(KeyboardInterrupt):
    """A stop signal, raised in the main thread; `signum` says which (SIGINT: Ctrl-C)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def caused(error: BaseException) -> bool:
    """Whether error is a stop: a KeyboardInterrupt (Stopped among them), or any error met while a
    Stopped unwinds the run (raised inside a callback of compiled code, for one, it reaches the loop
    as numba's SystemError; a task's wrapper may have turned it into a ConfigError)."""
    return isinstance(error, KeyboardInterrupt) or _state.stopping


def signum_of(error: BaseException) -> int:
    """The signal a stop (caused(error)) came from; a KeyboardInterrupt that Python raised itself:
    SIGINT."""
    return getattr(error, "signum", None) or _state.signum or signal.SIGINT


# What the line of a second stop says of the run folder (its files are written whole or not at all).
SECOND = "the run folder holds every generation written whole before it (resume as the first stop said)"


class _State:
    installed = False  # this module's handlers are in place
    holding = False  # a generation's files are being written: a signal waits for the end
    pending: int | None = None  # a signal that arrived while held
    stopping = False  # a Stopped was raised: the run unwinds; later signals add nothing
    signum: int | None = None  # the signal of that Stopped
    retry: threading.Timer | None = None  # a stop that met a compile, to be sent again (_again)
    resent = False  # the signal now handled is that retry's
    handled = 0  # the handler's calls so far (a retry's send that none followed was lost: _again)


_state = _State()


def named(signum: int) -> str:
    """A stop signal as a run's line names it: SIGTERM, SIGINT (Ctrl-C)."""
    return signal.Signals(signum).name + (" (Ctrl-C)" if signum == signal.SIGINT else "")


# How soon a stop that met a compile (`_in_compiler`) is sent again; and how long a retry's send
# may go unhandled before it is sent once more (LOST_S). A signal that lands while the main thread
# enters a blocking call (between the interpreter's last look at its signals and the call, where a
# busy machine may hold it for milliseconds) is handled only when the call returns: CPython's sleep
# and waits do not look before they start. Seen as a 5 s sleep not cut short, 1 run in 3 beside
# training on the 2-core VM.
RETRY_S, LOST_S = 0.02, 0.25
# Held by a retry's send and by the end of on_signals: a retry never outlives the handlers.
_retry_lock = threading.Lock()


def _handler(signum, frame) -> None:
    resent, _state.resent = _state.resent, False
    _state.handled += 1
    if resent and _state.stopping:  # a retry sent once more that met the stop it was for
        return
    # a second stop while the first unwinds, or while it waits out a compile: end at once, in one line
    if _state.stopping or (_state.retry is not None and not resent):
        os.write(2, f"stopped by {named(signum)} a second time: ended at once; {SECOND}\n".encode())
        os._exit(128 + signum)
    _state.retry = None
    if _state.pending is None and _state.holding:
        _state.pending = signum
        return
    if _in_compiler(frame):  # sent again in RETRY_S, until it lands outside
        if not resent:  # (a compile on a cold cache can take a minute: say so at once)
            again = "press Ctrl-C again" if signum == signal.SIGINT else "send it again"
            # (on stdout, where the run's lines go; os.write, which a handler may call anywhere)
            os.write(1, f"{named(signum)}: stopping once Numba's compile under way is done; {again} to "
                        "end now\n".encode())  # fmt: skip
        _state.retry = threading.Timer(RETRY_S, _again, (signum,))
        _state.retry.daemon = True
        _state.retry.start()
        return
    _state.stopping, _state.signum = True, signum
    raise Stopped(signum)


def _in_compiler(frame) -> bool:
    """Whether frame or one of its callers is Numba's or llvmlite's Python code: a compile, a cache
    load, LLVM's callbacks (and numba.cuda's launches: a stop there waits a few retries). A Stopped
    raised there is lost (ctypes prints and drops an exception raised in a callback from C:
    "Exception ignored on calling ctypes callback function") or leaves LLVM half-built (a run
    stopped at such a moment once ended by SIGSEGV at its exit)."""
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(("numba", "llvmlite")):
            return True
        frame = frame.f_back
    return False


def _again(signum: int) -> None:
    """Send a stop that met a compile again (from its timer's thread), unless the block of
    on_signals has ended or the run stops already. Sent to the main thread itself: a signal sent to
    the process may be taken by another thread (this one), and then a blocking call of the main
    thread (a sleep, a wait on a pipe) is not interrupted, so the stop waits for it to return."""
    while True:
        with _retry_lock:
            if not _state.installed or _state.stopping:
                return
            _state.resent, handled = True, _state.handled
            signal.pthread_kill(threading.main_thread().ident, signum)
        time.sleep(LOST_S)  # handled meanwhile (outside a compile: the stop; inside: a new retry)?
        if _state.handled != handled:
            return


@contextlib.contextmanager
def on_signals():
    """SIGTERM and SIGINT as Stopped for the time of the block, in the main thread only, and only
    where their handlers are Python's own (a program's own handler is left alone); nothing where
    this module's are already in place (a run inside a command line)."""
    if _state.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    defaults = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    mine = [s for s in SIGNALS if previous[s] is defaults[s]]
    _state.installed, _state.holding = True, False
    _state.pending, _state.stopping, _state.signum = None, False, None
    _state.retry, _state.resent = None, False
    for s in mine:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        with _retry_lock:  # (a retry's send either happened before, or finds the block ended)
            _state.installed = False
            if _state.retry is not None:
                _state.retry.cancel()
        for s in mine:
            signal.signal(s, previous[s])
        _state.pending, _state.stopping, _state.signum, _state.retry = None, False, None, None


@contextlib.contextmanager
def held(reraise: bool = True):
    """Hold stop signals while a generation's files are written (or an answer is read off a pipe:
    reraise=False); one that arrived meanwhile stops the run at the end of the block (a second one
    at once). reraise: a stop already unwinding (that something may have swallowed) is raised
    again at the end of the block."""
    outer = _state.holding
    _state.holding = True
    try:
        yield
    finally:
        _state.holding = outer
    if outer:
        return
    if _state.stopping and reraise:  # a Stopped that something swallowed on its way: raised again
        raise Stopped(_state.signum)
    if _state.pending is not None:  # (raised once: a later held block goes on)
        _state.stopping, _state.signum, _state.pending = True, _state.pending, None
        raise Stopped(_state.signum)
