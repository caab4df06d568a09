"""Continuous actions: nets whose outputs go through tanh, gymnasium tasks with a bounded Box of
actions, and runs on them (Pendulum-v1: no extra package needed)."""

import re

import gymnasium as gym
import numpy as np
import pytest

from experiments import run_es, run_ga
from nevo import nets, tasks
from nevo.config import Config, ConfigError, EnvConfig, GAConfig, NetConfig
from nevo.evaluation import setup
from nevo.loops import elite as elite_files
from nevo.nets.kernels import cpu, reference
from nevo.nets.kernels.actions import actions_of
from nevo.tasks import envs
from nevo.tools import replay
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import PENDULUM


def _case(rows=9):
    spec = nets.make_spec([("dense", 10), ("dense", 7)], (4, 1, 1), 3, obs_dtype=np.float32, action="tanh")
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(3, spec.n_params)).astype(np.float32) * 2
    obs = rng.normal(size=(rows, 4, 1, 1)).astype(np.float32)
    return spec, weights, rng.integers(0, 3, rows), obs


def test_a_tanh_net_acts_with_tanh_of_its_outputs_on_every_host_backend():
    """The reference's and the Numba forward's actions are tanh(logits), (rows, n) float32 in
    [-1, 1], the same on both within float32 tolerance."""
    spec, weights, rows_ind, obs = _case()
    ref_a, ref_z = reference.forward(spec, weights, rows_ind, obs)
    cpu_a, cpu_z = cpu.forward(spec, weights, rows_ind, obs)
    for a, z in ((ref_a, ref_z), (cpu_a, cpu_z)):
        assert a.dtype == np.float32 and a.shape == (9, 3)
        np.testing.assert_array_equal(a, np.tanh(z).astype(np.float32))
    np.testing.assert_allclose(cpu_a, ref_a, atol=1e-5)
    assert np.abs(ref_z).max() > 1 >= np.abs(ref_a).max()


def test_tanh_hidden_units_on_every_host_backend():
    """The mlp-tanh net (2 x 64 tanh, OpenAI-ES's MuJoCo policy) is tanh(tanh(x W1 + b1) W2 + b2)
    W3 + b3 in the reference and in the Numba forward, written out here by hand; with weights large
    enough that many units saturate and many are negative (where ReLU would differ)."""
    spec = nets.net_spec("mlp-tanh", (5, 1, 1), 3, np.float32, action="tanh")
    assert [lay.act for lay in spec.layers] == ["tanh", "tanh", "linear"]
    rng = np.random.default_rng(1)
    weights = rng.normal(size=(4, spec.n_params)).astype(np.float32) * 0.5
    rows_ind = rng.integers(0, 4, 11)
    obs = rng.normal(size=(11, 5, 1, 1)).astype(np.float32) * 3
    want = np.empty((11, 3))
    for r, i in enumerate(rows_ind):
        x = obs[r, :, 0, 0].astype(np.float64)
        for k, (w, b) in enumerate(spec.unflatten(weights[i].astype(np.float64))):
            x = x @ w + b
            if k < 2:
                hidden = x
                x = np.tanh(x)
        want[r] = x
    assert (hidden < -1).any() and (hidden > 1).any()  # saturated units, and negative ones
    for forward in (reference.forward, cpu.forward):
        actions, logits = forward(spec, weights, rows_ind, obs)
        np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(actions, np.tanh(want), atol=1e-5)


def test_tanh_nets_refuse_vbn_and_safe_mutations_in_one_line():
    from nevo.config import Config, validate

    with pytest.raises(ConfigError, match="--vbn.*mlp-tanh"):
        validate(Config(net=NetConfig(net="mlp-tanh", vbn=8), algo="es"))
    with pytest.raises(ConfigError, match="--mutation.*mlp-tanh"):
        validate(Config(net=NetConfig(net="mlp-tanh"), settings=GAConfig(mutation="sm-g-sum")))
    with pytest.raises(ValueError, match="activation"):
        nets.make_spec([("dense", 4, "sigmoid")], (3, 1, 1), 2, obs_dtype=np.float32)


def test_an_argmax_net_is_unchanged():
    spec = nets.make_spec([("dense", 10)], (4, 1, 1), 3, obs_dtype=np.float32)
    _, weights, rows_ind, obs = _case()
    weights = weights[:, : spec.n_params].copy()
    a, z = reference.forward(spec, weights, rows_ind, obs)
    assert a.dtype == np.int64 and a.shape == (9,)
    np.testing.assert_array_equal(a, np.argmax(z, axis=1))


