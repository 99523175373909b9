"""The grader's words as data: a message is a key and its fields (:class:`Message`), rendered in the reader's
edition ("en" or "zh") where it is shown; the words are in the catalogues ``autograder/locale/<edition>/*.json``
(:func:`catalogue`; how to edit them: docs/translating.md). A message crosses processes and files as data
(:meth:`Message.to_json`), never as English to be read back. Student side: no import of the grading machinery.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import string
import textwrap
from collections.abc import Iterable
from importlib import resources
from typing import Any

EN, ZH = "en", "zh"
EDITIONS = (EN, ZH)

# Keys of layout, not words (no catalogue holds them): several messages one a line, a message indented, the name of
# the value a label names (:func:`name_part`), a message in every edition (:func:`both`).
LINES, INDENTED, NAME_PART, BOTH = "\0lines", "\0indented", "\0name part", "\0both"


@functools.cache
def catalogue(edition: str) -> dict[str, str]:
    """Every message of ``edition`` ("en" or "zh"): key -> template, from ``autograder/locale/<edition>/*.json``
    (``grader.json``, the grader's short keys; ``chNN_<name>.json``, a chapter's, keyed by its English)."""
    if edition not in EDITIONS:
        raise ValueError(f"no edition {edition!r}: the editions are {EDITIONS}")
    found: dict[str, str] = {}
    for entry in sorted(
        resources.files("autograder").joinpath("locale").joinpath(edition).iterdir(), key=lambda e: e.name
    ):
        if entry.name.endswith(".json"):
            found.update(json.loads(entry.read_text(encoding="utf-8")))
    return found


def fields_of(template: str) -> set[str]:
    """The ``{fields}`` a template names."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@dataclasses.dataclass(frozen=True, init=False, eq=False)
class Message:
    """A message of the grader: a key (of the English catalogue, ``"wrong shape"``, or else a chapter's English
    template itself, ``"{what}: weights"``) and its fields, rendered in an edition only where it is shown
    (:meth:`render`; ``str(message)`` is the English). A field that is a :class:`Message` (or a list of them,
    joined) is rendered in the same edition, any other value as ``str(value)``; a key with no fields is shown as it
    is. Raises ``KeyError`` when rendered with a field the template names but the message lacks."""

    key: str
    fields: tuple[tuple[str, object], ...]

    def __init__(self, key: str, /, **fields: object) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "fields", tuple(fields.items()))

    def render(self, edition: str = EN) -> str:
        """This message in ``edition``: its template there (the English where the catalogue has none), its
        fields rendered in turn."""
        if self.key == BOTH:  # every edition's, whatever the reader's
            return "\n".join(dict.fromkeys(_render(self.get("text"), each) for each in EDITIONS))
        done = {name: _render(value, edition) for name, value in self.fields}
        if self.key == LINES:
            return "\n".join(done[f"l{i}"] for i in range(len(done)))
        if self.key == INDENTED:
            return textwrap.indent(done["text"], done["by"])
        if self.key == NAME_PART:
            return done["text"].split(":")[-1].strip() if edition == EN else done["text"]
        template = catalogue(edition).get(self.key) or catalogue(EN).get(self.key, self.key)
        return template.format(**done) if self.fields else template

    def __str__(self) -> str:
        return self.render(EN)

    def __eq__(self, other: object) -> bool:
        """The same key and fields, as data (a message read back from JSON equals the one written)."""
        return isinstance(other, Message) and self.to_json() == other.to_json()

    def __hash__(self) -> int:  # no json.dumps: a notebook can patch its encoder, and labels are hashed in checks
        return hash(_frozen(self.to_json()))

    def to_json(self) -> dict:
        """A plain dict (``{"key": …, "fields": {…}}``) that :meth:`from_json` reads back, for crossing processes."""
        return {"key": self.key, "fields": {name: _to_json(value) for name, value in self.fields}}

    @classmethod
    def from_json(cls, data: dict) -> Message:
        return cls(data["key"], **{name: _from_json(value) for name, value in data["fields"].items()})

    def get(self, name: str, default: object = None) -> object:
        """The value of field ``name`` (``default`` when the message has none)."""
        return dict(self.fields).get(name, default)

    def lines(self) -> list[Message]:
        """The lines this message is made of (:func:`lines`), else itself alone."""
        if self.key == LINES:
            return [value for _, value in self.fields if isinstance(value, Message)]
        return [self]


def _frozen(data: object) -> object:
    """``data`` (plain JSON data) as nested tuples, dicts by their sorted items: hashable, equal where it is."""
    if isinstance(data, dict):
        return tuple(sorted((key, _frozen(value)) for key, value in data.items()))
    if isinstance(data, list):
        return tuple(_frozen(value) for value in data)
    return data


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


Said = str | Message  # what the grader says: a message, or a plain string (Python's, a file's, a name)


def as_message(text: Said) -> Message:
    """``text`` as a message: a message as it is, a plain string as the key of one (a chapter's English, its
    translation looked up in the catalogues)."""
    return text if isinstance(text, Message) else Message(text)


def verbatim(text: object) -> Message:
    """A message that shows ``text`` as it is in every edition (a value, a tensor's repr, Python's error text)."""
    return Message("{text}", text=str(text))


def name_part(text: Said) -> Message:
    """The value a label names, for an index into it: in English the part of ``text`` after its last colon ("f(x):
    weights" names "weights"), in Chinese the whole (its labels read "f(x) 的 注意力权重")."""
    return Message(NAME_PART, text=as_message(text))


def lines(*parts: Said | None) -> Message:
    """One message of several, one a line (``None`` parts left out; each part's own lines kept)."""
    flat = [line for part in parts if part is not None for line in as_message(part).lines()]
    return Message(LINES, **{f"l{i}": line for i, line in enumerate(flat)})


def indented(text: Said, by: str = "    ") -> Message:
    """``text`` with every line of it, as rendered, indented by ``by``."""
    return Message(INDENTED, text=as_message(text), by=by)


def both(text: Said) -> Message:
    """``text`` in every edition, one after the other (English, then Chinese; once where they are the same), whatever
    the reader's: for a reader whose edition is not known (Gradescope's zero for a submission with no notebook)."""
    return Message(BOTH, text=as_message(text))


def render(text: Said, edition: str = EN) -> str:
    """``text`` in ``edition``: a :class:`Message` rendered, a plain string (already words) as it is."""
    return text.render(edition) if isinstance(text, Message) else text


def to_data(text: Said) -> Any:
    """``text`` for a JSON file or another process: a message as :meth:`Message.to_json`, a string as it is."""
    return text.to_json() if isinstance(text, Message) else text


def from_data(data: Any) -> Said:
    """What :func:`to_data` wrote, read back."""
    if isinstance(data, dict) and "key" in data and "fields" in data:
        return Message.from_json(data)
    return data if isinstance(data, str) else str(data)


def join_messages(parts: Iterable[Said], sep: str = "; ") -> Message:
    """Several messages said as one, joined by ``sep`` (the same in every edition)."""
    items = [as_message(p) if isinstance(p, Message) else verbatim(p) for p in parts]
    return Message(sep.join(f"{{p{i}}}" for i in range(len(items))), **{f"p{i}": m for i, m in enumerate(items)})


def say(key: str, **fields: object) -> Message:
    """The grader's message ``key`` (a key of ``locale/en/grader.json``), with ``fields``."""
    return Message(key, **fields)


def text(key: str, edition: str = EN, **fields: object) -> str:
    """The grader's message ``key`` in ``edition``, with ``fields``, rendered now."""
    return Message(key, **fields).render(edition)
