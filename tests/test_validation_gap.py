"""experiments.validation_gap: a deterministic test's starts, their mean, and the elite's
validation gap in standard deviations of its n-episode mean."""

import json
import os

import numpy as np
import pytest

from experiments import validation_gap
from nevo.plots import rundata
from tests.helpers import fake_run


def _test(returns, lengths, validation):
    return {"game": "frostbite", "mean": float(np.mean(returns)), "returns": returns, "lengths": lengths,
            "elite_validation_mean": validation}  # fmt: skip


def test_a_start_is_its_return_and_length_and_each_counts_once():
    """200 episodes on 3 starts, one of them played 150 times: the score is the starts' plain
    mean, not the episodes'; the same return at another length is another start."""
    returns = [100.0] * 150 + [100.0] * 30 + [400.0] * 20
    lengths = [50] * 150 + [60] * 30 + [70] * 20
    assert validation_gap.starts_of(_test(returns, lengths, None)) == {
        (100.0, 50): 150,
        (100.0, 60): 30,
        (400.0, 70): 20,
    }
    row = validation_gap.gap_row(_test(returns, lengths, 450.0), validation_episodes=2)
    assert row["starts"] == 3 and row["exact"] == pytest.approx(200.0) and row["test"] == pytest.approx(130.0)
    sd = np.std([100.0, 100.0, 400.0])  # of the starts, each once
    assert row["noise"] == pytest.approx(sd / np.sqrt(2))
    assert row["gap"] == pytest.approx(250.0) and row["gap_sd"] == pytest.approx(250.0 / (sd / np.sqrt(2)))


def test_it_reads_each_runs_validation_episodes_and_leaves_sticky_and_untested_runs_out(tmp_path, capsys):
    returns, lengths = [10.0, 30.0] * 100, [5, 6] * 100
    test = {"returns": returns, "lengths": lengths, "mean": 20.0, "elite_validation_mean": 25.0}
    runs = tmp_path / "results"
    for name, n in (("frostbite_a", 30), ("frostbite_b", 5)):
        folder = fake_run(runs / name, "frostbite", test=dict(test))
        config = json.load(open(f"{folder}/config.json"))
        config["ga"]["validation_episodes"] = n
        json.dump(config, open(f"{folder}/config.json", "w"))
    fake_run(runs / "gravitar", "gravitar", test={**test, "sticky": 0.25})  # a start does not set the episode
    fake_run(runs / "kangaroo", "kangaroo")  # untested
    assert validation_gap.main([str(runs)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| results/")]
    assert len(rows) == 2
    # starts 10 and 30: mean 20, sd 10; validation 25 is 5 over: 5 / (10 / sqrt(n)) sd
    assert rows[0].startswith("| results/frostbite_a | frostbite | 2 | 20.0 | 20.0 | 25.0 | +5.0 | 30 |")
    assert rows[0].endswith(f"| {5 / (10 / np.sqrt(30)):+.1f} | n/a | n/a |")  # no elite/kept logged
    assert "| 5 | 4.5 | +1.1 |" in rows[1]


def test_the_tested_elites_validations_while_it_was_the_elite_are_averaged(tmp_path):
    """The network tested (elite_generation 3) was the elite from generation 2 (kept at 3 and 4)
    until generation 5 replaced it, where it scored 40 on the validation it lost: its tenure is
    generations 2-4 and that last validation; the generations around it are another network's."""
    folder = fake_run(tmp_path / "r" / "frostbite", "frostbite")
    # (generation, elite mean, kept, previous elite's mean)
    rows = [{"generation": g, "frames": g, "score/elite_mean": m, "elite/kept": k,
             **({"score/previous_elite_mean": p} if p is not None else {})}
            for g, m, k, p in ((0, 10.0, 0, None), (1, 20.0, 0, 5.0), (2, 60.0, 0, 15.0),
                               (3, 90.0, 1, 90.0), (4, 50.0, 1, 50.0), (5, 70.0, 0, 40.0),
                               (6, 65.0, 1, 65.0))]  # fmt: skip
    with open(f"{folder}/metrics.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    run = rundata.load_runs([folder])[0]
    assert validation_gap.tenure(run, 3) == [60.0, 90.0, 50.0, 40.0]
    assert validation_gap.tenure(run, 6) == [70.0, 65.0]  # still the elite: no lost validation yet
    assert validation_gap.tenure(run, 0) == [10.0, 5.0]
    os.remove(f"{folder}/metrics.jsonl")
    with open(f"{folder}/metrics.jsonl", "w") as f:  # a run that did not log elite/kept
        f.write(json.dumps({"generation": 3, "frames": 3, "score/elite_mean": 90.0}) + "\n")
    assert validation_gap.tenure(rundata.load_runs([folder])[0], 3) == []


def test_no_deterministic_test_or_no_run_folder_is_a_one_line_error(tmp_path, capsys):
    fake_run(tmp_path / "r" / "kangaroo", "kangaroo")
    assert validation_gap.main([str(tmp_path / "r")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    assert validation_gap.main([str(tmp_path / "nowhere")]) == 1  # not a run folder: one line too
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere: no such folder" in err


def test_elites_scored_again_on_the_next_validation_are_a_table_of_their_own(tmp_path, capsys):
    """Generation g's score/previous_elite_mean pairs with generation g - 1's elite mean; the new
    elites (elite/kept 0: picked from the candidates) get their own count and gap; a run without
    the metric and without a test is left out, and such runs alone are still a table."""
    runs = tmp_path / "results"
    folder = fake_run(runs / "zaxxon", "zaxxon")  # untested: only the second table
    # (generation, elite mean, kept, previous elite's mean): a kept elite's mean is its score again
    rows = [{"generation": g, "frames": g + 1, "score/elite_mean": m, "elite/kept": k,
             **({"score/previous_elite_mean": p} if p is not None else {})}
            for g, m, k, p in ((0, 100.0, 0, None), (1, 140.0, 0, 70.0), (2, 150.0, 1, 150.0),
                               (3, 130.0, 1, 130.0))]  # fmt: skip
    with open(f"{folder}/metrics.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    fake_run(runs / "kangaroo", "kangaroo")  # neither
    assert validation_gap.main([str(runs)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| Run | Game | generations |")
    # elites of generations 0-2 (100, 140, 150) scored 70, 150 and 130 the next time: gaps +30,
    # -10 and +20; the first two were new elites (mean gap +10)
    assert [line for line in out if line.startswith("| results/")] == [
        "| results/zaxxon | zaxxon | 3 | 130.0 | 116.7 | +13.3 | 2 of 3 | 2 | +10.0 |"
    ]
