"""Learning-management systems: whose a downloaded submission is (:func:`parse`), which of a student's files is
their row in the LMS file (:func:`choose`), and the grade files the LMS imports as they are (:func:`write_exports`).

The download names, the rule for the latest of a student's files and the import files' columns are described in the
README ("Whose file it is", "One row per student", "Grades into the LMS"); Moodle's sources are cited where used.
``ZIP_COLLECT_REGEXP`` is :func:`parse`'s rule for nbgrader's ``zip_collect`` (``nbgrader_course/``).
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import datetime
import logging
import pathlib
import re
from collections.abc import Collection, Mapping

from ..wording import EN, Message, Said, render

logger = logging.getLogger(__name__)

CANVAS = "canvas"
MOODLE = "moodle"
NAMES = {CANVAS: "Canvas", MOODLE: "Moodle"}  # as the instructor's notes name them

# Canvas's LATE marker in any case: a lower-case "late_" read as part of the name would lose the student's id
_CANVAS_NAME = re.compile(
    r"^(?P<name>[^_/]+)_(?P<late>(?i:late)_)?(?P<lms_id>\d+)_(?P<submission_id>\d+)_(?P<file>[^/]+)$"
)
_MOODLE_FOLDER = re.compile(r"^(?P<name>[^/]+?)_(?P<lms_id>\d+)_assignsubmission_file_?$")
# non-greedy: the participant is the FIRST marker; a later one is part of the student's own file name
_MOODLE_FLAT = re.compile(r"^(?P<name>[^/]+?)_(?P<lms_id>\d+)_assignsubmission_file_(?P<file>[^/]+)$")
# an LMS marker inside a student's own file name (it names no one: :attr:`SubmissionName.claims`)
_MARKER = re.compile(r"_(\d+)_assignsubmission_|^[^_/]+_(?:(?i:late)_)?(\d+)_\d+_")

# The same rule for nbgrader's zip_collect (FileNameCollectorPlugin.named_regexp, matched against the extracted
# file's absolute path): student id = the LMS id; file id = the uploaded name without Canvas's "-N" re-upload suffix,
# Colab's "Copy of " prefix ("Save a copy in Drive") or a browser's " (N)" download suffix -- otherwise nbgrader
# files the notebook under another name and autograde finds the assignment's notebook missing.
ZIP_COLLECT_REGEXP = (
    r"^.*/[^/_]+_(?:(?i:late)_)?(?P<student_id>\d+)_"
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
    claims: str = ""  # an LMS id that the student's own file name carries (a second marker): it names no one


def parse(path) -> SubmissionName:
    """Who a downloaded submission belongs to, from the LMS's own structure only: the outermost Moodle folder
    (``Name_<id>_assignsubmission_file/``), else the file name's first marker (Moodle's flat
    ``Name_<id>_assignsubmission_file_<file>``, or Canvas's leading ``name_userid_submissionid_<file>``, whichever
    the name starts with). A marker inside the student's own file name is only reported (``claims``)."""
    path = pathlib.PurePath(path)
    for i, part in enumerate(path.parts[:-1]):
        if m := _MOODLE_FOLDER.match(part):
            file = "/".join(path.parts[i + 1 :])
            return SubmissionName(MOODLE, m["name"], m["lms_id"], None, file, _claims(file))
    found = [(m.end("lms_id"), lms, m) for lms, rule in ((MOODLE, _MOODLE_FLAT), (CANVAS, _CANVAS_NAME))
             if (m := rule.match(path.name))]  # fmt: skip
    if not found:
        return SubmissionName("", "", "", None, path.name)
    _, system, m = min(found, key=lambda f: f[0])  # the LMS's marker comes first; the student's name after it
    late = bool(m["late"]) if system == CANVAS else None
    return SubmissionName(system, m["name"], m["lms_id"], late, m["file"], _claims(m["file"]))


def _claims(file: str) -> str:
    m = _MARKER.search(file)
    return (m.group(1) or m.group(2)) if m else ""


_REUPLOAD = re.compile(r"-(\d+)\.\w+$")  # Canvas: a re-upload of the same file name gets -1, -2 ...
_COUNTER = re.compile(r" \((\d+)\)(?=\.\w+$|$)")  # Moodle's file picker: a second "x.ipynb" becomes "x (1).ipynb"

RULES = {
    CANVAS: "the higher submission id, then the higher re-upload counter (-1, -2 …), then the LATE marker",
    MOODLE: "for two uploads of one file name, the upload counter (x.ipynb, then x (1).ipynb, x (2).ipynb …); "
    "otherwise the later time of the file's entry in the zip (of a folder: the file's time)",
}


