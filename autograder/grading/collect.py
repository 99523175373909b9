"""The collect step: every uploaded file of files, folders and LMS zip downloads becomes one submission record
(``submission.Submission``), whatever it is (a file that is not a notebook gets a row and a zero); what collection
reads into it, once: the record's fields."""

from __future__ import annotations

import collections
import hashlib
import logging
import os
import pathlib
import re
import shutil
import time
import zipfile
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .. import canonical, releases
from ..wording import Message, say
from . import lms
from .submission import Submission, read_result

logger = logging.getLogger(__name__)


def collect(
    paths: Sequence[pathlib.Path], out: pathlib.Path, chapter: releases.Chapter, prefer: Collection[str] = ()
) -> list[Submission]:
    """The batch's submissions, one record per file. The file the LMS file will carry for its student
    (``lms.choose``) gets the plain student id, so that ``feedback/<student>.html`` is the page of the row the LMS
    receives (the others' pages name it)."""
    who = {p: lms.parse(p) for p in paths}
    labels = submission_labels(paths, who)
    subs = [
        Submission(
            path=p,
            label=labels[p],
            student_id="",
            who=who[p],
            uploaded_at=_mtime(p),
            result_file=out / "results" / f"{safe_name(labels[p])}.json",
            **examine(p, chapter),
        )
        for p in paths
    ]
    choice = lms.choose(subs, prefer)
    first = {s.label for s in choice.kept} | {s.label for top in choice.undecided for s in top[:1]}
    taken: set[str] = set()
    ascii_only = not unicode_names_work(out / "feedback")
    for s in sorted(subs, key=lambda s: s.label not in first):
        s.student_id = student_id_from_filename(s.path, taken, ascii_only=ascii_only, who=s.who)
    for s, best in choice.superseded:
        if best is not None:  # its feedback page says so (an undecided file's page waits for the instructor)
            s.superseded_by = best.label.rsplit("/", 1)[-1]
    logger.info(f"Grading {chapter.name} -> {out}: {describe(subs)}")
    for s in subs:
        s.graded_before = _graded_before(s)
    return subs


def _graded_before(sub: Submission) -> bool:
    """Whether ``sub``'s result file is of the same contents, under the same student id (its pages are named by
    the id: a file whose id changed, e.g. with another ``--prefer``, is graded again)."""
    try:
        done = read_result(sub.result_file)
    except (OSError, ValueError):  # none yet, or not a result file
        return False
    return done.sha256 == sub.sha256 and done.student_id == sub.student_id


def student_id_from_filename(
    path, taken: set[str], *, ascii_only: bool = False, who: lms.SubmissionName | None = None
) -> str:
    """A gradebook id, unique in ``taken`` (a later file of one name gets ``-2``, ``-3`` …): the LMS's name and id
    ('smithjane_1234_5678_ch03_x.ipynb' -> 'smithjane_1234', 'Jane Smith_77_assignsubmission_file/x.ipynb' ->
    'Jane-Smith_77'), else the file's stem. ``ascii_only`` (a file system that takes no other names): a name in
    another script becomes the LMS and its id ('moodle_2005'), a plain stem its ASCII letters and a short hash."""
    who = who or lms.parse(path)
    base = f"{who.name}_{who.lms_id}" if who.lms else pathlib.PurePath(path).stem
    base = re.sub(r"[^\w-]+", "-", base).strip("-")
    if ascii_only and not base.isascii():
        plain = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-")
        base = f"{who.lms}_{who.lms_id}" if who.lms else f"{plain}-{hashlib.sha256(base.encode()).hexdigest()[:6]}"
    return _unique(_capped(base, 100) or "student", taken, "{}-{}")


