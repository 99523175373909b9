"""Gradescope's ``results.json`` for a submission, from the course grader's result (``submission.Result``): one
scored test per exercise, one unscored test per exercise with what its hidden checks found (at
``--hidden-visibility``), the total, and the feedback page (``output``) — all of it in the edition submitted.
A submission that was not graded gets a zero and the reason (:func:`zero_payload`). The format: :data:`SCHEMA`;
what students see: README, "Gradescope".
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

from .. import notebooks, releases, wording
from ..checks.exercises import label
from ..grading.reasons import exercise_of, exercise_reason
from ..grading.submission import result_fields
from ..wording import LINES, Message, Said

SCHEMA = pathlib.Path(__file__).resolve().parent / "gradescope_results.schema.json"


def _check_of(line: Said) -> str:
    """The label (its key) of the check a message is about — a failed check (``exercises.failed_check``), its
    one-line form (``reasons.detail_reason``) —, or ""."""
    while isinstance(line, Message):
        if line.key == LINES:
            line = line.lines()[0]
        elif line.key in ("check label", "failed check"):
            check = line.get("check")
            return check.key if isinstance(check, Message) else str(check)
        elif line.get("p0") is not None:  # wording.join_messages: its first part
            line = line.get("p0")  # type: ignore[assignment]
        else:
            return ""
    return ""


def _reasons_by_exercise(result, names: Sequence[str]) -> tuple[list[Said], dict[str, list[Said]]]:
    """The result's reasons (each an exercise's, ``reasons.exercise_reason``, or about the whole file) as (the
    reasons about the whole submission, exercise -> its reasons)."""
    general: list[Said] = []
    mine: dict[str, list[Said]] = {n: [] for n in names}
    for reason in result.reasons:
        owner = exercise_of(reason)
        if owner in mine and isinstance(reason, Message):
            mine[owner].append(reason.get("reason"))  # type: ignore[arg-type]
        else:
            general.append(reason)
    return general, mine


def hidden_test_name(name: str, edition: str = wording.EN) -> str:
    """The name of exercise ``name``'s hidden-checks test ("scaled_dot_product_attention: hidden checks")."""
    return wording.text("hidden checks test", edition, name=name)


def _pointer(name: str, visibility: str) -> Message:
    """What the scored test says in place of a hidden check's message (left to the hidden-checks test)."""
    if visibility == "hidden":
        return wording.say("hidden check failed")
    when = {"after_published": "when published", "after_due_date": "when due"}.get(visibility)
    test = wording.say("hidden checks test", name=name)
    return wording.say("hidden check shown", test=test, when=wording.say(when) if when else "")


@dataclasses.dataclass
class _Exercise:
    """One exercise's outcome as results.json tells it."""

    name: str
    points: float
    got: float
    shown: list[Said]  # the scored test's lines (and the page's): the checks' messages, where the hidden ones are
    hidden: list[Said]  # what the hidden checks found (their own test)
    n_hidden: int


def _exercises(result, chapter: str, hidden_visibility: str) -> tuple[list[Said], list[_Exercise]]:
    """(lines about the whole submission, each exercise's outcome) from the course grader's result."""
    exercises = list(notebooks.checks_module(chapter).EXERCISES)
    general, reasons = _reasons_by_exercise(result, [ex.name for ex in exercises])
    out = []
    for ex in exercises:
        got = float(result.scores.get(ex.name, 0.0))
        details: list[Said] = list(result.details.get(ex.name, []))
        lines = details if got < ex.points and details else reasons[ex.name]
        hidden_only = {label(fn).key for fn in ex.hidden} - {label(fn).key for fn in ex.visible}
        hidden = [line for line in lines if _check_of(line) in hidden_only]
        visible = hidden_visibility == "visible"  # as the course's own feedback: every message at once
        shown = [line for line in lines if visible or line not in hidden]
        if hidden and not visible:
            shown.append(_pointer(ex.name, hidden_visibility))
        out.append(_Exercise(ex.name, float(ex.points), got, shown, hidden, len(ex.hidden)))
    return general, out


def _exercise_text(ex: _Exercise, status: str, general: Sequence[Said], edition: str) -> str:
    """The scored test's output, in ``edition``."""
    mark = "✔" if ex.got >= ex.points else "✘"
    key = "decision one" if ex.points == 1 else "decision"
    head = wording.text(key, edition, mark=mark, name=ex.name, got=f"{ex.got:g}", top=f"{ex.points:g}")
    lines = [wording.render(line, edition) for line in ex.shown]
    why = "; ".join(wording.render(line, edition) for line in general) or wording.text("see the top", edition)
    if status in ("error", "integrity"):
        lines.insert(0, wording.text("not graded" if status == "error" else "all zero", edition, why=why))
    return head + "".join("\n" + "\n".join("  " + ln for ln in line.splitlines()) for line in lines) + "\n"


