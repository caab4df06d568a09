"""A table of Atari games from one resumable command: the Deep GA's Table 1 at reduced scale.

    nevo suite results/atari              # the 13 games of Such et al. 2017, seed 0, 25M frames each
    nevo suite results/atari --games frostbite,pong --seeds 0,1 --frames 25M,frostbite=100M
    nevo suite results/atari --preset paper --population 200      # any flag of nevo train ga
    nevo plot table results/atari --figure results/atari/table.png  # the table, from the folders

One run folder per (game, seed), RESULTS/GAME__ALGO__SEED. Running the same command again resumes
every unfinished run exactly where its checkpoint left it (as nevo train --resume does) and skips
finished ones; a larger budget (--frames) continues a finished run. A stop signal (Ctrl-C,
SIGTERM) ends the run in progress at its last whole generation, resumable, and the suite with it.
Each finished run's best elite is then tested twice on held-out episode seeds (nevo replay): as
the paper scores it, 200 episodes with 1-30 random no-ops and a cap of 400,000 frames
(RUN/test.json), and the same under sticky actions 0.25 (Machado et al. 2018;
RUN/test_sticky0.25.json), unless a file already tested that elite so. The games, seeds and
budgets may change from one call to the next; every other setting must be the one the folder's
runs were made with.
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import sys
import warnings

from nevo import cli, config, runs
from nevo.algos import DEFAULT
from nevo.atari.pool import EmulatorError
from nevo.cluster.connection import ClusterError
from nevo.loops import loop
from nevo.loops.progress import Progress
from nevo.loops.skeleton import RunStopped, said
from nevo.runs import stop
from nevo.settings import RESUMABLE, ConfigError, DamagedFile, whole_number

# Table 1 of Such et al. 2017 (arXiv 1712.06567), in its order.
GAMES = ("amidar", "assault", "asterix", "asteroids", "atlantis", "enduro", "frostbite", "gravitar",
         "kangaroo", "seaquest", "skiing", "venture", "zaxxon")  # fmt: skip
# The suite's own options name these settings; as run flags they would contradict them.
OWN = {"--game": "--games", "--seed": "--seeds", "--frame-budget": "--frames", "--out-dir": "RESULTS",
       "--resume": "RESULTS (the same command resumes)", "--env": "--games"}  # fmt: skip


def parse(argv) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="nevo suite", description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("results", metavar="RESULTS", help="the results folder: one run folder per game and seed")
    p.add_argument(
        "--games", default=",".join(GAMES), help="Atari games, comma-separated (default: the 13 of Table 1)"
    )
    p.add_argument("--seeds", default="0", help="run seeds, comma-separated (default: 0)")
    p.add_argument(
        "--frames",
        default="25M",
        help="frame budget of each run: N for every game, GAME=N for one (K, M, B allowed), comma-"
        "separated; e.g. 25M,frostbite=100M (default: 25M)",
    )
    algos = cli.algorithms_of(DEFAULT)  # the deep GA's command's: the GA, random search
    p.add_argument(
        "--algo", default=algos[0], choices=algos, help=f"the deep GA or random search (default: {algos[0]})"
    )
    p.add_argument("--preset", default="quick", help="the preset of nevo train ga (default: quick)")
    p.add_argument(
        "--test-episodes",
        type=int,
        default=200,
        help="test episodes of each finished run (default: 200; 0: none)",
    )
    p.add_argument(
        "--test-sticky",
        type=float,
        default=0.25,
        help="sticky actions' probability in each finished run's second test (default: 0.25; 0: none)",
    )
    p.add_argument(
        "--test-frame-cap",
        type=int,
        default=400_000,
        help="the test episodes' cap in frames (default: 400000)",
    )
    args, flags = p.parse_known_args(argv)
    if not 0.0 <= args.test_sticky < 1.0:
        raise ConfigError(f"--test-sticky: got {args.test_sticky}, allowed: a probability in [0, 1)")
    for f in flags:
        name = f.split("=")[0]
        if name in OWN:
            raise ConfigError(f"nevo suite: {name} is the suite's to set; use {OWN[name]}")
    return args, flags


def number(text: str, what: str) -> int:
    """25M -> 25,000,000 (K, M, B; a plain integer too: nevo.settings.whole_number); ConfigError
    naming `what` otherwise."""
    try:
        value = whole_number(text)
    except ValueError:
        raise ConfigError(
            f"{what}: got {text!r}, allowed: a number of frames such as 25M or 3000000"
        ) from None
    if value <= 0:
        raise ConfigError(f"{what}: got {text!r}, allowed: a whole number of frames > 0")
    return value


def budgets(text: str, games: list[str]) -> dict[str, int]:
    """Each game's frame budget from --frames ("25M,frostbite=100M")."""
    default, own = None, {}
    for entry in [e.strip() for e in text.split(",") if e.strip()]:
        if "=" in entry:
            game, value = entry.split("=", 1)
            if game not in games:
                raise ConfigError(f"--frames: {game!r} is not one of --games ({', '.join(games)})")
            own[game] = number(value, f"--frames {game}")
        else:
            default = number(entry, "--frames")
    missing = [g for g in games if g not in own]
    if default is None and missing:
        raise ConfigError(f"--frames: no budget for {', '.join(missing)}; give N for every game (e.g. 25M)")
    return {g: own.get(g, default) for g in games}


