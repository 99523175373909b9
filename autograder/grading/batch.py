"""Grade a folder of submitted notebooks with nbgrader, one row per submission.

``grade(paths, chapter, out)``:

1. canonicalises every file against the release notebook (``autograder/canonical.py``): a file that is not a
   notebook gets a zero with the reason at once, and the batch goes on; files whose canonical form is identical
   are grouped;
2. builds the grading notebook for ``chapter`` (the instructor notebook plus the guard's lines) and runs
   nbgrader's ``generate_assignment`` in a fresh course directory under ``out/course`` (this records every test
   cell, hidden tests included, and its points in nbgrader's sqlite gradebook);
3. runs each distinct canonical notebook once, ``jobs`` at a time, in its own worker process (``worker.py``, under
   the limits of ``jail.py``): nbgrader's real ``autograde`` in a fresh kernel, which restores every test cell
   from the gradebook; the worker gives points only with the guard's passing records (``guard.py``,
   ``scoring.py``) and writes the result file and the feedback (``results.py``);
4. writes ``out/grades.csv``, ``out/summary.*`` and the LMS's grade files from the result files (``report.py``).

Progress goes to the ``logging`` logger of this module (the command line shows it).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Protocol

import nbformat

from .. import canonical, notebooks, releases
from . import jail, lms, nbgrader_adapter, report
from .results import Result, grader_secrets, read_result, write_feedback, write_result
from .worker import FORK_SWITCH, Job, Spawner


class Executor(Protocol):
    """Runs worker jobs elsewhere (``executors.py``: a Dask cluster) and calls ``finish(job, result)`` here, once
    per job, as each ends; ``job`` is as the batch built it, ``text`` the canonical notebook it grades."""

    def describe(self) -> str: ...

    def grade(
        self, jobs: Sequence[tuple[Job, str]], notebook_timeout: int, finish: Callable[[Job, Result], None]
    ) -> None: ...


logger = logging.getLogger(__name__)


@dataclasses.dataclass
class Submission:
    """One submitted file of the batch and where its result goes."""

    path: pathlib.Path
    label: str  # its name in grades.csv
    student_id: str  # its id in the gradebook and the feedback's file name
    result: pathlib.Path  # its result file
    sha256: str


def student_id_from_filename(path, taken: set[str], *, ascii_only: bool = False) -> str:
    """A gradebook id from an LMS download name, unique in ``taken`` (a later file of one name gets ``-2``, ``-3``
    …): name and LMS id, in the name's own script ('smithjane_1234_5678_ch03_x.ipynb' -> 'smithjane_1234'; Moodle's
    'Jane Smith_77_assignsubmission_file/x.ipynb' -> 'Jane-Smith_77', '李伟_2005_…' -> '李伟_2005'), else the
    file's stem. ``ascii_only`` (a file system that takes no other names): a name with other letters becomes the
    LMS and its id ('moodle_2005'), a plain file's stem its ASCII letters and a short hash of the whole."""
    who = lms.parse(path)
    base = f"{who.name}_{who.lms_id}" if who.lms else pathlib.PurePath(path).stem
    base = re.sub(r"[^\w-]+", "-", base).strip("-")
    if ascii_only and not base.isascii():
        plain = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-")
        base = f"{who.lms}_{who.lms_id}" if who.lms else f"{plain}-{hashlib.sha256(base.encode()).hexdigest()[:6]}"
    base = _capped(base, 100) or "student"
    sid, n = base, 1
    while sid in taken:
        n += 1
        sid = f"{base}-{n}"
    taken.add(sid)
    return sid


def unicode_names_work(folder: pathlib.Path) -> bool:
    """Whether the file system of ``folder`` takes file names in any script (the feedback pages are named after
    the students)."""
    probe = folder / ".名前-é.probe"
    try:
        probe.touch()
        probe.unlink()
        return True
    except (OSError, UnicodeError):
        return False


