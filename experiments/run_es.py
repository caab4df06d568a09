"""Train with OpenAI evolution strategies (Salimans et al. 2017), on Atari or a gymnasium task.

    python -m experiments.run_es --env CartPole-v1        # a vector task: about a minute on 2 cores
    python -m experiments.run_es                          # the quick preset on Frostbite
    python -m experiments.run_es --preset paper --game frostbite   # 5,000 perturbations, VBN
    python -m experiments.run_es --resume runs/<folder>   # continue a killed run
    python -m experiments.run_es --env HalfCheetah-v5      # a MuJoCo robot: 10M steps, ~7 min
    python -m experiments.run_es --preset mujoco           # OpenAI-ES's Humanoid-v5 settings

Each generation: ask the perturbations -> evaluate -> tell (the update of theta) -> validate
theta -> log -> checkpoint. Run folders, metrics and resume are the GA's; the elite
of an ES run is theta itself, saved as theta.npy beside elite.json.
"""

from __future__ import annotations

import sys

from nevo import cli
from nevo.runs import loop


def main(argv=None) -> int:
    return loop.main(argv, __doc__, cli.ES_PRESETS)


if __name__ == "__main__":
    sys.exit(main())
