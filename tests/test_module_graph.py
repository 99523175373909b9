"""The autograder package's import graph: no cycles, and the student side never reaches the grading machinery.

Every ``import`` statement counts, at module level or inside a function (a lazy import is still a dependency)."""

import ast
import pathlib

import pytest

import autograder

PACKAGE = pathlib.Path(autograder.__file__).parent
# What a student's notebook (and the self-check) imports; none of it may reach nbgrader or autograder.grading.
STUDENT_SIDE = ["autograder.core", "autograder.canonical", "autograder.releases"] + sorted(
    f"autograder.{p.stem}" for p in PACKAGE.glob("ch[0-9][0-9]_*.py")
)


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    skip = {"templates", "samples", "_release"}
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if not skip & set(p.relative_to(PACKAGE).parts)}


def import_graph() -> dict[str, set[str]]:
    """module -> the modules it imports (autograder's own, by full name; others by their top-level name)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name if a.name in modules else a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                # `from pkg import submodule` depends on the submodule; `from mod import name` on the module
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                edges |= (
                    set(subs)
                    if len(subs) == len(node.names)
                    else {*subs, target if target in modules else target.split(".")[0]}
                )
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt in graph and nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "x"}, "b": {"c"}, "c": set()}) is None


def test_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "autograder.grading.batch" in graph["autograder.cli"], "a function-level import"
    assert "autograder.core" in graph["autograder.grading.guard"], "a function-level `from .. import core`"
    assert {"autograder.grading.execute", "autograder.grading.report"} <= graph["autograder.grading.batch"]


def test_in_the_package_only_the_adapter_imports_nbgrader():
    """Issue 47: nbgrader is off the grading path. In the installed package only the nbgrader adapter (the plugins
    that ``nbgrader_course/nbgrader_config.py`` names) imports nbgrader, and no module imports the adapter; the
    notebook builder, which runs nbgrader's ``generate_assignment``, is the checkout's ``scripts/build_notebooks/``
    (tests/test_runner.py watches a batch import nothing of nbgrader)."""
    graph = import_graph()
    assert {m for m, deps in graph.items() if "nbgrader" in deps} == {"autograder.grading.nbgrader_adapter"}
    assert not {m for m, deps in graph.items() if "autograder.grading.nbgrader_adapter" in deps}


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", STUDENT_SIDE)
def test_student_side_needs_no_grading_machinery(module):
    """The student install has no nbgrader: what its notebooks import must not reach it."""
    reached = reachable(import_graph(), module)
    assert not {m for m in reached if m.startswith("autograder.grading")} and "nbgrader" not in reached, reached


CHECKOUT_ONLY = {"tests", "catalogue"}  # folders of the checkout that the installed package does not have


def _imported_top_levels(path: pathlib.Path) -> set[str]:
    """Top-level names of what ``path`` imports (absolute imports, and importlib.import_module of a literal)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add((node.module or "").split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value.split(".")[0])
    return names


def _package_files() -> list[pathlib.Path]:
    skip = {"templates", "samples", "_release"}
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if not skip & set(p.relative_to(PACKAGE).parts)]
    return files + sorted((PACKAGE.parent / "solutions").rglob("*.py"))


def test_the_package_never_imports_the_tests_or_the_catalogue():
    """autograder/ and solutions/ are what students install: tests/ and catalogue/ exist only in the checkout."""
    found = {
        str(p.relative_to(PACKAGE.parent)): sorted(_imported_top_levels(p) & CHECKOUT_ONLY) for p in _package_files()
    }
    assert not {k: v for k, v in found.items() if v}, found


def test_check_modules_hold_checks_only():
    """The catalogue (MUTANTS, ALTERNATIVES, REWRITES) lives in catalogue/<chapter>.py, not in the check modules."""
    defined = {}
    for path in sorted(PACKAGE.glob("ch[0-9][0-9]_*.py")):
        targets = [
            t.id
            for node in ast.parse(path.read_text()).body
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(t, ast.Name)
        ]
        defined[path.name] = sorted({"MUTANTS", "ALTERNATIVES", "REWRITES"} & set(targets))
        assert "MUTANTS" not in path.read_text() and "ALTERNATIVES" not in path.read_text(), path.name
    assert not {k: v for k, v in defined.items() if v}, defined


def test_the_guards_see_a_checkout_import():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        bad = pathlib.Path(tmp) / "bad.py"
        bad.write_text("import importlib\nfrom catalogue.entries import Mutant\nimportlib.import_module('tests.x')\n")
        assert _imported_top_levels(bad) & CHECKOUT_ONLY == {"catalogue", "tests"}
