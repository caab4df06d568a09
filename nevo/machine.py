"""Facts about this machine that defaults are chosen from: cores and free memory."""

from __future__ import annotations

import os
import sys


def cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def native_threads() -> set[int]:
    """Thread ids of this process's threads, Python's and native ones alike (Linux's
    /proc/self/task), or an empty set where the system does not list them."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def lower_priority(tids, by: int) -> None:
    """Raise these threads' nice value by `by` (capped at 19), so that the threads at the
    process's own priority run first when both want a core. Lowering a thread's priority needs
    no privilege. Linux only (there a thread id is a task's id for setpriority); elsewhere
    nothing happens."""
    if not sys.platform.startswith("linux"):  # elsewhere setpriority takes process ids, not threads
        return
    nice = min(19, os.getpriority(os.PRIO_PROCESS, 0) + by)
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except OSError:  # the thread has ended
            pass
