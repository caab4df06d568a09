"""Helpers the tests share, in one module (`from tests.helpers import ...`): pytest's own hooks and
fixtures and the runner beside the session stay in tests/conftest.py, the tiny settings in
tests/tiny.py, the Dask processes' in tests/dask_procs.py."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from nevo import runs
from nevo.algos import declaration
from nevo.atari.game import NOOP, noop_count
from nevo.config import Config, EnvConfig, ESConfig, GAConfig, GANSConfig, NSESConfig
from nevo.episodes import Episodes
from nevo.episodes.weights import PooledWeights
from nevo.genomes.noise import WeightBuilder
from nevo.nets import make_spec, net_spec
from nevo.nets.kernels import cpu, reference
from nevo.plots.rundata import STICKY_FILE
from nevo.tasks.supervised import DataSet

# Runs and weights


def RowsAreIndividuals():  # noqa: N802 (the tests' name for it)
    """An evaluator's weights for stand-in policies that need none: the policy is handed each
    slot's individual itself as its row."""
    from nevo.episodes.weights import GivenRows

    return GivenRows()


def atari_evaluator(env_cfg, policy, weights, slots, processes, group=0, pipeline="overlap", ram=False):
    """The Atari evaluator a run builds (AtariEvaluator.for_task) with these settings: --env-slots
    slots, --processes processes (0: one a core), --emulators-per-group group (0: the pipeline's
    rule), each episode's final RAM with ram."""
    from nevo.atari.evaluator import AtariEvaluator
    from nevo.atari.game import AtariGame
    from nevo.config import RunConfig

    run = RunConfig(env_slots=slots, processes=processes, emulators_per_group=group, pipeline=pipeline)
    return AtariEvaluator.for_task(AtariGame(env_cfg), run, policy, weights, "cpu", slots, ram)[0]


def host_weights(n_params: int):
    """The CPU evaluators' weights for individuals given as weights (Population.of_weights)."""
    return PooledWeights(WeightBuilder(None, np.zeros(n_params, np.float32)))


def kernels_under(coretype: str) -> str:
    """The OpenBLAS kernels a new process reports (nevo.machine.blas_kernels, joined) when
    OPENBLAS_CORETYPE names coretype: OpenBLAS's own name for it (Prescott reports Katmai)."""
    code = (
        "import numpy, scipy.linalg.blas; from nevo.machine import blas_kernels; "
        "print('/'.join(blas_kernels()))"
    )
    env = {**os.environ, "OPENBLAS_CORETYPE": coretype}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def run_folder(main, argv, out) -> str:
    """Run an experiment's main(argv) in-process with --out-dir out; return the run folder it made."""
    assert main([*argv, "--out-dir", str(out)]) == 0
    (folder,) = [os.path.join(out, d) for d in os.listdir(out)]
    return folder


