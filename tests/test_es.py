"""OpenAI-ES: the update, mirrored noise, centered ranks, settings, resume and learning CartPole."""

import json
import os

import numba
import numpy as np
import pytest

from experiments import run_es
from nevo.algos.es import ES, weighted_noise_sum, weighted_noise_sum_reference
from nevo.algos.ranking import centered_ranks
from nevo.cli import parse_args, presets_of
from nevo.config import ConfigError, ESConfig
from nevo.episodes import Results
from nevo.genomes.noise import NoiseSource, WeightBuilder
from nevo.loops import elite as elite_files
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import CARTPOLE

P = 40  # parameters of the toy problems


def quadratic_es(table, **kw):
    """An ES on P parameters starting at init_scale * eps = 0.5 * eps."""
    cfg = ESConfig(**{"population": 40, "sigma": 0.05, "lr": 0.05, "l2": 0.0, "validation_episodes": 1, **kw})
    return ES(cfg, 3, NoiseSource(table, np.full(P, 0.5, np.float32), cfg.sigma))


def loss(w, target):
    return ((w - target) ** 2).sum(axis=-1)


def ask(es):
    """The population's (N, P) weights, built as an evaluator builds them, and its episodes."""
    population, episodes = es.ask()
    builder = WeightBuilder(es.noise.table, es.noise.init_scale)
    builder.use(population)
    return builder.build(np.arange(len(population)), np.empty((len(population), P), np.float32)), episodes


def returns_of(es, target):
    """Every individual's return on the quadratic, -|w - target|^2, in population order."""
    w, ep = ask(es)
    return Results(-loss(w[ep.ind].astype(np.float64), target), np.ones(len(ep.ind)), np.ones(len(ep.ind)))


def test_the_es_step_points_downhill_and_converges_on_a_quadratic(table):
    target = np.linspace(-1, 1, P).astype(np.float32)
    for optimizer in ("adam", "sgd"):
        es = quadratic_es(table, optimizer=optimizer, lr=0.05 if optimizer == "adam" else 0.5)
        start = es.theta.copy()
        es.tell(returns_of(es, target))
        step = es.theta - start
        assert step @ (target - start) > 0.5 * np.linalg.norm(step) * np.linalg.norm(target - start) * 0.3
        for _ in range(300):
            es.tell(returns_of(es, target))
        assert loss(es.theta, target) < 0.02 * loss(start, target), optimizer


def test_l2_decay_pulls_theta_to_zero_when_returns_are_flat(table):
    es = quadratic_es(table, l2=0.5)
    start = np.linalg.norm(es.theta)
    for _ in range(20):
        es.tell(Results(np.zeros(40), np.ones(40), np.ones(40)))
    assert np.linalg.norm(es.theta) < 0.9 * start


def test_mirrored_pairs_use_the_same_noise_with_opposite_signs_and_one_episode_seed(table):
    es = quadratic_es(table)
    w, ep = ask(es)
    plus, minus = w[ep.ind[0::2]] - es.theta, w[ep.ind[1::2]] - es.theta  # (pairs, P)
    np.testing.assert_allclose(plus, -minus, atol=1e-6)
    assert np.abs(plus).max() > 0.01  # really perturbed
    assert len(set(map(tuple, np.round(plus, 5)))) == 20  # every pair its own noise
    np.testing.assert_array_equal(ep.seeds[0::2], ep.seeds[1::2])
    assert len(set(ep.seeds[0::2])) == 20


def test_centered_ranks_match_a_plain_reference():
    rng = np.random.default_rng(0)
    x = rng.normal(size=101)
    plain = np.argsort(np.argsort(x)) / (x.size - 1) - 0.5  # worst -0.5 .. best 0.5
    np.testing.assert_allclose(centered_ranks(x), plain, atol=1e-7)
    r = centered_ranks([2.0, np.nan, -1.0, 5.0])
    assert r[1] == -0.5 and r[3] == 0.5 and r.sum() == pytest.approx(0.0)


