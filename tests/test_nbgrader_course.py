"""The shipped nbgrader course (nbgrader_course/) works with nbgrader's own command-line tools and gradebook.

For every chapter, in a temporary copy of the course directory: ``nbgrader generate_assignment`` (its release
must be the course's student notebook); the shipped samples delivered the way instructors get them — for
ch03_self_attention the correct, untouched and buggy ones through the exchange (``release_assignment``, each
student's ``fetch_assignment`` and ``submit``, ``collect``), for the other chapters all four as an LMS download
(Canvas names; Moodle folders for ch01_seq2seq) through ``zip_collect``; then ``autograde``,
``generate_feedback`` and ``export``. The points per exercise in nbgrader's gradebook must be the ones the
course's own command gives (derived from the checks, tests/test_grading.py).
"""

import csv
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest

from autograder import nbgrader_course, notebooks
from autograder.grading import lms
from tests.test_grading import _expected_scores

CHAPTERS = notebooks.chapters()
EXCHANGE_CHAPTER = "ch03_self_attention"
MOODLE_CHAPTER = "ch01_seq2seq"
CANVAS_EXPORT_CHAPTER = "ch02_bahdanau_attention"
NBGRADER = shutil.which("nbgrader", path=os.path.dirname(sys.executable)) or shutil.which("nbgrader")


