"""The grading command's pieces; the shipped samples are graded end to end in tests/test_robust_grading.py."""

import csv
import html
import inspect
import pathlib
import re
import textwrap

import pytest

import catalogue
from autograder import canonical, notebooks, releases
from autograder.core import CheckFailed
from autograder.grading import batch, collect, execute, feedback, lms, report, runner, scoring, submission
from autograder.grading import reasons as reasons_
from catalogue import samples as sample_files
from scripts.build_notebooks import notebooks as builder

CHAPTERS = notebooks.chapters()


def _en(said) -> list[str]:
    """Messages of the grader in English (what a test compares)."""
    return [str(m) for m in said]


def _expected_scores(chapter: str, expectation: str) -> dict[str, float]:
    """Per-exercise scores implied by a sample's expectation, derived from the checks themselves."""
    exercises = notebooks.checks_module(chapter).EXERCISES
    if expectation == "full":
        return {ex.name: float(ex.points) for ex in exercises}
    if expectation in ("zero", "invalid"):
        return {ex.name: 0.0 for ex in exercises}
    assert expectation.startswith("bug:")
    mutant = next(m for m in catalogue.mutants(chapter) if m.name == expectation[4:])
    # The bug is in one exercise; any exercise whose checks fail when run on the buggy notebook's objects
    # scores zero. Exercises that call the buggy one (e.g. a module using the attention function) are checked with
    # the course's version of it where the checks register one (Exercises.reference), and are charged otherwise:
    # rebuild the namespace the way the notebook would have it and run every exercise's checks in it.
    module = builder.solution_module(chapter)
    namespace = dict(vars(module))
    namespace[mutant.target] = mutant.build(module)
    scores = {}
    for ex in exercises:
        obj = namespace[ex.name]
        if ex.name != mutant.target:  # re-bind so it sees the buggy function through the namespace
            src = textwrap.dedent(inspect.getsource(getattr(module, ex.name)))
            exec(compile(src, "<rebound>", "exec"), namespace)
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
    release = builder.build_release(chapter)
    samples = sample_files.sample_submissions(chapter, release)
    rows = [r for r in rows if r.submission in samples]
    assert sorted(r.submission for r in rows) == sorted(samples), "exactly one row per submission file"
    total = float(notebooks.checks_module(chapter).EXERCISES.total_points)
    for row in rows:
        expectation = samples[row.submission][1]
        assert row.max_score == total
        assert row.scores == _expected_scores(chapter, expectation), (row.submission, row.reason)
        assert row.score == sum(row.scores.values())
        who = lms.parse(row.submission)
        assert (row.lms, row.lms_id, row.late) == (who.lms, who.lms_id, who.late), "the LMS's id and LATE marker"
        if expectation == "invalid":
            assert row.status == "error" and "not a readable notebook" in row.reason
            feedback = (out / "feedback" / f"{row.student_id}.html").read_text()  # the student learns why
            assert feedback_points(feedback) == {**row.scores, "total": 0.0} and "could not be graded" in feedback
            check_offline_feedback(feedback)
        else:
            assert row.status == "graded"
            feedback = (out / "feedback" / f"{row.student_id}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in feedback and "hidden=True" not in feedback
            assert feedback_points(feedback) == {**row.scores, "total": row.score}, "points table of the feedback"
            check_offline_feedback(feedback)
        if row.score < total:
            assert row.reason, f"{row.submission}: a score below the maximum needs a reason"
    bug_rows = [r for r in rows if samples[r.submission][1].startswith("bug:")]
    assert bug_rows and all(0 < r.score < total for r in bug_rows), "a typical bug should cost some points, not all"
    with open(out / report.CSV_NAME, newline="") as f:
        written = {r["submission"]: r for r in csv.DictReader(f)}
    with open(out / lms.CANVAS_FILE, newline="") as f:
        canvas = {r["ID"]: r for r in csv.DictReader(f)}
    for row in rows:
        who = lms.parse(row.submission)
        assert (written[row.submission]["lms_id"], written[row.submission]["late"]) == (
            who.lms_id,
            lms.LATE_TEXT[who.late],
        )
        assert canvas[who.lms_id]["Student"] == who.name and float(canvas[who.lms_id][chapter]) == row.score


def feedback_points(html_text: str) -> dict[str, float]:
    """The points column of the feedback page's table (exercise -> points, and the total)."""
    table = re.search(r"<table class='autograder-points'.*?</table>", html_text, re.S)
    assert table, "the feedback starts with a table of points per exercise"
    rows = re.findall(
        r"<tr[^>]*><td>(?:<code>)?([^<]+)(?:</code>)?</td><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>", table.group(0)
    )
    return {html.unescape(name): float(points) for name, points, _ in rows}


def check_offline_feedback(html_text: str) -> None:
    """No script from the network (the page works offline), formulas as MathML, no self-check output."""
    assert not re.search(r"<script[^>]*\bsrc=", html_text), "no remote (or any external) script"
    assert "cdn" not in html_text.lower() and "mathjax" not in html_text.lower()
    assert "Could not read this notebook" not in html_text and "gradeable as" not in html_text, "self-check output"


def test_student_ids_from_lms_names():
    taken = set()
    assert collect.student_id_from_filename("smithjane_1234_5678_ch03_self_attention.ipynb", taken) == "smithjane_1234"
    assert (
        collect.student_id_from_filename("smithjane_1234_9999_ch03_self_attention.ipynb", taken) == "smithjane_1234-2"
    )
    assert collect.student_id_from_filename("smithjane_LATE_77_1_ch03.ipynb", taken) == "smithjane_77"
    assert collect.student_id_from_filename("My notebook (1).ipynb", taken) == "My-notebook-1"


# ------------------------------------------------------------------------------------------------ LMS files
# The column sets as the LMSs document them (not taken from autograder/lms.py, so that a change there is caught):
# Canvas gradebook import — the columns of Canvas's own gradebook export; a column Canvas does not know becomes
# a new assignment:
# https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades
# and https://nemogb-dev.github.io/nemogb-r/articles/detailed-canvas-export-info.html (ID = Canvas user id).
CANVAS_DOCUMENTED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
# Moodle assignment "Download grading worksheet" (mod/assign/gradingtable.php, downloading, file submissions,
# feedback comments on, e-mail shown); its importer needs Identifier, Grade, Last modified (grade)
# (mod/assign/feedback/offline/importgradeslib.php).
MOODLE_DOCUMENTED = [
    "Identifier",
    "Full name",
    "Email address",
    "Status",
    "Grade",
    "Maximum grade",
    "Grade can be changed",
    "Last modified (submission)",
    "Last modified (grade)",
    "Feedback comments",
]


def _rows_from_names(chapter, names_and_expectations):
    exercises = notebooks.checks_module(chapter).EXERCISES
    rows = []
    for i, (name, expectation) in enumerate(names_and_expectations):
        who = lms.parse(name)
        scores = _expected_scores(chapter, expectation)
        rows.append(
            report.Row(
                name,
                f"s{i}",
                chapter,
                scores,
                sum(scores.values()),
                float(exercises.total_points),
                "error" if expectation == "invalid" else "graded",
                "",
                [],
                lms=who.lms,
                lms_id=who.lms_id,
                name=who.name,
                late=who.late,
                graded_at=1_700_000_000.0,
            )
        )
    return rows


def test_lms_files_have_the_documented_columns(tmp_path):
    chapter = "ch03_self_attention"
    samples = sample_files.sample_submissions(chapter, builder.build_release(chapter))
    moodle = [
        (f"Ada Lovelace_{5000 + i}_assignsubmission_file/{chapter}.ipynb", e)
        for i, (_, e) in enumerate(samples.values())
    ]
    canvas = [(name, e) for name, (_, e) in samples.items()]
    rows = _rows_from_names(chapter, canvas + moodle + [(f"{chapter}.ipynb", "full")])
    points = {ex.name: ex.points for ex in notebooks.checks_module(chapter).EXERCISES}
    written = lms.write_exports(rows, tmp_path, points, assignment="Chapter 3 (12345)")
    assert sorted(p.name for p in written) == sorted([lms.CANVAS_FILE, lms.MOODLE_FILE])

    with open(tmp_path / lms.CANVAS_FILE, newline="") as f:
        table = list(csv.reader(f))
    assert table[0] == CANVAS_DOCUMENTED + ["Chapter 3 (12345)"], "exactly Canvas's columns and one assignment"
    by_name = {r.submission: r for r in rows}
    assert [line[1] for line in table[1:]] == [lms.parse(n).lms_id for n, _ in canvas], "one row per Canvas file"
    for line, (name, _) in zip(table[1:], canvas):
        assert line[0] == name.split("_")[0] and line[2:5] == ["", "", ""]
        assert float(line[5]) == by_name[name].score

    with open(tmp_path / lms.MOODLE_FILE, newline="") as f:
        table = list(csv.DictReader(f))
    with open(tmp_path / lms.MOODLE_FILE, newline="") as f:
        assert next(csv.reader(f)) == MOODLE_DOCUMENTED
    assert [r["Identifier"] for r in table] == [f"Participant {5000 + i}" for i in range(len(moodle))]
    for r, (name, _) in zip(table, moodle):
        row = by_name[name]
        assert r["Full name"] == "Ada Lovelace" and float(r["Grade"]) == row.score
        assert float(r["Maximum grade"]) == row.max_score and r["Grade can be changed"] == "Yes"
        assert r["Last modified (grade)"] and r["Feedback comments"].startswith(f"{row.score:g}/{row.max_score:g} (")


def test_moodle_download_is_expanded(tmp_path):
    """Moodle's "Download all submissions" zip: a folder per student (two files with one name), or flat names."""
    import zipfile

    z = tmp_path / "moodle.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("Ada Lovelace_12345_assignsubmission_file/ch03_self_attention.ipynb", "{}")
        f.writestr("Alan Turing_12346_assignsubmission_file_/ch03_self_attention.ipynb", "{}")
        f.writestr("Grace Hopper_12347_assignsubmission_file_ch03_self_attention.ipynb", "{}")
        f.writestr("Ada Lovelace_12345_assignsubmission_onlinetext/onlinetext.html", "x")
    files = collect.expand_submissions([z], tmp_path / "unzipped")
    assert len(files) == 3
    labels = collect.submission_labels(files, {p: lms.parse(p) for p in files})
    assert sorted(labels.values()) == [
        "Ada Lovelace_12345_assignsubmission_file/ch03_self_attention.ipynb",
        "Alan Turing_12346_assignsubmission_file_/ch03_self_attention.ipynb",
        "Grace Hopper_12347_assignsubmission_file_ch03_self_attention.ipynb",
    ]
    taken = set()
    ids = [collect.student_id_from_filename(p, taken) for p in files]
    assert sorted(ids) == ["Ada-Lovelace_12345", "Alan-Turing_12346", "Grace-Hopper_12347"]
    assert sorted(lms.parse(p).lms_id for p in files) == ["12345", "12346", "12347"]
    assert {lms.parse(p).lms for p in files} == {lms.MOODLE}
    assert releases.chapter_from_filename(files[0].name) == "ch03_self_attention"


def test_feedback_page(tmp_path):
    """Points per exercise at the top, no self-check output, formulas as MathML, no script from the network."""
    import nbformat

    chapter = "ch03_self_attention"
    nb = builder.build_release(chapter)
    for cell in nb.cells:
        if "selfcheck_here(" in cell.source:
            cell.outputs = [nbformat.v4.new_output("stream", text="Could not read this notebook from here.\n")]
    bug = next(e for _, e in sample_files.sample_submissions(chapter, nb).values() if e.startswith("bug:"))
    scores = _expected_scores(chapter, bug)
    points = {ex.name: ex.points for ex in notebooks.checks_module(chapter).EXERCISES}
    page = tmp_path / "feedback.html"
    feedback.write_feedback(page, nb, "lovelaceada_1001", releases.read(chapter), scores, warnings=["a note"])
    text = page.read_text()
    assert feedback_points(text) == {**scores, "total": sum(scores.values())}
    assert f"<b>{sum(scores.values()):g} / {sum(points.values()):g}</b>" in text
    check_offline_feedback(text)
    assert "<math" in text and "$$" not in text and "mathrm{Attention}" not in text, "formulas rendered as MathML"
    assert "a note" in text


# ------------------------------------------------------------------------------------------------ the scoring rule


def _verdict(exercise, passed=True, threads=0):
    """A verdict record as ``judge.judge`` leaves it: ``passed`` is the worker's verdict."""
    return {
        "type": "verdict",
        "exercise": exercise,
        "passed": passed,
        "failures": [] if passed else [f"{exercise}: wrong"],
        "threads": threads,
    }


ARMED = {"type": "armed", "chapter": "ch03_self_attention"}


def test_scoring_gives_the_exercises_points_only_with_the_workers_passing_verdict():
    points = {"a": 2, "b": 3, "c": 1, "d": 4}
    records = [ARMED, _verdict("a"), _verdict("b", passed=False), _verdict("d", passed=False)]
    scored = scoring.score(points, records, 0, ["d: check failed", "a: the test cell raised"])
    assert scored.status == "graded"
    assert scored.scores == {"a": 2.0, "b": 0.0, "c": 0.0, "d": 0.0}, "points from EXERCISES, not nbgrader's cells"
    assert sorted(r.split(":")[0] for r in _en(scored.reasons)) == ["b", "c", "d"], "no reason for what scored"
    assert "d: check failed" in _en(scored.reasons), "the test cell's own reason, when it has one"
    assert "b: b: wrong" in _en(scored.reasons), "else the worker's"
    assert any(r.startswith("c: no verdict record") for r in _en(scored.reasons))


def _numbered(records):
    """``records`` numbered as the recorder numbers what it signs (``seq``: 0, 1, 2 ...)."""
    return [dict(r, seq=i) for i, r in enumerate(records)]


def test_scoring_takes_one_verdict_per_exercise_in_the_notebooks_order():
    """Issue 46: the verdicts, in the order the recorder numbered them, come one per exercise in ``points``' order
    (the notebook's); a second verdict for an exercise, or one after a later exercise's (the notebook that kept the
    course's version of an earlier exercise, swapped in while a later one was checked, and ran the earlier one's
    verdict itself with it), makes the submission an integrity zero that names the exercise. Skipped exercises are
    no violation; nor are the records' arrival order, nor notes between verdicts."""
    points = {"a": 2, "b": 3, "c": 1}
    blocked = {"type": "blocked", "event": "open", "what": "guard: grader's files"}
    fine = _numbered([ARMED, _verdict("a"), blocked, _verdict("c")])
    scored = scoring.score(points, fine[::-1], 0, [])  # arrival order is not the recorder's order
    assert scored.status == "graded" and scored.scores == {"a": 2.0, "b": 0.0, "c": 1.0}, scored
    late = _numbered([ARMED, _verdict("b"), _verdict("c"), _verdict("a")])
    scored = scoring.score(points, late, 0, [])
    assert scored.status == "integrity" and scored.scores == {"a": 0.0, "b": 0.0, "c": 0.0}
    assert "the verdict for a came after the verdict for c, a later exercise" in _en(scored.reasons)[0], _en(
        scored.reasons
    )
    twice = _numbered([ARMED, _verdict("a", passed=False), _verdict("b"), _verdict("b")])
    scored = scoring.score(points, twice, 0, [])
    assert scored.status == "integrity" and "a second verdict for b" in _en(scored.reasons)[0], _en(scored.reasons)
    again = _numbered([ARMED, _verdict("a", passed=False), _verdict("a")])  # a rerun cannot wash out a failure
    scored = scoring.score({"a": 2}, again, 0, [])
    assert (
        scored.status == "integrity"
        and scored.scores == {"a": 0.0}
        and "a second verdict for a" in _en(scored.reasons)[0]
    )
    assert not _en(scored.warnings)
    other = _numbered([ARMED, _verdict("a"), _verdict("not_an_exercise"), _verdict("b")])  # earns nothing, no place
    assert scoring.score(points, other, 0, []).status == "graded"


@pytest.mark.parametrize(
    "seqs",
    [[0, 1, 3], [0, 1, 1], [1, 2, 3]],
    ids=["a record held back", "a record sent twice", "the first missing"],
)
def test_scoring_needs_every_record_in_sequence(seqs):
    """The recorder numbers every record it signs from 0 ("armed" first): a hole or a repeat (a record the notebook
    kept from the worker, or sent twice in place of another) is an integrity zero; where records were dropped over
    the cap or forged, that is said instead."""
    records = [dict(r, seq=n) for r, n in zip([ARMED, _verdict("a"), _verdict("b")], seqs)]
    scored = scoring.score({"a": 2, "b": 3}, records, 0, [])
    assert scored.status == "integrity" and "not all there, in sequence" in _en(scored.reasons)[0], _en(scored.reasons)
    scored = scoring.score({"a": 2, "b": 3}, records, 0, [], overflow=1)
    assert scored.status == "integrity" and "in sequence" not in _en(scored.reasons)[0], _en(scored.reasons)


@pytest.mark.parametrize(
    "records, forged, why",
    [
        ([ARMED, _verdict("a"), _verdict("b")], 1, "1 forged or corrupted record(s)"),
        ([_verdict("a"), _verdict("b")], 0, "the grading recorder did not start"),
    ],
)
def test_scoring_integrity_zeroes_everything(records, forged, why):
    scored = scoring.score({"a": 2, "b": 3}, records, forged, [])
    assert scored.status == "integrity" and scored.scores == {"a": 0.0, "b": 0.0}
    assert _en(scored.reasons)[0].startswith("integrity: ") and why in _en(scored.reasons)[0]


def test_scoring_flags_threads_and_blocked_actions():
    records = [
        ARMED,
        _verdict("a", threads=1),
        {"type": "blocked", "event": "open", "what": "guard: grader's files"},
    ]
    scored = scoring.score({"a": 2}, records, 0, [])
    assert scored.scores == {"a": 2.0} and any("threads" in w for w in _en(scored.warnings))
    assert _en(scoring.blocked_warnings(records)) == ["blocked: reading the grader's files (open)"]


def test_result_files_round_trip(tmp_path):
    result = submission.Result("a.ipynb", "00", "ada_1", "graded", "", {"x": 1.0}, ["w"], log="tail")
    path = tmp_path / "r.json"
    submission.write_result(path, result)
    assert submission.read_result(path) == result and not path.with_suffix(".tmp").exists()
    path.write_text("[]")
    with pytest.raises(ValueError):
        submission.read_result(path)


# ------------------------------------------------------------------------------------------------ every zero explained


def _exercises_with(*checks):
    from autograder.core import Exercises

    ex = Exercises("chXX_test")
    for i, fn in enumerate(checks):
        ex.check("f", points=1 if i == 0 else None)(fn)
    return ex


def test_an_answer_that_never_returns_is_stopped_by_the_exercise_time_limit(monkeypatch):
    """The check run stops at the first time-out (even through a bare except in the answer), says so, and does not
    call the answer again; without the grader's limit (a student's notebook) nothing changes."""
    import time

    from autograder.core import call

    calls = []

    def endless(x):
        calls.append(x)
        end = time.monotonic() + 6  # "endless": long past the limit (bounded, so that a regression fails, not hangs)
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except:  # noqa: E722 - a student's bare except must not swallow the time limit
                pass
        return x

    def first(fn):
        """first check"""
        call("f(1)", fn, 1)

    def second(fn):
        """second check"""
        call("f(2)", fn, 2)

    monkeypatch.setenv("AUTOGRADER_EXERCISE_TIMEOUT", "0.5")
    start = time.monotonic()
    with pytest.raises(CheckFailed, match=r"f timed out after 0\.5 s"):
        _exercises_with(first, second).run("f", endless, verbose=False)
    assert time.monotonic() - start < 8 and calls == [1], "stopped at the first time-out, the answer not called again"
    monkeypatch.delenv("AUTOGRADER_EXERCISE_TIMEOUT")
    _exercises_with(first).run("f", lambda x: x, verbose=False)  # no limit: a quick answer passes as before


def test_exits_and_crashed_checks_are_explained():
    import sys

    from autograder.core import call

    def exits(x):
        sys.exit(0)

    def passes_on_anything(fn):
        """indexes the answer's output"""
        call("f(1)", fn, 1)[5]  # a check that trusts the answer's shape

    with pytest.raises(CheckFailed, match=r"exited \(SystemExit: 0\)"):
        _exercises_with(passes_on_anything).run("f", exits, verbose=False)
    with pytest.raises(CheckFailed) as err:
        _exercises_with(passes_on_anything).run("f", lambda x: [x], verbose=False)
    assert "crashed" not in str(err.value) and "could not be checked (IndexError" in str(err.value)
    assert "docstring" in str(err.value)


def _cell(source, *, grade_id=None, solution=False, grade=False, error=None, cid=None):
    import nbformat

    cell = nbformat.v4.new_code_cell(source)
    cell.id = cid or grade_id or f"cell-{abs(hash(source)) % 10**8}"
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "solution": solution, "grade": grade}
    if error:
        cell.outputs = [nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[])]
    return cell


