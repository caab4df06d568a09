"""The roofline, measured by nevo itself: each net's forward and a Frostbite generation beside
what this machine's memory bandwidth and fp32 peak allow, and what an H100 box would allow.

    nevo roofline                                   # every named net, then Frostbite
    nevo roofline --nets large small --rows 64 --seconds 1 --skip-end-to-end
    nevo roofline --nets mlp --rows 4 --seconds 0.05 --bandwidth-mb 64 --json roofline.json
    nevo roofline --weights fp16                    # 16-bit rows: half the bytes
    nevo roofline --nets large --rows 1000 --e2e-device cuda --population 1000 --slots 256
                                     # on a GPU box: the generation's split there

(`python -m experiments.roofline` in a checkout is the same.)

This machine (all Numba threads):
  bandwidth  a streaming read of a --bandwidth-mb float32 array, split in chunks over the threads,
             read two ways: a sum of each chunk, and as a dense layer reads its weights (rows of
             512 floats, four at a time, scaled and added into 512 accumulators); bytes read /
             time, the best of --passes passes of either. (On the 2-core AMD VM the sum reached
             ~10 GB/s and the rows 17-20: the sum alone made nevo's dense layer look faster than
             the memory.) Read again before each net after the first, whose roofs use it (a
             shared host's bandwidth moves from minute to minute);
  fp32 peak  the fastest of: independent chains of FMAs on 256 floats per thread, 16 dependent
             FMAs per load and store (LLVM vectorises the 256 floats; the core overlaps the chains;
             2 FLOP per FMA); NumPy's BLAS multiplying two float32 2048 x 2048 matrices on as many
             threads as Numba's (on an AVX-512 Xeon LLVM's 256-bit vectors leave the probe at half
             what BLAS reaches); and, where the environment's OPENBLAS_CORETYPE names OpenBLAS's
             kernel, the same product in a child process without it, on the kernel OpenBLAS picks
             for this CPU (the 2-core Zen 5 VMs name Haswell: AVX2 kernels on an AVX-512 CPU, 0.55x
             the sgemm of SkylakeX's): the machine's peak, not the environment's. (nevo's own
             convs are its Numba kernels, not BLAS: the setting does not touch them.)

Counts per forward (one row run by its own individual's weights), from the layer shapes:
  FLOP       conv 2 x OH x OW x KH x KW x Cin x Cout (nevo's convs multiply the SAME padding too); dense
             2 x nonzero inputs x out (nevo never reads, nor multiplies, a zero input's weight row);
             pool one per window cell (comparisons); biases and activations not counted;
  bytes      what a forward reads from memory: the observation (uint8 or float32), then each
             layer's weights and bias (float32, or 2 bytes each with --weights fp16); a dense
             layer reads only its nonzero inputs' weight rows (nominal x kept + bias); activations
             stay in the core's caches, not counted;
  kept       the share of a dense layer's inputs that are nonzero, measured on real observations
             through random networks of the reference initialisation: Frostbite frames (random
             play) for large and small, MNIST test images (synthetic digit-like strokes where
             MNIST is not cached; the output says which) for the MNIST nets, CartPole-v1 states
             for mlp, deep and dense:*, HalfCheetah-v5 states for the tanh MLPs.
Rows: every row has its own individual, and each timed call uses individuals the previous call did
not, over enough of them (at least 8 x the last-level cache, at least the call's rows, at most
--max-gb) that their weights come from memory, not cache. Their values repeat those of 16 random
individuals: the memory traffic, not the values, is what is timed.

Columns of the forward table, per net, rows (a call's batch) and layer ("input" turns uint8 pixels
into the first layer's float32 input; "forward" is nevo's whole forward, one call of
nevo.nets.kernels.cpu.forward; each layer alone runs the same Numba pieces over the same rows,
again and again through other individuals up to at least 256 rows a call, so that one parallel
region's start and end weigh on it no more than on a whole forward of the same rows):
  MFLOP, MB    the counts above, per forward;
  kept         dense layers: nonzero share of the inputs (MB = nominal x kept);
  nevo f/s     forwards (rows) per second, measured;
  roof f/s     min(bandwidth / bytes, peak / FLOP): the roofline's rate; bound: which term is min;
  % roof       nevo f/s / roof f/s;
  in turn, %   the whole forward only: the rate if each layer ran at its own roof, one after another
               (1 / sum of the layers' max(bytes / bandwidth, FLOP / peak)), and nevo's share of it.
               The min() roof needs the weight stream and the convs to overlap in full; nevo runs a
               row's layers in turn in one thread, and on a machine of few cores the overlap there
               is (one thread's convs beside another's dense reads) is bounded by what one core
               alone reads from memory, also printed (on the 2-core AMD VM ~13.5 of ~24 GB/s);
  SXM, PCIe    the same roofline for an H100 (model, or measured where a GPU is at hand: see below).
H100 model (per forward, no reuse across rows since every row has its own weights): bytes from HBM
= the bytes above; SXM 3.35 TB/s and 67 TFLOP/s fp32, PCIe 2.0 TB/s and 51 TFLOP/s; no launch
latency, occupancy or tail effects, so it is independent of the rows (a GPU at 32 rows is far from
it). With a CUDA GPU present, the GPU's own roof is measured too (a streaming read of 2 GiB of its
memory, gpu_read, and an fp32 FMA probe, gpu_burn; each checks its values), and each forward row
adds "gpu f/s" (nevo's CUDA policy, a call with its upload, same rotation) against that roof
(an H200: 3.7-4.0 TB/s and 61 TFLOP/s).

End to end (Frostbite, --e2e-net, one generation of --population fresh individuals, one episode
each, --frame-cap game frames per episode at most; the --e2e-device evaluator's default layout,
or --slots emulators: on the CPU "workers", each emulator process (one per core) playing whole
episodes with its own forward; on a GPU "overlap"; --pipeline names another; --spin-us sets how
long the pool polls before it sleeps, --units-per-process the overlap pipeline's units), its
time split by timing the evaluator's
calls (nothing in nevo changes): forward (the policy; in "workers" the mean process's seconds in
it), emulation (waiting for the pool's steps, the episode starts it makes as episodes end
included; in "workers" the mean process's seconds stepping its emulator), send (handing the pool
its step commands), resets (the episode starts asked for: the run's first episodes), weights
(building individuals' weights), Python (the rest); tail (fewer live episodes than slots)
overlaps them. Beside it, each with nevo's share of it:
  emulator limit   ale-py's vector env in the same layout (in "workers": lockstep's, 16 slots a
                   core), random actions, no inference (the comparison: the pipeline stepped it
                   before nevo's pool);
  emulator roof    bare emulators doing the pipeline's observation work, random actions, in one
                   process per core, nothing sent between processes (emulators.emulator_roof);
  pool's limit     nevo's emulator pool of those slots, every slot stepping random actions in
                   lockstep, no inference: the roof less the pool's IPC (emulators.pool_limit);
  first-ready      in "overlap", the pool in the pipeline's own shape: its units stepped as they
                   come in, random actions, no inference (what the pipeline could reach with a
                   forward that took no time);
  forward-bound    frames / forward time (nevo's forward alone); the roofline's forwards/s x
                   frames per forward;
  in turn          on the CPU, where forward and emulation take the cores in turn, 1 / (1 / a +
                   1 / b): the vector env's limit with the roofline's forward (its in-turn bound),
                   and the emulator roof with nevo's forward alone (the in-turn roof);
then a seeded reset (the vector env's episode start: it reloads the ROM) and an episode start in
the pool (restoreState, the mean of many), each in frames of one core's emulation, and the H100
box model (16 cores of emulation at this machine's per-core rate of the vector env, each episode
paying a seeded reset measured here in frames; the H100 forward roofline; the two overlapped).
"""

