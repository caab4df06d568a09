"""End to end: one generation of nevo's own evaluator, its time split by timing the evaluator's calls
(nothing in nevo changes), beside the emulators' limits (nevo.roofline.emulators), the forward's
roofline and an H100 box's model. nevo.roofline.report's docstring says what each figure is."""

from __future__ import annotations

import time

import numpy as np

from nevo import machine, nets
from nevo.nets import half
from nevo.roofline.layers import H100, roofline_rate

H100_CORES = 16  # emulation cores of the modelled H100 box


def timed(fn, total: list):
    """fn, adding the seconds of each call to total[0]."""

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - t0

    return wrapper


def seeded_reset_s(game: str, reps: int = 3) -> float:
    """Seconds of one seeded reset of one emulator (it reloads the ROM), best of reps."""
    from nevo.atari.game import make_atari
    from nevo.config import EnvConfig

    env = make_atari(EnvConfig(game=game), 1, 1)
    best = float("inf")
    try:
        for k in range(reps):
            t0 = time.perf_counter()
            env.reset(seed=np.array([k], np.int64))
            best = min(best, time.perf_counter() - t0)
    finally:
        env.close()
    return best


def restart_s(game: str, reps: int = 200) -> float:
    """Seconds of one episode start in nevo's emulator pool (AtariEmulator.restart: restoreState of
    the seeded reset's state), the mean of reps, each after a few random steps."""
    from nevo.atari.emulator import FRAME, STACK, AtariEmulator

    em = AtariEmulator(game)
    obs = np.zeros((STACK, *FRAME), np.uint8)
    actions = np.random.default_rng(0).integers(0, len(em.actions), (reps, 4))
    em.restart(obs)
    total = 0.0
    for k in range(reps):
        for a in actions[k]:
            em.step(int(a), obs)
        t0 = time.perf_counter()
        em.restart(obs)
        total += time.perf_counter() - t0
    return total / reps


def in_turn(a: float, b: float) -> float:
    """The rate of two stages that run one after the other on the same cores, at rates a and b."""
    return 1 / (1 / a + 1 / b)


def timed_pool(pool, split: dict) -> None:
    """Time the pool's calls into split: "send" (step commands handed out), "emulation" (waiting
    for steps, the episode starts the pool makes as they end included), "resets" (the episode
    starts asked for: the run's first episodes)."""
    starts = set()  # tickets of restart commands
    step, restart, wait, first_done = pool.step, pool.restart, pool.wait, pool.first_done

    def restarting(slots):
        t = restart(slots)
        starts.add(t)
        return t

    def waiting(ticket):
        return timed(wait, split["resets"] if ticket in starts else split["emulation"])(ticket)

    pool.step = timed(step, split["send"])
    pool.restart = timed(restarting, split["resets"])
    pool.wait = waiting
    pool.first_done = timed(first_done, split["emulation"])


