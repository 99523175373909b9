"""Grading on Gradescope (``autograder/gradescope/``; README, "Gradescope"), tested as Gradescope runs it.

Fast: the zip's layout (``setup.sh`` and ``run_autograder`` at its root, executable, the course without its sample
submissions; the same checkout gives the same bytes); ``results.json`` built from the course grader's result files —
stored ones (``benchmarks/results/gradescope/``, written by ``benchmarks/bench_gradescope.py``) and, for every
chapter, ones made from its checks (full marks, a bug, untouched, unreadable, integrity) — against the JSON Schema
of Gradescope's documented fields (``autograder/gradescope/gradescope_results.schema.json``) and this course's
contract (one scored test per exercise, the total the course grader's, the hidden checks' detail in their own tests
at the chosen visibility and nowhere else); wrong submissions (another chapter's notebook, a file that is not a notebook, several
notebooks, nothing) graded in process: a zero and the reason, never a crash, in both editions where no notebook says
which; ``run_autograder``'s own zero where its Python cannot run, in both editions.

Slow: the zip unpacked into a tree laid out as ``/autograder`` (``AUTOGRADER_ROOT``), ``setup.sh`` run in a clean
virtualenv made from a system Python (``AUTOGRADER_PACKAGES_FROM``: torch, or for CI's tier every package, hard-linked
from the development virtualenv; everything else pip installs as on Gradescope), each submission copied into
``submission/`` and ``run_autograder`` run: the correct, buggy, untouched and truncated samples and two hostile
notebooks that try to write ``results.json`` themselves (from a cell; at exit, from a spawned and a forked process)
get exactly the course grader's points (``python -m autograder grade`` on the same files), jailed, and once more in
fallback mode (no jail: the kernel as its own unprivileged uid).
"""

from __future__ import annotations

import html
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import zipfile

import jsonschema
import nbformat
import pytest

from autograder import notebooks, wording
from autograder.gradescope import build, results_json, run
from autograder.grading import submission
from autograder.releases import points_text
from scripts.build_notebooks import notebooks as builder
from tests import gradescope_container as simulate
from tests import variants

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCHEMA = json.loads(results_json.SCHEMA.read_text())
STORED = ROOT / "benchmarks" / "results" / "gradescope"
CHAPTER = "ch03_self_attention"  # the chapter the slow tests install
FORGED = 999.0  # the score the hostile notebooks write


