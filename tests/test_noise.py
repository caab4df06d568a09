"""The noise table and seed-list genomes."""

import numba
import numpy as np

from nevo.genomes.noise import SEED_LIMIT, make_table, offsets_of


def test_table_depends_only_on_size_and_seed():
    """The same (size, seed) gives the same table whatever the thread count; another seed differs."""
    a = make_table(100_003, seed=3, threads=1)
    b = make_table(100_003, seed=3, threads=4)
    c = make_table(100_003, seed=4, threads=2)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert abs(a.mean()) < 0.02 and abs(a.std() - 1) < 0.02


def test_offsets_stay_inside_the_table():
    """Every seed's slice lies wholly inside the table, and seeds spread over it."""
    seeds = np.random.default_rng(0).integers(0, SEED_LIMIT, 5000)
    offs = offsets_of(seeds, 10_000, 1_000)
    assert offs.min() >= 0 and offs.max() <= 9_000
    assert len(np.unique(offs)) > 3500


def test_fresh_network_is_init_scale_times_a_slice(source, table):
    """A one-seed genome is init_scale * eps(seed)."""
    w = source.rebuild([12345])
    o = source.offsets([12345])[0]
    np.testing.assert_array_equal(w, source.init_scale * table[o : o + 1000])


def test_child_is_parent_plus_sigma_noise(source, table):
    """A child costs one vector add: parent + sigma * eps(seed), in float32."""
    parent = source.rebuild([1, 2])
    child = np.empty((1, 1000), np.float32)
    source.build(child, parent[None], [0], [99])
    o = source.offsets([99])[0]
    expect = parent + np.float32(0.01) * table[o : o + 1000]
    np.testing.assert_array_equal(child[0], expect)


def test_rebuild_equals_the_incremental_path(source):
    """A genome rebuilt from its seeds equals, bit for bit, the chain of cached children."""
    genome = [5, 17, 23, 42, 1000]
    w = np.empty((1, 1000), np.float32)
    source.build(w, w, [-1], genome[:1])
    for s in genome[1:]:
        nxt = np.empty_like(w)
        source.build(nxt, w, [0], [s])
        w = nxt
    np.testing.assert_array_equal(source.rebuild(genome), w[0])


def test_rebuild_is_the_same_for_any_thread_count(source):
    """The same genome rebuilds to the same float32 weights on 1 or all threads."""
    genome = [3, 1, 4, 1, 5, 9, 2, 6]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = source.rebuild(genome).copy()
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = source.rebuild(genome)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(one, many)


def test_copy_rows_are_exact(source):
    """A copied row (seed -1) is its base row unchanged."""
    base = source.rebuild_many([[1, 2], [3, 4]])
    out = np.empty_like(base)
    source.build(out, base, [1, 0], [-1, -1])
    np.testing.assert_array_equal(out, base[::-1])


def test_bench_build_times_a_generations_build_on_the_host(capsys):
    from experiments.bench import bench_build

    argv = ["--net", "small", "--rows", "4", "--population", "8", "--truncation", "2",
            "--noise-table-size", "2000000", "--repeats", "1"]  # fmt: skip
    assert bench_build.main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu: small net") and "4 rows" in out and "a generation of 8" in out
