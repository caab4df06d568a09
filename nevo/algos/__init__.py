"""Algorithms, one file each, meeting one contract (nevo.algos.contract.Algorithm), and the registry
that builds them by name.

- `ga.py`: the deep GA and random search (Such et al. 2017); `es.py`: OpenAI-ES (Salimans et al.
  2017); `ns.py`: GA-NS and NS-ES, NSR-ES, NSRA-ES (Such et al.; Conti et al. 2018), over
  `novelty.py` (the archive and the k-nearest-neighbour novelty);
- `ranking.py`: the one fitness rule (higher is better, NaN last); `contract.py`: the contract.
"""

from __future__ import annotations

from nevo.algos.contract import Algorithm
from nevo.algos.es import ES
from nevo.algos.ga import GA
from nevo.algos.ns import GANS, NSES
from nevo.algos.ranking import fitness_order
from nevo.config import ALGOS, NS_ALGOS

__all__ = ["NAMES", "NOVELTY", "Algorithm", "bases_of", "fitness_order", "make_algo"]

NAMES = ALGOS
NOVELTY = NS_ALGOS  # those that need a behaviour per episode


def make_algo(name: str, cfg, noise, behaviour: tuple[int, type] | None = None) -> Algorithm:
    """The registry: algorithm name -> its object (GA and random search share one class).

    cfg: the run's nevo.config.Config (its section of `name`'s family is read); noise: its
    NoiseSource; behaviour: (d, dtype) of an episode's behaviour, for the novelty ones (a task's
    `behaviour`, nevo.tasks).
    """
    if name not in NAMES:
        raise ValueError(f"unknown algorithm {name!r}; allowed: {', '.join(NAMES)}")
    if name in NOVELTY and behaviour is None:
        raise ValueError(f"{name}: novelty search needs behaviour=(d, dtype) (a task's `behaviour`)")
    if name in ("ga", "rs"):
        return GA(cfg.ga, cfg.run.seed)
    if name == "es":
        return ES(cfg.es, cfg.run.seed, noise)
    if name == "ga-ns":
        return GANS(cfg.ns, cfg.run.seed, behaviour)
    return NSES(cfg.ns, cfg.run.seed, noise, behaviour, variant=name)


def bases_of(cfg) -> int:
    """The rows an algorithm's populations are built from (the evaluator caches their weights):
    the GA's parents and elite, ES's theta, the NS-ES family's agents' thetas."""
    if cfg.algo in ("ga", "rs"):
        return cfg.ga.truncation + 1
    if cfg.algo == "ga-ns":
        return cfg.ns.truncation + 1
    return cfg.ns.meta_population if cfg.algo in NOVELTY else 1
