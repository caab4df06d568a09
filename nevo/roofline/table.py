"""The forward table: per net and rows (a call's batch), each layer alone and the whole forward
measured beside the roofline's rate, on this machine and in the H100 model (and on the GPU at hand,
where there is one), each row printed as it is measured. nevo.roofline.report's docstring says what
each column is."""

from __future__ import annotations

import numba
import numpy as np

from nevo.nets import half
from nevo.nets.kernels import cpu
from nevo.roofline import layers
from nevo.roofline.layers import (
    H100,
    LAYER_ROWS,
    in_turn_rate,
    kept_shares,
    layer_counts,
    layer_inputs,
    observations,
    one_layer,
    rate_of,
    roofline_rate,
    rotated_weights,
    total_counts,
)


def measure_net(name: str, a, bandwidth: float, peak: float, gpu) -> dict:
    """The net's counts and, per rows, its layers' and whole forward's measured and roofline rates."""
    rng = np.random.default_rng(0)
    n_obs = max(a.rows)
    spec, obs, source = observations(name, n_obs, a.game, rng)
    weights = half.rounded(rotated_weights(spec, max(a.rows), a.max_gb, rng, a.weights), a.weights)
    bits = half.kernel_view(weights)  # what the Numba pieces read (fp16: the halves' bits)
    n_ind = len(weights)
    n_threads = numba.get_num_threads()
    probe = np.arange(n_obs) % layers.VALUE_SOURCES  # (the name rotated_weights reads)
    full = layer_inputs(spec.table, bits, probe, obs, spec.obs_div)  # (n_obs, segments)
    counts = layer_counts(spec, kept_shares(spec, full), weights.dtype.itemsize)
    counts.append(total_counts(counts))
    print(f"\n{name}: {spec.n_params:,} params, obs {spec.obs_shape} from {source}; {n_ind} individuals "
          f"rotated ({weights.nbytes / 1e9:.2f} GB of {a.weights} weights); memory bandwidth now "
          f"{bandwidth / 1e9:.1f} GB/s", flush=True)  # fmt: skip
    results = []
    for rows in a.rows:
        o = np.ascontiguousarray(obs[np.arange(rows) % n_obs])
        inputs = full[np.arange(rows) % n_obs]  # (rows, segments): each layer's real inputs

        def inds(k, n):
            return (np.arange(n) + k * n) % n_ind

        per_call = rows * -(-LAYER_ROWS // rows)  # a layer alone: its rows, over and over
        for i, c in enumerate(counts):
            if c["layer"] == "forward":
                rate = rate_of(
                    lambda k, o=o, n=rows: cpu.forward(spec, weights, inds(k, n), o), rows, a.seconds
                )
            else:
                layer, work = i - 1, inputs.copy()  # a copy: the timed layer overwrites the next's
                rate = rate_of(
                    lambda k, layer=layer, o=o, work=work, n=per_call: one_layer(
                        spec.table, layer, bits, inds(k, n), o, spec.obs_div, work, n_threads
                    ),
                    per_call,
                    a.seconds,
                )
            roof, bound = roofline_rate(c["flops"], c["bytes"], bandwidth, peak)
            row = {"net": name, "rows": rows, **c, "nevo_per_s": rate, "roofline_per_s": roof, "bound": bound}
            if c["layer"] == "forward":
                row["in_turn_per_s"] = in_turn_rate(counts[:-1], bandwidth, peak)
            for box, (bw, pk) in H100.items():
                row[f"h100_{box.lower()}_per_s"], row[f"h100_{box.lower()}_bound"] = roofline_rate(
                    c["flops"], c["bytes"], bw, pk
                )
            if gpu is not None and c["layer"] == "forward":
                row["gpu_per_s"] = gpu.forward_rate(spec, rows, o, a.seconds, a.weights)
                row["gpu_roofline_per_s"], row["gpu_bound"] = gpu.roof(c["flops"], c["bytes"])
            results.append(row)
            print_row(row, gpu is not None)
    return {"net": name, "n_params": spec.n_params, "obs": source, "individuals": n_ind,
            "bandwidth_Bps": bandwidth, "rows": results}  # fmt: skip


HEAD = (
    f"{'net':>12} {'rows':>4} {'layer':>17} {'MFLOP':>8} {'MB':>7} {'kept':>5} {'nevo f/s':>9} "
    f"{'roof f/s':>9} {'bound':>5} {'% roof':>6} {'in turn':>9} {'%':>6} | {'SXM f/s':>9} {'bound':>5} "
    f"{'PCIe f/s':>9}"
)


def fmt_rate(x: float) -> str:
    """A rate in 6 characters or fewer: 1,234, 56.7k, 8.9M, 1.2G ("-": unbounded)."""
    if x == float("inf"):
        return "-"
    for start, div, unit in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):
        if x >= start:
            return f"{x / div:.{1 if x < 100 * div else 0}f}{unit}"
    return f"{x:,.0f}"


def print_row(r: dict, gpu: bool) -> None:
    kept = "" if r["kept"] is None else f"{r['kept']:.2f}"
    pct = r["nevo_per_s"] / r["roofline_per_s"] if r["roofline_per_s"] != float("inf") else float("nan")
    in_turn, pct_turn = "", ""
    if "in_turn_per_s" in r:
        in_turn, pct_turn = fmt_rate(r["in_turn_per_s"]), f"{r['nevo_per_s'] / r['in_turn_per_s']:.0%}"
    line = (
        f"{r['net']:>12} {r['rows']:>4} {r['layer']:>17} {r['flops'] / 1e6:>8.3g} {r['bytes'] / 1e6:>7.3g} "
        f"{kept:>5} {fmt_rate(r['nevo_per_s']):>9} {fmt_rate(r['roofline_per_s']):>9} {r['bound']:>5} "
        f"{pct:>6.0%} {in_turn:>9} {pct_turn:>6} | {fmt_rate(r['h100_sxm_per_s']):>9} "
        f"{r['h100_sxm_bound']:>5} {fmt_rate(r['h100_pcie_per_s']):>9}"
    )
    if gpu and "gpu_per_s" in r:
        line += (
            f"  gpu {fmt_rate(r['gpu_per_s'])} f/s of its roof {fmt_rate(r['gpu_roofline_per_s'])} "
            f"{r['gpu_bound']} ({r['gpu_per_s'] / r['gpu_roofline_per_s']:.0%})"
        )
    print(line, flush=True)