def test_failure_reasons_say_what_happened():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("def f(): ...\nimport sys; sys.exit(3)", grade_id="f", solution=True, error=("SystemExit", "3")),
        _cell("EXERCISES.run('f', f)", grade_id="test_f", grade=True, error=("NameError", "name 'f' is not defined")),
        _cell("while True: pass", grade_id="g", solution=True, error=("KeyboardInterrupt", "")),
        _cell("EXERCISES.run('g', g)", grade_id="test_g", grade=True, error=("NameError", "name 'g' is not defined")),
        _cell("x = [0] * 10**12", grade_id="h", solution=True, error=("MemoryError", "")),
        _cell("EXERCISES.run('h', h)", grade_id="test_h", grade=True, error=("NameError", "name 'h' is not defined")),
        _cell("def k(): ...", grade_id="k", solution=True),
        _cell("EXERCISES.run('k', k)", grade_id="test_k", grade=True, error=("SystemExit", "0")),
        _cell("m = 1", grade_id="m", solution=True),
        _cell("EXERCISES.run('m', m)", grade_id="test_m", grade=True, error=("NameError", "name 'm' is not defined")),
    ]
    reasons = _en(reasons_.failure_reasons(nb, cell_timeout=30))
    assert reasons[0].startswith("f: the answer cell of f exited (SystemExit: 3)") and "never defined" in reasons[0]
    assert reasons[1].startswith("g: the answer cell of g timed out") and "30 s" in reasons[1]
    assert reasons[2].startswith("h: the answer cell of h ran out of memory")
    assert reasons[3].startswith("k: the checks of k exited (SystemExit: 0)"), "not the bare 'k: 0'"
    assert reasons[4] == "m: name 'm' is not defined (was the exercise cell deleted or renamed?)"
    assert not any("not defined" in r for r in reasons[:4])


