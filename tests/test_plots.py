"""Figures and tables from run folders: what they show, not only that files exist."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from nevo import machine, runs
from nevo.plots import curves, rundata, table, throughput
from tests.helpers import fake_run


def metric(path, key):
    return [row[key] for row in map(json.loads, open(os.path.join(path, "metrics.jsonl")))]


@pytest.mark.slow
def test_curves_plot_each_metric_of_a_run_against_frames(tiny_runs):
    """One GA run: four panels (best, mean, elite, the elite on the next generation's validation
    episodes) whose line data are the run's metrics; the last, logged from generation 1, is drawn
    at the frames of the elite's own generation."""
    run = tiny_runs[0]
    fig = curves.plot_curves(rundata.load_runs([run]), "frames")
    axes = fig.get_axes()
    assert [ax.get_title() for ax in axes] == [
        "Population best",
        "Population mean",
        "Elite (validation mean)",
        "Elite on the next validation",
    ]
    with open(os.path.join(run, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    frames = {row["generation"]: row["frames"] / 1e6 for row in rows}
    keys = ("score/pop_max", "score/pop_mean", "score/elite_mean", "score/previous_elite_mean")
    for ax, key in zip(axes, keys):
        (line,) = ax.get_lines()
        mine, shift = [row for row in rows if key in row], int(key == keys[-1])
        assert len(mine) == len(rows) - shift
        np.testing.assert_allclose(line.get_xdata(), [frames[row["generation"] - shift] for row in mine])
        np.testing.assert_allclose(line.get_ydata(), [row[key] for row in mine])
        assert ax.get_xlabel() == "Game frames (millions)" and "Score" in ax.get_ylabel()
    assert axes[-1].get_legend() is not None
    with open(os.path.join(run, "config.json")) as f:
        assert json.load(f)["counts"] == {"frames": "game frames", "generation": "generation"}


@pytest.mark.slow
def test_curves_draw_the_tests_of_single_generations_elites_as_a_panel_of_their_own(tiny_runs, tmp_path):
    """nevo replay --elite G for each generation: a fifth panel, the tests' means at the frames of
    their generations; a sticky test of one generation is not among them."""
    from nevo.tools import replay

    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    rows = runs.read_metrics(str(run))
    for g in (1, 0):
        assert replay.main([str(run), "--elite", str(g), "--episodes", "2", "--frame-cap", "400"]) == 0
    assert (
        replay.main([str(run), "--elite", "1", "--episodes", "2", "--frame-cap", "400", "--sticky", "0.25"])
        == 0
    )
    assert sorted(os.listdir(run)) == sorted([*os.listdir(tiny_runs[0]), "test.g0.json", "test.g1.json",
                                              "test_sticky0.25.g1.json"])  # fmt: skip
    axes = curves.plot_curves(rundata.load_runs([str(run)]), "frames").get_axes()
    assert axes[-1].get_title() == rundata.HELD_OUT_TEST and len(axes) == 5
    (line,) = axes[-1].get_lines()
    np.testing.assert_allclose(line.get_xdata(), [r["frames"] / 1e6 for r in rows[:2]])
    means = [json.load(open(run / f"test.g{g}.json"))["mean"] for g in (0, 1)]
    np.testing.assert_allclose(line.get_ydata(), means)


@pytest.mark.slow
def test_seeds_of_one_configuration_get_a_median_and_a_band(tiny_runs):
    """Two seeds of one config: a line per seed, their median, and a min-max band."""
    fig = curves.plot_curves(rundata.load_runs(tiny_runs), "generations")
    ax = fig.get_axes()[2]  # the elite's validation mean
    labels = [t.get_text() for t in ax.get_legend().get_texts()]  # the panel naming the most
    assert any("median of 2 seeds" in s for s in labels) and any("min-max" in s for s in labels)
    assert len(ax.collections) == 1  # the band
    median = [ln for ln in ax.get_lines() if "median" in ln.get_label()][0]
    per_seed = np.array([metric(r, "score/elite_mean") for r in tiny_runs])
    np.testing.assert_allclose(median.get_ydata(), np.median(per_seed, axis=0))


@pytest.mark.slow
def test_curves_cli_writes_png_and_pdf_for_each_axis(tiny_runs, tmp_path):
    assert curves.main([*tiny_runs, "--out", str(tmp_path / "c")]) == 0
    for x in ("frames", "generations", "hours"):
        for ext in ("png", "pdf"):
            assert (tmp_path / f"c_{x}.{ext}").stat().st_size > 1000


@pytest.mark.slow
def test_throughput_shows_frames_per_second_the_tail_the_forward_share_and_cores_busy(tiny_runs):
    fig = throughput.plot_throughput(rundata.load_runs(tiny_runs[:1]))
    speed, tail, forward, busy = fig.get_axes()
    np.testing.assert_allclose(
        speed.get_lines()[0].get_ydata(), np.array(metric(tiny_runs[0], "perf/frames_per_s")) / 1e3
    )
    np.testing.assert_allclose(tail.get_lines()[0].get_ydata(), metric(tiny_runs[0], "perf/tail_fraction"))
    share = metric(tiny_runs[0], "perf/forward_fraction")
    np.testing.assert_allclose(forward.get_lines()[0].get_ydata(), share)
    assert all(0 < f < 1 for f in share)
    cores = metric(tiny_runs[0], "perf/cores_busy")
    np.testing.assert_allclose(busy.get_lines()[0].get_ydata(), cores)
    assert busy.get_title() == "Cores busy"
    # at most every core, give or take the CPU clock's ticks: the driver's and each of its two
    # emulator processes' CPU seconds are counted in ticks (a tiny generation lasts a fraction of
    # a second, so a tick or two each is a few percent of it)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    for c, gen_s in zip(cores, metric(tiny_runs[0], "perf/gen_s")):
        assert 0 < c <= 1 + 2 * 3 * tick / (gen_s * machine.cores()) + 0.01, (c, gen_s)


@pytest.mark.slow
def test_a_run_still_being_written_plots(tiny_runs, tmp_path):
    """A half-written last metrics line (a run in progress) is skipped, the rest plotted."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"generation": 2, "fram')
    fig = curves.plot_curves(rundata.load_runs([str(run)]), "frames")
    assert len(fig.get_axes()[0].get_lines()[0].get_xdata()) == 2


@pytest.mark.slow
def test_table_compares_with_published_scores_and_marks_missing_games(tiny_runs, tmp_path, capsys):
    """Frostbite gets the published numbers; a game without them shows n/a; no test.json is flagged."""
    frost = shutil.copytree(tiny_runs[0], tmp_path / "frost_run")
    for name in ("test.json", rundata.STICKY_FILE):  # a replay test may have tested this run already
        if os.path.exists(frost / name):
            os.remove(frost / name)
    other = shutil.copytree(frost, tmp_path / "pong_run")
    cfg = json.load(open(other / "config.json"))
    cfg["env"]["game"] = "pong"
    json.dump(cfg, open(other / "config.json", "w"))
    assert table.main([str(frost), str(other)]) == 0
    text = capsys.readouterr().out
    frost = next(line for line in text.splitlines() if line.startswith("| Frostbite"))
    pong = next(line for line in text.splitlines() if line.startswith("| Pong"))
    assert "4,536" in frost and "797.4" in frost  # GA 1B and DQN
    assert pong.count("n/a") == 7  # no sticky-actions test; DQN, ES, A3C, RS, GA 1B, GA 6B
    assert "†" in frost and "not a test score" in text
    assert "Such et al." in text  # sources are printed


@pytest.mark.slow
def test_table_latex(tiny_runs, capsys):
    assert table.main([tiny_runs[0], "--latex"]) == 0
    text = capsys.readouterr().out
    assert "\\begin{tabular}" in text and "Frostbite" in text


@pytest.mark.parametrize("command", [curves.main, throughput.main, table.main])
def test_a_folder_that_is_not_a_run_gets_one_clear_line(command, tmp_path, capsys):
    assert command([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a run folder" in err[0]


@pytest.mark.slow
def test_a_resumed_run_keeps_the_last_copy_of_each_generation(tiny_runs, tmp_path):
    """A generation written twice (a run resumed after a kill) appears once, as last written."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    rows = rundata.read_metrics(str(run / "metrics.jsonl"))
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({**rows[-1], "score/pop_max": 999.0}) + "\n")
    got = rundata.load_run(str(run)).metrics
    assert [r["generation"] for r in got] == [r["generation"] for r in rows]
    assert got[-1]["score/pop_max"] == 999.0


@pytest.mark.slow
def test_table_reports_the_test_mean_and_flags_a_test_of_an_older_elite(tiny_runs, tmp_path):
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    generation = json.load(open(run / "elite.json"))["generation"]
    test = {"mean": 1234.5, "episodes": 200, "frame_cap": 400000, "elite_generation": generation,
            "seeds": "held-out"}  # fmt: skip
    json.dump(test, open(run / "test.json", "w"))
    published = table.load_published()
    header, rows, notes = table.build_rows(rundata.load_runs([str(run)]), published)
    assert rows[0][:2] == ["Frostbite", "1,234.5"]
    assert any("200 test episodes" in n for n in notes)
    json.dump({**test, "elite_generation": generation - 1}, open(run / "test.json", "w"))
    _, rows, notes = table.build_rows(rundata.load_runs([str(run)]), published)
    assert rows[0][1] == "1,234.5" + table.DDAGGER and any("earlier elite" in n for n in notes)


@pytest.mark.slow
def test_table_without_a_test_reports_the_best_elite_and_flags_a_test_of_an_older_best(tiny_runs, tmp_path):
    """Without test.json the table shows best.json's validation mean (dagger); a test of the best
    elite is current until a better elite replaces it in best.json."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    (run / "test.json").unlink(missing_ok=True)  # another test may have replayed this run
    best = json.load(open(run / "best.json"))
    json.dump({**best, "validation_mean": 777.0}, open(run / "best.json", "w"))
    published = table.load_published()
    _, rows, _ = table.build_rows(rundata.load_runs([str(run)]), published)
    assert rows[0][1] == "777" + table.DAGGER
    test = {"mean": 800.0, "episodes": 200, "frame_cap": 400000, "elite_file": "best.json",
            "elite_generation": best["generation"], "seeds": "held-out"}  # fmt: skip
    json.dump(test, open(run / "test.json", "w"))
    _, rows, _ = table.build_rows(rundata.load_runs([str(run)]), published)
    assert rows[0][1] == "800"
    json.dump({**best, "generation": best["generation"] + 1}, open(run / "best.json", "w"))
    _, rows, _ = table.build_rows(rundata.load_runs([str(run)]), published)
    assert rows[0][1] == "800" + table.DDAGGER


@pytest.mark.slow
def test_table_counts_the_published_scores_each_tested_row_beats(tiny_runs, tmp_path):
    """The line under the table counts, per published column, the rows whose current test score is
    above it; a validation mean or a test of an older elite is left out of the count."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    generation = json.load(open(run / "elite.json"))["generation"]
    test = {"mean": 1000.0, "episodes": 200, "frame_cap": 400000, "elite_generation": generation,
            "seeds": "held-out"}  # fmt: skip
    json.dump(test, open(run / "test.json", "w"))
    published = table.load_published()  # Frostbite: DQN 797.4, RS 1B 1,164, A3C 190.5
    _, _, notes = table.build_rows(rundata.load_runs([str(run)]), published)
    (line,) = [n for n in notes if n.startswith("Tested rows above")]
    assert "DQN 1 of 1 (Frostbite)" in line and "A3C 1 of 1 (Frostbite)" in line
    assert "RS (1B) 0 of 1;" in line and "GA (6B) 0 of 1." in line
    json.dump({**test, "elite_generation": generation - 1}, open(run / "test.json", "w"))
    _, _, notes = table.build_rows(rundata.load_runs([str(run)]), published)
    assert not [n for n in notes if n.startswith("Tested rows above")]
    (run / "test.json").unlink()
    _, _, notes = table.build_rows(rundata.load_runs([str(run)]), published)
    assert not [n for n in notes if n.startswith("Tested rows above")]


def test_the_sticky_column_shows_the_sticky_tests_mean_and_counts_it_on_its_own_line(tmp_path, capsys):
    """Beside the paper-protocol test, the column "nevo sticky 0.25" holds test_sticky0.25.json's
    mean (n/a for a run without one), and its own line counts the published scores it beats."""
    from nevo.tools import replay

    assert rundata.STICKY_FILE == replay.test_file(rundata.STICKY)  # the file nevo replay writes
    frost = fake_run(tmp_path / "frostbite", "frostbite", test=1000.0, sticky=900.5)
    gravitar = fake_run(tmp_path / "gravitar", "gravitar", test=500.0)
    header, rows, notes = table.build_rows(rundata.load_runs([frost, gravitar]), table.load_published())
    assert header[1:3] == ["nevo (this work)", "nevo sticky 0.25"]
    assert rows[0][:3] == ["Frostbite", "1,000", "900.5"] and rows[1][:3] == ["Gravitar", "500", "n/a"]
    (line,) = [n for n in notes if n.startswith("Sticky-actions tests above")]
    assert "DQN 1 of 1 (Frostbite)" in line and "RS (1B) 0 of 1;" in line  # 900.5: above 797.4, under 1,164
    (line,) = [n for n in notes if n.startswith("Tested rows above")]
    assert "DQN 2 of 2 (Frostbite, Gravitar)" in line
    assert any("sticky actions 0.25 (Machado et al. 2018" in n and "without sticky" in n for n in notes)
    for flag, cell in (([], "| 900.5 |"), (["--latex"], "& 900.5 &")):
        assert table.main([frost, *flag]) == 0
        out = capsys.readouterr().out
        assert "nevo sticky 0.25" in out and cell in out


def test_a_test_not_held_out_is_marked_and_not_counted(tmp_path):
    """A test.json without "seeds": "held-out" (played on the run's own seed stream) gets the
    section mark and its footnote, and leaves the count line; the same score held out counts."""
    run = fake_run(tmp_path / "frostbite", "frostbite", test={"mean": 1000.0, "seeds": None})
    published = table.load_published()  # Frostbite: DQN 797.4
    _, rows, notes = table.build_rows(rundata.load_runs([run]), published)
    assert rows[0][1] == "1,000" + table.SECTION
    assert any(
        n.startswith(table.SECTION) and "same stream as the run's training episodes" in n for n in notes
    )
    assert not [n for n in notes if n.startswith("Tested rows above")]
    test = json.load(open(os.path.join(run, "test.json")))
    json.dump({**test, "seeds": "held-out"}, open(os.path.join(run, "test.json"), "w"))
    _, rows, notes = table.build_rows(rundata.load_runs([run]), published)
    assert rows[0][1] == "1,000" and not any(n.startswith(table.SECTION) for n in notes)
    assert any(n.startswith("Tested rows above") and "DQN 1 of 1 (Frostbite)" in n for n in notes)


def test_the_summary_has_a_row_per_game_and_a_column_per_results_folder(tmp_path, capsys):
    """--summary: one row a game; each results folder's test mean in its own column, headed by its
    frame budget (a run short of it shows the frames it reached) and its sticky test beside it,
    then each folder's hours, then DQN, RS (1B), GA (1B); n/a where a folder lacks the game. A test
    that was not held out keeps its mark there and is not counted."""
    quick, medium = tmp_path / "atari", tmp_path / "atari100m"
    fake_run(quick / "frostbite__ga__0", "frostbite", test={"mean": 1200.0, "seeds": None}, sticky=1100.0,
             hours=2.0)  # fmt: skip
    fake_run(quick / "pong__ga__0", "pong", test=5.0, hours=0.5)
    fake_run(medium / "frostbite__ga__0", "frostbite", test=2500.0, sticky=1800.0, frames=60_000_000,
             budget=100_000_000, hours=3.0)  # fmt: skip
    header, rows, notes = table.build_summary(
        [(str(f), rundata.load_runs([str(f)])) for f in (quick, medium)], table.load_published()
    )
    assert header == ["Game", "nevo 25M", "nevo 25M, sticky 0.25", "nevo 100M", "nevo 100M, sticky 0.25",
                      "hours 25M", "hours 100M", "DQN", "RS (1B)", "GA (1B)"]  # fmt: skip
    assert rows == [
        [
            "Frostbite",
            "1,200" + table.SECTION,
            "1,100",
            "2,500 at 60M",
            "1,800",
            "2.00",
            "3.00",
            "797.4",
            "1,164",
            "4,536",
        ],
        ["Pong", "5", "n/a", "n/a", "n/a", "0.50", "n/a", "n/a", "n/a", "n/a"],
    ]
    (count,) = [n for n in notes if n.startswith("Current held-out tests above")]
    assert "nevo 25M: none yet." in count  # Frostbite's 1,200 is above RS's 1,164, but not held out
    assert "nevo 25M, sticky 0.25: RS (1B) 0 of 1; GA (1B) 0 of 1." in count  # 1,100: held out, under both
    assert "nevo 100M: RS (1B) 1 of 1 (Frostbite); GA (1B) 0 of 1." in count
    assert "nevo 100M, sticky 0.25: RS (1B) 1 of 1 (Frostbite); GA (1B) 0 of 1." in count
    assert table.main([str(quick), str(medium), "--summary", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("| ")][2:] == [
        "| " + " | ".join(r) + " |" for r in rows
    ]
    assert (tmp_path / "s.md").read_text() == out


def test_the_tables_name_the_machines_the_runs_recorded_and_the_generations_they_did_not(tmp_path):
    """A line under both tables names each machine of the runs' recorded starts (config.json's
    starts) with the number of runs that trained on it, and how many runs, or earlier generations
    of runs, nothing records; no line where no run recorded a start (folders from before)."""
    amd = {"cpu": "AMD EPYC 7B13", "cores": 2, "device": "cpu"}
    intel = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "device": "cpu"}
    gpu = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 16, "device": "cuda"}
    folders = [fake_run(tmp_path / g, g, test=500.0) for g in ("frostbite", "gravitar", "pong", "seaquest")]
    runs = rundata.load_runs(folders)
    published = table.load_published()
    assert not [n for n in table.build_rows(runs, published)[2] if n.startswith("Machines")]
    recorded = ([{"generation": 0, **amd}, {"generation": 12, **intel}], [{"generation": 30, **intel}],
                [{"generation": 0, **gpu}])  # fmt: skip
    for folder, starts in zip(folders, recorded):  # seaquest's folder records none
        config = json.load(open(os.path.join(folder, "config.json")))
        json.dump({**config, "starts": starts}, open(os.path.join(folder, "config.json"), "w"))
    runs = rundata.load_runs(folders)
    assert runs[0].machines == (["AMD EPYC 7B13, 2 cores", "Intel(R) Xeon(R) Processor, 2 cores"], False)
    assert runs[1].machines == (["Intel(R) Xeon(R) Processor, 2 cores"], True)
    expected = (
        "Machines, from the runs' recorded starts (config.json's starts): AMD EPYC 7B13, 2 cores (1 run); "
        "Intel(R) Xeon(R) Processor, 2 cores (2 runs); Intel(R) Xeon(R) Processor, 16 cores, cuda (1 run). "
        "Not recorded (started before runs kept it): 1 run and the generations of 1 before their first "
        "recorded start."
    )
    assert expected in table.build_rows(runs, published)[2]
    assert expected in table.build_summary([(str(tmp_path), runs)], published)[2]


