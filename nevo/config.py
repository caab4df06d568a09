"""Settings: one root, `Config`, for every algorithm, and its JSON load/save, overrides and range
checks, knowing no environment.

A run's settings are the task's (`env`), the net's (`net`) and the run's own (`run`) sections,
nevo.settings', plus the section its algorithm declares (`settings`: the deep GA's and random
search's, Such et al. 2017, arXiv 1712.06567; OpenAI-ES's, Salimans et al. 2017, arXiv
1703.03864; novelty search's, Such et al. and Conti et al. 2018, arXiv 1712.06560; the SGD
baseline's, Zhang, Clune & Stanley 2017; or one's own: nevo.algos.declaration). `algo` names the
algorithm, and `algo_module` the module of one's own that declares it. Which section, its
fields, its defaults, its checks, its name in config.json: each is read from the algorithm's
declaration, never listed here, so that saving, loading, the command line's flags and the checks
cover every section alike.

Every value is checked once, in `validate`, and a bad value raises `ConfigError` with a message
naming the field and what is allowed (the command line prints it on one line). The presets, and
the defaults each task brings where the command line is silent, are nevo.cli's.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from dataclasses import dataclass, fields, replace
from typing import Any

from nevo.algos import DEFAULT, declaration, declared
from nevo.algos.es import ESConfig
from nevo.algos.ga import GAConfig
from nevo.algos.ns import BEFORE_OWN_SECTIONS
from nevo.algos.ns_settings import GANSConfig, NoveltyConfig, NSESConfig
from nevo.algos.sgd import SGDConfig
from nevo.genomes.operators import mutation
from nevo.kinds import as_settings, module_for, settings_class
from nevo.nets import NAMED_LAYERS, layers_of
from nevo.nets.half import CHOICES as WEIGHT_CHOICES
from nevo.nets.half import format_of
from nevo.settings import (  # noqa: F401 (the settings' primitives, also here for nevo.config's readers)
    OPTIMIZERS,
    PIPELINES,
    RESUMABLE,
    SHAPINGS,
    STARTS,
    SWITCHES,
    VALIDATION_STARTS,
    CannotImport,
    ConfigError,
    DamagedFile,
    EnvConfig,
    NetConfig,
    RunConfig,
    as_numbers,
    flag,
    own_name,
    raised,
    read_json,
    require,
    setting,
    shown,
    typed,
    validate_run,
)

__all__ = ["Config", "ESConfig", "GAConfig", "GANSConfig", "NSESConfig", "NoveltyConfig", "SGDConfig"]


@dataclass(frozen=True)
class Config:
    """Every setting of a run: the task, the net, the algorithm's own section, the run's.

    settings: an instance of the dataclass the algorithm declares (None: its defaults); it must
    be that algorithm's (a GA's settings with algo="es" is a ConfigError)."""

    env: EnvConfig = EnvConfig()
    net: NetConfig = NetConfig()
    settings: Any = None
    run: RunConfig = RunConfig()
    preset: str = "paper"
    algo: str = DEFAULT
    algo_module: str = ""  # a module of one's own that declares algo: a .py file or a module name

    def __post_init__(self):
        object.__setattr__(self, "algo_module", own_name(self.algo_module))
        kind = declaration(self.algo, self.algo_module).settings
        if self.settings is None:
            object.__setattr__(self, "settings", kind())
        elif type(self.settings) is not kind:
            got = type(self.settings).__name__
            raise ConfigError(f"settings: a {got} for {self.algo!r}, whose settings are a {kind.__name__}")

    def __reduce__(self):
        """Pickled as its config.json's data, rebuilt through from_dict: another process (a
        cluster's worker) finds an algorithm of one's own by its module, as --resume does."""
        return from_dict, (to_dict(self),)

    def with_algo(self, algo: str, algo_module: str = "") -> Config:
        """This config for another algorithm: a section of the same kind kept whole (ga and rs);
        of another kind (ga-ns and ns-es), that algorithm's defaults, with the values this one
        set (those unlike its own kind's defaults) where it has the same setting: a preset's
        population, say."""
        kind = declaration(algo, algo_module).settings
        settings = self.settings
        if type(settings) is not kind:
            mine, plain = dataclasses.asdict(settings), dataclasses.asdict(type(settings)())
            theirs = {f.name for f in fields(kind)}
            settings = kind(**{n: v for n, v in mine.items() if n in theirs and v != plain[n]})
        return replace(self, algo=algo, algo_module=algo_module, settings=settings)


def section_name(algo: str, module: str = "") -> str:
    """The name of an algorithm's section in config.json (ga, es, ns, sgd, or its own)."""
    return declaration(algo, module).section


def groups(algo: str = DEFAULT, module: str = "") -> tuple[str, ...]:
    """The setting groups an algorithm reads, e.g. ("env", "net", "ga", "run")."""
    return ("env", "net", section_name(algo, module), "run")


def part(cfg, group: str):
    """cfg's group of settings by its name in groups() (its algorithm's section: cfg.settings)."""
    return getattr(cfg, group) if group in ("env", "net", "run") else cfg.settings


def all_fields(algo: str = DEFAULT, module: str = "", env: type = EnvConfig):
    """(group, field) for every setting an algorithm reads, in --help order; env: the class of the
    task's section (a kind's own Settings: nevo.kinds)."""
    kinds = {"env": env, "net": NetConfig, "run": RunConfig}
    seen = {}
    for group in groups(algo, module):
        for f in fields(kinds.get(group) or declaration(algo, module).settings):
            if f.name in seen:  # (a kind's or an algorithm's own setting named as another section's)
                raise ConfigError(f"settings: {f.name!r} is a setting of both the {seen[f.name]} and the "
                                  f"{group} sections; one of one's own needs a name of its own")  # fmt: skip
            seen[f.name] = group
            yield group, f


def to_dict(cfg) -> dict:
    """The settings cfg's algorithm reads, as JSON (and the module that declares it, where it is
    one's own)."""
    d = {g: dataclasses.asdict(part(cfg, g)) for g in groups(cfg.algo, cfg.algo_module)}
    d.update(preset=cfg.preset, algo=cfg.algo)
    return d | ({"algo_module": cfg.algo_module} if cfg.algo_module else {})


def from_dict(d: dict):
    """Rebuild a config from `to_dict` output; unknown keys are an error. Run folders written
    before the one root said {"algo": "ns", "ns": {"algo": "nsr-es", ...}}: read as nsr-es."""
    d = dict(d)
    if d.get("algo") == "ns":
        ns = dict(d.get("ns", {}))
        d["algo"], d["ns"] = ns.pop("algo", BEFORE_OWN_SECTIONS), ns
    algo, module = d.get("algo", DEFAULT), d.get("algo_module", "")
    env = dict(d.get("env", {}))
    kinds = {"env": settings_class(env.get("env", "atari"), env.get("env_module", "")), "net": NetConfig,
             "run": RunConfig}  # fmt: skip
    parts = {}
    for group in groups(algo, module):
        cls = kinds.get(group) or declaration(algo, module).settings
        values = dict(d.get(group, {}))
        if group not in kinds:  # an older run folder's settings this section no longer has
            values = {k: v for k, v in values.items() if k not in declaration(algo, module).retired}
        if group == "run" and "batch_size" in values:  # its name in run folders before 2026-11-22
            values["emulators_per_group"] = values.pop("batch_size")
        types = {f.name: f.type for f in fields(cls)}
        unknown = set(values) - set(types)
        if unknown:
            raise ConfigError(f"config: unknown {group} settings {sorted(unknown)}")
        parts[group if group in kinds else "settings"] = cls(
            **{name: typed(name, value, types[name]) for name, value in values.items()}
        )
    return Config(**parts, preset=d.get("preset", "paper"), algo=algo, algo_module=module)


def save(cfg: Config, path: str, extra: dict | None = None) -> None:
    """Write the config (and extra facts such as the git commit) as JSON."""
    d = to_dict(cfg)
    if extra:
        d.update(extra)
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")


def load(path: str):
    """The config of a run folder's config.json; DamagedFile naming the file if it is damaged."""
    d = read_json(path)
    try:
        return _from_saved(d)
    except CannotImport as e:  # the folder is whole: the module it names is missing here
        raise ConfigError(f"{path}: {e}; read the run where its module can be imported") from None
    except (TypeError, KeyError, ValueError) as e:
        raise DamagedFile(f"{path}: damaged, not nevo settings ({' '.join(str(e).split())})") from None


def _from_saved(d: dict):
    """The settings of a config.json (which also holds facts: the git commit, shapes, ...): the
    common sections, the algorithm's own (named by its declaration) and the names of both."""
    algo, module = d.get("algo", DEFAULT), d.get("algo_module", "")
    if algo == "ns":  # a run folder from before the one root: from_dict reads it
        algo = dict(d.get("ns", {})).get("algo", BEFORE_OWN_SECTIONS)
    names = {"env", "net", "run", "preset", "algo", "algo_module", section_name(algo, module)}
    d = {k: v for k, v in d.items() if k in names} | ({"ns": d["ns"]} if "ns" in d else {})
    d["net"] = {"weights": "fp32", **d.get("net", {})}  # folders from before --weights read fp32
    d["env"] = {"start": "vector", **d.get("env", {})}  # folders from before --start: the vector env's
    return from_dict(d)


def weights_resolved(cfg):
    """cfg with --weights auto replaced by the format it means for cfg's net (fp16 on large and
    small, nevo.nets.half.format_of), so that config.json names what the run's forward read."""
    if cfg.net.weights != "auto":
        return cfg
    return replace(cfg, net=replace(cfg.net, weights=format_of(cfg.net.weights, cfg.net.net)))


def override(cfg, values: dict):
    """Return cfg with {field name: value} replaced, each name looked up in the groups of cfg's
    algorithm (population, sigma, ...: its own section)."""
    # the task's section as its kind has it: where values name another task, that kind's class (and
    # no module of one's own that the new task's kind does not come from)
    if "env" in values and "env_module" not in values and cfg.env.env_module:
        values = {**values, "env_module": module_for(values["env"], cfg.env.env_module)}
    env = settings_class(values.get("env", cfg.env.env), values.get("env_module", cfg.env.env_module))
    cfg = replace(cfg, env=as_settings(cfg.env, env))
    # each name's attribute of cfg: env, net, run, or settings (the algorithm's own section)
    lookup = {f.name: (g if g in ("env", "net", "run") else "settings", f.type)
              for g, f in all_fields(cfg.algo, cfg.algo_module, env)}  # fmt: skip
    changed = {}
    for name, value in values.items():
        if name not in lookup:
            close = difflib.get_close_matches(name, list(lookup), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {name!r} for {cfg.algo}{hint}")
        attribute, kind = lookup[name]
        changed.setdefault(attribute, {})[name] = typed(name, value, kind)
    return replace(cfg, **{a: replace(getattr(cfg, a), **v) for a, v in changed.items()})


def mutation_of(cfg):
    """The mutation operator (nevo.genomes.operators.Mutation) of the algorithm's --mutation, where
    its settings have one (the GA's, GA-NS's); Gaussian for the others."""

    try:
        return mutation(getattr(cfg.settings, "mutation", "gaussian"))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def obs_norm_of(cfg) -> bool:
    """Whether a run normalises observations (--obs-norm 1, where its algorithm's settings have it:
    ES and novelty search's ES family; validate holds GA-NS's at 0)."""
    return bool(getattr(cfg.settings, "obs_norm", 0))


def _tanh(layers) -> bool:
    return any(item[0] == "dense" and item[2:] == ("tanh",) for item in layers)


def vbn_conflict(cfg) -> str | None:
    """Why virtual batch norm cannot fold into cfg's net ("with a safe mutation (...)"), or None
    where it can (a net name that is no net: None, validate says so)."""

    try:
        tanh = _tanh(layers_of(cfg.net.net))
    except ValueError:
        return None
    if mutation_of(cfg).safe:
        return "with a safe mutation (its gradients are taken without virtual batch norm's fold)"
    if tanh:
        return f"with the {cfg.net.net} net (its fold assumes ReLU units)"
    if obs_norm_of(cfg):
        return "with --obs-norm 1 (one fold of the weights at a time)"
    return None


def validate(cfg) -> None:
    """Check every value's range once; raise ConfigError naming the field and what is allowed.
    What depends on the environment (a game's name, a net that needs images) its task checks
    (nevo.tasks)."""

    e, n, r = cfg.env, cfg.net, cfg.run
    require(e.frame_cap > 0, "frame_cap", "an integer > 0", e.frame_cap)
    require(e.noop_max >= 1, "noop_max", "an integer >= 1", e.noop_max)
    require(e.start in STARTS, "start", ", ".join(STARTS), e.start)
    require(e.frameskip >= 1, "frameskip", "an integer >= 1", e.frameskip)
    require(0.0 <= e.sticky < 1.0, "sticky", "a probability in [0, 1)", e.sticky)
    allowed = " or ".join(VALIDATION_STARTS)
    require(e.validation_starts in VALIDATION_STARTS, "validation_starts", allowed, e.validation_starts)
    require(e.examples >= 1, "examples", "an integer >= 1", e.examples)
    try:
        layers = layers_of(n.net)
    except ValueError:
        layers = None
    allowed = f"{', '.join(NAMED_LAYERS)}, or dense:W1,W2,... / dense-tanh:W1,W2,... (hidden widths)"
    require(layers is not None, "net", allowed, n.net)
    require(n.vbn == 0 or n.vbn >= 2, "vbn", "0 (off) or a reference batch size >= 2", n.vbn)
    require(n.actions in ("auto", "bins"), "actions", "auto or bins", n.actions)
    allowed = f"{', '.join(WEIGHT_CHOICES[:-1])} or {WEIGHT_CHOICES[-1]}"
    require(n.weights in WEIGHT_CHOICES, "weights", allowed, n.weights)
    mutation = mutation_of(cfg)
    conflict = vbn_conflict(cfg)
    require(n.vbn == 0 or conflict is None, "vbn", f"0 {conflict}", n.vbn)
    ok = "gaussian with the {} net (the safe mutations' gradients are ReLU nets')"
    require(not mutation.safe or not _tanh(layers), "mutation", ok.format(n.net), mutation.name)
    declared(cfg).validate(cfg.settings, cfg.algo)
    validate_run(r)


def check_noise_table(cfg, n_params: int) -> None:
    """The noise table must hold at least one parameter vector's worth of numbers."""
    size = cfg.run.noise_table_size
    require(
        size >= n_params,
        "noise_table_size",
        f">= the net's parameter count ({n_params:,})",
        size,
    )
