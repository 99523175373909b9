"""Chapter 7 — BERT: an encoder-only Transformer pretrained by masked language modelling (掩码语言模型).

Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding":

* the input is the sum of token, position and segment (token type, 片段嵌入) embeddings, then LayerNorm
  (section 3, figure 2),
* a stack of *post-LN* Transformer encoder layers with GELU and LayerNorm eps 1e-12 — chapter 5's
  ``EncoderLayer``, imported, with ``norm_first=False`` — that attend in both directions (双向),
* a masked-LM head: dense + GELU + LayerNorm, then a decoder tied to the token embeddings plus a bias,
* a pooler: dense + tanh on the ``[CLS]`` vector, the sentence representation that fine-tuning (微调) uses,
* the MLM corruption of section 3.1 / appendix A.1: 15% of the (non-special) tokens are selected; of those
  80% become ``[MASK]``, 10% a random token, 10% stay; the loss is taken on the selected positions only.

Weights can be copied from Hugging Face's ``BertForMaskedLM`` / ``BertModel``
(:func:`solutions.interop.load_hf_bert`); the tests check the logits agree. :func:`train_wordpiece` trains a
WordPiece vocabulary locally with the ``tokenizers`` library (imported only there; its trainer merges by
frequency, see the function).

ALBERT (Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language Representations") is
built on the same pieces: a factorised embedding (因式分解嵌入参数化, section 3.1: ``V x E`` then ``E x d_model``),
one encoder layer shared by every depth (跨层参数共享, cross-layer parameter sharing), and sentence-order
prediction (句子顺序预测, SOP) instead of next-sentence prediction; weights from Hugging Face's ``AlbertModel`` /
``AlbertForPreTraining`` via :func:`solutions.interop.load_hf_albert`.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch05_transformer import EncoderLayer

__all__ = [
    "BertConfig",
    "SPECIAL_TOKENS",
    "BertEmbeddings",
    "Bert",
    "MLMHead",
    "BertForMaskedLM",
    "BertClassifier",
    "mask_tokens",
    "mlm_loss",
    "train_wordpiece",
    "AlbertConfig",
    "AlbertEmbeddings",
    "Albert",
    "AlbertMLMHead",
    "AlbertForPreTraining",
    "sentence_order_pairs",
]

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4 in the vocabularies trained here


@dataclasses.dataclass
class BertConfig:
    """Sizes of a BERT (BERT-base: 30522, 512, 2, 12 layers, 12 heads, 768, 3072)."""

    vocab_size: int = 2000
    context_length: int = 64
    type_vocab_size: int = 2
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    d_ff: int = 512
    dropout: float = 0.0
    layer_norm_eps: float = 1e-12
    pad_id: int = 0


# --------------------------------------------------------------------------------------------------
# Embeddings: token + position + segment (词嵌入 + 位置嵌入 + 片段嵌入)
# --------------------------------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    r""":math:`E = \mathrm{LayerNorm}(E_\text{token}[x_t] + E_\text{position}[t] + E_\text{segment}[s_t])`
    (Devlin et al. 2019, figure 2), then dropout.

    Shapes: ``forward(input_ids (B, T) int64, token_type_ids (B, T) int64 | None) -> (B, T, d_model)``;
    ``token_type_ids`` default to 0 (sentence A). Positions are ``0 … T-1``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.position_embeddings = nn.Embedding(config.context_length, config.d_model)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.d_model)
        self.LayerNorm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got {tuple(input_ids.shape)}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        ### BEGIN SOLUTION
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        x = (
            self.word_embeddings(input_ids)  # (B, T, d)
            + self.position_embeddings(positions)  # (T, d), broadcast over the batch
            + self.token_type_embeddings(token_type_ids)
        )  # (B, T, d)
        return self.dropout(self.LayerNorm(x))  # (B, T, d)
        ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# The encoder, the heads
# --------------------------------------------------------------------------------------------------


