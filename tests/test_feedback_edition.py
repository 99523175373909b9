"""The grader's words in the edition of the reader: a Chinese notebook's check cells print Chinese; a notebook of
the Chinese edition (notebooks/zh/) gets its feedback page on the Chinese release, with every message of the grader
(autograder/wording.py's Messages, their words in autograder/locale/) rendered in Chinese as the page is written, and
so its LMS comment and Gradescope's tests; an English one gets the page it always had. A Chinese submission graded
end to end: test_a_chinese_submission_is_graded_in_chinese."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re

import nbformat
import pytest

from autograder import canonical, notebooks, releases, wording
from autograder.checks.exercises import failed_check, label
from autograder.grading import feedback
from autograder.grading.reasons import exercise_reason
from scripts.build_notebooks import notebooks as builder

CJK = re.compile(r"[\u4e00-\u9fff]")
CHAPTER = "ch03_self_attention"
TRANSLATED = notebooks.chapters()


def _zh_release(chapter: str = CHAPTER) -> nbformat.NotebookNode:
    return nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)


def test_the_edition_is_read_from_the_submitted_file():
    en, zh = builder.build_release(CHAPTER), _zh_release()
    read = releases.read(CHAPTER)
    assert canonical.edition_of(nbformat.writes(en), read) == "en"
    assert canonical.edition_of(nbformat.writes(zh), read) == "zh"
    answered = builder.fill_release(zh, CHAPTER)
    assert canonical.edition_of(nbformat.writes(answered).encode(), read) == "zh"
    # prose rewritten by the student: Chinese characters decide
    for cell in zh.cells:
        if cell.cell_type == "markdown":
            cell.source += "\n\n我的笔记。"
    assert canonical.edition_of(nbformat.writes(zh), read) == "zh"
    assert canonical.edition_of(b"%PDF-1.4 ...", read) == "en"
    assert canonical.edition_of(b"{not json", read) == "en"
    assert releases.release_notebook(CHAPTER, "zh").cells[0].source == _zh_release().cells[0].source


def test_the_comparisons_messages_render_in_chinese():
    """A comparison's failure is a message (CheckFailed.message): its headline, "Hint: …", the largest difference's
    row, "expected: …" and "you gave: …", each rendered in the reader's edition; values as they are."""
    torch = pytest.importorskip("torch")
    from autograder.checks.compare import CheckFailed, expect_close, expect_equal, expect_shape

    hint = "You did not divide the scores by sqrt(d_k) (Vaswani et al. 2017, eq. 1)."
    expected = torch.zeros(2, 3, 5)
    got = expected.clone()
    got[1, 0, 2] = 0.53
    with pytest.raises(CheckFailed) as failed:
        expect_close(wording.Message("the output"), got, expected, hint=hint)
    english, chinese = str(failed.value), failed.value.render("zh")
    assert english.splitlines()[:3] == [
        "output differs from the expected values by up to 0.53 (allowed: about 1e-05).",
        "  Hint: " + hint,
        "  largest difference in row output[1, 0, :]:",
    ]
    assert chinese.splitlines()[:3] == [
        "输出 与期望值最多相差 0.53（允许误差约 1e-05）。",
        "  提示：你没有把分数除以 sqrt(d_k)（Vaswani et al. 2017，式 1）。",
        "  差异最大的一行 输出[1, 0, :]：",
    ]
    with pytest.raises(CheckFailed) as named:  # a value named after a call: its name in the reader's edition
        expect_close(wording.Message("{what}: {name}", what="f(x)", name=wording.Message("the weights")), got, expected)
    assert "  largest difference in row weights[1, 0, :]:" in str(named.value).splitlines()
    assert "  差异最大的一行 f(x) 的 注意力权重[1, 0, :]：" in named.value.render("zh").splitlines()
    assert chinese.splitlines()[3].startswith("    期望值：tensor([") and "    你的结果：tensor([" in chinese
    assert failed.value.message.lines()[0].render("zh") == chinese.splitlines()[0]
    for make in (
        lambda: expect_shape("x", torch.zeros(3, 2), (2, 3)),
        lambda: expect_equal("x", torch.zeros(2, dtype=torch.int64), torch.zeros(2, dtype=torch.bool)),
        lambda: expect_equal("x", torch.zeros(2), torch.ones(2), hidden=True),
    ):
        with pytest.raises(CheckFailed) as failed:
            make()
        zh = failed.value.render("zh")
        assert CJK.search(zh) and not re.search(r"\b(should|yours|wrong|expected|gave)\b", zh), zh


