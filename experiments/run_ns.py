"""Novelty search: GA-NS (Such et al. 2017) and NS-ES, NSR-ES, NSRA-ES (Conti et al. 2018).

    python -m experiments.run_ns --algo ga-ns --env maze       # the deceptive image maze
    python -m experiments.run_ns --algo nsra-es --env maze
    python -m experiments.run_ns --algo ga-ns --env frostbite  # Atari: behaviour = final RAM
    python -m experiments.run_ns --resume runs/<folder>        # continue a killed run

Behaviour: the maze's final (x, y); on Atari the 128-byte RAM at the end of the episode (read
by the emulator that played it: nevo.tasks.emulator_pool); a MuJoCo robot's
final centre of mass (x, y); another gymnasium task's final observation (nevo.train takes a
function of the last step instead). Novelty of a behaviour
= mean distance to its k nearest neighbours among the archive (and, for GA-NS, the current
population).
- GA-NS: the deep GA selecting on novelty instead of reward; each individual's behaviour joins
  the archive with probability --archive-prob; the elite is the most novel individual, logged
  with its game score (score/elite_mean) and its novelty (ns/elite_novelty).
- NS-ES / NSR-ES / NSRA-ES: a meta-population of --meta-population ES agents; each generation
  the agent to update is drawn with probability proportional to its novelty, its perturbations
  are ranked by novelty (NS-ES), by the mean of reward and novelty ranks (NSR-ES) or by a
  weighted mean whose weight adapts (NSRA-ES, from --reward-weight: towards novelty after
  --nsra-patience generations without a better reward, back towards reward when it improves),
  the agent steps, and its new behaviour joins the archive. The elite is the agent of the best
  validation mean.
The algorithms are nevo.algos.ns's. Each generation: ask -> evaluate -> tell -> ask_validation
(GA-NS: no episode) -> evaluate -> tell_validation -> log -> checkpoint; before the first, the ES
family's agents are evaluated once and their behaviours start the archive. Run folder, metrics,
progress, determinism and resume are the GA's; the archive is in the checkpoint, the last
generation's behaviours in behaviours.npy; elite.json is GA-NS's elite seed list (as the GA's)
or the ES family's best agent's theta (theta.npy, as ES's), for experiments.replay.
"""

from __future__ import annotations

import sys

from nevo import cli
from nevo.runs import loop


def main(argv=None) -> int:
    return loop.main(argv, __doc__, cli.NS_PRESETS)


if __name__ == "__main__":
    sys.exit(main())
