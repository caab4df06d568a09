"""A setting's walk: the calls that carry --population's value from the parsed command line to
where the evaluator and the algorithm use it, traced call by call (docs/architecture.md lists them).

A call is on the walk when the value comes into it by an argument (the parsed flags, a dict of
settings, a config or its section, the number itself) and it either uses the value (the
evaluator's `for_task` sizes its slots by it; the GA's constructor its first population), or calls
on towards such a use, or hands the value back (in what it returns) to a caller on the walk, or
to the command that parsed it; `cli.parse_args`, which takes the raw argv, is the walk's start. A
check that reads the value and returns nothing that holds it is not a step of the walk.
"""

from __future__ import annotations

import argparse
import os
import sys

import pytest

import nevo
from nevo import command

ROOT = os.path.dirname(nevo.__file__)
VALUE = 37  # --population: a number no other setting of the run takes
USES = {("evaluation/in_process.py", "InProcessEvaluator.for_task"), ("algos/ga.py", "GA.__init__")}
END = ("evaluation/in_process.py", "InProcessEvaluator.run")  # the first generation's evaluation
MOST_CALLS, MOST_FILES = 10, 7  # (issue 56's bound was 12)


def holds(x, top: bool = True, name: str = "population", value: int = VALUE) -> bool:
    """Whether x holds setting `name`'s value (--population's by default)."""
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return x == value
    if isinstance(x, argparse.Namespace):
        return getattr(x, name, None) == value
    if isinstance(x, dict):  # settings by name: the value under another name (a truncation fitted
        return x.get(name) == value  # to the population) is another setting's walk
    if isinstance(x, (list, tuple)) and top:
        return any(holds(y, False, name, value) for y in x if not isinstance(y, str))
    if all(hasattr(x, a) for a in ("env", "net", "settings", "algo")):  # a Config: in its section
        return any(
            getattr(getattr(x, part), name, None) == value for part in ("settings", "run", "env", "net")
        )
    fields = getattr(x, "__dataclass_fields__", None)
    if fields is not None and name in fields:  # a settings section, a Plan
        return getattr(x, name, None) == value
    return False


class _End(Exception):
    pass


class _Call:
    def __init__(self, name, parent, takes):
        self.name, self.parent, self.takes = name, parent, takes
        self.hands_back = self.use = self.leads = False


def trace(run, root=ROOT, uses=USES, start=("cli.py", "parse_args"), end=END,
          setting=("population", VALUE)) -> list[tuple[str, str]]:  # fmt: skip
    """The walk of the value of `setting` (its name, its value) that `start` parses, while run()
    runs (until a call of `end`): the (file under root, function) of each call on it, in the
    order the calls began."""
    calls, stack = [], []

    def holding(x) -> bool:
        return holds(x, True, *setting)

    def profile(frame, event, arg):
        code = frame.f_code
        if event not in ("call", "return") or not code.co_filename.startswith(root):
            return
        name = (os.path.relpath(code.co_filename, root), code.co_qualname)
        if event == "call":
            n_args = (
                code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)
            )
            takes = any(holding(frame.f_locals.get(a)) for a in code.co_varnames[:n_args])
            call = _Call(name, stack[-1][1] if stack else None, takes)
            calls.append(call)
            stack.append((frame, call))
            if takes and name in uses:
                call.use = True
                for _, up in stack[:-1]:  # its callers that hold the value lead to a use
                    up.leads = up.leads or up.takes
            if name == end:
                raise _End
        elif stack and stack[-1][0] is frame:
            _, call = stack.pop()
            call.hands_back = call.takes and holding(arg) or name == start

    sys.setprofile(profile)
    try:
        run()
    except _End:
        pass
    finally:
        sys.setprofile(None)
    parse = next(c for c in calls if c.name == start)
    on = {id(c) for c in calls if c.use or c.leads}
    changed = True
    while changed:  # a call that hands the value back to a caller on the walk (or to the parse's caller)
        changed = False
        for c in calls:
            if id(c) not in on and c.hands_back and (id(c.parent) in on or c.parent is parse.parent):
                on.add(id(c))
                changed = True
    return list(dict.fromkeys(c.name for c in calls if id(c) in on))