def _load_config(course: pathlib.Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


# The settings the generator writes as constants (code stub, cell time limit, feedback preprocessors) are not
# compared with those constants here: that only restates the generator. Their effect is what
# test_plain_nbgrader_gives_the_course_points checks (release = student notebook, hidden tests' source absent
# from the feedback).
def test_config_follows_the_course_folder_when_it_is_moved(tmp_path):
    """Instructors copy nbgrader_course/ to their JupyterHub: the course root and gradebook are wherever it is."""
    course = tmp_path / "srv" / "my-course"
    shutil.copytree(nbgrader_course.COURSE_DIR, course, ignore=shutil.ignore_patterns("source"))
    config = _load_config(course)
    assert config.CourseDirectory.root == str(course)
    assert config.CourseDirectory.db_url == f"sqlite:///{course / 'gradebook.db'}"


@pytest.mark.parametrize(
    "path, lms_name, lms_id, late, file",
    [
        ("x/lovelaceada_1001_90001_ch03_self_attention.ipynb", lms.CANVAS, "1001", False, "ch03_self_attention.ipynb"),
        (
            "x/babbagecharles_LATE_1004_90004_ch03_self_attention.ipynb",
            lms.CANVAS,
            "1004",
            True,
            "ch03_self_attention.ipynb",
        ),
        (
            "x/lovelaceada_1001_90001_ch03_self_attention-1.ipynb",
            lms.CANVAS,
            "1001",
            False,
            "ch03_self_attention-1.ipynb",
        ),
        (
            "x/Ada Lovelace_12345_assignsubmission_file/ch03_self_attention.ipynb",
            lms.MOODLE,
            "12345",
            None,
            "ch03_self_attention.ipynb",
        ),
        (
            "x/Ada Lovelace_12345_assignsubmission_file_/ch03_self_attention.ipynb",
            lms.MOODLE,
            "12345",
            None,
            "ch03_self_attention.ipynb",
        ),
        (
            "x/Ada Lovelace_12345_assignsubmission_file_ch03_self_attention.ipynb",
            lms.MOODLE,
            "12345",
            None,
            "ch03_self_attention.ipynb",
        ),
        (
            "x/lovelaceada_1001_90001_Copy of ch03_self_attention.ipynb",
            lms.CANVAS,
            "1001",
            False,
            "Copy of ch03_self_attention.ipynb",
        ),
        (
            "x/Ada Lovelace_12345_assignsubmission_file/ch03_self_attention (1).ipynb",
            lms.MOODLE,
            "12345",
            None,
            "ch03_self_attention (1).ipynb",
        ),
        ("x/ch03_self_attention.ipynb", "", "", None, "ch03_self_attention.ipynb"),
    ],
)
def test_lms_names_and_the_zip_collect_rule_agree(path, lms_name, lms_id, late, file):
    who = lms.parse(path)
    assert (who.lms, who.lms_id, who.late, who.file) == (lms_name, lms_id, late, file)
    # the rule nbgrader reads from the shipped config, against the course's own parser of LMS names
    rule = _load_config(nbgrader_course.COURSE_DIR).FileNameCollectorPlugin.named_regexp
    m = re.match(rule, "/course/downloaded/a/extracted/" + path)
    if not lms_name:
        assert m is None
        return
    assert m["student_id"] == lms_id
    assert m["file_id"] == "ch03_self_attention"  # Canvas's "-1" re-upload suffix dropped: nbgrader finds the notebook


def _run(args, cwd, env, *, ok=True):
    result = subprocess.run([NBGRADER, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if ok:
        assert result.returncode == 0, f"nbgrader {' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
    return result


def _environment(tmp_path: pathlib.Path) -> dict:
    """nbgrader's processes and kernels: this Python's tools, the course package, no user-wide Jupyter config, and
    the exchange in tmp_path."""
    config = tmp_path / "jupyter-config"
    config.mkdir()
    (tmp_path / "exchange").mkdir(mode=0o777)
    (config / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.Exchange.root = {str(tmp_path / 'exchange')!r}\n"
        f"c.CourseDirectory.course_id = {nbgrader_course.COURSE_ID!r}\n"
    )
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    threads = str(max(1, (os.cpu_count() or 1) // workers))
    return {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": str(notebooks.ROOT),
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "MPLBACKEND": "Agg",
    }


def _submit_through_the_exchange(course, chapter, samples, env, tmp_path) -> None:
    _run(["release_assignment", chapter], course, env)
    for name, (text, _) in samples.items():
        student = lms.parse(name).lms_id
        home = tmp_path / "students" / student
        home.mkdir(parents=True)
        _run(["fetch_assignment", chapter], home, env)
        (home / chapter / f"{chapter}.ipynb").write_text(text)
        # nbgrader submits as the account's user name (on JupyterHub, the hub's user); here all are one account
        _run(["submit", chapter, "--student", student], home, env)
    _run(["collect", chapter], course, env)


def _download_from_the_lms(course, chapter, samples, env) -> None:
    archive = course / "downloaded" / chapter / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as z:
        for name, (text, _) in samples.items():
            who = lms.parse(name)
            if chapter == MOODLE_CHAPTER:  # Moodle: "Download all submissions", one folder per student
                name = f"{who.name.title()} Student_{who.lms_id}_assignsubmission_file/{chapter}.ipynb"
            z.writestr(name, text)
    _run(["zip_collect", chapter], course, env)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(CHAPTERS, key=lambda c: c != EXCHANGE_CHAPTER))  # the longest first
def test_plain_nbgrader_gives_the_course_points(chapter, tmp_path):
    assert NBGRADER, "nbgrader's command-line tool is not installed"
    env = _environment(tmp_path)
    course = tmp_path / "course"
    shutil.copytree(nbgrader_course.COURSE_DIR, course)
    _run(["generate_assignment", chapter], course, env)

    release = nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    student_notebook = nbformat.read(notebooks.RELEASE_DIR / f"{chapter}.ipynb", as_version=4)
    cells = lambda nb: [(c.cell_type, c.source, c.metadata.get("nbgrader")) for c in nb.cells]
    assert cells(release) == cells(student_notebook), "the course's student notebook is nbgrader's release"

    samples = notebooks.sample_submissions(chapter, student_notebook)
    if chapter == EXCHANGE_CHAPTER:  # students fetch and submit; the truncated download is tested via the LMS zips
        samples = {n: s for n, s in samples.items() if s[1] != "invalid"}
        _submit_through_the_exchange(course, chapter, samples, env, tmp_path)
    else:
        _download_from_the_lms(course, chapter, samples, env)
    ids = {lms.parse(name).lms_id: expectation for name, (_, expectation) in samples.items()}
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(ids), "one submission per student"

    graded = _run(["autograde", chapter], course, env, ok=False)
    invalid = [i for i, e in ids.items() if e == "invalid"]
    log = graded.stdout + graded.stderr
    assert graded.returncode == (1 if invalid else 0), log[-3000:]  # nbgrader fails on the truncated download
    for i in invalid:
        assert f"for student '{i}'" in log and "NotJSONError" in log, log[-3000:]
    _run(["generate_feedback", chapter], course, env)
    _run(["export", "--to", "grades.csv"], course, env)
    lms_file = {MOODLE_CHAPTER: "MoodleExport", CANVAS_EXPORT_CHAPTER: "CanvasExport"}.get(chapter)
    if lms_file:  # the LMS's import file from nbgrader's gradebook (autograder/grading/nbgrader_adapter.py)
        _run(
            [
                "export",
                f"--exporter=autograder.grading.nbgrader_adapter.{lms_file}",
                f"--assignment={chapter}",
                "--CanvasExport.column=Chapter (12345)",
                "--to",
                "lms.csv",
            ],
            course,
            env,
        )
        with open(course / "lms.csv", newline="") as f:
            lms_rows = list(csv.reader(f))

    from nbgrader.api import Gradebook

    exercises = notebooks.checks_module(chapter).EXERCISES
    with open(course / "grades.csv", newline="") as f:
        exported = {r["student_id"]: r for r in csv.DictReader(f) if r["assignment"] == chapter}
    assert sorted(exported) == sorted(ids)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, expectation in ids.items():
            nb = gb.find_submission_notebook(chapter, chapter, student)
            scores = {g.name.removeprefix("test_"): float(g.score) for g in nb.grades}
            expected = _expected_scores(chapter, expectation)
            assert scores == expected, (student, expectation)
            assert float(exported[student]["score"]) == sum(expected.values())
            assert float(exported[student]["max_score"]) == exercises.total_points
            # a submission nbgrader could not autograde is left out of the LMS file: the LMS keeps it ungraded
            lms_expected = [] if expectation == "invalid" else [sum(expected.values())]
            if lms_file == "CanvasExport":
                assert lms_rows[0] == lms.CANVAS_COLUMNS + ["Chapter (12345)"]
                assert [float(r[5]) for r in lms_rows if r[1] == student] == lms_expected
            elif lms_file == "MoodleExport":
                assert lms_rows[0] == lms.MOODLE_COLUMNS
                assert [float(r[4]) for r in lms_rows if r[0] == f"Participant {student}"] == lms_expected
            feedback = course / "feedback" / student / chapter / f"{chapter}.html"
            if expectation == "invalid":  # nbgrader could not read it: no grade, no feedback, listed for manual grading
                assert nb.needs_manual_grade and all(g.auto_score is None for g in nb.grades)
                assert not feedback.exists()
                continue
            text = feedback.read_text()
            assert nbgrader_course.NOTE in text, "the feedback says the course's hardening was not used"
            assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text, "hidden tests' source is removed"
            if expectation.startswith("bug:"):
                assert "CheckFailed: " in re.sub(r"<[^>]+>", "", text), "the check's message is shown"
                assert "Cell In[" not in text and "----&gt;" not in text, "a failed test shows no traceback lines"
