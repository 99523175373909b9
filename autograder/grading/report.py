"""The report step: ``grades.csv`` (one row per submission file), ``summary.md/.csv/.png`` and the LMS's import
files (``lms.py``), all from the result files (what each holds: the README's "Results go to"). A :class:`Row` is a
submission's record as those files need it (:func:`row`)."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import releases
from ..wording import Message, Said, say
from . import lms
from .submission import read_result

if TYPE_CHECKING:
    from .submission import Result, Submission

logger = logging.getLogger(__name__)

CSV_NAME = "grades.csv"


@dataclasses.dataclass
class Row:
    submission: str
    student_id: str
    chapter: str
    scores: dict[str, float]
    score: float
    max_score: float
    status: str  # "graded", "error" (not gradeable: zero) or "integrity" (grading machinery changed: zero)
    reason: str  # the instructor's (grades.csv): English
    warnings: list[Said] = dataclasses.field(default_factory=list)
    # whose it is (lms.SubmissionName's fields), and the fields of the same names of submission.Submission
    lms: str = ""
    lms_id: str = ""
    name: str = ""
    late: bool | None = None
    graded_at: float = 0.0  # when the result was recorded (seconds since the epoch)
    uploaded_at: float = 0.0
    edition: str = "en"  # the LMS feedback comment's language
    in_lms_file: bool = True
    lms_note: str = ""
    stray: str = ""
    reasons: list[Said] = dataclasses.field(default_factory=list)  # the reason's messages: the LMS comment's words


def lost_points(scores: dict[str, float], max_score: float) -> str:
    """A row's reason where nothing else gives one: "" with every point, else where to look (:func:`row`, and
    nbgrader's exports in ``nbgrader_adapter.py``)."""
    return "" if sum(scores.values()) == max_score else "points lost: see the feedback"


def row(sub: Submission, result: Result, chapter: str, points: dict[str, int], graded_at: float) -> Row:
    """The grades.csv row of ``sub`` from its ``result`` (the identity is the one collection read)."""
    scores = {name: float(result.scores.get(name, 0.0)) for name in points}
    max_score = float(sum(points.values()))
    reason = result.reason or lost_points(scores, max_score)
    warnings = list(result.warnings)
    if sub.who.claims:  # its own file name carries a second LMS marker
        claim = say("claims another id", lms=lms.NAMES[sub.who.lms], claims=sub.who.claims, lms_id=sub.who.lms_id)
        if claim not in warnings:
            warnings.append(claim)
    return Row(
        sub.label,
        sub.student_id,
        chapter,
        scores,
        sum(scores.values()),
        max_score,
        result.status,
        reason,
        warnings,
        lms=sub.who.lms,
        lms_id=sub.who.lms_id,
        name=sub.who.name,
        late=sub.who.late,
        graded_at=graded_at,
        uploaded_at=sub.uploaded_at,
        edition=sub.edition,
        in_lms_file=sub.in_lms_file,
        lms_note=sub.lms_note,
        stray=sub.stray,
        reasons=list(result.reasons),
    )


def report(
    subs: Sequence[Submission],
    out: pathlib.Path,
    chapter: releases.Chapter,
    *,
    assignment: str,
    ignored: Sequence[str] = (),
    moodle_language: str = "en",
) -> list[Row]:
    """The report step: every record's row (its result file, the identity and LMS choice collection made), then
    :func:`write_reports`, for ``chapter`` as the batch read it. Returns the rows."""
    rows = [row(s, read_result(s.result_file), chapter.name, chapter.points, s.result_file.stat().st_mtime)
            for s in subs]  # fmt: skip
    write_reports(rows, out, chapter.points, assignment=assignment, checks=chapter.checks, ignored=ignored,
                  moodle_language=moodle_language)  # fmt: skip
    return rows


def write_reports(
    rows: list[Row],
    out: pathlib.Path,
    points: dict[str, int],
    *,
    assignment: str,
    checks: int | None = None,
    ignored: Sequence[str] = (),
    moodle_language: str = "en",
) -> None:
    """grades.csv, summary.md/.csv/.png and the LMS files under ``out``, with the rows that need the instructor's
    attention flagged. Which row the LMS file carries for each student is the choice collection made (each row's
    ``in_lms_file``, ``lms_note``, ``stray``), never made again. ``checks``: how many checks the chapter's exercises
    have (the summary's verdict line); ``ignored``: what the download held that is no submission."""
    names = list(points)
    attention = []

    def attend(row: Row, note: Said, flag: bool = False) -> None:
        if flag:  # said in the row's warnings too, with the row's points (in English: the instructor's summary)
            if note not in row.warnings:
                row.warnings.append(note)
            attention.append(f"{row.submission} ({row.score:g} point{'' if row.score == 1 else 's'}): {note}")
        else:
            attention.append(f"{row.submission}: {note}")
        logger.warning(f"  needs attention: {row.submission}: {note}")

    for row in rows:
        if row.lms_note:
            attend(row, row.lms_note, flag=True)
        elif row.stray:
            attend(row, row.stray)
        claim = next((w for w in row.warnings if isinstance(w, Message) and w.key == "claims another id"), None)
        if claim:
            attend(row, claim)
    write_csv(rows, out / CSV_NAME, names)
    kept = [r for r in rows if r.in_lms_file]  # one row per student (and each plain file): the statistics
    write_summary(kept, out, names, points, attention=attention, files=len(rows), ignored=ignored, checks=checks)
    lms.write_exports(kept, out, points, assignment=assignment, moodle_language=moodle_language)


