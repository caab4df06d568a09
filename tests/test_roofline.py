"""The roofline's counts (nevo/roofline/): what would be wrong if the FLOP or the bytes
were counted wrong. No timing is checked."""

import time

import numpy as np
import pytest

import nevo
from nevo import machine, nets
from nevo.nets import B_OFF, CIN, COUT, W_OFF
from nevo.nets.kernels import cpu
from nevo.roofline import cpu as roof_cpu
from nevo.roofline import generation, report
from nevo.roofline import layers as roof_layers
from tests.helpers import kernels_under


def dense_rows(counts):
    return [c for c in counts if c["layer"].startswith("dense")]


def test_large_counts_match_the_layer_shapes_by_hand():
    spec = nets.net_spec("large")
    counts = roof_layers.layer_counts(spec, [1.0] * len(spec.layers))
    by_name = {c["layer"]: c for c in counts}
    # conv 32@8x8/4 on 84x84x4 -> 21x21; 64@4x4/2 -> 11x11; 64@3x3/1 -> 11x11; dense 7,744 x 512
    assert by_name["conv 32@8x8/4"]["flops"] == 2 * 21 * 21 * 8 * 8 * 4 * 32
    assert by_name["conv 64@4x4/2"]["flops"] == 2 * 11 * 11 * 4 * 4 * 32 * 64
    assert by_name["conv 64@3x3/1"]["flops"] == 2 * 11 * 11 * 3 * 3 * 64 * 64
    assert by_name["dense 7744x512"]["bytes"] == 4 * (7744 * 512 + 512)  # 15.9 MB, all kept
    assert by_name["dense 7744x512"]["flops"] == 2 * 7744 * 512
    assert by_name["input"]["bytes"] == 4 * 84 * 84  # uint8 pixels
    total = roof_layers.total_counts(counts)
    assert total["nominal_bytes"] == 4 * spec.n_params + 4 * 84 * 84  # every parameter, once
    assert 30e6 < total["flops"] < 40e6  # ~32 MFLOP a forward (docs' performance model)


def test_small_first_dense_layer_is_3872_by_256():
    spec = nets.net_spec("small")
    counts = roof_layers.layer_counts(spec, [0.5] * len(spec.layers))
    first = dense_rows(counts)[0]
    assert first["layer"] == "dense 3872x256"
    assert first["nominal_bytes"] == 4 * (3872 * 256 + 256)  # 4 MB
    assert first["bytes"] == pytest.approx(4 * 3872 * 256 * 0.5 + 4 * 256)


def test_kept_shares_are_fractions_and_dense_bytes_are_nominal_times_kept():
    spec = nets.net_spec("small")
    rng = np.random.default_rng(0)
    weights = roof_layers.rotated_weights(spec, 4, 0.05, rng)
    obs = rng.integers(0, 256, (6, *spec.obs_shape), dtype=np.uint8)
    full = roof_layers.layer_inputs(spec.table, weights, np.arange(6) % len(weights), obs, spec.obs_div)
    kept = roof_layers.kept_shares(spec, full)
    counts = roof_layers.layer_counts(spec, kept)[1:]  # without the input's row
    for lay, share, c in zip(spec.layers, kept, counts):
        if lay.kind != "dense":
            assert share is None and c["bytes"] == c["nominal_bytes"]
            continue
        assert 0.0 < share < 1.0  # ReLU zeros half of the inputs, roughly
        w = 4.0 * lay.cin * lay.cout
        assert c["bytes"] == pytest.approx(w * share + 4 * lay.cout)
        assert c["flops"] == pytest.approx(2 * lay.cin * lay.cout * share)


