"""nevo against EvoTorch 0.6 on the same machine, game, net and networks, in one run (issue 4's
CPU goal: nevo >= 1.5x EvoTorch's game frames/s).

    pip install evotorch==0.6.0        # only this benchmark needs it (and torch); not a requirement
    python -m experiments.bench.bench_evotorch                      # large net, populations 8 and 32
    python -m experiments.bench.bench_evotorch --net small --populations 64 --rounds 3

EvoTorch's side is its `VecGymNE` problem (ale-py's `AtariVectorEnv` with nevo's emulator settings,
the same threads) with the net built in torch exactly as nevo's (`forward_torch.torch_module`).
nevo's side is its pipeline with the machine's default layout (what `run_ga` uses), or with each
of --slots (e.g. `--slots 16 32`, timed in the same rounds).

Both evaluate the **same networks**, nevo's weights copied into EvoTorch's parameter layout, one
episode each, in two workloads: nevo's initialisation (a GA's first generation: the nets differ,
so do the episode lengths, and the tail counts) and EvoTorch's (uniform +-1e-5: every net picks
the same action, so every episode runs to about the cap). The episodes are the same but for
nevo's no-op start (1..30 steps, from each episode's seed), so the difference is the system. The
rounds alternate EvoTorch and nevo, so that the noise of a shared machine falls on both. Also
timed, generation by generation in turn: each system's own GA, EvoTorch's `GeneticAlgorithm`
(its initialisation, Gaussian mutation of sigma 0.002, as the earlier peer figure in
docs/lab/2026-11-21.md was) and
nevo's GA (its initialisation, sigma 0.002, no elite re-evaluation, like EvoTorch's).

Frames are emulated game frames of live episodes: nevo's from ALE's frame counters, EvoTorch's
its interaction count (agent steps) times the frameskip. EvoTorch keeps stepping a finished
episode's emulator (its frames are not counted) until the last episode of the batch ends.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from experiments.bench.bench_pipeline import fresh_weights, given, pipeline_rate
from experiments.bench.forward_torch import torch_module, torch_params
from nevo import machine, nets
from nevo.algos.ga import GA
from nevo.atari.evaluator import AtariEvaluator, layout
from nevo.atari.game import AtariGame, atari_actions, make_atari
from nevo.config import EnvConfig, GAConfig, RunConfig
from nevo.episodes.weights import PooledWeights
from nevo.genomes import noise
from nevo.nets import half
from nevo.nets.kernels import make_policy


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--game", default="frostbite")
    p.add_argument("--net", default="large", choices=sorted(nets.IMAGE_NETS))
    p.add_argument("--populations", nargs="+", type=int, default=[8, 32], help="(default: 8 32)")
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="evaluations of the same networks on each side (0: only the GAs)",
    )
    p.add_argument("--ga-steps", type=int, default=2, help="EvoTorch GeneticAlgorithm steps to time")
    p.add_argument("--frame-cap", type=int, default=5000, help="episode cap in game frames")
    p.add_argument(
        "--weights",
        default="auto",
        choices=half.CHOICES,
        help="nevo's weight rows in its own GA (auto: run_ga's default for --net, fp16 on large and "
        "small); the same-network rounds read float32, as EvoTorch does",
    )
    p.add_argument(
        "--slots", type=int, nargs="+", default=[0], help="nevo's env slots, each timed (default: 0 = auto)"
    )
    return p.parse_args(argv)


def torch_vector(spec, weights: np.ndarray):
    """(n, n_params) torch tensor: nevo's weights (n, n_params) flattened in the order of
    torch_module(spec).parameters(), which is EvoTorch's solution layout."""
    import torch

    params = torch_params(spec, torch.from_numpy(weights))
    return torch.cat([v.reshape(len(weights), -1) for v in params.values()], dim=1)


def same_actions(spec, weights: np.ndarray, values) -> float:
    """Share of (network, observation) pairs on which nevo's reference forward and torch_module with
    EvoTorch's parameter vector values pick the same action: 1.0 unless the layouts disagree."""
    import torch

    from nevo.nets.kernels.reference import forward

    obs = np.random.default_rng(0).integers(0, 256, (4, *spec.obs_shape), dtype=np.uint8)
    module, same = torch_module(spec), []
    for w, v in zip(weights[:4], values[:4]):
        torch.nn.utils.vector_to_parameters(v, module.parameters())
        with torch.no_grad():
            theirs = module(torch.from_numpy(obs)).argmax(1).numpy()
        ours, _ = forward(spec, w[None], np.zeros(len(obs), np.int64), obs)
        same.append(ours == theirs)
    return float(np.mean(same))


class EvoTorchSide:
    """EvoTorch's VecGymNE on nevo's Atari settings, counting game frames and seconds."""

    def __init__(self, env_cfg, spec, threads: int):
        from evotorch.neuroevolution import VecGymNE

        self.frameskip = env_cfg.frameskip
        self.problem = VecGymNE(
            env=lambda num_envs: make_atari(env_cfg, num_envs, threads),
            network=lambda: torch_module(spec),
            num_episodes=1,
            device="cpu",
        )

    def timed(self, step) -> tuple[float, int]:
        """(frames/s, frames) of step(): the live frames EvoTorch counted while it ran."""
        before = self.problem.interaction_count
        t0 = time.perf_counter()
        step()
        dt = time.perf_counter() - t0
        frames = (self.problem.interaction_count - before) * self.frameskip
        return frames / dt, frames

    def evaluate(self, values) -> tuple[float, int]:
        """(frames/s, frames) of evaluating the networks values (n, n_params), one episode each."""
        batch = self.problem.generate_batch(len(values))
        batch.set_values(values)
        return self.timed(lambda: self.problem.evaluate(batch))


