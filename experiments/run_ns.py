"""Novelty search: GA-NS (Such et al. 2017) and NS-ES, NSR-ES, NSRA-ES (Conti et al. 2018).

    python -m experiments.run_ns --algo ga-ns --env maze       # the deceptive image maze
    python -m experiments.run_ns --algo nsra-es --env maze
    python -m experiments.run_ns --algo ga-ns --env frostbite  # Atari: behaviour = final RAM
    python -m experiments.run_ns --resume runs/<folder>        # continue a killed run

Behaviour: the maze's final (x, y); on Atari the 128-byte RAM at the end of the episode (found
by replaying the episode's actions in worker processes: nevo.atari_ram). Novelty of a behaviour
= mean distance to its k nearest neighbours among the archive (and, for GA-NS, the current
population).
- GA-NS: the deep GA selecting on novelty instead of reward; each individual's behaviour joins
  the archive with probability --archive-prob; the elite is the most novel individual.
- NS-ES / NSR-ES / NSRA-ES: a meta-population of --meta-population ES agents; each generation
  the agent to update is drawn with probability proportional to its novelty, its perturbations
  are ranked by novelty (NS-ES), by the mean of reward and novelty ranks (NSR-ES) or by a
  weighted mean whose weight adapts (NSRA-ES: towards novelty after --nsra-patience generations
  without a better reward, back towards reward when it improves), the agent steps, and its new
  behaviour joins the archive.
Run folder, metrics, progress, determinism and resume are the GA's; the archive is in the
checkpoint, the last generation's behaviours in behaviours.npy.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from nevo import build, config, envs, nets, noise, novelty, runs
from nevo.algos.es import ES
from nevo.algos.ga import GA, rng_for
from nevo.config import ConfigError, ESConfig, GAConfig
from nevo.pipeline import make_evaluator
from nevo.progress import Progress

ARCHIVE_PICK, AGENT_PICK = 100, 101  # purposes of the run's own random streams


def es_config(ns) -> ESConfig:
    return ESConfig(
        population=ns.population,
        sigma=ns.sigma,
        optimizer=ns.optimizer,
        lr=ns.lr,
        l2=ns.l2,
        momentum=ns.momentum,
        mirrored=ns.mirrored,
        validation_episodes=ns.validation_episodes,
    )


def main(argv=None) -> int:
    # ---- settings ---------------------------------------------------------------------
    try:
        cfg, resume_dir = config.parse_args(argv, __doc__, config.NS_PRESETS)
        bc_dim, bc_dtype = envs.behaviour_space(cfg.env)
        spec = build.net_for(cfg)
        config.check_noise_table(cfg, spec.n_params)
        device = build.device_for(cfg)
        ns = cfg.ns
        rows = ns.population + ns.truncation + 1 if ns.algo == "ga-ns" else ns.population + ns.meta_population
        build.check_memory(spec.n_params, rows, cfg.run.noise_table_size, device, "--population")
        checkpoint = runs.load_checkpoint(resume_dir) if resume_dir else None
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_dir = resume_dir or runs.new_run_dir(cfg)
    policy = build.policy_for(cfg, spec, device, run_dir)
    ram = cfg.env.env == "atari"  # the maze gives its behaviour itself; Atari's RAM is replayed
    evaluator, layout = make_evaluator(cfg.env, cfg.run, policy, device, ns.population, ram=ram)
    runs.write_config(run_dir, cfg, {"n_params": spec.n_params, "n_actions": spec.n_actions, **layout})
    out = Progress(cfg.run.frame_budget)
    out.say(
        f"nevo {ns.algo} | {cfg.env.env} | net {cfg.net.net} ({spec.n_params:,} params) | "
        f"N={ns.population} sigma={ns.sigma} k={ns.k} | {device}, "
        + ", ".join(f"{k} {v}" for k, v in layout.items())
        + f" | run folder {run_dir}"
    )

    # ---- state: the algorithm, the archive, counters (from the checkpoint on resume) ----
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    source = noise.NoiseSource(table, nets.init_scale(spec), ns.sigma)
    seed = cfg.run.seed
    archive = novelty.Archive(bc_dim, bc_dtype)
    ga, agents = None, []
    if ns.algo == "ga-ns":
        ga_cfg = GAConfig(ns.population, ns.truncation, ns.sigma, elite_candidates=1, validation_episodes=1)
        ga = GA(ga_cfg, seed, source)
    else:
        agents = [ES(es_config(ns), seed, source, agent=m) for m in range(ns.meta_population)]
    agent_bc = np.zeros((len(agents), bc_dim), bc_dtype)  # each agent's behaviour (its theta's)
    agent_score = np.full(len(agents), np.nan)
    # reward's share of the ranks: 0 (NS-ES), fixed (NSR-ES) or adapted (NSRA-ES, from 1)
    nsra = novelty.NSRAWeight(1.0, ns.nsra_delta, ns.nsra_patience)
    fixed_weight = {"ns-es": 0.0, "nsr-es": ns.reward_weight}.get(ns.algo)
    best, generation, frames, wall = -np.inf, 0, 0, 0.0
    if checkpoint is not None:
        generation, frames, wall = (
            int(checkpoint["ns_generation"]),
            int(checkpoint["frames"]),
            float(checkpoint["wall_s"]),
        )
        archive.load_state({k[8:]: v for k, v in checkpoint.items() if k.startswith("archive/")})
        best = float(checkpoint["best"])
        nsra.load_state(checkpoint)
        if ga is not None:
            ga.load_state({k[3:]: v for k, v in checkpoint.items() if k.startswith("ga/")})
        for m, a in enumerate(agents):
            a.load_state(
                {k[len(f"agent{m}/") :]: v for k, v in checkpoint.items() if k.startswith(f"agent{m}/")}
            )
        if agents:
            agent_bc, agent_score = checkpoint["agent_bc"], checkpoint["agent_score"]
        out.say(f"resumed at generation {generation}, {frames:,} frames, archive {len(archive)}")
    elif agents:  # the agents' first behaviours start the archive (Conti et al.)
        for m, a in enumerate(agents):
            weights, episodes = a.ask_validation()
            res = evaluator.run(weights, episodes)
            agent_bc[m], agent_score[m] = res.behaviours[0], a.tell_validation(res)
            frames += res.total_frames
        archive.add(agent_bc)
    if resume_dir:  # drop metrics of a generation that was in flight when the run died
        runs.trim_metrics(run_dir, generation)

    # ---- the loop: ask -> evaluate -> novelty -> tell -> archive -> log -> checkpoint ---
    try:
        while frames < cfg.run.frame_budget:
            t0 = time.monotonic()
            out.start_phase(generation, "train", frames)
            row = {"generation": generation}
            if ga is not None:
                weights, episodes = ga.ask()
                train = evaluator.run(weights, episodes, out.episodes)
                bc = train.behaviours
                # novelty against the archive and the current population (itself included: 0)
                nov = novelty.knn_novelty(bc, np.concatenate([archive.data, bc]), ns.k)
                ga.tell(train, fitness=nov)
                ga.tell_no_validation(score=float(nov.max()))
                pick = novelty.sample_for_archive(
                    len(bc), ns.archive_prob, rng_for(seed, generation, ARCHIVE_PICK)
                )
                archive.add(bc[pick])
                gen_frames, returns = train.total_frames, train.returns
            else:
                m = novelty.pick_agent(
                    novelty.knn_novelty(agent_bc, archive.data, ns.k), rng_for(seed, generation, AGENT_PICK)
                )
                agent = agents[m]
                weights, episodes = agent.ask()
                train = evaluator.run(weights, episodes, out.episodes)
                bc, returns = train.behaviours, train.returns
                nov = novelty.knn_novelty(bc, archive.data, ns.k)
                w = nsra.w if fixed_weight is None else fixed_weight
                agent.tell(train, shaped=novelty.mix_ranks(returns, nov, w))
                weights, episodes = agent.ask_validation()
                out.start_phase(generation, "validate", frames + train.total_frames)
                valid = evaluator.run(weights, episodes, out.episodes)
                agent_score[m] = agent.tell_validation(valid)
                agent_bc[m] = valid.behaviours[0]
                archive.add(agent_bc[m : m + 1])
                if fixed_weight is None:  # NSRA-ES: adapt the weight to the updated agent's reward
                    nsra.update(agent_score[m])
                gen_frames = train.total_frames + valid.total_frames
                row.update({"ns/agent": m, "ns/reward_weight": w, "score/agent_mean": float(agent_score[m])})
            best = max(best, float(np.max(returns)), float(np.nanmax(agent_score)) if agents else -np.inf)
            gen_s = time.monotonic() - t0
            frames, wall, generation = frames + gen_frames, wall + gen_s, generation + 1
            row.update(
                {
                    "frames": frames,
                    "wall_s": round(wall, 3),
                    "perf/gen_s": round(gen_s, 3),
                    "perf/frames_per_s": round(gen_frames / gen_s, 1),
                    "score/pop_max": float(np.max(returns)),
                    "score/pop_mean": float(np.mean(returns)),
                    "score/best_ever": best,
                    "score/elite_mean": float(ga.elite_score)
                    if ga is not None
                    else float(np.nanmax(agent_score)),
                    "ns/novelty_max": float(nov.max()),
                    "ns/novelty_mean": float(nov.mean()),
                    "ns/archive_size": len(archive),
                }
            )
            runs.append_metrics(run_dir, row)
            runs.save_array(run_dir, runs.BEHAVIOURS, bc)
            state = {f"archive/{k}": v for k, v in archive.state().items()}
            if ga is not None:
                state.update({f"ga/{k}": v for k, v in ga.state().items()})
            for m, a in enumerate(agents):
                state.update({f"agent{m}/{k}": v for k, v in a.state().items()})
            state.update({"agent_bc": agent_bc, "agent_score": agent_score, "best": best, **nsra.state()})
            state.update({"ns_generation": generation, "frames": frames, "wall_s": wall})
            runs.save_checkpoint(run_dir, state)
            out.generation_done(row)
    except KeyboardInterrupt:
        out.say(f"interrupted; continue with: python -m experiments.run_ns --resume {run_dir}")
        return 130
    finally:
        evaluator.close()
    out.say(f"done: {frames:,} frames in {wall / 60:.1f} min; best return {best:.2f}; {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
