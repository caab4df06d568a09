"""The generation loop, written once for every algorithm (the GA, random search, ES, GA-NS, NS-ES,
NSR-ES, NSRA-ES, the SGD baseline): `nevo train`, `experiments/run_*.py` and `nevo.train` all
run it.

    settings -> task -> net -> evaluator -> algorithm; then, each generation:
    ask -> evaluate -> tell -> ask_validation -> evaluate -> tell_validation
        -> one metrics row -> progress line -> elite files -> checkpoint

The generation is a step the algorithm's declaration names: `GenerationStep` (above) for every
algorithm of the ask/tell contract, the SGD baseline's own (nevo.algos.sgd.SGDStep: mini-batches,
then the test set). The row, the files and the stop lines after it are the skeleton the step runs
in (nevo.loops.skeleton).

Small extensions plug into it where a run's settings want them, instead of branches per
script: each an nevo.algos.contract.Extension beside the algorithm it serves, listed by that
algorithm's declaration (nevo.algos.extensions_of: observation statistics, safe mutations'
experiences, the gradient correlation, or a user's own algorithm's). The run folder's files
are nevo.runs's and nevo.loops.elite's, written by the skeleton; the algorithms' contract is
nevo.algos.contract's, and what each algorithm declares of itself (its command, summary, rows,
behaviour, extensions) nevo.algos.declaration's: the loop compares no algorithm names.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass

import numpy as np

from nevo import cli, config, machine, nets, runs
from nevo.algos import DEFAULT, bases_of, declared, extensions_of
from nevo.algos.streams import check_run_seeds
from nevo.atari.pool import EmulatorError
from nevo.cluster.connection import check_address
from nevo.cluster.evaluator import ClusterError, ClusterEvaluator
from nevo.config import ConfigError
from nevo.episodes import Results
from nevo.evaluation import setup
from nevo.genomes import noise
from nevo.loops.progress import Progress
from nevo.loops.skeleton import Outcome, RunStopped, said, skeleton, stopped, write_config
from nevo.nets.half import format_of
from nevo.runs import loggers, owner, rows, stop


@dataclass
class Plan:
    """What a run checks before it makes its folder: the net, the device, the checkpoint to resume."""

    spec: nets.NetSpec
    device: str | None  # None on a cluster: each worker checks its own
    checkpoint: dict | None
    population: int  # individuals a generation evaluates
    bases: int  # the rows they are built from


def plan(cfg, task, resume_dir: str | None = None, cluster=None) -> Plan:
    """Every check that can fail before any work (ConfigError, ValueError or MemoryError, one
    line each): the net for the task, the noise table's size, memory, the checkpoint to resume."""
    d = declared(cfg)
    d.check_run(cfg, task, cluster)  # a task or a cluster the algorithm cannot run on: first
    spec = setup.net_for(cfg, task)
    config.check_noise_table(cfg, spec.n_params)
    loggers.check(cfg)
    for extension in extensions_of(cfg):
        extension.check(cfg, task)
    if d.needs_behaviour and task.behaviour is None:
        raise ConfigError(
            f"--env: novelty search needs a behaviour per episode; {task.name} has none here "
            "(use maze, an Atari game, a MuJoCo robot, or nevo.train's behaviour=)"
        )
    # the population: the settings' own, or what the declaration computes where it says how
    population = cfg.settings.population if d.population is None else d.population(cfg)
    bases = bases_of(cfg)
    if cluster is None:
        device = setup.check_machine(cfg, task, spec, population, bases)
    else:  # only the noise table is checked here: each worker checks its own machine when it joins
        if config.mutation_of(cfg).safe:
            raise ConfigError(
                f"--cluster: safe mutations (--mutation {config.mutation_of(cfg)}) run on one machine for "
                "now (each child needs its parent's experiences, which the workers are not sent)"
            )
        setup.check_settings(cfg, task, spec)
        check_address(cluster.address)
        setup.check_memory(spec.n_params, 0, cfg.run.noise_table_size, "cpu", "--noise-table-size")
        device = None
    checkpoint = None
    if resume_dir:
        owner.claim(resume_dir)  # before its checkpoint is read; run() lets it go
        try:
            checkpoint = runs.resume_checkpoint(resume_dir, say=print)
        except BaseException:
            owner.release(resume_dir)
            raise
    return Plan(spec, device, checkpoint, population, bases)