def grading_instructor(chapter: str):
    """The instructor notebook nbgrader grades with: the setup cell arms the guard; each test cell is the guard's
    verdict alone (its private checks, visible and hidden, recorded for the worker to judge again; raises when they
    fail, so nbgrader's score of the cell agrees), in a hidden region so the feedback never shows it. The notebook's
    own check runs (``EXERCISES.run``) are left out: they would run the same checks a second time in the kernel, and
    neither the score nor the feedback reads their output (both come from the worker's judgement)."""
    nb = notebooks.build_instructor(chapter)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "setup":
            cell.source += (
                f"\nimport autograder.grading.guard as _autograder_guard  # grading only: see autograder/grading/guard.py\n"
                f'_autograder_guard.arm("{chapter}")'
            )
        elif meta.get("grade") and "### END HIDDEN TESTS" in cell.source:
            name = meta["grade_id"].removeprefix("test_")
            cell.source = f'### BEGIN HIDDEN TESTS\n_autograder_guard.verdict("{name}")\n### END HIDDEN TESTS'

    return nb


def _sha256(path: pathlib.Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.errno}"


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


def _safe_name(name: str) -> str:
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
_INDEX = re.compile(r"^index\.html?$", re.I)  # an index page at the download's top level, naming no student


def ignored_because(parts: Sequence[str]) -> str:
    """Why a file of a download, at ``parts`` (its path inside the zip or folder), is no submission (it is listed,
    not graded), or "" for a submission. Every other file is one: it gets a row, a zero if it is not a notebook."""
    if any(q in _LITTER for q in parts):
        return "added by an operating system or editor"
    if any(_MOODLE_OTHER_PLUGIN.search(q) for q in parts[:-1]):
        return "another Moodle submission plugin than file uploads (e.g. online text)"
    if len(parts) == 1 and _INDEX.match(parts[0]) and not lms.parse(parts[0]).lms:
        return "the download's index page"
    return ""


def expand_submissions(paths, unzip_dir: pathlib.Path, ignored: list[str] | None = None) -> list[pathlib.Path]:
    """Every submitted file of files, folders and LMS zip downloads (extracted under ``unzip_dir``, keeping the
    folder each file is in, Moodle names the student in the folder, and the zip entry's time, Moodle's rule for the
    latest reads it), whatever it is: a file that is not a notebook gets a row and a zero. What is no submission
    (:func:`ignored_because`) is appended to ``ignored`` ("path: why")."""
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
            files += _extract(p, unzip_dir / _safe_name(p.stem), skipped)
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
            parts = [q for q in info.filename.replace("\\", "/").split("/") if q not in ("", ".", "..")]
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


def describe(files: Sequence[pathlib.Path]) -> str:
    """The batch in one line: "7 files from 6 students: 6 notebooks, 1 PDF" (students by LMS id, else per file)."""
    kinds: collections.Counter[str] = collections.Counter()
    students = set()
    for f in files:
        who = lms.parse(f)
        students.add((who.lms, who.lms_id) if who.lms else (str(f),))
        kinds[_kind(f)] += 1
    each = ", ".join(f"{n} {k}{'' if n == 1 else 's'}" for k, n in kinds.most_common())
    return f"{_count(len(files), 'file')} from {_count(len(students), 'student')}: {each}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _kind(path: pathlib.Path) -> str:
    try:
        with open(path, "rb") as f:
            return canonical.file_kind(f.read(4096), path.name)
    except OSError:
        return "unreadable file"


def submission_labels(paths) -> dict[pathlib.Path, str]:
    """How grades.csv names each file: its name, with its folder in front where the folder names the student
    (Moodle) or where two files of the batch share a name."""
    shared = {n for n, k in collections.Counter(p.name for p in paths).items() if k > 1}
    labels, seen = {}, set()
    for p in paths:
        who = lms.parse(p)
        folder = p.name in shared or (who.lms == lms.MOODLE and who.file == p.name)
        label = f"{p.parent.name}/{p.name}" if folder else p.name
        base, n = label, 1
        while label in seen:
            n += 1
            label = f"{base} ({n})"
        seen.add(label)
        labels[p] = label
    return labels


