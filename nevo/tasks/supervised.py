"""A labelled data set as a task (Zhang, Clune & Stanley 2017, arXiv 1712.06564: ES against SGD on
MNIST): an evaluation is a batch of examples, the fitness minus the mean cross-entropy, the
validation the whole test set (nevo.evaluation.supervised), through the same algorithms, loop and
run folder as every other task.

`--env mnist` is MNIST (nevo.tasks.mnist_data: fetched, checked and cached by nevo itself); from
Python, any `DataSet` of images and labels is a task (`Supervised(env_cfg, data=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nevo.settings import ConfigError, EnvConfig

NAMES = ("mnist",)  # the data sets --env names
MNIST_SHAPE = (1, 28, 28)  # (C, H, W) of MNIST's images


def batch_of(seed: int, n_train: int, examples: int) -> np.ndarray:
    """(examples,) int64 training-set indices of the episode with this seed, drawn without
    replacement from the seed alone."""
    rng = np.random.default_rng([int(seed), 0x5EED])
    return rng.choice(n_train, size=min(examples, n_train), replace=False).astype(np.int64)


@dataclass(frozen=True)
class DataSet:
    """Images (N, C, H, W) uint8 (pixels, scaled to [0, 1] by the nets) and labels (N,) int64."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray

    @property
    def classes(self) -> int:
        return int(max(self.train_y.max(), self.test_y.max())) + 1

    @staticmethod
    def of(train_x, train_y, test_x, test_y) -> DataSet:
        """A DataSet from arrays of (N, H, W) or (N, C, H, W) uint8 images and integer labels."""

        def images(x):
            x = np.ascontiguousarray(x, np.uint8)
            return x[:, None] if x.ndim == 3 else x

        return DataSet(
            images(train_x), np.asarray(train_y, np.int64), images(test_x), np.asarray(test_y, np.int64)
        )

    def defaults(self, env_cfg: EnvConfig, family: str) -> dict:
        """The settings that suit this data set where the caller is silent (Supervised.defaults
        for it): a DataSet is its own task kind for nevo.cli.apply_defaults."""
        return Supervised.defaults(env_cfg, family, self)


def mnist() -> DataSet:
    """MNIST from nevo's cache (fetched and checked there on first use: nevo.tasks.mnist_data)."""
    from nevo.tasks.mnist_data import load

    d = load()
    return DataSet.of(d.train_x, d.train_y, d.test_x, d.test_y)


class Supervised:
    """A labelled data set: observations are images, the "actions" the classes (the argmax of the
    net's outputs is its prediction), an episode a batch of `--examples` training examples (or,
    for a validation, the whole test set); frames count examples."""

    LABEL = "data sets"
    # Where the command line is silent: mini-batch ES (one shared batch a generation) with the
    # paper's sigma 0.002 and L2 0.0002 on the 28,938-parameter net; the population, Adam's step
    # and the budget are our picks for 2 cores (the paper: 10,000 pseudo-offspring; its
    # optimizer and step are not known). The validation is the whole test set: one episode.
    _TABLE = {"vbn": 0, "noise_table_size": 32_000_000}  # 128 MB: a net of up to 32M parameters
    DEFAULTS = {
        "es": {"net": "mnist", "population": 200, "sigma": 0.002, "lr": 0.001, "l2": 0.0002,
               "common_episodes": 1, "validation_episodes": 1, "frame_budget": 20_000_000, **_TABLE},
        "ga": {"net": "mnist", "population": 64, "truncation": 8, "sigma": 0.002, "elite_candidates": 3,
               "validation_episodes": 1, "frame_budget": 20_000_000, **_TABLE},
        # SGD: ten epochs of 60,000 examples (its noise table only draws theta_0, as ES's does)
        "sgd": {"net": "mnist", "frame_budget": 600_000, **_TABLE},
    }  # fmt: skip
    # A data set of one's own (nevo.train(env=DataSet.of(...))): small images and a small net,
    # where MNIST's ES step of 0.001 barely moves in the minute such a run should take. Picked by
    # short runs on toy data sets (experiments.toy_images; figures in docs/algorithms.md): Adam
    # 0.01, sigma 0.01, 50 mirrored pairs. The budgets are OWN_BUDGET / (pixels per image + 200)
    # examples, the 200 for an example's cost beyond the first layer (measured on 8x8 and 12x12
    # images): about a minute for ES with a dense [64] net on 2 cores, half that for SGD.
    OWN = {
        "es": {"net": "mnist", "population": 100, "sigma": 0.01, "lr": 0.01, "l2": 0.0002,
               "common_episodes": 1, "validation_episodes": 1, **_TABLE},
        "sgd": {"net": "mnist", **_TABLE},
    }  # fmt: skip
    OWN_BUDGET = {"es": 2_100_000_000, "sgd": 158_000_000}  # 8,000,000 and 600,000 8x8 images
    obs_dtype = np.uint8
    behaviour = None  # no behaviour for novelty search
    device = "auto"  # a GPU where there is one: every example is a forward pass
    evaluation = "supervised"  # its evaluator (nevo.evaluation.setup.evaluator_for): batches of examples
    action = "argmax"  # the predicted class
    action_box = None

    def __init__(self, env_cfg: EnvConfig, data: DataSet | None = None):
        self.cfg = env_cfg
        self.name = env_cfg.env
        if data is None and env_cfg.env not in NAMES:
            raise ConfigError(f"--env: {env_cfg.env!r} is not a data set nevo has ({', '.join(NAMES)})")
        self._data = data  # MNIST: read (or fetched) when first used, not to check settings
        self.obs_shape = tuple(int(s) for s in data.train_x.shape[1:]) if data is not None else MNIST_SHAPE
        self.n_actions = data.classes if data is not None else 10

    @property
    def data(self) -> DataSet:
        if self._data is None:
            self._data = mnist()
        return self._data

    @classmethod
    def defaults(cls, env_cfg: EnvConfig, family: str, data: DataSet | None = None) -> dict:
        """MNIST's defaults, or with `data` those of a data set of one's own (OWN): ES's and SGD's
        budgets by its image size, and ES's theta tested every generation up to 1,000 test
        examples, every second up to 2,000, ... (a validation is the whole test set: about a
        tenth of a generation's 10,000 training examples at most)."""
        if data is None or family not in cls.OWN:
            return cls.DEFAULTS.get(family, {})
        pixels = int(np.prod(data.train_x.shape[1:]))
        own = dict(cls.OWN[family], frame_budget=cls.OWN_BUDGET[family] // (pixels + 200) // 1000 * 1000)
        if family == "es":
            own["validate_every"] = max(1, -(-len(data.test_y) // 1000))
        return own

    def check(self, net_cfg) -> None:
        """Every net reads images (a dense one flattens them): nothing to refuse."""

    def reference_batch(self, size: int, seed: int) -> np.ndarray:
        """(size, C, H, W) training images drawn from seed: virtual batch norm's reference."""
        pick = np.random.default_rng([seed, 0x0EF]).choice(len(self.data.train_y), size, replace=False)
        return self.data.train_x[pick]
