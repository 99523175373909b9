"""The Chinese edition (中文版) is complete and in step with the English one (scripts/build_notebooks/translations.py)."""

from __future__ import annotations

import pathlib
import re
import sys

import nbformat
import pytest
import yaml

import catalogue
from autograder import canonical, notebooks, releases
from scripts.build_notebooks import notebooks as builder
from scripts.build_notebooks import translations

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import edition  # noqa: E402  (book/_ext is the book's extension folder, not a package)

ZH_PAGES = translations.chinese_pages()
ZH_CHAPTERS = [c for c in notebooks.chapters() if translations.notebook_translation(c) is not None]


def _toc_files(path: pathlib.Path) -> list[str]:
    toc = yaml.safe_load(path.read_text())
    return [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def test_every_english_page_has_its_chinese_page_in_the_chinese_contents():
    english = _toc_files(ROOT / "_toc.yml")
    chinese = _toc_files(ROOT / "_toc.zh.yml")
    assert chinese == [f"{f}.zh" for f in english], "the Chinese contents list every English page, in order"
    missing = [f for f in chinese if not (ROOT / f"{f}.md").exists()]
    assert not missing, f"Chinese pages not written yet: {missing}"


def test_every_chapter_has_its_chinese_notebook():
    assert ZH_CHAPTERS == notebooks.chapters()
    for chapter in ZH_CHAPTERS:
        assert (notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb").exists()


@pytest.mark.parametrize("page", ZH_PAGES, ids=lambda p: p.name)
def test_chinese_page_is_in_step_with_its_english_page(page):
    assert translations.english_of(page).exists()
    assert translations.stale(page) == [], (
        f"{page.name}: the English page changed since it was translated; bring these sections up to date, then "
        f"`python -m scripts.build_notebooks translations stamp book/{page.name}`"
    )


@pytest.mark.parametrize("page", ZH_PAGES, ids=lambda p: p.name)
def test_chinese_page_runs_the_english_pages_code_cells(page):
    """Figures and numbers come from the same cells (and so the same results files), never retyped."""
    zh, en = page.read_text(), translations.english_of(page).read_text()
    assert translations.code_cells(zh) == translations.code_cells(en)
    assert translations.front_matter(en).strip() in translations.front_matter(zh)


@pytest.mark.parametrize("page", ZH_PAGES, ids=lambda p: p.name)
def test_chinese_page_keeps_the_english_pages_labels(page):
    import re

    labels = lambda text: re.findall(r"^\((.+)\)=\s*$", text, re.M)
    assert labels(page.read_text()) == labels(translations.english_of(page).read_text())


def test_a_changed_english_section_makes_its_chinese_page_stale(tmp_path, monkeypatch):
    en = tmp_path / "page.md"
    zh = tmp_path / "page.zh.md"
    en.write_text("---\nkernelspec: {}\n---\n\n# Title\n\nIntro.\n\n## One\n\nFirst.\n\n## Two\n\nSecond.\n")
    zh.write_text("---\nkernelspec: {}\n---\n\n# 标题\n\n引言。\n\n## 一\n\n第一。\n\n## 二\n\n第二。\n")
    monkeypatch.setattr(translations, "ROOT", tmp_path)
    translations.stamp(zh)
    assert translations.stale(zh) == []
    en.write_text(en.read_text().replace("Second.", "Second, changed."))
    assert translations.stale(zh) == ["changed: Two"]
    en.write_text(en.read_text() + "\n## Three\n\nNew.\n")
    assert "new: Three" in translations.stale(zh)
    assert "第一。" in zh.read_text()  # stamping keeps the translation


def _test_of(cell) -> str:
    """The exercise whose check cell ``cell`` is ("" for another cell)."""
    grade_id = str(cell.metadata.get("nbgrader", {}).get("grade_id", ""))
    return grade_id.removeprefix("test_") if grade_id.startswith("test_") else ""


@pytest.mark.parametrize("chapter", ZH_CHAPTERS)
def test_chinese_notebook_has_the_english_code_ids_and_points(chapter):
    release = builder.build_release(chapter)
    zh = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)
    assert [(c.cell_type, c.get("id"), c.metadata.get("nbgrader")) for c in zh.cells] == [
        (c.cell_type, c.get("id"), c.metadata.get("nbgrader")) for c in release.cells
    ]
    # the code as the English notebook's, but for the check cells: their comment Chinese, their output Chinese
    points = {ex.name: ex.points for ex in notebooks.checks_module(chapter).EXERCISES}
    assert [c.source for c in zh.cells if c.cell_type == "code"] == [
        releases.released_test_source(ex, points[ex], "zh") if (ex := _test_of(c)) in points else c.source
        for c in release.cells
        if c.cell_type == "code"
    ]
    prose = "".join(c.source for c in zh.cells if c.cell_type == "markdown")
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in prose) > len(prose) // 10, "the prose is Chinese"


