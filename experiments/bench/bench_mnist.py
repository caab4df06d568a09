"""Benchmark the MNIST nets' forward and one mini-batch ES generation: what an ES generation on
MNIST costs (ES against SGD, Zhang, Clune & Stanley 2017, arXiv 1712.06564).

    python -m experiments.bench.bench_mnist                       # both nets; ~1 min on 2 cores
    python -m experiments.bench.bench_mnist --nets mnist --individuals 100 --examples 100 1000
    python -m experiments.bench.bench_mnist --data synthetic      # random images: no MNIST needed

Forward: offspring-examples per second of nevo's per-individual forward, every row with its own
individual's weights, in mini-batch ES's shape: each of --individuals individuals on the same
--examples images, in one call (rows = individuals x examples), best of --repeats after an
untimed call (which compiles or loads Numba's cache).
  cpu     nevo.nets.kernels.cpu.forward;
  cuda    a CudaPolicy as the evaluator uses it, the weights loaded once, each call uploading the
          images and fetching the logits; where a GPU is at hand (not the simulator);
  torch   where PyTorch is installed: the same net through torch.func.vmap over the stacked
          weights (conv2d and max-pool with TF's SAME padding, TF's (H, W, C) flatten), on the
          CPU and on a GPU where torch sees one, its logits checked against nevo's on a few rows.

ES generation: one generation of mini-batch ES (--population offspring, the first --examples
images each, the --es-net net) through a run's own parts: nevo.algos.es.ES's ask, the evaluator
(nevo.evaluation.supervised, on the CPU) and tell, best of --repeats after one untimed generation.
Its parts, as shares of the generation: ask (the population as seeds), the forward
(Results.forward_s), the rest of the evaluation (each offspring's weights built from the noise
table, the batch drawn, the cross-entropy) and tell (centered ranks, the weighted noise sum, Adam).
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import numba
import numpy as np

from nevo import machine, nets

IMAGE = (1, 28, 28)  # (C, H, W) of an MNIST image
CLASSES = 10
CHECK_ROWS = 8  # rows whose logits are compared between backends
FORWARD_HEADER = "| backend | net | params | individuals | examples | rows | s/call | offspring-examples/s |"
ES_HEADER = "| part | s | share |"


def parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.bench.bench_mnist", description=__doc__.split("\n")[0]
    )
    p.add_argument("--nets", nargs="+", default=["mnist", "mnist-large"], choices=["mnist", "mnist-large"])
    p.add_argument("--individuals", type=int, nargs="+", default=[10, 100], help="per forward call")
    p.add_argument("--examples", type=int, nargs="+", default=[100], help="images per individual")
    p.add_argument("--repeats", type=int, default=3, help="timed calls; the best is reported (default: 3)")
    p.add_argument("--population", type=int, default=200, help="ES generation: offspring (default: 200)")
    p.add_argument("--es-net", default="mnist", choices=["mnist", "mnist-large"], help="ES generation's net")
    p.add_argument(
        "--limit-seconds",
        type=float,
        default=20.0,
        help="stop repeating a measurement once it has run this long (one timed run at least)",
    )
    p.add_argument(
        "--data", default="mnist", choices=["mnist", "synthetic"], help="synthetic: random uint8 images"
    )
    return p.parse_args(argv)


def data_set(kind: str, examples: int):
    """The DataSet to draw images from: MNIST (nevo's cache), or random images and labels."""
    from nevo.tasks.supervised import DataSet, mnist

    if kind == "mnist":
        return mnist()
    rng = np.random.default_rng(0)
    n = max(1000, examples)
    return DataSet.of(
        rng.integers(0, 256, (n, *IMAGE[1:]), dtype=np.uint8),
        rng.integers(0, CLASSES, n),
        rng.integers(0, 256, (100, *IMAGE[1:]), dtype=np.uint8),
        np.arange(100) % CLASSES,
    )


def best_time(call, args) -> float:
    """The least seconds of up to --repeats timed calls, stopping once they have taken
    --limit-seconds; one untimed call first (compiling, caches)."""
    call()
    best, spent = float("inf"), 0.0
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        call()
        t = time.perf_counter() - t0
        best, spent = min(best, t), spent + t
        if spent > args.limit_seconds:
            break
    return best


def gpu_at_hand() -> bool:
    """Whether numba.cuda has a real GPU (not the simulator)."""
    from numba import cuda

    return not numba.config.ENABLE_CUDASIM and cuda.is_available()


def agreement(mine: np.ndarray, theirs: np.ndarray) -> float:
    """Largest difference of two (rows, classes) logits over the largest of nevo's."""
    return float(np.abs(mine - theirs).max() / (np.abs(mine).max() + 1e-12))


# ---- PyTorch: the same net through torch.func.vmap ---------------------------------------------


def torch_forward(torch, spec):
    """f(params, x): one individual's logits (m, classes) for x (m, C, H, W) float in [0, 1], params
    the tensors of torch_params (its parameterised layers in order), as nevo's forward computes them."""
    F = torch.nn.functional

    def one(params, x):
        k = 0
        for lay in spec.layers:
            top, bottom, left, right = lay.pad
            if lay.kind == "conv":
                w, b = params[k], params[k + 1]  # (Cout, Cin, KH, KW), (Cout,)
                x = F.conv2d(F.pad(x, (left, right, top, bottom)), w, b, stride=lay.stride)
                k += 2
            elif lay.kind == "pool":  # after a ReLU: a zero pad never beats the window's max
                x = F.max_pool2d(F.pad(x, (left, right, top, bottom)), lay.kernel, lay.stride)
            else:
                if x.dim() == 4:  # (m, C, H, W) -> (m, H * W * C): TF's NHWC flatten
                    x = x.permute(0, 2, 3, 1).flatten(1)
                x = x @ params[k] + params[k + 1]  # (in, out), (out,)
                k += 2
            if lay.act == "relu":
                x = torch.relu(x)
        return x

    return one


def torch_params(torch, spec, weights, device):
    """[(n, ...) tensors] of n individuals' flat weights (n, n_params): conv HWIO -> OIHW, dense
    (in, out) as it is, each bias (n, out)."""
    flat = torch.from_numpy(weights).to(device)
    n, params = len(weights), []
    for lay in spec.layers:
        if lay.kind == "pool":
            continue
        w = flat[:, lay.w_offset : lay.b_offset].reshape(n, *lay.w_shape)
        if lay.kind == "conv":
            w = w.permute(0, 4, 3, 1, 2)  # (n, KH, KW, Cin, Cout) -> (n, Cout, Cin, KH, KW)
        params += [w.contiguous(), flat[:, lay.b_offset : lay.b_offset + lay.cout].contiguous()]
    return params


def torch_rows(args, spec, weights, images, n_ind, reference):
    """Table rows of torch.func.vmap's forward on each device torch has, or the line saying why none."""
    try:
        import torch
        from torch.func import vmap
    except ImportError:
        return [], "torch: not installed"
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 as nevo computes it
    torch.backends.cudnn.allow_tf32 = False
    run = vmap(torch_forward(torch, spec))
    rows, notes = [], []
    for device in devices:
        params = torch_params(torch, spec, weights[:n_ind], device)
        x = torch.from_numpy(images).to(device).float().div(255.0)  # (m, C, H, W)
        x = x.unsqueeze(0).expand(n_ind, *x.shape).contiguous()  # (n, m, C, H, W): each its own copy

        def call(params=params, x=x, device=device):
            with torch.no_grad():
                out = run(params, x)
            if device == "cuda":
                torch.cuda.synchronize()
            return out

        s = best_time(call, args)
        logits = call().reshape(-1, spec.n_actions)[:CHECK_ROWS].cpu().numpy()
        rows.append((f"torch-{device}", spec, n_ind, len(images), s))
        notes.append(f"torch {torch.__version__} {device} logits within {agreement(reference, logits):.1g}")
    return rows, "; ".join(notes)


# ---- the forward table ---------------------------------------------------------------------------


def forward_rows(args, data):
    """(backend, spec, individuals, examples, s per call) of every net and shape, and notes."""
    from nevo.nets.kernels.cpu import forward

    rows, notes = [], []
    gpu = gpu_at_hand()
    for name in args.nets:
        spec = nets.net_spec(name, IMAGE, CLASSES)
        rng = np.random.default_rng(1)
        n_max = max(args.individuals)
        scale = nets.init_scale(spec)
        weights = np.empty((n_max, spec.n_params), np.float32)  # (individuals, n_params)
        for k in range(n_max):
            weights[k] = rng.standard_normal(spec.n_params, dtype=np.float32) * scale
        policy = None
        if gpu:
            from nevo.nets.kernels.cuda import CudaPolicy

            policy = CudaPolicy(spec)
            policy.load(weights)
        for n_ind in args.individuals:
            for m in args.examples:
                images = data.train_x[np.arange(m) % len(data.train_y)]  # (m, C, H, W) uint8
                obs = np.tile(images, (n_ind, 1, 1, 1))  # (n_ind * m, C, H, W): the same batch for each
                rows_ind = np.repeat(np.arange(n_ind, dtype=np.int64), m)  # (n_ind * m,) row -> individual
                s = best_time(partial(forward, spec, weights, rows_ind, obs), args)
                rows.append(("cpu", spec, n_ind, m, s))
                _, mine = forward(spec, weights, rows_ind[:CHECK_ROWS], obs[:CHECK_ROWS])
                if policy is not None:
                    s = best_time(partial(policy.forward, rows_ind, obs), args)
                    rows.append(("cuda", spec, n_ind, m, s))
                    _, logits = policy.forward(rows_ind[:CHECK_ROWS], obs[:CHECK_ROWS])
                    notes.append(f"{name} cuda logits within {agreement(mine, logits):.1g} of the cpu's")
                more, note = torch_rows(args, spec, weights, images, n_ind, mine)
                rows += more
                if note not in notes:
                    notes.append(note)
        if policy is not None:
            policy.release()
    if not gpu:
        notes.append("cuda: no GPU at hand (or the simulator): cpu only")
    return rows, notes


# ---- one ES generation ---------------------------------------------------------------------------


def es_generation(args, data):
    """(the net, {part: seconds} of the fastest of --repeats mini-batch ES generations), after an
    untimed generation."""
    from nevo import cli, config
    from nevo.algos.es import ES
    from nevo.evaluation import setup
    from nevo.genomes import noise
    from nevo.tasks.supervised import Supervised

    given = {"net": args.es_net, "population": args.population, "examples": args.examples[0], "device": "cpu"}
    cfg = config.Config(algo="es", env=config.EnvConfig(env="mnist"))
    cfg = cli.apply_defaults(config.override(cfg, given), given)
    config.validate(cfg)
    task = Supervised(cfg.env, data)
    spec = setup.net_for(cfg, task)
    table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
    evaluator, _ = setup.local_evaluator(cfg, task, spec, "cpu", table, None, None, args.population)
    es = ES(cfg.settings, cfg.run.seed, noise.NoiseSource(table, nets.init_scale(spec), cfg.settings.sigma))

    def generation():
        t0 = time.perf_counter()
        population, episodes = es.ask()
        t1 = time.perf_counter()
        results = evaluator.run(population, episodes)
        t2 = time.perf_counter()
        es.tell(results)
        t3 = time.perf_counter()
        return {
            "ask": t1 - t0,
            "forward": results.forward_s,
            "rest of evaluation": t2 - t1 - results.forward_s,
            "tell": t3 - t2,
        }

    generation()  # compiles the builder, the forward at these shapes, the update
    best, spent = None, 0.0
    for _ in range(max(1, args.repeats)):
        parts = generation()
        spent += sum(parts.values())
        if best is None or sum(parts.values()) < sum(best.values()):
            best = parts
        if spent > args.limit_seconds:
            break
    evaluator.close()
    return spec, best


def machine_line() -> str:
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    return (
        f"machine: {machine.cores()} cores, {numba.get_num_threads()} Numba threads "
        f"({numba.threading_layer()} layer), load {load} (1, 5, 15 min)"
    )


def main(argv=None) -> int:
    args = parse(argv)
    data = data_set(args.data, max(args.examples))
    load = os.getloadavg()[0]
    print(f"data: {args.data}, {len(data.train_y):,} training images; load at the start {load:.2f}")
    rows, notes = forward_rows(args, data)
    print("\nforward: offspring-examples/s (rows = individuals x examples, best of --repeats)")
    print(FORWARD_HEADER)
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for backend, spec, n_ind, m, s in rows:
        print(
            f"| {backend} | {spec.name} | {spec.n_params:,} | {n_ind} | {m} | {n_ind * m:,} | "
            f"{s:.4f} | {n_ind * m / s:,.0f} |"
        )
    for note in notes:
        print(note)

    spec, parts = es_generation(args, data)
    total = sum(parts.values())
    print(
        f"\nES generation: {spec.name} ({spec.n_params:,} params), population {args.population}, "
        f"{args.examples[0]} examples each, cpu, best of --repeats"
    )
    print(ES_HEADER)
    print("|---|---:|---:|")
    for part, s in parts.items():
        print(f"| {part} | {s:.4f} | {s / total:.4f} |")
    print(f"| generation | {total:.4f} | {1:.4f} |")
    offspring_examples = args.population * args.examples[0]
    print(f"{offspring_examples / total:,.0f} offspring-examples/s over the whole generation")
    print(machine_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
