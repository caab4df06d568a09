"""What a dense layer's zero-skipping saves in time, on one thread: the bytes asked for against
the bytes the memory actually moves.

    python -m experiments.bench.dense_fetch
    python -m experiments.bench.dense_fetch --nets small --weights fp16 --seconds 1

nevo's dense layer never reads the weight row of a zero input (nevo.nets.kernels.cpu.dense_block),
and nevo.roofline counts only the kept rows' bytes. The hardware may move more: its
prefetchers see an ascending run of rows with gaps and can fetch the gaps too. Here the first dense
layer of each Atari net runs on one thread (as in a forward, where one thread's dense layer runs
beside the other's convs; nevo.roofline's layer driver, one_layer), each row on the next
individual of a set rotated through more than 8x the last-level cache (every row from memory), with
three kinds of input row:
  all    every input nonzero: the whole weight matrix, streamed;
  real   the layer's inputs from Frostbite frames through random networks (as the roofline
         measures its kept share): ReLU's zeros where they fall;
  front  as many nonzero inputs as each `real` row, all at the front: the same bytes asked for,
         in one run.
Printed per pattern: microseconds a row, GB/s of the bytes asked for, and the share of `all`'s
time and of its bytes. Where `real` takes `all`'s time, skipping saves multiplications, not
memory traffic; `front` is what the same bytes cost when nothing lies between them. Beside them,
one thread's streaming read (nevo.roofline's probe): the most one thread moves.
"""

from __future__ import annotations

import argparse

import numpy as np

from nevo.nets import DENSE, KIND, half
from nevo.nets.kernels import cpu
from nevo.roofline import layers
from nevo.roofline.cpu import memory_bandwidth

PATTERNS = ("all", "real", "front")


def pattern_rows(real: np.ndarray, kind: str) -> np.ndarray:
    """(n, n_in) float32 input rows of a pattern, from real (n, n_in) inputs of the layer."""
    if kind == "real":
        return real.copy()
    out = np.zeros_like(real)
    for r, row in enumerate(real):
        if kind == "all":  # every input nonzero: the real values where there are some, else 1
            out[r] = np.where(row != 0, row, np.float32(1))
        else:  # front: the real nonzero values, in order, at the front
            kept = row[row != 0]
            out[r, : kept.size] = kept
    return out


def pattern_work(full: np.ndarray, lo: int, hi: int, kind: str) -> np.ndarray:
    """A copy of full (n, segments), every layer's inputs, with the dense layer's inputs [lo, hi)
    replaced by the pattern `kind` of them: the work nevo.roofline's one_layer reads."""
    work = full.copy()
    work[:, lo:hi] = pattern_rows(full[:, lo:hi], kind)
    return work


def measure(name: str, fmt: str, seconds: float, max_gb: float, game: str, n_real: int = 16) -> dict:
    """The first dense layer of net `name` in format fmt, on one thread, for each pattern: the
    roofline's own layer driver (one_layer) on one thread, LAYER_ROWS rows a call, each another
    individual."""
    rng = np.random.default_rng(0)
    spec, obs, source = layers.observations(name, n_real, game, rng)
    weights = half.rounded(layers.rotated_weights(spec, n_real, max_gb, rng, fmt), fmt)
    bits = half.kernel_view(weights)
    table, seg = spec.table, cpu.segments(spec.table)
    i = int(np.flatnonzero(table[:, KIND] == DENSE)[0])
    full = layers.layer_inputs(table, bits, np.arange(n_real) % len(bits), obs, spec.obs_div)
    out = {"net": name, "weights": fmt, "layer": layers.layer_name(spec.layers[i]),
           "individuals": len(weights), "source": source, "patterns": {}}  # fmt: skip
    per_call = layers.LAYER_ROWS
    for kind in PATTERNS:
        work = pattern_work(full, seg[i], seg[i + 1], kind)
        kept = float(np.mean(work[:, seg[i] : seg[i + 1]] != 0))

        def call(k, work=work):
            inds = (np.arange(per_call) + k * per_call) % len(bits)
            layers.one_layer(table, i, bits, inds, obs, spec.obs_div, work, 1)

        per_row = 1 / layers.rate_of(call, per_call, seconds)
        # the kept rows and the bias, as the roofline counts them (kept read for dense layers only)
        asked = layers.layer_counts(spec, [kept] * len(spec.layers), weights.itemsize)[i + 1]["bytes"]
        out["patterns"][kind] = {"kept": kept, "us_per_row": per_row * 1e6, "asked_bytes": asked,
                                 "asked_GBps": asked / per_row / 1e9}  # fmt: skip
    base = out["patterns"]["all"]
    for p in out["patterns"].values():
        p["time_of_all"] = p["us_per_row"] / base["us_per_row"]
        p["bytes_of_all"] = p["asked_bytes"] / base["asked_bytes"]
    return out


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.dense_fetch", description=__doc__.split("\n")[0]
    )
    p.add_argument("--nets", nargs="+", default=["small", "large"], choices=["small", "large"])
    p.add_argument("--weights", nargs="+", default=["fp32", "fp16"], choices=list(half.FORMATS))
    p.add_argument("--seconds", type=float, default=2.0, help="time per net, format and pattern")
    p.add_argument("--max-gb", type=float, default=2.0, help="cap on one net's rotated weights")
    p.add_argument("--bandwidth-mb", type=int, default=1024, help="size of the streaming read")
    p.add_argument("--game", default="frostbite")
    a = p.parse_args(argv)
    if a.seconds <= 0 or a.max_gb <= 0 or a.bandwidth_mb < 1:
        p.error("--seconds, --max-gb and --bandwidth-mb must be positive")
    one = memory_bandwidth(a.bandwidth_mb * 2**20, passes=3, threads=1)
    print(f"one thread's streaming read of {a.bandwidth_mb:,} MB: {one / 1e9:.1f} GB/s")
    print(f"{'net':>6} {'weights':>7} {'layer':>16} {'pattern':>7} {'kept':>5} {'us/row':>7} "
          f"{'GB/s asked':>10} {'time/all':>8} {'bytes/all':>9}")  # fmt: skip
    results = []
    for name in a.nets:
        for fmt in a.weights:
            r = measure(name, fmt, a.seconds, a.max_gb, a.game)
            for kind, q in r["patterns"].items():
                head = f"{name:>6} {fmt:>7} {r['layer']:>16} {kind:>7} {q['kept']:>5.2f}"
                print(f"{head} {q['us_per_row']:>7.1f} {q['asked_GBps']:>10.1f} {q['time_of_all']:>8.2f} "
                      f"{q['bytes_of_all']:>9.2f}", flush=True)  # fmt: skip
            results.append({**r, "one_thread_Bps": one})
    print("(one thread; every call another individual, rotated through more than 8x the last-level cache; "
          "time/all and bytes/all: against every input nonzero)")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