def test_layer_inputs_runs_the_same_forward_as_nevo():
    """The per-layer driver's logits are nevo's forward's, so the layers timed are the forward's."""
    spec = nets.net_spec("small")
    rng = np.random.default_rng(1)
    weights = roof_layers.rotated_weights(spec, 4, 0.05, rng)
    obs = rng.integers(0, 256, (5, *spec.obs_shape), dtype=np.uint8)
    rows_ind = np.arange(5) % len(weights)
    full = roof_layers.layer_inputs(spec.table, weights, rows_ind, obs, spec.obs_div)
    seg = cpu.segments(spec.table)
    _, logits = cpu.forward(spec, weights, rows_ind, obs)
    np.testing.assert_allclose(full[:, seg[-2] : seg[-1]], logits, rtol=1e-5, atol=1e-6)


def test_roofline_rate_is_the_smaller_of_bandwidth_and_compute():
    assert roof_layers.roofline_rate(1e6, 1e6, 10e9, 100e9) == (1e4, "mem")
    assert roof_layers.roofline_rate(1e9, 1e3, 10e9, 100e9) == (100.0, "comp")
    assert roof_layers.roofline_rate(0.0, 1e3, 10e9, 100e9) == (1e7, "mem")


def test_in_turn_rate_sums_each_layers_own_time():
    """Layers in turn: 1 MB at 10 GB/s (0.1 ms) then 10 MFLOP at 100 GFLOP/s (0.1 ms) is 5,000
    forwards/s, half the 10,000 the whole forward's min() roof allows (1 MB, 10 MFLOP). The in-turn
    rate can never exceed that roof: each layer's time is at least its bytes' and its FLOP's."""
    counts = [{"flops": 0.0, "bytes": 1e6}, {"flops": 10e6, "bytes": 0.0}]
    assert roof_layers.in_turn_rate(counts, 10e9, 100e9) == pytest.approx(5000.0)
    spec = nets.net_spec("large")
    layers = roof_layers.layer_counts(spec, [0.5] * len(spec.layers))
    whole = roof_layers.total_counts(layers)
    for bw, peak in ((24e9, 120e9), (3.35e12, 67e12)):
        roof = roof_layers.roofline_rate(whole["flops"], whole["bytes"], bw, peak)[0]
        assert roof_layers.in_turn_rate(layers, bw, peak) <= roof * (1 + 1e-12)  # equal if all one bound


def test_both_bandwidth_reads_read_every_element_once():
    """The two streaming reads the bandwidth is timed with sum every element exactly once (a read
    that skipped or repeated part of the array would time other bytes than it counts)."""
    n_chunks, row = 3, roof_cpu.ROW
    a = np.ones(4 * row * n_chunks * 2, np.float32)
    assert roof_cpu.stream_sum(a, n_chunks) == a.size
    # each group of four rows adds 1 + 0.5 + 0.25 + 0.125 to every accumulator: exact in float32
    assert roof_cpu.rows_read(a, n_chunks) == a.size / 4 * 1.875
    a[5 * row + 7] = 9  # row 5: the first chunk's second group of four, its second row (x 0.5)
    assert roof_cpu.rows_read(a, n_chunks) == a.size / 4 * 1.875 + 8 * 0.5
    assert roof_cpu.memory_bandwidth(1 << 20, 1) > 0
    threads = roof_cpu.numba.get_num_threads()
    assert roof_cpu.memory_bandwidth(1 << 20, 1, threads=1) > 0
    assert roof_cpu.numba.get_num_threads() == threads  # one thread for that read only


def test_rotated_weights_exceed_the_cache_and_cover_the_rows():
    spec = nets.net_spec("mlp", (4, 1, 1), 2, np.float32)
    w = roof_layers.rotated_weights(spec, 300, 1.0, np.random.default_rng(0))
    assert len(w) >= 300 and w.nbytes >= 8 * roof_cpu.llc_bytes()
    assert np.array_equal(w[0], w[roof_layers.VALUE_SOURCES])  # the values repeat; the memory does not


