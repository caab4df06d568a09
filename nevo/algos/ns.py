"""Novelty search (Lehman & Stanley 2011) as the deep-neuroevolution papers run it.

- GANS: GA-NS of Such et al. 2017 (arXiv 1712.06567). The deep GA (nevo.algos.ga.GA) selecting on
  novelty instead of reward: novelty = mean distance to the k nearest behaviours among the archive
  and the current population; each individual's behaviour joins the archive with probability
  `archive_prob`; the elite is the most novel individual, kept without validation episodes (the
  maze is deterministic and novelty is no noisy score), and logged with its game score.
- NSES: NS-ES, NSR-ES and NSRA-ES of Conti et al. 2018 (arXiv 1712.06560). A meta-population of
  OpenAI-ES agents (nevo.algos.es.ES); each generation the agent to update is drawn with
  probability proportional to its novelty against the archive, its perturbations are ranked by
  w * reward ranks + (1 - w) * novelty ranks (w = 0: NS-ES; fixed: NSR-ES; adapted: NSRA-ES),
  the agent steps, and its new behaviour (its theta's, on its validation episodes) joins the
  archive.

Both follow the ask/tell shape of GA and ES: ask() -> (Population, Episodes); tell(Results);
ask_validation() -> (Population, Episodes), zero episodes for GANS; tell_validation(Results);
`generation`; metrics() for the log line; state()/load_state() as plain arrays. Novelty search
adds one pair, ask_start()/tell_start(), which a run calls once before its first generation
(not on resume): the ES family's agents' first behaviours start the archive (Conti et al.);
GA-NS starts from an empty archive and asks for no episode.

Every random choice is drawn from a generator seeded by (run seed, generation, purpose): a
resumed run repeats an uninterrupted one exactly.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from nevo.algos import es, ga
from nevo.algos.declaration import Declaration
from nevo.algos.es import ES, ESConfig
from nevo.algos.ga import GA, GAConfig
from nevo.algos.novelty import Archive, NSRAWeight, knn_novelty, mix_ranks, pick_agent, sample_for_archive
from nevo.algos.ns_settings import (
    GA_NS_GA,
    NS_ES_ES,
    GANSConfig,
    NSESConfig,
    validate_gans,
    validate_nses,
)
from nevo.algos.ranking import fitness_order
from nevo.algos.streams import rng_for
from nevo.episodes import Episodes, Population, Results
from nevo.genomes.noise import NoiseSource

# Purposes of the novelty-search random streams (apart from the GA's and the agents' by value).
ARCHIVE_PICK, AGENT_PICK = 100, 101

ES_VARIANTS = ("ns-es", "nsr-es", "nsra-es")


def _no_episodes() -> Episodes:
    return Episodes(np.zeros(0, np.int64), np.zeros(0, np.int64))


def _prefixed(st: dict, prefix: str) -> dict:
    """The entries of st whose keys start with prefix, the prefix dropped."""
    return {k[len(prefix) :]: v for k, v in st.items() if k.startswith(prefix)}


class GANS:
    """The deep GA selecting on novelty (Such et al.), with its archive; ask/tell as GA's."""

    validated = True  # every generation keeps its elite
    agent_count, agent_index, elite_agent = 1, 0, 0  # one population: no meta-population of agents

    def __init__(self, ns_cfg, seed: int, behaviour: tuple[int, type]):
        self.cfg = ns_cfg
        self.seed = seed
        # One elite candidate and no validation: the top of the novelty ranking is the elite.
        ga_cfg = GAConfig(**{n: getattr(ns_cfg, n) for n in GA_NS_GA}, elite_candidates=1)
        self.ga = GA(ga_cfg, seed)
        self.archive = Archive(*behaviour)
        self.best_return = -np.inf  # best training return so far
        self.novelty: np.ndarray | None = None  # (N,) float64 this generation's novelty
        self.elite_novelty = float("nan")
        self._returns: np.ndarray | None = None  # (N,) this generation's training returns
        self._elite_row = -1

    @property
    def generation(self) -> int:
        return self.ga.generation

    @property
    def elite(self) -> np.ndarray | None:
        """The elite's seed list."""
        return self.ga.elite

    @property
    def elite_score(self) -> float:
        """The elite's game score: its training return (novelty is not a score)."""
        return self.ga.elite_score

    @property
    def parents(self) -> list[np.ndarray]:
        """The seed lists of the next generation's parents (GA.parents)."""
        return self.ga.parents

    @property
    def parent_experiences(self) -> list[np.ndarray] | None:
        """Safe mutations: the parents' experiences (GA.parent_experiences)."""
        return self.ga.parent_experiences

    @parent_experiences.setter
    def parent_experiences(self, value) -> None:
        self.ga.parent_experiences = value

    def living_genomes(self) -> list[np.ndarray]:
        """The seed lists a checkpoint of this state needs rebuilt (GA.living_genomes)."""
        return self.ga.living_genomes()

    def ask_start(self) -> None:
        """GA-NS starts from an empty archive: nothing to evaluate first."""
        return None

    def tell_start(self, results: Results) -> None:
        """Nothing to start (ask_start asks for no evaluation)."""

    validation_episodes = 1  # the elite's score is its training episode's: GA-NS validates nothing
    best_elite = None  # the elite is the most novel individual; no best is kept

    def ask(self) -> tuple[Population, Episodes]:
        """The population and one training episode each (GA.ask)."""
        return self.ga.ask()

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray:
        """Rank the population by novelty, then add a random sample of its behaviours to the
        archive; returns the (N,) novelty. fitness: the caller's score per individual, kept where
        GA-NS keeps returns (the best so far, the elite's recorded score)."""
        bc = results.behaviours  # (N, d)
        # Against the archive and the population (Such et al.): each counts a distance of 0 to itself.
        nov = knn_novelty(bc, np.concatenate([self.archive.data, bc]), self.cfg.k)
        self.ga.tell(results, fitness=nov)
        self._elite_row = int(fitness_order(nov)[0])  # the elite GA.take_top_as_elite will keep
        rng = rng_for(self.seed, self.generation, ARCHIVE_PICK)
        self.archive.add(bc[sample_for_archive(len(bc), self.cfg.archive_prob, rng)])
        score = results.returns if fitness is None else np.asarray(fitness, np.float64)
        self.best_return = max(self.best_return, float(np.max(score)))
        self.novelty, self._returns = nov, score
        return nov

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]:
        """No episode: the maze is deterministic and novelty is no noisy score."""
        return self.ga.ask()[0], _no_episodes()

    def tell_validation(self, results: Results) -> None:
        """Keep the most novel individual as the elite, recorded with its game score; then breed."""
        self.elite_novelty = float(self.novelty[self._elite_row])
        self.ga.take_top_as_elite(score=float(self._returns[self._elite_row]))

    def metrics(self) -> dict:
        """The elite's game score and novelty, the population's novelty, the archive's size."""
        return {
            "score/best_ever": self.best_return,
            "score/elite_mean": self.elite_score,
            "ns/elite_novelty": self.elite_novelty,
            "ns/novelty_max": float(self.novelty.max()),
            "ns/novelty_mean": float(self.novelty.mean()),
            "ns/archive_size": len(self.archive),
        }

    def state(self) -> dict:
        return {
            **{f"ga/{k}": v for k, v in self.ga.state().items()},
            **{f"archive/{k}": v for k, v in self.archive.state().items()},
            "best_return": np.float64(self.best_return),
        }

    def load_state(self, st: dict) -> None:
        self.ga.load_state(_prefixed(st, "ga/"))
        self.archive.load_state(_prefixed(st, "archive/"))
        self.best_return = float(st["best_return"])


