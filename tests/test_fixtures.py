"""Results stay put: short reference runs of every algorithm give exactly the recorded metrics.

The metrics (wall-clock fields aside) in tests/fixtures/short_runs.json were recorded by
`python -m tests.fixtures.record`. A change that moves code without meaning to change results
must keep them bit for bit; one that changes results on purpose re-records them in a commit of
its own that says why.
"""

import json

import pytest

from tests.fixtures.record import API_RUNS, PATH, RUNS, metrics

pytestmark = pytest.mark.slow  # each test is a real run


@pytest.fixture(scope="module")
def recorded():
    with open(PATH) as f:
        return json.load(f)


@pytest.mark.parametrize("name", [*RUNS, *API_RUNS])
def test_a_short_run_gives_the_recorded_metrics(name, recorded, tmp_path):
    assert metrics(name, str(tmp_path)) == recorded[name]
