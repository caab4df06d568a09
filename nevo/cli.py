"""The command line: presets, the defaults a task or an algorithm brings, argparse.

`parse_args` turns argv into a validated config: a preset (the papers' settings or a quick one),
then the flags given, then the defaults (`defaults_of`: what the task and the algorithm bring
where the command line is silent), then the range checks (nevo.config.validate) and the task's checks. A
config built in Python goes through `apply_defaults` and `check` too, so it runs like the same
config from the command line; `--help` lists each setting's preset values and those defaults.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from dataclasses import dataclass, fields, replace
from typing import NamedTuple

from nevo import tasks
from nevo.algos import COMMANDS, DEFAULT, OWN, REGISTRY, declaration, declared, module_of
from nevo.config import (
    RESUMABLE,
    SWITCHES,
    Config,
    ConfigError,
    EnvConfig,
    NetConfig,
    RunConfig,
    all_fields,
    flag,
    load,
    override,
    part,
    require,
    validate,
    vbn_conflict,
)
from nevo.kinds import settings_class
from nevo.nets.half import format_of
from nevo.settings import whole_number


def presets_of(algo: str, module: str = "") -> dict[str, Config]:
    """The presets of algo's command (its module's declarations: nevo.algos.COMMANDS; module: a
    module of one's own that declares it): those the declarations bring (nevo.algos.declaration:
    presets), as configs, in their order; the first one's algorithm is the command's own."""
    out = {}
    for d in declarations_of(algo, module):
        for name, p in d.presets.items():
            env = p.get("env", {})  # (a kind's own settings too: its Settings class)
            out[name] = Config(
                env=settings_class(env.get("env", EnvConfig.env), env.get("env_module", ""))(**env),
                net=NetConfig(**p.get("net", {})),
                settings=d.settings(**p.get("settings", {})),
                run=RunConfig(**p.get("run", {})),
                preset=name,
                algo=p.get("algo", d.names[0]),
                algo_module=module_of(d.names[0]),
            )
    if not out:  # a command of one's own that declares no preset: "quick", the settings' defaults
        d = declarations_of(algo, module)[0]
        out["quick"] = Config(env=EnvConfig(), net=NetConfig(), settings=d.settings(), run=RunConfig(),
                              preset="quick", algo=d.names[0], algo_module=module_of(d.names[0]))  # fmt: skip
    return out


def declarations_of(algo: str, module: str = "") -> tuple:
    """The declarations of algo's command (those of the module that declares it), in their order."""
    declaration(algo, module)  # (a module of one's own: imported once)
    return COMMANDS[algo]


def made_for(preset: str, algo: str, module: str = "") -> str | None:
    """The kind of task a preset is made for (its algorithm's command's), or None."""
    for d in declarations_of(algo, module):
        if preset in d.presets:
            return d.presets[preset].get("made_for")
    return None


def _command_of(presets: dict) -> str:
    """The algorithm whose command these presets are (its first)."""
    return next(iter(presets.values())).algo


def _same_command(algo: str, presets: dict) -> bool:
    """Whether algo is one of the algorithms of the command these presets are (one module's)."""
    return COMMANDS[algo] is COMMANDS[_command_of(presets)]


def apply_defaults(cfg, given=(), task_defaults=True, kind=None):
    """cfg with what its algorithm's declaration brings (`defaults_of`) for every setting not
    named in `given` (the names set explicitly)."""
    return override(cfg, defaults_of(cfg, given, task_defaults, kind))


