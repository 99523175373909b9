"""Chapter 3 — Self-attention and scaled dot-product attention (自注意力 / 缩放点积注意力).

This module is the single home of the chapter's code. The book page ``book/ch03_self_attention.md``
explains it, the student notebook ``notebooks/ch03_self_attention.ipynb`` is generated from it (the
regions between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` become the exercises), and later chapters
import it rather than copying it.

Mask polarity — one convention for the whole course
---------------------------------------------------
A boolean mask is **True where a query may attend to a key** and False where it must not. This is the
polarity of ``torch.nn.functional.scaled_dot_product_attention``. (``torch.nn.MultiheadAttention`` uses the
opposite one: True means "masked out". Chapter 4 converts at that boundary.)

Reading order follows the book: mask builders, then attention, then the module.

Source: Vaswani et al. 2017, "Attention Is All You Need", section 3.2.1 and eq. 1.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "causal_mask",
    "attention_mask_from_lengths",
    "check_qkv_shapes",
    "scaled_dot_product_attention",
    "SelfAttention",
]


# --------------------------------------------------------------------------------------------------
# Masks (掩码)
# --------------------------------------------------------------------------------------------------


def causal_mask(T_q: int, T_k: int | None = None, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Causal (look-ahead) mask (因果掩码): query ``i`` may attend to key ``j`` only when ``j`` is not in its future.

    Args:
        T_q: number of queries (int, ≥ 1).
        T_k: number of keys (int ≥ T_q); defaults to ``T_q``. When ``T_k > T_q`` the queries are taken to
            be the *last* ``T_q`` positions of the key sequence (bottom-right aligned), which is what decoding
            with a key/value cache needs: query ``i`` sits at position ``T_k - T_q + i``.
        device: where to create the mask.

    Returns:
        ``(T_q, T_k)`` bool tensor, True where attending is allowed. With ``T_k == T_q`` this is the lower
        triangle including the diagonal: every token sees itself.

    Raises:
        ValueError: if ``T_q < 1`` or ``T_k < T_q``.

    Source: Vaswani et al. 2017, section 3.2.3 ("prevent leftward information flow in the decoder").
    """
    if T_k is None:
        T_k = T_q
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={T_q}, T_k={T_k}")
    ### BEGIN SOLUTION
    i = torch.arange(T_q, device=device)[:, None] + (T_k - T_q)  # (T_q, 1) query positions
    j = torch.arange(T_k, device=device)[None, :]  # (1, T_k) key positions
    return j <= i  # (T_q, T_k)
    ### END SOLUTION


def attention_mask_from_lengths(lengths: torch.Tensor, T_k: int | None = None) -> torch.Tensor:
    """Attention mask over keys from sequence lengths (a padding mask, 填充掩码): True at real tokens, False at padding.

    Named ``attention_mask`` as in Hugging Face (True = may attend). PyTorch's ``key_padding_mask`` argument has the
    opposite polarity (True = padding): pass ``~mask`` there.

    Args:
        lengths: ``(B,)`` integer tensor, the number of real (non-pad) tokens of each sequence; padding is
            at the end (right padding).
        T_k: padded length; defaults to ``lengths.max()``.

    Returns:
        ``(B, T_k)`` bool tensor on ``lengths.device``. To use it with :func:`scaled_dot_product_attention`
        broadcast it over queries (and heads): ``mask[:, None, :]`` for ``(B, T_q, T_k)`` scores,
        ``mask[:, None, None, :]`` for ``(B, H, T_q, T_k)``.

    Raises:
        ValueError: if ``lengths`` is not 1-D integer, has a negative entry, or an entry larger than ``T_k``.
    """
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(
            f"lengths must be a 1-D integer tensor (B,), got shape {tuple(lengths.shape)} and dtype {lengths.dtype}"
        )
    if T_k is None:
        T_k = int(lengths.max()) if lengths.numel() else 0
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > T_k):
        raise ValueError(f"lengths must lie in [0, T_k={T_k}], got {lengths.tolist()}")
    ### BEGIN SOLUTION
    positions = torch.arange(T_k, device=lengths.device)  # (T_k,)
    return positions[None, :] < lengths[:, None]  # (B, T_k)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# Scaled dot-product attention (缩放点积注意力)
# --------------------------------------------------------------------------------------------------


