"""The random streams of a run: one generator per (run seed, generation, purpose).

Every algorithm draws its episode seeds, mutation seeds, parent choices and initial seeds from
`rng_for`, each purpose a number of the algorithm's own (the GA's in ga.py, ES's in es.py), so a
stream depends only on where it is used, never on what was drawn before: a resumed run draws the
same numbers as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np

from nevo.genomes.noise import SEED_LIMIT
from nevo.settings import ConfigError


def rng_for(seed: int, generation: int, purpose: int) -> np.random.Generator:
    """The generator of purpose `purpose` in generation `generation` of the run seeded `seed`."""
    return np.random.default_rng([seed, generation, purpose])


# Test episodes are held out by their seeds: a run's training and validation episodes have seeds
# in [0, SEED_LIMIT) (every algorithm draws them so, and the generation loop checks it), a test's
# lie in [SEED_LIMIT, 2 * SEED_LIMIT). Under the paper's protocol an Atari test still meets the
# same 30 no-op starts as training; under sticky actions, and on gymnasium and MuJoCo tasks,
# whose episodes the seed makes, it plays episodes no run has seen.
TEST_STREAM = 0x7E57  # the test seeds' stream key


def held_out_seeds(seed: int, n: int) -> np.ndarray:
    """(n,) int64 episode seeds of a test seeded `seed`: never a run's training or validation seed."""
    draws = np.random.default_rng([seed, TEST_STREAM]).integers(0, SEED_LIMIT, n)
    return (SEED_LIMIT + draws).astype(np.int64)


def check_run_seeds(seeds: np.ndarray, algo: str) -> None:
    """ConfigError of one line unless every episode seed a run asks for is below SEED_LIMIT (the
    seeds above are the tests')."""
    if len(seeds) and (int(np.min(seeds)) < 0 or int(np.max(seeds)) >= SEED_LIMIT):
        bad = seeds[(seeds < 0) | (seeds >= SEED_LIMIT)][0]
        raise ConfigError(
            f"algorithm {algo}: asked for an episode seed {int(bad)}; a run's episode seeds lie in "
            f"[0, {SEED_LIMIT}) (those above are held out for tests)"
        )