def validate(payload: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(payload)


def check_contract(
    payload: dict, result: submission.Result, chapter: str, visibility: str = "after_published", edition: str = "en"
) -> None:
    """What the course promises of every results.json, beyond Gradescope's schema (``edition``: the one submitted)."""
    validate(payload)
    exercises = list(notebooks.checks_module(chapter).EXERCISES)
    scored = [t for t in payload["tests"] if "score" in t]
    assert [t["name"] for t in scored] == [ex.name for ex in exercises]  # one scored test per exercise, in order
    for t, ex in zip(scored, exercises):
        assert t["max_score"] == ex.points and t["visibility"] == "visible"
        assert t["score"] == result.scores.get(ex.name, 0.0)
        assert t["status"] == ("passed" if t["score"] >= ex.points else "failed")
        said = {
            "en": f"{t['score']:g} of {points_text(ex.points)}",
            "zh": f"得 {t['score']:g} 分（满分 {ex.points:g} 分）",
        }
        assert t["output"].startswith(("✔", "✘")) and said[edition] in t["output"].splitlines()[0]
    assert payload["score"] == sum(t["score"] for t in scored) == result.score  # the course grader's total
    hidden = [t for t in payload["tests"] if "hidden checks" in t["tags"]]
    named = [results_json.hidden_test_name(ex.name, edition) for ex in exercises if ex.hidden]
    assert [t["name"] for t in hidden] == named
    assert named == [
        f"{ex.name}{': hidden checks' if edition == 'en' else '：隐藏检查'}" for ex in exercises if ex.hidden
    ]
    assert all("score" not in t and t["visibility"] == visibility for t in hidden)
    if visibility != "visible":  # what a hidden check found is in its own test only
        shown = payload["output"] + "".join(t["output"] for t in scored)
        for t in hidden:
            for line in t["output"].splitlines():
                if line.startswith("✘ "):
                    assert line not in shown and _escaped(line) not in shown, line
    assert payload["extra_data"]["course_grader"]["status"] == result.status
    if result.status != "graded":
        assert payload["score"] == 0
        whys = [result.reason.split("; ")[0][:60]] if edition == "en" else ["未评分：", "整份提交得 0 分："]
        assert all(any(why in t["output"] for why in whys) for t in scored), "every exercise says why it got zero"


def _escaped(text: str) -> str:
    import html

    return html.escape(text)


# ------------------------------------------------------------------------------------------------ fast


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    validate({"score": 1.0})
    with pytest.raises(jsonschema.ValidationError):
        validate({"tests": [{"name": "no score anywhere"}]})
    with pytest.raises(jsonschema.ValidationError):
        validate({"score": 1, "tests": [{"score": 1, "visibility": "later"}]})


def test_the_zip_has_gradescopes_layout_and_is_reproducible(tmp_path):
    one = build.build_zip(CHAPTER, tmp_path / "one", hidden_visibility="after_due_date")
    two = build.build_zip(CHAPTER, tmp_path / "two", hidden_visibility="after_due_date")
    assert one.name == f"{CHAPTER}_gradescope.zip"
    assert one.read_bytes() == two.read_bytes()
    with zipfile.ZipFile(one) as z:
        infos = {i.filename: i for i in z.infolist()}
        config = json.loads(z.read("gradescope.json"))
        requirements = z.read("requirements.txt").decode()
        setup = z.read("setup.sh").decode()
    for script in ("setup.sh", "run_autograder"):
        assert (infos[script].external_attr >> 16) & 0o111, f"{script} is not executable"
    assert config["chapter"] == CHAPTER and config["hidden_visibility"] == "after_due_date"
    assert config["timeout"] < 600, "the notebook's limit must leave time within Gradescope's default 10 minutes"
    names = set(infos)
    assert f"course/solutions/{CHAPTER}.py" in names and f"course/autograder/{CHAPTER}.py" in names
    assert f"course/notebooks/templates/{CHAPTER}.py" in names and f"course/notebooks/{CHAPTER}.ipynb" in names
    assert f"course/notebooks/zh/{CHAPTER}.ipynb" in names, "a Chinese submission's page and tests come from it"
    assert f"course/notebooks/test_history/{CHAPTER}.json" in names, "an earlier release's test cell is no edit"
    assert not [n for n in names if "/samples/" in n or "__pycache__" in n or n.startswith("course/tests")]
    torch_pin = next(ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.startswith("torch=="))
    assert f'TORCH="{torch_pin.split()[0]}"' in setup and build.TORCH_INDEX in setup
    assert "\ntorch" not in requirements and {"nbclient", "nbconvert"} <= set(
        map(build._requirement_name, requirements.split())
    )
    assert not {"nbgrader", "jupytext"} & set(map(build._requirement_name, requirements.split())), (
        "not on grading's path"
    )
    assert "conda" not in setup and "chromium" not in setup
    for script in ("setup.sh", "run_autograder"):
        z_text = zipfile.ZipFile(one).read(script)
        (tmp_path / script).write_bytes(z_text)
        subprocess.run(["bash", "-n", str(tmp_path / script)], check=True)


def _stored():
    return sorted(STORED.glob("*.json")) if STORED.is_dir() else []


@pytest.mark.parametrize("path", _stored(), ids=lambda p: p.stem)
def test_results_from_stored_course_results_fit_the_schema(path):
    """The results.json of each chapter's reference sample graded through its Gradescope autograder
    (benchmarks/bench_gradescope.py; the feedback page left out): it fits, its total is the course grader's, and the
    same tests are built again from the course grader's result file it carries."""
    written = json.loads(path.read_text())
    validate(written)
    grader = written["extra_data"]["course_grader"]
    chapter, result = grader["chapter"], submission.result_from_fields(grader["result"])
    assert written["score"] == result.score == sum(ex.points for ex in notebooks.checks_module(chapter).EXERCISES)
    rebuilt = results_json.results_payload(result, chapter, output=written["output"])
    check_contract(rebuilt, result, chapter)
    assert rebuilt["tests"] == written["tests"]


def _synthetic_results(chapter: str) -> dict[str, submission.Result]:
    """Result files as the course grader writes them, for every kind of outcome, from the chapter's checks: the
    reasons and details are the grader's messages (read back from the file as it holds them)."""
    from autograder.checks.exercises import failed_check, label
    from autograder.grading.reasons import detail_reason, exercise_reason
    from autograder.wording import Message, indented, lines, say

    exercises = list(notebooks.checks_module(chapter).EXERCISES)
    full = {ex.name: float(ex.points) for ex in exercises}
    first = exercises[0]
    output = Message("{what}: output", what=first.name)
    wrong = lines(say("wrong values", what=output), indented(say("hint", hint="a hint"), "  "))
    details = [failed_check(first.visible[0], wrong)]
    if first.hidden:
        details.append(failed_check(first.hidden[0], say("differs", what=first.name, worst="0.3", atol="1e-05")))
    untouched = [
        exercise_reason(
            ex.name, say("failed check", check=label(ex.visible[0]), message=say("not filled in", what=ex.name))
        )
        for ex in exercises
    ]
    bug = [exercise_reason(first.name, detail_reason(details[0]))]
    integrity = [say("integrity", violations="torch.allclose was replaced")]

    def result(name: str, status: str, scores: dict, reasons: list, **more) -> submission.Result:
        made = submission.Result(name, "0" * 64, name[0], status, "; ".join(map(str, reasons)), scores, **more)
        made.reasons = reasons
        return submission.result_from_fields(json.loads(json.dumps(submission.result_fields(made))))

    return {
        "full": result("a.ipynb", "graded", full, []),
        "bug": result("b.ipynb", "graded", dict(full, **{first.name: 0.0}), bug, details={first.name: details}),
        "untouched": result("c.ipynb", "graded", {ex.name: 0.0 for ex in exercises}, untouched),
        "unreadable": result("d.ipynb", "error", {}, ["not a readable notebook: not valid JSON (Unterminated string)"]),
        "integrity": result("e.ipynb", "integrity", {ex.name: 0.0 for ex in exercises}, integrity),
    }


@pytest.mark.parametrize("chapter", notebooks.chapters())
def test_results_of_every_kind_fit_the_schema(chapter):
    release = builder.build_release(chapter)
    graded = builder.fill_release(release, chapter)
    made = {}
    for kind, result in _synthetic_results(chapter).items():
        for visibility in ("after_published", "visible"):
            # the feedback page (nbconvert: about a second) where its content is what is tested
            page = (
                {} if (kind, visibility) in (("bug", "after_published"), ("unreadable", "visible")) else {"output": ""}
            )
            made[kind, visibility] = payload = results_json.results_payload(
                result, chapter, graded=graded if result.status != "error" else None, hidden_visibility=visibility,
                **page,
            )  # fmt: skip
            check_contract(payload, result, chapter, visibility)
    first = next(iter(notebooks.checks_module(chapter).EXERCISES))
    for visibility in ("after_published", "visible"):
        bug = made["bug", visibility]
        assert ": output has the wrong values" in bug["tests"][0]["output"]
        if first.hidden:
            assert bug["tests"][1]["status"] == "failed" and "allowed: about 1e-05" in bug["tests"][1]["output"]
            in_scored = "allowed: about 1e-05" in bug["tests"][0]["output"]
            assert in_scored == (visibility == "visible")
    if first.hidden:
        hidden = made["bug", "after_published"]
        assert "allowed: about 1e-05" not in hidden["output"] and ": output has the wrong values" in hidden["output"]
        assert "once the grades are published" in hidden["tests"][0]["output"]
    assert "Unterminated string" in made["unreadable", "visible"]["output"]


_HAN = re.compile(r"[\u4e00-\u9fff]")


def _english_sentences(text: str) -> list[str]:
    """Three or more English words in a row in a test's output (text) outside values and code names: what a message
    left in English shows. Lines of values (tensors, lists, numbers) do not count, nor names (``causal_mask``) or
    citations ("Vaswani et al.")."""
    found = []
    for line in text.splitlines():
        if not re.match(r"\s*(tensor\(|\[|[-\d])", line):
            line = re.sub(r"\b[A-Z][a-z]+ et al\.", " ", line)
            found += re.findall(r"(?<![\w.])[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,}){2,}(?![\w(])", line)
    return found


def _zh_title(chapter: str) -> str:
    """The title of the Chinese release notebook of ``chapter``, up to its first markup."""
    release = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)
    prose = [ln for c in release.cells if c.cell_type == "markdown" for ln in c.source.splitlines()]
    return next(ln for ln in prose if ln.startswith("# "))[2:].split("（")[0].split("`")[0].strip()