def test_a_settings_walk_is_at_most_10_calls_in_7_files(tmp_path, monkeypatch, capsys):
    """--population reaches the evaluator and the GA in at most 10 calls in at most 7 files, the
    walk docs/architecture.md lists, call by call."""
    monkeypatch.chdir(tmp_path)
    argv = ["train", "ga", "--env", "CartPole-v1", "--population", str(VALUE), "--frame-budget", "4000"]
    walk = trace(lambda: command.main(argv))
    capsys.readouterr()
    listed = [f"{f}:{n}" for f, n in walk]
    assert ("cli.py", "parse_args") in walk and set(USES) <= set(walk), listed
    assert len(walk) <= MOST_CALLS and len({f for f, _ in walk}) <= MOST_FILES, listed
    doc = open(os.path.join(ROOT, "..", "docs", "architecture.md")).read()
    section = doc[doc.index("## A setting's walk") :].split("\n## ")[0]
    assert [f"`nevo/{f}:{n}`" for f, n in walk] == _listed(section), listed


# --env-slots on Atari: from the parsed flag to the emulator pool it sizes, 8 calls (issue 71's
# goal): the settings' three (parse_args, override, typed), the run's two (loop.run,
# setup.local_evaluator), then nevo/atari/evaluator.py's for_task (which builds the pool) and
# layout, and EmulatorPool.__init__. docs/architecture.md lists them.
ENV_SLOTS, MOST_ENV_SLOTS_CALLS = 11, 8


@pytest.mark.slow
def test_env_slots_walks_to_the_emulator_pool_in_at_most_8_calls(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["train", "ga", "--game", "frostbite", "--population", "22", "--truncation", "3",
            "--frame-cap", "400", "--env-slots", str(ENV_SLOTS), "--processes", "1", "--pipeline", "lockstep",
            "--noise-table-size", "1100000", "--frame-budget", "20000"]  # fmt: skip
    pool = ("atari/pool.py", "EmulatorPool.__init__")
    end = ("atari/evaluator.py", "AtariEvaluator.run")
    walk = trace(lambda: command.main(argv), uses={pool}, end=end, setting=("env_slots", ENV_SLOTS))
    capsys.readouterr()
    listed = [f"{f}:{n}" for f, n in walk]
    assert walk[0] == ("cli.py", "parse_args") and walk[-1] == pool, listed
    assert len(walk) <= MOST_ENV_SLOTS_CALLS, listed
    assert [n for _, n in walk[3:]] == ["run", "local_evaluator", "AtariEvaluator.for_task", "layout",
                                        "EmulatorPool.__init__"], listed  # fmt: skip


def _listed(section: str) -> list[str]:
    """The calls docs/architecture.md's walk lists: each numbered line's first `nevo/FILE:NAME`."""
    import re

    return [m.group(1) for m in re.finditer(r"^\d+\. (`nevo/[^`]+`)", section, re.M)]


# A walk in miniature, for the rule itself: parse -> resolve (hands on) -> check (reads only) ->
# build -> use, beside a write that hands the value back to a caller off the walk.
def _parse():
    return argparse.Namespace(population=VALUE)


def _resolve(flags):
    return {"population": flags.population}


def _check(settings):
    assert settings["population"] > 0


def _written(settings):
    return dict(settings)


def _write(settings):
    _written(settings)


def _use(n):
    return [0] * n


def _build(settings):
    return _use(settings["population"])


def _end():
    pass


def _main():
    settings = _resolve(_parse())
    _check(settings)
    _write(settings)
    _build(settings)
    _end()


def test_the_walk_counts_the_calls_that_carry_the_value_to_its_use_and_no_check():
    """On a walk in miniature: the parse, the call that hands the value on, the one that builds
    with it and the use are the walk; a check that returns nothing, and a call whose result goes
    to a caller off the walk, are not."""
    here = os.path.dirname(__file__)
    walk = trace(_main, here, uses={("test_walk.py", "_use")}, start=("test_walk.py", "_parse"),
                 end=("test_walk.py", "_end"))  # fmt: skip
    assert [n for _, n in walk] == ["_parse", "_resolve", "_build", "_use"]
    assert holds(_parse()) and holds({"population": VALUE}) and not holds({"truncation": VALUE})
