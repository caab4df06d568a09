"""The emulators' limits: game frames/s with uniformly random actions and no inference, in three
layouts, each what an evaluator of that layout could reach at most on this machine.

- emulator_limit: ale-py's vector env in groups stepped round robin (the comparison: nevo's
  pipeline stepped it before it had an emulator pool of its own);
- emulator_roof: bare emulators doing the pipeline's observation work (nevo.atari.emulator)
  in one process per core, nothing sent between processes: what this machine's cores emulate;
- pool_limit: nevo's emulator pool (nevo.atari.pool), its commands and waits included:
  the roof less the pool's IPC.

Frames are counted as the pipeline counts an episode's (play, lockstep_frames). population gives
the fresh networks of a GA's first generation that a measured generation evaluates."""

from __future__ import annotations

import time

import numpy as np

from nevo import machine, nets
from nevo.atari.game import atari_actions, make_atari
from nevo.episodes import Population
from nevo.genomes import noise


def emulator_limit(env_cfg, slots: int, group: int, threads: int, seconds: float, n_actions: int) -> float:
    """Game frames/s of the groups stepped round robin with random actions, no inference."""
    envs = [make_atari(env_cfg, group, threads) for _ in range(slots // group)]
    rng = np.random.default_rng(0)
    start = 0
    for env in envs:
        _, info = env.reset(seed=np.zeros(group, np.int64))
        start += int(info["frame_number"].sum())
        env.send(rng.integers(0, n_actions, group))
    t0, end = time.perf_counter(), {}
    while time.perf_counter() - t0 < seconds:
        for i, env in enumerate(envs):
            _, _, _, _, info = env.recv()
            end[i] = int(info["frame_number"].sum())  # cumulative: every emulated frame counts
            env.send(rng.integers(0, n_actions, group))
    dt = time.perf_counter() - t0
    for env in envs:
        env.recv()
        env.close()
    return (sum(end.values()) - start) / dt


def play(emulators, obs: np.ndarray, actions: np.ndarray, rounds: int) -> int:
    """Step each of these AtariEmulators `rounds` times in turn, action indices taken in order from
    `actions` (a cycle), each restarting at its episode's end; obs (E, STACK, 84, 84) uint8 holds
    their observations. Returns the advance of their episode frame counters (an ended episode
    counts its whole counter, as the pipeline counts an episode's frames: frameskip per step that
    goes on, the frames up to the end of the one that ends it, and the FIRE of each restart)."""
    frames = -sum(em.episode_frames() for em in emulators)
    k = 0
    for _ in range(rounds):
        for e, em in enumerate(emulators):
            _, done = em.step(int(actions[k]), obs[e])
            k = (k + 1) % len(actions)
            if done:
                frames += em.episode_frames()
                em.restart(obs[e])
    return frames + sum(em.episode_frames() for em in emulators)


def _roof_worker(conn, game: str, frameskip: int, frame_cap: int, emulators: int, seed: int) -> None:
    """A process of emulator_roof: make and warm its emulators, send "ready", then play for the
    seconds it receives and send back (frames, seconds)."""
    from nevo.atari.emulator import FRAME, STACK, AtariEmulator

    try:
        ems = [AtariEmulator(game, frameskip, frame_cap) for _ in range(emulators)]
        obs = np.zeros((emulators, STACK, *FRAME), np.uint8)
        for e, em in enumerate(ems):
            em.restart(obs[e])
        actions = np.random.default_rng(seed).integers(0, len(ems[0].actions), 4096)
        play(ems, obs, actions, 2)  # warm: Numba's resize loaded (or compiled) before the timing
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send("ready")
    try:
        seconds = conn.recv()
    except EOFError:  # called off: another process failed
        return
    frames, t0 = 0, time.perf_counter()
    while (dt := time.perf_counter() - t0) < seconds:
        frames += play(ems, obs, actions, 4)
    conn.send((frames, dt))


def emulator_roof(game: str, frameskip: int = 4, frame_cap: int = 20_000, processes: int = 0,
                  seconds: float = 5.0, emulators: int = 8) -> float:  # fmt: skip
    """This machine's emulator roof: game frames/s of bare emulators doing the pipeline's
    observation work (nevo.atari.emulator) with uniformly random actions, no inference and
    nothing sent between processes while timed; `processes` processes (0: one per core), each
    stepping its own `emulators` in a tight loop. The processes start, make and warm their
    emulators, then all play for the same `seconds`; the roof is the sum of their rates (frames
    as `play` counts them). Every process is gone when it returns."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    processes = processes or machine.cores()
    pipes, procs = [], []
    try:
        for w in range(processes):
            mine, theirs = ctx.Pipe()
            args = (theirs, game, frameskip, frame_cap, emulators, w)
            proc = ctx.Process(target=_roof_worker, args=args, daemon=True)
            proc.start()
            theirs.close()
            pipes.append(mine)
            procs.append(proc)
        for w, pipe in enumerate(pipes):
            msg = pipe.recv() if pipe.poll(300) else ("error", "it did not start in 300 s")
            if msg != "ready":
                raise RuntimeError(f"emulator_roof: process {w}: {msg[1]}")
        for pipe in pipes:  # every process plays from now on, for the same seconds
            pipe.send(seconds)
        rates = []
        for pipe in pipes:
            frames, dt = pipe.recv()
            rates.append(frames / dt)
        return sum(rates)
    except EOFError:
        codes = ", ".join(str(p.exitcode) for p in procs)
        raise RuntimeError(f"emulator_roof: a process died (exit statuses: {codes})") from None
    finally:
        for pipe in pipes:
            pipe.close()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()


def lockstep_frames(
    pool, frameskip: int, actions: np.ndarray, steps: np.ndarray, slots=None, ticket=None
) -> int:
    """Step these slots of an EmulatorPool (default: every slot) in lockstep, once per row of the
    (rounds, len(slots)) action indices; steps (pool.slots,) int64: each slot's steps into its
    episode, kept up to date. Returns the frames of those steps, counted as `play` counts them:
    frameskip per step that goes on (each plays exactly that many), and at an episode's end its
    frames from the pool less the frameskip x steps of it counted before. ticket: the slots' step
    already in flight (its actions given): waited for first, then counted as the first round."""
    slots = np.arange(pool.slots) if slots is None else slots
    frames = -frameskip * int(steps[slots].sum())
    for r in range(len(actions)):
        if ticket is None or r > 0:
            pool.actions[slots] = actions[r]
            ticket = pool.step(slots)
        pool.wait(ticket)
        ended = slots[pool.done[slots] != 0]
        frames += int(pool.frames[ended].sum())
        steps[slots] += 1
        steps[ended] = 0
    return frames + frameskip * int(steps[slots].sum())


def pool_limit(env_cfg, slots: int, workers: int = 0, seconds: float = 5.0, groups: int = 1) -> float:
    """Game frames/s of an EmulatorPool (nevo.atari.pool) of `slots` emulators in
    `workers` processes (0: one per core), at the evaluator's priority, every slot stepping
    uniformly random actions, no inference: the pool's own limit, its commands and waits
    included (against emulator_roof: what its IPC costs). groups 1: every slot in lockstep (the
    CPU's layout); more: the overlap pipeline's units for groups of slots / groups
    (stepped.overlap_units), each unit's next step sent as soon as its last one is read,
    whichever is in first (the GPU's layout without its forward)."""
    from nevo.atari.evaluator import EMULATOR_NICE
    from nevo.atari.pool import EmulatorPool
    from nevo.atari.stepped import overlap_units

    workers = workers or machine.cores()
    pool = EmulatorPool(
        env_cfg.game, env_cfg.frameskip, env_cfg.frame_cap, slots, workers, nice=EMULATOR_NICE
    )
    try:
        rng, n_actions, skip = np.random.default_rng(0), atari_actions(env_cfg.game), env_cfg.frameskip
        steps = np.zeros(slots, np.int64)
        lockstep_frames(pool, skip, rng.integers(0, n_actions, (2, slots)), steps)  # warm
        frames, t0 = 0, time.perf_counter()
        if groups == 1:
            while time.perf_counter() - t0 < seconds:
                frames += lockstep_frames(pool, skip, rng.integers(0, n_actions, (1, slots)), steps)
            return frames / (time.perf_counter() - t0)
        units = overlap_units(pool, -(-slots // groups))
        in_flight = {}
        for unit in units:  # every unit in flight
            pool.actions[unit] = rng.integers(0, n_actions, len(unit))
            in_flight[pool.step(unit)] = unit
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for ticket in pool.first_done(in_flight):  # count each unit in, send its next step
                unit = in_flight.pop(ticket)
                frames += lockstep_frames(pool, skip, rng.integers(0, n_actions, (1, len(unit))), steps, unit,
                                          ticket)  # fmt: skip
                pool.actions[unit] = rng.integers(0, n_actions, len(unit))
                in_flight[pool.step(unit)] = unit
        pool.drain()
        return frames / (time.perf_counter() - t0)
    finally:
        pool.close()


def population(spec, n: int, seed: int, dtype=np.float32):
    """(Population of n fresh networks, as in a GA's first generation; its WeightBuilder, whose rows
    are of dtype: float32, or float16 for --weights fp16)."""
    table = noise.make_table(spec.n_params + 1_000_000, seed=seed)
    fresh = Population([], np.full(n, -1, np.int64), np.arange(n, dtype=np.int64), np.zeros(n, np.float32))
    return fresh, noise.WeightBuilder(table, nets.init_scale(spec), dtype=dtype)
