"""The verdict judged outside the student's process (the grading worker; the student's code never runs here).

In the kernel the guard runs each exercise's checks and records every call into the student's code: what it
returned (values, shapes, dtypes, gradients' presence), the error it raised, what it did to the checks' own
arguments (``autograder.core.record``). The verdict record carries those traces. Here the same checks, imported from
the course in this process, run again on the traces (``autograder.core.replay``): their inputs, the oracle, the
comparisons and tolerances are computed in this process, so nothing the submission patched in the kernel (torch's
operators, the checks, the comparison helpers) takes part. An exercise keeps its points only when the kernel's
verdict passed *and* every check judged here passed.

A few checks read the student's object in ways a trace cannot stand for (``isinstance`` of an attribute, a backward
pass through the check's own inputs); a chapter names them in ``EXERCISES.judged_in_kernel`` and their verdict is
the kernel's alone, under the guard. ``tests/test_replay.py`` keeps that list true: every other check gives the same
verdict when replayed, on the reference and on every correct answer of the catalogue.
"""

from __future__ import annotations

import importlib
import io
import warnings
from collections.abc import Iterable
from contextlib import redirect_stderr, redirect_stdout


def _checks_of(chapter: str):
    return importlib.import_module(f"autograder.{chapter}").EXERCISES


def judge(chapter: str, records: Iterable[dict]) -> list[dict]:
    """The verdict records, each judged again here: ``passed`` becomes kernel-passed and worker-passed, the first
    failures are this process's messages, and ``judged_outside`` / ``judged_in_kernel`` count the checks."""
    from autograder import core

    from . import guard

    exercises = _checks_of(chapter)
    in_kernel = set(getattr(exercises, "judged_in_kernel", ()))
    out = []
    for rec in records:
        if rec.get("type") != "verdict":
            out.append(rec)
            continue
        rec = dict(rec)
        name = rec.get("exercise")
        try:
            ex = exercises[name]
        except KeyError:
            out.append(dict(rec, passed=False))
            continue
        fns = list(ex.visible) + list(ex.hidden)
        failures_by_run: list[list[str]] = []
        outside = kernel = 0
        try:
            traces = guard.decode_traces(rec["traces"]) if rec.get("traces") else None
        except Exception as err:
            traces, why = None, f"{type(err).__name__}"
        else:
            why = "no record of the checks' calls"
        if traces is None or not isinstance(traces, list) or not traces or len(traces) > 2:
            if rec.get("passed"):
                rec["failures"] = [f"{name}: the grader could not read the record of its checks ({why})"]
            out.append(dict(rec, passed=False, judged_outside=0, judged_in_kernel=0))
            continue
        details: list[str] = []  # the first run's failed checks, as the student reads them (computed here)
        for r, run in enumerate(traces):
            failures: list[str] = []
            if not isinstance(run, list) or len(run) > len(fns):
                failures.append(f"{name}: the record of its checks does not fit them")
            else:
                for fn, trace in zip(fns, run):
                    if fn.__name__ in in_kernel:
                        kernel += 1
                        continue
                    outside += 1
                    with warnings.catch_warnings(), redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
                        warnings.simplefilter("ignore")
                        outcome, message = core.replay(fn, trace)
                    if outcome == "failed":
                        failures.append(message.splitlines()[0][:200])
                        if r == 0:
                            label = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
                            details.append(
                                f"✘ {label}\n" + "\n".join("    " + ln for ln in message[:1500].splitlines())
                            )
                    elif outcome == "unjudged":
                        failures.append(f"{name}: a check's record could not be judged by the grader ({message[:120]})")
                if len(run) < len(fns):  # the kernel stopped early (a time-out): its own failure says why
                    failures.append(f"{name}: not every check ran")
            failures_by_run.append(failures)
        # as the kernel: with the course's versions of the exercises it calls first, then with the student's own
        passed_here = not failures_by_run[0] or (
            bool(rec.get("deps")) and len(failures_by_run) == 2 and not failures_by_run[1]
        )
        rec.update(judged_outside=outside, judged_in_kernel=kernel, details=details[:6])
        if not passed_here:
            if rec.get("passed"):
                rec["failures"] = failures_by_run[0][:3]
            rec["passed"] = False
        out.append(rec)
    return out
