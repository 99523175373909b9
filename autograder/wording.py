"""The grader's own words, in each edition of the course: one table, :data:`TEXT`, English and Chinese side by side.

The English column is what the grader writes — the checks' messages (``checks/compare.py``, ``checks/exercises.py``,
``checks/limits.py``, ``checks/trace.py``), the reasons and warnings of a graded run (``grading/reasons.py``,
``grading/scoring.py``, ``canonical.py``) and the feedback page's own text (``grading/feedback.py``) — through
:func:`say`; it is written nowhere else. The Chinese column is what a submission of the Chinese edition
(``notebooks/zh/``) reads on its feedback page: :func:`to_chinese` reads an English message back through the
templates (a template's ``{field}`` matches any text), and writes each line again in Chinese, the fields translated in
turn (:data:`VERBATIM` fields — values, shapes, names, Python's own error text — are kept as they are).

A chapter's own words (its checks' labels, the ``what`` of its comparisons, its hints) are in the chapter's module of
translations, ``ZH = {English: Chinese}`` in ``autograder/zh/chNN_<name>.py`` (:func:`phrases`), beside its check
module ``autograder/chNN_<name>.py``; :func:`to_chinese` takes them as ``phrases``.
What has no Chinese yet stays English, and :func:`to_chinese` says so (its second value), so that the page can say it
once.

Student side: no import of the grading machinery (the checks use :func:`say` in the student's kernel).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Mapping

EN, ZH = "en", "zh"
EDITIONS = (EN, ZH)

# key -> (English, Chinese). Fields in {braces} take text already formatted (str.format, no format specs).
TEXT: dict[str, tuple[str, str]] = {
    # ---------------------------------------------------------------- comparisons (checks/compare.py)
    "not a tensor": (
        "{what} should be a torch.Tensor of shape {shape}, you gave {type}.",
        "{what} 应是形状为 {shape} 的 torch.Tensor，你给出的是 {type}。",
    ),
    "wrong shape": (
        "{what} should have shape {shape}, yours has shape {got}.",
        "{what} 的形状应为 {shape}，你的是 {got}。",
    ),
    "wrong dtype": (
        "{what} should have dtype {dtype}, yours has dtype {got}.",
        "{what} 的 dtype 应为 {dtype}，你的是 {got}。",
    ),
    "wrong dtype of inputs": (
        "{what} should have dtype {dtype} (the dtype of the inputs), yours has {got}.",
        "{what} 的 dtype 应为 {dtype}（与输入的 dtype 相同），你的是 {got}。",
    ),
    "wrong values": ("{what} has the wrong values.", "{what} 的值不对。"),
    "not finite": (
        "{what} contains NaN or inf where the expected values are all finite.",
        "{what} 含有 NaN 或 inf，而期望值全是有限数。",
    ),
    "differs": (
        "{what} differs from the expected values by up to {worst} (allowed: about {atol}).",
        "{what} 与期望值最多相差 {worst}（允许误差约 {atol}）。",
    ),
    "expected": ("expected: {value}", "期望值：{value}"),
    "you gave": ("you gave: {value}", "你的结果：{value}"),
    "hint": ("Hint: {hint}", "提示：{hint}"),
    "largest difference": ("largest difference in row {row}:", "差异最大的一行 {row}："),
    "hidden value": ("(hidden)", "（隐藏）"),
    "in dtype": ("{what} in torch.{dtype}", "{what}（torch.{dtype}）"),
    "the weights": ("weights", "注意力权重"),
    "the output": ("output", "输出"),
    "the outputs": ("outputs", "输出"),
    # ---------------------------------------------------------------- running an exercise's checks (checks/)
    "visible failed": ("{k} of {n} visible checks failed for {name}:", "{name} 的 {n} 项可见检查中有 {k} 项未通过："),
    "hidden failed": ("{k} of {n} hidden checks failed for {name}:", "{name} 的 {n} 项隐藏检查中有 {k} 项未通过："),
    "checked with the course's version": (
        "({name} was checked with the course's version of {own} in place of yours, so that a mistake there is not "
        "charged twice.)",
        "（检查 {name} 时用课程提供的 {own} 替换了你的版本，以免同一个错误被扣两次分。）",
    ),
    "crash": (
        "your answer's result could not be checked ({error}): compare the shapes, dtypes and types it returns with "
        "the docstring.",
        "无法检查你的答案的结果（{error}）：请对照文档字符串核对它返回的形状、dtype 和类型。",
    ),
    "timeout": (
        "{name} timed out after {seconds} s: its checks did not finish (an endless loop, or a loop whose stop "
        "condition is never reached?). The remaining checks of this exercise were not run.",
        "{name} 在 {seconds} 秒后超时：它的检查没有完成（死循环，或循环的终止条件永远达不到？）。本练习其余的检查没有运行。",
    ),
    "not filled in": (
        "{what} raised NotImplementedError: the exercise has not been filled in yet.",
        "{what} 引发了 NotImplementedError：这道练习还没有作答。",
    ),
    "raised": ("{what} raised {ename}: {error}", "{what} 引发了 {ename}：{error}"),
    "record not judged": (
        "{name}: a check's record could not be judged by the grader ({why})",
        "{name}：评分程序无法评判某项检查的记录（{why}）",
    ),
    "not every check ran": ("{name}: not every check ran", "{name}：并非所有检查都运行了"),
    # ---------------------------------------------------------------- reasons of a graded run (grading/reasons.py)
    "exited": (
        "exited (SystemExit: {value}): an answer must return its result, not end the program",
        "退出了程序（SystemExit: {value}）：答案应返回结果，而不是结束程序",
    ),
    "timed out": (
        "timed out: ran longer than the grader's time limit{limit} and was stopped (an endless loop?)",
        "超时：运行时间超过评分程序的时限{limit}，已被终止（死循环？）",
    ),
    "out of memory": (
        "ran out of memory: it needed more than the grader's memory limit{memory} (a runaway allocation?)",
        "内存不足：所需内存超过评分程序的内存上限{memory}（失控的内存分配？）",
    ),
    "the checks of": ("the checks of {name} {happened}", "{name} 的检查{happened}"),
    "failed check": ("✘ {check} — {message}", "✘ {check} — {message}"),
    "check label": ("✘ {check}", "✘ {check}"),
    "reason with hint": ("{message} Hint: {hint}", "{message} 提示：{hint}"),
    "deleted or renamed": (
        "{error} (was the exercise cell deleted or renamed?)",
        "{error}（练习的代码单元格被删除或改名了吗？）",
    ),
    "answer never defined": (
        "the answer cell of {name} {happened}, so {name} was never defined",
        "{name} 的答案单元格{happened}，因此 {name} 始终没有被定义",
    ),
    "raised error": ("raised {ename}: {error}", "引发了 {ename}：{error}"),
    "raised bare": ("raised {ename}", "引发了 {ename}"),
    "ungraded answer cell": (
        "the answer cell of {name} {happened} (that cell is not graded: see the feedback)",
        "{name} 的答案单元格{happened}（该单元格不计分：见反馈）",
    ),
    "ungraded cell": (
        "a cell {where} {happened} (that cell is not graded: see the feedback)",
        "{where}的一个单元格{happened}（该单元格不计分：见反馈）",
    ),
    "ungraded cells": (
        "{n} cells {where} {happened} (those cells are not graded: see the feedback)",
        "{where}的 {n} 个单元格{happened}（这些单元格不计分：见反馈）",
    ),
    "after the setup": ("after the setup", "设置单元格之后"),
    "after the answer": ("after the answer of {name}", "{name} 的答案之后"),
    # ---------------------------------------------------------------- the scoring rule (grading/scoring.py)
    "no verdict record": ("no verdict record from the grader's checks", "没有评分程序检查的判定记录"),
    "checks did not pass": ("its checks did not pass", "它的检查没有通过"),
    "integrity": ("integrity: {violations}", "完整性问题：{violations}"),
    "forged": ("{n} forged or corrupted record(s)", "{n} 条伪造或损坏的记录"),
    "recorder did not start": ("the grading recorder did not start", "评分记录器没有启动"),
    # ---------------------------------------------------------------- the feedback page (grading/feedback.py)
    "exercise": ("exercise", "练习"),
    "points": ("points", "得分"),
    "max": ("max", "满分"),
    "total": ("total", "总分"),
    "score line": ("<b>{total} / {max}</b> points", "<b>{total} / {max}</b> 分"),
    "decision": ("{mark} {name}: {got} of {top} points", "{mark} {name}：得 {got} 分（满分 {top} 分）"),
    "notes from the grader": ("Notes from the grader:", "评分程序的说明："),
    "could not be graded": ("Your file could not be graded: {why}", "你的文件无法评分：{why}"),
    "download again": (
        "Download the notebook again (File &gt; Download &gt; .ipynb), check it with <code>python -m autograder "
        "selfcheck</code> or the notebook's last cell, and submit it again.",
        "请重新下载笔记本（File &gt; Download &gt; .ipynb），用 <code>python -m autograder selfcheck</code> "
        "或笔记本的最后一个单元格检查它，然后重新提交。",
    ),
    "run it all": (
        "Run the whole notebook (Runtime &gt; Restart and run all) and make every cell finish without exiting the "
        "program, then submit it again.",
        "请完整运行整个笔记本（Runtime &gt; Restart and run all），让每个单元格都运行完毕而不退出程序，然后重新提交。",
    ),
    "hidden tests run here": ("# (hidden tests run here)", "# （隐藏测试在此运行）"),
    "cut": ("[… {n} more characters cut by the grader]", "[… 评分程序截去了其余 {n} 个字符]"),
    "redacted": (
        "[removed by the grader: text of the hidden tests or of the reference solution]",
        "[已被评分程序删除：隐藏测试或参考答案的文本]",
    ),
    "still in English": (
        "Some of the grader's messages below have no Chinese translation yet and are shown in English.",
        "以下部分评分信息暂无中文译文，仍以英文显示。",
    ),
}

# Fields whose text is kept as it is: values, names, numbers, Python's own error text.
VERBATIM = frozenset(
    {"name", "shape", "got", "dtype", "type", "value", "worst", "atol", "k", "n", "row", "seconds", "error", "ename"}
    | {"own", "why", "limit", "memory", "total", "max", "mark", "top"}
)


# Fields that hold one of a few of the table's texts (read back as one of them, not as any text).
FIELD_TEXTS = {
    "where": ("after the setup", "after the answer"),
    "happened": ("exited", "timed out", "out of memory", "raised error", "raised bare"),
}


# Fields of a narrower form than any text.
FIELD_PATTERNS = {"limit": ".*?", "memory": ".*?", "dtype": r"[\w.]+"}


def say(key: str, **fields: object) -> str:
    """The grader's English text ``key`` of :data:`TEXT`, with ``fields``."""
    return TEXT[key][0].format(**fields)


