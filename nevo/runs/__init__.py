"""The run folder: here its files (config, metrics, checkpoints) and resume; beside them the
folder's one owner (`owner`), stop signals (`stop`) and the metrics' other logs (`loggers`). The
loops that write it are nevo.loops's (the generation loop, the elite files, the progress line).

    runs/<game>__<algo>__<seed>__<time>/
        config.json        every setting, the git commit, the noise facts, and each start of the
                           run (its generation, date, commit and machine); written before any work
        metrics.jsonl      one JSON object per finished generation (grouped names: score/, perf/)
        checkpoint.npz     algorithm state + counters after the last finished generation
        checkpoint.prev.npz  the one before: --resume falls back to it if the last is damaged
        elite.json         the elite's seed list and what is needed to rebuild its weights
                           (ES: the elite is theta, beside it in theta.gG.npy)
        best.json          the GA: the best elite of the run so far (by validation mean), same fields
        elites.jsonl       seed-list elites (the GA, random search, GA-NS): each validated
                           generation's elite, a line each with elite.json's fields (runs since
                           2026-12-04), which `nevo replay --elite G` tests
        ref_batch.npy      virtual batch norm's reference observations (nets with --vbn)
        obs_norm.gG.npy    --obs-norm 1 (ES, novelty search's ES family): the observation mean and std
                           the elite's theta was validated with
        experiences/       safe mutations: the observations each ancestor of a living genome
                           was measured on as a parent, <key of its seed list>.npy
        behaviours.npy     novelty search (and the GA on the maze): the last generation's behaviours
        tensorboard/       --tensorboard: TensorBoard's event files of the metrics (nevo.runs.loggers)
        wandb/, wandb.json --wandb PROJECT: W&B's files, and its run's id for a resume

        owner.lock         the process that holds the folder (nevo.runs.owner): one run at a time

Files are replaced atomically (write to a temporary file, fsync, rename): a kill at any
moment leaves the previous complete version. Plots read only these files. A damaged file
(cut short, overwritten, edited by hand) is a one-line DamagedFile error naming it, or, for the
last checkpoint, a fallback to the one before. A write that fails for want of space or
permission is a one-line WriteFailed naming the file, its temporary file removed.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import subprocess
import time

import numpy as np

from nevo.settings import DamagedFile, read_json  # noqa: F401 (run files' readers, here with the rest)

CHECKPOINT = "checkpoint.npz"
PREVIOUS = "checkpoint.prev.npz"  # the checkpoint before the last
METRICS = "metrics.jsonl"
ELITE = "elite.json"
BEST = "best.json"  # the GA: the best elite ever seen, by validation mean
ELITES = "elites.jsonl"  # seed-list elites: each validated generation's, a line each
CONFIG = "config.json"
THETA = "theta.npy"  # ES: theta after the last finished generation (as theta.gG.npy: nevo.loops.elite)
BEHAVIOURS = "behaviours.npy"  # tasks with behaviours (the maze): the last generation's, per individual
OBS_NORM = "obs_norm.npy"  # --obs-norm 1 (as obs_norm.gG.npy): the elite theta's mean and std


# The failed writes a run stops at in one line (WriteFailed), and what frees them
FULL = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}
DENIED = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
}


class WriteFailed(RuntimeError):
    """A run file that could not be written (no space, no quota, no permission, a read-only file
    system); the message is one line naming the file and the cause, `remedy` what frees it."""

    def __init__(self, path: str, error: OSError):
        cause = {**FULL, **DENIED}[error.errno]
        super().__init__(f"cannot write {path}: {cause} ({errno.errorcode[error.errno]})")
        self.path, self.errno = path, error.errno
        self.remedy = "free space" if error.errno in FULL else "make the folder writable"


@contextlib.contextmanager
def writing(path: str, tmp: str | None = None):
    """Around the writing of path (through tmp, its temporary file, where there is one): tmp
    removed however the write stops, and a failure for want of space or permission a WriteFailed
    naming path (other errors as they are)."""
    try:
        yield
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.remove(tmp)
        if isinstance(e, OSError) and e.errno in {**FULL, **DENIED}:
            raise WriteFailed(path, e) from None
        raise


def git_commit() -> str:
    """The commit of the nevo checkout (with '-dirty' if it has changes), or 'unknown'."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (rev + ("-dirty" if dirty else "")) if rev else "unknown"


