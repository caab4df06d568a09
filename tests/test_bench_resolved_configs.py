"""experiments.bench.resolved_configs: the cases a refactor of the settings' path compares."""

import json

from experiments.bench import resolved_configs as rc


def test_resolved_configs_hold_each_cases_config_or_its_one_line_error(tmp_path, monkeypatch):
    """Each case is the config as config.json writes it (its algorithm's own section, fitted where
    the flags asked the impossible) or a one-line error; main writes them as JSON, read back equal."""
    monkeypatch.setattr(rc, "TASKS", ("CartPole-v1", "maze"))
    monkeypatch.setattr(rc, "FLAGS", rc.FLAGS[:3] + (("--population", "x"),))
    monkeypatch.setattr(rc, "API", rc.API[:2])
    out = rc.resolved()
    assert all(isinstance(v, dict) or (v.startswith("error ") and "\n" not in v) for v in out.values())
    small = out["--algo ga --preset quick --env CartPole-v1 --population 8"]
    assert small["algo"] == "ga" and small["ga"]["population"] == 8
    assert small["ga"]["truncation"] <= 8 and small["ga"]["elite_candidates"] <= 8  # fitted to it
    assert small["net"]["weights"] in ("fp32", "fp16")  # --weights auto resolved
    assert out["--algo ga --preset quick --env CartPole-v1 --population x"].startswith("error ConfigError:")
    assert out["api ga maze [('population', 12)]"]["ga"]["population"] == 12
    path = tmp_path / "cases.json"
    assert rc.main([str(path)]) == 0
    written = json.loads(path.read_text())
    assert written == json.loads(json.dumps(out))
