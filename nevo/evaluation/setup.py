"""What a run script builds from its settings and task: the net, the device, the weight builder,
the memory check.

Shared by experiments/run_ga.py, run_es.py and replay.py, so that a run and its replay see the
same net (with virtual batch norm's reference batch, when the net uses it) on the same kind of
observations.
"""

from __future__ import annotations

import os

import numpy as np

from nevo import machine, nets, runs
from nevo.config import ConfigError, mutation_of, obs_norm_of
from nevo.genomes.noise import WeightBuilder
from nevo.nets.kernels import resolve_device

REF_BATCH = "ref_batch.npy"  # VBN's reference observations, in the run folder


def net_for(cfg, task) -> nets.NetSpec:
    """The NetSpec of cfg.net.net for what the task's observations and actions are (with
    --actions bins, BINS outputs per component of a continuous action)."""
    if cfg.net.actions == "bins":
        if task.action != "tanh":
            raise ConfigError(f"--actions: bins discretises continuous actions; {task.name}'s are discrete")
        return nets.net_spec(cfg.net.net, task.obs_shape, task.n_actions * nets.BINS, task.obs_dtype, "bins")
    return nets.net_spec(cfg.net.net, task.obs_shape, task.n_actions, task.obs_dtype, task.action)


def device_for(cfg, task) -> str:
    """The inference backend: --device, where "auto" is what suits the task (the CPU for tasks
    stepped in this process, whose small nets cost less than a GPU launch; else a GPU if present)."""
    return resolve_device(task.device if cfg.run.device == "auto" else cfg.run.device)


def weight_builder(cfg, task, spec, run_dir: str, table: np.ndarray | None) -> WeightBuilder:
    """What turns genomes into the policy's weights; with --vbn, each built row gets virtual batch
    norm folded in, over the run folder's reference batch (collected and saved on the run's
    first start), so the forward kernels run plain weights."""
    ref = reference_batch(cfg, task, run_dir) if cfg.net.vbn else None
    return builder_for(cfg, spec, table, ref, run_dir)


def builder_for(cfg, spec, table: np.ndarray | None, ref_batch: np.ndarray | None,
                run_dir: str | None = None, obs_norm=None) -> WeightBuilder:  # fmt: skip
    """weight_builder's WeightBuilder, given the reference batch (None without --vbn); with a
    safe mutation, one that builds safe children, reading ancestors' experiences from run_dir;
    with obs_norm (nevo.nets.obs_norm.ObsNorm), one that folds its statistics into every row."""
    if obs_norm is not None:  # never with --vbn or a safe mutation (config.validate: the ES families only)
        return WeightBuilder(table, nets.init_scale(spec), fold=obs_norm)
    if mutation_of(cfg) != "gaussian":  # never with --vbn (config.validate)
        from nevo.genomes.safe_build import SafeMutation

        def experiences_of(genome):
            if run_dir is None:
                raise KeyError("no run folder to read a parent's experiences from")
            return runs.load_experiences(run_dir, genome)

        return WeightBuilder(table, nets.init_scale(spec), safe=SafeMutation(spec, table, experiences_of))
    if not cfg.net.vbn:
        return WeightBuilder(table, nets.init_scale(spec))
    from nevo.nets.vbn import fold

    return WeightBuilder(table, nets.init_scale(spec), lambda w: fold(spec, w, ref_batch, out=w))


def reference_batch(cfg, task, run_dir: str) -> np.ndarray:
    """(vbn, C, H, W) observations: the run folder's, or collected from (task, seed) and saved."""
    path = os.path.join(run_dir, REF_BATCH)
    if os.path.exists(path):
        return runs.read_array(path)
    ref = task.reference_batch(cfg.net.vbn, cfg.run.seed)
    runs.save_array(run_dir, REF_BATCH, ref)
    return ref


