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
   with an optional fast path through ``torch.nn.functional.scaled_dot_product_attention``;
4. the boundary with ``torch.nn.MultiheadAttention``: mask conversion (its boolean masks mean True = masked
   **out**) and weight copying, used by the tests and the benchmark.

Mask polarity (whole course): a boolean mask is **True where a query may attend to a key**.

Source: Vaswani et al. 2017, "Attention Is All You Need", section 3.2.2:
``MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import scaled_dot_product_attention

__all__ = [
    "split_heads",
    "merge_heads",
    "MultiHeadAttention",
    "FusedMultiHeadSelfAttention",
    "to_torch_mask",
    "from_torch_mask",
    "torch_mha_masks",
    "copy_mha_from_torch",
    "copy_mha_to_torch",
    "copy_fused_from_torch",
    "torch_mha_like",
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

    Args:
        d_model, n_heads, dropout, bias: as :class:`MultiHeadAttention`.

    Attributes:
        W_qkv: ``nn.Linear(d_model, 3·d_model)``; W_o: ``nn.Linear(d_model, d_model)``.

    Shapes:
        ``forward(x (B, T, d_model), mask=None, use_sdpa=False) -> (output (B, T, d_model),
        weights (B, H, T, T) or None)``. ``mask``: bool, True = may attend, broadcastable to ``(B, H, T, T)``.
        Fully masked query rows give zeros on the teaching path and NaN on the ``use_sdpa`` path.

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
        self, x: torch.Tensor, mask: torch.Tensor | None = None, use_sdpa: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        q, k, v = self.W_qkv(x).split(self.d_model, dim=-1)  # (B, T, 3·d_model) -> 3 × (B, T, d_model)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))  # 3 × (B, H, T, d_k)
        if use_sdpa:  # fast path: fused kernel, weights never materialised
            p = self.dropout.p if self.training else 0.0
            heads, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        else:  # teaching path: chapter 3's explicit softmax(QK^T/sqrt(d_k))V
            heads, weights = scaled_dot_product_attention(q, k, v, mask)
            if self.training and self.dropout.p > 0:
                heads = self.dropout(weights) @ v
        return self.W_o(merge_heads(heads)), weights  # (B, T, d_model)


# --------------------------------------------------------------------------------------------------
# The boundary with torch.nn.MultiheadAttention (True = masked OUT there)
# --------------------------------------------------------------------------------------------------


def to_torch_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Course mask (True = may attend) -> ``nn.MultiheadAttention`` bool mask (True = **not** allowed). ``None`` stays.

    Use it for both PyTorch's ``key_padding_mask`` argument (``(B, T_k)``, True = padding; from the course's
    ``attention_mask_from_lengths(lengths)``, True = real token) and a 2-D ``attn_mask`` (``(T_q, T_k)``, e.g.
    ``causal_mask``). ``nn.MultiheadAttention`` also accepts float masks, which are *added* to the scores
    (``-inf`` = blocked); this helper always returns bool.

    Raises:
        ValueError: if ``mask`` is not bool.
    """
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise ValueError(f"expected a bool mask, got dtype {mask.dtype}")
    return ~mask


def from_torch_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    """``nn.MultiheadAttention`` mask -> course mask (True = may attend).

    Accepts a bool mask (True = masked out) or a float additive mask (``-inf`` = masked out, anything finite is
    treated as allowed; non-zero finite biases cannot be expressed as a bool mask and raise ValueError).
    """
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return ~mask
    finite = torch.isfinite(mask)
    if (mask[finite] != 0).any():
        raise ValueError("a float mask with finite non-zero entries is a bias, not a mask")
    return finite


def torch_mha_masks(
    attention_mask: torch.Tensor | None = None,
    attn: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Course masks -> ``(key_padding_mask, attn_mask)`` for ``nn.MultiheadAttention``, plus the combined course mask.

    PyTorch's ``key_padding_mask`` is True at **padding**; the course's ``attention_mask`` is True at real tokens.

    Args:
        attention_mask: ``(B, T_k)`` bool, True at real tokens (course polarity), or None.
        attn: ``(T_q, T_k)`` bool, True = may attend (course polarity), or None.

    Returns:
        ``(torch_key_padding_mask (B, T_k), torch_attn_mask (T_q, T_k), course_mask)``: the first two inverted
        for ``nn.MultiheadAttention``; ``course_mask`` broadcastable to ``(B, H, T_q, T_k)`` for
        :class:`MultiHeadAttention` (None when both are None).
    """
    course = None
    if attention_mask is not None:
        course = attention_mask[:, None, None, :]  # (B, 1, 1, T_k)
    if attn is not None:
        course = attn if course is None else course & attn  # (T_q, T_k) broadcasts to (B, 1, T_q, T_k)
    return to_torch_mask(attention_mask), to_torch_mask(attn), course