def text(key: str, edition: str = EN, **fields: object) -> str:
    """Text ``key`` of :data:`TEXT` in ``edition`` ("en" or "zh"), with ``fields``."""
    return TEXT[key][edition == ZH].format(**fields)


def phrases(chapter: str) -> dict[str, str]:
    """The chapter's own words in Chinese, ``ZH`` of ``autograder/zh/<chapter>.py`` (empty for a chapter that has no
    module of translations yet, or a name that is not a chapter's)."""
    if not chapter.isidentifier():
        return {}
    try:
        module = importlib.import_module(f"autograder.zh.{chapter}")
    except ModuleNotFoundError as exc:
        if exc.name != f"autograder.zh.{chapter}":
            raise
        return {}
    return dict(getattr(module, "ZH", {}))


_FIELD = re.compile(r"\{(\w+)\}")


def _regex(english: str, named: bool = True) -> str:
    """An English template as a regular expression: each field any text (or one of :data:`FIELD_TEXTS`), named
    groups when ``named``."""
    parts, seen = [], set()
    for i, piece in enumerate(_FIELD.split(english)):
        if i % 2 == 0:
            parts.append(re.escape(piece))
            continue
        if piece in FIELD_TEXTS:
            body = "|".join(f"(?:{_regex(TEXT[k][0], named=False)})" for k in FIELD_TEXTS[piece])
        else:
            body = FIELD_PATTERNS.get(piece, ".+?")
        if not named:
            parts.append(f"(?:{body})")
        elif piece in seen:
            parts.append(f"(?P={piece})")
        else:
            seen.add(piece)
            parts.append(f"(?P<{piece}>{body})")
    return "".join(parts)


