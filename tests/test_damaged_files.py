"""A damaged run file is one line naming it, or, for the last checkpoint, a fallback to the one
before: never a traceback. Damage here is what a kill, a full disk or a hand edit leaves: a
file cut short, bytes that are not the format, a pickled object array, invalid JSON."""

import json
import os
import shutil

import numpy as np
import pytest

from experiments import run_es, run_ga
from nevo import cli, runs, tasks
from nevo.evaluation import setup
from nevo.loops import elite as elite_files
from nevo.tools import replay
from tests.fixtures.record import PATH, RUNS
from tests.helpers import metrics_without_clock, run_folder


def _cut(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def _garbage(path):
    with open(path, "wb") as f:
        f.write(os.urandom(2000))


def _pickled(path):
    with open(path, "wb") as f:
        np.savez(f, generation=np.array([{"a": 1}], dtype=object), frames=1, wall_s=1.0)


@pytest.fixture(scope="module")
def maze_run(tmp_path_factory):
    """A maze GA run stopped after a few generations (its folder, to copy), and the whole run's metrics."""
    with open(PATH) as f:
        whole = json.load(f)["ga-maze"]
    _, argv = RUNS["ga-maze"]
    argv = [a if a != "7000" else "2000" for a in argv]
    folder = run_folder(run_ga.main, argv, tmp_path_factory.mktemp("maze"))
    assert os.path.exists(os.path.join(folder, runs.PREVIOUS))
    return folder, whole


def _copy(folder, tmp_path):
    dest = str(tmp_path / os.path.basename(folder))
    shutil.copytree(folder, dest)
    return dest


@pytest.mark.parametrize("damage", [_cut, _garbage, _pickled])
@pytest.mark.slow
def test_a_damaged_last_checkpoint_falls_back_to_the_one_before(damage, maze_run, tmp_path, capsys):
    """--resume says so in one line, loses one generation, and the run ends as if never damaged."""
    folder = _copy(maze_run[0], tmp_path)
    damage(os.path.join(folder, runs.CHECKPOINT))
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "checkpoint.npz: damaged" in warnings[0] and runs.PREVIOUS in warnings[0]
    assert metrics_without_clock(folder) == maze_run[1]


@pytest.mark.slow
def test_both_checkpoints_damaged_is_one_line(maze_run, tmp_path, capsys):
    folder = _copy(maze_run[0], tmp_path)
    _garbage(os.path.join(folder, runs.CHECKPOINT))
    _cut(os.path.join(folder, runs.PREVIOUS))
    assert run_ga.main(["--resume", folder]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert f"{runs.CHECKPOINT}: damaged" in err and f"{runs.PREVIOUS}: damaged" in err


@pytest.mark.slow
def test_a_kill_between_the_two_renames_resumes_from_the_newest(maze_run, tmp_path, capsys):
    """save_checkpoint moves the last checkpoint aside before the new one takes its name: a kill
    in between leaves only checkpoint.prev.npz, the newest state, which resume takes silently."""
    folder = _copy(maze_run[0], tmp_path)
    os.replace(os.path.join(folder, runs.CHECKPOINT), os.path.join(folder, runs.PREVIOUS))
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 0
    assert "warning" not in capsys.readouterr().out
    assert metrics_without_clock(folder) == maze_run[1]


@pytest.mark.slow
def test_a_broken_config_json_is_one_line_naming_it(maze_run, tmp_path, capsys):
    folder = _copy(maze_run[0], tmp_path)
    path = os.path.join(folder, runs.CONFIG)
    with open(path, "r+") as f:
        f.seek(5)
        f.write("\x01")  # a control character inside a string: "Invalid control character"
    where = "line 2 column 4 (char 5)"
    for main, argv in ((run_ga.main, ["--resume", folder]), (replay.main, [folder, "--episodes", "1"])):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == f"error: {path}: damaged, not valid JSON (Invalid control character at: {where})\n"
    with open(path, "w") as f:
        json.dump({"algo": "ga", "ga": {"population": "many"}}, f)
    assert run_ga.main(["--resume", folder]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}: damaged, not nevo settings (--population: got 'many', allowed: an int)\n"
    )


@pytest.mark.parametrize("name", [runs.ELITE, runs.BEST])
@pytest.mark.parametrize("damage", [_cut, lambda p: open(p, "w").write("[1, 2]")])
@pytest.mark.slow
def test_a_damaged_elite_file_is_one_line_in_replay(name, damage, maze_run, tmp_path, capsys):
    folder = _copy(maze_run[0], tmp_path)
    damage(os.path.join(folder, name))
    which = "last" if name == runs.ELITE else "best"
    assert replay.main([folder, "--episodes", "1", "--elite", which, "--no-save"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {os.path.join(folder, name)}: damaged") and err.count("\n") == 1


@pytest.mark.slow
def test_an_elite_file_without_its_seeds_is_one_line(maze_run, tmp_path, capsys):
    folder = _copy(maze_run[0], tmp_path)
    path = os.path.join(folder, runs.BEST)
    with open(path) as f:
        best = json.load(f)
    del best["seeds"]
    with open(path, "w") as f:
        json.dump(best, f)
    assert replay.main([folder, "--episodes", "1", "--no-save"]) == 2
    assert capsys.readouterr().err == f"error: {path}: damaged, no seeds\n"


@pytest.mark.slow
def test_a_damaged_theta_is_one_line_in_replay(tmp_path, capsys):
    _, argv = RUNS["es-cartpole"]
    folder = run_folder(run_es.main, [*argv[:-1], "1000"], tmp_path / "es")
    path = elite_files.array_path(folder, "theta")
    np.save(path, np.zeros(7, np.float32))
    assert replay.main([folder, "--episodes", "1", "--no-save"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: damaged, shape (7,) for a net of")
    _garbage(path)
    assert replay.main([folder, "--episodes", "1", "--no-save"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: damaged, not a readable .npy array")


@pytest.mark.parametrize("damage", [_cut, _garbage])
def test_a_damaged_reference_batch_or_behaviours_file_is_a_damaged_file(damage, tmp_path):
    cfg, _, _, _ = cli.parse_args(["--env", "maze", "--vbn", "8"], "")
    task = tasks.task_for(cfg.env)
    ref = setup.reference_batch(cfg, task, str(tmp_path))  # collected and saved
    np.testing.assert_array_equal(setup.reference_batch(cfg, task, str(tmp_path)), ref)
    damage(os.path.join(tmp_path, setup.REF_BATCH))
    with pytest.raises(runs.DamagedFile, match=f"{setup.REF_BATCH}: damaged"):
        setup.reference_batch(cfg, task, str(tmp_path))
    runs.save_array(str(tmp_path), runs.BEHAVIOURS, np.zeros((6, 2), np.float32))
    damage(os.path.join(tmp_path, runs.BEHAVIOURS))
    with pytest.raises(runs.DamagedFile, match=f"{runs.BEHAVIOURS}: damaged"):
        runs.read_array(os.path.join(tmp_path, runs.BEHAVIOURS))


def _metrics(folder, generations):
    for g in range(generations):
        runs.append_metrics(str(folder), {"generation": g, "score/elite_mean": float(g)})
    return os.path.join(str(folder), runs.METRICS)


def test_a_metrics_file_cut_in_a_checkpointed_generation_is_one_warning_on_resume(tmp_path, capsys):
    """A last line cut short whose generation the checkpoint covers: resume keeps the rest and
    says, in one line, which generation lacks its row."""
    path = _metrics(tmp_path, 4)
    with open(path, "rb+") as f:
        f.truncate(os.path.getsize(path) - 10)
    runs.trim_metrics(str(tmp_path), 4)
    out = capsys.readouterr().out
    assert out == (
        f"warning: {path}: damaged lines skipped (1 line cut short or not JSON); "
        "generation 3 lacks a metrics row\n"
    )
    assert [r["generation"] for r in runs.read_metrics(str(tmp_path))] == [0, 1, 2]


def test_a_metrics_line_that_is_not_json_is_one_warning_naming_its_generation(tmp_path):
    path = _metrics(tmp_path, 6)
    with open(path) as f:
        lines = f.readlines()
    lines[2], lines[4] = "not json\n", lines[4][:12] + "\n"  # a line that is not JSON, one cut short
    with open(path, "w") as f:
        f.writelines([*lines, '{"generation": 6, "sc'])  # and the generation in flight, cut: no loss
    said = []
    runs.trim_metrics(str(tmp_path), 6, say=said.append)
    assert said == [
        f"warning: {path}: damaged lines skipped (3 lines cut short or not JSON); "
        "generations 2, 4 lack a metrics row"
    ]
    assert [r["generation"] for r in runs.read_metrics(str(tmp_path))] == [0, 1, 3, 5]


def test_an_intact_metrics_file_resumes_without_a_word(tmp_path):
    path = _metrics(tmp_path, 5)
    with open(path, "a") as f:
        f.write('{"generation": 5, "sc')  # the generation in flight when the run was killed
    said = []
    runs.trim_metrics(str(tmp_path), 5, say=said.append)
    runs.trim_metrics(str(tmp_path), 3, say=said.append)
    assert said == [] and [r["generation"] for r in runs.read_metrics(str(tmp_path))] == [0, 1, 2]


def _bytes_of(folder) -> dict:
    """Every file under folder, by its path relative to it: its bytes (but owner.lock's, which
    names the process that holds the folder: each one that takes it writes its own)."""
    found = {}
    for top, _, names in os.walk(folder):
        for name in names:
            if name == "owner.lock" and top == folder:
                continue
            path = os.path.join(top, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


def _remove_checkpoints(folder):
    os.remove(os.path.join(folder, runs.CHECKPOINT))
    os.remove(os.path.join(folder, runs.PREVIOUS))


def _damage_both_checkpoints(folder):
    _garbage(os.path.join(folder, runs.CHECKPOINT))
    _cut(os.path.join(folder, runs.PREVIOUS))


def _damage_the_only_checkpoint(folder):
    os.remove(os.path.join(folder, runs.PREVIOUS))
    _pickled(os.path.join(folder, runs.CHECKPOINT))


def _damage_config(folder):
    _cut(os.path.join(folder, runs.CONFIG))


def _settings_not_nevos(folder):
    with open(os.path.join(folder, runs.CONFIG), "w") as f:
        json.dump({"algo": "ga", "ga": {"population": "many"}}, f)


REFUSED = [  # (damage, extra argv, what the one line says)
    (_remove_checkpoints, [], "are missing, but metrics.jsonl holds 8 finished generations"),
    (_damage_both_checkpoints, [], "start a new run without --resume"),
    (_damage_the_only_checkpoint, [], "start a new run without --resume"),
    (_damage_config, [], "config.json: damaged, not valid JSON"),
    (_settings_not_nevos, [], "config.json: damaged, not nevo settings"),
    (lambda folder: None, ["--population", "5"], "may change on resume; got --population"),
    (lambda folder: None, ["--algo", "rs"], "may change on resume; got --algo"),
]


@pytest.mark.parametrize("damage, argv, says", REFUSED)
@pytest.mark.slow
def test_a_resume_that_refuses_to_continue_leaves_every_file_as_it_was(damage, argv, says, maze_run, tmp_path,
                                                                        capsys):  # fmt: skip
    """Missing or damaged checkpoints, a damaged config, conflicting flags: --resume stops with one
    line, and every file of the run folder keeps its bytes (its metrics, elites, config)."""
    folder = _copy(maze_run[0], tmp_path)
    damage(folder)
    before = _bytes_of(folder)
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err
    assert _bytes_of(folder) == before


@pytest.mark.slow
def test_a_run_killed_before_its_first_generation_ended_simply_starts_again(maze_run, tmp_path):
    """No checkpoint and no finished generation: nothing to lose, so --resume runs it from the start."""
    folder = _copy(maze_run[0], tmp_path)
    _remove_checkpoints(folder)
    os.remove(os.path.join(folder, runs.METRICS))
    assert run_ga.main(["--resume", folder, "--frame-budget", "7000"]) == 0
    assert metrics_without_clock(folder) == maze_run[1]


def test_an_elite_is_written_as_one_unit(tmp_path, monkeypatch):
    """An ES elite's arrays go under names of their generation and the label (elite.json) last: a
    write that fails after the arrays leaves the label naming its own generation's theta and
    statistics, unchanged; the next whole write removes every array no label names."""
    from types import SimpleNamespace

    from nevo.config import Config

    cfg, run_dir = Config(), str(tmp_path)

    def algo(value):
        return SimpleNamespace(elite=np.full(5, value, np.float32), elite_score=value, best_elite=None,
                               validation_episodes=2)  # fmt: skip

    def stats(value):
        return {"obs_norm": (runs.OBS_NORM, np.full((2, 3), value, np.float32))}

    elite_files.write(run_dir, cfg, 1, algo(1.0), stats(1.0))
    real = runs.write_json

    def failing(folder, name, data):
        raise runs.WriteFailed(name, OSError(28, "No space left on device"))

    monkeypatch.setattr(runs, "write_json", failing)
    with pytest.raises(runs.WriteFailed):
        elite_files.write(run_dir, cfg, 2, algo(2.0), stats(2.0))
    monkeypatch.setattr(runs, "write_json", real)
    label = json.load(open(os.path.join(run_dir, runs.ELITE)))
    assert label["generation"] == 1
    assert (runs.read_array(elite_files.array_path(run_dir, "theta")) == 1.0).all()
    assert (runs.read_array(elite_files.array_path(run_dir, "obs_norm")) == 1.0).all()
    elite_files.write(run_dir, cfg, 3, algo(3.0), stats(3.0))
    arrays = sorted(f for f in os.listdir(run_dir) if f.endswith(".npy"))
    assert arrays == ["obs_norm.g3.npy", "theta.g3.npy"]
