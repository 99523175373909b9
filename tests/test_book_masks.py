"""One colour convention for masks in the book's figures, read from the page sources (no book build).

* `book/diagrams.py` holds the convention: `MASK_CMAP` (dark `MASK_ATTEND` = may attend, True; light `MASK_MASKED`
  = masked, False), drawn by `draw_mask` (matplotlib axes) and `Diagram.mask` (diagrams), with `mask_legend` /
  `Diagram.mask_legend` for the key;
* no page draws a mask any other way: every `imshow`/`matshow`/`pcolormesh` call and every `Diagram.grid` call in a
  page's code whose data is a mask (a name or expression that mentions a mask, `causal` or padding, or a variable
  assigned from one) fails, and every cell that draws a mask with the helper also draws its key;
* the convention is stated once, in `book/notation.md` (label `notation-masks`), and chapter 3's Masks section links it.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
PAGES = sorted(BOOK.glob("*.md"))
CELL = re.compile(r"```\{code-cell\}[^\n]*\n(.*?)```", re.S)
# Names that hold a mask on the pages (masks, causal triangles, padding, allowed pairs), and functions that make one
# (causal_mask, attention_mask_from_lengths, sliding_window_mask, ...; not masked_fill).
MASK_NAME = re.compile(r"mask|^(causal|pad|allowed)$", re.I)
MASK_FUNCTION = re.compile(r"mask(_from_\w+)?$")
TRIANGLE = re.compile(r"\bj\s*<=?\s*i\b|\bi\s*>=?\s*j\b")  # a literal causal triangle, [[j <= i ...] ...]
IMAGE_CALLS = {"imshow", "matshow", "pcolormesh", "pcolor"}


def code_cells(page: pathlib.Path) -> list[str]:
    """The page's code cells as Python: MyST front matter (`---` block or `:key:` lines) and IPython magics removed."""
    out = []
    for cell in CELL.findall(page.read_text()):
        cell = re.sub(r"\A---\n.*?\n---\n", "", cell, flags=re.S)
        cell = re.sub(r"\A(:[^\n]*\n)+", "", cell)
        out.append("\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.splitlines()))
    return out


def is_mask(expr: ast.AST, names: set[str]) -> bool:
    """Whether an expression is a mask: a mask's name, a mask function's result, a view, part or combination of one."""
    if isinstance(expr, ast.Name):
        return expr.id in names or bool(MASK_NAME.search(expr.id))
    if isinstance(expr, ast.Call):
        func = expr.func
        if MASK_FUNCTION.search(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")):
            return True
        return isinstance(func, ast.Attribute) and is_mask(func.value, names)  # mask.int().numpy()
    if isinstance(expr, (ast.Attribute, ast.Subscript, ast.Starred)):  # mask.T, pad[1]
        return is_mask(expr.value, names)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr)):
        return is_mask(expr.left, names) or is_mask(expr.right, names)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
        return is_mask(expr.operand, names)
    return bool(TRIANGLE.search(ast.unparse(expr))) if isinstance(expr, (ast.List, ast.ListComp)) else False


def mask_names(trees: list[ast.Module]) -> set[str]:
    """Names a page binds to a mask: assigned one, or looping over something that holds one (to a fixed point)."""
    names: set[str] = set()
    while True:
        found = set(names)
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and is_mask(node.value, found):
                    targets = node.targets
                elif isinstance(node, (ast.For, ast.comprehension)) and any(
                    is_mask(e, found) for e in ast.walk(node.iter) if isinstance(e, ast.expr)
                ):
                    targets = [node.target]
                else:
                    continue
                found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if found == names:
            return names
        names = found


def masks_drawn_by_hand(page: pathlib.Path) -> list[str]:
    """Calls in the page's code that draw a mask without the shared helper, as 'cell N: call'."""
    trees = [ast.parse(cell) for cell in code_cells(page)]
    names = mask_names(trees)
    found = []
    for n, tree in enumerate(trees, 1):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr, args = node.func.attr, node.args
            data = args[0] if attr in IMAGE_CALLS and args else args[2] if attr == "grid" and len(args) >= 3 else None
            if data is not None and is_mask(data, names):
                found.append(f"cell {n}: {ast.unparse(node)[:100]}")
    return found


@pytest.fixture(scope="module")
def diagrams(request):
    sys.path.insert(0, str(BOOK))
    sys.modules.pop("diagrams", None)
    import diagrams

    request.addfinalizer(lambda: sys.path.remove(str(BOOK)))
    return diagrams


