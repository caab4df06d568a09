"""experiments.es_vs_sgd in its tiny mode: SGD and its proxies stop at --sgd-examples, the two ES
methods at equal evaluations (the same generations, validated --points times, the last always);
the table, the figure and the commands are written, and a second call reuses the runs."""

import os

import numpy as np
import pytest

import nevo.tasks.mnist_data
from experiments import es_vs_sgd
from nevo import runs

HAVE_MNIST = os.path.isfile(os.path.join(nevo.tasks.mnist_data.cache_dir(), "mnist.npz"))


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_MNIST, reason="MNIST is not in the cache (python -m experiments.get_mnist)")
def test_tiny_comparison_writes_the_table_and_reuses_its_runs(tmp_path, capsys):
    runs_dir, out = str(tmp_path / "runs"), str(tmp_path / "out")
    argv = ["--tiny", "--runs-dir", runs_dir, "--out", out]
    assert es_vs_sgd.main(argv) == 0
    text = open(os.path.join(out, "es_vs_sgd.md")).read()
    assert os.path.getsize(os.path.join(out, "es_vs_sgd.png")) > 1000
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    table = list(rows)
    assert [r.split(" | ")[0][2:] for r in rows] == list(es_vs_sgd.METHODS)
    for r in rows:
        cells = r.split(" | ")
        es = "ES" in cells[0]
        assert 0 <= float(cells[1]) <= 100 and 0 <= float(cells[2]) <= 100 and cells[4] == "1"
        assert (cells[5], cells[6]) == (("2,000", "10") if es else ("1,000", "20"))
    for slug in ("sgd-0", "nmbes-0", "mbes-0"):  # validations never counted as training examples
        (folder,) = os.listdir(os.path.join(runs_dir, slug))
        rows = runs.read_metrics(os.path.join(runs_dir, slug, folder))
        assert es_vs_sgd.training_examples(rows)[-1] == (1000 if slug == "sgd-0" else 2000)
        if slug != "sgd-0":  # 10 generations, theta tested after the 5th and the last
            assert [r["generation"] for r in rows if "score/test_accuracy" in r] == [4, 9]
    accuracy = [r["score/test_accuracy"] for r in rows if "score/test_accuracy" in r]  # mbes-0's
    (mb,) = [r.split(" | ") for r in table if r.startswith("| mini-batch ES |")]
    assert float(mb[2]) == round(100 * np.mean(accuracy), 2) and float(mb[3]) == round(
        100 * np.std(accuracy), 2
    )
    assert float(mb[1]) == round(100 * accuracy[-1], 2)
    assert "python -m experiments.run_es --env mnist --seed 0" in text
    lead = [line for line in text.splitlines() if line.startswith("NMB-ES against mini-batch ES")]
    assert len(lead) == 1 and "test points" in lead[0] and " of 2 test points" in lead[0]
    capsys.readouterr()

    assert es_vs_sgd.main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.count("reusing") == len(es_vs_sgd.METHODS)
    assert all(len(os.listdir(os.path.join(runs_dir, d))) == 1 for d in os.listdir(runs_dir))
    again = open(os.path.join(out, "es_vs_sgd.md")).read()
    assert again.split("## Machine")[0] == text.split("## Machine")[0]
