"""16-bit weight rows (--weights fp16): rounding, the forwards that read them, the builds that make
them, and a run that uses them (resumed exactly, its elite played with the weights it was run with)."""

import json
import os
import shutil

import numpy as np
import pytest

from nevo import config
from nevo.episodes import Population
from nevo.episodes.weights import AllWeights, PooledWeights
from nevo.genomes.noise import ROUND_ROWS, WeightBuilder
from nevo.nets import half, init_scale
from nevo.nets.kernels import cpu, reference
from tests.helpers import SPECS, assert_matches_reference
from tests.tiny import ATARI


def test_rounding_is_numpys_round_to_nearest_even_bit_for_bit():
    """round_rows gives astype(np.float16)'s bits on ordinary weights, ties, subnormals, the
    largest half, zeros of both signs, infinities and NaN."""
    rng = np.random.default_rng(0)
    ordinary = rng.standard_normal(5000).astype(np.float32) * np.float32(0.02)
    ties = (np.arange(1, 200, dtype=np.float16).astype(np.float32) + np.float32(2**-11)) / 64  # halfway
    edge = np.array([0.0, -0.0, 6e-8, 3e-8, -5.96e-8, 6.1e-5, 65504.0, 65519.0, -65519.0, np.inf, -np.inf,
                     np.nan, 1e-30, 1.0009765625, 1.00048828125], np.float32)  # fmt: skip
    src = np.concatenate([ordinary, ties, edge]).reshape(1, -1)
    got = half.round_rows(src, np.empty(src.shape, np.float16))
    np.testing.assert_array_equal(got.view(np.uint16), src.astype(np.float16).view(np.uint16))


def test_a_weight_too_large_for_fp16_is_one_line():
    src = np.array([[0.5, 70000.0, -1.0]], np.float32)
    with pytest.raises(ValueError, match=r"--weights fp16: 1 weight\(s\) up to 7e\+04 .* use --weights fp32"):
        half.round_rows(src, np.empty(src.shape, np.float16))


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("rows", [1, 9])
def test_cpu_forward_on_fp16_is_the_fp32_forward_of_the_widened_weights(name, rows):
    """The Numba forward reading 16-bit weights gives exactly (bit for bit) what it gives on the
    same weights widened to float32: a weight is widened, never approximated, and the sums are the
    fp32 forward's; so it matches the NumPy reference (which reads the halves exactly) too."""
    spec = SPECS[name]
    rng = np.random.default_rng(rows)
    w16 = half.rounded(rng.standard_normal((4, spec.n_params), dtype=np.float32) * init_scale(spec), "fp16")
    assert w16.dtype == np.float16
    rows_ind = rng.integers(0, 4, rows)
    if spec.obs_dtype == np.uint8:
        obs = rng.integers(0, 256, (rows, *spec.obs_shape), dtype=np.uint8)
    else:
        obs = rng.standard_normal((rows, *spec.obs_shape)).astype(np.float32)
    actions, logits = cpu.forward(spec, w16, rows_ind, obs)
    wide_actions, wide_logits = cpu.forward(spec, w16.astype(np.float32), rows_ind, obs)
    np.testing.assert_array_equal(logits, wide_logits)
    np.testing.assert_array_equal(actions, wide_actions)
    assert_matches_reference(spec, w16, rows_ind, obs)
    _, ref = reference.forward(spec, w16, rows_ind, obs)
    _, ref_wide = reference.forward(spec, w16.astype(np.float32), rows_ind, obs)
    np.testing.assert_array_equal(ref, ref_wide)


def test_cpu_forward_on_fp16_with_many_groups_matches_few():
    """Both of the forward's paths (a parallel pass per individual, and rows then blocks of
    outputs) read the 16-bit weights alike: the same logits bit for bit."""
    spec = SPECS["large-tiny"]
    rng = np.random.default_rng(3)
    w16 = half.rounded(rng.standard_normal((12, spec.n_params), dtype=np.float32) * init_scale(spec), "fp16")
    obs = rng.integers(0, 256, (12, *spec.obs_shape), dtype=np.uint8)
    _, many = cpu.forward(spec, w16, np.arange(12), obs)  # 12 groups: one pass per individual
    _, few = cpu.forward(spec, w16, np.zeros(12, np.int64), obs)  # one group
    for r in range(12):
        _, alone = cpu.forward(spec, w16[r : r + 1], np.zeros(1, np.int64), obs[r : r + 1])
        np.testing.assert_array_equal(many[r], alone[0])
    _, one = cpu.forward(spec, w16[:1], np.zeros(12, np.int64), obs)
    np.testing.assert_array_equal(few, one)


