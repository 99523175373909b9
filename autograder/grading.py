"""Grade a folder of submitted notebooks with nbgrader, one row per submission.

``grade(paths, chapter, out)``:

1. builds the instructor notebook for ``chapter`` and runs nbgrader's ``generate_assignment`` in a fresh course
   directory under ``out/course`` (this records every test cell, hidden tests included, and its points in
   nbgrader's sqlite gradebook);
2. for each submission file: reads it with nbformat (a file that is not a valid notebook gets a zero with the
   reason, and the batch goes on), places it where nbgrader expects it and runs nbgrader's real ``autograde``
   in a fresh kernel; nbgrader restores every test cell from the gradebook, so an edited or deleted test cell
   does not change the verdict;
3. writes ``out/grades.csv`` (one row per submission file: per-exercise scores, total, status, reason) and
   ``out/feedback/<student>.html``. The feedback shows the student's code and the check messages; the source
   of the hidden tests is removed and a failed test's traceback is cut to its message (hidden checks' messages
   never contain reference values).
"""

from __future__ import annotations

import csv
import dataclasses
import html
import pathlib
import re
import shutil
import warnings

import nbformat

from . import notebooks

CSV_NAME = "grades.csv"


@dataclasses.dataclass
class Row:
    submission: str
    student_id: str
    chapter: str
    scores: dict[str, float]
    score: float
    max_score: float
    status: str  # "graded" or "error"
    reason: str


def student_id_from_filename(name: str, taken: set[str]) -> str:
    """A gradebook id from an LMS file name ('smithjane_1234_5678_ch03_x.ipynb' -> 'smithjane_1234'), unique."""
    stem = pathlib.Path(name).stem
    stem = re.sub(r"_LATE", "", stem)
    parts = stem.split("_")
    base = "_".join(parts[:2]) if len(parts) >= 3 and parts[1].isdigit() else stem
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-") or "student"
    sid, n = base, 1
    while sid in taken:
        n += 1
        sid = f"{base}-{n}"
    taken.add(sid)
    return sid


def chapter_from_filename(name: str) -> str | None:
    for chapter in notebooks.chapters():
        if chapter in name:
            return chapter
    return None


# ------------------------------------------------------------------------------------------------ feedback


def _sanitize_feedback(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove hidden-test source and cut tracebacks of test cells down to the check's message."""
    pattern = re.compile(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "BEGIN HIDDEN TESTS" in cell.source:
            cell.source = pattern.sub("\n# (hidden tests run here)", cell.source)
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                out.traceback = [f"{out.ename}: {out.evalue}"]
    return nb


def _failure_reasons(nb: nbformat.NotebookNode) -> list[str]:
    """One short line per failed test cell, taken from the check's message."""
    reasons = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                lines = [ln.strip() for ln in (out.evalue or out.ename or "").strip().splitlines()]
                # "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>": keep the last two.
                first = " — ".join(lines[1:3]) if len(lines) >= 3 and lines[1].startswith("✘") else (lines or [""])[0]
                first += "".join(f" {ln}" for ln in lines[3:6] if ln.startswith("Hint:"))
                if out.ename == "NameError":
                    first = f"{out.evalue} (was the exercise cell deleted or renamed?)"
                reasons.append(f"{meta['grade_id'].removeprefix('test_')}: {first}")
                break
    return reasons


# ------------------------------------------------------------------------------------------------ grading


def _api(course: pathlib.Path, cell_timeout: int):
    from nbgrader.apps import NbGraderAPI

    c = notebooks._course_config(course)
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    return NbGraderAPI(config=c)


def _gradebook_scores(course: pathlib.Path, chapter: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(chapter, chapter, student)
        return {g.name.removeprefix("test_"): float(g.score) for g in nb.grades if g.max_score > 0}


def grade(paths: list[pathlib.Path], chapter: str, out: pathlib.Path, *, cell_timeout: int = 120,
          log=print) -> list[Row]:
    """Grade ``paths`` (submitted .ipynb files) for ``chapter``; write grades.csv and feedback under ``out``."""
    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy chatter from nbgrader's gradebook
    out = pathlib.Path(out).resolve()
    course = out / "course"
    if course.exists():
        shutil.rmtree(course)
    (course / "source" / chapter).mkdir(parents=True)
    nbformat.write(notebooks.build_instructor(chapter), course / "source" / chapter / f"{chapter}.ipynb")
    api = _api(course, cell_timeout)
    result = api.generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"generate_assignment failed:\n{result.get('error')}\n{result.get('log')}")
    exercises = notebooks.checks_module(chapter).EXERCISES
    max_score = float(exercises.total_points)
    feedback_dir = out / "feedback"
    feedback_dir.mkdir(parents=True, exist_ok=True)

    rows, taken = [], set()
    for path in sorted(paths):
        sid = student_id_from_filename(path.name, taken)
        zero = {ex.name: 0.0 for ex in exercises}
        try:
            submitted = nbformat.read(path, as_version=4)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is a recorded zero
            reason = f"not a readable notebook ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
            rows.append(Row(path.name, sid, chapter, zero, 0.0, max_score, "error", reason))
            log(f"  {path.name}: 0/{max_score:g} — {reason}")
            continue
        target = course / "submitted" / sid / chapter / f"{chapter}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(submitted, target)
        result = api.autograde(chapter, sid, force=True, create=True)
        if not result["success"]:
            err = (result.get("error") or result.get("log") or "unknown error").strip().splitlines()
            reason = f"autograde failed: {err[-1][:300] if err else ''}"
            rows.append(Row(path.name, sid, chapter, zero, 0.0, max_score, "error", reason))
            log(f"  {path.name}: 0/{max_score:g} — {reason}")
            continue
        scores = {**zero, **_gradebook_scores(course, chapter, sid)}
        graded = nbformat.read(course / "autograded" / sid / chapter / f"{chapter}.ipynb", as_version=4)
        reasons = _failure_reasons(graded)
        total = sum(scores.values())
        rows.append(Row(path.name, sid, chapter, scores, total, max_score, "graded", "; ".join(reasons)))
        _write_feedback(graded, feedback_dir / f"{sid}.html", sid, chapter, total, max_score)
        log(f"  {path.name}: {total:g}/{max_score:g}")

    write_csv(rows, out / CSV_NAME, [ex.name for ex in exercises])
    return rows


def _write_feedback(graded, path: pathlib.Path, sid: str, chapter: str, total: float, max_score: float) -> None:
    from nbconvert import HTMLExporter

    nb = _sanitize_feedback(graded)
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    banner = (f"<div style='padding:1em;font-family:sans-serif;background:#eef'><b>{html.escape(chapter)}</b> — "
              f"{html.escape(sid)}: <b>{total:g} / {max_score:g}</b> points</div>")
    path.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1))


def write_csv(rows: list[Row], path: pathlib.Path, exercise_names: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["submission", "student_id", "chapter", *exercise_names, "score", "max_score", "status", "reason"])
        for r in rows:
            w.writerow([r.submission, r.student_id, r.chapter, *(f"{r.scores[n]:g}" for n in exercise_names),
                        f"{r.score:g}", f"{r.max_score:g}", r.status, r.reason])
