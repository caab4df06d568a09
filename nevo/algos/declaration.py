"""What an algorithm says of itself, once, in its own module (`DECLARATIONS` there), so that the
generation loop, the settings and the command line ask it instead of comparing names.

The registry (nevo.algos: `declaration`, `make_algo`, `bases_of`) is built from these, nevo's own
and those of a module of one's own (`--algo-module`). Every field is about the run as a whole;
what changes within a run goes through the contract (nevo.algos.contract.Algorithm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def _no_check(cfg, device: str) -> None:
    """Every device serves it."""


def _no_validation(settings, name: str) -> None:
    """Every value of its settings is allowed."""


def _nothing_more(name: str, kind: str, env_cfg, data) -> dict:
    """No setting that depends on the task itself beyond its kind."""
    return {}


def _sigma_setting(cfg) -> float:
    return cfg.settings.sigma


def _any_run(cfg, task, cluster) -> None:
    """Every task and a cluster serve it (the settings' own checks aside)."""


@dataclass(frozen=True)
class Declaration:
    # the --algo values it answers to. The declarations of one module (its DECLARATIONS) make one
    # command: `nevo train NAME` of any of their names takes their flags and presets, the first
    # name's settings by default (nevo.algos.family)
    names: tuple[str, ...]
    make: Callable  # (name, cfg, noise, behaviour) -> the Algorithm (cfg.settings: its section)
    bases: Callable  # cfg -> the rows its populations are built from (the evaluator caches them)
    summary: Callable  # cfg -> its main settings for the run's first line
    # Its settings: a frozen dataclass of nevo.settings.setting fields (help text and default
    # together), saved in config.json under `section`, given as flags by its command, and
    # checked by validate(settings, name) (a nevo.settings.ConfigError naming the flag).
    settings: type
    section: str
    validate: Callable = _no_validation
    # {name: {setting: value}}: what each of its names brings on every task where the command
    # line is silent (random search: truncation 0)
    defaults: dict = field(default_factory=dict)
    # {name: {kind of task: {setting: value}}}: what each of its names takes on each kind of task
    # (nevo.tasks' classes, their KIND: "atari", "maze", "gymnasium", "mujoco", "data set" (MNIST),
    # "own data set") where the command line is silent; a preset made for another kind gives way
    # to it (nevo.cli.apply_defaults says the order)
    on_tasks: dict = field(default_factory=dict)
    # (name, kind, env_cfg, data) -> {setting: value}: what it takes from the task itself beyond
    # its kind (ES's discretised actions on two robots, a data set's budget by its image size);
    # data: a data set of one's own (kind "own data set"), else None
    on_task: Callable = _nothing_more
    # {preset: {"algo": one of its names (default: the first), "made_for": the kind of task it is
    # made for (the task's own values then do not come over it), "env" | "net" | "settings" |
    # "run": {setting: value}}}: its command's presets (--preset), in the order --help lists them
    presets: dict = field(default_factory=dict)
    # The extensions its runs may have (nevo.algos.contract.Extension classes), in the order their
    # hooks run; a run has those its settings want (each one's `wanted`): nevo.algos.extensions_of
    extensions: tuple = ()
    # cfg -> the individuals a generation evaluates (the memory check sizes by it); None: the
    # settings' `population`
    population: Callable | None = None
    # cfg -> the mutation power its seed lists are built with (the noise source's, elite.json's);
    # default: the settings' `sigma`
    sigma: Callable = _sigma_setting
    # names its section in an older config.json may hold that it no longer reads: dropped on load
    retired: tuple[str, ...] = ()
    needs_behaviour: bool = False  # novelty search: a behaviour per episode
    check_device: Callable = _no_check  # (cfg, device) -> None, or a ConfigError of one line
    # (cfg, task, cluster) -> None, or a ConfigError of one line: a task or a --cluster it cannot
    # run on (the SGD baseline: a labelled data set, on one machine)
    check_run: Callable = _any_run
    # The step the generation loop runs (nevo.loops.loop), a class made with (cfg, task, spec,
    # evaluator, algo, extensions, run_dir, fitness, out): None for the population step (ask ->
    # evaluate -> tell -> validation: nevo.loops.loop.GenerationStep, for every algorithm of the
    # contract); the SGD baseline's own (nevo.algos.sgd.SGDStep: mini-batches, then the test set).
    # It names its unit ("generation", "iteration") and says the run's last line (done).
    step: type | None = None
    # its command's description (what `nevo train NAME --help` prints above the flags, its first
    # line in `nevo train --help`); the first of a command's declarations that has one gives it
    about: str = ""

    def brings(self, name: str, kind: str, env_cfg=None, data=None) -> dict:
        """What `name` takes on this kind of task (on_tasks), and from the task itself (on_task)."""
        return {**self.on_tasks.get(name, {}).get(kind, {}), **self.on_task(name, kind, env_cfg, data)}
