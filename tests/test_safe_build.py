"""Safe mutations in a GA run: experiences recorded by the evaluators, children built by the
weight builder as the operators define them, and genomes that rebuild bit for bit."""

import os

import numba
import numpy as np
import pytest

from nevo import nets, runs
from nevo.algos.ga import GA
from nevo.config import GAConfig
from nevo.episodes import Episodes, Population, Results
from nevo.episodes.experiences import ExperienceSample, places
from nevo.evaluation.setup import evaluator_for
from nevo.genomes import safe_build
from nevo.genomes import safe_mutation as sm
from nevo.genomes.noise import NoiseSource, WeightBuilder, offsets_of
from nevo.genomes.operators import mutation

SAFE = ("sm-r", "sm-g-sum", "sm-g-abs", "sm-g-so")


def _mlp():
    spec = nets.make_spec((("dense", 6), ("dense", 5)), (3, 1, 1), 3, obs_dtype=np.float32)
    obs = np.random.default_rng(1).normal(size=(7, 3, 1, 1)).astype(np.float32)
    return spec, obs


# ---- experiences ----------------------------------------------------------------------------


def test_a_reservoir_place_is_uniform_over_the_observations_so_far():
    """Observation t's place is uniform in [0, t] across episode seeds (chi-square, 4 places)."""
    seeds = np.arange(40_000, dtype=np.int64)
    counts = np.bincount(places(seeds, np.full(seeds.size, 3, np.int64)), minlength=5)
    assert counts[4] == 0
    expected = seeds.size / 4
    assert ((counts[:4] - expected) ** 2 / expected).sum() < 16.3  # p = 0.001, 3 degrees of freedom


def test_the_sample_is_a_function_of_the_episode_alone():
    """Kept observations depend on the episode's seed and its observations, not on which other
    episodes were offered alongside, nor in what order; a short episode keeps all of its own."""
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 255, (3, 50, 2)).astype(np.uint8)  # 3 episodes of 50 observations
    lengths = [50, 50, 4]
    seeds = np.array([11, 12, 13], np.int64)
    together = ExperienceSample(seeds, 8, (2,), np.uint8)
    for t in range(50):
        eps = np.array([e for e in range(3) if t < lengths[e]], np.int64)
        together.offer(eps[::-1], obs[eps[::-1], t])
    alone = ExperienceSample(seeds[:1], 8, (2,), np.uint8)
    for t in range(50):
        alone.offer(np.array([0]), obs[0, t][None])
    np.testing.assert_array_equal(together.obs[0], alone.obs[0])
    np.testing.assert_array_equal(together.counts(), [8, 8, 4])
    np.testing.assert_array_equal(together.obs[2, :4], obs[2, :4])
    # every kept row is one of the episode's observations, each at most once
    for e in range(2):
        rows = {tuple(r) for r in obs[e]}
        assert all(tuple(r) in rows for r in together.obs[e])


def test_the_in_process_evaluator_keeps_each_episodes_observations_whatever_the_slots():
    """CartPole episodes record the same sample with 1 slot or 5, and a short episode's sample
    is its observations in order (the first one is its reset's)."""
    from nevo import tasks
    from nevo.config import EnvConfig, RunConfig
    from nevo.nets.kernels import make_policy

    task = tasks.task_for(EnvConfig(env="CartPole-v1", frame_cap=500))
    spec = nets.net_spec("mlp", task.obs_shape, task.n_actions, task.obs_dtype)
    source = NoiseSource(
        np.random.default_rng(0).normal(size=200_000).astype(np.float32), nets.init_scale(spec), 0.1
    )
    pop = Population([np.array([5], np.int64)], np.zeros(4, np.int64), np.arange(4, dtype=np.int64) + 1,
                     np.full(4, 0.1, np.float32), 0.1)  # fmt: skip
    episodes = Episodes(np.array([0, 1, 2, 3, 0, 1], np.int64), np.arange(6, dtype=np.int64) + 100, record=30)
    out = []
    for slots in (1, 5):
        builder = WeightBuilder(source.table, source.init_scale)
        ev, _ = evaluator_for(task, RunConfig(env_slots=slots), make_policy("cpu", spec), builder, "cpu", 4)
        out.append(ev.run(pop, episodes))
        ev.close()
    a, b = out
    np.testing.assert_array_equal(a.experiences, b.experiences)
    np.testing.assert_array_equal(a.experience_counts, np.minimum(a.lengths, 30))
    assert a.experiences.shape == (6, 30, *task.obs_shape)
    short = int(np.argmin(a.lengths))
    if a.lengths[short] <= 30:
        slots = task.make_slots(1)
        first = slots.reset(np.array([0]), episodes.seeds[short : short + 1])
        slots.close()
        np.testing.assert_array_equal(a.experiences[short, 0], first[0])


