"""The kinds of catalogue entry and how one is run through a chapter's checks.

A :class:`Mutant` is a plausible student bug, written as text edits of the reference solution's source; some check
must catch it. An :class:`Alternative` is a correct answer written as such edits, a :class:`Rewrite` one written
from scratch; both must get full marks. :func:`check_failures` runs an entry through its exercise's checks. Only the
checkout's tests and figures use them (the course package holds checks only).
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from typing import Any, ClassVar

from autograder.core import CheckFailed, Exercises

__all__ = ["Mutant", "Alternative", "Rewrite", "check_failures"]


@dataclasses.dataclass(frozen=True)
class _SourceEdit:
    """Text edits of the reference solution's source: the shared form of :class:`Mutant` and :class:`Alternative`.

    ``target`` names the exercise (function or class) whose source is edited; every ``old`` must occur in
    that source (so an entry that no longer applies fails loudly instead of silently testing nothing).
    """

    name: str
    target: str
    edits: tuple[tuple[str, str], ...]
    description: str
    kind: ClassVar[str] = "edit"  # how messages and the edited code's file name call it

    def build(self, module) -> Any:
        """Return the edited object: the target's source, edited, executed in a copy of ``module``'s namespace."""
        return _build_edited(self, module, self.kind)

    def apply(self, source: str) -> str:
        for old, new in self.edits:
            if old not in source:
                raise ValueError(f"{self.kind} {self.name!r}: {old!r} not found in the source of {self.target}")
            source = source.replace(old, new)
        return source


class Mutant(_SourceEdit):
    """A plausible student bug, written as a text edit of the reference solution's source (see :class:`_SourceEdit`);
    some check must catch it."""

    kind = "mutant"


class Alternative(_SourceEdit):
    """A valid way to write an exercise that differs from the reference: it must get full marks.

    Written like a :class:`Mutant` (text edits of the reference source of ``target``; every ``old`` must occur),
    e.g. ``torch.einsum`` instead of ``@``, ``torch.where`` instead of ``masked_fill``, float64 inside. The
    catalogue of alternatives keeps the checks from rejecting correct answers that merely look different.
    """

    kind = "alternative"


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """A correct answer written from scratch, not as an edit of the reference: it must get full marks.

    ``source`` is the whole exercise cell as a student would leave it (the function or class ``target``, with any
    helpers it defines); it is run in the notebook's namespace (the chapter's solution module stands in for it in
    process, ``tests/test_alternatives_graded.py`` puts it in a real notebook). Write it from the page and the
    notebook's instructions, not from the reference: another decomposition, loops instead of vectorised code,
    ``einsum`` instead of ``@``, documented defaults relied upon, another but equivalent masking, device-careful
    idioms. ``python -m catalogue`` counts these per exercise.
    """

    name: str
    target: str
    source: str
    description: str
    kind: ClassVar[str] = "rewrite"

    def apply(self, source: str) -> str:
        """The answer's cell text (``source``, the reference cell, is replaced whole)."""
        return textwrap.dedent(self.source).strip("\n") + "\n"

    def build(self, module) -> Any:
        namespace = dict(vars(module))
        exec(compile(self.apply(""), f"<rewrite {self.name}>", "exec"), namespace)
        return namespace[self.target]


def _build_edited(entry: _SourceEdit, module, kind: str) -> Any:
    source = textwrap.dedent(inspect.getsource(getattr(module, entry.target)))
    namespace = dict(vars(module))
    exec(compile(entry.apply(source), f"<{kind} {entry.name}>", "exec"), namespace)
    return namespace[entry.target]


def check_failures(exercises: Exercises, entry: Mutant | Alternative | Rewrite, module) -> list[str]:
    """Run every check (visible, then hidden) of ``entry.target`` on ``entry`` built from ``module``.

    Returns the failure messages: a caught mutant gives at least one, a valid alternative none. Used by
    ``tests/test_checks.py`` and ``python -m catalogue``.
    """
    obj = entry.build(module)
    failures = []
    for hidden in (False, True):
        try:
            exercises.run(entry.target, obj, hidden=hidden, verbose=False)
        except CheckFailed as err:
            failures.append(str(err))
    return failures
