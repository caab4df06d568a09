"""The deceptive Humanoid trap of Conti et al. 2018 (arXiv 1712.06560): Humanoid-v5 facing a
U-shaped wall.

The humanoid starts at the origin facing +x, and the reward is Humanoid-v5's own (forward
velocity, a bonus for staying up, control and contact costs). Walking straight ahead leads into
a cup of three walls, so the reward's gradient points into a dead end; a walker that scores more
must first go sideways, which the reward does not pay for. The behaviour of novelty search is the
final (x, y) of the body's centre of mass.

The walls, as Uber's code for the paper places them (boxes 4 m tall): a front wall across x =
5.5 from y = -1.5 to 1.5, and two side walls along y = +-1.5 from x = 2.5 to 5.5, so the cup
opens toward the start. The model is gymnasium's humanoid.xml with these three boxes added,
written once to a temporary file named by its digest (MuJoCo loads models from paths).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile

import numpy as np

ENV_ID = "HumanoidTrap-v5"
# (name, centre (x, y), half sizes (x, y)); every wall is 2 m half-height, standing on the floor
WALLS = (
    ("trap_front", (5.5, 0.0), (0.1, 1.5)),
    ("trap_left", (4.0, 1.5), (1.5, 0.1)),
    ("trap_right", (4.0, -1.5), (1.5, 0.1)),
)
HALF_HEIGHT = 2.0


@functools.cache
def xml_path() -> str:
    """A humanoid model with the trap's walls: gymnasium's humanoid.xml plus three boxes, in the
    temporary folder under a name that is a digest of its text (written once, atomically, and
    shared by every process that needs the same model)."""
    import gymnasium

    src = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", "humanoid.xml")
    with open(src) as f:
        xml = f.read()
    boxes = "".join(
        f'\n        <geom name="{name}" type="box" pos="{x} {y} {HALF_HEIGHT}" '
        f'size="{hx} {hy} {HALF_HEIGHT}" rgba="0.6 0.3 0.3 1" condim="3"/>'
        for name, (x, y), (hx, hy) in WALLS
    )
    marker = "<worldbody>"
    if xml.count(marker) != 1:
        raise RuntimeError(f"{src}: expected one {marker}; gymnasium's humanoid model has changed")
    text = xml.replace(marker, marker + boxes)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"nevo_humanoid_trap_{digest}.xml")
    if not os.path.isfile(path):
        fd, tmp = tempfile.mkstemp(prefix="nevo_humanoid_trap_", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def make(**kwargs):
    """Humanoid-v5 in the trap (gymnasium's entry point for ENV_ID)."""
    from gymnasium.envs.mujoco.humanoid_v5 import HumanoidEnv

    return HumanoidEnv(xml_file=xml_path(), **kwargs)


def register() -> None:
    """Make ENV_ID known to gymnasium (gymnasium.make, --env HumanoidTrap-v5); once per process."""
    import gymnasium as gym

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=make, max_episode_steps=1000)


def in_cup(xy) -> np.ndarray:
    """(k,) bool: final positions inside the cup (between the side walls, short of the front)."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    return (xy[:, 0] > 2.5) & (xy[:, 0] < 5.5) & (np.abs(xy[:, 1]) < 1.5)


def plot_walls(ax, **style) -> None:
    """The three walls, seen from above, on a matplotlib axes."""
    from matplotlib.patches import Rectangle

    for _, (x, y), (hx, hy) in WALLS:
        ax.add_patch(Rectangle((x - hx, y - hy), 2 * hx, 2 * hy, **{"color": "0.3", **style}))