@pytest.mark.slow
def test_a_16_bit_dense_layer_asks_for_its_next_rows_and_a_32_bit_one_does_not():
    """The 16-bit dense layer prefetches the next pass's weight rows (on the 2-core Zen 5 VM it read
    22 GB/s with it against 17-18 without); fp32 rows, which lost 8% with it, compile without. The
    machine code of each, compiled afresh (a cached function keeps no assembly)."""
    import numba

    from nevo.nets import CIN, COUT

    spec = SPECS["large-tiny"]
    table = spec.table
    i = cpu.first_dense(table)
    prefetches = {}
    for dtype in (np.uint16, np.float32):
        fn = numba.njit(nogil=True, fastmath={"contract"})(cpu.dense_block.py_func)
        act = np.zeros((1, table[i, CIN] + table[i, COUT]), np.float32)
        nz = np.empty((1, table[i, CIN]), np.int32)
        fn(table, i, np.zeros(spec.n_params, dtype), act, 0, table[i, CIN], np.arange(1), 0, 1, 0, 1, nz)
        asm = fn.inspect_asm(fn.signatures[0])
        prefetches[dtype] = sum("prefetch" in line for line in asm.splitlines())
    assert prefetches[np.uint16] > 0 and prefetches[np.float32] == 0, prefetches


def _population(rng, n_params, n):
    """A GA-like population: two seed-list parents, fresh rows, copies and children."""
    seeds = rng.integers(0, 2**31, 3 + n)
    base = rng.integers(-1, 2, n)
    new = np.where((rng.random(n) < 0.2) & (base >= 0), -1, seeds[3:])  # -1: a copy of its base
    parents = [np.array(seeds[:1]), np.array(seeds[1:3])]
    return Population(parents, base, new, np.full(n, 0.002, np.float32), 0.002)


def test_a_16_bit_build_is_the_float32_build_rounded_once():
    """WeightBuilder(dtype=float16) builds each row in float32, as the fp32 builder does, and
    rounds it once, in parts of ROUND_ROWS rows (more rows than that here); PooledWeights and
    AllWeights hold such rows."""
    rng = np.random.default_rng(1)
    p = 300
    table = rng.standard_normal(40 * p).astype(np.float32)
    scale = (0.05 + rng.random(p)).astype(np.float32)
    pop = _population(rng, p, ROUND_ROWS + 7)
    exact = WeightBuilder(table, scale)
    exact.use(pop)
    want = exact.build(np.arange(len(pop)), np.empty((len(pop), p), np.float32)).astype(np.float16)
    b16 = WeightBuilder(table, scale, dtype=np.float16)
    b16.use(pop)
    got = b16.build(np.arange(len(pop)), np.empty((len(pop), p), np.float16))
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    assert b16._wide.shape[0] == ROUND_ROWS  # the float32 scratch stays a few rows
    pooled = PooledWeights(b16)
    rows = pooled.start(pop, np.arange(len(pop)), slots=4)
    assert rows.dtype == np.float16
    r = pooled.take([5, 2])
    np.testing.assert_array_equal(rows[r].view(np.uint16), want[[5, 2]].view(np.uint16))
    every = AllWeights(b16, max_rows=100).start(pop, np.arange(len(pop)), 4)
    np.testing.assert_array_equal(every.view(np.uint16), want.view(np.uint16))


def test_weights_is_a_setting_with_a_one_line_error():
    from nevo.cli import parse_args

    cfg, _, _, _ = parse_args(["--env", "CartPole-v1", "--weights", "fp16"], "")
    assert cfg.net.weights == "fp16"
    with pytest.raises(config.ConfigError, match=r"--weights: got 'bf8', allowed: auto, fp32 or fp16"):
        config.validate(config.override(cfg, {"weights": "bf8"}))


