"""Test a run's elite as the paper scores it, and record it playing.

    nevo replay RUN_DIR                       # 200 test episodes, 400,000-frame cap
    nevo replay RUN_DIR --episodes 10 --gif elite.gif --still elite.png
    nevo replay RUN_DIR --elite last          # the last generation's elite instead
    nevo replay RUN_DIR --elite 12            # generation 12's elite: test.g12.json
    nevo replay RUN_DIR --elite 10,20,30 --episodes 30   # three generations' elites, one after another
    nevo replay RUN_DIR --sticky 0.25         # under sticky actions: test_sticky0.25.json

(`python -m experiments.replay` in a checkout is the same.)

Such et al. 2017 report the elite's mean over 200 test episodes with up to 30 random no-ops and
a cap of 400,000 game frames. The individual tested is the run's best elite (best.json: the
highest validation mean of the run, which Uber's reference GA reports at the end of a run), or
with --elite last the last generation's (elite.json); runs without best.json (ES, novelty
search) have only elite.json. It is rebuilt from its seed list alone; the episodes run on the
same evaluator as training, with the frame cap replaced and episode seeds drawn from --seed, so
the same elite and seed give the same scores. The test's seeds are held out: they lie where no
run's training or validation seed does (nevo.algos.streams.held_out_seeds). The result goes to
RUN_DIR/test.json (atomically, naming the file tested), where `nevo plot table` finds it. The
episodes are played in parts of 20, each kept in RUN_DIR/test.partial.json as it ends: a stopped
test (a long game's 200 episodes at the cap can take hours) goes on from there when run again.

With --elite G, generation G's elite is tested instead (its line of elites.jsonl, which a run
whose elites are seed lists keeps since 2026-12-04), into test.gG.json: the points of a held-out
test curve, which the table does not read. Several generations (--elite 10,20,30) are tested one
after another on one evaluator, each into its own file.

With --sticky 0.25 the same elite is tested under sticky actions (Machado et al. 2018: each raw
frame repeats the previous frame's action with that probability), the modern protocol, which an
elite that only replays a memorised action sequence fails; that test goes to
RUN_DIR/test_sticky0.25.json (and its parts to test_sticky0.25.partial.json).

--gif records one episode (the first test episode's seed) at the emulator's full 210x160 colour:
the episode is played as training plays it (the same start, no-ops and actions), and each
picture is a step's last frame in colour, read from the same emulator.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from dataclasses import replace

import numpy as np

from nevo import config, runs, tasks
from nevo.algos.streams import held_out_seeds
from nevo.atari import game
from nevo.episodes import Episodes, Population
from nevo.evaluation import setup
from nevo.evaluation.setup import evaluator_for
from nevo.loops import elite as elite_files
from nevo.nets.kernels import make_policy
from nevo.runs import stop
from nevo.tasks import envs

GIF_MAX_BYTES = 5_000_000
GIF_MAX_IMAGES = 1000  # beyond this many pictures the GIF keeps every k-th agent step


def parse(argv):
    p = argparse.ArgumentParser(prog="nevo replay", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (config.json, elite.json)")
    p.add_argument(
        "--elite",
        default="best",
        metavar="{best,last,G[,G...]}",
        help="best: the best elite of the run (best.json, where the run has one); last: the last "
        "generation's (elite.json); G, a generation: that generation's elite (elites.jsonl, which "
        "a run whose elites are seed lists keeps); G,G,...: several, one after another (default: best)",
    )
    p.add_argument("--episodes", type=int, default=200, help="test episodes (default: 200, as the paper)")
    p.add_argument(
        "--frame-cap", type=int, default=400_000, help="episode cap in game frames (default: 400000)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the test episodes' seeds (default: 0)")
    p.add_argument(
        "--sticky",
        type=float,
        default=0.0,
        help="Atari: sticky actions' probability in the test (default: 0.0, the paper's protocol; "
        "0.25: Machado et al. 2018's), whatever the run trained with",
    )
    p.add_argument("--gif", metavar="PATH", help="record one episode at full resolution to this GIF")
    p.add_argument("--gif-frames", type=int, default=2000, help="most agent steps recorded (default: 2000)")
    p.add_argument("--still", metavar="PATH", help="with --gif: also write the GIF's middle picture as PNG")
    p.add_argument("--device", default="auto", help="inference backend: auto, cpu or cuda (default: auto)")
    p.add_argument("--env-slots", type=int, default=0, help="episodes at once; 0 = from the machine")
    p.add_argument("--processes", type=int, default=0, help="Atari: emulator processes; 0: one a core")
    p.add_argument("--threads", type=int, default=0, help="gymnasium tasks: env threads; 0: by timing")
    p.add_argument("--no-save", action="store_true", help="do not write RUN_DIR/test.json (or its like)")
    args = p.parse_args(argv)
    for name in ("episodes", "frame_cap", "gif_frames"):
        if getattr(args, name) < 1:
            raise config.ConfigError(f"--{name.replace('_', '-')}: got {getattr(args, name)}, allowed: >= 1")
    if args.seed < 0:
        raise config.ConfigError(f"--seed: got {args.seed}, allowed: an integer >= 0")
    args.elites = [args.elite]  # what to test, in turn: "best", "last" or generations
    if args.elite not in ("best", "last"):
        if not re.fullmatch("[0-9]+(,[0-9]+)*", args.elite):
            raise config.ConfigError(
                f"--elite: got {args.elite}, allowed: best, last, a generation (>= 0) or several (10,20,30)"
            )
        args.elites = list(dict.fromkeys(int(g) for g in args.elite.split(",")))  # (each once)
    if args.gif and len(args.elites) > 1:
        raise config.ConfigError(f"--gif: records one elite; --elite names {len(args.elites)}")
    if not 0.0 <= args.sticky < 1.0:
        raise config.ConfigError(f"--sticky: got {args.sticky}, allowed: a probability in [0, 1)")
    return args


PART = 20  # test episodes played between two saves of the partial file
HELD_OUT = "held-out"  # test.json's "seeds": drawn by held_out_seeds (older tests drew a run's own)


def test_file(sticky: float, generation: int | None = None) -> str:
    """The file a test's result goes to: test.json under the paper's protocol, test_stickyP.json
    under sticky actions P; of one generation's elite (--elite G), test.gG.json, test_stickyP.gG.json."""
    name = "test" if not sticky else f"test_sticky{sticky:g}"
    return f"{name}.json" if generation is None else f"{name}.g{generation}.json"


