"""Chapter 5 — The Transformer (Vaswani et al. 2017): encoder (编码器), decoder (解码器), the whole model.

This module is the single home of the chapter's code; the book page ``book/ch05_transformer.md`` explains it,
``notebooks/ch05_transformer.ipynb`` is generated from it, and the GPT/BERT chapters import its layers.

Reading order follows the book (and the paper's section 3):

1. :class:`PositionalEncoding` (位置编码, section 3.5) and :class:`TokenEmbedding` (×√d_model, section 3.4);
2. :class:`PositionwiseFeedForward` (section 3.3, eq. 2);
3. :class:`EncoderLayer` and :class:`DecoderLayer` — sublayers wrapped in a residual connection (残差连接) and
   layer normalisation (层归一化): post-LN ``LayerNorm(x + Sublayer(x))`` as in the paper (section 3.1), or
   pre-LN ``x + Sublayer(LayerNorm(x))`` with ``norm_first=True`` (Xiong et al. 2020);
4. :class:`Encoder`, :class:`Decoder`, :class:`Transformer` (with the output projection);
5. training pieces: the learning-rate schedule of eq. 3 and label smoothing (section 5.4);
6. decoding: greedy and beam search.

Weight copying to and from ``torch.nn.Transformer`` (used by the tests and the book) is in :mod:`solutions.interop`.

Masks: bool, **True = may attend** (course convention). Padding masks are ``(B, T)``, True at real tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import causal_mask
from solutions.ch04_multi_head_attention import MultiHeadAttention

__all__ = [
    "PositionalEncoding",
    "TokenEmbedding",
    "PositionwiseFeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "Transformer",
    "noam_lr",
    "label_smoothed_loss",
    "greedy_decode",
    "beam_search",
]


# --------------------------------------------------------------------------------------------------
# Positional encoding (位置编码) and embeddings (词嵌入)
# --------------------------------------------------------------------------------------------------


class PositionalEncoding(nn.Module):
    r"""Add the sinusoidal positional encoding to ``(B, T, d_model)`` embeddings, then dropout.

    :math:`PE_{(pos, 2i)} = \sin(pos / 10000^{2i/d_{model}})`,
    :math:`PE_{(pos, 2i+1)} = \cos(pos / 10000^{2i/d_{model}})`: sine on the even dims, cosine on the odd
    dims, *interleaved* (dims ``2i`` and ``2i+1`` share one frequency).

    Args:
        d_model: embedding width (even or odd).
        context_length: longest sequence supported (the table is precomputed, not a parameter).
        dropout: dropout applied to the sum (the paper's ``P_drop`` on "the sums of the embeddings and the
            positional encodings").

    Attributes:
        pe: ``(context_length, d_model)`` buffer (float32; computed in float64 then rounded).

    Shapes:
        ``forward(x (B, T, d_model)) -> (B, T, d_model)``, same dtype as ``x``.

    Raises:
        ValueError: if ``T > context_length`` or the width differs from ``d_model``.

    Source: Vaswani et al. 2017, section 3.5.
    """

    pe: torch.Tensor  # the (context_length, d_model) table, registered in __init__ as a buffer (not a parameter)

    def __init__(self, d_model: int, context_length: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.context_length = d_model, context_length
        self.dropout = nn.Dropout(dropout)
        ### BEGIN SOLUTION
        pos = torch.arange(context_length, dtype=torch.float64)[:, None]  # (context_length, 1)
        two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),): 0, 2, 4, ...
        angle = pos / 10000 ** (two_i / d_model)  # (context_length, ceil(d_model/2))
        pe = torch.zeros(context_length, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)  # even dims 2i
        pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd dims 2i+1
        ### END SOLUTION
        self.register_buffer("pe", pe.float(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 3 or x.shape[-1] != self.d_model or x.shape[1] > self.context_length:
            raise ValueError(
                f"x must be (B, T <= context_length={self.context_length}, d_model={self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        return self.dropout(x + self.pe[: x.shape[1]].to(x.dtype))  # (B, T, d_model) + (T, d_model)


class TokenEmbedding(nn.Module):
    r"""Token ids ``(B, T)`` → embeddings ``(B, T, d_model)`` multiplied by :math:`\sqrt{d_{model}}`.

    The scale makes the embeddings (initialised with unit variance by ``nn.Embedding``, or tied to the output
    projection) comparable in size to the positional encoding, whose entries lie in [-1, 1].

    Args:
        vocab_size: number of token ids.
        d_model: width.
        padding_idx: id whose embedding is kept at zero (``nn.Embedding``'s option), e.g. ``<pad>``.

    Source: Vaswani et al. 2017, section 3.4 ("we multiply those weights by √d_model").
    """

    def __init__(self, vocab_size: int, d_model: int, padding_idx: int | None = None):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=padding_idx)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.embedding(tokens) * math.sqrt(self.d_model)  # (B, T) -> (B, T, d_model)
        ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# Position-wise feed-forward network (逐位置前馈网络)
# --------------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "gelu": F.gelu,  # exact: x·Φ(x) (BERT)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # the tanh approximation (GPT-2)
}


class PositionwiseFeedForward(nn.Module):
    r""":math:`\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2`, applied to every position separately.

    Args:
        d_model: input/output width.
        d_ff: inner width (the paper: 2048 = 4·512).
        dropout: dropout after the activation (as ``nn.TransformerEncoderLayer``).
        activation: ``"relu"`` (the paper), ``"gelu"`` (exact, BERT) or ``"gelu_tanh"`` (GPT-2).

    Attributes:
        W_1: ``nn.Linear(d_model, d_ff)``; W_2: ``nn.Linear(d_ff, d_model)``.

    Shapes: ``(..., d_model) -> (..., d_model)``.

    Raises:
        ValueError: for an unknown activation.

    Source: Vaswani et al. 2017, eq. 2.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.activation_name = activation
        self.activation = _ACTIVATIONS[activation]
        self.W_1 = nn.Linear(d_model, d_ff)
        self.W_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(self.dropout(self.activation(self.W_1(x))))  # (.., d_model) -> (.., d_ff) -> (.., d_model)


# --------------------------------------------------------------------------------------------------
# Encoder and decoder layers: residual connection (残差连接) + layer normalisation (层归一化)
# --------------------------------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    r"""One encoder layer: self-attention, then the feed-forward network, each in a residual block.

    Post-LN (the paper, ``norm_first=False``): :math:`x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Sublayer}(x))`.
    Pre-LN (``norm_first=True``): :math:`x \leftarrow x + \mathrm{Sublayer}(\mathrm{LayerNorm}(x))` — trains
    without warm-up at depth; a stack of pre-LN layers needs one final LayerNorm (see :class:`Encoder`).

    Args:
        d_model, n_heads, d_ff: sizes (paper: 512, 8, 2048).
        dropout: ``P_drop``, applied to each sublayer's output before the residual sum, and inside attention/FFN.
        norm_first: pre-LN instead of post-LN.
        activation: FFN activation, see :class:`PositionwiseFeedForward`.
        layer_norm_eps: LayerNorm epsilon (PyTorch 1e-5, BERT 1e-12).

    Attributes:
        self_attn (:class:`MultiHeadAttention`), ffn (:class:`PositionwiseFeedForward`), norm1, norm2
        (``nn.LayerNorm``), dropout1, dropout2.

    Shapes:
        ``forward(x (B, T, d_model), mask=None) -> (B, T, d_model)``; ``mask`` bool, True = may attend,
        broadcastable to ``(B, H, T, T)``: a padding mask as ``pad[:, None, None, :]``, a causal mask ``(T, T)``.

    Source: Vaswani et al. 2017, section 3.1; pre-LN: Xiong et al. 2020, "On Layer Normalization in the
    Transformer Architecture".
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        ### BEGIN SOLUTION
        if self.norm_first:  # pre-LN: x + Sublayer(LayerNorm(x))
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, mask)[0])
            x = x + self.dropout2(self.ffn(self.norm2(x)))
        else:  # post-LN (the paper): LayerNorm(x + Sublayer(x))
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask)[0]))
            x = self.norm2(x + self.dropout2(self.ffn(x)))
        return x  # (B, T, d_model)
        ### END SOLUTION