class Bert(nn.Module):
    """Embeddings + ``n_layers`` post-LN encoder layers (chapter 5) + the pooler.

    ``forward(input_ids (B, T), token_type_ids (B, T) | None, attention_mask (B, T) | None) -> (B, T, d)``:
    ``attention_mask`` is 1/True at real tokens and 0/False at padding (Hugging Face's convention too); no
    query may attend to a padding key. :meth:`pool` gives ``tanh(W h_[CLS] + b)``, ``(B, d)``.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(
            EncoderLayer(
                config.d_model,
                config.n_heads,
                config.d_ff,
                config.dropout,
                norm_first=False,
                activation="gelu",
                layer_norm_eps=config.layer_norm_eps,
            )
            for _ in range(config.n_layers)
        )
        self.pooler = nn.Linear(config.d_model, config.d_model)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, d)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d)
        return x

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        """The [CLS] representation: ``tanh(pooler(hidden[:, 0]))``, ``(B, d)`` (Devlin et al. 2019, 3)."""
        return torch.tanh(self.pooler(hidden[:, 0]))


class MLMHead(nn.Module):
    """Masked-LM head: ``LayerNorm(GELU(dense(h)))`` then ``h E_token^T + b`` — the decoder weight is the token
    embedding matrix (tied), with its own bias. ``(B, T, d) -> (B, T, vocab_size)``."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.LayerNorm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.d_model, config.vocab_size)
        self.decoder.weight = word_embeddings.weight  # tied, as in GPT (chapter 6)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(F.gelu(self.dense(h))))


def _init_bert(module: nn.Module) -> None:
    """BERT's initialisation: N(0, 0.02) weights, zero biases, LayerNorm (1, 0) (Devlin et al.'s code)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()


class BertForMaskedLM(nn.Module):
    """:class:`Bert` + :class:`MLMHead`. ``forward(...) -> logits (B, T, vocab_size)``."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = Bert(config)
        self.mlm = MLMHead(config, self.bert.embeddings.word_embeddings)
        self.apply(_init_bert)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        return self.mlm(self.bert(input_ids, token_type_ids, attention_mask))


class BertClassifier(nn.Module):
    """Sentence classification from the pooled [CLS] vector: ``Linear(dropout(pool(h)))``, ``(B, n_classes)``.

    Build it around a pretrained :class:`Bert` (fine-tuning, 微调) or a fresh one (the from-scratch baseline).
    """

    def __init__(self, bert: Bert, n_classes: int, dropout: float = 0.1):
        super().__init__()
        self.bert = bert
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(bert.config.d_model, n_classes)
        _init_bert(self.classifier)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        hidden = self.bert(input_ids, token_type_ids, attention_mask)
        return self.classifier(self.dropout(self.bert.pool(hidden)))


