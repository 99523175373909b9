"""The shipped nbgrader course (nbgrader_course/) works with nbgrader's own command-line tools and gradebook, as its
README walks an instructor through it.

The exchange: the README's steps make the folder the config sets (nbgrader's default) writable, so that
``release_assignment`` and a student's ``fetch_assignment`` use it as it is. For every chapter, in a temporary copy
of the course directory: ``nbgrader generate_assignment`` (its release must be the course's student notebook); the
shipped samples delivered the way instructors get them — for ch03_self_attention the correct, untouched and buggy
ones through the exchange (a roster with the students' names and LMS ids, ``release_assignment``, each student's
``fetch_assignment`` and ``submit``, ``collect``), for the other chapters all four as an LMS download (Canvas
names; Moodle folders for ch01_seq2seq) through ``zip_collect``; then ``autograde``, ``generate_feedback`` (no
warning; a page that reads offline: MathML, no CDN script, no Colab badge) and the course's exporters. The points
per exercise in nbgrader's gradebook must be the ones the course's own command gives (derived from the checks,
tests/test_grading.py), and the exported rows, names, LMS ids and LATE markers the ones its LMS files carry.
"""

import csv
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import nbformat
import pytest

from autograder import notebooks
from autograder.grading import lms
from catalogue import samples as sample_files
from scripts.build_notebooks import nbgrader_course
from tests.test_grading import _expected_scores

CHAPTERS = notebooks.chapters()
EXCHANGE_CHAPTER = "ch03_self_attention"
MOODLE_CHAPTER = "ch01_seq2seq"
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
    the exchange in tmp_path, made by the README's steps (the course's own exchange folder, nbgrader's default,
    is for a real hub: the instructor's commands here get ``--Exchange.root`` from :func:`_exchange`)."""
    config = tmp_path / "jupyter-config"
    config.mkdir()
    exchange = _make_exchange(tmp_path / "srv" / "exchange")
    # a student's nbgrader reads no course config: this is the config of every student's account here
    (config / "nbgrader_config.py").write_text(f"c = get_config()\nc.Exchange.root = {str(exchange)!r}\n")
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


