"""Point every link of the course at another repository (after a fork): ``python -m scripts.repository URL``.

The address is written once, in ``autograder/__init__.py`` (``REPOSITORY``, ``BRANCH``); the files below repeat it
because their formats cannot import it (the book's ``_config.yml``, ``CITATION.cff``, ``pyproject.toml``'s URLs,
the Colab links in ``README.md`` and the workflow files). This command rewrites all of them, then rebuilds the
derived notebooks (their Colab badges and setup cells carry the address)::

    python -m scripts.repository https://github.com/you/attention-in-nlp [--branch main] [--no-build]

``tests/test_publishing.py`` fails when any tracked text file names a GitHub repository address other than
``REPOSITORY`` (apart from the cited projects), so a fork that edits only some of these files is caught.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Files that repeat the address; the derived notebooks are rebuilt instead of edited.
FILES = [
    "autograder/__init__.py",
    "_config.yml",
    "CITATION.cff",
    "pyproject.toml",
    "README.md",
    "CONTRIBUTING.md",
    "nbgrader_course/README.md",
]
_URL = re.compile(r"^https://github\.com/([A-Za-z0-9][A-Za-z0-9-]*)/([A-Za-z0-9._-]+?)/?$")


def parse(url: str) -> tuple[str, str]:
    """``(owner, name)`` of a ``https://github.com/OWNER/NAME`` address; raises ValueError for anything else."""
    match = _URL.match(url.strip())
    if not match or match.group(2).endswith(".git"):
        raise ValueError(f"expected https://github.com/OWNER/NAME (no .git, no path), got {url!r}")
    return match.group(1), match.group(2)


def rewrite(root: pathlib.Path, new_url: str, new_branch: str | None = None) -> list[pathlib.Path]:
    """Replace the current address (and branch, in the places that name it) in :data:`FILES` under ``root``.

    Returns the files changed. The current address and branch are read from ``root/autograder/__init__.py``.
    """
    owner, name = parse(new_url)
    new_url = f"https://github.com/{owner}/{name}"
    init = (root / "autograder" / "__init__.py").read_text(encoding="utf-8")
    old_url = re.search(r'^REPOSITORY = "([^"]+)"', init, re.M).group(1)  # type: ignore[union-attr]
    old_branch = re.search(r'^BRANCH = "([^"]+)"', init, re.M).group(1)  # type: ignore[union-attr]
    old_slug, new_slug = old_url.removeprefix("https://github.com/"), f"{owner}/{name}"
    branch = new_branch or old_branch
    changed = []
    for rel in FILES:
        path = root / rel
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        new = text.replace(old_url, new_url).replace(f"github/{old_slug}/", f"github/{new_slug}/")
        if branch != old_branch:
            new = new.replace(f"github/{new_slug}/blob/{old_branch}/", f"github/{new_slug}/blob/{branch}/")
            new = re.sub(r'^BRANCH = "[^"]+"', f'BRANCH = "{branch}"', new, flags=re.M)
            new = re.sub(r"^(  branch: )\S+", rf"\g<1>{branch}", new, flags=re.M)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.repository", description=__doc__.splitlines()[0])
    parser.add_argument("url", help="https://github.com/OWNER/NAME of the fork")
    parser.add_argument("--branch", help="branch the Colab links and the setup cell use (default: unchanged)")
    parser.add_argument("--no-build", action="store_true", help="do not rebuild the derived notebooks")
    args = parser.parse_args(argv)
    try:
        changed = rewrite(ROOT, args.url, args.branch)
    except ValueError as err:
        parser.error(str(err))
    for path in changed:
        print(f"rewrote {path.relative_to(ROOT)}")
    if not args.no_build:
        return subprocess.call([sys.executable, "-m", "scripts.build_notebooks"], cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
