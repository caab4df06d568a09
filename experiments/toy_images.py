"""ES and SGD with their defaults on small image data sets made here, not MNIST: do the defaults
for a data set of one's own (nevo.algos.es: ON_TASKS["own data set"]) learn one within a minute?

    python -m experiments.toy_images                      # 3 data sets x 2 seeds: ~11 minutes on 2 cores
    python -m experiments.toy_images --seeds 1 --data glyphs   # one run of each algorithm

The data sets are drawn from numpy's generator alone (no download), the same on every machine;
6,000 train and 1,500 test images each:

- glyphs: 8x8 images of 10 shapes (bars, diagonals, a cross, an X, a box, a ring, a T, an L),
  each shifted by up to 2 pixels, of random brightness, over uniform noise.
- blobs: 12x12 images of a blob in one of the 9 cells of a 3x3 grid (the class), anywhere in
  its cell, beside a dimmer blob anywhere, over Gaussian noise.
- bars: 12x12 images of a bar at one of 6 orientations (the class), of random place and length,
  over Gaussian noise: a dense net must learn the orientation at every place, which ES does slowly.

Each run is `nevo.train(algo, env=data, net=[64], seed=seed)` with every other setting its
default; the table gives the final test accuracy, ES's as a share of SGD's, the examples each
trained on (ES's include its validations) and the wall seconds (compilation included; 2 cores
shared with other work: noisy).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import tempfile
import time

import numpy as np

from nevo.tasks.supervised import DataSet

# (6, 6) templates of the glyphs, drawn with "#"
GLYPHS = {
    "hbar": ["......", "......", "######", "######", "......", "......"],
    "vbar": ["..##..", "..##..", "..##..", "..##..", "..##..", "..##.."],
    "diag": ["#.....", ".#....", "..#...", "...#..", "....#.", ".....#"],
    "anti": [".....#", "....#.", "...#..", "..#...", ".#....", "#....."],
    "plus": ["..##..", "..##..", "######", "######", "..##..", "..##.."],
    "x": ["#....#", ".#..#.", "..##..", "..##..", ".#..#.", "#....#"],
    "box": ["######", "#....#", "#....#", "#....#", "#....#", "######"],
    "ring": [".####.", "#....#", "#....#", "#....#", "#....#", ".####."],
    "tee": ["######", "######", "..##..", "..##..", "..##..", "..##.."],
    "ell": ["##....", "##....", "##....", "##....", "######", "######"],
}
ANGLES = np.deg2rad([0, 30, 60, 90, 120, 150])  # the bars' orientations, one class each


def glyphs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 8, 8) uint8 images of the 10 glyphs and their labels (n,), drawn from seed."""
    rng = np.random.default_rng([seed, 0x61])
    shapes = np.array([[[c == "#" for c in row] for row in g] for g in GLYPHS.values()], np.float32)
    y = rng.integers(0, len(shapes), n)
    x = rng.uniform(0, 120, (n, 8, 8)).astype(np.float32)  # the background noise
    dy, dx = rng.integers(0, 3, n), rng.integers(0, 3, n)  # shifts
    bright = rng.uniform(100, 190, n).astype(np.float32)
    for i in range(n):
        x[i, dy[i] : dy[i] + 6, dx[i] : dx[i] + 6] += bright[i] * shapes[y[i]]
    return np.clip(x, 0, 255).astype(np.uint8), y


def bars(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 12, 12) uint8 images of a bar at one of 6 orientations (one class each) and their
    labels (n,), drawn from seed."""
    rng = np.random.default_rng([seed, 0x62])
    y = rng.integers(0, len(ANGLES), n)
    r, c = np.mgrid[0:12, 0:12].astype(np.float32)  # (12, 12) each
    cy, cx = rng.uniform(3.5, 7.5, (2, n))[..., None, None]  # the bar's centre
    half = rng.uniform(2.5, 4.5, n)[:, None, None]  # half its length
    dr, dc = np.sin(ANGLES[y])[:, None, None], np.cos(ANGLES[y])[:, None, None]
    along = np.clip((r - cy) * dr + (c - cx) * dc, -half, half)  # the nearest point of the bar
    dist = np.hypot(r - cy - along * dr, c - cx - along * dc)  # (n, 12, 12)
    bright = rng.uniform(100, 180, n)[:, None, None]
    x = 40 + bright * np.clip(1.2 - dist, 0, 1) + rng.normal(0, 35, (n, 12, 12))
    return np.clip(x, 0, 255).astype(np.uint8), y


def blobs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 12, 12) uint8 images of a blob in one of 9 cells of a 3x3 grid (one class each),
    anywhere in its cell, beside a dimmer blob anywhere, and their labels (n,), drawn from seed."""
    rng = np.random.default_rng([seed, 0x63])
    y = rng.integers(0, 9, n)
    r, c = np.mgrid[0:12, 0:12].astype(np.float32)  # (12, 12) each
    cy = (4 * (y // 3) + rng.uniform(0, 4, n) - 0.5)[:, None, None]  # the blob's centre, in its cell
    cx = (4 * (y % 3) + rng.uniform(0, 4, n) - 0.5)[:, None, None]
    dy, dx = rng.uniform(0, 11, (2, n))[..., None, None]  # the dimmer one's
    width = rng.uniform(1.0, 1.8, n)[:, None, None]
    blob = np.exp(-((r - cy) ** 2 + (c - cx) ** 2) / (2 * width**2))
    other = np.exp(-((r - dy) ** 2 + (c - dx) ** 2) / (2 * width**2))
    x = 40 + 170 * blob + 80 * other + rng.normal(0, 35, (n, 12, 12))
    return np.clip(x, 0, 255).astype(np.uint8), y


MAKERS = {"glyphs": glyphs, "blobs": blobs, "bars": bars}


def data_set(name: str, train: int = 6000, test: int = 1500) -> DataSet:
    """The data set `name` (glyphs, blobs or bars): train and test images drawn from seeds 0 and 1."""
    make = MAKERS[name]
    return DataSet.of(*make(train, 0), *make(test, 1))


def cpu() -> str:
    """The processor's model name (/proc/cpuinfo), else the machine's architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 of each run (default: 2)")
    p.add_argument("--data", choices=[*MAKERS, "all"], default="all", help="the data sets (default: all)")
    args = p.parse_args(argv)
    import nevo

    names = list(MAKERS) if args.data == "all" else [args.data]
    print(f"{datetime.date.today()} | {cpu()}, {os.cpu_count()} cores | nevo.train(algo, "
          f"env=data, net=[64], seed=seed), every other setting its default")  # fmt: skip
    print("| data set | seed | SGD test acc | ES test acc | ES / SGD | SGD examples | ES examples | SGD s "
          "| ES s |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        data = data_set(name)
        for seed in range(args.seeds):
            got = {}
            for algo in ("sgd", "es"):
                with tempfile.TemporaryDirectory() as folder:
                    t0 = time.monotonic()
                    result = nevo.train(algo, env=data, net=[64], seed=seed, out_dir=folder, progress=False)
                    last = result.metrics[-1]
                    got[algo] = (last["score/test_accuracy"], last["frames"], time.monotonic() - t0)
            (sa, sf, ss), (ea, ef, es) = got["sgd"], got["es"]
            print(f"| {name} | {seed} | {100 * sa:.1f}% | {100 * ea:.1f}% | {100 * ea / sa:.0f}% | "
                  f"{sf:,} | {ef:,} | {ss:.0f} | {es:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
