"""A deceptive image maze, stepped for many slots at once in Numba: the Image Hard Maze of
Such et al. 2017 ("Deep Neuroevolution", arXiv 1712.06567), after the Hard Maze of Lehman and
Stanley 2011 ("Abandoning objectives: evolution through the search for novelty alone").

The agent sees a top-down 84x84 grayscale image of the whole maze (walls, floor, the goal, itself
as a 7x7 bright square), the last 4 frames stacked oldest first. Maze units are the image's
pixels: x is the column, y the row (y grows downwards, so the start at the bottom has a larger y
than the goal at the top). The position is continuous; each step moves it SPEED pixels in one of
the N_ACTIONS directions (ACTIONS), stopping flush against any wall (the agent is a box of
half-size RADIUS; walls are axis-aligned rectangles with integer corners, WALLS).

Layout (84x84, `docs/maze.png`): the start is in the hall along the bottom, the goal in the
top-left corner. A shelf (wall A) lies under the goal, and the room beneath it is open only
downwards, towards the start: walking up from the start, always closer to the goal, ends against
the shelf 27 pixels from the goal (TRAP), a dead end. The true route first goes away
from the goal (east along the bottom hall), up the east corridor, then west along the top
corridor to the goal. Every point of the route until its last ~25 pixels is further from the
goal than the trap, so a search that maximises -distance is pulled into the trap, as in the Hard
Maze.

Why these sizes (GA-NS at population 64 on 2 cores, docs/lab/2026-11-21.md): with a 3x3
agent, 1.5-pixel moves and 400 steps, a conv net's action hardly depends on where the agent is
(a few bright pixels against a fixed maze), so policies that turn at the right place were rare
and GA-NS had not reached the goal after 3M steps. A 7x7 agent moving 3 pixels a step, in
200-step episodes, with the goal in the corner where an agent walking west along the top wall
stops, gave the first seed the goal in 1M steps; the deception is unchanged.

Episodes: STEPS steps; an episode also ends when the agent comes within GOAL_RADIUS of the goal
(the Hard Maze's robot stops at the goal), and when the agent is stuck: it has not moved for
STACK steps and does not move now. Its observation then no longer changes, so a policy (a
function of the observation) repeats the action that did not move it, and it would stay there
to the last step: ending at once gives the same final position and return, without the
hundreds of steps a net pushing against a wall would otherwise cost. Frames count the steps run.
The reward is 0 on every step but the last, whose reward is -(final distance to the goal), so
an episode's return is the paper's fitness. An evaluator must therefore not cut episodes before
STEPS (frame cap >= STEPS). The maze is deterministic, as the paper's is: episode seeds are
accepted and ignored.

The state is plain arrays: per slot, the positions of its last 4 frames (the frame stack, kept as
positions and rendered on demand: 64 bytes instead of 28 KB a slot), the step count and an
ended flag. `step` does not reset ended slots: they keep their final position (`behaviour`)
until `reset`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

SIZE = 84  # the image is SIZE x SIZE pixels; maze units are pixels
STACK = 4  # frames per observation, oldest first
STEPS = 200  # an episode ends at this step (or at the goal)
SPEED = 3.0  # pixels per move; a multiple of 0.5 keeps every position exact in float64
RADIUS = 3.5  # the agent is the box [x - RADIUS, x + RADIUS] x [y - RADIUS, y + RADIUS]
GOAL_RADIUS = 3.0  # an episode ends when the agent's centre comes this close to GOAL

# Actions: (dx, dy) per step, in units of SPEED; y grows downwards (up = towards the goal's row).
ACTIONS = np.array([(0, 0), (0, -1), (0, 1), (-1, 0), (1, 0)], np.float64)  # stay, up, down, left, right
N_ACTIONS = len(ACTIONS)

START = (10.0, 74.0)  # (x, y): in the bottom hall, under the goal
GOAL = (5.5, 5.5)  # the top corridor's west end: where an agent in the top-left corner stops
TRAP = (5.5, 32.5)  # where always stepping closer to the goal from START stops: under the shelf, west end
TRAP_BOX = (2.0, 29.0, 59.0, 45.0)  # (x0, y0, x1, y1): the top of the dead-end room under the shelf

# Walls: (x0, y0, x1, y1) rectangles, half-open pixel ranges [x0, x1) x [y0, y1).
WALLS = np.array(
    [
        (0, 0, 84, 2),  # border: top
        (0, 82, 84, 84),  # bottom
        (0, 0, 2, 84),  # left
        (82, 0, 84, 84),  # right
        (2, 26, 62, 29),  # A: the shelf under the goal, the roof of the dead-end room
        (59, 29, 62, 62),  # B: the dead-end room's east wall, beside the east corridor
    ],
    np.float64,
)
WALLS.setflags(write=False)

FLOOR, WALL, GOAL_SHADE, AGENT = 0, 100, 180, 255  # pixel values
GOAL_HALF = 2  # the goal is drawn as a (2 * GOAL_HALF + 1)^2 square
AGENT_HALF = int(RADIUS)  # the agent is drawn as its box: a (2 * AGENT_HALF + 1)^2 square


def walls() -> np.ndarray:
    """(n, 4) float64 wall rectangles (x0, y0, x1, y1) in pixels, a copy of WALLS."""
    return WALLS.copy()


def background() -> np.ndarray:
    """(84, 84) uint8 image of the maze without the agent: floor, walls, the goal marked."""
    img = np.full((SIZE, SIZE), FLOOR, np.uint8)
    gx, gy = int(GOAL[0]), int(GOAL[1])
    img[gy - GOAL_HALF : gy + GOAL_HALF + 1, gx - GOAL_HALF : gx + GOAL_HALF + 1] = GOAL_SHADE
    for x0, y0, x1, y1 in WALLS.astype(np.int64):
        img[y0:y1, x0:x1] = WALL
    return img


def render(xy) -> np.ndarray:
    """(n, 84, 84) uint8 frames with the agent at each (x, y) of xy (n, 2): the NumPy reference."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    frames = np.repeat(background()[None], len(xy), axis=0)
    for f, (x, y) in enumerate(xy):
        px, py = int(x), int(y)
        frames[f, py - AGENT_HALF : py + AGENT_HALF + 1, px - AGENT_HALF : px + AGENT_HALF + 1] = AGENT
    return frames