def resume_in_a_new_process(folder: str, argv) -> None:
    """`nevo train --resume folder *argv` in a new process, which knows a module of one's own (an
    algorithm's, a kind of task's) only from the run's config.json; it must finish."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "nevo", "train", "--resume", folder, *argv]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def metrics_without_clock(folder) -> list[dict]:
    """A run's metrics without wall-clock fields (wall_s and every perf/ field) and without what
    a Dask cluster adds (cluster/ fields: bytes, chunks, workers)."""
    rows = runs.read_metrics(folder)
    return [
        {k: v for k, v in r.items() if k != "wall_s" and not k.startswith(("perf/", "cluster/"))}
        for r in rows
    ]


# The algorithms' tiny settings

BEHAVIOUR = (2, np.float32)  # the maze's: final (x, y)


def tiny_config(name):
    """One root config for every algorithm, only `algo` changing: 6 individuals, 2 parents or
    agents, 2 validation episodes."""
    settings = {
        GAConfig: GAConfig(population=6, truncation=0 if name == "rs" else 2, sigma=0.01, elite_candidates=2,
                           validation_episodes=2),
        ESConfig: ESConfig(population=6, sigma=0.01, validation_episodes=2),
        GANSConfig: GANSConfig(population=6, truncation=2, sigma=0.01, k=2, archive_prob=0.5),
        NSESConfig: NSESConfig(population=6, sigma=0.01, k=2, meta_population=2, reward_weight=0.3,
                               validation_episodes=2),
    }  # fmt: skip
    return Config(settings=settings[declaration(name).settings], algo=name)


# The forward kernels' nets and their truth

TINY = (4, 12, 12)


SPECS = {
    "large-tiny": net_spec("large", TINY, 6),
    "small-tiny": net_spec("small", TINY, 5),
    # odd sizes: 3 channels, non-square 9x7, stride 1 odd kernel, kernel > input, two dense layers
    "odd": make_spec([("conv", 5, 3, 1), ("conv", 7, 8, 3), ("dense", 9), ("dense", 3)], (3, 9, 7), 4),
    "dense-only": make_spec([("dense", 10)], (2, 5, 3), 3),
    # max-pools: odd inputs (SAME pooling pads after, and both sides for a 3x3 window), a pool
    # before a strided conv and one before the dense layer
    "pool": make_spec(
        [("conv", 3, 5, 1), ("pool", 2), ("conv", 4, 3, 2), ("pool", 3), ("dense", 5)], (2, 13, 11), 4
    ),
    "mnist-tiny": net_spec("mnist", (1, 12, 12), 10),
}


def assert_matches_reference(spec, weights, rows_ind, obs):
    """Numba logits within float32 tolerance of the reference; same actions where not near-tied."""
    actions, logits = cpu.forward(spec, weights, rows_ind, obs)
    ref_actions, ref_logits = reference.forward(spec, weights, rows_ind, obs)
    assert actions.dtype == np.int64 and logits.dtype == np.float32
    assert logits.shape == (len(rows_ind), spec.n_actions) and actions.shape == (len(rows_ind),)
    tol = 1e-4 * np.abs(ref_logits).max(axis=1, keepdims=True) + 1e-6  # (rows, 1)
    err = np.abs(logits - ref_logits)
    assert np.all(err <= tol), f"max error {err.max()} over tolerance; rows_ind {rows_ind}"
    top2 = np.sort(ref_logits, axis=1)[:, -2:] if spec.n_actions > 1 else None
    clear = (top2[:, 1] - top2[:, 0] > 2 * tol[:, 0]) if top2 is not None else True
    np.testing.assert_array_equal(actions[clear], ref_actions[clear])
    assert np.all(actions == np.argmax(logits, axis=1))
    return actions, logits


# A labelled data set


def stripes(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 8, 8) uint8 images of 3 classes (a bright row in the top, middle or bottom third) with
    noise, and their labels."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.integers(0, 60, (n, 8, 8)).astype(np.uint8)
    for i, c in enumerate(y):
        x[i, 1 + 3 * c] = 250
    return x, y


def small_data() -> DataSet:
    return DataSet.of(*stripes(600, 0), *stripes(150, 1))


# The Atari evaluator's stand-ins: a policy that reads the screen, its episodes played alone

# The vector env's episode start, whose truth is ale-py's vector env (play_alone)
CFG = EnvConfig(game="frostbite", frame_cap=400, start="vector")


def policy(obs, ind):
    """A deterministic stand-in for a network: the action depends on the screen and the individual."""
    screen = obs[:, -1, 40:60, 30:50].astype(np.int64).sum(axis=(1, 2))
    return (screen * 31 + np.asarray(ind) * 7) % 18


class FakePolicy:
    """The stand-in behind the evaluator's policy interface."""

    def load(self, weights):
        pass

    def release(self):
        pass

    def __call__(self, ind, obs, take=None):
        return policy(obs if take is None else obs[take], ind)