def _documented_exchange_steps() -> list[str]:
    """The commands of nbgrader_course/README.md's code blocks that name the exchange folder (its "Once" section)."""
    readme = (nbgrader_course.COURSE_DIR / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    return [ln.strip() for b in blocks for ln in b.splitlines() if nbgrader_course.EXCHANGE_ROOT in ln]


def _make_exchange(where: pathlib.Path) -> pathlib.Path:
    """Run the README's exchange steps for the folder ``where`` instead of the course's."""
    steps = _documented_exchange_steps()
    assert steps == list(nbgrader_course.EXCHANGE_STEPS), "the README shows the steps that make the exchange"
    script = "\n".join(s.replace(nbgrader_course.EXCHANGE_ROOT, shlex.quote(str(where))) for s in steps)
    subprocess.run(["bash", "-euc", script], check=True)
    return where


def _exchange(env) -> str:
    return "--Exchange.root=" + _load_config(pathlib.Path(env["JUPYTER_CONFIG_DIR"])).Exchange.root


def test_the_documented_steps_make_a_fresh_exchange_nbgrader_uses(tmp_path):
    """The README's steps make the exchange the config sets (nbgrader's default folder, which the students' nbgrader
    uses without a config): writable by every user, so release_assignment neither creates it (as whoever runs it)
    nor changes its permissions, and a student, with no course config, fetches from it."""
    config = _load_config(nbgrader_course.COURSE_DIR)
    assert config.Exchange.root == nbgrader_course.EXCHANGE_ROOT
    from nbgrader.exchange.default import Exchange

    assert Exchange.class_traits()["root"].default() == nbgrader_course.EXCHANGE_ROOT, "nbgrader's default folder"
    assert config.CourseDirectory.course_id == nbgrader_course.COURSE_ID
    assert f"--course {nbgrader_course.COURSE_ID}" in (nbgrader_course.COURSE_DIR / "README.md").read_text()

    env = _environment(tmp_path)  # runs the README's steps (_make_exchange) for tmp_path/srv/exchange
    exchange = tmp_path / "srv" / "exchange"
    assert exchange.stat().st_mode & 0o777 == 0o777
    course = tmp_path / "course"
    shutil.copytree(nbgrader_course.COURSE_DIR, course, ignore=shutil.ignore_patterns("source"))
    chapter = EXCHANGE_CHAPTER
    (course / "release" / chapter).mkdir(parents=True)  # what generate_assignment writes (tested below)
    shutil.copy(notebooks.RELEASE_DIR / f"{chapter}.ipynb", course / "release" / chapter)
    released = _run(["release_assignment", chapter, _exchange(env)], course, env)
    log = released.stdout + released.stderr
    assert "Creating exchange directory" not in log and "Permissions for exchange directory" not in log, log
    home = tmp_path / "student"
    home.mkdir()
    _run(["fetch_assignment", chapter, "--course", nbgrader_course.COURSE_ID], home, env)
    assert (home / chapter / f"{chapter}.ipynb").read_text() == (
        course / "release" / chapter / f"{chapter}.ipynb"
    ).read_text()


def _submit_through_the_exchange(course, chapter, students, env, tmp_path) -> None:
    """Students (hub user names) fetch, fill in and submit; the instructor imported their names and LMS ids
    (README, step 3) and collects."""
    roster = course / "students.csv"
    with open(roster, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "first_name", "last_name", "email", "lms_user_id"])
        for student, (who, _, _) in students.items():
            w.writerow([student, "Student", who.name.title(), "", who.lms_id])
    _run(["db", "student", "import", "students.csv"], course, env)
    _run(["release_assignment", chapter, _exchange(env)], course, env)
    for student, (_, text, _) in students.items():
        home = tmp_path / "students" / student
        home.mkdir(parents=True)
        _run(["fetch_assignment", chapter, "--course", nbgrader_course.COURSE_ID], home, env)
        (home / chapter / f"{chapter}.ipynb").write_text(text)
        # nbgrader submits as the account's user name (on JupyterHub, the hub's user); here all are one account
        _run(["submit", chapter, "--course", nbgrader_course.COURSE_ID, "--student", student], home, env)
    _run(["collect", chapter, _exchange(env)], course, env)


def _download_from_the_lms(course, chapter, samples, env) -> dict:
    """The LMS's "download all submissions" zip through zip_collect; returns student id -> (who, text, expectation)
    with ``who`` as the course parses the downloaded name."""
    archive = course / "downloaded" / chapter / "archive"
    archive.mkdir(parents=True)
    students = {}
    with zipfile.ZipFile(archive / "submissions.zip", "w") as z:
        for name, (text, expectation) in samples.items():
            who = lms.parse(name)
            if chapter == MOODLE_CHAPTER:  # Moodle: "Download all submissions", one folder per student
                name = f"{who.name.title()} Student_{who.lms_id}_assignsubmission_file/{chapter}.ipynb"
            z.writestr(name, text)
            students[who.lms_id] = (lms.parse(name), text, expectation)
    _run(["zip_collect", chapter], course, env)
    return students


def _export(course, env, exporter, chapter, *extra) -> list[dict]:
    result = _run(
        [
            "export",
            f"--exporter={nbgrader_course.ADAPTER}.{exporter}",
            f"--assignment={chapter}",
            *extra,
            "--to",
            "x.csv",
        ],
        course,
        env,
    )
    assert "WARNING" not in result.stdout + result.stderr, result.stdout + result.stderr
    with open(course / "x.csv", newline="") as f:
        return list(csv.DictReader(f))


