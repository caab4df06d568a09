"""End to end: `python -m experiments.run_ga` with tiny settings; determinism; kill and resume."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import run_ga
from nevo import machine, nets, runs
from nevo.genomes import noise
from nevo.plots import rundata
from tests.helpers import metrics_without_clock, run_folder
from tests.tiny import ATARI

BUDGET = ["--frame-budget", "16000"]  # 4 generations of 10 capped episodes (401 frames each)
results = metrics_without_clock


def run(tmp, *extra):
    """Run the main job in-process; return its run folder."""
    return run_folder(run_ga.main, [*ATARI, *BUDGET, *extra], os.path.join(tmp, "runs"))


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    return run(str(tmp_path_factory.mktemp("ref")))


@pytest.mark.slow
def test_run_folder_holds_config_metrics_checkpoint_and_elite(reference_run):
    files = set(os.listdir(reference_run))
    assert {"config.json", "metrics.jsonl", "checkpoint.npz", "elite.json"} <= files
    cfg = json.load(open(os.path.join(reference_run, "config.json")))
    assert cfg["git_commit"] and cfg["ga"]["population"] == 6 and cfg["net"]["net"] == "small"
    # nevo's own CPU convs sum alike on any BLAS and CPU: no OpenBLAS kernel to record
    assert cfg["device"] == "cpu" and "blas" not in cfg
    rows = runs.read_metrics(reference_run)
    assert [r["generation"] for r in rows] == [0, 1, 2, 3]
    for key in ("frames", "wall_s", "perf/frames_per_s", "score/pop_max", "score/pop_mean",
                "score/pop_median", "score/elite_mean", "elite/genome_len"):  # fmt: skip
        assert key in rows[-1]
    assert rows[-1]["frames"] >= 16000
    assert all(b["frames"] > a["frames"] for a, b in zip(rows, rows[1:]))
    # the share of this machine's cores the run kept busy: its threads' CPU time / wall / cores
    assert all(0 < r["perf/cores_busy"] <= 1.02 for r in rows), [r["perf/cores_busy"] for r in rows]


@pytest.mark.slow
def test_elite_rebuilds_from_its_seed_list_alone(reference_run):
    """elite.json holds everything needed to rebuild the elite's weights, and they are finite."""
    elite = json.load(open(os.path.join(reference_run, "elite.json")))
    spec = nets.net_spec(elite["net"], nets.OBS_SHAPE, 18)
    table = noise.make_table(elite["noise_table_size"], elite["noise_seed"])
    w = noise.NoiseSource(table, nets.init_scale(spec), elite["sigma"]).rebuild(elite["seeds"])
    assert w.shape == (spec.n_params,) and np.isfinite(w).all()
    assert len(elite["seeds"]) == runs.read_metrics(reference_run)[-1]["elite/genome_len"]


@pytest.mark.slow
def test_best_json_holds_the_best_elite_so_far(reference_run):
    """best.json is the elite with the highest validation mean of the run, from its generation;
    score/best_mean is the running maximum of score/elite_mean."""
    rows = runs.read_metrics(reference_run)
    means = [r["score/elite_mean"] for r in rows]
    assert [r["score/best_mean"] for r in rows] == list(np.maximum.accumulate(means))
    best = json.load(open(os.path.join(reference_run, "best.json")))
    assert best["validation_mean"] == max(means) and best["generation"] == int(np.argmax(means))
    elite = json.load(open(os.path.join(reference_run, "elite.json")))
    assert {k: v for k, v in best.items() if k not in ("generation", "seeds", "validation_mean")} == {
        k: v for k, v in elite.items() if k not in ("generation", "seeds", "validation_mean")
    }


@pytest.mark.slow
def test_elites_jsonl_keeps_every_generations_elite(reference_run):
    """elites.jsonl holds a line a generation, each the elite.json that generation wrote: the last
    line is elite.json, the best line best.json, and each line's validation mean its
    generation's score/elite_mean."""
    lines = runs.read_metrics(reference_run, runs.ELITES)
    rows = runs.read_metrics(reference_run)
    assert [e["generation"] for e in lines] == [r["generation"] for r in rows] == [0, 1, 2, 3]
    assert [e["validation_mean"] for e in lines] == [r["score/elite_mean"] for r in rows]
    assert [len(e["seeds"]) for e in lines] == [r["elite/genome_len"] for r in rows]
    assert lines[-1] == json.load(open(os.path.join(reference_run, "elite.json")))
    best = json.load(open(os.path.join(reference_run, "best.json")))
    assert lines[best["generation"]] == best


@pytest.mark.slow
def test_same_seed_same_metrics(reference_run, tmp_path):
    """A second run with the same seed and settings logs identical metrics (wall clock aside)."""
    assert results(run(str(tmp_path))) == results(reference_run)


