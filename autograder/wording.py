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

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from importlib import resources

EN, ZH = "en", "zh"
EDITIONS = (EN, ZH)


@functools.cache
def catalogue(edition: str) -> dict[str, str]:
    """Every message of ``edition`` ("en" or "zh"): key -> template, read from ``autograder/locale/<edition>/*.json``
    (``grader.json``, the grader's own; ``chNN_<name>.json``, a chapter's). A translator edits these files, not
    Python. The English catalogue holds the grader's short keys only: a chapter's message is keyed by its English
    template (gettext's msgid), so that the check that raises it reads as what the student sees."""
    if edition not in EDITIONS:
        raise ValueError(f"no edition {edition!r}: the editions are {EDITIONS}")
    found: dict[str, str] = {}
    for entry in sorted(
        resources.files("autograder").joinpath("locale").joinpath(edition).iterdir(), key=lambda e: e.name
    ):
        if entry.name.endswith(".json"):
            found.update(json.loads(entry.read_text(encoding="utf-8")))
    return found


@dataclasses.dataclass(frozen=True, init=False)
class Message:
    """A message of the grader: a key and its fields, rendered in an edition only where it is shown
    (:meth:`render`; ``str(message)`` is the English).

    ``key``: a key of the English catalogue (the grader's own words, ``"wrong shape"``), or else the English
    template itself (a chapter's words, ``"{what}: weights"``). ``fields``: values put in the template's ``{braces}``
    — a field that is itself a :class:`Message` (or a list or tuple of them, joined) is rendered in the same edition;
    any other value (a number, a shape, a name, Python's own error text) is shown as ``str(value)``.

    Raises ``KeyError`` when rendered with a field the template names but the message lacks."""

    key: str
    fields: tuple[tuple[str, object], ...]

    def __init__(self, key: str, /, **fields: object) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "fields", tuple(fields.items()))

    def render(self, edition: str = EN) -> str:
        """This message in ``edition``: its template there (the English where the catalogue has none), its
        fields rendered in turn."""
        template = catalogue(edition).get(self.key) or catalogue(EN).get(self.key, self.key)
        return template.format(**{name: _render(value, edition) for name, value in self.fields})

    def __str__(self) -> str:
        return self.render(EN)

    def to_json(self) -> dict:
        """A plain dict (``{"key": …, "fields": {…}}``) that :meth:`from_json` reads back, for crossing processes."""
        return {"key": self.key, "fields": {name: _to_json(value) for name, value in self.fields}}

    @classmethod
    def from_json(cls, data: dict) -> Message:
        return cls(data["key"], **{name: _from_json(value) for name, value in data["fields"].items()})


def _render(value: object, edition: str) -> str:
    if isinstance(value, Message):
        return value.render(edition)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Message) for v in value):
        return ("、" if edition == ZH else ", ").join(v.render(edition) for v in value)
    return str(value)


def _to_json(value: object) -> object:
    if isinstance(value, Message):
        return {"message": value.to_json()}
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Message) for v in value):
        return {"messages": [v.to_json() for v in value]}
    return str(value)


def _from_json(value: object) -> object:
    if isinstance(value, dict) and "message" in value:
        return Message.from_json(value["message"])
    if isinstance(value, dict) and "messages" in value:
        return [Message.from_json(v) for v in value["messages"]]
    return value


def render(text: str | Message, edition: str = EN) -> str:
    """``text`` in ``edition``: a :class:`Message` rendered, a plain string (already words) as it is."""
    return text.render(edition) if isinstance(text, Message) else text


# key -> (English, Chinese), from the catalogues (what to_chinese still reads, until it goes).
TEXT: dict[str, tuple[str, str]] = {key: (en, catalogue(ZH)[key]) for key, en in catalogue(EN).items()}

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
    """The grader's English text ``key``, with ``fields``."""
    return Message(key, **fields).render(EN)


def text(key: str, edition: str = EN, **fields: object) -> str:
    """Text ``key`` in ``edition`` ("en" or "zh"), with ``fields``."""
    return Message(key, **fields).render(edition)


def phrases(chapter: str) -> dict[str, str]:
    """The chapter's own words in Chinese (its catalogue ``autograder/locale/zh/<chapter>.json``; empty for a name
    that is not a chapter's)."""
    if not chapter.isidentifier():
        return {}
    entry = resources.files("autograder").joinpath("locale").joinpath(ZH).joinpath(f"{chapter}.json")
    return json.loads(entry.read_text(encoding="utf-8")) if entry.is_file() else {}


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
