"""The emulator pool's worker process (nevo.atari.worker), on its own: how it ends when
the process that drives it is gone."""

import subprocess
import sys
import textwrap

DRIVER_GONE_AT_READY = textwrap.dedent("""
    import os, pickle, socket
    from multiprocessing.connection import Connection
    from nevo.atari.worker import Shared, serve
    fd = os.memfd_create("shared")
    os.ftruncate(fd, Shared.nbytes(1))
    driver, worker = socket.socketpair()
    Connection(os.dup(driver.fileno())).send_bytes(pickle.dumps(dict(
        game="pong", frameskip=4, frame_cap=1000, slots=1, index=0, workers=1, nice=0, player=None,
        extra_bytes=0)))
    driver.close()  # the driving process is gone before the worker's "ready"
    serve(Connection(worker.detach()), fd, -1)
    print("quiet", flush=True)
""")


def test_a_worker_whose_driver_is_gone_ends_without_a_traceback():
    """The race of a Ctrl-C during the pool's start made deterministic: the driving process closes
    its pipes while a worker still makes its emulators; the worker's "ready" then meets a closed
    pipe, and it ends quietly instead of printing BrokenPipeError."""
    run = subprocess.run([sys.executable, "-c", DRIVER_GONE_AT_READY], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.stdout == "quiet\n" and run.stderr == "", run.stderr
