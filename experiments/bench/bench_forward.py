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
"""

import argparse
import time

import numba
import numpy as np
from numba import cuda  # importing it does not need a GPU; the CPU bench never uses it

from nevo import machine
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
        from nevo.config import EnvConfig
        from nevo.tasks.envs import make_atari

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
    print(f"threading layer {numba.threading_layer()}; memory copy bandwidth {bandwidth / 1e9:.1f} GB/s; "
          f"{machine.blas_line()}")  # fmt: skip
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


# ---- CUDA -----------------------------------------------------------------------------------------


def copy_bandwidth(nbytes=2 * 2**30, reps=10):
    """The card's device-to-device copy bandwidth in B/s, counting read + write (2 x bytes / time)."""
    a = cuda.device_array(nbytes // 4, np.float32)
    b = cuda.device_array_like(a)
    b.copy_to_device(a)  # warm up
    start, end = cuda.event(), cuda.event()
    start.record()
    for _ in range(reps):
        b.copy_to_device(a)
    end.record()
    end.synchronize()
    return 2 * nbytes * reps / (start.elapsed_time(end) / 1e3)


def device_weights(spec, n_ind, seed, dtype=np.float32):
    """(n_ind, pitch) of dtype (float32, or float16: rounded as stored) on the device, ~N(0,1)
    x the reference init scale, made there; each row's first n_params are the net's.

    speed: the `large` population is 16 GB; a kernel fills it in milliseconds, an upload from the
    host would first need it in host memory. N(0,1) is approximated by 4 uniforms (Irwin-Hall).
    """
    from nevo.genomes.cuda_build import pitch
    from nevo.genomes.noise import splitmix64
    from nevo.nets.kernels.cuda import check_fits

    @cuda.jit
    def fill(w, scale, seed, n_params):
        # Threads: one per (individual, parameter): grid (parameter blocks, individuals).
        k = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        i = cuda.blockIdx.y
        if k < n_params:
            h = splitmix64(seed * 1_000_003 + i * n_params + k)
            u = numba.float32(0)
            for j in range(4):
                u += numba.float32((h >> numba.uint64(16 * j)) & numba.uint64(0xFFFF))
            z = (u / numba.float32(65535.0) - numba.float32(2.0)) * numba.float32(1.7320508)
            w[i, k] = z * scale[k]

    size = np.dtype(dtype).itemsize
    row = pitch(spec.n_params, size)  # rows padded to 128 bytes, as a run's device build makes them
    check_fits(size * n_ind * row, cuda.current_context().get_memory_info().free, "the population")
    w = cuda.device_array((n_ind, row), dtype)
    fill[(-(-spec.n_params // 256), n_ind), 256](w, cuda.to_device(init_scale(spec)), seed, spec.n_params)
    cuda.synchronize()
    return w


def bytes_per_call(spec, policy, rows_ind):
    """(nominal, read) bytes of weights and activations a call reads (see the module docstring)."""
    from nevo.nets.kernels.cuda import tiles

    rows, n_dist = len(rows_ind), len(np.unique(rows_ind))
    act = int(np.prod(spec.obs_shape)) + 4 * sum(
        lay.cin * lay.in_hw[0] * lay.in_hw[1] for lay in spec.layers[1:]
    )
    size = policy.weights.dtype.itemsize  # 4, or 2 for fp16 weights
    nominal = n_dist * size * spec.n_params + rows * act
    read = nominal
    order, tile_start, tile_count = tiles(rows_ind)
    for i, lay in enumerate(spec.layers[:-1]):
        if lay.kind == "dense" and i > 0:  # the kernel reads the weight rows of nonzero inputs only
            x = policy.activations(i - 1).reshape(rows, -1) != 0  # (rows, n_in)
            kept = sum(x[order[s : s + c]].any(axis=0).sum() for s, c in zip(tile_start, tile_count))
            read -= size * lay.cout * (lay.cin * n_dist - kept)
    return nominal, read


def torch_module(spec):
    """The spec as a torch.nn.Module: SAME padding by F.pad, TF's (H, W, C) flatten order.

    Takes uint8 observations (..., C, H, W), batched or not (EvoTorch's vmap gives one at a time)."""
    import torch
    import torch.nn.functional as F

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(
                torch.nn.Conv2d(lay.cin, lay.cout, lay.kernel, lay.stride)
                if lay.kind == "conv"
                else torch.nn.Linear(lay.cin, lay.cout)
                for lay in spec.layers
            )

        def forward(self, x):  # x (..., C, H, W) uint8 or float pixel values
            x = x.float() / 255.0
            for i, (lay, mod) in enumerate(zip(spec.layers, self.layers)):
                if lay.kind == "conv":
                    top, bottom, left, right = lay.pad
                    x = mod(F.pad(x, (left, right, top, bottom)))
                else:
                    if i > 0 and spec.layers[i - 1].kind == "conv":
                        x = x.movedim(-3, -1).flatten(-3)  # (..., C, H, W) -> (..., H * W * C)
                    x = mod(x)
                if lay.relu:
                    x = torch.relu(x)
            return x

    return Net()


def torch_params(spec, flat):
    """{name: (n, *shape)} of n individuals' nevo weights flat (n, n_params) (a torch tensor), in
    torch_module's layouts: conv HWIO -> OIHW, dense (in, out) -> (out, in)."""
    n, params = len(flat), {}
    for i, lay in enumerate(spec.layers):
        w = flat[:, lay.w_offset : lay.b_offset]
        if lay.kind == "conv":
            w = w.reshape(n, lay.kernel, lay.kernel, lay.cin, lay.cout).permute(0, 4, 3, 1, 2)
        else:
            w = w.reshape(n, lay.cin, lay.cout).transpose(1, 2)
        params[f"layers.{i}.weight"] = w.contiguous()
        params[f"layers.{i}.bias"] = flat[:, lay.b_offset : lay.b_offset + lay.cout].contiguous()
    return params


def torch_vmap(spec, flat, n, m, obs, seconds, device="cuda"):
    """(forwards/s, logits (n*m, n_actions)) of torch.func.vmap over n stacked individuals, m rows each.

    flat (n, n_params) float32 torch tensor on `device` (on the GPU, shared with nevo's buffer);
    obs (n*m, C, H, W) uint8.
    """
    import torch
    from torch.func import functional_call, vmap

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    model = torch_module(spec).to(device)
    params = torch_params(spec, flat[:n])
    x = torch.as_tensor(obs, device=device).view(n, m, *spec.obs_shape)
    run = vmap(lambda p, xi: functional_call(model, p, (xi,)))
    with torch.no_grad():
        logits = run(params, x).reshape(n * m, -1)
        sync()
        calls, t0 = 0, time.perf_counter()
        while calls < 3 or time.perf_counter() - t0 < seconds:
            run(params, x)
            sync()
            calls += 1
        fps = calls * n * m / (time.perf_counter() - t0)
    del params
    if device == "cuda":
        torch.cuda.empty_cache()
    return fps, logits.cpu().numpy()


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


def bench_cuda(args):
    from nevo.nets.kernels.cuda import PX, CudaPolicy, device_name

    try:
        import torch

        has_torch = torch.cuda.is_available() and not args.no_torch
    except ImportError:
        has_torch = False
    sms = getattr(cuda.get_current_device(), "MULTIPROCESSOR_COUNT", "?")
    copy = copy_bandwidth()
    print(
        f"{device_name()}: {sms} SMs; device-to-device copy {copy / 1e9:,.0f} GB/s "
        f"(read + write); torch {'vmap: yes' if has_torch else 'not installed: no comparison'}"
    )
    rng = np.random.default_rng(0)
    n_ind = args.individuals or 1000
    summary = {}
    head = (
        f"{'net':>5} {'rows':>5} {'inds':>5} {'step f/s':>9} {'step ms':>8} {'kernel ms':>9} "
        f"{'kernel f/s':>10} {'GB/s nominal':>12} {'% copy':>6} {'GB/s read':>9} {'torch f/s':>9} "
        f"{'x torch':>7}"
    )
    cases = [(n, f, b, px) for n in ([args.net] if args.net else ["large", "small"]) for f in args.weights
             for b in args.word_bytes for px in args.conv_px]  # fmt: skip
    for net, fmt, word, px in cases:
        spec = net_spec(net)
        weights = device_weights(spec, n_ind, seed=1, dtype=np.float16 if fmt == "fp16" else np.float32)
        gb = weights.nbytes / 1e9
        policy = CudaPolicy(spec, word_bytes=word or None, conv_px=px or PX)
        policy.load(weights)
        per_word = sorted({k[4] for k in policy._dense.values()})
        print(f"\nnet {net}, {fmt} weights: {spec.n_params:,} params, {n_ind} individuals ({gb:.1f} GB on "
              f"the device); dense layers read {'/'.join(map(str, per_word))} weight(s) a load; convs "
              f"{policy.conv_px} output pixels a thread")  # fmt: skip
        print(head)
        for rows in args.rows or [64, 256, 1000, 4096]:
            obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)  # (rows, C, H, W)

            def rows_for(k, rows=rows):
                return (np.arange(rows) + k * rows) % n_ind  # distinct up to n_ind rows

            # a run's step gathers its rows' frames from every slot's (here a quarter more slots
            # than rows, scrambled)
            slots = np.concatenate([obs, obs[: rows // 4]])
            take = rng.permutation(len(slots))[:rows]
            policy(rows_for(0), slots, take)  # warm up: compile
            calls, t0 = 0, time.perf_counter()  # a step as the evaluator makes it
            while calls < 3 or time.perf_counter() - t0 < args.seconds:
                policy(rows_for(calls + 1), slots, take)
                calls += 1
            step_s = (time.perf_counter() - t0) / calls

            policy.upload(rows_for(0), obs)  # the kernels alone
            start, end = cuda.event(), cuda.event()
            reps = max(3, int(args.seconds / max(step_s, 1e-4)))
            start.record(policy.stream)
            for _ in range(reps):
                policy.launch()
            end.record(policy.stream)
            end.synchronize()
            kernel_s = start.elapsed_time(end) / 1e3 / reps
            layer_ms = np.zeros(len(spec.layers))  # each layer's kernels (events between layers)
            for _ in range(reps):
                marks = [cuda.event()]
                marks[0].record(policy.stream)
                policy.launch(marks)
                marks[-1].synchronize()
                layer_ms += [a.elapsed_time(b) / reps for a, b in zip(marks, marks[1:])]
            split = ", ".join(f"{lay.kind}{i + 1} {100 * t / layer_ms.sum():.0f}%" for i, (lay, t) in
                              enumerate(zip(spec.layers, layer_ms)))  # fmt: skip
            nominal, read = bytes_per_call(spec, policy, rows_for(0))

            torch_fps, ratio = float("nan"), float("nan")
            if has_torch and fmt == "fp32":  # (torch would compute in half precision on fp16 weights)
                n, m = (rows, 1) if rows <= n_ind else (n_ind, rows // n_ind)
                flat = torch.as_tensor(weights, device="cuda")[:, : spec.n_params]
                torch_fps, torch_logits = torch_vmap(spec, flat, n, m, obs[: n * m], args.seconds)
                ratio = rows / kernel_s / torch_fps
                if rows <= n_ind:  # same weights, same obs: the two must agree
                    _, ours = policy.forward(np.arange(n), obs[:n])
                    err = np.abs(ours - torch_logits).max() / (np.abs(ours).max() + 1e-12)
                    if err > 1e-3:
                        print(f"  warning: torch and nevo logits differ (max relative {err:.2g})")
            inds = len(np.unique(rows_for(0)))
            nominal_bw, read_bw = nominal / kernel_s, read / kernel_s
            print(
                f"{net:>5} {rows:>5} {inds:>5} {rows / step_s:>9,.0f} {step_s * 1e3:>8.2f} "
                f"{kernel_s * 1e3:>9.2f} {rows / kernel_s:>10,.0f} {nominal_bw / 1e9:>12,.0f} "
                f"{100 * nominal_bw / copy:>6.0f} {read_bw / 1e9:>9,.0f} {torch_fps:>9,.0f} {ratio:>7.2f}"
            )
            # each part synchronised; "upload, gathered": as a run uploads (the step above)
            parts = {"upload": 0.0, "upload, gathered": 0.0, "kernels": 0.0, "actions down": 0.0}
            for _ in range(reps):
                t0 = time.perf_counter()
                policy.upload(rows_for(0), slots, take)
                policy.stream.synchronize()
                t1 = time.perf_counter()
                policy.upload(rows_for(0), obs)
                policy.stream.synchronize()
                t2 = time.perf_counter()
                policy.launch()
                policy.stream.synchronize()
                t3 = time.perf_counter()
                policy.fetch_actions()
                times = (t2 - t1, t1 - t0, t3 - t2, time.perf_counter() - t3)
                for part, dt in zip(parts, times):
                    parts[part] += dt / reps
            print(f"      kernel time by layer: {split}")
            print(
                "      a step, its parts one at a time: "
                + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in parts.items())
            )
            if fmt == "fp32" and not word and not px:
                summary[(net, rows)] = (nominal / kernel_s / copy, ratio)
        policy.release()
        del policy, weights
        if hasattr(cuda.current_context(), "deallocations"):  # (not the simulator's)
            cuda.current_context().deallocations.clear()  # free the population before the next
    if ("large", 1000) in summary:
        frac, ratio = summary[("large", 1000)]
        print(
            f"\ngoal, large at 1,000 rows: >= 70% of copy bandwidth: {100 * frac:.0f}% "
            f"({'met' if frac >= 0.7 else 'NOT met'}); >= 1.5x torch vmap: {ratio:.2f}x "
            f"({'met' if ratio >= 1.5 else 'NOT met' if ratio == ratio else 'no torch'})"
        )


if __name__ == "__main__":
    args = parser.parse_args()
    if args.staging:
        bench_staging(args)
    elif args.device == "cuda":
        bench_cuda(args)
    else:
        bench_cpu(args)
