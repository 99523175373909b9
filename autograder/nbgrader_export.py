"""nbgrader export plugins that write an LMS's grade import file (``lms.py``) from nbgrader's gradebook::

    nbgrader export --exporter=autograder.nbgrader_export.CanvasExport --assignment=ch03_self_attention \\
        --CanvasExport.column="Chapter 3 (12345)" --to canvas_import.csv
    nbgrader export --exporter=autograder.nbgrader_export.MoodleExport --assignment=ch03_self_attention \\
        --to moodle_grading_worksheet.csv

The nbgrader student ids must be the LMS's ids (Canvas user id, Moodle participant id), as the zip_collect rule
of ``nbgrader_course/nbgrader_config.py`` makes them. One assignment per file (an LMS imports one at a time).
"""

from __future__ import annotations

import pathlib
import time

from nbgrader.plugins import ExportPlugin
from traitlets import Unicode

from . import grading, lms, notebooks


class _LmsExport(ExportPlugin):
    system = ""

    def export(self, gradebook) -> None:
        if len(self.assignment) != 1:
            raise ValueError(f"{type(self).__name__} writes one assignment: pass --assignment=NAME")
        name = str(self.assignment[0])
        assignment = gradebook.find_assignment(name)
        order = [ex.name for ex in notebooks.checks_module(name).EXERCISES] if name in notebooks.chapters() else []
        rows, points = [], {}
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
                grading.Row(
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
        lms.write(
            self.system,
            dest,
            rows,
            points,
            assignment=self._column(name),
            log=lambda text: self.log.warning(text.strip()),
        )
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
