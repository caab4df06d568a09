"""The maze's picture: what the agent sees, and the layout with the reward-greedy walk and the true route.

python -m experiments.maze_figure              # writes docs/maze.png
python -m experiments.maze_figure --out /tmp/maze.png
"""

from __future__ import annotations

import argparse

import numpy as np

from nevo.tasks import maze

TRUE_ROUTE = [maze.START, (73.0, 74.0), (73.0, 15.5), (maze.GOAL[0], 15.5), maze.GOAL]  # east, north, west


def greedy_walk() -> np.ndarray:
    """(n, 2) positions of always taking the move that ends nearest the goal, from the start until
    the agent no longer moves: the dead end a reward-maximising search is drawn into."""
    xy = [maze.START]
    for _ in range(maze.STEPS):
        x, y = xy[-1]
        nxt = maze.move(maze.WALLS, x, y, maze.greedy_action(x, y))
        if nxt == (x, y):
            break
        xy.append(nxt)
    return np.array(xy)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="docs/maze.png")
    a = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (view, lay) = plt.subplots(1, 2, figsize=(9, 4.8))
    view.imshow(maze.render([maze.START])[0], cmap="gray", vmin=0, vmax=255)
    view.set_title("what the agent sees (1 of 4 frames)")
    view.set_xticks([])
    view.set_yticks([])
    maze.plot_positions(lay)
    walk = greedy_walk()
    lay.plot(walk[:, 0], walk[:, 1], color="tab:orange", lw=2, label="reward-greedy: trapped")
    route = np.array(TRUE_ROUTE)
    lay.plot(route[:, 0], route[:, 1], "--", color="tab:green", lw=2, label="true route")
    lay.set_title(f"layout (goal {maze.distance_to_goal(maze.TRAP):.0f} px from the trap)")
    lay.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(a.out, dpi=100, bbox_inches="tight")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
