"""What the student is told is what is graded (issue 38).

Every hidden check declares the requirement it tests (``Exercises.check(..., requires=)``, in Chinese from the chapter's catalogue ``autograder/locale/zh/<chapter>.json``); the build
lists an exercise's requirements in a generated cell between its instructions and its answer cell, in both editions,
and refuses a hidden check without one. These tests read the committed notebooks, so a requirement that is not in
the text a student reads fails here even when the build was not rerun.
"""

from __future__ import annotations

import nbformat
import pytest

from autograder import notebooks, releases, wording
from scripts.build_notebooks import notebooks as builder
from scripts.build_notebooks import translations

CHAPTERS = notebooks.chapters()
ZH = {chapter for chapter in CHAPTERS if translations.notebook_translation(chapter) is not None}


def _exercise_text(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Exercise name -> the markdown a student reads above its answer cell (since the previous exercise's test)."""
    texts: dict[str, str] = {}
    pending: list[str] = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown":
            pending.append(cell.source)
        elif meta.get("solution"):
            texts[meta["grade_id"]] = "\n".join(pending)
        elif meta.get("grade"):
            pending = []
    return texts


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_hidden_check_declares_its_requirement(chapter):
    for ex in releases.checks_module(chapter).EXERCISES:
        assert not ex.unstated, f"{chapter}.{ex.name}: hidden checks without requires=: {ex.unstated}"
        for fn in ex.hidden:
            req = ex.declared[fn]
            assert req.en.strip() and req.zh.strip(), f"{chapter}.{fn.__name__}: an empty requirement"
            assert req.en in wording.catalogue("zh"), f"{chapter}.{fn.__name__}: no Chinese for {req.en!r}"
            assert any("\u4e00" <= ch <= "\u9fff" for ch in req.zh), f"{chapter}.{fn.__name__}: its Chinese is Chinese"


@pytest.mark.parametrize("chapter", CHAPTERS)
@pytest.mark.parametrize("edition", ["en", "zh"])
def test_every_requirement_is_in_the_exercise_text(chapter, edition):
    """Each check's requirement is in the committed notebook, between the exercise's instructions and its answer."""
    if edition == "zh" and chapter not in ZH:
        pytest.skip("no Chinese notebook")
    folder = notebooks.RELEASE_DIR / ("zh" if edition == "zh" else "")
    nb = nbformat.read(folder / f"{chapter}.ipynb", as_version=4)
    texts = _exercise_text(nb)
    for ex in releases.checks_module(chapter).EXERCISES:
        text = _flat(texts.get(ex.name, ""))
        for fn, req in ex.declared.items():
            sentence = _flat(req.zh if edition == "zh" else req.en)
            assert sentence in text, (
                f"{chapter} ({edition}): the requirement of {fn.__name__} is not in {ex.name}'s text: {sentence!r} "
                "(python -m scripts.build_notebooks)"
            )


def test_the_build_refuses_a_hidden_check_without_a_requirement(monkeypatch):
    ex = releases.checks_module("ch05_transformer").EXERCISES["PositionalEncoding"]
    monkeypatch.delitem(ex.declared, ex.hidden[0])
    with pytest.raises(ValueError, match="declare no requirement"):
        builder.build_instructor("ch05_transformer")


def test_points_in_the_text_must_equal_the_checks_points():
    chapter = "ch04_multi_head_attention"  # split_heads 2, merge_heads 1, MultiHeadAttention 4
    good = ["| 1 | `split_heads(x, n_heads)` — split | 2 |", "## Exercise 2 — merge the heads back (1 point)"]
    assert builder.points_problems(chapter, good) == []
    bad = ["| 1 | `split_heads(x, n_heads)` — split | 3 |", "## Exercise 2 — merge the heads back (2 points)"]
    assert len(builder.points_problems(chapter, bad)) == 2
    assert builder.points_problems(chapter, ["## 练习 3 — 多头注意力（4 分）"], "zh") == []
    assert builder.points_problems(chapter, ["## 练习 3 — 多头注意力（3 分）"], "zh")


def test_points_are_pluralised():
    assert releases.points_text(1) == "1 point" and releases.points_text(2) == "2 points"
    assert releases.points_text(0.5) == "0.5 points" and releases.points_text(1, "zh") == "1 分"
    assert "(1 point)" in releases.test_source("merge_heads", 1)
    assert "(4 points)" in releases.test_source("MultiHeadAttention", 4)
