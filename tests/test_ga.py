"""The deep GA and random search: selection, mutation, elitism, state."""

import numpy as np
import pytest

from nevo.algos import fitness_order
from nevo.algos.ga import GA
from nevo.config import GAConfig
from nevo.episodes import Results
from nevo.genomes.noise import NoiseSource, WeightBuilder


def results(returns):
    r = np.asarray(returns, np.float64)
    return Results(r, np.ones(r.size, np.int64), np.full(r.size, 4, np.int64))


def weights_of(source, population):
    """(N, P) weights of a population the GA asked for, built as an evaluator builds them."""
    builder = WeightBuilder(source.table, source.init_scale)
    builder.use(population)
    return builder.build(np.arange(len(population)), np.empty((len(population), source.n_params), np.float32))


def ask(ga, source):
    population, episodes = ga.ask()
    return weights_of(source, population), episodes


def ask_validation(ga, source):
    population, episodes = ga.ask_validation()
    return weights_of(source, population), episodes


def generation(ga, source, fitness, validation):
    """One ask/tell/validate round with given scores; returns the weights evaluated."""
    weights, eps = ask(ga, source)
    ga.tell(results(fitness))
    _, veps = ask_validation(ga, source)
    ga.tell_validation(results(validation))
    return weights, eps, veps


CFG = GAConfig(population=8, truncation=3, sigma=0.01, elite_candidates=2, validation_episodes=3)


def test_fitness_order_puts_nan_last_and_keeps_ties_stable():
    """Higher is better, NaN ranks below everything, equal scores keep their order."""
    assert list(fitness_order([1.0, np.nan, 3.0, 1.0, -np.inf])) == [2, 0, 3, 4, 1]


def test_first_generation_is_fresh_networks(source):
    """Generation 0 holds N one-seed genomes with distinct seeds and one episode each."""
    ga = GA(CFG, seed=1)
    weights, eps = ask(ga, source)
    assert weights.shape == (8, 1000)
    assert all(len(g) == 1 for g in ga.genomes)
    assert len({int(g[0]) for g in ga.genomes}) == 8
    np.testing.assert_array_equal(eps.ind, np.arange(8))
    np.testing.assert_array_equal(weights[3], source.rebuild(ga.genomes[3]))


def test_validation_reevaluates_the_top_candidates_on_shared_seeds(source):
    """The top elite_candidates by episode score each get the same validation_episodes seeds."""
    ga = GA(CFG, seed=1)
    train, _ = ask(ga, source)
    ga.tell(results([0, 5, 1, 9, 2, 3, 4, 0]))
    w, veps = ask_validation(ga, source)
    np.testing.assert_array_equal(w, train[[3, 1]])
    np.testing.assert_array_equal(veps.ind, [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(veps.seeds[:3], veps.seeds[3:])


def test_elite_survives_unchanged(source):
    """The best validated candidate is row 0 of the next generation, genome and weights identical."""
    ga = GA(CFG, seed=1)
    w0, _, _ = generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])  # candidate 1 wins
    elite_genome = ga.genomes[0]
    w1, _ = ask(ga, source)
    np.testing.assert_array_equal(w1[0], w0[1])
    np.testing.assert_array_equal(ga.elite, elite_genome)
    assert ga.elite_score == 7.0


def test_children_are_top_t_parents_plus_one_seed(source):
    """Every non-elite child is one of the top T genomes plus one new seed, with matching weights."""
    ga = GA(CFG, seed=2)
    w0, _, _ = generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])
    top = {3: w0[3], 1: w0[1], 6: w0[6]}
    old = {i: tuple(g) for i, g in enumerate(GA(CFG, seed=2).genomes)}
    w1, _ = ask(ga, source)
    parents_used = set()
    for i in range(1, 8):
        g = ga.genomes[i]
        assert len(g) == 2
        parent = [k for k, v in old.items() if v == tuple(g[:-1])]
        assert len(parent) == 1 and parent[0] in top
        parents_used.add(parent[0])
        np.testing.assert_array_equal(w1[i], source.rebuild(g))
    assert len(parents_used) >= 2