@pytest.mark.slow  # a few seconds once Numba's cache is warm; compiling its kernels takes a minute
def test_the_script_runs_end_to_end_at_tiny_settings(tmp_path):
    out = report.main(
        ["--nets", "mlp", "deep", "--rows", "4", "--seconds", "0.05", "--bandwidth-mb", "64", "--passes",
         "1", "--skip-end-to-end", "--json", str(tmp_path / "r.json")]
    )  # fmt: skip
    assert out["machine"]["bandwidth_Bps"] > 0 and out["machine"]["fma_peak_flops"] > 0
    first, second = out["nets"]
    assert first["bandwidth_Bps"] == out["machine"]["bandwidth_Bps"]  # the first net: the start's read
    peak = out["machine"]["fma_peak_flops"]
    for r in second["rows"]:  # the second: a read of its own, which its roofs use
        roof = roof_layers.roofline_rate(r["flops"], r["bytes"], second["bandwidth_Bps"], peak)[0]
        assert r["roofline_per_s"] == roof
    rows = out["nets"][0]["rows"]
    assert [r["layer"] for r in rows] == ["input", "dense 4x64", "dense 64x64", "dense 64x2", "forward"]
    assert out["machine"]["one_thread_bandwidth_Bps"] > 0
    assert 0 < rows[-1]["in_turn_per_s"] <= rows[-1]["roofline_per_s"] * (1 + 1e-12)  # equal if all one bound
    for r in rows:
        assert r["nevo_per_s"] > 0 and r["roofline_per_s"] > 0
        assert r["h100_sxm_per_s"] >= r["h100_pcie_per_s"]
    assert (tmp_path / "r.json").exists()


def test_two_stages_in_turn_run_slower_than_either_alone():
    assert generation.in_turn(300.0, 600.0) == pytest.approx(200.0)  # 1 / (1/300 + 1/600)
    assert generation.in_turn(500.0, 500.0) == pytest.approx(250.0)
    assert generation.in_turn(1e3, 1e9) < 1e3


def test_an_episode_start_in_the_pool_costs_a_small_part_of_a_seeded_reset():
    """restoreState (~0.1 ms) against a seeded reset that reloads the ROM (~70-190 ms)."""
    start = generation.restart_s("frostbite", reps=20)
    assert 0 < start < generation.seeded_reset_s("frostbite", reps=1) / 10


def test_the_pools_calls_are_timed_into_their_parts():
    """A wait on an episode start counts as resets, a wait on a step as emulation, a step command
    as send."""
    from nevo.atari.pool import EmulatorPool

    split = {"emulation": [0.0], "send": [0.0], "resets": [0.0]}
    with EmulatorPool("frostbite", 4, 400, 2, 2) as pool:
        generation.timed_pool(pool, split)
        pool.wait(pool.restart(np.arange(2)))
        assert split["resets"][0] > 0 and split["emulation"][0] == 0 and split["send"][0] == 0
        resets = split["resets"][0]
        pool.wait(pool.step(np.arange(2)))
        assert split["emulation"][0] > 0 and split["send"][0] > 0 and split["resets"][0] == resets


@pytest.mark.slow  # ~30 s (a minute on a loaded machine): the limits, three capped episodes, small's kernels
def test_the_generation_is_split_into_its_parts_on_the_slots_asked_for(tmp_path):
    """End to end on the CPU at tiny settings: --slots is the layout's (the workers pipeline: each
    emulator process plays whole episodes), the forward and the emulation are timed in the
    processes (no step commands, no episode starts asked for), and the parts add up to the wall
    time; beside it the emulator limits, and the in-turn figures below both of their terms."""
    out = report.main(
        ["--nets", "small", "--rows", "2", "--seconds", "0.02", "--bandwidth-mb", "16", "--passes", "1",
         "--max-gb", "0.05", "--e2e-net", "small", "--population", "3", "--frame-cap", "100", "--slots",
         "2", "--limit-seconds", "0.2", "--json", str(tmp_path / "r.json")]
    )  # fmt: skip
    e2e = out["end_to_end"]
    assert (e2e["device"], e2e["slots"], e2e["group"], e2e["population"]) == ("cpu", 2, 1, 3)
    # three episodes, each capped at 100 frames after its start (up to 30 no-ops, FIRE and UP)
    assert 3 <= e2e["frames"] <= 3 * (100 + 38) and e2e["forward_rows"] > 0
    split = e2e["split_s"]
    assert list(split) == ["forward", "emulation", "send", "resets", "weights", "python"]
    assert e2e["pipeline"] == "workers"
    assert split["forward"] > 0 and split["emulation"] > 0 and split["send"] == split["resets"] == 0
    assert sum(split.values()) == pytest.approx(e2e["wall_s"], rel=1e-9) or split["python"] == 0
    assert e2e["workers"] == min(machine.cores(), 2)  # the pool: one process per core, one per slot at most
    roof, fwd = e2e["emulator_roof"], e2e["forward_bound_nevo"]
    assert roof > 0 and e2e["pool_limit"] > 0 and e2e["emulator_limit"] > 0
    assert e2e["in_turn_roof"] == pytest.approx(1 / (1 / roof + 1 / fwd))
    assert e2e["in_turn_roof"] < min(roof, fwd)
    assert e2e["lockstep_bound_roofline"] < min(e2e["emulator_limit"], e2e["forward_bound_roofline"])
    assert 0 < e2e["restart_s"] < e2e["seeded_reset_s"]


