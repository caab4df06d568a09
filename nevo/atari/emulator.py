"""One Atari emulator as nevo steps it: a bare `ale_py.ALEInterface` and the observation in Numba.

Preprocessing as ale-py's vector env does it, which is the Deep GA reference's (Such et al. 2017;
Mnih et al. 2015) in its steps but not in two of its numbers: frameskip 4 with rewards summed, the
maximum of the last two raw frames, grayscale, 84x84, a stack of 4 frames, the minimal action
set, no reward clipping, no end-of-life episodes, a cap on an episode's frames. The grayscale
is ALE's uint8 one (the reference's: the palette's luminance in float) and the resize OpenCV's
INTER_AREA (the reference's: bilinear with align_corners); docs/reference_start.md sets the two
side by side.

Sticky actions (Machado et al. 2018) are off by default, as in the Deep GA. With sticky = p > 0,
every raw frame of an episode plays the previous frame's action again with probability p, as
ALE's own repeat_action_probability does (StellaEnvironment::act: a uniform draw u, the agent's
action where u >= p); the draws come from the episode's seed (sticky_draws), so an episode is
the same in every process that plays it. ALE's own stickiness stays off: its generator and its
previous action are not part of a state nevo restores. tests/test_sticky.py feeds ALE's own
draws to this emulator and gets ALE's episode frame for frame.

Each step is bit for bit what ale-py 0.12.1's vector env (`AtariVectorEnv`, C++) gives for the
same actions: the same ALE calls in the same order, and the resize is OpenCV 4.10's INTER_AREA
(what the vector env calls, `cv::resize`) written out in float32 with the same operations in
the same order (`area_table`, `resize_area`); tests/test_atari_emulator.py compares the two step
by step on every game nevo's tests and benchmarks use.

What differs from the vector env is how an episode starts. The vector env starts a seeded episode
by reloading the ROM (`setInt("random_seed")`, `loadROM`, `reset_game`: 72-191 ms, 600-790 frames
of one core's emulation). Here the state right after that reset (and its observation) is saved
once, and every episode starts by `restoreState` of it (64-165 us), which replays the fresh
episode's RAM, rewards and screens (experiments.bench.reset_restore). Games where it does not are
listed in RELOAD_GAMES and start each episode by the reload, as the vector env does.

Two episode starts (EnvConfig.start): `restart` is the vector env's (reset, FIRE for one raw
frame where the game has it; nevo then plays its no-ops as NOOP steps of frameskip frames), and
`begin` is the reference's, Uber's deep GA (`gpu_implementation/gym_tensorflow/atari/tf_atari.cpp`,
`AtariEnvironment::reset`): reset_game, then n no-ops of one raw frame each (a game over starts
again), then, where the minimal action set's action 1 is FIRE, actions 1 and 2 for frameskip
frames each (a game over starts again); the frame cap counts the frames after that, and the
first observation is the last two frames' maximum in an otherwise zero stack. The reference
calls reset_game on one long-lived emulator, and here `begin` restores the seed-0 reset's state:
on 10 of the Deep GA's 13 games the two are the same state; on Assault, Frostbite and Seaquest
the reference's depends now and then on the episode played before (measured:
docs/reference_start.md, experiments/reference_start.py).
"""

from __future__ import annotations

import functools
import warnings

import numba
import numpy as np

SCREEN = (210, 160)  # ALE's raw screen, (height, width), on most games (a few have 250 rows)
FRAME = (84, 84)  # the policy's frame, (height, width)
STACK = 4  # frames in an observation
RAM_BYTES = 128
# The key of an episode's sticky-action stream: its draws are SeedSequence([episode seed, this]).
STICKY_STREAM = 0x571C
STICKY_BLOCK = 1024  # sticky-action draws made at a time

# Games whose restored state does not replay a seeded reset's episode (checked by
# tests/test_atari_emulator.py): each of their episodes starts by reloading the ROM.
RELOAD_GAMES: frozenset[str] = frozenset()

# How a step ended, per slot (EmulatorPool.done): still playing, game over, or the frame cap.
PLAYING, TERMINATED, TRUNCATED = 0, 1, 2


