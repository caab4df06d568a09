"""Settings: presets, CLI parsing, validation with clear one-line errors."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from nevo import cli, config
from nevo.algos import OWN
from nevo.cli import parse_args
from nevo.config import ConfigError


def test_paper_preset_is_the_reference_deep_ga():
    """`paper` is exactly the reference Deep GA of Such et al. 2017 as Uber's GPU code runs it."""
    c = cli.presets_of("ga")["paper"]
    assert (c.settings.population, c.settings.truncation, c.settings.sigma) == (1000, 20, 0.002)
    assert (c.settings.elite_candidates, c.settings.validation_episodes) == (10, 30)
    assert (c.env.frame_cap, c.net.net, c.run.frame_budget) == (20_000, "large", 1_000_000_000)
    assert (c.env.noop_max, c.env.frameskip) == (30, 4)


def test_rs_preset_is_the_ga_loop_with_no_parents():
    """Random search differs from `paper` only in T = 0 and its name."""
    rs, paper = cli.presets_of("ga")["rs"], cli.presets_of("ga")["paper"]
    assert rs.settings.truncation == 0 and rs.settings.population == paper.settings.population


def test_no_arguments_runs_quick_on_frostbite():
    cfg, resume, cluster, task = parse_args([], "")
    assert cluster is None
    assert cfg.preset == "quick" and cfg.env.game == "frostbite" and cfg.net.net == "small"
    assert resume is None
    assert task.name == "frostbite"  # the task the check built, handed on (built once)


def test_every_field_has_a_flag_and_overrides_its_preset():
    """Each setting can be set from the command line and lands in its group."""
    cfg, _, _, _ = parse_args(
        ["--preset", "paper", "--population", "50", "--sigma", "0.01", "--game", "pong"], ""
    )
    assert (cfg.settings.population, cfg.settings.sigma, cfg.env.game) == (50, 0.01, "pong")
    assert cfg.settings.truncation == 20  # untouched fields keep the preset's value
    cfg, _, _, _ = parse_args(["--frame-budget", "2e6"], "")
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
    cfg, _, _, _ = parse_args(["--preset", "rs", "--seed", "9"], "")
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
        built = cli.apply_defaults(Config(env=EnvConfig(env=env)))
        cli.check(built)
        parsed, _, _, _ = cli.parse_args(["--preset", "paper", "--env", env], "")
        assert built == parsed, env
    built = cli.apply_defaults(Config(env=EnvConfig(env="CartPole-v1")), given={"sigma"})
    cli.check(built)
    assert (
        built.settings.sigma == Config().settings.sigma and built.settings.population == 64
    )  # sigma was set, population not


def test_the_defaults_are_what_they_change_and_never_a_setting_given():
    """defaults_of names only the settings it changes: the kind's spelling of the task, the
    declaration's values for the kind where not given, what a given setting makes impossible."""
    from nevo.config import Config, EnvConfig, override

    cfg = override(Config(env=EnvConfig(env="assault")), {"population": 7, "sigma": 0.01})
    brought = cli.defaults_of(cfg, given={"population", "sigma"})
    assert brought["env"] == "atari" and brought["game"] == "assault"
    assert "population" not in brought and "sigma" not in brought
    assert brought["truncation"] == 7  # the preset's truncation above the given population
    assert all(getattr(cli.apply_defaults(cfg, {"population", "sigma"}).settings, k, v) == v
               for k, v in brought.items() if hasattr(cfg.settings, k))  # fmt: skip
    again = cli.apply_defaults(cfg, {"population", "sigma"})
    assert cli.defaults_of(again, given={"population", "sigma"}) == {}  # nothing left to bring


CORRIDOR = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "kinds", "corridor.py"
)  # a kind of one's own


def _unlike_default(value):
    """A value of the same type as value that differs from it."""
    if isinstance(value, str):
        return value + "-x"
    return value + 3 if isinstance(value, int) else value * 1.5 + 0.25


