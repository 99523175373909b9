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

CJK = re.compile(r"[\u4e00-\u9fff]")
CHAPTER = "ch03_self_attention"
TRANSLATED = notebooks.chapters()


def _zh_release(chapter: str = CHAPTER) -> nbformat.NotebookNode:
    return nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)


def test_the_edition_is_read_from_the_submitted_file():
    en, zh = notebooks.build_release(CHAPTER), _zh_release()
    read = releases.read(CHAPTER)
    assert canonical.edition_of(nbformat.writes(en), read) == "en"
    assert canonical.edition_of(nbformat.writes(zh), read) == "zh"
    answered = notebooks.fill_release(zh, CHAPTER)
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
        "  差异最大的一行 output[1, 0, :]：",
    ]
    assert chinese.splitlines()[3].startswith("    期望值：tensor([") and "    你的结果：tensor([" in chinese
    assert failed.value.headline.render("zh") == chinese.splitlines()[0]
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

    nb = _zh_release(chapter) if edition == "zh" else notebooks.build_release(chapter)
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
    nb = notebooks.build_release(CHAPTER)
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
    from autograder.grading import collect, guard, scoring, worker

    refused = set(re.findall(r'return "(\w[^"]+)"', inspect.getsource(guard)))  # the audit hook's reasons
    refused |= set(re.findall(r'^\s+"\w+\.[\w.]+": "([^"]+)",$', inspect.getsource(guard), re.M))
    assert {"spawning a process", "network access", "reading the grader's files"} <= refused
    records = [{"type": "blocked", "what": what, "event": "os.system"} for what in refused]
    messages: list = scoring.blocked_warnings(records)
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

    nb = notebooks.fill_release(_zh_release(), CHAPTER)
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
