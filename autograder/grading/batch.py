"""Grade a folder of submitted notebooks: the grading line, one record per uploaded file.

:func:`grade` is the list of steps — chapter, collect, canonicalise (:func:`canonicalise`), execute (judge and
score in the worker), feedback, report —; the chapter is read once (``releases.read``) and that object is given to
every step, each step reads the submissions' records (``submission.Submission``) and returns into them, and only the
last two write into the output folder. What each step does and enters: docs/grading-design.md ("The line inside
every step"; ``python -m scripts.grading_path`` shows it). Progress goes to the steps' modules' ``logging`` loggers.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pathlib
import textwrap
import threading
import time
from collections.abc import Collection, Iterable, Sequence

import nbformat

from .. import canonical, releases
from ..wording import Said, say
from . import collect, execute, feedback, memory, report
from .submission import Result, Submission, write_result

logger = logging.getLogger(__name__)


def grade(
    paths: Iterable[pathlib.Path],
    chapter: str,
    out: pathlib.Path,
    *,
    cell_timeout: int = 120,
    notebook_timeout: int = 900,
    memory_mb: int = 6144,
    worker_memory_mb: int = memory.WORKER_MB,
    jobs: int | None = None,
    force: bool = False,
    lms_assignment: str | None = None,
    executor: execute.Executor | None = None,
    prefer: Collection[str] = (),
    ignored: Sequence[str] = (),
    moodle_language: str = "en",
) -> list[report.Row]:
    """Grade ``paths`` (submitted files) for ``chapter`` into ``out``; returns grades.csv's rows. The keywords are
    ``python -m autograder grade``'s options (``autograder/cli.py``; ``notebook_timeout`` is ``--timeout``):
    ``memory_mb`` each kernel's memory, ``worker_memory_mb`` each worker's memory cgroup (0: none), ``force``
    regrades what an earlier run graded, ``lms_assignment`` the Canvas column (default: the chapter), ``executor``
    where the workers run (``executors.py``; default: processes on this machine, ``jobs`` at a time), ``prefer`` the
    files chosen as their students' rows; ``ignored``: what the download held that is no submission (the summary
    lists it)."""
    out = _output_folder(out)
    chapter_read = releases.read(chapter)  # once: its exercises' points, each edition's release notebook
    subs = collect.collect(sorted(pathlib.Path(p) for p in paths), out, chapter_read, prefer)  # it says what it did
    todo = [s for s in subs if force or not s.graded_before]
    done = [s for s in subs if s.graded_before and not force]  # graded by an earlier run of this batch
    progress = Progress(len(subs), already=len(done))
    if done:
        logger.info(
            f"  {len(done)} of {len(subs)} files graded by an earlier run of this batch (kept; --force regrades)"
        )
    pages = feedback.Pages(chapter_read, out / "feedback")
    max_score = float(sum(chapter_read.points.values()))

    def record(sub: Submission) -> None:  # feedback, then the graded notebook, then the result file (last)
        pages.write(sub)
        if sub.graded is not None:
            (out / "graded" / f"{sub.student_id}.ipynb").write_text(sub.graded)
        write_result(sub.result_file, sub.result())
        _log_row(sub, max_score, progress.step())

    if todo:
        # first: the workers' fork server imports what a worker needs while the batch canonicalises; the summary says
        # how this run runs its kernels even where none is run
        with execute.workers(chapter_read, out, local=executor is None) as workers:
            runs = canonicalise(todo, chapter_read)
            for sub in todo:
                if sub.outcome is not None:  # not gradeable: its zero and why
                    record(sub)

            ran = execute.run(runs, workers, executor=executor, jobs=jobs, cell_timeout=cell_timeout,
                              notebook_timeout=notebook_timeout, memory_mb=memory_mb,
                              worker_memory_mb=worker_memory_mb)  # fmt: skip
            for group in ran:  # as each run ends: its files, with the outcome the worker judged, recorded
                for sub in group:
                    record(sub)
    for sub in done:  # their pages stay; whether the LMS file carries them may have changed since
        pages.mark(sub)
    return report.report(subs, out, chapter_read, assignment=lms_assignment or chapter, ignored=ignored,
                         moodle_language=moodle_language)  # fmt: skip


def _output_folder(out: pathlib.Path) -> pathlib.Path:
    out = pathlib.Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the kernels (other uids) cannot reach results, feedback or graded notebooks
    for sub in ("results", "feedback", "graded"):
        (out / sub).mkdir(exist_ok=True)
    return out


class Progress:
    """How far a batch is: "k of N" and what is left, with the time it will take at the pace of this run so far
    (files graded by an earlier run count as done, not in the pace). Thread-safe: runs end in the pool's threads."""

    def __init__(self, total: int, already: int = 0):
        self.total, self.done, self.already = total, already, already
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def step(self) -> str:
        with self._lock:
            self.done += 1
            done, left = self.done, self.total - self.done
            pace = (time.monotonic() - self.started) / max(1, done - self.already)
        eta = f", about {_duration(pace * left)} to go" if left else ""
        return f"{done} of {self.total} ({left} left{eta})"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{max(1, round(seconds))} s"


# the console's reasons: wrapped at this width, never cut
_WRAP = textwrap.TextWrapper(
    width=118, initial_indent=" " * 6, subsequent_indent=" " * 8, break_long_words=False, break_on_hyphens=False
)


def _log_row(sub: Submission, max_score: float, progress: str = "") -> None:
    """The file's line on the console: progress, file, points; then its reason whole, one part a line, wrapped."""
    result = sub.result()
    head = f"  [{progress}] " if progress else "  "
    logger.info(f"{head}{sub.label}: {result.score:g}/{max_score:g}")
    if sub.same_as:
        logger.info(f"      identical code to {sub.same_as} (graded once for both)")
        return
    for part in (p for p in result.reason.split("; ") if p):
        logger.info(_WRAP.fill(part))


# ------------------------------------------------------------------------------------------------ canonicalise


def canonicalise(todo: list[Submission], chapter: releases.Chapter) -> dict[str, tuple[str, list[Submission]]]:
    """Canonicalise every file against the committed release notebook (``chapter.release``, its test cells'
    released versions ``chapter.history``): canonical text's hash -> (that text, the submissions with it). A file
    that cannot be graded gets its zero and reason in its record (``outcome``): collection's (not a notebook,
    another chapter's), or the canonicalisation's."""
    runs: dict[str, tuple[str, list[Submission]]] = {}
    for sub in todo:
        why: Said = sub.zero
        if not why:
            try:
                nb, sub.warnings = canonical.canonicalise(sub.path.read_bytes(), chapter.release, chapter.history)
            except canonical.Ungradeable as exc:
                why = exc.args[0]  # a message, rendered where shown
            except OSError as exc:
                why = say("unreadable file", error=exc.strerror)
            except Exception as exc:
                why = say("not a readable notebook", ename=type(exc).__name__, error=str(exc)[:100])
        if why:
            sub.outcome, sub.unreadable = Result("", "", sub.student_id, "error", str(why), reasons=[why]), True
            continue
        text = nbformat.writes(nb)
        runs.setdefault(hashlib.sha256(text.encode()).hexdigest(), (text, []))[1].append(sub)
    return runs
