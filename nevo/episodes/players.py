"""Which evaluator plays which kind of task: an evaluator class declares the kinds of task it plays
(`@plays(AtariGame)`), and a task's evaluator is the one declared for the nearest class in its
task's class hierarchy (`player_of`): a kind that extends another (MuJoCo a gymnasium task, a
kind of one's own stepped in this process, nevo.tasks.InProcess) is played as its parent is,
unless an evaluator declares it. The link is written on the evaluator's side because a kind sits
below the evaluator that drives it (nevo.kinds).
"""

from __future__ import annotations

from nevo.settings import ConfigError

_PLAYERS: dict[type, type] = {}  # a kind of task (its class) -> the evaluator class that plays it


def plays(*kinds: type):
    """Class decorator: this evaluator plays tasks of these kinds (and of kinds that extend them).
    The evaluator builds itself for a task with its classmethod `for_task(task, run_cfg, policy,
    weights, device, population, behaviours) -> (evaluator, facts for config.json)`."""

    def declare(evaluator: type) -> type:
        for kind in kinds:
            _PLAYERS[kind] = evaluator
        return evaluator

    return declare


def player_of(task) -> type:
    """The evaluator class that plays task: the one declared for the nearest class of its kind's
    hierarchy; ConfigError in one line where none is."""
    for cls in type(task).__mro__:
        if cls in _PLAYERS:
            return _PLAYERS[cls]
    raise ConfigError(
        f"--env: no evaluator plays {type(task).__name__} tasks ({task.name}); an evaluator class "
        "declares the kinds it plays with nevo.episodes.players.plays"
    )
