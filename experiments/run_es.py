"""Train with OpenAI evolution strategies (Salimans et al. 2017), on Atari or a gymnasium task.

    python -m experiments.run_es --env CartPole-v1        # a vector task: about a minute on 2 cores
    python -m experiments.run_es                          # the quick preset on Frostbite
    python -m experiments.run_es --preset paper --game frostbite   # 5,000 perturbations, VBN
    python -m experiments.run_es --resume runs/<folder>   # continue a killed run
    python -m experiments.run_es --env HalfCheetah-v5      # a MuJoCo robot: 10M steps, ~7 min
    python -m experiments.run_es --preset mujoco           # OpenAI-ES's Humanoid-v5 settings

Each generation: ask the perturbations -> evaluate -> tell (the update of theta) -> validate
theta -> log -> checkpoint. Run folders, metrics and resume are the GA's; the elite
of an ES run is theta itself, saved as theta.npy beside elite.json.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nevo import cli, config, nets, runs, tasks
from nevo.algos.es import ES, vector_norm
from nevo.config import ConfigError
from nevo.evaluation import setup
from nevo.evaluation.cluster import ClusterError
from nevo.genomes import noise
from nevo.nets.obs_norm import ObsNorm
from nevo.runs.progress import Progress


def main(argv=None) -> int:
    # ---- settings ---------------------------------------------------------------------
    try:
        cfg, resume_dir, cluster = cli.parse_args(argv, __doc__, cli.ES_PRESETS)
        task = tasks.task_for(cfg.env)
        spec = setup.net_for(cfg, task)
        config.check_noise_table(cfg, spec.n_params)
        device = setup.check_machine(cfg, task, spec, cfg.es.population, 1, cluster)  # the rows, theta
        checkpoint = runs.load_checkpoint(resume_dir, say=print) if resume_dir else None
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
    out = Progress(cfg.run.frame_budget)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    norm = ObsNorm(spec) if cfg.es.obs_norm else None  # observation statistics, folded into the weights
    try:
        evaluator, facts = setup.evaluator(
            cfg,
            task,
            spec,
            device,
            run_dir,
            table,
            cfg.es.population,
            1,
            cluster=cluster,
            say=out.say,
            obs_norm=norm,
        )
    except ClusterError as e:
        return runs.stop_before_start(run_dir, resume_dir, e)
    runs.write_config(run_dir, cfg, {"n_params": spec.n_params, "n_actions": spec.n_actions, **facts})
    env, es = task.name, cfg.es
    out.say(
        f"nevo es | {env} | net {cfg.net.net} ({spec.n_params:,} params"
        f"{f', VBN over {cfg.net.vbn} observations' if cfg.net.vbn else ''}) | N={es.population}"
        f"{' mirrored' if es.mirrored else ''} sigma={es.sigma} {es.optimizer} lr={es.lr} l2={es.l2} | "
        + ", ".join(f"{k} {v}" for k, v in facts.items())
        + f" | run folder {run_dir}"
    )

    # ---- state: noise table, theta and the optimizer, counters ------------------------
    algo = ES(es, cfg.run.seed, noise.NoiseSource(table, nets.init_scale(spec), es.sigma))
    frames, wall = 0, 0.0
    if checkpoint is not None:
        algo.load_state(checkpoint)
        if norm is not None:
            norm.resume(checkpoint)
        frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
        out.say(f"resumed at generation {algo.generation}, {frames:,} frames")
    if resume_dir:  # drop metrics of a generation that was in flight when the run died
        runs.trim_metrics(run_dir, algo.generation)

    # ---- the loop: ask -> evaluate -> tell -> validate -> log -> checkpoint ------------
    try:
        while frames < cfg.run.frame_budget:
            gen, t0 = algo.generation, time.monotonic()
            population, episodes = algo.ask()
            if norm is not None:  # a share of the training episodes feeds the statistics
                norm.mark(episodes, cfg.run.seed, gen)
            out.start_phase(gen, "train", frames)
            train = evaluator.run(population, episodes, out.episodes)
            t_update = time.monotonic()
            fitness = algo.tell(train)
            update_s = time.monotonic() - t_update

            population, episodes = algo.ask_validation()
            out.start_phase(gen, "validate", frames + train.total_frames)
            valid = evaluator.run(population, episodes, out.episodes)
            algo.tell_validation(valid)

            gen_frames = train.total_frames + valid.total_frames
            gen_s = time.monotonic() - t0
            frames, wall = frames + gen_frames, wall + gen_s
            row = {
                **runs.generation_row(gen, frames, wall, gen_s, train, valid, fitness),
                "perf/update_s": round(update_s, 4),
                "score/elite_mean": algo.theta_score,  # the elite of ES is theta
                "es/grad_norm": algo.grad_norm,
                "es/step_norm": algo.step_norm,
                "es/theta_norm": float(vector_norm(algo.theta)),
                "episode/mean_length": float(np.mean(train.lengths)),
            }
            if norm is not None:  # the statistics theta was validated with, then the next generation's
                row["obs_norm/count"] = norm.stat.count
                runs.save_array(run_dir, runs.OBS_NORM, np.stack([norm.mean, norm.std]))
                norm.advance(train)
            runs.append_metrics(run_dir, row)
            if train.behaviours is not None:  # MuJoCo: where each episode ended (as run_ns keeps it)
                runs.save_array(run_dir, runs.BEHAVIOURS, train.behaviours)
            runs.save_array(run_dir, runs.THETA, algo.theta)
            runs.write_json(
                run_dir,
                runs.ELITE,
                {
                    "generation": gen,
                    "theta": runs.THETA,
                    "validation_mean": algo.theta_score,
                    "validation_episodes": es.validation_episodes,
                    "net": cfg.net.net,
                    "vbn": cfg.net.vbn,
                }
                | ({"obs_norm": runs.OBS_NORM} if norm is not None else {}),
            )
            stats = norm.stat.state() if norm is not None else {}
            runs.save_checkpoint(run_dir, {**algo.state(), **stats, "frames": frames, "wall_s": wall})
            out.generation_done(row)
    except KeyboardInterrupt:
        out.say(f"interrupted; continue with: python -m experiments.run_es --resume {run_dir}")
        return 130
    except ClusterError as e:  # one line; the last checkpoint is whole
        return runs.stop_on_cluster_error(run_dir, algo.generation, "run_es", e)
    finally:
        evaluator.close()
    out.say(f"done: {frames:,} frames in {wall / 60:.1f} min; theta {algo.theta_score:.1f}; {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
