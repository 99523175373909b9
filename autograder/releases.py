"""The release notebooks (what students open) and a chapter as the grader reads it once (:func:`read`).

Needs only ``nbformat`` (no nbgrader, no grading machinery), so the student install's self-check uses it too. The
release notebooks are the checkout's ``notebooks/chNN_name.ipynb`` (the Chinese edition's in ``notebooks/zh/``), or
in an installed package their copy ``autograder/_release/`` (``pyproject.toml``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import pathlib
import types

import nbformat

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
CHECKOUT_DIR = PACKAGE_DIR.parent / "notebooks"
PACKAGED_DIR = PACKAGE_DIR / "_release"

# The kernel every course notebook names (the grader replaces any other with this one).
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
# What an exercise cell of a release notebook holds in place of the student's answer (nbgrader's code stub).
CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
# Beside the release notebooks: per chapter, the digests of every released version of each test cell (a notebook
# downloaded before a test cell changed has an earlier one, which is no edit; written by canonical.history_text).
HISTORY_DIR = "test_history"


def checks_module(chapter: str) -> types.ModuleType:
    """The checks of ``chapter``: the module ``autograder.<chapter>`` (``EXERCISES``)."""
    return importlib.import_module(f"autograder.{chapter}")


def release_dir() -> pathlib.Path:
    """The folder that holds the release notebooks: the checkout's ``notebooks/``, else the packaged copy."""
    for folder in (CHECKOUT_DIR, PACKAGED_DIR):
        if any(folder.glob("ch[0-9][0-9]_*.ipynb")):
            return folder
    raise FileNotFoundError(
        f"no release notebooks in {CHECKOUT_DIR} or {PACKAGED_DIR}: the course package is incomplete; reinstall it"
    )


def chapters() -> list[str]:
    """Chapter stems that have a release notebook, in course order."""
    return sorted(p.stem for p in release_dir().glob("ch[0-9][0-9]_*.ipynb"))


@functools.cache
def _release_text(chapter: str, edition: str = "en") -> str:
    folder = release_dir() if edition == "en" else release_dir() / edition
    path = folder / f"{chapter}.ipynb"
    if not path.is_file():
        if edition != "en" and chapter in chapters():
            raise ValueError(f"{chapter} has no release notebook in the {edition!r} edition ({path})")
        raise ValueError(f"unknown chapter {chapter!r}; the chapters are: {', '.join(chapters())}")
    return path.read_text(encoding="utf-8")


def release_notebook(chapter: str, edition: str = "en") -> nbformat.NotebookNode:
    """The release notebook of ``chapter`` (a fresh copy each call) in ``edition`` ("en", or "zh": the Chinese
    edition's, ``zh/<chapter>.ipynb``). Raises ValueError for an unknown chapter or one without that edition."""
    return nbformat.reads(_release_text(chapter, edition), as_version=4)


@dataclasses.dataclass(frozen=True)
class Chapter:
    """A chapter as the grader needs it, read once (:func:`read`). The notebooks are shared: a step that changes
    one works on its own copy."""

    name: str  # "ch03_self_attention"
    exercises: tuple  # the checks module's EXERCISES, in notebook order
    points: dict[str, int]  # exercise -> its points
    checks: int  # the exercises' checks, visible and hidden
    release: nbformat.NotebookNode  # the English release: every submission is canonicalised against it, cell for cell
    notebooks: dict[str, nbformat.NotebookNode]  # edition -> its release notebook ("en": ``release``)
    tests: dict[str, dict[str, str]]  # edition -> exercise -> its test cell's source (hidden region included)
    history: dict[str, frozenset[str]]  # test grade id -> digests of its released versions (:func:`test_history`)


def read(chapter: str) -> Chapter:
    """``chapter`` read once (:class:`Chapter`). Raises ValueError for an unknown chapter."""
    exercises = tuple(checks_module(chapter).EXERCISES)
    points = {ex.name: ex.points for ex in exercises}
    notebooks = {"en": release_notebook(chapter)}
    try:
        notebooks["zh"] = release_notebook(chapter, "zh")
    except ValueError:  # the Chinese edition has no such notebook yet: its pages keep the English prose
        pass
    return Chapter(
        name=chapter,
        exercises=exercises,
        points=points,
        checks=sum(len(ex.visible) + len(ex.hidden) for ex in exercises),
        release=notebooks["en"],
        notebooks=notebooks,
        tests={ed: {n: test_source(n, p, ed) for n, p in points.items()} for ed in ("en", "zh")},
        history=test_history(chapter),
    )


@functools.cache
def test_history(chapter: str) -> dict[str, frozenset[str]]:
    """grade id -> digests (``canonical.test_digest``) of every released version of that test cell of ``chapter``
    (``HISTORY_DIR/<chapter>.json`` beside the release notebooks); empty without a history."""
    path = release_dir() / HISTORY_DIR / f"{chapter}.json"
    if not path.is_file():
        return {}
    return {k: frozenset(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}


def chapter_from_filename(name: str) -> str | None:
    """The chapter named in a file name (``smithjane_12_34_ch03_self_attention.ipynb``), or None."""
    known = chapters()
    for chapter in sorted(known, key=len, reverse=True):
        if chapter in name:
            return chapter
    return None


def exercise_names(chapter: str) -> list[str]:
    """The exercises of ``chapter`` (its checks' ``EXERCISES``), in notebook order."""
    return [ex.name for ex in checks_module(chapter).EXERCISES]


def points_text(points: float, edition: str = "en") -> str:
    """How many points, as a sentence says it: "1 point", "2 points", "0.5 points"; Chinese "1 分"."""
    if edition == "zh":
        return f"{points:g} 分"
    return f"{points:g} point" + ("" if points == 1 else "s")


def test_source(name: str, points: int, edition: str = "en") -> str:
    """The source of exercise ``name``'s test cell in the instructor notebook: the visible checks, then the hidden
    ones in nbgrader's hidden region (the release notebook shows the first part; feedback pages show it too). In
    the Chinese edition (``edition="zh"``) its comment is Chinese and the checks print Chinese
    (``EXERCISES.run(..., edition="zh")``)."""
    from .wording import Message

    comment = Message("check cell comment", name=name, points=points_text(points, edition)).render(edition)
    more = "" if edition == "en" else f', edition="{edition}"'
    return (
        f"{comment}\n"
        f'EXERCISES.run("{name}", {name}{more})\n'
        f"### BEGIN HIDDEN TESTS\n"
        f'EXERCISES.run("{name}", {name}, hidden=True{more})\n'
        f"### END HIDDEN TESTS"
    )


def released_test_source(name: str, points: int, edition: str = "en") -> str:
    """Exercise ``name``'s test cell as the release notebook of ``edition`` has it (the hidden region removed)."""
    return test_source(name, points, edition).split("### BEGIN HIDDEN TESTS")[0].rstrip("\n")
