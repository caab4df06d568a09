"""Benchmark the forward pass: forwards/s and GB/s, on the CPU (Numba) or a CUDA GPU (numba.cuda).

    python -m experiments.bench.bench_forward [--net large|small] [--rows 1 8 64] [--individuals N]
    python -m experiments.bench.bench_forward --device cuda [--net large|small] [--rows 64 1000 4096]
    python -m experiments.bench.bench_forward --weights fp32 fp16 ...           # both weight formats, in turn
    python -m experiments.bench.bench_forward --device cuda --word-bytes 2 4 8 ...  # the dense loads' width
    python -m experiments.bench.bench_forward --device cuda --conv-px 4 8 ...   # the convs' pixels a thread
    python -m experiments.bench.bench_forward --staging [--rows 64 256 1000] [--load 16]  # a GPU step's host

CPU: "distinct": every row has its own individual, and each timed call uses individuals the previous
calls did not (rotating through all N), so the weights come from memory, not from a warm cache.
"shared": validation's shape, --per-ind rows (default 30) of each of --groups individuals.
GB/s counts every weight byte of each individual a call uses once (the kernel skips the rows of
zero inputs, so it moves fewer bytes than this nominal figure).

CUDA: both nets (or --net), 1,000 individuals (--individuals) whose weights are filled on the
device by a kernel (the `large` population is 16 GB), rows drawn from them (distinct up to 1,000
rows, then ~rows/1,000 rows per individual). Per row count:
  step f/s     forwards/s of a policy call as the evaluator makes it: the rows' uint8 frames
               gathered from every slot's, up, kernels, int32 actions down;
  kernel ms    the kernels alone (obs already on the device), timed with CUDA events; below each
               row, their time by layer, and a step's parts timed one at a time (upload: the
               obs copied into page-locked memory and sent up; upload, gathered: the same from
               every slot's frames, as a run does (gather_rows); the kernels; the actions down);
  GB/s nominal every weight byte of each individual of the call + every activation byte read
               (obs, each layer's input), per kernel time; "% copy" compares it with the card's
               device-to-device copy bandwidth, measured in the same run (2 x bytes / time);
  GB/s read    the bytes actually read: the dense kernel skips the weight rows of inputs that are
               zero in every row of a tile;
  torch f/s    where PyTorch is installed: the same forward through torch.func.vmap over stacked
               per-individual modules (functional_call), obs and weights already on the device,
               TF32 off on both sides; "x torch" = our kernel forwards/s over torch's.

This module holds the command line, the CPU benchmark and --staging; the CUDA benchmark is in
experiments/bench/forward_cuda.py, the nets in PyTorch in experiments/bench/forward_torch.py.
"""

import argparse
import time

import numba
import numpy as np

from experiments.bench.forward_cuda import bench_cuda
from experiments.bench.forward_torch import torch_vmap
from nevo.nets import init_scale, net_spec

# Settings (command line overrides)
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
parser.add_argument("--net", default=None, choices=["large", "small"], help="cpu: large; cuda: both")
parser.add_argument("--rows", type=int, nargs="+", default=None, help="cpu: 1..128; cuda: 64..4096")
parser.add_argument(
    "--individuals", type=int, default=0, help="0: cpu: enough for the largest call; cuda: 1000"
)
parser.add_argument("--groups", type=int, default=10, help="shared case: individuals")
parser.add_argument("--per-ind", type=int, default=30, help="shared case: rows per individual")
parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
parser.add_argument("--max-gb", type=float, default=4.0, help="cpu: cap on the weights array")
parser.add_argument("--no-torch", action="store_true", help="cuda: skip the PyTorch comparison")
parser.add_argument(
    "--staging",
    action="store_true",
    help="only the host work of staging a GPU step's frames (runs without a GPU): obs[take] then a "
    "copy, against a gather on one thread, on all, and nevo's choice",
)
parser.add_argument(
    "--load", type=int, default=0, help="--staging: emulators stepping in the background meanwhile"
)
parser.add_argument(
    "--word-bytes",
    nargs="+",
    type=int,
    default=[0],
    help="cuda: the dense layers' load width in bytes, each in turn (0: CudaPolicy's default; "
    "fp16 2/4/8, fp32 4/8)",
)
parser.add_argument(
    "--conv-px",
    nargs="+",
    type=int,
    default=[0],
    help="cuda: the convs' output pixels per thread, each in turn (0: CudaPolicy's default, PX)",
)
parser.add_argument(
    "--weights",
    nargs="+",
    default=["fp32"],
    choices=["fp32", "fp16"],
    help="weight formats to measure, in turn (fp16: rows rounded once, read as 16 bits)",
)


