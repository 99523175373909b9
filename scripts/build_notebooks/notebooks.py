"""Build every derived notebook from its one source (the maintainers' notebook builder; not installed).

For a chapter ``chNN_name`` the sources are

* ``notebooks/templates/chNN_name.py`` — the notebook's prose and demo cells, in jupytext's percent format;
  a code cell whose header carries ``exercise="NAME"`` marks where exercise ``NAME`` goes;
* ``solutions/chNN_name.py`` — the reference code; the exercise cell gets the source of ``NAME`` from here,
  with the student's part between ``### BEGIN SOLUTION`` / ``### END SOLUTION``;
* ``autograder/chNN_name.py`` — the checks and points; the test cell after each exercise calls them.

From these, ``python -m scripts.build_notebooks`` produces

* the *instructor* notebook (solutions and hidden tests in place; written under ``build/``, used by nbval),
* the *release* notebook ``notebooks/chNN_name.ipynb`` — nbgrader's ``generate_assignment`` output, without
  outputs, with a Colab badge and Colab GPU-runtime metadata; the Chinese one ``notebooks/zh/`` (``translations.py``),
* the history of its test cells ``notebooks/test_history/chNN_name.json`` — the committed one with the release's
  test cells added (``canonical.history_text``: a notebook downloaded before a test cell changed is no edit),
* the nbgrader course directory ``nbgrader_course/`` (source notebooks and configuration) for instructors who use
  nbgrader's own workflow (``nbgrader_course.py``),
* and then the sample submissions under ``autograder/samples/chNN_name/`` (``catalogue/samples.py``).

``python -m scripts.build_notebooks --check`` (and the test-suite) fails when a committed derived file is stale.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
import os
import pathlib
import sys
import tempfile
import textwrap

import nbformat

from autograder import BRANCH, PACKAGE_SOURCE, REPOSITORY, canonical
from autograder.notebooks import BEGIN, END, RELEASE_DIR, ROOT, TEMPLATES, chapters
from autograder.releases import CODE_STUB, KERNELSPEC, checks_module, test_source

from . import nbgrader_course, translations
from .requirements import points_problems, requirements_markdown

INSTRUCTOR_DIR = ROOT / "build" / "instructor"


def solution_module(chapter: str):
    return importlib.import_module(f"solutions.{chapter}")


def colab_url(chapter: str) -> str:
    org_repo = REPOSITORY.removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{org_repo}/blob/{BRANCH}/notebooks/{chapter}.ipynb"


def setup_source(chapter: str) -> str:
    """The first code cell of every notebook: make the course package importable, installing it only if missing.

    Where it installs from, first match: the environment variable ``ATTENTION_COURSE_SOURCE``; a wheel or sdist
    of the course uploaded next to the notebook; ``PACKAGE_SOURCE`` (``autograder/__init__.py``). It uses only the
    standard library before the install, so it runs in a bare Colab runtime (Python 3.10+). It installs only when the
    package is not there: an installed package that fails to import (a torch without a name it uses) raises that
    error in the cell, where a reinstall would change nothing and hide it."""
    return textwrap.dedent(f"""\
        # Setup: makes the course package (the checks and earlier chapters' code) importable, installing it if missing.
        # Installs from: $ATTENTION_COURSE_SOURCE if set, else a course wheel/sdist uploaded next to this notebook,
        # else COURSE_SOURCE. Colab's own torch, numpy and matplotlib stay as they are (the package asks for no newer ones).
        import glob, importlib, os, subprocess, sys
        COURSE_SOURCE = "{PACKAGE_SOURCE}"
        try:
            import autograder.core
        except ModuleNotFoundError as missing:
            if missing.name not in ("autograder", "autograder.core"):
                raise  # installed, but it needs something missing: that error, not a reinstall
            uploaded = glob.glob("attention_course-*.whl") + glob.glob("attention_course-*.tar.gz")
            newest = max(uploaded, key=os.path.getmtime) if uploaded else None  # the last one uploaded
            source = os.environ.get("ATTENTION_COURSE_SOURCE") or newest or COURSE_SOURCE
            print("Installing the course package from", source, "...")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", source], check=True)
            importlib.invalidate_caches()
        from autograder.{chapter} import EXERCISES  # the checks that the test cells run""")


