"""The grader's words are data (autograder/wording.py): messages are keys and fields, their words in catalogues
(autograder/locale/<edition>/*.json) that a translator edits; every key of the grader's table has every edition,
with the same fields; a message crosses processes as data and renders the same on the other side."""

from __future__ import annotations

import ast
import json
import pathlib

import pytest

from autograder import wording
from autograder.wording import EN, ZH, Message

LOCALE = pathlib.Path(wording.__file__).parent / "locale"


def _table(edition: str) -> dict[str, str]:
    return json.loads((LOCALE / edition / "grader.json").read_text(encoding="utf-8"))


def test_every_key_of_the_graders_table_has_every_edition_with_the_same_fields():
    en, zh = _table(EN), _table(ZH)
    assert sorted(set(en) - set(zh)) == [], "keys without their Chinese"
    assert sorted(set(zh) - set(en)) == [], "Chinese of keys the grader no longer has"
    for key in en:
        assert wording.fields_of(en[key]) == wording.fields_of(zh[key]), key
        assert zh[key] != en[key] or not _words(en[key]), f"{key}: the Chinese is the English"


def test_every_key_the_grader_says_is_in_its_table():
    """Each ``say("key", …)`` / ``Message("key", …)`` with a literal key in the grader's own modules (not the
    chapters': their keys are their English, tests/test_catalogues.py) is a key of locale/en/grader.json, or a
    template of layout only (fields, punctuation and code, no words to translate)."""
    root = pathlib.Path(wording.__file__).parent
    table, found = _table(EN), {}
    for path in sorted(root.rglob("*.py")):
        if path.name.startswith("ch") and path.name[2:4].isdigit():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in ("say", "Message", "your_line", "text") and isinstance(node.args[0].value, str):
                found[node.args[0].value] = path.relative_to(root.parent)
    layout = {k for k in found if k not in table}
    code = {"eval", "train"}  # the course's calls named in a "what" ("{what}: eval()")
    assert {k: str(found[k]) for k in layout if set(_words(k)) - code} == {}


def _words(template: str) -> list[str]:
    """The words of a template outside its fields (not identifiers: ``load_state_dict``)."""
    import re

    found = re.findall(r"[A-Za-z_]+", re.sub(r"\{\w+\}", " ", template))
    return [w for w in found if "_" not in w and len(w) > 1]


def test_a_message_renders_in_each_edition_its_fields_in_the_same_edition():
    what = Message("the output")
    message = wording.lines(
        wording.say("wrong shape", what=what, shape=(2, 3), got=(3, 2)),
        wording.indented(wording.say("hint", hint=Message("the weights")), "  "),
    )
    assert str(message) == "output should have shape (2, 3), yours has shape (3, 2).\n  Hint: weights"
    assert message.render(ZH) == "输出 的形状应为 (2, 3)，你的是 (3, 2)。\n  提示：注意力权重"
    assert Message("a chapter's own words {x}").render(ZH) == "a chapter's own words {x}", "no fields: as it is"
    assert wording.render("plain text", ZH) == "plain text"
    assert wording.verbatim("tensor([1, {2}])").render(ZH) == "tensor([1, {2}])"
    with pytest.raises(KeyError):
        Message("wrong shape", what="x").render(EN)


def test_both_renders_a_message_in_every_edition_whatever_the_readers():
    said = wording.both(wording.say("hint", hint=Message("the weights")))
    assert said.render(EN) == said.render(ZH) == str(said) == "Hint: weights\n提示：注意力权重"
    assert wording.both(wording.verbatim("x = 1")).render(ZH) == "x = 1", "the same in both: once"
    assert Message.from_json(json.loads(json.dumps(said.to_json()))) == said


def test_a_message_round_trips_through_json():
    nested = wording.say(
        "changed in place",
        what=Message("{what}: weights", what="f(x)"),
        inputs=[wording.say("argument", i=1), wording.say("input's parameter", owner="the module called", p="W")],
    )
    message = wording.lines(nested, wording.indented(wording.say("expected", value=wording.verbatim("1\n2")), "  "))
    for m in (nested, message, Message("plain"), wording.join_messages([nested, "a string"], "; ")):
        data = json.loads(json.dumps(m.to_json()))
        back = Message.from_json(data)
        assert back.to_json() == m.to_json() and back.render(ZH) == m.render(ZH) and str(back) == str(m)
        assert back == m and hash(back) == hash(m), "the same key and fields, as data"
        assert wording.from_data(json.loads(json.dumps(wording.to_data(m)))) == m
    assert wording.from_data("a string") == "a string" and wording.to_data("a string") == "a string"
