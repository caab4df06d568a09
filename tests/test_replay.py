"""Replay: the elite rebuilt from its seed list plays test episodes, reproducibly, and on film."""

import json
import os
import shutil

import pytest
from PIL import Image

from nevo.tools import replay


@pytest.mark.slow
def test_same_elite_same_seed_same_scores(tiny_runs, tmp_path):
    """Two replays with one seed give identical per-episode scores; test.json records them."""
    run = tiny_runs[0]
    args = [run, "--episodes", "3", "--frame-cap", "2000", "--seed", "5"]
    assert replay.main(args) == 0
    first = json.load(open(os.path.join(run, "test.json")))
    assert replay.main(args) == 0
    second = json.load(open(os.path.join(run, "test.json")))
    assert first["returns"] == second["returns"] and len(first["returns"]) == 3
    assert first["frame_cap"] == 2000 and first["mean"] == sum(first["returns"]) / 3


@pytest.mark.slow
def test_gif_is_full_resolution(tiny_runs, tmp_path):
    gif = tmp_path / "elite.gif"
    assert replay.main([tiny_runs[1], "--episodes", "1", "--frame-cap", "800", "--no-save",
                        "--gif", str(gif), "--gif-frames", "60"]) == 0  # fmt: skip
    im = Image.open(gif)
    assert im.size == (160, 210) and im.n_frames > 1
    assert not os.path.exists(os.path.join(tiny_runs[1], "test.json"))