def test_weighted_noise_sum_matches_numpy_and_does_not_depend_on_threads(table):
    rng = np.random.default_rng(1)
    n, p = 7, 10_000  # spans several blocks and a partial last one
    coeffs = rng.normal(size=n).astype(np.float32)
    offsets = rng.integers(0, table.size - p, n).astype(np.int64)
    out = np.empty(p, np.float32)
    weighted_noise_sum(out, coeffs, offsets, table)
    np.testing.assert_allclose(
        out, weighted_noise_sum_reference(coeffs, offsets, table, p), rtol=1e-5, atol=1e-5
    )
    one = np.empty(p, np.float32)
    numba.set_num_threads(1)
    try:
        weighted_noise_sum(one, coeffs, offsets, table)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    np.testing.assert_array_equal(one, out)


def test_state_round_trip_gives_the_same_next_generation(table):
    target = np.linspace(-1, 1, P).astype(np.float32)
    a = quadratic_es(table)
    for _ in range(3):
        a.tell(returns_of(a, target))
    b = quadratic_es(table)
    b.load_state({k: np.array(v) for k, v in a.state().items()})
    a.tell(returns_of(a, target))
    b.tell(returns_of(b, target))
    np.testing.assert_array_equal(a.theta, b.theta)


def test_paper_preset_is_the_reference_atari_es():
    c = presets_of("es")["paper"]
    assert (c.settings.population, c.settings.sigma, c.settings.optimizer, c.settings.lr, c.settings.l2) == (
        5000,
        0.02,
        "adam",
        0.01,
        0.005,
    )
    assert (c.settings.mirrored, c.settings.fitness_shaping, c.net.vbn) == (1, "centered_ranks", 128)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--sigma", "0"], ["--sigma", "> 0"]),
        (["--population", "63"], ["--population", "even", "--mirrored"]),
        (["--optimizer", "rmsprop"], ["--optimizer", "adam", "sgd"]),
        (["--env", "CartPol-v1"], ["--env", "CartPole-v1"]),
        (["--env", "CartPole-v1", "--net", "large"], ["--net", "mlp"]),
        (["--fitness-shaping", "rank"], ["--fitness-shaping", "centered_ranks"]),
    ],
)
def test_bad_es_settings_name_the_field_and_what_is_allowed(argv, words):
    with pytest.raises(ConfigError) as e:
        parse_args(argv, "", "es")
    for w in words:
        assert w in str(e.value)


def test_an_odd_population_is_fine_without_mirroring():
    cfg = parse_args(["--env", "CartPole-v1", "--population", "63", "--mirrored", "0"], "", "es").cfg
    assert cfg.settings.population == 63 and cfg.net.net == "mlp"


results = metrics_without_clock


def es_run(out, *extra):
    return run_folder(run_es.main, [*CARTPOLE, *extra], out)


@pytest.mark.slow
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    whole = es_run(tmp_path / "a", "--frame-budget", "6000")
    part = es_run(tmp_path / "b", "--frame-budget", "3000")
    assert run_es.main(["--resume", part, "--frame-budget", "6000"]) == 0
    assert len(results(whole)) >= 3 and results(part) == results(whole)
    np.testing.assert_array_equal(
        np.load(elite_files.array_path(part, "theta")), np.load(elite_files.array_path(whole, "theta"))
    )


@pytest.mark.slow
def test_es_learns_cartpole_on_a_small_budget(tmp_path):
    """Within 400K steps theta balances the pole: a mean of 475+ over 20 fresh test episodes."""
    from nevo.tools import replay

    folder = es_run(tmp_path, "--population", "64", "--frame-budget", "400000")
    assert replay.main([folder, "--episodes", "20", "--seed", "5"]) == 0
    test = json.load(open(os.path.join(folder, "test.json")))
    assert test["mean"] >= 475, test["mean"]


@pytest.mark.slow
def test_a_resumed_vbn_run_equals_an_uninterrupted_one(tmp_path):
    """With virtual batch norm the reference batch is kept in the run folder, so resume is exact."""
    whole = es_run(tmp_path / "a", "--frame-budget", "4000", "--vbn", "16")
    part = es_run(tmp_path / "b", "--frame-budget", "2000", "--vbn", "16")
    assert run_es.main(["--resume", part, "--frame-budget", "4000"]) == 0
    assert results(part) == results(whole)
    np.testing.assert_array_equal(
        np.load(os.path.join(part, "ref_batch.npy")), np.load(os.path.join(whole, "ref_batch.npy"))
    )
