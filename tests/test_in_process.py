"""The synchronous evaluator on gymnasium vector tasks: queue, compaction, determinism; the GA on CartPole."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from experiments import run_ga
from nevo import nets
from nevo.config import EnvConfig
from nevo.episodes import Episodes, Population
from nevo.evaluation.in_process import InProcessEvaluator
from nevo.nets.kernels import make_policy
from nevo.tasks import task_for
from nevo.tasks.envs import VectorTaskSlots
from nevo.tools import replay
from tests.helpers import host_weights


def evaluate(slots, weights, episodes, frame_cap=500):
    spec = nets.net_spec("mlp", (4, 1, 1), 2, np.float32)
    ev = InProcessEvaluator(
        VectorTaskSlots(lambda: gym.make("CartPole-v1"), slots),
        make_policy("cpu", spec),
        host_weights(spec.n_params),
        frame_cap,
    )
    try:
        return ev.run(Population.of_weights(weights), episodes)
    finally:
        ev.close()


def population(n=5):
    spec = nets.net_spec("mlp", (4, 1, 1), 2, np.float32)
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, spec.n_params)) * nets.init_scale(spec) * 3).astype(np.float32)


def test_slot_reuse_gives_the_results_of_one_episode_at_a_time():
    """An episode's outcome depends only on its individual and seed, not on its slot or neighbours."""
    weights = population()
    rng = np.random.default_rng(1)
    episodes = Episodes(rng.integers(0, 5, 23), rng.integers(0, 2**31, 23))
    many = evaluate(4, weights, episodes)  # 4 slots, each reused ~6 times
    one = [
        evaluate(1, weights, Episodes(episodes.ind[e : e + 1], episodes.seeds[e : e + 1])) for e in range(23)
    ]
    np.testing.assert_array_equal(many.returns, [r.returns[0] for r in one])
    np.testing.assert_array_equal(many.lengths, [r.lengths[0] for r in one])
    assert len(set(many.lengths)) > 3  # episodes of different lengths, so slots really refilled
    np.testing.assert_array_equal(many.frames, many.lengths)


def test_episodes_are_cut_at_the_frame_cap():
    weights = population()
    res = evaluate(3, weights, Episodes(np.arange(5), np.arange(5)), frame_cap=7)
    assert res.lengths.max() <= 7 and (res.lengths == 7).any()


def test_reference_batch_is_a_function_of_env_size_and_seed():
    task = task_for(EnvConfig(env="CartPole-v1"))
    a, b, c = task.reference_batch(16, 3), task.reference_batch(16, 3), task.reference_batch(16, 4)
    assert a.shape == (16, 4, 1, 1) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.slow
def test_ga_learns_cartpole_on_a_small_budget(tmp_path):
    """`run_ga --env CartPole-v1` on 300K steps: its elite scores 475+ over 20 test episodes."""
    out = str(tmp_path)
    argv = [
        "--env",
        "CartPole-v1",
        "--frame-budget",
        "300000",
        "--noise-table-size",
        "200000",
        "--out-dir",
        out,
    ]
    assert run_ga.main(argv) == 0
    (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
    assert replay.main([folder, "--episodes", "20", "--seed", "5"]) == 0
    assert json.load(open(os.path.join(folder, "test.json")))["mean"] >= 475
