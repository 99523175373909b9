"""Point each chapter page's "Colab" launch button at the chapter's exercise notebook.

The book pages are MyST Markdown, which Colab cannot open; the theme would link the `.md` file. A page
`book/chNN_name` whose student notebook `notebooks/chNN_name.ipynb` exists gets that notebook instead; any other
page that executes code (the intro draws its roadmap) loses the Colab button, which could only open its `.md` file.
"""

from __future__ import annotations

import pathlib


def _rewrite(buttons, url):
    for button in buttons:
        if "buttons" in button:
            _rewrite(button["buttons"], url)
        elif "colab.research.google.com" in str(button.get("url", "")):
            button["url"] = url


def _drop(buttons):
    kept = []
    for button in buttons:
        if "buttons" in button:
            button["buttons"] = _drop(button["buttons"])
            if not button["buttons"]:
                continue
        elif "colab.research.google.com" in str(button.get("url", "")):
            continue
        kept.append(button)
    return kept


def _on_page_context(app, pagename, templatename, context, doctree):
    stem = pathlib.PurePosixPath(pagename).name.removesuffix(".zh")
    root = pathlib.Path(app.srcdir)
    # the Chinese edition's pages open the Chinese notebooks (notebooks/zh/)
    folder = "notebooks/zh" if getattr(app.config, "course_edition", "en") == "zh" else "notebooks"
    if not (root / folder / f"{stem}.ipynb").exists():
        if "header_buttons" in context:
            context["header_buttons"] = _drop(context["header_buttons"])
        return
    theme = app.config.html_theme_options
    repo = theme.get("repository_url", "").removeprefix("https://github.com/").strip("/")
    branch = theme.get("repository_branch", "main")
    url = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{folder}/{stem}.ipynb"
    _rewrite(context.get("header_buttons", []), url)


def setup(app):
    app.connect("html-page-context", _on_page_context, priority=600)  # after the theme adds its buttons
    return {"parallel_read_safe": True, "parallel_write_safe": True}
