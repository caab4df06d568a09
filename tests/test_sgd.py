"""The SGD baseline of ES against SGD: nevo's own gradient of the mean cross-entropy is the true
one, the batches are mini-batch ES's, the proxy has the correlation asked for, and a run learns
and resumes exactly."""

import os
import shutil
from dataclasses import replace

import numpy as np
import pytest

from nevo import config, nets, runs
from nevo.algos import make_algo
from nevo.algos.sgd import SGD, loss_gradient, proxy
from nevo.config import Config, EnvConfig, ESConfig, NetConfig, RunConfig, SGDConfig
from nevo.genomes.noise import NoiseSource
from nevo.loops import elite as elite_files
from nevo.loops import loop
from nevo.tasks.supervised import Supervised
from tests.helpers import metrics_without_clock, small_data


def test_the_loss_gradient_is_the_finite_difference_of_the_mean_cross_entropy():
    data = small_data()
    spec = nets.net_spec("dense:6", data.train_x.shape[1:], 3, np.uint8)
    theta = np.random.default_rng(2).normal(0, 0.3, spec.n_params)
    x, y = data.train_x[:12], data.train_y[:12]
    g, loss, _ = loss_gradient(spec, theta, x, y)
    rng = np.random.default_rng(3)
    for i in rng.choice(spec.n_params, 12, replace=False):
        e = np.zeros(spec.n_params)
        e[i] = 1e-5
        up, down = loss_gradient(spec, theta + e, x, y)[1], loss_gradient(spec, theta - e, x, y)[1]
        assert g[i] == pytest.approx((up - down) / 2e-5, rel=1e-4, abs=1e-7)
    assert loss > 0


def test_sgd_sees_the_batches_mini_batch_es_shares_and_starts_from_es_theta(table):
    """Iteration g's batch seed is generation g's shared episode seed of mini-batch ES with the
    same run seed, and theta_0 is ES's."""
    cfg = Config(algo="es", settings=ESConfig(population=6, common_episodes=1), run=RunConfig(seed=5))
    source = NoiseSource(table, np.ones(40, np.float32), 0.01)
    es = make_algo("es", cfg, source)
    sgd = SGD(SGDConfig(), 5, source, spec=None)
    np.testing.assert_array_equal(sgd.theta, es.theta)
    for g in range(3):
        es.generation = sgd.generation = g
        assert es.ask()[1].seeds[0] == sgd.batch_seed()


def test_the_proxy_has_the_correlation_asked_for():
    g = np.random.default_rng(0).standard_normal(200_000) * 0.01 + 0.003
    for rho in (0.04, 0.2, 0.7):
        got = [np.corrcoef(g, proxy(g, rho, np.random.default_rng(s)))[0, 1] for s in range(1, 6)]
        assert np.mean(got) == pytest.approx(rho, abs=0.01)


