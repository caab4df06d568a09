"""The deep genetic algorithm of Such et al. 2017 (arXiv 1712.06567), and random search.

Each generation: every individual plays one episode; the top T by that score are the
parents; the elite candidates (the previous elite and the top `elite_candidates` - 1 by that
score) are re-evaluated on the same `validation_episodes` fresh episodes and the best mean is
the elite, copied unmodified into the next generation and always one of its parents; every
other child is a uniformly chosen parent plus sigma * N(0, I). No crossover. Random search is
the same loop with T = 0: every child is a fresh random network (the elite is still kept).

With a safe mutation (--mutation sm-*, Lehman et al. 2018, arXiv 1712.06563) a child is still
one seed more than its parent, and the parent's sensitivity is measured on the parent's
experiences: the observations of the first training episode it played (a seeded sample the
evaluator keeps, nevo.episodes.experiences), held here per parent (`parent_experiences`) and handed to
the evaluator with the population (nevo.genomes.safe_build builds the children).

The previous elite is re-validated every generation, as Uber's reference GA does
(gpu_implementation/ga.py of uber-research/deep-neuroevolution: the validation set is the
elite plus the top k - 1, and the elite replaces the last of the top T parents when it is not
among them). Without that, an elite whose one training episode went badly (its no-op start
differs each generation) drops out of the candidates and a worse network takes its place: a
Frostbite run lost a 2,520-point elite that way. The best elite ever seen (by validation
mean) is kept too, as the reference's final report does.

State is plain data: the genomes of the population to evaluate, as the parents' seed lists plus
how each row comes from them (copy, mutate or fresh), the elite, and the generation counter.
The GA never builds weights: `ask` describes the population (nevo.episodes.Population) and
whoever evaluates builds each row where it is used. Every random choice is drawn from a generator seeded by
(run seed, generation, purpose), so a resumed run repeats an uninterrupted one exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nevo import runs
from nevo.algos.contract import Extension
from nevo.algos.declaration import Declaration
from nevo.algos.ranking import fitness_order
from nevo.algos.streams import rng_for
from nevo.episodes import Episodes, Population, Results
from nevo.genomes.noise import SEED_LIMIT
from nevo.genomes.operators import NAMES as MUTATIONS
from nevo.genomes.operators import mutation
from nevo.settings import require, setting


@dataclass(frozen=True)
class GAConfig:
    population: int = setting(1000, "individuals evaluated per generation (N)")
    truncation: int = setting(20, "top individuals that may be parents (T); 0 = random search")
    sigma: float = setting(0.002, "mutation power: child = parent + sigma * N(0, I)")
    elite_candidates: int = setting(10, "top individuals re-evaluated to pick the elite")
    validation_episodes: int = setting(30, "episodes each elite candidate is re-evaluated on")
    mutation: str = setting(
        "gaussian",
        "gaussian (parent + sigma*eps), or a safe mutation of Lehman et al. 2018: sm-r, sm-g-sum, "
        "sm-g-abs, sm-g-so (sigma*eps scaled by the parent's output sensitivity)",
    )
    experiences: int = setting(100, "safe mutations: observations kept per individual to measure it on")


def validate_ga(g, name: str = "ga") -> None:
    require(g.population >= 2, "population", "an integer >= 2", g.population)
    require(
        0 <= g.truncation <= g.population,
        "truncation",
        f"0 (random search) .. population ({g.population})",
        g.truncation,
    )
    require(g.sigma > 0, "sigma", "a number > 0", g.sigma)
    require(
        1 <= g.elite_candidates <= g.population,
        "elite_candidates",
        f"1 .. population ({g.population})",
        g.elite_candidates,
    )
    require(g.validation_episodes >= 1, "validation_episodes", "an integer >= 1", g.validation_episodes)
    validate_mutation(g, g.truncation)


def validate_mutation(g, truncation: int) -> None:
    """--mutation and --experiences of the GA and GA-NS."""
    require(g.mutation in MUTATIONS, "mutation", ", ".join(MUTATIONS), g.mutation)
    require(g.experiences >= 1, "experiences", "an integer >= 1", g.experiences)
    if mutation(g.mutation).safe:
        require(truncation > 0, "mutation", "gaussian for random search (it has no parents)", g.mutation)


# Purposes of the per-generation random streams.
TRAIN_EPISODES, VALIDATION_EPISODES, MUTATION_SEEDS, PARENT_CHOICE, INIT_SEEDS = range(5)


class GA:
    """Truncation selection, Gaussian mutation, elitism; ask/tell over explicit state."""

    validated = True  # every generation validates its elite candidates
    agent_count, agent_index, elite_agent = 1, 0, 0  # one population: no meta-population of agents

    def __init__(self, ga_cfg, seed: int):
        self.cfg = ga_cfg
        self.seed = seed
        self.generation = 0
        self.elite: np.ndarray | None = None  # seed list of the current elite
        self.elite_score = float("nan")  # its validation mean
        self.elite_kept = False  # whether the previous elite stayed the elite this generation
        # The previous elite's mean on this generation's validation episodes (nan in generation 0
        # and without validation): where a task's episodes differ by seed (Atari, gymnasium),
        # seeds it was not picked on, so, unlike the maximum that picked it, an unbiased estimate
        # of its score; on a data set or the deterministic maze it repeats the elite's mean.
        self.previous_elite_score = float("nan")
        self.best: np.ndarray | None = None  # seed list of the best elite ever (by validation mean)
        self.best_score = float("nan")
        self.best_generation = -1
        # The population to evaluate, as seed lists and as how each row comes from the parents:
        # row i = parents[base_idx[i]] mutated by new_seed[i] (base -1: fresh; seed -1: copy).
        n = ga_cfg.population
        init = rng_for(seed, 0, INIT_SEEDS).integers(0, SEED_LIMIT, n)
        self.parents: list[np.ndarray] = []
        self.base_idx = np.full(n, -1, np.int64)
        self.new_seed = init.astype(np.int64)
        self.genomes = [np.array([s], np.int64) for s in init]
        self.mutation = mutation(ga_cfg.mutation)  # the operator, chosen once
        # Safe mutations: the observations each parent's sensitivity is measured on, as parents
        # (kept in the run folder by the run script: nevo.runs.save_experiences), and this
        # generation's training episodes' sample.
        self.parent_experiences: list[np.ndarray] | None = None
        self._train: Results | None = None
        self._population: Population | None = None
        self._order: np.ndarray | None = None
        self._candidates: np.ndarray | None = None

    # ---- ask / tell -------------------------------------------------------------------
    def ask_start(self) -> None:
        """Nothing to evaluate before the first generation."""
        return None

    def tell_start(self, results: Results) -> None:
        """Nothing to start (ask_start asks for no evaluation)."""

    @property
    def validation_episodes(self) -> int:
        return self.cfg.validation_episodes

    @property
    def best_elite(self) -> tuple | None:
        """(generation, seed list, validation mean) of the best elite so far; None while every
        validation mean was NaN."""
        return None if self.best is None else (self.best_generation, self.best, self.best_score)

    def living_genomes(self) -> list[np.ndarray]:
        """The seed lists a checkpoint of this state needs rebuilt: the parents, the elite and the
        best elite (safe mutations keep their ancestors' experiences for them)."""
        return [*self.parents, *[g for g in (self.elite, self.best) if g is not None]]

    def ask(self) -> tuple[Population, Episodes]:
        """The population (N rows, as genomes) and one training episode per individual."""
        n = self.cfg.population
        sigma = np.full(n, self.cfg.sigma, np.float32)
        self._population = Population(self.parents, self.base_idx, self.new_seed, sigma, self.cfg.sigma,
                                      self.mutation, self.parent_experiences)  # fmt: skip
        seeds = rng_for(self.seed, self.generation, TRAIN_EPISODES).integers(0, SEED_LIMIT, n)
        record = self.cfg.experiences if self.mutation.safe else 0
        return self._population, Episodes(np.arange(n, dtype=np.int64), seeds.astype(np.int64), record)

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray:
        """Rank the population by its episode scores (or by `fitness` given by the caller, e.g.
        novelty for GA-NS) and choose the elite candidates; returns the fitness array."""
        fitness = results.returns if fitness is None else np.asarray(fitness, np.float64)
        self._train = results  # episode i is row i's (ask's order): its experiences, for breeding
        self._order = fitness_order(fitness)
        k = self.cfg.elite_candidates
        if self.elite is None:  # generation 0: the top k
            self._candidates = self._order[:k]
        else:  # row 0 is the previous elite: it and the top k - 1 of the others (the reference's rule)
            others = self._order[self._order != 0]
            self._candidates = np.concatenate([[0], others[: k - 1]]).astype(np.int64)
        return fitness

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]:
        """The k elite candidates (the previous elite first, after generation 0), each on the
        same validation episode seeds."""
        v, k = self.cfg.validation_episodes, len(self._candidates)
        seeds = rng_for(self.seed, self.generation, VALIDATION_EPISODES).integers(0, SEED_LIMIT, v)
        ind = np.repeat(np.arange(k, dtype=np.int64), v)
        # Only the candidates' rows: a GPU policy uploads k rows, not the population.
        population = self._population.rows(self._candidates)
        return population, Episodes(ind, np.tile(seeds, k).astype(np.int64), validation=True)

    def tell_validation(self, results: Results) -> np.ndarray:
        """Pick the elite by validation mean (a tie keeps the earlier candidate: the previous
        elite), remember the best ever, then breed the next generation; returns the means."""
        k, v = len(self._candidates), self.cfg.validation_episodes
        means = results.returns.reshape(k, v).mean(axis=1)
        pick = int(fitness_order(means)[0])
        best = int(self._candidates[pick])
        self.elite_kept = self.elite is not None and best == 0
        self.previous_elite_score = float(means[0]) if self.elite is not None else float("nan")
        self.elite = self.genomes[best]
        self.elite_score = float(means[pick])
        if self._is_new_best():
            self.best, self.best_score, self.best_generation = self.elite, self.elite_score, self.generation
        self._breed(best)
        return means

    def _is_new_best(self) -> bool:
        """The elite beats the best so far, or ties it as another network: of equal validation
        means the later one is kept (on a capped score such as CartPole's 500 the first to tie
        the cap is often a lucky one; a later one has survived more selection)."""
        if not np.isfinite(self.elite_score):
            return False
        if self.best is None or self.elite_score > self.best_score:
            return True
        return self.elite_score == self.best_score and not np.array_equal(self.elite, self.best)

    def take_top_as_elite(self, score: float) -> None:
        """The elite is the top of the training ranking, kept without re-evaluation (GA-NS: the
        maze is deterministic and novelty is no noisy score); then breed. score: its record."""
        best = int(self._order[0])
        self.elite_kept = self.elite is not None and best == 0
        self.elite, self.elite_score = self.genomes[best], float(score)
        self._breed(best)

    def metrics(self) -> dict:
        """The elite's and the best elite's validation means, the previous elite's mean on fresh
        validation episodes (from generation 1) and the elite's genome, for the log line."""
        fresh = self.previous_elite_score
        return {
            "score/elite_mean": self.elite_score,
            "score/best_mean": self.best_score,
            **({"score/previous_elite_mean": fresh} if np.isfinite(fresh) else {}),
            "elite/genome_len": len(self.elite),
            "elite/kept": int(self.elite_kept),
        }

    # ---- breeding ---------------------------------------------------------------------
    def _breed(self, elite_row: int) -> None:
        """Next population: the elite copied as row 0, then children of the T parents: the top
        T by training score, or, when the elite is not among them, the elite and the top T - 1
        (as the reference GA caches its parents)."""
        n, t, g = self.cfg.population, self.cfg.truncation, self.generation + 1
        top = [int(i) for i in self._order[:t]]
        parents = top if elite_row in top or t == 0 else [elite_row, *top[: t - 1]]
        # The rows the next population is built from: the elite (its row 0) and the parents.
        keep = list(dict.fromkeys([elite_row, *parents]))
        if self.mutation.safe:
            self.parent_experiences = self._experiences_of(keep)
            self._train = None  # the population's sample (GBs on Atari) is not needed any more
        self.parents = [self.genomes[i] for i in keep]
        mutation = rng_for(self.seed, g, MUTATION_SEEDS).integers(0, SEED_LIMIT, n).astype(np.int64)
        if t > 0:
            choice = rng_for(self.seed, g, PARENT_CHOICE).integers(0, t, n)
            base = np.array([keep.index(parents[c]) for c in choice], np.int64)
        else:  # random search: fresh networks
            base = np.full(n, -1, np.int64)
        base[0], mutation[0] = 0, -1  # the elite, unmodified
        self._set_population(base, mutation)
        self.generation = g

    def _experiences_of(self, rows: list[int]) -> list[np.ndarray]:
        """The experiences of these rows as parents: a parent's own from when it was a parent
        before (the elite, or a parent copied on), else its training episode's this generation."""
        mine = {}
        if self.parent_experiences is not None:
            mine = {g.tobytes(): e for g, e in zip(self.parents, self.parent_experiences)}
        out = []
        for i in rows:
            known = mine.get(self.genomes[i].tobytes())
            if known is None:
                tr = self._train
                known = tr.experiences[i, : tr.experience_counts[i]].copy()
            out.append(known)
        return out

    def _set_population(self, base_idx: np.ndarray, new_seed: np.ndarray) -> None:
        self.base_idx, self.new_seed = base_idx, new_seed
        self.genomes = []
        for b, s in zip(base_idx, new_seed):
            if b < 0:
                self.genomes.append(np.array([s], np.int64))
            elif s < 0:
                self.genomes.append(self.parents[b])
            else:
                self.genomes.append(np.append(self.parents[b], s))

    # ---- checkpoint -------------------------------------------------------------------
    def state(self) -> dict:
        """Plain arrays that describe the population to evaluate next."""
        lengths = np.array([len(p) for p in self.parents], np.int64)
        flat = np.concatenate(self.parents) if self.parents else np.zeros(0, np.int64)
        elite = self.elite if self.elite is not None else np.zeros(0, np.int64)
        best = self.best if self.best is not None else np.zeros(0, np.int64)
        return {
            "generation": np.int64(self.generation),
            "parent_seeds": flat,
            "parent_lengths": lengths,
            "base_idx": self.base_idx,
            "new_seed": self.new_seed,
            "elite": elite,
            "elite_score": np.float64(self.elite_score),
            "elite_kept": np.bool_(self.elite_kept),
            "best": best,
            "best_score": np.float64(self.best_score),
            "best_generation": np.int64(self.best_generation),
        }

    def load_state(self, st: dict) -> None:
        """Restore from `state()` (the evaluator rebuilds the parents' weights from their seed lists)."""
        self.generation = int(st["generation"])
        splits = np.cumsum(st["parent_lengths"])[:-1]
        self.parents = (
            list(np.split(np.asarray(st["parent_seeds"], np.int64), splits))
            if len(st["parent_lengths"])
            else []
        )
        elite = np.asarray(st["elite"], np.int64)
        self.elite = elite if elite.size else None
        self.elite_score = float(st["elite_score"])
        self.elite_kept = bool(st.get("elite_kept", False))
        if "best" in st:
            best = np.asarray(st["best"], np.int64)
            self.best = best if best.size else None
            self.best_score, self.best_generation = float(st["best_score"]), int(st["best_generation"])
        else:  # a checkpoint written before the best elite was kept: the elite stands for it
            self.best, self.best_score = self.elite, self.elite_score
            self.best_generation = self.generation - 1 if self.elite is not None else -1
        self._set_population(np.asarray(st["base_idx"], np.int64), np.asarray(st["new_seed"], np.int64))


