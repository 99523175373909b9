"""What a feedback page may not show: the hidden tests' lines and the chapter's reference solution
(:func:`grader_secrets`) and the grader's own lines, taken out of a graded notebook's outputs (:func:`redact`, for
``feedback.py``). The worker counts what a run printed (:func:`secret_output_lines`: the row is flagged for review)."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection

import nbformat

from .. import notebooks
from ..wording import say

REDACTED = str(say("redacted"))  # the worker's copy; a page writes it in its edition (feedback.py)
_MIN_SECRET = 12  # characters (stripped): shorter lines ("return out", "x = 1") are too common to be a secret


def grader_secrets(graded: nbformat.NotebookNode, chapter: str) -> list[str]:
    """The lines no output in the feedback may show: every line of the hidden tests (the graded notebook's test
    cells) and of the chapter's reference solution (the solution regions of ``solutions/<chapter>.py``, where the
    course has it), stripped, at least 12 characters long, except lines that are also in the student's own cells
    (a student may print their own code)."""
    found: set[str] = set()
    own: set[str] = set()
    for cell in graded.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") or cell.id.startswith("inserted-") or "-part" in cell.id:
            own.update(ln.strip() for ln in cell.source.splitlines())
        for region in HIDDEN_REGION.finditer(cell.source):
            found.update(ln.strip() for ln in region.group(0).splitlines()[1:])
    solution = notebooks.ROOT / "solutions" / f"{chapter}.py"
    if solution.exists():
        pattern = re.escape(notebooks.BEGIN) + r"\n(.*?)" + re.escape(notebooks.END)
        for region in re.finditer(pattern, solution.read_text(), re.S):
            found.update(ln.strip() for ln in region.group(1).splitlines())
    return sorted(ln for ln in found - own if len(ln) >= _MIN_SECRET and not ln.startswith("###"))


def _rewrite_output_text(out, rewrite: Callable[[str], str]) -> None:
    """Apply ``rewrite`` to every text a cell output shows, in place: stream text, an error's message and
    traceback, text/* and JSON data (a list of strings is joined first)."""
    if "text" in out:
        out.text = rewrite("".join(out.text) if isinstance(out.text, list) else out.text)
    if out.get("output_type") == "error":
        out.evalue = rewrite(out.get("evalue") or "")
        out.traceback = [rewrite(t) for t in out.get("traceback", [])]
    for mime, value in (out.get("data") or {}).items():
        if mime.startswith("text/") or mime == "application/json":
            value = "".join(value) if isinstance(value, list) else value
            if isinstance(value, str):
                out.data[mime] = rewrite(value)


def redact_output(out, secrets: Collection[str], replacement: str = REDACTED) -> int:
    """Replace every line of a cell output (stream text, text data, error message) that contains one of
    ``secrets`` by ``replacement`` (:data:`REDACTED`), in place; the number of lines replaced."""
    if not secrets:
        return 0
    count = [0]

    def clean(text: str) -> str:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if any(secret in line for secret in secrets):
                lines[i] = replacement
                count[0] += 1
        return "\n".join(lines)

    _rewrite_output_text(out, clean)
    return count[0]


def secret_output_lines(graded: nbformat.NotebookNode, secrets: Collection[str]) -> int:
    """How many output lines of ``graded`` show one of ``secrets`` (``graded`` is not changed)."""
    return sum(
        redact_output(out, secrets)
        for cell in copy.deepcopy(graded).cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


def redact(nb: nbformat.NotebookNode, secrets: Collection[str], replacement: str = REDACTED) -> None:
    """What a feedback page may not show, taken out of every code cell's outputs of ``nb``, in place: the grader's
    own lines (the guard's setup lines, hidden tests: a cell that prints the notebook's input history, ``In`` or
    ``_ih``, would show them) and every line that shows one of ``secrets`` (:func:`redact_output`)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                _rewrite_output_text(out, _strip_grader_text)
                redact_output(out, secrets, replacement)


HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS.*?(### END HIDDEN TESTS|\Z)", re.S)


def _strip_grader_text(text: str) -> str:
    text = HIDDEN_REGION.sub("# (hidden tests)", text)
    return "\n".join(ln for ln in text.split("\n") if "_autograder_guard" not in ln and "autograder.grading" not in ln)
