"""The grader's own words, in each edition of the course: one table, :data:`TEXT`, English and Chinese side by side.

The English column is what the grader writes — the checks' messages (``checks/compare.py``, ``checks/exercises.py``,
``checks/limits.py``, ``checks/trace.py``), the reasons and warnings of a graded run (``grading/reasons.py``,
``grading/scoring.py``, ``grading/collect.py``, ``canonical.py``), the feedback page's own text
(``grading/feedback.py``) and Gradescope's tests (``gradescope/results_json.py``, which writes them in the edition
submitted with :func:`text`) — through :func:`say`; it is written nowhere else. The Chinese column is what a
submission of the Chinese edition
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
    "your line": ("(your line {n}: {line})", "（你的第 {n} 行：{line}）"),
    "your line number": ("(your line {n})", "（你的第 {n} 行）"),
    "device mismatch at line": (
        "a tensor made by your line {n}{source} without device= (by {made_by}) was combined with the inputs in "
        '{op}(). That works on a CPU but fails on a GPU ("Expected all tensors to be on the same device"): create '
        "it on the inputs' device, e.g. {made_by}(..., device=x.device), or move it with .to(x.device).",
        "你的第 {n} 行{source}不带 device= 创建的张量（由 {made_by} 创建）在 {op}() 中与输入混合运算了。这在 CPU 上"
        '可行，在 GPU 上却会失败（"Expected all tensors to be on the same device"）：请在输入所在的设备上创建它，'
        "例如 {made_by}(..., device=x.device)，或用 .to(x.device) 移过去。",
    ),
    "device mismatch": (
        "a tensor made without device= (by {made_by}) was combined with the inputs in {op}(). That works on a CPU "
        'but fails on a GPU ("Expected all tensors to be on the same device"): create it on the inputs\' device, '
        "e.g. {made_by}(..., device=x.device), or move it with .to(x.device).",
        "不带 device= 创建的张量（由 {made_by} 创建）在 {op}() 中与输入混合运算了。这在 CPU 上可行，在 GPU 上却会"
        '失败（"Expected all tensors to be on the same device"）：请在输入所在的设备上创建它，例如 '
        "{made_by}(..., device=x.device)，或用 .to(x.device) 移过去。",
    ),
    "changed in place": (
        "{what} changed its input in place ({inputs}): an answer must leave what it is given as it was — compute "
        "new tensors (x * 2, torch.cat, x.masked_fill(...)) instead of changing them (x.mul_(2), x[...] = ..., "
        "x.zero_(), x.fill_(...)).",
        "{what} 原地修改了它的输入（{inputs}）：答案必须让传给它的东西保持原样——请计算新的张量（x * 2、torch.cat、"
        "x.masked_fill(...)），而不是修改它们（x.mul_(2)、x[...] = ...、x.zero_()、x.fill_(...)）。",
    ),
    "argument": ("argument {i}", "参数 {i}"),
    "and more": ("{last} and {n} more", "{last} 等（另有 {n} 项）"),
    "input's parameter": ("{owner}'s parameter {p}", "{owner} 的参数 {p}"),
    "input's buffer": ("{owner}'s buffer {p}", "{owner} 的缓冲区 {p}"),
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
    "records over the cap": (
        "{n} record(s) dropped: the notebook sent more records than the grader keeps (one verdict per exercise "
        "is far below the cap)",
        "丢弃了 {n} 条记录：该笔记本发送的记录超过评分程序保留的上限（每道练习一条判定记录远低于此上限）",
    ),
    "blocked": ("blocked: {what} ({event})", "已拦截：{what}（{event}）"),
    "needs review": ("needs review: {what}", "需人工复核：{what}"),
    "verdict twice": (
        "a second verdict for {name} (one verdict per exercise: the notebook ran the grader's verdict itself)",
        "{name} 有第二条判定记录（每道练习只有一条判定：笔记本自己运行了评分程序的判定）",
    ),
    "verdict out of order": (
        "the verdict for {name} came after the verdict for {after}, a later exercise (the verdicts come in the "
        "notebook's order: the notebook ran the grader's verdict itself)",
        "{name} 的判定记录出现在更靠后的练习 {after} 的判定之后（判定应按笔记本的顺序进行：笔记本自己运行了评分程序的判定）",
    ),
    "records out of sequence": (
        "the grader's records are not all there, in sequence (a record was held back or sent twice)",
        "评分程序的记录不完整或顺序不连续（有记录被扣下或被重复发送）",
    ),
    "own threads": (
        "the notebook's own threads were running while the checks ran",
        "检查运行时，笔记本自己的线程仍在运行",
    ),
    "showed the secrets": (
        "{n} output line(s) showed the hidden tests or the reference solution (removed from the feedback)",
        "{n} 行输出显示了隐藏测试或参考答案（已从反馈中删除）",
    ),
    # what the recorder refused (grading/guard.py's reasons, in "blocked: …")
    "guard: grader's files": ("reading the grader's files", "读取评分程序的文件"),
    "guard: directory": ("opening a directory", "打开目录"),
    "guard: writing outside": ("writing outside the submission's sandbox", "在提交的沙箱之外写文件"),
    "guard: process": ("spawning a process", "启动进程"),
    "guard: ctypes": ("ctypes", "ctypes（调用 C 代码）"),
    "guard: gc": ("gc introspection", "gc 内省"),
    "guard: trace hooks": ("trace hooks", "跟踪钩子"),
    "guard: frames": ("frame introspection", "栈帧内省"),
    "guard: audit hooks": ("audit hooks", "审计钩子"),
    "guard: C code": ("loading C code", "加载 C 代码"),
    "guard: records": ("writing the grader's records", "写评分程序的记录"),
    "guard: network": ("network access", "访问网络"),
    "guard: state": ("reading the grader's state", "读取评分程序的状态"),
    "guard: frames while checking": ("frame introspection while the checks run", "检查运行时的栈帧内省"),
    "guard: grader's code": ("running the grader's code outside the grader", "在评分程序之外运行评分程序的代码"),
    "guard: changing files": ("changing files outside the submission's sandbox", "修改提交的沙箱之外的文件"),
    "guard: signals": ("signalling other processes", "向其他进程发送信号"),
    # static flags of a submission's code (grading/worker.py), in "needs review: …"
    "flag: internals": ("refers to the grader's internals", "引用了评分程序的内部"),
    "flag: subclass": ("tensor subclass tricks", "张量子类的技巧"),
    "flag: EXERCISES": ("rebinds EXERCISES", "重新绑定了 EXERCISES"),
    "flag: library": ("assigns to a library function", "给库函数赋值"),
    "flag: introspection": ("introspection tricks", "内省技巧"),
    "flag: solution": ("imports this chapter's reference solution", "导入了本章的参考答案"),
    "flag: tracebacks": (
        "hides tracebacks or replaces the exception hook (error messages may be missing from the feedback)",
        "隐藏了回溯信息或替换了异常钩子（反馈中可能缺少错误信息）",
    ),
    "flag: measurement": (
        "switches off or reads PyTorch's dispatch modes or saved-tensor hooks, with which the checks measure how an "
        "answer computes",
        "关闭或读取了 PyTorch 的分派模式或保存张量钩子，而检查正是用它们来测量答案的计算方式",
    ),
    "flag: triton internals": (
        "reaches into Triton's runtime or interpreter, or the source code it reads, with which the checks watch a "
        "kernel",
        "触及了 Triton 的运行时或解释器，或它读取的源代码，而检查正是用它们来观察核函数",
    ),
    # ---------------------------------------------------------------- repairs of a submitted file (canonical.py)
    "old nbformat 3": ("old nbformat 3 file: converted", "旧的 nbformat 3 文件：已转换"),
    "old nbformat 4": ("old nbformat 4.{minor} file: cell ids added", "旧的 nbformat 4.{minor} 文件：已添加单元格 id"),
    "cells without ids": ("cells without ids: ids replaced", "单元格没有 id：已替换 id"),
    "duplicate cell ids": ("duplicate cell ids: ids replaced", "单元格 id 重复：已替换 id"),
    "repair: stripped": (
        "nbgrader metadata missing on the answer cell of {names} (matched by cell id)",
        "{names} 的答案单元格缺少 nbgrader 元数据（已按单元格 id 匹配）",
    ),
    "repair: altered": (
        "nbgrader metadata altered on the answer cell of {names}",
        "{names} 的答案单元格的 nbgrader 元数据被改动过",
    ),
    "repair: matched by content": (
        "answer cell of {names} found by its definition (metadata/id missing)",
        "{names} 的答案单元格是按其定义找到的（缺少元数据/id）",
    ),
    "repair: matched by position": (
        "answer cell of {names} found by its position before the test cell",
        "{names} 的答案单元格是按它在测试单元格之前的位置找到的",
    ),
    "repair: type changed": (
        "answer cell of {names} was not a code cell: graded as code",
        "{names} 的答案单元格不是代码单元格：已按代码评分",
    ),
    "repair: split": (
        "answer of {names} spread over several cells: all of them run, in order",
        "{names} 的答案分散在多个单元格中：它们都会按顺序运行",
    ),
    "repair: missing": (
        "no answer found for {names}: graded as not attempted",
        "没有找到 {names} 的答案：按未作答评分",
    ),
    "repair: test edited": (
        "test cell {names} was edited: restored from the release",
        "测试单元格 {names} 被修改过：已从发布版恢复",
    ),
    "repair: test not code": (
        "test cell {names} was not a code cell: restored from the release",
        "测试单元格 {names} 不是代码单元格：已从发布版恢复",
    ),
    "repair: test duplicated": (
        "test cell {names} appears more than once (duplicated or pasted): run once, from the release",
        "测试单元格 {names} 出现了不止一次（被复制或粘贴）：只按发布版运行一次",
    ),
    "repair: test deleted": (
        "test cell {names} was deleted: restored from the release",
        "测试单元格 {names} 被删除了：已从发布版恢复",
    ),
    "cells added": (
        "{n} code cell(s) added by the student: kept in place",
        "学生添加了 {n} 个代码单元格：保留在原处",
    ),
    "outputs dropped": ("outputs of {size} MB dropped", "已丢弃 {size} MB 的输出"),
    "kernel replaced": (
        "kernel {kernel} replaced by the grader's {ours}",
        "内核 {kernel} 已替换为评分程序的 {ours}",
    ),
    "metadata dropped": ("editor metadata dropped: {keys}", "已丢弃编辑器元数据：{keys}"),
    # ---------------------------------------------------------------- the feedback page (grading/feedback.py)
    "exercise": ("exercise", "练习"),
    "points": ("points", "得分"),
    "max": ("max", "满分"),
    "total": ("total", "总分"),
    "score line": ("<b>{total} / {max}</b> points", "<b>{total} / {max}</b> 分"),
    "decision": ("{mark} {name}: {got} of {top} points", "{mark} {name}：得 {got} 分（满分 {top} 分）"),
    "decision one": ("{mark} {name}: {got} of {top} point", "{mark} {name}：得 {got} 分（满分 {top} 分）"),
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
    "superseded": ("superseded by {file}", "已被 {file} 取代"),
    # ---------------------------------------------------------------- a file of the batch (grading/collect.py)
    "other chapter": (
        "another chapter's notebook: this is the notebook of chapter {n} ({stem}), and this assignment is chapter "
        "{m} ({want}). It gets no points here: for this assignment, submit chapter {m}'s notebook ({want}.ipynb).",
        "另一章的笔记本：这是第 {n} 章（{stem}）的笔记本，而本次作业是第 {m} 章（{want}）。它在这里不得分：本次作业请"
        "提交第 {m} 章的笔记本（{want}.ipynb）。",
    ),
    # ---------------------------------------------------------------- Gradescope's tests (gradescope/results_json.py)
    "not graded": ("not graded: {why}", "未评分：{why}"),
    "all zero": ("the whole submission scores zero: {why}", "整份提交得 0 分：{why}"),
    "see the top": ("see the top of this page", "见本页顶部"),
    "hidden checks test": ("{name}: hidden checks", "{name}：隐藏检查"),
    "hidden check failed": (
        "a hidden check failed (its message is not shown)",
        "有一项隐藏检查未通过（不显示它的信息）",
    ),
    "hidden check shown": (
        'a hidden check failed: what it found is shown under "{test}"{when}',
        "有一项隐藏检查未通过：它发现的问题{when}显示在“{test}”中",
    ),
    "when published": (" once the grades are published", "将在成绩公布后"),
    "when due": (" after the due date", "将在截止日期后"),
    "hidden not run": (
        "The hidden checks did not run: the submission was not graded (see its first test).",
        "隐藏检查没有运行：这份提交没有被评分（见它的第一项测试）。",
    ),
    "hidden passed one": ("All hidden checks passed (1 check).", "隐藏检查全部通过（共 1 项）。"),
    "hidden passed": ("All hidden checks passed ({n} checks).", "隐藏检查全部通过（共 {n} 项）。"),
    "zero points": ("<b>0 points.</b> {why}", "<b>0 分。</b>{why}"),
    "unisolated": (
        "the autograder could not keep the notebook's code away from its own files here, so it graded nothing: {how}. "
        "Instructor: rebuild the autograder (setup.sh makes its Python installation readable and runs as root), or "
        "set {switch}=1 to grade anyway",
        "评分程序在这里无法把笔记本的代码与它自己的文件隔开，因此没有评分：{how}。老师：请重新构建评分程序（setup.sh "
        "让它的 Python 安装可读，并以 root 运行），或设置 {switch}=1 仍然评分",
    ),
    "container out of memory": (
        "the autograder's container ran out of memory{limit} while grading this notebook, so its grade could not be "
        "trusted and nothing was graded; your instructor has been told. Instructor: raise the autograder's memory "
        "(README, 'Gradescope': the memory this chapter needs) and regrade",
        "评分程序的容器在为这个笔记本评分时内存不足{limit}，因此它的成绩不可信，没有评分；已告知你的老师。老师：请提高"
        "评分程序的内存（README 的“Gradescope”一节：本章所需的内存）后重新评分",
    ),
    "memory limit": (" ({mb} MB)", "（上限 {mb} MB）"),
    "no hidden failed": (
        'No hidden check of {name} is reported as failed; the exercise lost its points for the reasons given in "{test}".',
        "没有报告 {name} 的隐藏检查未通过；这道练习因“{test}”中给出的原因失分。",
    ),
    "not the one graded": (
        "this file is not the one graded in the course's grade book.",
        "这个文件不是课程成绩册中计分的那一个。",
    ),
}

# Fields whose text is kept as it is: values, names, numbers, Python's own error text.
VERBATIM = frozenset(
    {"name", "shape", "got", "dtype", "type", "value", "worst", "atol", "k", "n", "row", "seconds", "error", "ename"}
    | {"own", "why", "limit", "memory", "total", "max", "mark", "top", "line", "source", "made_by", "op", "i", "p"}
    | {"event", "names", "minor", "size", "kernel", "ours", "keys", "file", "stem", "want", "m"}
    | {"test", "how", "switch", "mb", "after"}
)

# Fields that hold a list ("a, b and 2 more"): each item translated on its own.
LIST_FIELDS = frozenset({"inputs"})

# The ends of a VERBATIM field that are the grader's words: " (your line N: …)" after an exception's text.
SUFFIXES = ("your line", "your line number")


# Fields that hold one of a few of the table's texts (read back as one of them, not as any text).
FIELD_TEXTS = {
    "where": ("after the setup", "after the answer"),
    "happened": ("exited", "timed out", "out of memory", "raised error", "raised bare"),
}


# Fields of a narrower form than any text.
FIELD_PATTERNS = {"limit": ".*?", "memory": ".*?", "dtype": r"[\w.]+", "i": r"[^\s']+", "p": r"\S+", "n": r"\d+"}
FIELD_PATTERNS |= {"source": r"(?: \(.*\))?", "made_by": r"[\w.]+", "op": r"\w+", "m": r"\d+|\?", "stem": r"\w+"}
FIELD_PATTERNS |= {"want": r"\w+"}


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
_CODE_WORDS = {"True", "False", "None", "NaN", "nan", "inf", "dtype", "torch", "tensor", "Tensor", "GPU", "CPU"}
_CODE_WORDS |= {"logits", "lse", "ell", "dq", "dk", "dv", "idx"}  # the course's names that read as words
_CALL = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?\(.*\)(?:\.\w+)?")


def _is_code(text: str) -> bool:
    """Whether ``text`` reads as code or values, not English prose: a call (``generate(model, idx, 7)``), or no word
    of two letters or more outside identifiers with digits, underscores, dots or brackets."""
    if _CALL.fullmatch(text.strip()):
        return True
    for token in re.split(r"[\s,;]+", text):
        bare = token.strip("()[]{}:.'\"")
        if _WORD.fullmatch(bare) and bare not in _CODE_WORDS and not (len(bare) <= 3 and token != bare):
            return False
    return True


@functools.lru_cache(maxsize=64)
def _phrase_templates(items: frozenset[tuple[str, str]]) -> list[tuple[re.Pattern[str], str, tuple[str, ...]]]:
    """A chapter's phrases with fields (``"DecoderLayer ({kind}) output"``) as templates, the most literal first;
    their fields (values, shapes, names: no ": " in them) are kept as they are, or translated where a field is
    itself a phrase."""
    found = sorted((pair for pair in items if _FIELD.search(pair[0])), key=lambda pair: -len(_FIELD.sub("", pair[0])))
    out = []
    for english, chinese in found:
        body, seen = "", set()
        for i, piece in enumerate(_FIELD.split(english)):
            body += (
                re.escape(piece) if i % 2 == 0 else f"(?P={piece})" if piece in seen else f"(?P<{piece}>(?:(?!: ).)+?)"
            )
            seen.add(piece)
        out.append((re.compile(body), chinese, tuple(dict.fromkeys(_FIELD.findall(english)))))
    return out


_SENTENCE = re.compile(r"(?<!e\.g\.)(?<!i\.e\.)(?<! al\.)(?<=[.!?]) (?=[A-Za-z`(])")  # not after "e.g."


def to_chinese(message: str, phrases: Mapping[str, str] = {}) -> tuple[str, bool]:
    """``message`` (the grader's English, one line or several) in Chinese, and whether all of it was translated.

    Each line on its own, its indentation kept: a line that is one of ``phrases`` (a chapter's ``ZH``) or of the
    table's texts without fields becomes its Chinese; else the first template of :data:`TEXT` that matches it
    gives the Chinese, its fields translated in turn (:data:`VERBATIM` ones kept, but for the grader's own ends
    of them, :data:`SUFFIXES`); else a phrase with fields (kept as they are); a line ``head: rest`` whose head is
    code or translates is translated in two parts, and a line of several sentences sentence by sentence; code and
    values stay as they are; a line of English prose found nowhere stays English (and the second value is False)."""
    fixed = {english: chinese for english, chinese in TEXT.values() if not _FIELD.search(english)}
    own = _phrase_templates(frozenset(phrases.items()))
    suffixes = [(re.compile(" " + _regex(TEXT[k][0]) + "$"), TEXT[k][1]) for k in SUFFIXES]

    def verbatim(value: str) -> str:
        if value in fixed:
            return fixed[value]
        for pattern, chinese in suffixes:
            m = pattern.search(value)
            if m:
                return value[: m.start()] + chinese.format(**m.groupdict())
        return value

    def field(name: str, value: str, depth: int) -> tuple[str, bool]:
        if name in VERBATIM:
            return verbatim(value), True
        if name in LIST_FIELDS:
            done = [one(item, depth + 1) for item in value.split(", ")]
            return "、".join(d[0] for d in done), all(d[1] for d in done)
        return one(value, depth + 1)

    def one(line: str, depth: int = 0) -> tuple[str, bool]:
        """``line`` in Chinese, and whether all of it was."""
        if not line.strip():
            return line, True
        if line in phrases:
            return phrases[line], True
        if line in fixed:
            return fixed[line], True
        if depth < 6:
            for pattern, chinese, fields in _templates():
                m = pattern.fullmatch(line)
                if m:
                    done = {f: field(f, m[f], depth) for f in fields}
                    return chinese.format(**{f: d[0] for f, d in done.items()}), all(d[1] for d in done.values())
            for pattern, chinese, fields in own:
                m = pattern.fullmatch(line)
                if m:  # a field that reads back whole (a phrase, a template's text) is translated, else kept
                    done = {f: one(m[f], depth + 1) for f in fields}
                    return chinese.format(**{f: d[0] if d[1] else m[f] for f, d in done.items()}), True
            head, sep, rest = line.partition(": ")
            if sep and rest:  # "scaled_dot_product_attention: weights", "top_k=3: the set of tokens ever sampled"
                said = (head, True) if _is_code(head) else one(head, depth + 1)
                if said[1]:
                    told = one(rest, depth + 1)
                    return f"{said[0]}：{told[0]}", told[1]
            if line.rstrip(".") in phrases:
                return phrases[line.rstrip(".")] + "。", True
            sentences = _SENTENCE.split(line)
            if len(sentences) > 1:
                parts = [one(s, depth + 1) for s in sentences]
                return "".join(p[0] for p in parts), all(p[1] for p in parts)
        return line, _is_code(line)

    lines, whole = [], True
    for line in message.split("\n"):
        body = line.lstrip(" ")
        chinese, ok = one(body)
        lines.append(line[: len(line) - len(body)] + chinese)
        whole &= ok
    return "\n".join(lines), whole