def test_summary_columns_name_their_population_where_the_folders_populations_differ(tmp_path):
    """Two folders of one population are headed by their budgets alone; where the populations
    differ (the quick runs continued beside the medium ones), each column and its hours name it."""
    folders = {name: tmp_path / name for name in ("atari", "atari100m", "atari100m_quick")}
    fake_run(folders["atari"] / "seaquest__ga__0", "seaquest", test=682.0)
    fake_run(folders["atari100m"] / "seaquest__ga__0", "seaquest", test=504.0, budget=100_000_000,
             frames=100_300_000, population=256)  # fmt: skip
    fake_run(folders["atari100m_quick"] / "seaquest__ga__0", "seaquest", test=800.0, budget=50_000_000,
             frames=50_100_000)  # fmt: skip

    def header(*names):
        chosen = [(str(folders[n]), rundata.load_runs([str(folders[n])])) for n in names]
        return table.build_summary(chosen, table.load_published())[0]

    assert header("atari", "atari100m_quick")[1:6] == [
        "nevo 25M", "nevo 25M, sticky 0.25", "nevo 50M", "nevo 50M, sticky 0.25", "hours 25M"]  # fmt: skip
    assert header("atari", "atari100m", "atari100m_quick")[1:10] == [
        "nevo N=64 25M", "nevo N=64 25M, sticky 0.25", "nevo N=256 100M", "nevo N=256 100M, sticky 0.25",
        "nevo N=64 50M", "nevo N=64 50M, sticky 0.25",
        "hours N=64 25M", "hours N=256 100M", "hours N=64 50M"]  # fmt: skip