class DecoderLayer(nn.Module):
    r"""One decoder layer: causal self-attention, cross-attention (交叉注意力) over the encoder output, FFN.

    The self-attention always applies the causal mask (position ``t`` sees targets ``≤ t`` only), combined with
    the target padding mask; the cross-attention takes its **queries from the decoder** and its **keys and
    values from the encoder output** ``memory``, masking the source padding. Post-LN or pre-LN as
    :class:`EncoderLayer`.

    Args: as :class:`EncoderLayer`.

    Attributes:
        self_attn, cross_attn (:class:`MultiHeadAttention`), ffn, norm1, norm2, norm3, dropout1..3.

    Shapes:
        ``forward(y (B, T, d_model), memory (B, S, d_model), tgt_attention_mask (B, T) | None,
        src_attention_mask (B, S) | None) -> (B, T, d_model)``; padding masks bool, True at real tokens.

    Source: Vaswani et al. 2017, sections 3.1 and 3.2.3.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        tgt_attention_mask: torch.Tensor | None = None,
        src_attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        T = y.shape[1]
        ### BEGIN SOLUTION
        self_mask = causal_mask(T, device=y.device)  # (T, T): no peeking at later target tokens
        if tgt_attention_mask is not None:
            self_mask = self_mask & tgt_attention_mask[:, None, None, :]  # (B, 1, T, T)
        cross_mask = None if src_attention_mask is None else src_attention_mask[:, None, None, :]  # (B, 1, 1, S)
        if self.norm_first:  # pre-LN
            h = self.norm1(y)
            y = y + self.dropout1(self.self_attn(h, h, h, self_mask)[0])
            h = self.norm2(y)
            y = y + self.dropout2(self.cross_attn(h, memory, memory, cross_mask)[0])
            y = y + self.dropout3(self.ffn(self.norm3(y)))
        else:  # post-LN (the paper)
            y = self.norm1(y + self.dropout1(self.self_attn(y, y, y, self_mask)[0]))
            y = self.norm2(y + self.dropout2(self.cross_attn(y, memory, memory, cross_mask)[0]))
            y = self.norm3(y + self.dropout3(self.ffn(y)))
        return y  # (B, T, d_model)
        ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# Stacks and the whole model
# --------------------------------------------------------------------------------------------------


class _LayerStack(nn.Module):
    """``n_layers`` copies of ``layer_class`` (built with the same sizes), then, with ``final_norm`` (default: when
    pre-LN), one LayerNorm: the shared construction of :class:`Encoder` and :class:`Decoder`."""

    layer_class: Callable[..., nn.Module]

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_eps: float = 1e-5,
        final_norm: bool | None = None,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            self.layer_class(d_model, n_heads, d_ff, dropout, norm_first, activation, layer_norm_eps)
            for _ in range(n_layers)
        )
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if final_norm else None

    def _final_norm(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) if self.norm is not None else x


class Encoder(_LayerStack):
    """``N`` :class:`EncoderLayer` s; with ``final_norm`` (default: when pre-LN) one LayerNorm at the end.

    ``Encoder(n_layers, d_model, n_heads, d_ff, dropout=0.0, norm_first=False, activation="relu",
    layer_norm_eps=1e-5, final_norm=None)``;
    ``forward(x (B, S, d_model), src_attention_mask (B, S) bool | None) -> (B, S, d_model)``.
    ``torch.nn.Transformer`` always adds the final LayerNorm, also in post-LN mode; ``final_norm=True`` matches it.
    """

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, src_attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = None if src_attention_mask is None else src_attention_mask[:, None, None, :]  # (B, 1, 1, S)
        for layer in self.layers:
            x = layer(x, mask)
        return self._final_norm(x)


class Decoder(_LayerStack):
    """``N`` :class:`DecoderLayer` s (+ final LayerNorm, arguments as :class:`Encoder`).

    ``forward(y (B, T, d_model), memory (B, S, d_model), tgt_attention_mask (B, T) | None,
    src_attention_mask (B, S) | None) -> (B, T, d_model)``.
    """

    layer_class = DecoderLayer

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        tgt_attention_mask: torch.Tensor | None = None,
        src_attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        for layer in self.layers:
            y = layer(y, memory, tgt_attention_mask, src_attention_mask)
        return self._final_norm(y)


class Transformer(nn.Module):
    """The encoder–decoder Transformer: embeddings + positions, encoder, decoder, output projection.

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        d_model, n_heads, n_layers, d_ff, dropout: the paper's base model is 512, 8, 6, 2048, 0.1.
        norm_first: pre-LN variant (then both stacks end with a LayerNorm).
        activation: FFN activation.
        context_length: longest sequence for the positional encoding.
        pad_id: padding id of both vocabularies (padding masks are built from it).
        tie_embeddings: share the target embedding and the output projection's weight (paper, section 3.4).

    Shapes:
        ``forward(src (B, S) int64, tgt_in (B, T) int64) -> logits (B, T, tgt_vocab)`` where ``tgt_in`` is the
        target shifted right (``<bos> y_1 … y_{T-1}``); ``encode(src) -> (memory (B, S, d_model), src_pad (B, S))``;
        ``decode(tgt_in, memory, src_pad) -> logits``.

    Source: Vaswani et al. 2017, section 3 and Figure 1. Initialisation: Xavier-uniform for every matrix, as
    ``torch.nn.Transformer``.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        activation: str = "relu",
        context_length: int = 512,
        pad_id: int = 0,
        tie_embeddings: bool = False,
    ):
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.config = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            d_ff=d_ff,
            dropout=dropout,
            norm_first=norm_first,
            activation=activation,
            context_length=context_length,
            pad_id=pad_id,
            tie_embeddings=tie_embeddings,
        )
        self.src_embed = TokenEmbedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.positions = PositionalEncoding(d_model, context_length, dropout)
        self.encoder = Encoder(n_layers, d_model, n_heads, d_ff, dropout, norm_first, activation)
        self.decoder = Decoder(n_layers, d_model, n_heads, d_ff, dropout, norm_first, activation)
        self.generator = nn.Linear(d_model, tgt_vocab)  # the output projection before the softmax
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.embedding.weight

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        src_pad = src != self.pad_id  # (B, S), True at real tokens
        memory = self.encoder(self.positions(self.src_embed(src)), src_pad)  # (B, S, d_model)
        return memory, src_pad

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_attention_mask: torch.Tensor) -> torch.Tensor:
        tgt_pad = tgt_in != self.pad_id  # (B, T)
        y = self.decoder(self.positions(self.tgt_embed(tgt_in)), memory, tgt_pad, src_attention_mask)  # (B, T, d_model)
        return self.generator(y)  # (B, T, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, src_pad = self.encode(src)
        return self.decode(tgt_in, memory, src_pad)


