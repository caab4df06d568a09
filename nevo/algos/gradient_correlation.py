"""ES's gradient estimate against the true gradient along a run (--grad-corr 1): Pearson's r between
the step's g_ES and the back-propagated gradient of the generation's one shared mini-batch, as
es/grad_corr in each row (Zhang, Clune & Stanley 2017, section 4.1, measured at each step of a run
rather than at fixed parameters). The study at fixed parameters, with N growing, is
nevo.studies.grad_corr."""

from __future__ import annotations

import numpy as np

from nevo.algos.contract import Extension
from nevo.algos.cross_entropy import loss_gradient
from nevo.settings import ConfigError
from nevo.tasks.supervised import Supervised, batch_of


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson's r between two vectors, in float64."""
    a = np.asarray(a, np.float64) - np.mean(a, dtype=np.float64)
    b = np.asarray(b, np.float64) - np.mean(b, dtype=np.float64)
    return float(a @ b / np.sqrt((a @ a) * (b @ b)))


class GradientCorrelation(Extension):
    """--grad-corr 1 (ES on a labelled data set, one shared mini-batch a generation): Pearson's r
    between the step's gradient estimate g_ES and the batch's true gradient at theta before the
    step, es/grad_corr in the row (Zhang, Clune & Stanley 2017's correlation, along a run). It
    costs one backward pass a generation."""

    def __init__(self, spec, task, cfg):
        self.spec, self.data, self.examples = spec, task.data, cfg.env.examples
        self.theta, self.batch_seed = None, 0

    @classmethod
    def of(cls, cfg, spec, task, algo, run_dir):
        return cls(spec, task, cfg)

    @staticmethod
    def wanted(cfg) -> bool:
        """Whether the run asks for it: ES with --grad-corr 1."""
        return bool(getattr(cfg.settings, "grad_corr", 0))

    @staticmethod
    def check(cfg, task) -> None:
        """One ConfigError line where the correlation cannot be computed."""

        if not GradientCorrelation.wanted(cfg):
            return
        if not isinstance(task, Supervised):
            raise ConfigError(f"--grad-corr 1: needs a labelled data set (mnist); {task.name} is not one")
        if cfg.settings.common_episodes != 1:
            raise ConfigError(
                "--grad-corr 1: needs --common-episodes 1 (one shared mini-batch a generation: the true "
                f"gradient is that batch's); got {cfg.settings.common_episodes}"
            )
        if cfg.net.vbn or cfg.settings.obs_norm:
            raise ConfigError(
                "--grad-corr 1: needs --vbn 0 and --obs-norm 0 (theta is then the net's weights)"
            )

    def before(self, generation, population, episodes, algo) -> None:
        """Keep theta before the update and the seed of the batch every individual plays."""
        self.theta, self.batch_seed = algo.theta.copy(), int(episodes.seeds[0])

    def after(self, row: dict, train, valid, algo) -> None:

        pick = batch_of(self.batch_seed, len(self.data.train_y), self.examples)
        g_true = -loss_gradient(self.spec, self.theta, self.data.train_x[pick], self.data.train_y[pick])[0]
        row["es/grad_corr"] = pearson(algo.last_grad, g_true)