@pytest.mark.slow
def test_the_atari_pipeline_keeps_the_observations_its_net_acts_on(tiny_atari):
    """Each episode keeps min(steps after its no-ops, k) observations, and none is blank."""
    ev, pop, episodes, noops = tiny_atari
    res = ev.run(pop, Episodes(episodes.ind, episodes.seeds, record=5))
    np.testing.assert_array_equal(res.experience_counts, np.minimum(np.maximum(res.lengths - noops, 0), 5))
    assert res.experiences.shape == (len(episodes.ind), 5, 4, 84, 84)
    for e, c in enumerate(res.experience_counts):
        assert all(res.experiences[e, j].any() for j in range(c))


@pytest.fixture
def tiny_atari():
    from nevo.atari.game import noop_count
    from nevo.config import EnvConfig
    from nevo.episodes.weights import PooledWeights
    from nevo.nets.kernels import make_policy
    from tests.helpers import atari_evaluator

    env_cfg = EnvConfig(game="pong", frame_cap=160, noop_max=10)
    spec = nets.net_spec("small", nets.OBS_SHAPE, 6)
    source = NoiseSource(
        np.random.default_rng(0).normal(size=1_100_000).astype(np.float32), nets.init_scale(spec), 0.1
    )
    weights = PooledWeights(WeightBuilder(source.table, source.init_scale))
    ev = atari_evaluator(env_cfg, make_policy("cpu", spec), weights, 4, 2, 2, "lockstep")
    pop = Population([np.array([5], np.int64)], np.zeros(3, np.int64), np.arange(3, dtype=np.int64) + 1,
                     np.full(3, 0.1, np.float32), 0.1)  # fmt: skip
    episodes = Episodes(np.array([0, 1, 2, 0, 1], np.int64), np.arange(5, dtype=np.int64) + 7)
    noops = np.array([noop_count(s, env_cfg.noop_max) for s in episodes.seeds])
    yield ev, pop, episodes, noops
    ev.close()


# ---- children -------------------------------------------------------------------------------


def test_safe_rows_equals_its_numpy_twin_bit_for_bit():
    """The kernel's float64 steps, divisions, clipping and float32 rounding are its twin's."""
    rng = np.random.default_rng(4)
    p = 301
    table = rng.normal(size=5000).astype(np.float32)
    base = rng.normal(size=(3, p)).astype(np.float32)
    sens = np.abs(rng.normal(size=(2, p))).astype(np.float32) * 0.02 + 0.01
    base_idx = np.array([0, 2, 1, 2], np.int64)
    offsets = np.array([0, 17, 900, 4000], np.int64)
    scale = np.array([0.05, 3.0, 0.05, 0.01], np.float32)  # 3.0 / 0.01: clipped at 10
    alpha = np.array([1.0, 1.0, 0.375, 4.0])
    sens_idx = np.array([0, 1, -1, -1], np.int64)
    out = np.empty((4, p), np.float32)
    safe_build.safe_rows(out, base, base_idx, offsets, scale, alpha, sens, sens_idx, table, sm.WEIGHT_CLIP)
    twin = safe_build.rows_twin(base, base_idx, offsets, scale, alpha, sens, sens_idx, table, sm.WEIGHT_CLIP)
    np.testing.assert_array_equal(out, twin)
    assert np.abs(out[1] - base[2]).max() == pytest.approx(10.0, abs=1e-5)


