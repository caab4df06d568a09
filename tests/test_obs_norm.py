"""Observation normalisation (OpenAI-ES on MuJoCo): running statistics, the fold into the first
layer, the evaluator's share of episodes, and ES runs that resume and replay exactly."""

import json
import os
import shutil

import numpy as np
import pytest

from experiments import run_es
from nevo import nets, runs, tasks
from nevo.cli import parse_args
from nevo.config import ConfigError, EnvConfig, RunConfig
from nevo.episodes import Episodes, Population
from nevo.evaluation.setup import evaluator_for
from nevo.genomes.noise import WeightBuilder
from nevo.loops import elite as elite_files
from nevo.nets import obs_norm
from nevo.nets.kernels import make_policy, reference
from nevo.tools import replay
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import PENDULUM


def test_a_folded_net_on_raw_observations_is_the_net_on_normalised_ones():
    spec = nets.make_spec([("dense", 8), ("dense", 6)], (5, 1, 1), 2, obs_dtype=np.float32, action="tanh")
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(3, spec.n_params)).astype(np.float32)
    obs = (rng.normal(size=(7, 5, 1, 1)) * 4 + 2).astype(np.float32)
    mean, std = rng.normal(size=5) * 2, rng.uniform(0.5, 3, 5)
    rows = rng.integers(0, 3, 7)
    folded = obs_norm.fold(spec, weights.copy(), mean, std)
    _, z_folded = reference.forward(spec, folded, rows, obs)
    normalised = ((obs[:, :, 0, 0] - mean) / std).astype(np.float32)[:, :, None, None]
    _, z_plain = reference.forward(spec, weights, rows, normalised)
    np.testing.assert_allclose(z_folded, z_plain, rtol=1e-4, atol=1e-4)
    identity = obs_norm.fold(spec, weights.copy(), np.zeros(5), np.ones(5))
    np.testing.assert_array_equal(identity, weights)  # before any statistics: unchanged


def test_running_statistics_merge_and_floor_the_variance():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 3)) * [1.0, 5.0, 0.001] + [0.0, 2.0, 7.0]
    stat = obs_norm.RunningStat(3)
    assert (stat.std == 1).all() and (stat.mean == 0).all()
    for part in np.split(x, [100, 250]):  # three evaluations of one episode each
        stat.update((part.sum(axis=0)[None], (part**2).sum(axis=0)[None], np.array([len(part)])))
    stat.update(None)
    np.testing.assert_allclose(stat.mean, x.mean(axis=0))
    np.testing.assert_allclose(stat.std[:2], x.std(axis=0)[:2], rtol=1e-9)
    assert stat.std[2] == pytest.approx(np.sqrt(obs_norm.VAR_FLOOR))  # tiny variance: floored


def test_the_evaluator_counts_the_observations_of_the_chosen_episodes_only():
    task = tasks.task_for(EnvConfig(env="Pendulum-v1", frame_cap=30))
    spec = nets.net_spec("mlp", task.obs_shape, task.n_actions, task.obs_dtype, task.action)
    table = np.random.default_rng(0).normal(size=20_000).astype(np.float32)
    builder = WeightBuilder(table, nets.init_scale(spec))
    ev, _ = evaluator_for(task, RunConfig(env_slots=2), make_policy("cpu", spec), builder, "cpu", 2)
    pop = Population([np.array([3])], np.array([0, 0]), np.array([4, 5]), np.full(2, 0.1, np.float32), 0.1)
    mask = np.array([True, False, True, False])
    res = ev.run(pop, Episodes(np.array([0, 1, 0, 1]), np.arange(4), obs_stats=mask))
    ev.close()
    s, sq, count = res.obs_stats  # per counted episode, in episode order
    assert count.tolist() == res.lengths[mask].tolist() == [30, 30]
    assert s.shape == (2, 3) and np.all(sq >= 0) and np.all(np.abs(s) <= 30 * 8)


def test_the_statistics_do_not_depend_on_how_many_episodes_run_at_once():
    """Each counted episode's sums are its own, in its step order: 1 slot or 3 give the same bits
    (so a cluster's chunks, which play episodes on other slots, give one machine's statistics)."""
    task = tasks.task_for(EnvConfig(env="Pendulum-v1", frame_cap=25))
    spec = nets.net_spec("mlp", task.obs_shape, task.n_actions, task.obs_dtype, task.action)
    table = np.random.default_rng(0).normal(size=20_000).astype(np.float32)
    pop = Population([np.array([3])], np.array([0, 0]), np.array([4, 5]), np.full(2, 0.1, np.float32), 0.1)
    episodes = Episodes(np.array([0, 1, 0, 1, 1]), np.arange(5), obs_stats=np.array([1, 0, 1, 1, 0], bool))
    got = []
    for slots in (1, 3):
        builder = WeightBuilder(table, nets.init_scale(spec))
        ev, _ = evaluator_for(task, RunConfig(env_slots=slots), make_policy("cpu", spec), builder, "cpu", 2)
        got.append(ev.run(pop, episodes).obs_stats)
        ev.close()
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