def end_to_end(a, forward_roof: dict) -> dict:
    """One Frostbite generation of a.e2e_net, its time split, beside the limits (nevo.roofline.report's
    docstring)."""
    from nevo.atari import evaluator, stepped
    from nevo.atari import pool as pool_module
    from nevo.atari.game import AtariGame, atari_actions
    from nevo.config import EnvConfig, RunConfig
    from nevo.episodes import Episodes
    from nevo.episodes.weights import for_device
    from nevo.nets.kernels import make_policy
    from nevo.roofline.emulators import emulator_limit, emulator_roof, pool_limit, population

    cores = machine.cores()
    env_cfg = EnvConfig(game=a.game, frame_cap=a.frame_cap)
    n_actions = atari_actions(a.game)
    spec = nets.net_spec(a.e2e_net, nets.OBS_SHAPE, n_actions)
    device = a.e2e_device
    # the rest as training sets them (one process a core)
    run_cfg = RunConfig(env_slots=a.slots, pipeline=a.pipeline)
    slots, group, _, pipe = evaluator.layout(device, cores, a.population, run_cfg)
    kind, groups = evaluator.PIPELINES[pipe], slots // group  # (layout rounds slots to whole groups)
    spin_s = pool_module.SPIN_S if a.spin_us is None else a.spin_us / 1e6
    units = a.units_per_process or stepped.UNITS_PER_PROCESS
    # every pool below, nevo's too (and the overlap pipeline's units, its first-ready limit's)
    saved = pool_module.SPIN_S, stepped.UNITS_PER_PROCESS
    pool_module.SPIN_S, stepped.UNITS_PER_PROCESS = spin_s, units
    try:
        # nevo's generation first, its line printed at once: a call cut short while the limits
        # are measured keeps it
        fresh, builder = population(spec, a.population, seed=a.population, dtype=half.dtype_of(a.weights))
        weights = for_device(builder, device)
        policy = make_policy(device, spec)  # (its rows: the pipeline counts them)
        ev, _ = evaluator.AtariEvaluator.for_task(
            AtariGame(env_cfg), run_cfg, policy, weights, device, a.population, False
        )
        timings = {"emulation": [0.0], "send": [0.0], "resets": [0.0], "weights": [0.0]}
        timed_pool(ev.pool, timings)
        weights.take = timed(weights.take, timings["weights"])
        weights.start = timed(weights.start, timings["weights"])
        try:
            n = a.population
            res = ev.run(fresh, Episodes(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1000))
        finally:
            ev.close()
        frames, rows = res.total_frames, ev.played.rows
        spin = f", the pool spinning {spin_s * 1e6:.0f} us before it sleeps" if spin_s else ""
        if kind.first_ready:
            spin += f", {units} units a process"
        print(f"\nend to end: {a.game}, net {a.e2e_net} ({a.weights}) on the {device.upper()}, "
              f"population {n} (one episode each, cap {a.frame_cap:,} frames), {slots} emulators in "
              f"groups of {group} ({pipe}) in {ev.processes} processes, {cores} cores{spin}")  # fmt: skip
        print(f"  nevo: {frames:,} frames in {res.wall_s:.1f} s = {frames / res.wall_s:,.0f} frames/s; "
              f"{rows:,} forward rows ({frames / max(rows, 1):.2f} frames each)", flush=True)  # fmt: skip
        # The limits of the emulators stepped from this process: in the lockstep layout's slots
        # where the emulator processes step their own (workers: one slot a process, which says
        # nothing of the emulators' limit).
        lim_slots, lim_group = (slots, group)
        if not kind.steps_here:
            lim_slots, lim_group, _, _ = evaluator.layout(
                device, cores, a.population, RunConfig(pipeline="lockstep")
            )
        limit = emulator_limit(
            env_cfg, lim_slots, lim_group, min(cores, lim_group), a.limit_seconds, n_actions
        )
        roof = emulator_roof(a.game, env_cfg.frameskip, a.frame_cap, cores, a.limit_seconds)
        pool_rate = pool_limit(env_cfg, lim_slots, cores, a.limit_seconds)
        # the overlap pipeline's own limit: its units stepped first-ready, random actions
        first_ready = (
            pool_limit(env_cfg, slots, ev.processes, a.limit_seconds, groups) if kind.first_ready else None
        )
        reset_s, start_s = seeded_reset_s(a.game), restart_s(a.game)
    finally:
        pool_module.SPIN_S, stepped.UNITS_PER_PROCESS = saved
    per_core = limit / cores
    reset_frames = reset_s * per_core  # a seeded reset, in frames of one core's emulation
    start_frames = start_s * roof / cores  # an episode start in the pool, in frames of one core's roof

    wall = res.wall_s
    fpf = frames / max(rows, 1)  # game frames per forward row (frameskip, no-ops)
    split = {"forward": res.forward_s, **{k: v[0] for k, v in timings.items()}}
    if ev.played.emulation_s is not None:  # the mean emulator process's seconds emulating
        split["emulation"] = ev.played.emulation_s
    split["python"] = max(wall - sum(split.values()), 0.0)
    rate = frames / wall
    fwd_bound = frames / res.forward_s
    net_roof = forward_roof[a.e2e_net]
    roof_bound = net_roof["roofline_per_s"] * fpf
    lockstep_bound = in_turn(limit, roof_bound)  # forward and emulation in turn on the same cores
    in_turn_roof = in_turn(roof, fwd_bound)  # the emulator roof, then nevo's forward, in turn
    mean_ep = frames / n
    h100_emu = H100_CORES * per_core * mean_ep / (mean_ep + reset_frames)
    cpu = device == "cpu"  # (the in-turn figures: on the CPU, where the two share the cores)
    out = {
        "net": a.e2e_net, "game": a.game, "population": n, "frame_cap": a.frame_cap, "slots": slots,
        "group": group, "cores": cores, "workers": ev.processes, "frames": frames, "wall_s": wall,
        "frames_per_s": rate, "forward_rows": rows, "pipeline": pipe, "frames_per_forward": fpf,
        "split_s": split,
        "tail_s": res.tail_s, "emulator_limit": limit, "emulator_roof": roof, "pool_limit": pool_rate,
        "pool_first_ready": first_ready, "spin_s": spin_s, "units_per_process": units,
        "seeded_reset_s": reset_s, "seeded_reset_frames": reset_frames, "restart_s": start_s,
        "restart_frames": start_frames, "forward_bound_nevo": fwd_bound, "device": device,
        "forward_bound_roofline": roof_bound if cpu else None,  # (the CPU's roofline: on the CPU)
        "lockstep_bound_roofline": lockstep_bound if cpu else None,
        "in_turn_roof": in_turn_roof if cpu else None, "h100": {},
    }  # fmt: skip
    print(f"  emulator limit, ale-py's vector env (random actions, no inference): {limit:,.0f} frames/s "
          f"-> nevo at {rate / limit:.0%}")  # fmt: skip
    print(f"  emulator roof, bare emulators in {cores} processes (random actions, no inference, no IPC): "
          f"{roof:,.0f} frames/s -> nevo at {rate / roof:.0%}")  # fmt: skip
    print(f"  emulator pool's limit, {lim_slots} slots in {min(cores, lim_slots)} processes (lockstep, "
          f"random actions, no inference): {pool_rate:,.0f} frames/s = {pool_rate / roof:.0%} of the roof "
          f"-> nevo at {rate / pool_rate:.0%}")  # fmt: skip
    if first_ready is not None:
        print(f"  its first-ready limit, {slots} slots in {ev.processes} processes ({groups} groups' "
              f"units stepped as they come in, random actions, no inference): "
              f"{first_ready:,.0f} frames/s = {first_ready / roof:.0%} of the roof -> nevo at "
              f"{rate / first_ready:.0%}")  # fmt: skip
    shares = f"{rate / limit:.0%} of the vector env's limit, {rate / roof:.0%} of the emulator roof"
    if not cpu:  # the CPU's roofline says nothing of the GPU's forward
        print(f"  forward-bound: nevo's GPU forward alone (its upload included) {fwd_bound:,.0f} frames/s "
              f"-> nevo at {rate / fwd_bound:.0%}")  # fmt: skip
    else:
        print(f"  forward-bound: nevo's forward alone {fwd_bound:,.0f} frames/s -> nevo at "
              f"{rate / fwd_bound:.0%}; the roofline's {roof_bound:,.0f} frames/s -> nevo at "
              f"{rate / roof_bound:.0%}")  # fmt: skip
        print(f"  forward and emulation in turn at their limits (roofline forward): {lockstep_bound:,.0f} "
              f"frames/s -> nevo at {rate / lockstep_bound:.0%}")  # fmt: skip
        print(f"  in-turn roof (the emulator roof, then nevo's forward alone): {in_turn_roof:,.0f} frames/s "
              f"-> nevo at {rate / in_turn_roof:.0%}")  # fmt: skip
        shares = (f"{rate / limit:.0%} of the vector env's limit, {rate / lockstep_bound:.0%} of its in-turn "
                  f"bound, {rate / roof:.0%} of the emulator roof, {rate / in_turn_roof:.0%} of the in-turn "
                  "roof")  # fmt: skip
    print(f"  nevo's share: {shares}")
    parts = ", ".join(f"{k} {v / wall:.0%}" for k, v in split.items())
    print(f"  generation's time: {parts}; tail (overlapping them) {res.tail_s / wall:.0%}")
    print(f"  a seeded reset: {reset_s * 1e3:.0f} ms = {reset_frames:,.0f} frames of one core's emulation; "
          f"an episode start in the pool: {start_s * 1e3:.2f} ms = {start_frames:,.1f} frames of one core's "
          f"roof; mean episode {mean_ep:,.0f} frames")  # fmt: skip
    for box, (bw, pk) in H100.items():
        fwd = roofline_rate(net_roof["flops"], net_roof["bytes"], bw, pk)[0] * fpf
        model = min(h100_emu, fwd)
        out["h100"][box] = {"emulator_limit": h100_emu, "forward_bound": fwd, "frames_per_s": model}
        print(f"  H100 {box} model: emulation {H100_CORES} cores x {per_core:,.0f} frames/s with resets "
              f"= {h100_emu:,.0f}; forward-bound {fwd:,.0f}; overlapped: {model:,.0f} frames/s "
              f"({'emulation' if h100_emu <= fwd else 'forward'} bound)")  # fmt: skip
    return out
