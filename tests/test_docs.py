"""The README and docs/*.md say only what is true of the code: every `python -m experiments.X` or
`python -m plots.X` command they show names a module whose own argument parser accepts its flags
(run_ga, run_es and run_ns also check the values, as nevo.cli does before a run), every
`bash experiments/*.sh PART` names a part of that script, every link points at a file, every
script is listed in docs/experiments.md, and docs/architecture.md names only paths and functions
that exist. Nothing here trains: a module's main is stopped as soon as its parser has parsed."""

import argparse
import ast
import contextlib
import glob
import importlib
import importlib.util
import inspect
import io
import itertools
import os
import re
import runpy
import shlex
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [
    "README.md",
    *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))),
    *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "lab", "*.md"))),
]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
COMMAND = re.compile(r"python -m ((?:experiments|plots)(?:\.\w+)+)(.*)", re.S)
SCRIPT = re.compile(r"bash (experiments/[\w./]+\.sh)(.*)", re.S)
# run_ga, run_es, run_ns and run_sgd read their settings with nevo.cli, from these presets
CLI_PRESETS = {
    "experiments.run_ga": "ga",
    "experiments.run_es": "es",
    "experiments.run_ns": "ga-ns",
    "experiments.run_sgd": "sgd",
}


def read(page: str) -> str:
    with open(os.path.join(ROOT, page)) as f:
        return f.read()


def shown_commands(pattern: re.Pattern) -> list[tuple[str, int, str, str]]:
    """(page, line, command name, its arguments) of every command matching pattern in fenced code
    (one a line, `\\` continuations joined, `# comments` dropped) and in inline code spans."""
    found = []

    def take(page, line, text):
        for part in re.split(r"\s*(?:&&|;)\s*", text):
            m = pattern.search(part)
            if m:
                found.append((page, line, m.group(1), m.group(2).strip()))

    for page in PAGES:
        text = read(page)
        for block in FENCE.finditer(text):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block.group(1).split("\n")
            i = 0
            while i < len(lines):
                start, joined = i, lines[i]
                while joined.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    joined = joined[:-1] + " " + lines[i]
                take(page, first + start, joined.split(" #")[0])
                i += 1
        # the fences blanked out (their line count kept), then the inline spans, which may wrap
        rest = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for span in re.finditer(r"`([^`]+)`", rest):
            take(page, rest.count("\n", 0, span.start()) + 1, " ".join(span.group(1).split()))
    return found


def argvs(arguments: str) -> list[list[str]]:
    """The argument lists a documented command stands for: `[optional]` kept, `...` dropped,
    `a|b` one list per choice."""
    tokens = [t for t in shlex.split(arguments.replace("[", " ").replace("]", " ")) if t != "..."]
    return [list(choice) for choice in itertools.product(*(t.split("|") for t in tokens))]


COMMANDS = shown_commands(COMMAND)
SCRIPTS = shown_commands(SCRIPT)


class Parsed(BaseException):
    """Raised in place of a module's work, once its parser has accepted the arguments (a
    BaseException, so that no `except Exception` of the module's lets the work go on)."""


def parse_as_main(module: str, argv: list[str], monkeypatch) -> None:
    """Run `python -m module argv` up to its argument parser's parse_args, then stop."""
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        raise Parsed(original(self, args, namespace))

    with monkeypatch.context() as patch, warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        patch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
        patch.setattr(sys, "argv", [module, *argv])
        warnings.simplefilter("ignore", RuntimeWarning)  # the module is already imported: expected
        try:
            runpy.run_module(module, run_name="__main__")
        except Parsed:
            return
        except SystemExit as e:  # argparse's exit: 0 after --help, 2 for a flag it refuses
            assert e.code == 0 and "--help" in argv, f"refused: python -m {module} {shlex.join(argv)}"
            return
    raise AssertionError(f"python -m {module} ran to its end without parsing its arguments")


def test_the_docs_show_commands():
    pages = {page for page, *_ in COMMANDS}
    assert "README.md" in pages and "docs/experiments.md" in pages and len(COMMANDS) > 50


@pytest.mark.parametrize(
    "page, line, module, arguments", COMMANDS, ids=[f"{p}:{n}:{m}" for p, n, m, _ in COMMANDS]
)
def test_a_documented_command_names_a_module_whose_parser_takes_its_flags(
    page, line, module, arguments, monkeypatch
):
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{page}:{line}: no module {module}"
    main = getattr(importlib.import_module(module), "main", None)
    # an entry point of the checkout (experiments/replay.py: nevo.tools.replay's main): the code it runs
    with open(inspect.getsourcefile(main) if main else spec.origin) as f:
        source = f.read()
    for argv in argvs(arguments):
        if "argparse" not in source and module not in CLI_PRESETS:  # no parser to ask: flags in its source
            flags = [a.split("=")[0] for a in argv if a.startswith("--")]
            assert all(flag in source for flag in flags), f"{page}:{line}: {module} does not know {flags}"
            continue
        parse_as_main(module, argv, monkeypatch)
        if module in CLI_PRESETS and "--help" not in argv:
            check_settings(module, argv)


