"""What crosses the evaluation boundary: the episodes to play in, their outcomes out.

Every algorithm hands an evaluator `Episodes` and gets `Results` back, whatever runs them (the
Atari pipeline, the synchronous evaluator of in-process tasks). Both are plain arrays, so they
can be sent to another process or machine. This module imports nothing of nevo's: the modules
that use these contracts sit above it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Episodes:
    """What to evaluate: episode e runs individual ind[e] with seed seeds[e]."""

    ind: np.ndarray  # (E,) int64 row of the weights array
    seeds: np.ndarray  # (E,) int64 episode seeds


@dataclass
class Results:
    """Per episode outcomes, in the order of the Episodes asked for."""

    returns: np.ndarray  # (E,) float64 undiscounted, unclipped game score
    lengths: np.ndarray  # (E,) int64 agent steps, no-ops included
    frames: np.ndarray  # (E,) int64 game frames emulated, as ALE counts them
    wall_s: float = 0.0  # wall time of the evaluation
    tail_s: float = 0.0  # of which with fewer live episodes than emulator slots
    forward_s: float = 0.0  # of which in the forward pass (choosing actions)
    behaviours: np.ndarray | None = None  # (E, d) behaviour at each episode's end, where the task gives one

    @property
    def total_frames(self) -> int:
        return int(self.frames.sum())

    @staticmethod
    def concat(parts: list[Results]) -> Results:
        """The results of several evaluations, one after the other (times add up)."""
        return Results(
            np.concatenate([p.returns for p in parts]),
            np.concatenate([p.lengths for p in parts]),
            np.concatenate([p.frames for p in parts]),
            wall_s=sum(p.wall_s for p in parts),
            tail_s=sum(p.tail_s for p in parts),
            forward_s=sum(p.forward_s for p in parts),
            behaviours=None if parts[0].behaviours is None else np.concatenate([p.behaviours for p in parts]),
        )