from __future__ import annotations

import argparse
import json

import numba

from nevo import machine, nets
from nevo.nets import half
from nevo.roofline.cpu import llc_bytes, machine_peak, memory_bandwidth, nominal_peak
from nevo.roofline.generation import end_to_end
from nevo.roofline.gpu import find_gpu
from nevo.roofline.layers import H100
from nevo.roofline.table import HEAD, measure_net

NETS = ("large", "small", "mnist", "mnist-large", "mlp", "mlp-tanh", "mlp-tanh-256", "deep")


def main(argv=None) -> dict:
    """The roofline of argv's nets and generation (sys.argv's when None), printed; returns every
    figure, as --json writes them."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nets", nargs="+", default=list(NETS), help="named nets (or dense:W1,W2,...)")
    p.add_argument("--rows", nargs="+", type=int, default=[32, 64, 256], help="rows per forward call")
    p.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    p.add_argument("--bandwidth-mb", type=int, default=1024, help="array streamed for the bandwidth")
    p.add_argument("--passes", type=int, default=5, help="bandwidth passes (the best counts)")
    p.add_argument("--max-gb", type=float, default=4.5, help="cap on one net's rotated weights")
    p.add_argument("--game", default="frostbite")
    p.add_argument("--skip-end-to-end", action="store_true", help="the forward table only")
    p.add_argument("--e2e-net", default="large", choices=["large", "small"], help="end to end: the net")
    p.add_argument("--population", type=int, default=64, help="end to end: individuals, one episode each")
    p.add_argument("--frame-cap", type=int, default=2000, help="end to end: game frames per episode at most")
    p.add_argument("--limit-seconds", type=float, default=5.0, help="end to end: emulator limit's time")
    p.add_argument("--e2e-device", default="cpu", choices=["cpu", "cuda"], help="end to end: the forward's")
    p.add_argument("--slots", type=int, default=0, help="end to end: emulators (0: the device's default)")
    p.add_argument("--pipeline", default="auto", help="end to end: the evaluator's (auto: the device's)")
    p.add_argument("--spin-us", type=float, default=None, help="end to end: the pool's polls before a sleep")
    p.add_argument("--units-per-process", type=int, default=0, help="end to end: overlap units a process")
    p.add_argument("--e2e-only", action="store_true", help="end to end alone, no forward table")
    p.add_argument("--json", default=None, help="write every figure to this file")
    p.add_argument("--weights", default="fp32", choices=list(half.FORMATS), help="the weight rows' format")
    a = p.parse_args(argv)
    for name in a.nets:
        nets.layers_of(name)  # ValueError naming the valid nets, before any measurement
    if min(a.rows) < 1 or a.seconds <= 0:
        p.error("--rows must be positive and --seconds above 0")
    if not a.skip_end_to_end:  # the pipeline checked as a run's is (layout), before any measurement
        from nevo.atari.evaluator import layout
        from nevo.config import RunConfig

        try:
            layout(a.e2e_device, 1, 1, RunConfig(pipeline=a.pipeline))
        except ValueError as e:
            p.error(f"--{e}")
    if a.e2e_only and a.skip_end_to_end:
        p.error("--e2e-only and --skip-end-to-end leave nothing to measure")
    if a.spin_us is not None and a.spin_us < 0:
        p.error("--spin-us must be 0 or more")
    if a.units_per_process < 0:
        p.error("--units-per-process must be 0 (nevo's) or more")
    if a.e2e_device == "cuda" and not a.skip_end_to_end:
        from nevo.nets.kernels import resolve_device

        try:  # one line now, not after the forward table, where there is no GPU
            resolve_device("cuda")
        except ValueError as e:
            p.error(str(e))

    cores, threads, facts = machine.cores(), numba.get_num_threads(), machine.cpu_facts()
    bandwidth = memory_bandwidth(a.bandwidth_mb * 2**20, a.passes)
    one_thread = memory_bandwidth(a.bandwidth_mb * 2**20, a.passes, threads=1) if threads > 1 else bandwidth
    pk = machine_peak(max(a.seconds, 0.3), threads)
    peak = pk.flops
    nominal = nominal_peak(facts["isa"], facts["mhz"], threads)
    print(f"machine: {facts['model']}, {cores} cores, {threads} Numba threads ({numba.threading_layer()}), "
          f"{facts['isa']}, {facts['mhz'] or 0:.0f} MHz; last-level cache "
          f"{llc_bytes() / 2**20:.0f} MiB")  # fmt: skip
    print(f"memory bandwidth (streaming read of {a.bandwidth_mb:,} MB, best of {a.passes}): "
          f"{bandwidth / 1e9:.1f} GB/s; one thread alone {one_thread / 1e9:.1f} GB/s")  # fmt: skip
    note = (
        f" ({peak / nominal:.0%} of 2 FMA x lanes x 2 x clock x threads = {nominal / 1e9:.0f})"
        if nominal
        else ""
    )
    kernels = machine.kernels_name(pk.kernels)
    own = (
        f" and, without OPENBLAS_CORETYPE, on OpenBLAS's own pick ({machine.kernels_name(pk.own[1])}: "
        f"{pk.own[0] / 1e9:.0f})"
        if pk.own
        else ""
    )
    print(f"fp32 peak (all threads): {peak / 1e9:.0f} GFLOP/s{note}, the fastest of an FMA probe "
          f"({pk.fma / 1e9:.0f}), BLAS sgemm on {pk.blas_threads} threads on OpenBLAS's {kernels} kernels "
          f"({pk.blas / 1e9:.0f}){own}")  # fmt: skip
    print(f"ridge: {peak / bandwidth:.1f} FLOP/byte here; H100 SXM {H100['SXM'][1] / H100['SXM'][0]:.0f}, "
          f"PCIe {H100['PCIe'][1] / H100['PCIe'][0]:.0f}")  # fmt: skip
    gpu = find_gpu(a.max_gb)
    print(f"GPU: {gpu.name}: streaming read {gpu.bandwidth / 1e12:.2f} TB/s, fp32 FMA peak "
          f"{gpu.peak / 1e12:.1f} TFLOP/s (ridge {gpu.peak / gpu.bandwidth:.0f} FLOP/byte), measured; "
          f"its forward rates and roof beside the H100 model" if gpu else
          "no GPU here: the H100 columns are the model (module docstring)")  # fmt: skip
    if not a.e2e_only:
        print(HEAD)

    out = {
        "machine": {**facts, "cores": cores, "numba_threads": threads, "bandwidth_Bps": bandwidth,
                    "one_thread_bandwidth_Bps": one_thread, "fma_peak_flops": peak,
                    "fma_probe_flops": pk.fma, "sgemm_flops": pk.blas, "sgemm_threads": pk.blas_threads,
                    "blas_kernels": pk.kernels, "openblas_coretype": machine.forced_blas_kernel(),
                    "own_choice_sgemm_flops": pk.own[0] if pk.own else None,
                    "own_choice_blas_kernels": pk.own[1] if pk.own else None,
                    "nominal_peak_flops": nominal, "llc_bytes": llc_bytes(),
                    "gpu": gpu.name if gpu else None,
                    "gpu_bandwidth_Bps": gpu.bandwidth if gpu else None,
                    "gpu_fp32_flops": gpu.peak if gpu else None},
        "h100_model": {box: {"hbm_Bps": bw, "fp32_flops": pk} for box, (bw, pk) in H100.items()},
        "weights": a.weights,
        "nets": [],
    }  # fmt: skip
    for k, name in enumerate([] if a.e2e_only else a.nets):
        # speed: the host's other tenants move the bandwidth from minute to minute (41 to 74 GB/s
        # within an hour on the 2-core Zen 5 VM), so each net's roof takes a read just before it
        now = bandwidth if k == 0 else memory_bandwidth(a.bandwidth_mb * 2**20, a.passes)
        out["nets"].append(measure_net(name, a, now, peak, gpu))
    if not a.e2e_only:
        print(
            "(MFLOP, MB: per forward; kept: nonzero share of a dense layer's inputs; roof f/s: "
            "min(bandwidth / MB, peak / MFLOP); in turn: the forward's layers each at its own roof, one "
            "after another; SXM, PCIe: the same roofline for an H100's HBM and fp32 peak, rows-independent)"
        )
    if not a.skip_end_to_end:
        whole = {}
        for net in out["nets"]:
            for r in net["rows"]:
                if r["layer"] == "forward":
                    whole[net["net"]] = r
        if a.e2e_net not in whole:  # the counts of the end-to-end net, from a quick pass
            quick = argparse.Namespace(
                **{**vars(a), "rows": [min(a.rows)], "seconds": 0.05, "max_gb": min(a.max_gb, 0.05)}
            )
            net = measure_net(a.e2e_net, quick, bandwidth, peak, None)
            whole[a.e2e_net] = net["rows"][-1]
        out["end_to_end"] = end_to_end(a, whole)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
        print(f"figures written to {a.json}")
    return out


if __name__ == "__main__":
    main()