def _canvas_key(row) -> tuple[int, int, bool]:
    name = row.submission.rsplit("/", 1)[-1]
    m = _CANVAS_NAME.match(name)
    reupload = _REUPLOAD.search(name)
    return (int(m["submission_id"]) if m else -1, int(reupload.group(1)) if reupload else 0, bool(row.late))


def _moodle_upload(row) -> tuple[str, int]:
    """(the uploaded file name without Moodle's counter, the counter: 0 for the first upload of that name)."""
    name = row.submission.rsplit("/", 1)[-1]
    m = _COUNTER.search(name)
    return (name[: m.start()] + name[m.end() :], int(m.group(1))) if m else (name, 0)


def newer(a, b) -> bool | None:
    """Whether row ``a``'s submission is later than ``b``'s by its LMS's rule (:data:`RULES`); None where the
    download cannot tell (then the instructor chooses: ``--prefer``)."""
    if a.lms == CANVAS:
        ka, kb = _canvas_key(a), _canvas_key(b)
        return None if ka == kb else ka > kb
    (name_a, count_a), (name_b, count_b) = _moodle_upload(a), _moodle_upload(b)
    if name_a == name_b and count_a != count_b:
        return count_a > count_b
    if a.uploaded_at and b.uploaded_at and a.uploaded_at != b.uploaded_at:
        return a.uploaded_at > b.uploaded_at
    return None


def fits(row) -> bool:
    """Whether a row can stand for its student in the LMS: a notebook of the assignment's chapter (gradeable or
    not), not another chapter's notebook or a file that is no notebook."""
    return not (other_chapter(row) or any(isinstance(r, Message) and r.key == "not a notebook" for r in _reasons(row)))


def other_chapter(row_or_reason) -> str:
    """The chapter whose notebook a file is, when its zero's reason (a row's, or the reason itself) says it is
    another chapter's (``collect.other_chapter_reason``: that message's field), else ""."""
    reasons = [row_or_reason] if isinstance(row_or_reason, (str, Message)) else _reasons(row_or_reason)
    return next((str(r.get("stem", "")) for r in reasons if isinstance(r, Message) and r.key == "other chapter"), "")


def _reasons(row) -> list[Said]:
    """A row's reasons as messages (its ``reasons``, else its ``reason``)."""
    return list(getattr(row, "reasons", None) or ([row.reason] if row.reason else []))


def preferred(row, prefer: Collection[str]) -> bool:
    """Whether the instructor chose ``row`` (``--prefer``: its grades.csv name, or its file name)."""
    return row.submission in prefer or row.submission.rsplit("/", 1)[-1] in prefer


@dataclasses.dataclass
class Choice:
    """Which rows the LMS file carries: ``kept`` (one per student, and every row without an LMS id),
    ``superseded`` ((row, the student's kept row) pairs) and ``undecided`` (per student, the rows among which the
    download cannot tell the latest: none of them is in the LMS file until the instructor chooses)."""

    kept: list
    superseded: list[tuple]
    undecided: list[list]


def one_per_student(rows, prefer: Collection[str] = ()) -> Choice:
    """One row per student (LMS and id) for the LMS import file, by a stated rule: the file the instructor chose
    (``prefer``); else among the files that can stand for the student (:func:`fits`; all of them when none can)
    the latest submission (:func:`newer`, :data:`RULES`). Where that leaves several files the download cannot
    order, the student is ``undecided``. Rows without an LMS id are kept as they are (no LMS file carries them)."""
    by_student: dict[tuple[str, str], list] = {}
    for r in rows:
        if r.lms and r.lms_id:
            by_student.setdefault((r.lms, r.lms_id), []).append(r)
    kept_ids, superseded, undecided = set(), [], []
    for group in by_student.values():
        candidates = [r for r in group if preferred(r, prefer)][:1] or [r for r in group if fits(r)] or group
        latest = [r for r in candidates if all(o is r or newer(r, o) for o in candidates)]
        if not latest:
            top = [r for r in candidates if not any(newer(o, r) for o in candidates if o is not r)]
            undecided.append(top)
            superseded += [(r, None) for r in group if r not in top]
            continue
        kept_ids.add(id(latest[0]))
        superseded += [(r, latest[0]) for r in group if r is not latest[0]]
    kept = [r for r in rows if id(r) in kept_ids or not (r.lms and r.lms_id)]
    return Choice(kept, superseded, undecided)


