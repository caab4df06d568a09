"""nevo.train and nevo.load_policy: any algorithm by its name on a user's own environment, the
policy plays as the run's evaluator played, a caller's fitness and behaviour are the ones used, and
bad input is one line."""

import os

import gymnasium as gym
import numpy as np
import pytest

import nevo
from nevo import config, runs, tasks
from nevo.algos import NAMES
from nevo.config import ConfigError, EnvConfig, RunConfig
from nevo.episodes import Episodes, Population
from nevo.evaluation.setup import evaluator_for
from nevo.genomes.noise import WeightBuilder
from nevo.loops import elite as elite_files
from nevo.nets import obs_norm
from nevo.nets.kernels import make_policy


class Walk(gym.Env):
    """From x = -1, walk to x = 1 within 30 steps; the return is the sum of x over the steps."""

    observation_space, action_space = gym.spaces.Box(-3, 3, (2,), np.float32), gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = -1.0 + self.np_random.uniform(-0.2, 0.2), 0
        return np.array([self.x, 0], np.float32), {}

    def step(self, action):
        self.x, self.t = self.x + 0.1 * (int(action) - 1), self.t + 1
        return np.array([self.x, self.t / 30], np.float32), self.x, self.x >= 1 or self.t >= 30, False, {}


# The same settings for every algorithm: each names a field that every algorithm has.
SMALL = dict(net=[8], frames=2_500, population=12, noise_table_size=200_000, progress=False)


def small(name: str) -> dict:
    """SMALL, and 2 validation episodes where the algorithm validates (GA-NS keeps its most novel
    individual without validation episodes)."""
    return SMALL if name == "ga-ns" else {**SMALL, "validation_episodes": 2}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_same_call_trains_every_algorithm_by_its_name(name, tmp_path):
    """train(name, env=Walk, ...) runs each of the seven (novelty search with the default
    behaviour, the final observation); the result's policy acts on one observation and on a batch,
    and load_policy on the folder gives the same actions."""
    result = nevo.train(name, env=Walk, out_dir=str(tmp_path), **small(name))
    assert result.settings.algo == name and len(result.metrics) >= 2
    assert result.metrics[-1]["frames"] >= 2_500 and np.isfinite(result.elite_score)
    assert result.settings.net.net == "dense:8"
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 2)).astype(np.float32)
    batch = result.policy.act(obs)
    assert batch.shape == (5,) and set(batch.tolist()) <= {0, 1, 2}
    assert [result.policy.act(o) for o in obs] == batch.tolist()
    again = nevo.load_policy(result.run_dir, "last")
    assert again.act(obs).tolist() == batch.tolist()
    # seed-list elites (the GA, GA-NS, random search) keep every generation's; theta (ES) does not
    last = result.metrics[-1]["generation"]
    elite = runs.read_json(os.path.join(result.run_dir, runs.ELITE))
    assert ("seeds" in elite) == (name in ("ga", "ga-ns", "rs"))
    if "seeds" in elite:
        assert nevo.load_policy(result.run_dir, last).act(obs).tolist() == batch.tolist()
    else:
        with pytest.raises(ConfigError, match="no elites.jsonl"):
            nevo.load_policy(result.run_dir, last)
    if name in ("ga-ns", "ns-es", "nsr-es", "nsra-es"):  # the behaviours: each episode's final observation
        behaviours = runs.read_array(os.path.join(result.run_dir, runs.BEHAVIOURS))
        assert behaviours.shape[1] == 2 and np.all(behaviours[:, 1] > 0)  # t / 30 > 0 at the end


@pytest.mark.slow
def test_a_callers_fitness_is_what_the_ga_selects_on(tmp_path):
    """Minus the return as fitness breeds walkers to the left: the elite's validation return (a
    return, whatever the fitness) ends far below the default run's."""
    args = dict(net=[8], frames=25_000, noise_table_size=200_000, progress=False)
    plain = nevo.train("ga", env=Walk, out_dir=str(tmp_path / "a"), **args)
    left = nevo.train("ga", env=Walk, out_dir=str(tmp_path / "b"), fitness=lambda r: -r.returns, **args)
    assert plain.elite_score > 0 > -10 > left.elite_score


