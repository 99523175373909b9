"""Chapter 4 — Multi-head attention (多头注意力).

This module is the single home of the chapter's code. The book page ``book/ch04_multi_head_attention.md``
explains it, the student notebook ``notebooks/ch04_multi_head_attention.ipynb`` is generated from it, and later
chapters (the Transformer, GPT, BERT) import it.

Reading order follows the book:

1. :func:`split_heads` / :func:`merge_heads` — cut ``d_model`` into ``h`` heads of width ``d_k = d_model / h``
   and glue them back;
2. :class:`MultiHeadAttention` — the teaching form: four projections ``W^Q, W^K, W^V, W^O``, attention per head
   with chapter 3's :func:`~solutions.ch03_self_attention.scaled_dot_product_attention`;
3. :class:`FusedMultiHeadSelfAttention` — the same computation with one ``d_model → 3·d_model`` projection,
   with an optional fast path through ``torch.nn.functional.scaled_dot_product_attention``.

The boundary with ``torch.nn.MultiheadAttention`` (mask conversion — its boolean masks mean True = masked
**out** — and weight copying) is in :mod:`solutions.interop`.

Mask polarity (whole course): a boolean mask is **True where a query may attend to a key**.

Source: Vaswani et al. 2017, "Attention Is All You Need", section 3.2.2:
``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention

__all__ = [
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "FusedMultiHeadSelfAttention",
]


# --------------------------------------------------------------------------------------------------
# Splitting d_model into heads, and merging them back (拆分 / 合并注意力头)
# --------------------------------------------------------------------------------------------------


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Split the feature dim into ``n_heads`` heads: ``(B, T, d_model) -> (B, H, T, d_k)``, ``d_k = d_model / H``.

    Head ``i`` gets features ``i·d_k … (i+1)·d_k - 1`` of every token — the same slice of the projection that
    the paper's per-head matrix ``W_i^Q`` would produce. The reshape comes first (``(B, T, H, d_k)``), *then*
    the transpose that brings heads next to the batch: reshaping straight to ``(B, H, T, d_k)`` would mix
    features of different tokens into one "token" of a head.

    Args:
        x: ``(B, T, d_model)`` tensor, any dtype/device.
        n_heads: number of heads ``H`` (≥ 1), must divide ``d_model``.

    Returns:
        ``(B, H, T, d_k)`` view-backed tensor (no copy) on ``x``'s device.

    Raises:
        ValueError: if ``x`` is not 3-D or ``d_model`` is not divisible by ``n_heads``.

    Source: Vaswani et al. 2017, section 3.2.2 (``d_k = d_v = d_model / h``).
    """
    if x.ndim != 3:
        raise ValueError(f"split_heads expects (B, T, d_model), got shape {tuple(x.shape)}")
    if n_heads < 1 or x.shape[-1] % n_heads:
        raise ValueError(f"d_model={x.shape[-1]} (x of shape {tuple(x.shape)}) is not divisible by n_heads={n_heads}")
    ### BEGIN SOLUTION
    B, T, d_model = x.shape
    d_k = d_model // n_heads
    return x.view(B, T, n_heads, d_k).transpose(1, 2)  # (B, T, H, d_k) -> (B, H, T, d_k)
    ### END SOLUTION


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads back: ``(B, H, T, d_k) -> (B, T, H·d_k)``; the inverse of :func:`split_heads`.

    Args:
        x: ``(B, H, T, d_k)`` tensor.

    Returns:
        ``(B, T, H·d_k)`` contiguous tensor: token ``t`` holds ``[head_1[t], …, head_H[t]]`` (the paper's Concat).

    Raises:
        ValueError: if ``x`` is not 4-D.

    Source: Vaswani et al. 2017, section 3.2.2 (``Concat(head_1, …, head_h)``).
    """
    if x.ndim != 4:
        raise ValueError(f"merge_heads expects (B, H, T, d_k), got shape {tuple(x.shape)}")
    ### BEGIN SOLUTION
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, H, T, d_k) -> (B, T, H, d_k) -> (B, T, H*d_k)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# Multi-head attention, teaching form (多头注意力)
# --------------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention: :math:`\mathrm{Concat}(\mathrm{head}_1,\dots,\mathrm{head}_h)W^O`.

    :math:`\mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)`. The ``h`` per-head matrices
    ``W_i^Q`` (``d_model × d_k``) are stored side by side as one ``nn.Linear(d_model, d_model)`` ``W_q``; the
    output of ``W_q`` is then cut into heads by :func:`split_heads`. Same for ``W_k``, ``W_v``. Queries may
    come from another sequence than keys/values (cross-attention 交叉注意力).

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of heads ``h``.
        dropout: dropout probability on the attention weights (as ``nn.MultiheadAttention``), training only.
        bias: whether the four projections have biases (``nn.MultiheadAttention`` default: True).

    Attributes:
        W_q, W_k, W_v, W_o: ``nn.Linear(d_model, d_model)``.
        d_k: per-head width ``d_model // n_heads``.

    Shapes:
        ``forward(query (B, T_q, d_model), key (B, T_k, d_model), value (B, T_k, d_model), mask=None)
        -> (output (B, T_q, d_model), weights (B, H, T_q, T_k))``; ``mask`` is bool, **True = may attend**,
        broadcastable to ``(B, H, T_q, T_k)`` — e.g. a key padding mask as ``(B, 1, 1, T_k)``, a causal mask
        as ``(T_q, T_k)``. ``weights`` are before dropout.

    Raises:
        ValueError: if ``d_model % n_heads != 0`` or the inputs' shapes do not fit.

    Source: Vaswani et al. 2017, section 3.2.2.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query`` to ``key``/``value`` with ``h`` heads; returns ``(output, weights)``."""
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (B, T, d_model={self.d_model}), got {tuple(t.shape)}")
        if key.shape[:2] != value.shape[:2] or query.shape[0] != key.shape[0]:
            raise ValueError(
                f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)} "
                "must share B, and key/value must share T_k"
            )
        ### BEGIN SOLUTION
        q = split_heads(self.W_q(query), self.n_heads)  # (B, T_q, d_model) -> (B, H, T_q, d_k)
        k = split_heads(self.W_k(key), self.n_heads)  # (B, H, T_k, d_k)
        v = split_heads(self.W_v(value), self.n_heads)  # (B, H, T_k, d_k)
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_k), (B, H, T_q, T_k)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v  # dropout on the weights, as nn.MultiheadAttention does
        return self.W_o(merge_heads(heads)), weights  # (B, T_q, d_model), (B, H, T_q, T_k)
        ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# The fused form: one projection for Q, K and V (融合 QKV 投影)
