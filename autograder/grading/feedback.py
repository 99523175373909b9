"""The student's feedback page ``out/feedback/<student>.html``, written by :func:`write_page` alone (the batch's
:class:`Pages`, Gradescope's ``output``) for every outcome: the graded notebook with the grader's decisions and what
no page may show taken out (``redaction.py``), or zero and why. A page is in the edition the student submitted
(``sub.edition``): that edition's prose and the grader's words rendered in its language (docs/grading-design.md,
"The grader's words in the reader's edition"); what a page holds: the README's ``feedback/<student>.html``.
"""

from __future__ import annotations

import dataclasses
import html
import pathlib
import re
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

import nbformat

from .. import releases, wording
from ..wording import EN, ZH, Message, Said, say
from . import lms, redaction
from .reasons import exercise_of

if TYPE_CHECKING:
    from .submission import Result, Submission


OUTPUT_CHARS = 4000  # characters of a student cell's text output the feedback shows (the rest is cut)
OUTPUT_IMAGE_BYTES = 400_000  # an image output bigger than this is left out
_SHOWN_DATA = ("text/plain", "image/png", "image/jpeg")


def _cut(text: str, edition: str = EN) -> str:
    if len(text) <= OUTPUT_CHARS:
        return text
    return text[:OUTPUT_CHARS] + "\n" + wording.text("cut", edition, n=len(text) - OUTPUT_CHARS) + "\n"


class _Words:
    """The grader's words for one page in ``edition``: a key of the grader's catalogue (:meth:`__call__`) or a
    message (:meth:`message`) rendered in the page's language."""

    def __init__(self, edition: str = EN):
        self.edition = edition

    def __call__(self, key: str, **fields: object) -> str:
        return Message(key, **fields).render(self.edition)

    def message(self, said: Said) -> str:
        return wording.render(said, self.edition)


def _shown_output(out, edition: str = EN) -> Any:
    """What the feedback shows of one output of the student's own cell: text cut to a size, plain text and images
    only (HTML, JavaScript and other rich outputs are left out), an error as its one-line message."""
    kind = out.get("output_type")
    if kind == "stream":
        text = _cut(_text(out.get("text", "")), edition)
        return nbformat.v4.new_output("stream", name=out.get("name", "stdout"), text=text)
    if kind == "error":
        ename, evalue = str(out.get("ename", "")), _cut(str(out.get("evalue", "")), edition)
        return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
    if kind in ("execute_result", "display_data"):
        data = {}
        for mime in _SHOWN_DATA:
            value = out.get("data", {}).get(mime)
            if value is None:
                continue
            value = _text(value)
            if mime == "text/plain":
                data[mime] = _cut(value, edition)
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
    name: str,
    scores: dict[str, float],
    points: dict[str, int],
    reasons: list[Said],
    details: Iterable[Said],
    words: _Words,
) -> str:
    """What a test cell shows in the feedback: the grader's decision for exercise ``name`` — its points, and either
    the failed checks' messages as the grading worker computed them outside the kernel (``details``) or the reasons
    — never the kernel's raw output."""
    got, top = scores.get(name, 0.0), points.get(name, 0)
    mine: list[Any] = [r.get("reason") for r in reasons if isinstance(r, Message) and exercise_of(r) == name]
    mark = "✔" if got >= top and top else "✘"
    head = words("decision one" if top == 1 else "decision", mark=mark, name=name, got=f"{got:g}", top=f"{top:g}")
    shown = [words.message(m) for m in (list(details) if got < top and details else mine) if m is not None]
    return head + "".join("\n" + "\n".join("  " + ln for ln in line.splitlines()) for line in shown) + "\n"


_HIDDEN = re.compile(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)


def decided_feedback(
    nb: nbformat.NotebookNode,
    scores: dict[str, float],
    chapter: releases.Chapter,
    reasons: Iterable[Said],
    secrets: Collection[str] = (),
    details: dict[str, list[Said]] | None = None,
    words: _Words | None = None,
) -> nbformat.NotebookNode:
    """The feedback notebook, built from what the grader decides to show: every test cell's outputs are replaced by
    the grader's decision for its exercise (points and messages) and its source is the test cell of the student's
    edition (``chapter.tests``), its hidden tests removed; the student's own cells keep their outputs cut to a size
    (:func:`_shown_output`), the self-check cell none (it reports on the grader's copy, not on the student's file);
    the guard's lines, the "Open in Colab" badge (an image from the network) and every output line that shows one of
    ``secrets`` (:func:`redaction.redact`) are taken out. Nothing the kernel printed in a test cell — where the hidden
    tests run — reaches the page, in whatever encoding. ``words``: the page's edition (English when not given)."""
    words = words or _Words()
    reasons = list(reasons)
    points, tests = chapter.points, chapter.tests.get(words.edition, {})
    hidden = "\n" + words("hidden tests run here")
    nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown" and "colab-badge.svg" in c.source)]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and str(meta.get("grade_id", "")).startswith("test_"):
            name = meta["grade_id"].removeprefix("test_")
            # the test cell as the student's notebook has it (the grading notebook's is the guard's verdict alone)
            cell.source = tests.get(name, "")
            text = _decision_text(name, scores, points, reasons, (details or {}).get(name, ()), words)
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        elif "selfcheck_here(" in cell.source:  # the "Before you submit" cell cannot read the file while grading
            cell.outputs = []
        else:
            shown = (_shown_output(out, words.edition) for out in cell.get("outputs", []))
            cell.outputs = [o for o in shown if o is not None]
        if "_autograder_guard" in cell.source:  # the grading guard's lines in the setup cell
            cell.source = "\n".join(ln for ln in cell.source.splitlines() if "_autograder_guard" not in ln)
        cell.source = _HIDDEN.sub(lambda _: hidden, cell.source)
    redaction.redact(nb, secrets, words("redacted"))
    return nb


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


