"""One uploaded file's record (:class:`Submission`), which every step of the line (``batch.py``) reads and returns
into, from collection to its row in grades.csv (``report.row``); and its outcome, the result file
``out/results/<submission>.json`` (:class:`Result`, written last, so that a rerun skips only what is done).
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

from ..wording import Said, from_data, say, to_data
from . import lms


@dataclasses.dataclass
class Result:
    """One submission's outcome, as its result file holds it. ``status``: "graded", "error" (not gradeable: zero) or
    "integrity" (the grading machinery was changed: zero); ``log``/``trace``: for the instructor, never in the
    feedback; ``reason``: the English of ``reasons`` joined (grades.csv, the console). What the grader says to the
    student (``reasons``, ``warnings``, ``details``) is messages, rendered where shown, held as data in the file."""

    submission: str
    sha256: str
    student_id: str
    status: str
    reason: str
    scores: dict[str, float] = dataclasses.field(default_factory=dict)  # exercise -> points (empty: not graded)
    warnings: list[Said] = dataclasses.field(default_factory=list)
    log: str = ""
    trace: str = ""
    # how many checks the worker judged again outside the kernel, from their records ("outside")
    judged: dict[str, int] = dataclasses.field(default_factory=dict)
    # exercise -> the failed checks' messages as the worker computed them (what the feedback's test cells show)
    details: dict[str, list[Said]] = dataclasses.field(default_factory=dict)
    reasons: list[Said] = dataclasses.field(default_factory=list, compare=False)

    @property
    def score(self) -> float:
        return sum(self.scores.values())


_OPTIONAL = ("log", "trace", "judged", "details", "reasons")


def result_fields(result: Result) -> dict:
    """``result`` as its file holds it (empty optional fields left out; messages as data)."""
    said = {
        "warnings": [to_data(w) for w in result.warnings],
        "details": {name: [to_data(d) for d in ds] for name, ds in result.details.items()},
        "reasons": [to_data(r) for r in result.reasons],
    }
    fields = {f.name: said.get(f.name, getattr(result, f.name)) for f in dataclasses.fields(Result)}
    return {k: v for k, v in fields.items() if (v != "" and v != {} and v != []) or k not in _OPTIONAL}


def result_from_fields(data: dict) -> Result:
    """The result whose fields are ``data`` (:func:`result_fields`' inverse: its messages read back)."""
    data = dict(data)
    for k in ("warnings", "reasons"):
        if isinstance(data.get(k), list):
            data[k] = [from_data(w) for w in data[k]]
    if isinstance(data.get("details"), dict):
        data["details"] = {n: [from_data(d) for d in ds] for n, ds in data["details"].items() if isinstance(ds, list)}
    return Result(**data)


def write_result(path: pathlib.Path, result: Result) -> None:
    """Write ``result`` to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result_fields(result), indent=1, sort_keys=True))
    tmp.replace(path)


def read_result(path: pathlib.Path) -> Result:
    """The result at ``path``. Raises OSError or ValueError for a missing or unreadable file."""
    data = json.loads(pathlib.Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a result file")
    names = {f.name for f in dataclasses.fields(Result)}
    try:
        return result_from_fields({k: v for k, v in data.items() if k in names})
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path}: not a result file ({exc})") from None


@dataclasses.dataclass
class Submission:
    """One uploaded file of the batch. Collection sets the first fields; each later step sets its own."""

    path: pathlib.Path
    label: str  # its name in grades.csv
    student_id: str  # its id in the gradebook and the feedback's file name
    sha256: str  # of the file as uploaded
    who: lms.SubmissionName  # whose it is, from the LMS's download name (read once, at collection)
    uploaded_at: float  # the file's time in the download (a zip entry's time; lms.newer reads it)
    result_file: pathlib.Path  # out/results/<label>.json
    kind: str = ""  # what the file is (canonical.file_kind: "notebook", "PDF" …; "unreadable file"), read once
    zero: Said = ""  # why it gets a zero whatever its run would give (not a notebook, another chapter's), or ""
    superseded_by: str = ""  # the file the LMS file carries for this student instead of this one (its page says so)
    # the LMS file's choice, made at collection (lms.choose): the report reads it, never chooses again
    in_lms_file: bool = True  # the student's row in the LMS file, or a plain file of a batch without LMS names
    lms_note: str = ""  # why the LMS file does not carry it (grades.csv and the summary say so), or ""
    stray: str = ""  # a file that cannot stand for its student (lms.fits): its reason and what to do, or ""
    edition: str = "en"  # the course edition the file was made from ("zh": notebooks/zh/), its feedback's language
    graded_before: bool = False  # an earlier run of the batch graded it (its result file: same contents, same id)
    # canonicalise
    warnings: list[Said] = dataclasses.field(default_factory=list)  # from canonicalising the file
    unreadable: bool = False  # the file itself could not be read as a notebook (the feedback says: download again)
    # execute and judge
    outcome: Result | None = None  # the run's result (its warnings: the run's own)
    graded: str | None = None  # the graded notebook's text (None: not run to the end)
    same_as: str = ""  # the label of the identical submission whose run this one shares

    # what lms.choose reads of a row, known at collection (before the run)
    @property
    def submission(self) -> str:
        return self.label

    @property
    def lms(self) -> str:
        return self.who.lms

    @property
    def lms_id(self) -> str:
        return self.who.lms_id

    @property
    def late(self) -> bool | None:
        return self.who.late

    @property
    def reason(self) -> Said:
        return self.zero

    def result(self) -> Result:
        """The record's result file: the run's outcome under this file's identity, its warnings the
        canonicalisation's, then the run's, then (for a shared run) which file it shares it with."""
        assert self.outcome is not None
        note: list[Said] = [say("identical code", other=self.same_as)] if self.same_as else []
        return dataclasses.replace(
            self.outcome,
            submission=self.label,
            sha256=self.sha256,
            student_id=self.student_id,
            warnings=self.warnings + self.outcome.warnings + note,
        )
