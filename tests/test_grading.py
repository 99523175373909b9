"""The grading command's pieces; the shipped samples are graded end to end in tests/test_robust_grading.py."""

import csv
import inspect
import textwrap
import pathlib

import pytest

from autograder import grading, notebooks
from autograder.core import CheckFailed

CHAPTERS = notebooks.chapters()


def _expected_scores(chapter: str, expectation: str) -> dict[str, float]:
    """Per-exercise scores implied by a sample's expectation, derived from the checks themselves."""
    exercises = notebooks.checks_module(chapter).EXERCISES
    if expectation == "full":
        return {ex.name: float(ex.points) for ex in exercises}
    if expectation in ("zero", "invalid"):
        return {ex.name: 0.0 for ex in exercises}
    assert expectation.startswith("bug:")
    mutant = next(m for m in notebooks.checks_module(chapter).MUTANTS if m.name == expectation[4:])
    # The bug is in one exercise; any exercise whose checks fail when run on the buggy notebook's objects
    # scores zero. Exercises that call the buggy one (e.g. a module using the attention function) fail too:
    # rebuild the namespace the way the notebook would have it and run every exercise's checks in it.
    module = notebooks.solution_module(chapter)
    namespace = dict(vars(module))
    namespace[mutant.target] = mutant.build(module)
    scores = {}
    for ex in exercises:
        obj = namespace[ex.name]
        if ex.name != mutant.target:  # re-bind so it sees the buggy function through the namespace

            src = textwrap.dedent(inspect.getsource(getattr(module, ex.name)))
            exec(compile(src, "<rebound>", "exec"), namespace)  # noqa: S102
            obj = namespace[ex.name]
        try:
            exercises.run(ex.name, obj, verbose=False)
            exercises.run(ex.name, obj, hidden=True, verbose=False)
            scores[ex.name] = float(ex.points)
        except CheckFailed:
            scores[ex.name] = 0.0
    return scores


def check_sample_rows(chapter, rows, out: pathlib.Path) -> None:
    """The shipped samples' rows (graded by tests/test_robust_grading.py in the same batch as the variants):
    per-exercise scores derived from the checks themselves, reasons, feedback without hidden tests."""
    release = notebooks.build_release(chapter)
    samples = notebooks.sample_submissions(chapter, release)
    rows = [r for r in rows if r.submission in samples]
    assert sorted(r.submission for r in rows) == sorted(samples), "exactly one row per submission file"
    total = float(notebooks.checks_module(chapter).EXERCISES.total_points)
    for row in rows:
        expectation = samples[row.submission][1]
        assert row.max_score == total
        assert row.scores == _expected_scores(chapter, expectation), (row.submission, row.reason)
        assert row.score == sum(row.scores.values())
        if expectation == "invalid":
            assert row.status == "error" and "not a readable notebook" in row.reason
        else:
            assert row.status == "graded"
            feedback = (out / "feedback" / f"{row.student_id}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in feedback and "hidden=True" not in feedback
        if row.score < total:
            assert row.reason, f"{row.submission}: a score below the maximum needs a reason"
    bug_rows = [r for r in rows if samples[r.submission][1].startswith("bug:")]
    assert bug_rows and all(0 < r.score < total for r in bug_rows), "a typical bug should cost some points, not all"


def test_student_ids_from_lms_names():
    taken = set()
    assert grading.student_id_from_filename("smithjane_1234_5678_ch03_self_attention.ipynb", taken) == "smithjane_1234"
    assert grading.student_id_from_filename("smithjane_1234_9999_ch03_self_attention.ipynb", taken) == "smithjane_1234-2"
    assert grading.student_id_from_filename("smithjane_LATE_77_1_ch03.ipynb", taken) == "smithjane_77"
    assert grading.student_id_from_filename("My notebook (1).ipynb", taken) == "My-notebook-1"
