"""The installed `nevo` command: its subcommands, `nevo train ALGO` against the run scripts it
replaces, resume by the run folder's own algorithm, one-line errors, and a plain (non-editable)
`pip install .` into a fresh virtual environment."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from experiments import run_es
from nevo import command
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import CARTPOLE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_ES = [*CARTPOLE, "--frame-budget", "3000"]


def test_help_lists_every_subcommand(capsys):
    assert command.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "replay", "plot", "worker", "roofline", "get-mnist", "compile"):
        assert f"\n  {name} " in out, name


def test_train_help_lists_every_algorithm_of_each_command(capsys):
    from nevo.algos import COMMANDS, OWN

    assert command.main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for name in OWN:
        assert name in out
        assert COMMANDS[name][0].names[0] in command.commands()


@pytest.mark.parametrize(
    "argv, said",
    [
        (["frob"], "nevo: unknown command 'frob'; allowed: train, replay"),
        (["train", "xyz"], "nevo train: unknown algorithm 'xyz'; allowed: ga, rs, es"),
        (["train", "--preset", "quick"], "nevo train: name an algorithm (ga, rs, es"),
        (
            ["train", "--resume", "/no/such/run"],
            "--resume: '/no/such/run' is not a run folder (no config.json)",
        ),
        (
            ["plot", "pie", "runs/x"],
            "nevo plot: unknown kind 'pie'; allowed: curves, throughput, table, mujoco",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, said, capsys):
    assert command.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_a_damaged_run_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "config.json").write_text("{not json")
    assert command.main(["train", "--resume", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume: {tmp_path}/config.json is damaged") and err.count("\n") == 1


def test_a_subcommand_that_returns_what_it_measured_exits_0():
    """`nevo roofline`'s main returns its figures (a dict): the command's exit code is 0, not the
    dict (which sys.exit would print and turn into 1); an int stays the code."""
    assert command._as("nevo roofline", [], lambda argv: {"frames": 1}) == 0
    assert command._as("nevo replay", [], lambda argv: 130) == 130
    assert command._as("nevo plot curves", [], lambda argv: None) == 0


def test_a_run_builds_its_task_once(tmp_path, monkeypatch):
    """The task the command line's check built is the one the run plays (nevo.cli.Parsed), not
    built again and the first dropped."""
    from nevo import tasks

    built = []
    real = tasks.task_for
    monkeypatch.setattr(tasks, "task_for", lambda *a, **k: built.append(a) or real(*a, **k))
    assert command.main(["train", "es", *TINY_ES, "--out-dir", str(tmp_path)]) == 0
    assert len(built) == 1


def test_resume_picks_the_run_folders_own_command(tmp_path):
    """A run folder of any algorithm continues with `nevo train --resume`: the command is its
    algorithm's (ES runs through run_es's presets, GA-NS through run_ns's), read as --resume reads
    config.json (an older layout too)."""
    for algo in ("es", "ga-ns", "rs", "sgd"):
        (tmp_path / "config.json").write_text(json.dumps({"algo": algo, "algo_module": ""}))
        assert command.command_for(["--resume", str(tmp_path)]) == (algo, "")
    # a run folder from before each algorithm had its own section: novelty search's root "ns"
    (tmp_path / "config.json").write_text(json.dumps({"algo": "ns", "ns": {"algo": "nsr-es"}}))
    assert command.command_for(["--resume", str(tmp_path)]) == ("nsr-es", "")


@pytest.mark.slow
def test_nevo_train_runs_what_the_run_script_runs(tmp_path, capsys):
    """`nevo train es ARGS` and `python -m experiments.run_es ARGS` make the same run, metric for
    metric; the run's last line names `nevo train --resume`, which continues it."""
    alias = run_folder(run_es.main, TINY_ES, tmp_path / "alias")
    nevo = run_folder(lambda argv: command.main(["train", "es", *argv]), TINY_ES, tmp_path / "nevo")
    assert metrics_without_clock(nevo) == metrics_without_clock(alias)
    assert json.load(open(os.path.join(nevo, "config.json")))["algo"] == "es"
    capsys.readouterr()
    more = ["--resume", nevo, "--frame-budget", "6000"]
    assert command.main(["train", *more]) == 0
    assert len(metrics_without_clock(nevo)) > len(metrics_without_clock(alias))


