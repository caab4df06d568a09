"""Run folders: config, metrics, checkpoints, the elite, and resume.

    runs/<game>__<algo>__<seed>__<time>/
        config.json        every setting, the git commit, the noise facts; written before any work
        metrics.jsonl      one JSON object per finished generation (grouped names: score/, perf/)
        checkpoint.npz     algorithm state + counters after the last finished generation
        elite.json         the elite's seed list and what is needed to rebuild its weights
                           (ES: the elite is theta, kept beside it in theta.npy)
        best.json          the GA: the best elite of the run so far (by validation mean), same fields
        ref_batch.npy      virtual batch norm's reference observations (nets with --vbn)

Files are replaced atomically (write to a temporary file, fsync, rename): a kill at any
moment leaves the previous complete version. Plots read only these files.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np

from nevo import config as config_mod

CHECKPOINT = "checkpoint.npz"
METRICS = "metrics.jsonl"
ELITE = "elite.json"
BEST = "best.json"  # the GA: the best elite ever seen, by validation mean
CONFIG = "config.json"
THETA = "theta.npy"  # ES: theta after the last finished generation
BEHAVIOURS = "behaviours.npy"  # tasks with behaviours (the maze): the last generation's, per individual


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
    while os.path.exists(path):
        path, k = f"{base}-{k}", k + 1
    os.makedirs(path)
    return path


def write_config(run_dir: str, cfg, extra: dict) -> None:
    tmp = os.path.join(run_dir, CONFIG + ".tmp")
    config_mod.save(cfg, tmp, {"git_commit": git_commit(), **extra})
    _commit(tmp, os.path.join(run_dir, CONFIG))


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
    tmp = os.path.join(run_dir, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
        f.write("\n")
    _commit(tmp, os.path.join(run_dir, name))


def save_checkpoint(run_dir: str, state: dict) -> None:
    """Write the state dict of arrays atomically."""
    tmp = os.path.join(run_dir, CHECKPOINT + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in state.items()})
    _commit(tmp, os.path.join(run_dir, CHECKPOINT))


def generation_row(gen, frames, wall, gen_s, train, valid, fitness) -> dict:
    """The metrics every generation of a GA or ES run logs: counters, speed, population scores.

    train, valid: the generation's training and validation Results; fitness: its returns."""
    gen_frames = train.total_frames + valid.total_frames
    return {
        "generation": gen,
        "frames": frames,
        "wall_s": round(wall, 3),
        "frames_train": train.total_frames,
        "frames_validation": valid.total_frames,
        "episodes": len(train.returns) + len(valid.returns),
        "perf/gen_s": round(gen_s, 3),
        "perf/frames_per_s": round(gen_frames / gen_s, 1),
        "perf/tail_fraction": round((train.tail_s + valid.tail_s) / gen_s, 4),
        "perf/forward_fraction": round((train.forward_s + valid.forward_s) / gen_s, 4),
        "score/pop_max": float(np.max(fitness)),
        "score/pop_mean": float(np.mean(fitness)),
        "score/pop_median": float(np.median(fitness)),
    }


def save_array(run_dir: str, name: str, array: np.ndarray) -> None:
    """Write one array as name (.npy) atomically."""
    tmp = os.path.join(run_dir, name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.asarray(array))
    _commit(tmp, os.path.join(run_dir, name))


def load_checkpoint(run_dir: str) -> dict | None:
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.exists(path):
        return None
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def append_metrics(run_dir: str, row: dict) -> None:
    with open(os.path.join(run_dir, METRICS), "a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_metrics(run_dir: str) -> list[dict]:
    """Every complete metrics line (a line cut by a kill is skipped)."""
    path = os.path.join(run_dir, METRICS)
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return rows


def trim_metrics(run_dir: str, generations: int) -> None:
    """Keep the metrics of generations < `generations` (those the checkpoint covers)."""
    rows = [r for r in read_metrics(run_dir) if r["generation"] < generations]
    tmp = os.path.join(run_dir, METRICS + ".tmp")
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    _commit(tmp, os.path.join(run_dir, METRICS))
