"""MuJoCo robots as tasks: their kind and defaults, the papers' presets, the deceptive Humanoid
trap of Conti et al. 2018, the final-position behaviour, and the robustness experiment."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from experiments import robustness, run_es, run_ga, run_ns
from nevo import cli, runs, tasks
from nevo.config import ConfigError, EnvConfig
from nevo.episodes import Episodes, Population
from nevo.evaluation.setup import evaluator_for
from nevo.genomes import noise
from nevo.loops import elite as elite_files
from nevo.nets import obs_norm
from nevo.nets.kernels import make_policy
from nevo.tasks import envs, trap
from nevo.tools import replay
from tests.helpers import metrics_without_clock, run_folder

TINY = ["--population", "4", "--frame-cap", "40", "--noise-table-size", "1000000"]


def test_mujoco_robots_are_their_own_kind_of_task():
    for name in (*envs.MUJOCO_ROBOTS, trap.ENV_ID):
        assert tasks.kind_of(EnvConfig(env=name)) is tasks.MuJoCo, name
    for name in ("CartPole-v1", "Pendulum-v1"):
        assert tasks.kind_of(EnvConfig(env=name)) is tasks.GymTask, name
    with pytest.raises(ConfigError, match="--env.*Humanoid-v5"):
        tasks.task_for(EnvConfig(env="Humanoid-v9"))


def test_where_the_command_line_is_silent_a_robot_gets_openai_es_s_policy_and_normalisation():
    cfg, _, _, _ = cli.parse_args(["--env", "HalfCheetah-v5"], "", "es")
    assert (cfg.net.net, cfg.settings.obs_norm, cfg.settings.sigma, cfg.settings.lr, cfg.settings.l2) == (
        "mlp-tanh",
        1,
        0.02,
        0.01,
        0.005,
    )
    assert cfg.net.actions == "auto"
    cfg, _, _, _ = cli.parse_args(["--env", "Hopper-v5", "--sigma", "0.05"], "", "ga")
    assert (cfg.net.net, cfg.settings.sigma, cfg.settings.population, cfg.net.actions) == (
        "mlp-tanh",
        0.05,
        64,
        "auto",
    )
    # ES on the hopping and swimming robots: binned actions, as Salimans et al. ran them
    for argv, presets in ((["--env", "Hopper-v5"], "es"),
                          (["--env", "Swimmer-v5", "--algo", "nsr-es"], "ga-ns")):  # fmt: skip
        assert cli.parse_args(argv, "", presets)[0].net.actions == "bins", argv
    given = cli.parse_args(["--env", "Hopper-v5", "--actions", "auto"], "", "es")[0]
    assert given.net.actions == "auto"


def test_the_papers_presets_are_kept_over_the_task_defaults():
    """--preset mujoco and --preset humanoid are the papers' values, not the 2-core defaults."""
    es, _, _, _ = cli.parse_args(["--preset", "mujoco"], "", "es")
    assert es.env.env == "Humanoid-v5" and es.net.net == "mlp-tanh" and es.settings.obs_norm == 1
    assert (
        es.settings.population,
        es.settings.sigma,
        es.settings.lr,
        es.settings.l2,
        es.settings.mirrored,
    ) == (
        10_000,
        0.02,
        0.01,
        0.005,
        1,
    )
    assert es.settings.fitness_shaping == "centered_ranks" and es.run.frame_budget == 1_000_000_000
    ga, _, _, _ = cli.parse_args(["--preset", "mujoco", "--env", "Walker2d-v5"], "", "ga")
    assert (ga.env.env, ga.settings.population, ga.settings.truncation, ga.settings.sigma) == (
        "Walker2d-v5",
        1000,
        20,
        0.02,
    )
    ns, _, _, _ = cli.parse_args(["--preset", "humanoid"], "", "ga-ns")
    assert (ns.env.env, ns.algo, ns.net.net) == (trap.ENV_ID, "nsr-es", "mlp-tanh-256")
    assert (ns.settings.population, ns.settings.meta_population, ns.settings.k, ns.settings.sigma) == (
        1000,
        5,
        10,
        0.02,
    )
    nsra, _, _, _ = cli.parse_args(["--preset", "humanoid", "--algo", "nsra-es"], "", "ga-ns")
    assert nsra.settings.reward_weight == 1.0  # the algorithm's own default still applies


def _push_forward(env_id: str) -> float:
    """The torso's x after the humanoid is thrown at +8 m/s from x = 4.6 (inside the cup)."""
    env = gym.make(env_id)
    env.reset(seed=0)
    u = env.unwrapped
    qpos, qvel = u.data.qpos.copy(), u.data.qvel.copy()
    qpos[0], qvel[0] = 4.6, 8.0
    u.set_state(qpos, qvel)
    for _ in range(30):
        u.do_simulation(np.zeros(u.action_space.shape), u.frame_skip)
    x = float(u.data.qpos[0])
    env.close()
    return x


