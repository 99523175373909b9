"""The machinery every chapter's checks share, in one import (the parts live in ``autograder/checks/``).

A chapter's check module (``autograder/chNN_<name>.py``) declares its exercises::

    EXERCISES = Exercises("ch03_self_attention")

    @EXERCISES.check("causal_mask", points=2)
    def _causal_mask_shape(causal_mask): ...

    @EXERCISES.check("causal_mask", hidden=True)
    def _causal_mask_rectangular(causal_mask): ...

A *check* is a function of the student's object (a function or a class) that returns nothing when the object
behaves and raises :class:`CheckFailed` with a student-readable explanation when it does not. It touches the object
only through :func:`call` and :func:`observe`, so the same check runs in three modes: live in the student's notebook
(the visible checks in the test cell after each exercise), recording in the grading kernel, and replaying in the
grading worker, whose verdict is the grade (``grading/judge.py``). pytest runs the checks on the reference solution
and on the catalogue of plausible student bugs and of correct alternatives (``catalogue/``, beside ``tests/``).

Messages of hidden checks never contain reference values: they say what property was violated, not what the
right numbers are.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any, ClassVar

from .checks.compare import (
    CheckFailed,
    default_tolerance,
    expect_close,
    expect_equal,
    expect_shape,
    expect_true,
    rng,
)
from .checks.device import DeviceMismatch
from .checks.exercises import Exercise, Exercises, crash_message, dependencies
from .checks.inputs import updated_in_place
from .checks.limits import ExerciseTimeout, exercise_time_limit, time_limit, timeout_message
from .checks.properties import expect_dropout_modes, expect_half_precision, expect_seeded
from .checks.trace import _RECORDER, NotReplayable, call, observe, record, replay, student_line

__all__ = [
    "CheckFailed",
    "Exercises",
    "Exercise",
    "Mutant",
    "Alternative",
    "Rewrite",
    "check_failures",
    "crash_message",
    "default_tolerance",
    "dependencies",
    "expect_close",
    "expect_equal",
    "expect_shape",
    "expect_true",
    "expect_seeded",
    "expect_dropout_modes",
    "expect_half_precision",
    "exercise_time_limit",
    "call",
    "observe",
    "updated_in_place",
    "record",
    "replay",
    "rng",
    "student_line",
    "timeout_message",
    "NotReplayable",
    "DeviceMismatch",
    "ExerciseTimeout",
    "time_limit",
    "_RECORDER",
]


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
    idioms. ``python -m autograder catalogue`` counts these per exercise.
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
    import inspect

    source = textwrap.dedent(inspect.getsource(getattr(module, entry.target)))
    namespace = dict(vars(module))
    exec(compile(entry.apply(source), f"<{kind} {entry.name}>", "exec"), namespace)
    return namespace[entry.target]


def check_failures(exercises: Exercises, entry: Mutant | Alternative | Rewrite, module) -> list[str]:
    """Run every check (visible, then hidden) of ``entry.target`` on ``entry`` built from ``module``.

    Returns the failure messages: a caught mutant gives at least one, a valid alternative none. Used by
    ``tests/test_checks.py`` and ``python -m autograder catalogue``.
    """
    obj = entry.build(module)
    failures = []
    for hidden in (False, True):
        try:
            exercises.run(entry.target, obj, hidden=hidden, verbose=False)
        except CheckFailed as err:
            failures.append(str(err))
    return failures