@pytest.mark.slow
def test_other_seed_other_run(reference_run, tmp_path):
    assert results(run(str(tmp_path), "--seed", "1")) != results(reference_run)


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_generations(reference_run, tmp_path):
    """SIGKILL mid-run, then --resume: the metrics equal those of the uninterrupted run."""
    out = str(tmp_path / "runs")
    cmd = [sys.executable, "-m", "experiments.run_ga", *ATARI, *BUDGET, "--out-dir", out]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    folder = None
    while time.monotonic() < deadline:
        folders = os.listdir(out) if os.path.isdir(out) else []
        if folders:
            folder = os.path.join(out, folders[0])
            if len(runs.read_metrics(folder)) >= 2:
                break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert folder is not None
    done = len(runs.read_metrics(folder))
    assert done < 4, "the run finished before it could be killed"
    assert run_ga.main(["--resume", folder]) == 0
    assert results(folder) == results(reference_run)
    for name in ("elite.json", "best.json"):
        assert json.load(open(os.path.join(folder, name))) == json.load(
            open(os.path.join(reference_run, name))
        )
    assert runs.read_metrics(folder, runs.ELITES) == runs.read_metrics(reference_run, runs.ELITES)


def test_config_json_keeps_each_start_of_the_run_and_the_machine_it_ran_on(tmp_path):
    """A new run records one start (generation 0, this machine's CPU and cores, its commit); a
    resume appends its own at the generation and frames it resumes from and keeps the earlier
    ones; a folder from before starts were kept gets the resumed one alone, and the plots say
    that its earlier generations ran where nothing says."""
    cartpole = ["--env", "CartPole-v1", "--population", "8", "--frame-budget", "2000"]
    folder = run_folder(run_ga.main, cartpole, tmp_path / "runs")
    config = os.path.join(folder, "config.json")
    (first,) = json.load(open(config))["starts"]
    here = {"cpu": machine.cpu_facts()["model"], "cores": machine.cores(), "device": "cpu"}
    commit = runs.git_commit()
    assert first == {"generation": 0, "frames": 0, "date": first["date"], "git_commit": commit, **here}
    before = runs.read_metrics(folder)[-1]
    assert run_ga.main(["--resume", folder, "--frame-budget", "4000"]) == 0
    starts = json.load(open(config))["starts"]
    assert starts[0] == first and len(starts) == 2
    assert (starts[1]["generation"], starts[1]["frames"]) == (before["generation"] + 1, before["frames"])
    assert starts[1]["date"] >= first["date"] and starts[1]["cpu"] == here["cpu"]
    assert rundata.load_run(folder).machines == ([f"{here['cpu']}, {here['cores']} cores"], False)

    old = json.load(open(config))
    del old["starts"]  # a folder written before runs kept their starts
    json.dump(old, open(config, "w"))
    last = runs.read_metrics(folder)[-1]
    assert run_ga.main(["--resume", folder, "--frame-budget", "6000"]) == 0
    (only,) = json.load(open(config))["starts"]
    assert (only["generation"], only["frames"]) == (last["generation"] + 1, last["frames"])
    assert rundata.load_run(folder).machines == ([f"{here['cpu']}, {here['cores']} cores"], True)


def test_resume_of_a_folder_that_is_not_a_run_fails_clearly(tmp_path, capsys):
    assert run_ga.main(["--resume", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_interrupted_checkpoint_write_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    """A crash while the checkpoint is written leaves the previous checkpoint whole."""
    runs.save_checkpoint(str(tmp_path), {"generation": np.int64(3), "frames": np.int64(10), "wall_s": 1.0})

    def dies(f, **arrays):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", dies)
    with pytest.raises(KeyboardInterrupt):
        runs.save_checkpoint(
            str(tmp_path), {"generation": np.int64(4), "frames": np.int64(20), "wall_s": 2.0}
        )
    monkeypatch.undo()
    assert int(runs.load_checkpoint(str(tmp_path))["generation"]) == 3


def test_metrics_of_the_generation_in_flight_are_dropped_on_resume(tmp_path):
    """trim_metrics keeps the checkpointed generations and skips a line cut by a kill, in
    metrics.jsonl and in elites.jsonl."""
    for g in range(3):
        runs.append_metrics(str(tmp_path), {"generation": g})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"generation": 3, "fra')
    for g in range(4):
        runs.append_line(str(tmp_path), runs.ELITES, {"generation": g, "seeds": [g]})
    runs.trim_metrics(str(tmp_path), 2)
    assert [r["generation"] for r in runs.read_metrics(str(tmp_path))] == [0, 1]
    assert [r["generation"] for r in runs.read_metrics(str(tmp_path), runs.ELITES)] == [0, 1]
    # a kill in the middle of generation 2's elite line: the resumed generation's line stays whole
    with open(tmp_path / runs.ELITES, "a") as f:
        f.write('{"generation": 2, "se')
    runs.trim_metrics(str(tmp_path), 2, say=lambda line: None)
    runs.append_line(str(tmp_path), runs.ELITES, {"generation": 2, "seeds": [2]})
    assert [r["generation"] for r in runs.read_metrics(str(tmp_path), runs.ELITES)] == [0, 1, 2]


def test_the_cpu_clock_of_cores_busy_counts_child_processes():
    """perf/cores_busy's CPU clock (machine.cpu_seconds) counts a live child process's time, as
    the emulator processes' are: a second of a busy child while this process sleeps is in it."""
    busy = "import time\nt = time.time()\nwhile time.time() - t < 5: pass"
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        time.sleep(0.3)
        a, t0 = machine.cpu_seconds(), time.monotonic()
        time.sleep(1.0)
        b, dt = machine.cpu_seconds(), time.monotonic() - t0
        assert b - a >= 0.4 * dt, (b - a, dt)
    finally:
        child.kill()
        child.wait()
