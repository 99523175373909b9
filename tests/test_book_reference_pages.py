"""The book's diagrams and reference pages, read from the page sources (no book build).

* chapters 1–7 and the intro draw an architecture diagram with the shared helper `book/diagrams.py`, in a
  cell whose input is hidden and which carries a figure caption; every such diagram, drawn here, fits the text
  column 1:1 and has no text smaller than the shared style's smallest size;
* every chapter page links the bibliography, and every citation "Author et al. YEAR" / "Author & Author YEAR"
  on any page is listed in `book/bibliography.md`; the reference pages are in `_toc.yml`.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
CHAPTERS = sorted(BOOK.glob("ch[0-9][0-9]_*.md"))
# Chapters 8-10 draw their diagrams (cache steps, sparse masks, tiles) from their solution modules' own masks.
DIAGRAM_PAGES = [p for p in CHAPTERS if int(p.name[2:4]) <= 7] + [BOOK / "intro.md"]
CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)
# "Vaswani et al. 2017", "Bahdanau et al. (2014", "Press & Wolf 2017", "Beltagy, Peters & Cohan 2020"
CITATION = re.compile(r"\b([A-Z][\w-]+)(?: et al\.| & [A-Z][\w-]+),? \(?((?:19|20)\d\d)\b")


def cells(page: pathlib.Path) -> list[str]:
    return CELL.findall(page.read_text())


def diagram_cells(page: pathlib.Path) -> list[str]:
    return [c for c in cells(page) if "Diagram(" in c]


def test_the_lists_are_not_empty():
    assert len(CHAPTERS) >= 10 and len(DIAGRAM_PAGES) >= 8


@pytest.mark.parametrize("page", DIAGRAM_PAGES, ids=lambda p: p.stem)
def test_page_draws_a_diagram_with_the_shared_helper(page):
    code = "\n".join(cells(page))
    assert "from diagrams import Diagram" in code, f"{page.name} does not import the drawing helper"
    found = diagram_cells(page)
    assert found, f"{page.name} draws no diagram with book/diagrams.py"
    for cell in found:
        head = cell.split("\n---\n", 1)[0] if cell.startswith("---\n") else ""
        assert "remove-input" in head, f"{page.name}: a diagram cell must hide its code (tags: [remove-input])"
        assert re.search(r"^\s+caption:", head, re.M), f"{page.name}: a diagram cell needs mystnb figure caption"


@pytest.mark.parametrize("page", DIAGRAM_PAGES, ids=lambda p: p.stem)
def test_diagrams_fit_the_column_and_are_legible(page, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from tests.check_book_in_browser import style_text_metrics

    min_pt, dpi = style_text_metrics()
    monkeypatch.chdir(BOOK)
    monkeypatch.syspath_prepend(str(BOOK))
    sys.modules.pop("diagrams", None)
    from diagrams import Diagram

    column_inches = 690 / dpi  # the text column, CSS px (tests/check_book_in_browser.py)
    shown: list = []
    monkeypatch.setattr(plt, "show", lambda *a, **k: shown.append(plt.gcf()))
    with plt.style.context(os.fspath(BOOK / "figures.mplstyle")):
        for cell in diagram_cells(page):
            body = cell.split("\n---\n", 1)[1] if cell.startswith("---\n") else cell
            shown.clear()
            exec(body, {"Diagram": Diagram, "plt": plt})
            assert len(shown) == 1, f"{page.name}: a diagram cell shows one figure"
            fig = shown[0]
            width = fig.get_figwidth()
            assert width <= column_inches, f"{page.name}: diagram {width} in wide, shrunk below 1:1"
            texts = [t for t in fig.findobj(Text) if t.get_text().strip()]
            assert texts, f"{page.name}: a diagram without labels"
            small = min(t.get_fontsize() for t in texts)
            assert small >= min_pt, f"{page.name}: diagram text of {small} pt, below the style's {min_pt} pt"
            plt.close("all")


@pytest.mark.parametrize("page", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_links_the_bibliography(page):
    assert "](bibliography.md)" in page.read_text(), f"{page.name} does not link book/bibliography.md"


def test_every_citation_is_in_the_bibliography():
    entries = [e for e in (BOOK / "bibliography.md").read_text().split("\n* ")[1:]]
    assert len(entries) >= 20
    missing = []
    for page in sorted(BOOK.glob("*.md")):
        if page.name == "bibliography.md":
            continue
        for name, year in set(CITATION.findall(page.read_text())):
            if not any(name in e and year in e for e in entries):
                missing.append(f"{page.name}: {name} {year}")
    assert not missing, "cited but not in book/bibliography.md: " + "; ".join(sorted(missing))


def test_citation_pattern_finds_the_forms_the_pages_use():
    text = "(Vaswani et al. 2017, eq. 1), Bahdanau et al. (2014), Beltagy, Peters & Cohan 2020, NeurIPS 2014"
    assert sorted(CITATION.findall(text)) == [("Bahdanau", "2014"), ("Peters", "2020"), ("Vaswani", "2017")]


def test_reference_pages_are_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for name in ("glossary", "notation", "bibliography"):
        assert f"file: book/{name}\n" in toc


def test_chapter_titles_share_one_style():
    for page in CHAPTERS:
        title = re.search(r"^# (.*)$", page.read_text(), re.M).group(1)
        assert re.fullmatch(rf"{int(page.name[2:4])}\. [^()]+ \([^()]*[\u4e00-\u9fff][^()]*\)", title), title
