"""How often the Deep GA reference's episode start differs from nevo's restored start, and whether it matters.

    python -m experiments.reference_start
    python -m experiments.reference_start --games frostbite --episodes 40 --out /tmp/frostbite.json

Such et al. 2017 (the Deep GA, arXiv 1712.06567) play Atari with Uber's reference implementation
(`gpu_implementation/gym_tensorflow/atari/tf_atari.cpp`): each emulator is one long-lived
ALEInterface (random_seed 0, loadROM once) and `AtariEnvironment::reset` calls `reset_game()` on it
before every episode, so an episode's start can carry state from the episode played before it
(ALE's reset does not wipe everything a game keeps). nevo instead starts every episode from one
saved state: `restoreState` of the state cloned right after a fresh seed-0 `loadROM` +
`reset_game()` (AtariEmulator.begin), the same start every time.

For each game of the paper's Table 1 this plays, on one long-lived ALEInterface as the reference
keeps it (repeat_action_probability 0, random_seed 0, frameskip 1 with the repeats done here),
--episodes episodes of seeded random play: the reference's start (1-30 no-ops of one frame, then
FIRE and action 2 for 4 frames each where the minimal action set's action 1 is FIRE), then
uniformly random actions of the minimal action set held 4 frames each, to game over or
--frame-cap frames after the start. After each episode it calls `reset_game()`, as the reference's
next reset does, and compares the RAM (`getRAM`) and the screen (`getScreenGrayscale`) with nevo's
restored start (a second emulator). Then, for every reset (those whose RAM equals nevo's start
too, as a check), it plays one fixed episode: the reference's start with seeded no-ops and seeded
4-frame actions, the same draws every time, from a copy of the reference's state after that reset
and from nevo's restored start, and compares the returns and the episodes' frames (ALE's episode
frame counter at the end, the start's frames included, as AtariEmulator.episode_frames counts).

Prints one line per game and writes a JSON of the numbers (--out). ale-py and numpy only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
import zlib

import numpy as np

# Table 1 of Such et al. 2017, in its order
GAMES = ("amidar", "assault", "asterix", "asteroids", "atlantis", "enduro", "frostbite", "gravitar",
         "kangaroo", "seaquest", "skiing", "venture", "zaxxon")  # fmt: skip
FRAMESKIP = 4  # the reference's m_repeat


def parse(argv):
    p = argparse.ArgumentParser(
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        prog="python -m experiments.reference_start",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--games", nargs="+", default=list(GAMES), help="the games (Table 1 of the paper)")
    p.add_argument(
        "--episodes", type=int, default=20, help="random episodes per game, each followed by a reset measured"
    )
    p.add_argument("--frame-cap", type=int, default=20_000, help="frames of an episode after its start")
    p.add_argument("--seed", type=int, default=0, help="seed of the random and the fixed actions")
    p.add_argument("--out", default="docs/reference_start.json", help="the JSON written")
    return p.parse_args(argv)


def new_ale(rom: str):
    """An ALEInterface as the reference (and nevo) make it: sticky actions off, seed 0, the ROM loaded."""
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.setFloat("repeat_action_probability", 0.0)
    ale.setInt("random_seed", 0)
    ale.loadROM(rom)
    return ale


def rom_path(game: str) -> str:
    from ale_py import roms

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rom = roms.get_rom_path(game)
    if rom is None:
        raise SystemExit(f"ale-py has no Atari game {game!r}")
    return rom


def play(ale, rng: np.random.Generator, cap: int, restart) -> tuple[int, int, bool]:
    """One episode the reference's way from the emulator's reset state: 1-30 no-op frames (drawn
    from rng), FIRE and action 2 for FRAMESKIP frames each where action 1 is FIRE (a game over
    during the start calls restart(), as the reference calls reset_game), then actions drawn
    from rng, each held FRAMESKIP frames, to game over or `cap` frames after the start. Returns
    (the return after the start, ALE's episode frame counter at the end, whether the game ended)."""
    import ale_py

    actions = list(ale.getMinimalActionSet())
    n = len(actions)
    for _ in range(int(rng.integers(1, 31))):
        ale.act(actions[0])
        if ale.game_over():
            restart()
    if n > 2 and actions[1] == ale_py.Action.FIRE:
        for a in (actions[1], actions[2]):
            for _ in range(FRAMESKIP):
                ale.act(a)
                if ale.game_over():
                    break
            if ale.game_over():
                restart()
    act, over = ale.act, ale.game_over
    end = ale.getEpisodeFrameNumber() + cap
    ret = 0
    while True:
        a = actions[int(rng.integers(n))]
        for _ in range(FRAMESKIP):
            ret += act(a)
            if over():
                return ret, ale.getEpisodeFrameNumber(), True
            if ale.getEpisodeFrameNumber() >= end:
                return ret, ale.getEpisodeFrameNumber(), False


def measure(game: str, episodes: int, cap: int, seed: int) -> dict:
    """The numbers of one game (the module's docstring). Its draws are seeded by seed and the
    game's name, so a game's numbers do not depend on the other games measured with it."""
    index = zlib.crc32(game.encode())
    rom = rom_path(game)
    ref = new_ale(rom)  # the reference's long-lived emulator
    nevo = new_ale(rom)  # nevo's start, and the fixed episodes of both
    nevo.reset_game()
    start = nevo.cloneState()
    start_ram, start_screen = nevo.getRAM(), nevo.getScreenGrayscale()

    def fixed(state) -> tuple[int, int]:
        nevo.restoreState(state)
        rng = np.random.default_rng([seed, index, 1])  # (the same draws every time)
        ret, frames, _ = play(nevo, rng, cap, lambda: nevo.restoreState(state))
        return int(ret), int(frames)

    nevo_outcome = fixed(start)
    rng = np.random.default_rng([seed, index, 0])
    ref.reset_game()  # the reference's first reset: right after loadROM, nevo's start itself
    first_equal = bool(np.array_equal(ref.getRAM(), start_ram))
    resets, lengths, ended, starts = [], [], 0, {start_ram.tobytes()}
    for k in range(1, episodes + 1):
        ret, frames, over = play(ref, rng, cap, ref.reset_game)
        lengths.append(int(frames))
        ended += over
        ref.reset_game()
        ram = ref.getRAM()
        starts.add(ram.tobytes())
        ram_diff = np.flatnonzero(ram != start_ram)
        screen_diff = int(np.count_nonzero(ref.getScreenGrayscale() != start_screen))
        outcome = fixed(ref.cloneState())
        resets.append(
            {
                "after_episode": k,
                "episode_frames": int(frames),
                "ram_bytes_different": int(ram_diff.size),
                "ram_addresses": [int(i) for i in ram_diff],
                "screen_pixels_different": screen_diff,
                "return": outcome[0],
                "frames": outcome[1],
            }
        )
    differ = [r for r in resets if r["ram_bytes_different"]]
    same = [r for r in resets if not r["ram_bytes_different"]]

    def changed(r):
        return (r["return"], r["frames"]) != nevo_outcome

    return {
        "first_reset_equal": first_equal,
        "resets": len(resets),
        "ram_different": len(differ),
        "max_bytes_different": max((r["ram_bytes_different"] for r in resets), default=0),
        "addresses_different": sorted({a for r in differ for a in r["ram_addresses"]}),
        "distinct_starts": len(starts),
        "screen_different": sum(r["screen_pixels_different"] > 0 for r in resets),
        "outcome_different": sum(map(changed, differ)),
        "outcome_different_ram_equal": sum(map(changed, same)),
        "score_differences": [r["return"] - nevo_outcome[0] for r in differ if changed(r)],
        "frame_differences": [r["frames"] - nevo_outcome[1] for r in differ if changed(r)],
        "fixed_episode_nevo": {"return": nevo_outcome[0], "frames": nevo_outcome[1]},
        "random_episode_frames_mean": float(np.mean(lengths)) if lengths else 0.0,
        "random_episodes_ended": int(ended),
        "per_reset": resets,
    }


def line(game: str, m: dict) -> str:
    diffs = ", ".join(f"{d:+d}" for d in m["score_differences"]) or "-"
    return (
        f"{game:<10} resets {m['resets']:>3}  RAM different {m['ram_different']:>3}"
        f"  max bytes {m['max_bytes_different']:>3}  distinct starts {m['distinct_starts']:>3}"
        f"  screen different {m['screen_different']:>3}"
        f"  outcome different {m['outcome_different']:>3}  (RAM equal: {m['outcome_different_ram_equal']})"
        f"  score differences {diffs}"
    )


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    import ale_py

    wall, cpu = time.perf_counter(), time.process_time()
    games = {}
    for game in args.games:
        t = time.process_time()
        games[game] = m = measure(game, args.episodes, args.frame_cap, args.seed)
        m["cpu_s"] = round(time.process_time() - t, 1)
        print(line(game, m), f" ({m['cpu_s']:.0f} s)", flush=True)
    out = {
        "command": " ".join(["python -m experiments.reference_start", *argv]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "ale_py": ale_py.__version__,
        "episodes": args.episodes,
        "frame_cap": args.frame_cap,
        "frameskip": FRAMESKIP,
        "seed": args.seed,
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
        "games": games,
    }
    if os.path.dirname(args.out):
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{out['wall_s']:.0f} s wall, {out['cpu_s']:.0f} s CPU; wrote {args.out}")


if __name__ == "__main__":
    main()
