"""--validation-starts each: a validation's episodes play each Atari start in turn, so that under
the paper's protocol an elite candidate's validation mean is its exact mean over its starts."""

import json
import os

import numpy as np
import pytest

from nevo.atari.evaluator import AtariEvaluator
from nevo.atari.game import noop_counts, places_of, seeds_for_starts
from nevo.genomes.noise import SEED_LIMIT
from nevo.settings import ConfigError
from tests import tiny


def test_each_candidates_episodes_start_with_every_noop_count_in_turn():
    """Three candidates on the same 30 seeds: each candidate's k-th episode starts with k + 1
    no-ops, the same seed for every candidate, every seed a run's (below the tests')."""
    seeds = np.random.default_rng(5).integers(0, SEED_LIMIT, 30)
    ind = np.repeat(np.arange(3), 30)
    moved = seeds_for_starts(np.tile(seeds, 3), places_of(ind), 30)
    counts = noop_counts(moved, 30).reshape(3, 30)
    np.testing.assert_array_equal(counts, np.tile(np.arange(1, 31), (3, 1)))
    np.testing.assert_array_equal(moved.reshape(3, 30), np.tile(moved[:30], (3, 1)))
    assert moved.min() >= 0 and moved.max() < SEED_LIMIT and len(set(moved.tolist())) == 30


def test_the_place_counts_within_each_individual_whatever_the_layout():
    """Episodes interleaved across individuals, each with seeds of its own (an agent's, say): an
    episode's start is its place among its own individual's episodes; more episodes than starts
    go round again; a seed at the limit's edge wraps below it."""
    ind = np.array([2, 0, 2, 1, 0, 1, 2, 0, 1, 2])
    np.testing.assert_array_equal(places_of(ind), [0, 0, 1, 0, 1, 1, 2, 2, 2, 3])
    seeds = np.array([7, SEED_LIMIT - 1, 3, 11, 5, 40, 8, 9, 10, 12])
    moved = seeds_for_starts(seeds, places_of(ind), 3)
    np.testing.assert_array_equal(noop_counts(moved, 3), [1, 1, 2, 1, 2, 2, 3, 3, 3, 1])
    assert moved.max() < SEED_LIMIT


def test_a_validation_is_moved_only_where_each_is_set():
    """AtariGame.validation: random (the default) plays the seeds asked; each moves them."""
    from nevo.atari.game import AtariGame
    from nevo.episodes import Episodes
    from nevo.settings import EnvConfig

    asked = Episodes(np.repeat(np.arange(2), 30), np.tile(np.arange(100, 130), 2), validation=True)
    assert AtariGame(EnvConfig()).validation(asked) is asked
    got = AtariGame(EnvConfig(validation_starts="each")).validation(asked)
    np.testing.assert_array_equal(noop_counts(got.seeds, 30), np.tile(np.arange(1, 31), 2))
    np.testing.assert_array_equal(got.ind, asked.ind)


REFUSED = [
    (["--env", "CartPole-v1"], "ga", "each start in turn is an Atari game's .*CartPole-v1 has no"),
    (["--preset", "quick"], "ga", "each needs validation episodes in whole rounds of the 30 starts .*"
                                  "got --validation-episodes 5 \\(allowed: random\\)$"),
    (["--env", "frostbite"], "ga-ns", "ga-ns validates no episodes"),
]  # fmt: skip


@pytest.mark.parametrize("argv, algo, message", REFUSED)
def test_where_it_cannot_play_each_start_it_is_refused_in_one_line(argv, algo, message):
    """A task without seeded starts, validations that are not whole rounds of the starts (the
    quick preset's 5 of 30), an algorithm that validates nothing (GA-NS); and a value not one of
    the two."""
    from nevo.cli import parse_args

    with pytest.raises(ConfigError, match="^--validation-starts: " + message):
        parse_args([*argv, "--validation-starts", "each"], "", algo)
    with pytest.raises(ConfigError, match="^--validation-starts: got 'all', allowed: random or each$"):
        parse_args(["--validation-starts", "all"], "", "ga")


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