class NSES:
    """NS-ES, NSR-ES or NSRA-ES (Conti et al.): ES agents and the archive; ask/tell as ES's."""

    validated = True  # every generation validates the updated agent

    def __init__(self, ns_cfg, seed: int, noise: NoiseSource, behaviour: tuple[int, type], variant: str):
        if variant not in ES_VARIANTS:
            raise ValueError(f"NSES: unknown variant {variant!r}; allowed: {', '.join(ES_VARIANTS)}")
        self.cfg = ns_cfg
        self.seed = seed
        self.variant = variant
        es_cfg = ESConfig(**{n: getattr(ns_cfg, n) for n in NS_ES_ES if n != "obs_norm"})
        self.agents = [ES(es_cfg, seed, noise, agent=m) for m in range(ns_cfg.meta_population)]
        self.archive = Archive(*behaviour)
        dim, dtype = behaviour
        self.agent_bc = np.zeros((len(self.agents), dim), dtype)  # (M, d) behaviour of each agent's theta
        self.agent_score = np.full(len(self.agents), np.nan)  # (M,) validation mean of each agent's theta
        # Reward's share of the ranks: NSRA-ES adapts it from reward_weight; the others keep it.
        self.nsra = (
            NSRAWeight(ns_cfg.reward_weight, ns_cfg.nsra_delta, ns_cfg.nsra_patience)
            if variant == "nsra-es"
            else None
        )
        self._fixed_weight = 0.0 if variant == "ns-es" else ns_cfg.reward_weight
        self.generation = 0
        self.best_return = -np.inf  # best return so far: training episodes and agents' validations
        self.agent_index = -1  # the agent updated this generation (drawn in ask)
        self.weight = float("nan")  # reward's share of the ranks this generation
        self.novelty: np.ndarray | None = None  # (N,) float64 this generation's novelty
        self._pop_max = float("nan")

    best_elite = None  # the elite is the best agent's theta; no other is kept

    @property
    def agent_count(self) -> int:
        """The meta-population's agents (M)."""
        return len(self.agents)

    @property
    def validation_episodes(self) -> int:
        return self.cfg.validation_episodes

    @property
    def elite_agent(self) -> int:
        """The agent of the best validation mean (NaN last, the lower index on a tie)."""
        return int(fitness_order(self.agent_score)[0])

    @property
    def elite(self) -> np.ndarray:
        """(P,) float32 theta of the elite agent."""
        return self.agents[self.elite_agent].theta

    @property
    def elite_score(self) -> float:
        return float(self.agent_score[self.elite_agent])

    def ask_start(self) -> tuple[Population, Episodes]:
        """Every agent's theta on its validation episodes: their behaviours start the archive."""
        episodes = [a.ask_validation()[1] for a in self.agents]
        # The one place NSES handles weights itself: the agents' thetas (M, P), row m agent m's.
        population = Population.of_weights(np.stack([a.theta for a in self.agents]))
        ind = np.concatenate([e.ind + m for m, e in enumerate(episodes)])
        return population, Episodes(ind, np.concatenate([e.seeds for e in episodes]), validation=True)

    def tell_start(self, results: Results) -> None:
        """Each agent's validation mean and first behaviour; the behaviours start the archive."""
        v = self.cfg.validation_episodes
        for m, agent in enumerate(self.agents):
            part = results.select(np.arange(m * v, (m + 1) * v))
            self.agent_score[m] = agent.tell_validation(part)
            self.agent_bc[m] = part.behaviours[0]
        self.archive.add(self.agent_bc)

    def ask(self) -> tuple[Population, Episodes]:
        """Draw the agent to update (probability ~ its novelty); its perturbations (ES.ask)."""
        if not len(self.archive):
            raise ValueError("NSES.ask: the archive is empty; start with ask_start/tell_start or load_state")
        nov = knn_novelty(self.agent_bc, self.archive.data, self.cfg.k)
        self.agent_index = pick_agent(nov, rng_for(self.seed, self.generation, AGENT_PICK))
        return self.agents[self.agent_index].ask()

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray:
        """Step the agent along the mixed ranks of reward (or the caller's `fitness`, one number
        per individual) and novelty; returns them (N,)."""
        score = results.returns if fitness is None else np.asarray(fitness, np.float64)
        # (N,) against the archive only (Conti et al.)
        nov = knn_novelty(results.behaviours, self.archive.data, self.cfg.k)
        self.weight = self.nsra.w if self.nsra is not None else self._fixed_weight
        shaped = mix_ranks(score, nov, self.weight)
        self.agents[self.agent_index].step(shaped)
        self.novelty, self._pop_max = nov, float(np.max(score))
        return shaped

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]:
        """The updated agent's theta on its validation episodes (ES.ask_validation)."""
        return self.agents[self.agent_index].ask_validation()

    def tell_validation(self, results: Results) -> None:
        """The agent's score and new behaviour, which joins the archive; NSRA-ES adapts its weight."""
        m = self.agent_index
        self.agent_score[m] = self.agents[m].tell_validation(results)
        self.agent_bc[m] = results.behaviours[0]
        self.archive.add(self.agent_bc[m : m + 1])
        if self.nsra is not None:
            self.nsra.update(self.agent_score[m])
        self.best_return = max(self.best_return, self._pop_max, float(np.nanmax(self.agent_score)))
        self.generation += 1

    def metrics(self) -> dict:
        """The updated agent, its weight and score; the elite agent's score; novelty; the archive's size."""
        m = self.agent_index
        return {
            "ns/agent": m,
            "ns/reward_weight": self.weight,
            "score/agent_mean": float(self.agent_score[m]),
            "score/best_ever": self.best_return,
            "score/elite_mean": self.elite_score,
            "ns/novelty_max": float(self.novelty.max()),
            "ns/novelty_mean": float(self.novelty.mean()),
            "ns/archive_size": len(self.archive),
        }

    def state(self) -> dict:
        st = {f"archive/{k}": v for k, v in self.archive.state().items()}
        for m, agent in enumerate(self.agents):
            st.update({f"agent{m}/{k}": v for k, v in agent.state().items()})
        st.update({"agent_bc": self.agent_bc.copy(), "agent_score": self.agent_score.copy()})
        st.update({"best_return": np.float64(self.best_return), "generation": np.int64(self.generation)})
        return {**st, **(self.nsra.state() if self.nsra is not None else {})}

    def load_state(self, st: dict) -> None:
        self.archive.load_state(_prefixed(st, "archive/"))
        for m, agent in enumerate(self.agents):
            agent.load_state(_prefixed(st, f"agent{m}/"))
        self.agent_bc = np.array(st["agent_bc"], self.archive.dtype)
        self.agent_score = np.array(st["agent_score"], np.float64)
        self.best_return, self.generation = float(st["best_return"]), int(st["generation"])
        if self.nsra is not None:
            self.nsra.load_state(st)