class NevoGA:
    """nevo's GA generations as EvoTorch's GeneticAlgorithm steps are timed: evaluate the
    population (one episode each), rank, breed (sigma 0.002, elitism, truncation at a third of
    the population); no elite re-evaluation, which EvoTorch's GA does not do either."""

    def __init__(self, env_cfg, spec, policy, n: int, lay, threads: int, dtype=np.float32):
        slots, group, _, pipe = lay
        cfg = GAConfig(population=n, truncation=max(1, n // 3), sigma=0.002)
        table = noise.make_table(spec.n_params + 1_000_000, seed=n)
        self.ga = GA(cfg, seed=n)
        weights = PooledWeights(noise.WeightBuilder(table, nets.init_scale(spec), dtype=dtype))  # per slot
        run_cfg = RunConfig(env_slots=slots, processes=threads, emulators_per_group=group, pipeline=pipe)
        self.ev, _ = AtariEvaluator.for_task(AtariGame(env_cfg), run_cfg, policy, weights, "cpu", n, False)

    def step(self) -> tuple[float, int]:
        """(frames/s, frames) of one generation, breeding included."""
        t0 = time.perf_counter()
        population, episodes = self.ga.ask()
        res = self.ev.run(population, episodes)
        fitness = self.ga.tell(res)
        self.ga.take_top_as_elite(float(fitness.max()))
        return res.total_frames / (time.perf_counter() - t0), res.total_frames

    def close(self) -> None:
        self.ev.close()


def main(argv=None) -> None:
    a = parse(argv)
    try:
        import evotorch
        import torch
    except ImportError:
        raise SystemExit("this benchmark needs EvoTorch: pip install evotorch==0.6.0") from None
    from evotorch.algorithms import GeneticAlgorithm
    from evotorch.operators import GaussianMutation

    cores = machine.cores()
    env_cfg = EnvConfig(game=a.game, frame_cap=a.frame_cap)
    spec = nets.net_spec(a.net, nets.OBS_SHAPE, atari_actions(a.game))
    policy = make_policy("cpu", spec)
    side = EvoTorchSide(env_cfg, spec, cores)
    print(
        f"machine: {cores} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"evotorch {evotorch.__version__}; game {a.game}; frame cap {a.frame_cap}; "
        f"net {a.net} ({spec.n_params:,} parameters)"
    )
    print()
    print(f"{'pop':>4} {'init':>8} {'round':>5} {'system':>14} {'frames':>10} {'frames/s':>10}")
    summary, ga_summary = [], []
    for n in a.populations:
        layouts = [layout("cpu", cores, n, RunConfig(env_slots=s)) for s in a.slots]
        inits = {  # the same-network rounds' populations (--rounds 0: none)
            "nevo": fresh_weights(spec, n, seed=n),
            "evotorch": np.random.default_rng(n).uniform(-1e-5, 1e-5, (n, spec.n_params)).astype(np.float32),
        } if a.rounds else {}  # fmt: skip
        for init, weights in inits.items():
            values = torch_vector(spec, weights)
            agree = same_actions(spec, weights, values)
            assert agree == 1.0, f"torch layout picks other actions on {1 - agree:.0%} of rows"
            ours, theirs = {lay: [] for lay in layouts}, []
            for r in range(a.rounds):
                rate, frames = side.evaluate(values)
                theirs.append(rate)
                print(f"{n:>4} {init:>8} {r:>5} {'EvoTorch':>14} {frames:>10,} {rate:>10,.0f}", flush=True)
                for lay in layouts:
                    slots, group, _, pipe = lay
                    pop = given(weights)
                    rate, _, _, frames = pipeline_rate(env_cfg, policy, "cpu", pop, slots, group, cores, pipe)
                    ours[lay].append(rate)
                    name = f"nevo {slots} slots"
                    print(f"{n:>4} {init:>8} {r:>5} {name:>14} {frames:>10,} {rate:>10,.0f}", flush=True)
            for lay in layouts:
                summary.append((n, init, lay[0], np.mean(ours[lay]), np.mean(theirs)))
        if a.ga_steps:
            ga = GeneticAlgorithm(
                side.problem, popsize=n, operators=[GaussianMutation(side.problem, stdev=0.002)]
            )
            ours_ga = NevoGA(env_cfg, spec, policy, n, layouts[0], cores, half.dtype_of(a.weights, a.net))
            rates = {"EvoTorch": [], "nevo": []}
            for g in range(a.ga_steps):
                for system in ("EvoTorch", "nevo"):
                    rate, frames = side.timed(ga.step) if system == "EvoTorch" else ours_ga.step()
                    rates[system].append(rate)
                    print(f"{n:>4} {system:>8} GA generation {g}: {frames:,} frames, {rate:,.0f}", flush=True)
            ours_ga.close()
            ga_summary.append((n, np.mean(rates["nevo"]), np.mean(rates["EvoTorch"])))
    print()
    fmt = half.format_of(a.weights, a.net)
    print(f"each system's own GA (its initialisation, Gaussian mutation sigma 0.002; nevo's weights {fmt}), "
          "mean over generations:")  # fmt: skip
    for n, ours, theirs in ga_summary:
        print(f"  pop {n:>4}: nevo {ours:,.0f}, EvoTorch {theirs:,.0f} frames/s: {ours / theirs:.2f}x")
    print("same networks, mean over rounds (init nevo = a GA's first generation, init evotorch =")
    print("EvoTorch's uniform +-1e-5, where every net picks the same action):")
    for n, init, slots, ours, theirs in summary:
        print(
            f"  pop {n:>4}, init {init:>8}: nevo ({slots} slots) {ours:,.0f}, EvoTorch {theirs:,.0f} "
            f"frames/s: {ours / theirs:.2f}x"
        )


if __name__ == "__main__":
    main()