# --------------------------------------------------------------------------------------------------
# Masked language modelling (掩码语言模型): the corruption and the loss
# --------------------------------------------------------------------------------------------------


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's MLM corruption (Devlin et al. 2019, section 3.1 and appendix A.1).

    Each token that is not special is *selected* independently with probability ``mlm_probability``. A
    selected token becomes ``[MASK]`` with probability 0.8, a uniformly random token id in
    ``[0, vocab_size)`` with probability 0.1, and stays unchanged with probability 0.1. Special tokens
    (``special_ids``: ``[CLS]``, ``[SEP]``, ``[PAD]`` …) are never selected.

    Args:
        input_ids: ``(B, T)`` int64 token ids (any shape works).
        mask_id: id of ``[MASK]``. vocab_size: for the random replacements.
        special_ids: iterable of ids that may never be selected.
        generator: source of randomness, on the device of ``input_ids``.

    Returns:
        ``(inputs, labels)``, both like ``input_ids``: the corrupted inputs, and labels equal to the original
        id at selected positions and ``-100`` elsewhere (``F.cross_entropy``'s ``ignore_index``: the loss is
        taken only where a token was selected). ``input_ids`` itself is not modified.
    """
    special = torch.isin(input_ids, torch.as_tensor(list(special_ids), device=input_ids.device))

    ### BEGIN SOLUTION
    def coin(p):  # independent Bernoulli(p) draws, one per token
        return torch.rand(input_ids.shape, generator=generator, device=input_ids.device) < p

    selected = coin(mlm_probability) & ~special  # 15% of the ordinary tokens
    labels = input_ids.masked_fill(~selected, -100)  # loss only where selected
    to_mask = selected & coin(0.8)  # 80% of the selected -> [MASK]
    to_random = selected & ~to_mask & coin(0.5)  # half of the other 20% -> a random token
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=input_ids.device)
    inputs = input_ids.masked_fill(to_mask, mask_id)
    inputs = torch.where(to_random, random_ids, inputs)  # the remaining 10% keep their token
    return inputs, labels
    ### END SOLUTION


def mlm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the selected positions (labels != -100). ``(B, T, V), (B, T) -> ()``."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)


# --------------------------------------------------------------------------------------------------
# WordPiece, trained here (needs the `tokenizers` library)
# --------------------------------------------------------------------------------------------------


def train_wordpiece(texts, vocab_size: int = 2000):
    """Train an uncased WordPiece tokenizer (BERT's normaliser and pre-tokeniser) on ``texts``.

    The vocabulary is chosen by ``tokenizers``' ``WordPieceTrainer``, which runs byte-pair encoding (merge the
    most *frequent* adjacent pair; Sennrich et al. 2016) and keeps the vocabulary with the ``##`` prefix — not the
    likelihood-based merges of Schuster & Nakajima 2012 / Wu et al. 2016. Encoding is WordPiece's greedy
    longest-match-first.

    Returns a ``tokenizers.Tokenizer`` whose ids 0–4 are :data:`SPECIAL_TOKENS` and which encodes a pair as
    ``[CLS] A [SEP] B [SEP]`` with type ids 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]``.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return tok


# --------------------------------------------------------------------------------------------------
# ALBERT (Lan et al. 2020): factorised embeddings, one shared layer, sentence-order prediction
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class AlbertConfig(BertConfig):
    """A :class:`BertConfig` plus the embedding width ``embedding_size`` (``E``, Lan et al. 2020, section 3.1).

    ALBERT-base: vocab_size 30000, E 128, d_model 768, 12 layers (one set of weights), 12 heads, d_ff 3072.
    """

    embedding_size: int = 32