def _ns_summary(cfg) -> str:
    s = cfg.settings
    return f"N={s.population} sigma={s.sigma} k={s.k}"


# The one section both kinds shared before each had its own (run folders before 2026-11-26): the
# names a config.json's "ns" may hold that a kind does not read, dropped when it is loaded.
_SHARED_BEFORE = (
    "population", "sigma", "truncation", "k", "archive_prob", "meta_population", "optimizer", "lr", "l2",
    "momentum", "mirrored", "reward_weight", "nsra_patience", "nsra_delta", "validation_episodes", "obs_norm",
    "mutation", "experiences",
)  # fmt: skip


def _retired(kind) -> tuple[str, ...]:
    return tuple(n for n in _SHARED_BEFORE if n not in {f.name for f in fields(kind)})


# What novelty search takes on each kind of task where the command line is silent:
# - GA-NS as the GA (its population, net and sigma on gymnasium tasks and MuJoCo; the maze's
#   mutation power 0.005), and on Atari the Deep GA's large net and sigma (Such et al. 2017);
# - the ES family as ES on gymnasium tasks, with OpenAI-ES's sigma 0.02 (as it has run here since
#   novelty search came to gymnasium tasks), ES's MuJoCo values with observation normalisation,
#   and on Atari OpenAI-ES's small net with virtual batch norm, which Conti et al. 2018 build on;
#   the hopping and swimming robots with discretised actions, as ES (nevo.algos.es.discretised).
GA_NS_ON_TASKS = {
    "atari": {"net": "large", "sigma": 0.002},
    "maze": {"sigma": 0.005},
    "gymnasium": ga.GYMNASIUM,
    "mujoco": ga.MUJOCO,
}
NS_ES_ON_TASKS = {
    "atari": {"net": "small", "vbn": 128},
    "gymnasium": {**es.GYMNASIUM, "sigma": 0.02},
    "mujoco": {**es.MUJOCO, "obs_norm": 1},
}

