"""Algorithms, one file each, meeting one contract (nevo.algos.contract.Algorithm), and the registry
that builds them by name.

- `ga.py`: the deep GA and random search (Such et al. 2017); `es.py`: OpenAI-ES (Salimans et al.
  2017); `ns.py`: GA-NS and NS-ES, NSR-ES, NSRA-ES (Such et al.; Conti et al. 2018), over
  `novelty.py` (the archive and the k-nearest-neighbour novelty);
- `ranking.py`: the one fitness rule (higher is better, NaN last); `contract.py`: the contract;
  `declaration.py`: what each algorithm module declares of itself (`DECLARATIONS`: its names, its
  command, how it is made, the rows it builds from, its summary, whether it needs a behaviour),
  from which the registry here is built: the loop asks `declaration(name)`, never compares names.
"""

from __future__ import annotations

from nevo.algos import es, ga, ns, sgd
from nevo.algos.contract import Algorithm
from nevo.algos.declaration import Declaration
from nevo.algos.ranking import fitness_order
from nevo.config import ALGOS

__all__ = [
    "NAMES",
    "NOVELTY",
    "Algorithm",
    "Declaration",
    "bases_of",
    "declaration",
    "fitness_order",
    "make_algo",
]

# name -> its Declaration, from each algorithm module's DECLARATIONS
REGISTRY: dict[str, Declaration] = {
    name: d for m in (ga, es, ns, sgd) for d in m.DECLARATIONS for name in d.names
}
NAMES = ALGOS  # those of the generation loop (and "sgd", the baseline with its own loop)
NOVELTY = tuple(name for name, d in REGISTRY.items() if d.needs_behaviour)  # a behaviour per episode


def declaration(name: str) -> Declaration:
    """What algorithm `name` declares of itself (its module's DECLARATIONS)."""
    if name not in REGISTRY:
        raise ValueError(f"unknown algorithm {name!r}; allowed: {', '.join(NAMES)}")
    return REGISTRY[name]


def make_algo(name: str, cfg, noise, behaviour: tuple[int, type] | None = None) -> Algorithm:
    """The registry: algorithm name -> its object (GA and random search share one class).

    cfg: the run's nevo.config.Config (its section of `name`'s family is read); noise: its
    NoiseSource; behaviour: (d, dtype) of an episode's behaviour, for the novelty ones (a task's
    `behaviour`, nevo.tasks).
    """
    d = declaration(name)
    if d.needs_behaviour and behaviour is None:
        raise ValueError(f"{name}: novelty search needs behaviour=(d, dtype) (a task's `behaviour`)")
    return d.make(name, cfg, noise, behaviour)


def bases_of(cfg) -> int:
    """The rows an algorithm's populations are built from (the evaluator caches their weights):
    the GA's parents and elite, ES's theta, the NS-ES family's agents' thetas."""
    return declaration(cfg.algo).bases(cfg)
