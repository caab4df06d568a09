"""A labelled data set as a task: an episode is a batch of examples scored by minus the mean
cross-entropy, a validation the whole test set; mini-batch ES shares one batch a generation,
NMB-ES gives each perturbation its own; ES learns a small data set through the one loop."""

import json
import os

import numpy as np
import pytest

import nevo
from nevo import nets, runs
from nevo.algos import declaration, make_algo
from nevo.config import Config, EnvConfig, ESConfig
from nevo.episodes import Episodes, Population
from nevo.episodes.weights import PooledWeights
from nevo.evaluation.supervised import SupervisedEvaluator, log_softmax
from nevo.genomes.noise import NoiseSource, WeightBuilder
from nevo.loops import elite as elite_files
from nevo.nets.kernels import make_policy, reference
from nevo.tasks import mnist_data
from nevo.tasks.supervised import DataSet, Supervised, batch_of
from tests.helpers import small_data, stripes


def test_a_batch_is_drawn_from_its_seed_alone():
    a, b = batch_of(7, 600, 50), batch_of(7, 600, 50)
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) == 50 and not np.array_equal(a, batch_of(8, 600, 50))


def _two_individuals():
    """The small data set, a dense:5 net, two individuals' weights and an evaluator of
    20-example episodes on them."""
    data = small_data()
    spec = nets.net_spec("dense:5", data.train_x.shape[1:], 3, np.uint8)
    weights = np.random.default_rng(3).normal(0, 0.1, (2, spec.n_params)).astype(np.float32)
    rows = PooledWeights(WeightBuilder(None, np.zeros(spec.n_params, np.float32)))
    return data, spec, weights, SupervisedEvaluator(data, make_policy("cpu", spec), rows, 20)


def test_an_episode_scores_minus_the_mean_cross_entropy_of_its_batch():
    """The evaluator's return and accuracy of each episode equal a hand computation with the
    reference forward; a validation episode is the whole test set, whatever its seed."""
    data, spec, weights, ev = _two_individuals()
    got = ev.run(Population.of_weights(weights), Episodes(np.array([0, 1, 1]), np.array([4, 4, 9])))
    for e, (i, s) in enumerate([(0, 4), (1, 4), (1, 9)]):
        pick = batch_of(s, 600, 20)
        _, logits = reference.forward(spec, weights, np.full(20, i), data.train_x[pick])
        want = log_softmax(logits)[np.arange(20), data.train_y[pick]].mean()
        assert got.returns[e] == pytest.approx(want, rel=1e-5)
        assert got.accuracy[e] == np.mean(np.argmax(logits, axis=1) == data.train_y[pick])
    assert got.lengths.tolist() == got.frames.tolist() == [20, 20, 20]
    test = ev.run(Population.of_weights(weights), Episodes(np.array([1]), np.array([123]), validation=True))
    _, logits = reference.forward(spec, weights, np.ones(150, np.int64), data.test_x)
    assert test.lengths[0] == 150 and test.accuracy[0] == np.mean(np.argmax(logits, axis=1) == data.test_y)


def test_an_episode_keeps_a_sample_of_the_examples_it_scored_for_safe_mutations(tmp_path):
    """With Episodes.record, each episode keeps up to k of its batch's examples (the observations
    its net acted on: safe mutations' experiences), the same sample whatever the episodes beside
    it; a run of the GA with a safe mutation on a data set (which raised a TypeError before)
    goes through."""
    import nevo

    data, spec, weights, ev = _two_individuals()
    got = ev.run(Population.of_weights(weights), Episodes(np.array([0, 1, 1]), np.array([4, 4, 9]), record=6))
    assert got.experience_counts.tolist() == [6, 6, 6]
    for e, s in enumerate([4, 4, 9]):
        batch = {x.tobytes() for x in data.train_x[batch_of(s, 600, 20)]}
        assert all(x.tobytes() in batch for x in got.experiences[e])
    alone = ev.run(Population.of_weights(weights), Episodes(np.array([1]), np.array([9]), record=6))
    np.testing.assert_array_equal(alone.experiences[0], got.experiences[2])
    run = nevo.train("ga", env=data, net=[8], mutation="sm-g-sum", population=6, truncation=3, frames=2000,
                     progress=False, noise_table_size=200_000, out_dir=str(tmp_path))  # fmt: skip
    assert len(run.metrics) >= 2 and run.metrics[-1]["perf/mutation_s"] > 0


@pytest.mark.parametrize("common", [1, 0])
def test_mini_batch_es_shares_one_batch_and_nmb_es_gives_each_perturbation_its_own(common, table):
    """common_episodes 1: every individual of a generation one episode seed (a shared mini-batch);
    0: one per mirrored pair (NMB-ES), each drawn again the same from the run's seed."""
    cfg = Config(algo="es", settings=ESConfig(population=8, common_episodes=common))
    source = NoiseSource(table, np.ones(50, np.float32), 0.01)
    _, episodes = make_algo("es", cfg, source).ask()
    _, again = make_algo("es", cfg, source).ask()
    np.testing.assert_array_equal(episodes.seeds, again.seeds)
    pairs = episodes.seeds.reshape(4, 2)
    assert (pairs[:, 0] == pairs[:, 1]).all()  # mirrored pairs share their batch either way
    assert len(set(episodes.seeds.tolist())) == (1 if common else 4)


