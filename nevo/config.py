"""Settings: frozen dataclasses, the paper's presets, JSON load/save, CLI parsing, validation.

Every setting is a field with a one-line help text; `--help` lists them all. Values are
checked once, in `validate`, and a bad value raises `ConfigError` with a message naming the
field and what is allowed (the CLI prints it on one line, without a traceback).

Two roots, one per family of algorithms, each with its own presets: `Config` (the deep GA and
random search, Such et al. 2017, arXiv 1712.06567) and `ESRunConfig` (OpenAI-ES, Salimans et al.
2017, arXiv 1703.03864), both as the reference GPU code configures them; see ../shared/DESIGN.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field, fields, replace


class ConfigError(ValueError):
    """A setting with a value that is not allowed; the message names the field."""


def setting(default, help: str):
    """A dataclass field with its one-line help text."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class EnvConfig:
    env: str = setting(
        "atari",
        "atari (the game of --game), an Atari game id, or a gymnasium task with vector observations "
        "and discrete actions (CartPole-v1, Acrobot-v1, MountainCar-v0, LunarLander-v3)",
    )
    game: str = setting("frostbite", "Atari game (ale-py ROM id, e.g. frostbite, space_invaders)")
    frame_cap: int = setting(20_000, "episode cap in game frames (frameskip included)")
    noop_max: int = setting(30, "each episode starts with 1..noop_max no-op steps, drawn from its seed")
    frameskip: int = setting(4, "game frames per agent step (rewards summed, max over last two)")


@dataclass(frozen=True)
class NetConfig:
    net: str = setting(
        "large", "network: large (Nature DQN, 4.05M params), small (1.0M) or mlp (2 x 64, vector tasks)"
    )
    vbn: int = setting(0, "virtual batch norm: reference batch size (0 = off; the ES preset: 128)")


@dataclass(frozen=True)
class GAConfig:
    population: int = setting(1000, "individuals evaluated per generation (N)")
    truncation: int = setting(20, "top individuals that may be parents (T); 0 = random search")
    sigma: float = setting(0.002, "mutation power: child = parent + sigma * N(0, I)")
    elite_candidates: int = setting(10, "top individuals re-evaluated to pick the elite")
    validation_episodes: int = setting(30, "episodes each elite candidate is re-evaluated on")


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


@dataclass(frozen=True)
class NSConfig:
    algo: str = setting("ga-ns", "ga-ns (Such et al.), ns-es, nsr-es or nsra-es (Conti et al.)")
    population: int = setting(1000, "individuals (GA-NS) or perturbations (ES family) per generation")
    sigma: float = setting(0.002, "mutation power (GA-NS) or ES noise std (ES family: 0.02 unless set)")
    truncation: int = setting(20, "GA-NS: top individuals by novelty that may be parents")
    k: int = setting(10, "novelty: mean distance to the k nearest behaviours (archive + population)")
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
    nsra_patience: int = setting(10, "NSRA-ES: generations without a better reward before the weight drops")
    nsra_delta: float = setting(0.05, "NSRA-ES: step of the reward weight")
    validation_episodes: int = setting(1, "ES family: episodes the updated agent is evaluated on")


@dataclass(frozen=True)
class RunConfig:
    seed: int = setting(0, "run seed: fixes every random choice of the run")
    frame_budget: int = setting(1_000_000_000, "stop after this many game frames (all episodes)")
    noise_table_size: int = setting(250_000_000, "float32 N(0,1) numbers in the shared noise table")
    noise_seed: int = setting(42, "seed of the shared noise table")
    env_slots: int = setting(0, "episodes run at once (emulators); 0 = chosen from the machine")
    batch_size: int = setting(0, "emulators per group; 0 = env_slots/4 (overlap), env_slots/32 (lockstep)")
    pipeline: str = setting(
        "auto", "overlap (a group's forward runs while others step), lockstep, or auto (overlap on GPU)"
    )
    threads: int = setting(0, "emulator threads per group (at most its emulators); 0 = one per core")
    out_dir: str = setting("runs", "folder under which run folders are made")
    device: str = setting(
        "auto", "inference backend: auto (cuda if a GPU is present), cpu (numba) or cuda (numba.cuda)"
    )


@dataclass(frozen=True)
class Config:
    env: EnvConfig = EnvConfig()
    net: NetConfig = NetConfig()
    ga: GAConfig = GAConfig()
    run: RunConfig = RunConfig()
    preset: str = "paper"
    algo: str = "ga"


