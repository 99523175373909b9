"""The verdict, judged in the grading worker (a process the student's code never runs in): the chapter's checks run
again on the kernel's signed record of their calls (``EXERCISES.replay``, ``autograder/checks/exercises.py``), with
this process's inputs, oracle and tolerances. This is the only verdict (docs/grading-design.md, "The verdict", 4);
every check replays (``tests/test_replay.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from ..wording import Said, from_data, say
from .channel import decode_traces


def _reason(data: object) -> Said:
    """One of the recorder's reasons as it sent it (a message as data; a plain string, shown as it is), read back;
    "?" when it is neither."""
    try:
        return from_data(data) if isinstance(data, (dict, str)) else "?"
    except Exception:
        return "?"


def judge(chapter: str, records: Iterable[dict]) -> list[dict]:
    """The records, each verdict record judged here: ``passed`` is this process's verdict, ``failures`` why it
    failed (the recorder's own reasons first: not defined, a time-out …; then this process's first failures),
    ``details`` the messages of the first run's failed checks, ``judged`` the number of checks judged."""
    exercises = importlib.import_module(f"autograder.{chapter}").EXERCISES
    names = {ex.name: len(ex.visible) + len(ex.hidden) for ex in exercises}
    out = []
    for rec in records:
        if rec.get("type") != "verdict":
            out.append(rec)
            continue
        given = rec.get("reasons")
        reasons: list[Said] = [_reason(r) for r in given[:3]] if isinstance(given, list) else []
        rec = dict(rec, passed=False, judged=0, details=[], failures=reasons)
        name = str(rec.get("exercise"))
        try:
            traces = decode_traces(rec["traces"]) if rec.get("traces") else None
            why = "no record of the checks' calls"
        except Exception as err:
            traces, why = None, type(err).__name__
        if name not in names or not isinstance(traces, list) or not traces:
            if not reasons:  # the recorder's own reason (not defined, a time-out ...) says it better
                rec["failures"] = [say("record unreadable why", name=name, why=why)]
            out.append(rec)
            continue
        passed, found, details = exercises.replay(name, traces, bool(rec.get("deps")))
        failures: list[Said] = [] if passed else (reasons + list(found))[:3]
        rec.update(passed=passed, failures=failures, details=details, judged=names[name] * len(traces))
        out.append(rec)
    return out