@pytest.mark.parametrize(
    "argv, net, weights",
    [
        ([], "small", "fp16"),  # the main job: the quick preset's small net
        (["--net", "large"], "large", "fp16"),
        (["--preset", "paper"], "large", "fp16"),
        (["--weights", "fp32"], "small", "fp32"),  # fp32 one flag away
        (["--weights", "auto", "--net", "large"], "large", "fp16"),
        (["--env", "CartPole-v1"], "mlp", "fp32"),  # an MLP's forward is overhead, not bytes
        (["--env", "CartPole-v1", "--weights", "fp16"], "mlp", "fp16"),
        (["--net", "mnist-large", "--env", "mnist"], "mnist-large", "fp32"),
    ],
)
def test_weights_auto_is_fp16_on_the_atari_nets_and_fp32_elsewhere(argv, net, weights):
    """The default --weights auto becomes the net's format before the run starts, so config.json
    names the format the run's forward read; an explicit format stays as given."""
    from nevo.cli import parse_args

    cfg, _, _, _ = parse_args(argv, "")
    assert (cfg.net.net, cfg.net.weights) == (net, weights)


def test_a_config_built_in_python_reads_auto_as_its_nets_format_and_an_old_folder_as_fp32(tmp_path):
    """Code that builds its Config without the command line (weights left at auto) gets the same
    rows as a run of that net; a run folder written before --weights existed read fp32 and
    resumes so."""
    from nevo.evaluation import setup
    from nevo.nets import net_spec

    small = config.Config(net=config.NetConfig(net="small"))
    assert small.net.weights == "auto"
    assert setup.builder_for(small, net_spec("small", (4, 84, 84), 18), None, None).dtype == np.float16
    mlp = config.Config(net=config.NetConfig(net="mlp"))
    assert setup.builder_for(mlp, net_spec("mlp", (4, 1, 1), 2, np.float32), None, None).dtype == np.float32
    assert config.weights_resolved(small).net.weights == "fp16"
    assert config.weights_resolved(mlp).net.weights == "fp32"
    for needs_net in (
        lambda: half.dtype_of("auto"),
        lambda: half.rounded(np.zeros((1, 4), np.float32), "auto"),
    ):
        with pytest.raises(ValueError, match="auto"):  # never silently fp32: auto needs its net
            needs_net()
    d = config.to_dict(small)
    del d["net"]["weights"]
    (tmp_path / "config.json").write_text(json.dumps(d))
    assert config.load(str(tmp_path / "config.json")).net.weights == "fp32"


RUN = [*ATARI, "--frame-budget", "9000"]  # 3 generations of the tiny Frostbite run


