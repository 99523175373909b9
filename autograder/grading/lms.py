"""Learning-management systems: who a downloaded submission belongs to, and grade files the LMS imports as they are.

**Submission names.** The LMS writes the student's identity into the names of a "download all submissions" zip:

* Canvas (Assignment > Download Submissions): ``lastfirst_userid_submissionid_<uploaded name>``, with ``LATE_``
  after the name when the submission was late, e.g. ``babbagecharles_LATE_1004_90004_ch03_self_attention.ipynb``
  (read in any case: ``late_``, ``Late_`` too)
  (``userid`` is the Canvas user id, the ``ID`` column of Canvas's gradebook); a re-upload of the same file gets
  ``-1``, ``-2`` … before the extension.
* Moodle (Assignment > Download all submissions): one folder per student and submission plugin,
  ``Full Name_<participant id>_assignsubmission_file/<uploaded name>`` (``..._file_/`` before Moodle 4.1,
  ``mod/assign/classes/downloader.php``), or, with "Download submissions in folders" off, flat files
  ``Full Name_<participant id>_assignsubmission_file_<uploaded name>``. The participant id is the number of the
  ``Identifier`` column ("Participant 12345") of the assignment's offline grading worksheet.

:func:`parse` reads both (and plain names, which carry no identity) from the LMS's own structure only: the outermost
Moodle folder, or the first marker of the name; a second marker, inside the student's own file name, names no one
(it is reported: ``SubmissionName.claims``). ``ZIP_COLLECT_REGEXP`` is the same rule for nbgrader's ``zip_collect``
(used by the shipped ``nbgrader_course/nbgrader_config.py``).

**One row per student** (:func:`one_per_student`): the instructor's choice, else a notebook of the assignment, else
the latest submission by the LMS's rule (:data:`RULES`, :func:`newer`); where the download cannot tell, no row is
guessed.

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


def choose(rows, prefer: Collection[str] = ()) -> Choice:
    """:func:`one_per_student`'s choice, kept on each row (a ``submission.Submission`` at collection, or a
    ``report.Row``) for the report to read, never to choose again: ``in_lms_file`` (whether the LMS file carries it),
    ``lms_note`` (why it does not: the row that does and by which rule, or that the download cannot tell and the
    instructor chooses with ``--prefer``; "" when it does) and ``stray`` (a file that cannot stand for its student,
    :func:`fits`: its reason and the instructor's next step; "" for one that can). Returns the choice."""
    choice = one_per_student(rows, prefer)
    kept = {id(r) for r in choice.kept}
    for r in rows:
        hint = "" if fits(r) else other_chapter_hint(r)
        r.in_lms_file, r.lms_note = id(r) in kept, ""
        r.stray = "" if fits(r) else str(r.reason) + (f" ({hint})" if hint else "")
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


def other_chapter_hint(reason) -> str:
    """What the instructor can do with a stray upload whose zero's ``reason`` is another chapter's notebook's
    (``collect.other_chapter_reason``): grade it in its own chapter's batch; "" for any other reason."""
    chapter = other_chapter(reason)
    return f"a stray upload? grade it with --chapter {chapter}" if chapter else ""


LATE_TEXT = {None: "", True: "yes", False: "no"}  # grades.csv's late column (empty: the LMS's name does not say)


def late_text(late: bool | None) -> str:
    """The ``late`` column of grades.csv: yes, no, or empty when the LMS's name does not say (Moodle, plain files)."""
    return LATE_TEXT[late]


# ------------------------------------------------------------------------------------------------ grade files

CANVAS_FILE = "canvas_import.csv"
MOODLE_FILE = "moodle_grading_worksheet.csv"
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]  # then the assignment column

