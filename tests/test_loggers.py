"""--tensorboard and --wandb (nevo.runs.loggers): every generation's metrics row in TensorBoard's
event files and in a W&B run (offline here), read back from their files, across a resume; neither
library imported without its flag; one line where one is missing."""

import glob
import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import run_es, run_ga
from nevo import cli, runs
from nevo.runs import loggers
from nevo.settings import typed
from tests.helpers import run_folder
from tests.tiny import CARTPOLE, MAZE


def _records(path: str):
    """The records of a TFRecord file (TensorBoard's events: length, its CRC, data, its CRC)."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        yield data[pos + 12 : pos + 12 + n]
        pos += 12 + n + 4


def tensorboard_scalars(folder: str) -> dict:
    """{(tag, step): value} of every scalar in the run folder's event files, as TensorBoard shows
    them (a SessionLog START at step T purges the points at T and after read before it); a
    (tag, step) shown twice fails."""
    from tensorboardX.proto import event_pb2

    got = {}
    for path in sorted(glob.glob(os.path.join(folder, loggers.TENSORBOARD, "events.out.tfevents.*"))):
        for record in _records(path):
            event = event_pb2.Event.FromString(record)
            if event.HasField("session_log") and event.session_log.status == event_pb2.SessionLog.START:
                got = {(tag, step): v for (tag, step), v in got.items() if step < event.step}
            for v in event.summary.value:
                assert (v.tag, event.step) not in got, (v.tag, event.step)
                got[v.tag, event.step] = v.simple_value
    return got


def expected_scalars(folder: str) -> dict:
    """{(tag, frames): value as float32} of the run's metrics.jsonl, as TensorBoard keeps them."""
    return {
        (k, row["frames"]): float(np.float32(v))
        for row in runs.read_metrics(folder)
        for k, v in loggers.scalars(row).items()
        if k != "frames"
    }


def test_tensorboard_holds_every_metrics_row_against_frames_across_a_resume(tmp_path, monkeypatch):
    """A run with the bare --tensorboard flag, resumed to a larger budget: the event files hold
    each row of metrics.jsonl once, every number of it at the row's frames, nothing else. The
    event files' clock stands still, as when a resume starts in the second the last run ended
    (tensorboardX names its files by the second: the resume once emptied the first file)."""
    import types

    from tensorboardX import event_file_writer

    monkeypatch.setattr(event_file_writer, "time", types.SimpleNamespace(time=lambda: 1_800_000_000.0))
    folder = run_folder(run_ga.main, [*MAZE, "--frame-budget", "1500", "--tensorboard"], tmp_path)
    assert len(runs.read_metrics(folder)) >= 2
    assert tensorboard_scalars(folder) == expected_scalars(folder)
    before = len(runs.read_metrics(folder))
    assert run_ga.main(["--resume", folder, "--frame-budget", "3000"]) == 0
    assert len(runs.read_metrics(folder)) > before
    got = tensorboard_scalars(folder)
    assert got == expected_scalars(folder)
    assert ("score/elite_mean", runs.read_metrics(folder)[-1]["frames"]) in got


def test_a_fallback_to_the_previous_checkpoint_purges_its_tensorboard_points(tmp_path):
    """The last checkpoint found damaged, --resume goes on from the one before and plays its
    generation again: TensorBoard shows each row of metrics.jsonl once (the generation logged
    before is purged, as metrics.jsonl drops it), not twice."""
    folder = run_folder(run_ga.main, [*MAZE, "--frame-budget", "1500", "--tensorboard"], tmp_path)
    with open(os.path.join(folder, runs.CHECKPOINT), "wb") as f:
        f.write(b"damaged")
    assert run_ga.main(["--resume", folder, "--frame-budget", "2000"]) == 0
    assert tensorboard_scalars(folder) == expected_scalars(folder)


