"""The course's nbgrader plugins, for instructors who grade with nbgrader's own workflow (``nbgrader_course/``;
README, "On nbgrader's own workflow"). Nothing else in the installed package imports nbgrader.

* :class:`GradesExport`, :class:`CanvasExport`, :class:`MoodleExport` — ``nbgrader export`` plugins that write the
  course grader's ``grades.csv`` or an LMS's grade import file from nbgrader's gradebook, with the rows
  ``python -m autograder grade`` gives::

    nbgrader export --exporter=autograder.grading.nbgrader_adapter.CanvasExport --assignment=ch03_self_attention \\
        --CanvasExport.column="Chapter 3 (12345)" --to canvas_import.csv

* :class:`ClearHiddenTests`, :class:`FeedbackExporter` — ``generate_feedback``: no warning, and a page that reads
  offline (formulas as MathML, no MathJax from a CDN, no Colab badge);
* :class:`LatestUploadCollector` — ``zip_collect``'s collector that keeps the latest of a student's re-uploads.
"""

from __future__ import annotations

import copy
import functools
import os
import pathlib
import re
import time
import types
import warnings

import jinja2
from nbconvert.exporters import HTMLExporter
from nbgrader import preprocessors
from nbgrader.plugins import ExportPlugin, FileNameCollectorPlugin
from traitlets import List, Unicode, default

from .. import canonical, releases
from . import feedback, lms, report
from .report import Row

warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy chatter from nbgrader's gradebook


# ------------------------------------------------------------------------------------------------ feedback
# The course directory's generate_feedback (nbgrader_course/nbgrader_config.py) uses these two in place of
# nbgrader's own ClearHiddenTests and HTMLExporter.


class ClearHiddenTests(preprocessors.ClearHiddenTests):
    """nbgrader's ClearHiddenTests (the hidden tests' source removed from the feedback), without the warning
    "Config option `display_data_priority` not recognized by `ClearHiddenTests`" on every ``generate_feedback``:
    nbconvert's HTMLExporter configures ``NbConvertBase.display_data_priority``, which every preprocessor
    inherits, and nbgrader's base preprocessor declares it without ``config=True`` (nbgrader's GetGrades
    declares it configurable, as here)."""

    display_data_priority = List(
        preprocessors.NbGraderPreprocessor.class_traits()["display_data_priority"].default()
    ).tag(config=True)