@functools.cache
def _templates() -> list[tuple[re.Pattern[str], str, tuple[str, ...]]]:
    """(the English template as a regex, its Chinese, its fields) for every template with fields, the most literal
    text first (so that the most specific template wins)."""
    found = [(english, chinese) for english, chinese in TEXT.values() if _FIELD.search(english)]
    found.sort(key=lambda pair: -len(_FIELD.sub("", pair[0])))
    return [
        (re.compile(_regex(english)), chinese, tuple(dict.fromkeys(_FIELD.findall(english))))
        for english, chinese in found
    ]


_WORD = re.compile(r"[A-Za-z]{2,}")
_CODE_WORDS = {"True", "False", "None", "NaN", "inf", "dtype", "torch", "tensor", "Tensor", "GPU", "CPU"}


def _is_code(text: str) -> bool:
    """Whether ``text`` reads as code or values, not English prose: no word of two letters or more outside
    identifiers with digits, underscores, dots or brackets."""
    for token in re.split(r"[\s,;]+", text):
        bare = token.strip("()[]{}:.'\"")
        if _WORD.fullmatch(bare) and bare not in _CODE_WORDS and not (len(bare) <= 3 and token != bare):
            return False
    return True


def to_chinese(message: str, phrases: Mapping[str, str] = {}) -> tuple[str, bool]:
    """``message`` (the grader's English, one line or several) in Chinese, and whether all of it was translated.

    Each line on its own, its indentation kept: a line that is one of ``phrases`` (a chapter's ``ZH``) or of the
    table's texts without fields becomes its Chinese; else the first template of :data:`TEXT` that matches it
    gives the Chinese, its fields translated in turn (:data:`VERBATIM` ones kept); code and values stay as they are;
    a line of English prose found nowhere stays English (and the second value is False)."""
    whole = [True]
    fixed = {english: chinese for english, chinese in TEXT.values() if not _FIELD.search(english)}

    def one(line: str, depth: int = 0) -> str:
        if not line.strip():
            return line
        if line in phrases:
            return phrases[line]
        if line in fixed:
            return fixed[line]
        if depth < 6:
            for pattern, chinese, fields in _templates():
                m = pattern.fullmatch(line)
                if m:
                    values = {f: m[f] if f in VERBATIM and m[f] not in fixed else one(m[f], depth + 1) for f in fields}
                    return chinese.format(**values)
            head, sep, rest = line.partition(": ")
            if sep and _is_code(head) and rest:  # "scaled_dot_product_attention: weights"
                return f"{head}：{one(rest, depth + 1)}"
            if line.rstrip(".") in phrases:
                return phrases[line.rstrip(".")] + "。"
        if not _is_code(line):
            whole[0] = False
        return line

    lines = []
    for line in message.split("\n"):
        body = line.lstrip(" ")
        lines.append(line[: len(line) - len(body)] + one(body))
    return "\n".join(lines), whole[0]
