"""Settings: frozen dataclasses, the paper's presets, JSON load/save, CLI parsing, validation.

Every setting is a field with a one-line help text; `--help` lists them all. Values are
checked once, in `validate`, and a bad value raises `ConfigError` with a message naming the
field and what is allowed (the CLI prints it on one line, without a traceback).

Presets follow Such et al. 2017 (arXiv 1712.06567) as the reference GPU code configures it;
see ../shared/DESIGN.md.
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
    game: str = setting("frostbite", "Atari game (ale-py ROM id, e.g. frostbite, space_invaders)")
    frame_cap: int = setting(20_000, "episode cap in game frames (frameskip included)")
    noop_max: int = setting(30, "each episode starts with 1..noop_max no-op steps, drawn from its seed")
    frameskip: int = setting(4, "game frames per agent step (rewards summed, max over last two)")


@dataclass(frozen=True)
class NetConfig:
    net: str = setting("large", "network: large (Nature DQN, 4.05M params) or small (1.0M)")


@dataclass(frozen=True)
class GAConfig:
    population: int = setting(1000, "individuals evaluated per generation (N)")
    truncation: int = setting(20, "top individuals that may be parents (T); 0 = random search")
    sigma: float = setting(0.002, "mutation power: child = parent + sigma * N(0, I)")
    elite_candidates: int = setting(10, "top individuals re-evaluated to pick the elite")
    validation_episodes: int = setting(30, "episodes each elite candidate is re-evaluated on")


@dataclass(frozen=True)
class RunConfig:
    seed: int = setting(0, "run seed: fixes every random choice of the run")
    frame_budget: int = setting(1_000_000_000, "stop after this many game frames (all episodes)")
    noise_table_size: int = setting(250_000_000, "float32 N(0,1) numbers in the shared noise table")
    noise_seed: int = setting(42, "seed of the shared noise table")
    env_slots: int = setting(0, "episodes run at once (emulators); 0 = chosen from the machine")
    batch_size: int = setting(0, "emulators per group; 0 = env_slots/4 (overlap) or 8 (lockstep)")
    pipeline: str = setting(
        "auto", "overlap (a group's forward runs while others step), lockstep, or auto (overlap on GPU)"
    )
    threads: int = setting(0, "emulator threads per group; 0 = one per core")
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


GROUPS = ("env", "net", "ga", "run")

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


def flag(name: str) -> str:
    """The command-line flag of a field name."""
    return "--" + name.replace("_", "-")


def all_fields():
    """(group, field) for every setting, in --help order."""
    for group in GROUPS:
        for f in fields(getattr(Config(), group)):
            yield group, f


def to_dict(cfg: Config) -> dict:
    return dataclasses.asdict(cfg)


def from_dict(d: dict) -> Config:
    """Rebuild a Config from `to_dict` output; unknown keys are an error."""
    kwargs = {}
    defaults = Config()
    for group in GROUPS:
        cls = type(getattr(defaults, group))
        values = dict(d.get(group, {}))
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ConfigError(f"config: unknown {group} settings {sorted(unknown)}")
        kwargs[group] = cls(**values)
    return Config(**kwargs, preset=d.get("preset", "paper"), algo=d.get("algo", "ga"))


def save(cfg: Config, path: str, extra: dict | None = None) -> None:
    """Write the config (and extra facts such as the git commit) as JSON."""
    d = to_dict(cfg)
    if extra:
        d.update(extra)
    with open(path, "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")


def load(path: str) -> Config:
    with open(path) as f:
        d = json.load(f)
    return from_dict({k: v for k, v in d.items() if k in (*GROUPS, "preset", "algo")})


def override(cfg: Config, values: dict) -> Config:
    """Return cfg with {field name: value} replaced, each name looked up in its group."""
    groups = {g: {} for g in GROUPS}
    lookup = {f.name: g for g, f in all_fields()}
    for name, value in values.items():
        if name not in lookup:
            raise ConfigError(f"unknown setting {name!r}")
        groups[lookup[name]][name] = value
    return replace(cfg, **{g: replace(getattr(cfg, g), **v) for g, v in groups.items() if v})


def atari_games() -> list[str]:
    from ale_py import roms

    return sorted(roms.get_all_rom_ids())


def _require(ok: bool, name: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {allowed}")


def validate(cfg: Config) -> Config:
    """Check every value once; raise ConfigError naming the field and what is allowed."""
    from nevo.nets import NAMED_LAYERS

    e, n, g, r = cfg.env, cfg.net, cfg.ga, cfg.run
    games = atari_games()
    if e.game not in games:
        close = difflib.get_close_matches(e.game, games, n=5, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}?" if close else "see ale_py.roms.get_all_rom_ids()"
        raise ConfigError(f"--game: unknown Atari game {e.game!r}; {hint}")
    _require(e.frame_cap > 0, "frame_cap", "an integer > 0", e.frame_cap)
    _require(e.noop_max >= 1, "noop_max", "an integer >= 1", e.noop_max)
    _require(e.frameskip >= 1, "frameskip", "an integer >= 1", e.frameskip)
    _require(n.net in NAMED_LAYERS, "net", " or ".join(NAMED_LAYERS), n.net)
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
    _require(r.frame_budget > 0, "frame_budget", "an integer > 0 (game frames)", r.frame_budget)
    _require(r.seed >= 0, "seed", "an integer >= 0", r.seed)
    _require(r.noise_seed >= 0, "noise_seed", "an integer >= 0", r.noise_seed)
    _require(r.env_slots >= 0, "env_slots", "0 (auto) or an integer >= 1", r.env_slots)
    _require(r.threads >= 0, "threads", "0 (auto) or an integer >= 1", r.threads)
    _require(r.batch_size >= 0, "batch_size", "0 (auto) or an integer >= 1", r.batch_size)
    _require(r.pipeline in PIPELINES, "pipeline", ", ".join(PIPELINES), r.pipeline)
    _require(r.device in ("auto", "cpu", "cuda"), "device", "auto, cpu or cuda", r.device)
    return cfg


def check_noise_table(cfg: Config, n_params: int) -> None:
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


def build_parser(description: str) -> argparse.ArgumentParser:
    """A parser with --preset, --resume and one flag per setting (default: the preset's)."""
    p = _Parser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="quick", help=f"one of {', '.join(PRESETS)} (default: quick)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its checkpoint")
    for group, f in all_fields():
        kind = {"int": int, "float": float, "str": str}[f.type]
        p.add_argument(
            flag(f.name),
            dest=f.name,
            type=lambda s, k=kind, n=f.name: _convert(k, n, s),
            default=None,
            metavar=kind.__name__.upper(),
            help=f"{f.metadata['help']} ({_preset_defaults(group, f.name)})",
        )
    return p


