"""The grading path as a line: which modules ``batch.grade`` calls, in the order it first calls them.

    python -m scripts.grading_path [CHAPTER]

Grades the chapter's shipped samples (``autograder/samples/CHAPTER/``) in a temporary folder and prints, for each
step of ``autograder/grading/batch.py``'s line, the course functions it called (calls made from ``batch.py``'s own
functions only, each listed once). For maintainers: it shows the steps collect → canonicalise → execute (the
worker and the kernel run in processes of their own) → feedback → report, each module entered once.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import threading

from autograder import notebooks
from autograder.grading import batch


def main(chapter: str = "ch03_self_attention") -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def profile(frame, event, arg):
        caller = frame.f_back
        if event != "call" or caller is None or not caller.f_code.co_filename.endswith("grading/batch.py"):
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("autograder") and module != "autograder.grading.batch":
            step = (caller.f_code.co_name, f"{module}.{frame.f_code.co_name}")
            if step not in seen:
                seen.append(step)

    files = sorted((notebooks.SAMPLES / chapter).glob("*.ipynb"))
    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        batch.grade(files, chapter, pathlib.Path(tempfile.mkdtemp(prefix="grading-path-")), jobs=2)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    for caller, callee in seen:
        print(f"{caller:>14} -> {callee}")
    return seen


if __name__ == "__main__":
    main(*sys.argv[1:2])
