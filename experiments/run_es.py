"""Train with OpenAI evolution strategies (Salimans et al. 2017):
`nevo train es`'s alias, kept for checkouts and scripts that name it.

    python -m experiments.run_es [flags]     # the same as: nevo train es [flags]
    python -m experiments.run_es --resume runs/<folder>

`nevo train es --help` (or this script's --help) lists the flags and presets (nevo.command).
"""

from __future__ import annotations

import sys

from nevo.command import train


def main(argv=None) -> int:
    return train("es", argv)


if __name__ == "__main__":
    sys.exit(main())
