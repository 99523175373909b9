"""The Chinese edition (中文版), kept in step with the English one.

A Chinese page is ``book/<stem>.zh.md`` beside its English page ``book/<stem>.md``: the prose translated, every code
cell byte for byte the English page's (so figures and numbers come from the same cells and results files, and the
execution cache serves both). Its front matter records what it translates::

    translation:
      source: book/ch03_self_attention.md
      sections: {"(ch03-self-attention)= # 3. Self-attention ...": "3f2a…", ...}

one hash per section of the English page (a section runs from one heading to the next). When an English section
changes, :func:`stale` names it; ``python -m scripts.build_notebooks translations check`` lists every stale page (a test runs it),
``python -m scripts.build_notebooks translations stamp book/<stem>.zh.md`` records the English page's current sections once the
translation is brought up to date.

A chapter's Chinese student notebook, ``notebooks/zh/<chapter>.ipynb``, is built by ``python -m scripts.build_notebooks``
from the same sources: the English release notebook with its markdown cells replaced by
``notebooks/templates/zh/<chapter>.md``, a list of cells separated by lines ``<!-- cell HASH -->`` (HASH: the first 12
hex digits of the SHA-256 of the English cell it translates, so a changed English cell makes the notebook stale).
Code cells, cell ids, grade ids and points are the English notebook's: the grader grades either edition alike. The
requirement lists the build generates below each exercise's instructions (cells with ``requirements`` metadata) are not
in the text: they are written from the checks' ``requires=`` declarations and the chapter's catalogue.
"""

from __future__ import annotations

import hashlib
import pathlib
import re

from autograder.notebooks import ROOT

BOOK = ROOT / "book"
ZH_TEMPLATES = ROOT / "notebooks" / "templates" / "zh"
_FENCE = re.compile(r"^(```+|~~~+)")


def digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:12]


def _body(text: str) -> str:
    """The page without its front matter."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5 :]
    return text


def front_matter(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[4:end]
    return ""


def sections(text: str) -> dict[str, str]:
    """Section title -> hash of the section's text, for an English page. A section starts at a heading line (``#``
    outside code cells, with the label line just above it) and runs to the next; the text before the first heading is
    the section "(top)". Titles that repeat get " (2)", " (3)" ..."""
    lines = _body(text).splitlines()
    parts: list[tuple[str, list[str]]] = [("(top)", [])]
    fence = None
    for line in lines:
        m = _FENCE.match(line)
        if m:
            fence = None if fence and line.startswith(fence) else (fence or m.group(1))
        if fence is None and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip()
            label = parts[-1][1].pop() if parts[-1][1] and re.match(r"^\(.+\)=\s*$", parts[-1][1][-1]) else None
            parts.append((title, [label] if label else []))
        parts[-1][1].append(line)
    out: dict[str, str] = {}
    for title, body in parts:
        key, n = title, 2
        while key in out:
            key, n = f"{title} ({n})", n + 1
        out[key] = digest("\n".join(body))
    return out


def code_cells(text: str) -> list[str]:
    """The page's ``{code-cell}`` blocks, in order, each as written."""
    cells, current, fence = [], None, None
    for line in _body(text).splitlines():
        if current is None:
            m = re.match(r"^(```+|~~~+)\{code-cell\}", line)
            if m:
                current, fence = [line], m.group(1)
            continue
        current.append(line)
        if line.strip() == fence:
            cells.append("\n".join(current))
            current = None
    return cells


def chinese_pages() -> list[pathlib.Path]:
    return sorted(BOOK.glob("*.zh.md"))


def english_of(zh: pathlib.Path) -> pathlib.Path:
    return zh.with_name(zh.name.removesuffix(".zh.md") + ".md")


def recorded(zh_text: str) -> dict[str, str]:
    """The English sections a Chinese page says it translates (its front matter's translation.sections)."""
    import yaml

    meta = yaml.safe_load(front_matter(zh_text)) or {}
    return dict((meta.get("translation") or {}).get("sections") or {})


