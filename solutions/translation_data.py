"""Parallel data for the translation chapters (ch01 seq2seq, ch02 Bahdanau, ch05 Transformer).

Everything that turns sentence pairs into padded integer tensors lives here, once, so that every
chapter trains on exactly the same data:

* a synthetic but *linguistic* parallel corpus: cardinal numbers written out in English and in
  French by the `num2words` library (e.g. ``"seventy-one"`` -> ``"soixante et onze"``).  French
  number words bring real structure that a model has to learn: vigesimal forms (quatre-vingt-dix),
  the conjunction "et" only in 21, 31, ..., 71, plural agreement (quatre-vingts, deux cents,
  millions) that depends on what follows, and English "and" / "," that have no French counterpart.
  Source lengths run from 1 token ("seven") to about 35 tokens (twelve-digit numbers), which is
  what the length experiment of Bahdanau et al. (2014, Fig. 2) needs.
* a loader for real sentence-pair files in the tab-separated format of the Tatoeba / ManyThings
  files (``source<TAB>target[<TAB>attribution]`` per line),
* tokenisation, vocabularies with the special tokens ``<pad> <bos> <eos> <unk>``, padding and
  batching.

Conventions used by all chapters
--------------------------------
* ``PAD_ID = 0, BOS_ID = 1, EOS_ID = 2, UNK_ID = 3`` in every :class:`Vocab`.
* A source sequence is the token ids of the sentence followed by ``<eos>`` (Sutskever et al. 2014
  also end every input with ``<EOS>``).  A target sequence is ``<bos> y_1 ... y_n <eos>``; the
  chapter code shifts it into decoder inputs and outputs (teacher forcing).
* Batches are ``(B, T)`` int64 tensors padded with ``PAD_ID`` on the right, with an int64 length
  vector ``(B,)`` that counts the non-pad tokens.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


# ----------------------------------------------------------------------------------------------
# Tokenisation and vocabulary
# ----------------------------------------------------------------------------------------------
def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-cased word and punctuation tokens.

    Words are maximal runs of Unicode word characters; every other non-space character (hyphen,
    comma, apostrophe, ...) is a token of its own, so ``"Quatre-vingt-onze"`` becomes
    ``["quatre", "-", "vingt", "-", "onze"]``.  Deliberately simple: the course is about
    attention, not subword tokenisers.

    Args:
        text: a sentence (``str``).
    Returns:
        list of ``str`` tokens (empty for a blank string).
    Raises:
        TypeError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects str, got {type(text).__name__}")
    return _TOKEN_RE.findall(text.lower())


class Vocab:
    """Bidirectional token <-> id map with the four special tokens at ids 0..3.

    ``Vocab.build`` counts tokens and keeps those seen at least ``min_freq`` times, sorted by
    decreasing frequency then alphabetically (so the ids are deterministic).  Unknown tokens map to
    ``UNK_ID``.
    """

    def __init__(self, tokens: Sequence[str]):
        itos = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        if len(set(itos)) != len(itos):
            raise ValueError("Vocab tokens must be unique")
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """Build from tokenised sentences (iterable of token lists); ``min_freq >= 1``."""
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        counts = Counter(t for s in sentences for t in s)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def encode(self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Map tokens to ids (unknown -> ``UNK_ID``), optionally framed by ``<bos>`` / ``<eos>``."""
        ids = [self.stoi.get(t, UNK_ID) for t in tokens]
        if add_bos:
            ids = [BOS_ID] + ids
        if add_eos:
            ids = ids + [EOS_ID]
        return ids

    def decode(self, ids: Iterable[int], strip_special: bool = True) -> list[str]:
        """Map ids back to tokens; stops at the first ``<eos>`` and drops ``<pad>``/``<bos>`` when
        ``strip_special`` is true.  Accepts a list of ints or a 1-D integer tensor."""
        out = []
        for i in ids.tolist() if isinstance(ids, torch.Tensor) else ids:
            i = int(i)
            if strip_special:
                if i == EOS_ID:
                    break
                if i in (PAD_ID, BOS_ID):
                    continue
            out.append(self.itos[i] if 0 <= i < len(self.itos) else UNK)
        return out


# ----------------------------------------------------------------------------------------------
# Corpora
# ----------------------------------------------------------------------------------------------
def number_pair(n: int, src_lang: str = "en", tgt_lang: str = "fr") -> tuple[str, str]:
    """The cardinal ``n`` written out in two languages by ``num2words``, e.g. (``"eighty"``,
    ``"quatre-vingts"``).  Raises ``ValueError`` for negative ``n``."""
    from num2words import num2words  # imported lazily: only the synthetic corpus needs it

    if n < 0:
        raise ValueError(f"number_pair expects n >= 0, got {n}")
    return num2words(n, lang=src_lang), num2words(n, lang=tgt_lang)


