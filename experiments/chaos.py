"""Many faults in one run and nothing lost: a seeded schedule of faults against three real runs.

    python -m experiments.chaos --faults 100          # about half an hour on 2 cores
    python -m experiments.chaos --faults 9 --small    # the slow tests' version, under 3 minutes

Each run (a GA on Atari with the overlap pipeline, ES on CartPole-v1, a GA on a local:2 Dask
cluster) is first trained undisturbed, then again as `nevo train` under faults drawn from a seeded
schedule, each followed by what a user would do next (`nevo train --resume`), until it reaches its
budget. The faults, as Jepsen's randomized schedules for databases and the chaos tests of
checkpointing libraries put them into one long run rather than one at a time:

- SIGINT (to the whole process group, as a terminal's Ctrl-C) and SIGTERM at random moments, the
  start's compiles and cache loads included;
- SIGKILL of the main process alone, and of one of its child processes (an emulator process; a
  Dask worker);
- SIGSTOP of one emulator process, shorter and longer than its bound;
- SIGSTOP of the driver for longer than the step bound, then SIGCONT (the overlap pipeline, whose
  first_done judges the bound);
- a full disk: the runs live in a small tmpfs this script mounts (as root; where it cannot, these
  faults are left out and the line says so), filled up until the run's next write fails, then
  freed;
- a second owner: `nevo train --resume` of the folder while the run holds it.

The bounds are shortened for the faults (NEVO_BOUND_S=2: a stopped worker is named in seconds).
At the end each run's metrics (wall-clock fields aside), elite files and checkpoint (its clock
aside) are compared with the undisturbed run's, and one line counts the faults, hangs (no exit
within HANG_S), tracebacks, lines without --resume (a run that stopped on its own without saying
how to go on), processes left behind, and generations lost or written twice.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import numpy as np

ATARI = ["ga", "--preset", "quick", "--game", "frostbite", "--population", "6", "--truncation", "3",
         "--elite-candidates", "2", "--validation-episodes", "2", "--frame-cap", "400",
         "--noise-table-size", "1100000", "--env-slots", "4", "--processes", "2",
         "--pipeline", "overlap"]  # fmt: skip
ES = ["es", "--env", "CartPole-v1", "--population", "32", "--validation-episodes", "3",
      "--noise-table-size", "200000"]  # fmt: skip
CLUSTER = ["ga", "--env", "CartPole-v1", "--population", "16", "--truncation", "4", "--noise-table-size",
           "200000", "--cluster", "local:2"]  # fmt: skip

# Each run: (name, its flags, its frame budget (--small's), what a resume gives again (the layout,
# the cluster: settings a resumed run may set anew), the faults it can meet)
COMMON = ["sigint", "sigterm", "sigkill", "full disk", "second owner"]
RUNS = [
    ("atari", ATARI, (120_000, 30_000), ATARI[-6:],
     [*COMMON, "sigkill child", "sigstop child short", "sigstop child long", "sigstop driver"]),
    ("es", ES, (600_000, 150_000), [], [*COMMON, "sigstop driver"]),
    ("cluster", CLUSTER, (300_000, 80_000), CLUSTER[-2:], [*COMMON, "sigkill child"]),
]  # fmt: skip
BOUND_S = 2.0  # NEVO_BOUND_S: a stopped emulator process named after this long
HANG_S = 90.0  # a process that has not ended this long after a fault that ends it: a hang
DISK_MB = 64  # the tmpfs the runs live in


class Proc:
    """A `nevo train` process in a session of its own, its output read by threads as it comes."""

    def __init__(self, argv: list[str], env: dict):
        cmd = [sys.executable, "-m", "nevo", "train", *argv]
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                  start_new_session=True)  # fmt: skip
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(f, into), daemon=True)
                        for f, into in ((self.p.stdout, self.out), (self.p.stderr, self.err))]  # fmt: skip
        for r in self.readers:
            r.start()

    def _read(self, f, into) -> None:
        for line in f:
            into.append(line.rstrip("\n"))

    def started(self, timeout: float = 120.0) -> bool:
        """Wait for the run's first line (its header: the run has begun, its handlers in place)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.out and self.p.poll() is None:
            time.sleep(0.02)
        return bool(self.out)

    def wait(self, timeout: float) -> int | None:
        """Its exit code, or None where it has not ended within timeout."""
        try:
            code = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for r in self.readers:
            r.join(5)
        return code