def _live(chapter: str, name: str, answer, edition: str) -> tuple[str, str]:
    """(what exercise ``name``'s check cell of the ``edition`` release notebook prints, the failure IPython shows
    or "") with ``answer`` in the notebook's namespace: the cell run as the notebook runs it."""
    import contextlib
    import io

    nb = _zh_release(chapter) if edition == "zh" else builder.build_release(chapter)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"test_{name}")
    namespace = {"EXERCISES": notebooks.checks_module(chapter).EXERCISES, name: answer}
    out, shown = io.StringIO(), ""
    with contextlib.redirect_stdout(out):
        try:
            exec(cell.source, namespace)
        except AssertionError as err:
            shown = "".join(err._render_traceback_())  # type: ignore[attr-defined]
    return out.getvalue(), shown


def test_a_chinese_notebooks_check_cells_print_chinese():
    """The Chinese notebook's check cell (EXERCISES.run(..., edition="zh"), its comment in Chinese) prints the
    checks' output in Chinese: the labels of the passed checks, the summary, the failed checks and what they found;
    the English notebook's prints English."""
    torch = pytest.importorskip("torch")
    solutions = importlib.import_module(f"solutions.{CHAPTER}")
    zh_cell = next(
        c for c in _zh_release().cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_causal_mask"
    )
    assert zh_cell.source.startswith("# `causal_mask` 的检查（2 分）") and 'edition="zh"' in zh_cell.source
    printed, shown = _live(CHAPTER, "causal_mask", solutions.causal_mask, "zh")
    assert not shown and printed.startswith("✔ ") and CJK.search(printed.splitlines()[0]), printed
    assert printed.splitlines()[-1].endswith("检查都通过了。"), printed
    english, _ = _live(CHAPTER, "causal_mask", solutions.causal_mask, "en")
    assert not CJK.search(english) and english.splitlines()[-1].startswith("All "), english

    def wrong(n, device=None):
        return torch.ones(n, n, dtype=torch.bool, device=device)

    printed, shown = _live(CHAPTER, "causal_mask", wrong, "zh")
    assert shown.startswith("CheckFailed: causal_mask 的 ") and "项可见检查中有" in shown, shown
    assert "✘ " in shown and "的值不对" in shown and "期望值：" in shown and "你的结果：" in shown, shown
    assert not re.search(r"\b(checks failed|should|yours|wrong|expected|you gave)\b", shown), shown
    _, english = _live(CHAPTER, "causal_mask", wrong, "en")
    assert "visible checks failed for causal_mask" in english and "has the wrong values" in english


@pytest.mark.parametrize("chapter", TRANSLATED)
def test_every_check_label_has_its_chinese(chapter):
    """Each label (a check's docstring, the key of its translation) of a chapter has its Chinese in the catalogues
    (``autograder/locale/zh/``)."""
    module = importlib.import_module(f"autograder.{chapter}")
    zh = wording.catalogue("zh")
    labels = {label(fn).key for ex in module.EXERCISES for fn in ex.visible + ex.hidden}
    assert not labels - set(zh), f"labels without their Chinese: {sorted(labels - set(zh))}"
    assert all(CJK.search(zh[k]) for k in labels)


