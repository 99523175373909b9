"""`python -m scripts.scaffold`: a new chapter's parts, written into a temporary copy of the course (the tree
is never touched), pass the chapter-wide checks except the catalogue size, and build into a notebook."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from autograder import notebooks
from scripts import scaffold

ROOT = notebooks.ROOT
NEXT = max(int(c[2:4]) for c in notebooks.chapters()) + 1  # the chapter after the last one (numbers may have gaps)
STEM = f"ch{NEXT:02d}_example_attention"


@pytest.fixture
def course(tmp_path) -> pathlib.Path:
    """The parts of the course a chapter's checks and build need, copied to tmp_path."""
    copy = tmp_path / "course"
    skip = shutil.ignore_patterns("__pycache__", "samples", "_release")
    for folder in ("solutions", "autograder", "catalogue"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=skip)
    shutil.copytree(ROOT / "notebooks" / "templates", copy / "notebooks" / "templates", ignore=skip)
    shutil.copytree(ROOT / "scripts" / "build_notebooks", copy / "scripts" / "build_notebooks", ignore=skip)
    (copy / "book").mkdir()
    (copy / "tests").mkdir()
    for name in (
        "scripts/__init__.py",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/test_checks.py",
        "tests/test_catalogues.py",
        "tests/test_grading.py",
        "_toc.yml",
        "pyproject.toml",
    ):
        shutil.copy(ROOT / name, copy / name)
    return copy


def test_scaffold_writes_the_parts_and_lists_the_page(course, capsys):
    assert scaffold.main([STEM, "Sparse attention", "--root", str(course)]) == 0
    for part in (
        f"solutions/{STEM}.py",
        f"autograder/{STEM}.py",
        f"catalogue/{STEM}.py",
        f"notebooks/templates/{STEM}.py",
    ):
        assert (course / part).exists(), part
    page = (course / f"book/{STEM}.md").read_text()
    assert page.startswith("---\njupytext:") and f"# {NEXT}. Sparse attention" in page and 'style.use("figures' in page
    toc = (course / "_toc.yml").read_text().splitlines()
    files = [line.strip() for line in toc if line.strip().startswith("- file: book/ch")]
    assert files[-1] == f"- file: book/{STEM}" and files == sorted(files), "listed after the chapters before it"
    out = capsys.readouterr().out
    assert f"wrote tests/test_{STEM}.py" in out and "replace every TODO" in out
    # never overwrites
    assert scaffold.main([STEM, "Sparse attention", "--root", str(course)]) == 2
    assert "already has" in capsys.readouterr().err
    assert scaffold.main(["Ch9-sparse", "x", "--root", str(course)]) == 2


@pytest.mark.parametrize("bad", ["ch9_x", "ch09-sparse", "ch09_Sparse", "sparse"])
def test_scaffold_refuses_a_bad_stem(bad, tmp_path):
    with pytest.raises(ValueError, match="chNN_"):
        scaffold.scaffold(tmp_path, bad, "x")


@pytest.mark.slow
def test_scaffolded_chapter_passes_the_chapter_wide_checks(course):
    scaffold.scaffold(course, STEM, "Sparse attention")
    env = {**os.environ, "PYTHONPATH": str(course), "OMP_NUM_THREADS": "1"}
    run = lambda *args: subprocess.run(
        [sys.executable, *args], cwd=course, env=env, capture_output=True, text=True, timeout=600
    )
    tests = run(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", f"{STEM} or catalogue_size", "tests/test_checks.py",
        "tests/test_catalogues.py", f"tests/test_{STEM}.py",
    )  # fmt: skip
    failed = sorted(set(line.split(" - ")[0] for line in tests.stdout.splitlines() if line.startswith("FAILED")))
    assert failed == ["FAILED tests/test_checks.py::test_catalogue_size"], tests.stdout[-3000:]
    assert f"{STEM}: fewer than 12 catalogued bugs" in tests.stdout
    # The notebook builds, and the sample with the first catalogued bug scores some points but not all.
    build = run(
        "-c",
        "from scripts.build_notebooks import notebooks as builder\n"
        "from catalogue.samples import sample_submissions\n"
        "from tests.test_grading import _expected_scores\n"
        f"release = builder.build_release({STEM!r})\n"
        f"samples = sample_submissions({STEM!r}, release)\n"
        f"print(sorted(sum(_expected_scores({STEM!r}, e).values()) for _, e in samples.values()))",
    )
    assert build.returncode == 0, build.stderr[-3000:]
    assert build.stdout.split("\n")[-2] == "[0.0, 0.0, 2.0, 4.0]", build.stdout  # zero, invalid, the bug, full
