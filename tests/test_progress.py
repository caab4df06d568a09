"""The progress display: a live line on a terminal, plain lines elsewhere."""

import io

from nevo.loops.progress import Progress

ROW = {
    "generation": 3,
    "frames": 1_500_000,
    "perf/frames_per_s": 5000.0,
    "score/pop_max": 270.0,
    "score/pop_mean": 161.1,
    "score/elite_mean": 240.0,
}


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_plain_output_is_one_clean_line_per_generation():
    """Not a terminal: no carriage returns or escape codes, and nothing while episodes run."""
    out = io.StringIO()
    p = Progress(budget=3_000_000, stream=out)
    p.start_phase(3, "train", 1_000_000)
    p.episodes(10, 64, 50_000)
    p.generation_done(ROW)
    text = out.getvalue()
    assert text.count("\n") == 1 and "\r" not in text and "\033" not in text
    assert "gen    3" in text and "1.50M" in text and "elite    240.0" in text
    assert "ETA 5m00s" in text  # 1.5M frames left at 5,000 frames/s


def test_terminal_output_redraws_a_status_line():
    out = Terminal()
    p = Progress(budget=3_000_000, stream=out)
    p.start_phase(0, "validate", 0)
    p.episodes(5, 15, 10_000)
    assert out.getvalue().startswith("\r\033[K") and "validate 5/15 eps" in out.getvalue()


def test_a_data_set_shows_its_last_test_accuracy_and_a_skipped_validation_keeps_it():
    """A labelled data set's rows add the test accuracy; a row whose validation was skipped
    (ES's validate_every) shows the last validated score and accuracy, a dash before any."""
    out = io.StringIO()
    p = Progress(budget=3_000_000, stream=out)
    skipped = {k: v for k, v in ROW.items() if k != "score/elite_mean"} | {"score/train_accuracy": 0.5}
    p.generation_done(skipped)
    p.generation_done(ROW | {"score/train_accuracy": 0.5, "score/test_accuracy": 0.9731})
    p.generation_done(skipped)
    first, second, third = out.getvalue().splitlines()
    assert "elite        - | test acc      -%" in first
    assert "elite    240.0 | test acc  97.31%" in second and second.split("|")[4:6] == third.split("|")[4:6]


def test_a_run_s_lines_say_what_its_kind_and_its_step_count(tmp_path, capsys):
    """The loop names the counts: SGD on a data set counts iterations and examples, not
    generations and frames (an Atari run's lines keep "gen" and "frames")."""
    import nevo
    from tests.helpers import small_data

    nevo.train("sgd", env=small_data(), net=[16], frames=300, out_dir=str(tmp_path))
    line = [s for s in capsys.readouterr().out.splitlines() if s.startswith("iteration")][-1]
    assert line.split("|")[1].split()[0] == "examples" and line.split("|")[2].split()[1] == "examples/s"
    p = Progress(budget=3_000_000, stream=io.StringIO())
    p.generation_done(ROW)
    assert p.stream.getvalue().startswith("gen    3 | frames    1.50M |   5.00K frames/s")


def test_a_run_without_progress_prints_nothing(tmp_path, capsys):
    """train(progress=False): the same display, written nowhere."""
    import nevo
    from tests.helpers import small_data

    nevo.train("sgd", env=small_data(), net=[16], frames=300, out_dir=str(tmp_path), progress=False)
    assert capsys.readouterr().out == ""