def defaults_of(cfg, given=(), task_defaults=True, kind=None) -> dict:
    """{setting: value} for what cfg's algorithm's declaration brings for every setting not named
    in `given` (the names set explicitly): for the kind of task (its on_tasks and on_task; not with
    task_defaults=False, for a preset made for its task), then on every task (its defaults), and
    then the defaults that another setting makes impossible fitted to it (`fitted`), and the
    settings of cfg's task that its kind spells another way (`--env frostbite` is `--env atari
    --game frostbite`). kind: the task's class where its name does not say it (a data set of one's
    own: the DataSet). Only what changes is in it.

    A setting's value, in this order, the later winning: the algorithm's settings class; the
    preset (cfg as given here); the kind's own DEFAULTS (nevo.kinds), then the declaration's
    values for the task's kind, unless the preset is made for that task; the user's flag or
    argument (`given`)."""
    env = tasks.normalize_env(cfg.env)
    out = {f.name: v for f in fields(env) if (v := getattr(env, f.name)) != getattr(cfg.env, f.name)}
    if "env" in out:  # (the module as it is: override would look for the renamed task's own)
        out["env_module"] = env.env_module
    cfg = replace(cfg, env=env)
    name, d = cfg.algo, declared(cfg)
    kind = kind or tasks.kind_of(cfg.env)
    data = None if isinstance(kind, type) else kind  # a DataSet of one's own
    by_task = (
        {**getattr(kind, "DEFAULTS", {}), **d.brings(name, kind.KIND, cfg.env, data)} if task_defaults else {}
    )
    out |= {k: v for k, v in {**by_task, **d.defaults.get(name, {})}.items() if k not in given}
    cfg = override(cfg, out)
    fit = fitted(cfg, given)
    cfg, out = override(cfg, fit), out | fit
    return out | _processes_changed(cfg, given, kind.KIND)


def _processes_changed(cfg, given, kind: str) -> dict:
    """{--threads, --processes} where `atari_processes` reads them otherwise than cfg has them (an
    Atari game's emulator processes given as --threads, or kept so in an older run folder)."""
    threads, processes = atari_processes(cfg.run.threads, cfg.run.processes, given, kind)
    return {k: v for k, v in (("threads", threads), ("processes", processes)) if v != getattr(cfg.run, k)}


def atari_processes(threads: int, processes: int, given, kind: str) -> tuple[int, int]:
    """(--threads, --processes) with an Atari game's emulator processes as --processes: --threads
    given for one (the flag they had before) is read as --processes, with one line on stderr
    saying so, and a run folder's config from before keeps its count there; --processes for a
    task of another kind is a ConfigError (its envs step in --threads threads)."""
    if kind != "atari":
        require(not processes, "processes", "0 (emulator processes are an Atari game's; other tasks: "
                "--threads)", processes)  # fmt: skip
        return threads, processes
    if not threads:
        return threads, processes
    if "threads" in given:
        if "processes" in given and processes != threads:
            raise ConfigError(f"--threads: an Atari game's emulator processes are --processes alone; got "
                              f"--threads {threads} and --processes {processes}")  # fmt: skip
        print(f"note: --threads on an Atari game counts emulator processes, whose flag is --processes now: "
              f"read as --processes {threads}", file=sys.stderr)  # fmt: skip
    return 0, processes or threads


def fitted(cfg, given=()) -> dict:
    """{setting: value} for the defaults of cfg that another of its settings makes impossible,
    each only where not named in `given`: a truncation or number of elite candidates above the
    population becomes the population (run_ns's quick truncation 10 with --population 8), and
    virtual batch norm (ES's presets) is off with a net, an observation normalisation or a safe
    mutation it cannot fold into; --grad-corr 1 brings the one shared batch and the plain net it
    needs. --weights auto becomes the net's format (fp16 for large and small,
    nevo.nets.half.format_of), so that config.json names what the forward read. A value set
    explicitly is kept, and validate refuses it if it is impossible. (An odd ES population stays
    refused with mirrored pairs, the default: dropping the pairs would change the gradient
    estimator, a choice left to the user.)"""
    s = cfg.settings
    out = {}
    population = getattr(s, "population", None)
    for name in ("truncation", "elite_candidates"):
        if population is not None and name not in given and getattr(s, name, -1) > population:
            out[name] = population
    grad_corr = getattr(s, "grad_corr", 0)
    if grad_corr and "common_episodes" not in given:  # the true gradient is one batch's
        out["common_episodes"] = 1
    if cfg.net.vbn and "vbn" not in given and (vbn_conflict(cfg) is not None or grad_corr):
        out["vbn"] = 0
    if cfg.net.weights == "auto":
        out["weights"] = format_of(cfg.net.weights, cfg.net.net)
    return out