def partial_file(sticky: float, generation: int | None = None) -> str:
    """A test's episodes so far, while it is not finished (test.partial.json, ...)."""
    return test_file(sticky, generation).removesuffix(".json") + ".partial.json"


def _partial(run_dir: str, which: dict, name: str) -> dict | None:
    """The episodes so far (in the file `name`) of a stopped test of the same elite with the same
    settings, or None."""
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):
        return None
    try:
        kept = config.read_json(path)
    except config.ConfigError:  # damaged (it is only a cache of scores): tested again
        return None
    if any(kept.get(k) != v for k, v in which.items()):
        return None
    if not all(isinstance(kept.get(k), list) for k in ("returns", "lengths", "frames")):
        return None
    return kept


class Status:
    """Episodes done, frames and frames/s: a live line on a terminal, ~10 lines otherwise.
    part(a): the progress callback of a part of the test that starts at episode a."""

    def __init__(self, total: int | None = None):
        self.tty, self.t0, self.shown = sys.stdout.isatty(), time.monotonic(), 0
        self.total, self.frames = total, 0  # (the test's episodes; the frames of its parts so far)

    def part(self, a: int):
        last = {"frames": 0}

        def progress(done: int, total: int, frames: int) -> None:
            self.frames += frames - last["frames"]
            last["frames"] = frames
            self(a + done, None, self.frames)

        return progress

    def __call__(self, done: int, total: int | None, frames: int) -> None:
        total = total or self.total
        rate = frames / max(time.monotonic() - self.t0, 1e-9)
        line = f"episodes {done}/{total} | {frames / 1e6:.2f}M frames | {rate / 1e3:.1f}K f/s"
        if self.tty:
            sys.stdout.write("\r\033[K" + line)
            sys.stdout.flush()
        elif done * 10 // total > self.shown:
            self.shown = done * 10 // total
            print(line, flush=True)

    def clear(self) -> None:
        if self.tty:
            sys.stdout.write("\r\033[K")


