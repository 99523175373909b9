"""Correct answers written from scratch for every exercise (``autograder.core.Rewrite``), one module per chapter.

They live in the tests, not in the course package: a package that students install, and that the grading kernel
sees, must not hold working answers (a submission could ``exec`` one). ``rewrites(chapter)`` returns a chapter's
list (empty where the checkout has none, e.g. an installed package)."""

from __future__ import annotations

import importlib


def rewrites(chapter: str) -> list:
    """The ``REWRITES`` of ``tests/rewrites/<chapter>.py``."""
    try:
        return list(importlib.import_module(f"tests.rewrites.{chapter}").REWRITES)
    except ModuleNotFoundError:
        return []
