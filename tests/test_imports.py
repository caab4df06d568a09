"""Imports flow one way. import-linter checks the import statements (lazy ones inside functions
included) against the contracts in pyproject.toml: nevo's layers, no circle between the modules of
a folder, nothing of the checkout's experiments/ or plots/ in the installed package. What it cannot
see is checked here by hand: imports by a module's name (`importlib.import_module` of a string or
an f-string, a "module:Class" string, `python -m module`), which import-linter's graph, built from
import statements, does not hold; and an import of nevo's own __init__ from below the top layer,
which its contracts cannot name (a module in a contract stands for its descendants too, and nevo's
are all of nevo)."""

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT = os.path.join(os.path.dirname(sys.executable), "lint-imports")  # import-linter's, beside this Python


def contracts(root: str = ROOT) -> dict[str, dict]:
    """pyproject.toml's import contracts, by id."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        return {c["id"]: c for c in tomllib.load(f)["tool"]["importlinter"]["contracts"]}


def layer_of(module: str, root: str = ROOT) -> int:
    """The layer of a nevo module, counted from the bottom (0), as the layers contract draws it:
    that of the child of nevo it is in; nevo itself (its __init__) is in the top one."""
    layers = contracts(root)["layers"]["layers"]
    parts = module.split(".")
    if len(parts) == 1:
        return len(layers) - 1
    for i, layer in enumerate(reversed(layers)):
        if parts[1] in [name.strip() for name in re.split(r"[:|]", layer)]:
            return i
    raise AssertionError(f"{module}: in no layer of pyproject.toml's contract")


def modules_of(root: str = ROOT) -> dict[str, str]:
    """nevo's modules: dotted name -> path."""
    modules = {}
    for folder, _, files in os.walk(os.path.join(root, "nevo")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                modules[os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")] = (
                    path
                )
    return modules


MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def names_imported(node) -> list[str]:
    """The module names a node imports by name: the argument of `import_module(...)` (an
    f-string's constant head, "nevo.plots." of f"nevo.plots.{kind}", as a package and a dot), the
    module of a "module:Name" string, the word after "-m" in a list or tuple of arguments."""
    found = []
    if isinstance(node, ast.Call) and node.args:
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "import_module":
            a = node.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                found.append(a.value)
            elif isinstance(a, ast.JoinedStr) and a.values and isinstance(a.values[0], ast.Constant):
                found.append(a.values[0].value)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.count(":") == 1:
        module = node.value.partition(":")[0]
        if MODULE_NAME.fullmatch(module) and MODULE_NAME.fullmatch(node.value.partition(":")[2]):
            found.append(module)
    elif isinstance(node, (ast.List, ast.Tuple)):
        for a, b in zip(node.elts, node.elts[1:]):
            if isinstance(a, ast.Constant) and a.value == "-m" and isinstance(b, ast.Constant):
                found.append(str(b.value))
    return found


def by_name(root: str = ROOT) -> list[tuple[str, int, str]]:
    """Every import by name in nevo/: (module, line, the name it imports; a package and a dot
    for every module under it)."""
    return [
        (m, node.lineno, name)
        for m, path in modules_of(root).items()
        for node in ast.walk(ast.parse(open(path).read()))
        for name in names_imported(node)
    ]


def by_name_problems(root: str = ROOT) -> list[str]:
    """Imports by name that an import statement in their place would break the contracts with:
    one of the checkout's experiments/ or plots/, or one of a layer above the importer's."""
    found = []
    for m, line, name in by_name(root):
        where = f"{os.path.relpath(modules_of(root)[m], root)}:{line}: {name}"
        top = name.rstrip(".").split(".")[0]
        if top in ("experiments", "plots"):
            found.append(f"{where} (the checkout's, not installed)")
        elif top == "nevo" and layer_of(name.rstrip("."), root) > layer_of(m, root):
            found.append(f"{where} (a layer above {m}'s)")
    return found


def root_imports(root: str = ROOT) -> list[str]:
    """Imports of nevo's own __init__ (`import nevo`, or a name from it that is not a module) in
    modules below the top layer."""
    modules, found = modules_of(root), []
    top = len(contracts(root)["layers"]["layers"]) - 1
    for m, path in modules.items():
        if layer_of(m, root) == top:
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Import) and any(a.name == "nevo" for a in node.names):
                found.append(f"{m}:{node.lineno}: import nevo")
            elif isinstance(node, ast.ImportFrom) and node.module == "nevo" and node.level == 0:
                found += [f"{m}:{node.lineno}: from nevo import {a.name}" for a in node.names
                          if f"nevo.{a.name}" not in modules]  # fmt: skip
    return found