@pytest.mark.slow
def test_es_learns_a_small_data_set_through_the_one_loop(tmp_path):
    """nevo.train on a DataSet: mini-batch ES by default, a run folder whose rows hold the train
    and test accuracies, and a test accuracy well above chance (1/3) after a few thousand steps."""
    result = nevo.train("es", env=small_data(), net=[16], frames=150_000, population=40, sigma=0.02,
                        lr=0.03, examples=30, noise_table_size=1_000_000, out_dir=str(tmp_path),
                        progress=False)  # fmt: skip
    rows = result.metrics
    assert result.settings.settings.common_episodes == 1 and result.settings.env.examples == 30
    assert rows[-1]["score/test_accuracy"] >= 0.9 > rows[0]["score/test_accuracy"]
    assert all(0 <= r["score/train_accuracy"] <= 1 for r in rows)
    data = small_data()
    assert np.mean(result.policy.act(data.test_x) == data.test_y) == rows[-1]["score/test_accuracy"]
    assert os.path.isfile(elite_files.array_path(result.run_dir, "theta"))


def test_validate_every_skips_validations_without_changing_the_training(tmp_path, capsys):
    """ES with validate_every 3: theta is validated on generations 2, 5 and the run's last (8)
    only, with the test accuracies an every-generation run measured there; the other rows hold
    no elite score and no test accuracy; training is the same generation for generation; the
    elite files hold the last generation's theta; the progress line shows the test accuracy."""
    common = dict(env=small_data(), net=[16], population=40, sigma=0.02, lr=0.03, examples=30,
                  noise_table_size=1_000_000, progress=False)  # fmt: skip
    every = nevo.train("es", frames=11_000, validate_every=3, out_dir=str(tmp_path / "every3"),
                       **common | {"progress": True})  # fmt: skip
    done = capsys.readouterr().out.splitlines()[-1]
    each = nevo.train("es", frames=13_500, out_dir=str(tmp_path / "every1"), **common)
    rows, ref = every.metrics, each.metrics
    assert [r["generation"] for r in rows] == list(range(9)) and len(ref) == 10
    tested = [r["generation"] for r in rows if "score/test_accuracy" in r]
    assert tested == [2, 5, 8] == [r["generation"] for r in rows if "score/elite_mean" in r]
    for r, q in zip(rows, ref):
        assert r["score/pop_mean"] == q["score/pop_mean"] and r["es/grad_norm"] == q["es/grad_norm"]
        assert r["frames_validation"] == (150 if r["generation"] in tested else 0)
        if r["generation"] in tested:
            assert r["score/test_accuracy"] == q["score/test_accuracy"]
            assert r["score/elite_mean"] == q["score/elite_mean"]
    elite = json.load(open(os.path.join(every.run_dir, "elite.json")))
    assert elite["generation"] == 8 and elite["validation_mean"] == rows[-1]["score/elite_mean"]
    theta = np.load(elite_files.array_path(every.run_dir, "theta"))
    assert np.array_equal(theta, runs.load_checkpoint(every.run_dir)["theta"])
    assert every.elite_score == rows[-1]["score/elite_mean"]
    assert done.startswith("done:") and f"test accuracy {100 * rows[-1]['score/test_accuracy']:.2f}%" in done


def test_a_data_set_of_ones_own_gets_defaults_by_its_size():
    """ES and SGD on a DataSet get the settings for a data set of one's own, with budgets that
    shrink as its images grow; ES tests theta every generation on a small test set and every
    few on a large one; MNIST (no data) and the GA keep their defaults."""
    env = EnvConfig(env="data")
    small, large_test = small_data(), DataSet.of(*stripes(600, 0), *stripes(15_000, 1))
    wide = DataSet.of(
        np.zeros((4, 16, 16), np.uint8), np.arange(4), np.zeros((4, 16, 16), np.uint8), np.arange(4)
    )

    def brings(algo, data):  # what an algorithm's declaration brings on a data set
        return declaration(algo).brings(algo, "own data set" if data is not None else "data set", env, data)

    es = brings("es", small)
    assert es["lr"] == 0.01 and es["validate_every"] == 1 and es["population"] == 100
    assert brings("es", large_test)["validate_every"] == 15  # 15,000 test / 10,000 a generation
    for algo in ("es", "sgd"):
        assert brings(algo, wide)["frame_budget"] < brings(algo, small)["frame_budget"]
    mnist = brings("es", None)
    assert mnist["lr"] == 0.001 and mnist["population"] == 200 and "validate_every" not in mnist
    assert brings("ga", small) == brings("ga", None)  # the GA takes MNIST's on any data set