def check_machine(cfg, task, spec, population: int, bases: int, cluster) -> str | None:
    """Before any work: the device this machine evaluates on, and that the weights its
    evaluator holds plus the noise table fit in memory (ConfigError or MemoryError naming the
    setting to lower). On a Dask cluster (cluster: the --cluster settings) only the noise table
    is checked here and the device is None: each worker checks its own when it joins."""
    if cluster is not None:
        from nevo.evaluation.cluster import check_address

        if mutation_of(cfg) != "gaussian":
            raise ConfigError(
                f"--cluster: safe mutations (--mutation {mutation_of(cfg)}) run on one machine for now "
                "(each child needs its parent's experiences, which the workers are not sent)"
            )
        if obs_norm_of(cfg):
            raise ConfigError("--cluster: --obs-norm 1 runs on one machine for now (the workers' folds)")

        check_address(cluster.address)
        check_memory(spec.n_params, 0, cfg.run.noise_table_size, "cpu", "--noise-table-size")
        return None
    if obs_norm_of(cfg):
        from nevo.nets.obs_norm import check

        try:
            check(spec, task.name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if mutation_of(cfg) != "gaussian" and spec.action != "argmax":
        raise ConfigError(
            f"--mutation: {mutation_of(cfg)} measures the softmax of a discrete policy's outputs; "
            f"{task.name} has continuous actions: use --mutation gaussian"
        )
    device = device_for(cfg, task)
    rows = weight_rows(cfg, device, population, bases)
    check_memory(spec.n_params, rows, cfg.run.noise_table_size, device, "--population",
                 experience_bytes(cfg, task, population), population, builds_on_gpu(cfg))  # fmt: skip
    return device


def experience_bytes(cfg, task, population: int) -> int:
    """Bytes of a generation's experiences (safe mutations: --experiences per individual)."""
    if mutation_of(cfg) == "gaussian":
        return 0
    group = getattr(cfg, "ga", None) or cfg.ns
    return population * group.experiences * int(np.prod(task.obs_shape)) * np.dtype(task.obs_dtype).itemsize


def evaluator(cfg, task, spec, device, run_dir, table, population: int, bases: int,
              behaviours: bool = False, cluster=None, say=print, obs_norm=None) -> tuple:  # fmt: skip
    """(evaluator, facts for config.json and the run's first line): the task's evaluator on this
    machine's device, or on a Dask cluster (nevo.evaluation.cluster.ClusterEvaluator; a ClusterError when
    none answers) when cluster (the --cluster settings) is given. population: individuals per
    generation; bases: the rows they are built from (parents, or thetas)."""
    ref = reference_batch(cfg, task, run_dir) if cfg.net.vbn else None
    if cluster is None:
        from nevo.nets.kernels import make_policy

        builder = builder_for(cfg, spec, table, ref, run_dir, obs_norm)  # genomes -> weights
        ev, facts = task.evaluator(
            cfg.run, make_policy(device, spec), builder, device, population, behaviours
        )
        return ev, {"device": device, **facts}
    from nevo.evaluation.cluster import ClusterEvaluator

    ev = ClusterEvaluator(cluster.address, cfg, task, ref, table, population, bases, behaviours,
                          cluster.timeout_s, cluster.chunk, say)  # fmt: skip
    return ev, ev.facts


def builds_on_gpu(cfg) -> bool:
    """Whether --device cuda builds the population's rows on the GPU (nevo.genomes.cuda_build):
    Gaussian children with no fold after the build, virtual batch norm's or observation
    normalisation's (the settings behind nevo.evaluation.slot_weights.builds_on_device's builder)."""
    return mutation_of(cfg) == "gaussian" and not cfg.net.vbn and not obs_norm_of(cfg)


def weight_rows(cfg, device: str, population: int, bases: int) -> int:
    """Weight rows an evaluation holds in host memory at once: on the CPU one per emulator slot
    (plus one); on a GPU none where the rows are built there, else every row of the population;
    plus the bases rows are built from, this generation's and last one's."""
    slots = cfg.run.env_slots or 32 * machine.cores()
    if device == "cuda":
        held = 0 if builds_on_gpu(cfg) else population
    else:
        held = min(population, slots + 1)
    return held + 2 * bases


def check_memory(n_params: int, rows: int, noise_table_size: int, device: str, flag: str, extra: int = 0,
                 device_rows: int | None = None, table_on_gpu: bool = False) -> None:  # fmt: skip
    """Stop before starting if `rows` weight rows plus the noise table (plus `extra` bytes: the
    experiences of safe mutations) cannot fit in memory, or on a GPU `device_rows` rows (default:
    rows), plus the table where individuals are built there; the message names `flag`, the
    setting to lower."""
    need = 4 * n_params * rows + 4 * noise_table_size + extra
    avail = machine.available_memory()
    if avail is not None and need > 0.9 * avail:
        also = f" and {extra / 2**30:.1f} GiB of experiences (--experiences)" if extra else ""
        raise ConfigError(
            f"{flag}: {rows} x {n_params:,} float32 weights plus the noise table{also} need "
            f"{need / 2**30:.1f} GiB; this machine has {avail / 2**30:.1f} GiB available. "
            f"Use a smaller {flag}, --net small or a smaller --noise-table-size."
        )
    if device == "cuda":
        from numba import cuda

        from nevo.nets.kernels.cuda import check_fits

        free, _ = cuda.current_context().get_memory_info()
        on_gpu = rows if device_rows is None else device_rows
        table = 4 * noise_table_size if table_on_gpu else 0
        what = f"the weights of {on_gpu} individuals" + (" and the noise table" if table else "")
        check_fits(4 * n_params * on_gpu + table, free, what)