def test_table_figure_draws_each_folder_in_its_colour_under_its_summary_label(tmp_path, monkeypatch):
    """Given two results folders, a game's panel draws each folder's run and test point in a
    colour of its own, named as the summary's column (one folder: the runs are "nevo")."""
    quick = fake_run(tmp_path / "atari" / "seaquest__ga__0", "seaquest", test=682.0)
    medium = fake_run(tmp_path / "atari100m" / "seaquest__ga__0", "seaquest", test=504.0,
                      budget=100_000_000, frames=100_300_000, population=256)  # fmt: skip
    folders = [(os.path.dirname(path), rundata.load_runs([path])) for path in (quick, medium)]
    figures = []
    monkeypatch.setattr(table.style, "close", figures.append)
    table.figure(folders, table.load_published(), str(tmp_path / "two"))
    table.figure(folders[:1], table.load_published(), str(tmp_path / "one"))
    lines = {ln.get_label(): ln for ln in figures[0].axes[0].get_lines()}
    names = ["nevo N=64 25M", "nevo N=256 100M"]
    assert table.folder_labels(folders) == names
    elites = [lines[f"{n} elite (validation)"] for n in names]
    tests = [lines[f"{n} test"] for n in names]
    assert elites[0].get_color() != elites[1].get_color()
    assert [t.get_color() for t in tests] == [e.get_color() for e in elites]
    assert [t.get_ydata()[0] for t in tests] == [682.0, 504.0]
    one = {ln.get_label() for ln in figures[1].axes[0].get_lines()}
    assert {"nevo elite (validation)", "nevo test"} <= one


