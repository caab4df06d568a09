"""nevo: deep neuroevolution (the deep GA, random search, OpenAI-ES, novelty search, safe mutations)
on Atari from pixels, a deceptive maze, gymnasium and MuJoCo tasks, fast, in Python that Numba
compiles.

    import nevo
    result = nevo.train("ga", env="CartPole-v1", frames=300_000)   # any algorithm: es, nsr-es, sgd, ...
    policy = nevo.load_policy(result.run_dir)                        # policy.act(observation)

The package follows the data flow: nevo.config and nevo.cli (settings), nevo.tasks (what an agent
plays, each kind declaring itself: nevo.kinds), nevo.atari (Atari from pixels, kind to evaluator),
nevo.genomes (seed lists and mutations), nevo.nets (networks and their kernels), nevo.episodes
(episodes in, results out, and what every evaluator shares), nevo.evaluation (the evaluators of
in-process tasks and data sets, and the setup that picks any evaluator), nevo.cluster (the same on
a Dask cluster), nevo.algos (the algorithms), nevo.loops (the one generation loop), nevo.runs (run
folders). `train` and `load_policy` (nevo.api) are imported on first use, so that `import nevo`
stays light.
"""

from nevo.version import __version__

__all__ = ["__version__", "load_policy", "train"]


def __getattr__(name: str):
    if name in ("train", "load_policy", "Policy", "TrainResult"):
        from nevo import api

        return getattr(api, name)
    raise AttributeError(f"module 'nevo' has no attribute {name!r}")