def _check_feedback_reads_offline(text: str, release: nbformat.NotebookNode) -> None:
    """nbgrader's feedback page as it reads offline: formulas rendered (MathML, no MathJax from a CDN), no image
    or script from the network (the Colab badge)."""
    assert "$$" not in text, "a display formula left as LaTeX source"
    if any("$" in c.source for c in release.cells if c.cell_type == "markdown"):
        assert "<math" in text, "the formulas of the notebook's text are MathML"
    assert "\\sqrt" not in re.sub(r"<code[^>]*>.*?</code>|<pre.*?</pre>", "", text, flags=re.S), "LaTeX source shown"
    assert not re.search(r"<script[^>]+src=", text), "a script from the network (MathJax, require.js)"
    assert "colab-badge.svg" not in text, "the Colab badge: an image from the network, broken offline"
    assert not re.search(r"<img[^>]+src=[\"']?https?:", text), "an image from the network"


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

    samples = sample_files.sample_submissions(chapter, student_notebook)
    if chapter == EXCHANGE_CHAPTER:  # students fetch and submit; the truncated download is tested via the LMS zips
        students = {lms.parse(n).name: (lms.parse(n), t, e) for n, (t, e) in samples.items() if e != "invalid"}
        _submit_through_the_exchange(course, chapter, students, env, tmp_path)
    else:
        students = _download_from_the_lms(course, chapter, samples, env)
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(students), "one submission per student"

    graded = _run(["autograde", chapter], course, env, ok=False)
    invalid = [i for i, (_, _, e) in students.items() if e == "invalid"]
    log = graded.stdout + graded.stderr
    assert graded.returncode == (1 if invalid else 0), log[-3000:]  # nbgrader fails on the truncated download
    for i in invalid:
        assert f"for student '{i}'" in log and "NotJSONError" in log, log[-3000:]
    feedback_log = _run(["generate_feedback", chapter], course, env)
    assert "not recognized" not in feedback_log.stdout + feedback_log.stderr, feedback_log.stderr[-3000:]
    _run(["export", "--to", "nbgrader_grades.csv"], course, env)  # nbgrader's own export still works

    # The course's exporters (autograder/grading/nbgrader_adapter.py) give the rows of `python -m autograder grade`:
    # one per submission, the unreadable one with zero and its reason, the LMS's names, ids and LATE markers.
    system = lms.MOODLE if chapter == MOODLE_CHAPTER else lms.CANVAS
    grades = {r["student_id"]: r for r in _export(course, env, "GradesExport", chapter)}
    if system == lms.CANVAS:
        lms_rows = _export(course, env, "CanvasExport", chapter, "--CanvasExport.column=Chapter (12345)")
        assert list(lms_rows[0]) == lms.CANVAS_COLUMNS + ["Chapter (12345)"]
        lms_scores = {r["ID"]: (r["Student"], float(r["Chapter (12345)"])) for r in lms_rows}
    else:
        lms_rows = _export(course, env, "MoodleExport", chapter)
        assert list(lms_rows[0]) == lms.MOODLE_COLUMNS
        lms_scores = {
            r["Identifier"].removeprefix(lms.MOODLE_PARTICIPANT): (r["Full name"], float(r["Grade"])) for r in lms_rows
        }
    assert sorted(grades) == sorted(students) and sorted(lms_scores) == sorted(
        w.lms_id for w, _, _ in students.values()
    )

    from nbgrader.api import Gradebook

    exercises = notebooks.checks_module(chapter).EXERCISES
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, (who, _, expectation) in students.items():
            nb = gb.find_submission_notebook(chapter, chapter, student)
            scores = {g.name.removeprefix("test_"): float(g.score) for g in nb.grades}
            expected = _expected_scores(chapter, expectation)
            total = sum(expected.values())
            assert scores == expected, (student, expectation)
            row = grades[student]
            assert (float(row["score"]), float(row["max_score"])) == (total, exercises.total_points)
            assert {n: float(row[n]) for n in expected} == expected
            assert (row["lms_id"], row["late"]) == (
                who.lms_id,
                "" if chapter == EXCHANGE_CHAPTER else lms.LATE_TEXT[who.late],
            )
            name = f"{who.name.title()}, Student" if chapter == EXCHANGE_CHAPTER else who.name  # step 3's roster
            assert lms_scores[who.lms_id] == (name, total), "the LMS file: the student's name and points"
            feedback = course / "feedback" / student / chapter / f"{chapter}.html"
            if expectation == "invalid":  # nbgrader could not read it: no grade, no feedback, listed for manual grading
                assert nb.needs_manual_grade and all(g.auto_score is None for g in nb.grades)
                assert not feedback.exists()
                assert row["status"] == "error" and row["reason"].startswith("not a readable notebook"), row
                continue
            assert row["status"] == "graded"
            text = feedback.read_text()
            assert nbgrader_course.NOTE in text, "the feedback says the course's hardening was not used"
            assert "BEGIN HIDDEN TESTS" not in text and "hidden=True" not in text, "hidden tests' source is removed"
            _check_feedback_reads_offline(text, release)
            if expectation.startswith("bug:"):
                assert "CheckFailed: " in re.sub(r"<[^>]+>", "", text), "the check's message is shown"
                assert "Cell In[" not in text and "----&gt;" not in text, "a failed test shows no traceback lines"