def run(cfg, task, p: Plan, resume_dir: str | None = None, cluster=None, fitness=None, out=None) -> Outcome:
    """Train until the frame budget, holding the run folder (nevo.runs.owner) all along; returns
    the Outcome, or raises RunStopped (a stop signal, the cluster gone, a write that failed: the
    last checkpoint whole) or ClusterError (no evaluator at the start; a new run's folder is
    removed). fitness: a function of a generation's training Results giving one number per
    individual (default: the returns); out: a nevo.loops.progress.Progress.

    The run, top to bottom: its folder, the noise table, the evaluator, config.json and the first
    line, the algorithm (from the checkpoint on resume), the generations, the last line."""
    out = out or Progress(cfg.run.frame_budget)
    finished = _finished(p.checkpoint)  # generations in the folder
    step_of = step_class(cfg)
    out.counts(task.FRAMES, step_of.unit)
    with stop.on_signals():
        try:
            run_dir = resume_dir or runs.new_run_dir(cfg, task.name)
        except runs.WriteFailed as e:
            raise stopped(cfg.run.out_dir, 0, e) from None
        try:
            owner.claim(run_dir, out.say)
            table = noise.make_table(cfg.run.noise_table_size, cfg.run.noise_seed)
            ref = setup.reference_batch(cfg, task, run_dir) if cfg.net.vbn else None  # VBN's, in the folder
            try:
                if cluster is None:
                    evaluator, facts = setup.local_evaluator(cfg, task, p.spec, p.device, table, ref, run_dir,
                                                             p.population)  # fmt: skip
                    where = machine.here(facts["device"])
                else:
                    evaluator, facts = _on_cluster(cluster, cfg, task, ref, table, p, out)
                    where = evaluator.machine  # the workers', not this driver's
            except (ClusterError, EmulatorError):  # a new run's folder goes with it
                if resume_dir is None and not os.path.exists(os.path.join(run_dir, runs.CONFIG)):
                    owner.release(run_dir)
                    shutil.rmtree(run_dir, ignore_errors=True)
                raise
            try:
                counts = {"frames": task.FRAMES, "generation": step_of.unit}  # what they count, in words
                at = (finished, int(p.checkpoint["frames"]) if p.checkpoint is not None else 0)
                write_config(run_dir, cfg, task, p.spec, {**facts, "counts": counts}, *at, where)
                out.say(header(cfg, task, p.spec, facts, run_dir))
                algo, extensions, frames, wall = _start(
                    cfg, p.spec, table, task, p.checkpoint, run_dir, step_of, out
                )
                if resume_dir:  # drop metrics of a generation that was in flight when the run died
                    runs.trim_metrics(run_dir, algo.generation, say=out.say)
                step = step_of(cfg, task, p.spec, evaluator, algo, extensions, run_dir, fitness, out)
                if p.checkpoint is None:
                    frames = step.start(frames)
                frames, wall, last = skeleton(cfg, algo, step, frames, wall, run_dir, out)
            finally:
                evaluator.close()
            out.say(step.done(frames, wall, last, run_dir))
            return Outcome(run_dir, algo, frames, wall)
        except RunStopped:  # the generations' own line
            raise
        except BaseException as e:  # a stop or a failed write before or after the generations
            if not (stop.caused(e) or isinstance(e, runs.WriteFailed)):
                raise
            raise stopped(run_dir, finished, e, new=resume_dir is None, unit=step_of.unit) from None
        finally:
            owner.release(run_dir)


def _on_cluster(cluster, cfg, task, ref, table, p: Plan, out):
    """(the evaluator on a Dask cluster, its facts for config.json and the first line)."""
    behaviours = declared(cfg).needs_behaviour
    evaluator = ClusterEvaluator(cluster.address, cfg, task, ref, table, p.population, p.bases, behaviours,
                                 cluster.timeout_s, cluster.chunk, out.say)  # fmt: skip
    return evaluator, evaluator.facts


def step_class(cfg) -> type:
    """The step the algorithm's declaration names (the SGD baseline's), else the population step."""
    return declared(cfg).step or GenerationStep


def _finished(checkpoint) -> int:
    """Generations whole in a run folder, by its checkpoint (0 without one): an algorithm's state
    counts them as "generation", or nested in a part of it (GA-NS's "ga/generation")."""
    if checkpoint is None:
        return 0
    counts = [int(v) for k, v in checkpoint.items() if k == "generation" or k.endswith("/generation")]
    return counts[0] if counts else 0


def _start(cfg, spec, table, task, checkpoint, run_dir, step_of, out):
    """The algorithm and the run's extensions, and the counters, from the checkpoint on resume."""
    d = declared(cfg)  # plan has checked that a novelty algorithm has its task's behaviour
    algo = d.make(
        cfg.algo, cfg, noise.NoiseSource(table, nets.init_scale(spec), d.sigma(cfg)), task.behaviour
    )
    frames, wall = 0, 0.0
    if checkpoint is not None:
        algo.load_state(checkpoint)
        frames, wall = int(checkpoint["frames"]), float(checkpoint["wall_s"])
    extensions = [e.of(cfg, spec, task, algo, run_dir) for e in extensions_of(cfg)]
    if checkpoint is not None:
        for e in extensions:
            e.load_state(checkpoint)
        out.say(f"resumed at {step_of.unit} {algo.generation}, {frames:,} {task.FRAMES}")
    return algo, extensions, frames, wall


