"""A kind of task declares itself, as an algorithm does (nevo.algos.declaration), and the registry
here finds the kind an --env names, asking each kind rather than switching on the name.

A kind is a subclass of `Kind` with a KIND of its own, and it says:
- KIND, the key under which an algorithm's declaration says what it takes on such tasks
  (on_tasks), and LABEL, its name in --help;
- `matches(env)`: whether --env names one of its tasks; a CATCH_ALL kind (gymnasium's: any id
  gymnasium may know) is asked only after every other kind said no;
- `normalize(env_cfg)`: its tasks' one spelling (Atari's: `--env frostbite` is `--env atari
  --game frostbite`);
- Settings: its own section of settings, a frozen dataclass that extends the task's section
  (nevo.settings.EnvConfig) with its fields (nevo.settings.setting: a default and a line of
  help each); they are flags where --env names one of its tasks, and config.json's "env" section
  holds them. None: EnvConfig's alone (nevo's own kinds, whose settings every run folder has there);
- DEFAULTS: the settings its tasks take where neither the flags nor the algorithm's declaration
  for its KIND (on_tasks) say (a kind of one's own: a net for its observations, its frame cap);
- sticky_actions and starts_of_seeds: whether its episodes may have sticky actions (--sticky), and
  whether their starts are drawn from their seeds, so that `validation(episodes)` can give a
  validation's episodes each start in turn (--validation-starts each);
- FRAMES: what one of its frames is, in words ("game frames", "agent steps", "examples"), which
  config.json keeps beside the run's counters and the figures' axes show;
- and, as a task made from an EnvConfig: obs_shape, obs_dtype, n_actions, action ("argmax" or
  "tanh"), action_box, behaviour (its size and dtype for novelty search, or None), device, name,
  `check(net_cfg)` and `reference_batch(size, seed)`.

Its evaluator declares the kinds it plays (nevo.episodes.players.plays): a kind sits below the
evaluator that drives its environments, so the link is written on the evaluator's side, by
class; a kind stepped in this process (`InProcess`: make_slots) gets the synchronous evaluator
without a word.

A class with a KIND of its own joins the registry when it is made: nevo's kinds when nevo.tasks
loads (Atari's first, as nevo.tasks imports nevo.atari before it makes its own), one of one's own
when its module is imported (--env-module, saved in config.json so that --resume, replay and a
cluster's workers import it again). The kinds are asked newest first, so a kind of one's own may
take a name before nevo's own do.
"""

from __future__ import annotations

import dataclasses
import sys

from nevo.settings import ConfigError, EnvConfig, import_own, imported, own_name

_REGISTRY: list[type] = []  # every kind, in the order their classes were made
_WARNED: set = set()  # kinds of a script's own, said once
_LOADED: set = set()  # modules of one's own (own_name) checked to declare a kind


class Kind:
    """What every kind of task shares (see the module's docstring)."""

    KIND = ""
    LABEL = ""
    CATCH_ALL = False  # asked last: any name the other kinds did not take (read off the class itself)
    Settings: type | None = None  # its own section: an EnvConfig with its fields; None: EnvConfig's
    DEFAULTS: dict = {}  # settings its tasks take where the flags and the algorithm's on_tasks are silent
    sticky_actions = False  # whether its episodes may have sticky actions (--sticky)
    starts_of_seeds = False  # whether its episodes draw their starts from their seeds (--validation-starts)
    FRAMES = "frames"  # what a frame of its tasks is, in words (the figures' axis: nevo.plots.curves)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "KIND" in vars(cls):
            if "matches" not in vars(cls):  # its own name, not the names of the kind it extends
                cls.matches = classmethod(_own_name)
            _REGISTRY.append(cls)

    @classmethod
    def matches(cls, env: str) -> bool:
        """Whether --env names one of this kind's tasks (default: the kind's own name)."""
        return env == cls.KIND

    @classmethod
    def normalize(cls, env_cfg: EnvConfig) -> EnvConfig:
        """env_cfg in this kind's one spelling (default: as given)."""
        return env_cfg

    def validation(self, episodes):
        """A validation's episodes (an algorithm's ask_validation) as this kind plays them: where
        --validation-starts each is set, a kind with starts_of_seeds gives each its own start;
        default: as asked."""
        return episodes