_COLUMNS = ["submission", "student_id", "lms", "lms_id", "late", "chapter"]  # then the exercises, then:
_TOTALS = ["score", "max_score", "status", "reason", "warnings"]


def write_csv(rows: list[Row], path: pathlib.Path, exercise_names: list[str]) -> None:
    table = [_COLUMNS + exercise_names + _TOTALS]
    for r in rows:
        table.append(
            [
                r.submission,
                r.student_id,
                r.lms,
                r.lms_id,
                lms.LATE_TEXT[r.late],
                r.chapter,
                *(f"{r.scores[n]:g}" for n in exercise_names),
                f"{r.score:g}",
                f"{r.max_score:g}",
                r.status,
                r.reason,
                "; ".join(map(str, r.warnings)),
            ]
        )
    _write_table(path, table)


def _write_table(path: pathlib.Path, table: Sequence[Sequence[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(table)


def _jail_line(out: pathlib.Path) -> str:
    """The summary's line on whether the kernels of the last run were jailed (``execute.RUN_FILE``)."""
    try:
        run = json.loads((out / "grading_run.json").read_text())
    except (OSError, ValueError):
        return "Kernels: not run by this command (every submission was graded before, or on a cluster)."
    if run.get("jailed"):
        return "Kernels: jailed (bubblewrap: each in its own filesystem view, no network, an unprivileged uid)."
    return (
        f"Kernels: **NOT jailed** ({run.get('why_not') or 'switched off'}): graded with the in-kernel guard's file "
        "rules only (README, 'What the grader guarantees')."
    )


def write_summary(
    rows: list[Row],
    out: pathlib.Path,
    names: list[str],
    points: dict[str, int],
    *,
    attention: Sequence[str] = (),
    files: int | None = None,
    ignored: Sequence[str] = (),
    checks: int | None = None,
) -> None:
    """summary.csv / summary.md (per exercise: how many scored full, partial, zero; mean) and summary.png, over
    ``rows`` (the row each student gets), of ``files`` graded files; ``attention``, ``ignored`` and ``checks``:
    :func:`write_reports`'."""
    scores = {n: ([r.scores[n] for r in rows], float(points[n])) for n in names}
    scores["total"] = ([r.score for r in rows], float(sum(points.values())))
    table = [
        {
            "exercise": n,
            "max": top,
            "full": sum(v == top for v in vals),
            "partial": sum(0 < v < top for v in vals),
            "zero": sum(v == 0 for v in vals),
            "mean": round(sum(vals) / len(vals), 2) if vals else 0.0,
        }
        for n, (vals, top) in scores.items()
    ]
    _write_table(out / "summary.csv", [list(table[0]), *(list(t.values()) for t in table)])
    status = {s: sum(r.status == s for r in rows) for s in ("graded", "error", "integrity")}
    files = len(rows) if files is None else files
    md = [
        f"# {rows[0].chapter if rows else ''}: {len(rows)} rows, one per student, from {files} files "
        f"({status['graded']} graded, {status['error']} not gradeable, {status['integrity']} integrity zero"
        + (f"; {files - len(rows)} more listed below, not counted" if files > len(rows) else "")
        + ")",
        "",
        "| exercise | max | full | partial | zero | mean |",
        "|---|---|---|---|---|---|",
    ]
    md += [
        f"| {t['exercise']} | {t['max']:g} | {t['full']} | {t['partial']} | {t['zero']} | {t['mean']:g} |"
        for t in table
    ]
    if attention:
        md += ["", "## Needs attention", ""] + [f"* {a}" for a in attention]
    if ignored:
        md += ["", "## Ignored (not submissions)", ""] + [f"* {i}" for i in ignored]
    md += ["", _jail_line(out)]
    if rows and checks is not None:  # how the checks are judged (grading/judge.py)
        md.append(
            f"Verdicts: all {checks} checks judged in the grading worker, outside the student's kernel, from what "
            "the answer returned there."
        )
    (out / "summary.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(scores), figsize=(2.6 * len(scores), 2.6), squeeze=False)
    for ax, (n, (vals, top)) in zip(axes[0], scores.items()):
        ax.hist(vals, bins=[x - 0.5 for x in range(int(top) + 2)], color="#4a7", edgecolor="black")
        ax.set_title(n if len(n) < 22 else n[:20] + "…", fontsize=8)
        ax.set_xlabel(f"points (of {top:g})", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # points and counts are whole numbers
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("submissions")
    fig.tight_layout()
    fig.savefig(out / "summary.png", dpi=80)
    plt.close(fig)