@pytest.mark.slow
def test_a_16_bit_run_differs_from_fp32_resumes_exactly_and_plays_its_own_weights(tmp_path):
    """--weights fp16 is kept in config.json and gives every evaluator 16-bit rows, a run resumed
    from its previous checkpoint ends the same, and load_policy plays the elite with the 16-bit
    weights the run evaluated. (On runs this short the rounding changes no action: the fp32 run's
    metrics are the same.)"""
    from experiments import run_ga
    from nevo import api, nets, runs
    from nevo.evaluation import setup
    from nevo.loops import elite as elite_files
    from nevo.tasks import task_for
    from tests.helpers import metrics_without_clock, run_folder

    r16 = run_folder(run_ga.main, [*RUN, "--weights", "fp16"], tmp_path / "fp16")
    cfg = config.load(f"{r16}/config.json")
    assert cfg.net.weights == "fp16"
    spec = nets.net_spec(cfg.net.net, nets.OBS_SHAPE, 18)
    assert setup.builder_for(cfg, spec, None, None).dtype == np.float16  # what every evaluator builds
    m16 = metrics_without_clock(r16)
    assert len(m16) == 3

    copy = str(tmp_path / "copy")
    shutil.copytree(r16, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    assert run_ga.main(["--resume", copy]) == 0
    assert metrics_without_clock(copy) == m16

    policy = api.load_policy(r16)
    assert policy.weights.dtype == np.float16
    _, _, _, w = elite_files.load(r16)
    np.testing.assert_array_equal(policy.weights[0].view(np.uint16), w.astype(np.float16).view(np.uint16))
    task = task_for(cfg.env)
    obs = np.random.default_rng(0).integers(0, 256, (5, *task.obs_shape), dtype=np.uint8)
    want, _ = reference.forward(spec, w.astype(np.float16)[None], np.zeros(5, np.int64), obs)
    np.testing.assert_array_equal(policy.act(obs), want)


def test_the_comparison_reads_finished_runs_only(tmp_path):
    """experiments.weights_compare takes a run whose last row reached its frame budget, skips an
    unfinished one, and tabulates each run's last and best validated elite and the medians."""
    from experiments import weights_compare
    from nevo import runs

    def fake(name, budget, elites):
        folder = tmp_path / name / "run"
        folder.mkdir(parents=True)
        runs.write_json(str(folder), "config.json", {"run": {"frame_budget": budget}})
        for g, e in enumerate(elites):
            row = {"generation": g, "frames": 100 * (g + 1), "score/elite_mean": e}
            runs.append_metrics(str(folder), row)
        return str(tmp_path / name)

    done = fake("done", 300, [5.0, 9.0, 7.0])
    assert weights_compare.finished(fake("cut", 1000, [1.0, 2.0])) is None
    rows = [weights_compare.row("frostbite", "fp16", 0, weights_compare.finished(done))]
    assert (rows[0]["final"], rows[0]["best"], rows[0]["frames"]) == (7.0, 9.0, 300)
    lines = weights_compare.table(rows)
    assert "| frostbite | fp16 | 0 | 300 | 7.0 | 9.0 |" in lines
    assert "| frostbite | fp16 | median of 1 | | 7.0 | 9.0 |" in lines


def test_the_memory_check_counts_rows_at_their_format_s_bytes(monkeypatch):
    """A population of 16-bit rows needs half the memory of float32 ones, and the check says so:
    a run that does not fit in fp32 may fit in fp16; the bases rows are built from stay float32."""
    from nevo.evaluation import setup

    monkeypatch.setattr(setup.machine, "available_memory", lambda: 320_000_000)  # 288 MB usable
    n = 1_000_000
    # 98 fp16 rows, 2 float32 bases and 16 float32 rows of build scratch: 196 + 72 MB
    setup.check_memory(n, 100, 0, "cpu", "--population", dtype=np.float16, base_rows=2)
    with pytest.raises(config.ConfigError, match=r"--population: 100 x 1,000,000 float32 weights .*0\.4 GiB"):
        setup.check_memory(n, 100, 0, "cpu", "--population", dtype=np.float32, base_rows=2)  # 400 MB
    with pytest.raises(config.ConfigError, match="40 x 1,000,000 float16 weights and 60 float32 rows"):
        setup.check_memory(n, 100, 0, "cpu", "--population", dtype=np.float16, base_rows=60)  # 80 + 304 MB
    with pytest.raises(config.ConfigError, match="16 x 1,000,000 float16 weights"):  # the scratch counts:
        setup.check_memory(n, 66, 0, "cpu", "--population", dtype=np.float16, base_rows=50)  # 32 + 264 MB


@pytest.mark.parametrize("weights, fits", [("fp16", True), ("fp32", False)])
def test_a_run_s_memory_check_reads_its_weight_format(monkeypatch, weights, fits):
    """Through a run's own checks: the large net's rows held by 63 slots fit in fp16, not fp32."""
    from nevo.algos import bases_of
    from nevo.cli import parse_args
    from nevo.evaluation import setup
    from nevo.loops import loop
    from nevo.tasks import task_for

    cfg, _, _, _ = parse_args(["--net", "large", "--env-slots", "63", "--population", "100",
                            "--weights", weights, "--device", "cpu"], "")  # fmt: skip
    n, table = 4_052_658, 4 * cfg.run.noise_table_size
    held, float32_rows = 63 + 1, 2 * bases_of(cfg)  # one row a slot and one; the bases, float32
    need16 = n * (2 * held + 4 * (float32_rows + 16)) + table  # and 16 rows of build scratch
    need32 = n * 4 * (held + float32_rows) + table
    avail = int((need16 + need32) / 2 / 0.9)  # room for the fp16 rows, not the fp32 ones
    monkeypatch.setattr(setup.machine, "available_memory", lambda: avail)
    if fits:
        loop.plan(cfg, task_for(cfg.env))
    else:
        with pytest.raises(config.ConfigError, match="x 4,052,658 float32 weights"):
            loop.plan(cfg, task_for(cfg.env))
