"""Feedback in the edition submitted: a notebook of the Chinese edition (notebooks/zh/) gets its feedback page on the
Chinese release, with the grader's words (autograder/wording.py) and the checks' messages in Chinese; an English one
gets the page it always had. Graded end to end in tests/test_translations.py (a Chinese submission's page)."""

from __future__ import annotations

import importlib
import inspect
import json
import re

import nbformat
import pytest

from autograder import canonical, notebooks, releases, wording
from autograder.checks.exercises import _label
from autograder.grading import feedback

CJK = re.compile(r"[\u4e00-\u9fff]")
CHAPTER = "ch03_self_attention"
TRANSLATED = notebooks.chapters()


def _zh_release(chapter: str = CHAPTER) -> nbformat.NotebookNode:
    return nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)


def test_the_edition_is_read_from_the_submitted_file():
    en, zh = notebooks.build_release(CHAPTER), _zh_release()
    assert canonical.edition_of(nbformat.writes(en), CHAPTER) == "en"
    assert canonical.edition_of(nbformat.writes(zh), CHAPTER) == "zh"
    answered = notebooks.fill_release(zh, CHAPTER)
    assert canonical.edition_of(nbformat.writes(answered).encode(), CHAPTER) == "zh"
    # prose rewritten by the student: Chinese characters decide
    for cell in zh.cells:
        if cell.cell_type == "markdown":
            cell.source += "\n\n我的笔记。"
    assert canonical.edition_of(nbformat.writes(zh), CHAPTER) == "zh"
    assert canonical.edition_of(b"%PDF-1.4 ...", CHAPTER) == "en"
    assert canonical.edition_of(b"{not json", CHAPTER) == "en"
    assert releases.release_notebook(CHAPTER, "zh").cells[0].source == _zh_release().cells[0].source


def test_every_text_of_the_table_has_its_chinese_with_the_same_fields():
    for key, (english, chinese) in wording.TEXT.items():
        assert chinese != english or english.startswith("✘"), key
        assert sorted(set(re.findall(r"\{(\w+)\}", english))) == sorted(set(re.findall(r"\{(\w+)\}", chinese))), key


def test_the_comparisons_messages_read_back_in_chinese():
    message = (
        "scaled_dot_product_attention: weights differs from the expected values by up to 0.53 (allowed: about 1e-05)."
        "\n  Hint: You did not divide the scores by sqrt(d_k) (Vaswani et al. 2017, eq. 1)."
        "\n  largest difference in row weights[1, 0, 0, :]:"
        "\n    expected: tensor([0.0182, 0.0032,"
        "\n        0.0124])"
        "\n    you gave: (hidden)"
    )
    zh, whole = wording.to_chinese(message, wording.phrases(CHAPTER))
    assert whole, zh
    assert zh.splitlines() == [
        "scaled_dot_product_attention：注意力权重 与期望值最多相差 0.53（允许误差约 1e-05）。",
        "  提示：你没有把分数除以 sqrt(d_k)（Vaswani et al. 2017，式 1）。",
        "  差异最大的一行 weights[1, 0, 0, :]：",
        "    期望值：tensor([0.0182, 0.0032,",
        "        0.0124])",
        "    你的结果：（隐藏）",
    ]
    for english in (
        "x should have shape (2, 3), yours has shape (3, 2).",
        "x should have dtype torch.bool, yours has dtype torch.int64.",
        "x has the wrong values.",
        "f raised NotImplementedError: the exercise has not been filled in yet.",
        "3 of 9 hidden checks failed for f:",
        "a cell after the answer of f raised NameError: name 'g' is not defined (that cell is not graded: see the "
        "feedback)",
    ):
        zh, whole = wording.to_chinese(english)
        assert whole and CJK.search(zh) and not re.search(r"\b(should|yours|wrong|raised|checks|cell)\b", zh), zh
    assert wording.to_chinese("a sentence the grader never wrote.") == ("a sentence the grader never wrote.", False)


