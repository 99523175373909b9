"""Chapter 12 — Attention as a program: FlexAttention's ``score_mod`` and ``mask_mod`` (可编程注意力).

This module is the single home of the chapter's code. The book page ``book/ch12_flex_attention.md`` explains it,
the student notebook ``notebooks/ch12_flex_attention.ipynb`` is generated from it (the regions between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` become the exercises).

Chapters 9 to 11 wrote every attention variant as its own code: a boolean table per sparse pattern (chapter 9),
a tiled loop (chapter 10), a kernel that skips the blocks a causal mask hides (chapter 11). PyTorch's
FlexAttention (``torch.nn.attention.flex_attention``) asks instead for two small functions of *indices*:

* ``score_mod(score, b, h, q_idx, kv_idx) -> score`` changes one scaled score (a relative bias such as ALiBi,
  soft-capping);
* ``mask_mod(b, h, q_idx, kv_idx) -> bool`` says whether query ``q_idx`` may attend to key ``kv_idx`` (course
  polarity: True = may attend) — chapter 9's boolean table written as a rule;

and computes, for every batch element ``b`` and head ``h``,

.. math:: O = \\mathrm{softmax}\\big(\\mathrm{mask}(\\mathrm{score\\_mod}(QK^\\top/\\sqrt{d_k}))\\big)\\,V,

where masked scores become ``-inf``. Called eagerly, ``flex_attention`` builds the whole score table (a
reference, with a warning); under ``torch.compile`` the two functions are inlined into one fused, block-sparse
kernel (Triton on a GPU — the kernel chapter 11 wrote by hand), which skips the blocks that
``create_block_mask`` found empty.

Reading order follows the book:

1. :func:`flex_attention_reference` — the formula above, written out;
2. chapter 9's patterns as mask_mods: :func:`causal`, :func:`sliding_window`, :func:`dilated_window`,
   :func:`global_tokens`, :func:`sliding_window_with_globals`, :func:`document_mask` (packed sequences),
   :func:`prefix_lm_mask`, composed with ``and_masks``/``or_masks``; :func:`mask_table` evaluates one;
3. score_mods: :func:`alibi_slopes`, :func:`alibi_score_mod`, :func:`soft_cap_score_mod`,
   :func:`relative_bias_score_mod`;
4. the BlockMask: :func:`block_counts`, :func:`flash_causal_key_blocks` (chapter 11's loop bound);
5. decoding with chapter 8's cache: :func:`offset_mask_mod`, :func:`attend_with_cache_flex`.

Index arguments: ``b``, ``h``, ``q_idx``, ``kv_idx`` are integer tensors (0-dimensional under FlexAttention's
``vmap``; broadcastable grids in :func:`flex_attention_reference`). A mod must therefore use tensor operations
(``&``, ``|``, ``~``, ``torch.where``), never Python ``and``/``or``/``if`` on them.

Sources: PyTorch ``torch.nn.attention.flex_attention`` documentation and Dong, Feng, Guessous, Liang & He 2024,
*Flex Attention: A Programming Model for Generating Optimized Attention Kernels* (arXiv:2412.05496); Press, Smith
& Lewis 2022, *Train Short, Test Long: Attention with Linear Biases* (ALiBi, section 3); Riviere et al. 2024,
*Gemma 2* (section 2, logit soft-capping); Raffel et al. 2020 (T5 relative position biases, section 2.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import (
    BlockMask,
    and_masks,
    create_block_mask,
    create_mask,
    flex_attention,
    or_masks,
)

from solutions.ch08_kv_cache import KVCache

__all__ = [
    "flex_attention_reference",
    "mask_table",
    "causal",
    "sliding_window",
    "dilated_window",
    "global_tokens",
    "sliding_window_with_globals",
    "document_mask",
    "prefix_lm_mask",
    "alibi_slopes",
    "alibi_score_mod",
    "soft_cap_score_mod",
    "relative_bias_score_mod",
    "block_counts",
    "flash_causal_key_blocks",
    "offset_mask_mod",
    "attend_with_cache_flex",
]

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ScoreMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


# --------------------------------------------------------------------------------------------------
# 1. The idea, written out (可编程注意力的定义)
# --------------------------------------------------------------------------------------------------


def flex_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    score_mod: ScoreMod | None = None,
    mask_mod: MaskMod | None = None,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""What ``flex_attention`` computes, with the whole score table in the open: output and log-sum-exp.

    :math:`s = \mathrm{score\_mod}(q_i\cdot k_j \cdot \mathrm{scale}, b, h, i, j)`, ``-inf`` where
    ``mask_mod(b, h, i, j)`` is False, then the softmax over ``j`` and the weighted sum of values. The mods are
    called once, on broadcast index grids ``b (B,1,1,1)``, ``h (1,H,1,1)``, ``q_idx (1,1,T_q,1)``,
    ``kv_idx (1,1,1,T_k)``: a mod made of elementwise tensor operations gives the whole table in one call. A row
    that may attend to nothing gives output 0 and log-sum-exp ``-inf`` (as ``flex_attention``).

    Args:
        q: ``(B, H, T_q, d_k)`` float. k: ``(B, H_kv, T_k, d_k)``. v: ``(B, H_kv, T_k, d_v)``; ``H_kv = H``
            unless ``enable_gqa``, where ``H_kv`` divides ``H`` and query head ``h`` uses key/value head
            ``h // (H / H_kv)`` (chapter 8's grouped-query attention).
        score_mod: ``(score, b, h, q_idx, kv_idx) -> score`` or None. mask_mod: ``(b, h, q_idx, kv_idx) -> bool``
            or None (True = may attend).
        scale: multiplies ``q · k`` (default ``1/sqrt(d_k)``).

    Returns:
        ``(out (B, H, T_q, d_v), lse (B, H, T_q))``, ``q``'s dtype; ``lse`` is the natural-log log-sum-exp of each
        row's modified, masked scores (chapter 10's ``m + log ℓ``).

    Raises:
        ValueError: if the shapes do not fit (the message names them).

    Source: Dong et al. 2024, section 3 (eq. 1 and the score_mod/mask_mod signatures); Vaswani et al. 2017, eq. 1.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or k.shape[:3] != v.shape[:3] or q.shape[0] != k.shape[0]:
        raise ValueError(
            f"need q (B, H, T_q, d_k), k (B, H_kv, T_k, d_k), v (B, H_kv, T_k, d_v), got q{tuple(q.shape)}, "
            f"k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    B, H, T_q, d_k = q.shape
    H_kv, T_k = k.shape[1], k.shape[2]
    if k.shape[-1] != d_k or (H_kv != H and not (enable_gqa and H % H_kv == 0)):
        raise ValueError(
            f"q{tuple(q.shape)} and k{tuple(k.shape)} must share d_k, and H_kv = H (or divide H with enable_gqa)"
        )
    if H_kv != H:
        k = k.repeat_interleave(H // H_kv, dim=1)  # (B, H, T_k, d_k): chapter 8's repeat_kv
        v = v.repeat_interleave(H // H_kv, dim=1)
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    b = torch.arange(B, device=q.device)[:, None, None, None]  # (B, 1, 1, 1)
    h = torch.arange(H, device=q.device)[None, :, None, None]  # (1, H, 1, 1)
    q_idx = torch.arange(T_q, device=q.device)[None, None, :, None]  # (1, 1, T_q, 1)
    kv_idx = torch.arange(T_k, device=q.device)[None, None, None, :]  # (1, 1, 1, T_k)
    scores = (q @ k.transpose(-2, -1)).float() * scale  # (B, H, T_q, T_k), float32 as flex_attention
    if score_mod is not None:
        scores = torch.as_tensor(score_mod(scores, b, h, q_idx, kv_idx)).expand(B, H, T_q, T_k)
    if mask_mod is not None:
        allowed = torch.as_tensor(mask_mod(b, h, q_idx, kv_idx), device=q.device).expand(B, H, T_q, T_k)
        scores = scores.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)  # (B, H, T_q), -inf on empty rows
    weights = torch.exp(scores - lse[..., None]).nan_to_num(0.0)  # (B, H, T_q, T_k): rows sum to 1 (or are 0)
    return (weights @ v.float()).to(q.dtype), lse


def mask_table(
    mask_mod: MaskMod, B: int, H: int, T_q: int, T_k: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """A mask_mod evaluated at every ``(b, h, q_idx, kv_idx)``: the boolean table chapter 9 drew.

    Uses ``torch.nn.attention.flex_attention.create_mask`` (the same ``vmap`` over the four indices that
    ``create_block_mask`` runs), so a mod that works here works in ``flex_attention``.

    Args:
        mask_mod: ``(b, h, q_idx, kv_idx) -> bool``. B, H, T_q, T_k: the grid (each ≥ 1). device: where.

    Returns:
        bool ``(B, H, T_q, T_k)``, True = may attend.

    Raises:
        ValueError: if a size is below 1.
    """
    if min(B, H, T_q, T_k) < 1:
        raise ValueError(f"mask_table needs B, H, T_q, T_k >= 1, got {(B, H, T_q, T_k)}")
    return create_mask(mask_mod, B, H, T_q, T_k, device=device if device is not None else "cpu")


# --------------------------------------------------------------------------------------------------
# 2. Chapter 9's patterns as mask_mods (掩码函数)
# --------------------------------------------------------------------------------------------------


def causal(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """The causal mask_mod (因果掩码): query ``q_idx`` may attend to keys ``kv_idx <= q_idx``.

    Queries and keys are counted from the same start (top-left aligned, ``T_q = T_k``); for decoding with a cache
    shift the queries with :func:`offset_mask_mod`. Returns a bool tensor shaped like the broadcast indices.
    """
    return q_idx >= kv_idx


def sliding_window(window: int, *, causal: bool = True) -> MaskMod:
    """Chapter 9's sliding window as a mask_mod: ``|q - kv| <= window`` (and ``kv <= q`` if ``causal``).

    Args:
        window: one-sided width ``w`` (int ≥ 0), as chapter 9's ``sliding_window_mask``.
        causal: hide keys after the query.

    Returns:
        ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        ValueError: if ``window < 0``.

    Source: Beltagy et al. 2020, section 3.1; Jiang et al. 2023, section 2.
    """
    if window < 0:
        raise ValueError(f"sliding_window needs window >= 0, got {window}")

    def mask_mod(b, h, q_idx, kv_idx):
        near = (q_idx - kv_idx).abs() <= window
        return near & (kv_idx <= q_idx) if causal else near

    return mask_mod


def dilated_window(window: int, dilation: int, *, causal: bool = True) -> MaskMod:
    """Chapter 9's dilated window: ``q - kv`` a multiple of ``dilation`` and ``|q - kv| <= window · dilation``.

    Raises:
        ValueError: if ``window < 0`` or ``dilation < 1``.

    Source: Beltagy et al. 2020, section 3.1 ("dilated sliding window").
    """
    if window < 0 or dilation < 1:
        raise ValueError(f"dilated_window needs window >= 0 and dilation >= 1, got {window}, {dilation}")

    def mask_mod(b, h, q_idx, kv_idx):
        offset = q_idx - kv_idx
        keep = (offset % dilation == 0) & (offset.abs() <= window * dilation)
        return keep & (offset >= 0) if causal else keep

    return mask_mod


def global_tokens(is_global: torch.Tensor) -> MaskMod:
    """Chapter 9's global tokens as a mask_mod: True in the rows and the columns of the global positions.

    Combine it with a window by ``or_masks`` (and with :func:`causal` by ``and_masks``), as chapter 9's
    ``global_token_mask`` adds rows and columns to a base mask.

    Args:
        is_global: bool ``(T,)`` (one set for every sequence) or ``(B, T)`` (per sequence).

    Returns:
        ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        ValueError: if ``is_global`` is not a 1-D or 2-D bool tensor.

    Source: Beltagy et al. 2020, section 3.2.
    """
    if is_global.dtype != torch.bool or is_global.ndim not in (1, 2):
        raise ValueError(f"is_global must be bool (T,) or (B, T), got {is_global.dtype} {tuple(is_global.shape)}")
    table = is_global if is_global.ndim == 2 else is_global[None]  # (B or 1, T)

    def mask_mod(b, h, q_idx, kv_idx):
        row = b if is_global.ndim == 2 else torch.zeros_like(b)
        return table[row, q_idx] | table[row, kv_idx]

    return mask_mod


def sliding_window_with_globals(window: int, n_global: int, *, causal: bool = True) -> MaskMod:
    """A sliding window plus the first ``n_global`` positions as global tokens, one mask_mod.

    Query ``q`` may attend to key ``kv`` when ``|q - kv| <= window``, or ``kv < n_global`` (every token sees the
    global tokens), or ``q < n_global`` (a global token sees every token); with ``causal`` only when ``kv <= q``
    too. Composition: ``and_masks(or_masks(window, globals), causal)``.

    Args:
        window: one-sided width ``w`` (int ≥ 0). n_global: number of leading global tokens (int ≥ 0).
        causal: hide keys after the query.

    Returns:
        ``mask_mod(b, h, q_idx, kv_idx) -> bool`` (True = may attend).

    Raises:
        ValueError: if ``window < 0`` or ``n_global < 0``.

    Source: Beltagy et al. 2020, sections 3.1–3.2 (Longformer's window + global attention); the leading tokens
    as always-visible "sinks" are Xiao et al. 2024's StreamingLLM.
    """
    if window < 0 or n_global < 0:
        raise ValueError(f"sliding_window_with_globals needs window >= 0 and n_global >= 0, got {window}, {n_global}")
    ### BEGIN SOLUTION

    def in_window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx).abs() <= window

    def is_global(b, h, q_idx, kv_idx):
        return (q_idx < n_global) | (kv_idx < n_global)

    def not_future(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx

    mask_mod = or_masks(in_window, is_global)
    return and_masks(mask_mod, not_future) if causal else mask_mod
    ### END SOLUTION


def document_mask(document_ids: torch.Tensor, *, causal: bool = True) -> MaskMod:
    """Packed sequences (打包序列): a query may attend only to keys of its own document (and not after it).

    Several documents packed into one row of ``T`` tokens must not see each other: ``document_ids[b, t]`` is the
    document of token ``t`` in row ``b``, and query ``q`` may attend to key ``kv`` when
    ``document_ids[b, q] == document_ids[b, kv]`` (and ``kv <= q`` if ``causal``). Each batch row has its own
    documents: ids are compared within row ``b`` only.

    Args:
        document_ids: integer ``(B, T)``, e.g. ``[[0, 0, 0, 1, 1, 2, ...]]``.
        causal: hide keys after the query.

    Returns:
        ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        ValueError: if ``document_ids`` is not a 2-D integer tensor.

    Source: the document mask of Dong et al. 2024 (section 4, "document masking / jagged sequences").
    """
    if document_ids.ndim != 2 or document_ids.is_floating_point() or document_ids.dtype == torch.bool:
        raise ValueError(
            f"document_ids must be an integer (B, T) tensor, got {document_ids.dtype} {tuple(document_ids.shape)}"
        )
    ### BEGIN SOLUTION

    def mask_mod(b, h, q_idx, kv_idx):
        same = document_ids[b, q_idx] == document_ids[b, kv_idx]
        return same & (kv_idx <= q_idx) if causal else same

    return mask_mod
    ### END SOLUTION


def prefix_lm_mask(prefix_lengths: torch.Tensor) -> MaskMod:
    """Prefix language model (前缀语言模型): bidirectional over the prefix, causal after it.

    Row ``b``'s first ``prefix_lengths[b]`` tokens (the prompt, or T5's / UniLM's source) see each other in both
    directions; the rest is causal. Query ``q`` may attend to key ``kv`` when ``kv <= q`` or
    ``kv < prefix_lengths[b]``.

    Args:
        prefix_lengths: integer ``(B,)``, each in ``0 … T``.

    Returns:
        ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        ValueError: if ``prefix_lengths`` is not a 1-D integer tensor.

    Source: Raffel et al. 2020 (T5), section 3.2.1 ("prefix LM"); Dong et al. 2019 (UniLM), section 2.
    """
    if prefix_lengths.ndim != 1 or prefix_lengths.is_floating_point() or prefix_lengths.dtype == torch.bool:
        raise ValueError(
            f"prefix_lengths must be an integer (B,) tensor, got {prefix_lengths.dtype} {tuple(prefix_lengths.shape)}"
        )
    ### BEGIN SOLUTION

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) | (kv_idx < prefix_lengths[b])

    return mask_mod
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# 3. score_mods: relative biases and soft-capping (分数修改函数)
# --------------------------------------------------------------------------------------------------


def alibi_slopes(n_heads: int, *, device: torch.device | str | None = None) -> torch.Tensor:
    """ALiBi's head slopes ``m_h = 2^(-8 (h + 1) / H)`` for heads ``h = 0 … H - 1``.

    For ``H = 8``: ``1/2, 1/4, …, 1/256``; a geometric sequence whose first term and ratio are ``2^(-8/H)``.
    Press et al. give this rule for ``H`` a power of two (they interpolate between powers of two otherwise);
    this function applies it to every ``H``.

    Returns:
        float32 ``(H,)``. Raises ValueError if ``n_heads < 1``.

    Source: Press, Smith & Lewis 2022, section 3.
    """
    if n_heads < 1:
        raise ValueError(f"alibi_slopes needs n_heads >= 1, got {n_heads}")
    return torch.exp2(-8.0 * torch.arange(1, n_heads + 1, device=device, dtype=torch.float32) / n_heads)


def alibi_score_mod(n_heads: int) -> ScoreMod:
    """ALiBi as a score_mod: ``score + m_h · (kv_idx - q_idx)``, a penalty growing with the distance to the key.

    Head ``h`` (``0 … H - 1``) has slope ``m_h = 2^(-8 (h + 1) / H)`` (:func:`alibi_slopes`). For the keys a
    causal query sees (``kv <= q``) the bias ``-m_h (q - kv)`` is ``<= 0``: 0 for the query itself, more negative
    the farther back the key. Usually combined with the :func:`causal` mask_mod.

    Args:
        n_heads: ``H`` (int ≥ 1).

    Returns:
        ``score_mod(score, b, h, q_idx, kv_idx) -> score`` (``score``'s dtype and device; the slope is computed
        from ``h`` on its device).

    Raises:
        ValueError: if ``n_heads < 1``.

    Source: Press, Smith & Lewis 2022, section 3 (figure 3: ``softmax(q_i K^T + m · [-(i-1), …, -1, 0])``).
    """
    if n_heads < 1:
        raise ValueError(f"alibi_score_mod needs n_heads >= 1, got {n_heads}")
    ### BEGIN SOLUTION

    def score_mod(score, b, h, q_idx, kv_idx):
        slope = torch.exp2(-8.0 * (h + 1) / n_heads)  # m_h, on h's device
        return score + slope * (kv_idx - q_idx)

    return score_mod
    ### END SOLUTION


def soft_cap_score_mod(cap: float) -> ScoreMod:
    """Logit soft-capping: ``cap · tanh(score / cap)``, scores squashed smoothly into ``(-cap, cap)``.

    Near 0 it is the identity (``tanh x ≈ x``); large scores saturate, so every logit stays within ``(-cap, cap)``
    however large ``q · k`` grows (training stability). It bounds the logits, not the weights: two capped scores
    still differ by up to ``2 · cap``, so one key can still take almost all the weight (a ratio of weights up to
    ``e^(2 cap)``). Gemma 2 caps attention logits at 50.

    Raises:
        ValueError: if ``cap <= 0``.

    Source: Riviere et al. 2024, *Gemma 2*, section 2 ("logit soft-capping").
    """
    if not cap > 0:
        raise ValueError(f"soft_cap_score_mod needs cap > 0, got {cap}")

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    return score_mod


def relative_bias_score_mod(bias: torch.Tensor, max_distance: int) -> ScoreMod:
    """A learned bias per head and clipped relative distance, added to the score (T5-style, without buckets).

    ``score + bias[h, clamp(kv - q, -D, D) + D]``: one learned number per head for each distance up to ``D``,
    distances beyond ``D`` share the last one. T5 groups distances into logarithmic buckets instead; the
    score_mod is the same shape of code with a bucket function in the middle.

    Args:
        bias: float ``(H, 2 D + 1)`` (a parameter: gradients flow to it through ``flex_attention``).
        max_distance: ``D`` (int ≥ 0).

    Returns:
        ``score_mod(score, b, h, q_idx, kv_idx) -> score``.

    Raises:
        ValueError: if ``bias`` is not ``(H, 2 D + 1)``.

    Source: Shaw, Uszkoreit & Vaswani 2018, section 3.2 (clipping); Raffel et al. 2020, section 2.1 (per-head
    scalar biases).
    """
    if max_distance < 0 or bias.ndim != 2 or bias.shape[1] != 2 * max_distance + 1:
        raise ValueError(f"bias must be (H, 2·max_distance + 1 = {2 * max_distance + 1}), got {tuple(bias.shape)}")

    def score_mod(score, b, h, q_idx, kv_idx):
        distance = (kv_idx - q_idx).clamp(-max_distance, max_distance) + max_distance
        return score + bias[h, distance]

    return score_mod


# --------------------------------------------------------------------------------------------------
# 4. The BlockMask: which tiles a kernel visits (块掩码)
# --------------------------------------------------------------------------------------------------


def block_counts(block_mask: BlockMask) -> dict[str, int]:
    """Tiles of a ``BlockMask``, summed over its batch and head rows: partial, full, skipped and all.

    ``create_block_mask`` cuts the ``(T_q, T_k)`` table into ``BLOCK_SIZE`` tiles (128 × 128 by default) and keeps,
    per row of query blocks, the key blocks to visit: *full* ones (every pair allowed, no mask_mod call needed)
    and *partial* ones (the kernel evaluates mask_mod inside). The others are skipped — never loaded, never
    multiplied. ``BlockMask.sparsity()`` is ``100 · skipped / all``.

    Returns:
        ``{"partial": int, "full": int, "skipped": int, "total": int}``.
    """
    partial = int(block_mask.kv_num_blocks.sum())
    full = int(block_mask.full_kv_num_blocks.sum()) if block_mask.full_kv_num_blocks is not None else 0
    rows = block_mask.kv_num_blocks.numel()  # (B, H, n_q) rows of query blocks
    n_k = -(-block_mask.seq_lengths[1] // block_mask.BLOCK_SIZE[1])  # key blocks per row
    total = rows * n_k
    return {"partial": partial, "full": full, "skipped": total - partial - full, "total": total}


def flash_causal_key_blocks(T: int, block: int) -> int:
    """Key blocks chapter 11's causal forward kernel visits for ``T`` queries and keys, square tiles of ``block``.

    Read off :func:`solutions.ch11_flash_attention_triton.flash_forward_traffic` (one byte per number, ``d_k = 1``,
    ``d_v = 0``: its bytes are ``T`` queries + the keys its loops read + ``4 T`` for the log-sum-exps), so the count
    is the kernel's own loop bound, ``1 + 2 + … + ceil(T / block)`` when ``block`` divides ``T``.

    Raises:
        ValueError: if ``T < 1`` or ``block < 1``.
    """
    if T < 1 or block < 1:
        raise ValueError(f"flash_causal_key_blocks needs T >= 1 and block >= 1, got T={T}, block={block}")
    # chapter 11 imports Triton: imported here, so that the rest of this chapter needs only torch
    from solutions.ch11_flash_attention_triton import flash_forward_traffic

    bytes_ = flash_forward_traffic(1, 1, T, T, 1, 0, block_q=block, block_k=block, element_size=1, causal=True)
    return -(-(bytes_ - 5 * T) // block)  # keys read / block (the last block may be short)


# --------------------------------------------------------------------------------------------------
# 5. Decoding with chapter 8's cache: a mask_mod with an offset (解码时的偏移)
# --------------------------------------------------------------------------------------------------


def offset_mask_mod(mask_mod: MaskMod, offset: int) -> MaskMod:
    """Shift the queries of a mask_mod by ``offset`` positions: query ``i`` stands for position ``offset + i``.

    While decoding with a cache, ``flex_attention`` sees ``T_new`` queries against ``T_k`` keys and numbers the
    queries from 0; the new tokens really sit at ``T_k - T_new …``. Passing ``offset = T_k - T_new`` turns
    :func:`causal` into chapter 3's bottom-right aligned ``causal_mask(T_q, T_k)``.

    Raises:
        ValueError: if ``offset < 0``.
    """
    if offset < 0:
        raise ValueError(f"offset_mask_mod needs offset >= 0, got {offset}")

    def shifted(b, h, q_idx, kv_idx):
        return mask_mod(b, h, q_idx + offset, kv_idx)

    return shifted


def attend_with_cache_flex(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cache: KVCache,
    layer: int,
    mask_mod: MaskMod = causal,
    *,
    score_mod: ScoreMod | None = None,
) -> torch.Tensor:
    """Chapter 8's ``attend_with_cache`` with FlexAttention: append to the cache, then attend with shifted mods.

    The new keys and values go into ``cache`` (chapter 8's :class:`~solutions.ch08_kv_cache.KVCache`); the queries
    of the ``T_new`` new tokens then attend to all ``T_k`` cached keys through ``flex_attention`` with
    ``offset_mask_mod(mask_mod, T_k - T_new)`` (and the score_mod shifted the same way), ``enable_gqa`` when the
    cache holds fewer key/value heads than there are query heads. Eager mode (a reference; compile it for speed).

    Args:
        q: ``(B, H, T_new, d_head)``. k, v: ``(B, H_kv, T_new, d_head)``, ``(B, H_kv, T_new, d_v)``; ``H_kv``
            divides ``H``. cache, layer: as chapter 8. mask_mod: a rule on absolute positions (default
            :func:`causal`). score_mod: optional, also on absolute positions.

    Returns:
        ``(B, H, T_new, d_v)``.

    Raises:
        ValueError: if the shapes do not fit.

    Source: chapter 8 (Pope et al. 2023's decoding); PyTorch's FlexAttention documentation (decoding with an
    offset).
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or q.shape[1] % k.shape[1] or q.shape[2] != k.shape[2]:
        raise ValueError(
            f"need q (B, H, T_new, d), k (B, H_kv, T_new, d), v (B, H_kv, T_new, d_v) with H_kv | H, got "
            f"q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    k_all, v_all = cache.update(layer, k, v)  # (B, H_kv, T_k, d)
    T_new, T_k = q.shape[2], k_all.shape[2]
    offset = T_k - T_new
    block_mask = create_block_mask(offset_mask_mod(mask_mod, offset), None, None, T_new, T_k, device=q.device)
    shifted_score = None
    if score_mod is not None:
        base = score_mod

        def shifted_score(score, b, h, q_idx, kv_idx):
            return base(score, b, h, q_idx + offset, kv_idx)

    out = flex_attention(
        q, k_all, v_all, score_mod=shifted_score, block_mask=block_mask, enable_gqa=k_all.shape[1] != q.shape[1]
    )
    return out  # a tensor: no aux requested