@dataclass(frozen=True)
class ESRunConfig:
    env: EnvConfig = EnvConfig()
    net: NetConfig = NetConfig()
    es: ESConfig = ESConfig()
    run: RunConfig = RunConfig()
    preset: str = "paper"
    algo: str = "es"


@dataclass(frozen=True)
class NSRunConfig:
    env: EnvConfig = EnvConfig(env="maze")
    net: NetConfig = NetConfig(net="small")
    ns: NSConfig = NSConfig()
    run: RunConfig = RunConfig()
    preset: str = "paper"
    algo: str = "ns"


def groups(cls) -> tuple[str, ...]:
    """The setting groups of a root config class, e.g. ("env", "net", "ga", "run")."""
    return tuple(f.name for f in fields(cls) if dataclasses.is_dataclass(f.default))


GROUPS = groups(Config)  # the GA's

PRESETS: dict[str, Config] = {
    # The reference Deep GA (DESIGN.md): N=1000, T=20, sigma=0.002, top 10 x 30 episodes.
    "paper": Config(preset="paper"),
    # Random search: the same loop with T=0, every offspring a fresh random network.
    "rs": Config(ga=GAConfig(truncation=0), preset="rs", algo="rs"),
    # About 10 minutes on 2 cores: the small net, a small population, short validation.
    "quick": Config(
        net=NetConfig(net="small"),
        ga=GAConfig(population=64, truncation=8, elite_candidates=3, validation_episodes=5),
        run=RunConfig(frame_budget=3_000_000, noise_table_size=32_000_000),
        preset="quick",
    ),
}

ES_PRESETS: dict[str, ESRunConfig] = {
    # The reference OpenAI-ES Atari run (DESIGN.md; Uber's GPU es_atari_config): 5,000 perturbations
    # in mirrored pairs, sigma 0.02, Adam 0.01, L2 0.005, centered ranks, the small net with
    # virtual batch norm over 128 reference observations.
    "paper": ESRunConfig(net=NetConfig(net="small", vbn=128)),
    # Minutes on 2 cores: a small population, short validation.
    "quick": ESRunConfig(
        net=NetConfig(net="small", vbn=128),
        es=ESConfig(population=64, validation_episodes=5),
        run=RunConfig(frame_budget=3_000_000, noise_table_size=32_000_000),
        preset="quick",
    ),
}

NS_PRESETS: dict[str, NSRunConfig] = {
    # The deceptive maze, minutes per seed on 2 cores: the small net, 64 individuals, 200-step
    # episodes (frames = agent steps), GA-NS by default (--algo picks the others).
    "quick": NSRunConfig(
        ns=NSConfig(population=64, truncation=10, sigma=0.005, validation_episodes=1),
        run=RunConfig(frame_budget=1_000_000, noise_table_size=32_000_000),
        preset="quick",
    ),
    # Such et al.'s GA-NS scale on the maze (population 1000, T 20); the ES family as Conti et al.
    "paper": NSRunConfig(ns=NSConfig(sigma=0.005), run=RunConfig(frame_budget=200_000_000), preset="paper"),
}
# The ES family's own defaults where the command line is silent (Conti et al.: sigma 0.02 as
# OpenAI-ES), and NSRA-ES's (Conti et al.: it starts with all weight on reward; NSR-ES keeps 0.5).
NS_ES_DEFAULTS = {"sigma": 0.02}
NSRA_ES_DEFAULTS = {"reward_weight": 1.0}

# Novelty search on Atari, where the command line is silent: GA-NS with the Deep GA's large net
# and sigma (Such et al.), the ES family with OpenAI-ES's small net and virtual batch norm (Conti
# et al. build on it; NS_ES_DEFAULTS gives their sigma).
NS_ATARI_DEFAULTS = {"ga-ns": {"net": "large", "sigma": 0.002}, "es": {"net": "small", "vbn": 128}}

# The maze is deterministic: one validation episode says all (GA and GA-NS alike).
MAZE_DEFAULTS = {
    "ga": {"elite_candidates": 1, "validation_episodes": 1, "sigma": 0.005, "frame_budget": 1_000_000}
}

# Defaults for gymnasium vector tasks where the command line does not set them: the mlp net, a
# population and sigma that solve CartPole-v1 in about a minute, frames = agent steps.
VECTOR_TASK_DEFAULTS = {
    "ga": {
        "net": "mlp",
        "vbn": 0,
        "population": 64,
        "truncation": 8,
        "sigma": 0.05,
        "frame_budget": 3_000_000,
    },
    "es": {"net": "mlp", "vbn": 0, "population": 64, "sigma": 0.05, "lr": 0.03, "frame_budget": 3_000_000},
}


