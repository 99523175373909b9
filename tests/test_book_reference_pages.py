"""The book's diagrams and reference pages, read from the page sources (no book build).

* chapters 1–7 and the intro draw an architecture diagram with the shared helper `book/diagrams.py`, in a
  cell whose input is hidden and which carries a figure caption; every such diagram, drawn here, fits the text
  column 1:1 and has no text smaller than the shared style's smallest size;
* every chapter page links the bibliography, the glossary and the notation page, and every citation
  "Author et al. YEAR" / "Author & Author YEAR" on any page is listed in `book/bibliography.md`, whose entries are
  sorted and link well-formed arXiv identifiers or DOIs (a PDF or a blog post where there is none); the reference
  pages and the outlook are in `_toc.yml`;
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
CHAPTERS = sorted(p for p in BOOK.glob("ch[0-9][0-9]_*.md") if not p.name.endswith(".zh.md"))  # English pages
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
    for page in sorted(p for p in BOOK.glob("*.md") if not p.name.endswith(".zh.md")):
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
POST = re.compile(r"\[blog post\]\((https://[^)\s]+)\)")  # a blog post without a paper (Dao et al. 2023)


def bibliography_entries() -> list[str]:
    return (BOOK / "bibliography.md").read_text().split("\n* ")[1:]


def test_bibliography_entries_link_well_formed_identifiers():
    problems = []
    for entry in bibliography_entries():
        head = re.match(r"\*\*(.+?)\*\*", entry).group(1)
        arxiv, doi, pdf, post = ARXIV.findall(entry), DOI.findall(entry), PDF.findall(entry), POST.findall(entry)
        if not (arxiv or doi or pdf or post):
            problems.append(f"{head}: no arXiv, DOI, PDF or blog post link")
        for label, target in arxiv:
            if label != target or not re.fullmatch(r"\d{4}\.\d{4,5}", target):
                problems.append(f"{head}: arXiv link [{label}] -> {target}")
            elif not 1 <= int(target[2:4]) <= 12:
                problems.append(f"{head}: arXiv identifier {target} has no month {target[2:4]}")
        for label, target in doi:
            if label != target or not re.fullmatch(r"10\.\d{4,9}/\S+", target):
                problems.append(f"{head}: DOI link [{label}] -> {target}")
        stray = len(re.findall(r"\]\(https?://", entry)) - len(arxiv) - len(doi) - len(pdf) - len(post)
        if stray:
            problems.append(f"{head}: {stray} link(s) that are neither arXiv, DOI, PDF nor a blog post")
        year = re.search(r"(?:19|20)\d\d", head).group(0)
        for _, target in arxiv:  # an arXiv identifier starts with the last two digits of its year
            if int(target[:2]) > int(year[2:]):
                problems.append(f"{head}: arXiv {target} is later than the cited year {year}")
    assert not problems, "; ".join(problems)


def test_bibliography_is_sorted_and_links_existing_pages():
    keys = []
    for entry in bibliography_entries():
        head = re.match(r"\*\*(.+?)\*\*", entry).group(1)
        # "Dao 2023" before "Dao et al. 2023": one author's year before a team's
        keys.append((head.split()[0].lower(), re.search(r"(?:19|20)\d\d", head).group(0), head))
        for page in re.findall(r"\]\((\w+\.md)\)", entry):
            assert (BOOK / page).exists(), f"{head} links book/{page}, which does not exist"
    assert keys == sorted(keys), "bibliography entries are not sorted by first author, then year"
    assert len(set(keys)) == len(keys), "a paper is listed twice"


def citation_pattern(head: str) -> str:
    """The regular expression of the ways the pages cite the entry whose head is ``head`` (whitespace collapsed):
    "Radford et al. 2019" also as "Radford et al. (2019" and "Beltagy, Peters & Cohan 2020"; "Gu & Dao 2023";
    "Dao 2023" (not inside "Gu & Dao 2023")."""
    if m := re.fullmatch(r"(\S+) et al\. (\d{4})", head):
        return rf"\b{re.escape(m[1])}(?: et al\.|(?:, [A-Z][\w-]+)+,? & [A-Z][\w-]+),? \(?{m[2]}\b"
    if m := re.fullmatch(r"(\S+) & (\S+) (\d{4})", head):
        return rf"\b{re.escape(m[1])} & {re.escape(m[2])},? \(?{m[3]}\b"
    m = re.fullmatch(r"(\S+) (\d{4})", head)
    assert m, f"a bibliography head of no known form: {head!r}"
    return rf"(?<!& )\b{re.escape(m[1])},? \(?{m[2]}\b"


def test_bibliography_entries_link_every_page_that_cites_them():
    """Each entry links back to every chapter, the introduction and the outlook where it is cited (a missing
    "Chapter [7](ch07_bert.md)" for Radford et al. 2019 fails here), and no entry holds a second copy of its text."""
    pages = [
        p
        for p in sorted(BOOK.glob("*.md"))
        if p.stem not in ("bibliography", "glossary", "notation") and not p.name.endswith(".zh.md")
    ]
    texts = {p.name: " ".join(p.read_text().split()) for p in pages}
    assert citation_pattern("Gu & Dao 2023") and not re.search(citation_pattern("Dao 2023"), "Gu & Dao 2023")
    assert re.search(citation_pattern("Beltagy et al. 2020"), "(Beltagy, Peters & Cohan 2020)")
    missing = []
    for entry in bibliography_entries():
        head = re.match(r"\*\*(.+?)\*\*", entry).group(1)
        linked = set(re.findall(r"\]\((\w+\.md)\)", entry))
        missing += [f"{head}: {name}" for name, text in texts.items() if re.search(citation_pattern(head), text)
                    and name not in linked]  # fmt: skip
        body = " ".join(entry.split())
        assert len(re.findall(r"\[arXiv:", body)) <= 1 and body.count(" — ") == 1, f"{head}: a duplicated fragment"
    assert not missing, "bibliography entries that do not link a page citing them: " + "; ".join(missing)


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
    (page,) = (p for p in BOOK.glob(f"ch{number}_*.md") if not p.name.endswith(".zh.md"))
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


def test_glossary_chinese_column_does_not_break_inside_a_term():
    """The book's CSS keeps each 中文 cell's terms whole (no 加性注意/力 at a line end): the rule targets the second
    column of the table in the glossary's section, whose id comes from its title "Glossary"."""
    text = (BOOK / "glossary.md").read_text()
    assert re.search(r"^# Glossary\b", text, re.M) and re.search(r"^\| term \| 中文 \|", text, re.M)
    css = re.sub(r"/\*.*?\*/", "", (ROOT / "_static" / "course.css").read_text(), flags=re.S)
    rule = re.search(r"section#glossary table td:nth-child\(2\)\s*\{([^}]*)\}", css)
    assert rule and re.search(r"word-break:\s*keep-all|white-space:\s*nowrap", rule[1])


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


