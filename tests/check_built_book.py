"""After `make book`: every chapter page in the built HTML has its executed figures.

Run by `make test` after the build as `python -m tests.check_built_book` (a page whose figures silently vanished —
e.g. because a non-inline matplotlib backend was forced — still builds without warnings, so the build alone does
not catch it).
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> int:
    html_dir = ROOT / "_build" / "html" / "book"
    problems = []
    pages = sorted(p.stem for p in (ROOT / "book").glob("ch[0-9][0-9]_*.md"))
    for stem in pages:
        page = html_dir / f"{stem}.html"
        if not page.exists():
            problems.append(f"{page.relative_to(ROOT)} was not built")
            continue
        figures = re.findall(r'<img[^>]+src="\.\./_images/[^"]+\.(?:png|svg)"', page.read_text())
        if not figures:
            problems.append(f"{page.relative_to(ROOT)} has no executed figure")
    for p in problems:
        print("BOOK:", p)
    print(f"built book: {len(pages) - len(problems)} of {len(pages)} chapter pages have executed figures")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
