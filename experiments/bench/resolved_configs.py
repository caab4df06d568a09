"""Every resolved config of the command line and the Python API, as JSON: what a refactor of the
settings' path must leave unchanged, compared with `cmp` before and after.

    python -m experiments.bench.resolved_configs /tmp/before.json     # on the commit before
    python -m experiments.bench.resolved_configs /tmp/after.json      # on the change
    cmp /tmp/before.json /tmp/after.json

Each of nevo's commands, for each of its algorithms, presets, TASKS and FLAGS: `cli.parse_args` on
`--algo A --preset P --env T FLAGS` (the task is built and checked too), its config as config.json
writes it, or its one-line error; then the Python API's path (`cli.apply_defaults` over
`config.override`) for every algorithm on every task with a few arguments. The refused
combinations' messages are compared as well.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json

from nevo import cli, config
from nevo.algos import COMMANDS, OWN
from nevo.config import ConfigError

TASKS = (
    "frostbite",
    "atari",
    "pong",
    "maze",
    "CartPole-v1",
    "Acrobat-v1",
    "Hopper-v4",
    "HalfCheetah-v4",
    "Humanoid-v4",
    "mnist",
    "Pendulum-v1",
    "Swimmer-v4",
)  # fmt: skip  (Acrobat: a misspelt task's line)
FLAGS = (
    (),
    ("--population", "8"),
    ("--population", "37", "--truncation", "50", "--net", "small"),
    ("--weights", "fp32", "--vbn", "128"),
    ("--net", "large", "--mutation", "sm-g-sum"),
    ("--obs-norm", "1"),
    ("--grad-corr", "1"),
    ("--elite-candidates", "99"),
    ("--population", "x"),
    ("--sigma", "-1"),
    ("--net", "mlp-tanh", "--vbn", "64"),
    ("--frame-cap", "100", "--noop-max", "5"),
)
API = ({}, {"population": 12}, {"population": 3, "net": "small"}, {"weights": "fp32", "sigma": 0.5})


def resolved(tasks=None, flags=None, api=None) -> dict:
    """{case: its config as config.json writes it, or "error TYPE: its line"}; by default every case
    of TASKS, FLAGS and API."""
    tasks, flags, api = tasks or TASKS, flags or FLAGS, api or API
    out = {}
    for command in dict.fromkeys(COMMANDS[n][0].names[0] for n in OWN):
        presets = cli.presets_of(command)
        for algo in cli.algorithms_of(command):
            for preset in presets:
                for env in tasks:
                    for more in flags:
                        argv = ["--algo", algo, "--preset", preset, "--env", env, *more]
                        try:
                            with contextlib.redirect_stderr(io.StringIO()):
                                out[" ".join(argv)] = config.to_dict(cli.parse_args(argv, "", command).cfg)
                        except (ConfigError, ValueError) as e:
                            out[" ".join(argv)] = f"error {type(e).__name__}: {e}"
    for algo in OWN:
        for env in tasks:
            for given in api:
                key = f"api {algo} {env} {sorted(given.items())}"
                try:
                    cfg = config.Config(env=config.EnvConfig(env=env), algo=algo)
                    out[key] = config.to_dict(cli.apply_defaults(config.override(cfg, given), given))
                except (ConfigError, ValueError) as e:
                    out[key] = f"error {type(e).__name__}: {e}"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", help="the JSON file to write")
    args = p.parse_args(argv)
    out = resolved()
    with open(args.out, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    errors = sum(isinstance(v, str) for v in out.values())
    print(f"{len(out):,} cases, {errors:,} of them one-line errors: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