def test_synonyms_belong_to_glossary_terms_and_no_name_has_two_sections():
    """`SYNONYMS` keys are glossary term cells, and no search name (case ignored) is given to two sections, so the
    exact match of a name ranks one page first."""
    search = _chinese_search()
    terms = {row[0] for row in glossary()}
    assert set(search.SYNONYMS) <= terms, f"SYNONYMS for no glossary term: {sorted(set(search.SYNONYMS) - terms)}"
    owner: dict[str, str] = {}
    for label, names in search.search_entries().items():
        for name in names:
            assert owner.setdefault(name.lower(), label) == label, f"{name!r} names {owner[name.lower()]} and {label}"
    causal = [row for row in glossary() if row[0].startswith("causal mask")][0]
    assert search.search_names(causal) == ["causal mask", "look-ahead mask", "因果掩码", "前瞻掩码"]
    learned = [row for row in glossary() if row[0] == "position embedding (learned)"][0]
    assert "learned" not in search.search_names(learned)


def search_results(index: dict, query: str) -> list[str]:
    """The pages that Sphinx's search page (searchtools.js, Sphinx 7.4) lists for a one-word query, best first: main
    index entries that contain the query and are at most twice its length score 100 · len(query) / len(entry), a
    page's words 5 and its title words 15; a page keeps its best score, ties in page order."""
    q = query.lower().strip()
    docs, score = index["docnames"], {}
    for entry, found in index["indexentries"].items():
        if q in entry and len(q) >= len(entry) / 2:
            for file, _, main in found:
                if main:
                    score[docs[file]] = max(score.get(docs[file], 0), round(100 * len(q) / len(entry)))
    for table, points in (("terms", 5), ("titleterms", 15)):
        hits = index[table].get(q, [])
        for file in [hits] if isinstance(hits, int) else hits:
            score[docs[file]] = max(score.get(docs[file], 0), points)
    return sorted(score, key=lambda d: -score[d])


@pytest.fixture(scope="module")
def unbuilt_search_index() -> dict:
    """Sphinx's own `IndexBuilder` (Chinese, jieba) fed every chapter page's source as text, with the index entries
    that `book/_ext/chinese_search.py` adds in the build, frozen as `searchindex.js` stores it: no book build."""
    pytest.importorskip("jieba")
    from types import SimpleNamespace

    from docutils import nodes
    from docutils.utils import new_document
    from sphinx.search import IndexBuilder

    search = _chinese_search()
    search.add_terms_to_jieba(search.glossary_terms())
    labels = {}  # as Sphinx's standard domain holds them: label -> (docname, section id, section name)
    for page in CHAPTERS:
        for label, heading in re.findall(r"^\((ch\d\d-[\w-]+)\)=\n#+ (.*)$", page.read_text(), re.M):
            labels[label] = (f"book/{page.stem}", label, heading)
    stores = ("titles", "filenames", "mapping", "title_mapping", "all_titles", "index_entries", "objtypes", "objnames")
    env = SimpleNamespace(domains={}, version=0, **{f"_search_index_{name}": {} for name in stores})
    env.get_domain = lambda name: SimpleNamespace(labels=labels)
    indexer = IndexBuilder(env, "zh", {}, "")
    for page in CHAPTERS:
        docname, text = f"book/{page.stem}", page.read_text()
        title = re.search(r"^# (.*)$", text, re.M)[1]
        doctree = new_document(page.name)
        section = nodes.section(ids=[page.stem])
        section += [nodes.title("", title), nodes.paragraph("", text)]
        doctree += section
        search.add_index_entries(SimpleNamespace(env=env), doctree, docname)
        indexer.feed(docname, page.name, title, doctree)
    return indexer.freeze()