def distance_to_goal(xy) -> np.ndarray:
    """(...,) Euclidean distance of (..., 2) positions to GOAL, in pixels."""
    xy = np.asarray(xy, np.float64)
    return np.sqrt((xy[..., 0] - GOAL[0]) ** 2 + (xy[..., 1] - GOAL[1]) ** 2)  # as `_step` computes it


def in_wall(xy) -> np.ndarray:
    """(...,) bool: whether the agent's box at (..., 2) positions overlaps a wall's interior."""
    xy = np.asarray(xy, np.float64)[..., None, :]  # (..., 1, 2) against (n_walls,)
    x, y, w = xy[..., 0], xy[..., 1], WALLS
    hit = (x + RADIUS > w[:, 0]) & (x - RADIUS < w[:, 2]) & (y + RADIUS > w[:, 1]) & (y - RADIUS < w[:, 3])
    return hit.any(axis=-1)


@numba.njit(nogil=True, cache=True)
def move(walls, x, y, action):
    """(x, y) after one move of SPEED in `action`'s direction, stopping flush against walls.

    Moves are axis-aligned, so the swept box is exact: the nearest wall face ahead that the box's
    other extent overlaps (strictly, so the agent slides along walls it touches) stops it."""
    dx, dy = ACTIONS[action, 0] * SPEED, ACTIONS[action, 1] * SPEED
    nx, ny = x + dx, y + dy
    for i in range(walls.shape[0]):
        x0, y0, x1, y1 = walls[i, 0], walls[i, 1], walls[i, 2], walls[i, 3]
        if dx != 0.0 and y0 < y + RADIUS and y1 > y - RADIUS:  # the wall spans the box's rows
            if dx > 0.0 and x0 >= x + RADIUS and x0 < nx + RADIUS:
                nx = x0 - RADIUS
            elif dx < 0.0 and x1 <= x - RADIUS and x1 > nx - RADIUS:
                nx = x1 + RADIUS
        if dy != 0.0 and x0 < x + RADIUS and x1 > x - RADIUS:  # the wall spans the box's columns
            if dy > 0.0 and y0 >= y + RADIUS and y0 < ny + RADIUS:
                ny = y0 - RADIUS
            elif dy < 0.0 and y1 <= y - RADIUS and y1 > ny - RADIUS:
                ny = y1 + RADIUS
    return nx, ny


