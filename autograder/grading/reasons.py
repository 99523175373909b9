"""Why a graded notebook lost points, in one line each, from its cells' errors and the worker's judgement: the
reasons the scoring gives (:func:`failure_reasons`) and the warnings about ungraded cells that failed
(:func:`ungraded_cell_errors`). Read by the worker (``worker.py``)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import nbformat

from ..wording import INDENTED, Message, Said, join_messages, say, verbatim


def what_happened(ename: str, evalue: str, cell_timeout: int | None = None, memory_mb: int = 0) -> Message | None:
    """A student-readable account of an error that is not a check's message (an exit, a time-out, the memory
    limit, in MB when given), or None."""
    limit = say("time limit", seconds=cell_timeout) if cell_timeout else ""
    memory = say("memory of", mb=memory_mb) if memory_mb else ""
    if ename == "SystemExit":
        return say("exited", value=evalue or "None")
    if ename in ("KeyboardInterrupt", "CellTimeoutError", "ExerciseTimeout"):
        return say("timed out", limit=limit)
    if ename == "MemoryError" or "can't allocate memory" in evalue or "not enough memory" in evalue:
        return say("out of memory", memory=memory)
    return None


def _answer_cells(nb: nbformat.NotebookNode, name: str) -> list:
    return [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and (c.metadata.get("nbgrader", {}).get("grade_id") == name or c.get("id", "").startswith(f"{name}-part"))
    ]


def _first_error(cell) -> dict | None:
    return next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)


def _unindented(message: Message) -> Message:
    return _unindented(message.get("text")) if message.key == INDENTED else message  # type: ignore[arg-type]


def detail_reason(detail: Said) -> Said:
    """A failed check as the worker judged it (``judge.judge``'s details) in one line: "✘ label — the message's
    first line", and its hints."""
    if not isinstance(detail, Message):
        return _one_line([ln.strip() for ln in detail.strip().splitlines() if ln.strip()])
    head, *body = detail.lines()
    said = [line for part in body for line in _unindented(part).lines()]
    if head.key != "check label" or not said:
        return detail
    first = say("failed check", check=head.get("check"), message=said[0])
    hints = [_unindented(m) for m in said[1:4] if _unindented(m).key == "hint"]
    return join_messages([first, *hints], " ") if hints else first


def _one_line(lines: list[str]) -> str:
    """Lines of plain text (a failed check: "✘ label", the message, its hints) as :func:`detail_reason`'s line."""
    hint = str(say("hint", hint=""))
    return " — ".join(lines[:2]) + "".join(f" {ln}" for ln in lines[2:5] if ln.startswith(hint))


def exercise_reason(name: str, reason: Said) -> Message:
    """Why exercise ``name`` lost its points: "name: reason"."""
    return say("exercise reason", name=name, reason=reason)


def exercise_of(reason: Said) -> str:
    """The exercise an :func:`exercise_reason` is about (of a plain string, "<exercise>: …", its first part; "" for
    another reason)."""
    if isinstance(reason, Message):
        return str(reason.get("name", "")) if reason.key == "exercise reason" else ""
    return reason.split(":", 1)[0] if ":" in reason else ""


def failure_reasons(
    nb: nbformat.NotebookNode,
    cell_timeout: int | None = None,
    memory_mb: int = 0,
    details: Mapping[str, Sequence[Said]] | None = None,
) -> list[Message]:
    """One short line per failed test cell: an exit, a time-out or the memory limit (in the test cell, or in the
    answer cell that therefore never defined the exercise); else the first failed check as the worker judged it
    (``details``: exercise -> its failed checks' messages), else the check's message in the cell's error."""
    details = details or {}
    reasons = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        name = meta["grade_id"].removeprefix("test_")
        out = _first_error(cell)
        if out is None:
            continue
        ename, evalue = out.get("ename") or "", out.get("evalue") or ""
        lines = [ln.strip() for ln in (evalue or ename).strip().splitlines()]
        # the kernel's own text, shown as it is: "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>"
        first: Said = verbatim(_one_line(lines[1:] if len(lines) >= 2 and lines[1].startswith("✘") else lines[:1]))
        happened = what_happened(ename, evalue, cell_timeout, memory_mb)
        if happened:
            first = say("the checks of", name=name, happened=happened)
        elif details.get(name):
            first = detail_reason(details[name][0])
        elif ename == "NameError":
            first = say("deleted or renamed", error=verbatim(evalue))
            for answer in _answer_cells(nb, name):
                err = _first_error(answer)
                if err is not None:
                    why = what_happened(err.get("ename", ""), err.get("evalue", ""), cell_timeout, memory_mb)
                    why = why or say("raised error", ename=err.get("ename"), error=str(err.get("evalue", ""))[:150])
                    first = say("answer never defined", name=name, happened=why)
                    break
        reasons.append(exercise_reason(name, first))
    return reasons


def ungraded_cell_errors(nb: nbformat.NotebookNode, cell_timeout: int | None = None) -> list[Said]:
    """One warning per ungraded code cell (a demo cell, a cell the student added, an answer cell after its
    definitions) that ended in an error: no check scores it, but it often shows a bug the checks missed. Consecutive
    cells after the same answer that failed alike (an untouched exercise's demo cells) make one warning."""
    found: list[tuple[Said, Message]] = []  # (where, what happened)
    after: Said = say("after the setup")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            after = say("after the answer", name=meta.get("grade_id"))
        if meta.get("grade") or "selfcheck_here(" in cell.source:
            continue
        err = _first_error(cell)
        if err is None:
            continue
        ename, evalue = err.get("ename") or "", str(err.get("evalue") or "")
        where = str(meta.get("grade_id")) if meta.get("solution") else after
        first_line = (evalue.strip().splitlines() or [""])[0][:150]
        how = what_happened(ename, evalue, cell_timeout) or (
            say("raised error", ename=ename, error=first_line) if first_line else say("raised bare", ename=ename)
        )
        found.append((where, how))
    warnings: list[Said] = []
    for (where, how), group in itertools.groupby(found):
        n = len(list(group))
        if isinstance(where, str):  # an answer cell, by its name (else a message: after which answer)
            warnings += [say("ungraded answer cell", name=where, happened=how)] * n
        elif n == 1:
            warnings.append(say("ungraded cell", where=where, happened=how))
        else:
            warnings.append(say("ungraded cells", n=n, where=where, happened=how))
    return warnings
