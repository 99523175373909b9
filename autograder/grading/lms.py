"""Learning-management systems: who a downloaded submission belongs to, and grade files the LMS imports as they are.

**Submission names.** The LMS writes the student's identity into the names of a "download all submissions" zip:

* Canvas (Assignment > Download Submissions): ``lastfirst_userid_submissionid_<uploaded name>``, with ``LATE_``
  after the name when the submission was late, e.g. ``babbagecharles_LATE_1004_90004_ch03_self_attention.ipynb``
  (``userid`` is the Canvas user id, the ``ID`` column of Canvas's gradebook); a re-upload of the same file gets
  ``-1``, ``-2`` … before the extension.
* Moodle (Assignment > Download all submissions): one folder per student and submission plugin,
  ``Full Name_<participant id>_assignsubmission_file/<uploaded name>`` (``..._file_/`` before Moodle 4.1,
  ``mod/assign/classes/downloader.php``), or, with "Download submissions in folders" off, flat files
  ``Full Name_<participant id>_assignsubmission_file_<uploaded name>``. The participant id is the number of the
  ``Identifier`` column ("Participant 12345") of the assignment's offline grading worksheet.

:func:`parse` reads both (and plain names, which carry no identity); ``ZIP_COLLECT_REGEXP`` is the same rule for
nbgrader's ``zip_collect`` (used by the shipped ``nbgrader_course/nbgrader_config.py``).

**Grade files** (one per batch, next to ``grades.csv``):

* ``canvas_import.csv`` — Canvas Gradebook > Import: the columns ``Student, ID, SIS User ID, SIS Login ID,
  Section`` of Canvas's own gradebook export, then one assignment column. Canvas finds the student by ``ID`` (the
  Canvas user id), and the assignment by the id in parentheses in the column name (``ch03 (12345)``) or else by
  its name; a column it does not know becomes a new assignment, so nothing else is written.
* ``moodle_grading_worksheet.csv`` — the assignment's "Upload grading worksheet" (feedback type "Offline grading
  worksheet"): the columns of Moodle's own worksheet download. Moodle reads ``Identifier``, ``Grade``,
  ``Last modified (grade)`` and the feedback columns (``Feedback comments``) and ignores the rest
  (``mod/assign/feedback/offline/importgradeslib.php``).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime
import logging
import pathlib
import re
from collections.abc import Mapping

logger = logging.getLogger(__name__)

CANVAS = "canvas"
MOODLE = "moodle"

_CANVAS_NAME = re.compile(r"^(?P<name>[^_/]+)_(?P<late>LATE_)?(?P<lms_id>\d+)_(?P<submission_id>\d+)_(?P<file>[^/]+)$")
_MOODLE_FOLDER = re.compile(r"^(?P<name>[^/]+)_(?P<lms_id>\d+)_assignsubmission_file_?$")
_MOODLE_FLAT = re.compile(r"^(?P<name>[^/]+)_(?P<lms_id>\d+)_assignsubmission_file_(?P<file>[^/]+)$")

# The same rule for nbgrader's zip_collect (FileNameCollectorPlugin.named_regexp, matched against the extracted
# file's absolute path): student id = the LMS id; file id = the uploaded name without Canvas's "-N" re-upload suffix,
# Colab's "Copy of " prefix ("Save a copy in Drive") or a browser's " (N)" download suffix -- otherwise nbgrader
# files the notebook under another name and autograde finds the assignment's notebook missing.
ZIP_COLLECT_REGEXP = (
    r"^.*/[^/_]+_(?:LATE_)?(?P<student_id>\d+)_"
    r"(?:\d+_|assignsubmission_file_?/|assignsubmission_file_)(?:Copy[ _]of[ _])?"
    r"(?P<file_id>[^/]+?)(?:-\d+|[ _]\(\d+\))?\.ipynb$"
)


@dataclasses.dataclass(frozen=True)
class SubmissionName:
    lms: str  # CANVAS, MOODLE or "" (a name no LMS wrote)
    name: str  # the student's name as the LMS wrote it ("lovelaceada", "Ada Lovelace"); "" when unknown
    lms_id: str  # Canvas user id or Moodle participant id; "" when unknown
    late: bool | None  # Canvas's LATE marker; None when the name does not say
    file: str  # the file name the student uploaded


def parse(path) -> SubmissionName:
    """Who a downloaded submission belongs to, from its file name and (Moodle) its folder's name."""
    path = pathlib.PurePath(path)
    if m := _MOODLE_FOLDER.match(path.parent.name):
        return SubmissionName(MOODLE, m["name"], m["lms_id"], None, path.name)
    if m := _MOODLE_FLAT.match(path.name):
        return SubmissionName(MOODLE, m["name"], m["lms_id"], None, m["file"])
    if m := _CANVAS_NAME.match(path.name):
        return SubmissionName(CANVAS, m["name"], m["lms_id"], bool(m["late"]), m["file"])
    return SubmissionName("", "", "", None, path.name)


OTHER_CHAPTER = "another chapter's notebook"  # starts the reason of a file that is the notebook of another chapter
_REUPLOAD = re.compile(r"-(\d+)\.ipynb$")  # Canvas: a re-upload of the same file name gets -1, -2 ...