def check_game(game: str) -> None:
    """ConfigError of one line for a game ale-py does not have, with the closest names."""
    from ale_py import roms

    with warnings.catch_warnings():  # (an unknown game warns, then gives None)
        warnings.simplefilter("ignore")
        if roms.get_rom_path(game) is not None:
            return
    close = difflib.get_close_matches(game, roms.get_all_rom_ids(), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(f"--games: unknown Atari game {game!r}{hint}")


def integers(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{what}: got {text!r}, allowed: integers >= 0, comma-separated") from None
    if not values or min(values) < 0:
        raise ConfigError(f"{what}: got {text!r}, allowed: integers >= 0, comma-separated")
    return values


def settings_of(cfg) -> dict:
    """What makes a run's results, as config.json writes it: every setting but those a resumed
    run may set anew (the budget, the machine's layout)."""
    d = config.to_dict(config.weights_resolved(cfg))
    d["run"] = {k: v for k, v in d["run"].items() if k not in RESUMABLE}
    d.pop("preset")  # a name for settings compared here one by one
    return d


def differences(a: dict, b: dict) -> list[str]:
    """The settings where two settings_of dicts differ, as flags with both values."""
    out = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            out += differences(x, y)
        elif x != y:
            out.append(f"{config.flag(k)} {x!r} (folder) against {y!r}")
    return out


class Entry:
    """One (game, seed) of the suite: its settings, folder and state."""

    def __init__(self, results: str, cfg, cluster, task):
        self.cfg, self.cluster, self.task = cfg, cluster, task  # (the task its settings' check built)
        self.game, self.seed, self.budget = cfg.env.game, cfg.run.seed, cfg.run.frame_budget
        self.dir = os.path.join(results, f"{self.game}__{cfg.algo}__{self.seed}")
        self.saved = None
        if os.path.exists(os.path.join(self.dir, runs.CONFIG)):
            self.saved = config.load(os.path.join(self.dir, runs.CONFIG))

    def check_settings(self) -> None:
        """ConfigError of one line where the folder's run was made with other settings."""
        if self.saved is None:
            return
        diff = differences(settings_of(self.saved), settings_of(self.cfg))
        if diff:
            raise ConfigError(
                f"{self.dir} was made with other settings: {'; '.join(diff)} (run the suite with its "
                "settings, or name another results folder)"
            )

    def frames(self) -> int:
        """Frames the run's checkpoint holds (0 for none)."""
        checkpoint = runs.resume_checkpoint(self.dir) if os.path.isdir(self.dir) else None
        return 0 if checkpoint is None else int(checkpoint["frames"])

    def tested(self, sticky: float = 0.0) -> bool:
        """Whether the test under sticky actions `sticky` (test.json for 0) tested the run's best
        elite as it is now, on held-out seeds."""
        from nevo.tools import replay

        test = _json_or_none(os.path.join(self.dir, replay.test_file(sticky)))
        if test is None or test.get("seeds") != replay.HELD_OUT:
            return False
        elite = _json_or_none(os.path.join(self.dir, test.get("elite_file", "best.json")))
        return elite is not None and elite.get("generation") == test.get("elite_generation")


def _json_or_none(path: str) -> dict | None:
    return config.read_json(path) if os.path.exists(path) else None


def entries(args, flags) -> list[Entry]:
    """Every (game, seed) of the suite, its settings checked (ConfigError of one line)."""
    games = [g.strip() for g in args.games.split(",") if g.strip()]
    if not games:
        raise ConfigError("--games: name at least one Atari game")
    for g in games:
        check_game(g)
    seeds = integers(args.seeds, "--seeds")
    frames = budgets(args.frames, games)
    out = []
    for game in games:
        for seed in seeds:
            argv = ["--algo", args.algo, "--preset", args.preset, "--game", game, "--seed", str(seed),
                    "--frame-budget", str(frames[game]), "--out-dir", args.results, *flags]  # fmt: skip
            cfg, _, cluster, task = cli.parse_args(argv, "", DEFAULT)  # the GA's command's (ga, rs)
            one = cfg.settings.population * cfg.env.frame_cap  # the GA's command's: ga or rs
            if cfg.run.frame_budget < one:
                raise ConfigError(
                    f"--frames {game}: {cfg.run.frame_budget:,} is below one generation ({one:,} frames: "
                    f"{cfg.settings.population} episodes of up to {cfg.env.frame_cap:,} frames)"
                )
            entry = Entry(args.results, cfg, cluster, task)
            entry.check_settings()
            out.append(entry)
    return out


def train(entry: Entry, label: str) -> int:
    """Train (or go on with) one entry's run; 0, or the stopped run's exit code."""
    os.makedirs(entry.dir, exist_ok=True)
    p = loop.plan(entry.cfg, entry.task, entry.dir, entry.cluster)
    try:
        loop.run(entry.cfg, entry.task, p, entry.dir, entry.cluster, out=Progress(entry.budget, label=label))
    except RunStopped as e:
        said(str(e), sys.stderr if e.code in (3, 4, 5) else sys.stdout)
        return e.code
    return 0


def protocols(args) -> list[float]:
    """The sticky-action probabilities each finished run is tested under: 0 (the paper's), then
    --test-sticky (none where it is 0)."""
    return [0.0] + ([args.test_sticky] if args.test_sticky else [])


def test(entry: Entry, args, sticky: float) -> int:
    """Test the run's best elite (nevo replay) under sticky actions `sticky`: its test file."""
    from nevo.tools import replay

    return replay.main([entry.dir, "--episodes", str(args.test_episodes), "--frame-cap",
                        str(args.test_frame_cap), "--sticky", str(sticky)])  # fmt: skip


def main(argv=None) -> int:
    try:
        args, flags = parse(argv)
        todo = entries(args, flags)
    except (ConfigError, DamagedFile, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.results, exist_ok=True)
    with stop.on_signals():
        try:
            return _run_all(todo, args)
        except (ConfigError, DamagedFile, ValueError, MemoryError, ClusterError, EmulatorError) as e:
            if not stop.caused(e):
                print(f"error: {e}", file=sys.stderr)
                return 2
            signum = stop.signum_of(e)
        except KeyboardInterrupt as e:  # a stop between two runs' generations
            signum = stop.signum_of(e)
    said(
        f"suite stopped by {signal.Signals(signum).name}; every run is resumable: run the same command again"
    )
    return 128 + signum


def _run_all(todo: list[Entry], args) -> int:
    for i, entry in enumerate(todo):
        left = len(todo) - i - 1
        label = f"{entry.game} seed {entry.seed} ({i + 1}/{len(todo)}, {left} left)"
        done = entry.frames()
        if done >= entry.budget:
            print(f"suite | {label}: finished ({done:,} frames of {entry.budget:,})", flush=True)
        else:
            start = f"from {done:,}" if done else "new"
            print(f"suite | {label}: {start}, to {entry.budget:,} frames | {entry.dir}", flush=True)
            code = train(entry, label)
            if code:
                said(f"suite stopped at {entry.game} seed {entry.seed}; every run is resumable: run the same "
                     "command again")  # fmt: skip
                return code
        for sticky in protocols(args) if args.test_episodes else []:
            if entry.tested(sticky):
                continue
            code = test(entry, args, sticky)
            if code > 128:  # a stop signal
                said(f"suite stopped while testing {entry.game} seed {entry.seed}; its test goes on from its "
                     "finished parts: run the same command again")  # fmt: skip
            if code:
                return code
    said(f"suite: {len(todo)} runs finished and tested in {args.results}; the table: nevo plot table "
         f"{args.results}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
