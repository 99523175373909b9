"""Chapter 7 — BERT: an encoder-only Transformer pretrained by masked language modelling (掩码语言模型).

Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding":

* the input is the sum of token, position and segment (token type, 句子类型) embeddings, then LayerNorm
  (section 3, figure 2),
* a stack of *post-LN* Transformer encoder layers with GELU and LayerNorm eps 1e-12 — chapter 5's
  ``EncoderLayer``, imported, with ``norm_first=False`` — that attend in both directions (双向),
* a masked-LM head: dense + GELU + LayerNorm, then a decoder tied to the token embeddings plus a bias,
* a pooler: dense + tanh on the ``[CLS]`` vector, the sentence representation that fine-tuning (微调) uses,
* the MLM corruption of section 3.1 / appendix A.1: 15% of the (non-special) tokens are selected; of those
  80% become ``[MASK]``, 10% a random token, 10% stay; the loss is taken on the selected positions only.

Weights can be copied from Hugging Face's ``BertForMaskedLM`` / ``BertModel``
(:func:`solutions.interop.load_hf_bert`); the tests check the logits agree. :func:`train_wordpiece` trains a WordPiece vocabulary (Wu et al. 2016) locally with
the ``tokenizers`` library (imported only there).
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
# Embeddings: token + position + segment (词嵌入 + 位置嵌入 + 句子类型嵌入)
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
