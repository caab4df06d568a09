"""OpenAI evolution strategies (Salimans et al. 2017, arXiv 1703.03864), as the reference code runs it.

Each generation draws perturbations eps_k from the shared noise table (a seed per k, so the
population is a list of seeds). With mirroring (antithetic sampling), individual 2k is
theta + sigma*eps_k and 2k+1 is theta - sigma*eps_k, both on the same episode seed. Returns are
shaped to centered ranks (ranks scaled to [-0.5, 0.5], NaN ranked last: the one fitness rule of
nevo.algos), the gradient estimate is
    g = sum_k w_k eps_k / N,   w_k = f(2k) - f(2k+1)  (mirrored)  or  f(k)  (not mirrored)
and the optimizer (Adam or SGD with momentum, nevo.algos.optimizers) steps along g - l2 * theta,
as the reference's `optimizer.update(-g + l2coeff * theta)` does (no division by sigma: the step
size absorbs it).

g is computed by `weighted_noise_sum`, numba-parallel over blocks of parameters, reading the
perturbations straight from the table: no (population x parameters) matrix is ever built. Nor
for the evaluation: `ask` describes the population as theta plus each row's noise seed and sign
(nevo.episodes.Population), and the evaluator builds a row when it is used, so a population
of 5,000 large nets (80 GB as weights) costs the evaluator's slots' worth of memory.

State is plain arrays: theta, the optimizer's moments and step count, the generation. Every
random choice comes from a generator seeded by (run seed, generation, purpose): a resumed run
repeats an uninterrupted one exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from nevo import runs
from nevo.algos.contract import Extension
from nevo.algos.declaration import Declaration
from nevo.algos.gradient_correlation import GradientCorrelation
from nevo.algos.noise_sums import bucket_edges, bucketed_noise_sum, weighted_noise_sum
from nevo.algos.noise_sums import weighted_noise_sum_reference as weighted_noise_sum_reference
from nevo.algos.optimizers import SteppedTheta, make_optimizer, vector_norm
from nevo.algos.ranking import centered_ranks
from nevo.algos.streams import rng_for
from nevo.episodes import Episodes, Population, Results
from nevo.genomes.noise import SEED_LIMIT, NoiseSource, offsets_of
from nevo.nets.obs_norm import ObsNorm
from nevo.settings import OPTIMIZERS, SHAPINGS, ConfigError, require, setting


@dataclass(frozen=True)
class ESConfig:
    population: int = setting(5000, "perturbations evaluated per generation (pairs x 2 when mirrored)")
    sigma: float = setting(0.02, "noise standard deviation: theta + sigma * eps")
    optimizer: str = setting("adam", "adam or sgd (with momentum)")
    lr: float = setting(0.01, "optimizer step size")
    l2: float = setting(0.005, "L2 weight decay coefficient")
    momentum: float = setting(0.9, "sgd momentum (adam: unused)")
    mirrored: int = setting(1, "1: antithetic pairs theta +- sigma*eps on one episode seed; 0: independent")
    fitness_shaping: str = setting("centered_ranks", "centered_ranks (ranks scaled to [-0.5, 0.5]) or none")
    validation_episodes: int = setting(30, "episodes theta is evaluated on after each update")
    validate_every: int = setting(
        1,
        "generations between validations of theta (its score, test accuracy and elite files); a run's "
        "last generation always validates",
    )
    obs_norm: int = setting(
        0, "1: observations normalised by running mean and std, folded into the first layer (MuJoCo)"
    )
    bucket: int = setting(
        0,
        "limited-perturbation ES (Zhang, Clune & Stanley 2017): 0 off; else the parameters in contiguous "
        "buckets of at most this many (the paper: 5,000), each perturbation noise in one bucket alone",
    )
    common_episodes: int = setting(
        0,
        "1: every individual of a generation plays one episode seed (on mnist: one shared mini-batch, "
        "mini-batch ES); 0: one per perturbation (on mnist: each its own subset, NMB-ES)",
    )
    grad_corr: int = setting(
        0, "1: log es/grad_corr, the correlation of g_ES with the batch's true gradient (a backward pass)"
    )


def validate_es(s, name: str = "es") -> None:
    require(s.population >= 2, "population", "an integer >= 2", s.population)
    require(s.sigma > 0, "sigma", "a number > 0", s.sigma)
    validate_es_step(s)
    require(s.fitness_shaping in SHAPINGS, "fitness_shaping", ", ".join(SHAPINGS), s.fitness_shaping)
    require(s.validation_episodes >= 1, "validation_episodes", "an integer >= 1", s.validation_episodes)
    require(s.validate_every >= 1, "validate_every", "an integer >= 1", s.validate_every)
    require(s.obs_norm in (0, 1), "obs_norm", "0 or 1", s.obs_norm)
    require(s.common_episodes in (0, 1), "common_episodes", "0 or 1", s.common_episodes)
    require(s.bucket >= 0, "bucket", "0 (off) or a bucket size >= 1", s.bucket)
    require(s.grad_corr in (0, 1), "grad_corr", "0 or 1", s.grad_corr)


def validate_es_step(s) -> None:
    """The ES step settings of OpenAI-ES (ESConfig) and of the novelty-search ES family (NSESConfig)."""
    require(s.mirrored in (0, 1), "mirrored", "0 or 1", s.mirrored)
    require(
        not s.mirrored or s.population % 2 == 0,
        "population",
        "an even number with --mirrored 1 (pairs theta +- sigma*eps)",
        s.population,
    )
    require(s.optimizer in OPTIMIZERS, "optimizer", ", ".join(OPTIMIZERS), s.optimizer)
    require(s.lr > 0, "lr", "a number > 0", s.lr)
    require(s.l2 >= 0, "l2", "a number >= 0", s.l2)
    require(0 <= s.momentum < 1, "momentum", "a number in [0, 1)", s.momentum)


# Purposes of the per-generation random streams (distinct from the GA's by value, not needed).
TRAIN_EPISODES, VALIDATION_EPISODES, NOISE_SEEDS, INIT_SEED, BUCKETS = range(5)
_AGENT_STRIDE = 16  # purpose + 16 * agent: meta-population members draw from disjoint streams


class ES(SteppedTheta):
    """OpenAI-ES over explicit state: theta, the optimizer's moments, the generation."""

    agent_count, agent_index, elite_agent = 1, 0, 0  # one theta (NSES holds several ES agents)

    def __init__(self, es_cfg, seed: int, noise: NoiseSource, agent: int = 0):
        self.cfg = es_cfg
        self.seed = seed
        self.agent = agent  # member of a novelty-search meta-population: its own random streams
        self.noise = noise  # its sigma is es_cfg.sigma; its init scale gives theta_0
        self.generation = 0
        n = es_cfg.population
        self.n_pert = n // 2 if es_cfg.mirrored else n  # perturbations (seeds) per generation
        init = int(rng_for(seed, 0, INIT_SEED + _AGENT_STRIDE * agent).integers(0, SEED_LIMIT))
        self.theta = noise.rebuild([init]).copy()  # (P,) float32: init_scale * eps(init)
        self.opt = make_optimizer(es_cfg, noise.n_params)
        self.elite_score = float("nan")  # validation mean of theta at its last validation
        self.validated = True  # False after a generation whose validation was skipped
        self.grad_norm = float("nan")
        self.step_norm = float("nan")
        self.last_grad = None  # (P,) float32: the last step's gradient estimate g (--grad-corr)

    # ---- the population: perturbation k of individual j ---------------------------------
    def _seeds(self) -> np.ndarray:
        """(n_pert,) int64 noise seeds of this generation's perturbations."""
        rng = rng_for(self.seed, self.generation, NOISE_SEEDS + _AGENT_STRIDE * self.agent)
        return rng.integers(0, SEED_LIMIT, self.n_pert).astype(np.int64)

    def _buckets(self) -> np.ndarray | None:
        """(n_pert, 2) int64 [lo, hi) of each perturbation's bucket (limited-perturbation ES), drawn
        uniformly from (run seed, generation); None with --bucket 0."""
        if not getattr(self.cfg, "bucket", 0):
            return None
        edges = bucket_edges(self.noise.n_params, self.cfg.bucket)
        rng = rng_for(self.seed, self.generation, BUCKETS + _AGENT_STRIDE * self.agent)
        b = rng.integers(0, len(edges) - 1, self.n_pert)
        return np.stack([edges[b], edges[b + 1]], axis=1)

    def _split(self, j: np.ndarray):
        """(perturbation, sign +1/-1) of individuals j."""
        if self.cfg.mirrored:
            return j // 2, np.where(j % 2 == 0, 1, -1)
        return j, np.ones_like(j)

    def ask(self) -> tuple[Population, Episodes]:
        """The population, theta plus or minus sigma times each perturbation (as seeds), and one
        episode each: a mirrored pair shares its episode seed; with common_episodes every
        individual plays the generation's first one (a supervised task's shared mini-batch:
        mini-batch ES; without it each perturbation has its own subset: NMB-ES)."""
        j = np.arange(self.cfg.population, dtype=np.int64)
        k, sign = self._split(j)
        scale = (sign * self.noise.sigma).astype(np.float32)  # theta + (+-sigma) * eps_k
        buckets = self._buckets()  # a mirrored pair shares its bucket, as it shares its noise
        population = Population(self.theta[None], np.zeros(j.size, np.int64), self._seeds()[k], scale,
                                bucket=None if buckets is None else buckets[k])  # fmt: skip
        ep_seeds = rng_for(self.seed, self.generation, TRAIN_EPISODES + _AGENT_STRIDE * self.agent).integers(
            0, SEED_LIMIT, self.n_pert
        )
        if getattr(self.cfg, "common_episodes", 0):
            k = np.zeros_like(k)
        return population, Episodes(j, ep_seeds[k].astype(np.int64))

    def ask_start(self) -> None:
        """Nothing to evaluate before the first generation."""
        return None

    def tell_start(self, results: Results) -> None:
        """Nothing to start (ask_start asks for no evaluation)."""

    def tell(self, results: Results, fitness: np.ndarray | None = None) -> np.ndarray:
        """Update theta from every individual's return, or from the caller's `fitness` (one
        number per individual, ranked as returns are); returns the fitness used."""
        fitness = np.asarray(results.returns if fitness is None else fitness, np.float64)
        if fitness.size != self.cfg.population:
            raise ValueError(f"tell: {fitness.size} returns for a population of {self.cfg.population}")
        if self.cfg.fitness_shaping == "centered_ranks":
            shaped = centered_ranks(fitness)
        else:  # raw returns; a NaN counts as the worst return seen (the one NaN rule)
            finite = fitness[np.isfinite(fitness)]
            shaped = np.nan_to_num(fitness, nan=finite.min() if finite.size else 0.0).astype(np.float32)
        self.step(shaped)
        return fitness

    def step(self, shaped: np.ndarray) -> None:
        """Step theta along the perturbations weighted by `shaped` (N,) (the shaped fitness of each
        individual: tell's, or novelty search's mix of reward and novelty ranks)."""
        shaped = np.asarray(shaped, np.float32)
        coeffs = shaped[0::2] - shaped[1::2] if self.cfg.mirrored else shaped
        offsets = offsets_of(self._seeds(), self.noise.table.size, self.noise.n_params)
        g = np.empty(self.noise.n_params, np.float32)
        coeffs = np.ascontiguousarray(coeffs, np.float32)
        buckets = self._buckets()
        if buckets is None:
            weighted_noise_sum(g, coeffs, offsets, self.noise.table)
        else:  # limited-perturbation ES: each perturbation's noise in its bucket alone
            lo, hi = buckets[:, 0].copy(), buckets[:, 1].copy()
            bucketed_noise_sum(g, coeffs, offsets, self.noise.table, lo, hi)
        g /= np.float32(shaped.size)
        # The optimizer descends its argument: the reference's -g + l2 * theta.
        step = self.opt.step(np.float32(self.cfg.l2) * self.theta - g)
        self.theta += step
        self.grad_norm = float(vector_norm(g))
        self.last_grad = g
        self.step_norm = float(vector_norm(step))
        self.generation += 1

    def ask_validation(self, last: bool = False) -> tuple[Population, Episodes]:
        """theta itself on validation_episodes episode seeds; no episode on the generations that
        validate_every skips (every one but each validate_every-th and the run's last)."""
        every = getattr(self.cfg, "validate_every", 1)  # the NS-ES family validates every one
        v = self.cfg.validation_episodes if last or self.generation % every == 0 else 0
        seeds = rng_for(
            self.seed, self.generation, VALIDATION_EPISODES + _AGENT_STRIDE * self.agent
        ).integers(0, SEED_LIMIT, v)
        population = Population(
            self.theta[None].copy(), np.zeros(1, np.int64), np.full(1, -1, np.int64), np.zeros(1, np.float32)
        )
        return population, Episodes(np.zeros(v, np.int64), seeds.astype(np.int64), validation=True)

    def tell_validation(self, results: Results) -> float:
        """theta's validation mean; a skipped validation (no episode) keeps the last one's, and
        `validated` says which."""
        r = results.returns
        self.validated = len(r) > 0
        if self.validated:
            self.elite_score = float(np.mean(r)) if np.isfinite(r).any() else float("nan")
        return self.elite_score

    @property
    def validation_episodes(self) -> int:
        return self.cfg.validation_episodes

    def metrics(self) -> dict:
        """theta's validation mean (the elite of ES is theta; none where this generation skipped its
        validation) and the last step's sizes, for the log line."""
        return {
            **({"score/elite_mean": self.elite_score} if self.validated else {}),
            **self.step_metrics("es"),
        }


