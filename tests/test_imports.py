"""Imports flow one way: no nevo module imports one that imports it back (lazy imports included)."""

import ast
import itertools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nevo_imports() -> dict[str, set[str]]:
    """module -> the nevo modules it imports anywhere in its file."""
    modules = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "nevo")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".").removesuffix(".__init__")
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
    return deps


def test_no_module_imports_one_that_imports_it_back():
    deps = nevo_imports()
    assert len(deps) > 20 and "nevo.config" in deps["nevo.cli"]  # the walk found the package
    circles = [(a, b) for a, b in itertools.combinations(deps, 2) if b in deps[a] and a in deps[b]]
    assert circles == []
