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
from .checks.properties import expect_dropout_modes, expect_half_precision, expect_seeded, largest_tensor
from .checks.trace import _RECORDER, NotReplayable, call, observe, record, replay, student_line

__all__ = [
    "CheckFailed",
    "Exercises",
    "Exercise",
    "crash_message",
    "default_tolerance",
    "dependencies",
    "expect_close",
    "expect_equal",
    "expect_shape",
    "expect_true",
    "expect_seeded",
    "largest_tensor",
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
