"""A (1+lambda) evolution strategy over seed-list genomes: an algorithm of one's own, in one file.

Each generation the parent (row 0, unchanged) and lambda children (the parent plus one Gaussian
mutation each) play one episode each; the best of them, the parent on a tie, becomes the next
parent, and plays `validation_episodes` more for the elite's score. Generation 0 has no parent:
its 1 + lambda rows are fresh networks.

Run it as any algorithm of nevo's (docs/architecture.md, "Add an algorithm"):

    nevo train one-plus-lambda --algo-module tests/algorithms/one_plus_lambda.py \\
        --env CartPole-v1 --lam 8

or nevo.train("one-plus-lambda", env="CartPole-v1", algo_module="tests/algorithms/one_plus_lambda.py").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nevo import runs
from nevo.algos import Declaration, fitness_order
from nevo.algos.contract import Extension
from nevo.algos.streams import rng_for
from nevo.episodes import Episodes, Population, Results
from nevo.genomes.noise import SEED_LIMIT
from nevo.settings import require, setting

TRAIN, VALIDATION, MUTATION = range(3)  # purposes of the run's random streams


@dataclass(frozen=True)
class OnePlusLambdaConfig:
    lam: int = setting(16, "children of the parent per generation (lambda)")
    sigma: float = setting(0.01, "mutation power: child = parent + sigma * N(0, I)")
    validation_episodes: int = setting(5, "episodes the new parent is scored on")


def validate(s: OnePlusLambdaConfig, name: str) -> None:
    require(s.lam >= 1, "lam", "an integer >= 1", s.lam)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)


class OnePlusLambda:
    validated = True
    agent_count, agent_index, elite_agent = 1, 0, 0  # one population, no meta-population
    best_elite = None  # the elite is the parent: no other best kept

    def __init__(self, cfg: OnePlusLambdaConfig, seed: int):
        self.cfg, self.seed, self.generation = cfg, seed, 0
        self.parent = np.zeros(0, np.int64)  # its seed list; empty before generation 0 chose one
        self.elite_score = float("nan")
        self._genomes: list[np.ndarray] = []

    @property
    def elite(self) -> np.ndarray | None:
        return self.parent if len(self.parent) else None

    @property
    def validation_episodes(self) -> int:
        return self.cfg.validation_episodes

    def ask_start(self):
        return None

    def tell_start(self, results: Results) -> None:
        pass

    def ask(self) -> tuple[Population, Episodes]:
        n = self.cfg.lam + 1
        seeds = rng_for(self.seed, self.generation, MUTATION).integers(0, SEED_LIMIT, n).astype(np.int64)
        if len(self.parent):  # row 0: the parent unchanged; the others: one mutation of it each
            base, seeds[0] = np.zeros(n, np.int64), -1
            self._genomes = [self.parent, *[np.append(self.parent, s) for s in seeds[1:]]]
            bases = [self.parent]
        else:  # generation 0: fresh networks
            base, bases = np.full(n, -1, np.int64), []
            self._genomes = [np.array([s], np.int64) for s in seeds]
        self._population = Population(
            bases, base, seeds, np.full(n, self.cfg.sigma, np.float32), self.cfg.sigma
        )
        episodes = rng_for(self.seed, self.generation, TRAIN).integers(0, SEED_LIMIT, n).astype(np.int64)
        return self._population, Episodes(np.arange(n, dtype=np.int64), episodes)

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray:
        fitness = results.returns if fitness is None else np.asarray(fitness, np.float64)
        self._best = int(fitness_order(fitness)[0])  # a tie keeps the earlier row: the parent
        return fitness

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]:
        v = self.cfg.validation_episodes
        seeds = rng_for(self.seed, self.generation, VALIDATION).integers(0, SEED_LIMIT, v).astype(np.int64)
        return self._population.rows([self._best]), Episodes(np.zeros(v, np.int64), seeds, validation=True)

    def tell_validation(self, results: Results) -> np.ndarray:
        self.parent = self._genomes[self._best]
        self.elite_score = float(results.returns.mean())
        self.generation += 1
        return np.array([self.elite_score])

    def metrics(self) -> dict:
        return {"score/elite_mean": self.elite_score, "elite/genome_len": len(self.parent)}

    def state(self) -> dict:
        return {"generation": np.int64(self.generation), "parent": self.parent,
                "elite_score": np.float64(self.elite_score)}  # fmt: skip

    def load_state(self, st: dict) -> None:
        self.generation, self.elite_score = int(st["generation"]), float(st["elite_score"])
        self.parent = np.asarray(st["parent"], np.int64)


class ParentChanges(Extension):
    """An extension of its own: the generations so far whose parent was new, as a metric
    (opl/parent_changes) and a file in the run folder (parent_changes.json), kept in the
    checkpoint so that a resumed run counts on."""

    FILE = "parent_changes.json"

    def __init__(self, run_dir: str):
        self.run_dir, self.changes, self.parent = run_dir, 0, np.zeros(0, np.int64)

    @staticmethod
    def wanted(cfg) -> bool:
        return True  # every run of it

    @classmethod
    def of(cls, cfg, spec, task, algo, run_dir):
        return cls(run_dir)

    def after(self, row: dict, train: Results, valid: Results, algo) -> None:
        if not np.array_equal(algo.parent, self.parent):
            self.changes, self.parent = self.changes + 1, algo.parent.copy()
        row["opl/parent_changes"] = self.changes

    def state(self, algo) -> dict:
        runs.write_json(self.run_dir, self.FILE, {"generation": algo.generation - 1, "changes": self.changes})
        return {"opl/parent_changes": np.int64(self.changes), "opl/parent": self.parent}

    def load_state(self, checkpoint: dict) -> None:
        self.changes = int(checkpoint["opl/parent_changes"])
        self.parent = np.asarray(checkpoint["opl/parent"], np.int64)


DECLARATIONS = (
    Declaration(
        names=("one-plus-lambda",),
        make=lambda name, cfg, noise, behaviour: OnePlusLambda(cfg.settings, cfg.run.seed),
        bases=lambda cfg: 1,  # the parent
        population=lambda cfg: cfg.settings.lam + 1,  # the parent and its children
        summary=lambda cfg: f"(1+{cfg.settings.lam}) sigma={cfg.settings.sigma}",
        settings=OnePlusLambdaConfig,
        section="one_plus_lambda",
        validate=validate,
        # what it takes on each kind of task where the command line is silent: the GA's net,
        # mutation power, validation and frame budget (nevo.algos.ga.ON_TASKS)
        on_tasks={
            "one-plus-lambda": {
                "maze": {"validation_episodes": 1, "sigma": 0.005, "frame_budget": 1_000_000},
                "gymnasium": {"net": "mlp", "vbn": 0, "sigma": 0.05, "frame_budget": 3_000_000},
                "mujoco": {
                    "net": "mlp-tanh",
                    "vbn": 0,
                    "sigma": 0.02,
                    "frame_budget": 10_000_000,
                    "validation_episodes": 5,
                },
                "data set": {
                    "net": "mnist",
                    "vbn": 0,
                    "sigma": 0.002,
                    "validation_episodes": 1,
                    "frame_budget": 20_000_000,
                    "noise_table_size": 32_000_000,
                },
            }
        },
        extensions=(ParentChanges,),  # its own: nevo names it nowhere
    ),
)
