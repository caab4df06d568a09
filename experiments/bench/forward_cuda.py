"""bench_forward's CUDA benchmark (`python -m experiments.bench.bench_forward --device cuda`): the
forward on a GPU (numba.cuda), a step as the evaluator makes it and the kernels alone, against the
card's copy bandwidth and PyTorch's vmap; its columns are described in bench_forward's docstring.

Shared code, not a command: bench_forward calls bench_cuda(args) with its parsed arguments.
"""

import time

import numba
import numpy as np
from numba import cuda  # importing it does not need a GPU (bench_forward imports this on any machine)

from experiments.bench.forward_torch import torch_vmap
from nevo.nets import init_scale, net_spec


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
    """(nominal, read) bytes of weights and activations a call reads (see bench_forward's docstring)."""
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