def test_a_chinese_submission_gets_its_gradescope_page_and_tests_in_chinese():
    """The edition submitted (``canonical.edition_of``, as the batch reads it) reaches all of results.json: a
    notebook of the Chinese edition gets the Chinese feedback page on Gradescope, and its tests say their own words
    in Chinese (wording.py's keys) around the checks' messages in Chinese (as the page writes them); the tags stay
    the instructor's. An English submission's results are as they were (the stored runs, above)."""
    graded = builder.fill_release(builder.build_release(CHAPTER), CHAPTER)
    results = _synthetic_results(CHAPTER)
    made = {}
    for kind, result in results.items():
        page = {} if kind in ("bug", "unreadable") else {"output": ""}  # the page (nbconvert) where it is tested
        graded_ = None if result.status == "error" else graded
        for visibility in ("after_published", "visible"):
            en = results_json.results_payload(result, CHAPTER, graded=graded_, hidden_visibility=visibility, **page)
            zh = results_json.results_payload(
                result, CHAPTER, graded=graded_, hidden_visibility=visibility, edition="zh", **page
            )
            check_contract(en, result, CHAPTER, visibility)
            check_contract(zh, result, CHAPTER, visibility, edition="zh")
            made[kind, visibility] = zh
            for t_en, t_zh in zip(en["tests"], zh["tests"]):
                assert not _HAN.search(t_en["output"]) and _HAN.search(t_zh["output"]), (kind, t_zh["output"])
                assert t_en["tags"] == t_zh["tags"] and t_en.get("score") == t_zh.get("score"), kind
        if not page:  # built here
            assert "总分" in zh["output"] and "总分" not in en["output"] and "total" in en["output"], kind
    first = next(iter(notebooks.checks_module(CHAPTER).EXERCISES)).name
    bug = made["bug", "after_published"]["tests"]
    assert f"有一项隐藏检查未通过：它发现的问题将在成绩公布后显示在“{first}：隐藏检查”中" in bug[0]["output"]
    assert "提示：" in bug[0]["output"] and "有一项隐藏检查" not in made["bug", "visible"]["tests"][0]["output"]
    untouched = made["untouched", "after_published"]["tests"]
    assert "引发了 NotImplementedError：这道练习还没有作答。" in untouched[0]["output"]
    assert untouched[1]["output"].startswith(f"没有报告 {first} 的隐藏检查未通过")
    assert made["full", "after_published"]["tests"][1]["output"].startswith("隐藏检查全部通过（共 ")
    unreadable = made["unreadable", "after_published"]["tests"]
    assert "未评分：" in unreadable[0]["output"] and unreadable[1]["output"].startswith("隐藏检查没有运行")
    assert "整份提交得 0 分：完整性问题：" in made["integrity", "after_published"]["tests"][0]["output"]
    title = _zh_title(CHAPTER)
    assert title and f">{title}" in made["bug", "after_published"]["output"], title
    assert "得 0 分（满分" in made["bug", "after_published"]["output"]


