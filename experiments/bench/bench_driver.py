"""The GPU's pipeline without a GPU: the overlap pipeline driven by a stand-in GPU policy, with the
emulator processes at the driving process's priority and lowered (nevo.atari.evaluator's
EMULATOR_NICE), or with the policy's steps waited for call by call and submitted to be collected
later, in turn in one process.

    python -m experiments.bench.bench_driver                            # 2 cores: 32 slots in 4 groups
    python -m experiments.bench.bench_driver --python-ms 1 --wait-ms 1 --rounds 2
    python -m experiments.bench.bench_driver --nice 10 --calls sync submit  # collected once done
    python -m experiments.bench.bench_driver --slots 256 --groups 4 --population 1000  # a 16-core GPU box
    python -m experiments.bench.bench_driver --nice 10 --spin-us 0 50 200  # the pool's spin before sleeping

On a GPU box one thread drives every batch: it receives the first-ready units' steps, calls the
policy on a group's worth (the gather, the launches in Python, then a wait while the GPU runs),
sends the actions and goes on; meanwhile the other units' emulators step in their processes. In a
16-core H200 generation that thread spent ~80 us a row in policy calls against ~11 in
bench_forward's step (docs/lab/2026-11-26.md). The stand-in policy has that shape: it
gathers the acting slots' frames on one thread (as CudaPolicy does), spends --python-ms holding the
GIL (the launches' Python), then waits --wait-ms with the GIL free (the kernels and copies), and
returns actions read from the frames; with `--calls submit` (CudaPolicy's way) the wait starts at
submit, `done` says whether it is over and collect waits out the rest. Random play of Frostbite;
every run plays the same episodes, so the frames are the same in each.

Printed per run: frames/s, the share of the wall spent in policy calls, and a call's mean time
as the driving thread saw it; then each priority's mean frames/s and their ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from nevo import machine
from nevo.atari import evaluator
from nevo.config import EnvConfig, RunConfig
from nevo.episodes import Episodes
from nevo.episodes.weights import GivenRows
from nevo.nets.kernels.cuda import gather_rows


class StandInGpu:
    """The policy interface with a GPU call's cost: a one-thread gather, python_s of Python with the
    GIL held, then wait_s with it free; the actions come from the gathered frames."""

    def __init__(self, python_s: float, wait_s: float, n_actions: int, max_rows: int, row_bytes: int):
        self.python_s, self.wait_s, self.n_actions = python_s, wait_s, n_actions
        self.staged = np.empty((max_rows, row_bytes), np.uint8)
        self.calls = 0

    def load(self, weights):
        pass

    def release(self):
        pass

    def __call__(self, rows_ind, obs, take=None):
        return self._finish(self._start(rows_ind, obs, take))

    def _start(self, rows_ind, obs, take=None):
        """(when the GPU would be done, the actions): the gather and the Python are done now."""
        n = len(rows_ind)
        frames = obs.reshape(obs.shape[0], -1)
        gather_rows(frames, np.arange(n) if take is None else np.asarray(take, np.int64), self.staged[:n])
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < self.python_s:  # the launches: Python holding the GIL
            pass
        self.calls += 1
        actions = (self.staged[:n, 1000].astype(np.int64) + rows_ind) % self.n_actions
        return time.perf_counter() + self.wait_s, actions  # the GPU's work: the GIL is free

    def _finish(self, step):
        """The actions, once the GPU would be done (waiting without the GIL until then)."""
        ready, actions = step
        time.sleep(max(0.0, ready - time.perf_counter()))
        return actions


class SubmittingStandIn(StandInGpu):
    """The stand-in with CudaPolicy's submit/collect: the evaluator collects a step's actions after
    staging the next group's, so the wait overlaps that work."""

    def submit(self, rows_ind, obs, take=None):
        return self._start(rows_ind, obs, take)

    def done(self, step):
        """Whether the GPU would be done with the step (collect would not wait)."""
        return time.perf_counter() >= step[0]

    def collect(self, step):
        return self._finish(step)