def area_table(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dst index, src index, float32 weight) of each term of an INTER_AREA resize along one axis,
    in the order OpenCV 4.10 makes them (imgproc/src/resize.cpp, computeResizeAreaTab).

    The scale is 1 / (dst / src) in double, as cv::resize computes it from the sizes."""
    scale = 1.0 / (dst / src)
    di, si, alpha = [], [], []
    for d in range(dst):
        fs1 = d * scale
        fs2 = fs1 + scale
        cell = min(scale, src - fs1)
        s1, s2 = int(np.ceil(fs1)), int(np.floor(fs2))
        s2 = min(s2, src - 1)
        s1 = min(s1, s2)
        if s1 - fs1 > 1e-3:
            di.append(d), si.append(s1 - 1), alpha.append(np.float32((s1 - fs1) / cell))
        for s in range(s1, s2):
            di.append(d), si.append(s), alpha.append(np.float32(1.0 / cell))
        if fs2 - s2 > 1e-3:
            di.append(d), si.append(s2), alpha.append(np.float32(min(min(fs2 - s2, 1.0), cell) / cell))
    return np.array(di, np.int32), np.array(si, np.int32), np.array(alpha, np.float32)


def _runs(
    di: np.ndarray, si: np.ndarray, alpha: np.ndarray, n: int, width: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """(source indices (width, n), weights (width, n)) of each destination index's run of terms,
    in order. Shorter runs end with weight-0 terms (on their last pixel), which add +0 to a sum
    that is never -0: the same float32 value."""
    index = np.zeros((width, n), np.int32)
    weights = np.zeros((width, n), np.float32)
    for d in range(n):
        (k,) = np.nonzero(di == d)
        if k.size > width:  # (160 columns to 84: at most 3 a cell)
            raise ValueError(f"an area resize to {n}: a cell spans more than {width} pixels")
        index[:, d] = si[k[-1]]
        index[: k.size, d] = si[k]
        weights[: k.size, d] = alpha[k]
    return index, weights


@functools.cache
def area_resize(shape=SCREEN, out=FRAME) -> AreaResize:
    """The tables of the INTER_AREA resize from shape to out, made once per process."""
    return AreaResize(shape, out)


class AreaResize:
    """The tables of one INTER_AREA resize, (h, w) to (oh, ow), for resize_area."""

    def __init__(self, shape=SCREEN, out=FRAME):
        (h, w), (oh, ow) = shape, out
        self.xi, self.xw = _runs(*area_table(w, ow), ow)  # (3, ow) each
        self.yd, self.ys, self.ya = area_table(h, oh)
        self.shape, self.out = (h, w), (oh, ow)

    def scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """(the rows resized along x (h, ow), one output row's sums (ow,)), float32."""
        return np.zeros((self.shape[0], self.out[1]), np.float32), np.zeros(self.out[1], np.float32)


@numba.njit(cache=True, nogil=True)
def _saturate_u8(v: np.float32) -> np.uint8:
    """OpenCV's saturate_cast<uchar>(float): round half to even (lrintf), then clamp."""
    r = np.rint(v)
    if r < 0:
        return np.uint8(0)
    if r > 255:
        return np.uint8(255)
    return np.uint8(r)


@numba.njit(cache=True, nogil=True)
def resize_area(src, dst, xi, xw, yd, ys, ya, rows, acc) -> None:
    """dst (oh, ow) uint8 = OpenCV 4.10's INTER_AREA resize of src (h, w) uint8, one channel.

    OpenCV (ResizeArea_Invoker) makes, for each term (dy, sy, beta) of the vertical table, the
    row buf[dx] = 0 + the sum over dx's terms of float(src[sy, sx]) * alpha, in order, and adds
    beta * buf[dx] to dy's float32 sum (the first term of a dy sets it: 0 + x is x), then rounds.
    Here each source row is resized along x once, into rows (h, ow) (OpenCV makes a row that two
    output rows share twice, with the same result), then the sums run over whole rows: the same
    float32 operations in the same order for every output pixel, so the same bits (checked
    against the term-by-term loop in tests/test_atari_emulator.py). xi, xw (3, ow): each output
    column's three source columns and weights (AreaResize). speed: the three terms unrolled,
    1.4x a loop over each column's run of terms (38 against 54 us a frame, 2-core AMD EPYC).
    acc: (ow,) float32 scratch."""
    h, ow = src.shape[0], dst.shape[1]
    i0, i1, i2, w0, w1, w2 = xi[0], xi[1], xi[2], xw[0], xw[1], xw[2]
    for sy in range(h):
        s, out = src[sy], rows[sy]
        for dx in range(ow):
            b = np.float32(s[i0[dx]]) * w0[dx]  # (0 + the first term)
            b += np.float32(s[i1[dx]]) * w1[dx]
            b += np.float32(s[i2[dx]]) * w2[dx]
            out[dx] = b
    prev = yd[0]
    for dx in range(ow):
        acc[dx] = ya[0] * rows[ys[0], dx]
    for j in range(1, yd.shape[0]):
        beta, dy, r = ya[j], yd[j], rows[ys[j]]
        if dy != prev:
            for dx in range(ow):
                dst[prev, dx] = _saturate_u8(acc[dx])
                acc[dx] = beta * r[dx]
            prev = dy
        else:
            for dx in range(ow):
                acc[dx] += beta * r[dx]
    for dx in range(ow):
        dst[prev, dx] = _saturate_u8(acc[dx])


@numba.njit(cache=True, nogil=True)
def push_frame(stack, raw, xi, xw, yd, ys, ya, rows, acc) -> None:
    """The vector env's process_screen: raw[0] becomes max(raw[0], raw[1]) (the last two frames,
    in place as there), its resize is the newest frame of stack (STACK, 84, 84), the older ones
    move one place back."""
    a, b = raw[0], raw[1]
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if b[i, j] > a[i, j]:
                a[i, j] = b[i, j]
    for f in range(stack.shape[0] - 1):
        stack[f] = stack[f + 1]
    resize_area(a, stack[stack.shape[0] - 1], xi, xw, yd, ys, ya, rows, acc)


def compile_kernels() -> None:
    """Compile (or load from Numba's cache) the observation's kernels in this process: a pool
    does it once before it starts its workers, which then load them from the cache instead of
    all compiling at once."""
    r = area_resize()
    rows, acc = r.scratch()
    push_frame(
        np.zeros((STACK, *FRAME), np.uint8),
        np.zeros((2, *SCREEN), np.uint8),
        r.xi,
        r.xw,
        r.yd,
        r.ys,
        r.ya,
        rows,
        acc,
    )


class AtariEmulator:
    """One Atari game on a bare ALEInterface, stepped as ale-py's vector env steps it.

    restart(obs) begins an episode as the vector env does (restoreState of the seeded reset's
    state, or the reset itself for RELOAD_GAMES) and writes its first observation into obs
    (STACK, 84, 84); begin(obs, noops) begins one as the reference does; step(a, obs)
    plays action index a for frameskip frames and, while the episode goes on, writes the new
    observation. The episode's frames (ALE's episode frame counter: its start's FIRE and no-op
    frames included) and RAM are read after the step that ends it."""

    def __init__(self, game: str, frameskip: int = 4, frame_cap: int = 20_000, sticky: float = 0.0):
        import ale_py
        from ale_py import roms

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on stderr
        self.game, self.frameskip, self.frame_cap, self.sticky = game, frameskip, frame_cap, float(sticky)
        with warnings.catch_warnings():  # (an unknown game warns, then gives None)
            warnings.simplefilter("ignore")
            self.rom = roms.get_rom_path(game)
        if self.rom is None:
            raise ValueError(f"ale-py has no Atari game {game!r}")
        self.ale = ale_py.ALEInterface()
        self.ale.setFloat("repeat_action_probability", 0.0)
        self.ale.setInt("random_seed", 0)
        self.ale.loadROM(self.rom)
        self.actions = list(self.ale.getMinimalActionSet())
        self.fire = ale_py.Action.FIRE in self.actions  # the vector env's use_fire_reset
        self._fire_action = ale_py.Action.FIRE
        self.reload = game in RELOAD_GAMES
        screen = (self.ale.getScreenDims()[0], self.ale.getScreenDims()[1])  # (height, width)
        self.resize = area_resize(screen)
        self.raw = np.zeros((2, *screen), np.uint8)  # the last two frames (index 1: the one before)
        self.rows, self.acc = self.resize.scratch()
        self.elapsed = 0  # frames since the episode's start (the vector env's elapsed_steps)
        # the reference's start: the seeded reset's state, before any FIRE, and its screen
        self.ale.reset_game()
        self.reset_state = self.ale.cloneState()
        self.reset_screen = self.ale.getScreenGrayscale()  # (height, width) uint8
        self.reference_fire = len(self.actions) > 2 and self.actions[1] == ale_py.Action.FIRE
        self.start_obs = np.zeros((STACK, *self.resize.out), np.uint8)
        self.reset(self.start_obs)
        self.start = self.ale.cloneState()
        # Each raw frame of an episode goes through _act: ALE's act, or with sticky actions the
        # draw that may repeat the previous frame's action (ALE's own stickiness stays off: its
        # generator and its previous action are not in a state nevo restores)
        self._act = self._sticky_act if self.sticky else self.ale.act
        self._draws, self._u, self._at = None, [], 0
        self._last = self.actions[0]  # the action the last raw frame played

    def reset(self, obs: np.ndarray, seed: int | None = 0) -> None:
        """The vector env's reset, its observation into obs: the screen, maxed with a zero frame,
        in an otherwise zero stack. With a seed: random_seed, reload, reset_game, FIRE (slow: the
        reload; restart() begins an episode from the seed-0 reset's saved state); None: only
        reset_game and FIRE (the vector env's autoreset, which depends on what ran before)."""
        if seed is not None:
            self.ale.setInt("random_seed", int(seed))
            self.ale.loadROM(self.rom)
        self.ale.reset_game()
        if self.fire:
            self.ale.act(self._fire_action)
        self.elapsed = 0
        obs[:] = 0
        self.ale.getScreenGrayscale(self.raw[0])
        self.raw[1] = 0
        self._push(obs)

    def _push(self, obs: np.ndarray) -> None:
        r = self.resize
        push_frame(obs, self.raw, r.xi, r.xw, r.yd, r.ys, r.ya, self.rows, self.acc)

    def restart(self, obs: np.ndarray) -> None:
        """Begin a new episode, as a seeded reset would; its first observation into obs."""
        if self.reload:
            self.reset(obs)
            return
        self.ale.restoreState(self.start)
        self.elapsed = 0
        obs[:] = self.start_obs
        self.raw[1] = 0  # (as the reset leaves it: with frameskip 1 it is never written again)

    def begin(self, obs: np.ndarray, noops: int, seed: int | None = None) -> None:
        """Begin a new episode the reference's way (the module's docstring) with `noops` no-op
        frames; its first observation into obs. Its rewards are not the episode's (the
        reference's reset returns none), and the frame cap counts from its end. seed: the
        episode's, which draws its sticky actions (needed where they are on)."""
        noop = self.actions[0]  # (index 0 of every minimal action set is NOOP)
        if self.sticky:
            if seed is None:
                raise ValueError("begin: an episode with sticky actions needs its seed")
            self._draws, self._u, self._at = self.sticky_draws(int(seed)), [], 0
        self._to_reset()
        for _ in range(noops):
            self._start_frame(noop)
        if self.reference_fire:
            for a in (self.actions[1], self.actions[2]):
                for _ in range(self.frameskip):
                    if self._start_frame(a):
                        break
        self.elapsed = 0
        obs[:] = 0
        self._push(obs)

    def _start_frame(self, action) -> bool:
        """One raw frame of the reference's start, raw[0] and raw[1] its last two screens;
        whether the game ended (then it starts again from the reset's state)."""
        ale, raw = self.ale, self.raw
        raw[1] = raw[0]
        self._act(action)
        if ale.game_over():
            self._to_reset()
            return True
        ale.getScreenGrayscale(raw[0])
        return False

    def _to_reset(self) -> None:
        """The emulator at the seeded reset's state (before any FIRE), raw[0] its screen."""
        if self.reload:
            self.ale.setInt("random_seed", 0)
            self.ale.loadROM(self.rom)
            self.ale.reset_game()
        else:
            self.ale.restoreState(self.reset_state)
        self.raw[0] = self.reset_screen
        self._last = self.actions[0]  # ALE's reset sets the previous action to NOOP

    def step(self, action: int, obs: np.ndarray) -> tuple[int, int]:
        """(reward, PLAYING / TERMINATED / TRUNCATED) of action index `action` repeated frameskip
        frames (fewer at game over or the cap); while PLAYING, the new observation into obs."""
        ale, act, act_frame = self.ale, self.actions[action], self._act
        reward = 0
        skip = self.frameskip
        while skip > 0:
            reward += act_frame(act)
            over = ale.game_over()
            self.elapsed += 1
            if over:
                return reward, TERMINATED
            if self.elapsed >= self.frame_cap:
                return reward, TRUNCATED
            if skip <= 2:  # the last two frames, for their maximum
                ale.getScreenGrayscale(self.raw[skip - 1])
            skip -= 1
        self._push(obs)
        return reward, PLAYING

    @staticmethod
    def sticky_draws(seed: int) -> np.random.Generator:
        """The generator of the sticky-action draws of the episode with this seed: the same in
        every process that plays it, and no other stream of the run's."""
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, STICKY_STREAM])))

    def _sticky_act(self, action) -> int:
        """One raw frame with sticky actions, as ALE's StellaEnvironment::act makes it: a uniform
        draw u, and the agent's action where u >= sticky, else the previous frame's again."""
        if self._at == len(self._u):
            self._u, self._at = self._draws.random(STICKY_BLOCK).tolist(), 0
        u = self._u[self._at]
        self._at += 1
        if u >= self.sticky:
            self._last = action
        return self.ale.act(self._last)

    def episode_frames(self) -> int:
        """ALE's episode frame counter: the frames of the episode so far, its reset's FIRE included."""
        return int(self.ale.getEpisodeFrameNumber())

    def ram(self) -> np.ndarray:
        """(128,) uint8: the console's RAM now."""
        return self.ale.getRAM()

    def screen_rgb(self) -> np.ndarray:
        """(210, 160, 3) uint8: the last frame in colour (after a step that goes on, or a reset)."""
        return self.ale.getScreenRGB()