@torch.no_grad()
def copy_mha_from_torch(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy ``nn.MultiheadAttention`` weights into a :class:`MultiHeadAttention` (in place; returns ``ours``).

    ``theirs.in_proj_weight`` is ``[W^Q; W^K; W^V]`` stacked along dim 0 (each ``(d_model, d_model)`` in
    ``nn.Linear`` layout, ``out × in``), ``theirs.out_proj`` is ``W^O``.

    Raises:
        ValueError: if sizes differ or ``theirs`` has separate k/v dims (``kdim``/``vdim``) or bias_k/v.
    """
    _check_compatible(ours, theirs)
    for ours_lin, w, b in zip(
        (ours.W_q, ours.W_k, ours.W_v),
        theirs.in_proj_weight.chunk(3),
        theirs.in_proj_bias.chunk(3) if theirs.in_proj_bias is not None else (None,) * 3,
    ):
        ours_lin.weight.copy_(w)
        if b is not None:
            ours_lin.bias.copy_(b)
    ours.W_o.weight.copy_(theirs.out_proj.weight)
    if theirs.out_proj.bias is not None:
        ours.W_o.bias.copy_(theirs.out_proj.bias)
    return ours


@torch.no_grad()
def copy_mha_to_torch(
    ours: MultiHeadAttention | FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention
) -> nn.MultiheadAttention:
    """Copy our weights (teaching or fused form) into an ``nn.MultiheadAttention`` (in place; returns ``theirs``)."""
    _check_compatible(ours, theirs)
    if isinstance(ours, FusedMultiHeadSelfAttention):
        w = ours.W_qkv.weight
        b = ours.W_qkv.bias
    else:
        w = torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight])
        b = torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]) if ours.W_q.bias is not None else None
    theirs.in_proj_weight.copy_(w)
    if b is not None:
        theirs.in_proj_bias.copy_(b)
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    if ours.W_o.bias is not None:
        theirs.out_proj.bias.copy_(ours.W_o.bias)
    return theirs


@torch.no_grad()
def copy_fused_from_torch(
    ours: FusedMultiHeadSelfAttention, theirs: nn.MultiheadAttention
) -> FusedMultiHeadSelfAttention:
    """Copy ``nn.MultiheadAttention`` weights into the fused form: ``W_qkv`` *is* ``in_proj_weight``."""
    _check_compatible(ours, theirs)
    ours.W_qkv.weight.copy_(theirs.in_proj_weight)
    ours.W_o.weight.copy_(theirs.out_proj.weight)
    if theirs.in_proj_bias is not None:
        ours.W_qkv.bias.copy_(theirs.in_proj_bias)
        ours.W_o.bias.copy_(theirs.out_proj.bias)
    return ours


def torch_mha_like(ours: MultiHeadAttention | FusedMultiHeadSelfAttention) -> nn.MultiheadAttention:
    """A ``nn.MultiheadAttention(batch_first=True)`` with the same sizes, weights, device and dtype as ``ours``."""
    bias = ours.W_o.bias is not None
    ref = ours.W_o.weight
    theirs = nn.MultiheadAttention(
        ours.d_model,
        ours.n_heads,
        dropout=ours.dropout.p,
        bias=bias,
        batch_first=True,
        device=ref.device,
        dtype=ref.dtype,
    )
    return copy_mha_to_torch(ours, theirs)


def _check_compatible(ours, theirs: nn.MultiheadAttention) -> None:
    if theirs.embed_dim != ours.d_model or theirs.num_heads != ours.n_heads:
        raise ValueError(
            f"size mismatch: ours d_model={ours.d_model}, n_heads={ours.n_heads}; nn.MultiheadAttention "
            f"embed_dim={theirs.embed_dim}, num_heads={theirs.num_heads}"
        )
    if not theirs._qkv_same_embed_dim or theirs.bias_k is not None:
        raise ValueError("nn.MultiheadAttention with kdim/vdim or add_bias_kv has no counterpart here")
    if (theirs.in_proj_bias is None) != (ours.W_o.bias is None):
        raise ValueError("one of the two modules has biases and the other has not")