def test_an_unknown_action_kind_is_refused():
    with pytest.raises(ValueError, match="action must be one of"):
        nets.make_spec([], (4, 1, 1), 3, obs_dtype=np.float32, action="softmax")


def test_box_actions_map_minus_one_to_low_and_one_to_high():
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    np.testing.assert_array_equal(envs.box_action([-1, -1], low, high), low)
    np.testing.assert_array_equal(envs.box_action([1, 1], low, high), high)
    np.testing.assert_allclose(envs.box_action([0, 0.5], low, high), [0.0, 0.75])
    np.testing.assert_array_equal(envs.box_action([3, -3], low, high), [2.0, 0.0])  # clipped


def test_a_gymnasium_task_with_box_actions_has_a_tanh_net():
    task = tasks.task_for(EnvConfig(env="Pendulum-v1"))
    assert task.action == "tanh" and task.n_actions == 1
    spec = setup.net_for(Config(env=EnvConfig(env="Pendulum-v1")), task)
    assert spec.action == "tanh" and spec.n_actions == 1 and spec.obs_shape == (3, 1, 1)
    assert tasks.task_for(EnvConfig(env="CartPole-v1")).action == "argmax"


class Unbounded(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)


def test_unbounded_box_actions_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="bounded 1-D Box"):
        tasks.task_for(EnvConfig(env="unbounded"), make_env=Unbounded)


@pytest.mark.slow
def test_es_and_the_ga_run_on_a_continuous_task_deterministically(tmp_path):
    """run_es and run_ga on Pendulum-v1: finite scores, the same metrics for the same seed, and
    replay plays the result."""
    es = run_folder(run_es.main, PENDULUM, str(tmp_path / "es"))
    again = run_folder(run_es.main, PENDULUM, str(tmp_path / "es2"))
    rows = metrics_without_clock(es)
    assert rows == metrics_without_clock(again) and len(rows) >= 2
    assert all(np.isfinite(r["score/elite_mean"]) and r["score/elite_mean"] < 0 for r in rows)
    ga = run_folder(run_ga.main, [*PENDULUM, "--truncation", "2"], str(tmp_path / "ga"))
    assert len(metrics_without_clock(ga)) >= 2
    assert replay.main([ga, "--episodes", "2", "--no-save"]) == 0


def test_safe_mutations_refuse_continuous_actions(capsys, tmp_path):
    argv = [*PENDULUM, "--truncation", "2", "--mutation", "sm-g-sum", "--out-dir", str(tmp_path)]
    assert run_ga.main(argv) == 2
    assert "continuous actions" in capsys.readouterr().err


@pytest.mark.slow
def test_a_mujoco_robot_runs_headless_under_es(tmp_path, monkeypatch):
    """HalfCheetah-v5 through gymnasium: a 6-long tanh action vector, episodes stepped with no
    display, ES's metrics finite."""
    monkeypatch.delenv("DISPLAY", raising=False)
    task = tasks.task_for(EnvConfig(env="HalfCheetah-v5"))
    assert task.action == "tanh" and task.n_actions == 6 and task.obs_shape == (17, 1, 1)
    argv = ["--env", "HalfCheetah-v5", "--population", "4", "--frame-cap", "50", "--frame-budget", "600",
            "--noise-table-size", "1000000", "--validation-episodes", "1"]  # fmt: skip
    rows = metrics_without_clock(run_folder(run_es.main, argv, str(tmp_path)))
    assert len(rows) >= 2 and all(np.isfinite(r["score/elite_mean"]) for r in rows)


@pytest.mark.slow
def test_envs_stepped_in_threads_give_the_same_run(tmp_path):
    """--threads 2 steps the envs in two threads: the metrics are those of one thread."""
    one = run_folder(run_es.main, [*PENDULUM, "--threads", "1", "--env-slots", "8"], str(tmp_path / "one"))
    two = run_folder(run_es.main, [*PENDULUM, "--threads", "2", "--env-slots", "8"], str(tmp_path / "two"))
    assert metrics_without_clock(one) == metrics_without_clock(two)


