"""``python -m autograder.gradescope run --config gradescope.json [--root /autograder]``: grade the submission in
Gradescope's container (:func:`autograder.gradescope.run.run`; what the zip's ``run_autograder`` calls)."""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

from ..cli import show_progress
from ..grading import execute
from .build import Config
from .run import run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade /autograder/submission into /autograder/results/")
    p.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    p.add_argument("--config", required=True, help="the autograder's gradescope.json")
    args = parser.parse_args(argv)
    show_progress()  # the grader's log on stdout: Gradescope shows it to the instructor
    cores = str(execute.usable_cores())  # this process's torch (the worker's judge) as the kernel's: no more threads
    os.environ.setdefault("OMP_NUM_THREADS", cores)
    os.environ.setdefault("MKL_NUM_THREADS", cores)
    run(pathlib.Path(args.root), Config.read(pathlib.Path(args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