def _nbgrader(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def exercise_source(chapter: str, name: str) -> str:
    """Source of exercise ``name`` from the solution module; fails if it has no solution region."""
    source = textwrap.dedent(inspect.getsource(getattr(solution_module(chapter), name))).rstrip() + "\n"
    if BEGIN not in source or END not in source:
        raise ValueError(f"solutions/{chapter}.py: {name} has no '{BEGIN}' / '{END}' region")
    return source.rstrip("\n")


def requirements_cell(exercise) -> nbformat.NotebookNode:
    """The generated requirements cell of ``exercise`` (English; the Chinese edition re-renders it from the same
    declarations, found by the cell's ``requirements`` metadata)."""
    cell = nbformat.v4.new_markdown_cell(requirements_markdown(exercise))
    cell.metadata["requirements"] = exercise.name
    return cell


def build_instructor(chapter: str) -> nbformat.NotebookNode:
    """The instructor notebook: reference solutions, visible and hidden tests, nbgrader metadata."""
    import jupytext

    template = jupytext.read(TEMPLATES / f"{chapter}.py")
    exercises = checks_module(chapter).EXERCISES
    nb = nbformat.v4.new_notebook()
    badge = f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(chapter)})"
    cells = [nbformat.v4.new_markdown_cell(badge), nbformat.v4.new_code_cell(setup_source(chapter))]
    cells[1].metadata["nbgrader"] = _nbgrader("setup", locked=True)
    seen = []
    for cell in template.cells:
        name = cell.metadata.get("exercise")
        if name is None:
            new = (nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell)(
                cell.source
            )
            cells.append(new)
            continue
        ex = exercises[name]
        if ex.unstated:
            raise ValueError(
                f"{chapter}: hidden checks of {name} declare no requirement ({', '.join(ex.unstated)}): give each "
                "requires= (the notebook lists them; a student cannot read a hidden check)"
            )
        if ex.requirements:
            cells.append(requirements_cell(ex))
        solution = nbformat.v4.new_code_cell(exercise_source(chapter, name))
        solution.metadata["nbgrader"] = _nbgrader(name, solution=True)
        test = nbformat.v4.new_code_cell(test_source(name, ex.points))
        test.metadata["nbgrader"] = _nbgrader(f"test_{name}", grade=True, locked=True, points=ex.points)
        cells += [solution, test]
        seen.append(name)
    registered = [ex.name for ex in exercises]
    if seen != registered:
        raise ValueError(
            f"{chapter}: template exercises {seen} differ from the checks' exercises {registered} "
            "(same names, same order)"
        )
    problems = points_problems(chapter, [c.source for c in cells if c.cell_type == "markdown"])
    if problems:
        raise ValueError("\n".join(problems))
    i = 0
    for cell in cells:  # stable ids keep regenerated files byte-identical
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if "requirements" in cell.metadata:
            cell["id"] = f"{cell.metadata['requirements']}-requirements"
            continue  # not counted: the other cells keep their ids
        cell["id"] = f"{grade_id}" if grade_id else f"cell-{i:03d}"
        i += 1
    nb.cells = cells
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    return nb


@functools.cache
def _nbgrader_api():
    """nbgrader's ``NbGraderAPI`` class, imported once. A new gradebook asks alembic for the schema's version in a
    subprocess (``alembic heads``, 1.5–3 s); the answer is a constant of the installed nbgrader, so it is asked once
    per process (the build makes one gradebook per chapter)."""
    import warnings

    import nbgrader.api
    from nbgrader.apps import NbGraderAPI

    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy chatter from nbgrader's gradebook
    nbgrader.api.get_alembic_version = functools.cache(nbgrader.api.get_alembic_version)
    return NbGraderAPI


def generate_assignment(course: pathlib.Path, chapter: str) -> None:
    """nbgrader's generate_assignment for ``course/source/<chapter>/<chapter>.ipynb``: records every test cell and
    its points in the gradebook ``course/gradebook.db`` and writes ``course/release/<chapter>/``. Raises
    RuntimeError with nbgrader's error and log when it fails."""
    from traitlets.config import Config

    # nbgrader runs the `alembic` script by name: make the scripts of this Python's environment findable even when
    # the environment is not activated (.venv/bin/python -m scripts.build_notebooks).
    scripts = os.path.dirname(sys.executable)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    # nbgrader's API checks an exchange when it starts and logs CRITICAL ("Unwritable directory") where its default
    # /usr/local/share/nbgrader/exchange is missing: an empty one of this course directory's own keeps that line out.
    (course / "exchange").mkdir(parents=True, exist_ok=True)
    c.Exchange.root = str(course / "exchange")
    c.ClearSolutions.code_stub = {"python": CODE_STUB}
    result = _nbgrader_api()(config=c).generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(
            f"nbgrader generate_assignment failed for {chapter}:\n{result.get('error')}\n{result.get('log')}"
        )


