"""--validation-starts each: a validation's episodes play each Atari start in turn, so that under
the paper's protocol an elite candidate's validation mean is its exact mean over its starts."""

import json
import os

import numpy as np
import pytest

from nevo.atari.evaluator import AtariEvaluator
from nevo.atari.game import noop_counts, seeds_for_starts
from nevo.genomes.noise import SEED_LIMIT
from nevo.settings import ConfigError
from tests import tiny


def test_each_candidates_episodes_start_with_every_noop_count_in_turn():
    """Three candidates on the same 30 seeds: each candidate's k-th episode starts with k + 1
    no-ops, the same seed for every candidate, every seed a run's (below the tests')."""
    seeds = np.random.default_rng(5).integers(0, SEED_LIMIT, 30)
    moved = seeds_for_starts(np.tile(seeds, 3), 30)
    counts = noop_counts(moved, 30).reshape(3, 30)
    np.testing.assert_array_equal(counts, np.tile(np.arange(1, 31), (3, 1)))
    np.testing.assert_array_equal(moved.reshape(3, 30), np.tile(moved[:30], (3, 1)))
    assert moved.min() >= 0 and moved.max() < SEED_LIMIT and len(set(moved.tolist())) == 30
    # more episodes than starts: round again; a seed at the limit's edge wraps below it
    counts = noop_counts(seeds_for_starts([7, SEED_LIMIT - 1, 3, 11, 5], 2), 2)
    np.testing.assert_array_equal(counts, [1, 2, 1, 2, 1])


def test_a_task_without_seeded_starts_refuses_it_in_one_line():
    from nevo import cli
    from nevo.config import Config, EnvConfig

    with pytest.raises(ConfigError, match="^--validation-starts: .*CartPole-v1 has no such starts"):
        cli.check(Config(env=EnvConfig(env="CartPole-v1", validation_starts="each"), algo="ga"))
    with pytest.raises(ConfigError, match="^--validation-starts: got 'all', allowed: random or each$"):
        cli.check(Config(env=EnvConfig(validation_starts="all"), algo="ga"))


def test_a_run_validates_every_candidate_on_every_start(tmp_path, monkeypatch):
    """A tiny Frostbite run with 2 starts and 4 validation episodes: every validation the evaluator
    plays starts each candidate's episodes with 1, 2, 1, 2 no-ops (training's episodes draw
    theirs), and the run says the setting in its config.json."""
    from experiments import run_ga

    asked, trained = [], []
    run = AtariEvaluator.run

    def spy(self, population, episodes, *args, **kwargs):
        (asked if episodes.validation else trained).append(noop_counts(episodes.seeds, 2))
        return run(self, population, episodes, *args, **kwargs)

    monkeypatch.setattr(AtariEvaluator, "run", spy)
    argv = [*tiny.ATARI, "--noop-max", "2", "--validation-episodes", "4", "--validation-starts", "each",
            "--frame-budget", "12000", "--out-dir", str(tmp_path)]  # fmt: skip
    assert run_ga.main(argv) == 0
    assert len(asked) >= 3
    assert any(not np.array_equal(c, np.tile([1, 2], len(c) // 2)) for c in trained)
    for counts in asked:
        np.testing.assert_array_equal(counts.reshape(-1, 4), np.tile([1, 2, 1, 2], (len(counts) // 4, 1)))
    (folder,) = [os.path.join(tmp_path, d) for d in os.listdir(tmp_path)]
    with open(os.path.join(folder, "config.json")) as f:
        assert json.load(f)["env"]["validation_starts"] == "each"
