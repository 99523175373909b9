"""Figure numbers by chapter: chapter 11's first figure is "Fig. 11.1" ("图 11.1"), not the book's ninth figure.

Sphinx numbers figures (and tables, code blocks) through the whole book unless the toctree is numbered, and a
numbered toctree would also number the headings, which already carry their chapter number ("11. FlashAttention in
Triton"). So this extension leaves `numfig` on and renumbers after Sphinx has: on a chapter page (`book/chNN_*`)
a figure's number becomes (NN, k) for its k-th numbered figure of that type on the page, on any other page (the
introduction, the reference pages) just k. Captions and {numref} links read the same numbers
(`env.toc_fignumbers`), in both editions (`_config.yml`, `_config.zh.yml`).
"""

from __future__ import annotations

import re

_CHAPTER = re.compile(r"(?:^|/)ch(\d+)_")


def chapter_of(docname: str) -> int | None:
    """The chapter number of a page's docname ("book/ch11_flash_attention_triton.zh" -> 11), or None."""
    m = _CHAPTER.search(docname)
    return int(m.group(1)) if m else None


def per_chapter(fignumbers: dict[str, dict[str, dict[str, tuple[int, ...]]]]) -> dict:
    """``fignumbers`` (docname -> figure type -> node id -> the book-wide number) renumbered page by page: a
    chapter's figures (chapter, 1), (chapter, 2) ..., another page's (1,), (2,) ..., in the page's order."""
    renumbered: dict = {}
    for docname, by_type in fignumbers.items():
        chapter = chapter_of(docname)
        prefix = (chapter,) if chapter is not None else ()
        renumbered[docname] = {
            figtype: {
                node_id: (*prefix, k)
                for k, (node_id, _) in enumerate(sorted(numbers.items(), key=lambda item: item[1]), start=1)
            }
            for figtype, numbers in by_type.items()
        }
    return renumbered


def _on_env_get_updated(app, env):
    env.toc_fignumbers = per_chapter(env.toc_fignumbers)
    return []


def setup(app):
    # after Sphinx's own TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", _on_env_get_updated, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
