"""Gradescope's ``results.json`` for a submission, from the course grader's result (``submission.Result``).

What ``results.json`` holds: one scored test per exercise (its points, and the checks' messages the course's
feedback shows for it), visible at once; one unscored test per exercise with what its hidden checks found, shown
``after_published`` (``--hidden-visibility``); the total, equal to the course grader's on the same file; the
feedback page's content (``output``, HTML, the hidden checks' messages left to their own tests). A submission that
was not graded gets a zero and the reason (:func:`zero_payload`). Its format, from Gradescope's documented fields:
:data:`SCHEMA`. Grading the submission and writing the file in the container: :mod:`autograder.gradescope.run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import os
import pathlib
import re
import tempfile
from collections.abc import Sequence

from .. import notebooks
from ..releases import points_text

SCHEMA = pathlib.Path(__file__).resolve().parent / "gradescope_results.schema.json"


def _label(fn) -> str:
    return (fn.__doc__ or fn.__name__).strip().splitlines()[0]


def _hidden_labels(exercise) -> tuple[set[str], set[str]]:
    """(labels of the visible checks, labels of the hidden checks only) of an exercise, as the messages name them."""
    visible = {_label(fn) for fn in exercise.visible}
    return visible, {_label(fn) for fn in exercise.hidden} - visible


def _is_hidden(line: str, hidden: set[str]) -> bool:
    """Whether a message line (``✘ <check's label>`` then what it found) is a hidden check's."""
    text = line.strip()
    return any(text.startswith(f"✘ {label}") for label in hidden)


def _reasons_by_exercise(reason: str, names: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The result's reason ("; "-joined lines, each "<exercise>: ..." or about the whole file) as (lines about the
    whole submission, exercise -> its lines)."""
    general: list[str] = []
    mine: dict[str, list[str]] = {n: [] for n in names}
    current: list[str] = general
    for part in reason.split("; ") if reason else []:
        owner = next((n for n in sorted(names, key=len, reverse=True) if part.startswith(f"{n}: ")), None)
        if owner is not None:
            current = mine[owner]
            current.append(part.removeprefix(f"{owner}: "))
        elif current:
            current[-1] += "; " + part
        else:
            general.append(part)
    return general, mine


def _pointer(name: str, visibility: str) -> str:
    when = {
        "after_published": " once the grades are published",
        "after_due_date": " after the due date",
        "visible": "",
    }
    if visibility == "hidden":
        return "a hidden check failed (its message is not shown)"
    return f'a hidden check failed: what it found is shown under "{name}: hidden checks"{when[visibility]}'


@dataclasses.dataclass
class _Exercise:
    """One exercise's outcome as results.json tells it."""

    name: str
    points: float
    got: float
    shown: list[str]  # the lines the scored test shows (and the feedback page)
    hidden: list[str]  # what the hidden checks found (their own test)
    n_hidden: int


def _exercises(result, chapter: str, hidden_visibility: str) -> tuple[list[str], list[_Exercise]]:
    """(lines about the whole submission, each exercise's outcome) from the course grader's result."""
    exercises = list(notebooks.checks_module(chapter).EXERCISES)
    names = [ex.name for ex in exercises]
    general, reasons = _reasons_by_exercise(result.reason, names)
    out = []
    for ex in exercises:
        _, hidden_labels = _hidden_labels(ex)
        got = float(result.scores.get(ex.name, 0.0))
        details = list((getattr(result, "details", None) or {}).get(ex.name, []))
        lines = details if got < ex.points and details else reasons[ex.name]
        hidden = [line for line in lines if _is_hidden(line, hidden_labels)]
        if hidden_visibility == "visible":  # as the course's own feedback: every message at once
            shown = list(lines)
        else:
            shown = [line for line in lines if line not in hidden] + (
                [_pointer(ex.name, hidden_visibility)] if hidden else []
            )
        out.append(_Exercise(ex.name, float(ex.points), got, shown, hidden, len(ex.hidden)))
    return general, out


def _exercise_text(ex: _Exercise, status: str, general: Sequence[str]) -> str:
    head = f"{'✔' if ex.got >= ex.points else '✘'} {ex.name}: {ex.got:g} of {points_text(ex.points)}"
    lines = list(ex.shown)
    why = "; ".join(general) or "see the top of this page"
    if status == "error":
        lines = [f"not graded: {why}"] + lines
    elif status == "integrity":
        lines = [f"the whole submission scores zero: {why}"] + lines
    return head + "".join("\n" + "\n".join("  " + ln for ln in line.splitlines()) for line in lines) + "\n"


def _hidden_text(ex: _Exercise, status: str) -> tuple[str, str]:
    """(status, output) of an exercise's hidden-checks test."""
    if status != "graded":
        return "failed", "The hidden checks did not run: the submission was not graded (see its first test).\n"
    if ex.hidden:
        return "failed", "".join(line.rstrip() + "\n" for line in ex.hidden)
    if ex.got >= ex.points:
        return "passed", f"All hidden checks passed ({ex.n_hidden} check{'s' if ex.n_hidden != 1 else ''}).\n"
    return "failed", (
        f"No hidden check of {ex.name} is reported as failed; the exercise lost its points for the reasons given in "
        f'"{ex.name}".\n'
    )


def page_content(page: str) -> str:
    """The content of a feedback page for results.json's ``output``: what is inside ``<body>``, without scripts and
    styles (Gradescope sanitises them away) and without images (embedded figures would make the results large;
    they are in the student's own notebook)."""
    m = re.search(r"<body[^>]*>(.*)</body>", page, re.S | re.I)
    body = m.group(1) if m else page
    body = re.sub(r"<(script|style)\b.*?</\1\s*>", "", body, flags=re.S | re.I)
    body = re.sub(r"<img\b[^>]*>", "<em>[a figure: see your notebook]</em>", body, flags=re.I)
    return body.strip()


def feedback_output(
    result,
    chapter: str,
    graded,
    exercises: Sequence[_Exercise],
    general: Sequence[str],
    edition: str = "en",
) -> str:
    """The feedback page of ``python -m autograder grade`` for this result (``feedback.write_feedback``), its
    content only (:func:`page_content`), with each exercise's hidden checks' messages left to their own tests; in
    the ``edition`` the student submitted ("zh": a notebook of ``notebooks/zh/``, the page in Chinese)."""
    from ..grading import feedback, redaction

    points = {ex.name: int(ex.points) for ex in exercises}
    with tempfile.TemporaryDirectory(prefix="gradescope-feedback-") as tmp:
        page = pathlib.Path(tmp) / "feedback.html"
        if graded is None or result.status == "error":
            reasons = [result.reason] if result.reason else ["the file could not be graded"]
            feedback.write_feedback(
                page,
                None,
                result.student_id,
                chapter,
                {},
                points,
                warnings=result.warnings,
                reasons=reasons,
                unreadable=result.status == "error" and graded is None and _unreadable(result.reason),
                edition=edition,
            )
        else:
            reasons = list(general) + [f"{ex.name}: {line}" for ex in exercises for line in ex.shown]
            feedback.write_feedback(
                page,
                graded,
                result.student_id,
                chapter,
                dict(result.scores),
                points,
                warnings=result.warnings,
                reasons=reasons,
                secrets=redaction.grader_secrets(graded, chapter),
                details={ex.name: ex.shown for ex in exercises if ex.got < ex.points},
                edition=edition,
            )
        return page_content(page.read_text())


def _unreadable(reason: str) -> bool:
    """Whether a zero's reason is about the file itself (so the page's advice is to download it again)."""
    return not reason.startswith(("the kernel", "a cell", "autograde", "the notebook ran", "the grading worker"))


def results_payload(
    result,
    chapter: str,
    *,
    graded=None,
    hidden_visibility: str = "after_published",
    execution_time: float = 0.0,
    output: str | None = None,
    extra: dict | None = None,
    edition: str = "en",
) -> dict:
    """Gradescope's results.json for the course grader's ``result`` (a ``submission.Result``) of a ``chapter``
    submission; ``graded``: the graded notebook (for the feedback page), None for a file that was not run;
    ``output``: the page content to show (default: built here from ``result`` and ``graded``, in ``edition``, the
    course edition of the submitted file as ``canonical.edition_of`` reads it)."""
    general, exercises = _exercises(result, chapter, hidden_visibility)
    tests: list[dict] = []
    for i, ex in enumerate(exercises, start=1):
        tests.append(
            {
                "name": ex.name,
                "number": str(i),
                "score": ex.got,
                "max_score": ex.points,
                "status": "passed" if ex.got >= ex.points else "failed",
                "output": _exercise_text(ex, result.status, general),
                "output_format": "text",
                "tags": [chapter, "exercise"],
                "visibility": "visible",
            }
        )
        if ex.n_hidden:
            status, text = _hidden_text(ex, result.status)
            tests.append(
                {
                    "name": f"{ex.name}: hidden checks",
                    "number": f"{i}.1",
                    "status": status,
                    "output": text,
                    "output_format": "text",
                    "tags": [chapter, "hidden checks"],
                    "visibility": hidden_visibility,
                }
            )
    if output is None:
        output = feedback_output(result, chapter, graded, exercises, general, edition)
    return {
        "score": sum(ex.got for ex in exercises),
        "execution_time": round(execution_time),
        "output": output,
        "output_format": "html",
        "visibility": "visible",
        "stdout_visibility": "hidden",  # the grader's log: for the instructor
        "tests": tests,
        "extra_data": {
            "course_grader": {
                "chapter": chapter,
                "status": result.status,
                "reason": result.reason,
                "warnings": list(result.warnings),
                **(extra or {}),
                # the course grader's result file as python -m autograder grade writes it (less nbgrader's log)
                "result": {k: v for k, v in dataclasses.asdict(result).items() if k not in ("log", "trace")},
            }
        },
    }


def zero_payload(chapter: str, why: str, *, execution_time: float = 0.0, extra: dict | None = None) -> dict:
    """results.json for a submission that gets zero without being graded (nothing submitted, several notebooks, the
    grader cannot isolate the kernel here, the grader itself failed): every exercise zero, with ``why``."""
    from ..grading.submission import Result

    return results_payload(
        Result("", "", "submission", "error", why),
        chapter,
        execution_time=execution_time,
        output=f"<p><b>0 points.</b> {html.escape(why)}</p>",
        extra=extra,
    )


def write_results(path: pathlib.Path, payload: dict) -> None:
    """Write results.json at ``path`` atomically (a new file renamed into place, never through a link)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)
