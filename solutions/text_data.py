"""Real English text that every machine already has, and the small tools chapters 6 and 7 train on it with.

The corpus is the prose of Python's own documentation as shipped with CPython: ``pydoc_data.topics.topics``
maps ~80 help topics ("assert", "class", "for", ...) to their reference text, about half a megabyte of
English. It needs no download, so tests and the book never touch the network.

For Colab there is an opt-in :func:`tiny_shakespeare` (Karpathy's char-rnn corpus), downloaded once and
verified by its sha256; nothing in the tests or the book calls it.

Contents, in the order the book uses them: the corpus (:func:`python_docs`, :func:`python_docs_text`), a
character-level tokenizer (:class:`CharTokenizer`), a train/validation split and random LM batches
(:func:`train_val_split`, :func:`get_lm_batch`), and sentence splitting for BERT (:func:`sentences`).
"""

from __future__ import annotations

import hashlib
import pathlib
import re

import torch

__all__ = [
    "python_docs",
    "python_docs_text",
    "CharTokenizer",
    "train_val_split",
    "get_lm_batch",
    "sentences",
    "tiny_shakespeare",
    "TINY_SHAKESPEARE_SHA256",
]


# --------------------------------------------------------------------------------------------------
# The corpus (语料)
# --------------------------------------------------------------------------------------------------


_ASCII = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2026": "...",
        "\u00a0": " ",
    }
)


def python_docs() -> dict[str, str]:
    """The documentation topics of this Python, ``{topic: text}``, sorted by topic name.

    The text is kept as written except that tabs become spaces, runs of blank lines collapse to one, and
    typographic quotes and dashes become their ASCII forms; any other character outside printable ASCII
    becomes ``?`` (a small closed alphabet keeps the character vocabulary stable across Python versions).
    """
    from pydoc_data.topics import topics

    out = {}
    for name in sorted(topics):
        text = topics[name].replace("\t", "    ").translate(_ASCII)
        text = "".join(c if (" " <= c <= "~" or c == "\n") else "?" for c in text)
        text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
        out[name] = text
    return out


def python_docs_text() -> str:
    """All topics joined into one string, separated by a blank line (~0.46 MB on CPython 3.12)."""
    return "\n".join(python_docs().values())


# --------------------------------------------------------------------------------------------------
# Character-level tokenizer (字符级分词器)
# --------------------------------------------------------------------------------------------------


class CharTokenizer:
    """Maps each character of a fixed alphabet to an integer id and back.

    Args:
        alphabet: the characters, in id order. :meth:`from_text` builds it as the sorted set of a text's
            characters. For the Python docs corpus that is the printable ASCII characters present plus
            ``\\n`` (about 96).

    :meth:`encode` raises ``ValueError`` naming every character of its input that the alphabet lacks (a prompt
    typed for one corpus may hold characters another corpus never uses).
    """

    def __init__(self, alphabet: str):
        if len(set(alphabet)) != len(alphabet):
            raise ValueError("alphabet has repeated characters")
        self.alphabet = alphabet
        self.stoi = {c: i for i, c in enumerate(alphabet)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``'s characters. Raises ``ValueError`` naming (sorted, repr'd) those not in the
        alphabet."""
        try:
            return [self.stoi[c] for c in text]
        except KeyError:
            unknown = sorted(set(text) - set(self.stoi))
            raise ValueError(
                f"{text[:40]!r}{'...' if len(text) > 40 else ''} has characters outside the tokenizer's alphabet "
                f"of {self.vocab_size}: {', '.join(map(repr, unknown))}"
            ) from None

    def decode(self, ids) -> str:
        return "".join(self.alphabet[int(i)] for i in ids)


# --------------------------------------------------------------------------------------------------
# Splits and batches
# --------------------------------------------------------------------------------------------------


def train_val_split(data: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Split a 1-D token stream into a leading training part and a trailing validation part.

    A contiguous split (not a random one) keeps validation text unseen: with random windows, neighbouring
    windows would share almost all their characters.
    """
    if data.ndim != 1:
        raise ValueError(f"data must be a 1-D token stream, got shape {tuple(data.shape)}")
    n = int(len(data) * (1 - val_fraction))
    return data[:n], data[n:]


def get_lm_batch(
    data: torch.Tensor,
    context_length: int,
    batch_size: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of a token stream for next-token prediction (因果语言模型).

    Returns ``(x, y)``, both ``(batch_size, context_length)`` int64 on ``device``; ``y`` is ``x`` shifted one
    token to the left, so ``y[b, t]`` is the token that follows ``x[b, :t+1]``.
    """
    if len(data) <= context_length:
        raise ValueError(f"the stream ({len(data)} tokens) must be longer than context_length={context_length}")
    ix = torch.randint(len(data) - context_length, (batch_size,), generator=generator)
    offsets = torch.arange(context_length)
    x = data[ix[:, None] + offsets]  # (B, T)
    y = data[ix[:, None] + offsets + 1]  # (B, T)
    return x.to(device), y.to(device)


def sentences(text: str, min_words: int = 4) -> list[str]:
    """Split prose into sentences: paragraphs are re-flowed, code-like lines (grammar with ``::=``, prompts,
    indented lines that are not mostly letters) are dropped, then the text is cut after ``.``, ``?`` or ``!`` followed by a space and a capital.
    Sentences shorter than ``min_words`` words are dropped."""

    def is_prose(line: str) -> bool:
        s = line.strip()
        if not s or "::=" in s or set(s) <= set("*=-^~") or s.startswith((">>>", "...")):
            return False
        if not line.startswith("   "):
            return True  # unindented text is prose; indented text only if it reads like words
        return len(s.split()) >= 4 and sum(c.isalpha() or c == " " for c in s) / len(s) > 0.85

    prose_lines = []
    for line in text.splitlines():
        if not is_prose(line):
            prose_lines.append("\n")  # a break: code and underlines end a paragraph
        else:
            prose_lines.append(line.strip())
    flowed = re.sub(r"\s+", " ", " ".join(prose_lines).replace(" \n ", "\n").replace("\n", " \x00 "))
    out = []
    for chunk in flowed.split("\x00"):
        for s in re.split(r"(?<=[.?!])\s+(?=[A-Z])", chunk.strip()):
            s = s.strip()
            if len(s.split()) >= min_words:
                out.append(s)
    return out


# --------------------------------------------------------------------------------------------------
# Opt-in: tiny Shakespeare (Colab only; never used by the tests or the book)
# --------------------------------------------------------------------------------------------------

TINY_SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def tiny_shakespeare(cache_dir: str | pathlib.Path = "~/.cache/attention-course") -> str:
    """Download tiny Shakespeare (1.1 MB) once into ``cache_dir`` and return it; verify its sha256.

    Raises:
        RuntimeError: if the downloaded (or cached) bytes do not have the expected sha256.
    """
    import urllib.request

    path = pathlib.Path(cache_dir).expanduser() / "tinyshakespeare.txt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(TINY_SHAKESPEARE_URL, timeout=60) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != TINY_SHAKESPEARE_SHA256:
            raise RuntimeError("tiny Shakespeare download has an unexpected sha256; not saved")
        path.write_bytes(data)
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != TINY_SHAKESPEARE_SHA256:
        raise RuntimeError(f"{path} has an unexpected sha256; delete it and download again")
    return data.decode("utf-8")