def _submissions(
    paths: list[pathlib.Path], out: pathlib.Path, chapter: str, prefer: Collection[str] = ()
) -> list[Submission]:
    """The batch's submissions, each with its label, student id and result file. Of a student's several files, the
    one the LMS file will carry (``lms.one_per_student``, from what the files are before grading) gets the plain
    student id, so that ``feedback/<student>.html`` is the page of the row the LMS receives."""
    labels = submission_labels(paths)
    ahead = [
        report.Row(
            labels[p],
            "",
            chapter,
            {},
            0.0,
            0.0,
            "",
            _zero_reason(p, chapter),
            lms=who.lms,
            lms_id=who.lms_id,
            late=who.late,
            uploaded_at=_mtime(p),
        )
        for p in paths
        for who in [lms.parse(p)]
    ]
    choice = lms.one_per_student(ahead, prefer)
    first = {r.submission for r in choice.kept} | {r.submission for top in choice.undecided for r in top[:1]}
    taken: set[str] = set()
    ascii_only = not unicode_names_work(out / "feedback")
    sids = {
        path: student_id_from_filename(path, taken, ascii_only=ascii_only)
        for path in sorted(paths, key=lambda p: labels[p] not in first)
    }
    return [
        Submission(path, labels[path], sids[path], out / "results" / f"{_safe_name(labels[path])}.json", _sha256(path))
        for path in paths
    ]