_BADGE = "colab-badge.svg"  # the "Open in Colab" badge cell of every notebook (scripts/build_notebooks/notebooks.py)


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page (its ``feedback`` template), readable offline as the course grader's is
    (``feedback.write_feedback``): the formulas of the text as MathML, which browsers render natively, and no
    MathJax script (nbgrader's page loads MathJax from a CDN: offline, the student saw the LaTeX source); no
    "Open in Colab" badge (an image from the network, broken offline, and no use in feedback)."""

    @default("extra_loaders")
    def _no_mathjax(self):
        # nbconvert's templates import the `mathjax` macro from mathjax.html.j2; extra loaders are searched first
        return [jinja2.DictLoader({"mathjax.html.j2": "{%- macro mathjax(url='') -%}{%- endmacro -%}"})]

    def from_notebook_node(self, nb, resources=None, **kw):
        nb = copy.deepcopy(nb)
        nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown" and _BADGE in c.source)]
        math = feedback._math_to_mathml(nb)
        body, resources = super().from_notebook_node(nb, resources, **kw)
        for key, markup in math.items():
            body = body.replace(key, markup)
        return body, resources


# ------------------------------------------------------------------------------------------------ export plugins


def _download_names(coursedir, config, assignment: str) -> dict[str, tuple[str, lms.SubmissionName]]:
    """nbgrader student id -> (file name, who the LMS's download says the student is: name, LMS id, LATE marker),
    from the files zip_collect extracted (``downloaded/<assignment>/extracted/``), matched to the student ids by the
    rule zip_collect used (``FileNameCollectorPlugin.named_regexp``). Empty without a zip_collect."""
    zc = config.ZipCollectApp
    structure = zc.get("collect_directory_structure", "{downloaded}/{assignment_id}/{collect_step}")
    extracted = pathlib.Path(coursedir.root) / structure.format(
        downloaded=zc.get("downloaded_directory", "downloaded"),
        assignment_id=assignment,
        collect_step=zc.get("extracted_directory", "extracted"),
    )
    rule = config.FileNameCollectorPlugin.get("named_regexp", "") or lms.ZIP_COLLECT_REGEXP
    # (no file times: an extracted file's is the time zip_collect extracted it)
    found: dict[str, list[tuple[str, lms.SubmissionName]]] = {}
    for path in sorted(extracted.rglob("*.ipynb")) if extracted.is_dir() else []:
        m = re.match(rule, str(path))
        who = lms.parse(path)
        if m and who.lms:
            found.setdefault(m["student_id"], []).append((path.name, who))

    def compare(a, b) -> int:  # the course's rule (lms.newer); 0 where the download cannot tell
        later = lms.newer(_upload(*a), _upload(*b))
        return 0 if later is None else (1 if later else -1)

    # several files of one student (re-uploads): the latest is the one zip_collect kept (LatestUploadCollector)
    return {student: max(files, key=functools.cmp_to_key(compare)) for student, files in found.items()}


def _upload(name: str, who: lms.SubmissionName, uploaded_at: float = 0.0) -> types.SimpleNamespace:
    """A downloaded file as ``lms.newer`` reads a submission (its name, LMS, LATE marker, time in the download)."""
    return types.SimpleNamespace(submission=name, lms=who.lms, late=who.late, uploaded_at=uploaded_at)


class LatestUploadCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector (``named_regexp``) for an LMS download in which a student uploaded the notebook
    more than once (Canvas's ``x-1.ipynb``, Moodle's ``x (1).ipynb`` beside ``x.ipynb``), where nbgrader's own stops
    ``zip_collect`` ("Duplicate submission file"): it gives only the latest upload by the LMS's rule (``lms.newer``)
    and skips the others with a line naming the later file. Where the download cannot tell (Moodle's ``x.ipynb``
    and ``Copy of x.ipynb``), both are given after a line naming them, and ``zip_collect`` stops as nbgrader does."""

    def _matches(self, folder: str) -> dict[str, dict]:
        """The files of ``folder`` that the rule matches: path -> nbgrader's match (student_id, file_id)."""
        cache = self.__dict__.setdefault("_folders", {})
        if folder not in cache:
            cache[folder] = {}
            for name in sorted(os.listdir(folder)):
                path = os.path.join(folder, name)
                if os.path.splitext(name)[1] in self.valid_ext and os.path.isfile(path):
                    if m := re.match(self.named_regexp, path):
                        cache[folder][path] = m.groupdict()
        return cache[folder]

    def collect(self, submitted_file: str) -> dict | None:
        info = super().collect(submitted_file)
        if not info:
            return info
        same = [
            path
            for path, other in self._matches(os.path.dirname(submitted_file)).items()
            if path != submitted_file
            and (other["student_id"], other["file_id"]) == (info["student_id"], info["file_id"])
        ]
        mine = _upload(submitted_file, lms.parse(submitted_file))
        later = [p for p in same if lms.newer(_upload(p, lms.parse(p)), mine)]
        if later:
            self.log.warning(
                "Skipping %s: %s is a later upload of the same notebook (%s)",
                os.path.basename(submitted_file),
                os.path.basename(later[0]),
                lms.RULES.get(mine.lms, lms.RULES[lms.MOODLE]),
            )
            return None
        undecided = [p for p in same if not lms.newer(mine, _upload(p, lms.parse(p)))]
        if undecided:
            self.log.error(
                "Student %s uploaded %s more than once and the download cannot tell which is the latest (%s): "
                "%s. Remove the one not to grade from the download and run zip_collect again.",
                info["student_id"],
                info["file_id"],
                lms.RULES.get(mine.lms, lms.RULES[lms.MOODLE]),
                ", ".join(os.path.basename(p) for p in [submitted_file, *undecided]),
            )
        return info


def _unreadable_reason(coursedir, assignment: str, student: str) -> str:
    """Why nbgrader could not autograde a student's submission: the course's own reading of the file
    (``canonical.parse``), as ``python -m autograder grade`` gives it."""
    submitted = pathlib.Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
    for path in sorted(submitted.glob("*.ipynb")):
        try:
            canonical.parse(path.read_bytes())
        except canonical.Ungradeable as exc:
            return str(exc)
        except OSError as exc:
            return f"not readable: {exc}"
    return "nbgrader could not autograde it (see nbgrader autograde's log)"


class _Export(ExportPlugin):
    """The rows of ``python -m autograder grade`` from nbgrader's gradebook, one per submission of one assignment:
    the student's name, LMS id and LATE marker from the LMS download's file names (zip_collect), else from nbgrader's
    student records (name, ``lms_user_id``) and its own lateness; a submission nbgrader could not autograde gets
    zero points and the reason. ``system``: the LMS whose import file it writes ("": the course's grades.csv)."""

    system = ""

    def rows(self, gradebook) -> tuple[list[Row], dict[str, float]]:
        if len(self.assignment) != 1:
            raise ValueError(f"{type(self).__name__} writes one assignment: pass --assignment=NAME")
        name = str(self.assignment[0])
        assignment = gradebook.find_assignment(name)
        order = [ex.name for ex in releases.checks_module(name).EXERCISES] if name in releases.chapters() else []
        coursedir = getattr(self.parent, "coursedir", None)
        downloads = _download_names(coursedir, self.config, name) if coursedir else {}
        rows: list[Row] = []
        points: dict[str, float] = {}
        for submission in sorted(assignment.submissions, key=lambda s: s.student.id):
            student = submission.student
            if self.student and student.id not in map(str, self.student):
                continue
            grades = [g for nb in submission.notebooks for g in nb.grades]
            for g in grades:
                points.setdefault(g.name.removeprefix("test_"), float(g.max_score))
            scores = {g.name.removeprefix("test_"): float(g.score or 0) for g in grades}
            if not any(g.auto_score is not None or g.manual_score is not None for g in grades):
                # nbgrader could not run it (autograde failed): zero and why, as the course's grader gives it
                status = "error"
                reason = _unreadable_reason(coursedir, name, student.id) if coursedir else "not autograded"
                scores = dict.fromkeys(scores, 0.0)
            elif submission.needs_manual_grade:
                # Left out, so the LMS keeps it ungraded (a 0 uploaded now would read as a grade).
                self.log.warning(
                    "%s: %s needs manual grading (a cell waits for a grader): left out; grade it in formgrader "
                    "and export again",
                    name,
                    student.id,
                )
                continue
            else:
                status = "graded"
                reason = report.lost_points(scores, assignment.max_score)
            if student.id in downloads:
                file, who = downloads[student.id]
                lms_name, lms_id, full, late = who.lms, who.lms_id, who.name, who.late
            else:  # the exchange (or a zip_collect whose extracted files are gone): nbgrader's own records
                file = f"{student.id}/{name}"
                lms_id = student.lms_user_id or (student.id if student.id.isdigit() else "")
                lms_name = self.system if lms_id else ""
                full = ", ".join(p for p in (student.last_name, student.first_name) if p)
                late = (submission.total_seconds_late > 0) if assignment.duedate else None
            rows.append(
                Row(
                    file,
                    student.id,
                    name,
                    scores,
                    sum(scores.values()),
                    float(assignment.max_score),
                    status,
                    reason,
                    lms=lms_name,
                    lms_id=lms_id,
                    name=full,
                    late=late,
                    graded_at=time.time(),
                )
            )
        rows.sort(key=lambda r: r.submission)  # the course grader's order: by file (the LMS's download name)
        return rows, {n: points[n] for n in order if n in points} | points

    def export(self, gradebook) -> None:
        rows, points = self.rows(gradebook)
        name = str(self.assignment[0])
        dest = pathlib.Path(self.to or _FILES[self.system])
        if not self.system:
            report.write_csv(rows, dest, list(points))
        else:
            for r in rows:
                if not r.lms_id:
                    self.log.warning(
                        "%s: student %r has no %s id (not a number, no lms_user_id in nbgrader's student record): "
                        "left out",
                        name,
                        r.student_id,
                        self.system,
                    )
            rows = [r for r in rows if r.lms_id]
            column, language = getattr(self, "column", "") or name, getattr(self, "language", "en")
            lms.write(self.system, dest, rows, points, assignment=column, moodle_language=language)
        self.log.info("Wrote %d row(s) of %s to %s", len(rows), name, dest)


_FILES = {"": report.CSV_NAME, lms.CANVAS: lms.CANVAS_FILE, lms.MOODLE: lms.MOODLE_FILE}


class GradesExport(_Export):
    """The course grader's ``grades.csv`` (``report.write_csv``) of one assignment."""


class CanvasExport(_Export):
    """Canvas gradebook import CSV (Student, ID, SIS User ID, SIS Login ID, Section, one assignment column)."""

    system = lms.CANVAS
    column = Unicode(
        "",
        help="the assignment column as Canvas names it, with its id: 'Chapter 3 (12345)' "
        "(default: the nbgrader assignment's name)",
    ).tag(config=True)


class MoodleExport(_Export):
    """Moodle assignment offline grading worksheet, its columns in the language of the Moodle site's interface
    (``--MoodleExport.language=zh_cn``)."""

    system = lms.MOODLE
    language = Unicode(
        "en",
        help=f"the language of the Moodle site's interface: {', '.join(lms.MOODLE_LANGUAGES)} (Moodle finds the "
        "worksheet's columns by their names in it)",
    ).tag(config=True)
