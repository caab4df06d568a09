"""A kind of task of one's own is one file: tests/kinds/corridor.py, a corridor stepped in this
process, with a setting of its own (--length), that lives outside nevo/ and is made known by its
class alone (a subclass of nevo.tasks.Kind). It runs by name from the command line (a new process)
and through nevo.train with the same metrics, resumes exactly in a new process that finds it
again from config.json, runs on a local cluster with one machine's metrics, and novelty search
reads its behaviour. Nothing in nevo/ names it: docs/architecture.md's "Add a task kind" is this
test."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import nevo
from nevo import command, runs, tasks
from nevo.config import EnvConfig
from nevo.evaluation import setup
from nevo.evaluation.in_process import InProcessEvaluator
from tests.dask_procs import ROOT
from tests.helpers import metrics_without_clock, resume_in_a_new_process, run_folder

MODULE = os.path.join(ROOT, "tests", "kinds", "corridor.py")
ARGV = ["--env-module", MODULE, "--env", "corridor", "--length", "9", "--preset", "paper",
        "--population", "12", "--noise-table-size", "2000000"]  # fmt: skip
BUDGET = ["--frame-budget", "6000"]


def train(argv, algo: str = "ga") -> int:
    """`nevo train ALGO` argv, in this process."""
    return command.main(["train", algo, *argv])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The run as a user starts it: `nevo train ga --env-module FILE --env corridor`, in a new
    process."""
    out = tmp_path_factory.mktemp("reference")
    cmd = [sys.executable, "-m", "nevo", "train", "ga", *ARGV, *BUDGET, "--out-dir", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("nevo ga | corridor-9 | net mlp"), done.stdout[:300]
    (folder,) = os.listdir(out)
    return os.path.join(out, folder)


@pytest.mark.slow
def test_it_runs_by_name_and_its_setting_is_saved_in_the_task_section(reference):
    with open(os.path.join(reference, runs.CONFIG)) as f:
        saved = json.load(f)
    assert saved["env"]["env"] == "corridor" and saved["env"]["env_module"] == MODULE
    assert saved["env"]["length"] == 9 and saved["env"]["frame_cap"] == 40  # its own DEFAULTS' cap
    assert saved["device"] == "cpu" and saved["pipeline"] == "sync"  # InProcess's evaluator and device
    rows = runs.read_metrics(reference)
    assert len(rows) > 3 and rows[-1]["frames"] >= 6000
    assert rows[-1]["score/elite_mean"] == 10.0  # the far end, from every validation start
    policy = nevo.load_policy(reference)  # its elite plays, as any run's
    assert policy.act(np.full(1, 0.5, np.float32)) == 1  # right, towards the end worth 10


@pytest.mark.slow
def test_it_resumes_exactly_in_a_new_process(reference, tmp_path):
    """A shorter run, then --resume with the reference's budget in a new process, which knows the
    kind only from config.json."""
    folder = run_folder(train, [*ARGV, "--frame-budget", "2500"], tmp_path)
    assert len(runs.read_metrics(folder)) < len(runs.read_metrics(reference))
    resume_in_a_new_process(folder, BUDGET)
    assert metrics_without_clock(folder) == metrics_without_clock(reference)


@pytest.mark.slow
def test_nevo_train_runs_it_by_name(reference, tmp_path):
    result = nevo.train("ga", env="corridor", env_module=MODULE, length=9, population=12, frames=6000,
                        noise_table_size=2_000_000, out_dir=str(tmp_path), progress=False)  # fmt: skip
    assert result.settings.env.length == 9
    assert metrics_without_clock(result.run_dir) == metrics_without_clock(reference)


@pytest.mark.slow
def test_a_local_cluster_gives_one_machines_metrics(reference, tmp_path):
    """The workers import the module from config.json's path, as --resume does."""
    folder = run_folder(train, [*ARGV, *BUDGET, "--cluster", "local:2"], tmp_path)
    assert metrics_without_clock(folder) == metrics_without_clock(reference)
    assert runs.read_metrics(folder)[-1]["cluster/workers"] == 2


def test_novelty_search_reads_its_behaviour(tmp_path):
    """GA-NS ranks by the novelty of each episode's behaviour, the slots' final position here."""
    folder = run_folder(lambda argv: train(argv, "ga-ns"), [*ARGV, "--frame-budget", "1500"], tmp_path)
    rows = runs.read_metrics(folder)
    assert rows and all(r["ns/novelty_max"] > 0 for r in rows), rows[-1]


def test_its_evaluator_is_found_through_the_class_it_extends():
    """No evaluator declares the corridor: it is stepped in this process (nevo.tasks.InProcess)."""
    env = EnvConfig(env="corridor", env_module=MODULE)
    kind = tasks.kind_of(env)
    assert kind.__name__ == "Corridor" and kind.Settings is not None
    task = tasks.task_for(kind.Settings(env="corridor", env_module=MODULE, length=5))
    assert setup.evaluator_of(task) is InProcessEvaluator
    assert (
        tasks.kind_of(EnvConfig(env="CartPole-v1")).__name__ == "GymTask"
    )  # (the module asks only its name)


def test_a_run_of_a_kind_this_process_knows_saves_its_module(tmp_path):
    """--env corridor without --env-module, in a process that imported the module already: the
    run's config.json still names the module, for the process that resumes it."""
    tasks.kind_of(EnvConfig(env="corridor", env_module=MODULE))  # (the module imported here)
    argv = [a for a in ARGV if a not in ("--env-module", MODULE)]
    folder = run_folder(train, [*argv, "--frame-budget", "300"], tmp_path)
    with open(os.path.join(folder, runs.CONFIG)) as f:
        assert json.load(f)["env"]["env_module"] == MODULE


def test_a_run_whose_module_is_gone_says_so_not_that_its_folder_is_damaged(tmp_path):
    """--resume (and replay) of a run whose kind's module cannot be imported any more: one line
    naming config.json and the module it cannot import; the folder itself is whole."""
    mine = tmp_path / "mine.py"
    mine.write_text(open(MODULE).read())
    argv = [str(mine) if a == MODULE else a for a in ARGV]
    folder = run_folder(train, [*argv, "--frame-budget", "300"], tmp_path / "out")
    mine.rename(tmp_path / "moved.py")
    for cmd in (["train", "--resume", folder], ["replay", folder, "--episodes", "1"]):
        done = subprocess.run([sys.executable, "-m", "nevo", *cmd], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        err = done.stderr
        assert done.returncode == 2 and err.count("\n") == 1, err
        assert f"config.json: --env-module: cannot import '{mine}'" in err and "damaged" not in err, err


def test_a_preset_of_an_algorithm_of_ones_own_sets_the_kinds_own_setting(tmp_path):
    """An algorithm's preset (its declaration's `presets`) made for the corridor sets --length, a
    setting of the kind's own, as a flag would."""
    mine = tmp_path / "opl_corridor.py"
    mine.write_text(
        "from dataclasses import replace\n"
        "from tests.algorithms import one_plus_lambda as base\n"
        "(d,) = base.DECLARATIONS\n"
        "DECLARATIONS = (replace(d, names=('opl-corridor',), on_tasks={}, presets={'corridor': {\n"
        f"    'env': {{'env': 'corridor', 'env_module': {MODULE!r}, 'length': 5}},\n"
        "    'settings': {'lam': 4}, 'run': {'noise_table_size': 2_000_000}}}),)\n"
    )
    argv = ["--algo-module", str(mine), "--preset", "corridor", "--frame-budget", "200"]
    folder = run_folder(lambda a: train(a, "opl-corridor"), argv, tmp_path / "out")
    with open(os.path.join(folder, runs.CONFIG)) as f:
        env = json.load(f)["env"]
    assert (env["env"], env["length"]) == ("corridor", 5), env


def test_a_kind_that_extends_one_of_nevos_takes_its_own_name_only():
    """A subclass of gymnasium's kind (the catch-all) with a KIND of its own takes that name, not
    every name its parent takes."""
    from nevo.tasks import GymTask

    class Wrapped(GymTask):
        KIND = "wrapped-cartpole"

    assert tasks.kind_of(EnvConfig(env="wrapped-cartpole")) is Wrapped
    for name, kind in (("atari", "AtariGame"), ("maze", "Maze"), ("CartPole-v1", "GymTask")):
        assert tasks.kind_of(EnvConfig(env=name)).__name__ == kind, name


def test_a_run_switched_to_one_of_nevos_tasks_keeps_no_module():
    """override to a gymnasium id from a corridor's settings: EnvConfig again, no --env-module."""
    from nevo import config

    cfg = config.override(config.Config(), {"env": "corridor", "env_module": MODULE, "length": 5})
    assert cfg.env.length == 5 and cfg.env.env_module == MODULE
    cfg = config.override(cfg, {"env": "CartPole-v1"})
    assert type(cfg.env) is EnvConfig and cfg.env.env_module == ""


def test_a_setting_of_its_own_named_as_another_sections_is_one_line(tmp_path, capsys):
    mine = tmp_path / "clash.py"
    source = open(MODULE).read().replace('KIND, LABEL = "corridor"', 'KIND, LABEL = "clash"')
    mine.write_text(source.replace("    length: int = setting(11,", "    seed: int = setting(11,"))
    assert train(["--env-module", str(mine), "--env", "clash", "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "'seed' is a setting of both the env and the run sections" in err and err.count("\n") == 1, err


def test_nothing_in_nevo_names_it():
    """A new kind touches its own file: no file of the installed package names the corridor's
    class, its kind or its module (the maze's "east corridor" is a wall's, not this)."""
    import re

    package = os.path.join(ROOT, "nevo")
    names = re.compile(r'Corridor|kinds/corridor|"corridor"')
    named = [os.path.join(d, n) for d, _, files in os.walk(package) for n in files
             if n.endswith(".py") and names.search(open(os.path.join(d, n)).read())]  # fmt: skip
    assert not named


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*ARGV, "--length", "2"], "--length: got 2, allowed: >= 3"),
        (
            ["--env-module", MODULE, "--env", "CartPole-v1", "--length", "9"],
            "unrecognized arguments: --length 9",
        ),
        (
            ["--env-module", "/nowhere/mine.py", "--env", "corridor"],
            "--env-module: cannot import '/nowhere/mine.py'",
        ),
        (
            ["--env-module", os.path.join(ROOT, "tests", "algorithms", "one_plus_lambda.py"), "--env", "x"],
            "declares no kind of task (a subclass of nevo.tasks.Kind with a KIND)",
        ),
        ([*ARGV, "--net", "large"], "--net: got 'large', allowed: a net for vectors"),
        (["--env", "hallway"], "'hallway' is neither an Atari game nor a gymnasium task; try CartPole-v1"),
        (["--env", "hallway"], "(a kind of task of one's own: --env-module)"),
    ],
)
def test_a_bad_module_or_setting_is_one_line(argv, message, tmp_path, capsys):
    assert train([*argv, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
    assert not os.listdir(tmp_path)
