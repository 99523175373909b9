"""What grading one submission produced: the result file and the student's feedback page, each with one writer.

* :class:`Result` — the per-submission result file ``out/results/<submission>.json`` (status, reason, scores,
  warnings), written by :func:`write_result` only: by the worker for a graded notebook, by the batch for a file
  that could not be read, a worker that ended without a result, and identical copies of a graded notebook;
* :func:`write_feedback` — ``out/feedback/<student>.html``, for a graded notebook (the student's code and the
  check messages; the hidden tests' source removed and a failed test's traceback cut to its message: hidden
  checks' messages never contain reference values; any output line showing a line of the hidden tests or of the
  reference solution removed, :func:`grader_secrets`) or for a file that could not be graded (zero and why).
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import pathlib
import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

import nbformat


@dataclasses.dataclass
class Result:
    """One submission's result file. ``status``: "graded", "error" (not gradeable: zero) or "integrity" (the grading
    machinery was changed: zero); ``scores``: exercise -> points (empty when not graded); ``log``/``trace``: the
    tail of nbgrader's log or the worker's traceback, for the instructor (never in the feedback)."""

    submission: str
    sha256: str
    student_id: str
    status: str
    reason: str
    scores: dict[str, float] = dataclasses.field(default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    log: str = ""
    trace: str = ""
    # checks judged again outside the kernel from their records ("outside") and by the kernel alone ("kernel")
    judged: dict[str, int] = dataclasses.field(default_factory=dict)
    # exercise -> the failed checks' messages as the worker computed them (what the feedback's test cells show)
    details: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def score(self) -> float:
        return sum(self.scores.values())


def write_result(path: pathlib.Path, result: Result) -> None:
    """Write ``result`` to ``path`` atomically (a reader never sees half a file)."""
    fields = {
        k: v
        for k, v in dataclasses.asdict(result).items()
        if (v != "" and v != {}) or k not in ("log", "trace", "judged", "details")
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(fields, indent=1, sort_keys=True))
    tmp.replace(path)


def read_result(path: pathlib.Path) -> Result:
    """The result at ``path``. Raises OSError or ValueError for a missing or unreadable file."""
    data = json.loads(pathlib.Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a result file")
    names = {f.name for f in dataclasses.fields(Result)}
    try:
        return Result(**{k: v for k, v in data.items() if k in names})
    except TypeError as exc:
        raise ValueError(f"{path}: not a result file ({exc})") from None


# ------------------------------------------------------------------------------------------------ feedback


OUTPUT_CHARS = 4000  # characters of a student cell's text output the feedback shows (the rest is cut)
OUTPUT_IMAGE_BYTES = 400_000  # an image output bigger than this is left out
_SHOWN_DATA = ("text/plain", "image/png", "image/jpeg")


def _cut(text: str) -> str:
    if len(text) <= OUTPUT_CHARS:
        return text
    return text[:OUTPUT_CHARS] + f"\n[… {len(text) - OUTPUT_CHARS} more characters cut by the grader]\n"


def _shown_output(out) -> Any:
    """What the feedback shows of one output of the student's own cell: text cut to a size, plain text and images
    only (HTML, JavaScript and other rich outputs are left out), an error as its one-line message."""
    kind = out.get("output_type")
    if kind == "stream":
        return nbformat.v4.new_output("stream", name=out.get("name", "stdout"), text=_cut(_text(out.get("text", ""))))
    if kind == "error":
        ename, evalue = str(out.get("ename", "")), _cut(str(out.get("evalue", "")))
        return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
    if kind in ("execute_result", "display_data"):
        data = {}
        for mime in _SHOWN_DATA:
            value = out.get("data", {}).get(mime)
            if value is None:
                continue
            value = _text(value)
            if mime == "text/plain":
                data[mime] = _cut(value)
            elif len(value) <= OUTPUT_IMAGE_BYTES:
                data[mime] = value
        if not data:
            return None
        if kind == "execute_result":
            return nbformat.v4.new_output("execute_result", data=data, execution_count=out.get("execution_count"))
        return nbformat.v4.new_output("display_data", data=data)
    return None


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _decision_text(
    name: str, scores: dict[str, float], points: dict[str, int], reasons: Iterable[str], details: Iterable[str] = ()
) -> str:
    """What a test cell shows in the feedback: the grader's decision for exercise ``name`` — its points, and either
    the failed checks' messages as the grading worker computed them outside the kernel (``details``) or the reasons
    — never the kernel's raw output."""
    got, top = scores.get(name, 0.0), points.get(name, 0)
    mine = [r.removeprefix(f"{name}: ") for r in reasons if r.startswith(f"{name}:")]
    head = f"{'✔' if got >= top and top else '✘'} {name}: {got:g} of {top:g} points"
    shown = list(details) if got < top and details else mine
    return head + "".join("\n" + "\n".join("  " + ln for ln in line.splitlines()) for line in shown) + "\n"


