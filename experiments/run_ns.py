"""Novelty search: GA-NS (Such et al. 2017) and NS-ES, NSR-ES, NSRA-ES (Conti et al. 2018).

    python -m experiments.run_ns --algo ga-ns --env maze       # the deceptive image maze
    python -m experiments.run_ns --algo nsra-es --env maze
    python -m experiments.run_ns --algo ga-ns --env frostbite  # Atari: behaviour = final RAM
    python -m experiments.run_ns --resume runs/<folder>        # continue a killed run

Behaviour: the maze's final (x, y); on Atari the 128-byte RAM at the end of the episode (found
by replaying the episode's actions in worker processes: nevo.tasks.atari_ram). Novelty of a behaviour
= mean distance to its k nearest neighbours among the archive (and, for GA-NS, the current
population).
- GA-NS: the deep GA selecting on novelty instead of reward; each individual's behaviour joins
  the archive with probability --archive-prob; the elite is the most novel individual, logged
  with its game score (score/elite_mean) and its novelty (ns/elite_novelty).
- NS-ES / NSR-ES / NSRA-ES: a meta-population of --meta-population ES agents; each generation
  the agent to update is drawn with probability proportional to its novelty, its perturbations
  are ranked by novelty (NS-ES), by the mean of reward and novelty ranks (NSR-ES) or by a
  weighted mean whose weight adapts (NSRA-ES, from --reward-weight: towards novelty after
  --nsra-patience generations without a better reward, back towards reward when it improves),
  the agent steps, and its new behaviour joins the archive. The elite is the agent of the best
  validation mean.
The algorithms are nevo.algos.ns's. Each generation: ask -> evaluate -> tell -> ask_validation
(GA-NS: no episode) -> evaluate -> tell_validation -> log -> checkpoint; before the first, the ES
family's agents are evaluated once and their behaviours start the archive. Run folder, metrics,
progress, determinism and resume are the GA's; the archive is in the checkpoint, the last
generation's behaviours in behaviours.npy; elite.json is GA-NS's elite seed list (as the GA's)
or the ES family's best agent's theta (theta.npy, as ES's), for experiments.replay.
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
from nevo.nets.obs_norm import ObsNorm
from nevo.runs.progress import Progress


def main(argv=None) -> int:
    # ---- settings ---------------------------------------------------------------------
    try:
        cfg, resume_dir, cluster = cli.parse_args(argv, __doc__, cli.NS_PRESETS)
        task = tasks.task_for(cfg.env)
        if task.behaviour is None:
            raise ConfigError(
                f"--env: novelty search needs a behaviour per episode; {task.name} has none here "
                "(use maze, an Atari game or a MuJoCo robot)"
            )
        spec = setup.net_for(cfg, task)
        config.check_noise_table(cfg, spec.n_params)
        ns = cfg.ns
        bases = ns.truncation + 1 if ns.algo == "ga-ns" else ns.meta_population  # parents, or thetas
        device = setup.check_machine(cfg, task, spec, ns.population, bases, cluster)
        checkpoint = runs.load_checkpoint(resume_dir, say=print) if resume_dir else None
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
    out = Progress(cfg.run.frame_budget)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    norm = ObsNorm(spec) if config.obs_norm_of(cfg) else None  # the ES family's --obs-norm 1
    try:
        evaluator, facts = setup.evaluator(
            cfg, task, spec, device, run_dir, table, ns.population, bases, True, cluster, out.say, norm
        )
    except ClusterError as e:
        return runs.stop_before_start(run_dir, resume_dir, e)
    runs.write_config(run_dir, cfg, {"n_params": spec.n_params, "n_actions": spec.n_actions, **facts})
    out.say(
        f"nevo {ns.algo} | {task.name} | net {cfg.net.net} ({spec.n_params:,} params) | "
        f"N={ns.population} sigma={ns.sigma} k={ns.k}"
        f"{f' mutation {ns.mutation}' if ns.mutation != 'gaussian' else ''} | "
        + ", ".join(f"{k} {v}" for k, v in facts.items())
        + f" | run folder {run_dir}"
    )

    # ---- state: the algorithm with its archive, counters (from the checkpoint on resume) ----
    source = noise.NoiseSource(table, nets.init_scale(spec), ns.sigma)
    algo = make_algo(ns.algo, cfg, source, task.behaviour)
    frames, wall = 0, 0.0
    # With --obs-norm 1, the (mean, std) each agent was last validated with (M, 2, n): its policy
    agent_stats = None if norm is None else np.stack([[norm.mean, norm.std]] * ns.meta_population)
    if checkpoint is not None:
        algo.load_state(checkpoint)
        if norm is not None:
            norm.resume(checkpoint)
            agent_stats = np.array(checkpoint["obs_norm/agents"], np.float64)
        frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
        out.say(f"resumed at generation {algo.generation}, {frames:,} frames, archive {len(algo.archive)}")
    if resume_dir:  # drop metrics of a generation that was in flight when the run died
        runs.trim_metrics(run_dir, algo.generation)
    safe = ns.mutation != "gaussian"  # GA-NS with safe mutations: the parents' experiences in the run folder
    if safe and algo.parents:
        try:
            algo.parent_experiences = [runs.load_experiences(run_dir, g) for g in algo.parents]
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    living = runs.living_genomes(algo.ga) if safe else []  # whose experiences the last checkpoint needs

    # ---- the loop: ask -> evaluate -> tell -> validate -> log -> checkpoint ------------
    try:
        if checkpoint is None:  # the ES family's agents' first behaviours start the archive (GA-NS: none)
            population, episodes = algo.ask_start()
            start = evaluator.run(population, episodes)
            algo.tell_start(start)
            frames += start.total_frames
        while frames < cfg.run.frame_budget:
            gen, t0 = algo.generation, time.monotonic()
            population, episodes = algo.ask()
            if norm is not None:  # a share of the training episodes feeds the statistics
                norm.mark(episodes, cfg.run.seed, gen)
            out.start_phase(gen, "train", frames)
            train = evaluator.run(population, episodes, out.episodes)
            algo.tell(train)

            population, episodes = algo.ask_validation()
            out.start_phase(gen, "validate", frames + train.total_frames)
            valid = evaluator.run(population, episodes, out.episodes)
            algo.tell_validation(valid)

            gen_frames = train.total_frames + valid.total_frames
            gen_s = time.monotonic() - t0
            frames, wall = frames + gen_frames, wall + gen_s
            row = {
                "generation": gen,
                "frames": frames,
                "wall_s": round(wall, 3),
                "perf/gen_s": round(gen_s, 3),
                "perf/frames_per_s": round(gen_frames / gen_s, 1),
                "score/pop_max": float(np.max(train.returns)),
                "score/pop_mean": float(np.mean(train.returns)),
                **algo.metrics(),
                **runs.cluster_row(train, valid),
                **({"perf/mutation_s": round(train.mutation_s + valid.mutation_s, 3)} if safe else {}),
            }
            if norm is not None:  # the updated agent was validated with these; then the next generation's
                row["obs_norm/count"] = norm.stat.count
                agent_stats[algo.agent_index] = (norm.mean, norm.std)
                norm.advance(train)
            runs.append_metrics(run_dir, row)
            # elite.json, for experiments.replay: GA-NS's elite is a seed list (rebuilt as the GA's
            # are), the ES family's the best agent's theta (theta.npy, as ES's)
            elite = {
                "generation": gen,
                "validation_mean": algo.elite_score,
                "net": cfg.net.net,
                "vbn": cfg.net.vbn,
            }
            if ns.algo == "ga-ns":
                elite |= {
                    "seeds": [int(s) for s in algo.elite],
                    "validation_episodes": 1,  # its score is its training episode's: GA-NS validates nothing
                    "sigma": ns.sigma,
                    "noise_table_size": cfg.run.noise_table_size,
                    "noise_seed": cfg.run.noise_seed,
                    **({"mutation": ns.mutation} if safe else {}),  # its rebuild reads experiences/
                }
            else:
                runs.save_array(run_dir, runs.THETA, algo.elite)
                elite |= {"theta": runs.THETA, "validation_episodes": ns.validation_episodes}
                if norm is not None:  # the statistics the elite agent was validated with
                    runs.save_array(run_dir, runs.OBS_NORM, agent_stats[algo.elite_agent])
                    elite |= {"obs_norm": runs.OBS_NORM}
            runs.write_json(run_dir, runs.ELITE, elite)
            runs.save_array(run_dir, runs.BEHAVIOURS, train.behaviours)
            if safe:  # before the checkpoint that names them
                runs.save_experiences(run_dir, algo.parents, algo.parent_experiences)
            stats = {} if norm is None else {**norm.stat.state(), "obs_norm/agents": agent_stats}
            runs.save_checkpoint(run_dir, {**algo.state(), **stats, "frames": frames, "wall_s": wall})
            if safe:  # the previous checkpoint's still count: --resume may fall back to it
                now_living = runs.living_genomes(algo.ga)
                runs.prune_experiences(run_dir, now_living + living)
                living = now_living
            out.generation_done(row)
    except KeyboardInterrupt:
        out.say(f"interrupted; continue with: python -m experiments.run_ns --resume {run_dir}")
        return 130
    except ClusterError as e:  # one line; the last checkpoint is whole
        return runs.stop_on_cluster_error(run_dir, algo.generation, "run_ns", e)
    finally:
        evaluator.close()
    out.say(f"done: {frames:,} frames in {wall / 60:.1f} min; best return {algo.best:.2f}; {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
