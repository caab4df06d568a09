"""Weights built from genomes where they are used: exact rows, memory by slots, parts."""

import numpy as np

from nevo.algos.ga import GA
from nevo.config import GAConfig
from nevo.episodes import Episodes, Population, Results
from nevo.episodes.weights import AllWeights, PooledWeights, in_parts
from nevo.genomes import noise
from nevo.genomes.noise import WeightBuilder


def ga_generations(source, n=3):
    """The populations (as the GA asks for them) of n generations of a small GA."""
    ga = GA(GAConfig(population=12, truncation=3, sigma=0.01, elite_candidates=2, validation_episodes=1), 5)
    pops = []
    for g in range(n):
        pop, eps = ga.ask()
        pops.append((pop, [ga.genomes[i].copy() for i in range(len(pop))]))
        ga.tell(Results(np.arange(12.0)[::-1] * (g + 1) % 7, np.ones(12), np.ones(12)))
        ga.ask_validation()
        ga.tell_validation(Results(np.array([1.0, 2.0]), np.ones(2), np.ones(2)))
    return pops


def test_built_rows_equal_a_rebuild_and_parents_cost_one_pass(source, monkeypatch):
    """Every row built from a Population equals NoiseSource.rebuild of its seed list; from the
    third generation on no base is rebuilt seed by seed (each is a cached parent plus one seed)."""
    pops = ga_generations(source, 4)
    builder = WeightBuilder(source.table, source.init_scale)
    rebuilds = []
    original = noise.NoiseSource.rebuild

    def counting(self, genome, out=None):
        rebuilds.append(len(genome))
        return original(self, genome, out)

    monkeypatch.setattr(noise.NoiseSource, "rebuild", counting)
    for g, (pop, genomes) in enumerate(pops):
        before = len(rebuilds)
        builder.use(pop)
        rows = builder.build(np.arange(len(pop)), np.empty((len(pop), source.n_params), np.float32))
        if g >= 2:
            assert len(rebuilds) == before, "a base was rebuilt seed by seed"
        monkeypatch.setattr(noise.NoiseSource, "rebuild", original)
        for i, genome in enumerate(genomes):
            np.testing.assert_array_equal(rows[i], source.rebuild(genome))
        monkeypatch.setattr(noise.NoiseSource, "rebuild", counting)


def test_pooled_rows_hold_the_right_individual_and_scale_with_the_slots(source):
    """Driven like an evaluator (slots taking episodes, episodes ending in any order), every row
    handed out holds its individual's weights, and the pool has at most slots + 1 rows."""
    pop, genomes = ga_generations(source, 2)[1]
    builder = WeightBuilder(source.table, source.init_scale)
    rng = np.random.default_rng(0)
    ind = rng.integers(0, len(pop), 40)  # repeats, not contiguous
    slots = 4
    weights = PooledWeights(builder)
    pool = weights.start(pop, ind, slots)
    assert pool.shape == (slots + 1, source.n_params)
    live, next_ep = {}, 0  # slot -> (individual, row)
    while next_ep < len(ind) or live:
        for s in range(slots):
            if s not in live and next_ep < len(ind):
                (row,) = weights.take(ind[next_ep : next_ep + 1])
                live[s] = (ind[next_ep], row)
                next_ep += 1
        for i, row in live.values():
            np.testing.assert_array_equal(pool[row], source.rebuild(genomes[i]))
        s = int(rng.choice(list(live)))  # an episode ends
        weights.done(live.pop(s)[0])
    assert (weights.row_of == -1).all() and (weights.left == 0).all()


def test_all_weights_builds_only_the_rows_in_use(source):
    pop, genomes = ga_generations(source, 2)[1]
    rows = AllWeights(WeightBuilder(source.table, source.init_scale), max_rows=100).start(
        pop, np.array([2, 5]), 1
    )
    np.testing.assert_array_equal(rows[2], source.rebuild(genomes[2]))
    np.testing.assert_array_equal(rows[5], source.rebuild(genomes[5]))


def test_evaluating_in_parts_gives_the_results_of_one_evaluation():
    """in_parts splits a population into parts of max_rows individuals; the outcomes come back
    in the episodes' order, as one evaluation gives them."""
    n = 10
    pop = Population.of_weights(np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32))
    episodes = Episodes(np.array([9, 0, 3, 3, 7, 1, 9, 4]), np.arange(8, dtype=np.int64) * 11)
    sizes = []

    def run(p, eps):  # an outcome: a function of (individual's weights, episode seed)
        sizes.append(len(p))
        r = p.bases[p.base[eps.ind], 0] * 100 + eps.seeds
        return Results(r.astype(np.float64), eps.seeds.copy(), np.ones(len(r), np.int64))

    whole = in_parts(run, pop, episodes, None)
    parts = in_parts(run, pop, episodes, 3)
    np.testing.assert_array_equal(parts.returns, whole.returns)
    np.testing.assert_array_equal(parts.lengths, whole.lengths)
    assert sizes[0] == n and max(sizes[1:]) <= 3