def test_the_check_modules_hold_checks_only():
    """The Chinese of a chapter lives in its catalogue ``autograder/locale/zh/<chapter>.json``, not in Python: no
    check module holds translations, and there is no module of them."""
    chapters = releases.chapters()
    for chapter in chapters:
        assert not hasattr(importlib.import_module(f"autograder.{chapter}"), "ZH"), chapter
    assert not (notebooks.ROOT / "autograder" / "zh").exists()
    here = {p.stem for p in (notebooks.ROOT / "autograder" / "locale" / "zh").glob("ch*.json")}
    assert here <= set(chapters), sorted(here - set(chapters))
    for name in ("to_chinese", "phrases", "TEXT", "VERBATIM", "FIELD_PATTERNS", "_templates"):
        assert not hasattr(wording, name), name


def _headings(nb: nbformat.NotebookNode) -> list[str]:
    """The title and the headings of a notebook's prose, each up to its first markup (code, emphasis, brackets)."""
    lines = [ln for c in nb.cells if c.cell_type == "markdown" for ln in c.source.splitlines()]
    return [re.split(r"[`*（(&<\[]", ln.lstrip("#").strip())[0].strip() for ln in lines if re.match(r"#{1,3} ", ln)]


def _page(tmp_path, name: str, **kw) -> str:
    nb = builder.build_release(CHAPTER)
    exercises = notebooks.checks_module(CHAPTER).EXERCISES
    points = {ex.name: ex.points for ex in exercises}
    scores = dict.fromkeys(points, 0.0) | {"causal_mask": 2.0}
    causal = next(fn for fn in exercises["scaled_dot_product_attention"].visible if "causal" in (fn.__doc__ or ""))
    failed = wording.lines(
        wording.say("differs", what=wording.Message("the weights"), worst="0.9", atol="1e-05"),
        wording.indented(
            wording.say("hint", hint=wording.Message("The mask was ignored: masked keys must get weight 0.")), "  "
        ),
    )
    details = {"scaled_dot_product_attention": [failed_check(causal, failed)]}
    timed_out = wording.say("the checks of", name="SelfAttention", happened=wording.say("timed out", limit=" (30 s)"))
    reasons = [exercise_reason("SelfAttention", timed_out)]
    page = tmp_path / f"{name}.html"
    feedback.write_feedback(page, nb, "s_1", releases.read(CHAPTER), scores, reasons=reasons, details=details, **kw)
    return page.read_text(encoding="utf-8")


def test_a_chinese_page_has_the_chinese_release_and_the_graders_words_in_chinese(tmp_path):
    english, chinese = _page(tmp_path, "en"), _page(tmp_path, "zh", edition="zh")
    assert "<th style='text-align:left;padding-right:2em'>exercise</th>" in english and "<td>total</td>" in english
    assert "<b>2 / 10</b> points" in english and "✘ scaled_dot_product_attention: 0 of 4 points" in english
    assert not CJK.search(english.split("<body", 1)[1].split("</table>", 1)[0]), "the English banner is English"
    title, *headings = _headings(_zh_release())
    assert CJK.search(title) and f">{title}" in chinese, title
    assert len(headings) >= 4 and all(f">{h}" in chinese for h in headings), headings
    assert all(f">{h}" not in english for h in [title, *headings])
    for word in ("<th style='text-align:left;padding-right:2em'>练习</th>", "<th>得分</th>", "满分", "<td>总分</td>"):
        assert word in chinese
    assert "<b>2 / 10</b> 分" in chinese and '<html lang="zh-CN">' in chinese
    assert "✘ scaled_dot_product_attention：得 0 分（满分 4 分）" in chinese
    assert "✘ 遵守因果掩码（T_q = T_k = 6）" in chinese and "提示：掩码被忽略了" in chinese
    assert "SelfAttention 的检查超时" in chinese, "the reason of a run, in Chinese"
    assert "# `causal_mask` 的检查（2 分）" in chinese and "# Checks for `causal_mask` (2 points)" in english
    assert "# （隐藏测试在此运行）" not in english and "differs from the expected" not in chinese