def _hidden_text(ex: _Exercise, status: str, edition: str) -> tuple[str, str]:
    """(status, output) of an exercise's hidden-checks test, in ``edition``."""
    if status != "graded":
        return "failed", wording.text("hidden not run", edition) + "\n"
    if ex.hidden:
        return "failed", "".join(wording.render(line, edition).rstrip() + "\n" for line in ex.hidden)
    if ex.got >= ex.points:
        key = "hidden passed one" if ex.n_hidden == 1 else "hidden passed"
        return "passed", wording.text(key, edition, n=ex.n_hidden) + "\n"
    return "failed", wording.text("no hidden failed", edition, name=ex.name, test=ex.name) + "\n"


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
    general: Sequence[Said],
    edition: str = "en",
) -> str:
    """The feedback page of ``python -m autograder grade`` for this result, written by the course's one feedback
    writer (``feedback.write_page``), its content only (:func:`page_content`), with each exercise's hidden checks'
    messages left to their own tests; in the ``edition`` the student submitted ("zh": a notebook of
    ``notebooks/zh/``, the page in Chinese)."""
    from ..grading import feedback

    points = {ex.name: int(ex.points) for ex in exercises}
    with tempfile.TemporaryDirectory(prefix="gradescope-feedback-") as tmp:
        page = pathlib.Path(tmp) / "feedback.html"
        feedback.write_page(
            page,
            result,
            graded if result.status != "error" else None,
            dataclasses.replace(releases.read(chapter), points=points),
            edition=edition,
            unreadable=result.status == "error" and graded is None and _unreadable(result.reasons),
            reasons=list(general) + [exercise_reason(ex.name, line) for ex in exercises for line in ex.shown],
            details={ex.name: ex.shown for ex in exercises if ex.got < ex.points},
        )
        return page_content(page.read_text())


# the zeros of a run that could not finish (runner.failure, worker.py, execute.py, executors.py): not the file's fault
_RUN_FAILURES = frozenset(
    {"kernel died", "kernel out of memory", "kernel could not start", "cell ran too long", "run failed",
     "notebook too long", "worker exit code", "worker out of memory", "grader error", "cluster lost the worker",
     "cluster could not run"}
)  # fmt: skip


def _unreadable(reasons: Sequence[Said]) -> bool:
    """Whether a zero's reason (the first of ``reasons``) is about the file itself (so the page's advice is to
    download it again), not about a run that could not finish; read from its key, never from its English."""
    first = reasons[0] if reasons else ""
    if isinstance(first, Message) and first.key == "with last line":
        first = first.get("why", "")  # type: ignore[assignment]
    return not (isinstance(first, Message) and first.key in _RUN_FAILURES)


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
    ``output``: the page content to show (default: built here from ``result`` and ``graded``). All of it in
    ``edition``, the course edition of the submitted file as ``canonical.edition_of`` reads it, but for the tests'
    tags (the instructor's filters)."""
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
                "output": _exercise_text(ex, result.status, general, edition),
                "output_format": "text",
                "tags": [chapter, "exercise"],
                "visibility": "visible",
            }
        )
        if ex.n_hidden:
            status, text = _hidden_text(ex, result.status, edition)
            tests.append(
                {
                    "name": hidden_test_name(ex.name, edition),
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
                "reason": "; ".join(wording.render(r, edition) for r in result.reasons) or result.reason,
                "warnings": [str(w) for w in result.warnings],
                **(extra or {}),
                # the course grader's result file as python -m autograder grade writes it (less nbgrader's log)
                "result": {k: v for k, v in result_fields(result).items() if k not in ("log", "trace")},
            }
        },
    }


def zero_payload(
    chapter: str, why: Said, *, execution_time: float = 0.0, extra: dict | None = None, edition: str | None = wording.EN
) -> dict:
    """results.json for a submission that gets zero without being graded (nothing submitted, several notebooks, the
    grader cannot isolate the kernel here, it ran out of memory, the grader itself failed): every exercise zero,
    with ``why`` in ``edition``, the edition of the file submitted; ``None``, where there is no notebook to read it
    from: ``why`` in English and in Chinese (``wording.both``), the rest in English."""
    from ..grading.submission import Result

    if edition is None:
        why, edition = wording.both(why), wording.EN
    said = html.escape(wording.render(why, edition)).replace("\n", "<br>")
    return results_payload(
        Result("", "", "submission", "error", str(why), reasons=[why]),
        chapter,
        execution_time=execution_time,
        output="<p>" + wording.text("zero points", edition, why=said) + "</p>",
        extra=extra,
        edition=edition,
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
