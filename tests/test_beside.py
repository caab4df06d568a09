"""tests/conftest.py's BESIDE: the tests it names run in a pytest process of their own beside the
session, and each is reported in the session as it ended there; their fixtures are set up
there only."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFTEST = """
from tests import conftest as c

c.BESIDE = ["test_it.py::test_beside_passes", "test_it.py::test_beside_fails",
            "test_it.py::test_beside_skips"]
c._compile_kernels = lambda session: None  # (nothing here uses a kernel)
from tests.conftest import (pytest_collection_finish, pytest_runtest_logreport,  # noqa: E402,F401
                            pytest_sessionfinish)
"""

TESTS = """
import os, time, pytest

def test_here_while_a_test_beside_runs():
    # this test comes first in the session; the test beside it has started meanwhile
    deadline = time.monotonic() + 120
    while not os.path.exists("started") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists("started") and "NEVO_TESTS_BESIDE" not in os.environ

@pytest.fixture
def costly():  # set up where its test runs, and only there
    with open("set_up", "a") as f:
        f.write("beside\\n" if "NEVO_TESTS_BESIDE" in os.environ else "session\\n")

def test_beside_passes(costly):
    open("started", "w").close()
    assert os.environ["NEVO_TESTS_BESIDE"]  # in the process beside, not the session's

def test_beside_fails():
    assert 6 * 7 == 43, "the answer beside"

def test_beside_skips():
    pytest.skip("nothing to do beside")
"""


def test_tests_beside_run_beside_the_session_and_report_there_as_they_ended(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_it.py").write_text(textwrap.dedent(TESTS))
    env = {**os.environ, "PYTHONPATH": ROOT}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v", "test_it.py"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "test_it.py::test_here_while_a_test_beside_runs PASSED" in out, out
    assert "test_it.py::test_beside_passes PASSED" in out, out
    assert "test_it.py::test_beside_fails FAILED" in out and "the answer beside" in out, out
    assert "test_it.py::test_beside_skips SKIPPED" in out and "nothing to do beside" in out, out
    assert (tmp_path / "set_up").read_text() == "beside\n"  # the fixture: there, not also here
