"""The bug and alternative catalogues' figures: ``python -m autograder catalogue``.

Per chapter, how many catalogued bugs (``MUTANTS``) some check catches, and how many catalogued valid
alternatives (``ALTERNATIVES``) get full marks (every visible and hidden check passes), then the totals. The
output is a Markdown table. ``tests/test_checks.py`` checks every case on its own and compares the README's copy
with the table those cases imply (:func:`sizes`), so a stale copy fails fast.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable

from . import notebooks
from .core import check_failures


def figures(chapter: str) -> tuple[int, int, int, int]:
    """(bugs caught, bugs, alternatives passed, alternatives) of ``chapter``."""
    checks, module = notebooks.checks_module(chapter), notebooks.solution_module(chapter)
    mutants, alternatives = checks.MUTANTS, getattr(checks, "ALTERNATIVES", [])
    with contextlib.redirect_stdout(io.StringIO()):
        caught = sum(bool(check_failures(checks.EXERCISES, m, module)) for m in mutants)
        passed = sum(not check_failures(checks.EXERCISES, a, module) for a in alternatives)
    return caught, len(mutants), passed, len(alternatives)


def sizes(chapter: str) -> tuple[int, int, int, int]:
    """The figures of ``chapter`` when every bug is caught and every alternative passes (what
    ``tests/test_checks.py`` asserts case by case), from the catalogue's sizes alone."""
    checks = notebooks.checks_module(chapter)
    bugs, alternatives = len(checks.MUTANTS), len(getattr(checks, "ALTERNATIVES", []))
    return bugs, bugs, alternatives, alternatives


def table(chapters: list[str] | None = None, figures_of: Callable[[str], tuple[int, int, int, int]] = figures) -> str:
    """The Markdown table of :func:`figures` for ``chapters`` (default: all), with a total row."""
    rows = ["| chapter | bugs caught | valid alternatives passed |", "|---|---|---|"]
    total = [0, 0, 0, 0]
    for chapter in chapters or notebooks.chapters():
        f = figures_of(chapter)
        total = [t + x for t, x in zip(total, f)]
        rows.append(f"| {chapter} | {f[0]} / {f[1]} | {f[2]} / {f[3]} |")
    rows.append(f"| **total** | {total[0]} / {total[1]} | {total[2]} / {total[3]} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit status 1 when a bug escapes or an alternative is rejected."""
    parser = argparse.ArgumentParser(prog="python -m autograder catalogue", description=__doc__)
    parser.add_argument("chapters", nargs="*", help="chapter stems (default: all)")
    args = parser.parse_args(argv)
    text = table(args.chapters or None)
    print(text)
    total = text.splitlines()[-1].replace("*", "").split("|")
    ok = all(a.split("/")[0].strip() == a.split("/")[1].strip() for a in total[2:4])
    return 0 if ok else 1
