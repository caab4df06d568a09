"""Novelty search's settings (nevo.algos.ns): GA-NS's and the ES family's sections, each the
deep GA's or OpenAI-ES's settings it takes plus novelty's own (NoveltyConfig), and their checks."""

from __future__ import annotations

from dataclasses import dataclass

from nevo.algos.es import ESConfig, validate_es_step
from nevo.algos.ga import GAConfig, validate_mutation
from nevo.settings import compose, require, setting


@dataclass(frozen=True)
class NoveltyConfig:
    """Novelty search's own settings; GA-NS and the ES family each take theirs (GANSConfig, NSESConfig)."""

    k: int = setting(
        10, "novelty: mean distance to the k nearest behaviours (archive + population; Conti et al.: 10)"
    )
    archive_prob: float = setting(0.01, "chance that each individual's behaviour joins the archive")
    meta_population: int = setting(3, "agents, the one to update drawn with probability ~ novelty")
    reward_weight: float = setting(
        0.5, "NSR-ES: weight of reward's ranks vs novelty's; NSRA-ES: its start (1.0 unless set)"
    )
    nsra_patience: int = setting(
        10, "NSRA-ES: generations without a better reward before the weight drops (our pick)"
    )
    nsra_delta: float = setting(0.05, "NSRA-ES: step of the reward weight (Conti et al.: 0.05)")


# GA-NS: the deep GA's selection settings (its elite is the most novel individual, kept without
# validation: one candidate, no validation episodes) and the archive's.
GA_NS_GA = ("population", "truncation", "sigma", "mutation", "experiences")
# The sections are novelty search's own (nevo.algos.ns imports them: their home for pickling too).
GANSConfig = compose(
    "GANSConfig", "nevo.algos.ns", (GAConfig, GA_NS_GA), (NoveltyConfig, ("k", "archive_prob"))
)
# NS-ES, NSR-ES, NSRA-ES: OpenAI-ES's step settings for each agent (with ES's sigma, 0.02), a
# meta-population's and NSRA-ES's weight's; 1,000 perturbations and one validation episode (Conti
# et al.'s agents are evaluated once per update).
NS_ES_ES = (
    "population",
    "sigma",
    "optimizer",
    "lr",
    "l2",
    "momentum",
    "mirrored",
    "validation_episodes",
    "obs_norm",
)
NSESConfig = compose(
    "NSESConfig",
    "nevo.algos.ns",
    (ESConfig, NS_ES_ES),
    (NoveltyConfig, ("k", "meta_population", "reward_weight", "nsra_patience", "nsra_delta")),
    defaults={"population": 1000, "validation_episodes": 1},
)


def validate_gans(s, algo: str = "ga-ns") -> None:
    require(s.population >= 2, "population", "an integer >= 2", s.population)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    require(
        1 <= s.truncation <= s.population, "truncation", f"1 .. population ({s.population})", s.truncation
    )
    validate_mutation(s, 1)
    require(1 <= s.k, "k", "an integer >= 1", s.k)
    require(0 <= s.archive_prob <= 1, "archive_prob", "a probability in [0, 1]", s.archive_prob)


def validate_nses(s, algo: str) -> None:
    require(s.population >= 2, "population", "an integer >= 2", s.population)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    require(1 <= s.k, "k", "an integer >= 1", s.k)
    require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)
    require(s.obs_norm in (0, 1), "obs_norm", "0 or 1", s.obs_norm)
    require(s.meta_population >= 1, "meta_population", "an integer >= 1", s.meta_population)
    validate_es_step(s)
    require(0 <= s.reward_weight <= 1, "reward_weight", "a number in [0, 1]", s.reward_weight)
    require(s.nsra_patience >= 1, "nsra_patience", "an integer >= 1", s.nsra_patience)
    require(0 < s.nsra_delta <= 1, "nsra_delta", "a number in (0, 1]", s.nsra_delta)