@pytest.mark.slow
def test_a_users_behaviour_function_is_novelty_searchs_behaviour(tmp_path):
    """behaviour=(observation, info) -> vector: its values at each episode's last step are what the
    run keeps as behaviours (here the final x alone)."""
    seen = []

    def final_x(observation, info):
        seen.append(float(observation[0]))
        return observation[:1]

    result = nevo.train("ga-ns", env=Walk, behaviour=final_x, out_dir=str(tmp_path), **SMALL)
    behaviours = runs.read_array(os.path.join(result.run_dir, runs.BEHAVIOURS))
    assert behaviours.shape == (12, 1) and seen
    assert set(behaviours[:, 0].astype(np.float64).tolist()) <= set(seen)


def play(policy, env, seed: int, cap: int) -> float:
    """A user's gymnasium loop: the return of one episode with this seed, at most cap steps."""
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for _ in range(cap):
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs))
        total += reward
        if terminated or truncated:
            break
    return total


@pytest.mark.slow
def test_the_policy_plays_an_obs_norm_es_elite_as_the_runs_evaluator_does(tmp_path):
    """ES with observation statistics on Pendulum-v1: in a plain gymnasium loop, load_policy's
    continuous actions give, episode for episode, the returns the run's own evaluator gives theta
    with the statistics it was validated with."""
    result = nevo.train("es", env="Pendulum-v1", frames=6_000, population=8, obs_norm=1,
                        validation_episodes=2, noise_table_size=1_000_000, out_dir=str(tmp_path),
                        progress=False)  # fmt: skip
    policy = nevo.load_policy(result.run_dir)
    stats = runs.read_array(elite_files.array_path(result.run_dir, "obs_norm"))
    assert np.abs(stats[0]).max() > 0  # real statistics, not the identity
    theta = runs.read_array(elite_files.array_path(result.run_dir, "theta"))
    task = tasks.task_for(EnvConfig(env="Pendulum-v1"))
    spec = policy.spec
    builder = WeightBuilder(None, np.zeros(spec.n_params, np.float32), fold=obs_norm.fold_population(spec))
    evaluator, _ = evaluator_for(task, RunConfig(env_slots=3), make_policy("cpu", spec), builder, "cpu", 1)
    population = Population.of_weights(theta[None])
    population.obs_norm = stats
    seeds = np.array([11, 12, 13])
    expected = evaluator.run(population, Episodes(np.zeros(3, np.int64), seeds)).returns
    evaluator.close()
    env = gym.make("Pendulum-v1")
    got = [play(policy, env, int(s), 10_000) for s in seeds]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    a = policy.act(np.zeros(3, np.float32))
    assert a.shape == (1,) and -2.0 <= a[0] <= 2.0  # mapped onto Pendulum's torque bounds


def test_an_unknown_algorithm_or_setting_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="allowed: ga, rs, es, ga-ns, ns-es, nsr-es, nsra-es") as e:
        nevo.train("cma-es", env=Walk, out_dir=str(tmp_path))
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="unknown setting 'truncation'"):
        nevo.train("es", env=Walk, truncation=3, out_dir=str(tmp_path))  # a GA setting, not ES's
    with pytest.raises(ConfigError, match="--net"):
        nevo.train("ga", env=Walk, net="dense:0", out_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="behaviour: a function of the last step is for gymnasium tasks"):
        nevo.train("ga-ns", env="maze", behaviour=lambda o, i: o, out_dir=str(tmp_path))
    assert not os.path.exists(tmp_path / "runs")


def test_load_policy_of_a_folder_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="not a run folder"):
        nevo.load_policy(str(tmp_path))


def test_load_policy_names_the_elites_it_can_load(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "elite.json").write_text("{}")
    for which in ("first", -1, 2.0, True):
        with pytest.raises(ConfigError, match="allowed: 'best', 'last' or a generation"):
            nevo.load_policy(str(tmp_path), which)


def test_dense_net_names_give_the_widths_asked_for():
    from nevo import nets

    spec = nets.net_spec("dense-tanh:5,7", (3, 1, 1), 2, np.float32, "tanh")
    assert [(lay.cin, lay.cout) for lay in spec.layers] == [(3, 5), (5, 7), (7, 2)]
    assert spec.n_params == 3 * 5 + 5 + 5 * 7 + 7 + 7 * 2 + 2
    with pytest.raises(ValueError, match="dense:W1,W2"):
        nets.net_spec("dense:", (3, 1, 1), 2, np.float32)
    # a dense net of widths of one's own is allowed
    config.validate(config.Config(net=config.NetConfig(net="dense:4,4")))


class WalkWithPosition(Walk):
    """Walk whose step's info holds the position (reset's info is empty, as gymnasium's often is)."""

    def step(self, action):
        obs, reward, terminated, truncated, _ = super().step(action)
        return obs, reward, terminated, truncated, {"pos": np.array([self.x, self.t], np.float32)}


