"""What the student is told is graded: an exercise's requirements and points as the notebook states them.

Each check declares the requirement it tests (``Exercises.check(..., requires=)``, in Chinese from the chapter's catalogue ``autograder/locale/zh/<chapter>.json``); the build puts them,
as a list, in a generated cell between the exercise's instructions and its answer cell (:func:`requirements_markdown`,
English in ``notebooks.build_instructor``, Chinese in ``translations.translate_notebook``). The points a notebook's text
states by hand (the overview table, "(2 points)" in a heading) must equal ``EXERCISES``' (:func:`points_problems`).
"""

from __future__ import annotations

import re

from autograder.releases import checks_module, points_text

REQUIREMENTS_HEAD = {
    "en": "**What is graded.** The test cell below runs the visible checks; the grader runs hidden ones too. "
    "Together they require that your answer",
    "zh": "**评分要求。** 下方的测试单元运行可见检查，评分程序还会运行隐藏检查。它们一起要求你的答案",
}


def requirements_markdown(exercise, edition: str = "en") -> str:
    """The markdown cell the build puts between an exercise's instructions and its answer cell: the requirements its
    checks declare (``Exercises.check(..., requires=)``, in Chinese from the chapter's catalogue ``autograder/locale/zh/<chapter>.json``), in ``edition`` ("en" or "zh")."""
    items = [req.zh if edition == "zh" else req.en for req in exercise.requirements]
    colon = "：" if edition == "zh" else ":"
    return REQUIREMENTS_HEAD[edition] + colon + "\n\n" + "\n".join(f"* {item}" for item in items)


_POINTS = {"en": re.compile(r"\((\d+) points?\)"), "zh": re.compile(r"（(\d+) 分）")}


def points_problems(chapter: str, markdown: list[str], edition: str = "en") -> list[str]:
    """Where the hand-written points of ``chapter``'s notebook text (``markdown``: its cells in order, in ``edition``)
    disagree with the points in ``EXERCISES``: the overview table's row that names an exercise (its last column) and
    an exercise heading's "(N points)" / "（N 分）". Empty when they agree; the build fails otherwise."""
    exercises = checks_module(chapter).EXERCISES
    problems = []
    text = "\n".join(markdown)
    for number, ex in enumerate(exercises, start=1):
        for line in text.splitlines():
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.lstrip().startswith("|") and len(cols) > 2 and re.search(rf"`{ex.name}\b", cols[1]):
                if cols[-1] != str(ex.points):
                    problems.append(
                        f"the table gives {ex.name} {cols[-1]!r} points, EXERCISES {points_text(ex.points)}"
                    )
        heading = re.compile(rf"^#+ (Exercise|练习) {number}\b.*$", re.M)
        for m in heading.finditer(text):
            stated = _POINTS[edition].search(m.group(0))
            if stated is None or int(stated.group(1)) != ex.points:
                problems.append(f"heading {m.group(0)!r} should give {ex.name}'s {points_text(ex.points)}")
    return [f"{chapter} ({edition}): {p}" for p in problems]
