"""The per-exercise time limit (set while grading: one endless loop costs only its own exercise)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from ..wording import Message, say


class ExerciseTimeout(BaseException):
    """An exercise's checks ran longer than the grader's time limit: a ``BaseException`` (an answer's ``except
    Exception`` does not swallow it) that rings again every half second (nor does a bare ``except:`` in a loop)."""


def exercise_time_limit() -> float | None:
    """Seconds one exercise's check run may take: ``AUTOGRADER_EXERCISE_TIMEOUT`` (set by the grader), else None."""
    try:
        seconds = float(os.environ.get("AUTOGRADER_EXERCISE_TIMEOUT", ""))
    except ValueError:
        return None
    return seconds if seconds > 0 else None


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`ExerciseTimeout` in the block once it has run ``seconds``, and every half second after (no
    limit for None, off the main thread, or where there is no ``SIGALRM``). Yields a list whose first item turns
    True at the first ring: code that swallowed the exception can still tell."""
    expired = [False]
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield expired
        return
    armed = [True]

    def ring(signum, frame):
        if armed[0]:
            expired[0] = True
            raise ExerciseTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield expired
    finally:
        for _ in range(100):  # a last ring may interrupt the disarming itself: disarm again
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except ExerciseTimeout:
                continue


def timeout_message(name: str, seconds: float) -> Message:
    """The student's explanation of a time-out in exercise ``name``'s checks."""
    return say("timeout", name=name, seconds=f"{seconds:g}")