@pytest.mark.parametrize("algo", OWN)
def test_every_setting_of_every_algorithm_survives_config_json(algo, tmp_path):
    """A config whose every field (taken from the dataclasses, so a section or field added later
    is covered) differs from its default is saved as config.json and loads back equal."""
    import dataclasses

    cfg = config.Config(algo=algo, preset="quick")
    for group in config.groups(algo):
        section = config.part(cfg, group)
        own = section
        if group == "env":  # the task section of a kind of one's own, with its own setting (--length)
            own = config.override(cfg, {"env": "corridor", "env_module": CORRIDOR}).env
        changed = {f.name: _unlike_default(getattr(own, f.name)) for f in dataclasses.fields(own)}
        if group == "env":  # (its tasks' name and its module, as it is found again)
            changed.update(env="corridor", env_module=CORRIDOR)
        attribute = group if group in ("env", "net", "run") else "settings"
        cfg = dataclasses.replace(cfg, **{attribute: dataclasses.replace(own, **changed)})
        assert all(getattr(config.part(cfg, group), n) != getattr(section, n, None) for n in changed)
    path = str(tmp_path / "config.json")
    config.save(cfg, path, {"git_commit": "abc", "shapes": {"obs": [4, 1, 1]}})
    assert config.load(path) == cfg


@pytest.mark.parametrize(
    "argv, fitted",
    [
        (["--population", "8"], {"truncation": 8, "elite_candidates": 3}),  # quick: T 8, 3 candidates
        (["--population", "2"], {"truncation": 2, "elite_candidates": 2}),
        (["--preset", "paper", "--population", "5"], {"truncation": 5, "elite_candidates": 5}),
    ],
)
def test_defaults_follow_the_population_the_user_set(argv, fitted):
    """A truncation or elite count the user did not set never exceeds the population they did."""
    cfg, _, _, _ = parse_args(argv, "")
    assert {k: getattr(cfg.settings, k) for k in fitted} == fitted


def test_run_ns_quick_with_a_small_population_fits_its_truncation():
    """run_ns --algo ga-ns --env maze --population 8: the quick truncation 10 becomes 8."""
    cfg, _, _, _ = parse_args(["--algo", "ga-ns", "--env", "maze", "--population", "8"], "", "ga-ns")
    assert (cfg.settings.population, cfg.settings.truncation) == (8, 8)


def test_an_explicit_impossible_value_is_still_refused():
    with pytest.raises(ConfigError, match=r"--truncation: got 10, allowed: 1 \.\. population \(8\)"):
        parse_args(["--algo", "ga-ns", "--population", "8", "--truncation", "10"], "", "ga-ns")
    with pytest.raises(ConfigError, match="--elite-candidates: got 9"):
        parse_args(["--population", "8", "--elite-candidates", "9"], "")
    with pytest.raises(ConfigError, match="an even number with --mirrored 1"):
        parse_args(["--population", "7", "--mirrored", "1"], "", "es")


def test_es_defaults_drop_virtual_batch_norm_where_it_cannot_fold():
    """ES's quick preset (vbn 128) with --obs-norm 1: no virtual batch norm; set explicitly, refused."""
    cfg, _, _, _ = parse_args(["--obs-norm", "1"], "", "es")
    assert (cfg.net.vbn, cfg.settings.obs_norm) == (0, 1)
    with pytest.raises(ConfigError, match="--vbn: got 128, allowed: 0 with --obs-norm 1"):
        parse_args(["--obs-norm", "1", "--vbn", "128"], "", "es")


def test_settings_given_to_override_are_checked_for_their_type():
    """From Python as from the command line: the setting's flag and the type allowed, in one line."""
    with pytest.raises(ConfigError, match=r"^--population: got 'many', allowed: an int$"):
        config.override(config.Config(), {"population": "many"})
    with pytest.raises(ConfigError, match=r"^--sigma: got True, allowed: a float$"):
        config.override(config.Config(), {"sigma": True})
    with pytest.raises(
        ConfigError, match=r"unknown setting 'populaton' for ga \(did you mean population\?\)"
    ):
        config.override(config.Config(), {"populaton": 3})
    import numpy as np

    cfg = config.override(config.Config(), {"population": np.int64(12), "sigma": 1})
    assert (cfg.settings.population, cfg.settings.sigma) == (12, 1.0) and type(cfg.settings.population) is int