def _in_process_run(tmp_path: pathlib.Path, files: dict[str, bytes], chapter: str = CHAPTER) -> dict:
    """``run`` on a tree laid out as /autograder, in this process (nothing here starts a kernel)."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "results" / "results.json").write_text('{"score": 999}')  # left by anything before: replaced
    for name, data in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    payload = run.run(root, build.Config(chapter))
    assert json.loads((root / "results" / "results.json").read_text()) == payload
    return payload


def _sample(chapter: str, who: str) -> pathlib.Path:
    return next((notebooks.SAMPLES / chapter).glob(f"{who}*.ipynb"))


@pytest.mark.parametrize(
    "case,why",
    [
        ("another chapter", "this is the notebook of"),
        ("not a notebook", "not a notebook (.py file)"),
        ("several notebooks", "2 notebooks were submitted"),
        ("nothing", "nothing was submitted"),
        ("no notebook among files", "no notebook (.ipynb file) was submitted"),
    ],
)
def test_a_wrong_submission_gets_zero_and_its_reason(tmp_path, case, why):
    correct = _sample(CHAPTER, "lovelace").read_bytes()
    files = {
        "another chapter": {"ch04.ipynb": _sample("ch04_multi_head_attention", "lovelace").read_bytes()},
        "not a notebook": {"answers.py": b"def scaled_dot_product_attention(q, k, v):\n    return q\n"},
        "several notebooks": {"a/mine.ipynb": correct, "mine (1).ipynb": correct},
        "nothing": {},
        "no notebook among files": {"answers.py": b"x = 1\n", "notes.txt": b"hello\n"},
    }[case]
    payload = _in_process_run(tmp_path, files)
    result = submission.Result("", "", "", "error", payload["extra_data"]["course_grader"]["reason"])
    check_contract(payload, result, CHAPTER)
    assert payload["score"] == 0 and why in payload["extra_data"]["course_grader"]["reason"]
    assert why in payload["output"] or why in payload["output"].replace("&#x27;", "'")


def test_several_chinese_notebooks_are_told_so_in_chinese(tmp_path):
    """A student of the Chinese edition who submits two notebooks gets the zero's reason in Chinese (the edition of
    the notebooks submitted)."""
    zh = (notebooks.RELEASE_DIR / "zh" / f"{CHAPTER}.ipynb").read_bytes()
    payload = _in_process_run(tmp_path, {"a/mine.ipynb": zh, "mine (1).ipynb": zh})
    assert payload["score"] == 0 and "提交了 2 个笔记本" in payload["output"], payload["output"]
    assert "notebooks were submitted" not in payload["output"]
    assert "2 notebooks were submitted" in payload["extra_data"]["course_grader"]["result"]["reason"], "as data"


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_a_failure_of_the_grader_itself_is_told_in_the_edition_submitted(tmp_path, monkeypatch, edition):
    """The grader's own failure (here: batch.grade raising) gives a zero that says so in the edition of the notebook
    submitted, its reason kept as data."""
    from autograder.grading import batch

    def broken_grade(*args, **kw):
        raise RuntimeError("a bug of the grader")

    monkeypatch.setattr(batch, "grade", broken_grade)
    monkeypatch.setattr(run, "isolation", lambda: ("jailed", "the kernel runs in a bubblewrap jail"))
    folder = notebooks.RELEASE_DIR / ("zh" if edition == "zh" else "")
    payload = _in_process_run(tmp_path, {"mine.ipynb": (folder / f"{CHAPTER}.ipynb").read_bytes()})
    assert payload["score"] == 0
    said = {
        "en": "the autograder failed while grading this submission (RuntimeError)",
        "zh": "自动评分程序在为这份提交评分时出错",
    }
    assert said[edition] in payload["output"], payload["output"]
    assert "(RuntimeError)" in payload["extra_data"]["course_grader"]["result"]["reason"], "as data, in English"
    if edition == "zh":
        for t in payload["tests"]:
            assert _HAN.search(t["output"]) and not _english_sentences(t["output"]), t["output"]


@pytest.mark.parametrize(
    "case,key,fields",
    [
        ("nothing", "nothing submitted", {}),
        ("no notebook among files", "no notebook submitted", {"shown": "answers.py, notes.txt"}),
    ],
)
def test_a_zero_without_a_notebook_is_told_in_both_editions(tmp_path, case, key, fields):
    """No notebook says which edition the student reads: the zero's reason is in English, then in Chinese, both
    from the catalogues, on the page and in every exercise's test."""
    files = {"nothing": {}, "no notebook among files": {"answers.py": b"x = 1\n", "notes.txt": b"hello\n"}}[case]
    payload = _in_process_run(tmp_path, files)
    english, chinese = (wording.text(key, edition, **fields) for edition in ("en", "zh"))
    page = f"{html.escape(english)}<br>{html.escape(chinese)}"
    assert payload["score"] == 0 and page in payload["output"], payload["output"]
    for t in payload["tests"]:
        if "score" in t:
            assert english in t["output"] and chinese in t["output"], t["output"]


def test_the_graders_own_failure_without_a_notebook_is_told_in_both_editions(tmp_path, monkeypatch):
    """The grader failing (here: isolation raising) on a submission with no notebook: its zero in both editions."""

    def broken():
        raise RuntimeError("a bug of the grader")

    monkeypatch.setattr(run, "isolation", broken)
    payload = _in_process_run(tmp_path, {"answers.py": b"x = 1\n", "notes.txt": b"hello\n"})
    for edition in ("en", "zh"):
        said = wording.text("autograder failed", edition, ename="RuntimeError")
        assert html.escape(said) in payload["output"], payload["output"]


def test_run_autograder_writes_a_zero_in_both_editions_when_python_fails(tmp_path):
    """The zip's ``run_autograder`` where its Python cannot run (no virtualenv under AUTOGRADER_COURSE_HOME): it
    writes results.json itself, a zero whose text is the catalogues' in English and in Chinese, its exit status in
    both."""
    zipped = build.build_zip(CHAPTER, tmp_path / "zip")
    script = tmp_path / "run_autograder"
    script.write_bytes(zipfile.ZipFile(zipped).read("run_autograder"))
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_COURSE_HOME=str(tmp_path / "no course"))
    ran = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    payload = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    validate(payload)
    english, chinese = (wording.text("autograder did not run", edition, status=127) for edition in ("en", "zh"))
    assert payload["score"] == 0 and payload["output"] == f"{english}\n{chinese}", payload["output"]


# ------------------------------------------------------------------------------------------------ slow


_HOSTILE_CELL = """\
import json, os
FORGED = {{"score": {forged}, "output": "FORGED by the notebook", "tests": [{{"name": "forged", "score": {forged}}}]}}
for path in ("/autograder/results/results.json", {target!r}):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(FORGED, f)
        print("wrote", path)
    except Exception as e:
        print("could not write", path, type(e).__name__)
"""

_HOSTILE_EXIT = """\
import atexit, json, os, subprocess, sys, time
FORGED = {{"score": {forged}, "output": "FORGED at exit", "tests": [{{"name": "forged", "score": {forged}}}]}}
PATHS = ("/autograder/results/results.json", {target!r})

def forge():
    for path in PATHS:
        try:
            with open(path, "w") as f:
                json.dump(FORGED, f)
        except Exception:
            pass

atexit.register(forge)
LOOP = "import json, time\\nfor _ in range(300):\\n    time.sleep(0.1)\\n    for p in %r:\\n        try:\\n            open(p, 'w').write(json.dumps(%r))\\n        except Exception:\\n            pass\\n" % (PATHS, FORGED)
try:
    subprocess.Popen([sys.executable, "-c", LOOP], start_new_session=True)
except Exception as e:
    print("no process:", type(e).__name__)
try:
    if os.fork() == 0:
        os.setsid()
        for _ in range(300):
            time.sleep(0.1)
            forge()
        os._exit(0)
except Exception as e:
    print("no fork:", type(e).__name__)
"""


