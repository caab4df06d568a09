"""The SGD baseline's loop (Zhang, Clune & Stanley 2017): mini-batch after mini-batch, theta on
the whole test set every --validate-every iterations, into the same run folder as every run
(config.json, metrics.jsonl, checkpoints, elite.json and its theta), so that nevo.plots.curves,
replay and nevo.load_policy read it as they read an ES run.

    experiments/run_sgd.py -> main -> run: settings -> task -> net -> theta; then, each
    iteration: a batch -> nevo.algos.sgd.SGD.step; every validate_every: the test set -> one
    metrics row -> progress line -> elite files -> checkpoint

It is the one loop of its own in nevo: SGD evaluates no population, so the generation loop's
ask/evaluate/tell has nothing to do here; everything it writes goes through the same modules.
"""

from __future__ import annotations

import signal
import sys

from nevo import cli, config, nets, runs
from nevo.algos import declared
from nevo.algos.sgd import SGD, SGDStep
from nevo.config import ConfigError
from nevo.evaluation import setup
from nevo.genomes import noise
from nevo.loops.progress import Progress
from nevo.loops.skeleton import Outcome, RunStopped, said, skeleton, stopped, write_config
from nevo.runs import loggers, owner, stop
from nevo.tasks.supervised import Supervised


def run(cfg, task, resume_dir: str | None = None, out=None) -> Outcome:
    """Train theta by SGD (or the proxy) until the frame budget (examples), holding the run folder
    all along (nevo.runs.owner); returns the Outcome, or raises RunStopped as the generation loop's
    run does."""
    if not isinstance(task, Supervised):
        raise ConfigError(f"--env: SGD trains on a labelled data set (mnist); {task.name} is not one")
    spec = setup.net_for(cfg, task)
    config.check_noise_table(cfg, spec.n_params)
    loggers.check(cfg)
    out = out or Progress(cfg.run.frame_budget)
    with stop.on_signals():
        if resume_dir:
            owner.claim(resume_dir, out.say)  # before its checkpoint is read
        try:
            checkpoint = runs.resume_checkpoint(resume_dir, say=print) if resume_dir else None
            run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
        except runs.WriteFailed as e:  # the new folder cannot be made
            raise stopped(cfg, cfg.run.out_dir, 0, e) from None
        except BaseException:
            if resume_dir:
                owner.release(resume_dir)
            raise
        finished = 0 if checkpoint is None else int(checkpoint["generation"])
        try:
            owner.claim(run_dir, out.say)
            return _run(cfg, task, spec, checkpoint, run_dir, out)
        except RunStopped:  # the generations' own line
            raise
        except BaseException as e:  # a stop or a failed write before or after the iterations
            if not (stop.caused(e) or isinstance(e, runs.WriteFailed)):
                raise
            raise stopped(cfg, run_dir, finished, e, resume_dir is None, "iteration") from None
        finally:
            owner.release(run_dir)


def _run(cfg, task, spec, checkpoint, run_dir: str, out) -> Outcome:
    """run() in the folder it holds."""
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    device = setup.device_for(cfg, task)
    evaluator, facts = setup.local_evaluator(cfg, task, spec, device, table, None, run_dir, 1)
    try:
        write_config(run_dir, cfg, task, spec, facts)
        s = cfg.settings
        out.say(f"nevo sgd | {task.name} | net {cfg.net.net} ({spec.n_params:,} params) | "
                f"{declared(cfg).summary(cfg)} | run folder {run_dir}")  # fmt: skip
        algo = SGD(s, cfg.run.seed, noise.NoiseSource(table, nets.init_scale(spec), 0.0), spec)
        frames, wall = 0, 0.0
        if checkpoint is not None:
            algo.load_state(checkpoint)
            frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
            runs.trim_metrics(run_dir, algo.generation, say=out.say)
            out.say(f"resumed at iteration {algo.generation}, {frames:,} examples")
        step = SGDStep(cfg, task, evaluator, algo, out)
        frames, wall, last = skeleton(cfg, algo, step, frames, wall, run_dir, out)
    finally:
        evaluator.close()
    accuracy = last.get("score/test_accuracy", float("nan"))  # the last validation's
    tested = f", accuracy {100 * accuracy:.2f}%" if accuracy == accuracy else ""
    out.say(f"done: {frames:,} examples in {wall / 60:.1f} min; test cross-entropy {-algo.elite_score:.4f}"
            f"{tested}; {run_dir}")  # fmt: skip
    return Outcome(run_dir, algo, frames, wall)


def main(argv, description: str) -> int:
    """run_sgd's command line: parse, run; one line and an exit code for every way it stops (the
    generation loop's codes, nevo.loops.loop.main)."""
    with stop.on_signals():
        try:
            cfg, resume_dir, _, task = cli.parse_args(argv, description, cli.SGD_PRESETS)
            outcome = run(cfg, task, resume_dir)
        except RunStopped as e:
            said(str(e), sys.stderr if e.code == 4 else sys.stdout)
            return e.code
        except BaseException as e:
            if not stop.caused(e):
                if isinstance(e, (ConfigError, ValueError, MemoryError)):  # one clear line, no traceback
                    print(f"error: {e}", file=sys.stderr)
                    return 2
                raise
            signum = stop.signum_of(e)  # a stop before the run began: nothing written
            said(f"stopped by {signal.Signals(signum).name} before the run began; nothing was written")
            return 128 + signum
    return 0 if outcome else 1
