"""Let the book's search find Chinese terms on the pages that use them.

With `html_search_language: zh` (`_config.yml`) Sphinx splits page text into search words with jieba's
`cut_for_search`. Jieba's dictionary does not know the course's terms (自注意力, 缩放点积注意力, 滑动窗口注意力, ...):
it would cut 自注意力 into 自 + 注意力, and a search for 自注意力 would find no chapter. This extension adds every
Chinese term of the glossary (`book/glossary.md`, its 中文 column: the one list of the book's Chinese terms) to
jieba's dictionary before the pages are indexed, so each becomes one search word on every page that writes it.

Without jieba, Sphinx's Chinese search silently drops all Chinese text from the index; the build stops instead,
naming the package to install.
"""

from __future__ import annotations

import logging
import pathlib
import re

GLOSSARY = pathlib.Path(__file__).resolve().parent.parent / "glossary.md"
HAN = re.compile(r"[\u4e00-\u9fff]+")


def glossary_rows(text: str) -> list[list[str]]:
    """The body rows of the glossary's first Markdown table, each a list of stripped cells (header and rule left out).

    Args:
        text: the glossary page's Markdown source.

    Returns:
        One list of cell strings per table row, in page order; empty when the page has no table.
    """
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in block[2:]]


def chinese_words(name: str) -> list[str]:
    """The runs of Chinese characters in a glossary 中文 cell that are search words (two characters or more).

    "KV 缓存" gives ["缓存"] (the Latin part is indexed as a word of its own), "查询 / 键 / 值" gives ["查询"]: a
    single character is no search word in Sphinx (its `word_filter` drops words shorter than two characters).
    """
    return [run for run in HAN.findall(name) if len(run) >= 2]


def glossary_terms(path: pathlib.Path = GLOSSARY) -> list[str]:
    """Every Chinese search word of the glossary's 中文 column (second column), without repeats, in page order."""
    words: list[str] = []
    for row in glossary_rows(path.read_text(encoding="utf-8")):
        if len(row) > 1:
            words += [w for w in chinese_words(row[1]) if w not in words]
    return words


def add_terms_to_jieba(words: list[str]) -> None:
    """Add each word to jieba's default dictionary with a frequency that keeps it in one piece."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" chatter in the build log
    for word in words:
        jieba.add_word(word)


def _on_builder_inited(app) -> None:
    if (app.config.html_search_language or "")[:2] != "zh":
        return
    try:
        import jieba  # noqa: F401
    except ImportError as error:
        from sphinx.errors import ExtensionError

        raise ExtensionError(
            "html_search_language 'zh' needs the jieba package, or the search index loses every Chinese "
            "word: .venv/bin/pip install -r requirements.txt"
        ) from error
    add_terms_to_jieba(glossary_terms())


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
