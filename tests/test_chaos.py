"""The chaos script (experiments.chaos): a seeded schedule of faults against three real runs (a GA on
Atari, ES, a GA on a local Dask cluster), each followed by `nevo train --resume`, ends every run
exactly as the undisturbed run ends, with no hang, no traceback, no stop without --resume, no
process left and no generation lost or written twice."""

import re
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_a_seeded_schedule_of_faults_changes_no_result():
    cmd = [sys.executable, "-m", "experiments.chaos", "--faults", "9", "--small", "--seed", "3"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    faults = int(re.match(r"chaos: (\d+) faults over 3 runs", last).group(1))
    assert faults == 9, last
    assert (
        "0 hangs, 0 tracebacks, 0 lines without --resume, 0 processes left, 0 generations lost or written "
        "twice; metrics, elite and checkpoint against the undisturbed runs: identical" in last
    ), last