def _hostile(nb: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
    """``nb`` with a cell of the student's own, right after the setup cell (as the damaged/hostile variants)."""
    return variants._insert_after_setup(nb, source)


def _submissions(box: simulate.Simulation, folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """The four samples and two hostile notebooks (on the untouched notebook: they can earn nothing themselves)."""
    folder.mkdir(exist_ok=True)
    files = {who: _sample(box.chapter, who) for who in ("lovelace", "hopper", "turing", "babbage")}
    target = str(box.root / "results" / "results.json")
    release = builder.build_release(box.chapter)
    for name, source in (("hostile_cell", _HOSTILE_CELL), ("hostile_exit", _HOSTILE_EXIT)):
        path = folder / f"{name}_{box.chapter}.ipynb"
        nbformat.write(_hostile(release, source.format(forged=FORGED, target=target)), path)
        files[name] = path
    return files


def _course_grades(files: dict[str, pathlib.Path], chapter: str, out: pathlib.Path) -> dict[str, submission.Result]:
    """What ``python -m autograder grade`` gives each file (this process's grader, jailed)."""
    from autograder.grading import batch

    batch.grade(list(files.values()), chapter, out, jobs=2)
    by_name = {}
    for path in (out / "results").glob("*.json"):
        r = submission.read_result(path)
        by_name[r.submission] = r
    return {who: by_name[f.name] for who, f in files.items()}


def _assert_not_forged(box: simulate.Simulation, payload: dict) -> None:
    time.sleep(3)  # anything the kernel left behind had time to write
    again = json.loads((box.root / "results" / "results.json").read_text())
    assert again == payload, "results.json changed after run_autograder ended"
    assert payload["score"] != FORGED and not payload["output"].startswith("FORGED")
    assert all(t["name"] != "forged" and t.get("score") != FORGED for t in payload["tests"])
    assert sorted(p.name for p in (box.root / "results").iterdir()) == ["results.json"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The autograder of CHAPTER installed by setup.sh with torch linked in and every other package from pip."""
    box = simulate.Simulation(CHAPTER)
    try:
        box.setup(simulate.stage_packages(box.base / "torch-site", ["torch"], closure=False))
        assert (box.course_home / "course" / "solutions").stat().st_mode & 0o077 == 0
        files = _submissions(box, tmp_path_factory.mktemp("files"))
        expected = _course_grades(files, CHAPTER, tmp_path_factory.mktemp("course-grader"))
        yield box, files, expected
    finally:
        box.close()


SAMPLES = ["lovelace", "hopper", "turing", "babbage", "hostile_cell", "hostile_exit"]


@pytest.mark.slow
@pytest.mark.xdist_group("gradescope")
@pytest.mark.parametrize("who", SAMPLES)
def test_gradescope_gives_the_course_graders_points(installed, who):
    box, files, expected = installed
    payload, stdout = box.run([files[who]])
    result = expected[who]
    check_contract(payload, result, CHAPTER)
    grader = payload["extra_data"]["course_grader"]
    assert grader["isolation"] == "jailed", stdout
    assert grader["status"] == result.status and grader["reason"] == result.reason
    for t in payload["tests"]:
        if "score" in t:
            assert t["score"] == result.scores.get(t["name"], 0.0)
    top = sum(ex.points for ex in notebooks.checks_module(CHAPTER).EXERCISES)
    assert payload["score"] == {"lovelace": top, "turing": 0, "babbage": 0}.get(who, payload["score"])
    if who == "hopper":
        assert 0 < payload["score"] < top
    if who == "babbage":
        assert "not valid JSON" in payload["output"]
    if who.startswith("hostile"):
        _assert_not_forged(box, payload)


@pytest.mark.slow
@pytest.mark.xdist_group("gradescope")
def test_gradescope_without_the_jail_runs_the_kernel_as_another_uid(installed):
    """Where bubblewrap cannot run, the kernel runs as its own unprivileged uid, which cannot write results.json."""
    box, files, expected = installed
    payload, stdout = box.run([files["hostile_exit"]], AUTOGRADER_JAIL="off")
    grader = payload["extra_data"]["course_grader"]
    assert grader["isolation"] == "unprivileged", stdout
    assert payload["score"] == expected["hostile_exit"].score == 0
    validate(payload)
    _assert_not_forged(box, payload)


@pytest.mark.slow
@pytest.mark.xdist_group("gradescope")
def test_several_notebooks_through_run_autograder(installed):
    box, files, _ = installed
    payload, _ = box.run([files["lovelace"], files["hopper"]])
    validate(payload)
    assert payload["score"] == 0 and "2 notebooks were submitted" in payload["output"]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", [CHAPTER])
def test_simulated_gradescope_run(chapter, tmp_path):
    """CI's tier: the zip installed by setup.sh (every package hard-linked from the development virtualenv, so pip
    finds them all) and two run_autograder runs. The reference sample with a cell that writes results.json itself:
    full marks, jailed, nothing forged, all of it in English. The Chinese edition's notebook with a catalogued bug:
    its tests and its page in Chinese (the zip carries ``notebooks/zh/``; the tests' words are wording.py's), no
    English sentence outside code, its points as the course grader's result says."""
    import catalogue
    from tests.test_translations import _english_outside_code

    box = simulate.Simulation(chapter)
    try:
        _, requirements = build.grading_requirements(chapter=chapter)
        names = ["torch"] + [build._requirement_name(r) for r in requirements]
        python = getattr(sys, "_base_executable", sys.executable)  # the Python these packages were installed for
        box.setup(simulate.stage_packages(box.base / "site", names, closure=True), python=python)
        target = str(box.root / "results" / "results.json")
        nb = _hostile(
            nbformat.read(_sample(chapter, "lovelace"), as_version=4),
            _HOSTILE_CELL.format(forged=FORGED, target=target),
        )
        path = tmp_path / f"lovelaceada_{chapter}.ipynb"
        nbformat.write(nb, path)
        payload, stdout = box.run([path])
        exercises = list(notebooks.checks_module(chapter).EXERCISES)
        top = sum(ex.points for ex in exercises)
        result = submission.Result(path.name, "", "", "graded", "", {ex.name: float(ex.points) for ex in exercises})
        check_contract(payload, result, chapter)
        assert payload["score"] == top and payload["extra_data"]["course_grader"]["isolation"] == "jailed", stdout
        _assert_not_forged(box, payload)
        assert not _HAN.search(
            "".join(t["output"] for t in payload["tests"])
        )  # (the notebook glosses terms in Chinese)
        assert "<td>total</td>" in payload["output"] and "总分" not in payload["output"]

        # the Chinese edition's notebook, answered with a catalogued bug
        mutants = catalogue.mutants(chapter)
        bug = next((m for m in mutants if m.name == "no scaling"), mutants[0])
        release = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)
        path = tmp_path / f"liqingzhao_{chapter}.ipynb"
        nbformat.write(builder.fill_release(release, chapter, [bug]), path)
        zh, stdout = box.run([path])
        result = submission.Result(**zh["extra_data"]["course_grader"]["result"])
        check_contract(zh, result, chapter, edition="zh")
        assert 0 < zh["score"] < top and zh["extra_data"]["course_grader"]["isolation"] == "jailed", stdout
        for t in zh["tests"]:
            assert _HAN.search(t["output"]) and not _english_sentences(t["output"]), t
        failed = next(t for t in zh["tests"] if t.get("status") == "failed" and "score" in t)
        assert "提示：" in failed["output"], failed["output"]
        page = zh["output"]
        assert f">{_zh_title(chapter)}" in page and "<td>总分</td>" in page and "<td>total</td>" not in page
        code = {w for c in release.cells if c.cell_type == "code" for w in re.findall(r"\w+", c.source)}
        english = [w for w in _english_outside_code(f"<html><body>{page}</body></html>") if w not in code]
        assert len([w for w in english if not w.endswith("Error")]) <= 10, english

    finally:
        box.close()


@pytest.mark.slow
def test_gradescope_gives_a_late_verdict_an_integrity_zero(tmp_path):
    """Issue 46 on Gradescope (the zip installed by setup.sh, every package linked from the development virtualenv,
    as CI's tier): the notebook that silences its first exercise's test cell, keeps the course's version swapped in
    while a later exercise is checked and sends the first verdict itself afterwards gets zero, status integrity,
    and every exercise's test says why; answers that return the course's versions from EXERCISES get zero."""
    from autograder import releases

    chapter = CHAPTER
    box = simulate.Simulation(chapter)
    try:
        _, requirements = build.grading_requirements(chapter=chapter)
        names = ["torch"] + [build._requirement_name(r) for r in requirements]
        python = getattr(sys, "_base_executable", sys.executable)
        box.setup(simulate.stage_packages(box.base / "site", names, closure=True), python=python)
        var = variants.variants(chapter, releases.release_notebook(chapter))["late_verdict_with_kept_reference"]
        path = tmp_path / f"latecomer_{chapter}.ipynb"
        path.write_text(var.text)
        payload, stdout = box.run([path])
        result = submission.Result(**payload["extra_data"]["course_grader"]["result"])
        check_contract(payload, result, chapter)
        assert payload["score"] == 0 and result.status == "integrity", stdout[-3000:]
        assert var.reason in result.reason and payload["extra_data"]["course_grader"]["isolation"] == "jailed"

        # the grader's knowledge as the answer: answers that return the course's versions of the exercises from
        # EXERCISES earn nothing in Gradescope's container either (the kernel imports the checks' kernel form)
        var = variants.variants(chapter, releases.release_notebook(chapter))["answers_with_the_course_versions"]
        path = tmp_path / f"babbagecharles_{chapter}.ipynb"
        path.write_text(var.text)
        knowledge, stdout = box.run([path])
        assert knowledge["score"] == 0 and knowledge["extra_data"]["course_grader"]["isolation"] == "jailed", stdout
    finally:
        box.close()


@pytest.fixture(scope="module")
def every_package_installed():
    """One simulated container, set up once with every package hard-linked from the development virtualenv (as CI's
    tier does); each chapter's test swaps its course in with ``setup.sh --course-only`` (as the benchmark does)."""
    box = simulate.Simulation(CHAPTER)
    try:
        requirements = sorted({r for c in notebooks.chapters() for r in build.grading_requirements(chapter=c)[1]})
        names = ["torch"] + [build._requirement_name(r) for r in requirements]
        python = getattr(sys, "_base_executable", sys.executable)
        box.setup(simulate.stage_packages(box.base / "site", names, closure=True), python=python)
        yield box
    finally:
        box.close()


@pytest.mark.slow
@pytest.mark.xdist_group("gradescope-every-chapter")
@pytest.mark.parametrize("chapter", notebooks.chapters())
def test_every_chapters_autograder_gives_the_course_graders_points(every_package_installed, chapter, tmp_path):
    """For every chapter: its zip, installed as Gradescope installs it, gives each shipped sample (correct, buggy,
    untouched, truncated) exactly the points and status of ``python -m autograder grade`` on the same files."""
    home = every_package_installed.course_home
    box = simulate.Simulation(chapter, tmp_path / "container")
    box.course_home = home
    box.setup(course_only=True)
    files = {who: _sample(chapter, who) for who in ("lovelace", "hopper", "turing", "babbage")}
    expected = _course_grades(files, chapter, tmp_path / "course-grader")
    top = sum(ex.points for ex in notebooks.checks_module(chapter).EXERCISES)
    for who, path in files.items():
        payload, stdout = box.run([path])
        validate(payload)
        result = expected[who]
        check_contract(payload, result, chapter)
        grader = payload["extra_data"]["course_grader"]
        assert grader["status"] == result.status, (who, stdout[-2000:])
        assert payload["score"] == result.score, (who, payload["score"], result.score, stdout[-2000:])
        assert [t["score"] for t in payload["tests"] if "score" in t] == [
            result.scores.get(ex.name, 0.0) for ex in notebooks.checks_module(chapter).EXERCISES
        ]
    assert expected["lovelace"].score == top and expected["turing"].score == 0 and expected["babbage"].score == 0
    assert 0 < expected["hopper"].score < top


def test_only_the_triton_chapters_autograder_installs_triton(tmp_path):
    """Chapter 11's kernels run in Triton's interpreter on Gradescope's CPU: its zip installs Triton (pinned as in
    requirements.txt); the other chapters' zips do not."""
    pin = next(ln for ln in (ROOT / "requirements.txt").read_text().splitlines() if ln.startswith("triton=="))
    for chapter in notebooks.chapters():
        with zipfile.ZipFile(build.build_zip(chapter, tmp_path / chapter)) as z:
            wanted = z.read("requirements.txt").decode().splitlines()
        assert (pin in wanted) == build.needs_triton(chapter), chapter
    assert [c for c in notebooks.chapters() if build.needs_triton(c)] == ["ch11_flash_attention_triton"]


def _python(version: str) -> str | None:
    """An interpreter of Python ``version`` ("3.10") on this machine (pyenv's, or on PATH), or None."""
    import glob

    found = sorted(glob.glob(str(pathlib.Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")))
    candidates = [sys.executable, *found, shutil.which(f"python{version}") or ""]
    for candidate in filter(None, candidates):
        ran = subprocess.run(
            [candidate, "-c", "import sys, pip; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if ran.returncode == 0 and ran.stdout.strip() == version:
            return candidate
    return None


def _pypi_reachable() -> bool:
    import socket

    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
        return True
    except OSError:
        return False


def _ubuntu_2204_path(tmp_path: pathlib.Path, python3: str, python311: str | None) -> dict[str, str]:
    """An environment whose PATH has Ubuntu 22.04's Pythons: ``python3`` (3.10) and ``python3.11`` (wrappers, not
    links: a virtualenv's interpreter finds its packages only as itself); ``python311=None``: a ``python3.11`` that
    is not installed (it fails as a missing command does, and hides this machine's own)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, target in (("python3", python3), ("python3.11", python311)):
        run = f'exec "{target}" "$@"' if target else f'echo "{name}: not installed" >&2; exit 127'
        (bin_dir / name).write_text(f"#!/bin/sh\n{run}\n")
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    for name in ("AUTOGRADER_PYTHON", "AUTOGRADER_SKIP_APT", "VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    return env


def test_setup_sh_picks_python_311_for_every_chapter_where_python3_is_310(tmp_path):
    """Gradescope's Ubuntu 22.04 has python3 3.10, on which chapter 11's Triton pin has no wheels:
    every chapter's setup.sh (``--python``: its choice, nothing installed) takes ``python3.11`` instead, and that
    interpreter is 3.11 or later."""
    py310, py311 = _python("3.10"), _python("3.11")
    if py310 is None or py311 is None:
        pytest.skip("no Python 3.10 and 3.11 interpreters on this machine")
    env = _ubuntu_2204_path(tmp_path, py310, py311)
    assert build.MIN_PYTHON == "3.11"
    for chapter in notebooks.chapters():
        source = tmp_path / chapter
        simulate.unpack(build.build_zip(chapter, tmp_path / "zips"), source)
        chose = subprocess.run(["bash", str(source / "setup.sh"), "--python"], env=env, capture_output=True, text=True)
        assert chose.returncode == 0, (chapter, chose.stderr)
        assert chose.stdout.strip() == "python3.11", chapter
        version = subprocess.run(
            [chose.stdout.strip(), "-c", "import sys; print(sys.version_info[:2] >= (3, 11))"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert version.stdout.strip() == "True", (chapter, version.stdout, version.stderr)


def test_setup_sh_installs_python_311_with_apt_where_python3_is_310(tmp_path):
    """The whole setup.sh on an image like Ubuntu 22.04's before its first apt run (python3 3.10, no python3.11),
    apt-get stubbed (it records what it is asked and "installs" python3.11 as Ubuntu's package would): it asks for
    python3.11 and python3.11-venv and makes the virtualenv with 3.11. Then pip may not reach any index, so setup.sh
    stops at torch (nothing is downloaded)."""
    py310, py311 = _python("3.10"), _python("3.11")
    if py310 is None or py311 is None:
        pytest.skip("no Python 3.10 and 3.11 interpreters on this machine")
    env = _ubuntu_2204_path(tmp_path, py310, None)
    log = tmp_path / "apt.log"
    stub = tmp_path / "bin" / "apt-get"
    stub.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        'case " $* " in *" install "*" python3.11 "*)\n'
        f'  printf \'#!/bin/sh\\nexec "%s" "$@"\\n\' "{py311}" > "{tmp_path / "bin" / "python3.11"}"\n'
        f'  chmod 755 "{tmp_path / "bin" / "python3.11"}";;\nesac\n'
    )
    stub.chmod(0o755)
    source = tmp_path / "source"
    simulate.unpack(build.build_zip(CHAPTER, tmp_path / "zip"), source)
    home = tmp_path / "home"
    env.update(AUTOGRADER_COURSE_HOME=str(home), AUTOGRADER_TORCH_INDEX="", AUTOGRADER_PIP_OPTIONS="--no-index")
    ran = subprocess.run(["bash", str(source / "setup.sh")], env=env, capture_output=True, text=True, timeout=300)
    asked = log.read_text().splitlines()
    assert any(" python3.11 python3.11-venv" in line and line.startswith("install") for line in asked), asked
    made = subprocess.run(
        [str(home / "venv" / "bin" / "python"), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
    )
    assert made.stdout.strip() == "3.11", (ran.stdout[-2000:], ran.stderr[-2000:])
    assert ran.returncode != 0 and "torch" in ran.stderr, "pip had no index: setup.sh stopped at torch"


@pytest.mark.slow
def test_setup_sh_installs_every_chapter_on_ubuntu_2204s_python(tmp_path):
    """Gradescope's image is Ubuntu 22.04, whose python3 is 3.10. For each distinct set of requirements the
    chapters' zips have: setup.sh's own choice of interpreter, on a PATH whose python3 is 3.10 (python3.11, Ubuntu's
    own package, for every chapter), and pip resolving the zip's requirements.txt and its torch pin with that
    interpreter (``--dry-run``: nothing is installed) — without nbgrader (grading does not use it). A pin that
    leaves that Python behind fails here, not in an instructor's image build."""
    py310, py311 = _python("3.10"), _python("3.11")
    if py310 is None or py311 is None:
        pytest.skip("no Python 3.10 and 3.11 interpreters on this machine")
    if not _pypi_reachable():
        pytest.skip("PyPI is not reachable from here")
    env = _ubuntu_2204_path(tmp_path, py310, py311)
    distinct: dict[tuple, str] = {}  # (torch, the other requirements) -> a chapter with them
    for chapter in notebooks.chapters():
        torch, others = build.grading_requirements(chapter=chapter)
        distinct.setdefault((torch, tuple(others)), chapter)
    assert len(distinct) >= 2, "chapter 11 (Triton) and the others"
    for (torch, _), chapter in distinct.items():
        source = tmp_path / chapter
        simulate.unpack(build.build_zip(chapter, tmp_path / "zips"), source)
        chose = subprocess.run(["bash", str(source / "setup.sh"), "--python"], env=env, capture_output=True, text=True)
        assert chose.returncode == 0, chose.stderr
        assert chose.stdout.strip() == "python3.11", chapter
        interpreter = shutil.which(chose.stdout.strip(), path=env["PATH"])
        assert interpreter is not None
        pip = [interpreter, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        report = tmp_path / f"{chapter}.json"
        ran = subprocess.run(
            [*pip, "--report", str(report), "-r", str(source / "requirements.txt")], capture_output=True, text=True
        )
        assert ran.returncode == 0, f"{chapter} with {chose.stdout.strip()}: {ran.stderr[-2000:]}"
        resolved = {
            p["metadata"]["name"].lower(): p["metadata"]["version"] for p in json.loads(report.read_text())["install"]
        }
        assert "nbgrader" not in resolved and "nbconvert" in resolved, (chapter, sorted(resolved))
        # torch comes from the PyTorch CPU index, which publishes the CPython versions PyPI's torch does
        ran = subprocess.run([*pip, "--no-deps", torch], capture_output=True, text=True)
        assert ran.returncode == 0, f"{torch} with {chose.stdout.strip()}: {ran.stderr[-2000:]}"


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_a_run_that_ran_out_of_memory_is_not_graded(tmp_path, monkeypatch, edition):
    """Gradescope's container has a memory limit (768 MB by default). A process of the run killed by the OOM killer
    (the container's cgroup counts it) can cost a correct notebook points without a word: instead the submission
    gets zero with a reason that says so, names the limit and tells the instructor what to do — in the edition the
    student submitted."""
    from autograder.grading import batch, execute, report

    readings = iter([(2, 768), (3, 768)])  # before and after grading: one kill in between
    monkeypatch.setattr(execute, "container_memory", lambda: next(readings))
    monkeypatch.setattr(run, "isolation", lambda: ("jailed", "the kernel runs in a bubblewrap jail"))

    def fake_grade(files, chapter, out, **kw):  # a grade that a thrashing, half-killed run could give
        return [report.Row(pathlib.Path(files[0]).name, "s", chapter, {}, 6.0, 10.0, "graded", "timed out")]

    monkeypatch.setattr(batch, "grade", fake_grade)
    if edition == "en":
        notebook = _sample(CHAPTER, "lovelace").read_bytes()
    else:
        release = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{CHAPTER}.ipynb", as_version=4)
        notebook = nbformat.writes(builder.fill_release(release, CHAPTER)).encode()
    payload = _in_process_run(tmp_path, {"mine.ipynb": notebook})
    why = payload["extra_data"]["course_grader"]["reason"]
    assert payload["score"] == 0 and payload["extra_data"]["course_grader"]["oom_kills"] == 1
    validate(payload)
    result = submission.Result("", "", "", "error", why)
    check_contract(payload, result, CHAPTER, edition=edition)
    if edition == "en":
        assert "ran out of memory (768 MB)" in why and "raise the autograder's memory" in why
        assert payload["output"].startswith("<p><b>0 points.</b> the autograder&#x27;s container ran out of memory")
    else:
        assert "内存不足（上限 768 MB）" in why and "请提高评分程序的内存" in why
        assert payload["output"].startswith("<p><b>0 分。</b>评分程序的容器")
        for t in payload["tests"]:
            assert _HAN.search(t["output"]) and not _english_sentences(t["output"]), t["output"]


def test_container_memory_reads_the_cgroups_oom_kills_and_limit(tmp_path):
    from autograder.grading import execute

    v2 = tmp_path / "v2" / "box"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n")
    (v2 / "memory.max").write_text(str(768 * 2**20) + "\n")
    own = tmp_path / "own-v2"
    own.write_text("0::/box\n")
    assert execute.container_memory(own, tmp_path / "v2") == (2, 768)
    (v2 / "memory.max").write_text("max\n")
    assert execute.container_memory(own, tmp_path / "v2") == (2, None)
    v1 = tmp_path / "v1" / "memory" / "box"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    (v1 / "memory.limit_in_bytes").write_text(str(2**63 - 4096) + "\n")
    own1 = tmp_path / "own-v1"
    own1.write_text("4:memory:/box\n7:cpu,cpuacct:/box\n")
    assert execute.container_memory(own1, tmp_path / "v1") == (1, None)
    assert execute.container_memory(tmp_path / "none", tmp_path) == (0, None)


def test_a_run_that_could_not_finish_is_told_apart_from_a_file_by_its_key():
    """The page's advice (download the file again, or run the whole notebook) follows the zero's message key, not
    its English: a kernel that died or a worker that ended is the run's, a file cut short or a plain string the
    file's."""
    from autograder.grading import runner, worker
    from autograder.wording import say

    died = worker._kernel_died(3072, [], ["f"], oom_killed=False)
    ended = say("with last line", why=say("worker exit code", code=-9), line="Killed")
    assert not results_json._unreadable([died]) and not results_json._unreadable([ended])
    assert not results_json._unreadable([runner.failure(runner.Run(None, RuntimeError("x")), 30, died)])
    assert results_json._unreadable([say("not valid JSON", where=say("nested too deeply"))])
    assert results_json._unreadable(["not a readable notebook: not valid JSON (Unterminated string)"])
    assert results_json._unreadable([])
