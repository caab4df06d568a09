"""Stochastic gradient descent on a labelled data set from nevo's own gradients: the baseline of ES
against SGD (Zhang, Clune & Stanley 2017, arXiv 1712.06564), and their SGD proxy.

The gradient of the mean cross-entropy of a mini-batch is the reverse-mode product that safe
mutations use (nevo.genomes.safe_mutation.vjp, Numba kernels with fixed-order sums) with the
cotangent (softmax - one-hot) / batch on the logits; no PyTorch. The step descends
g + l2 * theta with Adam or SGD with momentum (nevo.algos.optimizers, as ES steps).

The proxy (the paper's section 4.3) steps along g_Proxy = g_True + m g_Noise, g_Noise ~ N(0, I),
m = sqrt(var(g_True) (1 - rho^2) / (var(g_Noise) rho^2)): a gradient whose correlation with the
true one is rho, the correlation ES's estimate reaches with a given number of offspring.

A mini-batch is drawn from (run seed, iteration) exactly as mini-batch ES draws its generation's
shared batch (nevo.algos.es.ES.ask with common_episodes, then nevo.evaluation.supervised.batch_of),
so SGD, the proxy and mini-batch ES see the same sequence of batches. State is plain arrays.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from nevo.algos.cross_entropy import loss_gradient
from nevo.algos.declaration import Declaration
from nevo.algos.es import INIT_SEED, TRAIN_EPISODES
from nevo.algos.optimizers import SteppedTheta, make_optimizer, vector_norm
from nevo.algos.streams import rng_for
from nevo.episodes import Episodes, Population
from nevo.genomes.noise import SEED_LIMIT
from nevo.runs import rows
from nevo.settings import OPTIMIZERS, ConfigError, require, setting
from nevo.tasks.supervised import Supervised, batch_of

PROXY_NOISE = 200  # the purpose of the proxy's noise stream (ES's streams are below 64)


def proxy(g_true: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """g_True + m g_Noise, whose expected correlation with g_True is rho (Zhang et al. 2017)."""
    noise = rng.standard_normal(g_true.size)
    m = np.sqrt(np.var(g_true) * (1 - rho**2) / (np.var(noise) * rho**2))
    return g_true + m * noise


class SGD(SteppedTheta):
    """theta, the optimizer's moments and the iteration count; `step` takes one mini-batch."""

    def __init__(self, sgd_cfg, seed: int, noise, spec):
        self.cfg, self.seed, self.spec = sgd_cfg, seed, spec
        # theta_0 as ES draws its own (the same init scale and seed stream): the runs start alike
        init = int(rng_for(seed, 0, INIT_SEED).integers(0, SEED_LIMIT))
        self.theta = noise.rebuild([init]).copy()  # (P,) float32
        self.opt = make_optimizer(sgd_cfg, noise.n_params)
        self.generation = 0  # iterations done
        self.elite_score = float("nan")  # theta's last test-set score (minus the mean cross-entropy)
        self.loss = self.accuracy = self.grad_norm = self.step_norm = float("nan")

    validation_episodes = 1  # the whole test set
    validated = True  # every step ends on the test set

    def batch_seed(self) -> int:
        """This iteration's mini-batch seed: mini-batch ES's shared episode seed of the generation."""
        return int(rng_for(self.seed, self.generation, TRAIN_EPISODES).integers(0, SEED_LIMIT, 1)[0])

    def step(self, x, y) -> None:
        """One descent step on the batch (images x, labels y)."""
        g, self.loss, self.accuracy = loss_gradient(self.spec, self.theta, x, y)
        if self.cfg.proxy_rho > 0:
            g = proxy(g, self.cfg.proxy_rho, rng_for(self.seed, self.generation, PROXY_NOISE))
        g = g.astype(np.float32)
        step = self.opt.step(g + np.float32(self.cfg.l2) * self.theta)
        self.theta += step
        self.grad_norm, self.step_norm = float(vector_norm(g)), float(vector_norm(step))
        self.generation += 1

    def metrics(self) -> dict:
        return {
            "score/elite_mean": self.elite_score,
            "sgd/loss": self.loss,
            "sgd/batch_accuracy": self.accuracy,
            **self.step_metrics("sgd"),
        }


