"""What a Dask cluster costs: one GA generation's evaluation on this machine's evaluator against
local clusters on the same cores, in one run.

    python -m experiments.bench.bench_cluster                      # small net at N=64 and 1,000; large at 64
    python -m experiments.bench.bench_cluster --nets small --populations 64 --clusters local:2

For each net and population N: a GA is stepped (without playing) until its genomes are
--generations long, then its next generation's N training episodes (Frostbite, --frame-cap)
are played by each evaluator: once to warm it up (compiled kernels, cached parents), once timed.
Printed per evaluator: the generation's wall time, its ratio to this machine's, the driver's
own CPU time (pickling, scheduling, gathering: what the driver machine spends), the bytes sent
and received (pickled genomes and episode seeds out, per-episode results in), and the mean
cost of an episode and of an agent step in core time (cores x wall / episodes, / agent steps,
emulation included), for docs/cluster.md's model.
Also printed: Dask's round trip for one empty task (the latency of a chunk) and its cost per
task when 1,000 go at once (the scheduler's throughput).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from nevo import cli, machine, tasks
from nevo.algos.ga import GA
from nevo.cluster.evaluator import ClusterEvaluator
from nevo.episodes import Episodes, Results
from nevo.evaluation import setup
from nevo.genomes import noise
from nevo.nets import half


def genomes(cfg, generations: int) -> GA:
    """A GA after `generations` generations of made-up scores (its genomes as long as a real run's)."""
    ga = GA(cfg.settings, cfg.run.seed)
    rng = np.random.default_rng(0)
    for _ in range(generations):
        _, episodes = ga.ask()
        n = len(episodes.ind)
        ga.tell(Results(rng.normal(size=n), np.ones(n, np.int64), np.ones(n, np.int64)))
        _, episodes = ga.ask_validation()
        n = len(episodes.ind)
        ga.tell_validation(Results(rng.normal(size=n), np.ones(n, np.int64), np.ones(n, np.int64)))
    return ga


def timed(evaluator, population, episodes: Episodes) -> dict:
    warm = Episodes(
        episodes.ind[: max(1, len(episodes.ind) // 8)], episodes.seeds[: max(1, len(episodes.ind) // 8)]
    )
    evaluator.run(population, warm)
    t0, c0 = time.perf_counter(), time.process_time()
    res = evaluator.run(population, episodes)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sent = res.cluster["bytes_sent"] if res.cluster else 0
    received = res.cluster["bytes_received"] if res.cluster else 0
    return {"wall": wall, "cpu": cpu, "sent": sent, "received": received, "steps": int(res.lengths.sum()),
            "returns": res.returns}  # fmt: skip


def scheduler_costs(address: str) -> tuple[float, float]:
    """(seconds for one empty task's round trip, median of 200; seconds per task when 1,000 empty
    tasks are submitted at once) on a local cluster like `address`."""
    from distributed import Client, LocalCluster

    n = int(address.split(":")[1])
    with LocalCluster(n_workers=n, threads_per_worker=1, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as lc, Client(lc) as c:  # fmt: skip
        times = []
        for i in range(200):
            t0 = time.perf_counter()
            c.submit(int, i, pure=False).result()
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        c.gather([c.submit(int, i, pure=False) for i in range(1000)])
        per_task = (time.perf_counter() - t0) / 1000
    return float(np.median(times)), per_task


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nets", default="small,large", help="nets to measure (default: small,large)")
    p.add_argument("--populations", default="64,1000", help="populations N (default: 64,1000)")
    p.add_argument("--large-max-population", type=int, default=64,
                   help="the large net only up to this N (its CPU forward is slow; default: 64)")  # fmt: skip
    p.add_argument(
        "--clusters", default="local:1,local:2", help="clusters to compare (default: local:1,local:2)"
    )
    p.add_argument("--frame-cap", type=int, default=400, help="game frames per episode (default: 400)")
    p.add_argument(
        "--weights",
        default="auto",
        choices=half.CHOICES,
        help="weight rows (default: auto, fp16 on both nets; docs/cluster.md's figures: fp32)",
    )
    p.add_argument("--chunk", type=int, default=0, help="episodes per chunk (default: 0, nevo's choice)")
    p.add_argument("--generations", type=int, default=30, help="genome length before measuring (default: 30)")
    a = p.parse_args(argv)
    cores = machine.cores()
    print(f"bench_cluster | {cores} cores | Frostbite, frame cap {a.frame_cap} | genomes of {a.generations} "
          f"generations | first an untimed warm-up of 1/8 of the episodes")  # fmt: skip
    for address in a.clusters.split(","):
        trip, per_task = scheduler_costs(address)
        print(f"Dask on {address}: one empty task's round trip {trip * 1e3:.2f} ms; "
              f"1,000 at once {per_task * 1e3:.2f} ms per task")  # fmt: skip
    print(f"{'net':6} {'N':>5} {'evaluator':>10} {'gen s':>8} {'x local':>8} {'driver cpu s':>13} "
          f"{'bytes out':>10} {'bytes in':>9} {'core-s/episode':>15} {'core-ms/step':>13}")  # fmt: skip
    for net in a.nets.split(","):
        for n in (int(x) for x in a.populations.split(",")):
            if net == "large" and n > a.large_max_population:
                continue
            argv = [
                "--game",
                "frostbite",
                "--net",
                net,
                "--population",
                str(n),
                "--frame-cap",
                str(a.frame_cap),
                "--weights",
                a.weights,
            ]
            cfg, _, _, _ = cli.parse_args([*argv, "--noise-table-size", "20000000"], "")
            cfg = replace(cfg, run=replace(cfg.run, device="cpu"))
            task = tasks.task_for(cfg.env)
            spec = setup.net_for(cfg, task)
            table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
            ga = genomes(cfg, a.generations)
            population, episodes = ga.ask()
            bases = cfg.settings.truncation + 1
            local, _ = setup.local_evaluator(cfg, task, spec, "cpu", table, None, None, n)
            try:
                base = timed(local, population, episodes)
            finally:
                local.close()
            rows = [("local", base)]
            for address in a.clusters.split(","):
                ev = ClusterEvaluator(address, cfg, task, None, table, n, bases, chunk=a.chunk)
                try:
                    rows.append((address, timed(ev, population, episodes)))
                finally:
                    ev.close()
            for name, r in rows:
                assert np.array_equal(r["returns"], base["returns"]), f"{name}: other returns than local"
                print(f"{net:6} {n:>5} {name:>10} {r['wall']:>8.2f} {r['wall'] / base['wall']:>8.3f} "
                      f"{r['cpu']:>13.2f} {r['sent']:>10,} {r['received']:>9,} "
                      f"{cores * r['wall'] / len(episodes.ind):>15.3f} "
                      f"{cores * r['wall'] / r['steps'] * 1e3:>13.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
