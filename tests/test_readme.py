"""The README's Python example runs as it stands, from a folder outside the repository."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
