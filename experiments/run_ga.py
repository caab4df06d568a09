"""Train an Atari agent with the deep genetic algorithm (or random search) of Such et al. 2017.

    python -m experiments.run_ga                         # the quick preset on Frostbite
    python -m experiments.run_ga --preset paper --game frostbite
    python -m experiments.run_ga --preset rs             # random search (T = 0)
    python -m experiments.run_ga --env CartPole-v1       # a gymnasium vector task, in about a minute
    python -m experiments.run_ga --resume runs/<folder>  # continue a killed run
    python -m experiments.run_ga --cluster local:2       # on a Dask cluster (or tcp://host:8786)
    python -m experiments.run_ga --env CartPole-v1 --net deep --mutation sm-g-sum  # safe mutations

Each generation: ask -> evaluate -> tell, validate the top candidates -> log -> checkpoint.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nevo import cli, config, nets, runs, tasks
from nevo.algos import make_algo
from nevo.config import ConfigError
from nevo.evaluation import setup
from nevo.evaluation.cluster import ClusterError
from nevo.genomes import noise
from nevo.runs.progress import Progress


def main(argv=None) -> int:
    # ---- settings ---------------------------------------------------------------------
    try:
        cfg, resume_dir, cluster = cli.parse_args(argv, __doc__)
        task = tasks.task_for(cfg.env)
        spec = setup.net_for(cfg, task)
        config.check_noise_table(cfg, spec.n_params)
        bases = cfg.ga.truncation + 1
        device = setup.check_machine(cfg, task, spec, cfg.ga.population, bases, cluster)
        checkpoint = runs.load_checkpoint(resume_dir, say=print) if resume_dir else None
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
    out = Progress(cfg.run.frame_budget)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    try:
        evaluator, facts = setup.evaluator(
            cfg, task, spec, device, run_dir, table, cfg.ga.population, bases, cluster=cluster, say=out.say
        )
    except ClusterError as e:
        return runs.stop_before_start(run_dir, resume_dir, e)
    runs.write_config(run_dir, cfg, {"n_params": spec.n_params, "n_actions": spec.n_actions, **facts})
    out.say(
        f"nevo {cfg.algo} | {task.name} | net {cfg.net.net} ({spec.n_params:,} params"
        f"{f', VBN over {cfg.net.vbn} observations' if cfg.net.vbn else ''}) | "
        f"N={cfg.ga.population} T={cfg.ga.truncation} sigma={cfg.ga.sigma}"
        f"{f' mutation {cfg.ga.mutation}' if cfg.ga.mutation != 'gaussian' else ''} | "
        + ", ".join(f"{k} {v}" for k, v in facts.items())
        + f" | run folder {run_dir}"
    )

    # ---- state: algorithm, counters (from the checkpoint on resume) ----------------------
    source = noise.NoiseSource(table, nets.init_scale(spec), cfg.ga.sigma)
    algo = make_algo(cfg.algo, cfg, source)
    frames, wall = 0, 0.0
    if checkpoint is not None:
        algo.load_state(checkpoint)
        frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
        out.say(f"resumed at generation {algo.generation}, {frames:,} frames")
    safe = cfg.ga.mutation != "gaussian"  # safe mutations: the parents' experiences in the run folder
    if safe and algo.parents:
        try:
            algo.parent_experiences = [runs.load_experiences(run_dir, g) for g in algo.parents]
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    living = runs.living_genomes(algo)  # whose experiences the last checkpoint needs
    if resume_dir:  # drop metrics of a generation that was in flight when the run died
        runs.trim_metrics(run_dir, algo.generation)

    # ---- the loop: ask -> evaluate -> tell -> validate -> log -> checkpoint ------------
    try:
        while frames < cfg.run.frame_budget:
            gen, t0 = algo.generation, time.monotonic()
            population, episodes = algo.ask()
            out.start_phase(gen, "train", frames)
            train = evaluator.run(population, episodes, out.episodes)
            fitness = algo.tell(train)

            population, episodes = algo.ask_validation()
            out.start_phase(gen, "validate", frames + train.total_frames)
            valid = evaluator.run(population, episodes, out.episodes)
            algo.tell_validation(valid)

            gen_frames = train.total_frames + valid.total_frames
            gen_s = time.monotonic() - t0
            frames, wall = frames + gen_frames, wall + gen_s
            row = {
                **runs.generation_row(gen, frames, wall, gen_s, train, valid, fitness),
                "score/elite_mean": algo.elite_score,
                "score/best_mean": algo.best_score,
                "elite/genome_len": len(algo.elite),
                "elite/kept": int(algo.elite_kept),
                "episode/mean_length": float(np.mean(train.lengths)),
                **({"perf/mutation_s": round(train.mutation_s + valid.mutation_s, 3)} if safe else {}),
            }
            runs.append_metrics(run_dir, row)
            rebuild = {
                "validation_episodes": cfg.ga.validation_episodes,
                "net": cfg.net.net,
                "vbn": cfg.net.vbn,
                "sigma": cfg.ga.sigma,
                "noise_table_size": cfg.run.noise_table_size,
                "noise_seed": cfg.run.noise_seed,
                **({"mutation": cfg.ga.mutation} if safe else {}),  # its rebuild reads experiences/
            }
            kept = [(runs.ELITE, gen, algo.elite, algo.elite_score)]
            if algo.best is not None:  # None only while every validation mean was NaN
                kept.append((runs.BEST, algo.best_generation, algo.best, algo.best_score))
            for name, generation, seeds, score in kept:
                runs.write_json(
                    run_dir,
                    name,
                    {"generation": generation, "seeds": [int(s) for s in seeds], "validation_mean": score}
                    | rebuild,
                )
            if train.behaviours is not None:  # the maze: the population's final positions
                runs.save_array(run_dir, runs.BEHAVIOURS, train.behaviours)
            if safe:  # before the checkpoint that names them
                runs.save_experiences(run_dir, algo.parents, algo.parent_experiences)
            runs.save_checkpoint(run_dir, {**algo.state(), "frames": frames, "wall_s": wall})
            if safe:  # the previous checkpoint's still count: --resume may fall back to it
                now_living = runs.living_genomes(algo)
                runs.prune_experiences(run_dir, now_living + living)
                living = now_living
            out.generation_done(row)
    except KeyboardInterrupt:
        out.say(f"interrupted; continue with: python -m experiments.run_ga --resume {run_dir}")
        return 130
    except ClusterError as e:  # one line; the last checkpoint is whole
        return runs.stop_on_cluster_error(run_dir, algo.generation, "run_ga", e)
    finally:
        evaluator.close()
    out.say(
        f"done: {frames:,} frames in {wall / 60:.1f} min; elite {algo.elite_score:.1f}, best "
        f"{algo.best_score:.1f} (generation {algo.best_generation}); {run_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