def check(cfg, make_env=None, behaviour=None):
    """Validate cfg (ranges, then its task's checks); returns its task. make_env and behaviour: a
    user's own environment and behaviour function (nevo.tasks.task_for)."""
    validate(cfg)
    task = tasks.task_for(cfg.env, make_env, behaviour)
    tasks.check_sticky(task, cfg.env)
    episodes = getattr(cfg.settings, "validation_episodes", 0)
    tasks.check_validation_starts(task, cfg.env, cfg.algo, episodes)
    task.check(cfg.net)
    return task


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise ConfigError(message)


def build_parser(
    description: str, presets=None, algo: str | None = None, algo_module: str = "", env: type = EnvConfig
) -> argparse.ArgumentParser:
    """A parser with --preset, --resume, --algo and --algo-module, and one flag per setting the
    algorithm reads (algo: the one given, else the presets'; default: the preset's) and the task
    reads (env: the class of its section, a kind's own Settings where it has some)."""
    presets = presets or presets_of(DEFAULT)
    p = _Parser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="quick", help=f"one of {', '.join(presets)} (default: quick)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its checkpoint")
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="evaluate on a Dask cluster: a scheduler's address (tcp://host:8786) or local:N (N "
        "worker processes on this machine); results equal a run without it (default: this machine)",
    )
    p.add_argument(
        "--cluster-timeout",
        type=lambda s: _convert(float, s),
        default=120.0,
        metavar="S",
        help="with --cluster: stop (checkpoint intact) when no worker has been there for S seconds "
        "(default: 120)",
    )
    p.add_argument(
        "--cluster-chunk",
        type=lambda s: _convert(int, s),
        default=0,
        metavar="N",
        help="with --cluster: episodes per chunk handed to a worker (default: 0, 2 chunks per worker)",
    )
    algos = algorithms_of(_command_of(presets))
    shown = algo or next(iter(presets.values())).algo
    if algo is None:  # the command's own algorithm (one of one's own: with its module)
        algo_module = next(iter(presets.values())).algo_module
    p.add_argument("--algo", default=None, metavar="NAME",
                   help=f"the algorithm: {', '.join(algos)}, or one that --algo-module declares "
                        f"({_preset_defaults(presets, None, 'algo')}); the flags below are {shown}'s: "
                        f"--algo NAME --help lists another's")  # fmt: skip
    p.add_argument("--algo-module", default="", metavar="MODULE",
                   help="an algorithm of one's own: a .py file (or a module name) whose DECLARATIONS "
                        "declare --algo (docs/architecture.md, 'Add an algorithm')")  # fmt: skip
    own = declaration(shown, algo_module).section
    family = [shown] if algo_module else [a for a in algos if declaration(a).section == own]  # one section
    for group, f in all_fields(shown, algo_module, env):
        kind = {"int": int, "float": float, "str": str}[f.type]
        where = (not algo_module and _preset_defaults(presets, group, f.name)) or f"default: {f.default}"
        p.add_argument(
            flag(f.name),
            dest=f.name,
            type=lambda s, k=kind: _convert(k, s),
            default=None,
            metavar=kind.__name__.upper(),
            help=f"{f.metadata['help']} ({where}{_brought(family, f.name)})".replace("%", "%%"),
            **({"nargs": "?", "const": 1} if f.name in SWITCHES else {}),
        )
    return p


def algorithms_of(algo: str) -> tuple[str, ...]:
    """nevo's own algorithms of algo's command (those its module declares), in their order."""
    return tuple(name for name in OWN if COMMANDS[name] is COMMANDS[algo])


def _preset_defaults(presets: dict, group: str, name: str) -> str:
    """'paper: 1000, rs: 1000, quick: 64' or, where all presets agree, 'default: 1000'."""
    values = {p: getattr(part(c, group) if group else c, name) for p, c in presets.items()
              if hasattr(part(c, group) if group else c, name)}  # fmt: skip
    values = {p: "none" if v == "" else v for p, v in values.items()}  # (an empty name: none given)
    if len(set(values.values())) == 1:
        return f"default: {next(iter(values.values()))}"
    return ", ".join(f"{p}: {v}" for p, v in values.items())