def record_episode(env_cfg, policy, weights, episode_seed: int, max_steps: int, stride: int):
    """Play one episode as the pipeline plays it (nevo.atari.emulator, from the seeded
    reset's state); return ((n, 210, 160, 3) uint8 pictures every stride steps, return, steps,
    ended). A picture is the step's last frame in colour, read from the same emulator."""
    from nevo.atari.emulator import STACK, AtariEmulator

    em = AtariEmulator(env_cfg.game, env_cfg.frameskip, env_cfg.frame_cap, env_cfg.sticky)
    obs = np.zeros((1, STACK, *em.resize.out), np.uint8)
    zero = np.zeros(1, np.int64)
    policy.load(weights[None])
    try:
        noops = game.noop_count(episode_seed, env_cfg.noop_max)
        if env_cfg.start == "reference":  # no-ops, FIRE and action 2 before the first step
            em.begin(obs[0], noops, episode_seed)
            noops = 0
        else:
            em.restart(obs[0])
        pictures, total, steps, ended = [em.screen_rgb()], 0.0, 0, False
        while steps < max_steps and not ended:
            action = game.NOOP if steps < noops else int(policy(zero, obs)[0])
            r, done = em.step(action, obs[0])
            total, steps, ended = total + float(r), steps + 1, bool(done)
            if not ended and steps % stride == 0:
                pictures.append(em.screen_rgb())
        return np.stack(pictures), total, steps, ended
    finally:
        policy.release()


def record_task_episode(task, policy, weights, episode_seed: int, max_steps: int, stride: int):
    """A gymnasium task's episode, as the evaluator plays it (nevo.tasks.envs.VectorTaskSlots, a seeded
    reset), rendered every stride steps (MuJoCo offscreen: MUJOCO_GL=egl, no display). Returns
    ((n, H, W, 3) uint8 pictures, return, steps, ended, milliseconds per picture)."""
    import gymnasium as gym

    kwargs = {"render_mode": "rgb_array"}
    if envs.is_mujoco(task.name):
        kwargs |= {"width": 320, "height": 240, "camera_id": 0}  # the robots' first camera tracks them
    slots = envs.VectorTaskSlots(lambda: gym.make(task.name, **kwargs), 1)
    zero = np.zeros(1, np.int64)
    try:
        slots.reset(zero, zero)
        slots.envs[0].render()
    except gym.error.DependencyNotInstalled as e:
        slots.close()
        raise config.ConfigError(
            f"--gif: {task.name} cannot render here: {' '.join(str(e).split())}"
        ) from None
    try:
        policy.load(weights[None])
        obs = slots.reset(zero, np.array([episode_seed]))
        pictures, total, steps, ended = [slots.envs[0].render()], 0.0, 0, False
        while steps < max_steps and not ended:
            obs, r, end = slots.step(zero, policy(zero, obs))
            total, steps, ended = total + float(r[0]), steps + 1, bool(end[0])
            if steps % stride == 0 or ended:
                pictures.append(slots.envs[0].render())
        policy.release()
        fps = slots.envs[0].metadata.get("render_fps") or 30
        return np.stack(pictures).astype(np.uint8), total, steps, ended, 1000 * stride / fps
    finally:
        slots.close()


def write_gif(path: str, pictures: np.ndarray, ms_per_picture: float) -> int:
    """Write (n, H, W, 3) uint8 pictures as a looping GIF over one exact palette; return its bytes."""
    from PIL import Image

    packed = (pictures[..., 0].astype(np.uint32) << 16) | (pictures[..., 1].astype(np.uint32) << 8)
    packed |= pictures[..., 2]  # (n, H, W) 24-bit colours
    colors = np.unique(packed)
    if colors.size <= 256:  # Atari's NTSC palette has 128 colours: index them exactly
        palette = np.stack([colors >> 16, (colors >> 8) & 255, colors & 255], 1).astype(np.uint8)
        images = []
        for frame in np.searchsorted(colors, packed).astype(np.uint8):
            im = Image.fromarray(frame, "P")
            im.putpalette(palette.ravel().tolist())
            images.append(im)
    else:
        images = [Image.fromarray(p).quantize(256) for p in pictures]
    tmp = path + ".tmp"
    images[0].save(tmp, format="GIF", save_all=True, append_images=images[1:],
                   duration=max(20, round(ms_per_picture)), loop=0)  # fmt: skip
    os.replace(tmp, path)
    return os.path.getsize(path)


