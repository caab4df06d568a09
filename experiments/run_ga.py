"""Train an Atari agent with the deep genetic algorithm (or random search) of Such et al. 2017.

    python -m experiments.run_ga                         # the quick preset on Frostbite
    python -m experiments.run_ga --preset paper --game frostbite
    python -m experiments.run_ga --preset rs             # random search (T = 0)
    python -m experiments.run_ga --env CartPole-v1       # a gymnasium vector task, in about a minute
    python -m experiments.run_ga --resume runs/<folder>  # continue a killed run
    python -m experiments.run_ga --cluster local:2       # on a Dask cluster (or tcp://host:8786)
    python -m experiments.run_ga --env CartPole-v1 --net deep --mutation sm-g-sum  # safe mutations

Each generation: ask -> evaluate -> tell, validate the top candidates -> log -> checkpoint.
"""

from __future__ import annotations

import sys

from nevo import cli
from nevo.runs import loop


def main(argv=None) -> int:
    return loop.main(argv, __doc__, cli.PRESETS)


if __name__ == "__main__":
    sys.exit(main())
