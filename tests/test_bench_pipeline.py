"""The emulators' limits (nevo/roofline/emulators.py) and bench_pipeline's table of them beside the
pipeline (experiments/bench/bench_pipeline.py): the frames they count and the processes they leave.
No rate is checked beyond being positive."""

import numpy as np
import psutil
import pytest

from experiments.bench import bench_pipeline
from nevo.atari import worker as emulator_worker
from nevo.atari.emulator import FRAME, STACK, AtariEmulator
from nevo.atari.pool import EmulatorPool
from nevo.config import EnvConfig
from nevo.roofline import emulators


def children(marker: str) -> list:
    """This process's live children whose command line holds marker (not those of the tests run
    beside the session: tests/conftest.py's BESIDE)."""
    from tests.conftest import of_the_process_beside

    found = []
    for c in psutil.Process().children(recursive=True):
        try:
            if of_the_process_beside(c.pid):
                continue
            if c.status() != psutil.STATUS_ZOMBIE and marker in " ".join(c.cmdline()):
                found.append(c)
        except psutil.NoSuchProcess:
            pass
    return found


@pytest.mark.slow
def test_bare_emulators_and_the_pool_count_the_same_frames_as_the_pipeline():
    """The cap (40 frames) ends every episode at its 10th step: over 25 rounds that start 3 steps
    into an episode, each emulator plays 25 x frameskip frames and starts two episodes, each
    counted with its FIRE (its episode frame counter starts at 1), whether stepped bare (play) or
    in the pool (lockstep_frames), as the pipeline counts an episode's frames."""
    n, cap, skip = 2, 40, 4
    actions = np.random.default_rng(0).integers(0, 18, (28, n))
    ems = [AtariEmulator("frostbite", skip, cap) for _ in range(n)]
    obs = np.zeros((n, STACK, *FRAME), np.uint8)
    for e, em in enumerate(ems):
        em.restart(obs[e])
    emulators.play(ems, obs, actions[:3].ravel(), 3)
    bare = emulators.play(ems, obs, actions[3:].ravel(), 25)
    with EmulatorPool("frostbite", skip, cap, n, 2) as pool:
        steps = np.zeros(n, np.int64)
        emulators.lockstep_frames(pool, skip, actions[:3], steps)
        pooled = emulators.lockstep_frames(pool, skip, actions[3:], steps)
        assert steps.tolist() == [8, 8]  # 28 steps: two episodes of 10, then 8 into the third
    assert bare == pooled == n * (25 * skip + 2)


@pytest.mark.slow
def test_the_emulator_roof_is_positive_and_leaves_no_process_behind():
    roof = emulators.emulator_roof("frostbite", processes=2, seconds=0.2, emulators=2)
    assert roof > 0
    assert children("spawn_main") == []


def test_an_emulator_roof_whose_emulators_fail_names_the_process_and_leaves_none():
    with pytest.raises(RuntimeError, match="emulator_roof: process 0: .*no_such_game"):
        emulators.emulator_roof("no_such_game", processes=2, seconds=0.1, emulators=1)
    assert children("spawn_main") == []


@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 4])  # lockstep; the overlap pipeline's first-ready units
def test_the_pool_limit_is_positive_and_closes_its_pool(groups):
    assert emulators.pool_limit(EnvConfig(game="frostbite"), 8, 2, 0.2, groups) > 0
    assert children(emulator_worker.__name__) == []  # (the module a worker process runs)


@pytest.mark.slow  # ~40 s: every limit, then a net's generation in each mode
def test_the_atari_benchmark_puts_each_mode_beside_the_limit_and_the_roof(capsys):
    bench_pipeline.main(["--nets", "small", "--populations", "3", "--frame-cap", "40", "--slots", "2",
                         "--limit-seconds", "0.2", "--no-plain", "--ram"])  # fmt: skip
    out = capsys.readouterr().out
    assert "emulator limit, ale-py's vector env" in out and "emulator roof, bare emulators in" in out
    assert "of the roof" in out  # the pool's limit against the roof
    rows = [line.split() for line in out.splitlines() if line.startswith(" small")]
    assert [r[2] for r in rows] == ["overlap", "lockstep", "workers", "workers+ram"]
    for r in rows:  # frames/s, then its share of the vector env's limit and of the roof
        assert float(r[4].replace(",", "")) > 0 and r[5].endswith("%") and r[6].endswith("%")
    assert out.count("of workers without RAM") == 1  # the RAM row beside the same mode without