def _brought(algos, name: str) -> str:
    """'; where not set: gymnasium tasks 64, maze 0.005' (what these algorithms' declarations bring
    for a setting on each kind of task, and on every task), or ''."""
    tables = {a: REGISTRY[a].on_tasks.get(a, {}) for a in algos}
    own = [a for i, a in enumerate(algos) if all(tables[a] is not tables[b] for b in algos[:i])]
    said = []
    for kind in tasks.kinds():
        for algo in own:
            if name in tables[algo].get(kind.KIND, {}):
                who = " ".join(w for w in (kind.LABEL, algo if len(own) > 1 else "") if w)
                said.append(f"{who} {tables[algo][kind.KIND][name]}")
    for algo in algos:  # what an algorithm itself brings
        brings = REGISTRY[algo].defaults.get(algo, {})
        if name in brings:
            said.append(f"{algo} {brings[name]}")
    return f"; where not set: {', '.join(dict.fromkeys(said))}" if said else ""


def _convert(kind, text: str):
    try:
        if kind is int:
            return whole_number(text)
        return kind(text)
    except ValueError:
        article = "an" if kind is int else "a"
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: {article} {kind.__name__}") from None


@dataclass(frozen=True)
class ClusterSettings:
    """Where a run evaluates when not on this machine (nevo.cluster.evaluator): not part of the config,
    since results do not depend on it; a run may resume on another cluster or on none."""

    address: str  # tcp://host:port of a Dask scheduler, or local:N
    timeout_s: float = 120.0  # stop when no worker has been there this long
    chunk: int = 0  # episodes per chunk (0: two chunks per worker)


def resume_command(run_dir: str) -> str:
    """The command that continues a run (any algorithm's): what a stopped run's last line says."""
    return f"nevo train --resume {run_dir}"


def first_args(argv):
    """--algo, --algo-module, --env, --env-module and --resume of argv, read before the rest (whose
    flags depend on the algorithm and the task's kind)."""
    first = _Parser(add_help=False)
    first.add_argument("--algo", default=None)
    first.add_argument("--algo-module", default="")
    first.add_argument("--env", default=None)
    first.add_argument("--env-module", default="")
    first.add_argument("--resume", default=None)
    return first.parse_known_args(argv)[0]


class Parsed(NamedTuple):
    """A training command line, read and checked: what a run starts from."""

    cfg: Config  # checked (ranges, then the task's own checks)
    resume: str | None  # the run folder to go on with (--resume), or None
    cluster: ClusterSettings | None  # --cluster, or None
    task: object  # the task cfg.env names (nevo.tasks.task_for), built once, by the check


def parse_args(argv, description: str = "", command: str = DEFAULT, command_module: str = "") -> Parsed:
    """Parse argv into a Parsed, as the command of algorithm `command` reads it (its presets, and
    --algo's default; command_module: the module of one's own that declares it). The flags are
    the algorithm's: --algo and --algo-module are read first (on resume only the run's settings
    may change, which every algorithm has).

    The config, in the order a setting's value is decided (the later winning): the start (the
    preset, or on resume the run folder's config as it was written: `_start_of`), the flags given
    over it, then the defaults over what the flags leave (`defaults_of`; on resume none, but for the
    count of emulator processes a run folder from before --processes kept as --threads), then the
    checks (`check`)."""
    presets = presets_of(command, command_module)
    known = first_args(argv)
    algo, module = (None, "") if known.resume else _algorithm_of(known, presets, command)
    env = settings_class(known.env, known.env_module) if known.env and not known.resume else EnvConfig
    args = build_parser(description, presets, algo, module, env).parse_args(argv)
    saved = saved_config(args.resume) if args.resume else None
    start, task_defaults = _start_of(args, presets, saved)
    # the flags given: those of the algorithm the parser was built for (on resume, the run's)
    of = (
        (saved.algo, saved.algo_module, type(saved.env))
        if saved
        else (algo or _command_of(presets), module, env)
    )
    given = {f.name: v for _, f in all_fields(*of) if (v := getattr(args, f.name, None)) is not None}
    if saved is not None:
        _may_change(args, saved, given)
    cfg = override(start, given)
    if saved is None:
        cfg = override(cfg, defaults_of(cfg, given, task_defaults))
    else:
        cfg = override(cfg, _processes_changed(cfg, given, tasks.kind_of(cfg.env).KIND))
    task = check(cfg)
    cluster = None
    if args.cluster:
        require(args.cluster_timeout > 0, "cluster_timeout", "> 0", args.cluster_timeout)
        require(args.cluster_chunk >= 0, "cluster_chunk", ">= 0", args.cluster_chunk)
        cluster = ClusterSettings(args.cluster, args.cluster_timeout, args.cluster_chunk)
    return Parsed(cfg, args.resume, cluster, task)