def stale(zh: pathlib.Path) -> list[str]:
    """What changed in the English page since ``zh`` was stamped: one line per changed, new or removed section."""
    now = sections(english_of(zh).read_text())
    then = recorded(zh.read_text())
    out = [f"changed: {t}" for t, h in now.items() if t in then and then[t] != h]
    out += [f"new: {t}" for t in now if t not in then]
    out += [f"removed: {t}" for t in then if t not in now]
    return out


def stamp(zh: pathlib.Path) -> None:
    """Record the English page's current sections in ``zh``'s front matter (after bringing the translation up to
    date)."""
    import yaml

    text = zh.read_text()
    meta = yaml.safe_load(front_matter(text)) or {}
    meta["translation"] = {
        "source": str(english_of(zh).relative_to(ROOT)),
        "sections": sections(english_of(zh).read_text()),
    }
    head = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=1000)
    zh.write_text("---\n" + head + "---\n" + _body(text))


# ---------------------------------------------------------------------------------------------- notebooks


def notebook_translation(chapter: str) -> list[tuple[str, str]] | None:
    """(hash of the English cell, Chinese text) per markdown cell, from ``templates/zh/<chapter>.md``; None when the
    chapter has no Chinese notebook yet."""
    path = ZH_TEMPLATES / f"{chapter}.md"
    if not path.exists():
        return None
    parts = re.split(r"^<!-- cell ([0-9a-f]{12}) -->\n", path.read_text(), flags=re.M)
    return [(parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts), 2)]


def translate_notebook(release, chapter: str):
    """The Chinese release notebook: ``release`` (the English one, not changed) with its markdown cells translated.

    Raises ValueError naming the cells when the translation does not fit the English cells (a changed English
    cell: its hash differs; a cell added or removed: the counts differ)."""
    import copy

    cells = notebook_translation(chapter)
    if cells is None:
        raise ValueError(f"{chapter} has no Chinese notebook text ({ZH_TEMPLATES / (chapter + '.md')})")
    from autograder.releases import checks_module, released_test_source

    from .requirements import points_problems, requirements_markdown

    nb = copy.deepcopy(release)
    exercises = checks_module(chapter).EXERCISES
    names = {ex.name for ex in exercises}
    for c in nb.cells:  # generated from the checks' requires= and the catalogue, not translated by hand
        if "requirements" in c.metadata:
            c.source = requirements_markdown(exercises[c.metadata["requirements"]], "zh")
        grade_id = str(c.metadata.get("nbgrader", {}).get("grade_id", ""))
        if c.cell_type == "code" and grade_id.removeprefix("test_") in names and grade_id.startswith("test_"):
            # the check cells print Chinese (EXERCISES.run(..., edition="zh")), their comment Chinese too
            ex = exercises[grade_id.removeprefix("test_")]
            c.source = released_test_source(ex.name, ex.points, "zh")
    md = _translated_cells(nb)
    if len(md) != len(cells):
        raise ValueError(f"{chapter}: {len(md)} markdown cells in English, {len(cells)} in the Chinese notebook text")
    wrong = [i for i, (c, (h, _)) in enumerate(zip(md, cells)) if digest(c.source) != h]
    if wrong:
        raise ValueError(
            f"{chapter}: the English text of markdown cell(s) {wrong} changed since they were translated "
            f"(first: {md[wrong[0]].source[:80]!r})"
        )
    for c, (_, text) in zip(md, cells):
        c.source = text
    problems = points_problems(chapter, [c.source for c in nb.cells if c.cell_type == "markdown"], "zh")
    if problems:
        raise ValueError("\n".join(problems))
    return nb  # metadata as the English notebook's: the grader canonicalises either edition to the same notebook


def _translated_cells(nb) -> list:
    """The markdown cells a Chinese notebook text translates: all but the generated requirement lists."""
    return [c for c in nb.cells if c.cell_type == "markdown" and "requirements" not in c.metadata]


def notebook_skeleton(release) -> str:
    """A ``templates/zh/<chapter>.md`` to translate: every English markdown cell under its hash (not the generated
    requirement lists: the build writes their Chinese from the chapter's catalogue)."""
    return "".join(f"<!-- cell {digest(c.source)} -->\n{c.source}\n\n" for c in _translated_cells(release))


def notebook_stale(chapter: str, release) -> list[str]:
    try:
        translate_notebook(release, chapter)
    except ValueError as err:
        return [str(err)]
    return []
