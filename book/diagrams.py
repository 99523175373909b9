"""The book's one drawing helper: boxes, arrows, labelled tensors and small grids for the architecture diagrams.

A thin layer over matplotlib (`FancyBboxPatch`, `Rectangle`, `Axes.annotate`), imported by the pages
(`from diagrams import Diagram`; pages run in book/) after they apply the shared style
(`plt.style.use("figures.mplstyle")`). Coordinates are inches from the bottom-left corner of the figure, so a
box of height 0.4 holds one line of 10 pt text whatever the figure's size, and a figure at most 6.8 inches wide
is shown 1:1 in the text column. Text is never smaller than `SMALL` points (the style's smallest size, which
`tests/check_book_in_browser.py` holds to 8 CSS px as displayed); `tests/test_book_reference_pages.py` draws every
diagram of every page and checks it.

Masks have one colour convention on every page, kept here and stated in `book/notation.md` ("Masks in figures"):
**dark = may attend (True), light = masked out (False)**, as the course's polarity (True = may attend). Pages draw
a mask with `draw_mask(ax, mask)` on a matplotlib axes (with `mask_legend(...)` saying so), or `Diagram.mask(...)`
in a diagram (with `Diagram.mask_legend(...)`); `tests/test_book_masks.py` holds every page to that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import edition_text
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyBboxPatch, Patch, Rectangle

# In `make book`'s kernels every figure the page shows is rendered in English and in Chinese (book/edition_text.py;
# their set-up installs it too), in a kernel of the Chinese edition's own it is drawn in Chinese; else nothing.
edition_text.install()

SMALL = 9  # points: the smallest text size of book/figures.mplstyle (tick and legend labels)
MAX_WIDTH = 6.8  # inches: the text column at the style's dpi, shown 1:1

# One colour per kind of part, the same on every page.
COLORS = {
    "tensor": "#dbe9f6",  # inputs, outputs, states: things that flow
    "attention": "#fde0c5",  # anything that computes attention weights
    "ffn": "#d7efd0",  # feed-forward / linear maps / recurrent cells
    "norm": "#ececec",  # LayerNorm, add, softmax: parameter-light glue
    "embedding": "#efdcf2",  # embedding tables and heads tied to them
    "plain": "white",
}

# The book's mask colours (True = may attend): dark green where a query may attend, light grey where it is masked.
MASK_ATTEND = "#1a6b37"
MASK_MASKED = "#ececec"
MASK_CMAP = ListedColormap([MASK_MASKED, MASK_ATTEND], name="mask")  # 0 / False -> masked, 1 / True -> may attend
MASK_LABELS = ("may attend (True)", "masked (False)")


def draw_mask(ax, mask, grid: bool | None = None):
    """Draw a boolean mask (rows = queries, columns = keys) on `ax` in the book's colours; returns the image.

    `mask` is 2-D (a tensor or array; nonzero = True = may attend). `grid` draws white lines between the cells
    (default: for masks of at most 16 rows and columns). Raises ValueError for a mask that is not 2-D.
    """
    m = np.asarray(mask).astype(bool)
    if m.ndim != 2:
        raise ValueError(f"a mask to draw must be 2-D (queries, keys), got shape {m.shape}")
    image = ax.imshow(m.astype(float), cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")
    if grid if grid is not None else max(m.shape) <= 16:
        ax.set_xticks(np.arange(m.shape[1] + 1) - 0.5, minor=True)
        ax.set_yticks(np.arange(m.shape[0] + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=0.8)
        ax.tick_params(which="minor", length=0)
    return image


def mask_legend(where, **kw):
    """A legend of the mask colours ("may attend (True)", "masked (False)") on a figure or axes; kw go to legend()."""
    handles = [Patch(facecolor=c, edgecolor="0.6", label=s) for c, s in zip((MASK_ATTEND, MASK_MASKED), MASK_LABELS)]
    kw.setdefault("frameon", False)
    return where.legend(handles=handles, **kw)


@dataclass(frozen=True)
class Box:
    """A drawn box: centre (x, y), width w, height h, in inches; its sides' midpoints anchor arrows."""

    x: float
    y: float
    w: float
    h: float

    @property
    def top(self) -> tuple[float, float]:
        return (self.x, self.y + self.h / 2)

    @property
    def bottom(self) -> tuple[float, float]:
        return (self.x, self.y - self.h / 2)

    @property
    def left(self) -> tuple[float, float]:
        return (self.x - self.w / 2, self.y)

    @property
    def right(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y)