# the note of a file of an LMS download whose name carries no LMS id
NO_STUDENT = (
    "names no student: the LMS's name marker (Canvas's name_userid_submissionid_, Moodle's "
    "Name_id_assignsubmission_file) is missing, so no grade file carries it and the statistics leave it out; find "
    "whose it is and enter the grade by hand, or rename it as the LMS wrote it and grade again"
)


def choose(rows, prefer: Collection[str] = ()) -> Choice:
    """:func:`one_per_student`'s choice, kept on each row (``in_lms_file``, ``lms_note``, ``stray``: see
    ``submission.Submission``) for the report to read, never to choose again: in an LMS download, a file whose name
    carries no LMS id is in no LMS file and :data:`NO_STUDENT`. Returns the choice."""
    choice = one_per_student(rows, prefer)
    kept = {id(r) for r in choice.kept}
    download = any(r.lms_id for r in rows)
    for r in rows:
        chapter = other_chapter(r)  # a stray upload: its next step
        hint = f" (a stray upload? grade it with --chapter {chapter})" if chapter else ""
        nameless = download and not r.lms_id
        r.in_lms_file, r.lms_note = id(r) in kept and not nameless, NO_STUDENT if nameless else ""
        r.stray = "" if fits(r) else str(r.reason) + hint
    for r, best in choice.superseded:
        if best is None:
            r.lms_note = "not in the LMS file: an earlier upload than this student's files listed as undecided"
            continue
        if preferred(best, prefer):
            why = "chosen with --prefer"
        elif fits(best) and not fits(r):
            why = "a notebook of the assignment; this file is not"
        else:
            why = f"the latest upload by {NAMES[r.lms]}'s rule: {RULES[r.lms]}"
        r.lms_note = f"not in the LMS file: {best.submission} is this student's row there ({why})"
    for top in choice.undecided:
        files = ", ".join(r.submission for r in top)
        for r in top:
            r.lms_note = (
                f"not in the LMS file yet: the download cannot tell which of {files} is this student's latest "
                f"submission ({RULES[r.lms]}); choose one: grade again with --prefer FILE"
            )
    return choice


LATE_TEXT = {None: "", True: "yes", False: "no"}  # grades.csv's late column (empty: the LMS's name does not say)


# ------------------------------------------------------------------------------------------------ grade files

CANVAS_FILE = "canvas_import.csv"
MOODLE_FILE = "moodle_grading_worksheet.csv"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # then the assignment column

# The Moodle worksheet in the language of the site's interface. Moodle's importer
# (mod/assign/feedback/offline/importgradeslib.php, init() and next()) finds its columns by the uploader's language
# strings (recordid, grade, lastmodifiedgrade; the comments plugin's pluginname) and takes the participant id as what
# follows the first strlen(hiddenuser) bytes of the Identifier; it ignores the other columns, those of Moodle's own
# worksheet download (mod/assign/gradingtable.php). The strings, by Moodle component and key: English from
# lang/en/{assign,moodle}.php and assignfeedback_comments' lang/en of github.com/moodle/moodle; Simplified Chinese from
# the zh_cn language pack as AMOS exports it (download.moodle.org/langpack/, version 3.11). Packs change between
# versions (an older zh_cn pack has '识别码' for recordid): the importer needs the strings of the site's own pack.
# key: (component, English, Simplified Chinese); the worksheet's columns in order, then the strings of its cells
_MOODLE_WORDS = {
    "recordid": ("assign", "Identifier", "标识符"),
    "fullname": ("moodle", "Full name", "全名"),
    "email": ("moodle", "Email address", "Email地址"),
    "status": ("assign", "Status", "状态"),
    "grade": ("moodle", "Grade", "成绩"),
    "maxgrade": ("assign", "Maximum grade", "最高分"),
    "gradecanbechanged": ("assign", "Grade can be changed", "允许更改成绩"),
    "lastmodifiedsubmission": ("assign", "Last modified (submission)", "上次修改（作业）"),
    "lastmodifiedgrade": ("assign", "Last modified (grade)", "上次修改（评分）"),
    "comments": ("assignfeedback_comments: pluginname", "Feedback comments", "评语反馈"),
    "hiddenuser": ("assign", "Participant ", "参与人"),  # the Identifier is this and the participant id
    "submitted": ("assign: submissionstatus_submitted", "Submitted for grading", "已经提交"),
    "yes": ("moodle", "Yes", "是"),
}
MOODLE_LANGUAGES = ("en", "zh_cn")  # --moodle-language: the site's interface language when uploading
MOODLE_STRINGS = {la: {k: w[1 + i] for k, w in _MOODLE_WORDS.items()} for i, la in enumerate(MOODLE_LANGUAGES)}
_MOODLE_KEYS = list(_MOODLE_WORDS)[:10]  # the columns
MOODLE_COLUMNS = [MOODLE_STRINGS["en"][k] for k in _MOODLE_KEYS]
MOODLE_PARTICIPANT = MOODLE_STRINGS["en"]["hiddenuser"]
# Moodle's 'strftimedaydatetime' (English), which the importer reads back with PHP's strtotime(); strtotime reads no
# Chinese date, so a Chinese worksheet gets the ISO form (a date it cannot read counts as stale: Moodle skips the row
# unless "Allow updating records that have been modified more recently" is ticked)
MOODLE_DATE = {"en": "%A, %d %B %Y, %I:%M %p", "zh_cn": "%Y-%m-%d %H:%M"}


