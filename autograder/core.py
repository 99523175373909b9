"""What a chapter's check module (``autograder/chNN_<name>.py``) imports, in one place (the parts live in
``autograder/checks/``)::

    EXERCISES = Exercises("ch03_self_attention")

    @EXERCISES.check("causal_mask", points=2)
    def _causal_mask_shape(causal_mask): ...

A check returns nothing when the student's object behaves and raises :class:`CheckFailed` when it does not; it
touches the object only through :func:`call` and :func:`observe`, so that it runs live in the notebook, recording
in the grading kernel and replaying in the grading worker (docs/grading-design.md). A hidden check's message never
holds reference values.
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