def _mtime(path: pathlib.Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _zero_reason(path: pathlib.Path, chapter: str) -> str:
    """Why ``path`` gets a zero whatever its content's run would give: it is not a notebook, or another chapter's
    notebook; else ""."""
    try:
        data = path.read_bytes()
    except OSError:
        return ""  # said when it is canonicalised
    kind = canonical.file_kind(data, path.name)
    if kind != canonical.NOTEBOOK:
        return canonical.not_a_notebook(kind, data)
    other = canonical.chapter_of(data)
    return other_chapter_reason(other, chapter) if other is not None and other != chapter else ""


def _already_graded(sub: Submission) -> bool:
    """Whether ``sub``'s result file is of the same contents, under the same student id (a file whose id changed,
    e.g. with another ``--prefer``, is graded again: its feedback and graded pages are named by the id)."""
    try:
        if not sub.result.exists():
            return False
        done = read_result(sub.result)
        return done.sha256 == sub.sha256 and done.student_id == sub.student_id
    except (OSError, ValueError):
        return False


def grade(
    paths: Iterable[pathlib.Path],
    chapter: str,
    out: pathlib.Path,
    *,
    cell_timeout: int = 120,
    notebook_timeout: int = 900,
    memory_mb: int = 6144,
    jobs: int | None = None,
    force: bool = False,
    lms_assignment: str | None = None,
    executor: Executor | None = None,
    prefer: Collection[str] = (),
    ignored: Sequence[str] = (),
) -> list[report.Row]:
    """Grade ``paths`` (submitted .ipynb files) for ``chapter``, each in its own sandboxed worker, ``jobs`` at a
    time. Results are kept per submission under ``out/results``: a rerun skips files already graded (same
    contents) unless ``force``. Writes grades.csv, summary.md/.csv/.png and feedback/ under ``out``, and the
    grade files of the LMS whose download names the files have (``lms.py``; ``lms_assignment`` is the Canvas
    column, e.g. "ch03 (12345)"; default: the chapter). ``executor``: where the workers run (``executors.py``,
    e.g. a Dask cluster); default: processes on this machine, ``jobs`` at a time. ``prefer``: the files the
    instructor chose as their students' rows where the download cannot tell the latest (``lms.one_per_student``);
    ``ignored``: what the download held that is no submission (``expand_submissions``), listed in the summary."""
    out = pathlib.Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the kernels (other uids) cannot reach results, feedback or the gradebook
    for sub in ("results", "feedback", "graded"):
        (out / sub).mkdir(exist_ok=True)
    points = {ex.name: ex.points for ex in notebooks.checks_module(chapter).EXERCISES}
    submissions = _submissions(sorted(pathlib.Path(p) for p in paths), out, chapter, prefer)
    todo = [s for s in submissions if force or not _already_graded(s)]
    if todo:
        _grade_todo(
            todo,
            chapter,
            out,
            points,
            cell_timeout=cell_timeout,
            notebook_timeout=notebook_timeout,
            memory_mb=memory_mb,
            jobs=jobs,
            executor=executor,
        )
    rows = [
        report.row_from_result(
            dataclasses.replace(read_result(s.result), submission=s.label, student_id=s.student_id),
            s.path,
            chapter,
            points,
            graded_at=s.result.stat().st_mtime,
        )
        for s in submissions
    ]
    report.write_reports(rows, out, points, assignment=lms_assignment or chapter, prefer=prefer, ignored=ignored)
    return rows


def _log_row(label: str, result: Result, max_score: float, note: str = "") -> None:
    note = note or result.reason[:120]
    logger.info(f"  {label}: {result.score:g}/{max_score:g}" + (f" — {note}" if note else ""))


def other_chapter_reason(other: str, chapter: str) -> str:
    """The zero's reason for a file that is ``other``'s notebook in a batch of ``chapter``."""
    return (
        f"{lms.OTHER_CHAPTER}: this is the notebook of {releases.chapter_label(other)}, and this assignment is "
        f"{releases.chapter_label(chapter)} (a stray upload? grade it with --chapter {other})"
    )


def _canonicalise(
    todo: list[Submission], chapter: str, out: pathlib.Path, points: dict[str, int]
) -> tuple[dict[str, list[Submission]], dict[str, str], dict[str, list[str]]]:
    """Canonicalise every file (an unreadable one is recorded at once): (canonical text's hash -> the submissions
    with that text, hash -> text, student id -> the canonicalisation's warnings)."""
    release = notebooks.build_release(chapter)
    groups: dict[str, list[Submission]] = {}
    texts: dict[str, str] = {}
    warns: dict[str, list[str]] = {}
    for sub in todo:
        try:
            data = sub.path.read_bytes()
            zero = _zero_reason(sub.path, chapter)
            if zero:
                raise canonical.Ungradeable(zero)
            nb, warns[sub.student_id] = canonical.canonicalise(data, release)
        except Exception as exc:
            if isinstance(exc, canonical.Ungradeable):
                why = str(exc)
            elif isinstance(exc, OSError):
                why = f"unreadable file: {exc.strerror}"
            else:
                why = f"not a readable notebook ({type(exc).__name__}: {str(exc)[:100]})"
            result = Result(sub.label, sub.sha256, sub.student_id, "error", why)
            write_result(sub.result, result)
            write_feedback(
                out / "feedback" / f"{sub.student_id}.html", None, sub.student_id, chapter, {}, points, reasons=[why]
            )
            _log_row(sub.label, result, sum(points.values()))
            continue
        text = nbformat.writes(nb)
        key = hashlib.sha256(text.encode()).hexdigest()
        groups.setdefault(key, []).append(sub)
        texts[key] = text
    return groups, texts, warns


RUN_FILE = "grading_run.json"  # how the last run graded its kernels (jailed or not): the summary says so


def jail_status(out: pathlib.Path) -> str | None:
    """Can this run's kernels be jailed? None if so, else why not; said in the log and kept for the summary."""
    no_jail = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
    if no_jail:
        logger.warning(f"  kernels are not jailed ({no_jail}): the guard's file rules only (README, fallback mode)")
    else:
        logger.info("  kernels are jailed (bubblewrap: own filesystem view, no network, an unprivileged uid)")
    no_cgroup = jail.memory_cgroup_problem()
    if no_cgroup:
        logger.warning(
            f"  kernels' memory is not limited by a cgroup ({no_cgroup}): files a kernel writes to /tmp, /dev/shm "
            "or its home count against no memory limit (README, limits)"
        )
    (out / RUN_FILE).write_text(json.dumps({"jailed": not no_jail, "why_not": no_jail or ""}))
    return no_jail


def _grade_todo(
    todo: list[Submission],
    chapter: str,
    out: pathlib.Path,
    points: dict[str, int],
    *,
    cell_timeout: int,
    notebook_timeout: int,
    memory_mb: int,
    jobs: int | None,
    executor: Executor | None = None,
) -> None:
    """Grade each distinct canonical notebook once in a sandboxed worker, and give identical submissions that one
    result (own warnings, own feedback)."""
    prefix = jail.unshare_prefix()
    # started first: the workers' fork server imports what a worker needs while the batch makes its gradebooks
    with worker_spawner(chapter, prefix, out) if executor is None else contextlib.nullcontext() as spawner:
        groups, texts, warns = _canonicalise(todo, chapter, out, points)
        if not groups:
            jail_status(out)  # no kernel to run: the summary still says how this run would have run them
            return
        max_score = float(sum(points.values()))
        course = out / "course"
        if course.exists():
            shutil.rmtree(course)
        (course / "source" / chapter).mkdir(parents=True)
        nbformat.write(grading_instructor(chapter), course / "source" / chapter / f"{chapter}.ipynb")
        nbgrader_adapter.generate_assignment(course, chapter)
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="autograder-"))
        scratch.chmod(0o711)
        jobs_dir = scratch / "jobs"  # every submission's canonical notebook: hidden from every kernel
        jobs_dir.mkdir(mode=0o700)
        stage = jail.stage_solutions(chapter, scratch / "stage")
        no_jail = jail_status(out)
        as_root = jail.root_kernel_problem(jailed=not no_jail)
        if as_root:
            raise jail.RootKernelRefused(as_root)
        drop_uid = not no_jail or jail.uid_drop_possible()
        hidden = jail.hidden_files(chapter) + [str(out), str(jobs_dir)]
        jobs = jobs or usable_cores()
        copies = sum(len(g) - 1 for g in groups.values())
        logger.info(
            f"  {len(groups)} distinct notebooks to run"
            + (f" ({copies} identical {'copy shares' if copies == 1 else 'copies share'} a run)" if copies else "")
            + (f", {jobs} at a time" if executor is None else f", {executor.describe()}")
            + ("" if prefix else " (no network isolation: not root or unshare unavailable)")
            + ("" if drop_uid else " (kernels keep this user's uid: the Python installation is not world-readable)")
        )

        def job_for(key: str) -> Job:
            sid = groups[key][0].student_id
            return Job(
                canonical=str(jobs_dir / f"{_safe_name(sid)}.canonical.ipynb"),
                warnings=warns[sid],
                submission_name=groups[key][0].label,
                sha256=groups[key][0].sha256,
                chapter=chapter,
                student_id=sid,
                course_template=str(course),
                stage=str(stage),
                sandbox=str(scratch / _safe_name(sid)),
                result=str(groups[key][0].result),
                feedback=str(out / "feedback" / f"{sid}.html"),
                keep=str(out / "graded"),
                cell_timeout=cell_timeout,
                memory_mb=memory_mb,
                max_score=max_score,
                points=points,
                hidden_files=hidden,
                netns=bool(prefix),
                uid=kernel_uid(sid, drop_uid),
                # kernels share the cores: more torch threads than cores per kernel makes every kernel crawl
                threads=max(1, usable_cores() // jobs),
                jail=not no_jail,
            )

        def run_one(key: str) -> None:
            job = job_for(key)
            pathlib.Path(job.canonical).write_text(texts[key])
            job_path = jobs_dir / f"{_safe_name(job.student_id)}.job.json"
            job.write(job_path)
            result = _run_worker(worker_command(prefix, job_path), job, scratch, notebook_timeout, spawner)
            shutil.rmtree(job.sandbox, ignore_errors=True)
            share(key, result)

        def share(key: str, result: Result) -> None:
            """Log the row of ``key``'s first submission and give its result to the identical others."""
            first, *others = groups[key]
            sid = first.student_id
            _log_row(first.label, result, max_score)
            shared = [w for w in result.warnings if w not in warns[sid]]  # from running the code: same for every copy
            graded = out / "graded" / f"{sid}.ipynb"
            for other in others:
                same = f"identical code to {first.label} (graded once for both)"
                o_sid = other.student_id
                copy = dataclasses.replace(
                    result,
                    submission=other.label,
                    sha256=other.sha256,
                    student_id=o_sid,
                    warnings=warns[o_sid] + shared + [same],
                )
                write_result(other.result, copy)
                if graded.exists():
                    # The feedback goes to the student: it must not name the other student (grades.csv does).
                    graded_nb = nbformat.read(graded, as_version=4)
                    write_feedback(
                        out / "feedback" / f"{o_sid}.html",
                        graded_nb,
                        o_sid,
                        chapter,
                        result.scores,
                        points,
                        warnings=warns[o_sid] + shared,
                        reasons=result.reason.split("; "),
                        secrets=grader_secrets(graded_nb, chapter),
                    )
                    shutil.copyfile(graded, out / "graded" / f"{o_sid}.ipynb")
                _log_row(other.label, copy, max_score, same)

        key_of = {groups[key][0].student_id: key for key in groups}

        def share_by_job(job: Job, result: Result) -> None:
            share(key_of[job.student_id], result)

        try:
            if executor is None:
                with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
                    list(pool.map(run_one, list(groups)))
            else:  # e.g. a Dask cluster: runs the same worker elsewhere, the results come back here
                executor.grade([(job_for(key), texts[key]) for key in groups], notebook_timeout, share_by_job)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


# this process's cgroup lookup lives with the kernel's limits (jail.py), which make a cgroup per kernel
from .jail import CGROUP_ROOT, PROC_CGROUP, cgroup_dirs  # noqa: E402


def usable_cores(proc_cgroup: pathlib.Path = PROC_CGROUP, root: pathlib.Path = CGROUP_ROOT) -> int:
    """The cores the batch may use: this process's CPU affinity, capped by its cgroup's CPU quota (v2 ``cpu.max``,
    v1 ``cpu.cfs_quota_us``), at least 1. A container given half a vCPU (Gradescope's default) reports the host's
    cores in ``os.cpu_count()``, and a kernel with that many torch threads crawls."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for version, d in cgroup_dirs("cpu", proc_cgroup, root):
        try:
            if version == 2:  # "max 100000" or "50000 100000"
                quota, period = d.joinpath("cpu.max").read_text().split()[:2]
            else:
                quota = d.joinpath("cpu.cfs_quota_us").read_text().strip()
                period = d.joinpath("cpu.cfs_period_us").read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0:
                cores = min(cores, max(1, -(-int(quota) // int(period))))
        except (OSError, ValueError):
            pass
    return max(1, cores)


def container_memory(
    proc_cgroup: pathlib.Path = PROC_CGROUP, root: pathlib.Path = CGROUP_ROOT
) -> tuple[int, int | None]:
    """(how many processes the OOM killer has ended in this process's memory cgroup so far, its memory limit in MB
    or None): v2 ``memory.events`` and ``memory.max``, v1 ``memory.oom_control`` and ``memory.limit_in_bytes``;
    (0, None) where neither can be read. A grader in a container with a memory limit (Gradescope) compares the
    count before and after grading: a kill in between means the grade cannot be trusted."""
    kills, limit = 0, None
    for version, d in cgroup_dirs("memory", proc_cgroup, root):
        events, cap = (
            ("memory.events", "memory.max") if version == 2 else ("memory.oom_control", "memory.limit_in_bytes")
        )
        try:
            for line in d.joinpath(events).read_text().splitlines():
                if line.startswith("oom_kill "):
                    kills = max(kills, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        try:
            text = d.joinpath(cap).read_text().strip()
            if text != "max" and int(text) < 1 << 50:  # v1 writes "no limit" as a huge number
                mb = int(text) // 2**20
                limit = mb if limit is None else min(limit, mb)
        except (OSError, ValueError):
            pass
    return kills, limit


def kernel_uid(student_id: str, drop_uid: bool) -> int:
    """The kernel's own unprivileged uid for ``student_id`` (``jail.uid_drop_possible()``), else -1."""
    return 100000 + zlib.crc32(student_id.encode()) % 100000 if drop_uid else -1


def worker_command(prefix: list[str], job_path: pathlib.Path) -> list[str]:
    """The command that grades the job at ``job_path`` (``prefix``: ``jail.unshare_prefix()``)."""
    return prefix + [sys.executable, "-m", "autograder.grading.worker", str(job_path)]


def _worker_env() -> dict[str, str]:
    """The worker's environment: in a checkout, the checkout first on PYTHONPATH, so that the worker and its kernel
    run this grader's code even where another copy of the course package is installed (e.g. an editable install
    of another checkout)."""
    env = dict(os.environ)
    root = releases.PACKAGE_DIR.parent
    if (root / "pyproject.toml").exists():
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@contextlib.contextmanager
def worker_spawner(chapter: str, prefix: list[str], cwd: pathlib.Path) -> Iterator[Spawner | None]:
    """The batch's worker fork server (``worker.serve``: the workers' imports paid once a batch, each worker forked
    from it in namespaces of its own when ``prefix`` is ``unshare``'s), closed when the batch is done; None where
    workers are to be started as new interpreters (``AUTOGRADER_FORK_WORKERS=off``)."""
    if os.environ.get(FORK_SWITCH, "").lower() in ("0", "off", "no", "false"):
        yield None
        return
    spawner = Spawner(chapter, bool(prefix), _worker_env(), cwd)
    try:
        yield spawner
    finally:
        spawner.close()


def _run_worker(cmd: list[str], job: Job, cwd: pathlib.Path, timeout: int, spawner: Spawner | None = None) -> Result:
    """Run the worker process of ``job``; its result, or an "error" result when it wrote none (crashed, killed,
    or ran longer than ``timeout`` seconds: then its whole process group is killed). With ``spawner``, the worker is
    forked from the batch's fork server (``cmd``'s last item is the job file), else ``cmd`` is run."""
    result_path = pathlib.Path(job.result)
    if result_path.exists():
        result_path.unlink()
    returncode: int | None = None
    if spawner is not None:
        log = pathlib.Path(cmd[-1]).with_suffix(".log")  # beside the job file, where no kernel can read
        try:
            returncode, timed_out = spawner.run(cmd[-1], str(log), timeout)
        except RuntimeError:  # the fork server has ended: start this worker as a new interpreter
            spawner = None
        else:
            output = log.read_bytes() if log.exists() else b""
            why = (
                f"the notebook ran longer than {timeout} s in total"
                if timed_out
                else f"the grading worker ended with exit code {returncode}"
            )
    if spawner is None:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd, env=_worker_env()
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
            why = f"the grading worker ended with exit code {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            why = f"the notebook ran longer than {timeout} s in total"
        returncode = proc.returncode
    if not result_path.exists():
        tail = (output or b"").decode(errors="replace").strip().splitlines()[-1:]
        reason = why + (f" ({tail[0][:150]})" if tail and returncode else "")
        write_result(
            result_path,
            Result(job.submission_name, job.sha256, job.student_id, "error", reason, warnings=job.warnings),
        )
        write_feedback(
            pathlib.Path(job.feedback), None, job.student_id, job.chapter, {}, job.points, warnings=job.warnings,
            reasons=[reason], unreadable=False,
        )  # fmt: skip
    return read_result(result_path)
