"""Imports flow one way: no nevo module reaches itself again through any chain of imports (lazy
imports inside functions included, and imports by name: `importlib.import_module` of a string or
an f-string, a "module:Class" string, `python -m module`), and nothing in nevo/ reaches the
checkout's experiments/ or plots/, which are not installed."""

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nevo_imports(root: str = ROOT) -> dict[str, set[str]]:
    """module -> the nevo modules it imports anywhere in its file (a name imported from a package
    counts as that submodule where one exists, else as the package)."""
    modules = {}
    for folder, _, files in os.walk(os.path.join(root, "nevo")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".").removesuffix(".__init__")
                modules[name] = path
    deps = {m: set() for m in modules}
    for m, path in modules.items():
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nevo"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    deps[m].add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                deps[m].update(a.name for a in node.names if a.name.startswith("nevo"))
            else:
                deps[m].update(named_modules(node, modules))
        deps[m] &= set(modules)
        deps[m].discard(m)
    return deps


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


def named_modules(node, modules) -> set[str]:
    """The nevo modules a node imports by name (names_imported): a package and a dot stands for
    every module under it."""
    found = set()
    for name in names_imported(node):
        if name.endswith("."):  # the package (imported first) and each module under it
            found.update(n for n in modules if n.startswith(name) or n == name[:-1])
        elif name in modules:
            found.add(name)
    return found


def checkout_names(root: str = ROOT) -> list[str]:
    """Every place a nevo module reaches the checkout's experiments/ or plots/ packages: an import
    statement, or an import by name (names_imported)."""
    found = []
    outside = ("experiments", "plots")
    for folder, _, files in os.walk(os.path.join(root, "nevo")):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            for node in ast.walk(ast.parse(open(path).read())):
                names = [n.rstrip(".") for n in names_imported(node)]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                for n in names:
                    if n.split(".")[0] in outside:
                        found.append(f"{os.path.relpath(path, root)}:{node.lineno}: {n}")
    return found


