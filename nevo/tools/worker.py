"""Start one Dask worker for nevo on this node.

    nevo worker tcp://10.0.0.1:8786 --host 10.0.0.2      # on each node, where nevo is installed
    python /path/to/nevo/experiments/cluster_worker.py tcp://10.0.0.1:8786  # from a checkout, anywhere

It is `dask worker SCHEDULER` with nevo's settings: one worker process with one Dask thread
(nevo's evaluator uses the node's cores itself), not daemonic (so that code in it may start
processes of its own through multiprocessing), no dashboard, and nevo importable in every
process it starts (from a checkout, the checkout's). With `--host H` the worker's HTTP endpoint
(health, metrics) listens on H too, not on every interface as `dask worker` does. Any other
option goes to `dask worker` as it is, and wins over these defaults (`--nanny-port`,
`--lifetime`, TLS: `--tls-ca-file`, `--tls-cert`, `--tls-key`; `--dashboard --dashboard-address
HOST:PORT` for Dask's dashboard); `--help` lists them.
"""

from __future__ import annotations

import os
import sys

from nevo.cluster.connection import require_dask

# the folder holding the nevo package: a checkout, or an environment's site-packages
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULTS = ["--nworkers", "1", "--nthreads", "1", "--no-dashboard"]


def option(args: list[str], name: str) -> str | None:
    """The value given to option name in args (`--name V` or `--name=V`), else None."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def main(argv: list[str] | None = None) -> None:
    """Run the worker until it is stopped (or its scheduler is gone); exits the process."""
    if os.path.isfile(os.path.join(ROOT, "pyproject.toml")):
        # nevo from a checkout, however this was started: PYTHONPATH carries it to the processes the
        # worker starts (the nanny's worker process, the Atari emulator processes). An installed
        # nevo is found by every Python of its environment already.
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH")] if p)
    # read by Dask's config when it is first imported, below, and by every process it starts
    os.environ["DASK_DISTRIBUTED__WORKER__DAEMON"] = "False"
    try:
        require_dask("nevo worker")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    from distributed.cli import dask_worker

    args = sys.argv[1:] if argv is None else argv
    defaults = list(DEFAULTS)
    host = option(args, "--host")
    if host and option(args, "--dashboard-address") is None:  # Dask's default: ":0", every interface
        defaults += ["--dashboard-address", f"{host}:0"]
    # click keeps an option's last value: the caller's options come after the defaults
    dask_worker.main.main(args=[*defaults, *args], prog_name="nevo worker")


if __name__ == "__main__":
    main()