@pytest.mark.parametrize("chapter", TRANSLATED)
def test_every_check_label_has_its_chinese(chapter):
    """Each label (a check's docstring) of a chapter has its Chinese in the chapter's ``ZH``
    (``autograder/locale/zh/<chapter>.json``), and every entry of ``ZH`` is still one of the chapter's labels or a text its
    check module writes (a changed English text is found)."""
    module = importlib.import_module(f"autograder.{chapter}")
    zh = wording.phrases(chapter)
    assert zh, f"no catalogue autograder/locale/zh/{chapter}.json"
    labels = {_label(fn) for ex in module.EXERCISES for fn in ex.visible + ex.hidden}
    assert not labels - set(zh), f"labels without their Chinese: {sorted(labels - set(zh))}"
    source = " ".join(inspect.getsource(module).split()).replace('" "', "").replace('" f"', "")
    # an entry with fields ("DecoderLayer ({kind}) output") is an f-string of the module, whatever its expressions
    # a key's line break is the "\\n" of the module's string literal
    flat = [" ".join(k.replace("\n", "\\n").split()) for k in zh]
    written = [r"\{[^{}]*\}".join(map(re.escape, re.split(r"\{\w+\}", k))) for k in flat]
    stale = [k for k, w in zip(zh, written) if k not in labels and not re.search(w, source)]
    assert not stale, f"ZH entries whose English the chapter no longer writes: {stale}"
    assert all(CJK.search(v) or v == k for k, v in zh.items())  # code ("causal_mask(5)") is shown as it is


def test_the_check_modules_hold_checks_only():
    """The Chinese of a chapter lives in ``autograder/zh/``, not in its check module; every chapter has its module of
    translations, and no other module is there."""
    chapters = releases.chapters()
    for chapter in chapters:
        assert not hasattr(importlib.import_module(f"autograder.{chapter}"), "ZH"), chapter
    here = {p.stem for p in (notebooks.ROOT / "autograder" / "zh").glob("ch*.py")}
    assert here <= set(chapters), sorted(here - set(chapters))
    assert wording.phrases("ch99_none") == {} and wording.phrases("../x") == {}


def _headings(nb: nbformat.NotebookNode) -> list[str]:
    """The title and the headings of a notebook's prose, each up to its first markup (code, emphasis, brackets)."""
    lines = [ln for c in nb.cells if c.cell_type == "markdown" for ln in c.source.splitlines()]
    return [re.split(r"[`*（(&<\[]", ln.lstrip("#").strip())[0].strip() for ln in lines if re.match(r"#{1,3} ", ln)]


def _page(tmp_path, name: str, **kw) -> str:
    nb = notebooks.build_release(CHAPTER)
    points = {ex.name: ex.points for ex in notebooks.checks_module(CHAPTER).EXERCISES}
    scores = dict.fromkeys(points, 0.0) | {"causal_mask": 2.0}
    details = {
        "scaled_dot_product_attention": [
            "✘ respects a causal mask (T_q = T_k = 6)\n    scaled_dot_product_attention: weights differs from the "
            "expected values by up to 0.9 (allowed: about 1e-05).\n      Hint: The mask was ignored: masked keys must "
            "get weight 0."
        ]
    }
    reasons = ["SelfAttention: the checks of SelfAttention timed out: ran longer than the grader's time limit (30 s) "
               "and was stopped (an endless loop?)"]  # fmt: skip
    page = tmp_path / f"{name}.html"
    feedback.write_feedback(page, nb, "s_1", CHAPTER, scores, points, reasons=reasons, details=details, **kw)
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
    assert "# （隐藏测试在此运行）" not in english and wording.say("still in English") not in english
    assert wording.text("still in English", "zh") not in chinese, "everything on this page has its Chinese"


def test_what_has_no_chinese_yet_is_said_once(tmp_path):
    page = tmp_path / "p.html"
    points = {"a": 1, "b": 1}
    feedback.write_feedback(
        page, None, "s", CHAPTER, {}, points, reasons=["an English reason"], warnings=["one", "two"], edition="zh"
    )
    text = page.read_text(encoding="utf-8")
    assert text.count(wording.text("still in English", "zh")) == 1 and "你的文件无法评分" in text


def test_the_zh_release_notebooks_travel_in_the_package():
    import tomllib

    data = tomllib.loads((notebooks.ROOT / "pyproject.toml").read_text())
    assert "zh/*.ipynb" in data["tool"]["setuptools"]["package-data"]["autograder._release"]
    assert json.loads((notebooks.RELEASE_DIR / "zh" / f"{CHAPTER}.ipynb").read_text())["cells"]


