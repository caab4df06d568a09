"""End to end: run_ga and run_ns with --mutation sm-*: the cost in the metrics, the run folder's
experiences, exact resume, replay, and the settings safe mutations refuse."""

import json
import os
import shutil

import numpy as np
import pytest

from experiments import run_ga, run_ns
from nevo import config, nets, runs
from nevo.cli import parse_args
from nevo.genomes import noise
from nevo.loops import elite as elite_files
from nevo.loops import loop
from tests.helpers import metrics_without_clock, run_folder

DEEP = [
    "--env", "CartPole-v1", "--net", "deep", "--population", "12", "--truncation", "3",
    "--elite-candidates", "2", "--validation-episodes", "2", "--noise-table-size", "1000000",
    "--frame-budget", "5000", "--mutation", "sm-g-sum", "--experiences", "20",
]  # fmt: skip


@pytest.fixture(scope="module")
def safe_run(tmp_path_factory):
    return run_folder(run_ga.main, DEEP, str(tmp_path_factory.mktemp("safe")))


def _living(folder):
    """The seed lists the run folder's checkpoint needs: parents, elite, best."""
    st = runs.load_checkpoint(folder)
    parents = np.split(st["parent_seeds"], np.cumsum(st["parent_lengths"])[:-1])
    return [*parents, st["elite"], st["best"]]


@pytest.mark.slow
def test_a_safe_run_logs_the_cost_of_its_mutations(safe_run):
    rows = runs.read_metrics(safe_run)
    assert len(rows) >= 3
    assert all("perf/mutation_s" in r for r in rows)
    assert all(r["perf/mutation_s"] > 0 for r in rows[1:])  # generation 0's networks are fresh
    assert json.load(open(os.path.join(safe_run, runs.ELITE)))["mutation"] == "sm-g-sum"


@pytest.mark.slow
def test_the_run_folder_keeps_the_experiences_of_the_living_and_no_other(safe_run):
    """Every prefix of a living seed list has its experiences; every file is such a prefix's
    (or one of the previous checkpoint's, which --resume may fall back to)."""
    living = _living(safe_run)
    prev = runs.read_checkpoint(os.path.join(safe_run, runs.PREVIOUS))
    living_prev = [*np.split(prev["parent_seeds"], np.cumsum(prev["parent_lengths"])[:-1]), prev["elite"]]
    need = {runs.genome_key(g[:j]) + ".npy" for g in living for j in range(1, len(g) + 1)}
    allowed = need | {runs.genome_key(g[:j]) + ".npy" for g in living_prev for j in range(1, len(g) + 1)}
    files = set(os.listdir(os.path.join(safe_run, runs.EXPERIENCES)))
    assert need <= files <= allowed
    e = runs.load_experiences(safe_run, living[0])
    assert e.dtype == np.float32 and e.shape[1:] == (4, 1, 1) and 1 <= len(e) <= 20


@pytest.mark.slow
def test_a_safe_run_resumed_from_its_previous_checkpoint_ends_the_same(safe_run, tmp_path):
    """A copy rewound one generation (as if killed before its last checkpoint) resumes, rebuilding
    its parents from the experiences on disk, to the same metrics and elite."""
    copy = str(tmp_path / "copy")
    shutil.copytree(safe_run, copy)
    shutil.copy(os.path.join(copy, runs.PREVIOUS), os.path.join(copy, runs.CHECKPOINT))
    assert run_ga.main(["--resume", copy]) == 0
    assert metrics_without_clock(copy) == metrics_without_clock(safe_run)
    assert json.load(open(os.path.join(copy, runs.ELITE))) == json.load(
        open(os.path.join(safe_run, runs.ELITE))
    )


@pytest.mark.slow
def test_replay_rebuilds_a_safe_elite_and_not_as_a_gaussian_one(safe_run):
    cfg, elite, spec, w = elite_files.load(safe_run)
    assert w.shape == (spec.n_params,) and np.isfinite(w).all()
    table = noise.make_table(elite["noise_table_size"], elite["noise_seed"])
    gaussian = noise.NoiseSource(table, nets.init_scale(spec), elite["sigma"]).rebuild(elite["seeds"])
    assert len(elite["seeds"]) >= 2 and not np.array_equal(w, gaussian)