# --------------------------------------------------------------------------------------------------
# Training: learning-rate schedule (eq. 3) and label smoothing (section 5.4)
# --------------------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int = 4000, factor: float = 1.0) -> float:
    r""":math:`lrate = d_{model}^{-0.5}\cdot\min(step^{-0.5},\ step\cdot warmup^{-1.5})` (times ``factor``).

    Linear warm-up for ``warmup`` steps, then decay ∝ 1/√step. ``step`` counts from 1 (step 0 is treated as 1).
    Use with ``torch.optim.lr_scheduler.LambdaLR`` and base lr 1.

    Source: Vaswani et al. 2017, eq. 3 (``warmup_steps = 4000``).
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def label_smoothed_loss(
    logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0
) -> torch.Tensor:
    r"""Cross-entropy against smoothed targets: :math:`(1-\epsilon_{ls})` on the right token, :math:`\epsilon_{ls}`
    spread uniformly over the vocabulary; positions whose target is ``pad_id`` are ignored (mean over the rest).

    Args:
        logits: ``(B, T, V)``; target: ``(B, T)`` int64.

    Source: Vaswani et al. 2017, section 5.4 (``ε_ls = 0.1``); Szegedy et al. 2016.
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )


# --------------------------------------------------------------------------------------------------
# Decoding: greedy and beam search (贪心解码 / 束搜索)
# --------------------------------------------------------------------------------------------------