class GenerationStep:
    """One generation of the generation loop: ask -> evaluate -> tell -> ask_validation ->
    evaluate -> tell_validation, each extension's hooks at their places."""

    unit = "generation"  # what the run's lines count (and its frames: the task's kind says, Kind.FRAMES)

    def __init__(self, cfg, task, spec, evaluator, algo, extensions, run_dir, fitness, out):
        self.cfg, self.evaluator, self.algo, self.extensions = cfg, evaluator, algo, extensions
        self.frames_are = task.FRAMES  # what its frames count, in words ("game frames", "agent steps")
        self.validation = task.validation  # a validation's episodes as the task plays them
        self.run_dir, self.fitness, self.out = run_dir, fitness, out

    def _prepared(self, population):
        """The population as the extensions give it to the evaluator."""
        for e in self.extensions:
            population = e.prepare(population)
        return population

    def start(self, frames: int) -> int:
        """Before the first generation of a new run: the algorithm's start evaluation, if it asks
        one (the NS-ES family's agents' first behaviours start the archive); the frames after it."""
        asked = self.algo.ask_start()
        if asked is None:
            return frames
        population, episodes = asked
        if episodes.validation:  # (the NS-ES family's: each agent on its validation episodes)
            episodes = self.validation(episodes)
        check_run_seeds(episodes.seeds, self.cfg.algo)
        start = self.evaluator.run(self._prepared(population), episodes)
        self.algo.tell_start(start)
        return frames + start.total_frames

    def __call__(self, frames: int) -> tuple[dict, int]:
        """One generation from `frames`: (its fields of the metrics row, the frames it took)."""
        algo, ev, out, gen, t0 = self.algo, self.evaluator, self.out, self.algo.generation, time.monotonic()
        population, episodes = algo.ask()
        for e in self.extensions:
            e.before(gen, population, episodes, algo)
        check_run_seeds(episodes.seeds, self.cfg.algo)
        out.start_phase(gen, "train", frames)
        train = ev.run(self._prepared(population), episodes, out.episodes)
        t_tell = time.monotonic()
        fitness = None if self.fitness is None else fitness_of(self.fitness, train, gen)
        algo.tell(train, fitness=fitness)
        tell_s = time.monotonic() - t_tell
        last = frames + train.total_frames >= self.cfg.run.frame_budget  # no more generations
        population, episodes = algo.ask_validation(last=last)
        episodes = self.validation(episodes)
        check_run_seeds(episodes.seeds, self.cfg.algo)
        out.start_phase(gen, "validate", frames + train.total_frames)
        valid = ev.run(self._prepared(population), episodes, out.episodes)
        algo.tell_validation(valid)
        self.train, self.valid = train, valid
        gen_s = time.monotonic() - t0
        return metrics_row(gen, gen_s, tell_s, train, valid, algo), train.total_frames + valid.total_frames

    def done(self, frames: int, wall: float, last: dict, run_dir: str) -> str:
        """A finished run's last line: frames, minutes, the elite, the best elite, a data set's accuracy."""
        best = self.algo.best_elite
        also = f", best {best[2]:.1f} (generation {best[0]})" if best is not None else ""
        accuracy = last.get("score/test_accuracy", float("nan"))  # a labelled data set's last validation
        also += f", test accuracy {100 * accuracy:.2f}%" if accuracy == accuracy else ""
        elite = self.algo.elite_score
        return (
            f"done: {frames:,} {self.frames_are} in {wall / 60:.1f} min; elite {elite:.1f}{also}; {run_dir}"
        )

    def finish(self, row: dict) -> None:
        """The extensions' fields into the row; where each training episode ended (the maze, MuJoCo)."""
        for e in self.extensions:
            e.after(row, self.train, self.valid, self.algo)
        if self.train.behaviours is not None:
            runs.save_array(self.run_dir, runs.BEHAVIOURS, self.train.behaviours)

    def elite(self) -> dict:
        """The extensions' files beside the elite (e.g. the observation statistics)."""
        return {k: v for e in self.extensions for k, v in e.elite(self.algo).items()}

    def state(self) -> dict:
        return {k: v for e in self.extensions for k, v in e.state(self.algo).items()}

    def checkpointed(self) -> None:
        for e in self.extensions:
            e.checkpointed(self.algo)