def test_failure_reasons_keep_the_failed_check():
    """The row's reason is the failed check itself, whether one check failed or several (and its hint)."""
    import nbformat

    one = "1 check(s) failed for f:\n✘ f timed out after 15 s: its checks did not finish"
    two = "2 check(s) failed for g:\n✘ shape (2, 3)\nexpected (2, 4)\nHint: the last axis"
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("EXERCISES.run('f', f)", grade_id="test_f", grade=True, error=("CheckFailed", one)),
        _cell("EXERCISES.run('g', g)", grade_id="test_g", grade=True, error=("CheckFailed", two)),
    ]
    assert _en(reasons_.failure_reasons(nb)) == [
        "f: ✘ f timed out after 15 s: its checks did not finish",
        "g: ✘ shape (2, 3) — expected (2, 4) Hint: the last axis",
    ]


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
def test_a_crash_in_the_answer_names_the_students_line_in_the_graded_reason_and_feedback(tmp_path):
    """While grading, the guard refuses frame access to everyone else, so its private checks read the student's line
    with the guard's own reader: the row's reason and the feedback say which line of the answer cell raised."""
    import nbformat

    chapter = "ch03_self_attention"
    nb = builder.fill_release(builder.build_release(chapter), chapter)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "scaled_dot_product_attention")
    head = cell.source.split("    check_qkv_shapes(q, k, v, mask)")[0]
    cell.source = head + (
        "    check_qkv_shapes(q, k, v, mask)\n"
        "    scores = q @ k / q.shape[-1] ** 0.5  # k not transposed\n"
        "    return torch.softmax(scores, dim=-1) @ v, torch.softmax(scores, dim=-1)\n"
    )
    line = cell.source.splitlines().index("    scores = q @ k / q.shape[-1] ** 0.5  # k not transposed") + 1
    path = tmp_path / f"crash_1_2_{chapter}.ipynb"
    nbformat.write(nb, path)
    (row,) = batch.grade([path], chapter, tmp_path / "out", jobs=1)
    assert row.scores["scaled_dot_product_attention"] == 0 and row.score == row.max_score - 4, row.reason
    assert "raised RuntimeError" in row.reason and f"(your line {line})" in row.reason, row.reason
    assert not [w for w in row.warnings if str(w).startswith("blocked")], row.warnings
    page = (tmp_path / "out" / "feedback" / "crash_1.html").read_text()
    assert f"(your line {line})" in page