def _preset_defaults(group: str, name: str) -> str:
    """'paper: 1000, rs: 1000, quick: 64' or, where all presets agree, 'default: 1000'."""
    values = {p: getattr(getattr(c, group), name) for p, c in PRESETS.items()}
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


def parse_args(argv, description: str) -> tuple[Config, str | None]:
    """Parse argv into (validated Config, resume dir or None)."""
    args = build_parser(description).parse_args(argv)
    given = {f.name: getattr(args, f.name) for _, f in all_fields() if getattr(args, f.name) is not None}
    if args.resume:
        path = os.path.join(args.resume, "config.json")
        if not os.path.isfile(path):
            raise ConfigError(f"--resume: {args.resume!r} is not a run folder (no config.json)")
        cfg = load(path)
        changed = set(given) - RESUMABLE
        if changed:
            raise ConfigError(
                f"--resume: only {', '.join(flag(n) for n in sorted(RESUMABLE))} may change on "
                f"resume; got {', '.join(flag(n) for n in sorted(changed))}"
            )
        return validate(override(cfg, given)), args.resume
    if args.preset not in PRESETS:
        close = difflib.get_close_matches(args.preset, list(PRESETS), n=3)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"--preset: unknown preset {args.preset!r}{hint}; allowed: {', '.join(PRESETS)}")
    cfg = override(PRESETS[args.preset], given)
    return validate(cfg), None


# Settings that do not change a run's results, so a resumed run may set them anew.
RESUMABLE = {"frame_budget", "env_slots", "batch_size", "pipeline", "threads", "device", "out_dir"}
PIPELINES = ("auto", "overlap", "lockstep")
