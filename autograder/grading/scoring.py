"""The scoring rule: nbgrader's points count only with the guard's passing records.

nbgrader scores a test cell by whether it raised. The notebook could make a test cell pass without the checks
passing (rebinding the checks, patching torch, ...), so the worker gives an exercise nbgrader's points only when
the in-kernel guard (``guard.py``) sent a signed, passing verdict record for it, and zero for the whole submission
when any record reports a change to the grading machinery. This module is that rule, on plain data: the records
the worker verified, nbgrader's scores and the check messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable


@dataclasses.dataclass
class Scored:
    """The outcome of the rule: ``status`` "graded" or "integrity"; ``scores`` exercise -> points; ``reasons`` and
    ``warnings`` to add to the result (in that order after the worker's own)."""

    status: str
    scores: dict[str, float]
    reasons: list[str]
    warnings: list[str]


def blocked_warnings(records: Iterable[dict]) -> list[str]:
    """One warning per kind of action the guard refused (its "blocked" records), for the instructor."""
    blocked = sorted({f"{r['what']} ({r['event']})" for r in records if r.get("type") == "blocked"})
    return [f"blocked: {b}" for b in blocked]


def score(nbgrader_scores: dict[str, float], records: list[dict], forged: int, reasons: list[str]) -> Scored:
    """Apply the rule.

    ``nbgrader_scores``: exercise -> nbgrader's points; ``records``: the guard's verified records (dicts with
    ``type`` "armed", "blocked" or "verdict"; a verdict has ``exercise``, ``passed``, ``failures``,
    ``violations``, ``threads``); ``forged``: how many connections carried no correctly signed record;
    ``reasons``: one line per failed test cell (``results.failure_reasons``), kept first.

    Every record counts: a violation in any of them, a forged record or a guard that never armed zeroes the
    submission (status "integrity"); an exercise keeps nbgrader's points only when it has at least one verdict
    and every verdict of it passed (verdicts the notebook ran again itself are flagged for review).
    """
    reasons, warnings = list(reasons), []
    verdicts = [r for r in records if r.get("type") == "verdict"]
    by_exercise: dict[str, list[dict]] = {}
    for r in verdicts:
        by_exercise.setdefault(r["exercise"], []).append(r)
    violations = sorted({v for r in verdicts for v in r["violations"]})
    reruns = sorted(n for n, rs in by_exercise.items() if len(rs) > 1)
    if reruns:
        warnings.append(f"needs review: the notebook ran the grader's verdict itself ({', '.join(reruns)})")
    scores = {}
    for name, points in nbgrader_scores.items():
        runs = by_exercise.get(name, [])
        failed = [r for r in runs if not r["passed"]]
        if points > 0 and (not runs or failed):
            why = (
                "no signed verdict from the grader's own checks"
                if not runs
                else "; ".join(failed[0]["failures"] + failed[0]["violations"])[:200]
            )
            reasons.append(f"{name}: points withheld — {why}")
            points = 0.0
        scores[name] = points
    status = "graded"
    if forged:
        violations.append(f"{forged} forged or corrupted guard record(s)")
    if any(r.get("threads", 0) > 0 for r in verdicts):
        warnings.append("needs review: the notebook's own threads were running while the checks ran")
    if not any(r.get("type") == "armed" for r in records):
        violations.append("the grading guard did not start")
    if violations:
        scores = {n: 0.0 for n in scores}
        reasons.insert(0, "integrity: " + "; ".join(violations)[:300])
        status = "integrity"
    return Scored(status, scores, reasons, warnings)