@pytest.mark.slow  # ~20 s: small's kernels, six capped episodes, the limits
def test_the_overlap_generation_prints_its_rate_before_the_limits_and_measures_its_own(capsys, monkeypatch):
    """--e2e-only: no forward table. --pipeline overlap on the CPU: the pool's first-ready limit is
    measured beside the lockstep one, every pool spins as --spin-us says, the units are as
    --units-per-process says, and nevo's defaults come back after. nevo's rate is printed before
    the limits are measured: a lease's call cut short there keeps it."""
    from nevo.atari import pool, stepped

    args = ["--e2e-only", "--rows", "2", "--seconds", "0.02", "--bandwidth-mb", "16", "--passes", "1",
            "--max-gb", "0.05", "--e2e-net", "small", "--population", "6", "--frame-cap", "100", "--slots",
            "4", "--limit-seconds", "0.2", "--pipeline", "overlap", "--spin-us", "20", "--units-per-process",
            "4"]  # fmt: skip
    spins, default, units = [], pool.SPIN_S, stepped.UNITS_PER_PROCESS

    def cut(*_a, **_k):
        raise KeyboardInterrupt("the call's deadline")

    import nevo.roofline.emulators as emulators

    monkeypatch.setattr(emulators, "emulator_limit", cut)
    with pytest.raises(KeyboardInterrupt):
        report.main(args)
    assert "nevo: " in capsys.readouterr().out  # printed before the first limit
    assert pool.SPIN_S == default and stepped.UNITS_PER_PROCESS == units  # nevo's back after a cut too
    monkeypatch.undo()

    real_pool_limit = emulators.pool_limit

    def spying(*a, **k):
        spins.append(pool.SPIN_S)
        return real_pool_limit(*a, **k)

    monkeypatch.setattr(emulators, "pool_limit", spying)
    out = report.main(args)
    e2e = out["end_to_end"]
    assert out["nets"] == [] and e2e["pipeline"] == "overlap" and e2e["spin_s"] == pytest.approx(20e-6)
    assert e2e["units_per_process"] == 4 and stepped.UNITS_PER_PROCESS == units
    assert e2e["pool_limit"] > 0 and e2e["pool_first_ready"] > 0
    assert spins == [pytest.approx(20e-6)] * 2 and pool.SPIN_S == default
    printed = capsys.readouterr().out
    assert "first-ready limit" in printed and "spinning 20 us" in printed


