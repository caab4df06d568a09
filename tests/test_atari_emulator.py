"""nevo's Atari emulator: step for step, bit for bit ale-py's vector env, and its resize OpenCV's."""

import numpy as np
import pytest

from nevo.config import EnvConfig
from nevo.tasks.atari_emulator import (
    PLAYING,
    RELOAD_GAMES,
    TERMINATED,
    TRUNCATED,
    AtariEmulator,
    area_resize,
    area_table,
    resize_area,
)
from nevo.tasks.envs import make_atari

# Table 1 of Such et al. 2017 (the Deep GA), then the games nevo's tests and benchmarks use.
GAMES = ("amidar", "assault", "asterix", "asteroids", "atlantis", "enduro", "frostbite", "gravitar",
         "kangaroo", "seaquest", "skiing", "venture", "zaxxon", "pong", "space_invaders")  # fmt: skip


def resize_reference(src: np.ndarray, oh: int, ow: int) -> np.ndarray:
    """OpenCV 4.10's INTER_AREA resize of a one-channel uint8 image as its ResizeArea_Invoker
    writes it: term by term of the two tables, a row buffer and a sum per output row, float32."""
    h, w = src.shape
    xd, xs, xa = area_table(w, ow)
    yd, ys, ya = area_table(h, oh)
    dst = np.zeros((oh, ow), np.uint8)
    total = np.zeros(ow, np.float32)
    prev = yd[0]

    def store(row):
        dst[row] = np.clip(np.rint(total), 0, 255).astype(np.uint8)

    for beta, dy, sy in zip(ya, yd, ys):
        buf = np.zeros(ow, np.float32)
        for d, s, alpha in zip(xd, xs, xa):
            buf[d] = np.float32(buf[d] + np.float32(src[sy, s]) * alpha)
        if dy != prev:
            store(prev)
            total = (beta * buf).astype(np.float32)
            prev = dy
        else:
            total = (total + beta * buf).astype(np.float32)
    store(prev)
    return dst


def test_the_area_tables_are_opencvs():
    """The weights of each output pixel sum to 1 and cover its cell: 210 rows to 84 (2.5 each)
    and 160 columns to 84; the first cells' weights are OpenCV's (1/cell, then the partial ones)."""
    for src, dst in ((210, 84), (160, 84), (250, 84)):
        d, s, a = area_table(src, dst)
        sums = np.bincount(d, weights=a.astype(np.float64), minlength=dst)
        np.testing.assert_allclose(sums, 1.0, rtol=1e-6)
        assert s.min() == 0 and s.max() == src - 1 and (np.diff(d) >= 0).all()
    d, s, a = area_table(210, 84)
    assert list(s[:4]) == [0, 1, 2, 2] and a[0] == np.float32(1 / 2.5) and a[2] == np.float32(0.5 / 2.5)


@pytest.mark.parametrize("shape", [(210, 160), (250, 160)])
def test_the_fast_resize_is_the_reference_bit_for_bit(shape):
    """resize_area (rows resized once, padded runs) gives the plain term-by-term loop's bytes on
    random images, a flat one and one of extremes (where rounding and clamping show)."""
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(3)]
    images += [np.full(shape, 255, np.uint8), (rng.random(shape) < 0.5).astype(np.uint8) * 255]
    r = area_resize(shape)
    rows, acc = r.scratch()
    for img in images:
        got = np.zeros((84, 84), np.uint8)
        resize_area(img, got, r.xi, r.xw, r.yd, r.ys, r.ya, rows, acc)
        np.testing.assert_array_equal(got, resize_reference(img, 84, 84))


def play_both(game: str, episodes: int, steps: int, frame_cap: int = 20_000, seed: int = 0) -> int:
    """Random actions on ale-py's vector env (a seeded reset for each episode) and on an
    AtariEmulator (each episode restarted from the saved state): asserts every observation,
    reward and end agree, and each episode's frames; returns the steps compared."""
    cfg = EnvConfig(game=game, frame_cap=frame_cap)
    env = make_atari(cfg, 1, 1)
    em = AtariEmulator(game, cfg.frameskip, frame_cap)
    rng = np.random.default_rng(seed)
    obs = np.zeros((4, 84, 84), np.uint8)
    compared = 0
    try:
        for e in range(episodes):
            o, info = env.reset(seed=np.zeros(1, np.int64))
            # the vector env's frame counters after the reset (the pipeline counted frames so)
            start_total, start_episode = int(info["frame_number"][0]), int(info["episode_frame_number"][0])
            em.restart(obs)
            np.testing.assert_array_equal(o[0], obs, err_msg=f"{game}: episode {e}'s first observation")
            for t in range(steps):
                a = int(rng.integers(len(em.actions)))
                o, r, term, trunc, info = env.step(np.array([a]))
                reward, done = em.step(a, obs)
                compared += 1
                assert (r[0], bool(term[0]), bool(trunc[0])) == (
                    reward,
                    done == TERMINATED,
                    done == TRUNCATED,
                )
                if done != PLAYING:  # the vector env has reset itself: its counters before that
                    end = int(info["frame_number"][0]) - int(info["episode_frame_number"][0])
                    assert em.episode_frames() == end - start_total + start_episode
                    break
                np.testing.assert_array_equal(o[0], obs, err_msg=f"{game}: episode {e}, step {t}")
    finally:
        env.close()
    return compared


@pytest.mark.parametrize("game", ["frostbite", "pong"])
def test_steps_are_the_vector_envs_bit_for_bit(game):
    """Observations, rewards and ends of three episodes equal the vector env's, every step."""
    assert play_both(game, episodes=3, steps=150) > 300


def test_the_frame_cap_truncates_as_the_vector_env_does():
    """With a cap of 200 frames an episode is truncated at the same step, with the same frames."""
    assert play_both("frostbite", episodes=2, steps=100, frame_cap=200) == 100


@pytest.mark.slow
@pytest.mark.parametrize("game", GAMES)
def test_every_game_of_the_papers_steps_as_the_vector_env(game):
    """The Deep GA's 13 games, Pong and Space Invaders: 3 episodes of up to 400 steps each."""
    assert game not in RELOAD_GAMES
    assert play_both(game, episodes=3, steps=400) > 400


def test_the_vector_envs_reset_with_any_seed_and_its_autoreset():
    """reset(obs, seed) is the vector env's seeded reset, reset(obs, None) its unseeded one."""
    cfg = EnvConfig(game="frostbite", frame_cap=20_000)
    env = make_atari(cfg, 1, 1)
    em = AtariEmulator("frostbite")
    obs = np.zeros((4, 84, 84), np.uint8)
    try:
        for seed in (3, 11):
            o, _ = env.reset(seed=np.array([seed], np.int64))
            em.reset(obs, seed)
            np.testing.assert_array_equal(o[0], obs)
            for a in (1, 2, 3, 4, 5):
                o, *_ = env.step(np.array([a]))
                em.step(a, obs)
                np.testing.assert_array_equal(o[0], obs)
        o, _ = env.reset()
        em.reset(obs, None)
        np.testing.assert_array_equal(o[0], obs)
    finally:
        env.close()