def decided_feedback(
    nb: nbformat.NotebookNode,
    scores: dict[str, float],
    points: dict[str, int],
    reasons: Iterable[str],
    secrets: Collection[str] = (),
    details: dict[str, list[str]] | None = None,
) -> nbformat.NotebookNode:
    """The feedback notebook, built from what the grader decides to show: every test cell's outputs are replaced by
    the grader's decision for its exercise (points and messages); the student's own cells keep their outputs cut to
    a size (:func:`_shown_output`); then :func:`sanitize_feedback`. Nothing the kernel printed in a test cell — where
    the hidden tests run — reaches the page, in whatever encoding."""
    from ..releases import test_source

    reasons = list(reasons)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and str(meta.get("grade_id", "")).startswith("test_"):
            name = meta["grade_id"].removeprefix("test_")
            # the test cell as the student's notebook has it (the grading notebook's is the guard's verdict alone)
            cell.source = test_source(name, points.get(name, 0))
            cell.outputs = [
                nbformat.v4.new_output(
                    "stream",
                    name="stdout",
                    text=_decision_text(name, scores, points, reasons, (details or {}).get(name, ())),
                )
            ]
        else:
            cell.outputs = [o for o in (_shown_output(out) for out in cell.get("outputs", [])) if o is not None]
    return sanitize_feedback(nb, secrets)


