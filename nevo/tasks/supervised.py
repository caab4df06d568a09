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

from nevo.kinds import Kind
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

    KIND = "own data set"  # what an algorithm takes on it: its declaration's on_tasks and on_task

    def examples_for(self, budget: int) -> int:
        """Training examples (a frame budget, rounded down to thousands) that cost `budget` pixel
        units on it: an example costs its pixels plus 200, the 200 for its cost beyond the first
        layer (measured on 8x8 and 12x12 images)."""
        pixels = int(np.prod(self.train_x.shape[1:]))
        return budget // (pixels + 200) // 1000 * 1000


def mnist() -> DataSet:
    """MNIST from nevo's cache (fetched and checked there on first use: nevo.tasks.mnist_data)."""
    from nevo.tasks.mnist_data import load

    d = load()
    return DataSet.of(d.train_x, d.train_y, d.test_x, d.test_y)


class Supervised(Kind):
    """A labelled data set: observations are images, the "actions" the classes (the argmax of the
    net's outputs is its prediction), an episode a batch of `--examples` training examples (or,
    for a validation, the whole test set); frames count examples."""

    KIND, LABEL = "data set", "data sets"  # MNIST (a DataSet of one's own: "own data set")
    FRAMES = "examples"
    obs_dtype = np.uint8
    behaviour = None  # no behaviour for novelty search
    device = "auto"  # a GPU where there is one: every example is a forward pass
    action = "argmax"  # the predicted class
    action_box = None

    @classmethod
    def matches(cls, env: str) -> bool:
        return env in NAMES

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

    def check(self, net_cfg) -> None:
        """Every net reads images (a dense one flattens them): nothing to refuse."""

    def reference_batch(self, size: int, seed: int) -> np.ndarray:
        """(size, C, H, W) training images drawn from seed: virtual batch norm's reference."""
        pick = np.random.default_rng([seed, 0x0EF]).choice(len(self.data.train_y), size, replace=False)
        return self.data.train_x[pick]
