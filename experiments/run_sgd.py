"""Train the MNIST net by SGD from nevo's own gradients: the baseline of ES against SGD (Zhang,
Clune & Stanley 2017, arXiv 1712.06564), or their SGD proxy at a chosen correlation.

    python -m experiments.run_sgd --env mnist                  # the quick preset: minutes on 2 cores
    python -m experiments.run_sgd --env mnist --proxy-rho 0.04  # the proxy that tracks ES (10,000 offspring)
    python -m experiments.run_sgd --resume runs/<folder>       # continue a killed run

Each row of metrics.jsonl: --validate-every iterations of one mini-batch each (the sequence
mini-batch ES draws), then theta on the whole test set (score/test_accuracy).
"""

from __future__ import annotations

import sys

from nevo.runs import sgd


def main(argv=None) -> int:
    return sgd.main(argv, __doc__)


if __name__ == "__main__":
    sys.exit(main())