def test_the_graders_other_messages_read_back_in_chinese():
    """The repairs of a submitted file (canonical.py), what the recorder refused ("blocked: …"), the instructor's
    flags ("needs review: …"), a device mismatch, an input changed in place and the student's line after an error:
    their English is wording.TEXT's, and each reads back whole in Chinese."""
    from autograder.checks import device, inputs
    from autograder.grading import collect, guard, scoring, worker

    refused = set(re.findall(r'return "(\w[^"]+)"', inspect.getsource(guard)))  # the audit hook's reasons
    refused |= set(re.findall(r'^\s+"\w+\.[\w.]+": "([^"]+)",$', inspect.getsource(guard), re.M))
    assert {"spawning a process", "network access", "reading the grader's files"} <= refused
    records = [{"type": "blocked", "what": what, "event": "os.system"} for what in refused]
    messages = scoring.blocked_warnings(records)
    messages += [wording.say("needs review", what=what) for _, what in worker._SUSPICIOUS]
    verdict = {"type": "verdict", "passed": True, "failures": [], "threads": 1}
    twice = scoring.score({"f": 1}, [{"type": "armed"}] + [dict(verdict, exercise="f")] * 2, 0, [])
    messages += twice.warnings + twice.reasons[:1]  # own threads; a second verdict (integrity)
    late = [dict(verdict, exercise=n, seq=i + 1) for i, n in enumerate(["g", "f"])] + [{"type": "armed", "seq": 0}]
    messages += scoring.score({"f": 1, "g": 1}, late, 0, []).reasons[:1]  # a verdict out of the notebook's order
    messages += scoring.score({"f": 1}, [{"type": "armed", "seq": 1}], 0, []).reasons[:1]  # records out of sequence
    messages += [wording.say(key, names="f, g") for key in wording.TEXT if key.startswith("repair: ")]
    messages += [wording.say("old nbformat 3"), wording.say("old nbformat 4", minor=2), wording.say("cells added", n=2)]
    messages += [
        wording.say("kernel replaced", kernel="'julia'", ours="'python3'"),
        wording.say("superseded", file="b"),
        collect.other_chapter_reason("ch10_flash_attention", "ch08_kv_cache"),  # a stray upload's zero
    ]
    messages += [
        "f(x): " + device._device_message("torch.arange", ("<no file>", 3), "masked_fill"),
        "generate(model, idx, 7): " + device._device_message("torch.zeros", None, "add"),
        inputs._modified_message("mask_tokens(input_ids, mask_id=4)", ["argument 1"]),
        inputs._modified_message("layer(x)", ["argument 1", "argument 1's parameter W_q", "argument x", "a", "b"]),
        wording.say("raised", what="f(x)", ename="IndexError", error="index 6 is out of bounds (your line 34)"),
        wording.say("raised", what="f(x)", ename="ValueError", error="bad (your line 3: y = x[6])"),
    ]
    for english in messages:
        zh, whole = wording.to_chinese(english)
        assert whole and CJK.search(zh), (english, zh)
        assert not re.search(r"\b(your line|blocked|needs review|answer cell|test cell|superseded|argument)\b", zh), zh
    assert "（你的第 34 行）" in wording.to_chinese(messages[-2])[0]
    assert wording.to_chinese(messages[-1])[0] == "f(x) 引发了 ValueError：bad（你的第 3 行：y = x[6]）"


def test_the_superseded_mark_is_in_the_pages_language(tmp_path):
    points = {"a": 1}
    for edition in ("en", "zh"):
        page = tmp_path / f"{edition}.html"
        feedback.write_feedback(page, None, "s", CHAPTER, {}, points, reasons=["x"], edition=edition)
        feedback.mark_feedback(page, wording.say("superseded", file="s_2.ipynb"))
        text = page.read_text(encoding="utf-8")
        if edition == "en":
            assert "<b>superseded by s_2.ipynb</b>: this file is not the one graded in the course's grade book." in text
        else:
            assert "<b>已被 s_2.ipynb 取代</b>：这个文件不是课程成绩册中计分的那一个。" in text