def test_failure_reasons_come_from_the_workers_judgement_where_it_has_one():
    """The grading test cell is the guard's verdict alone, whose error carries only the checks' first lines: the
    row's reason is the failed check as the worker judged it (label, message, hint), as the notebook's own check
    run said it before; a time-out is still said as such."""
    import nbformat

    verdict = "1 check(s) failed for f:\n✘ f: weights differs from the expected values by up to 0.3"
    details = {
        "f": ["✘ matches softmax(QK^T/sqrt(d_k))V\n    f: weights differs by up to 0.3\n    Hint: divide by sqrt(d_k)"],
        "g": ["✘ never shown: the cell timed out"],
    }
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("_autograder_guard.verdict('f')", grade_id="test_f", grade=True, error=("CheckFailed", verdict)),
        _cell("_autograder_guard.verdict('g')", grade_id="test_g", grade=True, error=("KeyboardInterrupt", "")),
    ]
    reasons = _en(reasons_.failure_reasons(nb, cell_timeout=30, details=details))
    assert (
        reasons[0]
        == "f: ✘ matches softmax(QK^T/sqrt(d_k))V — f: weights differs by up to 0.3 Hint: divide by sqrt(d_k)"
    )
    assert reasons[1].startswith("g: the checks of g timed out")
    assert str(reasons_.failure_reasons(nb)[0]) == "f: ✘ f: weights differs from the expected values by up to 0.3"


def test_grading_test_cells_run_the_verdict_alone():
    """The grading notebook's test cells run the guard's private checks once (not the notebook's own check runs a
    second time); the feedback shows each test cell as the student's notebook has it."""
    nb = runner.grading_notebook(releases.release_notebook("ch03_self_attention"), "ch03_self_attention")
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert tests and all("EXERCISES.run" not in c.source for c in tests)
    assert all(
        c.source.strip().splitlines()
        == ["### BEGIN HIDDEN TESTS", f'_autograder_guard.verdict("{n}")', "### END HIDDEN TESTS"]
        for c in tests
        for n in [c.metadata["nbgrader"]["grade_id"].removeprefix("test_")]
    )
    shown = feedback.decided_feedback(nb, {}, releases.read("ch03_self_attention"), [])
    cell = next(c for c in shown.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_causal_mask")
    assert (
        cell.source.startswith("# Checks for `causal_mask` (2 points)") and 'EXERCISES.run("causal_mask"' in cell.source
    )
    assert "_autograder_guard" not in cell.source and "hidden=True" not in cell.source


def test_usable_cores_follow_the_cgroups_cpu_quota(tmp_path):
    """A container's CPU quota (cgroup v2 cpu.max, v1 cfs_quota_us) caps the cores, rounded up, at least 1; no quota
    leaves the affinity's count."""
    import os

    mine = len(os.sched_getaffinity(0))
    v2 = tmp_path / "v2"
    (v2 / "grader").mkdir(parents=True)
    own = tmp_path / "cgroup-v2"
    own.write_text("0::/grader\n")
    for quota, expected in (("50000 100000", 1), ("max 100000", mine), ("150000 100000", min(mine, 2))):
        (v2 / "grader" / "cpu.max").write_text(quota + "\n")
        assert execute.usable_cores(own, v2) == expected, quota
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct" / "grader").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "grader" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu,cpuacct" / "grader" / "cpu.cfs_period_us").write_text("100000\n")
    own1 = tmp_path / "cgroup-v1"
    own1.write_text("5:cpu,cpuacct:/grader\n3:memory:/grader\n")
    assert execute.usable_cores(own1, v1) == 1
    assert execute.usable_cores(tmp_path / "missing", tmp_path / "none") == mine


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
def test_workers_started_as_new_interpreters_grade_as_forked_ones(tmp_path, monkeypatch):
    """Without the batch's fork server (AUTOGRADER_FORK_WORKERS=off: each worker a new interpreter, as before it),
    the reference and the buggy sample get the same rows as with it."""
    files = sorted((notebooks.SAMPLES / "ch03_self_attention").glob("*.ipynb"))
    files = [f for f in files if f.name.startswith(("lovelace", "hopper"))]
    forked = batch.grade(files, "ch03_self_attention", tmp_path / "forked", jobs=2)
    monkeypatch.setenv("AUTOGRADER_FORK_WORKERS", "off")
    started = batch.grade(files, "ch03_self_attention", tmp_path / "started", jobs=2)
    as_rows = [(r.submission, r.score, r.status, r.reason, r.warnings) for r in forked]
    assert as_rows == [(r.submission, r.score, r.status, r.reason, r.warnings) for r in started]
    assert sorted(r.score for r in forked) == [6.0, 10.0]


