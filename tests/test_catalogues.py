"""Every message a chapter's checks can show has its Chinese in the chapter's catalogue
(``autograder/locale/zh/<chapter>.json``), and no entry there is stale.

A chapter's message is keyed by its English template (gettext's msgid): a check's label (its docstring on one line),
a requirement (``requires=``), the name a comparison gives a value (``expect_close("output", …)``), a message
(``expect_true(cond, "…")``, ``CheckFailed("…")``), a hint (``hint="…"``, or what a ``_…hint…`` helper returns) and
every ``Message("template {field}", field=…)``. A message with values in it is a :class:`~autograder.wording.Message`
with fields, never an f-string or a sum of strings (which could not be looked up). Code is not translated: what
``call("causal_mask(5)", …)`` names, and a ``Message`` whose template is a Python expression (``"{what}({config})"``),
are shown as they are.

The grader's own words (``locale/<edition>/grader.json``) have every key in every edition, with the same fields.
"""

from __future__ import annotations

import ast
import json
import pathlib
import re
import string

import pytest

from autograder import wording

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOCALE = ROOT / "autograder" / "locale"
CHAPTERS = sorted(p.stem for p in (ROOT / "autograder").glob("ch[0-9][0-9]_*.py"))

# the checks' functions whose first argument is a message or the name of a value, and expect_true's second
FIRST = {"expect_close", "expect_shape", "expect_equal", "expect_seeded", "expect_half_precision"}
FIRST |= {"expect_dropout_modes", "CheckFailed", "call"}
KEYWORDS = {"what", "hint", "message"}
CJK = re.compile("[\u4e00-\u9fff]")


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _is_code(template: str) -> bool:
    """Whether ``template`` is a Python expression once its ``{fields}`` are names (``"{what}({config})"``)."""
    try:
        ast.parse(re.sub(r"\{(\w+)\}", r"\1", template), mode="eval")
    except SyntaxError:
        return False
    return True


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _messages(tree: ast.Module) -> list[tuple[int, str, ast.expr]]:
    """(line, where, the expression) of every message position of a check module."""
    found: list[tuple[int, str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            if any(isinstance(d, ast.Call) and _name(d) == "check" for d in node.decorator_list):
                doc = ast.get_docstring(node)
                if doc is not None:
                    found.append((node.lineno, "label", ast.Constant(" ".join(doc.split()))))
            if "hint" in node.name:
                found += [(r.lineno, "hint", r.value) for r in ast.walk(node) if isinstance(r, ast.Return) and r.value]
        if not isinstance(node, ast.Call):
            continue
        name = _name(node)
        if name in FIRST and node.args:
            found.append((node.lineno, name, node.args[0]))
        if name == "expect_true" and len(node.args) > 1:
            found.append((node.lineno, name, node.args[1]))
        for kw in node.keywords:
            if kw.arg in KEYWORDS or (kw.arg == "requires" and name == "check"):
                found.append((node.lineno, f"{name}({kw.arg}=)", kw.value))
    return found


def _strings(expr: ast.expr) -> list[ast.expr]:
    """The parts of ``expr`` that are the message: both branches of ``a if c else b`` and of ``a or b``."""
    if isinstance(expr, ast.IfExp):
        return _strings(expr.body) + _strings(expr.orelse)
    if isinstance(expr, ast.BoolOp):
        return [part for value in expr.values for part in _strings(value)]
    return [expr]


def _keys(chapter: str) -> tuple[dict[str, int], list[str]]:
    """The chapter's message keys (key -> a line that uses it) and its messages that cannot be keys (f-strings,
    sums of strings), as "line N: where"."""
    tree = ast.parse((ROOT / "autograder" / f"{chapter}.py").read_text(encoding="utf-8"))
    keys: dict[str, int] = {}
    unkeyed: list[str] = []
    for line, where, expr in _messages(tree):
        for part in _strings(expr):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                key = " ".join(part.value.split()) if where == "label" else part.value
                if not key:
                    continue  # no message (a hint helper's "": no hint)
                if where == "call" and _is_code(key):
                    continue  # the code it calls, shown as it is
                keys.setdefault(key, line)
            elif isinstance(part, ast.JoinedStr) or (
                isinstance(part, ast.BinOp) and isinstance(part.op, (ast.Add, ast.Mod))
            ):
                unkeyed.append(f"line {line}: {where}")
    for node in ast.walk(tree):  # Message("template", …) wherever it is built
        if isinstance(node, ast.Call) and _name(node) == "Message" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and not _is_code(first.value):
                keys.setdefault(first.value, node.lineno)
    return keys, unkeyed


def _catalogue(edition: str, name: str) -> dict[str, str]:
    path = LOCALE / edition / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def test_the_graders_words_have_every_key_in_every_edition():
    en, zh = _catalogue("en", "grader"), _catalogue("zh", "grader")
    assert en and set(en) == set(zh), sorted(set(en) ^ set(zh))
    for key in en:
        assert _fields(en[key]) == _fields(zh[key]), f"{key!r}: the fields differ between the editions"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_message_of_a_chapter_is_a_key(chapter):
    """No f-string or sum of strings where a message goes: a message with values is a Message with fields."""
    _, unkeyed = _keys(chapter)
    assert not unkeyed, f"{chapter}: messages built as text (write Message('template {{field}}', field=…)): {unkeyed}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_message_of_a_chapter_has_its_chinese(chapter):
    keys, _ = _keys(chapter)
    zh = _catalogue("zh", chapter)
    missing = {key: line for key, line in keys.items() if key not in zh}
    assert not missing, f"{chapter}: messages without their Chinese in autograder/locale/zh/{chapter}.json: {missing}"
    for key in keys:
        assert _fields(zh[key]) == _fields(key), f"{chapter}: {key!r} and its Chinese have different fields"
        assert CJK.search(zh[key]) or _is_code(key) or zh[key] == key, f"{chapter}: {key!r} is not in Chinese"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_entry_of_a_chapters_catalogue_is_stale(chapter):
    """Every entry is still a message of the chapter: its English is written in the check module."""
    keys, _ = _keys(chapter)
    source = (ROOT / "autograder" / f"{chapter}.py").read_text(encoding="utf-8")
    flat = " ".join(source.split())
    stale = [key for key in _catalogue("zh", chapter) if key not in keys and key not in flat]
    assert not stale, f"{chapter}: entries whose English the checks no longer write: {stale}"


def test_a_key_has_one_chinese_across_the_catalogues():
    """The catalogues of an edition are read as one (``wording.catalogue``): a key translated twice is refused."""
    seen: dict[str, tuple[str, str]] = {}
    for path in sorted((LOCALE / "zh").glob("*.json")):
        for key, value in json.loads(path.read_text(encoding="utf-8")).items():
            if key in seen:
                assert seen[key][1] == value, f"{key!r}: {seen[key][0]} and {path.name} translate it differently"
            seen[key] = (path.name, value)


def test_a_message_renders_in_each_edition_and_crosses_processes():
    message = wording.Message("wrong shape", what=wording.Message("the output"), shape=(2, 3), got=(3,))
    assert str(message) == "output should have shape (2, 3), yours has shape (3,)."
    assert message.render("zh") == "输出 的形状应为 (2, 3)，你的是 (3,)。"
    again = wording.Message.from_json(json.loads(json.dumps(message.to_json())))
    assert again.render("zh") == message.render("zh") and str(again) == str(message)
    with pytest.raises(ValueError, match="no edition"):
        wording.catalogue("fr")