class Counts:
    def __init__(self):
        self.faults = self.hangs = self.tracebacks = self.unsaid = self.left = 0
        self.by_kind: dict[str, int] = {}
        self.notes: list[str] = []
        self.transcript: list[str] = []  # every process's end: what a differing run's folder keeps

    def fault(self, kind: str) -> None:
        self.faults += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


def _parents() -> dict[int, int]:
    """Every process's parent, by pid."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return parents


def _holds(pid: int, word: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return word.encode() in f.read()
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "(gone)"


def children(pid: int, word: str) -> list[int]:
    """Processes under pid (any depth) whose command line holds word."""
    parents = _parents()
    found, frontier = [], {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier}
        found += [c for c in frontier if _holds(c, word)]
    return found


def dask_workers(pid: int) -> list[int]:
    """The worker processes of the local Dask cluster of the run at pid: forked by the forkserver
    that pid started (the forkserver's children; their own children, forked or not, carry its
    command line too), or started by spawn."""
    parents = _parents()
    servers = {c for c, p in parents.items() if p == pid and _holds(c, "forkserver")}
    return [c for c, p in parents.items() if p in servers] or children(pid, "spawn_main")


def marked(mark: str) -> list[int]:
    """Processes whose environment holds mark (every process of a chaos run inherits it)."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if mark.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def without_clock(folder: str) -> list[dict]:
    """metrics.jsonl without wall-clock fields (wall_s, perf/) and a cluster's own (cluster/)."""
    rows = [json.loads(line) for line in open(os.path.join(folder, "metrics.jsonl")) if line.strip()]
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith(("perf/", "cluster/"))}
        for r in rows
    ]


