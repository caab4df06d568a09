"""nevo in a few lines: `train` runs any algorithm (the seven of neuroevolution, and SGD on a data
set) on any task and returns the run's folder, metrics and elite as a `Policy`; `load_policy`
gives the same Policy for any finished run.

    import nevo
    result = nevo.train("ga", env="CartPole-v1", frames=300_000)
    action = result.policy.act(observation)        # one observation, or a batch
    policy = nevo.load_policy(result.run_dir)      # the same, from the folder alone

Both sit over the parts a researcher can use one by one (nevo.loops.loop, nevo.algos, nevo.tasks):
`train` builds the settings the command line would (nevo.cli: the task's and the algorithm's
defaults), then runs the generation loop, writing the same run folder as `python -m
experiments.run_ga`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from nevo import cli, config, nets, runs
from nevo.algos import DEFAULT, declared
from nevo.config import ConfigError
from nevo.evaluation.setup import REF_BATCH
from nevo.loops import elite as elite_files
from nevo.loops import loop
from nevo.loops.progress import Progress
from nevo.nets import half, vbn
from nevo.nets.kernels import make_policy
from nevo.tasks.envs import box_action
from nevo.tasks.supervised import DataSet, Supervised


class Policy:
    """A run's elite on the CPU: `act(observation)` gives the action the run would take, for one
    observation or a batch, with the run's observation statistics (--obs-norm 1) or virtual batch
    norm folded into its weights, and a continuous action mapped onto the env's bounds."""

    def __init__(self, spec: nets.NetSpec, weights: np.ndarray, action_box=None, score: float = float("nan")):

        self.spec = spec
        weights = np.asarray(weights)  # float16 where the run's forward read fp16 (--weights fp16)
        dtype = np.float16 if weights.dtype == np.float16 else np.float32
        self.weights = np.ascontiguousarray(weights, dtype).reshape(1, spec.n_params)
        self.action_box = None if action_box is None else tuple(np.asarray(b, np.float32) for b in action_box)
        self.score = score  # the elite's validation mean
        self._forward = make_policy("cpu", spec)

    def act(self, observation):
        """The action for one observation (an int for discrete actions, a vector for continuous
        ones), or for a batch (rows, *observation) an array of them."""
        x = np.asarray(observation, self.spec.obs_dtype)
        one = int(np.prod(self.spec.obs_shape))
        single = x.size == one and x.ndim <= len(self.spec.obs_shape)
        if x.size % one:
            raise ValueError(
                f"act: an observation has {one} numbers {self.spec.obs_shape}; got shape {x.shape}"
            )
        batch = np.ascontiguousarray(x.reshape(-1, *self.spec.obs_shape))
        self._forward.load(self.weights)
        actions = self._forward(np.zeros(len(batch), np.int64), batch)
        if self.spec.action != "argmax" and self.action_box is not None:
            actions = box_action(actions, *self.action_box)
        if single:
            return int(actions[0]) if self.spec.action == "argmax" else actions[0]
        return actions


@dataclass
class TrainResult:
    """What `train` gives back: the run folder, its metrics (one dict per generation, as
    metrics.jsonl holds them), the elite's validation mean and the elite as a Policy."""

    run_dir: str
    metrics: list[dict]
    elite_score: float
    policy: Policy
    settings: config.Config