class ObservationStatistics(Extension):
    """--obs-norm 1 (OpenAI-ES, the NS-ES family; nevo.nets.obs_norm): running statistics of a
    share of the training episodes' observations, frozen within a generation, sent to the
    evaluator in each Population, and kept per agent (the (mean, std) each agent's theta was
    last validated with, so that the elite file gets its own)."""

    def __init__(self, spec, cfg, algo):
        self.norm, self.seed = ObsNorm(spec), cfg.run.seed
        self.agents = np.stack([self.frozen] * algo.agent_count)  # (M, 2, n)

    @staticmethod
    def wanted(cfg) -> bool:
        return bool(getattr(cfg.settings, "obs_norm", 0))

    @classmethod
    def of(cls, cfg, spec, task, algo, run_dir):
        return cls(spec, cfg, algo)

    @property
    def frozen(self) -> np.ndarray:
        """(2, n) float64: the mean and std in use this generation."""
        return np.stack([self.norm.mean, self.norm.std])

    def load_state(self, checkpoint: dict) -> None:
        self.norm.resume(checkpoint)
        if "obs_norm/agents" in checkpoint:
            self.agents = np.array(checkpoint["obs_norm/agents"], np.float64)
        else:  # an ES checkpoint: its one agent was validated with the statistics in use
            self.agents = self.frozen[None]

    def prepare(self, population):
        """The population with the frozen statistics its builder folds in."""
        return replace(population, obs_norm=self.frozen)

    def before(self, generation, population, episodes, algo) -> None:
        """Choose the training episodes whose observations count (from the run's seed and generation)."""
        self.norm.mark(episodes, self.seed, generation)

    def after(self, row: dict, train: Results, valid: Results, algo) -> None:
        """Log the count; the updated agent was validated with the statistics in use; then take
        in the generation's."""
        row["obs_norm/count"] = self.norm.stat.count
        self.agents[algo.agent_index] = self.frozen
        self.norm.advance(train)

    def elite(self, algo) -> dict:
        """The statistics the elite agent was validated with, saved beside it (obs_norm.gG.npy)."""
        return {"obs_norm": (runs.OBS_NORM, self.agents[algo.elite_agent].copy())}

    def state(self, algo) -> dict:
        return {**self.norm.stat.state(), "obs_norm/agents": self.agents}


