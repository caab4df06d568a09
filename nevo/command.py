"""nevo: deep neuroevolution (the deep GA, ES, novelty search, safe mutations) in one command.

    nevo train ga                                # the deep GA's quick preset on Frostbite
    nevo train ga --preset paper --game frostbite
    nevo train es --env CartPole-v1              # any algorithm: nevo train --help lists them
    nevo train --resume runs/<folder>            # continue a stopped run, whatever its algorithm
    nevo train NAME --algo-module mine.py        # an algorithm of one's own (NAME: it declares)
    nevo replay runs/<folder>                    # test the elite as the paper scores it
    nevo suite results/atari                     # the Deep GA's 13 games, resumable, each tested
    nevo plot curves runs/<folder>               # or throughput, table, mujoco
    nevo worker tcp://10.0.0.1:8786              # one Dask worker for --cluster, on each node
    nevo roofline                                # this machine's roofline and a generation beside it
    nevo get-mnist                               # MNIST into nevo's cache, once
    nevo compile                                 # the CPU kernels into Numba's cache, before a first run

The installed command (pyproject.toml's console script; `python -m nevo` is the same).
`nevo train ALGO ...` takes every flag of the algorithm's own command (`nevo train ALGO --help`:
the flags and presets of the algorithms its module declares), which `python -m
experiments.run_ga`, `run_es`, `run_ns` and `run_sgd` still run as they did.
Each subcommand's `--help` lists its options. Replay, the suite, the worker, get-mnist and compile
are nevo.tools, the plots nevo.plots, the roofline nevo.roofline: all of it is the installed package
(a checkout's experiments/ and plots/ hold entry points to the same code).
"""

from __future__ import annotations

import importlib
import os
import sys

from nevo import cli
from nevo.algos import COMMANDS, OWN, declaration, declared
from nevo.config import ConfigError
from nevo.settings import DamagedFile

# The other subcommands: ("module:function", what it does); the function, main(argv), parses the rest.
TOOLS = {
    "replay": ("nevo.tools.replay:main", "test a run's elite as the paper scores it, and record it playing"),
    "suite": ("nevo.tools.suite:main", "a table of Atari games: one resumable run per game and seed, tested"),
    "worker": ("nevo.tools.worker:main", "start one Dask worker for --cluster on this node"),
    "roofline": ("nevo.roofline.report:main", "this machine's roofline, and a generation measured beside it"),
    "get-mnist": ("nevo.tools.get_mnist:main", "MNIST into nevo's cache, fetched once and checked"),
    "compile": (
        "nevo.tools.compile:main",
        "compile nevo's CPU kernels into Numba's cache, once, on every core",
    ),
}
PLOTS = {
    "curves": "score against frames, generations and hours",
    "throughput": "frames/s, straggler tail, forward share and cores busy over a run",
    "table": "the tested elite beside the published Atari scores",
    "mujoco": "MuJoCo runs beside OpenAI-ES's published speed",
}


def train(algo: str, argv: list[str], module: str = "") -> int:
    """The training command of algorithm `algo` (of the module of one's own `module`: the
    algorithms its module declares, nevo.algos.COMMANDS) on argv: what `nevo train` runs and what
    the experiments/run_*.py aliases call. The declarations give its presets and its description;
    every algorithm runs in the generation loop, with the step its declaration names."""
    from nevo.loops import loop

    family = cli.declarations_of(algo, module)
    own = f"{', '.join(family[0].names)}: an algorithm of one's own, in the generation loop.\n"
    description = next((d.about for d in family if d.about), own)
    return loop.main(argv, description, family[0].names[0], module)


def commands() -> list[str]:
    """The training commands of nevo's own algorithms (each its first algorithm's name), in the
    order of their declarations."""
    return list(dict.fromkeys(COMMANDS[n][0].names[0] for n in OWN))


