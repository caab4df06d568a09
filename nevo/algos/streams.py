"""The random streams of a run: one generator per (run seed, generation, purpose).

Every algorithm draws its episode seeds, mutation seeds, parent choices and initial seeds from
`rng_for`, each purpose a number of the algorithm's own (the GA's in ga.py, ES's in es.py), so a
stream depends only on where it is used, never on what was drawn before: a resumed run draws the
same numbers as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np


def rng_for(seed: int, generation: int, purpose: int) -> np.random.Generator:
    """The generator of purpose `purpose` in generation `generation` of the run seeded `seed`."""
    return np.random.default_rng([seed, generation, purpose])