@pytest.mark.slow  # the base's kernels compile afresh (their copy's cache is a new folder): ~30 s
def test_ab_forward_compares_a_checkout_with_itself(capsys, tmp_path):
    """Against this very checkout both sides run the same kernels: logits equal, both rates
    positive. A base whose logits differ is refused, and so is a folder without nevo's kernels."""
    import os

    from experiments.bench import ab_forward

    here = os.path.dirname(os.path.dirname(os.path.abspath(nevo.__file__)))
    rows = ab_forward.main(
        ["--base", here, "--nets", "mlp", "--rows", "4", "--seconds", "0.05", "--max-gb", "0.05"]
    )
    assert [(r["net"], r["rows"]) for r in rows] == [("mlp", 4)]
    assert rows[0]["base"] > 0 and rows[0]["this"] > 0
    assert "bit for bit" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no nevo"):
        ab_forward.main(["--base", "/nonexistent", "--nets", "mlp", "--rows", "4"])
    # a base whose forward adds 1 to every logit (this checkout's forward, compiled already):
    # refused before any timing
    kernels = tmp_path / "nevo" / "nets" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "cpu.py").write_text(
        "from nevo.nets.kernels.cpu import forward as here\n\n\ndef forward(*args):\n"
        "    actions, logits = here(*args)\n    return actions, logits + 1\n"
    )
    with pytest.raises(SystemExit, match="logits differ"):
        ab_forward.main(
            ["--base", str(tmp_path), "--nets", "mlp", "--rows", "4", "--seconds", "0.05", "--max-gb", "0.05"]
        )


def test_interleaved_times_each_side_on_its_own_calls():
    from experiments.bench.ab_forward import interleaved

    def slow(spec, weights, rows_ind, obs):
        time.sleep(0.002)

    def fast(spec, weights, rows_ind, obs):
        pass

    rate = interleaved({"slow": slow, "fast": fast}, None, np.zeros((5, 1)), None, 4, 0.05)
    assert rate["fast"] > 10 * rate["slow"] and rate["slow"] < 4 / 0.002


def test_the_peak_is_the_faster_of_the_fma_probe_and_blas(monkeypatch):
    """An FMA probe that LLVM vectorises narrowly (AVX-512 machines) must not set the roof: BLAS's
    sgemm is timed beside it and the faster of the two is the peak, whichever it is."""
    monkeypatch.setattr(roof_cpu, "sgemm_peak", lambda seconds, threads: (5e10, threads))
    monkeypatch.setattr(roof_cpu, "own_choice_sgemm", lambda seconds, threads: None)
    monkeypatch.setattr(roof_cpu, "fma_peak", lambda seconds: 1e9)
    pk = roof_cpu.machine_peak(0.1, 2)
    assert (pk.flops, pk.fma, pk.blas, pk.blas_threads) == (5e10, 1e9, 5e10, 2)
    monkeypatch.setattr(roof_cpu, "fma_peak", lambda seconds: 9e10)
    assert roof_cpu.machine_peak(0.1, 2).flops == 9e10


def test_a_forced_blas_kernel_is_measured_against_openblas_own_pick(monkeypatch):
    """OPENBLAS_CORETYPE holds this process's BLAS to one kernel (the Zen 5 VMs name Haswell: AVX2
    on an AVX-512 CPU). The peak must be the machine's: an sgemm in a child process without the
    variable, on the kernel OpenBLAS picks itself, which must differ from a forced ancient one."""
    forced = kernels_under("Prescott")  # SSE3: no x86-64 CPU of today picks it
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")
    flops, kernels = roof_cpu.own_choice_sgemm(0.05, 1)
    assert flops > 1e8 and kernels and forced and "/".join(kernels) != forced
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    assert roof_cpu.own_choice_sgemm(0.05, 1) is None  # no variable: this process's sgemm is that

    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setattr(roof_cpu, "fma_peak", lambda seconds: 1e9)
    monkeypatch.setattr(roof_cpu, "sgemm_peak", lambda seconds, threads: (2.5e11, threads))
    monkeypatch.setattr(roof_cpu, "own_choice_sgemm", lambda seconds, threads: (4.5e11, ["SkylakeX"]))
    monkeypatch.setattr(machine, "blas_kernels", lambda: ["Haswell"])
    pk = roof_cpu.machine_peak(0.1, 2)
    assert pk.flops == 4.5e11 and pk.blas == 2.5e11
    assert pk.kernels == ["Haswell"] and pk.own == (4.5e11, ["SkylakeX"])


