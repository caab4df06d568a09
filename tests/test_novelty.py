"""Novelty search core: k-nearest-neighbour novelty, the archive, NS-ES selection, NSR(A)-ES weights."""

import numba
import numpy as np
import pytest

from nevo.algos.novelty import (
    Archive,
    NSRAWeight,
    knn_novelty,
    knn_novelty_reference,
    mix_ranks,
    pick_agent,
    sample_for_archive,
)
from nevo.algos.ranking import centered_ranks
from nevo.config import NoveltyConfig

NSRA_DELTA = NoveltyConfig().nsra_delta  # Conti et al.: 0.05


def positions(n, seed):
    """(n, 2) float32 maze-like final positions."""
    return (np.random.default_rng(seed).random((n, 2)) * 100).astype(np.float32)


def ram(n, seed):
    """(n, 128) uint8 Atari-RAM-like behaviours."""
    return np.random.default_rng(seed).integers(0, 256, (n, 128), dtype=np.uint8)


def test_an_archive_member_counts_a_distance_of_0_to_itself():
    archive = np.array([[0, 0], [3, 4], [6, 8], [0, 1], [20, 0]], np.float32)
    for dtype in (np.float32, np.uint8):
        a = archive.astype(dtype)
        assert knn_novelty(a[:1], a, k=1)[0] == 0.0
        assert knn_novelty(a[:1], a, k=3)[0] == pytest.approx((0 + 1 + 5) / 3)  # itself, [0, 1], [3, 4]
        # exclude_self drops its own 0: the nearest others are [0, 1], [3, 4], [6, 8]
        assert knn_novelty(a[:1], a, k=3, exclude_self=True)[0] == pytest.approx((1 + 5 + 10) / 3)
    rows = ram(40, 0)
    assert np.array_equal(knn_novelty(rows, rows, k=1), np.zeros(40))


@pytest.mark.parametrize("kind", ["positions", "ram"])
def test_knn_novelty_matches_the_numpy_reference(kind):
    make = positions if kind == "positions" else ram
    archive = make(300, 1)
    queries = np.concatenate([make(37, 2), archive[:6]])  # 43 queries: 2 full tiles and a part; 6 members
    for n in (300, 5):  # n < k: the mean is over all of them
        for k in (1, 10):
            for exclude_self in (False, True):
                got = knn_novelty(queries, archive[:n], k, exclude_self)
                want = knn_novelty_reference(queries, archive[:n], k, exclude_self)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=0, err_msg=f"n={n} k={k}")


def test_the_result_does_not_depend_on_the_thread_count():
    archive, queries = ram(500, 3), ram(70, 4)
    many = knn_novelty(queries, archive, 10)
    default = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = knn_novelty(queries, archive, 10)
    finally:
        numba.set_num_threads(default)
    assert np.array_equal(one, many)


def test_knn_novelty_rejects_mixed_dtypes_and_an_empty_reference_set():
    with pytest.raises(ValueError, match="dtype|queries are"):
        knn_novelty(ram(2, 0).astype(np.float32), ram(5, 1), 10)
    with pytest.raises(ValueError, match="empty"):
        knn_novelty(ram(2, 0), ram(0, 1), 10)


def test_the_archive_keeps_append_order_and_round_trips_its_state():
    arch = Archive(128, np.uint8, capacity=4)
    rows = ram(1000, 5)
    sizes = np.random.default_rng(6).integers(1, 40, 100)
    at = 0
    for s in sizes:
        if at + s >= len(rows):
            break
        arch.add(rows[at : at + s] if s > 1 else rows[at])  # (m, d) or one (d,) behaviour
        at += s
    assert len(arch) == at and arch.data.dtype == np.uint8
    assert np.array_equal(arch.data, rows[:at])

    st = arch.state()
    back = Archive(128, np.uint8)
    back.load_state(st)
    assert np.array_equal(back.data, arch.data) and back.data.dtype == np.uint8
    back.add(rows[at])  # appends go on after a resume; the saved state is a copy
    assert np.array_equal(back.data, rows[: at + 1]) and len(st["archive"]) == at
    with pytest.raises(ValueError):
        back.add(positions(1, 0))  # float behaviours do not fit a uint8 archive


