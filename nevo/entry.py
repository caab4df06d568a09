"""The `nevo` console script (and `python -m nevo`): nevo.command's main behind a guard that
imports nothing heavy, so that a Ctrl-C before a command's own stop handlers are in place (while
nevo's modules load, the first second or two of a run) ends in one line, not a traceback."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from nevo.command import main as command

        return command()
    except KeyboardInterrupt:
        # (a command's own handlers, once in place, end it in their own line and exit code)
        # CPython (3.11) marks a KeyboardInterrupt raised inside code it ran from a string (exec,
        # eval: collections.namedtuple and SciPy do so while they import) as unhandled, caught or
        # not, and `python -m nevo` then ends by SIGINT at exit instead of with the code returned
        # here. Every run from a string clears that mark first: an empty one clears it now.
        exec("")
        sys.stderr.write("stopped by SIGINT (Ctrl-C)\n")
        return 130