def check_qkv_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> None:
    """Raise ValueError, naming the shapes, unless q, k, v (and mask) fit together.

    Expected: ``q: (..., T_q, d_k)``, ``k: (..., T_k, d_k)``, ``v: (..., T_k, d_v)`` with the same leading
    (batch) dims, and a bool ``mask`` that broadcasts to ``(..., T_q, T_k)``.
    """
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(
            f"q, k, v need at least 2 dims (..., T, d); got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k (last dim): q{tuple(q.shape)} vs k{tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of keys T_k (dim -2): k{tuple(k.shape)} vs v{tuple(v.shape)}"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k, v must share their leading (batch) dims: q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend), got dtype {mask.dtype}")
        scores_shape = (*q.shape[:-1], k.shape[-2])
        try:
            broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
        except RuntimeError:
            broadcast = None
        if broadcast != torch.Size(scores_shape):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' shape "
                f"(..., T_q, T_k) = {scores_shape}"
            )


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled dot-product attention: :math:`\mathrm{softmax}(QK^\top/\sqrt{d_k})\,V`.

    Args:
        q: queries ``(..., T_q, d_k)``, floating point; any number of leading batch dims, e.g.
            ``(B, T_q, d_k)`` or ``(B, H, T_q, d_k)``.
        k: keys ``(..., T_k, d_k)``, same leading dims and dtype as ``q``.
        v: values ``(..., T_k, d_v)``; ``d_v`` may differ from ``d_k``.
        mask: optional bool tensor broadcastable to ``(..., T_q, T_k)``; **True = may attend**.

    Returns:
        ``(output, weights)``: ``output`` is ``(..., T_q, d_v)``, ``weights`` is ``(..., T_q, T_k)``; both in
        the dtype of ``q``. Each row of ``weights`` sums to 1 over the keys it may attend to, and is 0 at
        masked keys. A query whose keys are *all* masked gets all-zero weights and a zero output (finite, no
        NaN) — where ``torch.nn.functional.scaled_dot_product_attention`` may return NaN.

    Raises:
        ValueError: if the shapes do not fit together or the mask is not bool (see :func:`check_qkv_shapes`).

    Source: Vaswani et al. 2017, eq. 1.
    """
    check_qkv_shapes(q, k, v, mask)
    ### BEGIN SOLUTION
    d_k = q.shape[-1]
    scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)  # (..., T_q, T_k); scaled first: QKᵀ may overflow fp16
    if mask is not None:
        # The most negative finite number, not -inf: a fully masked row then stays finite.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k), normalised over keys
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # exact zeros; a fully masked row becomes all zero
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# A single-head self-attention layer (单头自注意力)
# --------------------------------------------------------------------------------------------------


class SelfAttention(nn.Module):
    r"""Single-head self-attention: every token of ``x`` is turned into a query, a key and a value.

    :math:`Q = XW^Q,\ K = XW^K,\ V = XW^V`, then :func:`scaled_dot_product_attention` (Vaswani et al. 2017,
    section 3.2). ``W^Q, W^K`` map ``d_model → d_k``; ``W^V`` maps ``d_model → d_v``.

    Args:
        d_model: width of the token embeddings.
        d_k: width of queries and keys (they are dot-multiplied, so they share it).
        d_v: width of values and of the output; defaults to ``d_k``.
        bias: whether the three projections have a bias (default False, as in most descriptions).

    Shapes:
        ``forward(x: (B, T, d_model), mask: bool broadcastable to (B, T, T) | None)
        -> (output (B, T, d_v), weights (B, T, T))``.
    """

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False):
        super().__init__()
        self.d_model, self.d_k, self.d_v = d_model, d_k, d_v if d_v is not None else d_k
        self.W_q = nn.Linear(d_model, d_k, bias=bias)
        self.W_k = nn.Linear(d_model, d_k, bias=bias)
        self.W_v = nn.Linear(d_model, self.d_v, bias=bias)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from every token of ``x`` to every token of ``x`` (allowed by ``mask``).

        Raises:
            ValueError: if ``x`` is not ``(B, T, d_model)``.
        """
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        ### BEGIN SOLUTION
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)  # (B, T, d_k), (B, T, d_k), (B, T, d_v)
        return scaled_dot_product_attention(q, k, v, mask)
        ### END SOLUTION