def make_gif(args, task, policy, weights, episode_seed: int) -> tuple[float, int, bool]:
    """Record, write --gif (halving the picture rate until it fits), and --still; return the episode."""
    stride = max(1, math.ceil(args.gif_frames / GIF_MAX_IMAGES))
    if isinstance(task, tasks.AtariGame):
        pictures, ret, steps, ended = record_episode(
            task.cfg, policy, weights, episode_seed, args.gif_frames, stride
        )
        ms = 1000 * stride * task.cfg.frameskip / 60  # ALE runs at 60 Hz
    else:
        pictures, ret, steps, ended, ms = record_task_episode(
            task, policy, weights, episode_seed, args.gif_frames, stride
        )
    while True:
        size = write_gif(args.gif, pictures, ms)
        if size <= GIF_MAX_BYTES or len(pictures) < 20:
            break
        pictures, stride, ms = pictures[::2], stride * 2, ms * 2
    print(f"gif: {args.gif} ({len(pictures)} pictures of {pictures.shape[2]}x{pictures.shape[1]}, one per "
          f"{stride} agent steps, {size / 1e6:.2f} MB)")  # fmt: skip
    if args.still:
        from PIL import Image

        Image.fromarray(pictures[len(pictures) // 2]).save(args.still)
        print(f"still: {args.still}")
    return ret, steps, ended


def main(argv=None) -> int:
    # ---- settings and the elites ---------------------------------------------------------
    try:
        args = parse(argv)
        if args.gif:  # MuJoCo renders offscreen without a display (read when its renderer is made)
            os.environ.setdefault("MUJOCO_GL", "egl")
        # every elite loaded first: a generation the run does not keep is one line before any test
        loaded = [elite_files.load(args.run_dir, which) for which in args.elites]
        cfg, _, spec, _ = loaded[0]
        cfg = replace(cfg, env=replace(cfg.env, frame_cap=args.frame_cap, sticky=args.sticky))
        task = tasks.task_for(cfg.env)
        tasks.check_sticky(task, cfg.env)
        if args.gif and isinstance(task, (tasks.Maze, tasks.Supervised)):
            raise config.ConfigError(
                f"--gif: records Atari screens and gymnasium renders; {task.name} has none"
            )
        cfg = replace(cfg, run=replace(cfg.run, device=args.device))
        device = setup.device_for(cfg, task)
        policy = make_policy(device, spec)
        # The elite's weights as they are; the builder folds virtual batch norm in, as in training.
        builder = setup.weight_builder(cfg, task, spec, args.run_dir, None)
    except (config.ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    run_cfg = replace(cfg.run, env_slots=args.env_slots, threads=args.threads, processes=args.processes)
    supervised = isinstance(task, tasks.Supervised)
    n = 1 if supervised else args.episodes
    evaluator, _ = evaluator_for(task, run_cfg, policy, builder, device, n)
    try:
        for which, (_, elite, _, weights) in zip(args.elites, loaded):
            generation = which if isinstance(which, int) else None  # its test's own file
            elite_only = Population.of_weights(weights[None])
            what = "theta" if "theta" in elite else f"{len(elite['seeds'])} seeds"
            print(f"replay {task.name} | {elite['file']}: elite of generation {elite['generation']} ({what}, "
                  f"validation mean {elite['validation_mean']:.1f}) | {args.episodes} episodes, "
                  f"cap {args.frame_cap:,} frames, seed {args.seed} (held out)"
                  f"{f', sticky actions {args.sticky:g}' if args.sticky else ''}")  # fmt: skip
            if supervised:  # a labelled data set: the elite on the whole test set
                rc, test = test_accuracy(args, task, evaluator, elite_only, elite, generation), None
            else:
                rc, test = test_episodes(args, task, evaluator, elite_only, elite, generation)
            if rc:
                return rc
    finally:
        evaluator.close()

    # ---- the recording (one elite: parse refuses --gif with several) ----------------------
    if args.gif:
        builder.use(elite_only)  # the weights the policy plays with (virtual batch norm folded in)
        played = builder.build([0], np.empty((1, spec.n_params), np.float32))[0]
        seed = int(held_out_seeds(args.seed, args.episodes)[0])  # the test's episode 0
        try:
            ret, steps, ended = make_gif(args, task, policy, played, seed)
        except config.ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        first_return, first_length = test["returns"][0], test["lengths"][0]
        same = "" if not ended else f" (test episode 0: {first_return:.0f})"
        print(f"recorded episode: return {ret:.0f} in {steps} agent steps{'' if ended else ', cut'}{same}")
        if ended and (ret != first_return or steps != first_length):
            print("error: the recorded episode differs from test episode 0", file=sys.stderr)
            return 1
    return 0


def test_episodes(args, task, evaluator, elite_only, elite, generation) -> tuple[int, dict | None]:
    """The elite's test episodes on held-out seeds, into RUN_DIR/test.json (or its like: test_file):
    (0, the test's returns and lengths), or (the exit code of a stop, None)."""
    seeds = held_out_seeds(args.seed, args.episodes)
    env = task.name
    # Played in parts of PART episodes, each part's scores kept in test.partial.json as it ends:
    # a stopped test (a long game's 200 episodes at the 400,000-frame cap can take hours) goes on
    # from there when run again. An episode's score depends only on the elite and its seed, so
    # the parts give the scores of one call.
    which = {"episodes": args.episodes, "frame_cap": args.frame_cap, "seed": args.seed, "seeds": HELD_OUT,
             "sticky": args.sticky, "elite_file": elite["file"], "elite_generation": elite["generation"],
             "elite_genome_len": len(elite.get("seeds", [])), "game": env}  # fmt: skip
    out_name = test_file(args.sticky, generation)
    partial_name = partial_file(args.sticky, generation)
    done = {"returns": [], "lengths": [], "frames": [], "wall_s": 0.0}
    partial = None if args.no_save else _partial(args.run_dir, which, partial_name)
    if partial is not None:
        done = {k: partial[k] for k in done}
        print(f"resumed at episode {len(done['returns'])} of {args.episodes} ({partial_name})")
    t0, status = time.monotonic(), Status(args.episodes)
    try:
        for a in range(len(done["returns"]), args.episodes, PART):
            part = seeds[a : a + PART]
            res = evaluator.run(elite_only, Episodes(np.zeros(len(part), np.int64), part), status.part(a))
            for key, values in (("returns", res.returns), ("lengths", res.lengths), ("frames", res.frames)):
                done[key] += values.tolist()
            done["wall_s"] += time.monotonic() - t0
            t0 = time.monotonic()
            if not args.no_save and len(done["returns"]) < args.episodes:
                runs.write_json(args.run_dir, partial_name, {**which, **done})
    except KeyboardInterrupt as e:  # Ctrl-C, or a stop signal where nevo's handlers are in place
        status.clear()
        kept = len(done["returns"])
        print(f"interrupted; {partial_name} keeps {kept} of {args.episodes} episodes: run it again to go on"
              if kept and not args.no_save else "interrupted; nothing written")  # fmt: skip
        return 128 + stop.signum_of(e), None
    status.clear()
    wall = done["wall_s"]
    r, lengths, frames = (np.asarray(done[k]) for k in ("returns", "lengths", "frames"))
    print(f"test: {r.mean():.1f} +- {r.std():.1f} (min {r.min():.0f}, max {r.max():.0f}) over {len(r)} "
          f"episodes; {int(frames.sum()):,} frames ({frames.mean():,.0f} per episode, "
          f"{int((frames >= args.frame_cap).sum())} at the cap) in {wall:.0f} s")  # fmt: skip
    if not args.no_save:
        runs.write_json(args.run_dir, out_name, {
            **which, "mean": float(r.mean()), "std": float(r.std()), "min": float(r.min()),
            "max": float(r.max()), "returns": r.tolist(), "lengths": lengths.tolist(),
            "frames": frames.tolist(), "elite_validation_mean": elite["validation_mean"],
            "device": args.device, "wall_s": round(wall, 3),
        })  # fmt: skip
        if os.path.exists(os.path.join(args.run_dir, partial_name)):
            os.remove(os.path.join(args.run_dir, partial_name))
        print(f"wrote {os.path.join(args.run_dir, out_name)}")
    return 0, {"returns": r.tolist(), "lengths": lengths.tolist()}


def test_accuracy(args, task, evaluator, elite_only, elite, generation) -> int:
    """A supervised run's elite on its data set's whole test set: accuracy and minus the mean
    cross-entropy, into RUN_DIR/test.json (test.gG.json for --elite G)."""
    t0 = time.monotonic()
    res = evaluator.run(elite_only, Episodes(np.zeros(1, np.int64), np.zeros(1, np.int64), validation=True))
    wall = time.monotonic() - t0
    accuracy, score = float(res.accuracy[0]), float(res.returns[0])
    print(f"test: accuracy {accuracy:.4f}, minus the mean cross-entropy {score:.4f}, over "
          f"{res.lengths[0]:,} test examples in {wall:.1f} s")  # fmt: skip
    name = test_file(0.0, generation)
    if not args.no_save:
        runs.write_json(args.run_dir, name, {
            "examples": int(res.lengths[0]), "accuracy": accuracy, "mean": score,
            "elite_file": elite["file"], "elite_generation": elite["generation"],
            "elite_validation_mean": elite["validation_mean"], "game": task.name,
            "device": args.device, "wall_s": round(wall, 3),
        })  # fmt: skip
        print(f"wrote {os.path.join(args.run_dir, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