def fitness_of(fitness, train: Results, generation: int) -> np.ndarray:
    """A caller's fitness(train) checked: one number per individual (float64, NaN allowed: it
    ranks last), else a ConfigError naming `fitness` and what it raised or returned."""
    n = len(train.returns)
    try:
        value = fitness(train)
    except Exception as e:  # noqa: BLE001 (the caller's function: one line naming it)
        raise ConfigError(f"fitness: raised {config.raised(e)} in generation {generation}") from e
    values = config.as_numbers(value)
    if values is None or values.shape != (n,):
        raise ConfigError(
            f"fitness: returned {config.shown(value)} in generation {generation}; allowed: one number per "
            f"individual, {n} in all (an array of shape ({n},), NaN for none)"
        )
    if np.isinf(values).any():
        raise ConfigError(
            f"fitness: returned an infinite value for individual {int(np.flatnonzero(np.isinf(values))[0])} "
            f"in generation {generation}; allowed: finite numbers or NaN (NaN ranks last)"
        )
    return values.astype(np.float64)


def main(argv, description: str, command: str = DEFAULT, module: str = "") -> int:
    """The command line of algorithm `command`'s command (its module's algorithms; module: one of
    one's own that declares it): parse, plan, run; one line and an exit
    code for every way it can stop (2: bad settings, a damaged run folder or one another process
    holds, or no cluster; 3: the cluster lost; 4: a write failed; 5: an emulator process died;
    130: SIGINT, Ctrl-C; 143: SIGTERM)."""
    with stop.on_signals():
        try:
            return _main(argv, description, command, module)
        except BaseException as e:  # a stop before the run began: nothing written
            if not stop.caused(e):
                raise
            signum = stop.signum_of(e)
            said(f"stopped by {signal.Signals(signum).name} before the run began; nothing was written")
            return 128 + signum


def _main(argv, description: str, command: str, module: str) -> int:
    try:
        cfg, resume_dir, cluster, task = cli.parse_args(argv, description, command, module)
        p = plan(cfg, task, resume_dir, cluster)
    except (ConfigError, ValueError, MemoryError) as e:  # one clear line, no traceback
        if stop.caused(e):  # met by a check on its way: main says it
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        run(cfg, task, p, resume_dir, cluster)
    except ConfigError as e:  # a damaged run file met on the way (experiences, ...)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ClusterError, EmulatorError) as e:  # no cluster; emulators that would not start
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunStopped as e:
        said(str(e), sys.stderr if e.code in (3, 4, 5) else sys.stdout)
        return e.code
    return 0


def header(cfg, task, spec, facts: dict, run_dir: str) -> str:
    """The run's first line: the algorithm, task, net, the family's main settings, the evaluator."""
    mutation = config.mutation_of(cfg)
    about = f", VBN over {cfg.net.vbn} observations" if cfg.net.vbn else ""
    weights = format_of(cfg.net.weights, cfg.net.net)  # a Config built in Python may say auto
    about += f", {weights} weights" if weights != "fp32" else ""  # 16-bit rows
    main = declared(cfg).summary(cfg)
    main += f" mutation {mutation}" if mutation.safe else ""
    return (
        f"nevo {cfg.algo} | {task.name} | net {cfg.net.net} ({spec.n_params:,} params{about}) | {main} | "
        + ", ".join(f"{k} {v}" for k, v in facts.items())
        + f" | run folder {run_dir}"
    )


def metrics_row(gen, gen_s, tell_s, train: Results, valid: Results, algo) -> dict:
    """A generation's fields of its metrics.jsonl line (the skeleton adds frames, wall_s and the
    generation's timing), the same for every algorithm: the episodes' counters and timing, the
    population's game scores (returns, whatever the algorithm ranked by), the algorithm's own
    metrics(), episode length, a labelled data set's accuracies, and on a cluster what it moved."""
    row = {
        "generation": gen,
        "frames_train": train.total_frames,
        "frames_validation": valid.total_frames,
        "episodes": len(train.returns) + len(valid.returns),
        "perf/tail_fraction": round((train.tail_s + valid.tail_s) / gen_s, 4),
        "perf/forward_fraction": round((train.forward_s + valid.forward_s) / gen_s, 4),
        "perf/update_s": round(tell_s, 4),
        "score/pop_max": float(np.max(train.returns)),
        "score/pop_mean": float(np.mean(train.returns)),
        "score/pop_median": float(np.median(train.returns)),
        **algo.metrics(),
        "episode/mean_length": float(np.mean(train.lengths)),
        **rows.accuracy_row(train.accuracy, valid.accuracy, algo.validated),
        **rows.cluster_row(train, valid),
    }
    return row
