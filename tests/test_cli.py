"""The command line's grouping of submitted files by chapter (``cli._jobs_by_chapter``), without grading them."""

from __future__ import annotations

import pathlib

from autograder import cli, notebooks


def _files(tmp_path: pathlib.Path, **named: str) -> list[pathlib.Path]:
    """Files named as given, each a copy of that chapter's sample by Lovelace (a chapter "": a PDF)."""
    made = []
    for name, chapter in named.items():
        path = tmp_path / name
        sample = next((notebooks.SAMPLES / chapter).glob("lovelace*.ipynb")) if chapter else None
        path.write_bytes(sample.read_bytes() if sample else b"%PDF-1.4 ...")
        made.append(path)
    return made


def test_files_are_grouped_by_the_chapter_their_content_says(tmp_path):
    files = _files(
        tmp_path, **{"a.ipynb": "ch08_kv_cache", "b.ipynb": "ch10_flash_attention", "c.ipynb": "ch08_kv_cache"}
    )
    a, b, c = files
    assert cli._jobs_by_chapter(files, None) == [("ch08_kv_cache", [a, c]), ("ch10_flash_attention", [b])]
    # one LMS assignment: its chapter (named, else the most files') takes every file, each stray with its reason
    assert cli._jobs_by_chapter(files, "Chapter 10 (12345)") == [("ch10_flash_attention", [a, b, c])]
    assert cli._jobs_by_chapter(files, "Week 3") == [("ch08_kv_cache", [a, b, c])]
    assert "equal numbers" in cli._jobs_by_chapter(files[:2], "Week 3")


def test_a_file_of_no_chapter_joins_the_one_chapter_there_is(tmp_path):
    files = _files(tmp_path, **{"a.ipynb": "ch08_kv_cache", "answers.pdf": ""})
    assert cli._jobs_by_chapter(files, None) == [("ch08_kv_cache", sorted(files))]
    more = files + _files(tmp_path, **{"b.ipynb": "ch10_flash_attention"})
    assert cli._jobs_by_chapter(more, None) == "cannot tell the chapter of answers.pdf; pass --chapter"
