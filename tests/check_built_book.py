"""After `make book`: every chapter page in the built HTML has its executed figures, and no page shows a Python
object's repr where the reader expects a result.

Run by `make test` after the build as `python -m tests.check_built_book` (a page whose figures silently vanished —
e.g. because a non-inline matplotlib backend was forced — still builds without warnings, so the build alone does
not catch it; neither does it catch a cell whose last line returns an object, which Jupyter then prints as
``<matplotlib.legend.Legend at 0x7f...>`` or ``<Figure size 640x480 with 1 Axes>``).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# an object's default repr, or matplotlib's Figure repr, as it appears (escaped) in a built page
LEAKED_REPR = re.compile(
    r"&lt;[A-Za-z_][\w.]*(?: object)? at 0x[0-9a-f]+&gt;|&lt;Figure size \d+x\d+ with \d+ Axes&gt;"
)


def leaked_reprs(html: str) -> list[str]:
    """The object reprs printed in ``html`` (a built page), in order."""
    return LEAKED_REPR.findall(html)


def main() -> int:
    html_dir = ROOT / "_build" / "html" / "book"
    problems = []
    pages = sorted(p.stem for p in (ROOT / "book").glob("ch[0-9][0-9]_*.md") if not p.name.endswith(".zh.md"))
    for stem in pages:
        page = html_dir / f"{stem}.html"
        if not page.exists():
            problems.append(f"{page.relative_to(ROOT)} was not built")
            continue
        figures = re.findall(r'<img[^>]+src="\.\./_images/[^"]+\.(?:png|svg)"', page.read_text())
        if not figures:
            problems.append(f"{page.relative_to(ROOT)} has no executed figure")
    missing = len(problems)
    for page in sorted(html_dir.glob("*.html")) + sorted((ROOT / "_build" / "html").glob("*.html")):
        for found in leaked_reprs(page.read_text()):
            problems.append(f"{page.relative_to(ROOT)} prints {found} (end the cell with plt.show() or ';')")
    for p in problems:
        print("BOOK:", p)
    print(
        f"built book: {len(pages) - missing} of {len(pages)} chapter pages have executed figures; "
        f"{len(problems) - missing} printed object repr(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