def check_settings(module: str, argv: list[str]) -> None:
    """The values too, as nevo.cli reads them before a run; a resumed run's settings are in its
    folder, so there only the flags that may change on resume are checked."""
    from nevo import cli, config

    command = CLI_PRESETS[module]
    description = importlib.import_module(module).__doc__
    if "--resume" in argv:
        args = cli.build_parser(description, cli.presets_of(command)).parse_args(argv)
        given = {a[2:].replace("-", "_") for a in argv if a.startswith("--") and a != "--resume"}
        assert args.resume, argv
        assert given <= config.RESUMABLE, f"not allowed on resume: {sorted(given - config.RESUMABLE)}"
    else:
        cli.parse_args(argv, description, command)


@pytest.mark.parametrize("page, line, script, arguments", SCRIPTS, ids=[f"{p}:{n}" for p, n, *_ in SCRIPTS])
def test_a_documented_shell_script_has_the_part_named(page, line, script, arguments):
    text = read(script)
    (choices,) = re.findall(r'case "\$part" in\n\s*([\w|]+)\)', text)
    for argv in argvs(arguments):
        assert len(argv) == 1 and argv[0] in choices.split("|"), f"{page}:{line}: {script} {argv}"


def test_every_script_is_listed_in_docs_experiments():
    listed = read("docs/experiments.md")
    scripts = [
        os.path.relpath(p, ROOT)
        for folder in ("experiments", "experiments/bench", "plots")
        for p in sorted(glob.glob(os.path.join(ROOT, folder, "*.*")))
        if p.endswith((".py", ".sh")) and not p.endswith("__init__.py")
    ]
    missing = [s for s in scripts if f"`{s}`" not in listed]
    assert not missing, f"not in docs/experiments.md: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_every_link_of_a_page_points_at_a_file(page):
    folder = os.path.dirname(os.path.join(ROOT, page))
    text = FENCE.sub("", read(page))
    targets = re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'<img[^>]*src="([^"]+)"', text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = [t for t in local if not os.path.exists(os.path.join(folder, t))]
    assert not missing, f"{page} links to missing files: {missing}"


def defined(path: str, name: str) -> bool:
    """Whether `name` (a function, class or assignment, or `Class.method`) is defined at the top
    level of the Python file at path."""
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read())
    outer, _, inner = name.partition(".")
    for node in tree.body:
        names = [
            t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)
        ]
        if getattr(node, "name", None) == outer or outer in names:
            if not inner:
                return True
            return any(getattr(n, "name", None) == inner for n in getattr(node, "body", []))
    return False


def section(page: str, heading: str) -> str:
    text = read(page)
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_docs_architecture_names_only_paths_that_exist():
    text = read("docs/architecture.md")
    paths = set(re.findall(r"`((?:nevo|experiments|plots|tests)/[\w/.]*)`", text))
    assert len(paths) > 40
    missing = [p for p in sorted(paths) if not os.path.exists(os.path.join(ROOT, p))]
    assert not missing, f"docs/architecture.md names missing paths: {missing}"


def test_docs_architecture_where_to_edit_names_functions_that_exist():
    """Each row of "Where to edit what": its file, then the names to start at, each defined in the
    file named last before it."""
    rows = [
        r for r in section("docs/architecture.md", "Where to edit what").splitlines() if r.startswith("| ")
    ]
    checked, wrong = 0, []
    for row in rows[2:]:  # past the header and its rule
        _, _, file_cell, names_cell, _ = row.split("|")
        (path,) = re.findall(r"`([^`]+\.py)`", file_cell)
        for span in re.findall(r"`([^`]+)`", names_cell):
            if span.endswith(".py"):
                path = span
            elif re.fullmatch(r"\w+(\.\w+)?", span):
                checked += 1
                if not defined(path, span):
                    wrong.append(f"{path}: {span}")
    assert checked > 40 and not wrong, f"not defined where docs/architecture.md says: {wrong}"


def test_the_readme_is_a_front_page():
    text = read("README.md")
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings.index("Results") < headings.index("Set up and test") < headings.index("The main job")
    assert {"nevo from Python", "On a cluster"} <= set(headings)
    assert "python -m pytest -q\n" in text and "pip install -r requirements.txt\n" in text
    assert len(text.splitlines()) <= 200  # details belong in docs/
    results = section("README.md", "Results")
    for page in ("frostbite_25m", "maze_compare", "mujoco", "safe_mutations", "sm_compare", "performance"):
        assert f"(docs/{page}.md)" in results


def test_docs_architecture_lists_every_module():
    """The layout table names every module of nevo/ (a module added later fails here until the
    page says what it holds)."""
    text = section("docs/architecture.md", "Layout")
    listed = set(re.findall(r"`(nevo/[\w/.]*\.py)`", text))
    modules = {
        os.path.relpath(os.path.join(d, f), ROOT)
        for d, _, files in os.walk(os.path.join(ROOT, "nevo"))
        for f in files
        if f.endswith(".py")
    }
    unlisted = sorted(modules - listed)
    assert len(modules) > 40 and not unlisted, f"not in docs/architecture.md: {unlisted}"
