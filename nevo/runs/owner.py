"""One owner per run folder: a run, new or resumed, holds an exclusive lock on its folder's
`owner.lock` for its whole life, so that a second process that wants the folder (to run or resume
it) stops before it writes anything, in one line naming the holder.

The lock is `fcntl.flock` on the open file: the kernel (or, on NFS, the server) drops it with the
process however it ends, so a killed run never leaves a stale one, and the file itself stays in
the folder. Reading a folder (replay, plots, nevo.load_policy) takes no lock and never waits.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time

from nevo.runs import WriteFailed, writing
from nevo.settings import ConfigError

LOCK = "owner.lock"  # the run folder's lock file: {"pid", "host", "since"} of the run that holds it
# A file system that cannot lock at all (an NFS mount with -o nolock answers locally instead)
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)

_held: dict[str, int | None] = {}  # real path of a folder this process holds -> its lock's fd


class FolderInUse(ConfigError):
    """A run folder that another process holds; the message names the folder and the holder."""


def claim(run_dir: str, say=print) -> None:
    """Hold run_dir for this process (nothing where it already does): FolderInUse where another
    process holds it, before anything in it is written; a WriteFailed where the lock file cannot
    be made. A file system without locks says so through say, once, and goes on unlocked."""
    key = os.path.realpath(run_dir)
    if key in _held:
        return
    path = os.path.join(run_dir, LOCK)
    with writing(path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not truncated: the holder's facts are in it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise FolderInUse(
            f"{run_dir}: in use by {holder}; a run folder has one owner: wait for that run to end (or stop "
            "it), then --resume"
        ) from None
    except OSError as e:
        os.close(fd)
        if e.errno not in NO_LOCKS:
            raise
        say(
            f"warning: {run_dir}: its file system cannot lock files ({errno.errorcode[e.errno]}); nothing "
            "stops a second process from running this folder at the same time"
        )
        _held[key] = None
        return
    facts = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        with writing(path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(facts) + "\n").encode(), 0)
    except WriteFailed:
        os.close(fd)
        raise
    _held[key] = fd


def release(run_dir: str) -> None:
    """Let run_dir go (nothing where this process does not hold it)."""
    fd = _held.pop(os.path.realpath(run_dir), None)
    if fd is not None:
        os.close(fd)  # the lock goes with the file's last descriptor


def _holder(fd: int) -> str:
    """The holder as its lock file says it: 'process 4242 on host node17 (since ...)'."""
    try:
        facts = json.loads(os.pread(fd, 4096, 0))
        return f"process {int(facts['pid'])} on host {facts['host']} (since {facts['since']})"
    except (OSError, ValueError, KeyError, TypeError):  # taken a moment ago, not yet written
        return "another process"