def luminance(colour) -> float:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_the_convention_lives_in_the_drawing_helper(diagrams):
    from matplotlib.colors import to_hex

    assert luminance(diagrams.MASK_ATTEND) < 0.35 < 0.8 < luminance(diagrams.MASK_MASKED), (
        "may attend dark, masked light"
    )
    assert to_hex(diagrams.MASK_CMAP(1.0)) == to_hex(diagrams.MASK_ATTEND)
    assert to_hex(diagrams.MASK_CMAP(0.0)) == to_hex(diagrams.MASK_MASKED)
    assert diagrams.MASK_LABELS[0].startswith("may attend") and "True" in diagrams.MASK_LABELS[0]


def test_draw_mask_and_diagram_mask_use_it(diagrams):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    mask = np.tril(np.ones((4, 6), dtype=bool))
    fig, ax = plt.subplots()
    image = diagrams.draw_mask(ax, mask)
    rgba = image.to_rgba(image.get_array())
    assert to_hex(rgba[0, 0]) == to_hex(diagrams.MASK_ATTEND) and to_hex(rgba[0, 1]) == to_hex(diagrams.MASK_MASKED)
    legend = diagrams.mask_legend(ax)
    assert [t.get_text() for t in legend.get_texts()] == list(diagrams.MASK_LABELS)
    with pytest.raises(ValueError, match="2-D"):
        diagrams.draw_mask(ax, np.ones(3, dtype=bool))
    plt.close(fig)

    d = diagrams.Diagram(3, 2)
    before = len(d.ax.patches)
    d.mask(1.5, 1.0, mask)
    faces = [to_hex(p.get_facecolor()) for p in d.ax.patches[before:]]
    assert faces[0] == to_hex(diagrams.MASK_ATTEND) and faces[1] == to_hex(diagrams.MASK_MASKED)
    assert faces.count(to_hex(diagrams.MASK_ATTEND)) == mask.sum()
    plt.close(d.fig)


def test_the_check_finds_masks_drawn_by_hand(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```{code-cell} ipython3\n:tags: [remove-input]\npad = attention_mask_from_lengths(lengths, 6)\n"
        'ax.imshow(pad.numpy(), cmap="Greys")\nax.imshow(weights)\nax.grid(which="minor")\n```\n\n'
        "```{code-cell} ipython3\n---\ntags: [remove-input]\n---\n"
        "d.grid(1, 2, [[1 if j <= i else 0 for j in range(6)] for i in range(6)])\nd.grid(1, 2, scores)\n"
        "for ax, m in zip(axes, [causal_mask(4)]):\n    ax.imshow(m)\n```\n"
    )
    found = masks_drawn_by_hand(page)
    assert len(found) == 3 and "pad" in found[0] and found[1].startswith("cell 2: d.grid") and "imshow(m)" in found[2]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_pages_draw_masks_with_the_shared_helper(page):
    found = masks_drawn_by_hand(page)
    assert not found, (
        f"{page.name} draws masks without the book's mask colours — use draw_mask(ax, mask) / Diagram.mask(...) "
        f"from book/diagrams.py: " + "; ".join(found)
    )
    for n, cell in enumerate(code_cells(page), 1):
        if "draw_mask(" in cell:
            assert "mask_legend(" in cell, f"{page.name}, cell {n}: a mask figure needs its key (mask_legend)"
        if re.search(r"\bd\.mask\(", cell):
            assert "d.mask_legend(" in cell, f"{page.name}, cell {n}: a diagram's mask needs its key (d.mask_legend)"


def test_the_convention_is_stated_once_and_linked_from_chapter_3():
    notation = (BOOK / "notation.md").read_text()
    assert "(notation-masks)=\n## Masks in figures" in notation
    section = notation.split("## Masks in figures", 1)[1].split("\n## ", 1)[0]
    assert "may attend" in section and "dark" in section and "light" in section and "book/diagrams.py" in section
    ch03 = (BOOK / "ch03_self_attention.md").read_text()
    masks = ch03.split("## Masks", 1)[1].split("\n## ", 1)[0]
    assert "<notation-masks>`" in masks, "chapter 3's Masks section links the convention in notation.md"
    others = [p.name for p in PAGES if p.name != "notation.md" and "## Masks in figures" in p.read_text()]
    assert not others, f"the mask colours are stated in notation.md only, not in {others}"
