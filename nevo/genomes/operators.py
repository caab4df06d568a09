"""The mutation operators by name: the one object of a run, chosen once from its name (--mutation).

How a child comes from its parent: `gaussian`, parent + sigma * eps (Such et al. 2017), or a safe
mutation of Lehman et al. 2018 (arXiv 1712.06563) that scales sigma * eps by the parent's output
sensitivity, measured on the parent's experiences: `sm-r` (a line search on the divergence),
`sm-g-sum`, `sm-g-abs`, `sm-g-so` (gradients). The rest of nevo asks the object (`safe`: whether
children need their parent's experiences) instead of comparing names; nevo.genomes.safe_build
dispatches on the safe ones' names.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMES = ("gaussian", "sm-r", "sm-g-sum", "sm-g-abs", "sm-g-so")


@dataclass(frozen=True)
class Mutation:
    """A mutation operator by its name (one of NAMES)."""

    name: str = "gaussian"

    @property
    def safe(self) -> bool:
        """Whether it is a safe mutation: each child built from its parent's experiences."""
        return self.name != "gaussian"

    def __str__(self) -> str:
        return self.name


GAUSSIAN = Mutation("gaussian")


def mutation(name: str) -> Mutation:
    """The operator of a name; ValueError listing the names otherwise."""
    if name not in NAMES:
        raise ValueError(f"--mutation: got {name!r}, allowed: {', '.join(NAMES)}")
    return Mutation(name)
