"""nevo suite: a table of games from one resumable command; the table and figure from its folders."""

import json
import os
import shutil
import signal

import pytest

from nevo import cli, config
from nevo.loops import progress
from nevo.plots import table
from nevo.tools import suite
from tests.helpers import metrics_without_clock

# Two games, tiny runs (6 individuals, 400-frame episodes: 3 generations of ~4,200 frames), two
# test episodes each
TINY = ["--population", "6", "--truncation", "3", "--elite-candidates", "2", "--validation-episodes",
        "2", "--frame-cap", "400", "--noise-table-size", "1100000", "--env-slots", "2",
        "--processes", "1"]  # fmt: skip
GAMES = ["--games", "frostbite,pong", "--test-episodes", "2"]


def run_suite(results, *more) -> int:
    return suite.main([str(results), *GAMES, "--frames", "10K", *TINY, *more])


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A suite of two games run to its end, uninterrupted: (results folder, printed lines)."""
    results = tmp_path_factory.mktemp("whole") / "atari"
    assert run_suite(results) == 0
    return results


def folders(results) -> list[str]:
    return sorted(d for d in os.listdir(results) if os.path.isdir(os.path.join(results, d)))


@pytest.mark.slow
def test_a_suite_makes_one_tested_run_folder_per_game_and_seed(whole):
    """frostbite__ga__0 and pong__ga__0, each trained past its budget and its best elite tested
    on held-out seeds, as the paper tests it and under sticky actions 0.25."""
    assert folders(whole) == ["frostbite__ga__0", "pong__ga__0"]
    for d in folders(whole):
        rows = metrics_without_clock(os.path.join(whole, d))
        assert rows[-1]["frames"] >= 10_000 > rows[-2]["frames"]
        best = json.load(open(os.path.join(whole, d, "best.json")))
        for name, sticky in (("test.json", 0.0), ("test_sticky0.25.json", 0.25)):
            test = json.load(open(os.path.join(whole, d, name)))
            assert test["episodes"] == 2 and test["elite_generation"] == best["generation"]
            assert (test["game"], test["sticky"], test["seeds"]) == (d.split("__")[0], sticky, "held-out")


@pytest.mark.slow
def test_a_test_on_a_runs_own_seeds_is_made_again_on_held_out_ones(whole, tmp_path, capsys):
    """A test.json written before tests were held out (no "seeds") is tested again; the other
    files stay as they were."""
    results = tmp_path / "atari"
    shutil.copytree(whole, results)
    path = results / "pong__ga__0" / "test.json"
    old = json.load(open(path))
    json.dump({k: v for k, v in old.items() if k != "seeds"}, open(path, "w"))
    sticky = os.path.getmtime(results / "pong__ga__0" / "test_sticky0.25.json")
    assert run_suite(results) == 0
    assert json.load(open(path)) | {"wall_s": 0} == old | {"wall_s": 0}
    assert os.path.getmtime(results / "pong__ga__0" / "test_sticky0.25.json") == sticky
    assert capsys.readouterr().out.count("wrote ") == 1


@pytest.mark.slow
def test_the_same_command_again_skips_finished_runs(whole, tmp_path, capsys):
    """Run again, a finished and tested suite trains and tests nothing: its files stay as they were."""
    results = tmp_path / "atari"
    shutil.copytree(whole, results)
    before = {d: sorted(os.listdir(results / d)) for d in folders(results)}
    stamps = {d: os.path.getmtime(results / d / "metrics.jsonl") for d in folders(results)}
    assert run_suite(results) == 0
    out = capsys.readouterr().out
    assert "frostbite seed 0 (1/2, 1 left): finished" in out and "pong seed 0 (2/2, 0 left): finished" in out
    assert "replay" not in out
    assert {d: sorted(os.listdir(results / d)) for d in folders(results)} == before
    assert {d: os.path.getmtime(results / d / "metrics.jsonl") for d in folders(results)} == stamps


@pytest.mark.slow
def test_a_stopped_suite_resumes_every_run_exactly(whole, tmp_path, monkeypatch, capsys):
    """SIGTERM in the second game's second generation: exit 143, one line saying that the same
    command goes on; the same command then finishes both runs with the metrics of the suite that
    was never stopped, bit for bit, and the first game is not trained again."""
    start = progress.Progress.start_phase

    def start_phase(self, gen, name, frames):
        start(self, gen, name, frames)
        if self.label.startswith("pong") and (gen, name) == (1, "train"):
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(progress.Progress, "start_phase", start_phase)
    results = tmp_path / "atari"
    assert run_suite(results) == 143
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith(
        "stopped by SIGTERM in generation 1; the run folder holds every generation before 1"
    )
    assert out[-1] == "suite stopped at pong seed 0; every run is resumable: run the same command again"
    assert len(metrics_without_clock(results / "pong__ga__0")) == 1
    monkeypatch.undo()
    assert run_suite(results) == 0
    out = capsys.readouterr().out
    assert "frostbite seed 0 (1/2, 1 left): finished" in out and "pong seed 0 (2/2, 0 left): from 4," in out
    for d in folders(whole):
        assert metrics_without_clock(results / d) == metrics_without_clock(whole / d), d
        assert (
            json.load(open(results / d / "test.json"))["returns"]
            == json.load(open(whole / d / "test.json"))["returns"]
        )


@pytest.mark.slow
def test_a_larger_budget_continues_a_finished_run(whole, tmp_path, capsys):
    """--frames 10K,frostbite=14K: Frostbite goes on from its checkpoint, and its new best elite is
    tested again if it changed; Pong stays finished."""
    results = tmp_path / "atari"
    shutil.copytree(whole, results)
    assert suite.main([str(results), *GAMES, "--frames", "10K,frostbite=14K", *TINY]) == 0
    out = capsys.readouterr().out
    assert "frostbite seed 0 (1/2, 1 left): from 12," in out and "pong seed 0 (2/2, 0 left): finished" in out
    rows = metrics_without_clock(results / "frostbite__ga__0")
    assert rows[-1]["frames"] >= 14_000 and len(rows) > len(metrics_without_clock(whole / "frostbite__ga__0"))
    test = json.load(open(results / "frostbite__ga__0" / "test.json"))
    assert (
        test["elite_generation"] == json.load(open(results / "frostbite__ga__0" / "best.json"))["generation"]
    )


@pytest.mark.slow
def test_the_table_and_figure_are_built_from_the_results_folder(whole, tmp_path, capsys):
    """nevo plot table RESULTS reads its run folders: a row per game with the test mean, frames
    and hours; --figure draws a panel per game."""
    assert table.main([str(whole), "--out", str(tmp_path / "t"), "--figure", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line for line in out.splitlines() if line.startswith("| ")}
    for game in ("frostbite", "pong"):
        mean = json.load(open(whole / f"{game}__ga__0" / "test.json"))["mean"]
        assert f" {table.fmt_score(mean)} |" in rows[game.title()]
    assert "nevo hours" in out and "| 4,536 |" in rows["Frostbite"]
    assert (tmp_path / "t.md").exists() and (tmp_path / "f.png").stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--games", "frostbyte"], "--games: unknown Atari game 'frostbyte'; did you mean frostbite?"),
        (
            ["--games", "pong", "--frames", "1000"],
            "--frames pong: 1,000 is below one generation (2,400 frames",
        ),
        (["--games", "pong", "--frames", "ten"], "--frames: got 'ten', allowed: a number of frames"),
        (["--games", "pong,skiing", "--frames", "pong=1M"], "--frames: no budget for skiing"),
        (["--games", "pong", "--frames", "1M,venture=2M"], "--frames: 'venture' is not one of --games"),
        (["--games", "pong", "--seeds", "-1"], "--seeds: got '-1', allowed: integers >= 0"),
        (["--games", "pong", "--seed", "3"], "nevo suite: --seed is the suite's to set; use --seeds"),
        (["--games", "pong", "--population", "0"], "--population"),
    ],
)
def test_bad_input_is_one_line(argv, message, tmp_path, capsys):
    """An unknown game, a budget below one generation (population x frame cap), a budget that is
    no number or names no game, a negative seed, a setting the suite owns, a bad run flag: exit 2,
    one line, nothing made."""
    assert suite.main([str(tmp_path / "r"), "--population", "6", "--frame-cap", "400", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()


def test_a_results_folder_made_with_other_settings_is_refused(tmp_path, capsys):
    """A folder whose run has other settings (here the population) is one line naming them; its
    files are left alone. The budget, by contrast, may change."""
    run = tmp_path / "r" / "pong__ga__0"
    run.mkdir(parents=True)
    cfg, _, _, _ = cli.parse_args(["--algo", "ga", "--preset", "quick", "--game", "pong", *TINY], "")
    config.save(cfg, str(run / "config.json"))
    argv = [str(tmp_path / "r"), "--games", "pong", "--frames", "4000", *TINY[:1], "8", *TINY[2:]]
    assert suite.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {run} was made with other settings: --population 6 (folder) against 8 ")
    assert len(err.splitlines()) == 1 and sorted(os.listdir(run)) == ["config.json"]
