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
run's config). Beside them: the generations the tested network was the elite (it is kept
unchanged while no candidate validates higher, and each generation validates it again on new
episodes) and the mean of all those validations (with, where the run logs it, the one on which it
lost the elite): where the best elite's single highest validation runs high, the mean of its
tenure does not.

A second table, for GA runs that log it (score/previous_elite_mean, since 2026-12-04), measures
the same overstatement without a test: each generation's elite scored again on the next
generation's validation episodes, seeds it was not picked on. It prints the generations compared,
the elites' validation means and their next-validation means (each averaged over those
generations), the mean gap, how many of the elites scored lower the second time, and the number
and mean gap of the new elites among them (picked from the candidates that generation; the others
were kept, and their validation mean was itself a score again). numpy only; reads run folders,
plays nothing.
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


def next_validation_row(run: rundata.Run) -> dict | None:
    """Each elite's validation mean beside its mean on the next generation's validation, over the
    generations where both are logged, and over those of them whose elite was new (picked from
    the candidates rather than kept: elite/kept 0); None where the run logs no such mean."""
    picked_on = dict(zip(*run.series("score/elite_mean")))
    kept = dict(zip(*run.series("elite/kept")))
    rows = [(picked_on[g], v, not kept.get(g, 0)) for g, v in zip(*run.next_validation()) if g in picked_on]
    if not rows:
        return None
    picked, again, new = np.array(rows, np.float64).T
    gap, new = picked - again, new.astype(bool)
    return {
        "generations": len(rows),
        "picked": float(picked.mean()),
        "again": float(again.mean()),
        "gap": float(gap.mean()),
        "lower": int(np.count_nonzero(gap > 0)),
        "new": int(new.sum()),
        "new_gap": float(gap[new].mean()) if new.any() else None,
    }


def tenure(run: rundata.Run, generation: int) -> list[float]:
    """The validation means of the network that was the elite at `generation`, over every
    generation it was (elite/kept 1 links a generation's elite to the one before), and its mean on
    the validation after, where it lost the elite (score/previous_elite_mean); [] where the run
    does not log elite/kept."""
    rows = {int(r["generation"]): r for r in run.metrics}
    if "elite/kept" not in rows.get(generation, {}):
        return []
    first, last = generation, generation
    while rows[first].get("elite/kept") == 1 and first - 1 in rows:
        first -= 1
    while rows.get(last + 1, {}).get("elite/kept") == 1:
        last += 1
    means = [float(rows[g]["score/elite_mean"]) for g in range(first, last + 1)]
    lost = rows.get(last + 1, {}).get(rundata.PREVIOUS_ELITE)
    return means + ([float(lost)] if lost is not None else [])


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
    rows, again = [], []
    for run in runs:
        where = os.path.abspath(run.path)
        name = f"{os.path.basename(os.path.dirname(where))}/{os.path.basename(where)}"
        if (row := next_validation_row(run)) is not None:
            again.append((name, {**row, "game": run.game}))
        test, n = run.test, validation_episodes_of(run)
        if not test or test.get("sticky", 0.0) or not test.get("returns") or not n:
            continue  # no test yet, or one under sticky actions, where a start does not set the episode
        means = tenure(run, int(test["elite_generation"])) if "elite_generation" in test else []
        held = {"tenure": len(means), "tenure_mean": float(np.mean(means)) if means else None}
        rows.append((name, n, {**gap_row(test, n), **held, "game": run.game}))
    if not rows and not again:
        print("validation_gap: no deterministic test.json and no score/previous_elite_mean in "
              + ", ".join(args.paths), file=sys.stderr)  # fmt: skip
        return 1
    if rows:
        print_tests(rows)
    if again:
        print("\n" if rows else "", end="")
        print_next_validations(again)
    return 0


def print_tests(rows: list) -> None:
    """The table of deterministic tests (the module's docstring)."""
    print("| Run | Game | starts reached | their mean | test (200) | elite validation | gap | validation "
          "episodes | sd of their mean | gap in sd | validations as elite | their mean |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for folder, n, r in rows:
        print(f"| {folder} | {r['game']} | {r['starts']} | {_fmt(r['exact'])} | {_fmt(r['test'])} | "
              f"{_fmt(r['validation'])} | {_fmt(r['gap'], '+,.1f')} | {n} | {_fmt(r['noise'])} | "
              f"{_fmt(r['gap_sd'], '+.1f')} | {r['tenure'] or 'n/a'} | "
              f"{_fmt(r['tenure_mean'])} |")  # fmt: skip


def print_next_validations(rows: list) -> None:
    """The table of elites scored again on the next generation's validation episodes."""
    print("| Run | Game | generations | elite validation | the same elites, next validation | gap | "
          "lower the second time | new elites | their gap |")  # fmt: skip
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for folder, r in rows:
        n = r["generations"]
        print(f"| {folder} | {r['game']} | {n} | {_fmt(r['picked'])} | {_fmt(r['again'])} | "
              f"{_fmt(r['gap'], '+,.1f')} | {r['lower']} of {n} | {r['new']} | "
              f"{_fmt(r['new_gap'], '+,.1f')} |")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