def greedy_action(x: float, y: float) -> int:
    """The reward-greedy move from (x, y): the action whose next position (looked ahead with
    `move`) is nearest the goal, the first on a tie. Repeated from START it ends at TRAP."""
    ahead = [move(WALLS, x, y, a) for a in range(N_ACTIONS)]
    return int(np.argmin([math.dist(p, GOAL) for p in ahead]))


@numba.njit(nogil=True, cache=True)
def _render_stack(bg, hist, s, out, j):
    """Write slot s's frame stack (its 4 positions in hist) into out[j], flat (4 * 84 * 84,).

    speed: flat index loops over contiguous memory compile to a memcpy-speed copy; Numba's
    2-D slice assignment `out[j, f] = bg` ran ~8x slower (measured)."""
    n = SIZE * SIZE
    for f in range(STACK):
        base = f * n
        for i in range(n):
            out[j, base + i] = bg[i]
        px, py = int(hist[s, f, 0]), int(hist[s, f, 1])  # the box never reaches a wall pixel
        for r in range(py - AGENT_HALF, py + AGENT_HALF + 1):
            for c in range(px - AGENT_HALF, px + AGENT_HALF + 1):
                out[j, base + r * SIZE + c] = AGENT


@numba.njit(nogil=True, cache=True)
def _reset(bg, hist, t, ended, slots, start_x, start_y, out):
    """Put the given slots at the start and render their first observations."""
    for j in range(slots.shape[0]):
        s = slots[j]
        for f in range(STACK):
            hist[s, f, 0], hist[s, f, 1] = start_x, start_y
        t[s], ended[s] = 0, False
        _render_stack(bg, hist, s, out, j)


@numba.njit(nogil=True, cache=True)
def _step(walls, bg, hist, t, ended, slots, actions, goal_x, goal_y, stop_stuck, out, rewards, out_ended):
    """Move the given slots, shift their frame stacks and render them.

    A slot whose episode has ended stays where it is (reward 0, still ended) until reset.
    stop_stuck: end the episode of an agent that stays still with a still frame stack (see above).
    speed: one thread. The work is the render, a copy that one core runs near memory speed
    (~20 GB/s, ~700K slot-steps/s with 256 slots, measured), far more than any policy forward
    consumes; a prange loop measured slower on 2 cores shared with the forward and other jobs."""
    for j in range(slots.shape[0]):
        s = slots[j]
        rewards[j] = 0.0
        if not ended[s]:
            x, y = move(walls, hist[s, STACK - 1, 0], hist[s, STACK - 1, 1], actions[j])
            stuck = stop_stuck
            for f in range(STACK):  # all STACK frames and the new position at one place
                stuck = stuck and hist[s, f, 0] == x and hist[s, f, 1] == y
            for f in range(STACK - 1):  # the stack shifts: oldest frame out, the new one last
                hist[s, f, 0], hist[s, f, 1] = hist[s, f + 1, 0], hist[s, f + 1, 1]
            hist[s, STACK - 1, 0], hist[s, STACK - 1, 1] = x, y
            t[s] += 1
            d = np.sqrt((x - goal_x) ** 2 + (y - goal_y) ** 2)
            if t[s] >= STEPS or d < GOAL_RADIUS or stuck:
                ended[s] = True
                rewards[j] = -d
        out_ended[j] = ended[s]
        _render_stack(bg, hist, s, out, j)