def flag(name: str) -> str:
    """The command-line flag of a field name."""
    return "--" + name.replace("_", "-")


def all_fields(root=Config):
    """(group, field) for every setting of a root config class, in --help order."""
    for group in groups(root):
        for f in fields(getattr(root(), group)):
            yield group, f


def root_of(algo: str):
    """The root config class of an algorithm name."""
    return {"es": ESRunConfig, "ns": NSRunConfig}.get(algo, Config)


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(d: dict):
    """Rebuild a config from `to_dict` output (its class from d["algo"]); unknown keys are an error."""
    root = root_of(d.get("algo", "ga"))
    kwargs = {}
    defaults = root()
    for group in groups(root):
        cls = type(getattr(defaults, group))
        values = dict(d.get(group, {}))
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"config: unknown {group} settings {sorted(unknown)}")
        kwargs[group] = cls(**values)
    return root(**kwargs, preset=d.get("preset", "paper"), algo=d.get("algo", "ga"))


def save(cfg: Config, path: str, extra: dict | None = None) -> None:
    """Write the config (and extra facts such as the git commit) as JSON."""
    d = to_dict(cfg)
    if extra:
        d.update(extra)
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")


def load(path: str):
    with open(path) as f:
        d = json.load(f)
    names = {"preset", "algo", *groups(root_of(d.get("algo", "ga")))}
    return from_dict({k: v for k, v in d.items() if k in names})


def override(cfg, values: dict):
    """Return cfg with {field name: value} replaced, each name looked up in its group."""
    by_group = {g: {} for g in groups(type(cfg))}
    lookup = {f.name: g for g, f in all_fields(type(cfg))}
    for name, value in values.items():
        if name not in lookup:
            raise ConfigError(f"unknown setting {name!r}")
        by_group[lookup[name]][name] = value
    return replace(cfg, **{g: replace(getattr(cfg, g), **v) for g, v in by_group.items() if v})


def atari_games() -> list[str]:
    from ale_py import roms

    return sorted(roms.get_all_rom_ids())