def new_run_dir(cfg, task_name: str) -> str:
    """Make runs/<game or task>__<algo>__<seed>__<time>/ (never reusing an existing folder)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(cfg.run.out_dir, f"{task_name}__{cfg.algo}__{cfg.run.seed}__{stamp}")
    path, k = base, 1
    while True:
        try:
            with writing(path):
                os.makedirs(path)  # fails where it exists: two runs started at once get two folders
            return path
        except FileExistsError:
            path, k = f"{base}-{k}", k + 1


def write_config(
    run_dir: str, settings: dict, extra: dict, generation: int, frames: int, where: dict
) -> None:
    """config.json: the settings (nevo.config.to_dict), the git commit, extra facts, and the run's
    starts (_starts) with this one, from `generation` and `frames` on the machine `where`
    (nevo.machine.here, or a cluster's workers: of_workers)."""
    tmp, final = os.path.join(run_dir, CONFIG + ".tmp"), os.path.join(run_dir, CONFIG)
    commit = git_commit()
    starts = _starts(run_dir, {"generation": generation, "frames": frames, "commit": commit, **where})
    with writing(final, tmp):
        with open(tmp, "w") as f:
            json.dump({**settings, "git_commit": commit, **extra, "starts": starts}, f, indent=2)
            f.write("\n")
        _commit(tmp, final)


def _starts(run_dir: str, start: dict) -> list[dict]:
    """config.json's `starts`: the run's earlier starts, from the config.json this one replaces
    (none in a folder written before they were kept), and this one: the generation and frames it
    starts from, its date (UTC), the commit and the machine. The hours of a run that moved between
    machines are then read with the machines they ran on."""
    earlier = []
    try:
        with open(os.path.join(run_dir, CONFIG)) as f:
            earlier = json.load(f).get("starts", [])
    except (OSError, ValueError, AttributeError):
        pass  # a new run, or a config.json that resume has already refused or will rewrite whole
    here = {
        "generation": start["generation"],
        "frames": start["frames"],
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "git_commit": start["commit"],
        "cpu": start["cpu"],
        "cores": start["cores"],
        "device": start["device"],
    }
    return [*(e for e in earlier if isinstance(e, dict)), here]


def _commit(tmp: str, final: str) -> None:
    """fsync tmp and rename it over final: readers see the old or the new file, whole."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    try:
        fd = os.open(os.path.dirname(final) or ".", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    except OSError:
        pass


def write_json(run_dir: str, name: str, data: dict) -> None:
    tmp, final = os.path.join(run_dir, name + ".tmp"), os.path.join(run_dir, name)
    with writing(final, tmp):
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        _commit(tmp, final)


def save_checkpoint(run_dir: str, state: dict) -> None:
    """Write the state dict of arrays atomically; the checkpoint it replaces becomes PREVIOUS.
    (A kill between the two renames leaves the old state as PREVIOUS, no CHECKPOINT, and the new
    one in CHECKPOINT.tmp, which nothing reads: load_checkpoint takes PREVIOUS, one generation
    earlier, and the resumed run plays that generation again, as it would after a kill before the
    write.)"""
    tmp, final = os.path.join(run_dir, CHECKPOINT + ".tmp"), os.path.join(run_dir, CHECKPOINT)
    with writing(final, tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **{k: np.asarray(v) for k, v in state.items()})
        if os.path.exists(final):
            os.replace(final, os.path.join(run_dir, PREVIOUS))
        _commit(tmp, final)


def read_checkpoint(path: str) -> dict:
    """The arrays of one checkpoint file; DamagedFile if it is not a whole one."""
    try:
        with np.load(path, allow_pickle=False) as z:
            state = {k: z[k] for k in z.files}
    except Exception as e:  # noqa: BLE001 (zip, zlib, format and pickle errors all mean damaged)
        raise DamagedFile(f"{path}: damaged, not a readable checkpoint ({_reason(e)})") from None
    missing = [k for k in ("frames", "wall_s") if k not in state]
    if missing:
        raise DamagedFile(f"{path}: damaged, not a nevo checkpoint (no {', '.join(missing)})")
    return state


def load_checkpoint(run_dir: str, say=None) -> dict | None:
    """The run's last checkpoint (None before its first generation ended). If it is damaged
    (or missing while the one before is there), the one before, saying so through say; a
    DamagedFile when neither can be read."""
    path, previous = os.path.join(run_dir, CHECKPOINT), os.path.join(run_dir, PREVIOUS)
    if not os.path.exists(path) and not os.path.exists(previous):
        return None
    try:
        return read_checkpoint(path) if os.path.exists(path) else read_checkpoint(previous)
    except DamagedFile as e:
        if not os.path.exists(previous):
            raise
        try:
            state = read_checkpoint(previous)
        except DamagedFile as e2:
            raise DamagedFile(f"{e}; and {e2}") from None
        if say is not None:
            say(
                f"warning: {e}; resuming from {PREVIOUS}, one generation earlier "
                f"({int(state['frames']):,} frames)"
            )
        return state


def resume_checkpoint(run_dir: str, say=None) -> dict | None:
    """The checkpoint --resume continues from (load_checkpoint), or None for a folder killed
    before its first generation ended, which may simply start again. A DamagedFile, before
    anything in the folder is touched, where the metrics hold finished generations but no
    checkpoint can be read: starting again there would overwrite the run's record."""
    try:
        checkpoint = load_checkpoint(run_dir, say)
    except DamagedFile as e:
        raise DamagedFile(f"{e}; the run cannot continue: start a new run without --resume") from None
    finished = read_metrics(run_dir) if checkpoint is None else []
    if finished:
        n = len({r.get("generation") for r in finished})
        raise DamagedFile(
            f"{run_dir}: {CHECKPOINT} and {PREVIOUS} are missing, but {METRICS} holds {n} finished "
            f"generation{'s' if n != 1 else ''}: the run cannot continue, and the folder is left as it "
            "is; start a new run without --resume"
        )
    return checkpoint


def read_array(path: str) -> np.ndarray:
    """A run folder's .npy file; DamagedFile naming it if it cannot be read."""
    try:
        return np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 (format, size and pickle errors all mean damaged)
        raise DamagedFile(f"{path}: damaged, not a readable .npy array ({_reason(e)})") from None


def _reason(e: Exception) -> str:
    """An exception as a short phrase on one line."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) < 160 else text[:157] + "..."


def save_array(run_dir: str, name: str, array: np.ndarray) -> None:
    """Write one array as name (.npy) atomically."""
    tmp, final = os.path.join(run_dir, name + ".tmp"), os.path.join(run_dir, name)
    with writing(final, tmp):
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(array))
        _commit(tmp, final)


EXPERIENCES = "experiences"  # safe mutations: the folder of parents' experiences


def genome_key(genome) -> str:
    """The file name stem of a seed list's experiences: a digest of its int64 seeds."""
    return hashlib.sha256(np.asarray(genome, np.int64).tobytes()).hexdigest()[:24]


def save_experiences(run_dir: str, genomes, experiences) -> None:
    """Keep each parent's experiences (T, *obs) under experiences/ (a genome's, once written,
    never change: they are those of the first episode it played as a parent-to-be)."""
    folder = os.path.join(run_dir, EXPERIENCES)
    with writing(folder):
        os.makedirs(folder, exist_ok=True)
    for g, e in zip(genomes, experiences):
        name = os.path.join(EXPERIENCES, genome_key(g) + ".npy")
        if not os.path.exists(os.path.join(run_dir, name)):
            save_array(run_dir, name, e)


def experiences_path(run_dir: str, genome) -> str:
    """The file of genome's experiences as a parent (experiences/<its key>.npy)."""
    return os.path.join(run_dir, EXPERIENCES, genome_key(genome) + ".npy")


def load_experiences(run_dir: str, genome) -> np.ndarray:
    """The experiences of genome as a parent; DamagedFile naming the file if it is missing or damaged."""
    path = experiences_path(run_dir, genome)
    if not os.path.exists(path):
        raise DamagedFile(
            f"{path}: missing; the run folder lacks the experiences that a safe mutation of the "
            f"seed list {[int(s) for s in np.asarray(genome)][:6]}{'...' if len(genome) > 6 else ''} "
            "was measured on"
        )
    return read_array(path)


def prune_experiences(run_dir: str, living) -> int:
    """Delete the experiences of genomes that no living seed list (parents, elites, the last
    checkpoint's and the one before's) descends from; returns how many were deleted."""
    folder = os.path.join(run_dir, EXPERIENCES)
    if not os.path.isdir(folder):
        return 0
    keep = {genome_key(g[:j]) + ".npy" for g in living for j in range(1, len(g) + 1)}
    gone = 0
    for name in os.listdir(folder):
        if name.endswith(".npy") and name not in keep:
            os.remove(os.path.join(folder, name))
            gone += 1
    return gone


def append_metrics(run_dir: str, row: dict) -> None:
    """One line at the end of metrics.jsonl, synced; a write that fails leaves the file as it was."""
    append_line(run_dir, METRICS, row)


def append_line(run_dir: str, name: str, row: dict) -> None:
    """One JSON line at the end of the run folder's file `name` (metrics.jsonl, elites.jsonl),
    synced; a write that fails leaves the file as it was."""
    path = os.path.join(run_dir, name)
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                data = (json.dumps(row) + "\n").encode()
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            except BaseException:  # no line cut short: the rows before stay the whole file
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)


