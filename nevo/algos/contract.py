"""The contract every algorithm meets (`Algorithm`), written down as a `typing.Protocol`.

A generation is: ask() -> (Population, Episodes) to evaluate; tell(results, fitness=None) with
their Results; ask_validation(last) -> (Population, Episodes), zero episodes where the algorithm
validates nothing (last: this generation ends the run); tell_validation(results), after which
`validated` is False where the algorithm skipped this generation's validation (ES's
validate_every: its row then has no elite score, and its elite files stay as the last validated
generation wrote them). Before the first generation of a new run (not on
resume), ask_start() may ask for one evaluation (the NS-ES family's agents start the archive
with their behaviours), answered with tell_start(results); None means nothing to evaluate.

The one fitness rule of nevo (nevo.algos.ranking.fitness_order, the only place that ranks):
higher is better, and a NaN ranks below every number. A caller's `fitness=` (one number per
individual of ask's population, in its order) takes the place of the returns wherever the
algorithm would use them: the GA ranks it; ES ranks it as it ranks returns (centered ranks);
novelty search mixes it with novelty as it mixes returns (GA-NS keeps it as the score it
records). Validation always scores returns: an elite is the best by its validation mean.

The same things have the same names in every algorithm: `generation` (generations finished),
`elite` (the elite's seed list, or ES's theta), `elite_score` (its validation mean),
`validation_episodes` (episodes behind that mean), `best_elite` ((generation, genome, score) of
the best elite the run has kept, where the algorithm keeps one: the GA), metrics() ->
{name: number} for the log line, state() -> plain arrays and load_state(that), so that a resumed
run repeats an uninterrupted one. A meta-population of agents (the NS-ES family's ES agents) says
how many it has (`agent_count`), which one this generation updated (`agent_index`) and whose theta
is the elite (`elite_agent`); every other algorithm is one agent: 1, 0 and 0. Observation
normalisation keeps its statistics per agent through them.

What an algorithm is for a whole run (its names, its command, how it is made, the rows it builds
from, whether it needs a behaviour) it declares in its module: nevo.algos.declaration.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from nevo.episodes import Episodes, Population, Results


@runtime_checkable
class Algorithm(Protocol):
    generation: int
    validated: bool
    agent_count: int
    agent_index: int
    elite_agent: int

    @property
    def elite(self) -> np.ndarray | None: ...

    @property
    def elite_score(self) -> float: ...

    @property
    def validation_episodes(self) -> int: ...

    @property
    def best_elite(self) -> tuple[int, np.ndarray, float] | None: ...

    def ask_start(self) -> tuple[Population, Episodes] | None: ...

    def tell_start(self, results: Results) -> None: ...

    def ask(self) -> tuple[Population, Episodes]: ...

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray: ...

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]: ...

    def tell_validation(self, results: Results): ...

    def metrics(self) -> dict: ...

    def state(self) -> dict: ...

    def load_state(self, state: dict) -> None: ...


class Extension:
    """A part of a run that only some runs have (observation statistics, safe mutations'
    experiences, the gradient correlation), chosen by the run's settings (`wanted(cfg)`) and made
    by `of(cfg, spec, task, algo, run_dir)` once the algorithm is made (and resumed). The loop
    calls every hook of every extension of the run, in order, and knows none of them; each hook
    here does nothing.

    An algorithm's declaration lists the extensions its runs may have (`extensions`); the run
    has those its settings want, checked before any work (`check`).

    A generation: ask -> before -> (prepare, evaluate the training episodes) -> tell -> (prepare,
    evaluate the validation episodes) -> after (its fields into the metrics row) -> the elite
    files (with elite()) -> state() into the checkpoint -> checkpointed().
    """

    @staticmethod
    def wanted(cfg) -> bool:
        """Whether a run with these settings has this extension."""
        return False

    @staticmethod
    def check(cfg, task) -> None:
        """Before any work, for a run that wants it: a ConfigError of one line where the settings
        and the task cannot have it."""

    def load_state(self, checkpoint: dict) -> None:
        """Resume from a checkpoint that state() wrote into."""

    def prepare(self, population: Population) -> Population:
        """Every population as the evaluator is to receive it."""
        return population

    def before(self, generation: int, population: Population, episodes: Episodes, algo) -> None:
        """After ask, before the generation's training episodes run."""

    def after(self, row: dict, train: Results, valid: Results, algo) -> None:
        """After the generation's validation: its fields into the metrics row."""

    def elite(self, algo) -> dict:
        """Files beside this generation's elite: {key in elite.json: (file name, array)}, each
        array saved in the run folder and named in elite.json (and best.json) under its key."""
        return {}

    def state(self, algo) -> dict:
        """Arrays for the checkpoint (files it names are written here, before it)."""
        return {}

    def checkpointed(self, algo) -> None:
        """After the checkpoint is written."""