def _require(ok: bool, name: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {allowed}")


def normalize_env(cfg):
    """`--env frostbite` is `--env atari --game frostbite`: one spelling for the rest of nevo."""
    if cfg.env.env != "atari" and cfg.env.env in atari_games():
        return replace(cfg, env=replace(cfg.env, env="atari", game=cfg.env.env))
    return cfg


def is_atari(env_cfg) -> bool:
    return env_cfg.env == "atari"


def validate(cfg):
    """Check every value once; raise ConfigError naming the field and what is allowed."""
    from nevo.nets import IMAGE_NETS, NAMED_LAYERS

    cfg = normalize_env(cfg)
    e, n, r = cfg.env, cfg.net, cfg.run
    if e.env == "maze":
        from nevo.maze import STEPS

        _require(n.net in IMAGE_NETS, "net", "large or small (the maze is an image)", n.net)
        _require(e.frame_cap >= STEPS, "frame_cap", f">= {STEPS} (a maze episode's steps)", e.frame_cap)
    elif is_atari(e):
        games = atari_games()
        if e.game not in games:
            close = difflib.get_close_matches(e.game, games, n=5, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else "see ale_py.roms.get_all_rom_ids()"
            raise ConfigError(f"--game: unknown Atari game {e.game!r}; {hint}")
    else:
        from nevo.envs import check_vector_task

        check_vector_task(e.env)  # ConfigError naming --env if unknown, missing or unsuitable
        _require(
            n.net not in IMAGE_NETS,
            "net",
            "mlp (a gymnasium vector task has no image for the conv nets)",
            n.net,
        )
    _require(e.frame_cap > 0, "frame_cap", "an integer > 0", e.frame_cap)
    _require(e.noop_max >= 1, "noop_max", "an integer >= 1", e.noop_max)
    _require(e.frameskip >= 1, "frameskip", "an integer >= 1", e.frameskip)
    _require(n.net in NAMED_LAYERS, "net", ", ".join(NAMED_LAYERS), n.net)
    _require(n.vbn == 0 or n.vbn >= 2, "vbn", "0 (off) or a reference batch size >= 2", n.vbn)
    if isinstance(cfg, ESRunConfig):
        _validate_es(cfg.es)
    elif isinstance(cfg, NSRunConfig):
        _validate_ns(cfg.ns)
    else:
        _validate_ga(cfg.ga)
    _validate_run(r)
    return cfg


def _validate_es(s) -> None:
    _require(s.population >= 2, "population", "an integer >= 2", s.population)
    _require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    _validate_es_step(s)
    _require(s.fitness_shaping in SHAPINGS, "fitness_shaping", ", ".join(SHAPINGS), s.fitness_shaping)
    _require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)


def _validate_es_step(s) -> None:
    """The ES settings that OpenAI-ES and the novelty-search ES family share (ESConfig, NSConfig)."""
    _require(s.mirrored in (0, 1), "mirrored", "0 or 1", s.mirrored)
    _require(
        not s.mirrored or s.population % 2 == 0,
        "population",
        "an even number with --mirrored 1 (pairs theta +- sigma*eps)",
        s.population,
    )
    _require(s.optimizer in OPTIMIZERS, "optimizer", ", ".join(OPTIMIZERS), s.optimizer)
    _require(s.lr > 0, "lr", "a number > 0", s.lr)
    _require(s.l2 >= 0, "l2", "a number >= 0", s.l2)
    _require(0 <= s.momentum < 1, "momentum", "a number in [0, 1)", s.momentum)


def _validate_ns(s) -> None:
    _require(s.algo in NS_ALGOS, "algo", ", ".join(NS_ALGOS), s.algo)
    _require(s.population >= 2, "population", "an integer >= 2", s.population)
    _require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    _require(1 <= s.k, "k", "an integer >= 1", s.k)
    _require(0 <= s.archive_prob <= 1, "archive_prob", "a probability in [0, 1]", s.archive_prob)
    _require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)
    if s.algo == "ga-ns":
        _require(
            1 <= s.truncation <= s.population, "truncation", f"1 .. population ({s.population})", s.truncation
        )
        return
    _require(s.meta_population >= 1, "meta_population", "an integer >= 1", s.meta_population)
    _validate_es_step(s)
    _require(0 <= s.reward_weight <= 1, "reward_weight", "a number in [0, 1]", s.reward_weight)
    _require(s.nsra_patience >= 1, "nsra_patience", "an integer >= 1", s.nsra_patience)
    _require(0 < s.nsra_delta <= 1, "nsra_delta", "a number in (0, 1]", s.nsra_delta)


def _validate_ga(g) -> None:
    _require(g.population >= 2, "population", "an integer >= 2", g.population)
    _require(
        0 <= g.truncation <= g.population,
        "truncation",
        f"0 (random search) .. population ({g.population})",
        g.truncation,
    )
    _require(g.sigma > 0, "sigma", "a number > 0", g.sigma)
    _require(
        1 <= g.elite_candidates <= g.population,
        "elite_candidates",
        f"1 .. population ({g.population})",
        g.elite_candidates,
    )
    _require(g.validation_episodes >= 1, "validation_episodes", "an integer >= 1", g.validation_episodes)


def _validate_run(r) -> None:
    _require(r.frame_budget > 0, "frame_budget", "an integer > 0 (game frames)", r.frame_budget)
    _require(r.seed >= 0, "seed", "an integer >= 0", r.seed)
    _require(r.noise_seed >= 0, "noise_seed", "an integer >= 0", r.noise_seed)
    _require(r.env_slots >= 0, "env_slots", "0 (auto) or an integer >= 1", r.env_slots)
    _require(r.threads >= 0, "threads", "0 (auto) or an integer >= 1", r.threads)
    _require(r.batch_size >= 0, "batch_size", "0 (auto) or an integer >= 1", r.batch_size)
    _require(r.pipeline in PIPELINES, "pipeline", ", ".join(PIPELINES), r.pipeline)
    _require(r.device in ("auto", "cpu", "cuda"), "device", "auto, cpu or cuda", r.device)


def check_noise_table(cfg, n_params: int) -> None:
    """The noise table must hold at least one parameter vector's worth of numbers."""
    size = cfg.run.noise_table_size
    _require(
        size >= n_params,
        "noise_table_size",
        f">= the net's parameter count ({n_params:,})",
        size,
    )


def _parse_value(kind, text: str):
    if kind is bool:
        return text.lower() in ("1", "true", "yes")
    return kind(text)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise ConfigError(message)


