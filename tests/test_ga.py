"""The deep GA and random search: selection, mutation, elitism, state."""

import numpy as np
import pytest

from nevo.algos import fitness_order
from nevo.algos.ga import GA
from nevo.config import GAConfig
from nevo.pipeline import Results


def results(returns):
    r = np.asarray(returns, np.float64)
    return Results(r, np.ones(r.size, np.int64), np.full(r.size, 4, np.int64))


def generation(ga, fitness, validation):
    """One ask/tell/validate round with given scores; returns the weights evaluated."""
    weights, eps = ga.ask()
    weights = weights.copy()
    ga.tell(results(fitness))
    _, veps = ga.ask_validation()
    ga.tell_validation(results(validation))
    return weights, eps, veps


CFG = GAConfig(population=8, truncation=3, sigma=0.01, elite_candidates=2, validation_episodes=3)


def test_fitness_order_puts_nan_last_and_keeps_ties_stable():
    """Higher is better, NaN ranks below everything, equal scores keep their order."""
    assert list(fitness_order([1.0, np.nan, 3.0, 1.0, -np.inf])) == [2, 0, 3, 4, 1]


def test_first_generation_is_fresh_networks(source):
    """Generation 0 holds N one-seed genomes with distinct seeds and one episode each."""
    ga = GA(CFG, seed=1, noise=source)
    weights, eps = ga.ask()
    assert weights.shape == (8, 1000)
    assert all(len(g) == 1 for g in ga.genomes)
    assert len({int(g[0]) for g in ga.genomes}) == 8
    np.testing.assert_array_equal(eps.ind, np.arange(8))
    np.testing.assert_array_equal(weights[3], source.rebuild(ga.genomes[3]))


def test_validation_reevaluates_the_top_candidates_on_shared_seeds(source):
    """The top elite_candidates by episode score each get the same validation_episodes seeds."""
    ga = GA(CFG, seed=1, noise=source)
    ga.ask()
    ga.tell(results([0, 5, 1, 9, 2, 3, 4, 0]))
    w, veps = ga.ask_validation()
    np.testing.assert_array_equal(w, ga.weights[[3, 1]])
    np.testing.assert_array_equal(veps.ind, [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(veps.seeds[:3], veps.seeds[3:])


def test_elite_survives_unchanged(source):
    """The best validated candidate is row 0 of the next generation, genome and weights identical."""
    ga = GA(CFG, seed=1, noise=source)
    w0, _, _ = generation(ga, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])  # candidate 1 wins
    elite_genome = ga.genomes[0]
    w1, _ = ga.ask()
    np.testing.assert_array_equal(w1[0], w0[1])
    np.testing.assert_array_equal(ga.elite, elite_genome)
    assert ga.elite_score == 7.0


def test_children_are_top_t_parents_plus_one_seed(source):
    """Every non-elite child is one of the top T genomes plus one new seed, with matching weights."""
    ga = GA(CFG, seed=2, noise=source)
    w0, _, _ = generation(ga, [0, 5, 1, 9, 2, 3, 4, 0], [1, 1, 1, 7, 7, 7])
    top = {3: w0[3], 1: w0[1], 6: w0[6]}
    old = {i: tuple(g) for i, g in enumerate(GA(CFG, seed=2, noise=source).genomes)}
    w1, _ = ga.ask()
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
    ga = GA(GAConfig(population=6, truncation=0, elite_candidates=2, validation_episodes=1), 3, source)
    generation(ga, [1, 2, 3, 4, 5, 6], [1, 2])
    assert [len(g) for g in ga.genomes] == [1] * 6
    assert ga.genomes[0][0] == ga.elite[0]


def test_state_round_trip_rebuilds_the_same_population(source):
    """A GA restored from state() asks for the same weights and episodes as the original."""
    ga = GA(CFG, seed=4, noise=source)
    for _ in range(3):
        generation(ga, np.arange(8.0)[::-1], [1, 1, 1, 2, 2, 2])
    w, eps = ga.ask()
    back = GA(CFG, seed=4, noise=source)
    back.load_state({k: np.asarray(v) for k, v in ga.state().items()})
    w2, eps2 = back.ask()
    np.testing.assert_array_equal(w, w2)
    np.testing.assert_array_equal(eps.seeds, eps2.seeds)
    assert back.generation == 3 and back.elite_score == ga.elite_score
    assert [list(g) for g in back.genomes] == [list(g) for g in ga.genomes]


@pytest.mark.parametrize("seed", [0, 1])
def test_same_seed_same_generations(source, seed):
    """Two GAs with one seed make identical genomes and episode seeds; another seed differs."""
    a, b, c = (GA(CFG, s, source) for s in (seed, seed, seed + 10))
    for ga in (a, b, c):
        generation(ga, np.arange(8.0), [3, 2, 1, 0, 0, 0])
    assert [list(g) for g in a.genomes] == [list(g) for g in b.genomes]
    assert [list(g) for g in a.genomes] != [list(g) for g in c.genomes]
