"""How far an Atari run's elite validation mean overstates its held-out test, against the noise of
the validation itself.

    python -m experiments.validation_gap results/atari100m results/atari100m_quick

The deep GA (Such et al. 2017, arXiv 1712.06567) keeps as its best elite the candidate with the
highest validation mean, each candidate scored on a few episodes. Under the paper's test protocol
(no sticky actions, 1-30 random no-ops, the reference's start) an episode's outcome is set by its
no-op count alone, so a policy has one true score: the mean over its 30 starts, which a test of
200 episodes only estimates. A validation of n episodes draws n starts at random, and its mean
has a standard deviation of sd(30 starts) / sqrt(n). The best of many noisy validations
overstates its policy (the winner's curse); the gap against that noise says how much of the
elite's choice was luck.

For each run folder whose test.json is a deterministic test (sticky 0), this prints: the distinct
outcomes its test episodes reached (a start is told apart by its return and length together;
two starts that play the same episode count as one), their mean (the 30-start score where all 30
were reached), the test's mean, the elite's validation mean, the gap (validation minus the
30-start score) and that gap in standard deviations of an n-episode validation mean (n from the
run's config). numpy only; reads run folders, plays nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

import numpy as np

from nevo.plots import rundata


def starts_of(test: dict) -> Counter:
    """The test's distinct outcomes, (return, length) -> how many of its episodes reached it."""
    return Counter((float(r), int(n)) for r, n in zip(test["returns"], test["lengths"], strict=True))


def gap_row(test: dict, validation_episodes: int) -> dict:
    """One deterministic test's numbers (see the module's docstring)."""
    returns = np.array([r for r, _ in starts_of(test)], np.float64)
    exact = float(returns.mean())
    noise = float(returns.std() / np.sqrt(validation_episodes))
    validation = test.get("elite_validation_mean")
    gap = None if validation is None else float(validation) - exact
    return {
        "starts": len(returns),
        "exact": exact,
        "test": float(test["mean"]),
        "validation": validation,
        "gap": gap,
        "noise": noise,
        "gap_sd": None if gap is None or noise == 0 else gap / noise,
    }


def validation_episodes_of(run: rundata.Run) -> int | None:
    """The run's validation episodes per candidate, from its settings (whatever their section)."""
    return next((int(v) for k, v in run.settings.items() if k[-1] == "validation_episodes"), None)


def _fmt(v, spec=",.1f") -> str:
    return "n/a" if v is None else format(v, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("paths", nargs="+", help="run folders, or folders of run folders")
    args = p.parse_args(argv)
    try:
        runs = rundata.load_runs(args.paths)
    except rundata.NotARunFolder as e:
        print(f"validation_gap: {e}", file=sys.stderr)
        return 1
    rows = []
    for run in runs:
        test, n = run.test, validation_episodes_of(run)
        if not test or test.get("sticky", 0.0) or not test.get("returns") or not n:
            continue  # no test yet, or one under sticky actions, where a start does not set the episode
        where = os.path.abspath(run.path)
        name = f"{os.path.basename(os.path.dirname(where))}/{os.path.basename(where)}"
        rows.append((name, n, {**gap_row(test, n), "game": run.game}))
    if not rows:
        print("validation_gap: no deterministic test.json in " + ", ".join(args.paths), file=sys.stderr)
        return 1
    print("| Run | Game | starts reached | their mean | test (200) | elite validation | gap | "
          "validation episodes | sd of their mean | gap in sd |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for folder, n, r in rows:
        print(f"| {folder} | {r['game']} | {r['starts']} | {_fmt(r['exact'])} | {_fmt(r['test'])} | "
              f"{_fmt(r['validation'])} | {_fmt(r['gap'], '+,.1f')} | {n} | {_fmt(r['noise'])} | "
              f"{_fmt(r['gap_sd'], '+.1f')} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