@pytest.mark.slow
def test_es_with_a_data_sets_defaults_learns_toy_glyphs(tmp_path):
    """nevo.train("es", env=data, net=[64]) with the defaults for a data set of one's own (the
    budget cut to 1.5M examples) learns experiments.toy_images' 10 glyphs well past where
    MNIST's defaults stand at that budget (56% against 25% when written; chance 10%)."""
    from experiments.toy_images import data_set

    result = nevo.train("es", env=data_set("glyphs"), net=[64], frames=1_500_000, out_dir=str(tmp_path),
                        progress=False)  # fmt: skip
    assert result.settings.settings.lr == declaration("es").on_tasks["es"]["own data set"]["lr"]
    assert result.metrics[-1]["score/test_accuracy"] >= 0.45


def test_the_supervised_task_has_the_data_sets_shapes():
    task = Supervised(EnvConfig(env="mine"), small_data())
    assert task.obs_shape == (1, 8, 8) and task.n_actions == 3 and task.behaviour is None
    batch = task.reference_batch(5, 0)
    assert batch.shape == (5, 1, 8, 8) and batch.dtype == np.uint8


MNIST_CACHED = os.path.isfile(os.path.join(mnist_data.cache_dir(), "mnist.npz"))


@pytest.mark.slow
@pytest.mark.skipif(not MNIST_CACHED, reason="no mnist.npz in nevo's cache (python -m experiments.get_mnist)")
def test_es_and_sgd_run_on_mnist_and_replay_gives_the_runs_test_accuracy(tmp_path, capsys):
    """run_es --env mnist (mini-batch ES on the paper's 28,938-parameter net) and run_sgd write run
    folders whose last test accuracy replay reproduces on the whole test set."""
    from experiments import run_es, run_sgd
    from nevo.tools import replay
    from tests.helpers import run_folder

    tiny = ["--env", "mnist", "--population", "4", "--examples", "10", "--frame-budget", "100"]
    es = run_folder(run_es.main, tiny, tmp_path / "es")
    sgd = run_folder(run_sgd.main, ["--env", "mnist", "--examples", "20", "--validate-every", "10",
                                    "--frame-budget", "400"], tmp_path / "sgd")  # fmt: skip
    for folder in (es, sgd):
        rows = runs.read_metrics(folder)
        assert rows and 0 <= rows[-1]["score/test_accuracy"] <= 1
        assert replay.main([folder]) == 0
        test = json.load(open(os.path.join(folder, "test.json")))
        assert test["examples"] == 10_000 and test["accuracy"] == rows[-1]["score/test_accuracy"]
    assert runs.read_metrics(sgd)[-1]["score/test_accuracy"] > 0.3  # 20 steps of Adam: well above chance


def test_sgd_on_a_task_that_is_no_data_set_is_one_line(capsys):
    from experiments import run_sgd

    assert run_sgd.main(["--env", "CartPole-v1", "--net", "mlp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --env: SGD trains on a labelled data set") and err.count("\n") == 1


def test_limited_perturbation_es_perturbs_one_bucket_per_offspring_and_steps_along_it(table):
    """--bucket 7 on 40 parameters: 6 buckets of at most 7; each row equals theta outside its
    bucket and theta + scale * eps inside it (a mirrored pair the same bucket); the update is the
    sum of each perturbation's bucket alone."""
    from nevo.algos.es import bucket_edges, offsets_of
    from nevo.episodes import Results

    edges = bucket_edges(40, 7)
    assert len(edges) == 7 and np.diff(edges).max() <= 7 and edges[0] == 0 and edges[-1] == 40
    cfg = Config(algo="es", settings=ESConfig(population=8, bucket=7, fitness_shaping="none", optimizer="sgd",
                                        momentum=0.0, lr=1.0, l2=0.0))  # fmt: skip
    source = NoiseSource(table, np.ones(40, np.float32), 0.1)
    es = make_algo("es", cfg, source)
    theta = es.theta.copy()
    population, _ = es.ask()
    assert (population.bucket[0::2] == population.bucket[1::2]).all()
    builder = WeightBuilder(table, source.init_scale)
    builder.use(population)
    rows = builder.build(np.arange(8), np.empty((8, 40), np.float32))
    offsets = offsets_of(population.seed, table.size, 40)
    for i, (lo, hi) in enumerate(population.bucket):
        outside = np.r_[0:lo, hi:40]
        np.testing.assert_array_equal(rows[i, outside], theta[outside])
        want = theta[lo:hi] + population.scale[i] * table[offsets[i] + lo : offsets[i] + hi]
        np.testing.assert_array_equal(rows[i, lo:hi], want)
    returns = np.arange(8, dtype=np.float64)
    es.tell(Results(returns, np.ones(8, np.int64), np.ones(8, np.int64)))
    g = np.zeros(40)
    for k, (lo, hi) in enumerate(population.bucket[0::2]):
        g[lo:hi] += (returns[2 * k] - returns[2 * k + 1]) * table[offsets[2 * k] + lo : offsets[2 * k] + hi]
    np.testing.assert_allclose(es.theta - theta, g / 8, rtol=1e-5, atol=1e-7)