def test_random_search_breeds_fresh_networks(source):
    """With T = 0 every child but the elite is a fresh one-seed network."""
    ga = GA(GAConfig(population=6, truncation=0, elite_candidates=2, validation_episodes=1), 3)
    generation(ga, source, [1, 2, 3, 4, 5, 6], [1, 2])
    assert [len(g) for g in ga.genomes] == [1] * 6
    assert ga.genomes[0][0] == ga.elite[0]


def test_state_round_trip_rebuilds_the_same_population(source):
    """A GA restored from state() asks for the same weights and episodes as the original."""
    ga = GA(CFG, seed=4)
    for _ in range(3):
        generation(ga, source, np.arange(8.0)[::-1], [1, 1, 1, 2, 2, 2])
    w, eps = ask(ga, source)
    back = GA(CFG, seed=4)
    back.load_state({k: np.asarray(v) for k, v in ga.state().items()})
    w2, eps2 = ask(back, source)
    np.testing.assert_array_equal(w, w2)
    np.testing.assert_array_equal(eps.seeds, eps2.seeds)
    assert back.generation == 3 and back.elite_score == ga.elite_score
    assert [list(g) for g in back.genomes] == [list(g) for g in ga.genomes]


@pytest.mark.parametrize("seed", [0, 1])
def test_same_seed_same_generations(source, seed):
    """Two GAs with one seed make identical genomes and episode seeds; another seed differs."""
    a, b, c = (GA(CFG, s) for s in (seed, seed, seed + 10))
    for ga in (a, b, c):
        generation(ga, source, np.arange(8.0), [3, 2, 1, 0, 0, 0])
    assert [list(g) for g in a.genomes] == [list(g) for g in b.genomes]
    assert [list(g) for g in a.genomes] != [list(g) for g in c.genomes]


def test_the_previous_elite_is_a_candidate_after_a_bad_training_episode(source):
    """After generation 0 the candidates are the previous elite (row 0) and the top k - 1 others,
    even when the elite's own training episode was the population's worst."""
    ga = GA(CFG, seed=1)
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])  # candidate 1 (row 1) wins
    elite = ga.elite
    w1, _ = ask(ga, source)
    ga.tell(results([-50, 5, 1, 9, 2, 3, 4, 0]))  # the elite's training episode is the worst
    w, veps = ask_validation(ga, source)
    np.testing.assert_array_equal(w, w1[[0, 3]])
    ga.tell_validation(results([8, 8, 8, 6, 6, 6]))
    np.testing.assert_array_equal(ga.elite, elite)
    assert ga.elite_kept and ga.elite_score == 8.0


def test_the_elite_is_replaced_only_by_a_higher_validation_mean(source):
    """A candidate that ties with the elite's validation mean does not replace it; a higher one does."""
    ga = GA(CFG, seed=1)
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])
    elite = ga.elite
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [7, 7, 7, 7, 7, 7])  # a tie: the elite stays
    np.testing.assert_array_equal(ga.elite, elite)
    assert ga.elite_kept
    challenger = ga.genomes[3]  # the top non-elite row of the next training ranking below
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [7, 7, 7, 9, 9, 9])
    np.testing.assert_array_equal(ga.elite, challenger)
    assert not ga.elite_kept and ga.elite_score == 9.0
    assert ga.best_score == 9.0 and ga.best_generation == 2


def test_the_previous_elite_is_scored_again_on_fresh_validation_episodes(source):
    """score/previous_elite_mean is the previous elite's mean on this generation's validation
    episodes (other seeds than the ones that picked it), whether or not it stays the elite; it is
    absent in generation 0, which has no previous elite."""
    ga = GA(CFG, seed=1)
    _, _, picked_on = generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 8, 9])
    assert "score/previous_elite_mean" not in ga.metrics() and ga.elite_score == 8.0
    elite = ga.elite
    w, _ = ask(ga, source)
    np.testing.assert_array_equal(ga.genomes[0], elite)  # row 0: the previous elite
    ga.tell(results([0, 5, 1, 9, 2, 3, 4, 0]))
    wv, veps = ask_validation(ga, source)
    np.testing.assert_array_equal(wv[0], w[0])  # candidate 0: row 0
    assert not set(veps.seeds.tolist()) & set(picked_on.seeds.tolist())
    ga.tell_validation(results([2, 3, 7, 9, 9, 9]))  # it drops to 4 and loses the elite
    assert not ga.elite_kept
    m = ga.metrics()
    assert m["score/previous_elite_mean"] == 4.0 and m["score/elite_mean"] == 9.0