def play_alone(ind, seed):
    """One episode on a brand-new emulator, stepped one action at a time (the reference)."""
    from ale_py.vector_env import AtariVectorEnv

    env = AtariVectorEnv(
        CFG.game, 1, num_threads=1, noop_max=0, reward_clipping=False,
        max_num_frames_per_episode=CFG.frame_cap, autoreset_mode="NextStep",
    )  # fmt: skip
    obs, _ = env.reset(seed=0)
    noops, ret, steps = noop_count(seed, CFG.noop_max), 0.0, 0
    while True:
        a = NOOP if steps < noops else int(policy(obs, [ind])[0])
        obs, r, term, trunc, info = env.step(np.array([a]))
        ret, steps = ret + float(r[0]), steps + 1
        if term[0] or trunc[0]:
            env.close()
            return ret, steps, int(info["episode_frame_number"][0])


EPISODES = Episodes(np.array([0, 1, 2, 3, 0, 1, 2, 3, 2]), np.arange(100, 109))


def assert_outcomes(res, want) -> None:
    """Results' returns, lengths and frames are those of want, [(return, steps, frames)] an episode."""
    ret, steps, frames = map(np.array, zip(*want))
    np.testing.assert_array_equal(res.returns, ret)
    np.testing.assert_array_equal(res.lengths, steps)
    np.testing.assert_array_equal(res.frames, frames)


# An episode player that never ends


class Forever:
    """A player that plays until halted (the test of the pool's PLAY command)."""

    def attach(self, buffer):
        self.buffer = buffer

    def __call__(self, em, obs, ask, halt):
        steps = 0
        while not halt[0]:
            em.step(0, obs)
            steps += 1
            if steps % 100 == 0:
                em.restart(obs)
        return bytes(ask) + steps.to_bytes(8, "little") + bytes(self.buffer[:4])


# Emulator processes left behind


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, ended but not yet reaped, counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def survivors_of_a_killed_owner(owner, after_s: float, inspect=None) -> list[int]:
    """Read the two emulator pids the owner process prints, kill -9 the owner after_s seconds
    later, and give the pids still alive 5 s after its death. inspect(owner pid, worker pids)
    looks at them first."""
    workers = [int(p) for p in owner.stdout.readline().split()]
    assert len(workers) == 2 and all(alive(p) for p in workers)
    if inspect is not None:
        inspect(owner.pid, workers)
    time.sleep(after_s)
    owner.kill()
    owner.wait(10)
    deadline = time.monotonic() + 5
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in workers if alive(p)]


# Signals


def default_sigint():
    """In a child before it starts Python (preexec_fn): SIGINT at its default, as from a terminal (a
    test run started in the background has it ignored, and Python then leaves it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Run folders for the plots and tables


def fake_run(folder, game, *, test=None, sticky=None, frames=25_200_000, budget=25_000_000, hours=1.0,
             population=64):  # fmt: skip
    """A finished-looking GA run folder of `game` (generation 10, its best elite generation 10)
    with the given test.json and test_sticky0.25.json means (held out unless a dict says otherwise)."""
    folder.mkdir(parents=True)
    config = {"algo": "ga", "ga": {"population": population}, "env": {"env": "atari", "game": game},
              "run": {"seed": 0, "frame_budget": budget}}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    row = {"generation": 10, "frames": frames, "wall_s": 3600.0 * hours, "score/elite_mean": 50.0}
    (folder / "metrics.jsonl").write_text(json.dumps(row) + "\n")
    for name in ("best.json", "elite.json"):
        (folder / name).write_text(json.dumps({"generation": 10, "validation_mean": 50.0}))
    for name, value, p in (("test.json", test, 0.0), (STICKY_FILE, sticky, 0.25)):
        if value is not None:
            written = {"episodes": 200, "frame_cap": 400000, "seeds": "held-out", "sticky": p,
                       "elite_file": "best.json", "elite_generation": 10}  # fmt: skip
            written.update(value if isinstance(value, dict) else {"mean": value})
            (folder / name).write_text(json.dumps(written))
    return str(folder)
