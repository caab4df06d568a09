"""Settings: presets, CLI parsing, validation with clear one-line errors."""

import subprocess
import sys

import pytest

from nevo import cli, config
from nevo.cli import parse_args
from nevo.config import ConfigError


def test_paper_preset_is_the_reference_deep_ga():
    """`paper` is exactly the reference Deep GA of Such et al. 2017 as Uber's GPU code runs it."""
    c = cli.PRESETS["paper"]
    assert (c.ga.population, c.ga.truncation, c.ga.sigma) == (1000, 20, 0.002)
    assert (c.ga.elite_candidates, c.ga.validation_episodes) == (10, 30)
    assert (c.env.frame_cap, c.net.net, c.run.frame_budget) == (20_000, "large", 1_000_000_000)
    assert (c.env.noop_max, c.env.frameskip) == (30, 4)


def test_rs_preset_is_the_ga_loop_with_no_parents():
    """Random search differs from `paper` only in T = 0 and its name."""
    rs, paper = cli.PRESETS["rs"], cli.PRESETS["paper"]
    assert rs.ga.truncation == 0 and rs.ga.population == paper.ga.population


def test_no_arguments_runs_quick_on_frostbite():
    cfg, resume, cluster = parse_args([], "")
    assert cluster is None
    assert cfg.preset == "quick" and cfg.env.game == "frostbite" and cfg.net.net == "small"
    assert resume is None


def test_every_field_has_a_flag_and_overrides_its_preset():
    """Each setting can be set from the command line and lands in its group."""
    cfg, _, _ = parse_args(
        ["--preset", "paper", "--population", "50", "--sigma", "0.01", "--game", "pong"], ""
    )
    assert (cfg.ga.population, cfg.ga.sigma, cfg.env.game) == (50, 0.01, "pong")
    assert cfg.ga.truncation == 20  # untouched fields keep the preset's value
    cfg, _, _ = parse_args(["--frame-budget", "2e6"], "")
    assert cfg.run.frame_budget == 2_000_000


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--game", "frostbit"], ["--game", "frostbite"]),
        (["--sigma", "0"], ["--sigma", "> 0"]),
        (["--sigma", "-1"], ["--sigma"]),
        (["--population", "10", "--truncation", "11"], ["--truncation", "population (10)"]),
        (["--preset", "paperz"], ["--preset", "paper"]),
        (["--frame-budget", "0"], ["--frame-budget", "> 0"]),
        (["--net", "huge"], ["--net", "large", "small"]),
        (["--population", "ten"], ["--population", "int"]),
        (["--resume", "/nonexistent/run"], ["--resume", "not a run folder"]),
        (["--no-such-flag", "1"], ["no-such-flag"]),
    ],
)
def test_bad_values_name_the_field_and_what_is_allowed(argv, words):
    with pytest.raises(ConfigError) as e:
        parse_args(argv, "")
    for w in words:
        assert w in str(e.value)


def test_json_round_trip():
    """A config saved to JSON loads back equal."""
    cfg, _, _ = parse_args(["--preset", "rs", "--seed", "9"], "")
    assert config.from_dict(config.to_dict(cfg)) == cfg


def test_cli_bad_value_is_one_line_without_traceback():
    """The main command prints one clear error line and exits 2, no traceback."""
    p = subprocess.run(
        [sys.executable, "-m", "experiments.run_ga", "--game", "space_invader"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "space_invaders" in lines[0]


def test_help_lists_every_setting_with_its_meaning():
    p = subprocess.run(
        [sys.executable, "-m", "experiments.run_ga", "--help"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0
    for _, f in config.all_fields():
        assert config.flag(f.name) in p.stdout
    assert "mutation power" in p.stdout


def test_a_config_built_in_python_gets_the_command_lines_defaults():
    """apply_defaults gives a Config made in Python what parse_args gives the same choices."""
    from nevo.config import Config, EnvConfig

    for env in ("CartPole-v1", "maze", "frostbite"):
        built, _ = cli.check(cli.apply_defaults(Config(env=EnvConfig(env=env))))
        parsed, _, _ = cli.parse_args(["--preset", "paper", "--env", env], "")
        assert built == parsed, env
    built, _ = cli.check(cli.apply_defaults(Config(env=EnvConfig(env="CartPole-v1")), given={"sigma"}))
    assert built.ga.sigma == Config().ga.sigma and built.ga.population == 64  # sigma was set, population not
