"""Benchmark the evaluation pipeline against the emulator limits, in one run on one machine.

    python -m experiments.bench.bench_pipeline                      # large and small nets, CPU or GPU
    python -m experiments.bench.bench_pipeline --nets large --populations 64 256 1000 --frame-cap 20000

Prints, for the same game, frame cap, emulator slots and groups (the three limits are
nevo.roofline.emulators', which `nevo roofline` puts beside a generation too):
- the emulator limit of ale-py's vector env (the comparison: nevo's pipeline stepped it until it
  got an emulator pool of its own): game frames/s of its groups with random actions, no inference,
  --threads threads per group;
- the emulator roof (emulator_roof): bare emulators doing the pipeline's observation work with
  random actions in one process per core, nothing sent between processes: what this machine's
  cores emulate at most;
- the emulator pool's limit (pool_limit): nevo's pool of the same slots in --threads processes,
  every slot stepping random actions in lockstep, no inference: the roof less the pool's IPC;
- nevo's pipeline for each net and population, one episode per individual as in a GA
  generation (so the straggler tail is included), in its modes: overlap (one group's forward
  runs while the other groups' emulators step; the default with a GPU), lockstep (one forward
  over every live emulator, then they all step, each its own group), on the CPU workers (each
  emulator process, one per core, plays whole episodes with its own forward; the CPU's default),
  and the foundation's plain loop (one group of all slots, lockstep) for comparison;
- each one's ratio to the vector env's limit and to the emulator roof, the share of its time in
  the straggler tail (tail) and the share in the forward pass (fwd: near 100% the net is the
  limit, low the emulators are).
With --env TASK (a gymnasium task, e.g. Humanoid-v5): the same comparison for its in-process
evaluator: the stepping limit of its envs (random actions, no inference, in the threads the
evaluator picks) beside an ES-like evaluation with the task's net (one episode per individual),
and that evaluation's rate beside the rate of its own steps alone (the time in the envs' step
calls: the same actions and episodes, where random actions load the physics differently);
with --processes also the stepping limit of the same envs split over one process per core
(actions sent and observations returned through pipes each step), to compare the two.
With --ram, also what novelty search's Atari behaviours cost: for each net and population, the
device's default mode again with every episode's final RAM as its behaviour (read from the pool
at the episode's end), beside its ratio to the same mode without.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nevo import machine, nets
from nevo.atari.evaluator import AtariEvaluator, layout
from nevo.atari.game import AtariGame, atari_actions
from nevo.config import EnvConfig, RunConfig
from nevo.episodes import Episodes, Population
from nevo.episodes.weights import for_device
from nevo.evaluation.setup import evaluator_for
from nevo.genomes import noise
from nevo.nets.kernels import make_policy
from nevo.roofline.emulators import emulator_limit, emulator_roof, pool_limit, population


def pool_sweep(game: str, frame_cap: int, seconds: float, workers: int = 0) -> None:
    """Where the pool's limit goes on this machine: the emulator roof with 8, 16 and 32 bare
    emulators a process (the cache a process's emulators share), then the pool's limit at 256,
    512 and 1,024 slots, in lockstep and in the overlap pipeline's units for groups of a quarter
    of the slots (each unit stepped again as soon as it is in, whichever is first), in `workers`
    processes (0: one per core) and one fewer (a core left to the driving process)."""
    cores = machine.cores()
    workers = workers or cores
    env_cfg = EnvConfig(game=game, frame_cap=frame_cap)
    print(f"pool sweep: {game}, {cores} cores, {seconds:g} s a measure")
    roofs = {}
    for k in (8, 16, 32):
        roofs[k] = emulator_roof(game, env_cfg.frameskip, frame_cap, cores, seconds, emulators=k)
        print(f"  roof, {cores} processes x {k:>2} bare emulators: {roofs[k]:>9,.0f} frames/s", flush=True)
    roof = max(roofs.values())
    for slots in (256, 512, 1024):
        for w in sorted({workers, max(1, workers - 1)}, reverse=True):
            for groups in (1, 4):
                rate = pool_limit(env_cfg, slots, w, seconds, groups)
                how = "lockstep" if groups == 1 else "first-ready units"
                print(f"  pool, {slots:>5} slots in {w:>2} processes, {how:>17}: {rate:>9,.0f} frames/s "
                      f"= {rate / roof:.0%} of the best roof", flush=True)  # fmt: skip


def fresh_weights(spec, n: int, seed: int) -> np.ndarray:
    """(n, P) float32 weights of population()'s networks, for a peer that is handed weights."""
    fresh, builder = population(spec, n, seed)
    builder.use(fresh)
    return builder.build(np.arange(n), np.empty((n, spec.n_params), np.float32))


def given(weights: np.ndarray):
    """(Population, WeightBuilder) of networks whose (n, P) weights are given, for pipeline_rate."""
    return Population.of_weights(weights), noise.WeightBuilder(None, np.zeros(weights.shape[1], np.float32))


def pipeline_rate(env_cfg, policy, device, pop, slots, group, threads, pipeline, ram=False) -> tuple:
    """(frames/s, tail fraction, forward fraction, frames) of one generation: one episode per
    individual, its weights built as its episode starts (as in training), in this pipeline
    ("overlap", "lockstep" or "workers"). The fractions are shares of the wall time."""
    population, builder = pop
    weights = for_device(builder, device)
    run_cfg = RunConfig(env_slots=slots, processes=threads, emulators_per_group=group, pipeline=pipeline)
    ev, _ = AtariEvaluator.for_task(
        AtariGame(env_cfg), run_cfg, policy, weights, device, len(population), ram
    )
    try:
        n = len(population)
        res = ev.run(population, Episodes(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1000))
    finally:
        ev.close()
    wall = res.wall_s
    return res.total_frames / wall, res.tail_s / wall, res.forward_s / wall, res.total_frames


def task_limit(task_slots, seconds: float) -> float:
    """Agent steps/s of every slot stepped with random actions (resets included), no inference."""
    rng = np.random.default_rng(0)
    every = np.arange(task_slots.slots)
    task_slots.reset(every, np.arange(task_slots.slots))
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, ended = task_slots.step(every, task_slots.random_actions(rng, task_slots.slots))
        steps += task_slots.slots
        if ended.any():
            task_slots.reset(every[ended], rng.integers(0, 2**31, int(ended.sum())))
    return steps / (time.perf_counter() - t0)


def timed(step, total: list):
    """step, adding the seconds of each call to total[0]."""

    def wrapper(*args):
        t0 = time.perf_counter()
        try:
            return step(*args)
        finally:
            total[0] += time.perf_counter() - t0

    return wrapper


def _stepping_worker(conn, env_id: str, n: int, seed: int) -> None:
    """A worker process of process_limit: n envs of env_id, stepped on each batch of actions
    received; sends back the observations and rewards (None received: stop)."""
    from nevo.tasks import envs

    slots = envs.VectorTaskSlots(lambda: envs.make_vector_task(env_id), n)
    every, rng = np.arange(n), np.random.default_rng(seed)
    slots.reset(every, rng.integers(0, 2**31, n))
    conn.send("ready")
    while (actions := conn.recv()) is not None:
        obs, rewards, ended = slots.step(every, actions)
        if ended.any():
            obs[ended] = slots.reset(every[ended], rng.integers(0, 2**31, int(ended.sum())))
        conn.send((obs, rewards))
    slots.close()


def process_limit(env_id: str, slots: int, workers: int, seconds: float) -> float:
    """Agent steps/s of `slots` envs split over `workers` processes, stepped with random actions
    sent to them each step and observations sent back (what stepping in processes would cost
    an evaluator), no inference."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parts = np.array_split(np.arange(slots), workers)
    pipes, procs = [], []
    for w, part in enumerate(parts):
        mine, theirs = ctx.Pipe()
        proc = ctx.Process(target=_stepping_worker, args=(theirs, env_id, len(part), w), daemon=True)
        proc.start()
        pipes.append(mine)
        procs.append(proc)
    try:
        for pipe in pipes:
            assert pipe.recv() == "ready"
        from nevo.tasks import envs

        probe = envs.VectorTaskSlots(lambda: envs.make_vector_task(env_id), 1)
        rng = np.random.default_rng(0)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for pipe, part in zip(pipes, parts):
                pipe.send(probe.random_actions(rng, len(part)))
            for pipe in pipes:
                pipe.recv()
            steps += slots
        rate = steps / (time.perf_counter() - t0)
        probe.close()
        return rate
    finally:
        for pipe in pipes:
            pipe.send(None)
        for proc in procs:
            proc.join(timeout=10)


def bench_task(a) -> None:
    """--env: a gymnasium task's evaluator against its envs' stepping limit."""
    from nevo import tasks
    from nevo.config import Config, NetConfig
    from nevo.evaluation import setup

    task = tasks.task_for(EnvConfig(env=a.env, frame_cap=a.frame_cap))
    for name in a.nets:
        cfg = Config(env=task.cfg, net=NetConfig(net=name))
        spec = setup.net_for(cfg, task)
        for n in a.populations or [64]:
            builder = noise.WeightBuilder(noise.make_table(spec.n_params + 100_000, 0), nets.init_scale(spec))
            run_cfg = RunConfig(env_slots=a.slots, threads=a.threads)
            ev, facts = evaluator_for(task, run_cfg, make_policy("cpu", spec), builder, "cpu", n)
            limit = task_limit(ev.task, a.limit_seconds)
            if a.processes:  # the same envs in processes instead of threads
                workers = machine.cores()
                rate = process_limit(a.env, ev.task.slots, workers, a.limit_seconds)
                print(f"{a.env} | {ev.task.slots} envs | stepping limit in {facts['threads']} thread(s): "
                      f"{limit:,.0f} steps/s; in {workers} processes: {rate:,.0f} steps/s "
                      f"({rate / limit:.2f}x)", flush=True)  # fmt: skip
            pop = Population([np.array([1])], np.zeros(n, np.int64), np.arange(n, dtype=np.int64) + 2,
                             np.full(n, 0.02, np.float32), 0.02)  # fmt: skip
            episodes = Episodes(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64))
            ev.run(pop, episodes)  # compile and warm
            stepping = [0.0]  # seconds in the envs' step calls of the measured run
            ev.task.step = timed(ev.task.step, stepping)
            res = ev.run(pop, episodes)
            ev.close()
            rate = res.total_frames / res.wall_s
            own = res.total_frames / stepping[0]  # the same steps, stepping alone
            fwd, tail = res.forward_s / res.wall_s, res.tail_s / res.wall_s
            print(f"{a.env} | net {name} ({spec.n_params:,} params) | population {n} | "
                  f"{facts['env_slots']} slots, {facts['threads']} threads | stepping limit {limit:,.0f} "
                  f"steps/s | evaluation {rate:,.0f} steps/s: {rate / limit:.0%} of the limit; "
                  f"{rate / own:.0%} of its own steps' stepping rate ({own:,.0f}) "
                  f"(forward {fwd:.0%}, tail {tail:.0%})", flush=True)  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default=None, help="a gymnasium task instead of Atari (e.g. Humanoid-v5)")
    p.add_argument("--game", default="frostbite")
    p.add_argument("--nets", nargs="+", default=["large", "small"])
    p.add_argument(
        "--populations", nargs="+", type=int, default=None, help="default: 64 256 (CPU), +1000 (GPU)"
    )
    p.add_argument("--frame-cap", type=int, default=5000, help="episode cap in game frames (paper: 20000)")
    p.add_argument(
        "--slots", type=int, default=0, help="emulators in all (default: 16 per core, 32 with a GPU)"
    )
    p.add_argument(
        "--emulators-per-group", type=int, default=0, help="emulators per group of the overlap mode"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="the pipeline's emulator processes; the vector env's threads per group (default: cores)",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--no-plain", action="store_true", help="skip the plain-loop comparison")
    p.add_argument("--limit-seconds", type=float, default=10.0)
    p.add_argument("--ram", action="store_true", help="also measure the cost of Atari RAM behaviours")
    p.add_argument("--processes", action="store_true",
                   help="--env: also the stepping limit with the envs in one process per core")  # fmt: skip
    p.add_argument("--pool-sweep", action="store_true",
                   help="Atari: only the emulator roof and the pool's limit at several sizes")  # fmt: skip
    a = p.parse_args(argv)
    if a.pool_sweep:
        return pool_sweep(a.game, a.frame_cap, a.limit_seconds, a.threads)
    if a.env:
        a.nets = a.nets if a.nets != ["large", "small"] else ["mlp"]
        return bench_task(a)

    from nevo.nets.kernels import resolve_device

    device = resolve_device(a.device)
    cores = machine.cores()
    threads = a.threads or cores
    # The overlap mode's layout for an unbounded population (slots and groups from the machine).
    run_cfg = RunConfig(env_slots=a.slots, emulators_per_group=a.emulators_per_group, pipeline="overlap")
    slots, group, _, _ = layout(device, cores, 10**9, run_cfg)
    lock_group = layout(device, cores, 10**9, RunConfig(env_slots=slots, pipeline="lockstep"))[1]
    workers = layout(device, cores, 10**9, RunConfig(threads=a.threads, pipeline="workers"))[0]
    pops = a.populations or ([64, 256, 1000] if device == "cuda" else [64, 256])
    env_cfg = EnvConfig(game=a.game, frame_cap=a.frame_cap)
    n_actions = atari_actions(a.game)

    print(f"machine: {cores} cores; device {device}; game {a.game}; frame cap {a.frame_cap}")
    print(
        f"emulators: {slots} slots in {min(threads, slots)} processes; overlap: {slots // group} groups "
        f"of {group}; lockstep: groups of {lock_group}; the vector env: {threads} threads per group"
    )
    limit = emulator_limit(env_cfg, slots, group, threads, a.limit_seconds, n_actions)
    print(f"emulator limit, ale-py's vector env (random actions, no inference): {limit:,.0f} frames/s")
    roof = emulator_roof(a.game, env_cfg.frameskip, a.frame_cap, cores, a.limit_seconds)
    print(f"emulator roof, bare emulators in {cores} processes (random actions, no inference, no IPC): "
          f"{roof:,.0f} frames/s")  # fmt: skip
    pool = pool_limit(env_cfg, slots, threads, a.limit_seconds)
    print(f"emulator pool's limit, {slots} slots in {min(threads, slots)} processes (lockstep, random "
          f"actions, no inference): {pool:,.0f} frames/s = {pool / roof:.0%} of the roof")  # fmt: skip
    print()
    head = f"{'net':>6} {'pop':>5} {'mode':>12} {'frames':>10} {'frames/s':>10} {'of limit':>9}"
    print(f"{head} {'of roof':>8} {'tail':>6} {'fwd':>6}")
    for name in a.nets:
        spec = nets.net_spec(name, nets.OBS_SHAPE, n_actions)
        policy = make_policy(device, spec)
        for n in pops:
            need = n * spec.n_params * 4
            if need > 0.6 * (machine.available_memory() or 0):
                print(f"{name:>6} {n:>5}  skipped: {need / 2**30:.1f} GiB of weights does not fit")
                continue
            pop = population(spec, n, seed=n)
            # (mode, slots, group, pipeline, ram)
            modes = [
                ("overlap", slots, group, "overlap", False),
                ("lockstep", slots, lock_group, "lockstep", False),
            ]
            modes += [] if a.no_plain else [("plain", slots, slots, "lockstep", False)]
            if device != "cuda":  # each emulator process playing whole episodes, its own forward
                modes.append(("workers", workers, 1, "workers", False))
            if a.ram:  # the default mode of this device, with RAM behaviours
                if device == "cuda":
                    modes.append(("overlap+ram", slots, group, "overlap", True))
                else:
                    modes.append(("workers+ram", workers, 1, "workers", True))
            rates = {}
            for mode, s, g, pipe, ram in modes:
                rate, tail, fwd, frames = pipeline_rate(
                    env_cfg, policy, device, pop, s, g, threads, pipe, ram
                )
                rates[mode] = rate
                row = f"{name:>6} {n:>5} {mode:>12} {frames:>10,} {rate:>10,.0f} {rate / limit:>8.0%}"
                base = mode.removesuffix("+ram")
                extra = f"  {rate / rates[base]:.0%} of {base} without RAM" if ram else ""
                print(f"{row} {rate / roof:>8.0%} {tail:>6.0%} {fwd:>6.0%}{extra}", flush=True)
            del pop


if __name__ == "__main__":
    main()
