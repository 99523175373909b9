"""Canonicalise a submitted notebook against its release notebook, to grade what the student wrote
(:func:`canonicalise`; the repairs it makes: README, "What the grader guarantees"); what a submitted file is
(:func:`examine`); and the student's self-check of a notebook file (:func:`selfcheck`, :func:`selfcheck_here`).
Every repair is a warning (a message); a file that is not JSON or not a notebook raises :class:`Ungradeable`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import sys
import tempfile
from collections.abc import Collection, Iterable, Mapping
from typing import Any

import nbformat

from . import releases
from .wording import Message, Said, say

MAX_BYTES = 200 * 1024 * 1024  # a file larger than this is not read at all


class Ungradeable(ValueError):
    """The file cannot be graded; ``err.args[0]`` is the reason (a message, or a plain string), ``str(err)`` its
    English for the grades table."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _source(cell: dict) -> str:
    src = cell.get("source", cell.get("input", ""))
    if isinstance(src, list):
        src = "".join(str(s) for s in src)
    return src if isinstance(src, str) else str(src)


def _norm(src: str) -> str:
    return "\n".join(line.rstrip() for line in src.strip().splitlines())


def _exercise_defined(src: str, names: list[str]) -> list[str]:
    return [
        n
        for n in names
        if re.search(rf"^\s*(def|class)\s+{re.escape(n)}\b", src, re.M) or re.search(rf"^{re.escape(n)}\s*=", src, re.M)
    ]


def test_digest(source: str) -> str:
    """The digest of a test cell's source, as :func:`canonicalise` compares it (trailing blanks ignored)."""
    return hashlib.sha256(_norm(source).encode("utf-8")).hexdigest()


def released_test_cells(nb: Mapping | nbformat.NotebookNode) -> dict[str, str]:
    """grade id -> digest of each test cell (nbgrader ``grade``) of a release notebook (a dict as read from JSON)."""
    found = {}
    for cell in nb.get("cells", []):
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        if nbg.get("grade") and nbg.get("grade_id") and cell.get("cell_type") == "code":
            found[str(nbg["grade_id"])] = test_digest(_source(cell))
    return found


def history_path(chapter: str, folder: pathlib.Path | None = None) -> pathlib.Path:
    """The test cell history of ``chapter`` (in ``folder``, default: where the release notebooks are)."""
    return (folder or releases.release_dir()) / releases.HISTORY_DIR / f"{chapter}.json"


def history_text(earlier: str | None, notebooks: Iterable[Mapping | nbformat.NotebookNode]) -> str:
    """The test cell history file: the ``earlier`` one's text (None: none yet) with the test cells of
    ``notebooks`` (release notebooks) added. Versions are never removed."""
    history: dict[str, set[str]] = {k: set(v) for k, v in json.loads(earlier).items()} if earlier else {}
    for nb in notebooks:
        for grade_id, digest in released_test_cells(nb).items():
            history.setdefault(grade_id, set()).add(digest)
    return json.dumps({k: sorted(v) for k, v in sorted(history.items())}, indent=1) + "\n"


NOTEBOOK = "notebook"  # file_kind of anything that may be a notebook (parse decides)
EMPTY = "empty file"
# (first bytes, what the file is in a word or two, what it is in a sentence)
_MAGIC = (
    (b"%PDF-", "PDF", "a PDF"),
    (b"PK\x03\x04", "zip archive", "a zip archive (a .docx, or a zip of several files?)"),
    (b"\x89PNG", "PNG image", "a PNG image"),
    (b"\xff\xd8\xff", "JPEG image", "a JPEG image"),
    (b"GIF8", "GIF image", "a GIF image"),
    (b"{\\rtf", "RTF document", "an RTF document"),
    (b"\xd0\xcf\x11\xe0", "Office document", "an old Office document"),
    (b"<!DOCTYPE html", "web page", "a web page (HTML)"),
    (b"<html", "web page", "a web page (HTML)"),
)