# The Moodle worksheet in the language of the site's interface: Moodle's importer
# (mod/assign/feedback/offline/importgradeslib.php, init() and next()) finds its columns by the uploader's language
# strings -- get_string('recordid', 'assign'), get_string('grade') and get_string('lastmodifiedgrade', 'assign'),
# the feedback columns by the plugin's editor field, get_string('pluginname', 'assignfeedback_comments') -- and takes
# the participant id as what follows the first strlen(get_string('hiddenuser', 'assign')) bytes of the Identifier.
# The other columns are those of Moodle's own worksheet download (mod/assign/gradingtable.php, downloading); Moodle
# ignores them on upload. Each string with its Moodle component and key:
#   English: lang/en/assign.php, lang/en/moodle.php, mod/assign/feedback/comments/lang/en/assignfeedback_comments.php
#   of github.com/moodle/moodle;
#   Simplified Chinese (zh_cn): Moodle's zh_cn language pack as AMOS exports it (download.moodle.org/langpack/,
#   assign.php "Strings for component 'assign', language 'zh_cn', version '3.11'"; moodle.php and
#   assignfeedback_comments.php of the same pack). Packs change between versions (an older zh_cn pack has
#   '识别码' for recordid): the importer needs the strings of the site's own pack.
MOODLE_STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "recordid": "Identifier",  # assign
        "fullname": "Full name",  # moodle
        "email": "Email address",  # moodle
        "status": "Status",  # assign
        "grade": "Grade",  # moodle
        "maxgrade": "Maximum grade",  # assign
        "gradecanbechanged": "Grade can be changed",  # assign
        "lastmodifiedsubmission": "Last modified (submission)",  # assign
        "lastmodifiedgrade": "Last modified (grade)",  # assign
        "comments": "Feedback comments",  # assignfeedback_comments: pluginname
        "hiddenuser": "Participant ",  # assign: the Identifier is this plus the participant id
        "submitted": "Submitted for grading",  # assign: submissionstatus_submitted
        "yes": "Yes",  # moodle
    },
    "zh_cn": {
        "recordid": "标识符",
        "fullname": "全名",
        "email": "Email地址",
        "status": "状态",
        "grade": "成绩",
        "maxgrade": "最高分",
        "gradecanbechanged": "允许更改成绩",
        "lastmodifiedsubmission": "上次修改（作业）",
        "lastmodifiedgrade": "上次修改（评分）",
        "comments": "评语反馈",
        "hiddenuser": "参与人",  # no space: "参与人5001"
        "submitted": "已经提交",
        "yes": "是",
    },
}
MOODLE_LANGUAGES = tuple(MOODLE_STRINGS)  # --moodle-language: the site's interface language when uploading
_MOODLE_KEYS = [
    "recordid",
    "fullname",
    "email",
    "status",
    "grade",
    "maxgrade",
    "gradecanbechanged",
    "lastmodifiedsubmission",
    "lastmodifiedgrade",
    "comments",
]
MOODLE_COLUMNS = [MOODLE_STRINGS["en"][k] for k in _MOODLE_KEYS]
MOODLE_PARTICIPANT = MOODLE_STRINGS["en"]["hiddenuser"]  # Moodle's string 'hiddenuser' (English)
# Moodle's 'strftimedaydatetime' (English), which the importer reads back with PHP's strtotime(); strtotime reads no
# Chinese date, so a Chinese worksheet gets the ISO form (a date it cannot read counts as stale: Moodle skips the row
# unless "Allow updating records that have been modified more recently" is ticked)
MOODLE_DATE = {"en": "%A, %d %B %Y, %I:%M %p", "zh_cn": "%Y-%m-%d %H:%M"}


def moodle_columns(language: str = "en") -> list[str]:
    """The worksheet's header in ``language`` (:data:`MOODLE_LANGUAGES`)."""
    return [MOODLE_STRINGS[language][k] for k in _MOODLE_KEYS]


def moodle_participant_id(identifier: str) -> str:
    """The participant id of a worksheet's Identifier in any of :data:`MOODLE_LANGUAGES` ("Participant 5001",
    "参与人5001" -> "5001"); "" when it is none."""
    for strings in MOODLE_STRINGS.values():
        prefix = strings["hiddenuser"]
        if identifier.startswith(prefix) and identifier[len(prefix) :].strip().isdigit():
            return identifier[len(prefix) :].strip()
    return ""