def test_table_figure_draws_the_elite_on_the_next_validation_dotted_where_logged(tmp_path, monkeypatch):
    """Generation g's score/previous_elite_mean is generation g - 1's elite on fresh episodes: it
    is drawn dotted at generation g - 1's frames, in the run's colour, named once in the legend;
    a run that does not log it draws no such line and adds no legend entry."""
    new = fake_run(tmp_path / "new" / "seaquest__ga__0", "seaquest", test=700.0)
    rows = [{"generation": g, "frames": 1e6 * (g + 1), "wall_s": 60.0 * g, "score/elite_mean": m,
             **({"score/previous_elite_mean": p} if p is not None else {})}
            for g, m, p in ((0, 500.0, None), (1, 560.0, 430.0), (2, 600.0, 520.0))]  # fmt: skip
    with open(os.path.join(new, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    old = fake_run(tmp_path / "old" / "seaquest__ga__0", "seaquest", test=680.0)
    figures = []
    monkeypatch.setattr(table.style, "close", figures.append)
    for path in (new, old):
        table.figure([(path, rundata.load_runs([path]))], table.load_published(), str(tmp_path / "f"))
    (dotted,) = [ln for ln in figures[0].axes[0].get_lines() if ln.get_gid() == rundata.PREVIOUS_ELITE]
    (elite,) = [ln for ln in figures[0].axes[0].get_lines() if ln.get_label() == "nevo elite (validation)"]
    assert dotted.get_linestyle() == ":" and dotted.get_color() == elite.get_color()
    assert list(dotted.get_xdata()) == [1.0, 2.0] and list(dotted.get_ydata()) == [430.0, 520.0]
    labels = [[t.get_text() for t in f.legends[0].get_texts()] for f in figures]
    named = "next validation (dotted)"
    assert named in labels[0] and named not in labels[1]
    assert not [ln for ln in figures[1].axes[0].get_lines() if ln.get_gid() == rundata.PREVIOUS_ELITE]


@pytest.mark.slow
def test_table_figure_marks_a_run_of_one_generation(tiny_runs, tmp_path, monkeypatch):
    """A game whose run has one generation so far gets a visible point, not an empty panel."""
    run = shutil.copytree(tiny_runs[0], tmp_path / "run")
    rows = open(run / "metrics.jsonl").read().splitlines()
    (run / "metrics.jsonl").write_text(rows[0] + "\n")
    figures = []
    monkeypatch.setattr(table.style, "close", figures.append)
    table.figure([(str(run), rundata.load_runs([str(run)]))], table.load_published(), str(tmp_path / "f"))
    (line,) = [ln for ln in figures[0].axes[0].get_lines() if ln.get_label() == "nevo elite (validation)"]
    assert len(line.get_xdata()) == 1 and line.get_marker() == "."


def test_the_command_line_fails_on_a_non_run_folder_without_a_traceback(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "plots.curves", str(tmp_path)], cwd=root,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: {tmp_path}: not a run folder (no config.json or metrics.jsonl)"
    ]


def test_mujoco_table_finds_when_each_published_level_was_first_reached(tmp_path, capsys):
    """A HalfCheetah run whose validation score steps over TRPO's levels at known rows: the
    table gives those rows' steps and minutes, beside Salimans et al.'s published ES steps."""
    from nevo.plots import mujoco

    run = tmp_path / "HalfCheetah-v5__es__0__x"
    run.mkdir()
    (run / "config.json").write_text(
        json.dumps({"algo": "es", "env": {"env": "HalfCheetah-v5"}, "run": {"seed": 0}})
    )
    scores = [-50.0, 10.0, 500.0, 800.0, 1600.0, 1500.0, 2000.0]  # 2386 never reached
    rows = [{"generation": g, "frames": 1000 * (g + 1), "wall_s": 60.0 * (g + 1), "score/elite_mean": s}
            for g, s in enumerate(scores)]  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = rundata.load_runs([str(run)])[0]
    assert mujoco.first_reached(loaded, -1.35) == (2000.0, 2.0)
    assert mujoco.first_reached(loaded, 793.55) == (4000.0, 4.0)
    assert mujoco.first_reached(loaded, 1589.83) == (5000.0, 5.0)
    assert mujoco.first_reached(loaded, 2385.79) == (None, None)
    assert mujoco.main([str(run), "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "| 2386 (100%) | 5.00M | 2.88M | not reached | - |" in out and "0.00M | 4.0 |" in out
    assert os.path.getsize(tmp_path / "m.png") > 10_000
    assert mujoco.main([str(tiny_runs_dir(tmp_path))]) == 2  # no task with published numbers


def tiny_runs_dir(tmp_path):
    d = tmp_path / "CartPole-v1__ga__0__x"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"algo": "ga", "env": {"env": "CartPole-v1"}}))
    (d / "metrics.jsonl").write_text(json.dumps({"generation": 0, "frames": 1, "wall_s": 1.0}) + "\n")
    return d