def run(a, nice: int, calls: str, spin_us: float) -> tuple[float, float, float, int]:
    """One generation at this EMULATOR_NICE, the policy's steps submitted and collected later or
    called, the pool spinning spin_us before it sleeps: (frames/s, policy share, ms per call,
    frames)."""
    from nevo.atari import pool
    from nevo.atari.game import AtariGame, atari_actions

    env_cfg = EnvConfig(game=a.game, frame_cap=a.frame_cap)
    group = -(-a.slots // a.groups)
    kind = SubmittingStandIn if calls == "submit" else StandInGpu
    policy = kind(a.python_ms / 1e3, a.wait_ms / 1e3, atari_actions(a.game), a.slots, 4 * 84 * 84)
    saved = evaluator.EMULATOR_NICE, pool.SPIN_S
    evaluator.EMULATOR_NICE, pool.SPIN_S = nice, spin_us / 1e6
    try:
        run_cfg = RunConfig(
            env_slots=a.slots, processes=a.threads, emulators_per_group=group, pipeline="overlap"
        )
        ev, _ = evaluator.AtariEvaluator.for_task(
            AtariGame(env_cfg), run_cfg, policy, GivenRows(), "cuda", a.slots, False
        )
    finally:
        evaluator.EMULATOR_NICE, pool.SPIN_S = saved
    try:
        n = a.population
        res = ev.run(None, Episodes(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1000))
    finally:
        ev.close()
    n_calls = max(policy.calls, 1)
    frames = res.total_frames
    return frames / res.wall_s, res.forward_s / res.wall_s, res.forward_s / n_calls * 1e3, frames


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--game", default="frostbite")
    p.add_argument("--slots", type=int, default=32, help="emulators in all (default: 32)")
    p.add_argument(
        "--groups",
        type=int,
        default=4,
        help="slots / groups: a forward's batch of first-ready slots (default: 4)",
    )
    p.add_argument("--threads", type=int, default=0, help="emulator processes (default: one per core)")
    p.add_argument("--population", type=int, default=64, help="episodes, one per individual (default: 64)")
    p.add_argument("--frame-cap", type=int, default=2000, help="frames per episode at most (default: 2000)")
    p.add_argument("--python-ms", type=float, default=1.0, help="a call's Python, GIL held (default: 1)")
    p.add_argument("--wait-ms", type=float, default=1.0, help="a call's wait, GIL free (default: 1)")
    p.add_argument("--nice", type=int, nargs="+", default=[0, evaluator.EMULATOR_NICE],
                   help="how much nicer the emulator processes run, each in turn "
                        f"(default: 0 {evaluator.EMULATOR_NICE})")  # fmt: skip
    p.add_argument("--calls", nargs="+", choices=["submit", "sync"], default=["submit"],
                   help="submit: a step's actions collected once done or after the next group is staged "
                        "(as CudaPolicy's are); sync: each call waits for its own; each in turn "
                        "(default: submit)")  # fmt: skip
    p.add_argument("--spin-us", type=float, nargs="+", default=[0.0],
                   help="how long the emulator processes and the driver poll their pipes before they "
                        "sleep, in microseconds, each in turn (default: 0)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=3, help="runs of each priority, alternating (default: 3)")
    a = p.parse_args(argv)
    if a.slots < 1 or a.groups < 1 or a.population < 1 or a.rounds < 1:
        p.error("--slots, --groups, --population and --rounds must be at least 1")
    a.threads = a.threads or machine.cores()
    print(f"{a.game}: {a.population} episodes (cap {a.frame_cap:,} frames) on {a.slots} emulators in "
          f"{a.groups} groups, {a.threads} emulator processes, {machine.cores()} cores; a policy call: "
          f"gather, {a.python_ms:g} ms of Python, {a.wait_ms:g} ms waiting")  # fmt: skip
    configs = [(n, c, s) for n in a.nice for c in a.calls for s in a.spin_us]
    rates: dict[tuple, list[float]] = {c: [] for c in configs}

    def name(config):
        n, c, s = config
        return f"nicer by {n:2d}, {c} calls" + (f", spin {s:g} us" if len(a.spin_us) > 1 else "")

    for r in range(a.rounds):
        for c in configs:
            rate, share, call_ms, frames = run(a, *c)
            rates[c].append(rate)
            print(f"  round {r}, {name(c)}: {frames:,} frames, {rate:,.0f} frames/s; "
                  f"policy calls {share:.0%} of the wall, {call_ms:.2f} ms each", flush=True)  # fmt: skip
    means = {c: float(np.mean(v)) for c, v in rates.items()}
    print("mean frames/s: " + "; ".join(f"{name(c)}: {m:,.0f}" for c, m in means.items()))
    if len(configs) == 2:
        print(f"{name(configs[1])} against {name(configs[0])}: {means[configs[1]] / means[configs[0]]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