@pytest.mark.slow
def test_an_sgd_run_learns_and_resumes_exactly(tmp_path):
    """On a small data set: the test accuracy climbs well above chance; a run resumed from its
    previous checkpoint ends with the same metrics and theta."""
    cfg = Config(algo="sgd", env=EnvConfig(env="stripes", examples=20), net=NetConfig(net="dense:16"),
                 settings=SGDConfig(lr=0.01, validate_every=50),
                 run=RunConfig(frame_budget=6_000, noise_table_size=200_000,
                               out_dir=str(tmp_path / "a")))  # fmt: skip
    task = Supervised(cfg.env, small_data())
    outcome = sgd_run(cfg, task)
    rows = runs.read_metrics(outcome.run_dir)
    assert len(rows) == 6 and rows[-1]["score/test_accuracy"] >= 0.95 > rows[0]["score/test_accuracy"] - 0.5
    copy = str(tmp_path / "copy")
    shutil.copytree(outcome.run_dir, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    sgd_run(replace(cfg, run=replace(cfg.run, out_dir=str(tmp_path / "b"))), task, resume_dir=copy)
    assert metrics_without_clock(copy) == metrics_without_clock(outcome.run_dir)
    thetas = [runs.read_array(elite_files.array_path(folder, "theta")) for folder in (copy, outcome.run_dir)]
    np.testing.assert_array_equal(*thetas)


def sgd_run(cfg, task, resume_dir=None):
    """The SGD baseline in the generation loop, as nevo train and nevo.train run it."""
    return loop.run(cfg, task, loop.plan(cfg, task, resume_dir), resume_dir)


def test_sgd_settings_are_checked_in_one_line():
    with pytest.raises(config.ConfigError, match="--proxy-rho: got 1.5"):
        config.validate(Config(algo="sgd", settings=SGDConfig(proxy_rho=1.5)))


def _resumed_from_its_folder_equals_the_whole_run(cfg, task, run, tmp_path):
    """Run cfg whole; then resume a copy of its folder from the previous checkpoint with the
    settings read back from the copy's config.json (as --resume does): the same metrics."""
    outcome = run(cfg, task)
    copy = str(tmp_path / "copy")
    shutil.copytree(outcome.run_dir, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    saved = config.load(os.path.join(copy, runs.CONFIG))
    config.validate(saved)
    assert saved == config.weights_resolved(cfg)  # --weights auto is written as the format it meant
    run(saved, task, resume_dir=copy)
    assert metrics_without_clock(copy) == metrics_without_clock(outcome.run_dir)


@pytest.mark.parametrize("rho", [0.0, 0.2])
@pytest.mark.slow
def test_sgd_and_the_proxy_resume_with_the_settings_they_started_with(rho, tmp_path):
    """Every SGD setting off its default (step, L2, momentum, the proxy's rho, validate_every):
    config.json gives them back, and the resumed run equals the uninterrupted one."""
    cfg = Config(algo="sgd", env=EnvConfig(env="stripes", examples=20), net=NetConfig(net="dense:16"),
                 settings=SGDConfig(optimizer="sgd", lr=0.02, momentum=0.5, l2=0.001, proxy_rho=rho,
                               validate_every=40),
                 run=RunConfig(frame_budget=3_200, noise_table_size=200_000,
                               out_dir=str(tmp_path / "a")))  # fmt: skip
    _resumed_from_its_folder_equals_the_whole_run(cfg, Supervised(cfg.env, small_data()), sgd_run, tmp_path)


@pytest.mark.slow
def test_es_on_a_data_set_resumes_with_the_settings_it_started_with(tmp_path):
    cfg = Config(algo="es", env=EnvConfig(env="stripes", examples=10), net=NetConfig(net="dense:8"),
                 settings=ESConfig(population=8, sigma=0.01, lr=0.02, l2=0.001, validation_episodes=1,
                             validate_every=2, common_episodes=1),
                 run=RunConfig(frame_budget=480, noise_table_size=200_000,
                               out_dir=str(tmp_path / "a")))  # fmt: skip
    task = Supervised(cfg.env, small_data())

    def run(cfg, task, resume_dir=None):
        return loop.run(cfg, task, loop.plan(cfg, task, resume_dir), resume_dir)

    _resumed_from_its_folder_equals_the_whole_run(cfg, task, run, tmp_path)


def test_sgd_refuses_what_it_cannot_run_on_in_one_line():
    """The SGD baseline's declaration refuses, before any work, a task that is not a labelled data
    set and a cluster (it evaluates no population to share out); nevo.train refuses a fitness."""
    import nevo
    from nevo.cli import ClusterSettings
    from nevo.tasks import task_for

    cfg = Config(algo="sgd", env=EnvConfig(env="stripes", examples=20), net=NetConfig(net="dense:16"),
                 run=RunConfig(noise_table_size=200_000))  # fmt: skip
    task = Supervised(cfg.env, small_data())
    with pytest.raises(config.ConfigError, match=r"^--cluster: the SGD baseline runs on one machine"):
        loop.plan(cfg, task, cluster=ClusterSettings("local:2"))
    maze = replace(cfg, env=EnvConfig(env="maze"))
    with pytest.raises(
        config.ConfigError, match=r"^--env: SGD trains on a labelled data set \(mnist\); maze"
    ):
        loop.plan(maze, task_for(maze.env))
    with pytest.raises(config.ConfigError, match=r"^fitness: sgd ranks no population"):
        nevo.train("sgd", env=small_data(), fitness=lambda results: results.returns, progress=False)
