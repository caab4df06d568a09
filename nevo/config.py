"""Settings: frozen dataclasses, JSON load/save, overrides and range checks, knowing no environment.

Every setting is a field with a one-line help text (the command line's --help, nevo.cli, lists
them all). Values are checked once, in `validate`, and a bad value raises `ConfigError` with a
message naming the field and what is allowed (the command line prints it on one line).

One root, `Config`, for every algorithm: `algo` names it (ga and rs: the deep GA and random
search, Such et al. 2017, arXiv 1712.06567; es: OpenAI-ES, Salimans et al. 2017, arXiv 1703.03864;
ga-ns, ns-es, nsr-es, nsra-es: novelty search, Such et al. and Conti et al. 2018, arXiv 1712.06560),
and its settings are the env, net and run sections plus the section of its family (`ga`, `es`
or `ns`, `family_section`). The same Python code runs any of the seven by changing `algo`. The
presets, and the defaults each task and algorithm brings where the command line is silent, are
nevo.cli's.

Why one file of ~450 lines: each section's fields and their range checks (`_validate_ga`, ...)
belong together, so that a setting's help text, default and allowed values are read in one place.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import numbers
from dataclasses import dataclass, field, fields, replace

import numpy as np


class ConfigError(ValueError):
    """A setting with a value that is not allowed; the message names the field."""


def shown(value) -> str:
    """A value as a short phrase for a one-line error (what a user's function returned)."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


def raised(e: Exception) -> str:
    """An exception as "KeyError: 'pos'", on one line, for a one-line error."""
    text = " ".join(str(e).split())
    text = text if len(text) < 200 else text[:197] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def as_numbers(value) -> np.ndarray | None:
    """What a user's function returned as a numeric array (ints, floats or bools), or None where it
    is not numbers (a string, an object, a ragged list)."""
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged list
        return None
    return array if array.dtype.kind in "biuf" else None


def setting(default, help: str):
    """A dataclass field with its one-line help text."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class EnvConfig:
    env: str = setting(
        "atari",
        "atari (the game of --game), an Atari game id, or a gymnasium task with vector observations "
        "and discrete or bounded continuous actions (CartPole-v1, Acrobot-v1, Pendulum-v1, ...)",
    )
    game: str = setting("frostbite", "Atari game (ale-py ROM id, e.g. frostbite, space_invaders)")
    frame_cap: int = setting(20_000, "episode cap in game frames (frameskip included)")
    noop_max: int = setting(30, "each episode starts with 1..noop_max no-op steps, drawn from its seed")
    frameskip: int = setting(4, "game frames per agent step (rewards summed, max over last two)")
    examples: int = setting(
        100,
        "supervised tasks (mnist): training examples per evaluation, the mini-batch (our pick; the "
        "paper's is not known)",
    )


@dataclass(frozen=True)
class NetConfig:
    net: str = setting(
        "large",
        "network: large (Nature DQN, 4.05M params), small (1.0M), mlp (2 x 64 ReLU, vector tasks), "
        "mlp-tanh (2 x 64 tanh, OpenAI-ES's MuJoCo policy), mlp-tanh-256 (2 x 256 tanh) or deep "
        "(16 x 32 ReLU)",
    )
    vbn: int = setting(0, "virtual batch norm: reference batch size (0 = off; the ES preset: 128)")
    actions: str = setting(
        "auto",
        "auto (discrete actions: the argmax; a Box: tanh of each output) or bins (a Box: each component "
        "one of 10 evenly spaced values, the largest of 10 outputs, as Salimans et al. ran Hopper)",
    )


@dataclass(frozen=True)
class GAConfig:
    population: int = setting(1000, "individuals evaluated per generation (N)")
    truncation: int = setting(20, "top individuals that may be parents (T); 0 = random search")
    sigma: float = setting(0.002, "mutation power: child = parent + sigma * N(0, I)")
    elite_candidates: int = setting(10, "top individuals re-evaluated to pick the elite")
    validation_episodes: int = setting(30, "episodes each elite candidate is re-evaluated on")
    mutation: str = setting(
        "gaussian",
        "gaussian (parent + sigma*eps), or a safe mutation of Lehman et al. 2018: sm-r, sm-g-sum, "
        "sm-g-abs, sm-g-so (sigma*eps scaled by the parent's output sensitivity)",
    )
    experiences: int = setting(100, "safe mutations: observations kept per individual to measure it on")


@dataclass(frozen=True)
class ESConfig:
    population: int = setting(5000, "perturbations evaluated per generation (pairs x 2 when mirrored)")
    sigma: float = setting(0.02, "noise standard deviation: theta + sigma * eps")
    optimizer: str = setting("adam", "adam or sgd (with momentum)")
    lr: float = setting(0.01, "optimizer step size")
    l2: float = setting(0.005, "L2 weight decay coefficient")
    momentum: float = setting(0.9, "sgd momentum (adam: unused)")
    mirrored: int = setting(1, "1: antithetic pairs theta +- sigma*eps on one episode seed; 0: independent")
    fitness_shaping: str = setting("centered_ranks", "centered_ranks (ranks scaled to [-0.5, 0.5]) or none")
    validation_episodes: int = setting(30, "episodes theta is evaluated on after each update")
    validate_every: int = setting(
        1,
        "generations between validations of theta (its score, test accuracy and elite files); a run's "
        "last generation always validates",
    )
    obs_norm: int = setting(
        0, "1: observations normalised by running mean and std, folded into the first layer (MuJoCo)"
    )
    bucket: int = setting(
        0,
        "limited-perturbation ES (Zhang, Clune & Stanley 2017): 0 off; else the parameters in contiguous "
        "buckets of at most this many (the paper: 5,000), each perturbation noise in one bucket alone",
    )
    common_episodes: int = setting(
        0,
        "1: every individual of a generation plays one episode seed (on mnist: one shared mini-batch, "
        "mini-batch ES); 0: one per perturbation (on mnist: each its own subset, NMB-ES)",
    )
    grad_corr: int = setting(
        0, "1: log es/grad_corr, the correlation of g_ES with the batch's true gradient (a backward pass)"
    )


@dataclass(frozen=True)
class NSConfig:
    population: int = setting(1000, "individuals (GA-NS) or perturbations (ES family) per generation")
    sigma: float = setting(0.002, "mutation power (GA-NS) or ES noise std (ES family: 0.02 unless set)")
    truncation: int = setting(20, "GA-NS: top individuals by novelty that may be parents")
    k: int = setting(
        10, "novelty: mean distance to the k nearest behaviours (archive + population; Conti et al.: 10)"
    )
    archive_prob: float = setting(0.01, "GA-NS: chance that each individual's behaviour joins the archive")
    meta_population: int = setting(3, "ES family: agents, the one to update drawn with probability ~ novelty")
    optimizer: str = setting("adam", "ES family: adam or sgd (with momentum)")
    lr: float = setting(0.01, "ES family: optimizer step size")
    l2: float = setting(0.005, "ES family: L2 weight decay coefficient")
    momentum: float = setting(0.9, "ES family: sgd momentum")
    mirrored: int = setting(1, "ES family: 1 antithetic pairs on one episode seed; 0 independent")
    reward_weight: float = setting(
        0.5, "NSR-ES: weight of reward's ranks vs novelty's; NSRA-ES: its start (1.0 unless set)"
    )
    nsra_patience: int = setting(
        10, "NSRA-ES: generations without a better reward before the weight drops (our pick)"
    )
    nsra_delta: float = setting(0.05, "NSRA-ES: step of the reward weight (Conti et al.: 0.05)")
    validation_episodes: int = setting(1, "ES family: episodes the updated agent is evaluated on")
    obs_norm: int = setting(0, "ES family: 1 normalises observations as OpenAI-ES does (as run_es's)")
    mutation: str = setting("gaussian", "GA-NS: gaussian, sm-r, sm-g-sum, sm-g-abs or sm-g-so (as run_ga's)")
    experiences: int = setting(100, "GA-NS, safe mutations: observations kept per individual")


@dataclass(frozen=True)
class SGDConfig:
    optimizer: str = setting("adam", "adam or sgd (with momentum, as ES's)")
    lr: float = setting(0.001, "step size (our pick: Zhang et al. 2017 do not say theirs)")
    momentum: float = setting(0.9, "sgd momentum (adam: unused)")
    l2: float = setting(0.0002, "L2 weight decay coefficient (Zhang et al.'s 99% net: 0.0002)")
    proxy_rho: float = setting(
        0.0,
        "0: SGD on the true gradient; in (0, 1): the SGD proxy g_True + m g_Noise, whose correlation "
        "with g_True is this (Zhang et al. 2017: 0.04 tracks ES with 10,000 offspring)",
    )
    validate_every: int = setting(100, "iterations between evaluations of theta on the whole test set")


@dataclass(frozen=True)
class RunConfig:
    seed: int = setting(0, "run seed: fixes every random choice of the run")
    frame_budget: int = setting(1_000_000_000, "stop after this many game frames (all episodes)")
    noise_table_size: int = setting(250_000_000, "float32 N(0,1) numbers in the shared noise table")
    noise_seed: int = setting(42, "seed of the shared noise table")
    env_slots: int = setting(0, "episodes run at once (emulators); 0 = chosen from the machine")
    emulators_per_group: int = setting(
        0, "emulators per group; 0 = env_slots/4 (overlap), env_slots/32 (lockstep)"
    )
    pipeline: str = setting(
        "auto", "overlap (a group's forward runs while others step), lockstep, or auto (overlap on GPU)"
    )
    threads: int = setting(
        0,
        "emulator threads per group (at most its emulators); gymnasium tasks: threads stepping the envs; "
        "0 = one per core (gymnasium: 1 or one per core, whichever a short timing finds faster)",
    )
    out_dir: str = setting("runs", "folder under which run folders are made")
    device: str = setting(
        "auto", "inference backend: auto (cuda if a GPU is present), cpu (numba) or cuda (numba.cuda)"
    )


ALGOS = ("ga", "rs", "es", "ga-ns", "ns-es", "nsr-es", "nsra-es")
NS_ALGOS = ("ga-ns", "ns-es", "nsr-es", "nsra-es")  # novelty search: its section is `ns`
NS_ES_FAMILY = ("ns-es", "nsr-es", "nsra-es")  # novelty search's ES algorithms
GRADIENT = ("sgd",)  # the SGD baseline of ES against SGD (nevo.runs.sgd): gradients, no evaluations
# section -> the algorithms it serves
FAMILIES = {"ga": ("ga", "rs"), "es": ("es",), "ns": NS_ALGOS, "sgd": GRADIENT}


@dataclass(frozen=True)
class Config:
    """Every setting of a run: the task, the net, each family's section, the run's own."""

    env: EnvConfig = EnvConfig()
    net: NetConfig = NetConfig()
    ga: GAConfig = GAConfig()
    es: ESConfig = ESConfig()
    ns: NSConfig = NSConfig()
    sgd: SGDConfig = SGDConfig()
    run: RunConfig = RunConfig()
    preset: str = "paper"
    algo: str = "ga"


def family_section(algo: str) -> str:
    """The section of an algorithm's settings: ga (ga, rs), es, or ns (the novelty ones)."""
    for name, algos in FAMILIES.items():
        if algo in algos:
            return name
    raise ConfigError(f"--algo: got {algo!r}, allowed: {', '.join(ALGOS + GRADIENT)}")


def section(cfg):
    """The settings section of cfg's algorithm (cfg.ga, cfg.es or cfg.ns)."""
    return getattr(cfg, family_section(cfg.algo))


def groups(algo: str = "ga") -> tuple[str, ...]:
    """The setting groups an algorithm reads, e.g. ("env", "net", "ga", "run")."""
    return ("env", "net", family_section(algo), "run")


def flag(name: str) -> str:
    """The command-line flag of a field name."""
    return "--" + name.replace("_", "-")


def all_fields(algo: str = "ga"):
    """(group, field) for every setting an algorithm reads, in --help order."""
    for group in groups(algo):
        for f in fields(getattr(Config(), group)):
            yield group, f


def to_dict(cfg) -> dict:
    """The settings cfg's algorithm reads (the other families' sections are left out), as JSON."""
    return {**{g: dataclasses.asdict(getattr(cfg, g)) for g in groups(cfg.algo)}, "preset": cfg.preset,
            "algo": cfg.algo}  # fmt: skip


def from_dict(d: dict):
    """Rebuild a config from `to_dict` output; unknown keys are an error. Run folders written
    before the one root said {"algo": "ns", "ns": {"algo": "nsr-es", ...}}: read as nsr-es."""
    d = dict(d)
    if d.get("algo") == "ns":
        ns = dict(d.get("ns", {}))
        d["algo"], d["ns"] = ns.pop("algo", "ga-ns"), ns
    algo = d.get("algo", "ga")
    kwargs = {}
    defaults = Config()
    for group in groups(algo):
        cls = type(getattr(defaults, group))
        values = dict(d.get(group, {}))
        if group == "run" and "batch_size" in values:  # its name in run folders before 2026-11-22
            values["emulators_per_group"] = values.pop("batch_size")
        kinds = {f.name: f.type for f in fields(cls)}
        unknown = set(values) - set(kinds)
        if unknown:
            raise ConfigError(f"config: unknown {group} settings {sorted(unknown)}")
        kwargs[group] = cls(**{name: typed(name, value, kinds[name]) for name, value in values.items()})
    return Config(**kwargs, preset=d.get("preset", "paper"), algo=algo)


def typed(name: str, value, kind: str):
    """value as a setting of type kind ("int", "float" or "str"), or ConfigError naming its flag.
    An int where a float belongs is fine (JSON and Python write 1 for 1.0), as are NumPy's
    numbers; a bool is no number here."""
    ok = {"int": numbers.Integral, "float": numbers.Real, "str": str}[kind]
    if not isinstance(value, ok) or isinstance(value, (bool, np.bool_)):
        article = "an" if kind == "int" else "a"
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {article} {kind}")
    return {"int": int, "float": float, "str": str}[kind](value)


def save(cfg: Config, path: str, extra: dict | None = None) -> None:
    """Write the config (and extra facts such as the git commit) as JSON."""
    d = to_dict(cfg)
    if extra:
        d.update(extra)
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")


class DamagedFile(ConfigError):
    """A run file that cannot be read as what it should be; the message is one line naming it."""


def read_json(path: str) -> dict:
    """A run folder's JSON file (config.json, elite.json, ...); DamagedFile naming it if it is
    not a JSON object."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DamagedFile(f"{path}: damaged, not valid JSON ({' '.join(str(e).split())})") from None
    if not isinstance(data, dict):
        raise DamagedFile(f"{path}: damaged, a JSON {type(data).__name__} where an object belongs")
    return data


def load(path: str):
    """The config of a run folder's config.json; DamagedFile naming the file if it is damaged."""
    d = read_json(path)
    try:
        return _from_saved(d)
    except (TypeError, KeyError, ValueError) as e:
        raise DamagedFile(f"{path}: damaged, not nevo settings ({' '.join(str(e).split())})") from None


def _from_saved(d: dict):
    """The settings of a config.json (which also holds facts: the git commit, shapes, ...): every
    section of Config, whatever sections it has, so that none is forgotten."""
    names = {f.name for f in fields(Config)}
    return from_dict({k: v for k, v in d.items() if k in names})


def override(cfg, values: dict):
    """Return cfg with {field name: value} replaced, each name looked up in the groups of cfg's
    algorithm (population, sigma, ...: its family's section)."""
    by_group = {g: {} for g in groups(cfg.algo)}
    lookup = {f.name: (g, f.type) for g, f in all_fields(cfg.algo)}
    for name, value in values.items():
        if name not in lookup:
            close = difflib.get_close_matches(name, list(lookup), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {name!r} for {cfg.algo}{hint}")
        group, kind = lookup[name]
        by_group[group][name] = typed(name, value, kind)
    return replace(cfg, **{g: replace(getattr(cfg, g), **v) for g, v in by_group.items() if v})


def require(ok: bool, name: str, allowed: str, value) -> None:
    """ConfigError naming the setting's flag and what is allowed, unless ok."""
    if not ok:
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {allowed}")


def mutation_of(cfg):
    """The mutation operator (nevo.genomes.operators.Mutation) of the GA's (or GA-NS's) --mutation;
    the ES families' is Gaussian."""
    from nevo.genomes.operators import GAUSSIAN, mutation

    if cfg.algo not in ("ga", "rs", "ga-ns"):
        return GAUSSIAN
    try:
        return mutation(section(cfg).mutation)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def obs_norm_of(cfg) -> bool:
    """Whether an ES run (or one of novelty search's ES family) normalises observations
    (--obs-norm 1); other runs do not."""
    return bool(section(cfg).obs_norm) if cfg.algo in ("es", *NS_ES_FAMILY) else False


def _tanh(layers) -> bool:
    return any(item[0] == "dense" and item[2:] == ("tanh",) for item in layers)


def vbn_conflict(cfg) -> str | None:
    """Why virtual batch norm cannot fold into cfg's net ("with a safe mutation (...)"), or None
    where it can (a net name that is no net: None, validate says so)."""
    from nevo.nets import layers_of

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


def validate(cfg):
    """Check every value's range once; raise ConfigError naming the field and what is allowed.
    What depends on the environment (a game's name, a net that needs images) its task checks
    (nevo.tasks)."""
    from nevo.nets import NAMED_LAYERS, layers_of

    e, n, r = cfg.env, cfg.net, cfg.run
    require(e.frame_cap > 0, "frame_cap", "an integer > 0", e.frame_cap)
    require(e.noop_max >= 1, "noop_max", "an integer >= 1", e.noop_max)
    require(e.frameskip >= 1, "frameskip", "an integer >= 1", e.frameskip)
    require(e.examples >= 1, "examples", "an integer >= 1", e.examples)
    try:
        layers = layers_of(n.net)
    except ValueError:
        layers = None
    allowed = f"{', '.join(NAMED_LAYERS)}, or dense:W1,W2,... / dense-tanh:W1,W2,... (hidden widths)"
    require(layers is not None, "net", allowed, n.net)
    require(n.vbn == 0 or n.vbn >= 2, "vbn", "0 (off) or a reference batch size >= 2", n.vbn)
    require(n.actions in ("auto", "bins"), "actions", "auto or bins", n.actions)
    mutation = mutation_of(cfg)
    conflict = vbn_conflict(cfg)
    require(n.vbn == 0 or conflict is None, "vbn", f"0 {conflict}", n.vbn)
    ok = "gaussian with the {} net (the safe mutations' gradients are ReLU nets')"
    require(not mutation.safe or not _tanh(layers), "mutation", ok.format(n.net), mutation.name)
    require(cfg.algo in ALGOS + GRADIENT, "algo", ", ".join(ALGOS + GRADIENT), cfg.algo)
    if cfg.algo == "sgd":
        _validate_sgd(cfg.sgd)
    elif cfg.algo == "es":
        _validate_es(cfg.es)
    elif cfg.algo in NS_ALGOS:
        _validate_ns(cfg.ns, cfg.algo)
    else:
        _validate_ga(cfg.ga)
    _validate_run(r)
    return cfg


def _validate_es(s) -> None:
    require(s.population >= 2, "population", "an integer >= 2", s.population)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    _validate_es_step(s)
    require(s.fitness_shaping in SHAPINGS, "fitness_shaping", ", ".join(SHAPINGS), s.fitness_shaping)
    require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)
    require(s.validate_every >= 1, "validate_every", "an integer >= 1", s.validate_every)
    require(s.obs_norm in (0, 1), "obs_norm", "0 or 1", s.obs_norm)
    require(s.common_episodes in (0, 1), "common_episodes", "0 or 1", s.common_episodes)
    require(s.bucket >= 0, "bucket", "0 (off) or a bucket size >= 1", s.bucket)
    require(s.grad_corr in (0, 1), "grad_corr", "0 or 1", s.grad_corr)


def _validate_sgd(s) -> None:
    require(s.optimizer in OPTIMIZERS, "optimizer", ", ".join(OPTIMIZERS), s.optimizer)
    require(s.lr > 0, "lr", "a number > 0", s.lr)
    require(0 <= s.momentum < 1, "momentum", "a number in [0, 1)", s.momentum)
    require(s.l2 >= 0, "l2", "a number >= 0", s.l2)
    require(0 <= s.proxy_rho < 1, "proxy_rho", "0 (SGD) or a correlation in (0, 1)", s.proxy_rho)
    require(s.validate_every >= 1, "validate_every", "an integer >= 1", s.validate_every)


def _validate_es_step(s) -> None:
    """The ES settings that OpenAI-ES and the novelty-search ES family share (ESConfig, NSConfig)."""
    require(s.mirrored in (0, 1), "mirrored", "0 or 1", s.mirrored)
    require(
        not s.mirrored or s.population % 2 == 0,
        "population",
        "an even number with --mirrored 1 (pairs theta +- sigma*eps)",
        s.population,
    )
    require(s.optimizer in OPTIMIZERS, "optimizer", ", ".join(OPTIMIZERS), s.optimizer)
    require(s.lr > 0, "lr", "a number > 0", s.lr)
    require(s.l2 >= 0, "l2", "a number >= 0", s.l2)
    require(0 <= s.momentum < 1, "momentum", "a number in [0, 1)", s.momentum)


def _validate_ns(s, algo: str) -> None:
    require(s.population >= 2, "population", "an integer >= 2", s.population)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    require(1 <= s.k, "k", "an integer >= 1", s.k)
    require(0 <= s.archive_prob <= 1, "archive_prob", "a probability in [0, 1]", s.archive_prob)
    require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)
    if algo == "ga-ns":
        require(
            1 <= s.truncation <= s.population, "truncation", f"1 .. population ({s.population})", s.truncation
        )
        _validate_mutation(s, 1)
        require(s.obs_norm == 0, "obs_norm", "0 for GA-NS (observation normalisation is the ES family's)",
                s.obs_norm)  # fmt: skip
        return
    require(s.obs_norm in (0, 1), "obs_norm", "0 or 1", s.obs_norm)
    only = "gaussian (safe mutations are GA-NS's, not the ES family's)"
    require(s.mutation == "gaussian", "mutation", only, s.mutation)  # the setting's text, as given
    require(s.meta_population >= 1, "meta_population", "an integer >= 1", s.meta_population)
    _validate_es_step(s)
    require(0 <= s.reward_weight <= 1, "reward_weight", "a number in [0, 1]", s.reward_weight)
    require(s.nsra_patience >= 1, "nsra_patience", "an integer >= 1", s.nsra_patience)
    require(0 < s.nsra_delta <= 1, "nsra_delta", "a number in (0, 1]", s.nsra_delta)