def test_a_plain_string_is_shown_as_it_is(tmp_path):
    """What is no message (Python's error text, a file's name) is shown as it is, in either edition: no note about
    English, no reading back."""
    page = tmp_path / "p.html"
    chapter = dataclasses.replace(releases.read(CHAPTER), points={"a": 1, "b": 1})
    feedback.write_feedback(
        page, None, "s", chapter, {}, reasons=["OSError: [Errno 5]"], warnings=["one"], edition="zh"
    )
    text = page.read_text(encoding="utf-8")
    assert "你的文件无法评分：OSError: [Errno 5]" in text and "<li>one</li>" in text


def test_the_zh_release_notebooks_travel_in_the_package():
    import tomllib

    data = tomllib.loads((notebooks.ROOT / "pyproject.toml").read_text())
    assert "zh/*.ipynb" in data["tool"]["setuptools"]["package-data"]["autograder._release"]
    assert json.loads((notebooks.RELEASE_DIR / "zh" / f"{CHAPTER}.ipynb").read_text())["cells"]


def test_the_graders_other_messages_render_in_chinese():
    """The repairs of a submitted file (canonical.py), what the recorder refused ("blocked: …"), the instructor's
    flags ("needs review: …"), a device mismatch, an input changed in place and the student's line after an error:
    each is a message of the grader's table, rendered whole in Chinese."""
    from autograder.checks import device, inputs
    from autograder.checks.compare import CheckFailed
    from autograder.checks.trace import call
    from autograder.grading import collect, guard, scoring, worker

    refused = set(re.findall(r'"(guard: [^"]+)"', inspect.getsource(guard))) - {"guard: refused"}  # the hook's
    assert {"guard: process", "guard: network", "guard: grader's files"} <= refused
    records = [{"type": "blocked", "what": what, "event": "os.system"} for what in refused]
    messages: list = scoring.blocked_warnings(records)
    for message, what in zip(messages, sorted(refused)):  # the refusal itself in Chinese too
        assert wording.text(what, "zh") in wording.render(message, "zh"), wording.render(message, "zh")

    def spawns() -> None:  # what the audit hook raises for os.system while grading
        raise PermissionError(wording.say("guard: refused", what=wording.say("guard: process"), event="os.system"))

    with pytest.raises(CheckFailed) as refusal:
        call("f(x)", spawns)
    assert refusal.value.render("zh").startswith("f(x) 引发了 PermissionError：评分时不允许启动进程（os.system）")
    messages.append(refusal.value.message)
    messages += [wording.say("needs review", what=what) for _, what in worker._SUSPICIOUS]
    verdict = {"type": "verdict", "passed": True, "failures": [], "threads": 1}
    twice = scoring.score({"f": 1}, [{"type": "armed"}] + [dict(verdict, exercise="f")] * 2, 0, [])
    messages += twice.warnings + twice.reasons[:1]  # own threads; a second verdict (integrity)
    late = [dict(verdict, exercise=n, seq=i + 1) for i, n in enumerate(["g", "f"])] + [{"type": "armed", "seq": 0}]
    messages += scoring.score({"f": 1, "g": 1}, late, 0, []).reasons[:1]  # a verdict out of the notebook's order
    messages += scoring.score({"f": 1}, [{"type": "armed", "seq": 1}], 0, []).reasons[:1]  # records out of sequence
    keys = wording.catalogue("en")
    messages += [wording.say(key, names="f, g") for key in keys if key.startswith("repair: ")]
    messages += [wording.say("old nbformat 3"), wording.say("old nbformat 4", minor=2), wording.say("cells added", n=2)]
    messages += [
        wording.say("kernel replaced", kernel="'julia'", ours="'python3'"),
        wording.say("superseded", file="b"),
        collect.other_chapter_reason("ch10_flash_attention", "ch08_kv_cache"),  # a stray upload's zero
        wording.say(
            "device mismatch in",
            what="f(x)",
            mismatch=device._device_message("torch.arange", ("<no file>", 3), "masked_fill"),
        ),
        inputs._modified_message("mask_tokens(input_ids, mask_id=4)", [wording.say("argument", i=1)]),
        inputs._modified_message("layer(x)", [wording.say("argument", i=n) for n in range(1, 6)]),
    ]
    line34 = wording.say("your line number", n=34)
    messages += [
        wording.say(
            "raised",
            what="f(x)",
            ename="IndexError",
            error=wording.Message("{error} {line}", error="index 6 is out of bounds", line=line34),
        ),
        wording.say(
            "raised",
            what="f(x)",
            ename="ValueError",
            error=wording.Message("{error} {line}", error="bad", line=wording.say("your line", n=3, line="y = x[6]")),
        ),
    ]
    for message in messages:
        zh = wording.render(message, "zh")
        assert CJK.search(zh), (str(message), zh)
        assert not re.search(r"\b(your line|blocked|needs review|answer cell|test cell|superseded|argument)\b", zh), zh
    assert "（你的第 34 行）" in wording.render(messages[-2], "zh")
    assert wording.render(messages[-1], "zh") == "f(x) 引发了 ValueError：bad （你的第 3 行：y = x[6]）"
    assert str(messages[-1]) == "f(x) raised ValueError: bad (your line 3: y = x[6])"


