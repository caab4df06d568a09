"""Train with SGD on MNIST, the baseline of ES against SGD (Zhang, Clune & Stanley 2017):
`nevo train sgd`'s alias, kept for checkouts and scripts that name it.

    python -m experiments.run_sgd [flags]     # the same as: nevo train sgd [flags]
    python -m experiments.run_sgd --resume runs/<folder>

`nevo train sgd --help` (or this script's --help) lists the flags and presets (nevo.command).
"""

from __future__ import annotations

import sys

from nevo.command import train


def main(argv=None) -> int:
    return train("sgd", argv)


if __name__ == "__main__":
    sys.exit(main())
