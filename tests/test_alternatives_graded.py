"""Correct answers written independently of the reference get full marks through the real grader, and their
feedback pages show no error.

Every exercise has at least ``MIN_REWRITES`` :class:`catalogue.entries.Rewrite` entries in the ``REWRITES`` of
``catalogue/<chapter>.py`` (not in the course package, which students and the grading kernel see) (whole cells
written from the page and the notebook, not edits of the reference); the in-process
catalogue test (``tests/test_checks.py``) runs each through the checks. Here they go into real notebooks: notebook
``i`` of a chapter answers every exercise with its ``i``-th rewrite, and the batch is graded as an instructor grades
one (``batch.grade``: canonicalisation, the guard, nbgrader's gradebook, the jail where bubblewrap is installed).
"""

from __future__ import annotations

import nbformat
import pytest

import catalogue
from autograder import notebooks
from autograder.grading import batch
from catalogue.entries import Rewrite
from scripts.build_notebooks import notebooks as builder

MIN_REWRITES = 3
CHAPTERS = notebooks.chapters()


def rewrites(chapter: str) -> dict[str, list[Rewrite]]:
    """Exercise name -> its catalogued rewrites, in catalogue order."""
    checks = notebooks.checks_module(chapter)
    found: dict[str, list[Rewrite]] = {ex.name: [] for ex in checks.EXERCISES}
    for entry in catalogue.rewrites(chapter):
        found[entry.target].append(entry)
    return found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_has_independent_rewrites(chapter):
    few = {name: len(r) for name, r in rewrites(chapter).items() if len(r) < MIN_REWRITES}
    assert not few, f"{chapter}: exercises with fewer than {MIN_REWRITES} rewrites: {few}"


def answered(chapter: str, i: int) -> nbformat.NotebookNode:
    """The release notebook with every exercise answered by its ``i``-th rewrite (the last one if it has fewer)."""
    release = nbformat.read(notebooks.RELEASE_DIR / f"{chapter}.ipynb", as_version=4)
    chosen = [r[min(i, len(r) - 1)] for r in rewrites(chapter).values() if r]
    return builder.fill_release(release, chapter, mutants=chosen)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_rewrites_get_full_marks_through_the_grader(chapter, tmp_path):
    n = max((len(r) for r in rewrites(chapter).values()), default=0)
    assert n >= MIN_REWRITES
    folder = tmp_path / "subs"
    folder.mkdir()
    for i in range(n):
        nbformat.write(answered(chapter, i), folder / f"rewrite{i}_{7000 + i}_{8000 + i}_{chapter}.ipynb")
    out = tmp_path / "out"
    rows = batch.grade(
        sorted(folder.glob("*.ipynb")), chapter, out, cell_timeout=60, notebook_timeout=600, memory_mb=3072, jobs=2
    )
    full = {ex.name: float(ex.points) for ex in notebooks.checks_module(chapter).EXERCISES}
    assert len(rows) == n
    for row in rows:
        i = int(row.submission.split("_")[0].removeprefix("rewrite"))
        used = {ex: r[min(i, len(r) - 1)].name for ex, r in rewrites(chapter).items()}
        explain = f"{row.submission} ({used}): {row.scores} {row.status} {row.reason} {row.warnings}"
        assert row.scores == full, explain
        assert not row.warnings, explain  # no error on the page (a demo cell that failed would be a warning)
        graded = nbformat.read(out / "graded" / f"{row.student_id}.ipynb", as_version=4)
        errors = [
            f"{o.get('ename')}: {o.get('evalue')}"
            for c in graded.cells
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        assert not errors, f"{explain}: errors on the page: {errors}"  # a demo cell that failed shows here too