def test_the_superseded_mark_is_in_the_pages_language(tmp_path):
    chapter = dataclasses.replace(releases.read(CHAPTER), points={"a": 1})
    for edition in ("en", "zh"):
        page = tmp_path / f"{edition}.html"
        feedback.write_feedback(page, None, "s", chapter, {}, reasons=["x"], edition=edition)
        feedback.mark_feedback(page, wording.say("superseded", file="s_2.ipynb"))
        text = page.read_text(encoding="utf-8")
        if edition == "en":
            assert "<b>superseded by s_2.ipynb</b>: this file is not the one graded in the course's grade book." in text
        else:
            assert "<b>已被 s_2.ipynb 取代</b>：这个文件不是课程成绩册中计分的那一个。" in text


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
def test_a_chinese_submission_is_graded_in_chinese(tmp_path):
    """A notebook of the Chinese edition with one wrong answer, graded by the grader (kernel, recorder, the
    worker's judgement): it scores as the English one would, and what it is told — its feedback page, its LMS
    comment, its result file read back — says the failed check in Chinese, end to end."""
    from autograder.grading import batch, lms, submission

    nb = builder.fill_release(_zh_release(), CHAPTER)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "causal_mask")
    cell.source += (
        "\n\ndef causal_mask(n, device=None):\n    return torch.ones(n, n, dtype=torch.bool, device=device)\n"
    )
    path = tmp_path / f"zhangsan_1_2_{CHAPTER}.ipynb"
    nbformat.write(nb, path)
    (row,) = batch.grade([path], CHAPTER, tmp_path / "out", jobs=1)
    assert row.edition == "zh" and row.scores["causal_mask"] == 0 and row.score == row.max_score - 2, row.reason
    page = (tmp_path / "out" / "feedback" / "zhangsan_1.html").read_text(encoding="utf-8")
    decision = page.split("✘ causal_mask：得 0 分（满分 2 分）", 1)[1].split("</pre>", 1)[0]
    assert "✘ " in decision and "的值不对" in decision and "期望值：" in decision, decision
    assert not re.search(r"\b(should|yours|wrong|expected|you gave|values)\b", decision), decision
    comment = lms.feedback_comment(row, {ex.name: ex.points for ex in notebooks.checks_module(CHAPTER).EXERCISES})
    assert "causal_mask：✘ " in comment and "的值不对" in comment, comment
    (result_file,) = (tmp_path / "out" / "results").glob("*.json")
    result = submission.read_result(result_file)
    assert any(isinstance(d, wording.Message) for d in result.details["causal_mask"]), "messages as data, read back"
    assert "has the wrong values" in row.reason, "the instructor's grades.csv reason: English"