UPLOADS = {  # an LMS download in which Ada uploaded the notebook twice: (first upload, re-upload); Charles once
    "canvas": (
        "lovelaceada_1001_90001_{ch}.ipynb",
        "lovelaceada_1001_90001_{ch}-1.ipynb",
        "babbagecharles_late_1004_90004_{ch}.ipynb",  # Canvas's LATE marker, in lower case
    ),
    "moodle": (
        "Ada Lovelace_1001_assignsubmission_file/{ch}.ipynb",
        "Ada Lovelace_1001_assignsubmission_file/{ch} (1).ipynb",
        "Charles Babbage_1004_assignsubmission_file/{ch}.ipynb",
    ),
    "moodle flat": (
        "Ada Lovelace_1001_assignsubmission_file_{ch}.ipynb",
        "Ada Lovelace_1001_assignsubmission_file_{ch} (1).ipynb",
        "Charles Babbage_1004_assignsubmission_file_{ch}.ipynb",
    ),
}


def _zip_collect(tmp_path, chapter: str, files: dict[str, str]):
    """nbgrader's own zip_collect, with the course's config, of a download holding ``files`` (name -> text)."""
    env = _environment(tmp_path)
    course = tmp_path / "course"
    shutil.copytree(nbgrader_course.COURSE_DIR, course, ignore=shutil.ignore_patterns("source"))
    archive = course / "downloaded" / chapter / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return course, _run(["zip_collect", chapter], course, env, ok=False)


@pytest.mark.parametrize("layout", sorted(UPLOADS))
def test_zip_collect_keeps_the_latest_upload(layout, tmp_path):
    """A re-upload (Canvas's x-1.ipynb, Moodle's x (1).ipynb beside x.ipynb): nbgrader's own collector stops
    ("Duplicate submission file"); the course's keeps the later file by the LMS's rule (lms.newer)."""
    chapter = "ch04_multi_head_attention"
    first, again, other = (name.format(ch=chapter) for name in UPLOADS[layout])
    course, result = _zip_collect(tmp_path, chapter, {first: "first upload", again: "re-upload", other: "Charles"})
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-3000:]
    submitted = course / "submitted"
    assert sorted(p.name for p in submitted.iterdir()) == ["1001", "1004"], log[-3000:]
    assert (submitted / "1001" / chapter / f"{chapter}.ipynb").read_text() == "re-upload"
    assert (submitted / "1004" / chapter / f"{chapter}.ipynb").read_text() == "Charles"
    assert f"Skipping {pathlib.PurePath(first).name}: {pathlib.PurePath(again).name} is a later upload" in log
    assert not list(submitted.rglob("timestamp.txt")), "no made-up time for autograde's lateness"


def test_zip_collect_names_uploads_it_cannot_order(tmp_path):
    """Two names of one notebook whose order the download does not give (Moodle: x.ipynb, Copy of x.ipynb): nbgrader
    stops, as it does, and the log names both files."""
    chapter = "ch04_multi_head_attention"
    folder = "Ada Lovelace_1001_assignsubmission_file"
    names = [f"{chapter}.ipynb", f"Copy of {chapter}.ipynb"]
    _, result = _zip_collect(tmp_path, chapter, {f"{folder}/{n}": n for n in names})
    log = result.stdout + result.stderr
    assert result.returncode == 1 and "Duplicate submission file" in log, log[-3000:]
    assert "cannot tell which is the latest" in log and all(n in log for n in names), log[-3000:]