@pytest.mark.parametrize("chapter", ZH_CHAPTERS)
def test_the_same_answers_in_either_edition_are_graded_alike(chapter):
    """The grader canonicalises a submission against the release notebook: the Chinese edition's notebook with
    the reference answers becomes the very notebook the English one does, so it scores the same."""
    release = builder.build_release(chapter)
    zh = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)
    answered = {ed: builder.fill_release(nb, chapter) for ed, nb in (("en", release), ("zh", zh))}
    graded = {ed: canonical.canonicalise(nbformat.writes(nb), release)[0] for ed, nb in answered.items()}
    assert nbformat.writes(graded["en"]) == nbformat.writes(graded["zh"])


def test_a_changed_english_notebook_cell_is_named():
    chapter = ZH_CHAPTERS[0] if ZH_CHAPTERS else pytest.skip("no Chinese notebook yet")
    release = builder.build_release(chapter)
    md = [c for c in release.cells if c.cell_type == "markdown"]
    md[1].source += "\n\nA new English sentence."
    with pytest.raises(ValueError, match=r"markdown cell\(s\) \[1\] changed"):
        translations.translate_notebook(release, chapter)


@pytest.mark.parametrize("page", ["book/intro", "book/ch03_self_attention", "book/glossary"])
def test_the_language_switch_links_each_page_to_its_counterpart(page):
    """From _build/html/<page>.html to _build/html/zh/<page>.zh.html, and back."""
    zh_page = edition.counterpart(page, "en")
    there = pathlib.PurePosixPath("html", page + ".html").parent / edition.switch_href(page, "en")
    back = pathlib.PurePosixPath("html", "zh", zh_page + ".html").parent / edition.switch_href(zh_page, "zh")
    norm = lambda p: pathlib.PurePosixPath(*[x for x in _resolve(p)])
    assert norm(there) == pathlib.PurePosixPath("html", "zh", zh_page + ".html")
    assert norm(back) == pathlib.PurePosixPath("html", page + ".html")


def _resolve(path: pathlib.PurePosixPath) -> list[str]:
    out: list[str] = []
    for part in path.parts:
        if part == "..":
            out.pop()
        elif part != ".":
            out.append(part)
    return out