class Experiences(Extension):
    """Safe mutations (Lehman et al. 2018): each parent's sensitivity is measured on its own
    experiences, kept in the run folder (nevo.runs.save_experiences), so that a resumed run and
    a replay rebuild its children; those of genomes no checkpoint needs any more are pruned."""

    def __init__(self, run_dir: str, algo):
        self.run_dir = run_dir
        if algo.parents:  # a resumed run: the parents' experiences, from the run folder
            algo.parent_experiences = [runs.load_experiences(run_dir, g) for g in algo.parents]
        self.living = algo.living_genomes()  # whose experiences the last checkpoint needs

    @staticmethod
    def wanted(cfg) -> bool:
        return mutation(getattr(cfg.settings, "mutation", "gaussian")).safe

    @classmethod
    def of(cls, cfg, spec, task, algo, run_dir):
        return cls(run_dir, algo)

    def after(self, row: dict, train: Results, valid: Results, algo) -> None:
        row["perf/mutation_s"] = round(train.mutation_s + valid.mutation_s, 3)

    def state(self, algo) -> dict:
        """The parents' experiences, saved before the checkpoint that names them."""
        runs.save_experiences(self.run_dir, algo.parents, algo.parent_experiences)
        return {}

    def checkpointed(self, algo) -> None:
        """After a checkpoint, drop the experiences no genome needs; the previous checkpoint's
        genomes still count (--resume may fall back to it)."""
        now = algo.living_genomes()
        runs.prune_experiences(self.run_dir, now + self.living)
        self.living = now


