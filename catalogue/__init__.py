"""The checks' catalogue, kept in the checkout beside ``tests/``, never in the package students install.

One module per chapter (``catalogue/<chapter>.py``) holds what the chapter's checks are tested against:

* ``MUTANTS``: plausible student bugs (:class:`~catalogue.entries.Mutant`), each caught by some check;
* ``ALTERNATIVES``: correct answers written as edits of the reference (:class:`~catalogue.entries.Alternative`);
* ``REWRITES``: correct answers written from scratch, whole exercise cells (:class:`~catalogue.entries.Rewrite`),
  built on the exercise's stub as the release notebook gives it (:mod:`catalogue.stubs`).

Every alternative and rewrite must get full marks (``tests/test_checks.py``, ``tests/test_alternatives_graded.py``).
They stay out of the package (``pyproject.toml`` packages ``autograder`` and ``solutions`` only): a package that
students install, and that the grading kernel sees, must not hold working answers (a submission could ``exec`` one),
nor carry a test suite's data to every Colab. ``python -m catalogue`` prints the catalogue's figures (the README's
table; :mod:`catalogue.figures`).
"""

from __future__ import annotations

import importlib
import types


def of(chapter: str) -> types.ModuleType | None:
    """The module ``catalogue.<chapter>``, or None where the checkout has none (e.g. a chapter just scaffolded)."""
    try:
        return importlib.import_module(f"catalogue.{chapter}")
    except ModuleNotFoundError as err:
        if err.name != f"catalogue.{chapter}":
            raise
        return None


def mutants(chapter: str) -> list:
    """The chapter's catalogued bugs (``MUTANTS``)."""
    return list(getattr(of(chapter), "MUTANTS", []))


def alternatives(chapter: str) -> list:
    """The chapter's catalogued correct answers written as edits of the reference (``ALTERNATIVES``)."""
    return list(getattr(of(chapter), "ALTERNATIVES", []))


def rewrites(chapter: str) -> list:
    """The chapter's catalogued correct answers written from scratch (``REWRITES``)."""
    return list(getattr(of(chapter), "REWRITES", []))
