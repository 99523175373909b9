"""The sample submissions under ``autograder/samples/<chapter>/``: ``python -m catalogue.samples [--check]``.

Per chapter, four notebooks as Canvas names them in a "Download submissions" zip (lastfirst_userid_submissionid_filename):
one answered with the reference, one untouched, one answered with the reference but for a catalogued bug (the
mutant named "no scaling", else the chapter's first), and one cut short. The grading command grades them by
default; they are not packaged (MANIFEST.in), and they are built here because the bug comes from the catalogue.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import nbformat

import catalogue
from autograder import notebooks
from scripts.build_notebooks import notebooks as builder


def sample_submissions(chapter: str, release: nbformat.NotebookNode) -> dict[str, tuple[str, str]]:
    """File name -> (file text, what grading it must give) for the samples graded by default.

    The expectation is ``"full"``, ``"zero"``, ``"invalid"`` (a zero with a reason) or ``"bug:<mutant name>"``
    (the exercises the catalogued bug breaks score zero; see ``tests/test_grading.py``).
    """
    mutants = catalogue.mutants(chapter)
    bug = next((m for m in mutants if m.name == "no scaling"), mutants[0])
    correct = nbformat.writes(builder.fill_release(release, chapter))
    return {
        f"lovelaceada_1001_90001_{chapter}.ipynb": (correct, "full"),
        f"turingalan_1002_90002_{chapter}.ipynb": (nbformat.writes(release), "zero"),
        f"hoppergrace_1003_90003_{chapter}.ipynb": (
            nbformat.writes(builder.fill_release(release, chapter, [bug])),
            f"bug:{bug.name}",
        ),
        # A download cut short: not valid JSON.
        f"babbagecharles_LATE_1004_90004_{chapter}.ipynb": (correct[: len(correct) // 2], "invalid"),
    }


def files(chapter: str) -> dict[pathlib.Path, str]:
    """Path -> expected text of the chapter's samples, from its committed release notebook's build."""
    release = builder.build_release(chapter)
    return {
        notebooks.SAMPLES / chapter / name: text for name, (text, _) in sample_submissions(chapter, release).items()
    }


def stale(chapter_list: list[str] | None = None) -> list[str]:
    """Problems with the committed samples (empty when they are in sync with the catalogue and the sources)."""
    problems = []
    for chapter in chapter_list or notebooks.chapters():
        expected = files(chapter)
        extra = set((notebooks.SAMPLES / chapter).glob("*.ipynb")) - set(expected)
        problems += [f"{p.relative_to(notebooks.ROOT)} is not produced by the build" for p in sorted(extra)]
        for path, text in expected.items():
            rel = path.relative_to(notebooks.ROOT)
            if not path.exists():
                problems.append(f"{rel} is missing")
            elif path.read_text() != text:
                problems.append(f"{rel} is stale")
    return problems


def build(chapter_list: list[str] | None = None) -> list[pathlib.Path]:
    """Write the samples (and remove the ones no longer produced); return the files written."""
    written = []
    for chapter in chapter_list or notebooks.chapters():
        old = set((notebooks.SAMPLES / chapter).glob("*.ipynb"))
        for path, text in files(chapter).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            old.discard(path)
            written.append(path)
        for path in old:
            path.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m catalogue.samples", description=__doc__)
    parser.add_argument("chapters", nargs="*", help="chapter stems (default: all)")
    parser.add_argument("--check", action="store_true", help="list stale samples instead of writing them")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.chapters or None)
        print("\n".join(problems) or "samples in sync")
        return 1 if problems else 0
    for path in build(args.chapters or None):
        print("wrote", path.relative_to(notebooks.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