def test_search_finds_each_glossary_name_first_on_its_page_without_a_build(unbuilt_search_index):
    """Every name of a glossary term (English, its parentheses, 中文, `SYNONYMS`) lists the page that introduces it
    first; the cases of issue 28: 键值缓存 finds chapter 8 (which writes only "KV 缓存"), 位置编码 finds chapter 5 and
    chapter 8's 旋转位置编码, and softmax — a word of many pages — lists chapter 3 first."""
    index, search = unbuilt_search_index, _chinese_search()
    problems = []
    for label, names in search.search_entries().items():
        page = f"book/{chapter_page(label[2:4]).stem}"
        for name in names:
            found = search_results(index, name)
            if found[:1] != [page]:
                problems.append(f"{name!r} -> {found[:3]}, not {page} first")
    assert not problems, "; ".join(problems)
    assert search_results(index, "键值缓存")[0] == "book/ch08_kv_cache"
    assert "键值缓存" not in (BOOK / "ch08_kv_cache.md").read_text()
    assert {"book/ch05_transformer", "book/ch08_kv_cache"} <= set(search_results(index, "位置编码"))
    softmax = search_results(index, "softmax")
    assert softmax[0] == "book/ch03_self_attention" and len(softmax) >= 5


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


def test_built_search_index_lists_each_glossary_name_first_on_its_page():
    """In the built book too: every search name of a glossary term (`search_names`) lists its page first."""
    index = built_search_index()
    search = _chinese_search()
    problems = []
    for label, names in search.search_entries().items():
        page = f"book/{chapter_page(label[2:4]).stem}"
        problems += [
            f"{n!r} -> {search_results(index, n)[:3]}" for n in names if search_results(index, n)[:1] != [page]
        ]
    assert not problems, "the built search index ranks another page first: " + "; ".join(problems)


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


def test_figures_are_numbered_by_chapter():
    """book/_ext/figure_numbers.py: chapter 11's first figure is Fig. 11.1 in both editions, the intro's Fig. 1; a
    page's figures keep their order; both configurations load the extension."""
    spec = importlib.util.spec_from_file_location("figure_numbers", BOOK / "_ext" / "figure_numbers.py")
    figure_numbers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure_numbers)
    book_wide = {
        "book/intro": {"figure": {"fig-roadmap": (1,)}},
        "book/ch01_seq2seq": {"figure": {"fig-b": (3,), "fig-a": (2,)}, "table": {"t": (1,)}},
        "book/ch11_flash_attention_triton.zh": {"figure": {"fig-tiles": (9,)}},
    }
    assert figure_numbers.per_chapter(book_wide) == {
        "book/intro": {"figure": {"fig-roadmap": (1,)}},
        "book/ch01_seq2seq": {"figure": {"fig-a": (1, 1), "fig-b": (1, 2)}, "table": {"t": (1, 1)}},
        "book/ch11_flash_attention_triton.zh": {"figure": {"fig-tiles": (11, 1)}},
    }
    for config in ("_config.yml", "_config.zh.yml"):
        assert re.search(r"^\s+figure_numbers: book/_ext", (ROOT / config).read_text(), re.M), config


def test_inline_math_keeps_the_punctuation_beside_it():
    """book/_ext/inline_math.py: "$x$," and "（$x$，" become one unbreakable span (`_static/course.css`); the text
    around it and math without punctuation beside it stay as they were."""
    from docutils import nodes

    spec = importlib.util.spec_from_file_location("inline_math", BOOK / "_ext" / "inline_math.py")
    inline_math = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inline_math)
    paragraph = nodes.paragraph(
        "",
        "",
        nodes.Text("with "),
        nodes.math("x", "x"),
        nodes.Text(", and ("),
        nodes.math("y", "y"),
        nodes.Text(") then "),
        nodes.math("z", "z"),
        nodes.Text(" 和（"),
        nodes.math("w", "w"),
        nodes.Text("）。"),
    )
    assert inline_math.glue_punctuation(paragraph) == 3
    html = "".join(
        f"<{n['classes'][0]}:{n.astext()}>" if isinstance(n, nodes.inline) else n.astext() for n in paragraph.children
    )
    assert html == "with <math-nowrap:x,> and <math-nowrap:(y)> then z 和<math-nowrap:（w）。>"
    assert inline_math.glue_punctuation(paragraph) == 0  # already glued
    assert "span.math-nowrap" in (ROOT / "_static" / "course.css").read_text()
    for config in ("_config.yml", "_config.zh.yml"):
        assert re.search(r"^\s+inline_math: book/_ext", (ROOT / config).read_text(), re.M), config