def test_errors_in_ungraded_cells_are_flagged():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell("def f(): ...", grade_id="f", solution=True),
        _cell("f(torch.ones(2, 3))", error=("ValueError", "mask of shape (2, 3) cannot broadcast\nmore")),
        _cell("EXERCISES.run('f', f)", grade_id="test_f", grade=True),
        _cell("selfcheck_here('x')", error=("RuntimeError", "not here")),
        _cell("def g(): ...", grade_id="g", solution=True),
        _cell("g()", error=("NotImplementedError", "")),
        _cell("g(); g()", error=("NotImplementedError", "")),
    ]
    warnings = _en(reasons_.ungraded_cell_errors(nb))
    assert warnings == [
        "a cell after the answer of f raised ValueError: mask of shape (2, 3) cannot broadcast "
        "(that cell is not graded: see the feedback)",
        "2 cells after the answer of g raised NotImplementedError (those cells are not graded: see the feedback)",
    ]


def test_feedback_never_shows_grader_code(tmp_path):
    import nbformat

    chapter = "ch03_self_attention"
    nb = runner.grading_notebook(releases.release_notebook(chapter), chapter)
    setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    test = next(c for c in nb.cells if "### END HIDDEN TESTS" in c.source)
    printed = nbformat.v4.new_code_cell("print(In[1]); In")
    printed.outputs = [
        nbformat.v4.new_output("stream", text=setup.source + "\n" + test.source),
        nbformat.v4.new_output("execute_result", data={"text/plain": repr([setup.source, test.source])}),
    ]
    nb.cells.append(printed)
    page = tmp_path / "feedback.html"
    feedback.write_feedback(page, nb, "s", releases.read(chapter), {})
    text = page.read_text()
    assert "_autograder_guard" not in text and "autograder.grading" not in text and "hidden=True" not in text


def test_feedback_does_not_depend_on_how_the_kernel_chunked_a_cells_prints(tmp_path):
    """The same prints, flushed as one stream message or as two, give the same feedback page (seen on a cluster)."""
    import nbformat

    chapter = "ch03_self_attention"
    read = releases.read(chapter)
    pages = []
    for chunks in (["✔ first check\n✔ second check\n"], ["✔ first check\n", "✔ second check\n"]):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("check()", id="the-check")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in chunks]
        nb.cells.append(cell)
        page = tmp_path / f"{len(chunks)}.html"
        feedback.write_feedback(page, nb, "s", read, {})
        pages.append(page.read_bytes())
    assert pages[0] == pages[1]
    assert pages[0].count("✔".encode()) == 2


def test_rows_that_could_not_be_run_get_feedback(tmp_path):
    import nbformat
    from nbclient.exceptions import DeadKernelError

    from autograder.grading import worker

    died = worker._kernel_died(3072, [{"type": "verdict", "exercise": "b"}], ["a", "b", "c"], oom_killed=False)
    said = runner.failure(runner.Run(nbformat.v4.new_notebook(), DeadKernelError("Kernel died")), 30, died)
    why = str(said)
    assert "kernel died while running the cells of c" in why and "after the checks of b" in why and "3072 MB" in why
    assert said.render("zh").startswith("内核在运行 c 的单元格") and "b 的检查之后" in said.render("zh")
    page = tmp_path / "f.html"
    chapter = releases.Chapter("ch", (), {"a": 1}, 0, nbformat.v4.new_notebook(), {}, {}, {})
    feedback.write_feedback(page, None, "s", chapter, {}, warnings=["a note"], reasons=[why], unreadable=False)
    text = page.read_text()
    assert "kernel died" in text and "a note" in text and "Download the notebook again" not in text


def test_silent_repairs_are_warnings():
    import copy
    import json

    from autograder import canonical

    release = releases.release_notebook("ch02_bahdanau_attention")
    filled = json.loads(__import__("nbformat").writes(builder.fill_release(release, "ch02_bahdanau_attention")))
    tests = [i for i, c in enumerate(filled["cells"]) if c["metadata"].get("nbgrader", {}).get("grade")]
    d = copy.deepcopy(filled)
    d["cells"].insert(tests[0] + 1, copy.deepcopy(d["cells"][tests[0]]))  # a duplicated test cell
    pasted = copy.deepcopy(d["cells"][tests[-1] + 1])
    pasted["metadata"], pasted["id"] = {}, "pasted"
    d["cells"].append(pasted)  # a pasted copy of a test cell
    d["cells"][tests[1] + 1]["cell_type"] = "markdown"  # a test cell turned into markdown
    d["cells"][tests[1] + 1].pop("outputs"), d["cells"][tests[1] + 1].pop("execution_count")
    _, warnings = canonical.canonicalise(json.dumps(d), release)
    text = "; ".join(map(str, warnings))
    first, second, last = (d["cells"][i]["id"] for i in (tests[0], tests[1] + 1, tests[-1] + 1))
    assert "more than once" in text and first in text and last in text, warnings
    assert f"test cell {second} was not a code cell" in text, warnings


def _lms_row(submission: str, score: float, reason=None) -> report.Row:
    who = lms.parse(pathlib.PurePath(submission))
    return report.Row(
        submission, who.name, "ch08_kv_cache", {"x": score}, score, 10.0, "graded", str(reason or ""),
        lms=who.lms, lms_id=who.lms_id, name=who.name, late=who.late, reasons=[reason] if reason else [],
    )  # fmt: skip


def test_one_lms_row_per_student_by_a_stated_rule(tmp_path):
    """Several files of one student: the assignment's chapter beats another chapter's notebook, then the latest
    submission (Canvas's submission id, its re-upload counter); the others are listed as needing attention and
    are in grades.csv, never in the LMS file."""
    rows = [
        _lms_row("lovelaceada_1001_90001_ch08_kv_cache.ipynb", 10),
        _lms_row(
            "lovelaceada_1001_90099_ch10_flash_attention.ipynb",
            0,
            collect.other_chapter_reason("ch10_flash_attention", "ch08_kv_cache"),
        ),
        _lms_row("turingalan_1002_90002_ch08_kv_cache.ipynb", 4),
        _lms_row("turingalan_LATE_1002_90005_ch08_kv_cache-1.ipynb", 7),
        _lms_row("hoppergrace_1003_90003_ch08_kv_cache.ipynb", 9),
    ]
    choice = lms.choose(rows)  # as collection chooses, kept on each row: the report reads it
    assert [r.in_lms_file for r in rows] == [True, False, False, True, True]
    assert [r.submission for r in choice.kept] == [rows[0].submission, rows[3].submission, rows[4].submission]
    assert not choice.undecided
    assert {(r.submission, best.submission) for r, best in choice.superseded} == {
        (rows[1].submission, rows[0].submission),
        (rows[2].submission, rows[3].submission),
    }
    report.write_reports(rows, tmp_path, {"x": 10}, assignment="Chapter 8 (12345)")
    with open(tmp_path / lms.CANVAS_FILE) as f:
        canvas = list(csv.DictReader(f))
    assert sorted((r["ID"], r["Chapter 8 (12345)"]) for r in canvas) == [("1001", "10"), ("1002", "7"), ("1003", "9")]
    with open(tmp_path / report.CSV_NAME) as f:
        assert len(list(csv.DictReader(f))) == 5
    summary = (tmp_path / "summary.md").read_text()
    assert "## Needs attention" in summary and rows[1].submission in summary and rows[2].submission in summary