# Novelty search's presets run on the maze with the small net unless they name another task.
_MAZE, _SMALL = {"env": "maze"}, {"net": "small"}
GA_NS_PRESETS = {
    # The deceptive maze, minutes per seed on 2 cores: the small net, 64 individuals, 200-step
    # episodes (frames = agent steps), GA-NS by default (--algo picks the others).
    "quick": {"env": _MAZE, "net": _SMALL, "settings": {"population": 64, "truncation": 10},
              "run": {"frame_budget": 1_000_000, "noise_table_size": 32_000_000}},
    # Such et al.'s GA-NS scale on the maze (population 1000, T 20); the ES family as Conti et al.
    "paper": {"env": _MAZE, "net": _SMALL, "run": {"frame_budget": 200_000_000}},
}  # fmt: skip
NS_ES_PRESETS = {
    # Conti et al. 2018's humanoid runs (the values of Uber's released configuration): NSR-ES in
    # the deceptive trap, 1,000 perturbations a generation in mirrored pairs, sigma 0.02, Adam
    # 0.01, L2 0.005, a meta-population of 5, novelty over the 10 nearest final (x, y), the
    # 2 x 256 tanh policy, OpenAI-ES's observation normalisation. Not here: the code's action
    # noise. --algo ns-es or nsra-es for the others.
    "humanoid": {"algo": "nsr-es", "made_for": "mujoco", "env": {"env": "HumanoidTrap-v5"},
                 "net": {"net": "mlp-tanh-256"}, "settings": {"meta_population": 5, "obs_norm": 1}},
}  # fmt: skip

