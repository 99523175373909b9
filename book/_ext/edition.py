"""A language switch on every page: the English page links its Chinese counterpart (中文), and back.

The English edition builds from `_config.yml`/`_toc.yml` into `_build/html/`; the Chinese one from
`_config.zh.yml`/`_toc.zh.yml` (its pages are `book/<stem>.zh.md`, beside the English ones) into `_build/html/zh/`
(`make book`). `course_edition` ("en" or "zh", set in the edition's config) says which build this is.
"""

from __future__ import annotations

import html
import pathlib
import re
import shutil


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


def _on_source_read(app, docname, source):
    if app.config.course_edition != "zh" or not docname.endswith(".zh"):
        return
    here = (pathlib.Path(app.srcdir) / docname).parent
    root = pathlib.Path(app.srcdir)

    def exists(target: str) -> bool:
        base = root / target.lstrip("/") if target.startswith("/") else here / target
        return base.with_name(base.name + ".zh.md").exists()

    source[0] = to_chinese_links(source[0], exists)


def setup(app):
    app.add_config_value("course_edition", "en", "html")
    app.connect("html-page-context", _on_page_context)
    app.connect("html-page-context", _on_page_context_early, priority=400)
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