def circles(deps: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each as the modules on it in import order (one circle per strongly
    connected set of modules, found by Tarjan's algorithm, then one path around it)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(deps[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(_path_around(group, deps))

    for v in sorted(deps):
        if v not in index:
            visit(v)
    return found


def _path_around(group: set[str], deps) -> list[str]:
    """A circle through the first module of a strongly connected set, back to it."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first, inside the group, until an edge returns to start
        nxt = []
        for v in frontier:
            for w in sorted(deps[v] & group):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return sorted(group)


def test_no_module_reaches_itself_through_any_chain_of_imports():
    deps = nevo_imports()
    assert len(deps) > 20 and "nevo.config" in deps["nevo.cli"]  # the walk found the package
    assert circles(deps) == []


def test_nothing_in_nevo_reaches_experiments_or_plots():
    """The installed package is nevo alone: no import, import_module or module-shaped string in it
    names the checkout's experiments/ or plots/."""
    assert checkout_names() == []


def test_imports_by_name_are_seen(tmp_path):
    """An import by a module's name (import_module of a constant or an f-string, "module:Class",
    `-m module`) counts as an import, and a name of experiments/ or plots/ is found however given."""
    pkg = tmp_path / "nevo"
    (pkg / "plots").mkdir(parents=True)
    for f in ("__init__.py", "low.py", "plots/__init__.py", "plots/curves.py"):
        (pkg / f).write_text("")
    (pkg / "top.py").write_text(
        "import importlib\n"
        "def f(kind):\n"
        "    importlib.import_module(f'nevo.plots.{kind}')\n"
        "    return ['-m', 'nevo.low'], 'x'\n"
    )
    (pkg / "ext.py").write_text("EXT = ('nevo.top:Thing', 'nevo.low', 'nevo.low: a sentence, not a name')\n")
    (pkg / "bad.py").write_text(
        "import importlib\n"
        "A = importlib.import_module('experiments.replay')\n"
        "B = 'plots.table:main'\n"
        "def f(k):\n"
        "    return importlib.import_module(f'plots.{k}')\n"
        "def g():\n"
        "    from experiments import replay\n"
        "    return 'python -m experiments.run_ga runs a GA'\n"
    )
    deps = nevo_imports(str(tmp_path))
    assert deps["nevo.top"] == {"nevo.low", "nevo.plots", "nevo.plots.curves"}
    assert deps["nevo.ext"] == {"nevo.top"}
    found = sorted(checkout_names(str(tmp_path)))
    assert found == [f"nevo/bad.py:{n}" for n in ("2: experiments.replay", "3: plots.table", "5: plots",
                                                   "7: experiments")]  # fmt: skip


def test_the_circle_finder_finds_a_circle_of_three():
    """A -> B -> C -> A is found (pairs alone would miss it), and a chain without one is not."""
    deps = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(deps) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# The layers of docs/architecture.md, lowest first: a module imports its own layer and those below,
# never one above (a name matches a module and everything under it, the longest name winning;
# `nevo` is the package's own module, nevo/__init__.py, alone).
LAYERS = [
    ("nevo.version", "nevo.machine", "nevo.settings", "nevo.runs"),
    ("nevo.nets",),
    ("nevo.genomes",),
    ("nevo.tasks",),
    ("nevo.episodes",),
    ("nevo.algos",),
    ("nevo.config",),
    ("nevo.evaluation",),
    ("nevo.cli",),
    ("nevo.loops",),
    ("nevo.plots", "nevo.roofline", "nevo.tools"),
    ("nevo.api", "nevo", "nevo.command", "nevo.entry", "nevo.__main__"),
]
EXACT = ("nevo",)  # names that stand for their own module only


def folder_of(module: str) -> str:
    """The room a module is drawn in: its folder under nevo/ (nevo.nets.kernels.cpu: nevo.nets), or,
    for a module at nevo's top, the module itself."""
    return ".".join(module.split(".")[:2])


def folder_problems(deps: dict[str, set[str]]) -> list[str]:
    """Drawn by folder: a folder whose modules are not in one layer or a run of adjacent ones; an
    arrow from a folder to one whose layers lie above any of its own (a folder's arrow runs up);
    a circle of folders."""
    layers: dict[str, set[int]] = {}
    for m in deps:
        layers.setdefault(folder_of(m), set()).add(layer_of(m))
    bad = [
        f"{f} spans layers {sorted(ls)}"
        for f, ls in sorted(layers.items())
        if max(ls) - min(ls) + 1 != len(ls)
    ]
    arrows = {f: set() for f in layers}
    for m, ds in deps.items():
        for d in ds:
            a, b = folder_of(m), folder_of(d)
            if a != b and b != "nevo":
                arrows[a].add(b)
                if max(layers[b]) > min(layers[a]):
                    bad.append(f"{a} {sorted(layers[a])} -> {b} {sorted(layers[b])} ({m} -> {d})")
    bad += [" -> ".join(c) for c in circles(arrows)]
    return bad


def test_drawn_by_folder_no_arrow_runs_up_and_none_circles():
    """Each folder (package; a module at nevo's top is a room of its own) holds one layer or a run
    of adjacent ones, and its imports reach only folders at or below its lowest layer."""
    deps = nevo_imports()
    assert {"nevo.runs", "nevo.loops", "nevo.evaluation", "nevo.algos", "nevo.episodes"} <= {
        folder_of(m) for m in deps
    }
    assert folder_problems(deps) == []


def test_the_folder_check_sees_an_arrow_up_and_a_circle():
    """Were the loop back in nevo/runs/ (as before nevo/loops/), the run-folder files' folder would
    import the algorithms and the command line above it, and the algorithms it: a circle."""
    deps = {
        "nevo.runs.loop": {"nevo.algos.ga", "nevo.cli"},
        "nevo.runs": set(),
        "nevo.algos.ga": {"nevo.runs"},
    }
    deps["nevo.cli"] = set()
    problems = folder_problems(deps)
    assert "nevo.runs [0] -> nevo.algos [5] (nevo.runs.loop -> nevo.algos.ga)" in problems
    assert "nevo.algos -> nevo.runs -> nevo.algos" in problems
    assert (
        folder_problems({"nevo.nets.kernels.cpu": {"nevo.nets"}, "nevo.nets": {"nevo.nets.kernels.cpu"}})
        == []
    )


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest name that covers module; None where none does."""
    best = None
    for i, names in enumerate(LAYERS):
        for n in names:
            if module == n or (n not in EXACT and module.startswith(n + ".")):
                if best is None or len(n) > best[1]:
                    best = (i, len(n))
    return None if best is None else best[0]


def upward(deps: dict[str, set[str]]) -> list[str]:
    """Every import of a module above the importer's layer, as 'a (layer) -> b (layer)'."""
    return [
        f"{m} ({layer_of(m)}) -> {d} ({layer_of(d)})"
        for m in sorted(deps)
        for d in sorted(deps[m])
        if layer_of(d) > layer_of(m)
    ]


def test_every_module_has_a_layer_and_imports_none_above_it():
    deps = nevo_imports()
    assert [m for m in deps if layer_of(m) is None] == []
    assert upward(deps) == []


def test_the_layer_check_sees_an_import_upwards():
    """tasks building an evaluator (as they did before nevo.evaluation.setup.evaluator_for) is
    caught; the run folder's module is not the loop's layer."""
    assert upward({"nevo.tasks": {"nevo.evaluation.pipeline"}, "nevo.evaluation.pipeline": set()}) == [
        "nevo.tasks (3) -> nevo.evaluation.pipeline (7)"
    ]
    assert layer_of("nevo.runs") < layer_of("nevo.evaluation.setup") < layer_of("nevo.loops.loop")
    assert layer_of("nevo.episodes") < layer_of("nevo.algos.ga") < layer_of("nevo.config")
