"""experiments/bench/reset_restore.py: the facts a restore-based reset would rest on (ale-py 0.12)."""

import pytest

from experiments.bench import reset_restore


def test_a_restored_emulator_replays_a_fresh_seeded_episode():
    """After playing on and restoring the state cloned at its seeded reset, an emulator's RAM and
    rewards follow a fresh seeded emulator's step for step; only Amidar's first screen after the
    restore differs (the frame buffer is not part of the state), never its RAM."""
    pong, amidar = reset_restore.main(["--games", "pong", "amidar", "--steps", "60", "--warm-up", "20"])
    assert pong["steps"] == amidar["steps"] == 60
    assert pong["ram_or_reward_differs"] == amidar["ram_or_reward_differs"] == []
    assert pong["screen_differs"] == [] and amidar["screen_differs"] == [0]
    assert pong["load_ms"] > 0 and pong["restore_us"] > 0


@pytest.mark.slow
def test_step_rates_time_the_bare_emulator_and_both_vector_layouts():
    """--step-rates adds, per game, the frames/s of a bare ALEInterface and of nevo's vector env with
    one and with 32 emulators on one thread: each of the three emulated frames."""
    argv = ["--games", "pong", "--steps", "10", "--warm-up", "5", "--step-rates", "0.2"]
    (pong,) = reset_restore.main(argv)
    q = pong["step_rates"]
    assert q["game"] == "pong" and q["bare"] > 0 and q["vector_1"] > 0 and q["vector_32"] > 0
