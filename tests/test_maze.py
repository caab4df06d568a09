"""The deceptive image maze: the trap, walls, observations, rewards, batch independence, the evaluator."""

import numpy as np

from nevo import nets
from nevo.episodes import Episodes, Population
from nevo.evaluation.in_process import InProcessEvaluator
from nevo.nets.kernels import make_policy
from nevo.tasks import maze
from nevo.tasks.maze import GOAL_RADIUS, N_ACTIONS, SPEED, START, STEPS, TRAP, TRAP_BOX, WALLS, MazeSlots
from tests.helpers import host_weights


def play(policy, slots=1, stop_stuck=True):
    """Play one episode in slot 0 of a fresh task; policy(x, y) -> action. (positions, rewards)."""
    task = MazeSlots(slots, stop_stuck)
    task.reset([0], [0])
    xy, rewards = [task.positions([0])[0]], []
    while True:
        _, r, ended = task.step([0], [policy(*xy[-1])])
        xy.append(task.positions([0])[0])
        rewards.append(r[0])
        if ended[0]:
            return np.array(xy), np.array(rewards)


def route(waypoints):
    """A policy walking to each waypoint in turn, x first then y."""
    todo = list(waypoints)

    def policy(x, y):
        while todo:
            tx, ty = todo[0]
            if abs(x - tx) >= SPEED:
                return 4 if tx > x else 3  # right, left
            if abs(y - ty) >= SPEED:
                return 2 if ty > y else 1  # down, up
            todo.pop(0)
        return 0

    return policy


TRUE_ROUTE = [(73.0, 74.0), (73.0, 15.5), maze.GOAL]  # east, north up the east corridor, west along the top


def test_reward_greedy_policy_ends_in_the_dead_end():
    """Always stepping closer to the goal ends in the trap: nearer than the start, not at the goal."""
    xy, rewards = play(maze.greedy_action, stop_stuck=False)
    x, y = xy[-1]
    d = maze.distance_to_goal(xy[-1])
    assert len(rewards) == STEPS
    # stuck under the shelf: the episode ends early, with the same outcome
    early, early_rewards = play(maze.greedy_action)
    np.testing.assert_array_equal(early[-1], xy[-1])
    assert early_rewards[-1] == rewards[-1] and len(early_rewards) < STEPS / 4
    assert TRAP_BOX[0] <= x <= TRAP_BOX[2] and TRAP_BOX[1] <= y <= TRAP_BOX[3]
    np.testing.assert_array_equal(xy[-1], TRAP)
    assert GOAL_RADIUS < d < maze.distance_to_goal(START)


def test_true_route_first_leads_away_then_reaches_the_goal():
    """The scripted true route reaches the goal, and is further from it than the trap almost all the way."""
    xy, rewards = play(route(TRUE_ROUTE))
    d = maze.distance_to_goal(xy)
    assert d[-1] < GOAL_RADIUS and len(rewards) < STEPS  # ended early, at the goal
    assert rewards.sum() == -d[-1]
    assert d[20] > d[0]  # the route starts by going away from the goal
    first_better = np.argmax(d < maze.distance_to_goal(TRAP))
    assert first_better > 0.8 * len(d)  # it beats the trap's fitness only in its last stretch


def test_random_actions_never_put_the_agent_inside_a_wall():
    """64 agents holding random moves for random spans never overlap a wall, though they hit walls."""
    k, rng = 64, np.random.default_rng(0)
    task = MazeSlots(k, stop_stuck=False)  # keep every agent moving to the last step
    slots = np.arange(k)
    task.reset(slots, slots)
    actions, blocked = rng.integers(0, N_ACTIONS, k), 0
    for _ in range(STEPS - 1):
        change = rng.random(k) < 0.1
        actions[change] = rng.integers(0, N_ACTIONS, change.sum())
        before = task.positions(slots)
        task.step(slots, actions)
        after = task.positions(slots)
        assert not maze.in_wall(after).any()
        moved = np.abs(after - before).sum(axis=1)
        blocked += ((actions != 0) & (moved < SPEED)).sum()
        assert (moved <= SPEED).all()
    assert blocked > 100  # the agents did push against walls
    assert maze.in_wall([(60.0, 40.0), (35.0, 27.0)]).all()  # the check itself sees walls (B, the shelf)


def test_observations_show_the_agent_and_stack_frames():
    """Frames are uint8 (4, 84, 84), equal the NumPy rendering, show the agent, and shift as it moves."""
    task = MazeSlots(2)
    obs = task.reset([1], [123])
    assert obs.shape == (1, 4, 84, 84) and obs.dtype == np.uint8
    assert (task.obs_shape, task.obs_dtype) == ((4, 84, 84), np.uint8)
    np.testing.assert_array_equal(obs[0], maze.render([START] * 4))  # reset: 4 copies of frame 1
    x, y = (int(v) for v in START)
    assert obs[0, -1, y, x] == maze.AGENT and maze.background()[y, x] == maze.FLOOR
    assert obs[0, -1, int(maze.GOAL[1]), int(maze.GOAL[0])] == maze.GOAL_SHADE  # the goal is marked
    xy = [START] * 4
    for a in (4, 4, 1, 1, 3):  # right, right, up, up, left
        new, _, _ = task.step([1], [a])
        xy.append(tuple(task.positions([1])[0]))
        assert not np.array_equal(new[0, -1], new[0, -2])  # the agent moved, so the last frame changed
        np.testing.assert_array_equal(new[0, :3], obs[0, 1:])  # the stack shifted by one frame
        np.testing.assert_array_equal(new[0], maze.render(xy[-4:]))
        obs = new
    assert np.array_equal(task.behaviour([1]), np.float32([xy[-1]]) / np.float32(84))


