"""Train with the deep GA and random search (Such et al. 2017):
`nevo train ga`'s alias, kept for checkouts and scripts that name it.

    python -m experiments.run_ga [flags]     # the same as: nevo train ga [flags]
    python -m experiments.run_ga --resume runs/<folder>

`nevo train ga --help` (or this script's --help) lists the flags and presets (nevo.command).
"""

from __future__ import annotations

import sys

from nevo.command import train


def main(argv=None) -> int:
    return train("ga", argv)


if __name__ == "__main__":
    sys.exit(main())
