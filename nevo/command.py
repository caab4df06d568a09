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

The installed command (pyproject.toml's console script; `python -m nevo` is the same).
`nevo train ALGO ...` takes every flag of the algorithm's own command (`nevo train ALGO --help`),
which `python -m experiments.run_ga`, `run_es`, `run_ns` and `run_sgd` still run as they did.
Each subcommand's `--help` lists its options. Replay, plots, the worker and the roofline are the
checkout's experiments/ and plots/ packages, installed with nevo.
"""

from __future__ import annotations

import importlib
import os
import sys

from nevo import cli
from nevo.algos import OWN, declaration, declared
from nevo.config import ConfigError
from nevo.settings import DamagedFile

# Each training command: its presets, its description (what `--help` prints above the flags).
FAMILIES = {
    "run_ga": (
        cli.PRESETS,
        """\
The deep genetic algorithm (or random search) of Such et al. 2017, on Atari or any task.

    nevo train ga                                    # the quick preset on Frostbite
    nevo train ga --preset paper --game frostbite
    nevo train rs                                    # random search (T = 0)
    nevo train ga --env CartPole-v1                  # a gymnasium vector task, in about a minute
    nevo train --resume runs/<folder>                # continue a killed run
    nevo train ga --cluster local:2                  # on a Dask cluster (or tcp://host:8786)
    nevo train ga --env CartPole-v1 --net deep --mutation sm-g-sum  # safe mutations

Each generation: ask -> evaluate -> tell, validate the top candidates -> log -> checkpoint.
""",
    ),
    "run_es": (
        cli.ES_PRESETS,
        """\
OpenAI evolution strategies (Salimans et al. 2017), on Atari or a gymnasium task.

    nevo train es --env CartPole-v1                  # a vector task: about a minute on 2 cores
    nevo train es                                    # the quick preset on Frostbite
    nevo train es --preset paper --game frostbite    # 5,000 perturbations, VBN
    nevo train es --env HalfCheetah-v5               # a MuJoCo robot: 10M steps, ~7 min
    nevo train es --preset mujoco                    # OpenAI-ES's Humanoid-v5 settings

Each generation: ask the perturbations -> evaluate -> tell (the update of theta) -> validate
theta -> log -> checkpoint. The elite of an ES run is theta itself (theta.npy beside elite.json).
""",
    ),
    "run_ns": (
        cli.NS_PRESETS,
        """\
Novelty search: GA-NS (Such et al. 2017) and NS-ES, NSR-ES, NSRA-ES (Conti et al. 2018).

    nevo train ga-ns --env maze                      # the deceptive image maze
    nevo train nsra-es --env maze
    nevo train ga-ns --env frostbite                 # Atari: behaviour = final RAM

Behaviour: the maze's final (x, y); on Atari the 128-byte RAM at the end of the episode; a MuJoCo
robot's final centre of mass (x, y); another gymnasium task's final observation. Novelty = mean
distance to the k nearest neighbours among the archive (and, for GA-NS, the population).
""",
    ),
    "run_sgd": (
        cli.SGD_PRESETS,
        """\
SGD on the MNIST net, from nevo's own gradients: ES against SGD's baseline, or its proxy.

The baseline of Zhang, Clune & Stanley 2017 (arXiv 1712.06564), or their SGD proxy at a chosen
correlation with the true gradient.

    nevo train sgd --env mnist                       # the quick preset: minutes on 2 cores
    nevo train sgd --env mnist --proxy-rho 0.04      # the proxy that tracks ES (10,000 offspring)
""",
    ),
}

# The other subcommands: (module, what it does); each module's main(argv) parses the rest.
TOOLS = {
    "replay": ("experiments.replay", "test a run's elite as the paper scores it, and record it playing"),
    "suite": ("experiments.suite", "a table of Atari games: one resumable run per game and seed, tested"),
    "worker": ("experiments.cluster_worker", "start one Dask worker for --cluster on this node"),
    "roofline": ("experiments.roofline", "this machine's roofline, and a generation measured beside it"),
    "get-mnist": ("experiments.get_mnist", "MNIST into nevo's cache, fetched once and checked"),
}
PLOTS = {
    "curves": "score against frames, generations and hours",
    "throughput": "frames/s, straggler tail, forward share and cores busy over a run",
    "table": "the tested elite beside the published Atari scores",
    "mujoco": "MuJoCo runs beside OpenAI-ES's published speed",
}


def train(script: str, argv: list[str]) -> int:
    """One training command (run_ga, run_es, run_ns, run_sgd) on argv: what `nevo train` runs
    and what the experiments/run_*.py aliases call."""
    presets, description = FAMILIES[script]
    if script == "run_sgd":
        from nevo.loops import sgd

        return sgd.main(argv, description)
    from nevo.loops import loop

    return loop.main(argv, description, presets)


def script_for(argv: list[str]) -> str:
    """The training command of `nevo train` argv: the algorithm's (the first word, or --algo), or
    on --resume the run folder's; a ConfigError of one line if there is none."""
    first = cli.first_args(argv)
    if first.resume:  # the run folder's config as --resume reads it (older layouts included)
        try:
            return declared(cli.saved_config(first.resume)).script
        except DamagedFile as e:
            path = os.path.join(first.resume, "config.json")
            raise ConfigError(f"--resume: {path} is damaged ({e}); the run cannot be resumed") from None
    if first.algo is None:
        raise ConfigError(f"nevo train: name an algorithm ({', '.join(OWN)}), or --resume RUN_DIR")
    if first.algo not in OWN and not first.algo_module:
        raise ConfigError(f"nevo train: unknown algorithm {first.algo!r}; allowed: {', '.join(OWN)}, "
                          f"or one that --algo-module FILE declares")  # fmt: skip
    return declaration(first.algo, first.algo_module).script


def train_help() -> str:
    lines = ["usage: nevo train ALGO [flags]   or   nevo train --resume RUN_DIR [--cluster ...]", ""]
    lines.append("The algorithms (nevo train ALGO --help lists an algorithm's flags and presets):")
    for script, (_, description) in FAMILIES.items():
        names = [n for n in OWN if declaration(n).script == script]
        lines.append(f"  {', '.join(names):<28} {description.splitlines()[0]}")
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
            script = script_for(rest)
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        prog = f"nevo train {argv[1]}" if argv[1] != rest[0] else "nevo train"
        return _as(prog, rest, lambda args: train(script, args))
    if command == "plot":
        if not rest or rest[0] in ("-h", "--help"):
            print("usage: nevo plot KIND RUN_DIR... [options]   (nevo plot KIND --help)\n")
            print("\n".join(f"  {k:<11} {about}" for k, about in PLOTS.items()))
            return 0
        if rest[0] not in PLOTS:
            print(f"error: nevo plot: unknown kind {rest[0]!r}; allowed: {', '.join(PLOTS)}", file=sys.stderr)
            return 2
        return _as(f"nevo plot {rest[0]}", rest[1:], importlib.import_module(f"plots.{rest[0]}").main)
    if command in TOOLS:
        return _as(f"nevo {command}", rest, importlib.import_module(TOOLS[command][0]).main)
    allowed = ", ".join(["train", *TOOLS, "plot"])
    print(f"error: nevo: unknown command {command!r}; allowed: {allowed} (nevo --help)", file=sys.stderr)
    return 2


def _as(prog: str, argv: list[str], main_of) -> int:
    """main_of(argv) with sys.argv[0] = prog, so that its usage lines name the subcommand."""
    saved = sys.argv
    sys.argv = [prog, *argv]
    try:
        return main_of(argv) or 0
    finally:
        sys.argv = saved


if __name__ == "__main__":
    sys.exit(main())
