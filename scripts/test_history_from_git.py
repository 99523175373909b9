"""The test cell history (``notebooks/test_history/<chapter>.json``) from the git history of the release notebooks.

``python -m scripts.build_notebooks`` adds the current release's test cells to each chapter's history
(``canonical.history_text``); the versions that releases had before the history existed come from git, once::

    python -m scripts.test_history_from_git

Every committed version of ``notebooks/<chapter>.ipynb`` and ``notebooks/zh/<chapter>.ipynb`` is read; a chapter's
existing history is kept (versions are only added). Run it again after merging a branch whose history was written
before this one's, or to rebuild a lost file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

from autograder import canonical, notebooks

ROOT = notebooks.ROOT


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def committed_versions(chapter: str) -> Iterator[dict]:
    """Every committed version of the chapter's release notebooks (both editions), as JSON, newest first."""
    paths = [f"notebooks/{chapter}.ipynb", f"notebooks/zh/{chapter}.ipynb"]
    for commit in _git("log", "--format=%H", "--", *paths).split():
        for path in paths:
            try:
                yield json.loads(_git("show", f"{commit}:{path}"))
            except (subprocess.CalledProcessError, json.JSONDecodeError):
                continue  # not in this commit (added later, or deleted), or not a notebook then


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapters (default: all)")
    args = parser.parse_args(argv)
    for chapter in args.chapters or notebooks.chapters():
        path = canonical.history_path(chapter, notebooks.RELEASE_DIR)
        earlier = path.read_text(encoding="utf-8") if path.is_file() else None
        text = canonical.history_text(earlier, committed_versions(chapter))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        versions = sum(len(v) for v in json.loads(text).values())
        print(f"wrote {Path(path).relative_to(ROOT)}: {versions} test cell version(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