def _es_summary(cfg) -> str:
    s = cfg.settings
    mirrored = " mirrored" if s.mirrored else ""
    return f"N={s.population}{mirrored} sigma={s.sigma} {s.optimizer} lr={s.lr} l2={s.l2}"


def _es_device(cfg, device: str) -> None:
    if device == "cuda" and cfg.settings.bucket:
        raise ConfigError(
            "--bucket: limited-perturbation ES builds its rows on the host for now: use --device cpu"
        )


# What ES takes on each kind of task where the command line is silent (on Atari: its presets).
# Gymnasium tasks: values that solve CartPole-v1 in about a minute. MuJoCo, for one workstation
# (~7 minutes for 10M steps of HalfCheetah-v5): OpenAI-ES's 2 x 64 tanh policy, sigma 0.02, Adam
# 0.01, L2 0.005 and observation normalisation (Salimans et al. 2017), our population. MNIST:
# mini-batch ES with the paper's sigma 0.002 and L2 0.0002 (Zhang, Clune & Stanley 2017), our
# population, step and budget for 2 cores. A data set of one's own: Adam 0.01, sigma 0.01, 50
# mirrored pairs (picked on experiments.toy_images' data sets), and by the task itself a budget of
# OWN_BUDGET pixel units (DataSet.examples_for), about a minute with a dense [64] net on 2 cores,
# theta tested every generation up to 1,000 test examples, every second up to 2,000, ...
GYMNASIUM = {"net": "mlp", "vbn": 0, "population": 64, "sigma": 0.05, "lr": 0.03, "frame_budget": 3_000_000}
MUJOCO = {"net": "mlp-tanh", "vbn": 0, "sigma": 0.02, "frame_budget": 10_000_000, "population": 40,
          "lr": 0.01, "l2": 0.005}  # fmt: skip