def test_grad_corr_brings_the_shared_batch_and_the_plain_net_it_needs():
    """--grad-corr 1 alone (common episodes 0 and ES's preset vbn 128 by default) fits them; set
    explicitly against it, they stay, and the run's check refuses them."""
    es = config.Config(algo="es", net=config.NetConfig(vbn=128), settings=config.ESConfig(grad_corr=1))
    fitted = cli.fitted(es, given={"grad_corr"})
    assert (fitted["common_episodes"], fitted["vbn"]) == (1, 0)
    kept = cli.fitted(es, given={"grad_corr", "common_episodes", "vbn"})
    assert "common_episodes" not in kept and "vbn" not in kept


OLD_NS = {  # the one "ns" section every novelty-search run folder wrote before each kind had its own
    "population": 64, "sigma": 0.005, "truncation": 10, "k": 7, "archive_prob": 0.2, "meta_population": 4,
    "optimizer": "adam", "lr": 0.02, "l2": 0.001, "momentum": 0.9, "mirrored": 1, "reward_weight": 0.4,
    "nsra_patience": 3, "nsra_delta": 0.1, "validation_episodes": 2, "obs_norm": 0, "mutation": "gaussian",
    "experiences": 100,
}  # fmt: skip


@pytest.mark.parametrize("algo", ["ga-ns", "nsra-es"])
def test_a_novelty_run_folder_from_before_its_own_section_loads(algo, tmp_path):
    """GA-NS takes the GA's settings and the archive's, the ES family ES's and the meta-population's
    (nevo.settings.compose): an older config.json's shared "ns" section loads into either, the
    values it reads kept, the others dropped; saved again, only its own remain."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"algo": algo, "ns": OLD_NS, "preset": "quick", "git_commit": "abc"}))
    cfg = config.load(str(path))
    kind = {"ga-ns": config.GANSConfig, "nsra-es": config.NSESConfig}[algo]
    assert type(cfg.settings) is kind
    mine = {f.name for f in dataclasses.fields(kind)}
    assert dataclasses.asdict(cfg.settings) == {k: v for k, v in OLD_NS.items() if k in mine}
    assert ("truncation" in mine) == (algo == "ga-ns") and ("lr" in mine) == (algo != "ga-ns")
    config.save(cfg, str(path))
    assert set(json.loads(path.read_text())["ns"]) == mine and config.load(str(path)) == cfg


def test_no_algorithm_is_named_outside_nevo_algos():
    """An algorithm owns its defaults and presets (its declaration: on_tasks, on_task, presets,
    defaults): no code outside nevo/algos/ names one of nevo's algorithms in a string (docstrings
    aside; the optimizer "sgd" of nevo.settings.OPTIMIZERS is an optimizer's name)."""
    import ast
    import os

    from nevo.algos import OWN

    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nevo")
    found = []
    for folder, _, files in os.walk(root):
        if os.path.relpath(folder, root).split(os.sep)[0] == "algos":
            continue
        for name in (f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            tree = ast.parse(open(path).read())
            skip = set()
            for node in ast.walk(tree):
                body = getattr(node, "body", None)
                if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
                    skip.add(id(body[0].value))  # a docstring
                targets = getattr(node, "targets", [])
                if isinstance(node, ast.Assign) and any(
                    getattr(t, "id", "") == "OPTIMIZERS" for t in targets
                ):
                    skip.update(id(n) for n in ast.walk(node.value))
            found += [f"{os.path.relpath(path, root)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and n.value in OWN and id(n) not in skip]  # fmt: skip
    assert not found, found


def test_each_command_takes_its_presets_from_its_algorithms_declarations():
    """A command's presets are those its algorithms declare, in their order, each with the
    algorithm it names (or the declaration's first); a preset made for a kind of task says so."""
    from nevo.algos import OWN, declaration

    for command in ("ga", "es", "ga-ns", "sgd"):  # each module's declarations: one command
        presets = cli.presets_of(command)
        declared_here = []
        for name in OWN:
            d = declaration(name)
            if d.make.__module__ == declaration(command).make.__module__ and all(
                d is not e for e in declared_here
            ):
                declared_here.append(d)
        assert list(presets) == [p for d in declared_here for p in d.presets]
        for d in declared_here:
            for p, spec in d.presets.items():
                assert presets[p].algo == spec.get("algo", d.names[0]) and presets[p].preset == p
                assert type(presets[p].settings) is d.settings
    assert cli.made_for("mujoco", "es") == cli.made_for("humanoid", "nsr-es") == "mujoco"
    assert cli.made_for("quick", "ga") is None


def test_atari_emulator_processes_are_processes_and_the_old_threads_flag_is_read_as_it(tmp_path, capsys):
    """--processes counts an Atari game's emulator processes; --threads given for one (its flag
    before) is read as --processes with one line on stderr, and config.json then names processes;
    a run folder's config from before keeps its count on resume, and the pipeline takes it;
    --processes on a task of another kind is refused in one line."""
    from dataclasses import replace

    from nevo import config as config_module
    from nevo.atari.evaluator import layout

    cfg = parse_args(["--game", "frostbite", "--processes", "3"], "").cfg
    assert (cfg.run.processes, cfg.run.threads) == (3, 0) and capsys.readouterr().err == ""
    old = parse_args(["--game", "frostbite", "--threads", "3"], "").cfg
    assert (old.run.processes, old.run.threads) == (3, 0)
    err = capsys.readouterr().err
    assert err == ("note: --threads on an Atari game counts emulator processes, whose flag is --processes "
                   "now: read as --processes 3\n")  # fmt: skip
    with pytest.raises(
        ConfigError, match=r"^--threads: an Atari game's emulator processes are --processes alone"
    ):
        parse_args(["--game", "frostbite", "--threads", "3", "--processes", "2"], "")
    with pytest.raises(
        ConfigError, match=r"^--processes: got 2, allowed: 0 \(emulator processes are an Atari"
    ):
        parse_args(["--env", "CartPole-v1", "--processes", "2"], "")
    assert parse_args(["--env", "CartPole-v1", "--threads", "2"], "").cfg.run.threads == 2
    # a run folder written before --processes: its config.json has threads, no processes
    folder = tmp_path / "run"
    folder.mkdir()
    saved = config_module.to_dict(replace(old, run=replace(old.run, threads=3, processes=0)))
    del saved["run"]["processes"]
    (folder / "config.json").write_text(json.dumps(saved))
    resumed = parse_args(["--resume", str(folder)], "").cfg
    assert (resumed.run.processes, resumed.run.threads) == (3, 0) and capsys.readouterr().err == ""
    assert layout("cpu", 16, 1000, replace(resumed.run, pipeline="workers"))[0] == 3


def test_an_int_flag_takes_a_count_of_thousands_millions_or_billions():
    """--frame-budget 25M is 25,000,000 (K, M, B, either case, read exactly: 16.1K is 16,100; an
    exponent too); a count that is not whole or not finite, or another suffix, is one line naming
    the flag."""
    for text, want in (("25M", 25_000_000), ("2.5k", 2_500), ("16.1K", 16_100), ("1.005M", 1_005_000),
                       ("1B", 10**9), ("3e6", 3_000_000), ("700", 700)):  # fmt: skip
        cfg, _, _, _ = parse_args(["--frame-budget", text], "", "ga")
        assert cfg.run.frame_budget == want
    for text in ("2.5", "1.0005K", "25X", "M", "infK", "nan"):
        with pytest.raises(ConfigError, match=rf"^argument --frame-budget: got '{text}', allowed: an int$"):
            parse_args(["--frame-budget", text], "", "ga")