@pytest.mark.slow
def test_the_installed_command_works_from_any_folder(tmp_path):
    """The README's install puts `nevo` on PATH: it runs from a folder outside the checkout."""
    exe = shutil.which("nevo")
    assert exe, "no `nevo` on PATH: pip install -r requirements.txt installs it"
    out = subprocess.run([exe, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "nevo train" in out.stdout
    out = subprocess.run([exe, "plot", "curves", "--help"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0 and "RUN_DIR" in out.stdout, out.stderr


@pytest.mark.slow
def test_a_plain_install_into_a_fresh_venv_gives_the_whole_command(tmp_path):
    """`pip install .` (not editable) into a fresh virtual environment installs nevo alone: `nevo`
    trains, plots, replays and runs every other subcommand from another folder, importing the
    installed copy, and neither `experiments` nor `plots` (the checkout's folders) is importable
    there. The venv finds its dependencies in the environment that runs this test (system Python,
    a venv, CI: a path file names its site-packages folders, whose own path files, the checkout's
    editable install among them, are not read); nevo itself is installed from a copy of the checkout."""
    import site

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, exe = venv / "bin" / "python", venv / "bin" / "nevo"
    (here,) = subprocess.run([py, "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                             capture_output=True, text=True, timeout=60).stdout.split()  # fmt: skip
    outer = [p for p in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(p)]
    with open(os.path.join(here, "outer_environment.pth"), "w") as f:
        f.write("\n".join(outer) + "\n")
    build = tmp_path / "build"  # a copy of the checkout's sources: the build leaves nothing in it
    anywhere = shutil.ignore_patterns("__pycache__", "*.egg-info")
    at_top = {".git", "runs", "results", "build", ".whl", ".data", ".gl"}  # (nevo/runs/ is code: kept)

    def skip(folder, names):
        return anywhere(folder, names) | (at_top & set(names) if os.path.samefile(folder, ROOT) else set())

    shutil.copytree(ROOT, build, ignore=skip)
    install = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", str(build)],  # setuptools from the index, as pip does
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import nevo, nevo.plots.table as t, os; print(nevo.__file__, os.path.isfile(t.PUBLISHED))"
    where = subprocess.run([py, "-c", probe], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0 and str(ROOT) not in where.stdout and str(venv) in where.stdout, where
    assert where.stdout.split()[1] == "True"  # the published scores came with the package
    for name in ("experiments", "plots"):
        alone = subprocess.run([py, "-c", f"import {name}"], cwd=work, env=env, capture_output=True,
                               text=True, timeout=60)  # fmt: skip
        assert alone.returncode != 0 and "ModuleNotFoundError" in alone.stderr, (name, alone.stdout)
    train = subprocess.run([str(exe), "train", "es", *TINY_ES, "--out-dir", "runs"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert train.returncode == 0, train.stderr[-2000:]
    (run,) = os.listdir(work / "runs")
    plot = subprocess.run([str(exe), "plot", "curves", f"runs/{run}", "--out", "c"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert plot.returncode == 0 and any(f.startswith("c_") for f in os.listdir(work)), plot.stderr[-2000:]
    replay = subprocess.run([str(exe), "replay", f"runs/{run}", "--episodes", "2"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert replay.returncode == 0 and os.path.isfile(work / "runs" / run / "test.json"), replay.stderr[-2000:]
    for tool in ("suite", "worker", "roofline", "get-mnist", "compile"):
        out = subprocess.run([str(exe), tool, "--help"], cwd=work, env=env, capture_output=True, text=True,
                             timeout=300)  # fmt: skip
        assert out.returncode == 0 and "usage" in out.stdout.lower(), (tool, out.stderr[-2000:])


@pytest.mark.slow
def test_ctrl_c_while_nevo_loads_is_one_line():
    """Ctrl-C in the first moments of `nevo train` (nevo's modules loading, before the run's stop
    handlers are in place): exit 130 and at most one line on stderr, never a traceback."""
    for delay in (0.3, 0.8):
        proc = subprocess.Popen([sys.executable, "-m", "nevo", "train", "ga", "--env", "CartPole-v1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130 and "Traceback" not in err and len(err.splitlines()) <= 1, err


def test_ctrl_c_inside_code_run_from_a_string_still_exits_130(tmp_path):
    """A Ctrl-C that lands in code Python runs from a string (an exec or eval inside an import:
    namedtuple's, SciPy's) while `python -m nevo` loads: the guard's code, 130, not death by SIGINT
    (the first Ctrl-C test above hit this one start in ten)."""
    (tmp_path / "fake_nevo").mkdir()
    (tmp_path / "fake_nevo" / "__main__.py").write_text(
        "import sys\n"
        "import nevo.command\n"
        "nevo.command.main = lambda: exec('raise KeyboardInterrupt')\n"
        "from nevo.entry import main\n"
        "sys.exit(main())\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), ROOT])}
    out = subprocess.run([sys.executable, "-m", "fake_nevo"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 130, (out.returncode, out.stderr)
    assert out.stderr == "stopped by SIGINT (Ctrl-C)\n", out.stderr


def test_every_commands_help_prints(capsys):
    """`nevo train ALGO --help` of every command lists its flags (a help text with a per cent sign,
    SGD's --l2, once stopped argparse)."""
    for name in command.commands():
        with pytest.raises(SystemExit) as stopped:
            command.main(["train", name, "--help"])
        assert stopped.value.code == 0, name
        assert f"usage: nevo train {name}" in capsys.readouterr().out