def _unique(base: str, taken: set[str], form: str = "{} ({})") -> str:
    """``base``, or ``form`` of it and 2, 3 … where ``taken`` has it already; added to ``taken``."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = form.format(base, n)
    taken.add(name)
    return name


def unicode_names_work(folder: pathlib.Path) -> bool:
    """Whether the file system of ``folder`` takes file names in any script (pages are named after students)."""
    probe = folder / ".名前-é.probe"
    try:
        probe.touch()
        probe.unlink()
        return True
    except (OSError, UnicodeError):
        return False


_NAME_BYTES = 150  # file systems allow 255 bytes a name: room for the suffixes the grader adds


def _capped(name: str, limit: int = _NAME_BYTES) -> str:
    """``name`` cut to ``limit`` UTF-8 bytes, keeping its start (an LMS puts the student there) and its suffix, with
    a short hash of the whole name so that two long names cut alike stay apart."""
    if len(name.encode()) <= limit:
        return name
    stem, dot, suffix = name.rpartition(".") if "." in name[-12:] else (name, "", "")
    tail = f"~{hashlib.sha256(name.encode()).hexdigest()[:8]}{dot}{suffix}"
    head = stem.encode()[: limit - len(tail.encode())].decode(errors="ignore")
    return head + tail


def safe_name(name: str) -> str:
    return _capped(re.sub(r"[^\w.-]+", "_", name))


def _safe_part(part: str) -> str:
    """A file or folder name from a zip, kept readable (Moodle's folders carry the student's full name)."""
    part = re.sub(r"[^\w .()@+-]+", "_", part).strip()
    return _capped(part) if part.strip(".") else "_"


def _unused(target: pathlib.Path) -> pathlib.Path:
    """``target``, or ``name (2).ipynb``, ``name (3).ipynb`` … when a file of that name was already extracted (two
    zip entries whose names differ only in characters a file name cannot keep)."""
    n, candidate = 1, target
    while candidate.exists():
        n += 1
        candidate = target.with_name(f"{target.stem} ({n}){target.suffix}")
    return candidate


_LITTER = {"__MACOSX", ".DS_Store", "Thumbs.db", "desktop.ini", ".ipynb_checkpoints"}  # added by an OS or editor
_MOODLE_OTHER_PLUGIN = re.compile(r"_\d+_assignsubmission_(?!file_?$)(\w+)$")  # e.g. online text: no file upload
# the same in a flat download: "Full Name_<id>_assignsubmission_onlinetext_onlinetext.html" (the FIRST marker names
# the plugin; a file upload's own name may carry another)
_MOODLE_OTHER_FLAT = re.compile(r"^[^/]+?_\d+_assignsubmission_(?!file_)([a-z]+)_[^/]*$")
ONLINE_TEXT = "Moodle's online text"  # starts the reason of a Moodle online-text entry (listed, never graded)
_INDEX = re.compile(r"^index\.html?$", re.I)  # an index page at the download's top level, naming no student


def ignored_because(parts: Sequence[str]) -> str:
    """Why a file of a download, at ``parts`` (its path inside the zip or folder), is no submission (it is listed,
    not graded), or "" for a submission. Every other file is one: it gets a row, a zero if it is not a notebook."""
    if any(q in _LITTER for q in parts):
        return "added by an operating system or editor"
    plugin = next((m.group(1) for q in parts[:-1] if (m := _MOODLE_OTHER_PLUGIN.search(q))), None)
    if plugin is None and parts and not lms.parse("/".join(parts)).lms and (m := _MOODLE_OTHER_FLAT.match(parts[-1])):
        plugin = m.group(1)
    if plugin == "onlinetext":
        return (
            f"{ONLINE_TEXT} (what the student typed into Moodle's text box, not an uploaded file): not graded, not "
            "in the grade files; read it in Moodle"
        )
    if plugin is not None:
        return f"another Moodle submission plugin than file uploads ({plugin}): not graded, not in the grade files"
    if len(parts) == 1 and _INDEX.match(parts[0]) and not lms.parse(parts[0]).lms:
        return "the download's index page"
    return ""


def expand_submissions(paths, unzip_dir: pathlib.Path, ignored: list[str] | None = None) -> list[pathlib.Path]:
    """Every submitted file of files, folders and LMS zip downloads, whatever it is (zips extracted under
    ``unzip_dir``, keeping each file's folder, where Moodle names the student, and its entry's time, which Moodle's
    rule for the latest reads). What is no submission (:func:`ignored_because`) is appended to ``ignored``."""
    files = []
    skipped = [] if ignored is None else ignored
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            for q in sorted(q for q in p.rglob("*") if q.is_file()):
                why = ignored_because(q.relative_to(p).parts)
                if why:
                    skipped.append(f"{q.relative_to(p)}: {why}")
                else:
                    files.append(q)
        elif p.suffix.lower() == ".zip":
            files += _extract(p, unzip_dir / safe_name(p.stem), skipped)
        else:
            files.append(p)
    return files


def _extract(zip_path: pathlib.Path, dest: pathlib.Path, skipped: list[str]) -> list[pathlib.Path]:
    shutil.rmtree(dest, ignore_errors=True)  # extracted anew each run: the same names as the last time
    files = []
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            if info.is_dir():
                continue
            parts = [q for q in _entry_name(info).replace("\\", "/").split("/") if q not in ("", ".", "..")]
            why = ignored_because(parts)
            if why:
                skipped.append(f"{'/'.join(parts)}: {why}")
                continue
            target = _unused(dest.joinpath(*(_safe_part(q) for q in parts)))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
            when = time.mktime((*info.date_time, 0, 0, -1))
            os.utime(target, (when, when))
            files.append(target)
    return sorted(files)


def _entry_name(info: zipfile.ZipInfo) -> str:
    """A zip entry's name as its writer meant it: Python reads a name without the UTF-8 flag (bit 11) as code page
    437, as the zip format says, but Info-ZIP on Linux and macOS's Archive Utility write UTF-8 names without it
    ("李雷_1005_…" would read "µ_ÄΘ__1005_…", hiding the LMS's marker); read as UTF-8 where its bytes are UTF-8."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def describe(subs: Sequence[Submission]) -> str:
    """The batch in one line: "7 files from 6 students: 6 notebooks, 1 PDF" (students by LMS id; in a batch of
    plain files, one per file). In an LMS download a file whose name carries no LMS id names no student: it is
    counted as such ("14 files from 13 students and 1 file that names no student: …")."""
    named = [s for s in subs if s.lms_note != lms.NO_STUDENT]  # as lms.choose found them
    students = {(s.who.lms, s.who.lms_id) if s.who.lms else (str(s.path),) for s in named}
    kinds = collections.Counter(s.kind for s in subs)
    each = ", ".join(_count(n, k) for k, n in kinds.most_common())
    nameless = len(subs) - len(named)
    no_one = (
        f" and {_count(nameless, 'file')} that {'names' if nameless == 1 else 'name'} no student" if nameless else ""
    )
    return f"{_count(len(subs), 'file')} from {_count(len(students), 'student')}{no_one}: {each}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def submission_labels(paths, who: Mapping[pathlib.Path, lms.SubmissionName]) -> dict[pathlib.Path, str]:
    """How grades.csv names each file: its name, with its folder in front where the folder names the student
    (Moodle) or where two files of the batch share a name (``who``: the files' identities, ``lms.parse``)."""
    shared = {n for n, k in collections.Counter(p.name for p in paths).items() if k > 1}
    labels: dict[pathlib.Path, str] = {}
    seen: set[str] = set()
    for p in paths:
        folder = p.name in shared or (who[p].lms == lms.MOODLE and who[p].file == p.name)
        labels[p] = _unique(f"{p.parent.name}/{p.name}" if folder else p.name, seen)
    return labels


def _mtime(path: pathlib.Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def examine(path: pathlib.Path, chapter: releases.Chapter) -> dict[str, Any]:
    """The file, read once (``canonical.examine``): the record's ``sha256``, ``kind``, ``zero`` (why it gets a zero
    whatever its run would give: not a notebook, another chapter's; "" for none) and ``edition``."""
    try:
        data = path.read_bytes()
    except OSError as exc:  # the zero's reason: said when canonicalised
        return {"sha256": f"unreadable:{exc.errno}", "kind": "unreadable file", "zero": "", "edition": "en"}
    seen = canonical.examine(data, path.name, chapter)
    other = seen.chapter if seen.chapter not in (None, chapter.name) else None
    zero = seen.not_notebook or (other_chapter_reason(other, chapter.name) if other else "")
    return {"sha256": hashlib.sha256(data).hexdigest(), "kind": seen.kind, "zero": zero, "edition": seen.edition}


def other_chapter_reason(other: str, chapter: str) -> Message:
    """The zero's reason for a file that is ``other``'s notebook in a batch of ``chapter`` (``lms.other_chapter``
    reads its field ``stem``)."""
    return say("other chapter", n=_number(other), stem=other, m=_number(chapter), want=chapter)


def _number(chapter: str) -> str:
    return chapter[2:4].lstrip("0") if chapter[2:4].isdigit() else "?"
