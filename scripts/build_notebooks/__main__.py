"""``python -m scripts.build_notebooks [--check] [CHAPTER...]``: write (or check) every derived file;
``python -m scripts.build_notebooks translations check | stamp PAGE... | skeleton CHAPTER``: the Chinese edition's pages."""

from __future__ import annotations

import argparse
import pathlib
import sys

from autograder.notebooks import ROOT
from catalogue import samples

from . import notebooks, translations


def _translations(args) -> int:
    if args.action == "check":
        pages = translations.chinese_pages()
        problems = [f"{p.relative_to(ROOT)}: {s}" for p in pages for s in translations.stale(p)]
        print("\n".join(problems) or f"{len(pages)} Chinese pages, all in step with their English pages")
        return 1 if problems else 0
    if args.action == "stamp":
        for page in args.targets:
            translations.stamp(pathlib.Path(page).resolve())
        return 0
    if len(args.targets) != 1:  # skeleton: a Chinese notebook text to translate, from the release
        raise SystemExit("translations skeleton takes one CHAPTER")
    print(translations.notebook_skeleton(notebooks.build_release(args.targets[0])), end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["translations"]:
        parser = argparse.ArgumentParser(prog="python -m scripts.build_notebooks translations", description=__doc__)
        parser.add_argument("action", choices=["check", "stamp", "skeleton"], nargs="?", default="check")
        parser.add_argument("targets", nargs="*", help="stamp: book/<stem>.zh.md pages; skeleton: one chapter")
        return _translations(parser.parse_args(argv[1:]))
    parser = argparse.ArgumentParser(prog="python -m scripts.build_notebooks", description=__doc__)
    parser.add_argument("chapters", nargs="*", help="chapter stems (default: all)")
    parser.add_argument("--check", action="store_true", help="list the stale derived files instead of writing them")
    args = parser.parse_args(argv)
    chapters = args.chapters or None
    if args.check:
        problems = notebooks.stale(chapters) + samples.stale(chapters)
        for problem in problems:
            print("STALE:", problem)
        print(
            "Run `python -m scripts.build_notebooks` and commit the result."
            if problems
            else "All derived files in sync."
        )
        return 1 if problems else 0
    for path in notebooks.build(chapters) + samples.build(chapters):
        print("wrote", path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
