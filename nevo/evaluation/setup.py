"""The one owner of setup: from the settings, the task and the run folder, the net, the device, the
weight builder, the memory check and the evaluator on this machine (`local_evaluator`).

The generation loop (nevo.loops.loop) calls it for a run on one machine, each Dask worker
(nevo.cluster.worker) for its own evaluator, and replay for the elite's: all of them see
the same net (with virtual batch norm's reference batch, or the observation statistics each
Population carries) on the same kind of observations. It imports nothing of the cluster's: the
loop picks local or cluster.
"""

from __future__ import annotations

import os

import numpy as np

from nevo import machine, nets, runs
from nevo.algos import declared
from nevo.atari import evaluator  # noqa: F401 (each evaluator declares what it plays)
from nevo.config import ConfigError, mutation_of, obs_norm_of
from nevo.episodes.players import player_of
from nevo.episodes.weights import for_device
from nevo.evaluation import in_process, supervised  # noqa: F401
from nevo.genomes.noise import ROUND_ROWS, WeightBuilder
from nevo.genomes.safe_build import SafeMutation
from nevo.nets import half, obs_norm, vbn
from nevo.nets.kernels import make_policy, resolve_device

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
                run_dir: str | None = None) -> WeightBuilder:  # fmt: skip
    """weight_builder's WeightBuilder, given the reference batch (None without --vbn); with a
    safe mutation, one that builds safe children, reading ancestors' experiences from run_dir;
    with --obs-norm 1, one that folds the statistics each Population carries into its rows."""
    dtype = half.dtype_of(cfg.net.weights, cfg.net.net)  # what the forward reads: rows rounded once (fp16)
    if obs_norm_of(cfg):  # never with --vbn or a safe mutation (config.validate: the ES families only)
        return WeightBuilder(table, nets.init_scale(spec), fold=obs_norm.fold_population(spec), dtype=dtype)
    if mutation_of(cfg).safe:  # never with --vbn (config.validate)

        def experiences_of(genome):
            if run_dir is None:
                raise KeyError("no run folder to read a parent's experiences from")
            return runs.load_experiences(run_dir, genome)

        safe = SafeMutation(spec, table, experiences_of)
        return WeightBuilder(table, nets.init_scale(spec), safe=safe, dtype=dtype)
    if not cfg.net.vbn:
        return WeightBuilder(table, nets.init_scale(spec), dtype=dtype)

    return WeightBuilder(
        table, nets.init_scale(spec), lambda w, population: vbn.fold(spec, w, ref_batch, out=w), dtype=dtype
    )


def reference_batch(cfg, task, run_dir: str) -> np.ndarray:
    """(vbn, C, H, W) observations: the run folder's, or collected from (task, seed) and saved."""
    path = os.path.join(run_dir, REF_BATCH)
    if os.path.exists(path):
        return runs.read_array(path)
    ref = task.reference_batch(cfg.net.vbn, cfg.run.seed)
    runs.save_array(run_dir, REF_BATCH, ref)
    return ref


def check_machine(cfg, task, spec, population: int, bases: int) -> str:
    """Before any work on this machine: the settings' checks, the device it evaluates on, and that
    the weights its evaluator holds plus the noise table fit in memory (ConfigError or MemoryError
    naming the setting to lower)."""
    check_settings(cfg, task, spec)
    device = device_for(cfg, task)
    declared(cfg).check_device(cfg, device)
    rows = weight_rows(cfg, device, population, bases)
    dtype = half.dtype_of(cfg.net.weights, cfg.net.net)
    check_memory(spec.n_params, rows, cfg.run.noise_table_size, device, "--population",
                 experience_bytes(cfg, task, population), population, builds_on_gpu(cfg),
                 dtype, base_rows=2 * bases)  # fmt: skip
    return device