# What the GA (and random search, its loop with T = 0) takes on each kind of task where the
# command line is silent. On Atari: the presets, made for it (Such et al. 2017's settings).
# - maze: deterministic, one validation episode says all; the mutation power 0.005;
# - gymnasium tasks: the mlp net, a population and sigma that solve CartPole-v1 in about a minute;
# - MuJoCo, for one workstation: the 2 x 64 tanh policy and sigma 0.02 of OpenAI-ES (Salimans et
#   al. 2017), a population of 64 (the papers': 1,000 and more, the presets), 10M steps;
# - MNIST (and a data set of one's own): the 28,938-parameter net, the paper's sigma 0.002
#   (Zhang, Clune & Stanley 2017), 64 individuals, the whole test set as one validation episode;
#   a noise table of 128 MB (a net of up to 32M parameters).
GYMNASIUM = {"net": "mlp", "vbn": 0, "population": 64, "truncation": 8, "sigma": 0.05,
             "frame_budget": 3_000_000}  # fmt: skip
MUJOCO = {"net": "mlp-tanh", "vbn": 0, "sigma": 0.02, "frame_budget": 10_000_000, "population": 64,
          "truncation": 8}  # fmt: skip
DATA_SET = {"net": "mnist", "population": 64, "truncation": 8, "sigma": 0.002, "elite_candidates": 3,
            "validation_episodes": 1, "frame_budget": 20_000_000, "vbn": 0,
            "noise_table_size": 32_000_000}  # fmt: skip
