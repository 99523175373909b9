"""Inline math keeps the punctuation that touches it on its line: "$x$," never puts the comma at the start of the
next line, "($x$" never leaves the parenthesis alone at the end of one.

MathJax typesets inline math as an atomic inline box (`mjx-container`), and CSS allows a line break before and
after every atomic inline whatever character is next to it (CSS Text 3, "line breaking details"), so a browser
may break between the math and a comma, a full stop or a closing parenthesis, English or Chinese (，。）). No
MathJax 3 option changes that. So, as every page is written, each inline math node and the punctuation directly
before and after it (no space between) go into one `<span class="math-nowrap">`, which `_static/course.css` keeps
on one line (`white-space: nowrap`); the text around it still wraps as before. Both editions load this extension.
"""

from __future__ import annotations

import re

CLASS = "math-nowrap"
# punctuation that must not start a line, directly after the math; and what must not end one, directly before it
_AFTER = re.compile(r"^[,.;:!?%)\]}’”'\"，。；：！？、）】》」』…]+")
_BEFORE = re.compile(r"[(\[{‘“'\"（【《「『]+$")


def glue_punctuation(doctree) -> int:
    """Wrap every inline math node of ``doctree`` that touches punctuation, with that punctuation, in an inline
    node of class `CLASS`; returns how many were wrapped."""
    from docutils import nodes

    wrapped = 0
    for math in list(doctree.findall(nodes.math)):
        parent = math.parent
        if parent is None or isinstance(parent, nodes.inline) and CLASS in parent.get("classes", []):
            continue
        index = parent.index(math)
        before = parent[index - 1] if index > 0 and isinstance(parent[index - 1], nodes.Text) else None
        after = parent[index + 1] if index + 1 < len(parent) and isinstance(parent[index + 1], nodes.Text) else None
        lead = _BEFORE.search(str(before)) if before is not None else None
        tail = _AFTER.match(str(after)) if after is not None else None
        if not lead and not tail:
            continue
        glued = nodes.inline("", "", classes=[CLASS])
        if lead:
            rest = str(before)[: lead.start()]
            if rest:
                parent.replace(before, nodes.Text(rest))
            else:
                parent.remove(before)
            glued += nodes.Text(lead.group(0))
        index = parent.index(math)
        parent.remove(math)
        glued += math
        if tail:
            rest = str(after)[tail.end() :]
            if rest:
                parent.replace(after, nodes.Text(rest))
            else:
                parent.remove(after)
            glued += nodes.Text(tail.group(0))
        parent.insert(index, glued)
        wrapped += 1
    return wrapped


def _on_doctree_resolved(app, doctree, docname):
    glue_punctuation(doctree)


def setup(app):
    app.connect("doctree-resolved", _on_doctree_resolved)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