@torch.no_grad()
def greedy_decode(model: Transformer, src: torch.Tensor, max_new_tokens: int, bos_id: int, eos_id: int) -> torch.Tensor:
    """Translate a batch by always taking the most probable next token.

    Args:
        src: ``(B, S)`` int64 source ids (padded with ``model.pad_id``).
        max_new_tokens: most tokens to generate (excluding ``<bos>``).

    Returns:
        ``(B, ≤ max_new_tokens)`` int64 generated ids (without ``<bos>``); after a sequence's ``<eos>`` it is padded
        with ``model.pad_id``.
    """
    memory, src_pad = model.encode(src)
    B = src.shape[0]
    ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_new_tokens):
        logits = model.decode(ys, memory, src_pad)[:, -1]  # (B, V): the next-token distribution
        nxt = logits.argmax(-1).masked_fill(done, model.pad_id)  # (B,)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if done.all():
            break
    return ys[:, 1:]


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: torch.Tensor,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    beam_size: int = 4,
    alpha: float = 0.6,
) -> list[list[int]]:
    r"""Beam search, one source sentence at a time (the beams are batched).

    Keeps the ``beam_size`` best prefixes by total log-probability; a finished hypothesis (ended by ``<eos>``)
    is ranked by :math:`\log p / lp`, :math:`lp = ((5 + |Y|)/6)^{\alpha}` (Wu et al. 2016), as in the paper
    (section 6.1: beam size 4, α = 0.6). Stops when the best unfinished prefix cannot beat the best finished one
    under that normalisation bound, or after ``max_new_tokens`` tokens.

    Args:
        src: ``(B, S)`` int64.

    Returns:
        ``B`` lists of ids (without ``<bos>``; ending with ``<eos>`` unless ``max_new_tokens`` was hit).
    """
    results = []
    for b in range(src.shape[0]):
        s = src[b : b + 1]
        s = s[:, : int((s != model.pad_id).sum())] if (s != model.pad_id).any() else s  # drop right padding
        memory, src_pad = model.encode(s)  # (1, S, d_model)
        beams = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (k, t)
        scores = torch.zeros(1, device=src.device)  # (k,) total log-prob
        finished: list[tuple[float, list[int]]] = []
        for t in range(1, max_new_tokens + 1):
            k = beams.shape[0]
            logp = model.decode(beams, memory.expand(k, -1, -1), src_pad.expand(k, -1))[:, -1].log_softmax(-1)
            cand = (scores[:, None] + logp).flatten()  # (k·V,)
            top, idx = cand.topk(min(beam_size * 2, cand.numel()))
            V = logp.shape[-1]
            new_beams, new_scores = [], []
            for sc, i in zip(top.tolist(), idx.tolist()):
                prev, tok = divmod(i, V)
                seq = beams[prev].tolist()[1:] + [tok]
                if tok == eos_id:
                    finished.append((sc / ((5 + t) / 6) ** alpha, seq))
                else:
                    new_beams.append(beams[prev].tolist() + [tok])
                    new_scores.append(sc)
                if len(new_beams) == beam_size:
                    break
            if not new_beams:
                break
            best_finished = max((f[0] for f in finished), default=-math.inf)
            # Scores only decrease; the length penalty grows at most to ((5 + max_new_tokens) / 6) ** alpha.
            if new_scores[0] / ((5 + max_new_tokens) / 6) ** alpha < best_finished:
                break
            beams = torch.tensor(new_beams, device=src.device)
            scores = torch.tensor(new_scores, device=src.device)
        if not finished:  # nothing ended: take the best unfinished prefix
            finished.append((scores[0].item(), beams[0].tolist()[1:]))
        results.append(max(finished, key=lambda f: f[0])[1])
    return results
