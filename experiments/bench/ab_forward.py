"""The CPU forward of this checkout against another's, call by call interleaved, on one machine.

    git worktree add /tmp/base HEAD~1           # the code to compare against
    python -m experiments.bench.ab_forward --base /tmp/base
    python -m experiments.bench.ab_forward --base /tmp/base --nets small --rows 64 --seconds 10 --weights fp16

The 2-core VMs this project is measured on drift by 20% within minutes (bandwidth and FMA peak
both move), so two runs one after the other rarely compare. Here the two forwards alternate, one
call each in turn (which goes first alternates too), on the same rows, observations and rotated
weights, for --seconds per net and row count; each side's rate is its rows over its own time, so
drift falls on both. Every pair of first calls must give the same logits bit for bit (a change
that only moves speed), else the script says so and stops; with --bits-may-differ (a change of
the sums' order) they need only agree to float32 rounding.

What is swapped: only `nevo/nets/kernels/cpu.py`. The other checkout's file is loaded as its own
module against this checkout's `nevo` package (the rest of a forward's code), from a copy in a
temporary folder where Numba caches it (so it compiles afresh each run: a minute or so before
the first figure). So it compares kernel changes; a change elsewhere needs two runs of another
benchmark.

Rows are distinct individuals rotated through more than 8x the last-level cache, observations
are real (Frostbite frames for large and small, MNIST-like images, gym states: as
nevo.roofline measures them).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from nevo.nets import half
from nevo.nets.kernels import cpu
from nevo.roofline import layers


def load_kernels(checkout: str, scratch: str):
    """The other checkout's nevo/nets/kernels/cpu.py as a module of its own, run from a copy in
    scratch: Numba caches its compiled code there, never beside the checkout's file (whose cache
    that checkout's own runs load under another module name)."""
    path = os.path.join(checkout, "nevo", "nets", "kernels", "cpu.py")
    if not os.path.isfile(path):
        raise SystemExit(f"--base {checkout}: no nevo/nets/kernels/cpu.py there (a nevo checkout?)")
    copy = os.path.join(scratch, "nevo_base_cpu.py")
    shutil.copyfile(path, copy)
    spec = importlib.util.spec_from_file_location("nevo_base_cpu", copy)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nevo_base_cpu"] = module  # Numba's cache finds a function's module by its name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["nevo_base_cpu"]
        raise
    return module


def interleaved(forwards: dict, spec, weights, obs, rows: int, seconds: float) -> dict:
    """Forwards/s of each of forwards {name: forward(spec, weights, rows_ind, obs)}, one call each
    in turn (the order alternating), every call on rows of individuals the last did not use."""
    n = len(weights)
    spent = dict.fromkeys(forwards, 0.0)
    done = dict.fromkeys(forwards, 0)
    names = list(forwards)
    k, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end or k < 2:
        for name in names if k % 2 == 0 else names[::-1]:
            inds = (np.arange(rows) + k * rows) % n
            t0 = time.perf_counter()
            forwards[name](spec, weights, inds, obs)
            spent[name] += time.perf_counter() - t0
            done[name] += rows
        k += 1
    return {name: done[name] / spent[name] for name in names}


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.ab_forward", description=__doc__.split("\n")[0]
    )
    p.add_argument("--base", required=True, help="the other nevo checkout (a git worktree, say)")
    p.add_argument("--nets", nargs="+", default=["large", "small"], help="named nets")
    p.add_argument("--rows", nargs="+", type=int, default=[32, 64], help="rows per forward call")
    p.add_argument("--seconds", type=float, default=6.0, help="time per net and row count, both sides")
    p.add_argument("--weights", default="fp32", choices=list(half.FORMATS), help="the weight rows' format")
    p.add_argument("--max-gb", type=float, default=2.0, help="cap on one net's rotated weights")
    p.add_argument("--game", default="frostbite")
    p.add_argument(
        "--bits-may-differ",
        action="store_true",
        help="a change of the sums' order: logits need only agree to float32 rounding (relative 1e-4)",
    )
    a = p.parse_args(argv)
    if min(a.rows) < 1 or a.seconds <= 0:
        p.error("--rows must be positive and --seconds above 0")
    with tempfile.TemporaryDirectory(prefix="ab_forward_") as scratch:
        base = load_kernels(a.base, scratch)
        try:
            return compare({"base": base.forward, "this": cpu.forward}, a)
        finally:
            del sys.modules["nevo_base_cpu"]


def compare(forwards: dict, a) -> list[dict]:
    """The table: per net and rows, the two forwards' rates (their logits checked equal first)."""
    rng = np.random.default_rng(0)
    out = []
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(cpu.__file__)))))
    print(f"base: {os.path.abspath(a.base)}; this: {here}")
    print(f"{'net':>12} {'rows':>4} {'weights':>7} {'base f/s':>9} {'this f/s':>9} {'this/base':>9}")
    for name in a.nets:
        spec, obs, _ = layers.observations(name, max(a.rows), a.game, rng)
        weights = half.rounded(layers.rotated_weights(spec, max(a.rows), a.max_gb, rng, a.weights), a.weights)
        for rows in a.rows:
            o = np.ascontiguousarray(obs[np.arange(rows) % len(obs)])
            first = {k: f(spec, weights, np.arange(rows) % len(weights), o)[1] for k, f in forwards.items()}
            if not np.array_equal(first["base"].view(np.uint32), first["this"].view(np.uint32)):  # bits
                scale = float(np.abs(first["base"]).max()) or 1.0
                apart = float(np.abs(first["base"] - first["this"]).max()) / scale
                if not a.bits_may_differ or apart > 1e-4:
                    raise SystemExit(
                        f"{name}, {rows} rows: the two forwards' logits differ by {apart:.1e} of their "
                        "largest (not a speed-only change; --bits-may-differ allows float32 rounding)"
                    )
                print(f"({name}, {rows} rows: logits differ by {apart:.1e} of their largest, allowed)")
            rate = interleaved(forwards, spec, weights, o, rows, a.seconds)
            ratio = rate["this"] / rate["base"]
            row = f"{name:>12} {rows:>4} {a.weights:>7} {rate['base']:>9,.0f} {rate['this']:>9,.0f}"
            print(f"{row} {ratio:>9.3f}", flush=True)
            out.append({"net": name, "rows": rows, "weights": a.weights, **rate, "ratio": ratio})
    if not a.bits_may_differ:
        print("(logits bit for bit equal on every net and row count)")
    return out


if __name__ == "__main__":
    main()