def command_for(argv: list[str]) -> tuple[str, str]:
    """The training command of `nevo train` argv, as (its algorithm, the module of one's own that
    declares it or ""): the algorithm's (the first word, or --algo), or on --resume the run
    folder's; a ConfigError of one line if there is none."""
    first = cli.first_args(argv)
    if first.resume:  # the run folder's config as --resume reads it (older layouts included)
        try:
            saved = cli.saved_config(first.resume)
            declared(saved)  # (a module of one's own: imported once)
            return saved.algo, saved.algo_module
        except DamagedFile as e:
            path = os.path.join(first.resume, "config.json")
            raise ConfigError(f"--resume: {path} is damaged ({e}); the run cannot be resumed") from None
    if first.algo is None and first.algo_module:
        raise ConfigError("--algo-module: name the algorithm it declares with --algo")
    if first.algo is None:
        raise ConfigError(f"nevo train: name an algorithm ({', '.join(OWN)}), or --resume RUN_DIR")
    if first.algo not in OWN and not first.algo_module:
        raise ConfigError(f"nevo train: unknown algorithm {first.algo!r}; allowed: {', '.join(OWN)}, "
                          f"or one that --algo-module FILE declares")  # fmt: skip
    declaration(first.algo, first.algo_module)
    return first.algo, first.algo_module


def train_help() -> str:
    lines = ["usage: nevo train ALGO [flags]   or   nevo train --resume RUN_DIR [--cluster ...]", ""]
    lines.append("The algorithms (nevo train ALGO --help lists an algorithm's flags and presets):")
    for command in commands():
        names = cli.algorithms_of(command)
        about = next(d.about for d in cli.declarations_of(command) if d.about)
        lines.append(f"  {', '.join(names):<28} {about.splitlines()[0]}")
    lines += ["", "An algorithm of one's own: nevo train NAME --algo-module FILE (docs/architecture.md)."]
    return "\n".join(lines)


def usage() -> str:
    lines = [__doc__.split("\n\n")[0], "", "usage: nevo COMMAND [options]   (nevo COMMAND --help)", ""]
    lines.append(f"  {'train':<10} train with any algorithm, or continue a run (--resume)")
    lines += [f"  {name:<10} {about}" for name, (_, about) in TOOLS.items() if name != "get-mnist"]
    lines.append(f"  {'plot':<10} paper-style plots and tables of run folders: {', '.join(PLOTS)}")
    lines.append(f"  {'get-mnist':<10} {TOOLS['get-mnist'][1]}")
    lines += ["", __doc__.split("\n\n")[1]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if argv[0] == "--version":
        from nevo.version import __version__

        print(f"nevo {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "train":
        if not rest or rest[0] in ("-h", "--help"):
            print(train_help())
            return 0
        if not rest[0].startswith("-"):  # nevo train ALGO ...: the algorithm as its flag
            rest = ["--algo", rest[0], *rest[1:]]
        try:
            algo, module = command_for(rest)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        prog = f"nevo train {argv[1]}" if argv[1] != rest[0] else "nevo train"
        return _as(prog, rest, lambda args: train(algo, args, module))
    if command == "plot":
        if not rest or rest[0] in ("-h", "--help"):
            print("usage: nevo plot KIND RUN_DIR... [options]   (nevo plot KIND --help)\n")
            print("\n".join(f"  {k:<11} {about}" for k, about in PLOTS.items()))
            return 0
        if rest[0] not in PLOTS:
            print(f"error: nevo plot: unknown kind {rest[0]!r}; allowed: {', '.join(PLOTS)}", file=sys.stderr)
            return 2
        return _as(f"nevo plot {rest[0]}", rest[1:], importlib.import_module(f"nevo.plots.{rest[0]}").main)
    if command in TOOLS:
        module, _, function = TOOLS[command][0].partition(":")
        return _as(f"nevo {command}", rest, getattr(importlib.import_module(module), function))
    allowed = ", ".join(["train", *TOOLS, "plot"])
    print(f"error: nevo: unknown command {command!r}; allowed: {allowed} (nevo --help)", file=sys.stderr)
    return 2


def _as(prog: str, argv: list[str], main_of) -> int:
    """main_of(argv) with sys.argv[0] = prog, so that its usage lines name the subcommand; its exit
    code (a main that returns what it measured, as the roofline's does, exits 0)."""
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        code = main_of(argv)
        return code if isinstance(code, int) else 0
    finally:
        sys.argv = saved


if __name__ == "__main__":
    sys.exit(main())