def sample_numbers(count: int, seed: int, max_digits: int = 12) -> list[int]:
    """``count`` *distinct* non-negative integers, reproducible from ``seed``.

    The number of digits is drawn uniformly from 1..``max_digits`` and the number uniformly among
    the integers with that many digits, so short and long sentences are equally frequent (a plain
    uniform draw would give almost only twelve-digit numbers).

    Raises:
        ValueError: if more distinct numbers are requested than exist below ``10**max_digits``.
    """
    if count > 10**max_digits:
        raise ValueError(f"cannot draw {count} distinct numbers with at most {max_digits} digits")
    rng = random.Random(seed)
    seen: set[int] = set()
    out: list[int] = []
    while len(out) < count:
        d = rng.randint(1, max_digits)
        lo = 0 if d == 1 else 10 ** (d - 1)
        x = rng.randint(lo, 10**d - 1)
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def make_number_splits(
    n_train: int = 20000,
    n_valid: int = 1000,
    n_test: int = 1500,
    seed: int = 0,
    max_digits: int = 12,
    src_lang: str = "en",
    tgt_lang: str = "fr",
) -> dict[str, list[tuple[str, str]]]:
    """Fixed, disjoint train / valid / test splits of the number-translation corpus.

    The splits are disjoint *by number* (every number appears in at most one split) and depend only
    on the arguments: the same ``seed`` always gives the same sentences in the same order.

    Returns:
        ``{"train": [(src, tgt), ...], "valid": [...], "test": [...]}`` of untokenised strings.
    """
    numbers = sample_numbers(n_train + n_valid + n_test, seed=seed, max_digits=max_digits)
    pairs = [number_pair(x, src_lang, tgt_lang) for x in numbers]
    return {
        "train": pairs[:n_train],
        "valid": pairs[n_train : n_train + n_valid],
        "test": pairs[n_train + n_valid :],
    }


def load_tsv_pairs(path: str | Path, max_pairs: int | None = None, encoding: str = "utf-8") -> list[tuple[str, str]]:
    """Read sentence pairs from a tab-separated file, one ``source<TAB>target`` pair per line.

    This is the format of the Tatoeba-derived files from manythings.org/anki (for example
    ``fra.txt``): extra columns after the second (the attribution) are ignored, blank lines are
    skipped, and a trailing newline / carriage return is removed.

    Args:
        path: file to read.
        max_pairs: keep only the first ``max_pairs`` pairs (``None``: all).
    Returns:
        list of ``(source, target)`` string tuples in file order.
    Raises:
        ValueError: on a non-blank line with fewer than two tab-separated fields, or an empty field
            (the message names the line number).
    """
    pairs: list[tuple[str, str]] = []
    with open(path, encoding=encoding) as f:
        for lineno, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
                raise ValueError(f"{path}:{lineno}: expected 'source<TAB>target', got {line!r}")
            pairs.append((fields[0].strip(), fields[1].strip()))
            if max_pairs is not None and len(pairs) >= max_pairs:
                break
    return pairs


# ----------------------------------------------------------------------------------------------
# Tensors
# ----------------------------------------------------------------------------------------------
@dataclass
class EncodedPair:
    """One pair as id lists: ``src`` = x_1..x_S <eos>; ``tgt`` = <bos> y_1..y_T <eos>."""

    src: list[int]
    tgt: list[int]


@dataclass
class Batch:
    """A padded mini-batch.

    Attributes:
        src: ``(B, S)`` int64 source ids, right-padded with ``PAD_ID``.
        src_lens: ``(B,)`` int64 number of non-pad source tokens (>= 1).
        tgt: ``(B, T)`` int64 target ids ``<bos> y_1 .. y_n <eos>`` right-padded with ``PAD_ID``.
        tgt_lens: ``(B,)`` int64 number of non-pad target tokens (including <bos> and <eos>).
        index: positions of these examples in the encoded list (to look up references).
    """

    src: torch.Tensor
    src_lens: torch.Tensor
    tgt: torch.Tensor
    tgt_lens: torch.Tensor
    index: list[int]

    def to(self, device: torch.device | str) -> Batch:
        """Move the tensors to ``device`` (lengths too; packing moves them back to CPU itself)."""
        return Batch(
            self.src.to(device), self.src_lens.to(device), self.tgt.to(device), self.tgt_lens.to(device), self.index
        )