def lint(root: str) -> subprocess.CompletedProcess:
    """lint-imports on root's pyproject.toml, its packages found there."""
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.run([LINT, "--config", os.path.join(root, "pyproject.toml"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip


def test_the_import_contracts_hold():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_imports_by_name_keep_the_contracts_and_nevo_itself_is_imported_from_the_top_only():
    assert len(by_name()) >= 5  # (the command's tools and plots, the emulator processes' -m)
    assert by_name_problems() == []
    assert root_imports() == []


@pytest.fixture
def fake_checkout(tmp_path):
    """A package named nevo with every child the layers contract names (empty modules), and the
    checkout's experiments/ and plots/, beside this pyproject.toml's contracts."""
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path)
    for pkg in ("nevo", "experiments", "plots"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for layer in contracts()["layers"]["layers"]:
        for name in re.split(r"[:|]", layer):
            (tmp_path / "nevo" / f"{name.strip()}.py").write_text("")
    return tmp_path


def test_the_contracts_see_an_import_up_a_circle_a_module_without_a_layer_and_the_checkout(fake_checkout):
    """Each contract breaks on what it is there for: tasks importing an evaluator (as before
    nevo.evaluation.setup.evaluator_for), a circle of three modules in one folder, a new child
    of nevo in no layer, the installed package importing experiments/; and the hand checks see an
    import by name of a layer above, of plots/, and nevo itself imported from below."""
    nevo = fake_checkout / "nevo"
    assert lint(str(fake_checkout)).returncode == 0
    (nevo / "tasks.py").write_text("def f():\n    from nevo import evaluation\n")
    (nevo / "algos.py").unlink()
    (nevo / "algos").mkdir()
    (nevo / "algos" / "__init__.py").write_text("")
    for a, b in (("a", "b"), ("b", "c"), ("c", "a")):
        (nevo / "algos" / f"{a}.py").write_text(f"from nevo.algos import {b}\n")
    (nevo / "newcomer.py").write_text("")
    (nevo / "nets.py").write_text("import experiments\n")
    out = lint(str(fake_checkout)).stdout
    assert "Contracts: 0 kept, 3 broken." in out, out
    assert "nevo.tasks -> nevo.evaluation" in out and "nevo.newcomer" in out
    assert "nevo.nets -> experiments" in out and "No cycles are allowed in nevo.algos." in out
    (nevo / "newcomer.py").unlink()  # (the hand checks ask each module's layer)
    (nevo / "genomes.py").write_text(
        "import importlib\n"
        "import nevo\n"
        "def f(kind):\n"
        "    importlib.import_module(f'nevo.loops.{kind}')\n"
        "    return ['-m', 'nevo.nets'], 'plots.table:main'\n"
    )
    assert by_name_problems(str(fake_checkout)) == [
        "nevo/genomes.py:4: nevo.loops. (a layer above nevo.genomes's)",
        "nevo/genomes.py:5: plots.table (the checkout's, not installed)",
    ]
    assert root_imports(str(fake_checkout)) == ["nevo.genomes:2: import nevo"]


def test_no_test_module_imports_another():
    """What tests share is in tests/helpers.py (or tests/tiny.py, tests/dask_procs.py): no module
    of tests/ imports a name from a test module other than itself (a script a test runs in a child
    process may import its own)."""
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "tests")):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            own = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
            for node in ast.walk(ast.parse(open(path).read())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.test_"):
                    if node.module != own:
                        found.append(f"{own}:{node.lineno}: from {node.module}")
    assert not found, found


def test_the_tasks_load_atari_s_kind_alone_and_a_data_set_is_found_without_ale_py():
    """nevo.tasks registers Atari's kind by importing nevo.atari, which imports the kind alone (the
    evaluator, its pool and the CPU forward stay unloaded until an evaluator is made); and the
    registry asks the data set's kind before Atari's, so `--env mnist` loads no emulator (Atari's
    matcher reads ale-py's ROM list)."""
    code = (
        "import sys\n"
        "from nevo import tasks\n"
        "from nevo.settings import EnvConfig\n"
        "assert tasks.kind_of(EnvConfig(env='mnist')) is tasks.Supervised\n"
        "print(sorted(m for m in sys.modules if m.startswith('nevo.atari') or m == 'ale_py'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "['nevo.atari', 'nevo.atari.game']", out.stdout