ON_TASKS = {
    "maze": {"elite_candidates": 1, "validation_episodes": 1, "sigma": 0.005, "frame_budget": 1_000_000},
    "gymnasium": GYMNASIUM,
    "mujoco": {**MUJOCO, "elite_candidates": 3, "validation_episodes": 5},
    "data set": DATA_SET,
    "own data set": DATA_SET,
}  # fmt: skip

PRESETS = {
    # The reference Deep GA (Such et al. 2017, as Uber's GPU code runs it): N=1000, T=20,
    # sigma=0.002, the top 10 re-evaluated on 30 episodes each.
    "paper": {},
    # Random search: the same loop with T=0, every offspring a fresh random network.
    "rs": {"algo": "rs", "settings": {"truncation": 0}},
    # The Deep GA on a MuJoCo robot: the Deep GA's loop with the 2 x 64 tanh policy; the values
    # are our pick (Such et al. 2017 evolve Humanoid too, but their settings for it are not
    # restated here): N 1,000, T 20, sigma 0.02 (a tanh policy's useful step, OpenAI-ES's), the
    # top 10 re-evaluated on 30 episodes each.
    "mujoco": {"made_for": "mujoco", "env": {"env": "Humanoid-v5"}, "net": {"net": "mlp-tanh"},
               "settings": {"sigma": 0.02}},
    # 4-6 minutes on 2 cores: the small net, a small population, short validation.
    "quick": {
        "net": {"net": "small"},
        "settings": {"population": 64, "truncation": 8, "elite_candidates": 3, "validation_episodes": 5},
        "run": {"frame_budget": 3_000_000, "noise_table_size": 32_000_000},
    },
    # The 100M-frame table's: quick's small net and truncation at a population of 256, the top 3
    # re-evaluated on 30 episodes each. On Frostbite at 25M frames (seed 0) the population of 256
    # took the test from 262 to 1,889 and 30 validation episodes to 2,588 (validation mean then
    # equal to the test's); about 16K frames/s on 2 cores, 1.7 h per 100M frames.
    "medium": {
        "net": {"net": "small"},
        "settings": {"population": 256, "truncation": 8, "elite_candidates": 3, "validation_episodes": 30},
        "run": {"frame_budget": 100_000_000, "noise_table_size": 32_000_000},
    },
}  # fmt: skip

