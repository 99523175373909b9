"""A language switch on every page: the English page links its Chinese counterpart (中文), and back.

The English edition builds from `_config.yml`/`_toc.yml` into `_build/html/`; the Chinese one from
`_config.zh.yml`/`_toc.zh.yml` (its pages are `book/<stem>.zh.md`, beside the English ones) into `_build/html/zh/`
(`make book`). `course_edition` ("en" or "zh", set in the edition's config) says which build this is.

The Chinese build also puts what the code writes into Chinese (docs/translating.md): its figures are the Chinese
renderings that `make book`'s one execution of each page made beside the English ones (scripts/execute_book.py,
book/edition_text.py), the figure captions in the cells' metadata and the cells' Markdown outputs are translated from
book/_ext/edition_zh_text.py as the pages are read.
"""

from __future__ import annotations

import html
import os
import pathlib
import re
import shutil

EDITION_VARIABLE = "ATTENTION_COURSE_EDITION"  # read by the pages' kernels (book/edition_text.py)


def counterpart(pagename: str, edition: str) -> str:
    """The other edition's page name: "book/ch03_self_attention" <-> "book/ch03_self_attention.zh"."""
    return pagename.removesuffix(".zh") if edition == "zh" else pagename + ".zh"


def switch_href(pagename: str, edition: str) -> str:
    """The link from this page's HTML file to its counterpart's (the Chinese site lives under zh/)."""
    up = "../" * pagename.count("/")
    if edition == "zh":
        return "../" + up + counterpart(pagename, edition) + ".html"
    return up + "zh/" + counterpart(pagename, edition) + ".html"


