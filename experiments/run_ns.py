"""Train with novelty search (GA-NS, NS-ES, NSR-ES, NSRA-ES):
`nevo train ga-ns`'s alias, kept for checkouts and scripts that name it.

    python -m experiments.run_ns [flags]     # the same as: nevo train ga-ns [flags]
    python -m experiments.run_ns --resume runs/<folder>

`nevo train ga-ns --help` (or this script's --help) lists the flags and presets (nevo.command).
"""

from __future__ import annotations

import sys

from nevo.command import train


def main(argv=None) -> int:
    return train("ga-ns", argv)


if __name__ == "__main__":
    sys.exit(main())