@pytest.mark.slow
def test_a_canvas_download_with_a_stray_chapter_keeps_the_students_grade(tmp_path):
    """The issue's zip: chapter 8 submissions, one student also uploaded their chapter 10 notebook (a later
    submission id). The README's command as written grades chapter 8, gives the stray file its own row and reason,
    and leaves the student's chapter 8 score as their only Canvas row."""
    import subprocess
    import sys
    import zipfile

    z = tmp_path / "submissions.zip"
    ch08 = sorted((notebooks.SAMPLES / "ch08_kv_cache").glob("lovelace*.ipynb"))[0]
    ch10 = sorted((notebooks.SAMPLES / "ch10_flash_attention").glob("lovelace*.ipynb"))[0]
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("lovelaceada_1001_90001_ch08_kv_cache.ipynb", ch08.read_bytes())
        f.writestr("lovelaceada_1001_90077_notebook.ipynb", ch10.read_bytes())  # named by the student
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autograder", "grade", str(z), "--lms-assignment", "Chapter 8 (12345)"]
    ran = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, cwd=notebooks.ROOT, timeout=900)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "another chapter's notebook" in ran.stdout
    with open(out / "ch08_kv_cache" / lms.CANVAS_FILE) as f:
        canvas = list(csv.DictReader(f))
    assert [(r["ID"], r["Chapter 8 (12345)"]) for r in canvas] == [("1001", "10")]
    with open(out / "ch08_kv_cache" / report.CSV_NAME) as f:
        grades = {r["submission"]: r for r in csv.DictReader(f)}
    stray = grades["lovelaceada_1001_90077_notebook.ipynb"]
    assert "chapter 10 (ch10_flash_attention)" in stray["reason"] and "chapter 8" in stray["reason"]
    assert "Needs attention" in (out / "ch08_kv_cache" / "summary.md").read_text()


@pytest.mark.slow
def test_the_grading_path_report_step_is_a_line(capsys):
    """``scripts/grading_path.py`` as a maintainer runs it (the chapter's samples, real kernels), watching the
    batch at every depth: the report step enters report and lms once each (it reads the LMS file's choice that
    collection made, never lms.one_per_student) and its path returns to a module it left at most twice."""
    from scripts import grading_path

    steps = grading_path.main()
    line = steps["report"]
    assert line.entered == {"report": 1, "lms": 1} and line.returns <= 2, (line.entered, line.path)
    assert "lms.one_per_student" in steps["collect"].called and "lms.one_per_student" not in line.called
    assert "path: batch -> report -> lms -> report -> batch  (2 returns" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ LMS downloads


def test_lms_identity_comes_only_from_the_lms_structure():
    """Moodle: the outermost folder, else the FIRST `_<id>_assignsubmission_file_`; Canvas: the leading
    `name_userid_submissionid_`. A marker inside the student's own file name is reported, never taken."""
    eve = "Eve Mallory_5006_assignsubmission_file_x_5001_assignsubmission_file_ch08_kv_cache (9).ipynb"
    flat = lms.parse(eve)
    assert (flat.lms, flat.name, flat.lms_id, flat.claims) == (lms.MOODLE, "Eve Mallory", "5006", "5001")
    nested = lms.parse("d/Eve_5006_assignsubmission_file/x_5001_assignsubmission_file/ch08_kv_cache.ipynb")
    assert (nested.lms_id, nested.claims) == ("5006", "5001")
    canvas = lms.parse("babbagecharles_1004_90004_x_5001_assignsubmission_file_ch08_kv_cache.ipynb")
    assert (canvas.lms, canvas.lms_id, canvas.claims) == (lms.CANVAS, "1004", "5001")
    canvas = lms.parse("babbagecharles_1004_90004_turingalan_1002_90099_ch08_kv_cache.ipynb")
    assert (canvas.lms_id, canvas.claims) == ("1004", "1002")
    chinese = lms.parse("李伟_2005_assignsubmission_file/ch05_transformer.ipynb")
    assert (chinese.lms, chinese.name, chinese.lms_id, chinese.claims) == (lms.MOODLE, "李伟", "2005", "")
    (sub,) = collect.collect([pathlib.Path(eve)], pathlib.Path("/nonexistent-out"), releases.read("ch08_kv_cache"))
    row = report.row(sub, submission.Result("x", "", "s", "graded", ""), "ch08_kv_cache", {"x": 1}, 0.0)
    assert row.lms_id == "5006" and any("another Moodle id (5001)" in str(w) for w in row.warnings)


def _moodle_row(name: str, uploaded_at: float = 0.0, reason: str = "") -> report.Row:
    row = _lms_row(f"Ada Lovelace_5001_assignsubmission_file/{name}", 1, reason)
    row.uploaded_at = uploaded_at
    return row


def test_the_latest_moodle_upload_by_its_counter_then_its_time_else_the_instructor_chooses():
    old, new, newer = (_moodle_row(n) for n in ("ch08.ipynb", "ch08 (1).ipynb", "ch08 (2).ipynb"))
    assert lms.newer(new, old) and lms.newer(newer, new) and not lms.newer(old, newer)
    assert lms.one_per_student([newer, old, new]).kept == [newer], "x.ipynb < x (1).ipynb < x (2).ipynb"
    # Different names: the zip entries' times; equal or unknown times: the download cannot tell.
    a, b = _moodle_row("ch08.ipynb", 100.0), _moodle_row("final.ipynb", 200.0)
    assert lms.one_per_student([a, b]).kept == [b]
    a.uploaded_at = b.uploaded_at
    choice = lms.one_per_student([a, b])
    assert choice.kept == [] and choice.undecided == [[a, b]]
    assert lms.one_per_student([a, b], prefer={"ch08.ipynb"}).kept == [a], "the instructor's choice"
    # A PDF does not stand for the student while a notebook does, whatever its time.
    pdf = _moodle_row("ch08.pdf", 300.0, canonical.not_a_notebook("PDF"))
    assert lms.one_per_student([a, pdf]).kept == [a]
    assert lms.one_per_student([pdf]).kept == [pdf], "a PDF alone is the student's row: a zero"


def test_canvas_files_of_one_submission_are_left_to_the_instructor(tmp_path):
    a = _lms_row("lovelaceada_1001_90001_ch08_kv_cache.ipynb", 10)
    b = _lms_row("lovelaceada_1001_90001_notes.ipynb", 0)
    lms.choose([a, b])  # as collection chooses, kept on each row: the report reads it
    report.write_reports([a, b], tmp_path, {"x": 10}, assignment="Chapter 8 (12345)")
    assert "cannot tell which of" in a.warnings[0] and "--prefer" in a.warnings[0]
    assert not (tmp_path / lms.CANVAS_FILE).exists(), "no row guessed for the student"
    summary = (tmp_path / "summary.md").read_text()
    assert "0 rows, one per student, from 2 files" in summary and "--prefer" in summary
    lms.choose([a, b], prefer=[a.submission])
    report.write_reports([a, b], tmp_path, {"x": 10}, assignment="Chapter 8 (12345)")
    with open(tmp_path / lms.CANVAS_FILE) as f:
        assert [(r["ID"], r["Chapter 8 (12345)"]) for r in csv.DictReader(f)] == [("1001", "10")]


def test_names_in_any_script_are_kept_and_fall_back_to_the_lms_id(tmp_path):
    taken: set[str] = set()
    name = "李伟_2005_assignsubmission_file/ch05_transformer.ipynb"
    assert collect.student_id_from_filename(name, taken) == "李伟_2005"
    assert collect.student_id_from_filename(name, taken) == "李伟_2005-2"
    assert collect.student_id_from_filename(name, set(), ascii_only=True) == "moodle_2005"
    assert collect.student_id_from_filename("Ada Lovelace_7_assignsubmission_file/x.ipynb", set(), ascii_only=True) == (
        "Ada-Lovelace_7"
    )
    plain = collect.student_id_from_filename("作业.ipynb", set(), ascii_only=True)
    assert plain.isascii() and plain == collect.student_id_from_filename("作业.ipynb", set(), ascii_only=True)
    assert collect.unicode_names_work(tmp_path)


