"""An algorithm of one's own is one file: tests/algorithms/one_plus_lambda.py, a (1+lambda) ES
over seed lists that lives outside nevo/ and is made known by its DECLARATIONS alone. It runs by
name from the command line (a new process), through nevo.train, resumes exactly (a new process
finds it again from config.json) and runs on a local cluster with one machine's metrics. Nothing
else is edited for it: docs/architecture.md's "Add an algorithm" is this test."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nevo
from nevo import command, runs
from tests.dask_procs import ROOT
from tests.helpers import metrics_without_clock, resume_in_a_new_process, run_folder

MODULE = os.path.join(ROOT, "tests", "algorithms", "one_plus_lambda.py")
ARGV = ["--algo-module", MODULE, "--algo", "one-plus-lambda", "--env", "CartPole-v1", "--lam", "6",
        "--noise-table-size", "2000000"]  # fmt: skip
BUDGET = ["--frame-budget", "9000"]


def train(argv) -> int:
    """`nevo train` argv, in this process: the algorithm's own command (its declaration's
    script, one-plus-lambda), not one of nevo's."""
    return command.main(["train", *argv])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run as a user starts it: `nevo train NAME --algo-module FILE`, in a new process."""
    out = tmp_path_factory.mktemp("reference")
    cmd = [sys.executable, "-m", "nevo", "train", "one-plus-lambda", *ARGV, *BUDGET, "--out-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        done.stdout.startswith("nevo one-plus-lambda | CartPole-v1 | net mlp")
        and "(1+6) sigma=0.05" in done.stdout
    )
    (folder,) = os.listdir(out)
    return os.path.join(out, folder)


@pytest.mark.slow
def test_it_runs_by_name_and_its_settings_are_saved_as_its_own(reference):
    with open(os.path.join(reference, runs.CONFIG)) as f:
        saved = json.load(f)
    assert (saved["algo"], saved["algo_module"]) == ("one-plus-lambda", MODULE)
    assert saved["one_plus_lambda"] == {
        "lam": 6,
        "sigma": 0.05,
        "validation_episodes": 5,
    }  # sigma: the GA's on gym
    assert not {"ga", "es", "ns", "sgd"} & set(saved)
    rows = runs.read_metrics(reference)
    assert len(rows) > 5 and rows[-1]["frames"] >= 9000
    assert rows[-1]["elite/genome_len"] > 1  # a child beat its parent: the parent's seed list grew
    policy = nevo.load_policy(reference)  # its elite plays, as any run's
    assert policy.act(np.zeros(4, np.float32)) in (0, 1)


@pytest.mark.slow
def test_its_own_extension_writes_a_metric_and_a_file(reference):
    """The module's extension (its declaration lists it; nevo names it nowhere): a count in every
    metrics row and a file in the run folder that holds the last one."""
    counts = [r["opl/parent_changes"] for r in runs.read_metrics(reference)]
    assert counts[0] == 1 and counts == sorted(counts) and counts[-1] > 1  # a child beat its parent
    with open(os.path.join(reference, "parent_changes.json")) as f:
        assert json.load(f) == {"generation": len(counts) - 1, "changes": counts[-1]}


@pytest.mark.slow
def test_it_resumes_exactly_in_a_new_process(reference, tmp_path):
    """A shorter run, then --resume with the reference's budget in a new process: that process
    knows the algorithm only from config.json; its extension counts on from the checkpoint."""
    folder = run_folder(train, [*ARGV, "--frame-budget", "4000"], tmp_path)
    assert len(runs.read_metrics(folder)) < len(runs.read_metrics(reference))
    resume_in_a_new_process(folder, BUDGET)
    assert metrics_without_clock(folder) == metrics_without_clock(reference)
    name = "parent_changes.json"
    with open(os.path.join(folder, name)) as f, open(os.path.join(reference, name)) as g:
        assert json.load(f) == json.load(g)


@pytest.mark.slow
def test_nevo_train_runs_it_by_name(reference, tmp_path):
    result = nevo.train("one-plus-lambda", env="CartPole-v1", algo_module=MODULE, frames=9000, lam=6,
                        noise_table_size=2_000_000, out_dir=str(tmp_path), progress=False)  # fmt: skip
    assert result.settings.settings.lam == 6
    assert metrics_without_clock(result.run_dir) == metrics_without_clock(reference)


@pytest.mark.slow
def test_a_local_cluster_gives_one_machines_metrics(reference, tmp_path):
    folder = run_folder(train, [*ARGV, *BUDGET, "--cluster", "local:2"], tmp_path)
    assert metrics_without_clock(folder) == metrics_without_clock(reference)
    assert runs.read_metrics(folder)[-1]["cluster/workers"] == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--algo-module", MODULE], "--algo-module: name the algorithm it declares with --algo"),
        (
            ["--algo-module", "/nowhere/mine.py", "--algo", "x"],
            "--algo-module: cannot import '/nowhere/mine.py'",
        ),
        (
            ["--algo-module", MODULE, "--algo", "two-plus-lambda"],
            "--algo: got 'two-plus-lambda', allowed for",
        ),
        ([*ARGV, "--lam", "0"], "--lam: got 0, allowed: an integer >= 1"),
        ([*ARGV, "--population", "8"], "unrecognized arguments: --population 8"),
        (["--algo", "one-plus-lambda"], "nevo train: unknown algorithm 'one-plus-lambda'"),
    ],
)
def test_a_bad_algorithm_module_or_setting_is_one_line(argv, message, tmp_path, capsys):
    assert train([*argv, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not os.listdir(tmp_path)


def test_nevos_own_commands_refuse_it_in_one_line(tmp_path, capsys):
    """It is its own command's (its declaration's script), not the GA's: run_ga names the command
    that runs it, and knows it not at all without its module."""
    from experiments import run_ga

    assert run_ga.main([*ARGV, "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: --algo: 'one-plus-lambda' is its own command's: nevo train one-plus-lambda --algo-module "
        f"{MODULE} runs it\n"
    )
    assert run_ga.main(["--algo", "one-plus-lambda", "--out-dir", str(tmp_path)]) == 2
    assert "--algo: got 'one-plus-lambda', allowed: ga, rs" in capsys.readouterr().err
    assert not os.listdir(tmp_path)


def test_a_module_may_not_take_a_name_nevo_has(tmp_path, capsys):
    mine = tmp_path / "mine.py"
    source = open(MODULE).read().replace('names=("one-plus-lambda",)', 'names=("ga",)')
    mine.write_text(source)
    assert train(["--algo-module", str(mine), "--algo", "ga", "--out-dir", str(tmp_path)]) == 2
    assert "declares 'ga', which is already an algorithm" in capsys.readouterr().err
