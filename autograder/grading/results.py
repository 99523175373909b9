"""What grading one submission produced: the result file and the student's feedback page, each with one writer.

* :class:`Result` — the per-submission result file ``out/results/<submission>.json`` (status, reason, scores,
  warnings), written by :func:`write_result` only: by the worker for a graded notebook, by the batch for a file
  that could not be read, a worker that ended without a result, and identical copies of a graded notebook;
* :func:`write_feedback` — ``out/feedback/<student>.html``, for a graded notebook (the student's code and the
  check messages; the hidden tests' source removed and a failed test's traceback cut to its message: hidden
  checks' messages never contain reference values) or for a file that could not be graded (zero and why).
"""

from __future__ import annotations

import dataclasses
import html
import json
import pathlib
import re
from collections.abc import Iterable

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

    @property
    def score(self) -> float:
        return sum(self.scores.values())


def write_result(path: pathlib.Path, result: Result) -> None:
    """Write ``result`` to ``path`` atomically (a reader never sees half a file)."""
    fields = {k: v for k, v in dataclasses.asdict(result).items() if v != "" or k not in ("log", "trace")}
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


def sanitize_feedback(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove hidden-test source, cut tracebacks of test cells down to the check's message, drop the self-check
    cell's output (it reports on the grader's copy, not on the student's file), drop the "Open in Colab" badge (an
    image from the network: a broken image offline, and no use in feedback)."""
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
    return nb


def failure_reasons(nb: nbformat.NotebookNode) -> list[str]:
    """One short line per failed test cell, taken from the check's message."""
    reasons = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                lines = [ln.strip() for ln in (out.evalue or out.ename or "").strip().splitlines()]
                # "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>": keep the last two.
                first = " — ".join(lines[1:3]) if len(lines) >= 3 and lines[1].startswith("✘") else (lines or [""])[0]
                first += "".join(f" {ln}" for ln in lines[3:6] if ln.startswith("Hint:"))
                if out.ename == "NameError":
                    first = f"{out.evalue} (was the exercise cell deleted or renamed?)"
                reasons.append(f"{meta['grade_id'].removeprefix('test_')}: {first}")
                break
    return reasons


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
) -> None:
    """The student's feedback page at ``path``, readable offline.

    For a graded notebook: points per exercise and the grader's notes at the top, then the notebook (hidden tests
    removed, tracebacks cut to the check's message, no self-check output; ``graded`` is not changed). With
    ``graded=None`` (a file that could not be read as a notebook): zero points and why (``reasons``), and how to
    resubmit — the student needs to know, e.g. to download the notebook again."""
    if graded is None:
        why = "; ".join(reasons)
        path.write_text(
            "<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
            + html.escape(f"{chapter} — {sid}")
            + "</title></head><body><div style='padding:1em;font-family:sans-serif;background:#eef'><b>"
            + html.escape(chapter)
            + f"</b> — {html.escape(sid)}: <b>0 / {sum(points.values()):g}</b> points"
            + _points_table({}, points)
            + f"<p>Your file could not be graded: {html.escape(why)}</p>"
            "<p>Download the notebook again (File &gt; Download &gt; .ipynb), check it with <code>python -m "
            "autograder selfcheck</code> or the notebook's last cell, and submit it again.</p></div></body></html>\n"
        )
        return
    import copy

    import jinja2
    from nbconvert import HTMLExporter

    nb = sanitize_feedback(copy.deepcopy(graded))
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
    path.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1))