def test_archive_appends_are_amortised_by_doubling_the_capacity():
    arch = Archive(2, np.float32, capacity=1)
    buffers = set()
    for i in range(20_000):
        arch.add(np.array([i, -i], np.float32))
        buffers.add(id(arch._buf))
    assert len(arch) == 20_000 and np.array_equal(arch.data[:, 0], np.arange(20_000, dtype=np.float32))
    assert len(buffers) <= 16  # log2(20,000) + 1 reallocations, not one per append


def test_sample_for_archive_takes_each_individual_with_probability_p():
    rng = np.random.default_rng(7)
    idx = sample_for_archive(100_000, 0.01, rng)
    assert 850 < idx.size < 1150 and np.all(np.diff(idx) > 0) and idx.max() < 100_000
    assert sample_for_archive(10, 0.0, rng).size == 0 and sample_for_archive(10, 1.0, rng).size == 10


def test_pick_agent_follows_novelty_proportions_and_never_picks_a_zero_novelty_agent():
    rng = np.random.default_rng(8)
    novelty = np.array([1.0, 2.0, 0.0, 5.0])
    counts = np.bincount([pick_agent(novelty, rng) for _ in range(20_000)], minlength=4) / 20_000
    np.testing.assert_allclose(counts, novelty / novelty.sum(), atol=0.01)
    assert counts[2] == 0.0
    uniform = np.bincount([pick_agent(np.zeros(4), rng) for _ in range(20_000)], minlength=4) / 20_000
    np.testing.assert_allclose(uniform, 0.25, atol=0.015)


def test_nsra_weight_moves_toward_novelty_when_reward_stalls_and_back_when_it_improves():
    nsra = NSRAWeight(1.0, NSRA_DELTA, patience=10)
    assert nsra.update(5.0) == 1.0  # a first best: w stays at its cap
    for _ in range(9):
        assert nsra.update(5.0) == 1.0  # 9 stalled generations: not yet
    assert nsra.update(float("nan")) == pytest.approx(1.0 - NSRA_DELTA)  # the 10th (NaN never improves)
    ws = [nsra.update(4.0) for _ in range(400)]  # stalled for good: down every 10 generations, to 0
    assert ws[9] == pytest.approx(1.0 - 2 * NSRA_DELTA) and ws[-1] == 0.0 and min(ws) == 0.0
    assert nsra.update(6.0) == pytest.approx(NSRA_DELTA)  # a new best reward: back toward reward
    assert nsra.update(7.0) == pytest.approx(2 * NSRA_DELTA)
    st = nsra.state()
    again = NSRAWeight(1.0, NSRA_DELTA, 10)
    again.load_state(st)
    assert (again.w, again.best, again.stalled) == (nsra.w, nsra.best, nsra.stalled)
    for score in range(100):  # improving for good: capped at 1
        w = again.update(10.0 + score)
    assert w == 1.0


def test_mix_ranks_with_w_1_is_the_reward_ranks_and_with_w_0_the_novelty_ranks():
    rng = np.random.default_rng(9)
    reward, novelty = rng.normal(size=101), rng.random(101)
    assert np.array_equal(mix_ranks(reward, novelty, 1.0), centered_ranks(reward))
    assert np.array_equal(mix_ranks(reward, novelty, 0.0), centered_ranks(novelty))
    half = mix_ranks(reward, novelty, 0.5)  # NSR-ES: the mean of the two
    assert half.dtype == np.float32
    np.testing.assert_allclose(half, (centered_ranks(reward) + centered_ranks(novelty)) / 2, atol=1e-7)
