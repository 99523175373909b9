"""The verdict, judged in the grading worker (a process the student's code never runs in).

In the kernel the recorder (``guard.py``) runs each exercise's checks and records every call into the student's
code: what it returned (values, shapes, dtypes, gradients' presence), the error it raised, what it did to the
checks' own arguments (``autograder.core.record``). Here the same checks, imported from the course in this
process, run again on that record (``autograder.core.replay``): their inputs, the oracle, the comparisons and
tolerances are computed in this process, so nothing the submission did in the kernel (to torch's operators, the
checks or the recorder) takes part. This is the only verdict: an exercise earns its points when every check
judged here passed. Every check replays (``tests/test_replay.py``): a check looks at the answer only through
``call`` and ``observe``.
"""

from __future__ import annotations

import importlib
import io
import warnings
from collections.abc import Iterable
from contextlib import redirect_stderr, redirect_stdout

from .channel import decode_traces


def _checks_of(chapter: str):
    return importlib.import_module(f"autograder.{chapter}").EXERCISES


def _label(fn) -> str:
    """A check's label as the student reads it: its docstring's first sentence (a wrapped line joined)."""
    doc = " ".join((fn.__doc__ or fn.__name__).split())
    return doc


def _judge_run(name: str, fns: list, run: object, details: list[str] | None) -> list[str]:
    """One run of an exercise's checks replayed: the first lines of its failures (``details`` gets the full
    messages, as the student reads them, when given)."""
    from autograder import core

    if not isinstance(run, list) or len(run) > len(fns):
        return [f"{name}: the record of its checks does not fit them"]
    failures: list[str] = []
    for fn, trace in zip(fns, run):
        with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            outcome, message = core.replay(fn, trace)
        if outcome == "failed":
            failures.append(message.splitlines()[0][:200])
            if details is not None:
                details.append(f"✘ {_label(fn)}\n" + "\n".join("    " + ln for ln in message[:1500].splitlines()))
        elif outcome == "unjudged":
            failures.append(f"{name}: a check's record could not be judged by the grader ({message[:120]})")
    if len(run) < len(fns):  # the kernel stopped early (a time-out): its own failure says why
        failures.append(f"{name}: not every check ran")
    return failures


def judge(chapter: str, records: Iterable[dict]) -> list[dict]:
    """The records, each verdict record judged here: ``passed`` is this process's verdict, ``failures`` its first
    failures (or the kernel's, when the kernel could not run the checks at all), ``details`` the student-readable
    messages of the first run's failed checks, ``judged`` the number of checks judged."""
    exercises = _checks_of(chapter)
    out = []
    for rec in records:
        if rec.get("type") != "verdict":
            out.append(rec)
            continue
        rec = dict(rec, passed=False, judged=0, details=[])
        name = str(rec.get("exercise"))
        try:
            fns = list(exercises[name].visible) + list(exercises[name].hidden)
        except (KeyError, TypeError):
            out.append(rec)
            continue
        try:
            traces = decode_traces(rec["traces"]) if rec.get("traces") else None
            why = "no record of the checks' calls"
        except Exception as err:
            traces, why = None, type(err).__name__
        if not isinstance(traces, list) or not traces or len(traces) > 2:
            if not rec.get("failures"):  # the kernel's own reason (not defined, a time-out ...) says it better
                rec["failures"] = [f"{name}: the grader could not read the record of its checks ({why})"]
            out.append(rec)
            continue
        details: list[str] = []
        runs = [_judge_run(name, fns, run, details if r == 0 else None) for r, run in enumerate(traces)]
        # as in the notebook: with the course's versions of the exercises it calls first, then with the student's own
        passed = not runs[0] or (bool(rec.get("deps")) and len(runs) == 2 and not runs[1])
        rec.update(passed=passed, judged=len(fns) * len(runs), details=details[:6])
        rec["failures"] = [] if passed else (runs[0] or runs[-1])[:3]
        out.append(rec)
    return out