def test_sgemm_runs_on_the_threads_asked_for_not_the_forwards_one():
    """nevo's CPU kernels hold BLAS to one thread process-wide; the peak's sgemm must lift that
    for its own product (else a 16-core machine's peak reads as one core's) and put it back."""
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    assert blas_threads() == {1}  # nevo.nets.kernels.cpu's limit, imported by the roofline
    flops, ran_on = roof_cpu.sgemm_peak(0.05, 2, n=256)
    assert flops > 1e8 and ran_on == 2  # any machine multiplies faster than 0.1 GFLOP/s
    assert roof_cpu.sgemm_peak(0.05, 1, n=256)[1] == 1
    assert blas_threads() == {1}


GPU_PROBES = """
import numpy as np
from numba import cuda
from nevo.roofline import gpu as r

bw = r.gpu_bandwidth(8 * 1000, 1, blocks=2, threads=8)
flops = r.gpu_peak(0.0, blocks=2, threads=8, iters=3)
assert bw > 0 and flops > 0, (bw, flops)


@cuda.jit
def read_half(x, out):  # skips every other word
    t, stride = cuda.grid(1), cuda.gridsize(1)
    s, i = np.uint64(0), 2 * t
    while i < x.size:
        s += x[i]
        i += 2 * stride
    out[t] = s


@cuda.jit
def burn_once(out, m, c, iters):  # one FMA per chain, whatever iters says
    t = cuda.grid(1)
    out[t] = out[t] * m + c


for name, broken, probe in (("gpu_read", read_half, lambda: r.gpu_bandwidth(8000, 1, 2, 8)),
                            ("gpu_burn", burn_once, lambda: r.gpu_peak(0.0, 2, 8, 3))):
    real = getattr(r, name)
    setattr(r, name, broken)
    try:
        probe()
    except RuntimeError as e:
        print("caught:", e)
    else:
        raise SystemExit(name + ": a wrong result went unnoticed")
    setattr(r, name, real)
print("ok")
"""


def test_the_gpu_probes_check_what_they_read_and_computed():
    """On the CUDA simulator: the bandwidth and FMA probes run, and each raises where its kernel
    reads fewer words or runs fewer FMAs than it claims (its rate would be wrong)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run(
        [sys.executable, "-c", GPU_PROBES], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("caught:") == 2 and done.stdout.strip().endswith("ok"), done.stdout


def test_a_layer_alone_runs_each_work_row_again_through_the_calls_other_individuals():
    """one_layer's row q is work's row q % len(work): with 4 individuals over 2 work rows, each row's
    dense output is its own input through its last individual's weights (2 and 3 first, then 4
    and 5), so a layer timed alone over more rows than work has runs the real layer."""
    spec = nets.net_spec("small")
    rng = np.random.default_rng(2)
    weights = rng.standard_normal((6, spec.n_params), dtype=np.float32) * nets.init_scale(spec)
    obs = rng.integers(0, 256, (2, *spec.obs_shape), dtype=np.uint8)
    seg, t = cpu.segments(spec.table), spec.table
    work = roof_layers.layer_inputs(spec.table, weights, np.array([0, 1]), obs, spec.obs_div)
    x = work[:, seg[2] : seg[3]].astype(np.float64)  # small's first dense layer: its inputs
    roof_layers.one_layer(spec.table, 2, weights, np.array([2, 3, 4, 5]), obs, spec.obs_div, work, 1)
    n_in, n_out, wo, bo = t[2, CIN], t[2, COUT], t[2, W_OFF], t[2, B_OFF]
    for r, ind in ((0, 4), (1, 5)):
        w = weights[ind].astype(np.float64)
        want = np.maximum(x[r] @ w[wo:bo].reshape(n_in, n_out) + w[bo : bo + n_out], 0)
        np.testing.assert_allclose(work[r, seg[3] : seg[3] + n_out], want, rtol=1e-4, atol=1e-5)
