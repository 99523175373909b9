"""Command line: ``python -m autograder {build,check,grade}`` (also installed as ``attention-course``)."""

from __future__ import annotations

import argparse
import pathlib
import sys

from . import notebooks


def _cmd_build(args) -> int:
    for path in notebooks.build(args.chapters or None):
        print("wrote", path.relative_to(notebooks.ROOT))
    return 0


def _cmd_check(args) -> int:
    problems = notebooks.stale(args.chapters or None)
    for p in problems:
        print("STALE:", p)
    if problems:
        print("Run `python -m autograder build` and commit the result.")
        return 1
    print("All derived notebooks and samples are in sync with their sources.")
    return 0


def _cmd_grade(args) -> int:
    from . import grading

    if not args.submissions:  # the default run: every chapter's shipped samples
        jobs = [(c, sorted((notebooks.SAMPLES / c).glob("*.ipynb"))) for c in notebooks.chapters()]
    else:
        files = []
        for p in map(pathlib.Path, args.submissions):
            files += sorted(p.glob("*.ipynb")) if p.is_dir() else [p]
        if args.chapter:
            jobs = [(args.chapter, files)]
        else:
            by_chapter: dict[str, list] = {}
            for f in files:
                chapter = grading.chapter_from_filename(f.name)
                if chapter is None:
                    print(f"error: cannot tell the chapter of {f.name}; pass --chapter", file=sys.stderr)
                    return 2
                by_chapter.setdefault(chapter, []).append(f)
            jobs = sorted(by_chapter.items())
    for chapter, files in jobs:
        out = pathlib.Path(args.out) / chapter
        print(f"Grading {len(files)} submission(s) of {chapter} -> {out}")
        rows = grading.grade(files, chapter, out, cell_timeout=args.cell_timeout)
        print(f"  wrote {out / grading.CSV_NAME} ({len(rows)} rows) and {out / 'feedback'}/")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("build", help="regenerate release notebooks, sample submissions, instructor notebooks")
    p.add_argument("chapters", nargs="*")
    p.set_defaults(func=_cmd_build)
    p = sub.add_parser("check", help="fail when a committed derived file is stale")
    p.add_argument("chapters", nargs="*")
    p.set_defaults(func=_cmd_check)
    p = sub.add_parser("grade", help="grade submitted notebooks (default: the shipped samples)")
    p.add_argument("submissions", nargs="*", help=".ipynb files or folders of them")
    p.add_argument("--chapter", help="chapter stem, e.g. ch03_self_attention (default: from the file names)")
    p.add_argument("--out", default="grading_out", help="output folder (default: grading_out)")
    p.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell (default: 120)")
    p.set_defaults(func=_cmd_grade)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