def sanitize_feedback(nb: nbformat.NotebookNode, secrets: Collection[str] = ()) -> nbformat.NotebookNode:
    """Remove hidden-test source, cut tracebacks of test cells down to the check's message, drop the self-check
    cell's output (it reports on the grader's copy, not on the student's file), drop the "Open in Colab" badge (an
    image from the network: a broken image offline, and no use in feedback), and remove every output line that
    contains one of ``secrets`` (:func:`grader_secrets`)."""
    pattern = re.compile(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown" and "colab-badge.svg" in c.source)]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "_autograder_guard" in cell.source:  # the grading guard's lines in the setup cell
            cell.source = "\n".join(ln for ln in cell.source.splitlines() if "_autograder_guard" not in ln)
        if "BEGIN HIDDEN TESTS" in cell.source:
            cell.source = pattern.sub("\n# (hidden tests run here)", cell.source)
        if "selfcheck_here(" in cell.source:  # the "Before you submit" cell cannot read the file while grading
            cell.outputs = []
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                out.traceback = [f"{out.ename}: {out.evalue}"]
            _strip_grader_code(out)
            redact_output(out, secrets)
    return nb


REDACTED = "[removed by the grader: text of the hidden tests or of the reference solution]"
_MIN_SECRET = 12  # characters (stripped): shorter lines ("return out", "x = 1") are too common to be a secret


def grader_secrets(graded: nbformat.NotebookNode, chapter: str) -> list[str]:
    """The lines no output in the feedback may show: every line of the hidden tests (the graded notebook's test
    cells) and of the chapter's reference solution (the solution regions of ``solutions/<chapter>.py``, where the
    course has it), stripped, at least 12 characters long, except lines that are also in the student's own cells
    (a student may print their own code)."""
    found: set[str] = set()
    own: set[str] = set()
    for cell in graded.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") or cell.id.startswith("inserted-") or "-part" in cell.id:
            own.update(ln.strip() for ln in cell.source.splitlines())
        for region in _HIDDEN_REGION.finditer(cell.source):
            found.update(ln.strip() for ln in region.group(0).splitlines()[1:])
    # the course's root and solution markers, as autograder.notebooks has them (importing it here would close an
    # import cycle: notebooks -> nbgrader_adapter -> report -> results)
    solution = pathlib.Path(__file__).resolve().parents[2] / "solutions" / f"{chapter}.py"
    if solution.exists():
        pattern = re.escape("### BEGIN SOLUTION") + r"\n(.*?)" + re.escape("### END SOLUTION")
        for region in re.finditer(pattern, solution.read_text(), re.S):
            found.update(ln.strip() for ln in region.group(1).splitlines())
    return sorted(ln for ln in found - own if len(ln) >= _MIN_SECRET and not ln.startswith("###"))


def _rewrite_output_text(out, rewrite: Callable[[str], str]) -> None:
    """Apply ``rewrite`` to every text a cell output shows, in place: stream text, an error's message and
    traceback, text/* and JSON data (a list of strings is joined first)."""
    if "text" in out:
        out.text = rewrite("".join(out.text) if isinstance(out.text, list) else out.text)
    if out.get("output_type") == "error":
        out.evalue = rewrite(out.get("evalue") or "")
        out.traceback = [rewrite(t) for t in out.get("traceback", [])]
    for mime, value in (out.get("data") or {}).items():
        if mime.startswith("text/") or mime == "application/json":
            value = "".join(value) if isinstance(value, list) else value
            if isinstance(value, str):
                out.data[mime] = rewrite(value)


def redact_output(out, secrets: Collection[str]) -> int:
    """Replace every line of a cell output (stream text, text data, error message) that contains one of
    ``secrets`` by :data:`REDACTED`, in place; the number of lines replaced."""
    if not secrets:
        return 0
    count = [0]

    def clean(text: str) -> str:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if any(secret in line for secret in secrets):
                lines[i] = REDACTED
                count[0] += 1
        return "\n".join(lines)

    _rewrite_output_text(out, clean)
    return count[0]


def secret_output_lines(graded: nbformat.NotebookNode, secrets: Collection[str]) -> int:
    """How many output lines of ``graded`` show one of ``secrets`` (``graded`` is not changed)."""
    import copy

    return sum(
        redact_output(out, secrets)
        for cell in copy.deepcopy(graded).cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )


_HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS.*?(### END HIDDEN TESTS|\Z)", re.S)


def _strip_grader_text(text: str) -> str:
    text = _HIDDEN_REGION.sub("# (hidden tests)", text)
    return "\n".join(ln for ln in text.split("\n") if "_autograder_guard" not in ln and "autograder.grading" not in ln)


def _strip_grader_code(out) -> None:
    """Remove the grader's private lines (the guard's setup lines, hidden tests) from a cell's output: a cell that
    prints the notebook's input history (``In``, ``_ih``) or a repr of it would show them to the student."""
    _rewrite_output_text(out, _strip_grader_text)


def what_happened(ename: str, evalue: str, cell_timeout: int | None = None, memory_mb: int = 0) -> str | None:
    """A student-readable account of an error that is not a check's message (an exit, a time-out, the memory
    limit, in MB when given), or None."""
    limit = f" ({cell_timeout} s)" if cell_timeout else ""
    memory = f" of {memory_mb} MB" if memory_mb else ""
    if ename == "SystemExit":
        return f"exited (SystemExit: {evalue or 'None'}): an answer must return its result, not end the program"
    if ename in ("KeyboardInterrupt", "CellTimeoutError", "ExerciseTimeout"):
        return f"timed out: ran longer than the grader's time limit{limit} and was stopped (an endless loop?)"
    if ename == "MemoryError" or "can't allocate memory" in evalue or "not enough memory" in evalue:
        return f"ran out of memory: it needed more than the grader's memory limit{memory} (a runaway allocation?)"
    return None


def _answer_cells(nb: nbformat.NotebookNode, name: str) -> list:
    return [
        c
        for c in nb.cells
        if c.cell_type == "code"
        and (c.metadata.get("nbgrader", {}).get("grade_id") == name or c.get("id", "").startswith(f"{name}-part"))
    ]


def _first_error(cell) -> dict | None:
    return next((o for o in cell.get("outputs", []) if o.output_type == "error"), None)


def detail_reason(detail: str) -> str:
    """A failed check as the worker judged it (``judge.judge``'s details: "✘ label" and the message, indented) in
    one line: "✘ label — the message's first line", and its hints."""
    lines = [ln.strip() for ln in detail.strip().splitlines() if ln.strip()]
    line = " — ".join(lines[:2])
    return line + "".join(f" {ln}" for ln in lines[2:5] if ln.startswith("Hint:"))


def failure_reasons(
    nb: nbformat.NotebookNode,
    cell_timeout: int | None = None,
    memory_mb: int = 0,
    details: dict[str, list[str]] | None = None,
) -> list[str]:
    """One short line per failed test cell: an exit, a time-out or the memory limit (in the test cell, or in the
    answer cell that therefore never defined the exercise) said as such; else the first failed check as the worker
    judged it (``details``: exercise -> its failed checks' messages, computed outside the kernel), else the check's
    message in the cell's error."""
    details = details or {}
    reasons = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        name = meta["grade_id"].removeprefix("test_")
        out = _first_error(cell)
        if out is None:
            continue
        ename, evalue = out.get("ename") or "", out.get("evalue") or ""
        lines = [ln.strip() for ln in (evalue or ename).strip().splitlines()]
        # "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>": keep the last two.
        first = " — ".join(lines[1:3]) if len(lines) >= 2 and lines[1].startswith("✘") else (lines or [""])[0]
        first += "".join(f" {ln}" for ln in lines[3:6] if ln.startswith("Hint:"))
        happened = what_happened(ename, evalue, cell_timeout, memory_mb)
        if happened:
            first = f"the checks of {name} {happened}"
        elif details.get(name):
            first = detail_reason(details[name][0])
        elif ename == "NameError":
            first = f"{evalue} (was the exercise cell deleted or renamed?)"
            for answer in _answer_cells(nb, name):
                err = _first_error(answer)
                if err is not None:
                    why = what_happened(err.get("ename", ""), err.get("evalue", ""), cell_timeout, memory_mb)
                    first = f"the answer cell of {name} " + (
                        why or f"raised {err.get('ename')}: {str(err.get('evalue', ''))[:150]}"
                    )
                    first += f", so {name} was never defined"
                    break
        reasons.append(f"{name}: {first}")
    return reasons


def ungraded_cell_errors(nb: nbformat.NotebookNode, cell_timeout: int | None = None) -> list[str]:
    """One warning per ungraded code cell (a demo "try it" cell, a cell the student added, an answer cell after
    its definitions) that ended in an error: no check scores it, but it often shows a bug the checks missed.
    Consecutive cells after the same answer that failed alike (an untouched exercise's demo cells) make one
    warning that counts them."""
    found: list[tuple[str, str]] = []  # (where, what happened)
    after = "the setup"
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        if meta.get("solution"):
            after = f"the answer of {meta.get('grade_id')}"
        if meta.get("grade") or "selfcheck_here(" in cell.source:
            continue
        err = _first_error(cell)
        if err is None:
            continue
        ename, evalue = err.get("ename") or "", str(err.get("evalue") or "")
        where = f"the answer cell of {meta.get('grade_id')}" if meta.get("solution") else f"after {after}"
        first_line = (evalue.strip().splitlines() or [""])[0][:150]
        how = what_happened(ename, evalue, cell_timeout) or f"raised {ename}" + (
            f": {first_line}" if first_line else ""
        )
        found.append((where, how))
    warnings: list[str] = []
    for (where, how), group in itertools.groupby(found):
        n = len(list(group))
        if where.startswith("the answer cell"):
            warnings += [f"{where} {how} (that cell is not graded: see the feedback)"] * n
        elif n == 1:
            warnings.append(f"a cell {where} {how} (that cell is not graded: see the feedback)")
        else:
            warnings.append(f"{n} cells {where} {how} (those cells are not graded: see the feedback)")
    return warnings


# The feedback page works offline: no MathJax, require.js or mermaid from a CDN (nbconvert's lab template loads
# them); formulas in the notebook's text are converted to MathML here, which browsers render natively.
_FEEDBACK_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""
_MATH = re.compile(
    r"(?P<code>```.*?```|`[^`\n]*`)"  # code is left alone
    r"|\$\$(?P<block>.+?)\$\$|(?<![\\$])\$(?P<inline>[^\s$][^$\n]*?)(?<![\s\\])\$",
    re.S,
)


def _math_to_mathml(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Replace $…$ and $$…$$ in markdown cells by placeholders (so markdown leaves them alone); returns
    placeholder -> MathML (LaTeX source in <code> where latex2mathml cannot convert it)."""
    import latex2mathml.converter

    found: dict[str, str] = {}

    def one(m):
        if m["code"]:
            return m["code"]
        tex = (m["block"] or m["inline"]).strip()
        try:
            markup = latex2mathml.converter.convert(tex, display="block" if m["block"] else "inline")
        except Exception:
            markup = f"<code>{html.escape(tex)}</code>"
        key = f"AUTOGRADERMATH{len(found)}X"
        found[key] = markup
        return key

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _MATH.sub(one, cell.source)
    return found


def _points_table(scores: dict[str, float], points: dict[str, int]) -> str:
    cells = "".join(
        f"<tr><td><code>{html.escape(n)}</code></td><td style='text-align:right'>{scores.get(n, 0.0):g}"
        f"</td><td style='text-align:right'>{top:g}</td></tr>"
        for n, top in points.items()
    )
    total = (
        f"<tr style='font-weight:bold;border-top:1px solid #888'><td>total</td><td style='text-align:right'>"
        f"{sum(scores.get(n, 0.0) for n in points):g}</td><td style='text-align:right'>{sum(points.values()):g}"
        f"</td></tr>"
    )
    return (
        "<table class='autograder-points' style='border-collapse:collapse;margin:.5em 0'><thead><tr>"
        "<th style='text-align:left;padding-right:2em'>exercise</th><th>points</th><th style='padding-left:1em'>"
        f"max</th></tr></thead><tbody>{cells}{total}</tbody></table>"
    )


def write_feedback(
    path: pathlib.Path,
    graded: nbformat.NotebookNode | None,
    sid: str,
    chapter: str,
    scores: dict[str, float],
    points: dict[str, int],
    *,
    warnings: Iterable[str] = (),
    reasons: Iterable[str] = (),
    unreadable: bool = True,
    secrets: Collection[str] = (),
    details: dict[str, list[str]] | None = None,
) -> None:
    """The student's feedback page at ``path``, readable offline.

    For a graded notebook: points per exercise and the grader's notes at the top, then the notebook (hidden tests
    removed, tracebacks cut to the check's message, no self-check output; ``graded`` is not changed). With
    ``graded=None`` (a file that could not be read as a notebook, or, with ``unreadable=False``, a notebook whose run
    could not be completed: an exit, a crash, the time or memory limit): zero points and why (``reasons``,
    ``warnings``), and how to resubmit — the student needs to know, e.g. to download the notebook again."""
    if graded is None:
        why = "; ".join(reasons)
        notes = "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
        advice = (
            "<p>Download the notebook again (File &gt; Download &gt; .ipynb), check it with <code>python -m "
            "autograder selfcheck</code> or the notebook's last cell, and submit it again.</p>"
            if unreadable
            else "<p>Run the whole notebook (Runtime &gt; Restart and run all) and make every cell finish "
            "without exiting the program, then submit it again.</p>"
        )
        path.write_text(
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
            + html.escape(f"{chapter} — {sid}")
            + "</title></head><body><div style='padding:1em;font-family:sans-serif;background:#eef'><b>"
            + html.escape(chapter)
            + f"</b> — {html.escape(sid)}: <b>0 / {sum(points.values()):g}</b> points"
            + _points_table({}, points)
            + f"<p>Your file could not be graded: {html.escape(why)}</p>"
            + (f"Notes from the grader:<ul>{notes}</ul>" if notes else "")
            + advice
            + "</div></body></html>\n",
            encoding="utf-8",
        )
        return
    import copy

    import jinja2
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    nb = decided_feedback(copy.deepcopy(graded), scores, points, reasons, secrets, details)
    # A kernel sends a cell's prints in as many stream messages as its output buffer was flushed, which depends on
    # timing: merged, the same run gives the same page whichever machine or worker graded it.
    nb, _ = CoalesceStreamsPreprocessor().preprocess(nb, {})
    math = _math_to_mathml(nb)
    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"feedback.html.j2": _FEEDBACK_TEMPLATE})], template_file="feedback.html.j2"
    )
    body, _ = exporter.from_notebook_node(nb)
    for key, markup in math.items():
        body = body.replace(key, markup)
    total, max_score = sum(scores.get(n, 0.0) for n in points), sum(points.values())
    notes = "".join(
        f"<li>{html.escape(w)}</li>"
        for w in list(warnings) + [r for r in reasons if "integrity" in r or "withheld" in r]
    )
    banner = (
        f"<div style='padding:1em;font-family:sans-serif;background:#eef'><b>{html.escape(chapter)}</b> — "
        f"{html.escape(sid)}: <b>{total:g} / {max_score:g}</b> points"
        + _points_table(scores, points)
        + (f"Notes from the grader:<ul>{notes}</ul>" if notes else "")
        + "</div>"
    )
    path.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1), encoding="utf-8")


_MARK = re.compile(r"<!-- autograder:mark -->.*?<!-- /autograder:mark -->", re.S)


def mark_feedback(path: pathlib.Path, note: str) -> None:
    """Put ``note`` at the top of the feedback page at ``path`` ("superseded by …"), replacing an earlier one; an
    empty ``note`` removes it. A missing page is left missing."""
    try:
        page = path.read_text(encoding="utf-8")
    except OSError:
        return
    new = _MARK.sub("", page)
    if note:
        box = (
            "<!-- autograder:mark --><div style='padding:.6em 1em;font-family:sans-serif;background:#fd8'><b>"
            f"{html.escape(note)}</b>: this file is not the one graded in the course's grade book.</div>"
            "<!-- /autograder:mark -->"
        )
        new = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + box, new, count=1)
    if new != page:
        path.write_text(new, encoding="utf-8")