def _points_table(scores: dict[str, float], points: dict[str, int], edition: str = EN) -> str:
    word = {k: wording.text(k, edition) for k in ("exercise", "points", "max", "total")}
    cells = "".join(
        f"<tr><td><code>{html.escape(n)}</code></td><td style='text-align:right'>{scores.get(n, 0.0):g}"
        f"</td><td style='text-align:right'>{top:g}</td></tr>"
        for n, top in points.items()
    )
    total = (
        f"<tr style='font-weight:bold;border-top:1px solid #888'><td>{word['total']}</td><td style='text-align:right'>"
        f"{sum(scores.get(n, 0.0) for n in points):g}</td><td style='text-align:right'>{sum(points.values()):g}"
        f"</td></tr>"
    )
    return (
        "<table class='autograder-points' style='border-collapse:collapse;margin:.5em 0'><thead><tr>"
        f"<th style='text-align:left;padding-right:2em'>{word['exercise']}</th><th>{word['points']}</th>"
        f"<th style='padding-left:1em'>{word['max']}</th></tr></thead><tbody>{cells}{total}</tbody></table>"
    )


def write_feedback(
    path: pathlib.Path,
    graded: nbformat.NotebookNode | None,
    sid: str,
    chapter: releases.Chapter,
    scores: dict[str, float],
    *,
    warnings: Iterable[Said] = (),
    reasons: Iterable[Said] = (),
    unreadable: bool = True,
    advise: bool = True,
    secrets: Collection[str] = (),
    details: dict[str, list[Said]] | None = None,
    edition: str = EN,
) -> None:
    """The student's feedback page at ``path``, readable offline, in ``edition`` (the prose of that edition's
    release and the grader's words in its language), for ``chapter`` as the batch read it: points per exercise and
    the grader's notes at the top, then the ``graded`` notebook (:func:`decided_feedback`; ``graded`` is not
    changed). With ``graded=None`` (a file that could not be read as a notebook, or, with ``unreadable=False``, a
    notebook whose run could not be completed): zero points, why (``reasons``), and how to resubmit, unless
    ``advise`` is False (the reason says what to submit, as for another chapter's notebook)."""
    words, points, reasons, notes = _Words(edition), chapter.points, list(reasons), list(warnings)
    if graded is None:  # zero and why, and how to resubmit
        why = words("could not be graded", why="; ".join(words.message(r) for r in reasons))
        head = f'<head><meta charset="utf-8"><title>{html.escape(f"{chapter.name} — {sid}")}</title></head>'
        body = f'<!DOCTYPE html><html lang="en">{head}<body></body></html>\n'
        scores, after = {}, f"<p>{html.escape(why)}</p>"
        advice = f"<p>{words('download again' if unreadable else 'run it all')}</p>" if advise else ""
    else:
        body, after, advice = _notebook_html(graded, chapter, scores, reasons, secrets, details, words), "", ""
        notes += [r for r in reasons if isinstance(r, Message) and r.key == "integrity"]  # a zero for the whole file
    shown = "".join(f"<li>{html.escape(words.message(w))}</li>" for w in notes)
    total = sum(scores.get(n, 0.0) for n in points)
    banner = (
        f"<div style='padding:1em;font-family:sans-serif;background:#eef'><b>{html.escape(chapter.name)}</b> — "
        f"{html.escape(sid)}: "
        + words("score line", total=f"{total:g}", max=f"{sum(points.values()):g}")
        + _points_table(scores, points, edition)
        + after
        + (f"{words('notes from the grader')}<ul>{shown}</ul>" if shown else "")
        + advice
        + "</div>"
    )
    if edition == ZH:
        body = body.replace('<html lang="en">', '<html lang="zh-CN">', 1)
    path.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1), encoding="utf-8")


def _notebook_html(
    graded: nbformat.NotebookNode,
    chapter: releases.Chapter,
    scores: dict[str, float],
    reasons: list[Said],
    secrets: Collection[str],
    details: dict[str, list[Said]] | None,
    words: _Words,
) -> str:
    """The page's HTML of a copy of ``graded`` (:func:`decided_feedback`), with the prose the student read."""
    import copy

    import jinja2
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    nb = copy.deepcopy(graded)
    if words.edition in chapter.notebooks:  # the prose the student read (the graded notebook has the English release's)
        _prose(nb, chapter.notebooks[words.edition])
    nb = decided_feedback(nb, scores, chapter, reasons, secrets, details, words)
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
    return body


