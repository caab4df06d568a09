"""Can an episode start from a saved state instead of a seeded reset? What each costs, per game.

    python -m experiments.reset_restore                      # the Deep GA's 13 games, pong, space_invaders
    python -m experiments.reset_restore --games frostbite --steps 500

A seeded reset reloads the ROM (ale-py's vector env does it for every episode nevo starts, so that
an episode depends only on its seed; docs/performance.md). Per game, on plain `ALEInterface`s set
as the vector env sets them (random_seed 0, no sticky actions): the time of a seeded `loadROM`,
the time of `restoreState` of the state cloned right after it, and whether an emulator that played
--warm-up random steps and was then restored goes through the same episode as a fresh seeded one
under the same random actions (--steps at most, or to game over): RAM and screen compared after
every step. Nothing in nevo uses this yet: ale-py 0.12's AtariVectorEnv has no state calls.
"""

import argparse
import time

import ale_py
import numpy as np
from ale_py import roms

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


def main(argv=None) -> list:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", nargs="+", default=list(GAMES))
    p.add_argument("--steps", type=int, default=4000, help="ALE steps (frames) per episode at most")
    p.add_argument("--warm-up", type=int, default=300, help="random steps played before the restore")
    a = p.parse_args(argv)
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
    return out


if __name__ == "__main__":
    main()