def _wandb_records(path: str):
    """The records of a W&B run file (run-ID.wandb): after its 7-byte header, LevelDB's log format,
    32 KiB blocks of records (CRC, length, type: full, first, middle, last) padded with zeros."""
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B"
    block, pos, parts = 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, n, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0:  # the block's padding
            pos += left
            continue
        parts, pos = parts + data[pos + 7 : pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # a full record, or a record's last part
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            yield record
            parts = b""


def _ended(path: str) -> bool:
    """Whether a W&B run file holds its exit record (False while it is still being written)."""
    try:
        return any(r.WhichOneof("record_type") == "exit" for r in _wandb_records(path))
    except Exception:  # noqa: BLE001 (a file cut short mid-write)
        return False


def wandb_logged(folder: str, runs_in: int = 1) -> tuple[set, dict, list]:
    """(the W&B run ids, the config of the last, its history rows without W&B's own fields) of the
    offline W&B runs in a run folder, once runs_in of them are written to their end (W&B's
    service writes an offline run's file in a process of its own, which may end a little after
    the run's finish has returned: up to 60 s waited for each file's exit record)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        paths = sorted(glob.glob(os.path.join(folder, "wandb", "offline-run-*", "run-*.wandb")))
        if sum(_ended(p) for p in paths) >= runs_in:
            break
        time.sleep(0.2)
    ids, config, history = set(), {}, []
    for path in sorted(glob.glob(os.path.join(folder, "wandb", "offline-run-*", "run-*.wandb"))):
        for record in _wandb_records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                ids.add(record.run.run_id)
                update = record.run.config.update
                config = {i.key: json.loads(i.value_json) for i in update if i.key != "_wandb"}
            elif kind == "history":
                items = record.history.item  # ("score/elite_mean": a nested key)
                row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                history.append({k: v for k, v in row.items() if not k.startswith("_")})
    return ids, config, history


@pytest.mark.slow
def test_wandb_offline_logs_every_row_and_the_config_and_a_resume_goes_on_in_one_run(tmp_path, monkeypatch):
    """--wandb PROJECT with WANDB_MODE=offline (no network): the W&B run holds each metrics row's
    numbers in order, config.json as its config; the resumed run logs its rows to the same W&B run
    (its id kept in the run folder)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("config", "cache", "data"):  # nothing of W&B's outside the test's folder
        monkeypatch.setenv(f"WANDB_{name.upper()}_DIR", str(tmp_path / name))
    argv = [*MAZE, "--frame-budget", "1500", "--wandb", "nevo-tests"]
    folder = run_folder(run_ga.main, argv, tmp_path / "runs")
    with open(os.path.join(folder, loggers.WANDB)) as f:
        kept = json.load(f)
    assert kept["project"] == "nevo-tests"
    assert run_ga.main(["--resume", folder, "--frame-budget", "3000"]) == 0
    ids, config, history = wandb_logged(folder, runs_in=2)
    assert ids == {kept["id"]}
    with open(os.path.join(folder, runs.CONFIG)) as f:
        assert config == json.load(f)
    assert history == [loggers.scalars(r) for r in runs.read_metrics(folder)]


def test_es_logs_to_tensorboard_as_the_ga_does(tmp_path):
    """Every loop writes through the same skeleton: an ES run's rows reach TensorBoard too."""
    folder = run_folder(run_es.main, [*CARTPOLE, "--frame-budget", "3000", "--tensorboard", "1"], tmp_path)
    assert tensorboard_scalars(folder) == expected_scalars(folder)


def test_the_switch_reads_as_a_bare_flag_or_a_number():
    def value(*flags):
        cfg, _, _, _ = cli.parse_args(["--env", "CartPole-v1", *flags], "es", "es")
        return cfg.run.tensorboard

    assert value() == 0 and value("--tensorboard") == 1 and value("--tensorboard", "0") == 0
    with pytest.raises(ValueError, match="--tensorboard: got 2, allowed: 0 or 1"):
        value("--tensorboard", "2")
    assert typed("tensorboard", True, "int") == 1  # nevo.train(..., tensorboard=True)
    with pytest.raises(ValueError, match="--population: got True"):
        typed("population", True, "int")


@pytest.mark.parametrize("flag, module", [("--tensorboard", "tensorboardX"), ("--wandb=p", "wandb")])
def test_a_missing_library_is_one_line_before_any_folder(flag, module, tmp_path, monkeypatch, capsys):
    real = loggers.importlib.util.find_spec
    monkeypatch.setattr(loggers.importlib.util, "find_spec", lambda n: None if n == module else real(n))
    assert run_ga.main([*MAZE, "--frame-budget", "1500", flag, "--out-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    name = flag.split("=")[0]
    remedy = f"pip install 'nevo[{name[2:]}]' (or {module})"
    assert err == f"error: {name}: the {module} package is not installed: {remedy}\n"
    assert os.listdir(tmp_path) == []


NOT_IMPORTED = """
import sys
from experiments import run_ga
assert run_ga.main([*sys.argv[1:]]) == 0
print(sorted(m for m in ("tensorboardX", "wandb", "tensorboard") if m in sys.modules))
"""


def test_neither_library_is_imported_without_its_flag(tmp_path):
    run = subprocess.run([sys.executable, "-c", NOT_IMPORTED, *MAZE, "--frame-budget", "600", "--out-dir",
                          str(tmp_path)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "[]"


NO_KEY = """
import sys
from experiments import run_ga
sys.exit(run_ga.main([*sys.argv[1:]]))
"""


@pytest.mark.slow
def test_wandb_online_without_a_key_is_one_line_before_any_folder(tmp_path):
    """--wandb to log online where no API key is configured (a HOME without `wandb login`'s file, no
    WANDB_API_KEY, no terminal): one line naming the remedies, and no run folder; with a key set,
    the check passes without the network (W&B is then kept offline by the test)."""
    home, out = tmp_path / "home", tmp_path / "runs"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), WANDB_DIR=str(tmp_path / "wandb"))
    argv = [sys.executable, "-c", NO_KEY, *MAZE, "--frame-budget", "600", "--wandb", "p", "--out-dir",
            str(out)]  # fmt: skip
    run = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.splitlines()
    assert line.startswith("error: --wandb: no W&B API key (") and line.endswith(
        "run `wandb login`, set WANDB_API_KEY, or log offline with WANDB_MODE=offline"
    ), line
    assert not out.exists() or os.listdir(out) == []
    checked = "from nevo.runs import loggers; loggers._wandb_login(); print('ok')"
    keyed = {**env, "WANDB_API_KEY": "0" * 40}
    run = subprocess.run([sys.executable, "-c", checked], env=keyed, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and run.stdout == "ok\n", run.stderr


def test_a_stop_gives_wandbs_finish_its_bound_and_no_more(capsys):
    """On a stop, a W&B finish that does not return (its network gone) is left after the bound,
    with one line saying where its data stays; at a run's end, finish is waited for."""
    import threading

    called = threading.Event()

    class Hung:
        def finish(self):
            called.set()
            time.sleep(60)

    logs = loggers.Loggers.__new__(loggers.Loggers)
    logs.writer, logs.wandb_run = None, Hung()
    t0 = time.monotonic()
    logs.close(bound_s=0.3)
    assert time.monotonic() - t0 < 5 and logs.wandb_run is None
    # finish was called (in its own thread: on a loaded machine it may start after the bound)
    assert called.wait(10)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("W&B did not finish in 0.3 s; what it has not sent stays")


def test_a_damaged_wandb_json_is_one_line(tmp_path):
    """A wandb.json cut short (a kill mid-write, before it was written whole) is a DamagedFile of
    one line naming it, not a JSONDecodeError."""
    from nevo.settings import DamagedFile

    (tmp_path / loggers.WANDB).write_text('{"id": "ab')
    with pytest.raises(DamagedFile) as e:
        loggers._wandb_run("p", str(tmp_path))
    assert str(e.value).startswith(f"{tmp_path / loggers.WANDB}: damaged") and "\n" not in str(e.value)