def _run_of(config):
    """A run of this config with no metrics: what group_labels reads."""
    from nevo.plots.rundata import Run, flatten

    return Run("x", config, [], None, None, None, settings=flatten(config))


def test_legend_labels_name_each_familys_own_population_and_none_for_sgd():
    """ES and novelty runs read their population from their own settings section; SGD has none
    (no "N=?" in the legend)."""
    from nevo.plots.rundata import group_labels

    configs = [
        {"algo": "es", "es": {"population": 200}, "env": {"env": "mnist"}},
        {"algo": "sgd", "sgd": {"lr": 0.001}, "env": {"env": "mnist"}},
        {"algo": "ga", "ga": {"population": 64}, "env": {"env": "mnist"}},
    ]
    labels = group_labels([[_run_of(c)] for c in configs])
    assert [label.split()[:2] for label in labels] == [["ES", "N=200"], ["SGD", "lr=0.001"], ["GA", "N=64"]]


def test_legend_labels_leave_out_settings_one_version_of_nevo_has_and_another_lacks():
    """Two GA runs made by different versions of nevo (a top-level setting and a run setting that
    only one of them wrote) are told apart by what differs in both: their populations."""
    from nevo.plots.rundata import group_labels

    older = {"algo": "ga", "ga": {"population": 64}, "run": {"seed": 0}, "blas": "Haswell"}
    newer = {"algo": "ga", "ga": {"population": 256}, "run": {"seed": 0, "wandb": ""}}
    assert group_labels([[_run_of(older)], [_run_of(newer)]]) == ["GA N=64", "GA N=256"]
    newer["run"]["seed"] = 1  # a setting both have still shows
    assert group_labels([[_run_of(older)], [_run_of(newer)]]) == ["GA N=64 seed=0", "GA N=256 seed=1"]