def check_settings(cfg, task, spec) -> None:
    """What the net and the task say of the settings, wherever the run evaluates: observation
    statistics need a foldable first layer, safe mutations a discrete policy."""
    if obs_norm_of(cfg):
        try:
            obs_norm.check(spec, task.name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
    if mutation_of(cfg).safe and spec.action != "argmax":
        raise ConfigError(
            f"--mutation: {mutation_of(cfg)} measures the softmax of a discrete policy's outputs; "
            f"{task.name} has continuous actions: use --mutation gaussian"
        )


def experience_bytes(cfg, task, population: int) -> int:
    """Bytes of a generation's experiences (safe mutations: --experiences per individual)."""
    if not mutation_of(cfg).safe:
        return 0
    return (
        population
        * cfg.settings.experiences
        * int(np.prod(task.obs_shape))
        * np.dtype(task.obs_dtype).itemsize
    )


def local_evaluator(cfg, task, spec, device: str, table, ref_batch, run_dir: str | None, population: int):
    """(evaluator, facts for config.json and the run's first line): the task's evaluator on this
    machine's device, its weight builder over the noise table (and the reference batch with --vbn),
    each episode's behaviour kept for novelty search. The driver on one machine and every cluster
    worker make theirs here."""

    weights = for_device(builder_for(cfg, spec, table, ref_batch, run_dir), device)  # genomes -> rows
    behaviours = declared(cfg).needs_behaviour
    ev, facts = evaluator_of(task).for_task(
        task, cfg.run, make_policy(device, spec), weights, device, population, behaviours
    )
    return ev, {"device": device, **facts}


def evaluator_for(task, run_cfg, policy, builder, device: str, population: int, behaviours: bool = False):
    """(the evaluator a task's kind of episodes needs, facts for config.json), from a policy and
    a weight builder of one's own (replay's, the benchmarks')."""
    weights = for_device(builder, device)
    return evaluator_of(task).for_task(task, run_cfg, policy, weights, device, population, behaviours)


def evaluator_of(task):
    """The evaluator class a task's kind needs: the one that declares it plays that kind
    (nevo.episodes.players; nevo's: AtariEvaluator, InProcessEvaluator, SupervisedEvaluator,
    imported here so that they have declared it), which builds itself for the task (`for_task`)."""
    return player_of(task)


def builds_on_gpu(cfg) -> bool:
    """Whether --device cuda builds the population's rows on the GPU (nevo.genomes.cuda_build):
    Gaussian children with no fold after the build, virtual batch norm's or observation
    normalisation's (the settings behind nevo.episodes.weights.builds_on_device's builder)."""
    return not mutation_of(cfg).safe and not cfg.net.vbn and not obs_norm_of(cfg)


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
                 device_rows: int | None = None, table_on_gpu: bool = False, dtype=np.float32,
                 base_rows: int = 0) -> None:  # fmt: skip
    """Stop before starting if `rows` weight rows plus the noise table (plus `extra` bytes: the
    experiences of safe mutations) cannot fit in memory, or on a GPU `device_rows` rows (default:
    rows), plus the table where individuals are built there; the message names `flag`, the
    setting to lower. The rows an evaluation holds are of `dtype` (the --weights format), the last
    `base_rows` of them (the bases rows are built from) float32; 16-bit rows are built ROUND_ROWS
    at a time in float32 scratch that the builder keeps, counted too (on the GPU, the bases'
    float32 copy)."""
    dtype = np.dtype(dtype)
    held = rows - base_rows
    scratch = min(ROUND_ROWS, held) if dtype.itemsize < 4 else 0
    need = n_params * (dtype.itemsize * held + 4 * (base_rows + scratch)) + 4 * noise_table_size + extra
    avail = machine.available_memory()
    if avail is not None and need > 0.9 * avail:
        also = f" and {extra / 2**30:.1f} GiB of experiences (--experiences)" if extra else ""
        bases = f" and {base_rows} float32 rows" if base_rows and dtype.itemsize < 4 else ""
        fp16 = ", --weights fp16" if dtype.itemsize == 4 else ""
        raise ConfigError(
            f"{flag}: {held if bases else rows} x {n_params:,} {dtype.name} weights{bases} plus the noise "
            f"table{also} need {need / 2**30:.1f} GiB; this machine has {avail / 2**30:.1f} GiB available. "
            f"Use a smaller {flag}, --net small{fp16} or a smaller --noise-table-size."
        )
    if device == "cuda":
        from numba import cuda

        from nevo.nets.kernels.cuda import check_fits  # on use: numba.cuda loads for a GPU only

        free, _ = cuda.current_context().get_memory_info()
        on_gpu = rows if device_rows is None else device_rows
        table = 4 * noise_table_size if table_on_gpu else 0
        what = f"the weights of {on_gpu} individuals" + (" and the noise table" if table else "")
        bases = 4 * n_params * base_rows if table_on_gpu else 0  # built there: from the bases' copy
        check_fits(dtype.itemsize * n_params * on_gpu + table + bases, free, what)