class Diagram:
    """A blank figure `width` × `height` inches, axes in inches, no frame; draw with the methods, then `show()`.

    Raises ValueError if `width` exceeds `MAX_WIDTH` (the figure would be shrunk below 1:1 on the page).
    """

    def __init__(self, width: float, height: float):
        if width > MAX_WIDTH:
            raise ValueError(f"a diagram is at most {MAX_WIDTH} inches wide (shown 1:1), got {width}")
        self.fig = plt.figure(figsize=(width, height))
        self.ax = self.fig.add_axes((0, 0, 1, 1))
        self.ax.set_xlim(0, width)
        self.ax.set_ylim(0, height)
        self.ax.set_axis_off()

    def text(self, x: float, y: float, s: str, small: bool = False, **kw) -> None:
        """Text centred at (x, y); `small` uses `SMALL` points (shape annotations, side notes)."""
        kw.setdefault("ha", "center")
        kw.setdefault("va", "center")
        if small:
            kw["fontsize"] = SMALL
        self.ax.text(x, y, s, **kw)

    def box(self, x: float, y: float, text: str = "", w: float = 1.4, h: float = 0.4, kind: str = "plain", **kw) -> Box:
        """A rounded box centred at (x, y) filled with the colour of `kind` (a key of `COLORS`), with `text`."""
        self.ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - h / 2),
                w,
                h,
                boxstyle="round,pad=0,rounding_size=0.06",
                facecolor=COLORS[kind],
                edgecolor=kw.pop("edgecolor", "0.25"),
                linewidth=kw.pop("linewidth", 1.0),
                linestyle=kw.pop("linestyle", "-"),
            )
        )
        if text:
            self.text(x, y, text, **kw)
        return Box(x, y, w, h)

    def tensor(
        self, x: float, y: float, name: str, shape: str = "", w: float = 1.0, h: float = 0.4, below: bool = True
    ) -> Box:
        """A tensor: a box named `name` with its `shape` (e.g. "(B, T, d_model)") in small text below/above it."""
        b = self.box(x, y, name, w=w, h=h, kind="tensor")
        if shape:
            self.text(x, y - h / 2 - 0.14 if below else y + h / 2 + 0.14, shape, small=True, color="0.3")
        return b

    def arrow(
        self,
        start: tuple[float, float],
        end: tuple[float, float],
        text: str = "",
        rad: float = 0.0,
        dashed: bool = False,
        text_offset: tuple[float, float] = (0.0, 0.0),
        head: bool = True,
    ) -> None:
        """An arrow from `start` to `end` (a curve when `rad` != 0), labelled `text` (small) at its midpoint."""
        self.ax.annotate(
            "",
            xy=end,
            xytext=start,
            arrowprops=dict(
                arrowstyle="-|>" if head else "-",
                color="0.2",
                linewidth=1.0,
                linestyle="--" if dashed else "-",
                shrinkA=0,
                shrinkB=0,
                mutation_scale=10,
                connectionstyle=f"arc3,rad={rad}",
            ),
        )
        if text:
            mx, my = (start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1]
            self.text(mx, my, text, small=True, color="0.2", backgroundcolor="white")

    def chain(self, boxes: Sequence[Box]) -> None:
        """Arrows from each box's top to the next box's bottom (a vertical stack read bottom to top)."""
        for a, b in zip(boxes, boxes[1:]):
            self.arrow(a.top, b.bottom)

    def frame(self, boxes: Iterable[Box], label: str = "", pad: float = 0.15, label_side: str = "right") -> Box:
        """A dashed frame around `boxes` (a repeated block, a group), `label` (e.g. "× N") beside it."""
        boxes = list(boxes)
        x0 = min(b.x - b.w / 2 for b in boxes) - pad
        x1 = max(b.x + b.w / 2 for b in boxes) + pad
        y0 = min(b.y - b.h / 2 for b in boxes) - pad
        y1 = max(b.y + b.h / 2 for b in boxes) + pad
        self.ax.add_patch(
            FancyBboxPatch(
                (x0, y0),
                x1 - x0,
                y1 - y0,
                boxstyle="round,pad=0,rounding_size=0.1",
                facecolor="none",
                edgecolor="0.45",
                linestyle="--",
            )
        )
        if label:
            if label_side == "right":
                self.text(x1 + 0.08, (y0 + y1) / 2, label, ha="left")
            elif label_side == "left":
                self.text(x0 - 0.08, (y0 + y1) / 2, label, ha="right")
            else:
                self.text((x0 + x1) / 2, y1 + 0.15, label)
        return Box((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0)

    def grid(
        self,
        x: float,
        y: float,
        values,
        cell: float = 0.22,
        cmap: str = "Blues",
        row_labels: Sequence[str] = (),
        col_labels: Sequence[str] = (),
        title: str = "",
    ) -> Box:
        """A table of shaded cells centred at (x, y): a score table or attention weights (a mask: `mask`).

        `values` is a 2-D array (rows = queries, columns = keys), shaded from 0 (white) to its maximum;
        `row_labels` go left of the rows, `col_labels` above the columns, `title` above everything.
        """
        v = np.asarray(values, dtype=float)
        if v.ndim != 2:
            raise ValueError(f"grid values must be 2-D (rows, columns), got shape {v.shape}")
        colormap = plt.get_cmap(cmap)
        top = v.max() if v.max() > 0 else 1.0
        return self._cells(
            x, y, [[colormap(0.85 * e / top) for e in row] for row in v], cell, row_labels, col_labels, title
        )

    def mask(
        self,
        x: float,
        y: float,
        mask,
        cell: float = 0.22,
        row_labels: Sequence[str] = (),
        col_labels: Sequence[str] = (),
        title: str = "",
    ) -> Box:
        """A boolean mask (rows = queries, columns = keys) centred at (x, y) in the book's mask colours.

        True (nonzero) = may attend is `MASK_ATTEND` (dark), False = masked is `MASK_MASKED` (light); labels as
        `grid`. Raises ValueError for a mask that is not 2-D.
        """
        m = np.asarray(mask).astype(bool)
        if m.ndim != 2:
            raise ValueError(f"a mask must be 2-D (queries, keys), got shape {m.shape}")
        faces = [[MASK_ATTEND if e else MASK_MASKED for e in row] for row in m]
        return self._cells(x, y, faces, cell, row_labels, col_labels, title, edgecolor="white")

    def mask_legend(self, x: float, y: float, size: float = 0.14) -> Box:
        """The mask colours' key, two lines from (x, y) (left edge, first line's centre) down: a swatch and its meaning."""
        for k, (colour, label) in enumerate(zip((MASK_ATTEND, MASK_MASKED), MASK_LABELS)):
            yy = y - 0.22 * k
            self.ax.add_patch(
                Rectangle((x, yy - size / 2), size, size, facecolor=colour, edgecolor="0.6", linewidth=0.5)
            )
            self.text(x + size + 0.06, yy, label, small=True, ha="left")
        return Box(x + 0.6, y - 0.11, 1.2, 0.22 + size)

    def _cells(self, x, y, faces, cell, row_labels, col_labels, title, edgecolor="0.6") -> Box:
        """Cells of the given face colours (rows of colours), centred at (x, y), with their labels (see `grid`)."""
        rows, cols = len(faces), len(faces[0])
        w, h = cols * cell, rows * cell
        x0, y0 = x - w / 2, y - h / 2
        for i in range(rows):
            for j in range(cols):
                self.ax.add_patch(
                    Rectangle(
                        (x0 + j * cell, y0 + (rows - 1 - i) * cell),
                        cell,
                        cell,
                        facecolor=faces[i][j],
                        edgecolor=edgecolor,
                        linewidth=0.5,
                    )
                )
        for i, s in enumerate(row_labels):
            self.text(x0 - 0.05, y0 + (rows - 1 - i + 0.5) * cell, s, small=True, ha="right")
        for j, s in enumerate(col_labels):
            self.text(x0 + (j + 0.5) * cell, y0 + h + 0.12, s, small=True)
        if title:
            self.text(x, y0 + h + (0.36 if col_labels else 0.16), title, small=True)
        return Box(x, y, w, h)

    def show(self) -> None:
        """Display the figure (the page's output) and close it."""
        plt.show()
        plt.close(self.fig)