def test_chinese_pages_link_the_chinese_pages():
    text = "[ch3](ch03_self_attention.md), [g](glossary.md#x), {doc}`intro`, {doc}`the intro <intro>`, [n](none.md)"
    assert edition.to_chinese_links(text, lambda t: t != "none") == (
        "[ch3](ch03_self_attention.zh.md), [g](glossary.zh.md#x), {doc}`intro.zh`, {doc}`the intro <intro.zh>`, "
        "[n](none.md)"
    )


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
@pytest.mark.parametrize("chapter", ["ch03_self_attention"])
def test_chinese_submissions_are_graded_like_english_ones(chapter, tmp_path):
    """Through the real grader (jailed where it can be): the Chinese notebook answered correctly, with the shipped
    buggy sample's bug, and untouched gets the English notebook's rows — scores, status and reasons."""
    from autograder.grading import batch

    mutants = catalogue.mutants(chapter)
    bug = next((m for m in mutants if m.name == "no scaling"), mutants[0])
    editions = {
        "en": builder.build_release(chapter),
        "zh": nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4),
    }
    files = []
    for ed, nb in editions.items():
        for who, answered in (
            ("full", builder.fill_release(nb, chapter)),
            ("bug", builder.fill_release(nb, chapter, [bug])),
            ("zero", nb),
        ):
            path = tmp_path / f"{who}{ed}_1_2_{chapter}.ipynb"
            nbformat.write(answered, path)
            files.append(path)
    rows = {r.submission: r for r in batch.grade(files, chapter, tmp_path / "out", jobs=2)}
    top = sum(ex.points for ex in notebooks.checks_module(chapter).EXERCISES)
    for who in ("full", "bug", "zero"):
        en, zh = rows[f"{who}en_1_2_{chapter}.ipynb"], rows[f"{who}zh_1_2_{chapter}.ipynb"]
        assert (zh.score, zh.status, zh.reason) == (en.score, en.status, en.reason), who
    assert rows[f"fullzh_1_2_{chapter}.ipynb"].score == top and rows[f"zerozh_1_2_{chapter}.ipynb"].score == 0
    assert 0 < rows[f"bugzh_1_2_{chapter}.ipynb"].score < top
    # feedback in the edition submitted: the Chinese notebook's page is Chinese around the student's code
    title, *headings = [h for h in _headings(editions["zh"]) if h]
    names = {w for c in editions["zh"].cells if c.cell_type == "code" for w in re.findall(r"\w+", c.source)}
    for who in ("full", "bug", "zero"):
        en = (tmp_path / "out" / "feedback" / f"{rows[f'{who}en_1_2_{chapter}.ipynb'].student_id}.html").read_text()
        zh = (tmp_path / "out" / "feedback" / f"{rows[f'{who}zh_1_2_{chapter}.ipynb'].student_id}.html").read_text()
        assert f">{title}" in zh and all(f">{h}" in zh for h in headings), who
        assert f">{title}" not in en and "<th>points</th>" in en and "<td>total</td>" in en, who
        for word in ("<th>得分</th>", "<th style='padding-left:1em'>满分</th>", "<td>总分</td>", "</b> 分"):
            assert word in zh, (who, word)
        english = [w for w in _english_outside_code(zh) if w not in names and not w.endswith("Error")]
        assert len(english) <= 10, (who, english)
    bug = (tmp_path / "out" / "feedback" / f"{rows[f'bugzh_1_2_{chapter}.ipynb'].student_id}.html").read_text()
    assert "✘ scaled_dot_product_attention：得 0 分（满分 4 分）" in bug
    assert "✘ 无掩码时与 softmax(QK^T/sqrt(d_k))V 一致" in bug and "提示：你没有把分数除以 sqrt(d_k)" in bug
    zero = (tmp_path / "out" / "feedback" / f"{rows[f'zerozh_1_2_{chapter}.ipynb'].student_id}.html").read_text()
    assert "引发了 NotImplementedError：这道练习还没有作答。" in zero, "a reason of the run, in Chinese"


def _headings(nb) -> list[str]:
    """The title and the headings of a notebook's prose, each up to its first markup (code, emphasis, brackets)."""
    lines = [ln for c in nb.cells if c.cell_type == "markdown" for ln in c.source.splitlines()]
    return [re.split(r"[`*（(&<\\[]", ln.lstrip("#").strip())[0].strip() for ln in lines if re.match(r"#{1,3} ", ln)]


def _english_outside_code(page: str) -> list[str]:
    """The English words of a feedback page outside the student's code and the values shown (what
    ``tests.check_built_book.latin_words`` counts on a built Chinese page, the code cells' source left out); the
    grader's decisions (in ``<pre>``) count too, their tensors and names left out."""
    from bs4 import BeautifulSoup

    from tests.check_built_book import latin_words

    soup = BeautifulSoup(page, "html.parser")
    for tag in soup.select(".jp-CodeCell .jp-InputArea"):
        tag.decompose()
    decisions = [pre.get_text() for pre in soup.select(".jp-OutputArea-output pre") if "分（满分" in pre.get_text()]
    words = latin_words(f"<article>{soup.body}</article>")
    for text in decisions:
        for line in text.splitlines():
            if not re.match(r"\s*(tensor\(|\[|[-\d])", line.strip()):
                words += latin_words(f"<article><p>{line}</p></article>")
    return words