class TranslationData:
    """Tokenised pairs plus source and target vocabularies built on the training split only.

    Args:
        splits: ``{"train": [(src, tgt), ...], "valid": ..., "test": ...}`` of raw strings (e.g.
            from :func:`make_number_splits` or :func:`load_tsv_pairs`).
        min_freq: vocabulary threshold on the training split.
    """

    def __init__(self, splits: dict[str, list[tuple[str, str]]], min_freq: int = 1):
        if "train" not in splits:
            raise ValueError("splits must contain a 'train' split")
        self.raw = splits
        self.tokens = {k: [(tokenize(s), tokenize(t)) for s, t in v] for k, v in splits.items()}
        self.src_vocab = Vocab.build((s for s, _ in self.tokens["train"]), min_freq)
        self.tgt_vocab = Vocab.build((t for _, t in self.tokens["train"]), min_freq)
        self.encoded = {k: [self.encode_pair(s, t) for s, t in v] for k, v in self.tokens.items()}

    def encode_pair(self, src_tokens: Sequence[str], tgt_tokens: Sequence[str]) -> EncodedPair:
        return EncodedPair(
            self.src_vocab.encode(src_tokens, add_eos=True),
            self.tgt_vocab.encode(tgt_tokens, add_bos=True, add_eos=True),
        )

    def encode_source(self, sentence: str) -> list[int]:
        """Raw source string -> ids ending in ``<eos>`` (what a model's encoder reads)."""
        return self.src_vocab.encode(tokenize(sentence), add_eos=True)

    def batches(
        self, split: str, batch_size: int, shuffle: bool = False, seed: int = 0, drop_last: bool = False
    ) -> Iterator[Batch]:
        """One pass over ``split`` in mini-batches (see :func:`iterate_batches`)."""
        return iterate_batches(self.encoded[split], batch_size, shuffle=shuffle, seed=seed, drop_last=drop_last)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into a ``(B, T_max)`` int64 tensor; also return lengths ``(B,)`` int64.

    Raises:
        ValueError: if ``seqs`` is empty or contains an empty sequence.
    """
    if len(seqs) == 0:
        raise ValueError("pad_sequences needs at least one sequence")
    lens = [len(s) for s in seqs]
    if min(lens) == 0:
        raise ValueError("pad_sequences got an empty sequence")
    out = torch.full((len(seqs), max(lens)), pad_id, dtype=torch.long)  # (B, T_max)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out, torch.as_tensor(lens, dtype=torch.long)


def collate(pairs: Sequence[EncodedPair], index: Sequence[int] | None = None) -> Batch:
    """Pad a list of :class:`EncodedPair` into a :class:`Batch` (tensors on CPU)."""
    src, src_lens = pad_sequences([p.src for p in pairs])  # (B, S), (B,)
    tgt, tgt_lens = pad_sequences([p.tgt for p in pairs])  # (B, T), (B,)
    return Batch(src, src_lens, tgt, tgt_lens, list(index) if index is not None else list(range(len(pairs))))


def iterate_batches(
    pairs: Sequence[EncodedPair], batch_size: int, shuffle: bool = False, seed: int = 0, drop_last: bool = False
) -> Iterator[Batch]:
    """Yield padded batches over ``pairs`` once; ``shuffle`` uses its own ``random.Random(seed)``
    (the global RNGs are untouched, so the order is reproducible).  Raises ``ValueError`` if
    ``batch_size < 1``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = list(range(len(pairs)))
    if shuffle:
        random.Random(seed).shuffle(order)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        if drop_last and len(idx) < batch_size:
            break
        yield collate([pairs[i] for i in idx], idx)


def infinite_batches(pairs: Sequence[EncodedPair], batch_size: int, seed: int = 0) -> Iterator[Batch]:
    """Endless shuffled batches (a new shuffle each epoch, epoch ``e`` seeded with ``seed + e``)."""
    epoch = 0
    while True:
        yield from iterate_batches(pairs, batch_size, shuffle=True, seed=seed + epoch, drop_last=True)
        epoch += 1


def source_length_buckets(lengths: Sequence[int], edges: Sequence[int]) -> list[str]:
    """Label each source length with its bucket ``"lo-hi"`` given increasing upper ``edges``
    (e.g. ``edges=[5, 10, 20]`` -> ``"1-5", "6-10", "11-20", "21+"``)."""
    labels = []
    for n in lengths:
        lo = 1
        for e in edges:
            if n <= e:
                labels.append(f"{lo}-{e}")
                break
            lo = e + 1
        else:
            labels.append(f"{lo}+")
    return labels
