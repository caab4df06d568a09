"""The gradient-correlation study (Zhang, Clune & Stanley 2017): ES's estimate at fixed parameters
is ES.step's own, its correlation with the true gradient rises with the offspring and nears 1 in
a tiny net, and a run logs es/grad_corr only when asked, refusing in one line where it cannot."""

from dataclasses import replace

import numpy as np
import pytest

import nevo
from nevo import nets
from nevo.algos import make_algo
from nevo.algos.gradient_correlation import GradientCorrelation, pearson
from nevo.config import Config, ConfigError, EnvConfig, ESConfig, NetConfig, RunConfig, validate
from nevo.evaluation.supervised import batch_of
from nevo.genomes.noise import NoiseSource, make_table
from nevo.loops import loop
from nevo.nets import init_scale
from nevo.studies.grad_corr import (
    batch_evaluator,
    correlation_curve,
    es_gradient,
    linear_r,
    shaped_fitness,
)
from nevo.tasks.supervised import Supervised
from tests.helpers import small_data


def tiny(widths: str = "dense:4", sigma: float = 0.01):
    """(spec, noise source, theta, x, y) of a tiny dense net on a batch of the small data set."""
    data = small_data()
    spec = nets.net_spec(widths, data.train_x.shape[1:], 3, np.uint8)
    source = NoiseSource(make_table(400_000, 3), init_scale(spec), sigma)
    theta = source.rebuild([17]).copy()
    pick = batch_of(5, len(data.train_y), 40)
    return spec, source, theta, data.train_x[pick], data.train_y[pick]


@pytest.mark.parametrize("shaping", ["centered_ranks", "none"])
def test_the_estimate_is_es_steps_gradient_bit_for_bit(shaping):
    """From the same returns and seeds, es_gradient gives exactly the g that ES.step kept."""
    spec, source, theta, _, _ = tiny()
    cfg = Config(algo="es", settings=ESConfig(population=30, common_episodes=1, fitness_shaping=shaping))
    es = make_algo("es", cfg, source)
    returns = np.random.default_rng(1).normal(size=30)
    seeds = es._seeds()
    es.tell(None, fitness=returns)
    np.testing.assert_array_equal(es_gradient(shaped_fitness(returns, shaping), seeds, source), es.last_grad)


def test_the_offspring_are_es_population_on_the_batch():
    """The returns correlation_curve evaluates are those of ES's own population on that batch: the
    estimate at N = ES's population is the g of ES's step there."""
    spec, source, theta, x, y = tiny()
    data = small_data()
    cfg = Config(algo="es", settings=ESConfig(population=24, common_episodes=1), env=EnvConfig(examples=40))
    es = make_algo("es", cfg, source)
    es.theta = theta.copy()
    population, episodes = es.ask()
    pick = batch_of(int(episodes.seeds[0]), len(data.train_y), 40)
    ev = batch_evaluator(spec, source, data.train_x[pick], data.train_y[pick])
    got = ev.run(population, replace(episodes, seeds=np.zeros_like(episodes.seeds)))
    seeds = es._seeds()
    es.tell(got)
    g = es_gradient(shaped_fitness(got.returns), seeds, source)
    np.testing.assert_array_equal(g, es.last_grad)


def test_the_correlation_rises_with_the_offspring_and_nears_one_in_a_tiny_net():
    spec, source, theta, x, y = tiny(sigma=0.002)
    counts = [100, 1000, 3000]
    curves = [correlation_curve(spec, source, theta, x, y, counts, seed=s) for s in range(3)]
    r = np.mean([[p["r"] for p in c] for c in curves], axis=0)
    assert r[0] < r[1] < r[2] and r[2] > 0.9  # a net of 275 parameters: 2,000 pairs nearly suffice
    assert [p["offspring"] for p in curves[0]] == counts
    # and follows sqrt(K / (K + P + 1)), a locally linear fitness's correlation (K pairs, P = 275)
    np.testing.assert_allclose(r, linear_r(counts, spec.n_params), atol=0.06)


def test_pearson_is_the_textbook_r():
    a, b = np.random.default_rng(0).normal(size=(2, 500))
    assert pearson(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1]) and pearson(a, 3 * a + 1) == pytest.approx(
        1
    )


def test_a_run_logs_the_correlation_only_when_asked(tmp_path):
    data = small_data()
    rows = {}
    for ask in (0, 1):
        rows[ask] = nevo.train("es", env=data, net=[4], frames=3 * (20 * 10 + 150), population=20,
                               sigma=0.02, lr=0.03, examples=10, noise_table_size=200_000, grad_corr=ask,
                               out_dir=str(tmp_path / str(ask)), progress=False).metrics  # fmt: skip
    assert len(rows[1]) == 3 and all(-1 <= r["es/grad_corr"] <= 1 for r in rows[1])
    assert not any("es/grad_corr" in r for r in rows[0])
    # the same run either way: the correlation changes no result
    assert [r["score/elite_mean"] for r in rows[0]] == [r["score/elite_mean"] for r in rows[1]]


def test_the_refusals_are_one_line():
    es = ESConfig(grad_corr=1, common_episodes=1, population=4)
    cfg = Config(algo="es", settings=es, net=NetConfig(net="dense:4"), env=EnvConfig(env="data"),
                 run=RunConfig(noise_table_size=200_000))  # fmt: skip
    task = Supervised(cfg.env, small_data())

    class Game:
        name = "frostbite"

    with pytest.raises(ConfigError, match="needs a labelled data set") as e:
        GradientCorrelation.check(cfg, Game())
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="needs --common-episodes 1") as e:
        loop.plan(replace(cfg, settings=replace(es, common_episodes=0)), task)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="--grad-corr: got 2, allowed: 0 or 1"):
        validate(replace(cfg, settings=replace(es, grad_corr=2)))
    loop.plan(cfg, task)  # a supervised task with one shared batch: accepted


@pytest.mark.slow
def test_the_study_writes_every_point_and_its_figure(tmp_path, monkeypatch):
    """experiments.grad_corr on generated data: theta_0 and two SGD nets, each seed's r at every N,
    the sqrt(N) fit and its N for 20%, a JSON and a figure."""
    import json

    from experiments import grad_corr

    monkeypatch.setattr("nevo.tasks.supervised.mnist", small_data)
    out = str(tmp_path / "gc")
    argv = ["--net", "dense:4", "--sgd-examples", "200", "--max-offspring", "60", "--step", "20",
            "--seeds", "2", "--examples", "20", "--out", out]  # fmt: skip
    assert grad_corr.main(argv) == 0
    with open(out + ".json") as f:
        got = json.load(f)
    assert [p["sgd_examples"] for p in got["points"]] == [0, 20, 200] and got["n_params"] == 275
    for p in got["points"]:
        assert p["offspring"] == [20, 40, 60] and np.shape(p["r"]) == (2, 3)
        assert p["offspring_for_20"] == pytest.approx((0.2 / p["sqrt_c"]) ** 2)
    assert (tmp_path / "gc.png").is_file()