def test_the_elite_is_always_a_parent(source):
    """An elite outside the top T by training score replaces the T-th parent: children descend
    from it, none from the T-th individual."""
    cfg = GAConfig(population=40, truncation=3, sigma=0.01, elite_candidates=2, validation_episodes=1)
    ga = GA(cfg, seed=5)
    generation(ga, source, np.arange(40.0), [0, 1])  # row 38 (second by training) becomes the elite
    elite = tuple(ga.elite)
    ask(ga, source)
    train = np.arange(40.0)
    train[0] = -1.0  # the elite's episode is the worst: top 3 by training are rows 39, 38, 37
    ranked = [tuple(ga.genomes[i]) for i in (39, 38, 37)]
    ga.tell(results(train))
    ask_validation(ga, source)
    ga.tell_validation(results([5.0, 1.0]))  # the elite stays the elite
    assert tuple(ga.elite) == elite
    parents = {tuple(g[:-1]) for g in ga.genomes[1:]}
    assert parents == {elite, ranked[0], ranked[1]}  # the third by training score gave way


def stand_in_generations(ga, source, generations):
    """Drive `ga` on a deterministic stand-in task; returns the elite's validation mean per
    generation. An individual's true score is 1000 mean(w) - 3 |w|^2, so from zero weights most
    mutations hurt and a few help (as near a good Atari elite); validation episodes measure it
    exactly, a training episode subtracts 100 on half the episode seeds (a bad no-op start)."""

    def true_score(w):
        return w.mean(axis=1) * 1000 - 3 * (w.astype(np.float64) ** 2).sum(axis=1)

    scores = []
    for _ in range(generations):
        weights, eps = ask(ga, source)
        ga.tell(results(true_score(weights)[eps.ind] - 100.0 * (eps.seeds % 2)))
        weights, veps = ask_validation(ga, source)
        ga.tell_validation(results(true_score(weights)[veps.ind]))
        scores.append(ga.elite_score)
    return scores


STAND_IN = GAConfig(population=16, truncation=4, sigma=0.01, elite_candidates=3, validation_episodes=2)


@pytest.fixture
def zero_start(table):
    """A noise source whose networks start at zero weights."""
    return NoiseSource(table, np.zeros(1000, np.float32), sigma=0.01)


def test_a_noisy_training_score_never_loses_the_elite(zero_start):
    """With exact validation and noisy training episodes, the elite's validation mean never falls
    (without re-validating the elite it fell 6 times in these 20 generations), and the best
    elite ever is the last one."""
    ga = GA(STAND_IN, seed=0)
    scores = stand_in_generations(ga, zero_start, 20)
    assert all(b >= a for a, b in zip(scores, scores[1:])), scores
    assert scores[-1] > scores[0]  # it does improve
    assert ga.best_score == scores[-1] and list(ga.best) == list(ga.elite)


def test_resume_keeps_the_elite_rules_and_the_best(zero_start):
    """A GA restored mid-run from state() continues with the same elites, parents and best elite."""
    ga = GA(STAND_IN, seed=3)
    stand_in_generations(ga, zero_start, 6)
    back = GA(STAND_IN, seed=3)
    back.load_state({k: np.asarray(v) for k, v in ga.state().items()})
    assert (back.best_score, back.best_generation, list(back.best)) == (
        ga.best_score, ga.best_generation, list(ga.best))  # fmt: skip
    assert stand_in_generations(back, zero_start, 6) == stand_in_generations(ga, zero_start, 6)
    assert [list(p) for p in back.parents] == [list(p) for p in ga.parents]
    assert (back.best_score, back.best_generation) == (ga.best_score, ga.best_generation)


def test_a_later_network_that_ties_the_best_becomes_the_best(source):
    """Of equal validation means the later network is the best; the same network re-validated at
    the same mean stays the best of its first generation."""
    ga = GA(CFG, seed=1)
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])  # generation 0: best 7
    first = list(ga.best)
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [7, 7, 7, 1, 1, 1])  # the elite again, at 7
    assert list(ga.best) == first and ga.best_generation == 0
    generation(ga, source, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])  # another network ties at 7
    assert list(ga.best) != first and ga.best_generation == 2 and ga.best_score == 7.0
