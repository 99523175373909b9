"""Every use of nbgrader's API in the course, in one place.

The grading machinery and the notebook builder call these functions; nothing else imports nbgrader (the student
install has no nbgrader at all). What is here:

* :func:`course_config`, :func:`generate_assignment`, :func:`autograde`, :func:`gradebook_scores` — nbgrader's
  ``NbGraderAPI`` and gradebook, for a course directory of our own;
* :class:`CanvasExport`, :class:`MoodleExport` — nbgrader export plugins that write an LMS's grade import file
  (``lms.py``) from nbgrader's gradebook, for instructors who use nbgrader's own workflow::

    nbgrader export --exporter=autograder.grading.nbgrader_adapter.CanvasExport --assignment=ch03_self_attention \\
        --CanvasExport.column="Chapter 3 (12345)" --to canvas_import.csv
    nbgrader export --exporter=autograder.grading.nbgrader_adapter.MoodleExport --assignment=ch03_self_attention \\
        --to moodle_grading_worksheet.csv

  The nbgrader student ids must be the LMS's ids (Canvas user id, Moodle participant id), as the zip_collect rule
  of ``nbgrader_course/nbgrader_config.py`` makes them. One assignment per file (an LMS imports one at a time).
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
import warnings

from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.plugins import ExportPlugin
from traitlets import Unicode
from traitlets.config import Config

from .. import releases
from . import lms
from .report import Row

warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy chatter from nbgrader's gradebook


def course_config(course: pathlib.Path, cell_timeout: int = 120) -> Config:
    """nbgrader configuration for a course directory at ``course`` (its gradebook is ``gradebook.db`` there)."""
    # nbgrader runs the `alembic` script by name: make the scripts of this Python's environment findable
    # even when the environment is not activated (python -m autograder from .venv/bin/python).
    scripts = os.path.dirname(sys.executable)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")

    c = Config()
    c.CourseDirectory.root = str(course)
    c.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    c.ClearSolutions.code_stub = {"python": releases.CODE_STUB}
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    return c


def generate_assignment(course: pathlib.Path, chapter: str) -> None:
    """nbgrader's generate_assignment for ``course/source/<chapter>/<chapter>.ipynb``: records every test cell and
    its points in the gradebook and writes ``course/release/<chapter>/``. Raises RuntimeError when it fails."""
    result = NbGraderAPI(config=course_config(course)).generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(
            f"nbgrader generate_assignment failed for {chapter}:\n{result.get('error')}\n{result.get('log')}"
        )


def autograde(
    course: pathlib.Path, chapter: str, student: str, cell_timeout: int, ipc: str | None = None
) -> tuple[bool, str]:
    """nbgrader's autograde of ``course/submitted/<student>/<chapter>/``: (success, nbgrader's log and error).
    With ``ipc`` (a path prefix), the kernel's channels are socket files ``<ipc>-1`` ... instead of TCP on
    loopback (a jailed kernel has its own network namespace)."""
    config = course_config(course, cell_timeout)
    if ipc:
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = ipc
    result = NbGraderAPI(config=config).autograde(chapter, student, force=True, create=True)
    return bool(result["success"]), (result.get("log") or "") + (result.get("error") or "")


def gradebook_scores(course: pathlib.Path, chapter: str, student: str) -> dict[str, float]:
    """Exercise -> nbgrader's autograded points of ``student``'s notebook (test cells with points only)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(chapter, chapter, student)
        return {g.name.removeprefix("test_"): float(g.score) for g in nb.grades if g.max_score > 0}


# ------------------------------------------------------------------------------------------------ export plugins


class _LmsExport(ExportPlugin):
    system = ""

    def export(self, gradebook) -> None:
        if len(self.assignment) != 1:
            raise ValueError(f"{type(self).__name__} writes one assignment: pass --assignment=NAME")
        name = str(self.assignment[0])
        assignment = gradebook.find_assignment(name)
        order = [ex.name for ex in releases.checks_module(name).EXERCISES] if name in releases.chapters() else []
        rows: list[Row] = []
        points: dict[str, float] = {}
        for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
            student = submission.student
            if self.student and student.id not in map(str, self.student):
                continue
            grades = [g for nb in submission.notebooks for g in nb.grades]
            for g in grades:
                points.setdefault(g.name.removeprefix("test_"), g.max_score)
            scores = {g.name.removeprefix("test_"): float(g.score) for g in grades}
            if not student.id.isdigit():
                self.log.warning("%s: student id %r is not a %s id; left out", name, student.id, self.system)
                continue
            if submission.needs_manual_grade:
                # Left out, so the LMS keeps it ungraded (a 0 uploaded now would read as a grade).
                self.log.warning(
                    "%s: %s needs manual grading (nbgrader could not autograde it, or a cell needs a "
                    "grader): left out of the %s file; grade it in formgrader and export again",
                    name,
                    student.id,
                    self.system,
                )
                continue
            reason = ""
            full = ", ".join(p for p in (student.first_name, student.last_name) if p)
            rows.append(
                Row(
                    name,
                    student.id,
                    name,
                    scores,
                    float(submission.score),
                    float(assignment.max_score),
                    "graded",
                    reason,
                    lms=self.system,
                    lms_id=student.id,
                    name=full,
                    graded_at=time.time(),
                )
            )
        points = {n: points[n] for n in order if n in points} | points
        dest = pathlib.Path(self.to or (lms.CANVAS_FILE if self.system == lms.CANVAS else lms.MOODLE_FILE))
        lms.write(self.system, dest, rows, points, assignment=self._column(name))
        self.log.info("Wrote %d row(s) of %s to %s", len(rows), name, dest)

    def _column(self, name: str) -> str:
        return name


class CanvasExport(_LmsExport):
    """Canvas gradebook import CSV (Student, ID, SIS User ID, SIS Login ID, Section, one assignment column)."""

    system = lms.CANVAS
    column = Unicode(
        "",
        help="the assignment column as Canvas names it, with its id: 'Chapter 3 (12345)' "
        "(default: the nbgrader assignment's name)",
    ).tag(config=True)

    def _column(self, name: str) -> str:
        return self.column or name


class MoodleExport(_LmsExport):
    """Moodle assignment offline grading worksheet (Identifier 'Participant N', Grade, Feedback comments …)."""

    system = lms.MOODLE
