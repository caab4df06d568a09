"""The tiny runs' settings that several tests share: real runs small enough for CI, in one place.

Each list is argv for experiments.run_* without a frame budget unless it says so (tests add
--frame-budget, --seed, --out-dir ...). The recorded metrics in tests/fixtures/short_runs.json
depend on ATARI, MAZE and CARTPOLE bit for bit: changing one of them is re-recording the fixtures
(python -m tests.fixtures.record). ATARI and MAZE use the small net, whose default weights are fp16
(--weights auto); the fp32 fixtures add --weights fp32.
"""

# The GA on Atari (Frostbite): the small net, 6 individuals, 400-frame (100-step) episodes.
ATARI = [
    "--preset", "quick", "--game", "frostbite", "--population", "6", "--truncation", "3",
    "--elite-candidates", "2", "--validation-episodes", "2", "--frame-cap", "400",
    "--noise-table-size", "1100000", "--env-slots", "4", "--processes", "1",
]  # fmt: skip

# The maze (run_ga, and run_ns with --algo): 6 individuals, all in flight at once; 3 parents where
# the algorithm has parents (MAZE_ES: novelty search's ES family, which has none).
MAZE_ES = ["--env", "maze", "--population", "6", "--noise-table-size", "1100000", "--env-slots", "6"]
MAZE = [*MAZE_ES, "--truncation", "3"]

# ES on CartPole-v1: 32 individuals (16 mirrored pairs), a small noise table.
CARTPOLE = [
    "--env", "CartPole-v1", "--population", "32", "--validation-episodes", "3",
    "--noise-table-size", "200000",
]  # fmt: skip

# A continuous task (Pendulum-v1), budget included: 8 individuals, 8,000 steps.
PENDULUM = [
    "--env", "Pendulum-v1", "--population", "8", "--frame-budget", "8000", "--noise-table-size", "1000000",
]  # fmt: skip