def test_not_a_run_folder_is_one_clear_error(tmp_path, capsys):
    assert replay.main([str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.slow
def test_replay_tests_the_best_elite_unless_asked_for_the_last(tiny_runs, tmp_path):
    """By default the individual of best.json plays; --elite last plays elite.json's; test.json
    names the file."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    best = json.load(open(run / "best.json"))
    json.dump({**best, "generation": 0, "seeds": [12345]}, open(run / "best.json", "w"))
    args = [str(run), "--episodes", "1", "--frame-cap", "400"]
    assert replay.main(args) == 0
    test = json.load(open(run / "test.json"))
    assert (test["elite_file"], test["elite_generation"], test["elite_genome_len"]) == ("best.json", 0, 1)
    assert replay.main([*args, "--elite", "last"]) == 0
    test = json.load(open(run / "test.json"))
    elite = json.load(open(run / "elite.json"))
    assert test["elite_file"] == "elite.json" and test["elite_genome_len"] == len(elite["seeds"])


@pytest.mark.slow
def test_replay_of_a_generation_tests_that_generations_elite_into_its_own_file(tiny_runs, tmp_path, capsys):
    """--elite G plays the elite of generation G (its line of elites.jsonl) into test.gG.json and
    leaves test.json alone: the last generation's gives the scores of --elite last; several
    (--elite G,G) give each the scores of its own call, and refuse --gif; a line
    changed to another seed list plays that list; a generation the run does not keep, or a
    folder without elites.jsonl, is one line naming what it keeps."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    last = json.load(open(run / "elite.json"))["generation"]
    args = [str(run), "--episodes", "2", "--frame-cap", "400"]
    assert replay.main([*args, "--elite", "last"]) == 0
    of_last = json.load(open(run / "test.json"))
    assert replay.main([*args, "--elite", str(last)]) == 0
    of_g = json.load(open(run / f"test.g{last}.json"))
    assert json.load(open(run / "test.json")) == of_last  # untouched
    assert (of_g["elite_file"], of_g["elite_generation"]) == ("elites.jsonl", last)
    assert of_g["returns"] == of_last["returns"] and of_g["lengths"] == of_last["lengths"]
    # several generations, one after another on one evaluator: each the scores of its own call
    assert replay.main([*args, "--elite", "0"]) == 0
    of_0 = json.load(open(run / "test.g0.json"))
    os.remove(run / "test.g0.json"), os.remove(run / f"test.g{last}.json")
    capsys.readouterr()
    assert replay.main([*args, "--elite", f"0,{last},0"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 2  # (a generation named twice is tested once)
    for name, alone in (("test.g0.json", of_0), (f"test.g{last}.json", of_g)):
        both = json.load(open(run / name))
        assert (both["returns"], both["lengths"], both["elite_generation"]) == (
            alone["returns"], alone["lengths"], alone["elite_generation"])  # fmt: skip
    assert replay.main([*args, "--elite", f"0,{last}", "--gif", str(tmp_path / "x.gif")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --gif: records one elite; --elite names 2"]
    lines = (run / "elites.jsonl").read_text().splitlines()
    changed = {**json.loads(lines[0]), "seeds": [12345]}
    (run / "elites.jsonl").write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n")
    assert replay.main([*args, "--elite", "0"]) == 0
    assert json.load(open(run / "test.g0.json"))["elite_genome_len"] == 1
    capsys.readouterr()
    assert replay.main([*args, "--elite", "99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no elite of generation 99" in err[0] and f"keeps 0-{last}" in err[0]
    for bad in ("-1", "1.5", "１２", "first", "1,", ",1", "1,,2", "best,1"):
        assert replay.main([*args, "--elite", bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"error: --elite: got {bad}, allowed: best, last, a generation (>= 0) or several (10,20,30)"
        ]
    os.remove(run / "elites.jsonl")
    assert replay.main([*args, "--elite", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no elites.jsonl" in err[0]


@pytest.mark.slow
def test_a_damaged_best_json_is_one_clear_error(tiny_runs, tmp_path, capsys):
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    (run / "best.json").write_text('{"generation": 1, "se')
    assert replay.main([str(run), "--episodes", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "best.json: damaged" in err[0]


@pytest.mark.slow
def test_a_stopped_test_goes_on_from_its_parts_to_the_scores_of_one_call(tiny_runs, tmp_path, monkeypatch,
                                                                         capsys):  # fmt: skip
    """A test stopped in its third part (parts of 2 episodes here) keeps its first two parts in
    test.partial.json; run again it plays only the rest, and test.json holds the scores, lengths
    and frames of an uninterrupted test; the partial file is gone. A partial file of another
    seed is not taken."""
    run = str(tmp_path / "run")
    shutil.copytree(tiny_runs[0], run)
    args = [run, "--episodes", "7", "--frame-cap", "800", "--seed", "9"]
    assert replay.main(args) == 0
    whole = json.load(open(os.path.join(run, "test.json")))
    os.remove(os.path.join(run, "test.json"))
    monkeypatch.setattr(replay, "PART", 2)
    real, calls = replay.Episodes, []

    def third_part_stopped(ind, seeds, **kwargs):  # the evaluator's episodes of each part
        calls.append(len(seeds))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(ind, seeds, **kwargs)

    monkeypatch.setattr(replay, "Episodes", third_part_stopped)
    capsys.readouterr()
    assert replay.main(args) == 130
    assert "test.partial.json keeps 4 of 7 episodes" in capsys.readouterr().out
    kept = json.load(open(os.path.join(run, replay.partial_file(0.0))))
    assert kept["returns"] == whole["returns"][:4] and not os.path.exists(os.path.join(run, "test.json"))
    played = []

    def counted(ind, seeds, **kwargs):
        played.append(len(seeds))
        return real(ind, seeds, **kwargs)

    monkeypatch.setattr(replay, "Episodes", counted)
    assert replay.main([*args[:-1], "8"]) == 0  # another seed: the partial test is not its own
    assert sum(played) == 7
    os.remove(os.path.join(run, "test.json"))
    runs_partial = {**kept, "seed": 9}
    with open(os.path.join(run, replay.partial_file(0.0)), "w") as f:
        json.dump(runs_partial, f)
    played.clear()
    assert replay.main(args) == 0
    assert played == [2, 1]  # episodes 4-5, then 6
    again = json.load(open(os.path.join(run, "test.json")))
    for key in ("returns", "lengths", "frames", "mean", "std"):
        assert again[key] == whole[key], key
    assert not os.path.exists(os.path.join(run, replay.partial_file(0.0)))


@pytest.mark.slow
def test_a_sticky_test_goes_to_its_own_file_on_held_out_seeds(tiny_runs, tmp_path):
    """--sticky 0.25 writes test_sticky0.25.json and leaves test.json alone; both name their
    protocol and held-out seeds, and sticky actions change the episodes."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    args = [str(run), "--episodes", "4", "--frame-cap", "4000"]
    assert replay.main(args) == 0
    assert replay.main([*args, "--sticky", "0.25"]) == 0
    plain, sticky = (json.load(open(run / name)) for name in ("test.json", "test_sticky0.25.json"))
    assert (plain["sticky"], sticky["sticky"], plain["seeds"], sticky["seeds"]) == (
        0.0,
        0.25,
        "held-out",
        "held-out",
    )
    assert plain["frames"] != sticky["frames"]
