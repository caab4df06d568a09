"""The SGD baseline's loop (Zhang, Clune & Stanley 2017): mini-batch after mini-batch, theta on
the whole test set every --validate-every iterations, into the same run folder as every run
(config.json, metrics.jsonl, checkpoints, elite.json and theta.npy), so that plots.curves,
replay and nevo.load_policy read it as they read an ES run.

    experiments/run_sgd.py -> main -> run: settings -> task -> net -> theta; then, each
    iteration: a batch -> nevo.algos.sgd.SGD.step; every validate_every: the test set -> one
    metrics row -> progress line -> elite files -> checkpoint

It is the one loop of its own in nevo: SGD evaluates no population, so the generation loop's
ask/evaluate/tell has nothing to do here; everything it writes goes through the same modules.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nevo import config, nets, runs
from nevo.algos import declaration
from nevo.algos.sgd import SGD
from nevo.config import ConfigError
from nevo.evaluation import setup
from nevo.evaluation.episodes import Episodes, Population
from nevo.evaluation.supervised import batch_of
from nevo.genomes import noise
from nevo.runs import elite as elite_files
from nevo.runs.loop import Outcome, RunStopped, accuracy_row, write_config
from nevo.runs.progress import Progress
from nevo.tasks.supervised import Supervised


def run(cfg, task, resume_dir: str | None = None, out=None) -> Outcome:
    """Train theta by SGD (or the proxy) until the frame budget (examples); returns the Outcome."""
    if not isinstance(task, Supervised):
        raise ConfigError(f"--env: SGD trains on a labelled data set (mnist); {task.name} is not one")
    spec = setup.net_for(cfg, task)
    config.check_noise_table(cfg, spec.n_params)
    checkpoint = runs.resume_checkpoint(resume_dir, say=print) if resume_dir else None
    run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
    out = out or Progress(cfg.run.frame_budget)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    device = setup.device_for(cfg, task)
    evaluator, facts = setup.local_evaluator(cfg, task, spec, device, table, None, run_dir, 1)
    write_config(run_dir, cfg, task, spec, facts)
    s = cfg.sgd
    out.say(f"nevo sgd | {task.name} | net {cfg.net.net} ({spec.n_params:,} params) | "
            f"{declaration(cfg.algo).summary(cfg)} | run folder {run_dir}")  # fmt: skip
    algo = SGD(s, cfg.run.seed, noise.NoiseSource(table, nets.init_scale(spec), 0.0), spec)
    frames, wall = 0, 0.0
    if checkpoint is not None:
        algo.load_state(checkpoint)
        frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
        runs.trim_metrics(run_dir, algo.generation, say=out.say)
        out.say(f"resumed at iteration {algo.generation}, {frames:,} examples")
    data, n = task.data, cfg.env.examples
    try:
        while frames < cfg.run.frame_budget:
            t0, first = time.monotonic(), algo.generation
            out.start_phase(first, "train", frames)
            losses, hits = [], []
            for _ in range(s.validate_every):
                pick = batch_of(algo.batch_seed(), len(data.train_y), n)
                algo.step(data.train_x[pick], data.train_y[pick])
                losses.append(algo.loss)
                hits.append(algo.accuracy)
                frames += len(pick)
                if frames >= cfg.run.frame_budget:
                    break
            train_s = time.monotonic() - t0
            test = Episodes(np.zeros(1, np.int64), np.zeros(1, np.int64), validation=True)  # the test set
            valid = evaluator.run(Population.of_weights(algo.theta[None]), test)
            algo.elite_score = float(valid.returns[0])
            gen_s = time.monotonic() - t0
            wall += gen_s
            row = {
                "generation": algo.generation - 1,
                "frames": frames,
                "wall_s": round(wall, 3),
                "iterations": algo.generation - first,
                "perf/gen_s": round(gen_s, 3),
                "perf/update_s": round(train_s, 4),
                "perf/frames_per_s": round((algo.generation - first) * n / gen_s, 1),
                "score/pop_max": -float(np.min(losses)),  # the iterations' batch scores
                "score/pop_mean": -float(np.mean(losses)),
                **algo.metrics(),
                **accuracy_row(hits, valid.accuracy),
            }
            runs.append_metrics(run_dir, row)
            elite_files.write(run_dir, cfg, algo.generation - 1, algo)
            runs.save_checkpoint(run_dir, {**algo.state(), "frames": frames, "wall_s": wall})
            out.generation_done(row)
    except KeyboardInterrupt:
        script = declaration(cfg.algo).script
        raise RunStopped(f"interrupted; continue with: python -m experiments.{script} --resume {run_dir}",
                         130, run_dir) from None  # fmt: skip
    finally:
        evaluator.close()
    accuracy = getattr(out, "accuracy", float("nan"))  # the last validation's
    tested = f", accuracy {100 * accuracy:.2f}%" if accuracy == accuracy else ""
    out.say(f"done: {frames:,} examples in {wall / 60:.1f} min; test cross-entropy {-algo.elite_score:.4f}"
            f"{tested}; {run_dir}")  # fmt: skip
    return Outcome(run_dir, algo, frames, wall)


def main(argv, description: str) -> int:
    """run_sgd's command line: parse, run; one line and an exit code for every way it stops."""
    from nevo import cli, tasks

    try:
        cfg, resume_dir, _ = cli.parse_args(argv, description, cli.SGD_PRESETS)
        task = tasks.task_for(cfg.env)
        outcome = run(cfg, task, resume_dir)
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:
        print(str(e))
        return e.code
    return 0 if outcome else 1