@pytest.mark.slow
def test_an_old_elite_whose_experiences_are_gone_is_one_line_and_a_kept_one_rebuilds(safe_run, tmp_path):
    """elites.jsonl keeps every generation's elite, each rebuilt as the loop built it (the last
    as elite.json's); one whose parent's experiences the run has pruned (removed here, as the run
    removes those of the genomes nothing living descends from) is a one-line ConfigError."""
    lines = runs.read_metrics(safe_run, runs.ELITES)
    _, _, _, last = elite_files.load(safe_run, lines[-1]["generation"])
    np.testing.assert_array_equal(last, elite_files.load(safe_run, "last")[3])
    copy = shutil.copytree(safe_run, tmp_path / "copy")
    bred = next(e for e in lines if len(e["seeds"]) >= 2)
    parent = np.asarray(bred["seeds"][:-1], np.int64)
    os.remove(copy / runs.EXPERIENCES / (runs.genome_key(parent) + ".npy"))
    with pytest.raises(
        config.ConfigError, match=f"generation {bred['generation']}'s elite cannot be rebuilt"
    ):
        elite_files.load(str(copy), bred["generation"])


@pytest.mark.slow
def test_a_missing_experiences_file_stops_the_resume_in_one_line(safe_run, tmp_path, capsys):
    copy = str(tmp_path / "copy")
    shutil.copytree(safe_run, copy)
    shutil.rmtree(os.path.join(copy, runs.EXPERIENCES))
    assert run_ga.main(["--resume", copy]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "missing" in err and "\n" not in err


@pytest.mark.slow
def test_ga_ns_runs_with_a_safe_mutation(tmp_path):
    folder = run_folder(
        run_ns.main,
        ["--env", "maze", "--net", "small", "--population", "6", "--truncation", "2", "--frame-budget",
         "1500", "--noise-table-size", "1100000", "--mutation", "sm-r", "--experiences", "8"],
        str(tmp_path),
    )  # fmt: skip
    rows = runs.read_metrics(folder)
    assert len(rows) >= 2 and all(r["perf/mutation_s"] > 0 for r in rows[1:])
    assert os.listdir(os.path.join(folder, runs.EXPERIENCES))
    _, elite, spec, w = elite_files.load(folder)
    assert elite["mutation"] == "sm-r" and np.isfinite(w).all()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--mutation", "sm-g-max"], "--mutation: got 'sm-g-max', allowed: gaussian, sm-r"),
        (
            ["--preset", "rs", "--mutation", "sm-r"],
            "--mutation: got 'sm-r', allowed: gaussian for random search",
        ),
        (["--mutation", "sm-g-sum", "--experiences", "0"], "--experiences: got 0"),
        (["--mutation", "sm-g-sum", "--vbn", "8"], "--vbn: got 8, allowed: 0 with a safe mutation"),
    ],
)
def test_settings_safe_mutations_refuse_are_one_line(argv, needle):
    with pytest.raises(config.ConfigError, match=needle.replace("(", r"\(")):
        parse_args(argv, "")


def test_a_safe_mutation_on_a_cluster_is_refused_before_any_work():
    cfg, _, cluster, _ = parse_args([*DEEP, "--cluster", "local:1"], "")
    from nevo import tasks

    task = tasks.task_for(cfg.env)
    with pytest.raises(config.ConfigError, match="--cluster: safe mutations"):
        loop.plan(cfg, task, None, cluster)


@pytest.mark.slow
def test_sm_compare_writes_its_table_and_figure(tmp_path):
    """The comparison script runs each operator per seed, then a row per operator and the curves."""
    from experiments import sm_compare

    out = str(tmp_path / "out")
    argv = ["--env", "CartPole-v1", "--operators", "gaussian", "sm-r", "--seeds", "1", "--frame-budget",
            "3000", "--population", "8", "--truncation", "2", "--runs-dir", str(tmp_path / "runs"),
            "--out", out]  # fmt: skip
    assert sm_compare.main(argv) == 0
    table = open(os.path.join(out, "sm_compare.md")).read()
    assert "| gaussian |" in table and "| sm-r |" in table
    assert os.path.exists(os.path.join(out, "sm_compare.png"))
    assert sm_compare.main(argv) == 0  # finished runs are reused
    assert len(os.listdir(tmp_path / "runs")) == 2


@pytest.mark.slow
def test_bench_safe_prints_a_cost_per_operator(capsys):
    from experiments.bench import bench_safe

    argv = ["--net", "small", "--experiences", "3", "--repeats", "1", "--operators", "sm-g-sum", "sm-r"]
    assert bench_safe.main(argv) == 0
    out = capsys.readouterr().out
    assert "sm-g-sum" in out and "sm-r" in out and "%" in out
