"""Why a graded notebook lost points, in one line each, from its cells' errors and the worker's judgement: the
reasons the scoring gives (:func:`failure_reasons`) and the warnings about ungraded cells that failed
(:func:`ungraded_cell_errors`). Read by the worker (``worker.py``)."""

from __future__ import annotations

import itertools

import nbformat

from ..wording import say


def what_happened(ename: str, evalue: str, cell_timeout: int | None = None, memory_mb: int = 0) -> str | None:
    """A student-readable account of an error that is not a check's message (an exit, a time-out, the memory
    limit, in MB when given), or None."""
    limit = f" ({cell_timeout} s)" if cell_timeout else ""
    memory = f" of {memory_mb} MB" if memory_mb else ""
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


def _is_answer(cell) -> bool:
    return cell.cell_type == "code" and bool(cell.metadata.get("nbgrader", {}).get("solution"))


def _first_error(cell) -> dict | None:
    return next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)


def detail_reason(detail: str) -> str:
    """A failed check as the worker judged it (``judge.judge``'s details: "✘ label" and the message, indented) in
    one line: "✘ label — the message's first line", and its hints."""
    lines = [ln.strip() for ln in detail.strip().splitlines() if ln.strip()]
    line = " — ".join(lines[:2])
    return line + "".join(f" {ln}" for ln in lines[2:5] if ln.startswith(say("hint", hint="")))


def failure_reasons(
    nb: nbformat.NotebookNode,
    cell_timeout: int | None = None,
    memory_mb: int = 0,
    details: dict[str, list[str]] | None = None,
) -> list[str]:
    """One short line per failed test cell: an exit, a time-out or the memory limit (in the test cell, or in the
    answer cell that therefore never defined the exercise) said as such; else the first failed check as the worker
    judged it (``details``: exercise -> its failed checks' messages, computed outside the kernel), else the check's
    message in the cell's error."""
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
        # "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>": keep the last two.
        first = " — ".join(lines[1:3]) if len(lines) >= 2 and lines[1].startswith("✘") else (lines or [""])[0]
        first += "".join(f" {ln}" for ln in lines[3:6] if ln.startswith(say("hint", hint="")))
        happened = what_happened(ename, evalue, cell_timeout, memory_mb)
        if happened:
            first = say("the checks of", name=name, happened=happened)
        elif details.get(name):
            first = detail_reason(details[name][0])
        elif ename == "NameError":
            first = say("deleted or renamed", error=evalue)
            for answer in _answer_cells(nb, name):
                err = _first_error(answer)
                if err is not None:
                    why = what_happened(err.get("ename", ""), err.get("evalue", ""), cell_timeout, memory_mb)
                    why = why or say("raised error", ename=err.get("ename"), error=str(err.get("evalue", ""))[:150])
                    first = say("answer never defined", name=name, happened=why)
                    break
        reasons.append(f"{name}: {first}")
    return reasons


def ungraded_cell_errors(nb: nbformat.NotebookNode, cell_timeout: int | None = None) -> list[str]:
    """One warning per ungraded code cell (a demo "try it" cell, a cell the student added, an answer cell after
    its definitions) that ended in an error: no check scores it, but it often shows a bug the checks missed.
    Consecutive cells after the same answer that failed alike (an untouched exercise's demo cells) make one
    warning that counts them."""
    found: list[tuple[str, str]] = []  # (where, what happened)
    after = say("after the setup")
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
    warnings: list[str] = []
    answers = {str(c.metadata.get("nbgrader", {}).get("grade_id")) for c in nb.cells if _is_answer(c)}
    for (where, how), group in itertools.groupby(found):
        n = len(list(group))
        if where in answers:
            warnings += [say("ungraded answer cell", name=where, happened=how)] * n
        elif n == 1:
            warnings.append(say("ungraded cell", where=where, happened=how))
        else:
            warnings.append(say("ungraded cells", n=n, where=where, happened=how))
    return warnings