def feedback_comment(row, points: Mapping[str, float]) -> str:
    """One line for the LMS's feedback box: points per exercise, then why points were lost, in the edition the
    student submitted (``row.edition``)."""
    parts = ", ".join(f"{name} {row.scores[name]:g}/{top:g}" for name, top in points.items())
    reason = "; ".join(render(r, getattr(row, "edition", EN)) for r in _reasons(row))
    return f"{row.score:g}/{row.max_score:g} ({parts})" + (f". {reason}" if reason else "")


def _canvas(rows, points, assignment: str, language: str) -> list[list[str]]:
    return [CANVAS_COLUMNS + [assignment]] + [[r.name, r.lms_id, "", "", "", f"{r.score:g}"] for r in rows]


def _moodle(rows, points, assignment: str, language: str) -> list[list[str]]:
    words = MOODLE_STRINGS[language]
    table = [[words[k] for k in _MOODLE_KEYS]]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r.graded_at).strftime(MOODLE_DATE[language]) if r.graded_at else ""
        cells = {
            "recordid": words["hiddenuser"] + r.lms_id,
            "fullname": r.name,
            "status": words["submitted"],
            "grade": f"{r.score:g}",
            "maxgrade": f"{r.max_score:g}",
            "gradecanbechanged": words["yes"],
            "lastmodifiedgrade": when,
            "comments": feedback_comment(r, points),
        }
        table.append([cells.get(k, "") for k in _MOODLE_KEYS])
    return table


FORMATS = {CANVAS: (CANVAS_FILE, _canvas), MOODLE: (MOODLE_FILE, _moodle)}  # LMS -> (its file, its table)


def write_exports(
    rows, out: pathlib.Path, points: Mapping[str, float], *, assignment: str, moodle_language: str = "en"
) -> list[pathlib.Path]:
    """Write the grade file of every LMS whose names the batch's rows (``report.Row``) carry; returns the files
    written. ``assignment``: the Canvas column ("ch03 (12345)"); ``moodle_language``: the Moodle site's interface
    language (:data:`MOODLE_LANGUAGES`), in which its importer finds the worksheet's columns."""
    written = []
    for system, (name, _) in FORMATS.items():
        mine = [r for r in rows if r.lms == system and r.lms_id]
        if not mine:
            (out / name).unlink(missing_ok=True)  # from an earlier batch in this folder: it would mislead
            continue
        others = len([r for r in rows if r.lms != system])
        if others:
            logger.warning(f"  note: {name}: {others} submission(s) whose names carry no {system} id are not in it")
        write(system, out / name, mine, points, assignment=assignment, moodle_language=moodle_language)
        written.append(out / name)
    return written


def write(
    system: str, path: pathlib.Path, rows, points: Mapping[str, float], *, assignment: str, moodle_language: str = "en"
) -> None:
    """Write ``rows`` (with ``lms_id``) as ``system``'s import file at ``path`` (Moodle's in ``moodle_language``)."""
    if system not in FORMATS:
        raise ValueError(f"unknown LMS {system!r} (expected {CANVAS!r} or {MOODLE!r})")
    if moodle_language not in MOODLE_STRINGS:
        raise ValueError(f"unknown Moodle language {moodle_language!r} (expected one of {', '.join(MOODLE_LANGUAGES)})")
    twice = sorted(i for i, n in collections.Counter(r.lms_id for r in rows).items() if n > 1)
    if twice:
        logger.warning(
            f"  warning: {path.name}: several rows for the same {system} user ({', '.join(twice)}); the LMS keeps "
            "the last one"
        )
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(FORMATS[system][1](rows, points, assignment, moodle_language))
