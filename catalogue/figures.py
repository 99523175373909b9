"""The catalogue's figures: ``python -m catalogue``.

Per chapter, how many catalogued bugs (``MUTANTS``) some check catches, how many catalogued valid alternatives
(``ALTERNATIVES`` and ``REWRITES``) get full marks (every visible and hidden check passes), and how many of those are
whole answers written from scratch (:class:`~catalogue.entries.Rewrite`), with the fewest any exercise has; then the
totals. The
output is a Markdown table. ``tests/test_checks.py`` checks every case on its own and compares the README's copy
with the table those cases imply (:func:`sizes`), so a stale copy fails fast.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable

from autograder import notebooks
from catalogue import alternatives, mutants, rewrites
from catalogue.entries import Rewrite, check_failures
from scripts.build_notebooks import notebooks as builder

Figures = tuple[int, int, int, int, int, int]


def _rewrites(checks) -> tuple[int, int]:
    """(rewrites, the fewest rewrites of any one exercise) of a checks module's chapter."""
    per = {ex.name: 0 for ex in checks.EXERCISES}
    for entry in _rewrite_entries(checks.EXERCISES.chapter):
        per[entry.target] += 1
    return sum(per.values()), min(per.values(), default=0)


def _rewrite_entries(chapter: str) -> list[Rewrite]:
    """The chapter's rewrites (``REWRITES``)."""
    return [r for r in rewrites(chapter) if isinstance(r, Rewrite)]


def figures(chapter: str) -> Figures:
    """(bugs caught, bugs, alternatives passed, alternatives, rewrites among them, fewest rewrites per exercise) of
    ``chapter``."""
    checks, module = notebooks.checks_module(chapter), builder.solution_module(chapter)
    bugs = mutants(chapter)
    correct = [*alternatives(chapter), *_rewrite_entries(chapter)]
    with contextlib.redirect_stdout(io.StringIO()):
        caught = sum(bool(check_failures(checks.EXERCISES, m, module)) for m in bugs)
        passed = sum(not check_failures(checks.EXERCISES, a, module) for a in correct)
    return (caught, len(bugs), passed, len(correct), *_rewrites(checks))


def sizes(chapter: str) -> Figures:
    """The figures of ``chapter`` when every bug is caught and every alternative passes (what
    ``tests/test_checks.py`` asserts case by case), from the catalogue's sizes alone."""
    checks = notebooks.checks_module(chapter)
    bugs = len(mutants(chapter))
    correct = len(alternatives(chapter)) + len(_rewrite_entries(chapter))
    return (bugs, bugs, correct, correct, *_rewrites(checks))


def table(chapters: list[str] | None = None, figures_of: Callable[[str], Figures] = figures) -> str:
    """The Markdown table of :func:`figures` for ``chapters`` (default: all), with a total row."""
    rows = [
        "| chapter | bugs caught | valid alternatives passed | of them written from scratch | fewest per exercise |",
        "|---|---|---|---|---|",
    ]
    total = [0, 0, 0, 0, 0]
    fewest: list[int] = []
    for chapter in chapters or notebooks.chapters():
        f = figures_of(chapter)
        total = [t + x for t, x in zip(total, f[:5])]
        fewest.append(f[5])
        rows.append(f"| {chapter} | {f[0]} / {f[1]} | {f[2]} / {f[3]} | {f[4]} | {f[5]} |")
    rows.append(
        f"| **total** | {total[0]} / {total[1]} | {total[2]} / {total[3]} | {total[4]} | {min(fewest, default=0)} |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Print the table; exit status 1 when a bug escapes or an alternative is rejected."""
    parser = argparse.ArgumentParser(prog="python -m catalogue", description=__doc__)
    parser.add_argument("chapters", nargs="*", help="chapter stems (default: all)")
    args = parser.parse_args(argv)
    text = table(args.chapters or None)
    print(text)
    total = text.splitlines()[-1].replace("*", "").split("|")
    ok = all(a.split("/")[0].strip() == a.split("/")[1].strip() for a in total[2:4])
    return 0 if ok else 1