def _prose(nb: nbformat.NotebookNode, release: nbformat.NotebookNode) -> None:
    """The prose cells of ``nb`` (the graded notebook, with the English release's prose) as the ``release`` of the
    student's edition has them (same cell ids), in place: the title, instructions and headings the student read."""
    text = {c.get("id"): c.source for c in release.cells if c.cell_type == "markdown"}
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.get("id") in text:
            cell.source = text[cell.get("id")]


_MARK = re.compile(r"<!-- autograder:mark -->.*?<!-- /autograder:mark -->", re.S)


def mark_feedback(path: pathlib.Path, note: Said) -> None:
    """Put ``note`` at the top of the feedback page at ``path`` ("superseded by …", in the page's language: a page of
    the Chinese edition is ``lang="zh-CN"``), replacing an earlier one; an empty ``note`` removes it. A missing page
    is left missing."""
    try:
        page = path.read_text(encoding="utf-8")
    except OSError:
        return
    new = _MARK.sub("", page)
    if note:
        words = _Words(ZH if re.search(r"<html[^>]*lang=[\"']zh-CN", page) else EN)
        colon = "：" if words.edition == ZH else ": "
        box = (
            "<!-- autograder:mark --><div style='padding:.6em 1em;font-family:sans-serif;background:#fd8'><b>"
            f"{html.escape(words.message(note))}</b>{colon}"
            f"{html.escape(words('not the one graded'), quote=False)}</div>"
            "<!-- /autograder:mark -->"
        )
        new = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + box, new, count=1)
    if new != page:
        path.write_text(new, encoding="utf-8")


class Pages:
    """The batch's feedback pages, in ``folder``, for ``chapter`` as the batch read it: :meth:`write` writes a
    submission's page as its outcome is known, :meth:`mark` brings the note of a page an earlier run wrote up to
    date."""

    def __init__(self, chapter: releases.Chapter, folder: pathlib.Path):
        self.chapter, self.folder = chapter, folder

    def write(self, sub: Submission) -> None:
        """The feedback page of ``sub`` at ``folder/<student id>.html``, whatever its outcome (:func:`write_page`),
        with the canonicalisation's and the run's warnings; a file the LMS file does not carry says so at the top."""
        assert sub.outcome is not None
        # under this file's identity: a run shared with an identical file carries the first file's id (never shown)
        outcome = dataclasses.replace(sub.outcome, student_id=sub.student_id)
        graded = nbformat.reads(sub.graded, as_version=4) if sub.graded is not None else None
        write_page(
            self.folder / f"{sub.student_id}.html", outcome, graded, self.chapter, edition=sub.edition,
            unreadable=sub.unreadable, warnings=sub.warnings + outcome.warnings, note=superseded_note(sub),
        )  # fmt: skip

    def mark(self, sub: Submission) -> None:
        """The note at the top of the page an earlier run wrote for ``sub``: whether the LMS file carries another
        of the student's files may have changed since."""
        mark_feedback(self.folder / f"{sub.student_id}.html", superseded_note(sub))


def write_page(
    path: pathlib.Path,
    result: Result,
    graded: nbformat.NotebookNode | None,
    chapter: releases.Chapter,
    *,
    edition: str = EN,
    unreadable: bool = True,
    warnings: Iterable[Said] | None = None,
    reasons: Iterable[Said] | None = None,
    details: dict[str, list[Said]] | None = None,
    note: Said = "",
) -> None:
    """The one feedback writer (``python -m autograder grade``'s pages, :class:`Pages`; Gradescope's ``output``): the
    page of ``result`` at ``path``, in ``edition`` — the ``graded`` notebook with the grader's decisions, or
    (``graded`` None) zero and why; ``note`` at its top (:func:`mark_feedback`). ``warnings``, ``reasons``,
    ``details``: the result's own unless given (Gradescope gives the messages it leaves to the hidden checks' own
    tests)."""
    own = result.reasons or ([result.reason] if result.reason else [])
    write_feedback(
        path, graded, result.student_id, chapter, dict(result.scores),
        warnings=result.warnings if warnings is None else warnings,
        reasons=own if reasons is None or graded is None else reasons,  # zero and why: the result's own reasons
        unreadable=unreadable, advise=not lms.other_chapter(result), edition=edition,
        secrets=redaction.grader_secrets(graded, chapter.name) if graded is not None else (),
        details=result.details if details is None else details,
    )  # fmt: skip
    if note:
        mark_feedback(path, note)


def superseded_note(sub: Submission) -> Said:
    """The note at the top of ``sub``'s page when another of the student's files is their row in the LMS file."""
    return say("superseded", file=sub.superseded_by) if sub.superseded_by else ""
