"""End to end: `python -m experiments.run_ns` on the maze; resume equals uninterrupted; bad input."""

import json
import os

import numpy as np
import pytest

from experiments import run_ns
from nevo import runs
from nevo.cli import build_parser, parse_args, presets_of
from nevo.config import ConfigError
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import MAZE, MAZE_ES

results = metrics_without_clock
ES_FAMILY = ("ns-es", "nsr-es", "nsra-es")


def ns_run(out, *extra):
    """A run on the tiny maze: 3 parents for GA-NS (the ES family has none)."""
    return run_folder(run_ns.main, [*(MAZE_ES if set(extra) & set(ES_FAMILY) else MAZE), *extra], out)


def archive_prob(algo: str) -> list[str]:
    """GA-NS's archive that really grows (the ES family adds each update's agent)."""
    return [] if algo in ES_FAMILY else ["--archive-prob", "0.5"]


@pytest.mark.parametrize("algo", ["ga-ns", "nsra-es"])
@pytest.mark.slow
def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path, algo):
    """The archive, the agents and NSRA's weight are in the checkpoint: resume repeats the run."""
    args = ["--algo", algo, *archive_prob(algo)]
    whole = ns_run(tmp_path / "a", *args, "--frame-budget", "7000")
    part = ns_run(tmp_path / "b", *args, "--frame-budget", "3000")
    assert run_ns.main(["--resume", part, "--frame-budget", "7000"]) == 0
    assert len(results(whole)) >= 2 and results(part) == results(whole)
    a, b = runs.load_checkpoint(whole), runs.load_checkpoint(part)
    np.testing.assert_array_equal(a["archive/archive"], b["archive/archive"])
    assert len(a["archive/archive"]) >= 3
    bc = np.load(os.path.join(whole, "behaviours.npy"))
    assert bc.shape == (6, 2) and (0 <= bc).all() and (bc <= 1).all()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--algo", "ns"], ["--algo", "ga-ns", "nsra-es"]),
        (["--env", "maze", "--net", "mlp"], ["--net", "large or small"]),
        (["--env", "maze", "--frame-cap", "100"], ["--frame-cap", ">= 200"]),
        (["--k", "0"], ["--k", ">= 1"]),
        (["--algo", "ns-es", "--population", "7"], ["--population", "even"]),
    ],
)
def test_bad_ns_settings_name_the_field_and_what_is_allowed(argv, words):
    with pytest.raises(ConfigError) as e:
        parse_args(argv, "", "ga-ns")
    for w in words:
        assert w in str(e.value)


def test_es_family_defaults_to_the_es_sigma():
    cfg, _, _, _ = parse_args(["--algo", "nsr-es"], "", "ga-ns")
    assert cfg.settings.sigma == 0.02 and cfg.env.env == "maze"
    cfg, _, _, _ = parse_args(["--algo", "ga-ns"], "", "ga-ns")
    assert cfg.settings.sigma == 0.005


@pytest.mark.slow
def test_nsra_es_starts_at_the_reward_weight_given_and_else_at_1(tmp_path, monkeypatch):
    """--reward-weight is NSRA-ES's start (generation 0 logs it); where the command line is silent
    NSRA-ES starts with all weight on reward (Conti et al.) and NSR-ES keeps 0.5; --help says so."""
    rows = runs.read_metrics(
        ns_run(tmp_path, "--algo", "nsra-es", "--reward-weight", "0.3", "--frame-budget", "500")
    )
    assert rows[0]["generation"] == 0 and rows[0]["ns/reward_weight"] == 0.3
    weights = [
        parse_args(["--algo", a], "", "ga-ns")[0].settings.reward_weight for a in ("nsra-es", "nsr-es")
    ]
    assert weights == [1.0, 0.5]
    monkeypatch.setenv("COLUMNS", "400")  # one line per flag: argparse would break NSRA-ES at its hyphen
    assert (
        "NSRA-ES: its start (1.0 unless set)"
        in build_parser("", presets_of("ga-ns"), "nsra-es").format_help()
    )
    # GA-NS's flags: none of it
    assert "--reward-weight" not in build_parser("", presets_of("ga-ns")).format_help()


@pytest.fixture(scope="module")
def maze_runs(tmp_path_factory):
    """A finished GA-NS and NS-ES run on the maze, a few generations each: {algo: run folder}."""
    out = tmp_path_factory.mktemp("maze_runs")
    return {algo: ns_run(out / algo, "--algo", algo, *archive_prob(algo), "--frame-budget", "3000")
            for algo in ("ga-ns", "ns-es")}  # fmt: skip


@pytest.mark.slow
def test_ga_ns_logs_its_elites_game_score_and_novelty_apart(maze_runs):
    """score/elite_mean is the elite's return (minus its distance to the goal), not its novelty;
    the elite, the most novel individual, logs its novelty as ns/elite_novelty."""
    rows = runs.read_metrics(maze_runs["ga-ns"])
    assert len(rows) >= 3
    for r in rows:
        assert r["score/elite_mean"] <= min(0.0, r["score/pop_max"])
        assert r["ns/elite_novelty"] == r["ns/novelty_max"] > 0
    elite = json.load(open(os.path.join(maze_runs["ga-ns"], runs.ELITE)))
    assert elite["validation_mean"] == rows[-1]["score/elite_mean"] and elite["generation"] == len(rows) - 1