class AlbertEmbeddings(nn.Module):
    r"""Factorised embedding parameterisation (因式分解嵌入参数化; Lan et al. 2020, section 3.1).

    Token, position and segment embeddings live in a small space of width ``E = embedding_size``; their sum is
    normalised there and then projected to ``d_model``:

    :math:`E = \mathrm{LayerNorm}(E_\text{token}[x_t] + E_\text{position}[t] + E_\text{segment}[s_t]) \, W + b`,
    with ``E_token`` of shape ``(V, E)`` and ``W`` of shape ``(E, d_model)`` (``projection``, an ``nn.Linear``),
    so the vocabulary costs ``V E + E d_model`` parameters instead of BERT's ``V d_model``. Dropout comes after
    the LayerNorm, before the projection (as Hugging Face's ``AlbertModel``).

    Shapes: ``forward(input_ids (B, T) int64, token_type_ids (B, T) int64 | None) -> (B, T, d_model)``;
    ``token_type_ids`` default to 0. Raises ``ValueError`` if ``input_ids`` is not 2-D.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        E = config.embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, E, padding_idx=config.pad_id)  # (V, E)
        self.position_embeddings = nn.Embedding(config.context_length, E)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.projection = nn.Linear(E, config.d_model)  # (E -> d_model)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be (B, T), got {tuple(input_ids.shape)}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        ### BEGIN SOLUTION
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)  # (T,)
        x = (
            self.word_embeddings(input_ids)  # (B, T, E)
            + self.position_embeddings(positions)  # (T, E), broadcast over the batch
            + self.token_type_embeddings(token_type_ids)
        )  # (B, T, E)
        x = self.dropout(self.LayerNorm(x))  # normalised in the small space
        return self.projection(x)  # (B, T, d_model)
        ### END SOLUTION


class Albert(nn.Module):
    """ALBERT's encoder: :class:`AlbertEmbeddings`, then **one** post-LN :class:`EncoderLayer` (chapter 5) applied
    ``n_layers`` times (跨层参数共享, cross-layer parameter sharing; Lan et al. 2020, section 3.1), then BERT's
    pooler (:meth:`Bert.pool`).

    ALBERT uses the tanh approximation of GELU (``gelu_tanh``; Hugging Face's ``gelu_new``). Shapes and masks as
    :class:`Bert`: ``forward(input_ids (B, T), token_type_ids | None, attention_mask (B, T) | None)
    -> (B, T, d_model)``, ``attention_mask`` True/1 at real tokens.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.layer = EncoderLayer(
            config.d_model,
            config.n_heads,
            config.d_ff,
            config.dropout,
            norm_first=False,
            activation="gelu_tanh",
            layer_norm_eps=config.layer_norm_eps,
        )
        self.pooler = nn.Linear(config.d_model, config.d_model)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, d_model)
        mask = None if attention_mask is None else attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
        for _ in range(self.config.n_layers):
            x = self.layer(x, mask)  # the same weights at every depth
        return x

    def pool(self, hidden: torch.Tensor) -> torch.Tensor:
        """The [CLS] representation, as :meth:`Bert.pool`: ``tanh(pooler(hidden[:, 0]))``, ``(B, d_model)``."""
        return torch.tanh(self.pooler(hidden[:, 0]))


class AlbertMLMHead(nn.Module):
    """ALBERT's masked-LM head: ``LayerNorm(GELU(dense(h)))`` down to width ``E``, then scores with the (tied)
    ``(V, E)`` token embeddings plus a bias. ``(B, T, d_model) -> (B, T, vocab_size)``."""

    def __init__(self, config: AlbertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)
        self.decoder.weight = word_embeddings.weight  # tied

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(F.gelu(self.dense(h), approximate="tanh")))


class AlbertForPreTraining(nn.Module):
    """:class:`Albert` with its two pretraining heads: :class:`AlbertMLMHead` and the sentence-order prediction
    classifier (句子顺序预测, SOP; Lan et al. 2020, section 3.1) on the pooled ``[CLS]`` vector.

    ``forward(...) -> (mlm_logits (B, T, vocab_size), sop_logits (B, 2))``; SOP class 0 = the two segments are in
    their original order, 1 = swapped (:func:`sentence_order_pairs`).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.albert = Albert(config)
        self.mlm = AlbertMLMHead(config, self.albert.embeddings.word_embeddings)
        self.sop = nn.Linear(config.d_model, 2)
        self.apply(_init_bert)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.albert(input_ids, token_type_ids, attention_mask)  # (B, T, d_model)
        return self.mlm(h), self.sop(self.albert.pool(h))


def sentence_order_pairs(sentences_in_order, generator: torch.Generator | None = None):
    """SOP examples (Lan et al. 2020, section 3.1) from one document's sentences in order: each consecutive
    pair ``(s_i, s_{i+1})`` is kept (label 0) or swapped to ``(s_{i+1}, s_i)`` (label 1) with probability 1/2.

    Unlike NSP's negatives (B from another document), both orders share a topic, so the task cannot be solved by
    topic alone: it is about coherence. Returns a list of ``((first, second), label)``.
    """
    s = list(sentences_in_order)
    swap = torch.rand(max(len(s) - 1, 0), generator=generator) < 0.5
    return [((s[i + 1], s[i]), 1) if swap[i] else ((s[i], s[i + 1]), 0) for i in range(len(s) - 1)]
