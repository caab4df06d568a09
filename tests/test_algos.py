"""The registry and the one ask/tell shape: every algorithm by name, on a fake evaluator; GA-NS
selects on novelty; NSR-ES steps along the mixed ranks of reward and novelty."""

from dataclasses import replace

import numpy as np
import pytest

from nevo.algos import NAMES, make_algo
from nevo.algos.es import ES
from nevo.algos.ga import GA
from nevo.algos.novelty import mix_ranks
from nevo.algos.ns import GANS, NSES
from nevo.algos.streams import check_run_seeds, held_out_seeds
from nevo.episodes import Results
from nevo.genomes.noise import SEED_LIMIT, WeightBuilder
from nevo.settings import ConfigError
from tests.helpers import BEHAVIOUR, tiny_config


class FakeEvaluator:
    """Builds each episode's weights from its Population row: return = their sum plus the episode
    seed mod 5 (so validation means differ), behaviour = the first two weights."""

    def __init__(self, source):
        self.builder = WeightBuilder(source.table, source.init_scale)

    def run(self, population, episodes, progress=None) -> Results:
        n = len(episodes.ind)
        w = np.zeros((n, self.builder.n_params), np.float32)
        if n:
            self.builder.use(population)
            self.builder.build(episodes.ind, w)
        returns = w.sum(axis=1, dtype=np.float64) + episodes.seeds % 5
        return Results(returns, np.ones(n, np.int64), np.ones(n, np.int64), behaviours=w[:, :2].copy())


def generation(algo, evaluate) -> None:
    """One generation in the shape every run script follows."""
    population, episodes = algo.ask()
    algo.tell(evaluate(population, episodes))
    population, episodes = algo.ask_validation()
    algo.tell_validation(evaluate(population, episodes))


def results(returns, behaviours) -> Results:
    n = len(returns)
    return Results(np.asarray(returns, np.float64), np.ones(n, np.int64), np.ones(n, np.int64),
                   behaviours=np.asarray(behaviours, np.float32))  # fmt: skip


def test_the_registry_builds_every_algorithm_by_name(source):
    built = {name: make_algo(name, tiny_config(name), source, BEHAVIOUR) for name in NAMES}
    assert {name: type(a) for name, a in built.items()} == {
        "ga": GA, "rs": GA, "es": ES, "ga-ns": GANS, "ns-es": NSES, "nsr-es": NSES, "nsra-es": NSES,
    }  # fmt: skip
    assert built["rs"].cfg.truncation == 0
    assert [built[n].variant for n in ("ns-es", "nsr-es", "nsra-es")] == ["ns-es", "nsr-es", "nsra-es"]


def test_an_unknown_name_is_one_clear_error_listing_the_allowed_names(source):
    with pytest.raises(ValueError) as e:
        make_algo("ns", tiny_config("ga"), source)
    msg = str(e.value)
    assert "\n" not in msg and "'ns'" in msg and all(name in msg for name in NAMES)
    with pytest.raises(ValueError, match="behaviour"):
        make_algo("ga-ns", tiny_config("ga-ns"), source)


@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_follows_the_ask_tell_shape_and_resumes_exactly(name, source):
    """Start (novelty search), two generations, then a copy rebuilt from state() goes on as the
    original does."""
    cfg, evaluate = tiny_config(name), FakeEvaluator(source).run
    algo = make_algo(name, cfg, source, BEHAVIOUR)
    asked = algo.ask_start()  # None where there is nothing to evaluate first
    assert (asked is not None) == (name in ("ns-es", "nsr-es", "nsra-es"))
    if asked is not None:
        algo.tell_start(evaluate(*asked))
    for _ in range(2):
        generation(algo, evaluate)
    assert algo.generation == 2
    metrics = algo.metrics()
    assert np.isfinite(metrics["score/elite_mean"])
    assert all(isinstance(v, (int, float)) for v in metrics.values())

    copy = make_algo(name, cfg, source, BEHAVIOUR)
    copy.load_state({k: np.array(v) for k, v in algo.state().items()})
    for a in (algo, copy):
        generation(a, FakeEvaluator(source).run)
    assert copy.metrics() == algo.metrics() and copy.generation == algo.generation == 3
    mine, theirs = algo.state(), copy.state()
    assert mine.keys() == theirs.keys()
    for k in mine:
        np.testing.assert_array_equal(mine[k], theirs[k], err_msg=k)


@pytest.mark.parametrize("name", NAMES)
def test_a_callers_fitness_counts_as_returns_equal_to_it_would(name, source):
    """tell(results, fitness=f) leaves every algorithm in the state that results whose returns are
    f leave it in (the GA ranks f; ES shapes it; novelty search mixes it with novelty)."""
    cfg, evaluate = tiny_config(name), FakeEvaluator(source).run
    algos = [make_algo(name, cfg, source, BEHAVIOUR) for _ in range(3)]
    for algo in algos:
        asked = algo.ask_start()
        if asked is not None:
            algo.tell_start(evaluate(*asked))
    train = evaluate(*[a.ask() for a in algos][0])
    fitness = -train.returns[::-1].copy()  # another order than the returns'
    algos[0].tell(train, fitness=fitness)
    algos[1].tell(replace(train, returns=fitness))
    algos[2].tell(train)
    for a in algos:
        a.tell_validation(evaluate(*a.ask_validation()))
    first, second, third = (a.state() for a in algos)
    for k in first:
        np.testing.assert_array_equal(first[k], second[k], err_msg=k)
    assert any(not np.array_equal(first[k], third[k]) for k in first)  # the fitness mattered