def _recency(row) -> tuple:
    """How late a row's submission is, from what the LMS download's name says: Canvas's submission id, then its
    re-upload counter (``-1``, ``-2``), then its LATE marker; then the file name (Moodle says none of these)."""
    name = row.submission.rsplit("/", 1)[-1]
    m = _CANVAS_NAME.match(name)
    submission_id = int(m["submission_id"]) if m else -1
    reupload = _REUPLOAD.search(name)
    return (submission_id, int(reupload.group(1)) if reupload else 0, bool(row.late), row.submission)


def one_per_student(rows) -> tuple[list, list[tuple]]:
    """The rows an LMS import file carries, one per student (LMS and id), and the others with the row kept instead.

    The rule, when a student has several files in a batch (a resubmission, a stray upload): a file that is the
    assignment's chapter beats one that is another chapter's notebook; among those, the latest submission
    (:func:`_recency`). Rows without an LMS id are kept as they are (no LMS file carries them)."""
    by_student: dict[tuple[str, str], list] = {}
    for r in rows:
        if r.lms and r.lms_id:
            by_student.setdefault((r.lms, r.lms_id), []).append(r)
    kept_ids, superseded = set(), []
    for group in by_student.values():
        best = max(group, key=lambda r: (not r.reason.startswith(OTHER_CHAPTER), _recency(r)))
        kept_ids.add(id(best))
        superseded += [(r, best) for r in group if r is not best]
    return [r for r in rows if id(r) in kept_ids or not (r.lms and r.lms_id)], superseded


def late_text(late: bool | None) -> str:
    """The ``late`` column of grades.csv: yes, no, or empty when the LMS's name does not say (Moodle, plain files)."""
    return "" if late is None else ("yes" if late else "no")


# ------------------------------------------------------------------------------------------------ grade files

CANVAS_FILE = "canvas_import.csv"
MOODLE_FILE = "moodle_grading_worksheet.csv"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # then the assignment column
MOODLE_COLUMNS = [
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
MOODLE_PARTICIPANT = "Participant "  # Moodle's string 'hiddenuser': the Identifier is this plus the participant id
MOODLE_DATE = "%A, %d %B %Y, %I:%M %p"  # Moodle's 'strftimedaydatetime' (English), which its importer parses back


def feedback_comment(row, points: Mapping[str, float]) -> str:
    """One line for the LMS's feedback box: points per exercise, then why points were lost."""
    parts = ", ".join(f"{name} {row.scores[name]:g}/{top:g}" for name, top in points.items())
    return f"{row.score:g}/{row.max_score:g} ({parts})" + (f". {row.reason}" if row.reason else "")


def write_exports(rows, out: pathlib.Path, points: Mapping[str, float], *, assignment: str) -> list[pathlib.Path]:
    """Write the grade file of every LMS whose names the batch's submissions carry. Returns the files written.

    ``rows`` are report.Row objects (``lms``, ``lms_id``, ``name``, ``score``, ``graded_at`` …); ``assignment`` is
    the Canvas column ("ch03 (12345)": name and Canvas assignment id)."""
    written = []
    for system, name in ((CANVAS, CANVAS_FILE), (MOODLE, MOODLE_FILE)):
        mine = [r for r in rows if r.lms == system and r.lms_id]
        if not mine:
            (out / name).unlink(missing_ok=True)  # from an earlier batch in this folder: it would mislead
            continue
        others = len([r for r in rows if r.lms != system])
        if others:
            logger.warning(f"  note: {name}: {others} submission(s) whose names carry no {system} id are not in it")
        write(system, out / name, mine, points, assignment=assignment)
        written.append(out / name)
    return written


def write(system: str, path: pathlib.Path, rows, points: Mapping[str, float], *, assignment: str) -> None:
    """Write ``rows`` (with ``lms_id``) as ``system``'s import file at ``path``."""
    twice = sorted(i for i, n in collections.Counter(r.lms_id for r in rows).items() if n > 1)
    if twice:
        logger.warning(
            f"  warning: {path.name}: several rows for the same {system} user ({', '.join(twice)}); the LMS keeps "
            "the last one"
        )
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if system == CANVAS:
            w.writerow(CANVAS_COLUMNS + [assignment])
            for r in rows:
                w.writerow([r.name, r.lms_id, "", "", "", f"{r.score:g}"])
        elif system == MOODLE:
            w.writerow(MOODLE_COLUMNS)
            for r in rows:
                graded = datetime.datetime.fromtimestamp(r.graded_at).strftime(MOODLE_DATE) if r.graded_at else ""
                w.writerow(
                    [
                        MOODLE_PARTICIPANT + r.lms_id,
                        r.name,
                        "",
                        "Submitted for grading",
                        f"{r.score:g}",
                        f"{r.max_score:g}",
                        "Yes",
                        "",
                        graded,
                        feedback_comment(r, points),
                    ]
                )
        else:
            raise ValueError(f"unknown LMS {system!r} (expected {CANVAS!r} or {MOODLE!r})")
