"""Derived notebooks are in sync with their sources, and the instructor notebooks run top to bottom (nbval)."""

import pathlib
import re
import subprocess
import sys

import nbformat
import pytest

import autograder
from autograder import notebooks

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTERS = notebooks.chapters()


def test_derived_files_in_sync():
    problems = notebooks.stale()
    assert not problems, "derived files are stale; run `python -m autograder build`:\n" + "\n".join(problems)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_is_clean(chapter):
    text = (ROOT / "notebooks" / f"{chapter}.ipynb").read_text()
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    nb = nbformat.reads(text, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert nb.metadata["accelerator"] == "GPU" and "colab" in nb.metadata
    assert notebooks.colab_url(chapter) in nb.cells[0].source
    stubs = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert stubs and all("raise NotImplementedError()" in c.source for c in stubs)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_four_parts_share_the_stem(chapter):
    for part in (
        f"book/{chapter}.md",
        f"solutions/{chapter}.py",
        f"autograder/{chapter}.py",
        f"notebooks/{chapter}.ipynb",
        f"tests/test_{chapter}.py",
    ):
        assert (ROOT / part).exists(), f"{chapter}: {part} is missing"
    assert f"book/{chapter}" in (ROOT / "_toc.yml").read_text()


def test_repository_url_agrees_with_book_config():
    config = (ROOT / "_config.yml").read_text()
    assert re.search(rf"url:\s*{re.escape(autograder.REPOSITORY)}\s", config)
    assert re.search(rf"branch:\s*{autograder.BRANCH}\s", config)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_instructor_notebook_runs_with_nbval(chapter, tmp_path):
    """The instructor notebook (reference + hidden tests) executes top to bottom under nbval."""
    path = tmp_path / f"{chapter}.ipynb"
    nbformat.write(notebooks.build_instructor(chapter), path)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--nbval-lax",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
