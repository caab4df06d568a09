"""A forward's counts and its layers run alone. Per forward of one row: the FLOP and bytes of the
input's load and of each layer (layer_counts), the roofline's rate of a count (roofline_rate, also
for the H100 model) and of the layers run in turn (in_turn_rate); the Numba drivers that run
nevo's own pieces one layer at a time over distinct rows (layer_inputs, one_layer); the rotated
individuals whose weights come from memory, not cache (rotated_weights); and the real observations
each kind of net sees (observations). nevo.roofline.report's docstring says what is counted."""

from __future__ import annotations

import time

import numba
import numpy as np
from numba import prange

from nevo import nets
from nevo.nets import CIN, COUT, DENSE, KIND, half
from nevo.nets.kernels import cpu  # (it sets OpenMP's wait policy before Numba's first parallel call)
from nevo.nets.kernels.cpu import ZERO
from nevo.roofline.cpu import llc_bytes

H100 = {  # (HBM bytes/s, fp32 FLOP/s), the datasheets' dense figures
    "SXM": (3.35e12, 67e12),
    "PCIe": (2.0e12, 51e12),
}
VALUE_SOURCES = 16  # random individuals whose values the rotated weights repeat
# A layer timed alone runs at least this many rows a call (its call's rows over again, through
# other individuals): one parallel region's start and end (~60-100 us on the 2-core VMs) would
# otherwise weigh on a fast layer's rate, which a whole forward pays once for all its layers.
LAYER_ROWS = 256


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
    bytes (see nevo.roofline.report's docstring). kept[i]: the nonzero share of dense layer i's
    inputs (read for dense layers only); itemsize: a weight's bytes (2 for --weights fp16)."""
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
    for r in range(rows):
        w = weights[rows_ind[r]]
        cpu.load_obs(table, obs, r, full[r], div, quotients)
        for i in range(n):
            if table[i, KIND] == DENSE:
                nz = np.empty((1, table[i, CIN]), np.int32)
                cpu.dense_block(
                    table, i, w, full, seg[i], seg[i + 1], order, r, r + 1, ZERO, table[i, COUT], nz
                )
            else:
                cpu.spatial_rows(table, i, w, full[r, seg[i] : seg[i + 1]], full[r, seg[i + 1] :], cols)
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
    scr = np.zeros((n_threads, seg[n_conv]), np.float32)
    cols = np.empty((n_threads, cpu.cols_size(table)), np.float32)
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
                cpu.dense_block(
                    table, i, w, work, seg[i], seg[i + 1], order, q, q + 1, ZERO, table[i, COUT], nz
                )
            else:
                dst = scr[t, seg[i + 1] :] if i + 1 < n_conv else work[r, seg[i + 1] :]
                cpu.spatial_rows(table, i, w, scr[t, seg[i] : seg[i + 1]], dst, cols[t])
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
        from nevo.atari.game import atari_actions, atari_reference_batch
        from nevo.config import EnvConfig

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
