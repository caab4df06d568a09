"""The roofline, measured by nevo itself: each net's forward and a Frostbite generation beside
what this machine's memory bandwidth and fp32 peak allow, and what an H100 box would allow.

    python -m experiments.roofline                                   # every named net, then Frostbite
    python -m experiments.roofline --nets large small --rows 64 --seconds 1 --skip-end-to-end
    python -m experiments.roofline --nets mlp --rows 4 --seconds 0.05 --bandwidth-mb 64 --json roofline.json
    python -m experiments.roofline --weights fp16                    # 16-bit rows: half the bytes
    python -m experiments.roofline --nets large --rows 1000 --e2e-device cuda --population 1000 --slots 256
                                                      # on a GPU box: the generation's split there

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
             the sgemm of SkylakeX's). A line then says what the setting costs nevo's convs.

Counts per forward (one row run by its own individual's weights), from the layer shapes:
  FLOP       conv 2 x OH x OW x KH x KW x Cin x Cout (BLAS multiplies the SAME padding too); dense
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
episodes with its own forward; on a GPU "overlap"), its time split by timing the evaluator's
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
                   process per core, nothing sent between processes (bench_pipeline.emulator_roof);
  pool's limit     nevo's emulator pool of those slots, every slot stepping random actions in
                   lockstep, no inference: the roof less the pool's IPC (bench_pipeline.pool_limit);
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
import dataclasses
import json
import os
import subprocess
import sys
import time

import numba
import numpy as np
from numba import cuda, float32, int32, prange, uint64
from threadpoolctl import threadpool_info, threadpool_limits

from nevo import machine, nets
from nevo.nets import CIN, COUT, DENSE, KIND, W_OFF, half
from nevo.nets.half import as_f32
from nevo.nets.kernels import cpu  # (it sets OpenMP's wait policy before Numba's first parallel call)

H100 = {  # (HBM bytes/s, fp32 FLOP/s), the datasheets' dense figures
    "SXM": (3.35e12, 67e12),
    "PCIe": (2.0e12, 51e12),
}
H100_CORES = 16  # emulation cores of the modelled H100 box
NETS = ("large", "small", "mnist", "mnist-large", "mlp", "mlp-tanh", "mlp-tanh-256", "deep")
FMA_WIDTH = 256  # floats of independent FMA chains per thread
FMA_DEPTH = 16  # dependent FMAs per float per pass (written out in fma_burn)
VALUE_SOURCES = 16  # random individuals whose values the rotated weights repeat
# A layer timed alone runs at least this many rows a call (its call's rows over again, through
# other individuals): one parallel region's start and end (~60-100 us on the 2-core VMs) would
# otherwise weigh on a fast layer's rate, which a whole forward pays once for all its layers.
LAYER_ROWS = 256


# ---- this machine: bandwidth and peak ----------------------------------------------------------


@numba.njit(parallel=True, nogil=True, cache=True, fastmath=True)
def stream_sum(a, n_chunks):
    """Sum of a (n,) float32, chunk k by whichever thread takes it. speed: fastmath lets LLVM
    vectorise the sum and keep several partial sums, so the loop is bound by the read alone."""
    n = a.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    parts = np.zeros(n_chunks, np.float32)
    for k in prange(n_chunks):  # work = one chunk
        s = np.float32(0)
        for i in range(k * size, min(n, (k + 1) * size)):
            s += a[i]
        parts[k] = s
    return parts.sum()


@numba.njit(parallel=True, nogil=True, cache=True, fastmath={"contract"})
def fma_burn(acc, reps, m, c):
    """reps passes over acc (threads, FMA_WIDTH): each float gets FMA_DEPTH dependent FMAs per pass.

    Work = one thread's row. The j loop vectorises (8 or 16 lanes); its iterations are independent,
    so the core keeps many vector chains in flight; one load and one store per 16 FMAs. m, c keep
    the values at the fixed point c / (1 - m) (no overflow, no denormals); no reassociation, so
    LLVM cannot fold the chain."""
    for t in prange(acc.shape[0]):
        x = acc[t]
        for _ in range(reps):
            for j in range(x.shape[0]):
                v = x[j]
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                v = v * m + c
                x[j] = v


ROW = 512  # floats per row of rows_read: a row of large's first dense layer


@numba.njit(parallel=True, nogil=True, cache=True, fastmath={"contract"})
def rows_read(a, n_chunks):
    """a as rows of ROW floats, each chunk's rows four at a time, each scaled and added into a
    ROW-float accumulator: the read of nevo's dense layer (four weight rows per pass, one store
    per 4 FMAs), with every row read; a.shape[0] a multiple of 4 x ROW x n_chunks."""
    per = a.shape[0] // ROW // n_chunks  # rows per chunk, a multiple of 4
    parts = np.zeros(n_chunks, np.float32)
    for k in prange(n_chunks):  # work = one chunk
        out = np.zeros(ROW, np.float32)
        b = k * per * ROW
        for r in range(b, b + per * ROW, 4 * ROW):
            v0, v1 = a[r : r + ROW], a[r + ROW : r + 2 * ROW]
            v2, v3 = a[r + 2 * ROW : r + 3 * ROW], a[r + 3 * ROW : r + 4 * ROW]
            for o in range(ROW):  # speed: slices of constant length vectorise (index sums did not)
                out[o] = (
                    out[o]
                    + v0[o]
                    + np.float32(0.5) * v1[o]
                    + np.float32(0.25) * v2[o]
                    + np.float32(0.125) * v3[o]
                )
        parts[k] = out.sum()
    return parts.sum()


def memory_bandwidth(nbytes: int, passes: int, threads: int = 0) -> float:
    """Bytes/s of a streaming read of nbytes by `threads` Numba threads (0: all): the best of
    passes passes of each of two reads, one sequential sum per chunk (stream_sum) and a dense
    layer's read of rows (rows_read)."""
    if threads:
        was = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            return memory_bandwidth(nbytes, passes)
        finally:
            numba.set_num_threads(was)
    n_chunks = 8 * numba.get_num_threads()
    n = max(nbytes // 4 // (4 * ROW * n_chunks), 1) * 4 * ROW * n_chunks
    a = np.ones(n, np.float32)  # touched: its pages exist before timing
    best = float("inf")
    for read in (stream_sum, rows_read):
        read(a, n_chunks)  # compiled (or loaded) before timing
        for _ in range(passes):
            t0 = time.perf_counter()
            read(a, n_chunks)
            best = min(best, time.perf_counter() - t0)
    return a.nbytes / best


def fma_peak(seconds: float) -> float:
    """fp32 FLOP/s of fma_burn on all Numba threads, best of 7 timed runs of ~seconds / 3 (the
    2-core VMs gave 78 to 130 GFLOP/s from one run of 3 to the next: the best is the machine's)."""
    acc = np.ones((numba.get_num_threads(), FMA_WIDTH), np.float32)
    m, c = np.float32(0.999), np.float32(0.001)
    fma_burn(acc, 10, m, c)
    reps, best = 100, 0.0
    while True:  # grow reps until one run takes ~seconds / 3
        t0 = time.perf_counter()
        fma_burn(acc, reps, m, c)
        dt = time.perf_counter() - t0
        if dt > seconds / 3:
            break
        reps *= 2
    for _ in range(7):
        t0 = time.perf_counter()
        fma_burn(acc, reps, m, c)
        best = max(best, 2 * FMA_DEPTH * acc.size * reps / (time.perf_counter() - t0))
    return best


def sgemm_peak(seconds: float, threads: int, n: int = 2048) -> tuple[float, int]:
    """(fp32 FLOP/s, BLAS threads) of NumPy's BLAS multiplying two float32 n x n matrices
    (2 n^3 FLOP) on `threads` threads, the best of up to 5 after one warm-up, stopping after
    ~seconds. The BLAS threads it ran on are read back (threadpoolctl): nevo.nets.kernels.cpu
    limits BLAS to one thread process-wide (its convs call BLAS from every Numba thread), so
    without the context below the product ran on one core: 126 of the 2-core Zen 5 VM's 251
    GFLOP/s, and a sixteenth of the 16-core GPU box's."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        ran_on = max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=1)
        a @ b
        best, t_end = 0.0, time.perf_counter() + seconds
        for _ in range(5):
            t0 = time.perf_counter()
            a @ b
            best = max(best, 2 * n**3 / (time.perf_counter() - t0))
            if time.perf_counter() > t_end:
                break
    return best, ran_on


OWN_CHOICE = """
import json, sys
from experiments.roofline import sgemm_peak
from nevo.machine import blas_kernels
flops, _ = sgemm_peak(float(sys.argv[1]), int(sys.argv[2]))
print(json.dumps([flops, blas_kernels()]))
"""


def own_choice_sgemm(seconds: float, threads: int) -> tuple[float, list[str]] | None:
    """(FLOP/s, kernels) of sgemm_peak in a child process without OPENBLAS_CORETYPE, that is on
    the kernel OpenBLAS itself picks for this CPU; None where the variable is not set (this
    process's sgemm is already that). OpenBLAS reads the variable once, when it loads, so only a
    new process can show what it costs: the 2-core Zen 5 VMs set it to Haswell, whose AVX2 kernels
    ran sgemm at 244-257 GFLOP/s there against 439-482 for the SkylakeX ones OpenBLAS picks."""
    if not machine.forced_blas_kernel():
        return None
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-c", OWN_CHOICE, str(seconds), str(threads)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode:
        raise RuntimeError(f"the sgemm without OPENBLAS_CORETYPE failed: {done.stderr.strip()[-300:]}")
    flops, kernels = json.loads(done.stdout.strip().splitlines()[-1])
    return flops, kernels


@dataclasses.dataclass
class Peak:
    """The machine's fp32 peak and what it was the faster of."""

    flops: float  # the peak: the fastest figure below
    fma: float  # fma_burn, the FMA probe
    blas: float  # sgemm in this process, on its BLAS kernels
    blas_threads: int
    kernels: list[str]  # this process's OpenBLAS kernels
    own: tuple[float, list[str]] | None  # sgemm on OpenBLAS's own pick (own_choice_sgemm)

    def note(self) -> str | None:
        """One line where OPENBLAS_CORETYPE holds nevo's convs to kernels slower than this CPU's own."""
        if self.own is None or self.own[1] == self.kernels or self.own[0] <= self.blas:
            return None
        mine, theirs = machine.kernels_name(self.kernels), machine.kernels_name(self.own[1])
        return (
            f"note: OPENBLAS_CORETYPE={machine.forced_blas_kernel()} holds nevo's convs to OpenBLAS's "
            f"{mine} kernels; on this CPU OpenBLAS picks {theirs}, whose sgemm ran "
            f"{self.own[0] / self.blas:.2f}x as fast ({self.own[0] / 1e9:.0f} against {self.blas / 1e9:.0f} "
            "GFLOP/s): unset it for this machine's speed (the convs' sums then differ in the last "
            "bits, so a cluster's workers should share one setting)"
        )


def machine_peak(seconds: float, threads: int) -> Peak:
    """The machine's fp32 peak on `threads` threads: the fastest of fma_burn, a BLAS sgemm in this
    process, and, where OPENBLAS_CORETYPE names a kernel, an sgemm on the kernel OpenBLAS itself
    picks for this CPU (own_choice_sgemm: the machine's peak, not the environment's). speed: on the
    H200 box's AVX-512 Xeon the probe reached 21% of the nominal peak (LLVM vectorises it with
    256-bit registers) while OpenBLAS, which runs nevo's convs, uses 512-bit ones: the convs ran at
    up to 186% of a roof set by the probe alone. On the 2-core AMD VMs the probe is the faster on
    AVX2 (131 against 86 GFLOP/s); on Zen 5 it gave 228-437 from one run to the next, against 244-257
    for sgemm on the Haswell kernels the VMs' OPENBLAS_CORETYPE imposes and 439-482 on SkylakeX's."""
    fma = fma_peak(seconds)
    blas, blas_threads = sgemm_peak(seconds, threads)
    own = own_choice_sgemm(seconds, threads)
    flops = max(fma, blas, own[0] if own else 0.0)
    return Peak(flops, fma, blas, blas_threads, machine.blas_kernels(), own)


def cpu_facts() -> dict:
    """Model name, the widest vector ISA and the clock from /proc/cpuinfo (Linux; else unknown)."""
    facts = {"model": "unknown", "isa": "unknown", "mhz": None}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return facts
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and facts["model"] == "unknown":
            facts["model"] = value.strip()
        elif key.strip() == "cpu MHz" and facts["mhz"] is None:
            facts["mhz"] = float(value)
        elif key.strip() == "flags":
            flags = value.split()
            facts["isa"] = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"
    return facts


def nominal_peak(isa: str, mhz: float | None, cores: int) -> float | None:
    """FLOP/s of 2 FMA units per core at the reported clock: lanes (16 AVX-512, 8 AVX2) x 2 x 2."""
    lanes = {"avx512f": 16, "avx2": 8}.get(isa)
    return None if lanes is None or not mhz else 2 * lanes * 2 * mhz * 1e6 * cores


# ---- counting: FLOP and bytes per forward --------------------------------------------------------


def layer_name(lay) -> str:
    """A layer as a short label: conv 32@8x8/4, pool 2x2, dense 7744x512."""
    if lay.kind == "conv":
        return f"conv {lay.cout}@{lay.kernel}x{lay.kernel}/{lay.stride}"
    if lay.kind == "pool":
        return f"pool {lay.kernel}x{lay.kernel}"
    return f"dense {lay.cin}x{lay.cout}"


def layer_counts(spec, kept, itemsize: int = 4) -> list[dict]:
    """Per forward of one row, the input's load then each layer: FLOP, bytes read and nominal
    bytes (see the module docstring). kept[i]: the nonzero share of dense layer i's inputs (read
    for dense layers only); itemsize: a weight's bytes (2 for --weights fp16)."""
    obs_bytes = int(np.prod(spec.obs_shape)) * np.dtype(spec.obs_dtype).itemsize
    out = [{"layer": "input", "flops": 0.0, "bytes": float(obs_bytes), "nominal_bytes": float(obs_bytes),
            "kept": None}]  # fmt: skip
    for i, lay in enumerate(spec.layers):
        oh, ow = lay.out_hw
        w_bytes, b_bytes = float(itemsize * (lay.b_offset - lay.w_offset)), float(itemsize * lay.n_bias)
        if lay.kind == "conv":
            flops, nbytes, share = 2.0 * oh * ow * lay.fan_in * lay.cout, w_bytes + b_bytes, None
        elif lay.kind == "pool":
            flops, nbytes, share = float(oh * ow * lay.cout * lay.kernel * lay.kernel), 0.0, None
        else:
            share = float(kept[i])
            flops, nbytes = 2.0 * lay.cin * share * lay.cout, w_bytes * share + b_bytes
        out.append({"layer": layer_name(lay), "flops": flops, "bytes": nbytes,
                    "nominal_bytes": w_bytes + b_bytes, "kept": share})  # fmt: skip
    return out


def total_counts(counts: list[dict]) -> dict:
    """The whole forward: the sums of layer_counts' rows."""
    return {
        "layer": "forward",
        "flops": sum(c["flops"] for c in counts),
        "bytes": sum(c["bytes"] for c in counts),
        "nominal_bytes": sum(c["nominal_bytes"] for c in counts),
        "kept": None,
    }


def in_turn_rate(counts: list[dict], bandwidth: float, peak: float) -> float:
    """Forwards/s if each layer (and the input's load) ran at its own roofline, one after
    another: 1 / the sum of max(bytes / bandwidth, FLOP / peak). The whole forward's min() roof
    assumes the memory-bound and the compute-bound layers overlap in full; nevo runs a row's
    layers in turn in one thread, and exceeds this only as far as one thread's convs overlap
    another's dense reads (which one core's bandwidth alone bounds: one_thread_bandwidth_Bps)."""
    return 1.0 / sum(1.0 / roofline_rate(c["flops"], c["bytes"], bandwidth, peak)[0] for c in counts)


def roofline_rate(flops: float, nbytes: float, bandwidth: float, peak: float) -> tuple[float, str]:
    """(forwards/s, "mem" or "comp"): min(bandwidth / bytes, peak / FLOP), and which term it is."""
    mem = bandwidth / nbytes if nbytes > 0 else float("inf")
    comp = peak / flops if flops > 0 else float("inf")
    return (mem, "mem") if mem <= comp else (comp, "comp")


# ---- the forward, layer by layer -------------------------------------------------------------


@numba.njit(nogil=True, cache=True)
def layer_inputs(table, weights, rows_ind, obs, div):
    """(rows, segments(table)[-1]) float32: each row's input of every layer (conv inputs
    zero-padded, as nevo's forward lays them out), then its logits; one thread, nevo's pieces."""
    seg = cpu.segments(table)
    quotients = cpu.input_table(obs, div)
    n, rows = table.shape[0], rows_ind.shape[0]
    full = np.zeros((rows, seg[n + 1]), np.float32)
    cols = np.empty(cpu.cols_size(table), np.float32)
    order = np.arange(rows)
    n_spatial = table[cpu.first_dense(table), W_OFF]
    wide = np.empty(n_spatial, np.float32)  # 16-bit rows: the convs' weights widened, as nevo does
    for r in range(rows):
        w = weights[rows_ind[r]]
        w_conv = as_f32(w, wide, n_spatial)
        cpu.load_obs(table, obs, r, full[r], div, quotients)
        for i in range(n):
            if table[i, KIND] == DENSE:
                nz = np.empty((1, table[i, CIN]), np.int32)
                cpu.dense_block(table, i, w, full, seg[i], seg[i + 1], order, r, r + 1, 0, table[i, COUT], nz)
            else:
                cpu.spatial_rows(table, i, w_conv, full[r, seg[i] : seg[i + 1]], full[r, seg[i + 1] :], cols)
    return full


@numba.njit(parallel=True, nogil=True, cache=True)
def one_layer(table, i, weights, rows_ind, obs, div, work, n_threads):
    """Layer i alone (-1: the input's load) over every row of rows_ind, as nevo's forward runs it for
    distinct rows: work = one thread's rows, round robin; the conv and pool layers in the thread's
    scratch (its first row's inputs), the last of them writing the row's dense input, the dense
    layers on work (n, segments(table)[-1]) as layer_inputs filled it. Row q of the call is work's
    and obs's row q % n, so a call may run more individuals than work has rows (LAYER_ROWS).
    Returns 0."""
    seg = cpu.segments(table)
    quotients = cpu.input_table(obs, div)
    rows, n_work = rows_ind.shape[0], work.shape[0]
    n_conv = cpu.first_dense(table)
    n_spatial = table[n_conv, W_OFF]
    scr = np.zeros((n_threads, seg[n_conv]), np.float32)
    cols = np.empty((n_threads, cpu.cols_size(table)), np.float32)
    wide = np.empty((n_threads, n_spatial), np.float32)  # 16-bit rows: as layer_inputs
    order = np.arange(rows) % n_work  # the work row of each of the call's rows
    for t in prange(n_threads):
        if t < n_work:
            scr[t] = work[t, : seg[n_conv]]
        for q in range(t, rows, n_threads):
            w, r = weights[rows_ind[q]], order[q]
            if i < 0:
                cpu.load_obs(table, obs, r, scr[t] if n_conv else work[r], div, quotients)
            elif table[i, KIND] == DENSE:
                nz = np.empty((1, table[i, CIN]), np.int32)
                cpu.dense_block(table, i, w, work, seg[i], seg[i + 1], order, q, q + 1, 0, table[i, COUT], nz)
            else:
                w_conv = as_f32(w, wide[t], n_spatial)  # once per row: each row is its own individual
                dst = scr[t, seg[i + 1] :] if i + 1 < n_conv else work[r, seg[i + 1] :]
                cpu.spatial_rows(table, i, w_conv, scr[t, seg[i] : seg[i + 1]], dst, cols[t])
    return 0


def kept_shares(spec, full) -> list:
    """Per layer: the nonzero share of a dense layer's inputs over full's rows (None elsewhere)."""
    seg = cpu.segments(spec.table)
    return [
        float(np.mean(full[:, seg[i] : seg[i + 1]] != 0)) if lay.kind == "dense" else None
        for i, lay in enumerate(spec.layers)
    ]


def rotated_weights(spec, rows: int, max_gb: float, rng, weights: str = "fp32") -> np.ndarray:
    """(n, n_params) float32: n individuals whose weights (in the format `weights`) exceed 8 x the
    last-level cache (at least rows, at most max_gb), their values those of VALUE_SOURCES random
    ones, repeated."""
    per = half.dtype_of(weights).itemsize * spec.n_params
    n = max(rows, -(-8 * llc_bytes() // per), VALUE_SOURCES)
    n = max(1, min(n, int(max_gb * 1e9 // per)))
    scale = nets.init_scale(spec)
    src = rng.standard_normal((min(n, VALUE_SOURCES), spec.n_params), dtype=np.float32) * scale
    weights = np.empty((n, spec.n_params), np.float32)
    for k in range(0, n, len(src)):
        weights[k : k + len(src)] = src[: n - k]
    return weights


def llc_bytes() -> int:
    """The last-level cache in bytes (Linux sysfs; 32 MiB where unknown)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip()
            mult = {"K": 1024, "M": 2**20}.get(text[-1], 1)
            best = max(best, int(text.rstrip("KM")) * mult)
    except (OSError, ValueError):
        pass
    return best or 32 * 2**20


def rate_of(call, rows: int, seconds: float) -> float:
    """Rows per second of call(k) for k = 1, 2, ... (each k other individuals), for ~seconds."""
    call(0)  # warm up: compile or load the cache
    calls, t0 = 0, time.perf_counter()
    while True:
        call(calls + 1)
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed > seconds and calls >= 3:
            return calls * rows / elapsed


# ---- observations ---------------------------------------------------------------------------------


def digit_like(n: int, rng) -> np.ndarray:
    """(n, 28, 28) uint8: 2-4 smooth strokes (quadratic Bezier curves, ~2 px wide, anti-aliased)
    in the middle 20 x 20, on black, as MNIST's digits are drawn."""
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    t = np.linspace(0, 1, 24, dtype=np.float32)[:, None]
    out = np.zeros((n, 28, 28), np.float32)
    for k in range(n):
        for _ in range(rng.integers(2, 5)):
            p = rng.uniform(5, 23, (3, 2)).astype(np.float32)
            pts = (1 - t) ** 2 * p[0] + 2 * (1 - t) * t * p[1] + t**2 * p[2]  # (24, 2)
            d = np.sqrt(((yy - pts[:, 0, None, None]) ** 2 + (xx - pts[:, 1, None, None]) ** 2).min(axis=0))
            out[k] = np.maximum(out[k], np.clip(2.0 - d, 0.0, 1.0))
    return (out * 255).astype(np.uint8)


def gym_states(env_id: str, n: int, seed: int) -> np.ndarray:
    """(n, obs, 1, 1) float32 states of env_id under random actions, a seeded reset per episode."""
    from nevo.tasks.envs import make_vector_task

    env = make_vector_task(env_id)
    rng = np.random.default_rng(seed)
    states, episode = [], 0
    obs, _ = env.reset(seed=seed)
    while len(states) < n:
        obs, _, term, trunc, _ = env.step(env.action_space.sample())
        if rng.random() < 0.5:
            states.append(np.asarray(obs, np.float32))
        if term or trunc:
            episode += 1
            obs, _ = env.reset(seed=seed + episode)
    env.close()
    return np.stack(states)[:, :, None, None]


def observations(name: str, n: int, game: str, rng) -> tuple:
    """(spec, obs (n, C, H, W), where they come from) for the net `name` on its kind of task."""
    if name in ("large", "small"):
        from nevo.config import EnvConfig
        from nevo.tasks.envs import atari_actions, atari_reference_batch

        obs = atari_reference_batch(EnvConfig(game=game), n, seed=0, keep=0.25)
        return nets.net_spec(name, nets.OBS_SHAPE, atari_actions(game)), obs, f"{game} frames, random play"
    if name in ("mnist", "mnist-large"):
        from nevo.tasks import mnist_data

        try:
            images, what = mnist_data.load(fetch_missing=False).test_x[:n], "MNIST test images"
        except Exception:  # not cached (or damaged): no download from a benchmark
            images, what = digit_like(n, rng), "synthetic digit-like strokes (MNIST not cached)"
        return nets.net_spec(name, (1, 28, 28), 10), np.ascontiguousarray(images[:, None]), what
    if name.startswith("mlp-tanh"):
        obs = gym_states("HalfCheetah-v5", n, seed=0)
        spec = nets.net_spec(name, obs.shape[1:], 6, np.float32, "tanh")
        return spec, obs, "HalfCheetah-v5 states, random actions"
    obs = gym_states("CartPole-v1", n, seed=0)
    return nets.net_spec(name, obs.shape[1:], 2, np.float32), obs, "CartPole-v1 states, random actions"


# ---- the forward table ----------------------------------------------------------------------------


def measure_net(name: str, a, bandwidth: float, peak: float, gpu) -> dict:
    """The net's counts and, per rows, its layers' and whole forward's measured and roofline rates."""
    rng = np.random.default_rng(0)
    n_obs = max(a.rows)
    spec, obs, source = observations(name, n_obs, a.game, rng)
    weights = half.rounded(rotated_weights(spec, max(a.rows), a.max_gb, rng, a.weights), a.weights)
    bits = half.kernel_view(weights)  # what the Numba pieces read (fp16: the halves' bits)
    n_ind = len(weights)
    n_threads = numba.get_num_threads()
    probe = np.arange(n_obs) % VALUE_SOURCES
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


# ---- the GPU at hand: its memory bandwidth and fp32 peak, measured --------------------------------

GPU_THREADS = 256  # threads per block of the probes
GPU_BLOCKS_PER_SM = 8  # 2,048 threads an SM: as many as a Hopper SM holds
GPU_CHAINS = 8  # independent FMA chains per thread of gpu_burn
GPU_ROUNDS = 4  # FMAs per chain in one pass of gpu_burn's loop


@cuda.jit
def gpu_fill(x):
    """x[i] = i, so that gpu_read's sum says every word was read once."""
    i, stride = cuda.grid(1), cuda.gridsize(1)
    while i < x.size:
        x[i] = uint64(i)
        i += stride


@cuda.jit
def gpu_read(x, out):
    """out[t]: the sum of the words thread t read of x (uint64), in a grid-stride loop.

    speed: four independent 8-byte loads a pass per thread, so that enough bytes are in flight for
    HBM (Little's law: ~4.8 TB/s x ~0.6 us is ~3 MB; a resident grid of 270K threads holds ~8.6
    MB); a warp's 32 loads of one pass are adjacent words, so they coalesce."""
    t, stride = cuda.grid(1), cuda.gridsize(1)
    n, s, i = x.size, uint64(0), t
    while i + 3 * stride < n:
        s += x[i] + x[i + stride] + x[i + 2 * stride] + x[i + 3 * stride]
        i += 4 * stride
    while i < n:
        s += x[i]
        i += stride
    out[t] = s


@cuda.jit
def gpu_burn(out, m, c, iters):
    """GPU_CHAINS independent chains of x * m + c per thread, GPU_ROUNDS x iters times each (NVVM contracts
    each to one fma.rn.f32; with 8 chains a warp's next FMA never waits on its last); m, c hold the
    values near c / (1 - m). out[t]: the chains' start (x, x + 1/8, ...), then their sum.

    speed: `for _ in range(iters)` left 6 instructions of 64-bit loop bookkeeping for every 8 FMAs
    (35 TFLOP/s of the H200's 67); four rounds a pass and an int32 count leave 3 for 32."""
    t = cuda.grid(1)
    x0 = out[t]
    # (float32 constants: a Python float or int would make the chains float64)
    x1, x2, x3 = x0 + float32(0.125), x0 + float32(0.25), x0 + float32(0.375)
    x4, x5 = x0 + float32(0.5), x0 + float32(0.625)
    x6, x7 = x0 + float32(0.75), x0 + float32(0.875)
    k, n = int32(0), int32(iters)
    while k < n:
        for _ in range(GPU_ROUNDS):  # (a constant trip count: unrolled)
            x0 = x0 * m + c
            x1 = x1 * m + c
            x2 = x2 * m + c
            x3 = x3 * m + c
            x4 = x4 * m + c
            x5 = x5 * m + c
            x6 = x6 * m + c
            x7 = x7 * m + c
        k += int32(1)
    out[t] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7


def gpu_grid(blocks: int | None) -> int:
    """Blocks of the probes' grids: GPU_BLOCKS_PER_SM per multiprocessor unless given."""
    return blocks or GPU_BLOCKS_PER_SM * cuda.get_current_device().MULTIPROCESSOR_COUNT


def gpu_timed(launch) -> float:
    """Seconds of launch() on the GPU, between two events of the default stream (the wall clock
    under the CUDA simulator, whose events measure nothing)."""
    start, end = cuda.event(), cuda.event()
    t0 = time.perf_counter()
    start.record()
    launch()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    return ms / 1e3 if ms > 0 else time.perf_counter() - t0


def gpu_bandwidth(nbytes: int, passes: int, blocks: int | None = None, threads: int = GPU_THREADS) -> float:
    """Bytes/s of a streaming read of nbytes of the GPU's memory (uint64 words; the best of passes
    timed reads after one checked read: the sum of the words must be that of 0..n-1)."""
    blocks = gpu_grid(blocks)
    n = max(nbytes // 8, 1)
    x, out = cuda.device_array(n, np.uint64), cuda.device_array(blocks * threads, np.uint64)
    gpu_fill[blocks, threads](x)
    gpu_read[blocks, threads](x, out)
    with np.errstate(over="ignore"):
        got = int(out.copy_to_host().sum(dtype=np.uint64))
    if got != (n * (n - 1) // 2) % 2**64:
        raise RuntimeError(f"the GPU's bandwidth probe read wrong values (sum {got} for 0..{n - 1})")
    best = min(gpu_timed(lambda: gpu_read[blocks, threads](x, out)) for _ in range(passes))
    return 8 * n / best


def gpu_peak(seconds: float, blocks: int | None = None, threads: int = GPU_THREADS, iters: int = 0) -> float:
    """fp32 FLOP/s of gpu_burn (2 FLOP per FMA), the best of 5 timed runs of ~seconds / 5 (iters
    doubled from 256 until one run takes that long, unless given); the values are checked
    against the same chains in float64 first."""
    blocks = gpu_grid(blocks)
    m, c = np.float32(0.999), np.float32(0.001)
    start = (np.arange(blocks * threads) % 64 / 64).astype(np.float32)
    out = cuda.to_device(start)
    gpu_burn[blocks, threads](out, m, c, 100)
    x0 = start.astype(np.float64)[:, None] + np.arange(GPU_CHAINS) / GPU_CHAINS
    fixed = float(c) / (1 - float(m))
    want = (fixed + (x0 - fixed) * float(m) ** (GPU_ROUNDS * 100)).sum(axis=1)
    if not np.allclose(out.copy_to_host(), want, rtol=1e-4, atol=1e-4):
        raise RuntimeError("the GPU's FMA probe computed wrong values")

    def run(n):
        return gpu_timed(lambda: gpu_burn[blocks, threads](out, m, c, n))

    n = iters or 256
    while not iters and run(n) < seconds / 5:
        n *= 2
    best = min(run(n) for _ in range(5))
    return 2 * GPU_CHAINS * GPU_ROUNDS * n * blocks * threads / best


class GpuForward:
    """nevo's CUDA policy on the GPU at hand, timed as the CPU forward is (distinct rows, rotated),
    and the GPU's own roof: its memory's streaming read and its fp32 FMA peak, measured."""

    def __init__(self, max_gb: float, seconds: float = 0.3):
        from nevo.nets.kernels.cuda import device_name

        self.name, self.max_gb = device_name(), max_gb
        self.bandwidth = gpu_bandwidth(int(min(max_gb, 2.0) * 2**30), 5)
        self.peak = gpu_peak(seconds)

    def roof(self, flops: float, nbytes: float) -> tuple[float, str]:
        """(forwards/s, bound) of this GPU's roofline for a forward of flops and nbytes."""
        return roofline_rate(flops, nbytes, self.bandwidth, self.peak)

    def forward_rate(self, spec, rows: int, obs, seconds: float, fmt: str = "fp32") -> float:
        from nevo.nets.kernels import make_policy

        weights = half.rounded(rotated_weights(spec, rows, self.max_gb, np.random.default_rng(1), fmt), fmt)
        policy = make_policy("cuda", spec)
        policy.load(weights)
        try:
            n = len(weights)
            return rate_of(lambda k: policy((np.arange(rows) + k * rows) % n, obs), rows, seconds)
        finally:
            policy.release()


def find_gpu(max_gb: float):
    """A GpuForward where a real CUDA GPU (not the simulator) can run nevo's kernels, else None."""
    try:
        from nevo.nets.kernels import resolve_device

        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or resolve_device("auto") != "cuda":
            return None
        return GpuForward(max_gb)
    except Exception:
        return None


# ---- end to end --------------------------------------------------------------------------------


def timed(fn, total: list):
    """fn, adding the seconds of each call to total[0]."""

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            total[0] += time.perf_counter() - t0

    return wrapper


class CountedPolicy:
    """A policy that counts the rows it is asked for (and submits them, where it submits steps)."""

    def __init__(self, policy):
        self.policy, self.rows = policy, 0
        if hasattr(policy, "submit"):  # the evaluator then collects a step after staging the next
            self.submit, self.collect = self._submit, policy.collect

    def _submit(self, rows_ind, obs, take=None):
        self.rows += len(rows_ind)
        return self.policy.submit(rows_ind, obs, take)

    def load(self, weights):
        self.policy.load(weights)

    def release(self):
        self.policy.release()

    def __call__(self, rows_ind, obs, take=None):
        self.rows += len(rows_ind)
        return self.policy(rows_ind, obs, take)


def seeded_reset_s(game: str, reps: int = 3) -> float:
    """Seconds of one seeded reset of one emulator (it reloads the ROM), best of reps."""
    from nevo.config import EnvConfig
    from nevo.tasks.envs import make_atari

    env = make_atari(EnvConfig(game=game), 1, 1)
    best = float("inf")
    try:
        for k in range(reps):
            t0 = time.perf_counter()
            env.reset(seed=np.array([k], np.int64))
            best = min(best, time.perf_counter() - t0)
    finally:
        env.close()
    return best


def restart_s(game: str, reps: int = 200) -> float:
    """Seconds of one episode start in nevo's emulator pool (AtariEmulator.restart: restoreState of
    the seeded reset's state), the mean of reps, each after a few random steps."""
    from nevo.tasks.atari_emulator import FRAME, STACK, AtariEmulator

    em = AtariEmulator(game)
    obs = np.zeros((STACK, *FRAME), np.uint8)
    actions = np.random.default_rng(0).integers(0, len(em.actions), (reps, 4))
    em.restart(obs)
    total = 0.0
    for k in range(reps):
        for a in actions[k]:
            em.step(int(a), obs)
        t0 = time.perf_counter()
        em.restart(obs)
        total += time.perf_counter() - t0
    return total / reps


def in_turn(a: float, b: float) -> float:
    """The rate of two stages that run one after the other on the same cores, at rates a and b."""
    return 1 / (1 / a + 1 / b)


def timed_pool(pool, split: dict) -> None:
    """Time the pool's calls into split: "send" (step commands handed out), "emulation" (waiting
    for steps, the episode starts the pool makes as they end included), "resets" (the episode
    starts asked for: the run's first episodes)."""
    starts = set()  # tickets of restart commands
    step, restart, wait = pool.step, pool.restart, pool.wait

    def restarting(slots):
        t = restart(slots)
        starts.add(t)
        return t

    def waiting(ticket):
        return timed(wait, split["resets"] if ticket in starts else split["emulation"])(ticket)

    pool.step = timed(step, split["send"])
    pool.restart = timed(restarting, split["resets"])
    pool.wait = waiting  # (drain() waits through it too)


def end_to_end(a, forward_roof: dict) -> dict:
    """One Frostbite generation of a.e2e_net, its time split, beside the limits (module docstring)."""
    from experiments.bench.bench_pipeline import emulator_limit, emulator_roof, pool_limit, population
    from nevo.config import EnvConfig, RunConfig
    from nevo.episodes import Episodes
    from nevo.evaluation import pipeline
    from nevo.evaluation.slot_weights import for_device
    from nevo.nets.kernels import make_policy
    from nevo.tasks.envs import atari_actions

    cores = machine.cores()
    env_cfg = EnvConfig(game=a.game, frame_cap=a.frame_cap)
    n_actions = atari_actions(a.game)
    spec = nets.net_spec(a.e2e_net, nets.OBS_SHAPE, n_actions)
    device = a.e2e_device
    slots, group, pipe = pipeline.layout(device, cores, a.population, RunConfig(env_slots=a.slots))
    # The limits of the emulators stepped from this process: in the lockstep layout's slots where
    # the pipeline is "workers" (one slot a process, which says nothing of the emulators' limit).
    lim_slots, lim_group = (slots, group)
    if pipe == "workers":
        lim_slots, lim_group, _ = pipeline.layout(device, cores, a.population, RunConfig(pipeline="lockstep"))
    limit = emulator_limit(env_cfg, lim_slots, lim_group, min(cores, lim_group), a.limit_seconds, n_actions)
    roof = emulator_roof(a.game, env_cfg.frameskip, a.frame_cap, cores, a.limit_seconds)
    pool_rate = pool_limit(env_cfg, lim_slots, cores, a.limit_seconds)
    reset_s, start_s = seeded_reset_s(a.game), restart_s(a.game)
    per_core = limit / cores
    reset_frames = reset_s * per_core  # a seeded reset, in frames of one core's emulation
    start_frames = start_s * roof / cores  # an episode start in the pool, in frames of one core's roof

    fresh, builder = population(spec, a.population, seed=a.population, dtype=half.dtype_of(a.weights))
    weights = for_device(builder, device)
    # (in "workers" the emulator processes run the policy: they count its rows)
    policy = make_policy(device, spec) if pipe == "workers" else CountedPolicy(make_policy(device, spec))
    # the evaluator's emulator processes: one per core, as training starts them
    ev = pipeline.AtariEvaluator(env_cfg, policy, weights, slots, cores, group_size=group, pipeline=pipe)
    timings = {"emulation": [0.0], "send": [0.0], "resets": [0.0], "weights": [0.0]}
    timed_pool(ev.pool, timings)
    weights.take = timed(weights.take, timings["weights"])
    weights.start = timed(weights.start, timings["weights"])
    try:
        n = a.population
        res = ev.run(fresh, Episodes(np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64) + 1000))
    finally:
        ev.close()
    wall, frames = res.wall_s, res.total_frames
    rows = ev.last["rows"] if pipe == "workers" else policy.rows
    fpf = frames / max(rows, 1)  # game frames per forward row (frameskip, no-ops)
    split = {"forward": res.forward_s, **{k: v[0] for k, v in timings.items()}}
    if pipe == "workers":  # the mean emulator process's seconds emulating
        split["emulation"] = ev.last["emulation_s"]
    split["python"] = max(wall - sum(split.values()), 0.0)
    rate = frames / wall
    fwd_bound = frames / res.forward_s
    net_roof = forward_roof[a.e2e_net]
    roof_bound = net_roof["roofline_per_s"] * fpf
    lockstep_bound = in_turn(limit, roof_bound)  # forward and emulation in turn on the same cores
    in_turn_roof = in_turn(roof, fwd_bound)  # the emulator roof, then nevo's forward, in turn
    mean_ep = frames / n
    h100_emu = H100_CORES * per_core * mean_ep / (mean_ep + reset_frames)
    cpu = device == "cpu"  # (the in-turn figures: on the CPU, where the two share the cores)
    out = {
        "net": a.e2e_net, "game": a.game, "population": n, "frame_cap": a.frame_cap, "slots": slots,
        "group": group, "cores": cores, "workers": ev.threads, "frames": frames, "wall_s": wall,
        "frames_per_s": rate, "forward_rows": rows, "pipeline": pipe, "frames_per_forward": fpf,
        "split_s": split,
        "tail_s": res.tail_s, "emulator_limit": limit, "emulator_roof": roof, "pool_limit": pool_rate,
        "seeded_reset_s": reset_s, "seeded_reset_frames": reset_frames, "restart_s": start_s,
        "restart_frames": start_frames, "forward_bound_nevo": fwd_bound, "device": device,
        "forward_bound_roofline": roof_bound if cpu else None,  # (the CPU's roofline: on the CPU)
        "lockstep_bound_roofline": lockstep_bound if cpu else None,
        "in_turn_roof": in_turn_roof if cpu else None, "h100": {},
    }  # fmt: skip
    print(f"\nend to end: {a.game}, net {a.e2e_net} ({a.weights}) on the {device.upper()}, population {n} "
          f"(one episode each, cap {a.frame_cap:,} frames), {slots} emulators in groups of {group} "
          f"({pipe}) in {ev.threads} processes, {cores} cores")  # fmt: skip
    print(f"  nevo: {frames:,} frames in {wall:.1f} s = {rate:,.0f} frames/s; {rows:,} forward rows "
          f"({fpf:.2f} frames each)")  # fmt: skip
    print(f"  emulator limit, ale-py's vector env (random actions, no inference): {limit:,.0f} frames/s "
          f"-> nevo at {rate / limit:.0%}")  # fmt: skip
    print(f"  emulator roof, bare emulators in {cores} processes (random actions, no inference, no IPC): "
          f"{roof:,.0f} frames/s -> nevo at {rate / roof:.0%}")  # fmt: skip
    print(f"  emulator pool's limit, {lim_slots} slots in {min(cores, lim_slots)} processes (lockstep, "
          f"random actions, no inference): {pool_rate:,.0f} frames/s = {pool_rate / roof:.0%} of the roof "
          f"-> nevo at {rate / pool_rate:.0%}")  # fmt: skip
    shares = f"{rate / limit:.0%} of the vector env's limit, {rate / roof:.0%} of the emulator roof"
    if not cpu:  # the CPU's roofline says nothing of the GPU's forward
        print(f"  forward-bound: nevo's GPU forward alone (its upload included) {fwd_bound:,.0f} frames/s "
              f"-> nevo at {rate / fwd_bound:.0%}")  # fmt: skip
    else:
        print(f"  forward-bound: nevo's forward alone {fwd_bound:,.0f} frames/s -> nevo at "
              f"{rate / fwd_bound:.0%}; the roofline's {roof_bound:,.0f} frames/s -> nevo at "
              f"{rate / roof_bound:.0%}")  # fmt: skip
        print(f"  forward and emulation in turn at their limits (roofline forward): {lockstep_bound:,.0f} "
              f"frames/s -> nevo at {rate / lockstep_bound:.0%}")  # fmt: skip
        print(f"  in-turn roof (the emulator roof, then nevo's forward alone): {in_turn_roof:,.0f} frames/s "
              f"-> nevo at {rate / in_turn_roof:.0%}")  # fmt: skip
        shares = (f"{rate / limit:.0%} of the vector env's limit, {rate / lockstep_bound:.0%} of its in-turn "
                  f"bound, {rate / roof:.0%} of the emulator roof, {rate / in_turn_roof:.0%} of the in-turn "
                  "roof")  # fmt: skip
    print(f"  nevo's share: {shares}")
    parts = ", ".join(f"{k} {v / wall:.0%}" for k, v in split.items())
    print(f"  generation's time: {parts}; tail (overlapping them) {res.tail_s / wall:.0%}")
    print(f"  a seeded reset: {reset_s * 1e3:.0f} ms = {reset_frames:,.0f} frames of one core's emulation; "
          f"an episode start in the pool: {start_s * 1e3:.2f} ms = {start_frames:,.1f} frames of one core's "
          f"roof; mean episode {mean_ep:,.0f} frames")  # fmt: skip
    for box, (bw, pk) in H100.items():
        fwd = roofline_rate(net_roof["flops"], net_roof["bytes"], bw, pk)[0] * fpf
        model = min(h100_emu, fwd)
        out["h100"][box] = {"emulator_limit": h100_emu, "forward_bound": fwd, "frames_per_s": model}
        print(f"  H100 {box} model: emulation {H100_CORES} cores x {per_core:,.0f} frames/s with resets "
              f"= {h100_emu:,.0f}; forward-bound {fwd:,.0f}; overlapped: {model:,.0f} frames/s "
              f"({'emulation' if h100_emu <= fwd else 'forward'} bound)")  # fmt: skip
    return out


# ---- main -----------------------------------------------------------------------------------------


def main(argv=None) -> dict:
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
    p.add_argument("--json", default=None, help="write every figure to this file")
    p.add_argument("--weights", default="fp32", choices=list(half.FORMATS), help="the weight rows' format")
    a = p.parse_args(argv)
    for name in a.nets:
        nets.layers_of(name)  # ValueError naming the valid nets, before any measurement
    if min(a.rows) < 1 or a.seconds <= 0:
        p.error("--rows must be positive and --seconds above 0")
    if a.e2e_device == "cuda" and not a.skip_end_to_end:
        from nevo.nets.kernels import resolve_device

        try:  # one line now, not after the forward table, where there is no GPU
            resolve_device("cuda")
        except ValueError as e:
            p.error(str(e))

    cores, threads, facts = machine.cores(), numba.get_num_threads(), cpu_facts()
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
          f"({pk.fma / 1e9:.0f}), BLAS sgemm on {pk.blas_threads} threads on nevo's {kernels} kernels "
          f"({pk.blas / 1e9:.0f}){own}")  # fmt: skip
    costs = pk.note()
    if costs:
        print(costs)
    print(f"ridge: {peak / bandwidth:.1f} FLOP/byte here; H100 SXM {H100['SXM'][1] / H100['SXM'][0]:.0f}, "
          f"PCIe {H100['PCIe'][1] / H100['PCIe'][0]:.0f}")  # fmt: skip
    gpu = find_gpu(a.max_gb)
    print(f"GPU: {gpu.name}: streaming read {gpu.bandwidth / 1e12:.2f} TB/s, fp32 FMA peak "
          f"{gpu.peak / 1e12:.1f} TFLOP/s (ridge {gpu.peak / gpu.bandwidth:.0f} FLOP/byte), measured; "
          f"its forward rates and roof beside the H100 model" if gpu else
          "no GPU here: the H100 columns are the model (module docstring)")  # fmt: skip
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
    for k, name in enumerate(a.nets):
        # speed: the host's other tenants move the bandwidth from minute to minute (41 to 74 GB/s
        # within an hour on the 2-core Zen 5 VM), so each net's roof takes a read just before it
        now = bandwidth if k == 0 else memory_bandwidth(a.bandwidth_mb * 2**20, a.passes)
        out["nets"].append(measure_net(name, a, now, peak, gpu))
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
            quick = argparse.Namespace(**{**vars(a), "rows": [min(a.rows)], "seconds": 0.05})
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
