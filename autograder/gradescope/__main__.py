"""``python -m autograder.gradescope run --config gradescope.json``: grade ``/autograder/submission`` in Gradescope's
container (what the zip's ``run_autograder`` calls: :mod:`autograder.gradescope.run`). The zip itself is written by
``python -m autograder gradescope CHAPTER`` (:mod:`autograder.gradescope.build`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from .run import add_run_arguments, run_command


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_arguments(sub.add_parser("run", help="grade /autograder/submission into /autograder/results/"))
    return run_command(parser.parse_args(list(argv) if argv is not None else None))


if __name__ == "__main__":
    sys.exit(main())
