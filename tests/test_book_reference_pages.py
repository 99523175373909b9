"""The book's diagrams and reference pages, read from the page sources (no book build).

* chapters 1–7 and the intro draw an architecture diagram with the shared helper `book/diagrams.py`, in a
  cell whose input is hidden and which carries a figure caption; every such diagram, drawn here, fits the text
  column 1:1 and has no text smaller than the shared style's smallest size;
* every chapter page links the bibliography, the glossary and the notation page, and every citation
  "Author et al. YEAR" / "Author & Author YEAR" on any page is listed in `book/bibliography.md`, whose entries are
  sorted and link well-formed arXiv identifiers or DOIs; the reference pages and the outlook are in `_toc.yml`;
* the glossary is sorted, every entry has its Chinese name and links (a MyST label) the chapter section that
  introduces it, that chapter's page writes the Chinese name, and jieba — with the glossary's terms added, as
  `book/_ext/chinese_search.py` does in the build — cuts it out of that page as one search word; every chapter
  has entries;
* when a built book is present (`_build/html`, after `make book`), its search index maps each glossary term's
  Chinese name to the chapter page that introduces it (skipped without a build).
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
HTML = ROOT / "_build" / "html"
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
def test_chapter_links_the_reference_pages(page):
    text = page.read_text()
    for name in ("bibliography", "glossary", "notation"):
        assert f"]({name}.md)" in text, f"{page.name} does not link book/{name}.md"


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
    for name in ("glossary", "notation", "bibliography", "outlook"):
        assert f"file: book/{name}\n" in toc
    files = re.findall(r"file: book/(\w+)", toc)
    last_chapter = max(i for i, f in enumerate(files) if re.fullmatch(r"ch\d\d_\w+", f))
    assert files.index("outlook") == last_chapter + 1, "the outlook comes right after the last chapter"


def test_outlook_links_every_chapter():
    text = (BOOK / "outlook.md").read_text()
    missing = [p.name for p in CHAPTERS if f"]({p.name})" not in text]
    assert not missing, f"book/outlook.md does not link {missing}"
    assert "](bibliography.md)" in text and "](glossary.md)" in text


def test_chapter_titles_share_one_style():
    for page in CHAPTERS:
        title = re.search(r"^# (.*)$", page.read_text(), re.M).group(1)
        assert re.fullmatch(rf"{int(page.name[2:4])}\. [^()]+ \([^()]*[\u4e00-\u9fff][^()]*\)", title), title


# --- bibliography entries ------------------------------------------------------------------------------------------

ARXIV = re.compile(r"\[arXiv:([^\]]+)\]\(https://arxiv\.org/abs/([^)]+)\)")
DOI = re.compile(r"\[doi:([^\]]+)\]\(https://doi\.org/([^)]+)\)")
PDF = re.compile(r"\[PDF\]\((https://[^)\s]+\.pdf)\)")


def bibliography_entries() -> list[str]:
    return (BOOK / "bibliography.md").read_text().split("\n* ")[1:]


def test_bibliography_entries_link_well_formed_identifiers():
    problems = []
    for entry in bibliography_entries():
        head = re.match(r"\*\*(.+?)\*\*", entry).group(1)
        arxiv, doi, pdf = ARXIV.findall(entry), DOI.findall(entry), PDF.findall(entry)
        if not (arxiv or doi or pdf):
            problems.append(f"{head}: no arXiv, DOI or PDF link")
        for label, target in arxiv:
            if label != target or not re.fullmatch(r"\d{4}\.\d{4,5}", target):
                problems.append(f"{head}: arXiv link [{label}] -> {target}")
            elif not 1 <= int(target[2:4]) <= 12:
                problems.append(f"{head}: arXiv identifier {target} has no month {target[2:4]}")
        for label, target in doi:
            if label != target or not re.fullmatch(r"10\.\d{4,9}/\S+", target):
                problems.append(f"{head}: DOI link [{label}] -> {target}")
        stray = len(re.findall(r"\]\(https?://", entry)) - len(arxiv) - len(doi) - len(pdf)
        if stray:
            problems.append(f"{head}: {stray} link(s) that are neither arXiv, DOI nor PDF")
        year = re.search(r"(?:19|20)\d\d", head).group(0)
        for _, target in arxiv:  # an arXiv identifier starts with the last two digits of its year
            if int(target[:2]) > int(year[2:]):
                problems.append(f"{head}: arXiv {target} is later than the cited year {year}")
    assert not problems, "; ".join(problems)


def test_bibliography_is_sorted_and_links_existing_pages():
    keys = []
    for entry in bibliography_entries():
        head = re.match(r"\*\*(.+?)\*\*", entry).group(1)
        keys.append((head.split()[0].lower(), re.search(r"(?:19|20)\d\d", head).group(0)))
        for page in re.findall(r"\]\((\w+\.md)\)", entry):
            assert (BOOK / page).exists(), f"{head} links book/{page}, which does not exist"
    assert keys == sorted(keys), "bibliography entries are not sorted by first author, then year"
    assert len(set(keys)) == len(keys), "a paper is listed twice"


# --- glossary ------------------------------------------------------------------------------------------------------


def _chinese_search():
    spec = importlib.util.spec_from_file_location("chinese_search", BOOK / "_ext" / "chinese_search.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = re.compile(r"^\{ref\}`(\d+) · [^<>`]+ <(ch(\d\d)-[\w-]+)>`$")
CJK = re.compile(r"[\u4e00-\u9fff]")


def sort_key(term: str) -> str:
    """How the glossary is sorted: case, punctuation and code marks ignored, hyphens read as spaces."""
    return re.sub(r"[^a-z0-9 ]", "", term.lower().replace("-", " "))


def glossary() -> list[list[str]]:
    return _chinese_search().glossary_rows((BOOK / "glossary.md").read_text())


def chapter_page(number: str) -> pathlib.Path:
    (page,) = BOOK.glob(f"ch{number}_*.md")
    return page


def test_glossary_is_sorted_and_complete():
    rows = glossary()
    assert len(rows) >= 60
    terms = [row[0] for row in rows]
    assert terms == sorted(terms, key=sort_key), "glossary entries are not in alphabetical order"
    assert len({sort_key(t) for t in terms}) == len(terms), "a term is listed twice"
    per_chapter: dict[int, int] = {}
    for row in rows:
        assert len(row) == 4, f"glossary row {row[0]!r} does not have 4 cells (term, 中文, meaning, link)"
        term, chinese, meaning, link = row
        assert CJK.search(chinese), f"{term!r} has no Chinese name"
        assert meaning, f"{term!r} has no meaning"
        m = REF.match(link)
        assert m, f"{term!r}: the last cell must be {{ref}}`N · Section <chNN-label>`, not {link!r}"
        assert int(m[1]) == int(m[3]), f"{term!r}: link text says chapter {m[1]}, label is {m[2]}"
        per_chapter[int(m[1])] = per_chapter.get(int(m[1]), 0) + 1
    chapters = sorted(int(p.name[2:4]) for p in CHAPTERS)
    thin = [n for n in chapters if per_chapter.get(n, 0) < 3]
    assert not thin, f"chapters with fewer than 3 glossary terms: {thin}"


def test_glossary_links_a_labelled_section_whose_page_writes_the_chinese_name():
    problems = []
    for term, chinese, _, link in glossary():
        m = REF.match(link)
        page = chapter_page(m[3])
        text = page.read_text()
        if not re.search(rf"^\({re.escape(m[2])}\)=\n#+ ", text, re.M):
            problems.append(f"{term!r}: no label ({m[2]})= before a heading in {page.name}")
        if chinese.replace(" ", "") not in text.replace(" ", ""):
            problems.append(f"{term!r}: {page.name} does not write {chinese}")
    assert not problems, "; ".join(problems)


def test_glossary_terms_are_search_words_on_their_pages():
    jieba = pytest.importorskip("jieba")
    search = _chinese_search()
    search.add_terms_to_jieba(search.glossary_terms())
    words_of = {}
    problems = []
    for term, chinese, _, link in glossary():
        page = chapter_page(REF.match(link)[3])
        if page not in words_of:
            words_of[page] = set(jieba.cut_for_search(page.read_text()))
        problems += [f"{term!r}: {w} in {page.name}" for w in search.chinese_words(chinese) if w not in words_of[page]]
    assert not problems, "not one search word: " + "; ".join(problems)


def test_chinese_search_is_configured():
    config = (ROOT / "_config.yml").read_text()
    assert re.search(r"^\s+html_search_language: zh\b", config, re.M)
    assert re.search(r"^\s+chinese_search: book/_ext\b", config, re.M)
    assert re.search(r"^jieba\b", (ROOT / "requirements.txt").read_text(), re.M)
    words = _chinese_search().glossary_terms()
    assert "自注意力" in words and all(len(w) >= 2 and CJK.search(w) for w in words)


def built_search_index() -> dict:
    index = HTML / "searchindex.js"
    if not index.exists():
        pytest.skip("no built book (_build/html/searchindex.js): run `make book` first")
    text = index.read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def test_built_search_index_finds_chinese_terms_on_chapter_pages():
    index = built_search_index()
    docs = index["docnames"]
    problems = []
    for term, chinese, _, link in glossary():
        doc = f"book/{chapter_page(REF.match(link)[3]).stem}"
        for word in _chinese_search().chinese_words(chinese):
            found = []
            for table in ("terms", "titleterms"):
                hits = index[table].get(word, [])
                found += [docs[i] for i in ([hits] if isinstance(hits, int) else hits)]
            if doc not in found:
                problems.append(f"{word} ({term}) -> {sorted(set(found))}, not {doc}")
    assert not problems, "the search index misses: " + "; ".join(problems)


def test_built_book_check_finds_leaked_object_reprs():
    """`tests.check_built_book` fails a page that prints an object's repr (as ch05 did with a Legend)."""
    from tests.check_built_book import leaked_reprs

    leaked = (
        "<pre>&lt;matplotlib.legend.Legend at 0x7f6830e58c50&gt;</pre><pre>&lt;Figure size 640x480 with 1 Axes&gt;</pre>"
        "<pre>&lt;object object at 0xdeadbeef&gt;</pre>"
    )
    assert leaked_reprs(leaked) == [
        "&lt;matplotlib.legend.Legend at 0x7f6830e58c50&gt;",
        "&lt;Figure size 640x480 with 1 Axes&gt;",
        "&lt;object object at 0xdeadbeef&gt;",
    ]
    # what pages legitimately show: masks and shapes in angle brackets, HTML itself, a tensor's repr
    assert leaked_reprs("<p>x &lt; y and &lt;pad&gt; tokens</p><pre>tensor([1, 2])</pre>") == []
