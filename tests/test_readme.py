"""The README's Python examples run as they stand, from a folder outside the repository."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_example(name: str, tmp_path, bound: int) -> list[str]:
    """Run the README's block between <!-- name --> and <!-- /name --> (at most `bound` lines of
    code) in tmp_path with nevo on the path; its output lines."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    (code,) = re.findall(rf"<!-- {name} -->\n```python\n(.*?)```\n<!-- /{name} -->", readme, re.S)
    assert len([line for line in code.splitlines() if line.strip()]) <= bound
    (tmp_path / "example.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": ROOT}
    run = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.splitlines()


@pytest.mark.slow
def test_the_five_line_example_trains_then_plays_the_elite_in_a_gymnasium_loop(tmp_path):
    """nevo.train and nevo.load_policy as the README opens with them: the elite balances the pole
    in the user's own loop, and the run folder is where the example says."""
    *_, last = run_example("five-line-example", tmp_path, 10)
    elite, played, folder = re.fullmatch(r"elite (\d+), played (\d+), run folder (\S+)", last).groups()
    assert int(elite) >= 150 and int(played) >= 150  # a random policy keeps it up for ~20 steps
    assert os.path.isfile(os.path.join(tmp_path, folder, "elite.json"))


@pytest.mark.slow
def test_the_python_example_trains_the_ga_on_a_users_own_environment(tmp_path):
    readme = open(os.path.join(ROOT, "README.md")).read()
    (code,) = re.findall(
        r"<!-- python-example -->\n```python\n(.*?)```\n<!-- /python-example -->", readme, re.S
    )
    assert len(code.strip().splitlines()) <= 30  # the bound on the example
    (tmp_path / "example.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": ROOT}
    run = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = eval(run.stdout.splitlines()[-1].split("} ")[0] + "}")  # the printed metrics() dict
    assert metrics["score/elite_mean"] > 5.0  # the elite walks right (one that stays put scores -30)