def test_the_trap_s_front_wall_stops_a_humanoid_that_open_ground_does_not():
    trap.register()
    assert _push_forward("Humanoid-v5") > 5.6  # nothing there
    assert _push_forward(trap.ENV_ID) < 5.5  # the wall's face is at x = 5.4
    model = gym.make(trap.ENV_ID).unwrapped.model
    assert {w[0] for w in trap.WALLS} <= {model.geom(i).name for i in range(model.ngeom)}


def test_the_behaviour_is_the_centre_of_mass_where_the_episode_ended():
    slots = envs.MujocoSlots(lambda: envs.make_vector_task(trap.ENV_ID), 2)
    try:
        slots.reset(np.arange(2), np.array([1, 2]))
        u = slots.envs[1].unwrapped
        qpos = u.data.qpos.copy()
        qpos[:2] = (3.0, -1.0)
        u.set_state(qpos, u.data.qvel)
        xy = slots.behaviour([0, 1])
        assert xy.shape == (2, 2) and xy.dtype == np.float32
        assert np.abs(xy[0]).max() < 0.2  # the start
        np.testing.assert_allclose(xy[1], (3.0, -1.0), atol=0.2)  # moved with the body
        assert trap.in_cup(xy).tolist() == [False, True]
    finally:
        slots.close()


@pytest.mark.slow
def test_novelty_search_runs_in_the_trap_and_es_keeps_where_its_episodes_ended(tmp_path):
    """NSR-ES in HumanoidTrap-v5: its archive grows with final (x, y); ES on a robot writes the
    last generation's final positions too (the trap figure compares them)."""
    argv = ["--env", trap.ENV_ID, "--algo", "nsr-es", "--meta-population", "2", *TINY,
            "--frame-budget", "400"]  # fmt: skip
    folder = run_folder(run_ns.main, argv, tmp_path / "ns")
    xy = runs.read_array(os.path.join(folder, runs.BEHAVIOURS))
    assert xy.shape == (4, 2) and np.isfinite(xy).all() and np.abs(xy).max() < 3
    es = run_folder(run_es.main, ["--env", trap.ENV_ID, *TINY, "--frame-budget", "200"], tmp_path / "es")
    assert runs.read_array(os.path.join(es, runs.BEHAVIOURS)).shape == (4, 2)


@pytest.mark.slow
def test_robustness_perturbs_theta_then_folds_the_run_s_observation_statistics(tmp_path, capsys):
    """At sigma 0 the perturbed policies score what the run's elite, as replay folds it, scores on
    the same episodes; a GA run's elite is rebuilt from its seeds; the figure and data are written."""
    es = run_folder(run_es.main, ["--env", "Hopper-v5", *TINY, "--frame-budget", "1500"], tmp_path / "es")
    ga = run_folder(run_ga.main, ["--env", "Hopper-v5", *TINY, "--truncation", "2", "--frame-budget", "1500"],
                    tmp_path / "ga")  # fmt: skip
    out = str(tmp_path / "rob")
    argv = [es, ga, "--sigmas", "0", "0.5", "--perturbations", "2", "--threads", "1", "--out", out]
    assert robustness.main(argv) == 0
    assert "| ES (obs-norm) |" in capsys.readouterr().out
    data = json.load(open(out + ".json"))["results"]
    assert [r["algo"] for r in data] == ["es", "ga"] and np.shape(data[0]["returns"]) == (2, 2)
    assert os.path.getsize(out + ".png") > 10_000

    cfg, elite, spec, folded = elite_files.load(es, fold=True)  # what replay plays
    theta = elite_files.load(es, fold=False)[3]
    assert not np.array_equal(folded, theta)  # the statistics matter
    stats = elite_files.obs_stats(es, elite, spec)
    # sigma 0: the elite as replay plays it; sigma 0.5: theta + noise, then the statistics folded in
    rows = robustness.perturbed(theta, [0.0, 0.5], 2, seed=0)
    np.testing.assert_array_equal(rows[:2], np.stack([theta, theta]))
    want = obs_norm.fold(spec, rows.copy(), stats[0], stats[1])
    np.testing.assert_array_equal(want[0], folded)
    task = tasks.task_for(cfg.env)
    evaluator, _ = evaluator_for(task, cfg.run, make_policy("cpu", spec),
                                  *_plain(cfg, task, spec, es), "cpu", 4)  # fmt: skip
    seeds = np.random.default_rng([0, 0xE915]).integers(0, noise.SEED_LIMIT, 4).astype(np.int64)
    res = evaluator.run(Population.of_weights(want), Episodes(np.arange(4, dtype=np.int64), seeds))
    evaluator.close()
    np.testing.assert_array_equal(res.returns, np.ravel(data[0]["returns"]))
    assert data[0]["returns"][1] != data[0]["returns"][0]