NORMED = [*PENDULUM, "--obs-norm", "1"]


@pytest.fixture(scope="module")
def normed_run(tmp_path_factory):
    return run_folder(run_es.main, NORMED, str(tmp_path_factory.mktemp("normed")))


@pytest.mark.slow
def test_an_es_run_gathers_statistics_and_saves_them_with_theta(normed_run):
    rows = runs.read_metrics(normed_run)
    counts = [r["obs_norm/count"] for r in rows]
    assert counts[0] == 0 and all(b > a for a, b in zip(counts, counts[1:]))  # one episode a generation
    elite = json.load(open(os.path.join(normed_run, runs.ELITE)))
    stats = runs.read_array(os.path.join(normed_run, elite["obs_norm"]))
    assert stats.shape == (2, 3) and (stats[1] > 0).all()


@pytest.mark.slow
def test_a_normalised_run_resumed_from_its_previous_checkpoint_ends_the_same(normed_run, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(normed_run, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    assert run_es.main(["--resume", copy]) == 0
    assert metrics_without_clock(copy) == metrics_without_clock(normed_run)
    stats = [runs.read_array(elite_files.array_path(folder, "obs_norm")) for folder in (copy, normed_run)]
    np.testing.assert_array_equal(*stats)


@pytest.mark.slow
def test_replay_folds_the_saved_statistics_into_theta(normed_run):
    _, elite, spec, w = elite_files.load(normed_run)
    theta = runs.read_array(elite_files.array_path(normed_run, "theta"))
    stats = runs.read_array(elite_files.array_path(normed_run, "obs_norm"))
    np.testing.assert_array_equal(w, obs_norm.fold(spec, theta[None].copy(), stats[0], stats[1])[0])
    assert replay.main([normed_run, "--episodes", "2", "--no-save"]) == 0


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--env", "CartPole-v1", "--obs-norm", "2"], "--obs-norm: got 2"),
        (
            ["--env", "CartPole-v1", "--obs-norm", "1", "--vbn", "8"],
            "--vbn: got 8, allowed: 0 with --obs-norm 1",
        ),
    ],
)
def test_settings_obs_norm_refuses_are_one_line(argv, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_args(argv, "", "es")


def test_obs_norm_on_images_is_one_line(capsys, tmp_path):
    argv = [
        "--env",
        "maze",
        "--obs-norm",
        "1",
        "--vbn",
        "0",
        "--frame-budget",
        "100",
        "--out-dir",
        str(tmp_path),
    ]
    assert run_es.main(argv) == 2
    assert "--obs-norm: normalises vector observations" in capsys.readouterr().err


def test_observation_statistics_survive_evaluations_in_parts():
    """An evaluation run in parts (nevo.episodes.weights.in_parts: concat, then select back into the
    episodes' order) reports every part's counted episodes, one after the other."""
    from nevo.episodes import Results

    one = np.ones(2, np.int64)
    a = Results(
        np.zeros(2), one, one, obs_stats=(np.array([[1.0, 2.0]]), np.array([[1.0, 4.0]]), np.array([2]))
    )
    b = Results(
        np.zeros(2), one, one, obs_stats=(np.array([[3.0, 0.0]]), np.array([[9.0, 0.0]]), np.array([1]))
    )
    s, sq, count = Results.concat([a, b]).select([3, 0, 2, 1]).obs_stats
    np.testing.assert_array_equal(s, [[1.0, 2.0], [3.0, 0.0]])
    np.testing.assert_array_equal(sq, [[1.0, 4.0], [9.0, 0.0]])
    assert count.tolist() == [2, 1]


def test_a_gpu_run_with_obs_norm_builds_on_the_host_and_its_memory_check_says_so():
    """The fold happens after the build, on the host: the host holds the population's rows."""
    from nevo.evaluation import setup

    cfg, _, _, _ = parse_args(["--env", "Pendulum-v1", "--obs-norm", "1", "--population", "64"], "",
                           "es")  # fmt: skip
    assert not setup.builds_on_gpu(cfg)
    assert setup.weight_rows(cfg, "cuda", 64, 1) == 64 + 2
    plain, _, _, _ = parse_args(["--env", "Pendulum-v1", "--population", "64"], "",
                             "es")  # fmt: skip
    assert setup.builds_on_gpu(plain) and setup.weight_rows(plain, "cuda", 64, 1) == 2
