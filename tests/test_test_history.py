"""A test cell as an earlier release had it is no edit (canonical.py, notebooks/test_history/).

A student who downloaded chapter 4 before its test cells' comments were reworded ("(1 points)" became "(1 point)"
in commit 195919d) has the earlier test cell: the grader must not say it was edited (in grades.csv and on the
student's page), while a test cell the student did change is still reported.
"""

import json

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import batch
from scripts.build_notebooks import notebooks as builder
from scripts.build_notebooks import translations

CHAPTER = "ch04_multi_head_attention"
TEST = "test_merge_heads"
# test_merge_heads as notebooks/ch04_multi_head_attention.ipynb had it from a88f409 to 195919d (git show)
EARLIER = (
    "# Checks for `merge_heads` (1 points). A failure says what was expected and what you gave.\n"
    'EXERCISES.run("merge_heads", merge_heads)'
)
EDITED = EARLIER.replace("\nEXERCISES", "\nif False:  # the student's edit: the checks never run\n    EXERCISES")


def _answered(test_source: str | None = None, *, strip: bool = False) -> nbformat.NotebookNode:
    """The chapter's release notebook with every exercise answered, its TEST cell's source replaced (and, with
    ``strip``, its nbgrader metadata and id gone, as some editors leave it)."""
    nb = builder.fill_release(releases.release_notebook(CHAPTER), CHAPTER)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == TEST)
    if test_source is not None:
        cell.source = test_source
    if strip:
        cell.metadata, cell.id = {}, "pasted-by-an-editor"
    return nb


def _edited(warnings: list[str]) -> list[str]:
    return [str(w) for w in warnings if "was edited" in str(w)]


def test_the_release_notebook_changed_that_test_cell():
    release = releases.release_notebook(CHAPTER)
    current = next(c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == TEST)
    assert "(1 point)" in current and current != EARLIER


@pytest.mark.parametrize("strip", [False, True], ids=["as released", "metadata stripped"])
def test_an_earlier_releases_test_cell_is_no_edit(strip):
    release = releases.release_notebook(CHAPTER)
    _, warnings = canonical.canonicalise(nbformat.writes(_answered(EARLIER, strip=strip)), release)
    assert not _edited(warnings), warnings
    # without the history it is reported: the history is what tells them apart
    _, warnings = canonical.canonicalise(nbformat.writes(_answered(EARLIER, strip=strip)), release, history={})
    assert _edited(warnings) == [f"test cell {TEST} was edited: restored from the release"], warnings


@pytest.mark.parametrize("strip", [False, True], ids=["as released", "metadata stripped"])
def test_an_edited_test_cell_is_still_reported(strip):
    release = releases.release_notebook(CHAPTER)
    _, warnings = canonical.canonicalise(nbformat.writes(_answered(EDITED, strip=strip)), release)
    assert _edited(warnings) == [f"test cell {TEST} was edited: restored from the release"], warnings
    _, warnings = canonical.canonicalise(nbformat.writes(_answered()), release)
    assert not _edited(warnings), warnings


def test_the_history_holds_every_chapters_released_test_cells():
    """The committed history is in sync with the committed release notebooks (both editions): `python -m scripts.build_notebooks`
    adds a changed test cell (the full check: `python -m scripts.build_notebooks --check`, tests/test_notebooks.py); and it keeps the
    versions before, from git (scripts/test_history_from_git.py)."""
    for chapter in notebooks.chapters():
        path = canonical.history_path(chapter, notebooks.RELEASE_DIR)
        released = [releases.release_notebook(chapter)]
        if translations.notebook_translation(chapter) is not None:
            released.append(releases.release_notebook(chapter, "zh"))
        text = path.read_text()
        assert canonical.history_text(text, released) == text, (
            f"{path.name} is stale: python -m scripts.build_notebooks"
        )
        assert set(json.loads(text)) >= set(canonical.released_test_cells(released[0])), path.name
    assert canonical.test_digest(EARLIER) in releases.test_history(CHAPTER)[TEST]


def test_the_build_adds_a_changed_test_cell_and_keeps_the_earlier_ones():
    release = releases.release_notebook(CHAPTER)
    earlier = canonical.history_text(None, [_answered(EARLIER)])
    later = json.loads(canonical.history_text(earlier, [release]))
    assert later[TEST] == sorted({canonical.test_digest(EARLIER), canonical.released_test_cells(release)[TEST]}), (
        "both versions"
    )
    assert canonical.history_text(json.dumps(later), [release]) == json.dumps(later, indent=1) + "\n", "idempotent"


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
def test_an_earlier_download_gets_full_marks_and_no_edit_reported(tmp_path):
    """Through the course's grader (canonicalise, jailed kernel, judge, feedback, grades.csv)."""
    path = tmp_path / f"lovelaceada_1001_90001_{CHAPTER}.ipynb"
    nbformat.write(_answered(EARLIER), path)
    (row,) = batch.grade([path], CHAPTER, tmp_path / "out", jobs=1)
    assert (row.status, row.score) == ("graded", row.max_score), row.reason
    assert not _edited(row.warnings) and "edited" not in row.reason, (row.warnings, row.reason)
    assert "was edited" not in (tmp_path / "out" / "grades.csv").read_text()
    pages = list((tmp_path / "out" / "feedback").glob("*.html"))
    assert pages and not any("was edited" in p.read_text() for p in pages)