@pytest.mark.parametrize("kind", SAFE)
def test_a_built_child_is_the_operators_child(kind):
    """A child as the builder makes it is the float32 of nevo.genomes.safe_mutation.mutate's (the NumPy
    reference) for the same parent, experiences and delta = sigma * eps(seed)."""
    spec, obs = _mlp()
    rng = np.random.default_rng(5)
    table = rng.normal(size=20_000).astype(np.float32)
    theta = (rng.normal(size=spec.n_params) * 0.7).astype(np.float32)
    sigma = 0.05
    parent = safe_build.parent(kind, spec, theta, obs)
    offs = offsets_of([123], table.size, spec.n_params)
    out = np.empty((1, spec.n_params), np.float32)
    safe_build.children(kind, [parent], out, [0], offs, np.array([sigma], np.float32), table, sigma)
    delta = np.float64(np.float32(sigma)) * table[offs[0] : offs[0] + spec.n_params].astype(np.float64)
    ref = sm.mutate(kind, spec, theta.astype(np.float64), obs, delta, target=sigma)
    np.testing.assert_allclose(out[0], ref, rtol=2e-6, atol=2e-7)
    assert not np.array_equal(out[0], theta)


def test_a_parent_without_experiences_has_gaussian_children():
    """No experiences (an episode over before its net acted): the step is sigma * eps, unscaled."""
    spec, _ = _mlp()
    table = np.random.default_rng(6).normal(size=20_000).astype(np.float32)
    theta = np.zeros(spec.n_params, np.float32)
    out = np.empty((1, spec.n_params), np.float32)
    offs = offsets_of([9], table.size, spec.n_params)
    empty = np.zeros((0, 3, 1, 1), np.float32)
    safe_build.children("sm-g-sum", [safe_build.parent("sm-g-sum", spec, theta, empty)], out, [0], offs,
                        np.array([0.1], np.float32), table, 0.1)  # fmt: skip
    step = np.float64(np.float32(0.1)) * table[offs[0] : offs[0] + spec.n_params].astype(np.float64)
    np.testing.assert_array_equal(out[0], step.astype(np.float32))


# ---- genomes --------------------------------------------------------------------------------


def _evolve(kind, spec, source, folder, generations=4):
    """A small GA with `kind` mutations whose episodes' scores are random and whose experiences
    are made-up observations; each generation's parents' experiences saved as run_ga does.
    Returns the GA and the weights of every row of the last population, built incrementally."""
    cfg = GAConfig(population=6, truncation=2, sigma=0.05, elite_candidates=2, validation_episodes=1,
                   mutation=kind, experiences=5)  # fmt: skip
    ga = GA(cfg, seed=3)
    builder = WeightBuilder(source.table, source.init_scale,
                            safe=safe_build.SafeMutation(spec, source.table))  # fmt: skip
    rng = np.random.default_rng(8)
    for _ in range(generations):
        pop, eps = ga.ask()
        assert eps.record == 5 and pop.mutation.name == kind
        builder.use(pop)
        weights = builder.build(np.arange(len(pop)), np.empty((len(pop), spec.n_params), np.float32))
        n = len(pop)
        exps = rng.normal(size=(n, 5, 3, 1, 1)).astype(np.float32)
        counts = rng.integers(1, 6, n)
        ga.tell(Results(rng.normal(size=n), np.ones(n, np.int64), np.ones(n, np.int64),
                        experiences=exps, experience_counts=counts))  # fmt: skip
        ga.ask_validation()
        ga.tell_validation(Results(rng.normal(size=2), np.ones(2, np.int64), np.ones(2, np.int64)))
        runs.save_experiences(folder, ga.parents, ga.parent_experiences)
    pop, _ = ga.ask()
    builder.use(pop)
    weights = builder.build(np.arange(len(pop)), np.empty((len(pop), spec.n_params), np.float32))
    return ga, weights, builder


