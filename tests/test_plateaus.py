"""experiments.plateaus: an Atari run's validation level at frame marks, the frames of its last
rise, and its test's share of the GA's published 1B score."""

import json

from experiments import plateaus
from nevo.plots import rundata
from tests.helpers import fake_run


def _rows(folder, means):
    """metrics.jsonl of generations 5M frames apart, with these elite validation means."""
    best = 0.0
    with open(folder / "metrics.jsonl", "w") as f:
        for g, m in enumerate(means):
            best = max(best, m)
            f.write(json.dumps({"generation": g, "frames": 5_000_000 * (g + 1), "wall_s": 60.0 * g,
                                "score/elite_mean": m, "score/best_mean": best}) + "\n")  # fmt: skip


def test_the_level_is_the_median_of_the_window_and_a_lucky_validation_does_not_move_it(tmp_path):
    """Generations at 5M, 10M, ..., 30M: the level at 20M is the median of 15M and 20M's means
    (a 10M window), at 30M the median of 25M and 30M's; a mark past the run is None; the best
    validation last rose at the lucky generation (15M)."""
    run_dir = tmp_path / "results" / "venture__ga__0"
    fake_run(run_dir, "venture", test=600.0, frames=30_000_000)
    _rows(run_dir, [100.0, 200.0, 900.0, 300.0, 320.0, 340.0])
    run = rundata.load_run(str(run_dir))
    assert plateaus.level(run, 20e6) == 600.0  # median of 900 (15M) and 300 (20M)
    assert plateaus.level(run, 30e6) == 330.0
    assert plateaus.level(run, 40e6) is None
    assert plateaus.last_rise(run) == 15e6
    r = plateaus.row(run, {"venture": {"GA_1B": 969}}, marks=(20e6, 30e6, 40e6))
    assert r["levels"] == [600.0, 330.0, None] and r["frames"] == 30e6
    assert r["second_half"] == 330.0 - plateaus.level(run, 15e6) and r["share"] == 600.0 / 969


def test_the_command_prints_a_row_a_run_and_no_share_of_a_negative_score(tmp_path, capsys):
    for game, test in (("venture", 600.0), ("skiing", -8000.0)):
        run_dir = tmp_path / "results" / f"{game}__ga__0"
        fake_run(run_dir, game, test=test, frames=30_000_000)
        _rows(run_dir, [100.0, 200.0, 300.0, 400.0, 500.0, 600.0])
    assert plateaus.main([str(tmp_path / "results"), "--marks", "10,30"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| Game | frames | level at 10M | level at 30M |") and len(lines) == 4
    assert lines[2].startswith("| Skiing | 30.0M | 150.0 | 550.0 | 30.0M |") and lines[2].endswith(
        "| -6,502 | n/a |"
    )
    assert lines[3].endswith("| 600.0 | 969 | 62% |")


def test_bad_marks_and_empty_folders_are_one_line(tmp_path, capsys):
    assert plateaus.main([str(tmp_path), "--marks", "25,x"]) == 2
    assert plateaus.main([str(tmp_path), "--window", "0"]) == 2
    assert plateaus.main([str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("plateaus: ") for line in err)