def test_return_is_minus_final_distance_and_episodes_end_at_the_step_limit():
    """Rewards are 0 but the last, the return is -final distance, `ended` first at STEPS, then sticky."""
    k, rng = 8, np.random.default_rng(1)
    task = MazeSlots(k, stop_stuck=False)  # random actions are no policy of the observation
    slots = np.arange(k)
    task.reset(slots, np.zeros(k))
    total = np.zeros(k)
    for t in range(1, STEPS + 1):
        _, r, ended = task.step(slots, rng.integers(0, N_ACTIONS, k))
        total += r
        assert ended.all() == (t == STEPS) and ended.any() == (t == STEPS)
        assert (r == 0).all() or t == STEPS
    final = task.positions(slots)
    np.testing.assert_array_equal(total, -maze.distance_to_goal(final))
    obs, r, ended = task.step(slots, np.full(k, 4))  # ended slots stay put until reset
    assert ended.all() and (r == 0).all()
    np.testing.assert_array_equal(task.positions(slots), final)
    np.testing.assert_allclose(task.behaviour(slots), final / 84, atol=1e-7)
    assert task.behaviour(slots).dtype == np.float32 and task.behaviour(slots).shape == (k, 2)


def test_stepping_slots_together_equals_stepping_each_alone_and_is_deterministic():
    """A slot's episode depends only on its actions: not on its neighbours, its index, or the run."""
    k, n, rng = 5, 150, np.random.default_rng(2)
    actions = rng.integers(0, N_ACTIONS, (n, k))
    actions[:, 0] = 4  # one agent walks right into the east wall

    def together():
        task = MazeSlots(k + 2)
        slots = np.array([6, 0, 3, 1, 5])  # any slot indices, out of order
        out = [task.reset(slots, np.arange(k))]
        for t in range(n):
            out.extend(task.step(slots, actions[t]))
        return out

    a, b = together(), together()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for j in range(k):
        task = MazeSlots(1)
        np.testing.assert_array_equal(task.reset([0], [j]), a[0][j : j + 1])
        for t in range(n):
            for x, y in zip(task.step([0], actions[t, j : j + 1]), a[1 + 3 * t : 4 + 3 * t]):
                np.testing.assert_array_equal(x, y[j : j + 1])


def test_the_sync_evaluator_plays_maze_episodes_with_a_conv_net():
    """The InProcessEvaluator runs the maze with the small net, reusing slots: each return is -distance
    of the episode's final position, which it reads as the behaviour before the slot is reset."""
    spec = nets.net_spec("small", (4, 84, 84), N_ACTIONS)
    rng = np.random.default_rng(3)
    weights = (rng.standard_normal((3, spec.n_params)) * nets.init_scale(spec) * 3).astype(np.float32)
    ev = InProcessEvaluator(MazeSlots(slots=2), make_policy("cpu", spec), host_weights(spec.n_params), 10_000)
    try:
        res = ev.run(Population.of_weights(weights), Episodes(np.array([0, 1, 2, 0]), np.array([5, 6, 7, 8])))
    finally:
        ev.close()
    assert (res.lengths <= STEPS).all()
    assert res.behaviours.shape == (4, 2) and res.behaviours.dtype == np.float32
    assert ((res.behaviours >= 0) & (res.behaviours <= 1)).all()
    np.testing.assert_allclose(res.returns, -maze.distance_to_goal(res.behaviours * 84.0), atol=1e-4)
    assert res.returns[0] == res.returns[3]  # the maze is deterministic: the seed changes nothing


def test_plot_positions_draws_the_maze_and_points():
    """plot_positions draws walls and the given behaviours on an Axes (no exceptions, points present)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    maze.plot_positions(ax, np.array([[0.5, 0.5], [0.1, 0.9]]), normalised=True)
    assert len(ax.patches) == len(WALLS) and len(ax.collections) == 1
    plt.close(fig)


def test_ending_a_stuck_agents_episode_changes_no_outcome():
    """With a net choosing from the observation, episodes cut when the agent is stuck end with
    the same returns and final positions as episodes run to the last step, in fewer steps."""
    spec = nets.net_spec("small", (4, 84, 84), N_ACTIONS)
    rng = np.random.default_rng(4)
    weights = (rng.standard_normal((6, spec.n_params)) * nets.init_scale(spec) * 3).astype(np.float32)
    episodes = Episodes(np.arange(6), np.arange(6))
    out = []
    for stop in (True, False):
        slots = MazeSlots(slots=6, stop_stuck=stop)
        ev = InProcessEvaluator(slots, make_policy("cpu", spec), host_weights(spec.n_params), 10_000)
        try:
            out.append(ev.run(Population.of_weights(weights), episodes))
        finally:
            ev.close()
    cut, full = out
    np.testing.assert_array_equal(cut.returns, full.returns)
    np.testing.assert_array_equal(cut.behaviours, full.behaviours)
    assert (full.lengths == STEPS).any() and cut.lengths.sum() < full.lengths.sum()