class MazeSlots:
    """`slots` independent maze episodes, reset and stepped together (an InProcessEvaluator task)."""

    def __init__(self, slots: int, stop_stuck: bool = True):
        self.slots = slots
        self.stop_stuck = stop_stuck  # end a stuck agent's episode at once (same outcome, fewer steps)
        self.obs_shape = (STACK, SIZE, SIZE)  # (C, H, W)
        self.obs_dtype = np.uint8
        self._walls = np.ascontiguousarray(WALLS)
        self._bg = background().reshape(-1)  # (84 * 84,)
        self._hist = np.empty((slots, STACK, 2), np.float64)  # (slot, frame, xy): the frame stacks
        self._hist[:] = START
        self._t = np.zeros(slots, np.int64)  # steps taken in the current episode
        self._ended = np.zeros(slots, np.bool_)

    def reset(self, slots, seeds) -> np.ndarray:
        """(k, 4, 84, 84) uint8 first observations of new episodes; seeds are ignored (deterministic)."""
        slots = self._slots(slots)
        if len(np.asarray(seeds)) != len(slots):
            raise ValueError(f"reset: {len(slots)} slots but {len(np.asarray(seeds))} seeds")
        out = np.empty((len(slots), *self.obs_shape), np.uint8)
        flat = out.reshape(len(slots), -1)  # (k, 4 * 84 * 84): the kernels write flat frames
        _reset(self._bg, self._hist, self._t, self._ended, slots, START[0], START[1], flat)
        return out

    def step(self, slots, actions):
        """(obs (k, 4, 84, 84) uint8, rewards (k,) float64, ended (k,) bool) after one move each."""
        slots = self._slots(slots)
        actions = np.ascontiguousarray(actions, np.int64)
        if actions.shape != slots.shape:
            raise ValueError(f"step: {len(slots)} slots but actions of shape {actions.shape}")
        if actions.size and (actions.min() < 0 or actions.max() >= N_ACTIONS):
            raise ValueError(f"step: actions must be in [0, {N_ACTIONS}), got {actions}")
        k = len(slots)
        out = np.empty((k, *self.obs_shape), np.uint8)
        rewards, ended = np.empty(k, np.float64), np.empty(k, np.bool_)
        flat = out.reshape(k, -1)  # (k, 4 * 84 * 84): the kernels write flat frames
        args = (
            self._walls,
            self._bg,
            self._hist,
            self._t,
            self._ended,
            slots,
            actions,
            *GOAL,
            self.stop_stuck,
        )
        _step(*args, flat, rewards, ended)
        return out, rewards, ended

    def behaviour(self, slots) -> np.ndarray:
        """(k, 2) float32 current (x, y) of these slots over the image size, in [0, 1]."""
        return (self._hist[self._slots(slots), STACK - 1] / SIZE).astype(np.float32)

    def positions(self, slots) -> np.ndarray:
        """(k, 2) float64 current (x, y) of these slots, in pixels."""
        return self._hist[self._slots(slots), STACK - 1].copy()

    def close(self) -> None:
        pass

    def _slots(self, slots) -> np.ndarray:
        slots = np.ascontiguousarray(slots, np.int64).reshape(-1)
        if slots.size and (slots.min() < 0 or slots.max() >= self.slots):
            raise ValueError(f"slots must be in [0, {self.slots}), got {slots}")
        return slots


def plot_positions(ax, xy=None, *, normalised=False, color="tab:red", size=8, label=None, image=False):
    """Draw the maze (walls, start, goal, trap) on a matplotlib Axes, and points at xy (n, 2).

    xy in pixels, or in [0, 1] (`behaviour`'s units) with normalised=True. image=True shows the
    agent's view (`background()`) instead of wall outlines. The y axis points down, as in the image."""
    from matplotlib.patches import Rectangle

    if image:
        ax.imshow(background(), cmap="gray", vmin=0, vmax=255, extent=(0, SIZE, SIZE, 0))
    else:
        for x0, y0, x1, y1 in WALLS:
            ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, color="0.35", lw=0))
    ax.plot(*START, "o", color="tab:blue", ms=7, label="start")
    ax.plot(*GOAL, "*", color="gold", mec="k", ms=13, label="goal")
    ax.plot(*TRAP, "x", color="tab:orange", ms=8, mew=2, label="trap")
    if xy is not None:
        xy = np.asarray(xy, np.float64).reshape(-1, 2) * (SIZE if normalised else 1.0)
        ax.scatter(xy[:, 0], xy[:, 1], s=size, color=color, alpha=0.7, label=label, zorder=3)
    ax.set_xlim(0, SIZE)
    ax.set_ylim(SIZE, 0)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    return ax
