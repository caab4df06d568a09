"""Settings: what every run has, below the algorithms that declare the rest.

Every setting is a field with a one-line help text (`setting`; the command line's --help, nevo.cli,
lists them all) and is checked once for its range, raising `ConfigError` with a message naming its
flag and what is allowed (`require`; the command line prints it on one line). Here: the task's
(`EnvConfig`), the net's (`NetConfig`) and the run's (`RunConfig`) sections, with their checks,
and the readers of run files (`read_json`, `DamagedFile`). Each algorithm's own section is a
dataclass of these `setting`s in its module (nevo.algos), named by its declaration; the root,
`Config`, and its JSON load/save are nevo.config's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import json
import numbers
import os
import sys
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import numpy as np


class ConfigError(ValueError):
    """A setting with a value that is not allowed; the message names the field."""


class CannotImport(ConfigError):
    """A module of one's own (--env-module, --algo-module) that cannot be imported here: on --resume
    the run folder is whole, the module is what is missing."""


def is_path(module: str) -> bool:
    """Whether a module of one's own (--algo-module, --env-module) is named as a file
    (path/to/mine.py) rather than as an importable module (package.mine)."""
    return module.endswith(".py") or os.sep in module


def own_name(module: str) -> str:
    """A module of one's own as one name, however it was given: a file's absolute path (found
    again from any folder: --resume, replay, a cluster's workers), or a dotted module name."""
    return os.path.abspath(module) if is_path(module) else module


_IMPORTED: dict[str, object] = {}  # a module of one's own, its path made absolute -> the module


def imported() -> dict:
    """The modules of one's own imported so far: as import_own was given them (a file's absolute
    path, or a module's name) -> the module."""
    return dict(_IMPORTED)


def import_own(module: str, flag: str):
    """Import a module of one's own once: a .py file's path (under a module name of its own, so that
    two files of the same name do not meet) or a dotted module name. ConfigError in one line naming
    `flag` where it cannot be imported."""
    module = own_name(module)
    if module in _IMPORTED:
        return _IMPORTED[module]
    try:
        if is_path(module):
            if not os.path.isfile(module):
                raise FileNotFoundError(f"no file {module}")
            digest = hashlib.sha1(module.encode()).hexdigest()[:8]
            name = f"nevo_user_{os.path.basename(module)[:-3]}_{digest}"
            spec = importlib.util.spec_from_file_location(name, module)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod  # dataclasses and pickle look classes up by their module
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[name]
                raise
        else:
            mod = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 (every reason is said in one line)
        raise CannotImport(f"{flag}: cannot import {module!r} ({type(e).__name__}: {e})") from None
    _IMPORTED[module] = mod
    return mod


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


def compose(name: str, module: str, *parts, defaults: dict | None = None) -> type:
    """A frozen settings dataclass made of other sections' fields, by reference rather than by
    copy: each part is (a settings dataclass, the names of its fields to take); each field keeps
    its help text and type, and its default unless `defaults` gives another. module: the
    defining module's __name__ (where the class is then found by its name)."""
    specs = []
    for cls, names in parts:
        of = {f.name: f for f in dataclasses.fields(cls)}
        for n in names:
            f = of[n]
            default = (defaults or {}).get(n, f.default)
            specs.append((n, f.type, field(default=default, metadata=f.metadata)))
    made = dataclasses.make_dataclass(name, specs, frozen=True)
    made.__module__ = module
    return made


@dataclass(frozen=True)
class EnvConfig:
    env: str = setting(
        "atari",
        "atari (the game of --game), an Atari game id, or a gymnasium task with vector observations "
        "and discrete or bounded continuous actions (CartPole-v1, Acrobot-v1, Pendulum-v1, ...), mnist, "
        "maze, or a task of a kind that --env-module declares",
    )
    env_module: str = setting(
        "",
        "a module of one's own that declares a kind of task (a .py file or a module name; "
        "docs/architecture.md, Add a task kind): --env then names one of its tasks",
    )
    game: str = setting("frostbite", "Atari game (ale-py ROM id, e.g. frostbite, space_invaders)")
    frame_cap: int = setting(
        20_000, "episode cap in frames (Atari: game frames, frameskip included; other tasks: agent steps)"
    )
    noop_max: int = setting(30, "each episode starts with 1..noop_max no-ops, as many as its seed draws")
    start: str = setting(
        "reference",
        "how an Atari episode starts: reference (Uber's deep GA: 1..noop_max no-ops of one raw frame "
        "each, then, where action 1 is FIRE, actions 1 and 2 for frameskip frames each; the frame cap "
        "counts the frames after it) or vector (ale-py's vector env with nevo's no-ops: FIRE for one "
        "frame at the reset, then 1..noop_max NOOP steps of frameskip frames; run folders made before "
        "2026-11-28)",
    )
    validation_starts: str = setting(
        "random",
        "how an elite candidate's validation episodes start: random (1..noop_max no-ops drawn from each "
        "episode's seed, as training's are) or each (Atari: a candidate's k-th episode starts with "
        "1 + (k mod noop_max) no-ops, so that 30 validation episodes play each of the 30 starts once and, "
        "without sticky actions, the validation mean is the candidate's exact mean over its starts)",
    )
    frameskip: int = setting(4, "game frames per agent step (rewards summed, max over last two)")
    sticky: float = setting(
        0.0,
        "Atari sticky actions (Machado et al. 2018; ALE's repeat_action_probability): on each raw frame "
        "the previous frame's action again with this probability, drawn from the episode's seed; 0.0 "
        "the Deep GA's, 0.25 Machado et al.'s recommendation",
    )
    examples: int = setting(
        100,
        "supervised tasks (mnist): training examples per evaluation, the mini-batch (our pick; the "
        "paper's is not known)",
    )

    def __post_init__(self):
        object.__setattr__(self, "env_module", own_name(self.env_module))


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
    weights: str = setting(
        "auto",
        "the weights the forward reads: fp32, fp16 (each row built in float32 from its genome, as with "
        "fp32, then rounded once to half precision; sums stay float32; half the bytes a forward reads), "
        "or auto: fp16 for the nets large and small (on Atari and the maze), fp32 for the others",
    )


@dataclass(frozen=True)
class RunConfig:
    seed: int = setting(0, "run seed: fixes every random choice of the run")
    frame_budget: int = setting(
        1_000_000_000,
        "stop after this many frames, all episodes': game frames on Atari, agent steps on the maze's, "
        "gymnasium's and MuJoCo's tasks, examples on a data set (what a run's lines and metrics call "
        "frames); 25M and 1B are counts too",
    )
    noise_table_size: int = setting(250_000_000, "float32 N(0,1) numbers in the shared noise table")
    noise_seed: int = setting(42, "seed of the shared noise table")
    env_slots: int = setting(0, "episodes run at once (emulators); 0 = chosen from the machine")
    emulators_per_group: int = setting(
        0,
        "emulators a forward takes at once, the first ready (overlap); 0 = env_slots/4 (lockstep steps "
        "every live slot)",
    )
    pipeline: str = setting(
        "auto",
        "overlap (a group's forward runs while others step), lockstep, workers (each emulator process "
        "plays whole episodes with its own forward), or auto (overlap on a GPU, workers on the CPU)",
    )
    threads: int = setting(
        0,
        "gymnasium tasks (MuJoCo, the maze): threads stepping the envs; 0 = 1 or one per core, whichever "
        "a short timing finds faster (Atari: --processes)",
    )
    processes: int = setting(0, "Atari: emulator processes (at most one per slot); 0 = one per core")
    out_dir: str = setting("runs", "folder under which run folders are made")
    device: str = setting(
        "auto", "inference backend: auto (cuda if a GPU is present), cpu (numba) or cuda (numba.cuda)"
    )
    tensorboard: int = setting(
        0,
        "1 (or the bare flag): also write each generation's metrics as TensorBoard scalars against frames, "
        "in RUN_DIR/tensorboard (pip install 'nevo[tensorboard]')",
    )
    wandb: str = setting(
        "",
        "a Weights & Biases project: also log each generation's metrics there against frames, the run's "
        "config as its config (pip install 'nevo[wandb]'; WANDB_MODE=offline logs without a network)",
    )


def flag(name: str) -> str:
    """The command-line flag of a field name."""
    return "--" + name.replace("_", "-")


def typed(name: str, value, kind: str):
    """value as a setting of type kind ("int", "float" or "str"), or ConfigError naming its flag.
    An int where a float belongs is fine (JSON and Python write 1 for 1.0), as are NumPy's
    numbers; a bool is no number here, but for a switch (SWITCHES: tensorboard=True)."""
    if name in SWITCHES and isinstance(value, (bool, np.bool_)):
        value = int(value)
    ok = {"int": numbers.Integral, "float": numbers.Real, "str": str}[kind]
    if not isinstance(value, ok) or isinstance(value, (bool, np.bool_)):
        article = "an" if kind == "int" else "a"
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {article} {kind}")
    return {"int": int, "float": float, "str": str}[kind](value)


def require(ok: bool, name: str, allowed: str, value) -> None:
    """ConfigError naming the setting's flag and what is allowed, unless ok."""
    if not ok:
        raise ConfigError(f"{flag(name)}: got {value!r}, allowed: {allowed}")


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


def validate_run(r) -> None:
    require(r.frame_budget > 0, "frame_budget", "an integer > 0 (game frames)", r.frame_budget)
    require(r.seed >= 0, "seed", "an integer >= 0", r.seed)
    require(r.noise_seed >= 0, "noise_seed", "an integer >= 0", r.noise_seed)
    require(r.env_slots >= 0, "env_slots", "0 (auto) or an integer >= 1", r.env_slots)
    require(r.threads >= 0, "threads", "0 (auto) or an integer >= 1", r.threads)
    require(r.processes >= 0, "processes", "0 (auto) or an integer >= 1", r.processes)
    require(
        r.emulators_per_group >= 0,
        "emulators_per_group",
        "0 (auto) or an integer >= 1",
        r.emulators_per_group,
    )
    require(r.pipeline in PIPELINES, "pipeline", ", ".join(PIPELINES), r.pipeline)
    require(r.device in ("auto", "cpu", "cuda"), "device", "auto, cpu or cuda", r.device)
    require(r.tensorboard in (0, 1), "tensorboard", "0 or 1", r.tensorboard)


# Settings that do not change a run's results, so a resumed run may set them anew.
RESUMABLE = {"frame_budget", "env_slots", "emulators_per_group", "pipeline", "threads", "processes", "device",
             "out_dir", "tensorboard", "wandb"}  # fmt: skip
# Settings given as a bare flag too (--tensorboard: 1).
SWITCHES = {"tensorboard"}
PIPELINES = ("auto", "overlap", "lockstep", "workers")
SCALES = {"K": 10**3, "M": 10**6, "B": 10**9}  # a count's suffixes: --frame-budget 25M


def whole_number(text: str) -> int:
    """A count as a command line writes it: digits, an exponent (3e6) or a suffix K, M or B in
    either case (25M, 2.5k), read exactly (16.1K is 16,100); ValueError unless it is whole."""
    scale = SCALES.get(text[-1:].upper(), 1)
    try:
        value = Decimal(text[:-1] if scale > 1 else text) * scale
    except InvalidOperation:
        raise ValueError(text) from None
    if not value.is_finite() or value != value.to_integral_value():
        raise ValueError(text)
    return int(value)


STARTS = ("reference", "vector")
VALIDATION_STARTS = ("random", "each")
OPTIMIZERS = ("adam", "sgd")
SHAPINGS = ("centered_ranks", "none")
