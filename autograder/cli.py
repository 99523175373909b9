"""Command line: ``python -m autograder {grade,selfcheck,gradescope}`` (also installed as ``attention-course``).

The notebook builder, which maintainers run, is ``python -m scripts.build_notebooks`` in a checkout."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pathlib
import re
import sys

from . import notebooks


def _cmd_grade(args) -> int:
    try:
        import latex2mathml  # noqa: F401 - the grading machinery is the instructors' extra (no nbgrader on its path)
        import nbclient  # noqa: F401
    except ImportError:
        from . import PACKAGE_SOURCE  # the course is not on PyPI: install it from its repository

        print(
            "error: grading needs nbclient and latex2mathml, which the student install does not contain. Install the "
            f"course with its grading extra:\n    pip install 'attention-course[grading] @ {PACKAGE_SOURCE}'"
            "   (in a checkout: make setup)",
            file=sys.stderr,
        )
        return 2
    from .grading import batch, collect, lms, report

    ignored: list[str] = []  # what the downloads held that is no submission
    jobs: list[tuple[str, list[pathlib.Path]]] | str
    if not args.submissions:  # the default run: every chapter's shipped samples
        jobs = [(c, sorted((notebooks.SAMPLES / c).glob("*.ipynb"))) for c in notebooks.chapters()]
    else:
        missing = [s for s in args.submissions if not pathlib.Path(s).exists()]
        if missing:
            print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
            return 2
        files = collect.expand_submissions(args.submissions, pathlib.Path(args.out) / "_unzipped", ignored)
        if ignored:
            print(f"Ignored {len(ignored)} file(s) that are no submissions:")
            for line in ignored:
                print(f"  {line}")
        jobs = [(args.chapter, files)] if args.chapter else _jobs_by_chapter(files, args.lms_assignment)
        if isinstance(jobs, str):
            print(f"error: {jobs}", file=sys.stderr)
            return 2
    from .grading import jail

    if args.no_jail:
        os.environ[jail.JAIL_SWITCH] = "off"
        as_root = jail.root_kernel_problem(jailed=False)
        if as_root:
            print(f"error: {as_root}.", file=sys.stderr)
            return 2
        print(
            "Grading WITHOUT the jail (--no-jail): each kernel runs with this machine's filesystem in view, held "
            "only by the in-kernel guard's file rules. Use it only for submissions you trust."
        )
    elif args.submissions and args.executor == "local" and not args.scheduler:
        problem, _ = jail.isolation()
        if problem:
            print(f"error: the kernels cannot be jailed here: {problem}.\n{JAIL_HELP}", file=sys.stderr)
            return 2
    with contextlib.ExitStack() as stack:
        executor = None
        if args.executor == "dask" or args.scheduler:  # grading/executors.py
            from .grading import executors

            try:
                executor = stack.enter_context(executors.DaskCluster(args.scheduler, workers=args.jobs))
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        for chapter, files in jobs:
            out = pathlib.Path(args.out) / chapter
            rows = batch.grade(
                files,
                chapter,
                out,
                cell_timeout=args.cell_timeout,
                notebook_timeout=args.timeout,
                memory_mb=args.memory_mb,
                worker_memory_mb=args.worker_memory_mb,
                jobs=args.jobs,
                force=args.force,
                lms_assignment=args.lms_assignment,
                executor=executor,
                prefer=args.prefer,
                ignored=ignored,
                moodle_language=args.moodle_language,
            )
            print(f"  wrote {out / report.CSV_NAME} ({len(rows)} rows), summary.md/.csv/.png and {out / 'feedback'}/")
            for system, name in ((lms.CANVAS, lms.CANVAS_FILE), (lms.MOODLE, lms.MOODLE_FILE)):
                if (out / name).exists():  # none where no student's row could be chosen (README: --prefer)
                    print(f"  wrote {out / name} (to import into {system.capitalize()}: README, 'Grades into the LMS')")
    return 0


def _jobs_by_chapter(files: list[pathlib.Path], lms_assignment: str | None) -> list[tuple[str, list]] | str:
    """(chapter, its files) per chapter the files are (from their content, else their names), or why they cannot be
    graded without ``--chapter``. Files whose chapter is unknown (a PDF beside the notebooks) join the one chapter
    there is, as do other chapters' notebooks for one LMS assignment (a row each, with the reason)."""
    from . import canonical, releases

    by_chapter: dict[str, list[pathlib.Path]] = {}
    for f in files:
        try:
            with open(f, "rb") as opened:
                chapter = canonical.chapter_of(opened.read(canonical.MAX_BYTES + 1))
        except OSError:
            chapter = None
        by_chapter.setdefault(chapter or releases.chapter_from_filename(f.name) or "", []).append(f)
    unknown = by_chapter.pop("", [])
    if lms_assignment and len(by_chapter) > 1:  # one assignment: the chapter most of its files are
        main_chapter = _assignment_chapter(lms_assignment, by_chapter)
        if main_chapter is None:
            return (
                f"--lms-assignment names one assignment, but the submissions are of {len(by_chapter)} chapters in "
                f"equal numbers ({', '.join(sorted(by_chapter))}); pass --chapter"
            )
        for f in [f for c, fs in by_chapter.items() if c != main_chapter for f in fs]:
            print(f"note: {f.name} is another chapter's notebook: it gets a row of its own, with the reason")
        by_chapter = {main_chapter: [f for fs in by_chapter.values() for f in fs]}
    if unknown and len(by_chapter) != 1:
        return f"cannot tell the chapter of {unknown[0].name}; pass --chapter"
    return [(c, sorted(fs + unknown)) for c, fs in sorted(by_chapter.items())]