@pytest.mark.parametrize("kind", SAFE)
def test_a_safe_genome_rebuilds_bit_for_bit_from_the_run_folder(kind, tmp_path):
    """Every row built incrementally over generations equals a rebuild of its seed list from the
    run folder's experiences alone, on one thread as on all; and differs from the Gaussian rebuild."""
    spec, _ = _mlp()
    source = NoiseSource(np.random.default_rng(9).normal(size=50_000).astype(np.float32),
                         nets.init_scale(spec), 0.05)  # fmt: skip
    ga, weights, builder = _evolve(kind, spec, source, str(tmp_path))
    assert builder.mutation_s > 0

    def read(genome):
        return runs.load_experiences(str(tmp_path), genome)

    threads = numba.get_num_threads()
    try:
        for t in (1, threads):
            numba.set_num_threads(t)
            for i, genome in enumerate(ga.genomes):
                w = safe_build.rebuild(
                    mutation(kind), spec, genome, source.table, source.init_scale, 0.05, read
                )
                np.testing.assert_array_equal(w, weights[i])
    finally:
        numba.set_num_threads(threads)
    longest = max(ga.genomes, key=len)
    assert len(longest) >= 3
    safe = safe_build.rebuild(mutation(kind), spec, longest, source.table, source.init_scale, 0.05, read)
    assert not np.array_equal(safe, source.rebuild(longest))


def test_a_rebuild_without_its_experiences_is_one_line(tmp_path):
    spec, _ = _mlp()
    source = NoiseSource(np.random.default_rng(9).normal(size=50_000).astype(np.float32),
                         nets.init_scale(spec), 0.05)  # fmt: skip
    ga, _, _ = _evolve("sm-g-sum", spec, source, str(tmp_path), generations=2)
    genome = max(ga.genomes, key=len)
    os.remove(os.path.join(tmp_path, runs.EXPERIENCES, runs.genome_key(genome[:1]) + ".npy"))
    with pytest.raises(runs.DamagedFile, match="missing; the run folder lacks the experiences"):
        safe_build.rebuild(mutation("sm-g-sum"), spec, genome, source.table, source.init_scale, 0.05,
                           lambda g: runs.load_experiences(str(tmp_path), g))  # fmt: skip


def test_a_parent_keeps_the_experiences_of_its_first_episode():
    """The elite, re-evaluated every generation, keeps the experiences it had as a parent."""
    cfg = GAConfig(population=6, truncation=2, sigma=0.05, elite_candidates=2, validation_episodes=1,
                   mutation="sm-g-sum", experiences=5)  # fmt: skip
    ga = GA(cfg, seed=3)
    rng = np.random.default_rng(1)
    first = {}
    for _ in range(4):
        ga.ask()
        n = cfg.population
        ga.tell(Results(rng.normal(size=n), np.ones(n, np.int64), np.ones(n, np.int64),
                        experiences=rng.normal(size=(n, 5, 3, 1, 1)).astype(np.float32),
                        experience_counts=np.full(n, 5)))  # fmt: skip
        ga.ask_validation()
        ga.tell_validation(Results(np.array([1.0, 0.0]), np.ones(2, np.int64), np.ones(2, np.int64)))
        for g, e in zip(ga.parents, ga.parent_experiences):
            first.setdefault(g.tobytes(), e)
            np.testing.assert_array_equal(first[g.tobytes()], e)
    assert ga.elite_kept  # the elite won validation (score 1.0 first) and kept its experiences