def _plain(cfg, task, spec, run_dir):
    from nevo.evaluation import setup

    return (setup.weight_builder(cfg, task, spec, run_dir, None),)


def test_perturbations_share_their_draws_across_sigmas():
    theta = np.arange(5, dtype=np.float32)
    rows = robustness.perturbed(theta, [0.0, 0.1, 0.2], 3, seed=4)
    assert rows.shape == (9, 5) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows[:3], np.tile(theta, (3, 1)))
    np.testing.assert_allclose(rows[6:] - theta, 2 * (rows[3:6] - theta), rtol=1e-5, atol=1e-6)
    assert robustness.main(["nowhere", "--sigmas", "-1"]) == 2


@pytest.mark.slow
def test_the_es_family_of_novelty_search_normalises_observations_and_resumes_exactly(tmp_path):
    """NSR-ES on a robot gathers observation statistics (MuJoCo's default), keeps with the elite
    the statistics its agent was validated with (replay folds them), and a run resumed from its
    previous checkpoint ends with the same metrics, statistics and elite."""
    import shutil

    argv = [
        "--env",
        "Hopper-v5",
        "--algo",
        "nsr-es",
        "--meta-population",
        "2",
        *TINY,
        "--frame-budget",
        "900",
    ]
    folder = run_folder(run_ns.main, argv, tmp_path / "ns")
    rows = runs.read_metrics(folder)
    assert len(rows) >= 3 and rows[-1]["obs_norm/count"] > rows[0]["obs_norm/count"] >= 0
    elite = json.load(open(os.path.join(folder, runs.ELITE)))
    stats = runs.read_array(os.path.join(folder, elite["obs_norm"]))
    assert stats.shape == (2, 11) and (stats[1] > 0).all() and np.abs(stats[0]).max() > 0
    copy = str(tmp_path / "copy")
    shutil.copytree(folder, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    assert run_ns.main(["--resume", copy]) == 0
    assert metrics_without_clock(copy) == metrics_without_clock(folder)
    for key in ("obs_norm", "theta"):
        np.testing.assert_array_equal(runs.read_array(elite_files.array_path(copy, key)),
                                      runs.read_array(elite_files.array_path(folder, key)))  # fmt: skip
    assert replay.main([folder, "--episodes", "2", "--no-save"]) == 0


def test_ga_ns_refuses_observation_normalisation_in_one_line(capsys, tmp_path):
    argv = ["--env", "Hopper-v5", "--algo", "ga-ns", "--obs-norm", "1", *TINY, "--truncation", "2"]
    argv += ["--out-dir", str(tmp_path)]
    assert run_ns.main(argv) == 2
    assert "--obs-norm" in capsys.readouterr().err


@pytest.mark.slow
def test_trap_compare_writes_the_table_and_figure_and_reuses_finished_runs(tmp_path):
    from experiments import trap_compare

    argv = ["--seeds", "1", "--frame-budget", "300", "--threads", "1", "--runs-dir", str(tmp_path / "runs"),
            "--out", str(tmp_path)]  # fmt: skip
    assert trap_compare.main(argv) == 0
    table = (tmp_path / "trap_compare.md").read_text()
    assert "| ES | 0 |" in table and "| NSR-ES | 0 |" in table
    assert (tmp_path / "trap_final_positions.png").stat().st_size > 10_000
    folders = sorted(os.listdir(tmp_path / "runs" / "ES-0"))
    assert trap_compare.main(argv) == 0  # the finished runs are reused, not run again
    assert sorted(os.listdir(tmp_path / "runs" / "ES-0")) == folders


def test_positions_past_the_walls_are_only_reached_by_going_round():
    xy = np.array([[0.0, 0.0], [4.0, 0.0], [6.0, 0.0], [4.0, 2.5], [1.0, 3.0]])
    assert trap_compare_beyond(xy).tolist() == [False, False, True, True, False]
    assert trap.in_cup(xy).tolist() == [False, True, False, False, False]


def trap_compare_beyond(xy):
    from experiments import trap_compare

    return trap_compare.beyond_the_walls(xy)


def test_a_missing_mujoco_package_is_one_line_naming_the_install(tmp_path):
    """Without the mujoco package a robot's run stops before it starts, with one line that says
    what to install (run in a fresh process where `import mujoco` fails)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['mujoco'] = None\n"
            "from experiments import run_es\n"
            f"sys.exit(run_es.main(['--env', 'Hopper-v5', '--out-dir', {str(tmp_path)!r}]))")  # fmt: skip
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Hopper-v5 needs a package that is not installed" in lines[0], lines
    assert "mujoco" in lines[0].lower()
