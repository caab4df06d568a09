"""nevo installs as a package: `pip install -e .` in a fresh virtual environment, then `import
nevo` from any folder."""

import os
import shutil
import subprocess
import sys

import pytest

from nevo.version import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_pip_install_editable_in_a_fresh_venv_then_import_from_elsewhere(tmp_path):
    """The venv sees this machine's packages (so nothing is downloaded but the build backend);
    pip still checks that they satisfy pyproject.toml's dependencies."""
    src = tmp_path / "nevo-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    shutil.copytree(os.path.join(ROOT, "nevo"), src / "nevo", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "-e", str(src)], capture_output=True, text=True
    )
    assert install.returncode == 0, install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = "import nevo, nevo.algos.ga; print(nevo.__file__, nevo.__version__)"
    out = subprocess.run([python, "-c", probe], cwd=elsewhere, capture_output=True, text=True, check=True)
    path, version = out.stdout.split()
    assert path == str(src / "nevo" / "__init__.py") and version == __version__


def test_requirements_txt_installs_nevo_in_place_with_every_extra():
    """`pip install -r requirements.txt` installs this checkout in place (so `import nevo` works
    from any folder and in every process nevo or a user starts) with every extra pyproject.toml
    declares: its one requirement is `-e .[<all extras>]`, and the versions live in pyproject.toml."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    with open(os.path.join(ROOT, "requirements.txt")) as f:
        lines = [line.split("#")[0].strip() for line in f]
    requirements = [line for line in lines if line]
    assert len(requirements) == 1 and requirements[0].startswith("-e .[")
    extras = requirements[0][len("-e .[") : -1].split(",")
    assert requirements[0].endswith("]") and sorted(extras) == sorted(project["optional-dependencies"])


def test_requirements_gpu_txt_installs_nevo_in_place_too():
    """The GPU machine's requirements install the same checkout in place, plus the CUDA pieces."""
    with open(os.path.join(ROOT, "requirements-gpu.txt")) as f:
        lines = [line.split("#")[0].strip() for line in f]
    assert any(line.startswith("-e .[") for line in lines)


def test_after_the_readme_install_nevo_imports_from_any_folder(tmp_path):
    """The README's `pip install -r requirements.txt` put this checkout in place: a process started
    in another folder, with no PYTHONPATH (a notebook, `dask scheduler`), imports this nevo."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = "import nevo; print(nevo.__file__)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"run `pip install -r requirements.txt` in {ROOT}: {out.stderr[-300:]}"
    assert os.path.realpath(out.stdout.strip()) == os.path.realpath(os.path.join(ROOT, "nevo", "__init__.py"))
