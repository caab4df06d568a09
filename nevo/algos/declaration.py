"""What an algorithm says of itself, once, in its own module (`DECLARATIONS` there), so that the
generation loop and the evaluators ask it instead of comparing names.

The registry (nevo.algos: `declaration`, `make_algo`, `bases_of`) is built from these. Every field
is about the run as a whole; what changes within a run goes through the contract
(nevo.algos.contract.Algorithm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def _no_check(cfg, device: str) -> None:
    """Every device serves it."""


@dataclass(frozen=True)
class Declaration:
    names: tuple[str, ...]  # the --algo values it answers to
    script: str  # the command that runs (and continues) it: python -m experiments.<script>
    make: Callable  # (name, cfg, noise, behaviour) -> the Algorithm
    bases: Callable  # cfg -> the rows its populations are built from (the evaluator caches them)
    summary: Callable  # cfg -> its main settings for the run's first line
    needs_behaviour: bool = False  # novelty search: a behaviour per episode
    check_device: Callable = _no_check  # (cfg, device) -> None, or a ConfigError of one line