ABOUT = """\
The deep genetic algorithm (or random search) of Such et al. 2017, on Atari or any task.

    nevo train ga                                    # the quick preset on Frostbite
    nevo train ga --preset paper --game frostbite
    nevo train rs                                    # random search (T = 0)
    nevo train ga --env CartPole-v1                  # a gymnasium vector task: 3M steps, 1-1.5 min
    nevo train --resume runs/<folder>                # continue a killed run
    nevo train ga --cluster local:2                  # on a Dask cluster (or tcp://host:8786)
    nevo train ga --env CartPole-v1 --net deep --mutation sm-g-sum  # safe mutations

Each generation: ask -> evaluate -> tell, validate the top candidates -> log -> checkpoint.
"""  # its command's description (`nevo train ... --help`)

DECLARATIONS = (
    Declaration(
        names=("ga", "rs"),  # random search: the GA with truncation 0 (--preset rs)
        about=ABOUT,
        make=lambda name, cfg, noise, behaviour: GA(cfg.settings, cfg.run.seed),
        bases=lambda cfg: cfg.settings.truncation + 1,  # the parents and the elite
        summary=lambda cfg: (
            f"N={cfg.settings.population} T={cfg.settings.truncation} sigma={cfg.settings.sigma}"
        ),
        settings=GAConfig,
        section="ga",
        validate=validate_ga,
        defaults={"rs": {"truncation": 0}},  # random search has no parents
        on_tasks={"ga": ON_TASKS, "rs": ON_TASKS},  # random search is the GA's loop
        extensions=(Experiences,),  # safe mutations' parent experiences
        presets=PRESETS,
    ),
)