def _validate_ga(g) -> None:
    require(g.population >= 2, "population", "an integer >= 2", g.population)
    require(
        0 <= g.truncation <= g.population,
        "truncation",
        f"0 (random search) .. population ({g.population})",
        g.truncation,
    )
    require(g.sigma > 0, "sigma", "a number > 0", g.sigma)
    require(
        1 <= g.elite_candidates <= g.population,
        "elite_candidates",
        f"1 .. population ({g.population})",
        g.elite_candidates,
    )
    require(g.validation_episodes >= 1, "validation_episodes", "an integer >= 1", g.validation_episodes)
    _validate_mutation(g, g.truncation)


def _validate_mutation(g, truncation: int) -> None:
    """--mutation and --experiences of the GA and GA-NS."""
    from nevo.genomes.operators import NAMES, mutation

    require(g.mutation in NAMES, "mutation", ", ".join(NAMES), g.mutation)
    require(g.experiences >= 1, "experiences", "an integer >= 1", g.experiences)
    if mutation(g.mutation).safe:
        require(truncation > 0, "mutation", "gaussian for random search (it has no parents)", g.mutation)


def _validate_run(r) -> None:
    require(r.frame_budget > 0, "frame_budget", "an integer > 0 (game frames)", r.frame_budget)
    require(r.seed >= 0, "seed", "an integer >= 0", r.seed)
    require(r.noise_seed >= 0, "noise_seed", "an integer >= 0", r.noise_seed)
    require(r.env_slots >= 0, "env_slots", "0 (auto) or an integer >= 1", r.env_slots)
    require(r.threads >= 0, "threads", "0 (auto) or an integer >= 1", r.threads)
    require(
        r.emulators_per_group >= 0,
        "emulators_per_group",
        "0 (auto) or an integer >= 1",
        r.emulators_per_group,
    )
    require(r.pipeline in PIPELINES, "pipeline", ", ".join(PIPELINES), r.pipeline)
    require(r.device in ("auto", "cpu", "cuda"), "device", "auto, cpu or cuda", r.device)


def check_noise_table(cfg, n_params: int) -> None:
    """The noise table must hold at least one parameter vector's worth of numbers."""
    size = cfg.run.noise_table_size
    require(
        size >= n_params,
        "noise_table_size",
        f">= the net's parameter count ({n_params:,})",
        size,
    )


# Settings that do not change a run's results, so a resumed run may set them anew.
RESUMABLE = {"frame_budget", "env_slots", "emulators_per_group", "pipeline", "threads", "device", "out_dir"}
PIPELINES = ("auto", "overlap", "lockstep")
OPTIMIZERS = ("adam", "sgd")
SHAPINGS = ("centered_ranks", "none")