def _english_phrases() -> set[str]:
    """Every run of two or more words of the grader's English templates (``locale/en/grader.json``, outside their
    fields) that no Chinese template keeps as it is (Colab's menu names, commands): what a Chinese page must not
    say."""
    keep = " ".join(wording.catalogue("zh").values())
    found = set()
    for template in wording.catalogue("en").values():
        for part in re.split(r"\{\w+\}", template):
            for run in re.findall(r"[A-Za-z][A-Za-z' ]*[A-Za-z]", part):
                if len(run.split()) >= 2 and run not in keep:
                    found.add(run)
    return found


# and the grader's words of earlier versions, in case one comes back as an f-string
_FORMER = (
    "unreadable file", "not a readable notebook", "was the download cut short", "ran longer than", "the kernel died",
    "kernel ran out of", "could not start", "grading worker", "autograde failed", "grader error", "in total",
    "nothing after that point", "memory limit", "grading cluster", "own name carries",
)  # fmt: skip


def _english_in(text: str) -> list[str]:
    """The grader's English phrases in ``text`` (an HTML page, unescaped first, or an LMS comment)."""
    import html

    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    found = _english_phrases() | set(_FORMER)
    return sorted(p for p in found if re.search(rf"(?<![A-Za-z]){re.escape(p)}(?![A-Za-z])", text))


def _zero_page_and_comment(tmp_path, name: str, reason, edition: str = "zh") -> tuple[str, str]:
    """(the feedback page, the LMS comment) of a submission of ``edition`` that got zero for ``reason``."""
    from autograder.grading import lms, report
    from autograder.grading.submission import Result

    points = {ex.name: ex.points for ex in notebooks.checks_module(CHAPTER).EXERCISES}
    result = Result("", "", "s", "error", str(reason), reasons=[reason])
    page = tmp_path / f"{name}.html"
    feedback.write_page(page, result, None, releases.read(CHAPTER), edition=edition, unreadable=False)
    row = report.Row(name, "s", CHAPTER, dict.fromkeys(points, 0.0), 0.0, 10.0, "error", str(reason),
                     edition=edition, reasons=[reason])  # fmt: skip
    return page.read_text(encoding="utf-8"), lms.feedback_comment(row, points)


