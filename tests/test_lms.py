"""The LMS surfaces as their users meet them: the grade files as the LMS's own importer reads them, in the site's
interface language, and a download's files as `python -m autograder grade` collects, counts and reports them.
None of these tests starts a kernel (a batch of files that cannot be run needs none; a run is faked where one is
needed); the whole path with kernels is tests/test_grading.py::test_lms_downloads_give_every_student_one_right_row."""

import csv
import pathlib

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import batch, collect, lms, submission


@pytest.mark.parametrize(
    "name",
    [
        "lovelaceada_late_1001_90011_ch05-1.ipynb",
        "lovelaceada_LATE_1001_90011_ch05-1.ipynb",
        "lovelaceada_Late_1001_90011_ch05-1.ipynb",
    ],
)
def test_canvas_late_marker_is_read_in_any_case(name):
    who = lms.parse(name)
    assert (who.lms, who.name, who.lms_id, who.late, who.file) == (
        lms.CANVAS,
        "lovelaceada",
        "1001",
        True,
        "ch05-1.ipynb",
    )
    assert lms.parse("lovelaceada_1001_90001_late_notes.ipynb").late is False, "'late' in the student's own name"


def _fake_runs(monkeypatch, scores_of: dict[str, dict[str, float]]) -> None:
    """Each run's result by its canonical notebook (``scores_of``: canonical text -> scores), without a kernel."""

    def run_job(job, job_path, prefix, cwd, timeout, spawner=None):
        text = pathlib.Path(job.canonical).read_text()
        return submission.Result("", "", job.student_id, "graded", "", scores_of[text], []), text

    monkeypatch.setattr(batch.execute, "run_job", run_job)
    monkeypatch.setenv("AUTOGRADER_FORK_WORKERS", "off")


def _canonical(data: bytes, chapter: str) -> str:
    return nbformat.writes(canonical.canonicalise(data, releases.release_notebook(chapter))[0])


def test_a_lower_case_late_reupload_is_the_students_canvas_grade(tmp_path, monkeypatch):
    """The issue's Canvas download: a first upload that scores 5 and a late re-upload named with a lower-case
    marker that scores 7. The re-upload is the student's, her Canvas grade is 7, and the batch counts one student."""
    ch = "ch05_transformer"
    samples = notebooks.SAMPLES / ch
    bug, full = (next(samples.glob(f"{who}*.ipynb")).read_bytes() for who in ("hopper", "lovelace"))
    exercises = releases.checks_module(ch).EXERCISES
    top = {ex.name: float(ex.points) for ex in exercises}
    _fake_runs(
        monkeypatch, {_canonical(full, ch): top, _canonical(bug, ch): {**top, "EncoderLayer": 0.0, "DecoderLayer": 1.0}}
    )
    folder = tmp_path / "download"
    folder.mkdir()
    (folder / f"lovelaceada_1001_90001_{ch}.ipynb").write_bytes(bug)
    (folder / f"lovelaceada_late_1001_90011_{ch}-1.ipynb").write_bytes(full)
    subs = collect.collect(sorted(folder.iterdir()), tmp_path / "out", ch)
    assert collect.describe(subs) == "2 files from 1 student: 2 notebooks"
    rows = batch.grade(sorted(folder.iterdir()), ch, tmp_path / "out", jobs=1, lms_assignment="Chapter 5 (12345)")
    assert {r.lms_id for r in rows} == {"1001"} and {r.late for r in rows} == {False, True}
    with open(tmp_path / "out" / lms.CANVAS_FILE, newline="") as f:
        assert [(r["ID"], r["Chapter 5 (12345)"]) for r in csv.DictReader(f)] == [("1001", f"{sum(top.values()):g}")]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "1 rows, one per student, from 2 files" in summary and "names no student" not in summary