def build_release(chapter: str, instructor: nbformat.NotebookNode | None = None) -> nbformat.NotebookNode:
    """Run nbgrader's generate_assignment on the instructor notebook, then tidy the result for Colab."""
    instructor = instructor if instructor is not None else build_instructor(chapter)
    with tempfile.TemporaryDirectory() as tmp:
        course = pathlib.Path(tmp)
        source = course / "source" / chapter / f"{chapter}.ipynb"
        source.parent.mkdir(parents=True)
        nbformat.write(instructor, source)
        generate_assignment(course, chapter)
        release = nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    for cell in release.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    release.metadata = {
        "accelerator": "GPU",  # Colab: open on a GPU runtime
        "colab": {"gpuType": "T4", "provenance": [], "toc_visible": True},
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
    }
    return release


def student_answer(source: str) -> str:
    """What a student who solved the exercise would leave in the cell: the solution without the markers."""
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END))


def fill_release(release: nbformat.NotebookNode, chapter: str, mutants=()) -> nbformat.NotebookNode:
    """The release notebook with every exercise answered by the reference (optionally with bugs applied)."""
    nb = copy.deepcopy(release)
    by_target = {m.target: m for m in mutants}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            source = exercise_source(chapter, meta["grade_id"])
            if meta["grade_id"] in by_target:
                source = by_target[meta["grade_id"]].apply(source)
            cell.source = student_answer(source)
    return nb


# ------------------------------------------------------------------------------------------------ commands


def derived_files(chapter: str, instructor: nbformat.NotebookNode | None = None) -> dict[pathlib.Path, str]:
    """Every committed file derived from the chapter's sources (and its ``instructor`` notebook, built here when
    not given), with its expected text."""
    instructor = instructor if instructor is not None else build_instructor(chapter)
    release = build_release(chapter, instructor)
    files = {RELEASE_DIR / f"{chapter}.ipynb": nbformat.writes(release) + "\n"}
    released = [release]
    if translations.notebook_translation(chapter) is not None:  # the Chinese edition's notebook (中文版)
        released.append(translations.translate_notebook(release, chapter))
        files[RELEASE_DIR / "zh" / f"{chapter}.ipynb"] = nbformat.writes(released[-1]) + "\n"
    # every released version of each test cell: the committed history with this release's added
    history = canonical.history_path(chapter, RELEASE_DIR)
    files[history] = canonical.history_text(history.read_text() if history.is_file() else None, released)
    files.update(nbgrader_course.chapter_files(chapter, instructor))
    return files


def build(chapter_list=None, instructor_dir: pathlib.Path = INSTRUCTOR_DIR) -> list[pathlib.Path]:
    """Write release notebooks, the nbgrader course and (under build/) instructor notebooks (the samples:
    ``python -m catalogue.samples``). Returns the files written."""
    written = []
    for chapter in chapter_list or chapters():
        instructor_dir.mkdir(parents=True, exist_ok=True)
        path = instructor_dir / f"{chapter}.ipynb"
        instructor = build_instructor(chapter)
        nbformat.write(instructor, path)
        written.append(path)
        for path, text in derived_files(chapter, instructor).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    for path, text in nbgrader_course.course_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def stale(chapter_list=None) -> list[str]:
    """Problems with committed derived files (empty when everything is in sync)."""
    problems = []
    expected = nbgrader_course.course_files()
    for chapter in chapter_list or chapters():
        expected.update(derived_files(chapter))
    for path, text in expected.items():
        rel = path.relative_to(ROOT)
        if not path.exists():
            problems.append(f"{rel} is missing")
        elif path.read_text() != text:
            problems.append(f"{rel} is stale")
    if not chapter_list:
        extra = set((nbgrader_course.COURSE_DIR / "source").glob("*/*.ipynb")) - set(expected)
        problems += [f"{p.relative_to(ROOT)} is not produced by the build" for p in sorted(extra)]
    return problems