class WalkThatFails(Walk):
    """Walk whose simulator breaks on the sixth step."""

    def step(self, action):
        if self.t > 5:
            raise RuntimeError("the simulator diverged")
        return super().step(action)


class WalkThatCannotReset(Walk):
    def reset(self, seed=None, options=None):
        raise KeyError("level")


TINY = dict(net=[8], frames=600, population=6, validation_episodes=1, noise_table_size=200_000,
            progress=False)  # fmt: skip


@pytest.mark.slow
def test_a_behaviour_that_reads_the_steps_info_is_novelty_searchs_behaviour(tmp_path):
    """behaviour=lambda obs, info: info["pos"] (reset's info has no "pos"): probed on a real step,
    it runs, and the run keeps the final positions."""
    result = nevo.train("nsr-es", env=WalkWithPosition, behaviour=lambda obs, info: info["pos"],
                        out_dir=str(tmp_path), **TINY)  # fmt: skip
    behaviours = runs.read_array(os.path.join(result.run_dir, runs.BEHAVIOURS))
    assert behaviours.shape == (6, 2) and np.all(behaviours[:, 1] >= 1)  # t at the end


ONE_LINE = [  # (algo, arguments, the start of the message)
    ("ga", dict(population="many"), "--population: got 'many', allowed: an int"),
    ("ga", dict(sigma=-1.0), "--sigma: got -1.0, allowed: a number > 0"),
    ("ga", dict(truncation=10), "--truncation: got 10, allowed: 0 (random search) .. population (6)"),
    ("es", dict(lr="fast"), "--lr: got 'fast', allowed: a float"),
    ("ga", dict(frames="x"), "frames: got 'x', allowed: an int >= 1"),
    ("ga", dict(net=[8, "a"]), "net: got [8, 'a'], allowed: a net's name or hidden widths"),
    ("ga", dict(env=5), "env: got 5, allowed: a gymnasium id"),
    ("ga", dict(fitness=3), "fitness: got 3, allowed: a function"),
    ("ga", dict(fitness=lambda r: 3.0), "fitness: returned 3.0 in generation 0; allowed: one number per "
                                        "individual, 6 in all (an array of shape (6,), NaN for none)"),
    ("ga", dict(fitness=lambda r: r.returns[:3]), "fitness: returned an array of shape (3,)"),
    ("ga", dict(fitness=lambda r: [str(x) for x in r.returns]), "fitness: returned ['"),
    ("ga", dict(fitness=lambda r: r.returns * np.inf), "fitness: returned an infinite value for individual"),
    ("ga", dict(fitness=lambda r: r.score), "fitness: raised AttributeError: 'Results' object has no"),
    ("ga-ns", dict(behaviour=lambda o, i: "x"),
     "behaviour: returned 'x' on the observation and info of a first step (reset(seed=0), then one step); "
     "allowed: numbers"),
    ("ga-ns", dict(behaviour=lambda o, i: [1, [2, 3]]), "behaviour: returned [1, [2, 3]] on the observation"),
    ("ga-ns", dict(behaviour=lambda o, i: i["pos"]), "behaviour: raised KeyError: 'pos' on the observation"),
    ("ga-ns", dict(behaviour=lambda o, i: o[: 1 + int(o[1] > 0.5)]),
     "behaviour: returned 2 numbers (an array of shape (2,) and dtype float32) at the end of the episode "
     "with seed "),
    ("ga", dict(env=WalkThatFails), "env WalkThatFails: step in the episode with seed "),
    ("ga", dict(env=WalkThatCannotReset), "env WalkThatCannotReset: reset(seed=0) raised KeyError: 'level'"),
]  # fmt: skip


@pytest.mark.parametrize("algo, arguments, says", ONE_LINE)
def test_bad_input_to_train_is_one_line_naming_the_argument(algo, arguments, says, tmp_path):
    """A setting of the wrong type or range (as the command line says it), an env that raises,
    a fitness or behaviour that raises or returns anything but one number per individual or the
    behaviour's numbers: a ConfigError of one line, naming it and what it got."""
    kwargs = {"env": Walk, **TINY, **arguments}
    if algo == "ga-ns":  # its elite is the most novel individual, kept without validation episodes
        del kwargs["validation_episodes"]
    with pytest.raises(ConfigError) as e:
        nevo.train(algo, out_dir=str(tmp_path), **kwargs)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)