def test_ns_es_asks_to_start_before_its_first_generation(source):
    algo = make_algo("ns-es", tiny_config("ns-es"), source, BEHAVIOUR)
    with pytest.raises(ValueError, match="ask_start"):
        algo.ask()
    population, episodes = algo.ask_start()  # every agent's theta on its validation episodes
    assert len(population) == 2 and episodes.ind.tolist() == [0, 0, 1, 1]
    algo.tell_start(FakeEvaluator(source).run(population, episodes))
    assert len(algo.archive) == 2 and np.isfinite(algo.agent_score).all()


def test_ga_ns_selects_on_novelty_not_on_reward(source):
    """Four individuals in one spot score best; the two alone score worst but are the most novel:
    they are the parents, the first of them the elite, logged with its game score."""
    algo = make_algo("ga-ns", tiny_config("ga-ns"), source, BEHAVIOUR)
    algo.ask()
    genomes = [g.tolist() for g in algo.ga.genomes]
    bc = [[0.5, 0.5]] * 4 + [[0.0, 0.0], [1.0, 1.0]]
    algo.tell(results([10, 9, 8, 7, -5, -6], bc))
    population, episodes = algo.ask_validation()
    assert len(episodes.ind) == 0  # nothing to validate
    algo.tell_validation(results([], np.zeros((0, 2))))
    assert [p.tolist() for p in algo.ga.parents] == [genomes[4], genomes[5]]
    assert algo.elite.tolist() == genomes[4]
    m = algo.metrics()
    # k = 2 nearest among the population, itself included: 0 and the spot at sqrt(0.5)
    assert m["ns/elite_novelty"] == m["ns/novelty_max"] == pytest.approx(np.sqrt(0.5) / 2)
    assert m["score/elite_mean"] == -5.0 and m["score/best_ever"] == 10.0


def test_nsr_es_steps_along_the_mixed_ranks_of_reward_and_novelty(source):
    """The agent's update is the ES step on mix_ranks(returns, novelty, reward_weight), with
    reward and novelty ranking the perturbations differently."""
    cfg = tiny_config("nsr-es")
    cfg = replace(cfg, settings=replace(cfg.settings, meta_population=1, validation_episodes=1))
    algo = make_algo("nsr-es", cfg, source, BEHAVIOUR)
    algo.tell_start(results([0.0], [[0.5, 0.5]]))  # the archive: one behaviour at (0.5, 0.5)
    algo.ask()
    twin = ES(algo.agents[0].cfg, cfg.run.seed, source, agent=0)
    twin.load_state({k: np.array(v) for k, v in algo.agents[0].state().items()})
    other = ES(algo.agents[0].cfg, cfg.run.seed, source, agent=0)
    other.load_state({k: np.array(v) for k, v in algo.agents[0].state().items()})
    novelty = np.array([0.3, 0.1, 0.6, 0.2, 0.5, 0.4])  # distance to the archive's one behaviour
    train = results([6, 5, 4, 3, 2, 1], 0.5 + np.stack([novelty, np.zeros(6)], axis=1))
    algo.tell(train)
    twin.step(mix_ranks(train.returns, novelty, 0.3))
    other.step(mix_ranks(train.returns, novelty, 0.5))
    np.testing.assert_array_equal(algo.agents[0].theta, twin.theta)
    assert not np.array_equal(algo.agents[0].theta, other.theta)
    assert algo.weight == 0.3


@pytest.mark.parametrize("name", NAMES)
def test_a_runs_episode_seeds_never_meet_a_tests(name, source):
    """Every episode an algorithm asks for (its start, training and validation, three
    generations) has a seed in [0, SEED_LIMIT); a test's seeds (held_out_seeds, any test seed)
    lie above, and a seed outside a run's range is one line from the loop's check."""
    algo, evaluate = make_algo(name, tiny_config(name), source, BEHAVIOUR), FakeEvaluator(source).run
    seen = []

    def evaluating(population, episodes):
        seen.append(episodes.seeds)
        check_run_seeds(episodes.seeds, name)
        return evaluate(population, episodes)

    asked = algo.ask_start()
    if asked is not None:
        algo.tell_start(evaluating(*asked))
    for _ in range(3):
        generation(algo, evaluating)
    run = np.concatenate(seen)
    assert run.size and run.min() >= 0 and run.max() < SEED_LIMIT
    for test_seed in (0, 1, 7):
        held = held_out_seeds(test_seed, 200)
        assert held.min() >= SEED_LIMIT and held.max() < 2 * SEED_LIMIT and len(set(held)) == 200
    with pytest.raises(ConfigError, match=f"algorithm {name}: asked for an episode seed {SEED_LIMIT};"):
        check_run_seeds(np.array([3, SEED_LIMIT]), name)
