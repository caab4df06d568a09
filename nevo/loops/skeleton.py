"""What the generation loop (nevo.loops.loop) runs each step in, whichever step the algorithm
declares (the population step, GenerationStep; the SGD baseline's, nevo.algos.sgd.SGDStep): the
skeleton that turns each step into the run folder's files, and what a run ends with.

    skeleton: step(frames) -> one metrics row -> elite files -> checkpoint -> logs -> progress line

- `skeleton`: the generations (or SGD's steps) until the frame budget, each generation's files
  written with the stop signals held, so a stop never writes half a generation;
- `RunStopped`, `stopped`, `said`: a run stopped before its budget (a stop signal, its cluster or
  an emulator process gone, a write that failed) as one line and an exit code, the last checkpoint
  whole;
- `write_config`: config.json, written once before the first generation;
- `Outcome`: a finished run.
The run folder's files themselves are nevo.runs's and nevo.loops.elite's.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass

import numpy as np

from nevo import cli, config, machine, runs
from nevo.algos.contract import Algorithm
from nevo.atari.pool import EmulatorError
from nevo.cluster.evaluator import ClusterError
from nevo.loops import elite as elite_files
from nevo.runs import loggers, stop


class RunStopped(RuntimeError):
    """A run that stopped before its frame budget, the last checkpoint whole: by a stop signal
    (code 128 + the signal: 130 for SIGINT, 143 for SIGTERM), its cluster gone (code 3) or a
    write that failed (code 4); the message, one line, says how to continue."""

    def __init__(self, message: str, code: int, run_dir: str):
        super().__init__(message)
        self.code, self.run_dir = code, run_dir


@dataclass
class Outcome:
    """A finished run: its folder, the algorithm in its last state, the frames and time it took."""

    run_dir: str
    algo: Algorithm
    frames: int
    wall_s: float


def skeleton(cfg, algo, step, frames: int, wall: float, run_dir: str, out) -> tuple[int, float, dict]:
    """What every loop of nevo shares, generation after generation until the frame budget (the
    generation loop's GenerationStep; the SGD baseline's, nevo.algos.sgd.SGDStep): step(frames) gives
    its fields of the metrics row and the frames it took; the skeleton adds the counters and the
    timing, step.finish its extensions' fields; then the row, the elite files (where the algorithm
    validated), the checkpoint, the logs (--tensorboard, --wandb: nevo.runs.loggers) and the
    progress line. Returns (frames, wall_s, the last row); a
    RunStopped where the run is stopped, a write fails or its cluster is lost (the last checkpoint
    whole). A generation's files are written with the stop signals held (nevo.runs.stop.held): a
    stop never writes half a generation."""
    row: dict = {}
    saved = algo.generation  # the generations the folder holds
    # --tensorboard, --wandb: the rows there too (a resumed run's past its checkpoint purged)
    logs = loggers.Loggers(cfg, run_dir, resumed_at=frames if saved else None)
    bound_s = loggers.FINISH_BOUND_S  # (None once the budget is reached: W&B's finish unbounded)
    try:
        while frames < cfg.run.frame_budget:
            t0, cpu0 = time.monotonic(), machine.cpu_seconds()
            fields, step_frames = step(frames)
            gen_s, cpu_s = time.monotonic() - t0, machine.cpu_seconds() - cpu0
            frames, wall = frames + step_frames, wall + gen_s
            # perf/cores_busy: the share of this machine's cores that this process and its child
            # processes (the emulator processes; not a cluster's workers) kept busy over the
            # generation: the tail and idle waits in one figure
            row = {"generation": fields.pop("generation"), "frames": frames, "wall_s": round(wall, 3),
                   "perf/gen_s": round(gen_s, 3), "perf/frames_per_s": round(step_frames / gen_s, 1),
                   "perf/cores_busy": round(cpu_s / gen_s / machine.cores(), 3), **fields}  # fmt: skip
            step.finish(row)
            with stop.held():
                runs.append_metrics(run_dir, row)
                if algo.validated:  # a skipped validation leaves the last validated theta's files
                    elite_files.write(run_dir, cfg, row["generation"], algo, step.elite())
                state = {**algo.state(), **step.state(), "frames": frames, "wall_s": wall}
                runs.save_checkpoint(run_dir, state)
                saved = algo.generation
                step.checkpointed()
                logs.log(row)
                out.generation_done(row)
        bound_s = None
    except ClusterError as e:  # one line; the last checkpoint is whole
        if stop.caused(e):
            raise stopped(run_dir, saved, e, unit=step.unit) from None
        raise RunStopped(
            f"error: {e}; the run folder holds every generation before {saved}: continue with "
            f"{cli.resume_command(run_dir)} (with --cluster ADDRESS, or on this machine)",
            3,
            run_dir,
        ) from None
    except EmulatorError as e:  # one line; the last checkpoint is whole
        if stop.caused(e):
            raise stopped(run_dir, saved, e, unit=step.unit) from None
        then = cli.resume_command(run_dir)
        raise RunStopped(
            f"error: {e}; the run folder holds every generation before {saved}: continue with {then}",
            5,
            run_dir,
        ) from None
    except BaseException as e:
        if stop.caused(e) or isinstance(e, runs.WriteFailed):
            raise stopped(run_dir, saved, e, unit=step.unit) from None
        raise
    finally:
        logs.close(bound_s)
    return frames, wall, row


def stopped(run_dir: str, finished: int, cause, new=False, unit="generation") -> RunStopped:
    """The one line of a run stopped before its budget by a stop signal (nevo.runs.stop.caused) or
    a failed write (runs.WriteFailed), `finished` generations (units) whole in its folder: where it
    stopped and the command that goes on. A new run's folder without config.json holds nothing to
    resume: it is removed, and the line says to start the run again."""
    if new and os.path.isdir(run_dir) and not os.path.exists(os.path.join(run_dir, runs.CONFIG)):
        shutil.rmtree(run_dir, ignore_errors=True)
    if not os.path.exists(os.path.join(run_dir, runs.CONFIG)):
        held, then = "nothing of the run was written", "start it again"
    else:
        held = f"the run folder holds every {unit} before {finished}" if finished else f"no {unit} finished"
        then = f"continue with: {cli.resume_command(run_dir)}"
    if not isinstance(cause, runs.WriteFailed):
        signum = stop.signum_of(cause)
        name = stop.named(signum)
        return RunStopped(f"stopped by {name} in {unit} {finished}; {held}; {then}", 128 + signum, run_dir)
    return RunStopped(f"error: {cause}; {held}: {cause.remedy}, then {then}", 4, run_dir)


def said(text: str, stream=None) -> None:
    """A run's last line, on a line of its own (after a terminal's live status line)."""
    if sys.stdout.isatty():  # clear the status line
        sys.stdout.write("\r\033[K")
        sys.stdout.flush()
    print(text, file=stream or sys.stdout)


def write_config(
    run_dir: str, cfg, task, spec, facts: dict, generation: int, frames: int, where: dict
) -> None:
    """config.json: the settings, the net's sizes, the evaluator's facts, what rebuilds the
    policy from the folder alone (nevo.load_policy), a user's own environment included, and this
    start of the run (from `generation` and `frames`, on the machine `where`: nevo.machine.here or
    a cluster's of_workers) after the earlier ones."""
    shapes = {
        "obs_shape": list(spec.obs_shape),
        "obs_dtype": np.dtype(spec.obs_dtype).name,
        "action": spec.action,
        "action_box": task.action_box,  # a continuous action's bounds, or None
    }
    runs.write_config(
        run_dir,
        config.to_dict(config.weights_resolved(cfg)),  # a Config built in Python may say auto
        {"n_params": spec.n_params, "n_actions": spec.n_actions, **shapes, **facts},
        generation,
        frames,
        where,
    )
