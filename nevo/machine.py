"""Facts about this machine: its cores, free memory and CPU (defaults are chosen from them, and
a run folder records where it ran)."""

from __future__ import annotations

import os
import sys


def cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_facts() -> dict:
    """Model name, the widest vector ISA and the clock from /proc/cpuinfo (Linux; else unknown)."""
    facts = {"model": "unknown", "isa": "unknown", "mhz": None}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return facts
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and facts["model"] == "unknown":
            facts["model"] = value.strip()
        elif key.strip() == "cpu MHz" and facts["mhz"] is None:
            facts["mhz"] = float(value)
        elif key.strip() == "flags":
            flags = value.split()
            facts["isa"] = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    return facts


def here(device: str) -> dict:
    """This machine as a run folder records a start of the run on it: CPU model, cores, device."""
    return {"cpu": cpu_facts()["model"], "cores": cores(), "device": device}


def of_workers(machines: list[dict]) -> dict:
    """A cluster's workers (here() of each) as one start's machine: their CPU models, with how
    many workers had each where they differ or are several, their cores added up, and "cluster of
    N workers" (with the workers' devices where they are not the CPU)."""
    models, devices = {}, {}
    for m in machines:
        models[m.get("cpu", "unknown")] = models.get(m.get("cpu", "unknown"), 0) + 1
        devices[m.get("device", "cpu")] = devices.get(m.get("device", "cpu"), 0) + 1
    n = len(machines)
    cpu = " + ".join(f"{k} x{v}" if n > 1 else k for k, v in sorted(models.items()))
    device = f"cluster of {n} worker{'s' if n != 1 else ''}"
    if set(devices) != {"cpu"}:
        device += " (" + ", ".join(f"{k} x{v}" for k, v in sorted(devices.items())) + ")"
    return {"cpu": cpu, "cores": sum(int(m.get("cores", 0)) for m in machines), "device": device}


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


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its child processes (the emulator pool's among
    them): the live ones read from /proc where it exists, the ended ones as the OS counts them.
    A difference of two calls is the CPU time between them, while the children stay the same."""
    t = os.times()
    total = t.user + t.system + t.children_user + t.children_system
    if not os.path.isdir("/proc"):
        return total
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # (gone meanwhile)
            continue
        if int(fields[1]) == me:  # ppid, then utime and stime (fields 14 and 15 of stat)
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


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


def blas_kernels() -> list[str]:
    """The kernel families ("Haswell", "SkylakeX", ...) of the OpenBLAS libraries loaded in this
    process (threadpoolctl), sorted; empty where none reports one. nevo's forward does not use
    them (its convs are its own Numba kernels); the roofline's sgemm reference runs on them."""
    from threadpoolctl import threadpool_info

    return sorted({p["architecture"] for p in threadpool_info() if p.get("architecture")})


def kernels_name(kernels: list[str]) -> str:
    """The kernels of blas_kernels as one name: "Haswell", "Haswell/SkylakeX" (libraries that
    differ), or "unknown"."""
    return "/".join(kernels) or "unknown"


def forced_blas_kernel() -> str | None:
    """OPENBLAS_CORETYPE where the environment names a kernel (OpenBLAS then runs it on any CPU,
    even one with wider vectors), or None where OpenBLAS chooses for this CPU itself."""
    return os.environ.get("OPENBLAS_CORETYPE") or None