def train(algo: str = DEFAULT, env="CartPole-v1", *, net=None, frames: int | None = None, fitness=None,
          behaviour=None, seed: int = 0, out_dir: str = "runs", progress: bool = True, algo_module: str = "",
          **settings) -> TrainResult:  # fmt: skip
    """Train with `algo` (ga, rs, es, ga-ns, ns-es, nsr-es, nsra-es, or sgd on a labelled data
    set) on `env` and return a TrainResult.

    env: a gymnasium id (CartPole-v1, HalfCheetah-v5, ...), an Atari game (frostbite), "maze",
    "mnist", your own gymnasium environment class or a function that makes one, or a labelled
    data set of images (nevo.tasks.supervised.DataSet.of(train_x, train_y, test_x, test_y)).
    net: a net's name (mlp, mlp-tanh, small, large, ...) or the hidden widths of a dense ReLU net
    ([64, 64]); default: the task's.
    frames: the frame budget (agent steps for gymnasium tasks); default: the task's.
    fitness: a function of a generation's training Results giving one number per individual, used
    where the algorithm would use the returns (default: the returns).
    behaviour: novelty search on a gymnasium task, a function of (observation, info) at an
    episode's last step (default: the final observation).
    algo_module: an algorithm of one's own: the module (a .py file's path, or a module name) whose
    DECLARATIONS declare `algo` (nevo.algos.declaration; docs/architecture.md, "Add an algorithm").
    settings: any other setting by its name (population=, sigma=, truncation=, lr=, ...; see
    `nevo train ALGO --help`); they apply to `algo`'s own section, or to the task's: env_module=, a
    module of one's own that declares a kind of task, whose tasks `env` then names, and that kind's
    own settings (docs/architecture.md, "Add a task kind").

    Bad input is a ConfigError of one line naming the argument: a setting's type or range (as
    the command line says it), an env that cannot be made or whose reset or step raises, and a
    fitness or behaviour that raises or returns anything but numbers of the right shape.
    """

    data = env if isinstance(env, DataSet) else None  # a labelled data set of one's own
    make_env = None if isinstance(env, (str, DataSet)) else env
    _check_arguments(env if data is None else "data", net, frames, fitness, behaviour, progress)
    name = "data" if data is not None else env if isinstance(env, str) else getattr(env, "__name__", "env")
    # an unknown name: one line listing the algorithms
    cfg = config.Config(env=config.EnvConfig(env=name), algo=algo, algo_module=algo_module)
    given = dict(settings, seed=seed, out_dir=out_dir)
    if net is not None:
        given["net"] = net if isinstance(net, str) else "dense:" + ",".join(str(int(w)) for w in net)
    if frames is not None:
        given["frame_budget"] = int(frames)
    cfg = cli.apply_defaults(config.override(cfg, given), given, kind=data)  # a DataSet: its own defaults
    if data is not None:
        config.validate(cfg)
        task = Supervised(cfg.env, data)
    else:
        task = cli.check(cfg, make_env, behaviour)
    out = None if progress else Progress(cfg.run.frame_budget, stream=_Nowhere())
    if fitness is not None and declared(cfg).step is not None:  # (SGD: no individuals to rank)
        raise ConfigError(f"fitness: {algo} ranks no population; fitness is for the population algorithms")
    outcome = loop.run(cfg, task, loop.plan(cfg, task), fitness=fitness, out=out)
    return TrainResult(
        outcome.run_dir,
        runs.read_metrics(outcome.run_dir),
        outcome.algo.elite_score,
        load_policy(outcome.run_dir, "last"),
        cfg,
    )


def _check_arguments(env, net, frames, fitness, behaviour, progress) -> None:
    """train's own arguments (not settings, which nevo.config checks), one ConfigError line each."""
    import numbers

    if not (isinstance(env, str) or callable(env)):
        raise ConfigError(
            f"env: got {config.shown(env)}, allowed: a gymnasium id or Atari game (a str), your own "
            "gymnasium environment class or a function that makes one, or a DataSet"
        )
    whole = (numbers.Integral, np.integer)
    widths = isinstance(net, (list, tuple)) or (isinstance(net, np.ndarray) and net.ndim == 1)
    if net is not None and not isinstance(net, str):
        if (
            not widths
            or not len(net)
            or not all(isinstance(w, whole) and not isinstance(w, bool) and w >= 1 for w in net)
        ):
            raise ConfigError(
                f"net: got {config.shown(net)}, allowed: a net's name or hidden widths ([64, 64])"
            )
    if frames is not None and (not isinstance(frames, whole) or isinstance(frames, bool) or frames < 1):
        raise ConfigError(f"frames: got {config.shown(frames)}, allowed: an int >= 1")
    for name, f in (("fitness", fitness), ("behaviour", behaviour)):
        if f is not None and not callable(f):
            raise ConfigError(f"{name}: got {config.shown(f)}, allowed: a function (or None)")
    if not isinstance(progress, (bool, np.bool_)):
        raise ConfigError(f"progress: got {config.shown(progress)}, allowed: True or False")


def load_policy(run_dir: str, which: str | int = "best") -> Policy:
    """The elite of a finished run of any algorithm and task as a Policy: its best elite
    (best.json, where the run keeps one), with which="last" the last generation's, or with
    which=G (an int) generation G's (elites.jsonl, where the run's elites are seed lists)."""
    cfg, elite, spec, weights = elite_files.load(run_dir, which)
    weights = np.ascontiguousarray(weights, np.float32)[None]
    if cfg.net.vbn:  # virtual batch norm over the run's reference batch, as its evaluator folded it
        path = os.path.join(run_dir, REF_BATCH)
        if not os.path.isfile(path):
            raise ConfigError(f"{run_dir}: no {REF_BATCH}: virtual batch norm's reference batch is missing")
        weights = vbn.fold(spec, weights, runs.read_array(path), out=weights)
    facts = runs.read_json(os.path.join(run_dir, runs.CONFIG))
    weights = half.rounded(weights, half.format_of(cfg.net.weights, cfg.net.net))  # what its forward read
    return Policy(spec, weights[0], facts.get("action_box"), float(elite["validation_mean"]))


class _Nowhere:
    """A stream that keeps nothing: train(progress=False)'s progress display writes to it."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