def read_metrics(run_dir: str, name: str = METRICS) -> list[dict]:
    """Every complete line of metrics.jsonl (or of the JSON-lines file `name`: elites.jsonl); a
    line cut by a kill is skipped."""
    return _read_metrics(os.path.join(run_dir, name))[0]


def _read_metrics(path: str) -> tuple[list[dict], int]:
    """The rows of a metrics file and how many of its lines were skipped (cut short or not JSON)."""
    rows, damaged = [], 0
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    damaged += bool(line.strip())
    return rows, damaged


def spans(numbers: list[int]) -> str:
    """Sorted integers as runs: [3, 5, 6, 7] -> '3, 5-7'."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def trim_metrics(run_dir: str, generations: int, say=print) -> None:
    """Keep the metrics (and the lines of elites.jsonl, where the run keeps one) of generations <
    `generations` (those the checkpoint covers). If some of
    those generations have no row (a line cut short or not JSON, or missing), say so through say
    in one warning line naming the file and the generations; a cut line of the generation that was
    in flight is no loss and says nothing."""
    path = os.path.join(run_dir, METRICS)
    rows, damaged = _read_metrics(path)
    rows = [r for r in rows if r["generation"] < generations]
    missing = sorted(set(range(generations)) - {r["generation"] for r in rows})
    if missing:
        lines = f"{damaged} line{'s' if damaged != 1 else ''} cut short or not JSON"
        damage = f"damaged lines skipped ({lines}); " if damaged else ""
        which = f"generations {spans(missing)} lack" if len(missing) > 1 else f"generation {missing[0]} lacks"
        say(f"warning: {path}: {damage}{which} a metrics row")
    _rewrite(path, rows)
    elites = os.path.join(run_dir, ELITES)
    if os.path.exists(elites):  # its generations past the checkpoint are played again
        lines, cut = _read_metrics(elites)
        kept = [r for r in lines if r.get("generation", generations) < generations]
        if cut or len(kept) < len(lines):  # (a line cut short would spoil the next one appended)
            _rewrite(elites, kept)


def _rewrite(path: str, rows: list[dict]) -> None:
    """A JSON-lines file replaced by these rows, atomically."""
    tmp = path + ".tmp"
    with writing(path, tmp):
        with open(tmp, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        _commit(tmp, path)