def _own_name(cls, env: str) -> bool:
    return env == cls.KIND


def kinds() -> tuple[type, ...]:
    """Every kind known now, in the order they were made (nevo's own first)."""
    return tuple(_REGISTRY)


def load(module: str) -> None:
    """Import a module of one's own that declares a kind of task (--env-module) once; ConfigError in
    one line where it cannot be imported or declares no kind."""
    if own_name(module) in _LOADED:  # (kind_of asks on every call: the module's check is done once)
        return
    mod = import_own(module, "--env-module")

    def its_own(v) -> bool:  # (a kind it imported from elsewhere is not its own; one of its package's is)
        return isinstance(v, type) and (v.__module__ + ".").startswith(mod.__name__ + ".")

    if not any(its_own(v) and issubclass(v, Kind) and "KIND" in vars(v) for v in vars(mod).values()):
        raise ConfigError(
            f"--env-module: {module!r} declares no kind of task (a subclass of nevo.tasks.Kind with a KIND)"
        )
    _LOADED.add(own_name(module))


def kind_of(env_cfg: EnvConfig) -> type:
    """The kind of task env_cfg's --env names (its --env-module imported first): the newest kind
    whose `matches` takes it, the catch-alls asked last."""
    if env_cfg.env_module:
        load(env_cfg.env_module)
    ordered = sorted(reversed(_REGISTRY), key=lambda k: bool(vars(k).get("CATCH_ALL", False)))
    for kind in ordered:
        if kind.matches(env_cfg.env):
            return kind
    raise ConfigError(f"--env: no kind of task takes {env_cfg.env!r}")


def normalize_env(env_cfg: EnvConfig) -> EnvConfig:
    """env_cfg in its kind's one spelling (`--env frostbite` is `--env atari --game frostbite`),
    naming the module of a kind of one's own (env_module) where it did not: a kind this process
    knows already, whose run must find it again from config.json."""
    kind = kind_of(env_cfg)
    env_cfg = kind.normalize(env_cfg)
    module = module_of(kind)
    if kind.__module__ == "__main__" and kind not in _WARNED:
        _WARNED.add(kind)
        print(f"note: the kind of task {kind.__name__} is defined in __main__; a new process (--resume, "
              "replay, a cluster's workers) cannot import it: declare it in a module (--env-module)",
              file=sys.stderr)  # fmt: skip
    return dataclasses.replace(env_cfg, env_module=module) if module and not env_cfg.env_module else env_cfg


def module_of(kind: type) -> str:
    """The module that declares a kind, as --env-module names it: "" for nevo's own; a file's path
    where --env-module imported a file; else its module's name (one defined in a script or a
    notebook has none that another process could import: "")."""
    name = kind.__module__
    if name == "nevo" or name.startswith("nevo.") or name == "__main__":
        return ""
    return next((path for path, mod in imported().items() if mod.__name__ == name), name)


def module_for(env: str, env_module: str) -> str:
    """env_module where the kind that takes --env env is declared by it, else "" (a run switched to
    one of nevo's tasks keeps no module it does not need)."""
    if not env_module:
        return ""
    load(env_module)
    return env_module if module_of(kind_of(EnvConfig(env=env))) == own_name(env_module) else ""


def settings_class(env: str, env_module: str = "") -> type:
    """The class of the task section for --env env (and --env-module): its kind's Settings, or
    EnvConfig. No kind is asked where none of those known has settings of its own."""
    if not env_module and all(k.Settings is None for k in _REGISTRY):
        return EnvConfig
    return kind_of(EnvConfig(env=env, env_module=env_module)).Settings or EnvConfig


def as_settings(env_cfg: EnvConfig, cls: type) -> EnvConfig:
    """env_cfg as an instance of cls (a kind's Settings, or EnvConfig): the fields they share kept,
    the others at cls's defaults."""
    if type(env_cfg) is cls:
        return env_cfg
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in dataclasses.asdict(env_cfg).items() if k in names})