def _algorithm_of(known, presets, command: str) -> tuple[str | None, str]:
    """(--algo, --algo-module) of the first flags read (`first_args`), or a ConfigError in one line
    where the command does not run that algorithm (another command's, or none's)."""
    algo, module = known.algo, known.algo_module
    if module and algo is None:
        raise ConfigError("--algo-module: name the algorithm it declares with --algo")
    if algo is not None and module:
        declaration(algo, module)  # (the module of one's own imported once: its command known)
        if not _same_command(algo, presets):
            raise ConfigError(
                f"--algo: {algo!r} is its own command's: nevo train {algo} --algo-module {module} runs it"
            )
    if algo is not None and not module and (algo not in OWN or not _same_command(algo, presets)):
        elsewhere = f" (nevo train {algo} runs it)" if algo in OWN else ""
        raise ConfigError(
            f"--algo: got {algo!r}, allowed: {', '.join(algorithms_of(command))}, or one that --algo-module "
            f"declares{elsewhere}"
        )
    return algo, module


def saved_config(run_dir: str):
    """The config of run folder run_dir (--resume), or a ConfigError of one line (DamagedFile
    where its config.json is damaged)."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        raise ConfigError(f"--resume: {run_dir!r} is not a run folder (no config.json)")
    return load(path)


def _start_of(args, presets, saved=None) -> tuple[Config, bool]:
    """(the config the flags go over, whether the defaults for the task's kind apply to it): the
    preset --preset names, for --algo where given; on resume the run folder's config (saved), whose
    algorithm must be this command's."""
    if saved is not None:
        declared(saved)  # (a module of one's own: imported once)
        if not _same_command(saved.algo, presets):
            raise ConfigError(
                f"--resume: {args.resume!r} is a run of {saved.algo!r}; resume it with its own command "
                f"({resume_command(args.resume)})"
            )
        return saved, False
    algo, module = args.algo, args.algo_module
    if args.preset not in presets:
        close = difflib.get_close_matches(args.preset, list(presets), n=3)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"--preset: unknown preset {args.preset!r}{hint}; allowed: {', '.join(presets)}")
    by_task = made_for(args.preset, algo or next(iter(presets.values())).algo, module) is None
    start = presets[args.preset] if algo is None else presets[args.preset].with_algo(algo, module)
    return start, by_task


def _may_change(args, saved, given) -> None:
    """ConfigError in one line unless every setting given on resume (the flags, --algo and
    --algo-module) is one a run may change (RESUMABLE)."""
    algo, module = args.algo, args.algo_module
    changed = set(given) | ({"algo"} if algo not in (None, saved.algo) else set())
    changed = (changed | ({"algo_module"} if module not in ("", saved.algo_module) else set())) - RESUMABLE
    if changed:
        raise ConfigError(
            f"--resume: only {', '.join(flag(n) for n in sorted(RESUMABLE))} may change on "
            f"resume; got {', '.join(flag(n) for n in sorted(changed))}"
        )