class SGDStep:
    """SGD's step of the generation loop (its declaration names it: nevo.loops.loop runs it in the
    run skeleton, nevo.loops.skeleton): --validate-every mini-batches, then theta on the whole test
    set. Its row: the iterations' batch scores, SGD's metrics, the accuracies. SGD evaluates no
    population: no extensions, no fitness of the caller's."""

    unit = "iteration"  # what the run's lines count (its frames: the data set's examples, Kind.FRAMES)

    def __init__(self, cfg, task, spec, evaluator, algo, extensions, run_dir, fitness, out):
        self.cfg, self.data, self.evaluator, self.algo, self.out = cfg, task.data, evaluator, algo, out
        algo.spec = spec  # the net its gradients go through (what the declaration's make is not given)

    def start(self, frames: int) -> int:
        """Nothing before the first iteration."""
        return frames

    def __call__(self, frames: int) -> tuple[dict, int]:
        algo, n, t0 = self.algo, self.cfg.env.examples, time.monotonic()
        first, start = algo.generation, frames
        self.out.start_phase(first, "train", frames)
        losses, hits = [], []
        for _ in range(self.cfg.settings.validate_every):
            pick = batch_of(algo.batch_seed(), len(self.data.train_y), n)
            algo.step(self.data.train_x[pick], self.data.train_y[pick])
            losses.append(algo.loss)
            hits.append(algo.accuracy)
            frames += len(pick)
            if frames >= self.cfg.run.frame_budget:
                break
        train_s = time.monotonic() - t0
        test = Episodes(np.zeros(1, np.int64), np.zeros(1, np.int64), validation=True)  # the test set
        valid = self.evaluator.run(Population.of_weights(algo.theta[None]), test)
        algo.elite_score = float(valid.returns[0])
        fields = {
            "generation": algo.generation - 1,
            "iterations": algo.generation - first,
            "perf/update_s": round(train_s, 4),
            "score/pop_max": -float(np.min(losses)),  # the iterations' batch scores
            "score/pop_mean": -float(np.mean(losses)),
            **algo.metrics(),
            **rows.accuracy_row(hits, valid.accuracy),
        }
        return fields, frames - start

    def done(self, frames: int, wall: float, last: dict, run_dir: str) -> str:
        """A finished run's last line: examples, minutes, theta's test cross-entropy and accuracy."""
        accuracy = last.get("score/test_accuracy", float("nan"))  # the last validation's
        tested = f", accuracy {100 * accuracy:.2f}%" if accuracy == accuracy else ""
        return (f"done: {frames:,} examples in {wall / 60:.1f} min; test cross-entropy "
                f"{-self.algo.elite_score:.4f}{tested}; {run_dir}")  # fmt: skip

    def finish(self, row: dict) -> None:
        """No extensions."""

    def elite(self) -> dict:
        return {}

    def state(self) -> dict:
        return {}

    def checkpointed(self) -> None:
        pass


@dataclass(frozen=True)
class SGDConfig:
    optimizer: str = setting("adam", "adam or sgd (with momentum, as ES's)")
    lr: float = setting(0.001, "step size (our pick: Zhang et al. 2017 do not say theirs)")
    momentum: float = setting(0.9, "sgd momentum (adam: unused)")
    l2: float = setting(0.0002, "L2 weight decay coefficient (Zhang et al.'s 99% net: 0.0002)")
    proxy_rho: float = setting(
        0.0,
        "0: SGD on the true gradient; in (0, 1): the SGD proxy g_True + m g_Noise, whose correlation "
        "with g_True is this (Zhang et al. 2017: 0.04 tracks ES with 10,000 offspring)",
    )
    validate_every: int = setting(100, "iterations between evaluations of theta on the whole test set")


