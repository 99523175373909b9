"""The scoring rule, on plain data: an exercise's points come from the chapter's ``EXERCISES`` and the worker's
verdict alone (``judge.py``), never from whether the test cell raised; a forged record, a recorder that never armed
or verdicts against the protocol (:func:`order_violations`) make the whole submission an integrity zero. The design
and what it stops: docs/grading-design.md, "The verdict".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from ..wording import Said, join_messages, say
from .reasons import detail_reason, exercise_of, exercise_reason


@dataclasses.dataclass
class Scored:
    """The outcome of the rule: ``status`` "graded" or "integrity"; ``scores`` exercise -> points; ``reasons`` and
    ``warnings`` to add to the result (in that order after the worker's own)."""

    status: str
    scores: dict[str, float]
    reasons: list[Said]
    warnings: list[Said]


def blocked_warnings(records: Iterable[dict]) -> list[Said]:
    """One warning per kind of action the recorder refused (its "blocked" records: ``what`` a "guard: …" key)."""
    blocked = sorted({(r["what"], r["event"]) for r in records if r.get("type") == "blocked"})
    return [say("blocked", what=say(str(what)), event=event) for what, event in blocked]


def _seq(record: dict, position: int) -> int:
    """A record's place in the order the recorder signed it (``seq``; one without keeps its place in the list)."""
    seq = record.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else position


def order_violations(order: list[str], records: list[dict], numbers: bool = True) -> list[Said]:
    """Why the records break the protocol of one verdict per exercise, in the notebook's order (empty if they do
    not; docs/grading-design.md, "The verdict", 5): the numbers (``seq``) must be 0, 1, 2 … with none missing or
    repeated, and taken in that order each verdict's exercise must come later in ``order`` (``EXERCISES``) than the
    one before. ``numbers``: check the numbers too (not where records were dropped or forged, said already)."""
    numbered = [r for r in records if isinstance(r.get("seq"), int) and not isinstance(r.get("seq"), bool)]
    found: list[Said] = []
    if numbered and numbers:
        seqs = sorted(r["seq"] for r in numbered)
        if seqs != list(range(len(seqs))):
            found.append(say("records out of sequence"))
    place = {name: i for i, name in enumerate(order)}
    last, seen = -1, set()
    verdicts = sorted(
        ((_seq(r, i), i, r) for i, r in enumerate(records) if r.get("type") == "verdict"), key=lambda t: t[:2]
    )
    for _, _, r in verdicts:
        name = str(r.get("exercise"))
        at = place.get(name)
        if at is None:  # not an exercise of this chapter: earns nothing, and takes no place in the order
            continue
        if name in seen:
            found.append(say("verdict twice", name=name))
        elif at < last:
            found.append(say("verdict out of order", name=name, after=order[last]))
        seen.add(name)
        last = max(last, at)
    return list(dict.fromkeys(found))


def score(
    points: dict[str, int], records: list[dict], forged: int, reasons: Sequence[Said], overflow: int = 0
) -> Scored:
    """Apply the rule. ``points``: exercise -> its points, in the notebook's order; ``records``: the verified records
    (dicts with ``type`` "armed", "blocked" or "verdict" and ``seq``; a verdict judged by ``judge.judge``);
    ``forged``: how many connections carried no correctly signed record; ``reasons``: one per failed test cell
    (``reasons.failure_reasons``), kept for the exercises that earn nothing; ``overflow``: how many connections the
    record server dropped over its caps (``channel.MAX_RECORDS``, ``channel.MAX_TOTAL_BYTES``)."""
    warnings: list[Said] = []
    by_exercise: dict[str, list[dict]] = {}
    for r in records:
        if r.get("type") == "verdict":
            by_exercise.setdefault(r["exercise"], []).append(r)
    scores = {name: 0.0 for name in points}
    said = {exercise_of(r) for r in reasons}
    kept = [r for r in reasons if exercise_of(r) not in points]
    for name, top in points.items():
        runs = by_exercise.get(name, [])
        if runs and all(r.get("passed") for r in runs):
            scores[name] = float(top)
            continue
        kept += [r for r in reasons if exercise_of(r) == name]
        if name not in said:  # the test cell passed in the kernel (or never ran): the worker's reason
            failed = next((r for r in runs if not r.get("passed")), None)
            why: Said
            if failed is None:
                why = say("no verdict record")
            elif failed.get("details"):  # the first failed check as the worker judged it: its label and message
                why = join_messages([*(failed.get("reasons") or []), detail_reason(failed["details"][0])])
            else:
                why = join_messages(failed["failures"]) if failed.get("failures") else say("checks did not pass")
            kept.append(exercise_reason(name, why))
    violations: list[Said] = []
    if forged:
        violations.append(say("forged", n=forged))
    if overflow:
        violations.append(say("records over the cap", n=overflow))
    if not any(r.get("type") == "armed" for r in records):
        violations.append(say("recorder did not start"))
    violations += order_violations(list(points), records, numbers=not (forged or overflow))
    if any(r.get("threads", 0) > 0 for rs in by_exercise.values() for r in rs):
        warnings.append(say("needs review", what=say("own threads")))
    status = "graded"
    if violations:
        scores = {n: 0.0 for n in scores}
        kept.insert(0, say("integrity", violations=join_messages(violations)))
        status = "integrity"
    return Scored(status, scores, kept, warnings)