@pytest.mark.parametrize("algo", ["ga-ns", "ns-es"])
@pytest.mark.slow
def test_replay_plays_a_novelty_search_runs_elite(maze_runs, algo):
    """elite.json names the elite (GA-NS: its seeds; NS-ES: the best agent's theta.npy), and on
    the deterministic maze the replay scores exactly its recorded mean."""
    from nevo.tools import replay

    folder = maze_runs[algo]
    assert replay.main([folder, "--episodes", "1", "--frame-cap", "200"]) == 0
    elite = json.load(open(os.path.join(folder, runs.ELITE)))
    test = json.load(open(os.path.join(folder, "test.json")))
    assert ("seeds" in elite) == (algo == "ga-ns") and ("theta" in elite) == (algo == "ns-es")
    assert test["returns"] == [elite["validation_mean"]]
    assert elite["validation_mean"] == runs.read_metrics(folder)[-1]["score/elite_mean"]


ATARI_ES = ["--env", "frostbite", "--frame-cap", "400", "--population", "4"]
ATARI_ES += ["--net", "small", "--noise-table-size", "1100000", "--env-slots", "4"]
ATARI = [*ATARI_ES, "--truncation", "2"]  # GA-NS's parents


@pytest.mark.slow
def test_ga_ns_on_atari_resumes_with_its_ram_archive(tmp_path):
    """On Atari the behaviours are final RAM (uint8, 128 bytes) and resume still repeats the run."""
    args = [*ATARI, "--archive-prob", "0.5"]
    whole = run_folder(run_ns.main, [*args, "--frame-budget", "3000"], tmp_path / "a")
    part = run_folder(run_ns.main, [*args, "--frame-budget", "1000"], tmp_path / "b")
    assert run_ns.main(["--resume", part, "--frame-budget", "3000"]) == 0
    assert len(results(whole)) >= 2 and results(part) == results(whole)
    archive = runs.load_checkpoint(whole)["archive/archive"]
    np.testing.assert_array_equal(archive, runs.load_checkpoint(part)["archive/archive"])
    assert archive.dtype == np.uint8 and archive.shape[1] == 128 and len(archive) >= 1
    bc = np.load(os.path.join(whole, "behaviours.npy"))
    assert bc.shape == (4, 128) and bc.dtype == np.uint8 and len({r.tobytes() for r in bc}) > 1


@pytest.mark.slow
def test_ns_es_runs_on_atari(tmp_path):
    """The ES family on Atari: the agents' RAM behaviours start the archive, each update adds one."""
    argv = [*ATARI_ES, "--algo", "ns-es", "--meta-population", "2", "--frame-budget", "2000"]
    folder = run_folder(run_ns.main, argv, tmp_path)
    rows = runs.read_metrics(folder)
    assert len(rows) >= 1 and rows[-1]["ns/archive_size"] == 2 + len(rows)


def test_atari_defaults_follow_the_papers():
    """GA-NS on Atari: the Deep GA's large net and sigma; the ES family: the small net with VBN."""
    cfg, _, _, _ = parse_args(["--env", "frostbite"], "", "ga-ns")
    assert (cfg.net.net, cfg.settings.sigma, cfg.net.vbn) == ("large", 0.002, 0)
    cfg, _, _, _ = parse_args(["--env", "frostbite", "--algo", "nsra-es"], "", "ga-ns")
    assert (cfg.net.net, cfg.settings.sigma, cfg.net.vbn) == ("small", 0.02, 128)


@pytest.mark.slow
def test_novelty_search_on_a_gymnasium_task_keeps_each_episodes_final_observation(tmp_path):
    """A gymnasium task's behaviour, where none is given, is the final observation: NSR-ES on
    CartPole-v1 keeps one 4-number behaviour per training episode, each a pole that fell or a
    cart that left (|angle| > 0.2095 rad or |x| > 2.4) unless the episode reached its cap."""
    argv = ["--env", "CartPole-v1", "--algo", "nsr-es", "--population", "8", "--meta-population", "2",
            "--noise-table-size", "200000", "--frame-budget", "3000"]  # fmt: skip
    folder = run_folder(run_ns.main, argv, tmp_path)
    behaviours = runs.read_array(os.path.join(folder, runs.BEHAVIOURS))
    assert behaviours.shape == (8, 4)
    fell = (np.abs(behaviours[:, 2]) > 0.2095) | (np.abs(behaviours[:, 0]) > 2.4)
    assert fell.any()


@pytest.mark.slow
def test_maze_compare_writes_the_table_and_figure_and_reuses_finished_runs(tmp_path):
    """maze_compare runs the GA and GA-NS per seed into one folder each, writes the Markdown table
    and the final-positions figure, and a second call reuses the finished runs."""
    from experiments import maze_compare

    argv = ["--seeds", "1", "--frame-budget", "1500", "--population", "6", "--truncation", "3"]
    argv += ["--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path)]
    assert maze_compare.main(argv) == 0
    table = (tmp_path / "maze_compare.md").read_text()
    assert "| GA | 0 |" in table and "| GA-NS | 0 |" in table and "of 6 |" in table
    assert (tmp_path / "maze_final_positions.png").stat().st_size > 0
    folders = sorted(os.listdir(tmp_path / "runs"))
    assert folders == ["GA-0", "GA-NS-0"]
    inside = [os.listdir(tmp_path / "runs" / f) for f in folders]
    assert maze_compare.main(argv) == 0
    assert [os.listdir(tmp_path / "runs" / f) for f in folders] == inside  # no new run folder