def _on_page_context(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:
        return
    edition = app.config.course_edition
    other = counterpart(pagename, edition)
    if not (pathlib.Path(app.srcdir) / f"{other}.md").exists():
        return
    label = "English" if edition == "zh" else "中文版"
    lang = "en" if edition == "zh" else "zh"
    link = (
        f'<p class="edition-switch"><a href="{html.escape(switch_href(pagename, edition))}" hreflang="{lang}" '
        f'lang="{lang}">{label}</a></p>'
    )
    context["body"] = link + context["body"]


def _on_page_context_early(app, pagename, templatename, context, doctree):
    """A Chinese page's executed notebook where sphinx-book-theme's download button looks for it. The theme finds a
    page's notebook at ``jupyter_execute/<pagename>`` with its suffix replaced by ``.ipynb``, which for
    ``book/ch03_self_attention.zh`` is ``book/ch03_self_attention.ipynb`` (the build stops when it is missing), and
    links the download as ``_sources/<pagename>.ipynb``; both are copied here from the executed
    ``book/ch03_self_attention.zh.ipynb``, before the theme's handler runs (priority 400 < 500)."""
    if not pagename.endswith(".zh"):
        return
    out = pathlib.Path(app.outdir)
    executed = out.parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.exists():
        return
    for target in (out.parent / "jupyter_execute" / pathlib.Path(pagename).with_suffix(".ipynb"),
                   out / "_sources" / f"{pagename}.ipynb"):  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(executed, target)


_DOC_ROLE = re.compile(r"(\{doc\}`(?:[^`<]*<)?)([^`>]+)(>?`)")
_MD_LINK = re.compile(r"(\]\()([A-Za-z0-9_./-]+?)(\.md)([#)])")


def to_chinese_links(text: str, exists) -> str:
    """A Chinese page's links to other pages, pointed at their Chinese counterparts where those exist: the
    translation keeps the English targets (``[..](ch03_self_attention.md)``, ``{doc}`intro```), the Chinese build
    follows them to ``ch03_self_attention.zh.md``. ``exists(target)``: whether the Chinese page for ``target`` (a
    path without ``.md``, relative to the page) exists."""
    text = _MD_LINK.sub(
        lambda m: (
            m.group(1)
            + m.group(2)
            + (".zh" if not m.group(2).endswith(".zh") and exists(m.group(2)) else "")
            + m.group(3)
            + m.group(4)
        ),
        text,
    )
    return _DOC_ROLE.sub(
        lambda m: (
            m.group(1)
            + m.group(2)
            + (".zh" if not m.group(2).endswith(".zh") and exists(m.group(2)) else "")
            + m.group(3)
        ),
        text,
    )


_CAPTION = re.compile(r"^(\s*caption: )'((?:[^']|'')*)'(\s*\n\s*name: )([\w-]+)", re.M)


def to_chinese_captions(text: str, captions, warn) -> str:
    """A Chinese page's figure captions in Chinese: the code cells' `mystnb: figure:` metadata carries the English
    caption (the cells are the English page's), replaced here by ``captions[name]`` = (English, Chinese) when the
    English matches; ``warn(message)`` for a figure whose caption has no translation or whose English changed."""

    def replace(m: re.Match) -> str:
        english = " ".join(m.group(2).replace("''", "'").split())
        entry = captions.get(m.group(4))
        if entry is None:
            warn(f"figure {m.group(4)}: its caption has no Chinese in book/_ext/edition_zh_text.py (CAPTIONS)")
            return m.group(0)
        if " ".join(entry[0].split()) != english:
            warn(
                f"figure {m.group(4)}: its English caption changed; update its Chinese in book/_ext/edition_zh_text.py"
            )
            return m.group(0)
        return m.group(1) + "'" + entry[1].replace("'", "''") + "'" + m.group(3) + m.group(4)

    return _CAPTION.sub(replace, text)


def _inline_markdown(node) -> str | None:
    """A paragraph's inline content as Markdown (text, `code`, **bold**, *emphasis*, $math$), or None for content
    this does not write back (links, images ...)."""
    from docutils import nodes

    parts = []
    for child in node.children:
        if isinstance(child, nodes.Text):
            parts.append(str(child))
        elif isinstance(child, nodes.literal):
            parts.append(f"`{child.astext()}`")
        elif isinstance(child, nodes.math):
            parts.append(f"${child.astext()}$")
        elif isinstance(child, (nodes.strong, nodes.emphasis)):
            inner = _inline_markdown(child)
            if inner is None:
                return None
            mark = "**" if isinstance(child, nodes.strong) else "*"
            parts.append(mark + inner + mark)
        else:
            return None
    return "".join(parts)


_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|\$([^$]+)\$|\*([^*]+)\*")


def _inline_nodes(md: str) -> list:
    """The inverse of `_inline_markdown` for the Markdown it writes."""
    from docutils import nodes

    out: list = []
    pos = 0
    for m in _INLINE.finditer(md):
        if m.start() > pos:
            out.append(nodes.Text(md[pos : m.start()]))
        if m.group(1) is not None:
            out.append(nodes.literal(m.group(1), m.group(1)))
        elif m.group(2) is not None:
            out.append(nodes.strong("", "", *_inline_nodes(m.group(2))))
        elif m.group(3) is not None:
            out.append(nodes.math(m.group(3), m.group(3)))
        else:
            out.append(nodes.emphasis("", "", *_inline_nodes(m.group(4))))
        pos = m.end()
    if pos < len(md):
        out.append(nodes.Text(md[pos:]))
    return out


_PLAIN_QUOTES = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"'})


def translate_output(md: str, table: dict, patterns: list) -> str | None:
    """The Chinese for one paragraph or table cell of a Markdown output (`_inline_markdown`), or None."""
    key = md.strip().translate(_PLAIN_QUOTES)  # the doctree has Sphinx's smart quotes, the table the code's
    if key in table:
        return table[key]
    for pattern, replacement in patterns:
        m = pattern.fullmatch(key)
        if m:
            groups = [g if g is None else (translate_output(g, table, patterns) or g) for g in m.groups()]
            return _expand(replacement, groups)
    if "; " in key:  # a measurement line: "measured ... on ...; causal mask; median of 7 rounds"
        parts = [translate_output(part, table, patterns) for part in key.split("; ")]
        if any(parts):
            return "；".join(zh or part for zh, part in zip(parts, key.split("; ")))
    return None


def translate_printed(printed: str, table: dict, patterns: list) -> str:
    """The Chinese of a cell's printed output (a stream output, shown in <pre>): each line that ``table`` (whole
    lines) or ``patterns`` (lines with numbers; the groups translated in turn, see `translate_output`) know is
    replaced, keeping its indentation; any other line — data, generated text, numbers — stays as printed."""
    lines = []
    for line in printed.split("\n"):
        body = line.strip()
        zh = translate_output(body, table, patterns) if body else None
        lines.append(line[: len(line) - len(line.lstrip())] + zh + line[len(line.rstrip()) :] if zh else line)
    return "\n".join(lines)


def _expand(replacement: str, groups: list) -> str:
    """``replacement`` with each ``\\N`` replaced by ``groups[N - 1]`` and ``\\n`` by a newline (None: empty)."""
    return re.sub(r"\\(\d+|n)", lambda k: "\n" if k.group(1) == "n" else groups[int(k.group(1)) - 1] or "", replacement)


def _on_doctree_read(app, doctree):
    """A Chinese page's Markdown outputs (tables and sentences that code cells emit) in Chinese (`OUTPUT_TEXT`, with
    the page's own entries in `OUTPUT_TEXT_PAGES` first)."""
    if app.config.course_edition != "zh":
        return
    import edition_zh_text as text
    from docutils import nodes

    patterns = [(re.compile(p, re.S), r) for p, r in text.OUTPUT_PATTERNS]
    page = pathlib.Path(app.env.docname).name.removesuffix(".zh")
    output_text = {**text.OUTPUT_TEXT, **getattr(text, "OUTPUT_TEXT_PAGES", {}).get(page, {})}
    printed_patterns = [(re.compile(p, re.S), r) for p, r in text.PRINTED_PATTERNS]
    for output in doctree.findall(lambda n: isinstance(n, nodes.Element) and "cell_output" in n.get("classes", [])):
        for paragraph in list(output.findall(nodes.paragraph)):
            md = _inline_markdown(paragraph)
            if md is None:
                continue
            zh = translate_output(md, output_text, patterns)
            if zh is not None and zh != md.strip().translate(_PLAIN_QUOTES):
                paragraph.children = []
                paragraph.extend(_inline_nodes(zh))
        for block in list(output.findall(nodes.literal_block)):  # printed output (`print`, in <pre>)
            if "stream" not in block.get("classes", []):
                continue
            printed = block.astext()
            zh = translate_printed(printed, text.PRINTED_TEXT, printed_patterns)
            if zh != printed:
                block.children = []
                block += nodes.Text(zh)
                block.rawsource = zh


def chinese_source(text: str, srcdir: pathlib.Path, docname: str, warn) -> str:
    """A Chinese page's text as its build reads it: figure captions in Chinese (`to_chinese_captions`) and links
    to the Chinese pages (`to_chinese_links`). Also used by `make book`'s executor (scripts/execute_book.py), whose
    cached notebook must be the one this build reads (the captions are in the cells' metadata, which the execution
    cache hashes)."""
    import edition_zh_text

    text = to_chinese_captions(text, edition_zh_text.CAPTIONS, warn)
    here = (srcdir / docname).parent

    def exists(target: str) -> bool:
        base = srcdir / target.lstrip("/") if target.startswith("/") else here / target
        return base.with_name(base.name + ".zh.md").exists()

    return to_chinese_links(text, exists)


def _on_source_read(app, docname, source):
    if app.config.course_edition != "zh" or not docname.endswith(".zh"):
        return
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    source[0] = chinese_source(
        source[0], pathlib.Path(app.srcdir), docname, lambda message: logger.warning(message, location=docname)
    )


def _on_config_inited(app, config):
    """The Chinese build's kernels, where it executes a page itself (`make book`'s executor, scripts/execute_book.py,
    has cached every page for both editions before the builds start), draw their figures in Chinese
    (book/edition_text.py). Its execution cache is its own (`execute.cache` in _config.zh.yml): the Chinese figures
    differ, and the cells' metadata (the captions) too; both caches' keys carry the digest of what the page read,
    book/edition_text.py included (book/_ext/page_inputs.py)."""
    if config.course_edition != "zh":
        return
    os.environ[EDITION_VARIABLE] = "zh"


def setup(app):
    app.add_config_value("course_edition", "en", "html")
    app.connect("config-inited", _on_config_inited, priority=100)
    app.connect("html-page-context", _on_page_context)
    app.connect("html-page-context", _on_page_context_early, priority=400)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