def test_pick_threads_keeps_the_faster_and_uses_it():
    slots = envs.VectorTaskSlots(lambda: gym.make("Pendulum-v1"), 8)
    try:
        best = envs.pick_threads(slots, 2, steps=40)
        assert best in (1, 2) and slots.threads == best
        assert envs.pick_threads(slots, 1) == 1  # one core: no threads
    finally:
        slots.close()


@pytest.mark.slow
def test_replay_records_a_mujoco_episode_as_the_test_played_it(tmp_path):
    """--gif renders a MuJoCo robot offscreen (EGL, no display), tracked by its camera; an episode
    that ends (Hopper falls) has the test episode's return and length, or replay exits 1."""
    argv = ["--env", "Hopper-v5", "--population", "4", "--frame-cap", "60", "--frame-budget", "400",
            "--noise-table-size", "1000000", "--validation-episodes", "1"]  # fmt: skip
    folder = run_folder(run_es.main, argv, str(tmp_path / "runs"))
    gif = str(tmp_path / "hopper.gif")
    out = ["--episodes", "1", "--frame-cap", "1000", "--gif", gif, "--gif-frames", "1000", "--no-save"]
    assert replay.main([folder, *out]) == 0
    from PIL import Image

    with Image.open(gif) as im:
        assert im.size == (320, 240) and im.n_frames >= 2


@pytest.mark.slow
def test_bench_pipeline_compares_a_task_with_its_stepping_limit(capsys):
    from experiments.bench import bench_pipeline

    bench_pipeline.main(["--env", "Pendulum-v1", "--populations", "4", "--frame-cap", "20", "--limit-seconds",
                         "0.2", "--slots", "4", "--processes"])  # fmt: skip
    out = capsys.readouterr().out
    assert "Pendulum-v1 | net mlp" in out and "of the limit" in out
    own = re.search(
        r"evaluation ([\d,]+) steps/s.*; (\d+)% of its own steps' stepping rate \(([\d,]+)\)", out
    )
    rate, share, alone = (float(g.replace(",", "")) for g in own.groups())
    assert alone >= rate and abs(share - 100 * rate / alone) <= 1  # stepping alone is part of the work
    assert re.search(r"in \d+ processes: [\d,]+ steps/s", out)


def test_binned_actions_take_the_first_largest_of_each_component_s_outputs():
    """--actions bins (Salimans et al.'s Hopper): component j is -1 + 2k/9, k the first largest
    of outputs 10j .. 10j + 9, on the reference and the Numba forward alike."""
    spec = nets.make_spec(
        [("dense", 8, "tanh")], (4, 1, 1), 2 * nets.BINS, obs_dtype=np.float32, action="bins"
    )
    assert spec.action_dims == 2
    rng = np.random.default_rng(3)
    weights = rng.normal(size=(3, spec.n_params)).astype(np.float32)
    rows_ind, obs = rng.integers(0, 3, 7), rng.normal(size=(7, 4, 1, 1)).astype(np.float32)
    for forward in (reference.forward, cpu.forward):
        actions, logits = forward(spec, weights, rows_ind, obs)
        k = np.argmax(logits.reshape(7, 2, nets.BINS), axis=2)
        assert actions.shape == (7, 2) and actions.dtype == np.float32
        np.testing.assert_allclose(actions, -1 + 2 * k / 9, atol=1e-7)
    tie = np.zeros((1, 20), np.float32)
    tie[0, [3, 7, 10, 19]] = 1.0  # ties: the first
    np.testing.assert_allclose(actions_of(spec, None, tie), [[-1 + 6 / 9, -1.0]], atol=1e-7)
    with pytest.raises(ValueError, match="multiple of 10"):
        nets.make_spec([], (4, 1, 1), 15, obs_dtype=np.float32, action="bins")


@pytest.mark.slow
def test_binned_actions_run_es_on_a_continuous_task_and_refuse_a_discrete_one(tmp_path, capsys):
    folder = run_folder(run_es.main, [*PENDULUM, "--actions", "bins"], str(tmp_path / "es"))
    cfg, _, spec, _ = elite_files.load(folder)
    assert spec.action == "bins" and spec.n_actions == nets.BINS and cfg.net.actions == "bins"
    assert replay.main([folder, "--episodes", "2", "--no-save"]) == 0
    argv = ["--env", "CartPole-v1", "--actions", "bins", "--out-dir", str(tmp_path)]
    assert run_es.main(argv) == 2
    assert "--actions: bins discretises continuous actions" in capsys.readouterr().err