def read_moodle_worksheet(path: pathlib.Path) -> tuple[str, dict[str, dict[str, str]]]:
    """A Moodle grading worksheet (Moodle's download, or ours) read the way Moodle's importer reads it: the
    columns found by their names in the worksheet's language, the participant id after the Identifier's prefix.
    Returns (the language, participant id -> {"grade", "modified", "comments"}). Raises ValueError when the header
    is no worksheet of a known language (Moodle refuses such a file: "invalidgradeimport")."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        table = list(csv.reader(f))
    header = table[0] if table else []
    needed = ("recordid", "grade", "lastmodifiedgrade")  # the importer refuses a file without one of them
    language = next((la for la, st in MOODLE_STRINGS.items() if all(st[k] in header for k in needed)), "")
    if not language:
        raise ValueError(
            f"{path.name}: no Identifier, Grade and Last modified (grade) columns in any of {', '.join(MOODLE_LANGUAGES)}"
        )
    strings = MOODLE_STRINGS[language]
    ident, grade, modified = (header.index(strings[k]) for k in needed)
    comments = header.index(strings["comments"]) if strings["comments"] in header else None
    rows = {}
    for line in table[1:]:
        pid = moodle_participant_id(line[ident])
        if pid:
            rows[pid] = {
                "grade": line[grade],
                "modified": line[modified],
                "comments": line[comments] if comments is not None else "",
            }
    return language, rows


def feedback_comment(row, points: Mapping[str, float]) -> str:
    """One line for the LMS's feedback box: points per exercise, then why points were lost, in the edition the
    student submitted (``row.edition``: the Chinese edition's reads the grader's words in Chinese)."""
    parts = ", ".join(f"{name} {row.scores[name]:g}/{top:g}" for name, top in points.items())
    edition = getattr(row, "edition", EN)
    reason = "; ".join(render(r, edition) for r in _reasons(row))
    return f"{row.score:g}/{row.max_score:g} ({parts})" + (f". {reason}" if reason else "")


def write_exports(
    rows, out: pathlib.Path, points: Mapping[str, float], *, assignment: str, moodle_language: str = "en"
) -> list[pathlib.Path]:
    """Write the grade file of every LMS whose names the batch's submissions carry. Returns the files written.

    ``rows`` are report.Row objects (``lms``, ``lms_id``, ``name``, ``score``, ``graded_at`` …); ``assignment`` is
    the Canvas column ("ch03 (12345)": name and Canvas assignment id); ``moodle_language`` the language of the Moodle
    site's interface (:data:`MOODLE_LANGUAGES`): its importer finds the worksheet's columns by their names in it."""
    written = []
    for system, name in ((CANVAS, CANVAS_FILE), (MOODLE, MOODLE_FILE)):
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
    system: str,
    path: pathlib.Path,
    rows,
    points: Mapping[str, float],
    *,
    assignment: str,
    moodle_language: str = "en",
) -> None:
    """Write ``rows`` (with ``lms_id``) as ``system``'s import file at ``path`` (Moodle's: its columns in
    ``moodle_language``)."""
    if moodle_language not in MOODLE_STRINGS:
        raise ValueError(f"unknown Moodle language {moodle_language!r} (expected one of {', '.join(MOODLE_LANGUAGES)})")
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
            words = MOODLE_STRINGS[moodle_language]
            w.writerow(moodle_columns(moodle_language))
            for r in rows:
                when = datetime.datetime.fromtimestamp(r.graded_at) if r.graded_at else None
                w.writerow(
                    [
                        words["hiddenuser"] + r.lms_id,
                        r.name,
                        "",
                        words["submitted"],
                        f"{r.score:g}",
                        f"{r.max_score:g}",
                        words["yes"],
                        "",
                        when.strftime(MOODLE_DATE[moodle_language]) if when else "",
                        feedback_comment(r, points),
                    ]
                )
        else:
            raise ValueError(f"unknown LMS {system!r} (expected {CANVAS!r} or {MOODLE!r})")
