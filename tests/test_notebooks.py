"""Derived notebooks are in sync with their sources, and the instructor notebooks run top to bottom (nbval)."""

import ast
import inspect
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest

import autograder
from autograder import notebooks
from catalogue import samples
from scripts.build_notebooks import notebooks as builder

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTERS = notebooks.chapters()


def test_derived_files_in_sync():
    problems = builder.stale()
    assert not problems, "derived files are stale; run `python -m scripts.build_notebooks`:\n" + "\n".join(problems)


def test_sample_submissions_in_sync():
    problems = samples.stale()
    assert not problems, "samples are stale; run `python -m catalogue.samples`:\n" + "\n".join(problems)


def _release(chapter: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / f"{chapter}.ipynb", as_version=4)  # validates against the schema


def _top_level_bindings(source: str) -> set[str]:
    """Names a code cell binds at module level (def, class, assignment, import), IPython magics ignored."""
    code = "\n".join("" if line.lstrip().startswith(("!", "%")) else line for line in source.splitlines())
    names = set()
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


# What nbgrader's generate_assignment guarantees by itself (solution regions replaced by the stub, hidden tests
# removed, the stub text) is not re-asserted here; these are the properties of the course's own sources that it
# cannot guarantee.
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_reveals_no_reference_code(chapter):
    """No line of a solution region appears in the student notebook (e.g. copied into a demo cell or the prose,
    or left outside the region's markers)."""
    release_lines = {line.strip() for cell in _release(chapter).cells for line in cell.source.splitlines()}
    # A line that the solution module also has outside every solution region is given code (e.g. a loop header
    # that one exercise writes and another exercise's given code repeats), not a leak.
    module = inspect.getsource(builder.solution_module(chapter))
    given = {
        line.strip()
        for i, part in enumerate(re.split(rf"{re.escape(notebooks.BEGIN)}|{re.escape(notebooks.END)}", module))
        if i % 2 == 0
        for line in part.splitlines()
    }
    release_lines -= given
    leaks = []
    for ex in notebooks.checks_module(chapter).EXERCISES:
        source = builder.exercise_source(chapter, ex.name)
        region = source.split(notebooks.BEGIN, 1)[1].split(notebooks.END, 1)[0]
        for line in (line.strip() for line in region.splitlines()):
            # Short lines (`)`, `else:`, `return x`) say nothing about the answer and may well be given code.
            if len(line) >= 12 and not line.startswith("#") and line in release_lines:
                leaks.append(f"{ex.name}: {line}")
    assert not leaks, f"{chapter}: the student notebook shows reference code:\n" + "\n".join(leaks)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_exercise_name_is_defined_only_in_its_answer_cell(chapter):
    """The check of an exercise grades whatever the name is bound to when its test cell runs: a demo cell that
    also defines (or imports) that name would be graded instead of the student's answer, or overwrite it."""
    cells = [c for c in _release(chapter).cells if c.cell_type == "code"]
    for ex in notebooks.checks_module(chapter).EXERCISES:
        binders = [c for c in cells if ex.name in _top_level_bindings(c.source)]
        grade_ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in binders]
        assert grade_ids == [ex.name], f"{chapter}: `{ex.name}` is bound in cells {grade_ids}, not only its answer"
        assert binders[0].metadata["nbgrader"].get("solution"), f"{chapter}: `{ex.name}`'s cell is not an answer cell"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_colab_link_opens_this_notebook_in_the_book_repository(chapter):
    """The first cell's Colab link names the repository and branch of `_config.yml` (not the builder's own
    constants) and a notebook path that exists."""
    config = (ROOT / "_config.yml").read_text()
    repo = re.search(r"url:\s*https://github\.com/(\S+?)/?\s", config)[1]
    branch = re.search(r"branch:\s*(\S+)", config)[1]
    links = re.findall(r"\]\((https://colab\.research\.google\.com/github/[^)]+)\)", _release(chapter).cells[0].source)
    assert links, f"{chapter}: the first cell has no Colab link"
    m = re.fullmatch(r"https://colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/(.+)", links[0])
    assert m and (m[1], m[2]) == (repo, branch), f"{links[0]} is not {repo} at {branch}"
    assert m[3] == f"notebooks/{chapter}.ipynb" and (ROOT / m[3]).exists()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_four_parts_share_the_stem(chapter):
    for part in (
        f"book/{chapter}.md",
        f"solutions/{chapter}.py",
        f"autograder/{chapter}.py",
        f"notebooks/{chapter}.ipynb",
        f"tests/test_{chapter}.py",
    ):
        assert (ROOT / part).exists(), f"{chapter}: {part} is missing"
    assert f"book/{chapter}" in (ROOT / "_toc.yml").read_text()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_edition_of_the_notebook_ends_with_its_self_check(chapter):
    """The last cell of the student's notebook, in each edition, is "Before you submit": the self-check of this
    chapter (the Colab surface test runs it; this says so without a kernel)."""
    for path in (ROOT / "notebooks" / f"{chapter}.ipynb", ROOT / "notebooks" / "zh" / f"{chapter}.ipynb"):
        if path.exists():
            last = nbformat.read(path, as_version=4).cells[-1]
            assert last.cell_type == "code" and f'selfcheck_here("{chapter}")' in last.source, f"{path}: {last.source}"


def test_repository_url_agrees_with_book_config():
    config = (ROOT / "_config.yml").read_text()
    assert re.search(rf"url:\s*{re.escape(autograder.REPOSITORY)}\s", config)
    assert re.search(rf"branch:\s*{autograder.BRANCH}\s", config)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_instructor_notebook_runs_with_nbval(chapter, tmp_path):
    """The instructor notebook (reference + hidden tests) executes top to bottom under nbval."""
    path = tmp_path / f"{chapter}.ipynb"
    nbformat.write(builder.build_instructor(chapter), path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


@pytest.mark.parametrize(
    "core, shown",
    [
        ("from torch._dynamo import NotThere  # a private name the runtime's torch lacks\n", "NotThere"),
        ("import a_dependency_that_went_away\n", "No module named 'a_dependency_that_went_away'"),
    ],
)
def test_setup_cell_shows_why_an_installed_course_fails_to_import_and_installs_nothing(tmp_path, core, shown):
    """An installed course package that fails to import (as it did on torch 2.11) is that error in the cell: a
    reinstall would change nothing, and each run of the cell would repeat it. (That it installs a course that is not
    there: tests/test_colab_surface.py.)"""
    package = tmp_path / "site" / "autograder"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core.py").write_text(core)
    source = builder.setup_source(CHAPTERS[0])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package.parent), "ATTENTION_COURSE_SOURCE": str(tmp_path / "x")}
    ran = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert ran.returncode != 0 and shown in ran.stderr, ran.stderr
    assert "Installing" not in ran.stdout, ran.stdout