TABLE = {"vbn": 0, "noise_table_size": 32_000_000}  # 128 MB: a net of up to 32M parameters
ON_TASKS = {
    "gymnasium": GYMNASIUM,
    "mujoco": {**MUJOCO, "obs_norm": 1, "validation_episodes": 5},
    "data set": {"net": "mnist", "population": 200, "sigma": 0.002, "lr": 0.001, "l2": 0.0002,
                 "common_episodes": 1, "validation_episodes": 1, "frame_budget": 20_000_000, **TABLE},
    "own data set": {"net": "mnist", "population": 100, "sigma": 0.01, "lr": 0.01, "l2": 0.0002,
                     "common_episodes": 1, "validation_episodes": 1, **TABLE},
}  # fmt: skip
OWN_BUDGET = 2_100_000_000  # 8,000,000 8x8 images


def discretised(name: str, kind: str, env_cfg, data) -> dict:
    """Actions in 10 bins per component on the robots Salimans et al. 2017 discretised for ES's
    exploration (their section 4.1; nevo.tasks.MuJoCo.BINNED)."""
    from nevo.tasks import MuJoCo

    return {"actions": "bins"} if kind == MuJoCo.KIND and env_cfg.env in MuJoCo.BINNED else {}


def _on_task(name: str, kind: str, env_cfg, data) -> dict:
    if data is None:
        return discretised(name, kind, env_cfg, data)
    return {
        "frame_budget": data.examples_for(OWN_BUDGET),
        "validate_every": max(1, -(-len(data.test_y) // 1000)),
    }


PRESETS = {
    # The reference OpenAI-ES Atari run (Uber's GPU es_atari_config): 5,000 perturbations in
    # mirrored pairs, sigma 0.02, Adam 0.01, L2 0.005, centered ranks, the small net with VBN.
    "paper": {"net": {"net": "small", "vbn": 128}},
    # OpenAI-ES on MuJoCo (Salimans et al. 2017; OpenAI's released configuration): the 2 x 64
    # tanh policy, sigma 0.02, Adam 0.01, L2 0.005, centered ranks, mirrored pairs, observation
    # statistics from 1% of the episodes, 10,000 episodes a generation; our picks: 30 validation
    # episodes, Humanoid-v5. Left out: the code's action noise and its clip of normalised
    # observations to [-5, 5] (nevo.nets.obs_norm says why).
    "mujoco": {"made_for": "mujoco", "env": {"env": "Humanoid-v5"}, "net": {"net": "mlp-tanh"},
               "settings": {"population": 10_000, "obs_norm": 1}},
    # Minutes on 2 cores: a small population, short validation.
    "quick": {"net": {"net": "small", "vbn": 128}, "settings": {"population": 64, "validation_episodes": 5},
              "run": {"frame_budget": 3_000_000, "noise_table_size": 32_000_000}},
}  # fmt: skip

ABOUT = """\
OpenAI evolution strategies (Salimans et al. 2017), on Atari or a gymnasium task.

    nevo train es --env CartPole-v1                  # a vector task: about a minute on 2 cores
    nevo train es                                    # the quick preset on Frostbite
    nevo train es --preset paper --game frostbite    # 5,000 perturbations, VBN
    nevo train es --env HalfCheetah-v5               # a MuJoCo robot: 10M steps, ~7 min
    nevo train es --preset mujoco                    # OpenAI-ES's Humanoid-v5 settings

Each generation: ask the perturbations -> evaluate -> tell (the update of theta) -> validate
theta -> log -> checkpoint. The elite of an ES run is theta itself (theta.gG.npy, named by elite.json).
"""  # its command's description (`nevo train ... --help`)

DECLARATIONS = (
    Declaration(
        names=("es",),
        about=ABOUT,
        make=lambda name, cfg, noise, behaviour: ES(cfg.settings, cfg.run.seed, noise),
        bases=lambda cfg: 1,  # theta
        summary=_es_summary,
        settings=ESConfig,
        section="es",
        validate=validate_es,
        check_device=_es_device,
        extensions=(GradientCorrelation, ObservationStatistics),  # --grad-corr 1, --obs-norm 1
        on_tasks={"es": ON_TASKS},
        on_task=_on_task,
        presets=PRESETS,
    ),
)
