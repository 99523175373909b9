"""The given parts of an exercise's stub, for rewrites to start from instead of copies of the solution.

A student's exercise cell is the solution's source with every ``### BEGIN SOLUTION`` ... ``### END SOLUTION``
region replaced by a placeholder (:mod:`scripts.build_notebooks.notebooks` builds the release notebook so): what lies outside
the regions (signature, docstring, argument checks, the lines after a region) is given, and a rewrite that keeps
it must keep it as the notebook has it. :func:`pieces` reads those given parts from the solution module, where the
notebook builder reads them; :func:`head` is the first, :func:`tail` the last, and :func:`before` cuts one where a
rewrite writes the rest itself (e.g. a class's given ``__init__``, before a ``forward`` written whole).
"""

from __future__ import annotations

from autograder import notebooks
from scripts.build_notebooks import notebooks as builder


def pieces(chapter: str, name: str) -> list[str]:
    """The given text of exercise ``name``'s cell: before its first solution region, between regions, after the last
    (one more piece than regions)."""
    out, current, inside = [], [], False
    for line in builder.exercise_source(chapter, name).splitlines(keepends=True):
        if line.strip() == notebooks.BEGIN:
            out.append("".join(current))
            current, inside = [], True
        elif line.strip() == notebooks.END:
            inside = False
        elif not inside:
            current.append(line)
    out.append("".join(current).rstrip("\n") + "\n")
    return out


def head(chapter: str, name: str) -> str:
    """The given text of exercise ``name``'s cell before the student's first line (signature, docstring, checks)."""
    return pieces(chapter, name)[0]


def tail(chapter: str, name: str) -> str:
    """The given text of exercise ``name``'s cell after the student's last line (e.g. the rest of a class)."""
    return pieces(chapter, name)[-1]


def before(piece: str, line: str) -> str:
    """``piece`` up to the first line that starts with ``line`` (e.g. ``"    def forward"``): a given part of the
    stub, kept, before what a rewrite writes whole. Raises ValueError when the stub has no such line (it changed)."""
    lines = piece.splitlines(keepends=True)
    for n, text in enumerate(lines):
        if text.startswith(line):
            return "".join(lines[:n])
    raise ValueError(f"the stub has no line starting with {line!r}: the rewrites built on it need updating")
