"""experiments/bench/bench_mnist.py on random images at tiny shapes: a forward row per net and shape, and
an ES generation whose parts' shares sum to 1 (no timing is asserted)."""

from experiments.bench import bench_mnist


def table(out: str, header: str) -> list[list[str]]:
    """The cells of each row of the markdown table under `header`, its rule skipped."""
    lines = out.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_bench_mnist_prints_a_row_per_net_and_shape_and_shares_that_sum_to_one(capsys):
    argv = ["--data", "synthetic", "--nets", "mnist", "mnist-large", "--individuals", "1", "2",
            "--examples", "3", "--population", "4", "--repeats", "1"]  # fmt: skip
    assert bench_mnist.main(argv) == 0
    out = capsys.readouterr().out

    forward = table(out, bench_mnist.FORWARD_HEADER)
    cpu = [(r[1], r[2], int(r[3]), int(r[4]), int(r[5])) for r in forward if r[0] == "cpu"]
    assert cpu == [
        ("mnist", "28,938", 1, 3, 3),
        ("mnist", "28,938", 2, 3, 6),
        ("mnist-large", "3,274,634", 1, 3, 3),
        ("mnist-large", "3,274,634", 2, 3, 6),
    ]
    assert all(float(r[7].replace(",", "")) > 0 for r in forward)
    assert ("torch: not installed" in out) != any(r[0].startswith("torch-") for r in forward)

    es = {r[0]: (float(r[1]), float(r[2])) for r in table(out, bench_mnist.ES_HEADER)}
    parts = ["ask", "forward", "rest of evaluation", "tell"]
    assert list(es) == [*parts, "generation"]
    assert abs(sum(es[p][1] for p in parts) - 1) <= 0.001
    assert abs(sum(es[p][0] for p in parts) - es["generation"][0]) <= 0.001
    assert "cores" in out and "Numba threads" in out and "load" in out
