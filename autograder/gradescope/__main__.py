"""A chapter's autograder for Gradescope, made by one command, that grades there as ``python -m autograder grade``
grades here.

``python -m autograder.gradescope run --config gradescope.json`` (what the zip's ``run_autograder`` calls:
:mod:`autograder.gradescope.run`) and ``python -m autograder.gradescope build CHAPTER`` (as ``python -m autograder
gradescope``: :mod:`autograder.gradescope.build`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from .build import add_build_arguments, build_command
from .run import add_run_arguments, run_command


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade /autograder/submission and write /autograder/results/results.json")
    add_run_arguments(p)
    p = sub.add_parser("build", help="write CHAPTER_gradescope.zip (as python -m autograder gradescope)")
    add_build_arguments(p)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "build":
        return build_command(args)
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