def validate_sgd(s, name: str = "sgd") -> None:
    require(s.optimizer in OPTIMIZERS, "optimizer", ", ".join(OPTIMIZERS), s.optimizer)
    require(s.lr > 0, "lr", "a number > 0", s.lr)
    require(0 <= s.momentum < 1, "momentum", "a number in [0, 1)", s.momentum)
    require(s.l2 >= 0, "l2", "a number >= 0", s.l2)
    require(0 <= s.proxy_rho < 1, "proxy_rho", "0 (SGD) or a correlation in (0, 1)", s.proxy_rho)
    require(s.validate_every >= 1, "validate_every", "an integer >= 1", s.validate_every)


def _make(name, cfg, noise, behaviour):
    """theta_0 and the optimizer; its step (SGDStep) gives it the net."""
    return SGD(cfg.settings, cfg.run.seed, noise, spec=None)


def _check_run(cfg, task, cluster) -> None:
    if not isinstance(task, Supervised):
        raise ConfigError(f"--env: SGD trains on a labelled data set (mnist); {task.name} is not one")
    if cluster is not None:
        raise ConfigError("--cluster: the SGD baseline runs on one machine (it evaluates no population)")


def _sgd_summary(cfg) -> str:
    s = cfg.settings
    rho = f" proxy rho={s.proxy_rho}" if s.proxy_rho else ""
    return f"batch {cfg.env.examples} {s.optimizer} lr={s.lr} l2={s.l2}{rho}"


# What SGD takes on a data set where the command line is silent: on MNIST ten epochs of 60,000
# examples; on a data set of one's own a budget of OWN_BUDGET pixel units (DataSet.examples_for, as
# ES's: about half a minute with a dense [64] net on 2 cores). Its noise table
# only draws theta_0, as ES's does: 128 MB, a net of up to 32M parameters.
_TABLE = {"vbn": 0, "noise_table_size": 32_000_000}
ON_TASKS = {
    "data set": {"net": "mnist", "frame_budget": 600_000, **_TABLE},
    "own data set": {"net": "mnist", **_TABLE},
}
OWN_BUDGET = 158_000_000  # 600,000 8x8 images


def _on_task(name: str, kind: str, env_cfg, data) -> dict:
    return {} if data is None else {"frame_budget": data.examples_for(OWN_BUDGET)}


# The SGD baseline of ES against SGD on MNIST (Zhang, Clune & Stanley 2017; SGDStep above): the
# 28,938-parameter net, mini-batches of --examples, Adam; "quick": a few minutes on 2 cores.
PRESETS = {
    "paper": {"env": {"env": "mnist"}, "net": {"net": "mnist"}},
    "quick": {"env": {"env": "mnist"}, "net": {"net": "mnist"}, "run": {"frame_budget": 200_000}},
}

ABOUT = """\
SGD on the MNIST net, from nevo's own gradients: ES against SGD's baseline, or its proxy.

The baseline of Zhang, Clune & Stanley 2017 (arXiv 1712.06564), or their SGD proxy at a chosen
correlation with the true gradient.

    nevo train sgd --env mnist                       # the quick preset: minutes on 2 cores
    nevo train sgd --env mnist --proxy-rho 0.04      # the proxy that tracks ES (10,000 offspring)
"""  # its command's description (`nevo train ... --help`)

DECLARATIONS = (
    Declaration(
        names=("sgd",),
        about=ABOUT,
        make=_make,
        step=SGDStep,  # SGD evaluates no population: its own step, in the generation loop
        check_run=_check_run,
        population=lambda cfg: 1,  # theta, on the test set
        sigma=lambda cfg: 0.0,  # its noise table only draws theta_0
        bases=lambda cfg: 1,  # theta
        summary=_sgd_summary,
        settings=SGDConfig,
        section="sgd",
        validate=validate_sgd,
        on_tasks={"sgd": ON_TASKS},
        on_task=_on_task,
        presets=PRESETS,
    ),
)