ABOUT = """\
Novelty search: GA-NS (Such et al. 2017) and NS-ES, NSR-ES, NSRA-ES (Conti et al. 2018).

    nevo train ga-ns --env maze                      # the deceptive image maze
    nevo train nsra-es --env maze
    nevo train ga-ns --env frostbite                 # Atari: behaviour = final RAM

Behaviour: the maze's final (x, y); on Atari the 128-byte RAM at the end of the episode; a MuJoCo
robot's final centre of mass (x, y); another gymnasium task's final observation. Novelty = mean
distance to the k nearest neighbours among the archive (and, for GA-NS, the population).
"""  # its command's description (`nevo train ... --help`)

DECLARATIONS = (
    Declaration(
        names=("ga-ns",),
        about=ABOUT,
        make=lambda name, cfg, noise, behaviour: GANS(cfg.settings, cfg.run.seed, behaviour),
        bases=lambda cfg: cfg.settings.truncation + 1,  # the parents and the elite
        summary=_ns_summary,
        settings=GANSConfig,
        section="ns",
        validate=validate_gans,
        retired=_retired(GANSConfig),
        needs_behaviour=True,
        on_tasks={"ga-ns": GA_NS_ON_TASKS},
        extensions=(ga.Experiences,),  # safe mutations' parent experiences
        presets=GA_NS_PRESETS,
    ),
    Declaration(
        names=ES_VARIANTS,
        make=lambda name, cfg, noise, behaviour: NSES(
            cfg.settings, cfg.run.seed, noise, behaviour, variant=name
        ),
        bases=lambda cfg: cfg.settings.meta_population,  # each agent's theta
        summary=_ns_summary,
        settings=NSESConfig,
        section="ns",
        validate=validate_nses,
        retired=_retired(NSESConfig),
        # NSRA-ES starts with all weight on reward (Conti et al.)
        defaults={"nsra-es": {"reward_weight": 1.0}},
        on_tasks={name: NS_ES_ON_TASKS for name in ES_VARIANTS},  # the three take the same
        on_task=es.discretised,
        extensions=(es.ObservationStatistics,),  # --obs-norm 1
        presets=NS_ES_PRESETS,
        needs_behaviour=True,
    ),
)

# A run folder from before each algorithm had its own section named its novelty search "ns", the
# algorithm inside it, GA-NS where it said none (nevo.config.from_dict reads it).
BEFORE_OWN_SECTIONS = "ga-ns"