def build_parser(description: str, presets=None) -> argparse.ArgumentParser:
    """A parser with --preset, --resume and one flag per setting (default: the preset's)."""
    presets = presets or PRESETS
    root = type(next(iter(presets.values())))
    p = _Parser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="quick", help=f"one of {', '.join(presets)} (default: quick)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its checkpoint")
    for group, f in all_fields(root):
        kind = {"int": int, "float": float, "str": str}[f.type]
        p.add_argument(
            flag(f.name),
            dest=f.name,
            type=lambda s, k=kind, n=f.name: _convert(k, n, s),
            default=None,
            metavar=kind.__name__.upper(),
            help=f"{f.metadata['help']} ({_preset_defaults(presets, group, f.name)})",
        )
    return p


def _preset_defaults(presets: dict, group: str, name: str) -> str:
    """'paper: 1000, rs: 1000, quick: 64' or, where all presets agree, 'default: 1000'."""
    values = {p: getattr(getattr(c, group), name) for p, c in presets.items()}
    if len(set(values.values())) == 1:
        return f"default: {next(iter(values.values()))}"
    return ", ".join(f"{p}: {v}" for p, v in values.items())


def _convert(kind, name: str, text: str):
    try:
        if kind is int:
            return int(float(text)) if "e" in text.lower() else int(text)
        return kind(text)
    except ValueError:
        article = "an" if kind is int else "a"
        raise argparse.ArgumentTypeError(f"got {text!r}, allowed: {article} {kind.__name__}") from None


def parse_args(argv, description: str, presets=None) -> tuple:
    """Parse argv into (validated config, resume dir or None); presets: PRESETS or ES_PRESETS."""
    presets = presets or PRESETS
    root = type(next(iter(presets.values())))
    args = build_parser(description, presets).parse_args(argv)
    given = {f.name: getattr(args, f.name) for _, f in all_fields(root) if getattr(args, f.name) is not None}
    if args.resume:
        path = os.path.join(args.resume, "config.json")
        if not os.path.isfile(path):
            raise ConfigError(f"--resume: {args.resume!r} is not a run folder (no config.json)")
        cfg = load(path)
        if type(cfg) is not root:
            raise ConfigError(
                f"--resume: {args.resume!r} is a run of {cfg.algo!r}; resume it with its own command"
            )
        changed = set(given) - RESUMABLE
        if changed:
            raise ConfigError(
                f"--resume: only {', '.join(flag(n) for n in sorted(RESUMABLE))} may change on "
                f"resume; got {', '.join(flag(n) for n in sorted(changed))}"
            )
        return validate(override(cfg, given)), args.resume
    if args.preset not in presets:
        close = difflib.get_close_matches(args.preset, list(presets), n=3)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"--preset: unknown preset {args.preset!r}{hint}; allowed: {', '.join(presets)}")
    cfg = normalize_env(override(presets[args.preset], given))
    family = {ESRunConfig: "es", NSRunConfig: "ns"}.get(root, "ga")
    if cfg.env.env == "maze":  # the maze's own defaults where the command line is silent
        cfg = override(cfg, {k: v for k, v in MAZE_DEFAULTS.get(family, {}).items() if k not in given})
    elif not is_atari(cfg.env):  # a vector task: its own defaults where the command line is silent
        cfg = override(cfg, {k: v for k, v in VECTOR_TASK_DEFAULTS.get(family, {}).items() if k not in given})
    if family == "ns" and is_atari(cfg.env):
        atari = NS_ATARI_DEFAULTS["ga-ns" if cfg.ns.algo == "ga-ns" else "es"]
        cfg = override(cfg, {k: v for k, v in atari.items() if k not in given})
    if family == "ns" and cfg.ns.algo != "ga-ns":
        cfg = override(cfg, {k: v for k, v in NS_ES_DEFAULTS.items() if k not in given})
    if family == "ns" and cfg.ns.algo == "nsra-es":
        cfg = override(cfg, {k: v for k, v in NSRA_ES_DEFAULTS.items() if k not in given})
    return validate(cfg), None


# Settings that do not change a run's results, so a resumed run may set them anew.
RESUMABLE = {"frame_budget", "env_slots", "batch_size", "pipeline", "threads", "device", "out_dir"}
PIPELINES = ("auto", "overlap", "lockstep")
OPTIMIZERS = ("adam", "sgd")
NS_ALGOS = ("ga-ns", "ns-es", "nsr-es", "nsra-es")
SHAPINGS = ("centered_ranks", "none")