def _assignment_chapter(assignment: str, by_chapter: dict[str, list]) -> str | None:
    """The chapter an LMS assignment grades: the one its name gives (``ch08``, ``Chapter 8``), else the one most
    of its files are; None when that is a tie."""
    m = re.search(r"(?:\bch|chapter\s*)0*(\d+)", assignment, re.I)
    if m:
        named = [c for c in by_chapter if c[2:4].isdigit() and int(c[2:4]) == int(m.group(1))]
        if named:
            return named[0]
    counts = sorted(((len(fs), c) for c, fs in by_chapter.items()), reverse=True)
    if len(counts) > 1 and counts[0][0] == counts[1][0]:
        return None
    return counts[0][1]


JAIL_HELP = """\
Submissions are untrusted code: each kernel runs in a bubblewrap jail (its own filesystem view, no network, an
unprivileged uid). Install bubblewrap and grade again:
    Debian/Ubuntu:   sudo apt-get install bubblewrap
    Fedora/RHEL:     sudo dnf install bubblewrap
In a container, bubblewrap needs user namespaces (Docker: --security-opt seccomp=unconfined, or --privileged).
macOS and Windows have no bubblewrap: grade in a Linux VM or container.
To grade without the jail anyway (trusted submissions only), pass --no-jail."""


def _cmd_selfcheck(args) -> int:
    from . import canonical

    ok, lines = canonical.selfcheck(args.notebook, args.chapter)
    print("\n".join(lines))
    return 0 if ok else 1


def show_progress() -> None:
    """The grader reports progress through ``logging`` (loggers under ``autograder``): show it as plain lines."""
    log = logging.getLogger("autograder")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    from .grading.lms import MOODLE_LANGUAGES  # the standard library only: no grading machinery

    p = sub.add_parser("grade", help="grade submitted notebooks (default: the shipped samples)")
    p.add_argument("submissions", nargs="*", help=".ipynb files or folders of them")
    p.add_argument("--chapter", help="chapter stem, e.g. ch03_self_attention (default: from the file names)")
    p.add_argument("--out", default="grading_out", help="output folder (default: grading_out)")
    p.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell (default: 120)")
    p.add_argument("--timeout", type=int, default=900, help="seconds per notebook in total (default: 900)")
    p.add_argument("--memory-mb", type=int, default=6144, help="address-space limit of a kernel (default: 6144)")
    p.add_argument(
        "--worker-memory-mb",
        type=int,
        default=1024,
        help="memory cgroup of each grading worker, where the grader may make one; 0: none (default: 1024)",
    )
    p.add_argument("--jobs", "-j", type=int, default=None, help="submissions graded at once (default: cores)")
    p.add_argument("--force", action="store_true", help="regrade files already graded (default: skip them)")
    p.add_argument(
        "--executor",
        choices=["local", "dask"],
        default="local",
        help="where the workers run: processes on this machine (default), or a Dask cluster (a local one, "
        "--jobs workers, unless --scheduler is given; needs the `cluster` extra)",
    )
    p.add_argument(
        "--scheduler", metavar="ADDRESS", help="grade on the running Dask cluster at ADDRESS, e.g. tls://host:8786"
    )
    p.add_argument(
        "--lms-assignment",
        metavar="NAME",
        help="Canvas: the assignment column of canvas_import.csv, with the Canvas assignment id in "
        'parentheses, e.g. "ch03 (12345)" (default: the chapter)',
    )
    p.add_argument(
        "--moodle-language",
        choices=MOODLE_LANGUAGES,
        default="en",
        help="Moodle: the language of the site's interface when you upload the grading worksheet (Moodle finds its "
        "columns by their names in that language): en (default) or zh_cn (Simplified Chinese)",
    )
    p.add_argument(
        "--prefer",
        metavar="FILE",
        action="append",
        default=[],
        help="the file that is its student's row in the LMS file, where the download cannot tell which of the "
        "student's files is the latest (the summary says so); its name as grades.csv writes it, or its file name; "
        "repeat for each such student",
    )
    p.add_argument(
        "--no-jail",
        action="store_true",
        help="grade without the bubblewrap jail, giving up each kernel's OS isolation (own filesystem view, no "
        "network, own uid): only for trusted submissions; without this flag, grading refuses to start where the "
        "jail cannot run",
    )
    p.set_defaults(func=_cmd_grade)
    p = sub.add_parser("selfcheck", help="students: is my notebook still gradeable? (runs nothing)")
    p.add_argument("notebook")
    p.add_argument("--chapter", help="chapter stem (default: from the file name or its setup cell)")
    p.set_defaults(func=_cmd_selfcheck)
    p = sub.add_parser("gradescope", help="write CHAPTER_gradescope.zip: the chapter's autograder for Gradescope")
    from .gradescope import build

    build.add_build_arguments(p)
    p.set_defaults(func=build.build_command)
    args = parser.parse_args(argv)
    show_progress()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
