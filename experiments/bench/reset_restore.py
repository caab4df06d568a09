"""Can an episode start from a saved state instead of a seeded reset? What each costs, per game.

    python -m experiments.bench.reset_restore          # the Deep GA's 13 games, pong, space_invaders
    python -m experiments.bench.reset_restore --games frostbite --steps 500
    python -m experiments.bench.reset_restore --games frostbite pong --step-rates 3

A seeded reset reloads the ROM (ale-py's vector env does it for every episode nevo starts, so that
an episode depends only on its seed; docs/lab/2026-11-21.md). Per game, on plain `ALEInterface`s set
as the vector env sets them (random_seed 0, no sticky actions): the time of a seeded `loadROM`,
the time of `restoreState` of the state cloned right after it, and whether an emulator that played
--warm-up random steps and was then restored goes through the same episode as a fresh seeded one
under the same random actions (--steps at most, or to game over): RAM and screen compared after
every step. nevo's own emulators (nevo.atari.emulator) start every episode this way, by
restoring the state cloned after one seeded reset; this script is the measurement behind it.

With --step-rates S, also what driving the emulators another way could gain in emulation, per
game, S seconds each on one thread, random actions: frames/s of a bare `ALEInterface` (4 frames a
step, the last two screens fetched in grayscale and their maximum taken, as the vector env does;
no resize), of nevo's AtariVectorEnv with one emulator (its layout on the CPU: each emulator its
own vector env and thread) and of one AtariVectorEnv of 32 emulators on one thread.
"""

import argparse
import time

import ale_py
import numpy as np
from ale_py import roms

from nevo.atari.game import atari_actions
from nevo.config import EnvConfig
from nevo.roofline.emulators import emulator_limit

# Table 1 of Such et al. 2017 (the Deep GA), then two games nevo's tests use.
GAMES = ("amidar", "assault", "asterix", "asteroids", "atlantis", "enduro", "frostbite", "gravitar",
         "kangaroo", "seaquest", "skiing", "venture", "zaxxon", "pong", "space_invaders")  # fmt: skip


def seeded(game: str):
    """(a fresh ALEInterface after a seeded reset as the vector env makes it, seconds the load took)."""
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setInt("random_seed", 0)
    ale.setFloat("repeat_action_probability", 0.0)
    t0 = time.perf_counter()
    ale.loadROM(roms.get_rom_path(game))
    return ale, time.perf_counter() - t0


def compare(game: str, steps: int, warm_up: int, seed: int = 1) -> dict:
    """One game's costs and where a restored emulator's episode differs from a fresh seeded one."""
    restored, load_s = seeded(game)
    start = restored.cloneState()
    actions = restored.getMinimalActionSet()
    plan = np.random.default_rng(seed).integers(0, len(actions), steps + warm_up)
    for a in plan[:warm_up]:  # play on: the state to restore from is not the current one
        restored.act(actions[a])
    t0 = time.perf_counter()
    restored.restoreState(start)
    restore_s = time.perf_counter() - t0
    fresh, _ = seeded(game)
    screens, rams, played = [], [], 0
    for k, a in enumerate(plan[warm_up:]):
        r1, r2 = restored.act(actions[a]), fresh.act(actions[a])
        played = k + 1
        if not np.array_equal(restored.getScreen(), fresh.getScreen()):
            screens.append(k)
        if r1 != r2 or not np.array_equal(restored.getRAM(), fresh.getRAM()):
            rams.append(k)
        if fresh.game_over() or restored.game_over():
            break
    return {"game": game, "load_ms": 1e3 * load_s, "restore_us": 1e6 * restore_s, "steps": played,
            "screen_differs": screens, "ram_or_reward_differs": rams}  # fmt: skip


def bare_rate(game: str, seconds: float, seed: int = 0) -> float:
    """Frames/s of one bare ALEInterface: random actions held 4 frames, the last two screens
    fetched in grayscale and their maximum taken (the vector env's work, less its resize)."""
    ale, _ = seeded(game)
    actions = ale.getMinimalActionSet()
    rng = np.random.default_rng(seed)
    screens = np.empty((2, *ale.getScreen().shape), np.uint8)
    f0, t0 = ale.getFrameNumber(), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a = actions[rng.integers(0, len(actions))]
        for k in range(4):
            ale.act(a)
            if k >= 2:
                ale.getScreenGrayscale(screens[k - 2])
        np.maximum(screens[0], screens[1])
        if ale.game_over():
            ale.reset_game()
    return (ale.getFrameNumber() - f0) / (time.perf_counter() - t0)


def step_rates(game: str, seconds: float) -> dict:
    """One game's emulation rates on one thread (main's --step-rates): the vector env's as the
    emulator limit (nevo.roofline.emulators.emulator_limit) measures them, one group of 1 or of 32
    emulators."""
    cfg, n = EnvConfig(game=game), atari_actions(game)
    return {"game": game, "bare": bare_rate(game, seconds),
            "vector_1": emulator_limit(cfg, 1, 1, 1, seconds, n),
            "vector_32": emulator_limit(cfg, 32, 32, 1, seconds, n)}  # fmt: skip


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", nargs="+", default=list(GAMES))
    p.add_argument("--steps", type=int, default=4000, help="ALE steps (frames) per episode at most")
    p.add_argument("--warm-up", type=int, default=300, help="random steps played before the restore")
    p.add_argument(
        "--step-rates", type=float, default=0.0, metavar="S",
        help="also each game's emulation rates on one thread, S seconds each (0: not)",
    )  # fmt: skip
    a = p.parse_args(argv)
    if a.step_rates < 0:
        p.error("--step-rates must be 0 or more seconds")
    head = f"{'game':>15} {'loadROM ms':>10} {'restore us':>10} {'steps':>6}"
    print(f"{head}  same RAM/rewards  screens differ at")
    out = []
    for game in a.games:
        r = compare(game, a.steps, a.warm_up)
        same = "yes" if not r["ram_or_reward_differs"] else f"no, from step {r['ram_or_reward_differs'][0]}"
        diff = ", ".join(map(str, r["screen_differs"][:5])) or "-"
        print(
            f"{game:>15} {r['load_ms']:>10.0f} {r['restore_us']:>10.0f} {r['steps']:>6}  {same:<16}  {diff}",
            flush=True,
        )
        out.append(r)
    if a.step_rates:
        print(f"\nemulation on one thread, random actions, frames/s ({a.step_rates:g} s each):")
        print(f"{'game':>15} {'bare ALE':>9} {'vector 1':>9} {'vector 32':>9} {'1/bare':>7} {'32/bare':>7}")
        for game, r in zip(a.games, out):
            q = step_rates(game, a.step_rates)
            r["step_rates"] = q
            rates = f"{q['bare']:>9,.0f} {q['vector_1']:>9,.0f} {q['vector_32']:>9,.0f}"
            shares = f"{q['vector_1'] / q['bare']:>7.2f} {q['vector_32'] / q['bare']:>7.2f}"
            print(f"{game:>15} {rates} {shares}", flush=True)
    return out


if __name__ == "__main__":
    main()
