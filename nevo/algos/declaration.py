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


def _population_setting(cfg) -> int:
    return cfg.settings.population


def _sigma_setting(cfg) -> float:
    return cfg.settings.sigma


@dataclass(frozen=True)
class Declaration:
    names: tuple[str, ...]  # the --algo values it answers to
    script: str  # the command that runs (and continues) it: python -m experiments.<script>
    make: Callable  # (name, cfg, noise, behaviour) -> the Algorithm (cfg.settings: its section)
    bases: Callable  # cfg -> the rows its populations are built from (the evaluator caches them)
    summary: Callable  # cfg -> its main settings for the run's first line
    # Its settings: a frozen dataclass of nevo.settings.setting fields (help text and default
    # together), saved in config.json under `section`, given as flags by its command, and
    # checked by validate(settings, name) (a nevo.settings.ConfigError naming the flag).
    settings: type
    section: str
    validate: Callable = _no_validation
    # {name: {setting: value}}: what each of its names brings where the command line is silent
    defaults: dict = field(default_factory=dict)
    # {name: other name}: whose defaults a task brings it (random search takes the GA's); a name
    # not here takes its own (nevo.tasks' DEFAULTS)
    like: dict = field(default_factory=dict)
    # cfg -> the individuals a generation evaluates (the memory check sizes by it); default: the
    # settings' `population`
    population: Callable = _population_setting
    # cfg -> the mutation power its seed lists are built with (the noise source's, elite.json's);
    # default: the settings' `sigma`
    sigma: Callable = _sigma_setting
    # names its section in an older config.json may hold that it no longer reads: dropped on load
    retired: tuple[str, ...] = ()
    needs_behaviour: bool = False  # novelty search: a behaviour per episode
    check_device: Callable = _no_check  # (cfg, device) -> None, or a ConfigError of one line
    own_loop: bool = False  # runs in a loop of its own (the SGD baseline), not the generation loop