def _text(path: str) -> str | None:
    """A file's text, or None where it is missing."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


def same_result(folder: str, reference: str) -> list[str]:
    """What differs between a chaos run's folder and the undisturbed run's: metrics, elite files
    (every generation's elite among them) and their arrays, checkpoint (its clock aside)."""
    diff = []
    if without_clock(folder) != without_clock(reference):
        diff.append("metrics")
    a, b = (os.path.join(f, "elites.jsonl") for f in (folder, reference))  # each generation's elite
    if _text(a) != _text(b):
        diff.append("elites.jsonl")
    for name in ("elite.json", "best.json"):
        a, b = (os.path.join(f, name) for f in (folder, reference))
        if os.path.exists(a) != os.path.exists(b) or (
            os.path.exists(a) and json.load(open(a)) != json.load(open(b))
        ):
            diff.append(name)
    arrays = sorted(n for n in os.listdir(reference) if n.endswith(".npy") and not n.startswith("behaviours"))
    for name in arrays:
        path = os.path.join(folder, name)
        if not os.path.exists(path) or not np.array_equal(
            np.load(path), np.load(os.path.join(reference, name))
        ):
            diff.append(name)
    with (
        np.load(os.path.join(folder, "checkpoint.npz")) as a,
        np.load(os.path.join(reference, "checkpoint.npz")) as b,
    ):
        both = set(a.files) & set(b.files)
        keys = set(a.files) ^ set(b.files) | {
            k for k in both if k != "wall_s" and not np.array_equal(a[k], b[k])
        }
        if keys:
            diff.append(f"checkpoint ({', '.join(sorted(keys))})")
    return diff


def generations_off(folder: str) -> int:
    """Generations missing from metrics.jsonl or written twice."""
    gens = [r["generation"] for r in without_clock(folder)]
    return len(set(range(max(gens) + 1)) - set(gens)) + len(gens) - len(set(gens)) if gens else 0


def fill(disk: str) -> str:
    """Fill the tmpfs at disk to its last byte (a MB at a time, then a KB): the next write of a
    run there fails."""
    path = os.path.join(disk, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 20, 1 << 10, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, bytes(size))
    finally:
        os.close(fd)
    return path


def judge(proc: Proc, code: int | None, counts: Counts, expect_end: bool, said: str) -> bool:
    """Count what a fault's aftermath shows: a hang, a traceback, a stop without --resume; whether
    the run reached its budget (its `done:` line: a signal that meets Python's own exit after it
    may still end the process by that signal)."""
    text = "\n".join(proc.out + proc.err)
    counts.transcript.append(f"{said}: {' '.join(proc.p.args[3:])}: exit {code}\n  "
                             + "\n  ".join((proc.out + proc.err)[-6:]))  # fmt: skip
    if code is None:
        counts.hangs += 1
        counts.notes.append(f"hang: {said}")
        proc.p.kill()
        proc.wait(30)
        return False
    if "Traceback" in text:
        counts.tracebacks += 1
        counts.notes.append(f"traceback: {said}: {text[-400:]}")
    finished = code == 0 or any(line.startswith("done: ") for line in proc.out)
    if expect_end and not finished and code != -signal.SIGKILL:  # (a SIGKILL leaves no line to say)
        last = (proc.out + proc.err)[-1] if proc.out or proc.err else ""
        if "--resume" not in last:
            counts.unsaid += 1
            counts.notes.append(f"no --resume: {said}: exit {code}: {last}")
    return finished


def chaos_run(name, flags, budget, again, kinds, faults: int, rng, root: str, disk: str | None,
              counts: Counts):  # fmt: skip
    """The run under `faults` faults (where it reaches its budget first, the budget grows by as
    much again and the run goes on, as a larger budget continues a finished run), then the same
    run undisturbed to the budget it reached; (the chaos run's folder, the undisturbed one's,
    whether the chaos run reached its budget)."""
    env = {**os.environ, "NEVO_BOUND_S": str(BOUND_S), "PYTHONUNBUFFERED": "1"}
    step = budget
    argv = [*flags, "--frame-budget", str(budget)]
    resume = [*again, "--frame-budget", str(budget)]
    out = os.path.join(disk or root, name)
    mark = f"NEVO_CHAOS={uuid.uuid4().hex}"
    env[mark.split("=")[0]] = mark.split("=")[1]
    folder, proc, done = None, None, False
    kinds = [k for k in kinds if disk is not None or k != "full disk"]
    before = counts.faults

    def finished() -> bool:
        """At the budget: True once the run's faults are all made, else a larger budget."""
        nonlocal budget, resume
        if counts.faults - before >= faults or budget >= 30 * step:
            return True
        budget += step
        resume = [*again, "--frame-budget", str(budget)]
        return False

    while counts.faults - before < faults:
        if proc is None:
            proc = Proc([*argv, "--out-dir", out] if folder is None else ["--resume", folder, *resume], env)
            done = False  # (a run that reached its last budget goes on to the larger one)
            if not proc.started():
                judge(proc, proc.wait(HANG_S), counts, True, f"{name}: start")
                proc = None
                continue
            if folder is None:
                (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
        kind = rng.choice(kinds)
        time.sleep(rng.uniform(0.0, 3.0))
        if proc.p.poll() is not None:  # it finished (or ended) before the fault
            code = proc.wait(5)
            done = judge(proc, code, counts, True, f"{name}: ended before {kind}")
            proc = None
            if done and finished():
                break
            continue
        said, pid, ends = f"{name}: {kind}", proc.p.pid, True
        kids = []
        if kind.startswith(("sigkill child", "sigstop child")):
            kids = children(pid, "nevo.atari.worker") if name == "atari" else dask_workers(pid)
            if not kids:  # (a Dask worker its nanny is starting again): another moment
                continue
        counts.fault(kind)
        if kind == "sigint":
            os.killpg(pid, signal.SIGINT)
        elif kind == "sigterm":
            os.kill(pid, signal.SIGTERM)
        elif kind == "sigkill":
            os.kill(pid, signal.SIGKILL)
        elif kind.startswith(("sigkill child", "sigstop child")):
            kid = rng.choice(kids)
            if kind == "sigkill child":
                os.kill(kid, signal.SIGKILL)
                ends = name == "atari"  # (a Dask worker is restarted by its nanny; the run goes on)
            else:
                os.kill(kid, signal.SIGSTOP)
                time.sleep(0.3 if kind.endswith("short") else 6 * BOUND_S)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(kid, signal.SIGCONT)
                ends = kind.endswith("long")
        elif kind == "sigstop driver":
            os.kill(pid, signal.SIGSTOP)
            time.sleep(BOUND_S + 1.5)
            os.kill(pid, signal.SIGCONT)
            ends = False
        elif kind == "full disk":
            filler = fill(disk)
            code = proc.wait(HANG_S)
            os.remove(filler)
            done, proc = judge(proc, code, counts, True, said), None
            if done and finished():
                break
            continue
        elif kind == "second owner":
            second = Proc(["--resume", folder, *resume], env)
            code = second.wait(HANG_S)
            judge(second, code, counts, False, said)
            if code not in (0, 2) or (code == 2 and len(second.err) != 1):
                counts.notes.append(f"{said}: the second owner ended {code}: {second.err}")
                counts.unsaid += 1
            ends = False
        if not ends:
            if proc.p.poll() is None:
                continue
            ends = True  # (it ended all the same: judged as an end)
        code = proc.wait(HANG_S)
        done, proc = judge(proc, code, counts, True, said), None
        if done and finished():
            break
    # then a user resumes until the run is done
    for _ in range(20):
        if done:
            break
        if proc is None:
            proc = Proc(["--resume", folder, *resume] if folder else [*argv, "--out-dir", out], env)
        code = proc.wait(1800)
        done, proc = judge(proc, code, counts, True, f"{name}: the last resume"), None
        if folder is None and os.path.isdir(out) and os.listdir(out):
            (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
    time.sleep(3)  # (a killed run's children exit at their pipe's EOF, within EXIT_BOUND_S)
    left = marked(mark)
    counts.left += len(left)
    for pid in left:
        counts.notes.append(f"{name}: process {pid} left behind: {_cmdline(pid)}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    ref_out = os.path.join(root, f"{name}_undisturbed")
    proc = Proc([*flags, "--frame-budget", str(budget), "--out-dir", ref_out], env)
    if proc.wait(3600) != 0:
        raise SystemExit(f"chaos: the undisturbed {name} run failed: {(proc.out + proc.err)[-3:]}")
    (ref,) = [os.path.join(ref_out, d) for d in os.listdir(ref_out)]
    return folder, ref, done


@contextlib.contextmanager
def small_disk(root: str):
    """A tmpfs of DISK_MB at root/disk (None where it cannot be mounted: not root, no tmpfs)."""
    disk = os.path.join(root, "disk")
    os.makedirs(disk)
    ok = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", disk],
                        capture_output=True).returncode == 0  # fmt: skip
    try:
        yield disk if ok else None
    finally:
        if ok:
            subprocess.run(["umount", "-l", disk], capture_output=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.chaos", description=__doc__.split("\n")[0])
    p.add_argument("--faults", type=int, default=100, help="faults over the three runs (default: 100)")
    p.add_argument("--seed", type=int, default=0, help="the schedule's seed (default: 0)")
    p.add_argument("--small", action="store_true", help="small budgets: the slow tests' version")
    p.add_argument(
        "--keep", metavar="DIR", help="keep the runs' folders under DIR (default: a temporary one)"
    )
    args = p.parse_args(argv)
    if args.faults < 1:
        print(f"error: --faults: got {args.faults}, allowed: >= 1", file=sys.stderr)
        return 2
    rng, counts = random.Random(args.seed), Counts()
    weights = (0.4, 0.3, 0.3)  # the faults' shares of the three runs
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        root = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="nevo-chaos-"))
        os.makedirs(root, exist_ok=True)
        disk = stack.enter_context(small_disk(os.path.join(root, f"chaos-{os.getpid()}")))
        differ, off, unfinished = [], 0, []
        for i, (name, flags, budgets, again, kinds) in enumerate(RUNS):
            # (a run that reached its budget before its share passes what is left to the next)
            n = round((args.faults - counts.faults) * weights[i] / sum(weights[i:]))
            folder, ref, done = chaos_run(name, flags, budgets[args.small], again, kinds, n, rng, root, disk,
                                          counts)  # fmt: skip
            if not done or folder is None:
                unfinished.append(name)
                continue
            off += generations_off(folder)
            theirs = same_result(folder, ref)
            differ += [f"{name}: {d}" for d in theirs]
            if theirs:  # (the tmpfs and the temporary folder go at the end: kept where they last)
                kept = os.path.join(
                    args.keep or tempfile.gettempdir(), f"nevo-chaos-kept-{os.getpid()}", name
                )
                for what, path in (("chaos", folder), ("undisturbed", ref)):
                    shutil.copytree(path, os.path.join(kept, what))
                with open(os.path.join(kept, "transcript.txt"), "w") as f:
                    f.writelines(f"{t}\n" for t in counts.transcript if t.startswith(f"{name}: "))
                counts.notes.append(f"{name}: differs from its undisturbed run: both kept in {kept}")
    for note in counts.notes:
        print(f"  {note}")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(counts.by_kind.items()))
    same = "identical" if not differ and not unfinished else f"differ: {'; '.join(differ + unfinished)}"
    nodisk = "" if disk else " (no full disk: no tmpfs)"
    print(f"chaos: {counts.faults} faults over 3 runs ({kinds}){nodisk}: "
          f"{counts.hangs} hangs, {counts.tracebacks} tracebacks, {counts.unsaid} lines without --resume, "
          f"{counts.left} processes left, {off} generations lost or written twice; metrics, elite and "
          f"checkpoint against the undisturbed runs: {same}; {time.monotonic() - t0:.0f} s")  # fmt: skip
    bad = counts.hangs + counts.tracebacks + counts.unsaid + counts.left + off + len(differ) + len(unfinished)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