def bench_staging(args):
    """A GPU step's frames, staged on the host (no GPU needed): the acting slots' Atari frames
    (uint8 4x84x84) gathered into the buffer that is uploaded, as NumPy did it (obs[take], then a
    copy), on one thread, on all the Numba threads, and as nevo.nets.kernels.cuda.gather_rows
    does (one thread below PARALLEL_GATHER_BYTES). With --load N, N Frostbite emulators step in
    the background meanwhile (vector envs of 4, 2 threads each), as other groups' emulators do
    while a run's policy is called. The mean per step over 5 alternated rounds of --seconds each
    (a mean: under load, what a run pays is the waits of the slowest calls)."""
    import threading

    from nevo.nets.kernels import cuda as kernels

    rng = np.random.default_rng(0)
    stop, envs, loaders = threading.Event(), [], []
    if args.load:
        from nevo.atari.game import make_atari
        from nevo.config import EnvConfig

        envs = [make_atari(EnvConfig(game="frostbite"), 4, 2) for _ in range(-(-args.load // 4))]

        def step_on(env):
            env.reset(seed=np.zeros(4, np.int64))
            noop = np.zeros(4, np.int64)
            while not stop.is_set():
                env.step(noop)

        loaders = [threading.Thread(target=step_on, args=(e,), daemon=True) for e in envs]
        for t in loaders:
            t.start()
        time.sleep(1.0)
    threads = numba.get_num_threads()
    print(f"staging a step's frames on the host, {threads} Numba threads, "
          f"{4 * len(envs)} emulators stepping meanwhile (ms per step, mean of 5 rounds)")  # fmt: skip
    print(f"{'rows':>5} {'MB':>6} {'obs[take] + copy':>16} {'one thread':>10} {'all threads':>11} "
          f"{'gather_rows':>11}")  # fmt: skip
    try:
        for rows in args.rows or [8, 64, 256, 1000]:
            obs = rng.integers(0, 256, (rows + rows // 4, 4 * 84 * 84), dtype=np.uint8)  # every slot's
            take = np.sort(rng.permutation(len(obs))[:rows])  # the acting slots
            staged = np.empty((rows, obs.shape[1]), np.uint8)

            def numpy_way(obs=obs, take=take, staged=staged):
                staged[:] = obs[take]

            ways = [numpy_way] + [
                lambda f=f, obs=obs, take=take, staged=staged: f(obs, take, staged)
                for f in (kernels._gather_one_thread, kernels._gather_all_threads, kernels.gather_rows)
            ]
            for f in ways:
                f()  # compile
            spent, calls = [0.0] * len(ways), [0] * len(ways)
            for _ in range(5):
                for k, f in enumerate(ways):
                    t0 = time.perf_counter()
                    while calls[k] < 3 or time.perf_counter() - t0 < args.seconds / 5:
                        f()
                        calls[k] += 1
                    spent[k] += time.perf_counter() - t0
            ms = [1e3 * t / n for t, n in zip(spent, calls)]
            print(f"{rows:>5} {staged.nbytes / 1e6:>6.1f} {ms[0]:>16.2f} {ms[1]:>10.2f} {ms[2]:>11.2f} "
                  f"{ms[3]:>11.2f}")  # fmt: skip
    finally:
        stop.set()
        for t in loaders:
            t.join()
        for e in envs:
            e.close()


def bench_cpu(args):
    for fmt in args.weights:
        bench_cpu_format(args, fmt)


def bench_cpu_format(args, fmt):
    from nevo.nets import half
    from nevo.nets.kernels.cpu import forward

    spec = net_spec(args.net or "large")
    rows_list = args.rows or [1, 2, 8, 32, 64, 128, 256]
    dtype = half.dtype_of(fmt)
    bytes_per_ind = spec.n_params * dtype.itemsize
    cap = max(1, int(args.max_gb * 1e9 // bytes_per_ind))
    n_ind = min(args.individuals or max(max(rows_list), args.groups), cap)
    rng = np.random.default_rng(0)
    weights = np.empty((n_ind, spec.n_params), dtype)  # (n_individuals, n_params)
    scale = init_scale(spec)
    for k in range(n_ind):
        weights[k] = half.rounded(rng.standard_normal(spec.n_params, dtype=np.float32) * scale, fmt)
    print(
        f"net {spec.name}, {fmt} weights: {spec.n_params:,} params, {n_ind} individuals "
        f"({weights.nbytes / 1e9:.2f} GB of weights), {numba.get_num_threads()} Numba threads"
    )

    def measure(rows_for_call, rows):
        """forwards/s and calls/s of forward over rows_for_call(k), k = 0, 1, ... for ~args.seconds."""
        obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)  # (rows, C, H, W)
        forward(spec, weights, rows_for_call(0), obs)  # warm up: compile or load the cache
        calls, t0 = 0, time.perf_counter()
        while True:
            forward(spec, weights, rows_for_call(calls + 1), obs)
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed > args.seconds and calls >= 3:
                return calls * rows / elapsed, calls / elapsed

    forward(spec, weights, np.zeros(1, np.int64), np.zeros((1, *spec.obs_shape), np.uint8))
    bandwidth = memory_bandwidth()
    print(f"threading layer {numba.threading_layer()}; memory copy bandwidth {bandwidth / 1e9:.1f} GB/s")
    print(f"{'case':>10} {'rows':>6} {'inds/call':>9} {'forwards/s':>11} {'ms/call':>9} {'GB/s':>7}")
    for rows in rows_list:
        inds = min(rows, n_ind)
        fps, cps = measure(lambda k, rows=rows: (np.arange(rows) + k * rows) % n_ind, rows)
        gbs = cps * inds * bytes_per_ind / 1e9
        print(f"{'distinct':>10} {rows:>6} {inds:>9} {fps:>11.0f} {1e3 / cps:>9.2f} {gbs:>7.2f}")
    groups = min(args.groups, n_ind)
    rows = groups * args.per_ind
    fps, cps = measure(lambda k: (np.repeat(np.arange(groups), args.per_ind) + k * groups) % n_ind, rows)
    gbs = cps * groups * bytes_per_ind / 1e9
    print(f"{'shared':>10} {rows:>6} {groups:>9} {fps:>11.0f} {1e3 / cps:>9.2f} {gbs:>7.2f}")
    print(
        f"(GB/s: nominal weight bytes of the call's individuals per second, skipped zero-input rows "
        f"included; this machine copies {bandwidth / 1e9:.1f} GB/s, read + write)"
    )

    # The NumPy reference (the truth the tests compare with), on a few rows: it is slow.
    from nevo.nets.kernels.reference import forward as reference

    obs = rng.integers(0, 256, (8, *spec.obs_shape), dtype=np.uint8)
    for rows in (1, 8):
        t0 = time.perf_counter()
        reference(spec, weights, np.arange(rows) % n_ind, obs[:rows])
        print(f"{'reference':>10} {rows:>6} {rows:>9} {rows / (time.perf_counter() - t0):>11.1f}")

    # PyTorch's torch.func.vmap over stacked per-individual modules, where torch is installed.
    try:
        import torch
    except ImportError:
        print("torch not installed: no vmap comparison (pip install torch==2.13.0 gives the CPU build)")
        return
    n = min(64, n_ind)
    obs = rng.integers(0, 256, (n, *spec.obs_shape), dtype=np.uint8)
    ours, _ = measure(lambda k: (np.arange(n) + k * n) % n_ind, n)
    flat = torch.from_numpy(weights[:n].astype(np.float32))
    theirs, logits = torch_vmap(spec, flat, n, 1, obs, args.seconds, "cpu")
    _, mine = forward(spec, weights, np.arange(n), obs)
    same = np.mean(np.argmax(logits, axis=1) == np.argmax(mine, axis=1))
    print(
        f"torch {torch.__version__} vmap, {n} distinct individuals x 1 row: {theirs:,.0f} forwards/s "
        f"({theirs * 4 * spec.n_params / 1e9:.1f} GB/s of weights); nevo at {n} rows: {ours:,.0f} "
        f"forwards/s = {ours / theirs:.2f} x torch (goal >= 0.9); same actions on {same:.0%} of rows"
    )


def memory_bandwidth(nbytes=2**31, reps=5):
    """This machine's memory bandwidth in B/s: a copy by one thread per core, read + write counted
    (2 x bytes / time), as the GPU's device-to-device copy is counted."""
    from concurrent.futures import ThreadPoolExecutor

    from nevo.machine import cores

    a = np.ones(nbytes // 4, np.float32)
    b = np.zeros_like(a)
    parts = np.array_split(np.arange(a.size), cores())
    spans = [(p[0], p[-1] + 1) for p in parts]

    def copy(span):  # numpy frees the GIL while it copies
        np.copyto(b[span[0] : span[1]], a[span[0] : span[1]])

    with ThreadPoolExecutor(len(spans)) as pool:
        list(pool.map(copy, spans))  # warm up
        t0 = time.perf_counter()
        for _ in range(reps):
            list(pool.map(copy, spans))
        return 2 * nbytes * reps / (time.perf_counter() - t0)


if __name__ == "__main__":
    args = parser.parse_args()
    if args.staging:
        bench_staging(args)
    elif args.device == "cuda":
        bench_cuda(args)
    else:
        bench_cpu(args)