def _magic(data: bytes) -> tuple[bytes, str, str] | None:
    head = data[:64].lstrip()
    return next((m for m in _MAGIC if head[: len(m[0])].lower() == m[0].lower()), None)


def file_kind(data: bytes, name: str = "") -> str:
    """What a submitted file is, in a word or two (counts on the console, zero reasons): :data:`NOTEBOOK` for
    anything that may be a notebook (JSON text, or a file named ``.ipynb``: :func:`parse` decides), :data:`EMPTY`,
    what its first bytes say ("PDF", "zip archive", "PNG image" …), else its type by its name (".py file")."""
    if not data.strip():
        return EMPTY
    if magic := _magic(data):
        return magic[1]
    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{" or not name or name.lower().endswith(".ipynb"):
        return NOTEBOOK
    suffix = re.search(r"\.\w{1,8}$", name)
    return f"{suffix.group(0).lower()} file" if suffix else "file without an extension"


def not_a_notebook(kind: str, data: bytes = b"") -> Message:
    """The zero's reason for a file of ``kind`` (:func:`file_kind`, not :data:`NOTEBOOK`): "not a notebook (PDF): …"."""
    magic = _magic(data)
    if kind == EMPTY:
        what = say("empty file, blank" if data else "empty file")
    elif magic:
        what = say("wrong file", magic=magic[2])
    else:
        what = say("upload the notebook")
    return say("not a notebook", kind=kind, what=what)


def parse(data: bytes | str) -> tuple[list[dict], dict, list[Said]]:
    """(cells, notebook metadata, warnings) from raw file contents, for any nbformat 3/4 shape."""
    if isinstance(data, bytes):
        kind = file_kind(data)
        if kind != NOTEBOOK:
            raise Ungradeable(not_a_notebook(kind, data))
        if len(data) > MAX_BYTES:
            raise Ungradeable(say("file too large", mb=f"{len(data) / 1e6:.0f}", limit=f"{MAX_BYTES / 1e6:.0f}"))
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise Ungradeable(say("no notebook", why=say("not UTF-8"))) from None
    if not data.strip():
        raise Ungradeable(say("no notebook", why=say("empty file, blank" if data else "empty file")))
    try:
        nb = json.loads(data)
    except (json.JSONDecodeError, RecursionError) as exc:
        # exc.msg, not str(exc)[:60]: a cut in the middle of "(char 9914)" printed a wrong position.
        where = (
            say("JSON error at", error=exc.msg[:60], line=exc.lineno, column=exc.colno)
            if isinstance(exc, json.JSONDecodeError)
            else say("nested too deeply")
        )
        raise Ungradeable(say("not valid JSON", where=where)) from None
    warnings: list[Said] = []
    cells: Any
    if not isinstance(nb, dict):
        raise Ungradeable(say("no notebook", why=say("not an object with cells")))
    if "cells" not in nb and isinstance(nb.get("worksheets"), list):  # nbformat 3
        cells = [c for ws in nb["worksheets"] if isinstance(ws, dict) for c in ws.get("cells", [])]
        warnings.append(say("old nbformat 3"))
    else:
        cells = nb.get("cells")
    if not isinstance(cells, list):
        raise Ungradeable(say("no notebook", why=say("no list of cells")))
    cells = [c for c in cells if isinstance(c, dict)]
    if not cells:
        raise Ungradeable(say("no notebook", why=say("no cells")))
    meta = nb.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    minor = nb.get("nbformat_minor")
    if nb.get("nbformat") == 4 and isinstance(minor, int) and minor < 5:
        warnings.append(say("old nbformat 4", minor=minor))
    ids = [c.get("id") for c in cells]
    if any(i is None for i in ids) and nb.get("nbformat_minor", 0) >= 5:
        warnings.append(say("cells without ids"))
    if len({i for i in ids if i is not None}) < len([i for i in ids if i is not None]):
        warnings.append(say("duplicate cell ids"))
    return cells, meta, warnings


_SETUP_IMPORT = re.compile(r"from\s+autograder\.(ch\d\d_\w+)\s+import\s+EXERCISES")
_HAN = re.compile(r"[\u4e00-\u9fff]")


@dataclasses.dataclass(frozen=True)
class Examined:
    """What a submitted file is, read from its contents once (:func:`examine`)."""

    kind: str  # :func:`file_kind`: NOTEBOOK, or what else it is ("PDF", "empty file", ".py file" …)
    not_notebook: Said  # why it is no notebook (:func:`not_a_notebook`), or ""
    chapter: str | None  # the chapter whose notebook it is, None: its content does not say
    edition: str  # the course edition it was made from ("en" where no chapter was given to compare with)


def examine(data: bytes | str, name: str = "", chapter: releases.Chapter | None = None) -> Examined:
    """What the submitted file ``data`` (named ``name``) is: its kind, why it is no notebook, whose chapter's
    notebook it is (the setup cell's ``from autograder.<chapter> import EXERCISES``, else the one chapter whose
    exercises' cells it has) and, given the ``chapter`` it is graded in, the edition it was made from ("zh": more of
    its prose cells are the Chinese release's than the English release's; where neither's are there, prose that is
    mostly Chinese characters)."""
    kind = file_kind(data.encode() if isinstance(data, str) else data, name)
    if kind != NOTEBOOK:
        return Examined(kind, not_a_notebook(kind, data if isinstance(data, bytes) else b""), None, "en")
    try:
        cells, _, _ = parse(data)
    except Exception:  # no readable notebook: canonicalisation says why; its edition from the text it has
        return Examined(kind, "", None, _edition_of_unreadable(data, chapter) if chapter else "en")
    return Examined(kind, "", _chapter_of(cells), _edition_of(cells, chapter) if chapter else "en")


def chapter_of(data: bytes | str) -> str | None:
    """The chapter a notebook file is, read from its content (:func:`examine`), or None where it does not say."""
    return examine(data).chapter


def edition_of(data: bytes | str, chapter: releases.Chapter) -> str:
    """The course edition ("en" or "zh") a submitted file of ``chapter`` was made from (:func:`examine`)."""
    return examine(data, "", chapter).edition


def _chapter_of(cells: list[dict]) -> str | None:
    known = releases.chapters()
    named = {m for c in cells for m in _SETUP_IMPORT.findall(_source(c)) if m in known}
    if len(named) == 1:
        return named.pop()
    ids = set()
    for c in cells:
        meta: Any = c.get("metadata") if isinstance(c.get("metadata"), dict) else {}
        nbg: Any = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
        ids |= {str(x) for x in (c.get("id"), nbg.get("grade_id")) if x}
    having = {ch for ch in known if ids & set(releases.exercise_names(ch))}
    return having.pop() if len(having) == 1 else None


def _edition_of(cells: list[dict], chapter: releases.Chapter) -> str:
    prose = [_norm(_source(c)) for c in cells if c.get("cell_type") == "markdown"]
    known = {
        edition: {_norm(c.source) for c in release.cells if c.cell_type == "markdown"}
        for edition, release in chapter.notebooks.items()
    }
    found = {edition: sum(p in texts for p in prose) for edition, texts in known.items()}
    if found.get("zh", 0) != found.get("en", 0):
        return "zh" if found.get("zh", 0) > found.get("en", 0) else "en"
    text = "".join(prose)
    letters = sum(ch.isalpha() for ch in text)
    return "zh" if letters and len(_HAN.findall(text)) > letters // 4 else "en"


def _edition_of_unreadable(data: bytes | str, chapter: releases.Chapter) -> str:
    """The edition of a file that is no readable notebook (a download cut short): "zh" where more of the Chinese
    release's prose cells than of the English release's begin in its text as a notebook file writes them (their
    first line, JSON-escaped), else "en"."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if "zh" not in chapter.notebooks:
        return "en"
    found = {}
    for edition, release in chapter.notebooks.items():
        prose = [c.source for c in release.cells if c.cell_type == "markdown" and c.source.strip()]
        starts = {json.dumps(source.split("\n", 1)[0], ensure_ascii=False)[1:-1][:40] for source in prose}
        found[edition] = sum(1 for start in starts if start in text)
    return "zh" if found["zh"] > found["en"] else "en"


def canonicalise(
    data: bytes | str, release: nbformat.NotebookNode, history: Mapping[str, Collection[str]] | None = None
) -> tuple[nbformat.NotebookNode, list[Said]]:
    """(notebook to grade, warnings). Raises :class:`Ungradeable` for a file that is not a notebook.

    ``history``: test grade id -> digests (:func:`test_digest`) of the versions of that test cell that earlier
    releases had, which are no edit (the batch gives its chapter's, ``releases.Chapter.history``); default: the
    committed history of the release's chapter (``releases.test_history``)."""
    cells, meta, warnings = parse(data)
    rel_cells = release.cells
    solutions = [c.id for c in rel_cells if c.metadata.get("nbgrader", {}).get("solution")]
    tests = {c.id: c for c in rel_cells if c.metadata.get("nbgrader", {}).get("grade")}
    if history is None:
        chapter = {m for c in rel_cells for m in _SETUP_IMPORT.findall(c.source)}
        history = releases.test_history(chapter.pop()) if len(chapter) == 1 else {}

    def edited(test_id: str, src: str) -> bool:  # not the release's test cell, nor an earlier release's
        return _norm(src) != _norm(tests[test_id].source) and test_digest(src) not in history.get(test_id, ())

    rel_by_id = {c.id: c for c in rel_cells}
    rel_code_src = {_norm(c.source): c.id for c in rel_cells if c.cell_type == "code"}
    rel_md_src = {_norm(c.source): c.id for c in rel_cells if c.cell_type != "code"}

    # 1. classify every submitted cell: ("solution", X) / ("release", id) / ("inserted", "") / ("drop", "")
    kinds: list[tuple[str, str]] = []
    notes: dict[str, set] = {}

    def note(key, what):
        notes.setdefault(key, set()).add(what)

    big = 0
    for cell in cells:
        src, ctype = _source(cell), cell.get("cell_type", "code")
        cmeta = cell.get("metadata")
        cmeta = cmeta if isinstance(cmeta, dict) else {}
        nbg = cmeta.get("nbgrader")
        nbg = nbg if isinstance(nbg, dict) else {}
        gid, cid = nbg.get("grade_id"), cell.get("id")
        big += len(json.dumps(cell.get("outputs", []))) if ctype == "code" else 0
        defined = _exercise_defined(src, solutions)
        kind: tuple[str, str]
        if gid in solutions:
            kind = ("solution", str(gid))
            if not nbg.get("solution"):
                note("altered", gid)
        elif cid in solutions and not (gid and gid in rel_by_id):
            kind = ("solution", str(cid))
            note("stripped" if not nbg else "altered", cid)
        elif gid in rel_by_id or (cid in rel_by_id and not defined):
            rid = gid if gid in rel_by_id else cid
            kind = ("release", str(rid))
            if rid in tests and edited(str(rid), src):
                note("test edited", rid)
        elif ctype == "code" and _norm(src) in rel_code_src:
            kind = ("release", rel_code_src[_norm(src)])
        elif ctype != "code" and _norm(src) in rel_md_src:
            kind = ("release", rel_md_src[_norm(src)])
        elif (run := re.search(r"EXERCISES\.run\(\s*[\"'](\w+)", src)) and not defined:
            name = run.group(1)
            kind = ("release", f"test_{name}") if f"test_{name}" in tests else ("drop", "")
            if kind[0] == "drop" or edited(kind[1], src):
                note("test edited", f"test_{name}")
        elif defined:
            kind = ("solution", defined[0])
            note("matched by content", defined[0])
        elif ctype == "code":
            kind = ("inserted", "") if _norm(src) else ("drop", "")
        else:
            kind = ("drop", "")  # the student's own prose: not graded
        if kind[0] == "solution" and ctype != "code":
            note("type changed", kind[1])
        if kind[0] == "release" and kind[1] in tests:
            if ctype != "code":
                note("test not code", kind[1])
            if any(k == kind for k in kinds):
                note("test duplicated", kind[1])
        kinds.append(kind)

    # 2. position: an unclassified code cell right before an exercise's test cell answers that exercise
    answered = {k[1] for k in kinds if k[0] == "solution"}
    for i, (what, _) in enumerate(kinds):
        if what != "inserted":
            continue
        nxt = next((k for k in kinds[i + 1 :] if k[0] != "drop"), None)
        if nxt and nxt[0] == "release" and nxt[1] in tests:
            name = nxt[1].removeprefix("test_")
            if name in solutions and name not in answered:
                kinds[i] = ("solution", name)
                answered.add(name)
                note("matched by position", name)

    # 3. anchor inserted cells after the release cell they follow (never before the setup cell)
    answers: dict[str, list[str]] = {name: [] for name in solutions}
    inserted: dict[str, list[str]] = {}
    order = [c.id for c in rel_cells]
    setup = next(
        (c.id for c in rel_cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"),
        next(c.id for c in rel_cells if c.cell_type == "code"),
    )
    anchor = setup
    for submitted, (what, ref) in zip(cells, kinds):
        if what == "solution":
            answers[ref].append(_source(submitted))
            anchor = ref
        elif what == "release":
            if order.index(ref) >= order.index(setup):
                anchor = ref
        elif what == "inserted":
            inserted.setdefault(anchor, []).append(_source(submitted))

    # 4. build the notebook with the release's structure
    out = copy.deepcopy(release)
    out.cells = []
    n_ins = 0
    for rc in rel_cells:
        new_cell = copy.deepcopy(rc)
        if rc.id in answers:
            parts = answers[rc.id]
            if not parts:
                note("missing", rc.id)
            else:
                new_cell.source = parts[0]
            out.cells.append(new_cell)
            for j, more in enumerate(parts[1:], start=2):
                part = nbformat.v4.new_code_cell(more)
                part.id = f"{rc.id}-part{j}"
                out.cells.append(part)
            if len(parts) > 1:
                note("split", rc.id)
        else:
            out.cells.append(new_cell)
        for src in inserted.get(rc.id, []):
            n_ins += 1
            ins = nbformat.v4.new_code_cell(src)
            ins.id = f"inserted-{n_ins:03d}"
            out.cells.append(ins)
    seen_tests = {ref for kind, ref in kinds if kind == "release" and ref in tests}
    for tid in tests:
        if tid not in seen_tests:
            note("test deleted", tid)
    for c in out.cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None

    # 5. warnings, one short line per kind of repair
    # the messages are the catalogue's "repair: <kind>", in this order
    repairs = ["stripped", "altered", "matched by content", "matched by position", "type changed", "split", "missing"]
    repairs += ["test edited", "test not code", "test duplicated", "test deleted"]
    for key in repairs:
        if key in notes:
            warnings.append(say(f"repair: {key}", names=", ".join(sorted(notes[key]))))
    if n_ins:
        warnings.append(say("cells added", n=n_ins))
    if big > 1_000_000:
        warnings.append(say("outputs dropped", size=f"{big / 1e6:.1f}"))
    ks = meta.get("kernelspec")
    ks = ks if isinstance(ks, dict) else {}
    if ks.get("name") != releases.KERNELSPEC["name"]:
        warnings.append(say("kernel replaced", kernel=repr(ks.get("name")), ours=repr(releases.KERNELSPEC["name"])))
    extra = sorted(set(meta) - set(release.metadata) - {"widgets", "vscode", "toc", "varInspector"})
    if extra:
        warnings.append(say("metadata dropped", keys=", ".join(map(str, extra))[:80]))
    out.metadata = copy.deepcopy(release.metadata)
    out.nbformat, out.nbformat_minor = 4, 5
    nbformat.validate(out)
    return out, warnings


def stub_answers(nb: nbformat.NotebookNode) -> list[str]:
    """Exercises whose answer cell still raises NotImplementedError (not attempted)."""
    return [
        c.id
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution") and "raise NotImplementedError()" in c.source
    ]


def selfcheck(path, chapter: str | None = None, edition: str | None = None) -> tuple[bool, list[str]]:
    """(gradeable, report lines) for a student's notebook file, without running it; the lines in ``edition`` ("en"
    or "zh"; default: the edition the file was made from, :func:`edition_of`).

    Compares the file with the committed release notebook of its chapter (:mod:`autograder.releases`); needs only
    nbformat, so it works in the student install (no nbgrader) and takes well under a second."""
    path = pathlib.Path(path)
    chapter = chapter or releases.chapter_from_filename(path.name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        return False, [say("selfcheck: cannot read", path=path, error=exc).render(edition or "en")]
    if chapter is None:
        text = data.decode(errors="replace")
        chapter = next((c for c in releases.chapters() if f"autograder.{c}" in text), None)
        if chapter is None:
            return False, [say("selfcheck: which chapter").render(edition or "en")]
    try:
        read = releases.read(chapter)
    except ValueError as exc:
        return False, [str(exc)]
    edition = edition or edition_of(data, read)
    try:
        nb, warnings = canonicalise(data, read.release, read.history)
    except Ungradeable as exc:
        why = exc.args[0] if exc.args else ""
        said = [say("selfcheck: not gradeable", why=why), say("selfcheck: download again")]
        return False, [m.render(edition) for m in said]
    lines = [say("selfcheck: gradeable", file=path.name, chapter=chapter)]
    lines += [say("selfcheck: repaired", what=w) for w in warnings]
    todo = stub_answers(nb)
    if todo:
        lines.append(say("selfcheck: not attempted", names=", ".join(todo)))
    if not warnings and not todo:
        lines.append(say("selfcheck: no problems"))
    return True, [m.render(edition) for m in lines]


def selfcheck_here(chapter: str, edition: str | None = None) -> bool:
    """The "Before you submit" cell: run :func:`selfcheck` on the notebook being edited, without executing it.

    Reads the notebook from Colab (its current state in the browser), from VS Code (``__vsc_ipynb_file__``) or
    from Jupyter (``JPY_SESSION_NAME``, the saved file); elsewhere it prints the one-line command to use
    instead; under the grader it says it is skipped. Says it in ``edition`` (default: the edition of the notebook
    read, else English). Returns True when the notebook is gradeable."""
    if os.environ.get("NBGRADER_EXECUTION"):  # being graded (runner.run_notebook sets it), not edited
        print(say("selfcheck: skipped").render(edition or "en"))
        return True
    text = None
    try:
        from google.colab import _message

        text = json.dumps(_message.blocking_request("get_ipynb", timeout_sec=30)["ipynb"])
    except Exception:
        pass
    if text is None:
        path = getattr(sys.modules.get("__main__"), "__vsc_ipynb_file__", None) or os.environ.get("JPY_SESSION_NAME")
        if path and os.path.isfile(path):
            text = pathlib.Path(path).read_text(encoding="utf-8", errors="replace")
    if text is None:
        print(say("selfcheck: cannot read here", file=f"{chapter}.ipynb").render(edition or "en"))
        return False
    edition = edition or edition_of(text, releases.read(chapter))
    with tempfile.TemporaryDirectory() as tmp:
        saved = pathlib.Path(tmp) / f"{chapter}.ipynb"
        saved.write_text(text, encoding="utf-8")
        ok, lines = selfcheck(saved, chapter, edition)
    print("\n".join(lines).replace(saved.name, say("selfcheck: this notebook").render(edition), 1))
    return ok