# --------------------------------------------------------------------------------------------------


class FusedMultiHeadSelfAttention(nn.Module):
    """Multi-head *self*-attention with one ``W_qkv = [W^Q; W^K; W^V]`` projection (``d_model → 3·d_model``).

    One matrix multiply instead of three; the result is cut into ``q, k, v`` along the last dim. Its weight is
    laid out exactly like ``nn.MultiheadAttention.in_proj_weight``. With ``use_sdpa=True`` the attention runs
    through ``torch.nn.functional.scaled_dot_product_attention`` (a fused kernel that never materialises the
    ``T × T`` weights, so it returns ``None`` for them); otherwise through chapter 3's function.
    ``is_causal=True`` makes the attention causal (chapter 3's :func:`~solutions.ch03_self_attention.causal_mask`);
    without another mask the fast path then takes the kernel's own causal branch and no ``T × T`` mask is built.

    Args:
        d_model, n_heads, dropout, bias: as :class:`MultiHeadAttention`.

    Attributes:
        W_qkv: ``nn.Linear(d_model, 3·d_model)``; W_o: ``nn.Linear(d_model, d_model)``.

    Shapes:
        ``forward(x (B, T, d_model), mask=None, use_sdpa=False, is_causal=False) -> (output (B, T, d_model),
        weights (B, H, T, T) or None)``. ``mask``: bool, True = may attend, broadcastable to ``(B, H, T, T)``;
        with ``is_causal=True`` it is combined with the causal mask. Fully masked query rows give zeros on the
        teaching path and NaN on the ``use_sdpa`` path. Dropout (training only) acts on the attention weights.

    Source: Vaswani et al. 2017, section 3.2.2; the fused layout follows ``torch.nn.MultiheadAttention``.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.W_qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, use_sdpa: bool = False, is_causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        q, k, v = self.W_qkv(x).split(self.d_model, dim=-1)  # (B, T, 3·d_model) -> 3 × (B, T, d_model)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))  # 3 × (B, H, T, d_k)
        if is_causal and (mask is not None or not use_sdpa):  # the causal mask spelled out, (T, T)
            causal = causal_mask(x.shape[1], device=x.device)
            mask, is_causal = (causal if mask is None else mask & causal), False
        if use_sdpa:  # fast path: fused kernel (dropout inside it), weights never materialised
            p = self.dropout.p if self.training else 0.0
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal)
            return self.W_o(merge_heads(heads)), None  # (B, T, d_model)
        # teaching path: chapter 3's explicit softmax(QK^T/sqrt(d_k))V
        heads, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, d_k), (B, H, T, T)
        if self.training and self.dropout.p > 0:
            heads = self.dropout(weights) @ v  # dropout on the weights, as nn.MultiheadAttention does
        return self.W_o(merge_heads(heads)), weights  # (B, T, d_model)
