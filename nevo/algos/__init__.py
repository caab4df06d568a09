"""Algorithms, one file each, meeting one contract (nevo.algos.contract.Algorithm), and the registry
that builds them by name.

- `ga.py`: the deep GA and random search (Such et al. 2017); `es.py`: OpenAI-ES (Salimans et al.
  2017); `ns.py`: GA-NS and NS-ES, NSR-ES, NSRA-ES (Such et al.; Conti et al. 2018), over
  `novelty.py` (the archive and the k-nearest-neighbour novelty) and `ns_settings.py` (its
  settings); `sgd.py`: the SGD baseline of ES against SGD (Zhang, Clune & Stanley 2017);
  `optimizers.py` (Adam, momentum) and `noise_sums.py` (the gradient's sums over the noise
  table), which ES and SGD share;
- `ranking.py`: the one fitness rule (higher is better, NaN last); `streams.py`: the random
  streams; `contract.py`: the contract; `declaration.py`: what each algorithm module declares of
  itself (`DECLARATIONS`: its names, its command, how it is made, its settings, what it takes on
  each kind of task, its presets, its extensions, the rows it builds from, its summary, whether it
  needs a behaviour), from which the registry here is built: the loop asks `declaration(name)`,
  never compares names.

An algorithm of one's own is a module with the same `DECLARATIONS` (a file, `path/to/mine.py`, or
an importable module, `package.mine`): `declaration(name, module)` imports it once and adds its
names; a run saves the module in config.json (`algo_module`), so that --resume, replay and a
cluster's workers find it again.
"""

from __future__ import annotations

from nevo.algos import es, ga, ns, sgd
from nevo.algos.contract import Algorithm
from nevo.algos.declaration import Declaration
from nevo.algos.ranking import fitness_order
from nevo.settings import ConfigError, import_own, own_name

__all__ = [
    "NAMES",
    "NOVELTY",
    "OWN",
    "Algorithm",
    "Declaration",
    "bases_of",
    "declaration",
    "declared",
    "fitness_order",
    "load_module",
    "make_algo",
]

# name -> its Declaration, from each algorithm module's DECLARATIONS (nevo's own here; a user's
# module's join on first use)
REGISTRY: dict[str, Declaration] = {
    name: d for m in (ga, es, ns, sgd) for d in m.DECLARATIONS for name in d.names
}
OWN = tuple(REGISTRY)  # nevo's own algorithms (one of one's own is named with its module)
DEFAULT = OWN[0]  # the algorithm of a config that names none: the deep GA (nevo.algos.ga)
# name -> the declarations of its module: one command (`nevo train NAME`: their flags, presets)
COMMANDS: dict[str, tuple[Declaration, ...]] = {
    name: m.DECLARATIONS for m in (ga, es, ns, sgd) for d in m.DECLARATIONS for name in d.names
}
NAMES = tuple(name for name, d in REGISTRY.items() if d.step is None)  # the population algorithms
NOVELTY = tuple(name for name, d in REGISTRY.items() if d.needs_behaviour)  # a behaviour per episode
_LOADED: dict[str, tuple[str, ...]] = {}  # a user's module as given -> the names it declared


def module_of(name: str) -> str:
    """The module of one's own (as config.json's algo_module names it) that declared algorithm
    name, once loaded; "" for nevo's own."""
    return next((module for module, names in _LOADED.items() if name in names), "")


def load_module(module: str) -> tuple[str, ...]:
    """Import a module of one's own (a .py file's path, or a dotted module name) once and add its
    DECLARATIONS to the registry; returns the names it declares. ConfigError, in one line, when
    it cannot be imported, declares nothing, or declares a name nevo (or another module) has."""
    module = own_name(module)
    if module in _LOADED:
        return _LOADED[module]
    mod = import_own(module, "--algo-module")
    declared = getattr(mod, "DECLARATIONS", None)
    if not declared or not all(isinstance(d, Declaration) for d in declared):
        raise ConfigError(
            f"--algo-module: {module!r} declares no algorithm (a tuple DECLARATIONS of "
            f"nevo.algos.Declaration)"
        )
    names = tuple(n for d in declared for n in d.names)
    for n in names:
        if n in REGISTRY and REGISTRY[n] not in declared:
            raise ConfigError(f"--algo-module: {module!r} declares {n!r}, which is already an algorithm")
    REGISTRY.update({n: d for d in declared for n in d.names})
    COMMANDS.update({n: tuple(declared) for n in names})
    _LOADED[module] = names
    return names


def extensions_of(cfg) -> list:
    """The extension classes a run has: those its algorithm declares that its settings want, in
    the declaration's order."""
    return [e for e in declared(cfg).extensions if e.wanted(cfg)]


def declaration(name: str, module: str = "") -> Declaration:
    """What algorithm `name` declares of itself (its module's DECLARATIONS); module: a user's
    module that declares it (imported once), "" for nevo's own."""
    if module:
        names = load_module(module)
        if name not in names:
            raise ConfigError(f"--algo: got {name!r}, allowed for {module!r}: {', '.join(names)}")
    if name not in (REGISTRY if module else OWN):  # one's own only with its module, as config.json has it
        raise ConfigError(
            f"--algo: got {name!r}, allowed: {', '.join(OWN)}, or one that --algo-module declares"
        )
    return REGISTRY[name]


def make_algo(name: str, cfg, noise, behaviour: tuple[int, type] | None = None) -> Algorithm:
    """The registry: algorithm name -> its object (GA and random search share one class).

    cfg: the run's nevo.config.Config (cfg.settings: its algorithm's section); noise: its
    NoiseSource; behaviour: (d, dtype) of an episode's behaviour, for the novelty ones (a task's
    `behaviour`, nevo.tasks).
    """
    d = declaration(name, getattr(cfg, "algo_module", ""))
    if d.needs_behaviour and behaviour is None:
        raise ValueError(f"{name}: novelty search needs behaviour=(d, dtype) (a task's `behaviour`)")
    return d.make(name, cfg, noise, behaviour)


def bases_of(cfg) -> int:
    """The rows an algorithm's populations are built from (the evaluator caches their weights):
    the GA's parents and elite, ES's theta, the NS-ES family's agents' thetas."""
    return declared(cfg).bases(cfg)


def declared(cfg) -> Declaration:
    """The declaration of cfg's algorithm (from its module of one's own, where it names one)."""
    return declaration(cfg.algo, cfg.algo_module)