def test_a_chinese_zero_says_why_in_chinese(tmp_path, monkeypatch):
    """Each zero the grader gives a run or a file — a kernel that died or ran out of memory, a kernel that could not
    start, a cell that ignored the interrupt, a run that failed, a worker out of memory, a grading cluster that
    could not run it, a file cut short, too large or refused by nbformat — reaches a Chinese student (the page and
    the LMS comment) in Chinese: none of the grader's English phrases, Python's own text kept as it is."""
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from autograder.grading import batch, collect, execute, executors, runner, worker

    died = worker._kernel_died(3072, [{"type": "verdict", "exercise": "causal_mask"}], ["causal_mask", "f"], False)
    oom = worker._kernel_died(3072, [], ["causal_mask"], oom_killed=True)
    run = lambda error: runner.Run(nbformat.v4.new_notebook(), error)
    reasons = {
        "died": runner.failure(run(DeadKernelError("Kernel died")), 30, died),
        "oom": runner.failure(run(DeadKernelError("Kernel died")), 30, oom),
        "ignored the interrupt": runner.failure(run(CellTimeoutError("no reply")), 30, died),
        "failed": runner.failure(run(RuntimeError("Kernel didn't respond in 60 seconds")), 30, died),
        "could not start": worker.startup_failure(512, False, True, True, ""),
        "worker out of memory": execute.worker_out_of_memory(worker.Job(**_job_fields()), True),
        "cluster": executors._lost_reason(OSError("connection refused")),
    }
    # files that are no readable notebook: the batch's canonicalise step gives their zero
    zh = nbformat.writes(_zh_release())
    big = zh.rstrip()[:-1] + " " * 5000 + "}\n"  # the same notebook, over the size limit set below
    files = {"cut": zh[: len(zh) // 2].encode(), "bad": zh.encode(), "big": big.encode()}
    paths = []
    for name, data in files.items():
        paths.append(tmp_path / "in" / f"{name}_1_2_{CHAPTER}.ipynb")
        paths[-1].parent.mkdir(exist_ok=True)
        paths[-1].write_bytes(data)
    monkeypatch.setattr(batch.canonical, "MAX_BYTES", len(zh.encode()) + 1000)
    real = batch.canonical.canonicalise

    def canonicalise(data, release, history=None):  # a notebook that nbformat refuses
        if data == files["bad"]:
            raise nbformat.ValidationError("'cells' is a required property")
        return real(data, release, history)

    monkeypatch.setattr(batch.canonical, "canonicalise", canonicalise)
    read = releases.read(CHAPTER)
    subs = collect.collect(paths, tmp_path / "out", read)
    batch.canonicalise(subs, read)
    for sub in subs:
        assert sub.edition == "zh" and sub.outcome is not None and sub.outcome.status == "error", sub.label
        reasons[sub.label.split("_")[0]] = sub.outcome.reasons[0]
    assert "不是有效的 JSON" in wording.render(reasons["cut"], "zh") and "过" in wording.render(reasons["big"], "zh")
    assert "'cells' is a required property" in wording.render(reasons["bad"], "zh"), "Python's text as it is"
    for name, reason in reasons.items():
        page, comment = _zero_page_and_comment(tmp_path, name.replace(" ", "_"), reason)
        assert CJK.search(wording.render(reason, "zh")), name
        assert not _english_in(page) and not _english_in(comment), (name, _english_in(page), _english_in(comment))
        english, _ = _zero_page_and_comment(tmp_path, "en", reason, edition="en")
        assert _english_in(english), f"{name}: the check finds the English page's words"


def _job_fields() -> dict:
    from autograder.grading import worker

    fields = {f.name: "" for f in __import__("dataclasses").fields(worker.Job)}
    return fields | {"worker_memory_mb": 2048}


def test_the_self_check_speaks_the_notebooks_edition(tmp_path, monkeypatch, capsys):
    """The "Before you submit" cell and ``python -m autograder selfcheck`` report in the edition of the notebook
    they read: a Chinese notebook's in Chinese (what was repaired, what is not attempted, a file cut short), an
    English one's in English."""
    zh = _zh_release()
    for cell in zh.cells:  # a repair to report: metadata stripped from an answer cell
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.metadata = {}
            break
    mine = tmp_path / f"{CHAPTER}.ipynb"
    mine.write_text(nbformat.writes(zh), encoding="utf-8")
    ok, lines = canonical.selfcheck(mine, CHAPTER)
    assert ok and lines[0] == f"{CHAPTER}.ipynb：可以作为 {CHAPTER} 评分。", lines
    assert any(line.startswith("  已修复：") for line in lines) and any("尚未作答：" in line for line in lines), lines
    assert not any(_english_in(line) for line in lines), lines
    monkeypatch.setenv("JPY_SESSION_NAME", str(mine))
    assert canonical.selfcheck_here(CHAPTER) is True
    assert capsys.readouterr().out.startswith("这个笔记本：可以作为")
    text = nbformat.writes(zh)
    mine.write_text(text[: len(text) // 2], encoding="utf-8")
    ok, lines = canonical.selfcheck(mine, CHAPTER)
    assert not ok and lines[0].startswith("无法评分：不是可读取的笔记本：不是有效的 JSON（"), lines
    assert not any(_english_in(line) for line in lines), lines
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert canonical.selfcheck_here(CHAPTER, edition="zh") is True and "评分时跳过" in capsys.readouterr().out
    english = tmp_path / f"en_{CHAPTER}.ipynb"
    english.write_text(nbformat.writes(builder.build_release(CHAPTER)), encoding="utf-8")
    ok, lines = canonical.selfcheck(english, CHAPTER)
    assert ok and lines[0] == f"en_{CHAPTER}.ipynb: gradeable as {CHAPTER}." and _english_in("\n".join(lines))


def test_chapter_11s_refusals_render_in_chinese():
    """Chapter 11 refuses an answer that is no Triton kernel, or a kernel with Python in it: the refusal is the
    chapter's message, carried by the exception (``TypeError(Message(…))``), rendered by the check in the reader's
    edition; Triton's own error text is a value, as it is."""
    pytest.importorskip("triton")
    from autograder import ch11_flash_attention_triton as ch11
    from autograder.checks.compare import CheckFailed
    from autograder.checks.trace import call

    def no_kernel(*args, **kwargs):  # plain Python: @triton.jit forgotten
        return None

    with pytest.raises(CheckFailed) as failed:
        call("flash_attention_forward_kernel[grid](...)", lambda: ch11._run(no_kernel, (1,)))
    zh, en = failed.value.render("zh"), str(failed.value)
    assert "引发了 TypeError：这里需要一个 Triton 内核" in zh and "你给的是 function" in zh, zh
    assert "raised TypeError: expected a Triton kernel" in en and not _english_in(zh), zh
    problem = wording.Message("{kernel} calls {name}, which Triton cannot compile for a GPU", kernel="k", name="f")
    refusal = str(TypeError(wording.Message("the kernel is not plain Triton code: {problem}. The checks watch the "
                                            "loads of a kernel that Triton compiles for a GPU; Python code inside it "
                                            "runs only under the interpreter, where they cannot see it.",
                                            problem=problem)))  # fmt: skip
    assert refusal.startswith("the kernel is not plain Triton code: k calls f, which Triton cannot compile")
    for key in (problem.key, "Triton cannot compile this kernel: {error}"):
        assert CJK.search(wording.catalogue("zh")[key]), key


@pytest.mark.slow
@pytest.mark.xdist_group("grading")
def test_a_chinese_submission_that_cannot_finish_is_told_why_in_chinese(tmp_path):
    """Chinese notebooks graded by the grader that never finish — an answer that ends the kernel (``os._exit``), one
    that sleeps past the notebook's time limit — and a Chinese download cut short: each scores zero, and its feedback
    page and LMS comment say why in Chinese, with none of the grader's English phrases; grades.csv keeps English."""
    from autograder.grading import batch, lms

    def answered(extra: str) -> nbformat.NotebookNode:
        nb = builder.fill_release(_zh_release(), CHAPTER)
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "causal_mask")
        cell.source += "\n\n" + extra
        return nb

    paths = {name: tmp_path / "in" / f"{name}_1_2_{CHAPTER}.ipynb" for name in ("exits", "sleeps", "cut")}
    paths["exits"].parent.mkdir()
    nbformat.write(answered("import os\nos._exit(1)"), paths["exits"])
    nbformat.write(answered("import time\ntime.sleep(600)"), paths["sleeps"])
    text = nbformat.writes(_zh_release())
    paths["cut"].write_text(text[: len(text) // 2], encoding="utf-8")
    rows = batch.grade(list(paths.values()), CHAPTER, tmp_path / "out", jobs=2, cell_timeout=600, notebook_timeout=60)
    points = {ex.name: ex.points for ex in notebooks.checks_module(CHAPTER).EXERCISES}
    said = {"exits": "内核在运行 causal_mask 的单元格", "sleeps": "总运行时间超过了 60 秒", "cut": "不是有效的 JSON"}
    english = {"exits": "the kernel died", "sleeps": "ran longer than 60 s", "cut": "not valid JSON"}
    for row in rows:
        name = row.submission.split("_")[0]
        page = (tmp_path / "out" / "feedback" / f"{row.student_id}.html").read_text(encoding="utf-8")
        comment = lms.feedback_comment(row, points)
        assert row.edition == "zh" and row.score == 0 and row.status == "error", (name, row.reason)
        assert said[name] in page and said[name] in comment, (name, comment)
        assert not _english_in(page) and not _english_in(comment), (name, _english_in(page), _english_in(comment))
        assert english[name] in row.reason, "the instructor's grades.csv reason: English"
