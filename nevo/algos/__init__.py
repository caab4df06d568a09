"""Algorithms, one file each, sharing one ask/tell shape, and the registry that builds them by name.

Every algorithm object has: ask() -> (Population, Episodes) to evaluate (nevo.evaluation.episodes);
tell(Results) with their results (returns the per-individual fitness it used);
ask_validation() -> (Population, Episodes), zero episodes where it validates nothing;
tell_validation(Results); `generation`, the count of finished generations; metrics() ->
{name: number} for the log line; state() -> a dict of plain arrays and load_state(that dict),
so a resumed run repeats an uninterrupted one.

The one fitness rule of nevo (nevo.algos.ranking.fitness_order, the only place that ranks):
higher is better, and a NaN fitness ranks below every number.
"""

from __future__ import annotations

from nevo.algos.es import ES
from nevo.algos.ga import GA
from nevo.algos.ns import GANS, NSES
from nevo.algos.ranking import fitness_order

__all__ = ["NAMES", "NOVELTY", "fitness_order", "make_algo"]


NAMES = ("ga", "rs", "es", "ga-ns", "ns-es", "nsr-es", "nsra-es")
NOVELTY = ("ga-ns", "ns-es", "nsr-es", "nsra-es")  # those that need a behaviour per episode


def make_algo(name: str, cfg, noise, behaviour: tuple[int, type] | None = None):
    """The registry: algorithm name -> its object (GA and random search share one class).

    cfg: the run's root config (config.Config for ga and rs, ESRunConfig for es, NSRunConfig for
    the novelty ones); noise: its NoiseSource; behaviour: (d, dtype) of an episode's behaviour,
    for the novelty ones (a task's `behaviour`, nevo.tasks).
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
