"""What a run script builds from its settings: the net, the device, the policy, the memory check.

Shared by experiments/run_ga.py, run_es.py and replay.py, so that a run and its replay see the
same net (with virtual batch norm's reference batch, when the net uses it) on the same kind of
observations.
"""

from __future__ import annotations

import os

import numpy as np

from nevo import config, envs, machine, nets, runs
from nevo.config import ConfigError
from nevo.kernels import make_policy, resolve_device

REF_BATCH = "ref_batch.npy"  # VBN's reference observations, in the run folder


def net_for(cfg) -> nets.NetSpec:
    """The NetSpec of cfg.net.net for what cfg.env's observations and actions are."""
    obs_shape, n_actions, obs_dtype = envs.task_io(cfg.env)
    return nets.net_spec(cfg.net.net, obs_shape, n_actions, obs_dtype)


def device_for(cfg) -> str:
    """The inference backend: --device, where "auto" means the CPU for gymnasium vector tasks
    (a GPU launch costs more than a whole 2 x 64 MLP step) and the GPU if present on Atari."""
    name = cfg.run.device
    if name == "auto" and not config.is_atari(cfg.env):
        name = "cpu"
    return resolve_device(name)


def policy_for(cfg, spec, device: str, run_dir: str):
    """The evaluator's policy; with --vbn, wrapped to fold virtual batch norm into the weights
    using the run folder's reference batch (collected and saved on the run's first start)."""
    policy = make_policy(device, spec)
    if not cfg.net.vbn:
        return policy
    from nevo.vbn import VBNPolicy

    return VBNPolicy(policy, spec, reference_batch(cfg, run_dir))


def reference_batch(cfg, run_dir: str) -> np.ndarray:
    """(vbn, C, H, W) observations: the run folder's, or collected from (env, seed) and saved."""
    path = os.path.join(run_dir, REF_BATCH)
    if os.path.exists(path):
        return np.load(path)
    ref = envs.reference_batch(cfg.env, cfg.net.vbn, cfg.run.seed)
    runs.save_array(run_dir, REF_BATCH, ref)
    return ref


def check_memory(n_params: int, rows: int, noise_table_size: int, device: str, flag: str) -> None:
    """Stop before starting if `rows` weight rows plus the noise table cannot fit in memory (or
    the rows on the GPU); the message names `flag`, the setting to lower."""
    need = 4 * n_params * rows + 4 * noise_table_size
    avail = machine.available_memory()
    if avail is not None and need > 0.9 * avail:
        raise ConfigError(
            f"{flag}: {rows} x {n_params:,} float32 weights plus the noise table need "
            f"{need / 2**30:.1f} GiB; this machine has {avail / 2**30:.1f} GiB available. "
            f"Use a smaller {flag}, --net small or a smaller --noise-table-size."
        )
    if device == "cuda":
        from numba import cuda

        from nevo.kernels.cuda import check_fits

        free, _ = cuda.current_context().get_memory_info()
        check_fits(4 * n_params * rows, free, f"the weights of {rows} individuals")
