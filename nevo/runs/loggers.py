"""Where a run's metrics rows go besides metrics.jsonl, which stays the record: TensorBoard and
Weights & Biases, the logs CleanRL and Sample Factory write.

- `--tensorboard`: every row's numbers as TensorBoard scalars against frames, in the run folder's
  `tensorboard/` (through tensorboardX, which needs no TensorFlow), so `tensorboard --logdir runs/`
  shows every run under runs/ by its folder's name;
- `--wandb PROJECT`: the same to a W&B run of that project, named by the run folder, with the
  run's config.json as its config; `WANDB_MODE=offline` logs with no network (`wandb sync` later).
  The W&B run's id is kept in the run folder (`wandb.json`), so a resumed run goes on in the same
  W&B run.

Neither library is imported without its flag. A row goes out once its generation is in the run
folder (after the checkpoint, with the stop signals held), so what the logs show is what a resumed
run goes on from; a kill between the checkpoint and the log leaves one point out.
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import os
import sys
import threading
import uuid

from nevo import runs
from nevo.settings import ConfigError, DamagedFile, read_json

TENSORBOARD = "tensorboard"  # the event files' folder in the run folder
WANDB = "wandb.json"  # the W&B run's id and project, for a resumed run
# Seconds W&B's finish may take while a run stops (a signal, a failed write): it sends what is
# left over the network, which may not answer; what it has not sent stays in the run folder.
FINISH_BOUND_S = 20.0

# (setting, the module it needs, the extra that installs it)
NEEDS = (("tensorboard", "tensorboardX", "tensorboard"), ("wandb", "wandb", "wandb"))


def check(cfg) -> None:
    """A ConfigError of one line, before the run folder is made, where a log is asked for and its
    library is not installed, or W&B is to log online with no API key configured."""
    for name, module, extra in NEEDS:
        if getattr(cfg.run, name) and importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"--{name}: the {module} package is not installed: pip install 'nevo[{extra}]' (or {module})"
            )
    if cfg.run.wandb and os.environ.get("WANDB_MODE", "online") not in ("offline", "dryrun", "disabled"):
        _wandb_login()


def _wandb_login() -> None:
    """W&B's own check that a key is configured (WANDB_API_KEY, `wandb login`'s file), never
    prompting (a run in the background or a notebook would wait on it) and quiet (WANDB_SILENT
    while it looks); a ConfigError of one line without one."""
    import wandb

    silent = os.environ.get("WANDB_SILENT")
    os.environ["WANDB_SILENT"] = "true"
    try:
        found = wandb.login(verify=False, prompt=False)
        reason = "none configured"
    except Exception as e:  # noqa: BLE001 (W&B's reason, in one line)
        found, reason = False, " ".join(str(e).split())
    finally:
        if silent is None:
            del os.environ["WANDB_SILENT"]
        else:
            os.environ["WANDB_SILENT"] = silent
    if not found:
        raise ConfigError(
            f"--wandb: no W&B API key ({reason}): run `wandb login`, set WANDB_API_KEY, or log offline "
            "with WANDB_MODE=offline"
        )


def scalars(row: dict) -> dict[str, float]:
    """A metrics row's numbers (never its counters' bools, lists or text)."""
    return {k: float(v) for k, v in row.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}


class Loggers:
    """The logs cfg asks for, open on run_dir; log(row) after each generation, close() at the end.

    resumed_at: the frames of the checkpoint a resumed run goes on from. Points logged past it
    (a generation logged before its checkpoint was found damaged, and --resume fell back to the
    one before) are the ones metrics.jsonl drops: TensorBoard is told to purge them (a
    SessionLog START at the next step, tensorboardX's purge_step), so the resumed run's points
    are not drawn twice. W&B keeps a step's first point and drops a repeated step's: the same
    numbers, since a resumed run repeats its generations exactly."""

    def __init__(self, cfg, run_dir: str, resumed_at: int | None = None):
        self.writer = self.wandb_run = None
        if cfg.run.tensorboard:
            from tensorboardX import SummaryWriter

            folder = os.path.join(run_dir, TENSORBOARD)
            # tensorboardX names an event file by the whole second and the host: a resume in the
            # same second as the last write would reopen (and empty) the earlier file. A part
            # number per start keeps every file.
            part = len(os.listdir(folder)) if os.path.isdir(folder) else 0
            purge = None if resumed_at is None else resumed_at + 1
            self.writer = SummaryWriter(folder, filename_suffix=f".part{part}", purge_step=purge)
        if cfg.run.wandb:
            self.wandb_run = _wandb_run(cfg.run.wandb, run_dir)

    def log(self, row: dict) -> None:
        numbers_ = scalars(row)
        frames = int(row["frames"])
        if self.writer is not None:
            for name, value in numbers_.items():
                if name != "frames":
                    self.writer.add_scalar(name, value, global_step=frames)
            self.writer.flush()  # a killed run loses no generation it wrote
        if self.wandb_run is not None:
            self.wandb_run.log(numbers_, step=frames)

    def close(self, bound_s: float | None = None) -> None:
        """Close the logs; bound_s (a stop): W&B's finish is given that long, then left behind."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.wandb_run is not None:
            run, self.wandb_run = self.wandb_run, None
            if bound_s is None:
                run.finish()
                return
            finishing = threading.Thread(target=_finish_quietly, args=(run,), daemon=True)
            finishing.start()
            finishing.join(bound_s)
            if finishing.is_alive():
                print(f"W&B did not finish in {bound_s:g} s; what it has not sent stays in the run folder "
                      "(wandb sync sends it)", file=sys.stderr, flush=True)  # fmt: skip


def _finish_quietly(run) -> None:
    """W&B's finish in a thread of its own (a stop does not wait for it past its bound)."""
    try:
        run.finish()
    except Exception:  # noqa: BLE001 (a stop is under way: W&B's own failure is not its news)
        pass


def _wandb_run(project: str, run_dir: str):
    """The W&B run of this run folder (the same one on resume), its files in the run folder;
    a ConfigError of one line where W&B cannot start (no login and no offline mode, ...)."""
    import wandb

    path = os.path.join(run_dir, WANDB)
    if os.path.exists(path):
        run_id = read_json(path).get("id")
        if not isinstance(run_id, str) or not run_id:
            raise DamagedFile(f"{path}: damaged (no W&B run id); remove it to log to a new W&B run")
    else:
        run_id = uuid.uuid4().hex[:16]  # (W&B's ids: letters and digits)
        runs.write_json(run_dir, WANDB, {"id": run_id, "project": project})  # written whole or not at all
    with open(os.path.join(run_dir, "config.json")) as f:
        config = json.load(f)
    try:
        return wandb.init(
            project=project, name=os.path.basename(os.path.normpath(run_dir)), id=run_id, resume="allow",
            config=config, dir=run_dir, settings=wandb.Settings(silent=True, console="off"),
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 (W&B raises its own kinds: said in one line)
        why = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(
            f"--wandb: W&B could not start ({why}): run `wandb login`, or set WANDB_MODE=offline "
            "to log without a network"
        ) from None
