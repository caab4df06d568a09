"""experiments/reset_restore.py: the facts a restore-based reset would rest on (ale-py 0.12)."""

from experiments import reset_restore


def test_a_restored_emulator_replays_a_fresh_seeded_episode():
    """After playing on and restoring the state cloned at its seeded reset, an emulator's RAM and
    rewards follow a fresh seeded emulator's step for step; only Amidar's first screen after the
    restore differs (the frame buffer is not part of the state), never its RAM."""
    pong, amidar = reset_restore.main(["--games", "pong", "amidar", "--steps", "60", "--warm-up", "20"])
    assert pong["steps"] == amidar["steps"] == 60
    assert pong["ram_or_reward_differs"] == amidar["ram_or_reward_differs"] == []
    assert pong["screen_differs"] == [] and amidar["screen_differs"] == [0]
    assert pong["load_ms"] > 0 and pong["restore_us"] > 0
