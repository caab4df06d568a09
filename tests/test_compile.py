"""nevo compile (nevo.tools.compile): the costly CPU kernel families in Numba's cache, so that the
next process loads them instead of compiling them."""

import os
import subprocess
import sys

import pytest

from nevo.tools import compile as nevo_compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _compile(*args, **env):
    return subprocess.run([sys.executable, "-m", "nevo.tools.compile", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, env={**os.environ, **env})  # fmt: skip


def test_after_nevo_compile_a_new_process_loads_every_family_from_the_cache():
    """(The session ran nevo compile first, so this one loads; a family whose calls stopped
    matching the kernels' types would compile again in --check and fail it.)"""
    done = _compile()
    assert done.returncode == 0, done.stderr
    families = len(nevo_compile.JOBS)
    assert done.stdout.splitlines()[-1].startswith(f"nevo compile: {families} kernel families in")
    check = _compile("--check")
    assert check.returncode == 0, check.stderr
    every = ", ".join(nevo_compile.JOBS)  # (in the order it takes them: the costliest first)
    assert check.stdout.startswith(f"every kernel of {every} loaded from Numba's cache")


@pytest.mark.slow  # the small family compiles afresh: ~10 s
def test_check_names_each_kernel_that_had_to_compile(tmp_path):
    """(In an empty cache; that a filled one passes, the test above shows.)"""
    check = _compile("--check", "--only", "small", NUMBA_CACHE_DIR=str(tmp_path))
    assert check.returncode == 1 and check.stdout == ""
    assert check.stderr.strip() == (
        "nevo compile --check: not in Numba's cache: nevo.atari.emulator.push_frame, "
        "nevo.algos.novelty._knn_kernel"
    )


@pytest.mark.parametrize("args, said", [(["--processes", "0"], "--processes 0: at least 1"),
                                        (["--only", "gpu"], "invalid choice: 'gpu'")])  # fmt: skip
def test_bad_input_is_one_line(args, said, capsys):
    with pytest.raises(SystemExit) as e:
        nevo_compile.main(args)
    assert e.value.code == 2 and said in capsys.readouterr().err.splitlines()[-1]