def test_runs_of_one_setting_from_two_versions_of_nevo_are_one_configuration(tmp_path):
    """Seeds of one setting group into one row (a median of the seeds) although an older run
    lacks settings a later version writes (in a section both have), names its preset otherwise
    (config.json holds what a preset resolved to) and lacks config.json's counts; a setting both
    have that differs still makes two rows."""
    old = {"algo": "ga", "preset": "quick", "ga": {"population": 256},
           "env": {"env": "atari", "game": "frostbite"}, "run": {"seed": 0, "noise_seed": 42}}  # fmt: skip
    new = json.loads(json.dumps(old))
    new.update(preset="medium", counts={"frames": "game frames", "generation": "generation"})
    new["env"]["sticky"], new["run"]["processes"], new["run"]["seed"] = 0.0, 0, 1
    folders = []
    for name, config in (("a", old), ("b", new)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        row = {"generation": 0, "frames": 100, "wall_s": 1.0}
        (folder / "metrics.jsonl").write_text(json.dumps(row) + "\n")
        folders.append(str(folder))
    assert [len(g) for g in rundata.group_runs(rundata.load_runs(folders))] == [2]
    new["env"]["frameskip"], old["env"]["frameskip"] = 4, 3  # both have it, and it differs
    for folder, config in zip(folders, (old, new)):
        (tmp_path / folder / "config.json").write_text(json.dumps(config))
    assert [len(g) for g in rundata.group_runs(rundata.load_runs(folders))] == [1, 1]
    new["env"]["frameskip"] = 3  # (equal again) a setting the older run lacks, at its default: one row;
    for setting in ("random", "each"):  # else two: the older ran as the default did
        new["env"]["validation_starts"] = setting
        (tmp_path / folders[1] / "config.json").write_text(json.dumps(new))
        want = [2] if setting == "random" else [1, 1]
        assert [len(g) for g in rundata.group_runs(rundata.load_runs(folders))] == want


def test_the_axes_say_what_the_runs_count():
    """An SGD run on a data set counts examples and iterations (config.json's counts), a GA run on
    a gymnasium task agent steps and generations; a folder from before config.json said so reads
    as game frames on Atari; runs that count different things get the plain word."""
    sgd = _run_of(
        {"algo": "sgd", "env": {"env": "mnist"}, "counts": {"frames": "examples", "generation": "iteration"}}
    )
    gym = _run_of(
        {
            "algo": "ga",
            "env": {"env": "CartPole-v1"},
            "counts": {"frames": "agent steps", "generation": "generation"},
        }
    )
    atari = _run_of({"algo": "ga", "env": {"env": "atari", "game": "frostbite"}})
    assert [curves.x_label([sgd], x) for x in curves.X_AXES] == ["Examples (millions)", "Iteration",
                                                                "Wall-clock time (hours)"]  # fmt: skip
    assert curves.x_label([gym], "frames") == "Agent steps (millions)"
    assert (curves.x_label([atari], "frames"), curves.x_label([atari], "generations")) == (
        "Game frames (millions)", "Generation")  # fmt: skip
    assert (curves.x_label([sgd, atari], "frames"), curves.x_label([sgd, atari], "generations")) == (
        "Frames (millions)", "Generation")  # fmt: skip


def test_an_sgd_run_writes_what_its_counters_count():
    """The loop writes in config.json what a row's frames and generation count: its task's kind's
    frames (a data set's examples) and its step's unit (SGD's iterations)."""
    import nevo
    from tests.helpers import small_data

    with tempfile.TemporaryDirectory() as out:
        result = nevo.train("sgd", env=small_data(), net=[16], frames=300, out_dir=out, progress=False)
        with open(os.path.join(result.run_dir, "config.json")) as f:
            assert json.load(f)["counts"] == {"frames": "examples", "generation": "iteration"}