def test_every_file_of_a_download_is_counted_by_what_it_is(tmp_path):
    for name, data in [
        ("a_1_2_ch05.ipynb", b"{}"),
        ("b_3_4_ch05.ipynb", b"{}"),
        ("b_3_5_ch05.pdf", b"%PDF-1.4"),
        ("c_5_6_ch05.ipynb.txt", b'{"cells": []}'),
        ("d_7_8_x.zip", b"PK\x03\x04"),
        ("e_9_10_empty.ipynb", b""),
        ("f_11_12_x.py", b"print(1)"),
    ]:
        (tmp_path / name).write_bytes(data)
    files = collect.collect(sorted(tmp_path.iterdir()), tmp_path / "out", releases.read("ch05_transformer"))
    assert collect.describe(files) == (
        "7 files from 6 students: 3 notebooks, 1 PDF, 1 zip archive, 1 empty file, 1 .py file"
    )
    assert str(canonical.not_a_notebook("PDF", b"%PDF-1.4")).startswith("not a notebook (PDF): this is a PDF")


def _zip(path: pathlib.Path, entries) -> pathlib.Path:
    """A download zip of (name, contents, minute of the entry's time) entries."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        for name, data, minute in entries:
            z.writestr(zipfile.ZipInfo(name, (2026, 3, 2, 10, minute, 0)), data)
    return path


def _sample(who: str) -> bytes:
    return next((notebooks.SAMPLES / "ch05_transformer").glob(f"{who}*.ipynb")).read_bytes()


PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"


def _downloads(ch: str) -> dict[str, dict]:
    """The issue's Moodle and Canvas downloads of chapter 5: entries, the LMS file's grades, the victim of a file
    named to claim another id, the PDF, the student named in Chinese, the re-uploader."""
    full, bug, blank = _sample("lovelace"), _sample("hopper"), _sample("turing")
    return {
        lms.MOODLE: dict(
            entries=[
                (f"Ada Lovelace_5001_assignsubmission_file/{ch}.ipynb", full, 1),
                (f"Alan Turing_5002_assignsubmission_file/{ch}.ipynb", bug, 2),
                (f"Alan Turing_5002_assignsubmission_file/{ch} (1).ipynb", full, 9),  # the re-upload: sorts first
                (f"Grace Hopper_5003_assignsubmission_file/{ch}.ipynb", blank, 3),
                (f"Charles Babbage_5004_assignsubmission_file/{ch}.pdf", PDF, 4),
                (f"李伟_5005_assignsubmission_file/{ch}.ipynb", bug, 5),
                (f"Eve Mallory_5006_assignsubmission_file_x_5001_assignsubmission_file_{ch} (9).ipynb", blank, 6),
                (f"__MACOSX/Ada Lovelace_5001_assignsubmission_file/._{ch}.ipynb", b"\0", 7),
                ("Ada Lovelace_5001_assignsubmission_file/.DS_Store", b"\0", 7),
                ("Ada Lovelace_5001_assignsubmission_onlinetext_onlinetext.html", b"<p>see my notebook</p>", 8),
            ],
            grades={"5001": "9", "5002": "9", "5003": "0", "5004": "0", "5005": "7", "5006": "0"},
            victim="5001",
            pdf=f"Charles Babbage_5004_assignsubmission_file/{ch}.pdf",
            chinese="李伟_5005",
            reuploader="Alan-Turing_5002",
        ),
        lms.CANVAS: dict(
            entries=[
                (f"lovelaceada_1001_90001_{ch}.ipynb", bug, 1),
                (f"lovelaceada_late_1001_90011_{ch}-1.ipynb", full, 2),  # the re-upload, late (marker in lower case)
                (f"turingalan_1002_90002_{ch}.ipynb", full, 3),
                (f"turingalan_1002_90012_{ch}.pdf", PDF, 4),  # a stray PDF, a later submission
                (f"hoppergrace_1003_90003_{ch}.ipynb", blank, 5),
                (f"babbagecharles_1004_90004_turingalan_1002_90099_{ch}.ipynb", blank, 6),
                ("李伟_1005_90005_作业.ipynb", bug, 7),
            ],
            grades={"1001": "9", "1002": "9", "1003": "0", "1004": "0", "1005": "7"},
            victim="1002",
            pdf=f"turingalan_1002_90012_{ch}.pdf",
            chinese="李伟_1005",
            reuploader="lovelaceada_1001",
        ),
    }


@pytest.mark.slow
def test_lms_downloads_give_every_student_one_right_row(tmp_path):
    """The issue's Moodle and Canvas downloads of chapter 5, graded by the README's command as written (one batch:
    identical notebooks share a kernel run): a re-upload gets the newer file's grade, a PDF a zero that says so, a
    name in Chinese stays readable in every output, a file named to claim another student's id changes nothing of
    that student's row, litter and online text are listed once, and every file has exactly one row in grades.csv."""
    import subprocess
    import sys

    ch = "ch05_transformer"
    downloads = _downloads(ch)
    zips = [str(_zip(tmp_path / f"{system}.zip", d["entries"])) for system, d in downloads.items()]
    cmd = [sys.executable, "-m", "autograder", "grade", *zips, "--lms-assignment", "Chapter 5 (12345)"]
    ran = subprocess.run([*cmd, "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=notebooks.ROOT)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    out = tmp_path / "out" / ch
    assert "14 files from 11 students: 12 notebooks, 2 PDFs" in ran.stdout, ran.stdout
    assert ran.stdout.count("._ch05") == 1 and ran.stdout.count(".DS_Store") == 1, "litter listed once"
    assert ran.stdout.count("_assignsubmission_onlinetext_") == 1, "a flat download's online text: listed once"

    with open(out / report.CSV_NAME, encoding="utf-8") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert len(rows) == 14 and not any("onlinetext" in name for name in rows), "one row per file, online text none"
    late = rows[f"lovelaceada_late_1001_90011_{ch}-1.ipynb"]
    assert (late["lms_id"], late["late"]) == ("1001", "yes"), "the lower-case LATE marker: still the student's"
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "11 rows, one per student, from 14 files" in summary and "Needs attention" in summary
    for system, d in downloads.items():
        pdf = rows[d["pdf"]]
        assert pdf["score"] == "0" and pdf["reason"].startswith("not a notebook (PDF)") and d["pdf"] in summary
        if system == lms.MOODLE:
            with open(out / lms.MOODLE_FILE, encoding="utf-8") as f:
                table = list(csv.DictReader(f))
            got = {r["Identifier"].removeprefix(lms.MOODLE_PARTICIPANT): r["Grade"] for r in table}
            assert {r["Full name"] for r in table} >= {"李伟", "Charles Babbage"}
        else:
            with open(out / lms.CANVAS_FILE, encoding="utf-8") as f:
                table = list(csv.DictReader(f))
            got = {r["ID"]: r["Chapter 5 (12345)"] for r in table}
            assert {r["Student"] for r in table} >= {"李伟", "turingalan"}
        assert got == d["grades"], "one row per student: the newer file's grade, the PDF's zero, the victim's own"
        victim = [r for r in rows.values() if r["lms"] == system and r["lms_id"] == d["victim"]]
        assert not any("another" in r["warnings"] for r in victim), "nothing of the attacker's file in the victim's"
        assert sum("not in the LMS" not in r["warnings"] for r in victim) == 1
        attacker = [r for r in rows.values() if r["lms"] == system and f"id ({d['victim']})" in r["warnings"]]
        assert len(attacker) == 1 and attacker[0]["submission"] in summary, "the claiming file is flagged"
        # Names readable in every output: grades.csv, the feedback and graded files, the feedback's header.
        chinese = d["chinese"]
        assert [r["student_id"] for r in rows.values() if r["lms"] == system and chinese.endswith(r["lms_id"])] == [
            chinese
        ]
        assert chinese in (out / "feedback" / f"{chinese}.html").read_text(encoding="utf-8")
        assert (out / "graded" / f"{chinese}.ipynb").exists()
        # The re-uploader's page named after the student is the newer file's; the older one's says it is superseded.
        page = out / "feedback" / f"{d['reuploader']}.html"
        assert "superseded" not in page.read_text(encoding="utf-8")
        assert "superseded by" in page.with_name(f"{d['reuploader']}-2.html").read_text(encoding="utf-8")


def test_the_lms_row_gets_the_page_named_after_the_student(tmp_path):
    """Before grading, the file the LMS file will carry gets the plain student id (its feedback page is
    `<student>.html`); ``--prefer`` moves it."""
    folder = tmp_path / "Alan Turing_5002_assignsubmission_file"
    folder.mkdir()
    old, new = folder / "ch05_transformer.ipynb", folder / "ch05_transformer (1).ipynb"
    for path in (old, new):
        path.write_bytes(_sample("lovelace"))
    (tmp_path / "out" / "feedback").mkdir(parents=True)
    read = releases.read("ch05_transformer")
    ids = {s.path: s.student_id for s in collect.collect([old, new], tmp_path / "out", read)}
    assert ids == {new: "Alan-Turing_5002", old: "Alan-Turing_5002-2"}
    chosen = collect.collect([old, new], tmp_path / "out", read, prefer={"ch05_transformer.ipynb"})
    assert {s.path: s.student_id for s in chosen} == {old: "Alan-Turing_5002", new: "Alan-Turing_5002-2"}


def test_the_line_builds_the_grading_notebook_once_and_writes_feedback_in_one_place(tmp_path, monkeypatch):
    """One batch: the release notebook is the committed one (never built), the grading notebook is made from it
    once (no notebook builder, no nbgrader, no gradebook), and every outcome's page — a file that cannot be read, a run that timed out, a graded
    run — comes from ``feedback.Pages.write`` (``write_page``, the one writer), called once per submission; the result
    file comes last."""
    import sys

    from autograder.grading import feedback as feedback_module

    chapter = "ch03_self_attention"
    samples = notebooks.SAMPLES / chapter
    files = {
        "unreadable": samples / f"babbagecharles_LATE_1004_90004_{chapter}.ipynb",  # a download cut short
        "timeout": samples / f"hoppergrace_1003_90003_{chapter}.ipynb",
        "graded": samples / f"lovelaceada_1001_90001_{chapter}.ipynb",
    }
    built: dict[str, int] = {"build_instructor": 0, "build_release": 0, "generate_assignment": 0, "grading_notebook": 0}

    def counted(module, name):
        real = getattr(module, name)

        def call(*args, **kwargs):
            built[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, call)

    counted(builder, "build_instructor")
    counted(builder, "build_release")
    counted(builder, "generate_assignment")
    counted(runner, "grading_notebook")

    def run_job(job, prefix, cwd, timeout, spawner=None):  # the worker's two outcomes, without a kernel
        if job.student_id.startswith("hopper"):
            return submission.Result("", "", job.student_id, "error", f"the notebook ran longer than {timeout} s"), None
        scores = {ex.name: float(ex.points) for ex in notebooks.checks_module(chapter).EXERCISES}
        result = submission.Result("", "", job.student_id, "graded", "", scores, ["from the run"])
        return result, pathlib.Path(job.canonical).read_text()

    monkeypatch.setattr(batch.execute, "run_job", run_job)
    monkeypatch.setenv("AUTOGRADER_FORK_WORKERS", "off")
    pages: list[tuple[str, str]] = []  # (submission, status) per feedback.Pages.write
    writers: set[str] = set()  # who called write_feedback
    real_write, real_page = feedback_module.Pages.write, feedback_module.write_feedback

    def write(self, sub):
        assert not sub.result_file.exists(), "the result file is written after the feedback"
        pages.append((sub.label, sub.outcome.status))
        return real_write(self, sub)

    def write_feedback(*args, **kwargs):
        writers.add(sys._getframe(1).f_code.co_name)
        return real_page(*args, **kwargs)

    monkeypatch.setattr(feedback_module.Pages, "write", write)
    monkeypatch.setattr(feedback_module, "write_feedback", write_feedback)
    rows = batch.grade(list(files.values()), chapter, tmp_path, jobs=2, notebook_timeout=5)

    assert built == {"build_instructor": 0, "build_release": 0, "generate_assignment": 0, "grading_notebook": 1}
    assert sorted(pages) == sorted((f.name, "graded" if k == "graded" else "error") for k, f in files.items())
    assert writers == {"write_page"}  # feedback.write_page, the one writer
    by_name = {r.submission: r for r in rows}
    assert by_name[files["graded"].name].score == by_name[files["graded"].name].max_score
    assert "ran longer than 5 s" in by_name[files["timeout"].name].reason
    for r in rows:
        page = (tmp_path / "feedback" / f"{r.student_id}.html").read_text()
        assert r.student_id in page
    assert "Download the notebook again" in (tmp_path / "feedback" / "babbagecharles_1004.html").read_text()
    assert "longer than 5 s" in (tmp_path / "feedback" / "hoppergrace_1003.html").read_text()
    assert "from the run" in (tmp_path / "feedback" / "lovelaceada_1001.html").read_text()


@pytest.mark.parametrize("chapter", notebooks.chapters())
def test_the_grading_notebooks_verdicts_come_in_the_exercises_order(chapter):
    """Issue 46: the worker wants one verdict per exercise, in ``EXERCISES``' order (``scoring.order_violations``),
    so the grading notebook runs its verdict cells in that order, once each, as the release notebook (which every
    submission is canonicalised to, cell for cell) has its test cells."""
    from autograder import releases

    order = [ex.name for ex in notebooks.checks_module(chapter).EXERCISES]
    graded = runner.grading_notebook(releases.release_notebook(chapter), chapter)
    verdicts = [n for c in graded.cells for n in re.findall(r'_autograder_guard\.verdict\("(\w+)"\)', c.source)]
    assert verdicts == order
    release = releases.release_notebook(chapter)
    tests = [c.metadata["nbgrader"]["grade_id"] for c in release.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert tests == [f"test_{n}" for n in order]


def test_a_shared_runs_page_names_its_own_student_only(tmp_path):
    """Identical notebooks share one kernel run, whose result carries the first file's student id: each file's
    feedback page is under its own id and never names the other student (the row says which file it shares with)."""
    chapter = "ch03_self_attention"
    uploads = []
    for name in ("lovelaceada_1001_90001", "李伟_5005_90005"):
        upload = tmp_path / "in" / f"{name}_{chapter}.ipynb"
        upload.parent.mkdir(exist_ok=True)
        upload.write_text("{}")
        uploads.append(upload)
    read = releases.read(chapter)
    first, second = collect.collect(uploads, tmp_path / "out", read)
    result = submission.Result("", "", first.student_id, "error", "the run could not be completed")
    execute.share([first, second], result, None)
    for sub in (first, second):
        feedback.Pages(read, tmp_path).write(sub)
    own, other = (tmp_path / f"{second.student_id}.html").read_text(encoding="utf-8"), first.student_id
    assert second.student_id in own and other not in own, own[:600]
    assert second.same_as == first.label  # the row (grades.csv) says which file the run was shared with
