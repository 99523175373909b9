"""Chapter 8 — The KV cache (KV 缓存), and the attention variants built to shrink it: MQA, GQA, MLA.

A decoder generates one token at a time. Without a cache, step ``t`` recomputes the keys and values of all
``t`` earlier tokens, although they never change (a token's key depends only on the tokens up to it). The
*key/value cache* keeps them: the prompt is processed once (*prefill*), then each step feeds only the new token
(*decode*) and attends to the cached keys and values. Its size is

    2 · n_layers · n_kv_heads · d_head · T · bytes_per_element

bytes (keys and values, every layer, every cached position) — the reason for the variants that share key/value
heads among query heads (multi-query attention 多查询注意力, Shazeer 2019; grouped-query attention 分组查询注意力,
Ainslie et al. 2023) or cache a low-rank latent instead (multi-head latent attention 多头潜在注意力,
DeepSeek-AI 2024, "DeepSeek-V2", section 2.1).

Reading order follows the book:

1. :class:`KVCache`, :func:`kv_cache_bytes` — the cache and its size;
2. :func:`repeat_kv` — one key/value head serves a group of ``n_heads / n_kv_heads`` query heads;
3. :func:`attend_with_cache` — append the new keys/values, attend with a bottom-right aligned causal mask;
4. :func:`gpt_forward_with_cache`, :class:`CachedGPT`, :func:`generate_with_cache` — chapter 6's GPT and
   chapter 6's ``generate`` with a cache, token for token equal to generation without one;
5. :func:`rope_angles`, :func:`apply_rope` — rotary position embeddings (旋转位置编码; Su et al. 2021);
6. :class:`GroupedQueryAttention`, :func:`convert_to_gqa` — Llama-style GQA, and turning a trained multi-head
   GPT into a GQA one by mean-pooling its key/value heads (Ainslie et al. 2023, section 2.1);
7. :class:`MultiHeadLatentAttention`, :func:`mla_cache_bytes` — DeepSeek-V2's MLA with decoupled RoPE.

Everything else is imported: the causal mask and attention from chapter 3, ``split_heads``/``merge_heads``
from chapter 4, the GPT and ``generate`` from chapter 6. Masks are True = may attend.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention, merge_heads, split_heads
from solutions.ch06_gpt import GPT, Block, generate

__all__ = [
    "KVCache",
    "kv_cache_bytes",
    "repeat_kv",
    "attend_with_cache",
    "gpt_forward_with_cache",
    "CachedGPT",
    "generate_with_cache",
    "rope_angles",
    "apply_rope",
    "GroupedQueryAttention",
    "convert_to_gqa",
    "MultiHeadLatentAttention",
    "mla_cache_bytes",
]


# --------------------------------------------------------------------------------------------------
# 1. The cache (KV 缓存) and its size
# --------------------------------------------------------------------------------------------------


class KVCache:
    """Keys and values of every position seen so far, one pair of tensors per layer.

    ``keys[l]``, ``values[l]``: ``(B, H_kv, T_cached, d_head)`` (``d_v`` for values) for layer ``l``. Layers
    are filled in order by :meth:`update`, which appends along the time axis (dim -2). Multi-head latent
    attention stores its latent ``(B, 1, T, d_c)`` and its shared rotary key ``(B, 1, T, d_rope)`` in the same
    two slots.
    """

    def __init__(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    def length(self, layer: int = 0) -> int:
        """Number of cached positions of ``layer`` (0 when empty). Read it *before* a forward pass: during one,
        earlier layers already hold the new positions."""
        return self.keys[layer].shape[-2] if layer < len(self.keys) else 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k (B, H_kv, T_new, d_head)``, ``v (B, H_kv, T_new, d_v)`` to layer ``layer``'s cache;
        return all its keys and values, ``(B, H_kv, T_cached + T_new, ·)``, the old positions first.

        Raises:
            ValueError: if k, v are not 4-D with the same ``(B, H_kv, T_new)``, do not fit the cached ones, or
                ``layer`` skips a layer that was never filled.
        """
        if k.ndim != 4 or v.ndim != 4 or k.shape[:-1] != v.shape[:-1]:
            raise ValueError(
                f"k and v must be (B, H_kv, T_new, d) with the same B, H_kv, T_new; got k{tuple(k.shape)}, v{tuple(v.shape)}"
            )
        if layer == len(self.keys):  # the first tokens this layer sees (prefill)
            # A copy: k and v are often views into a larger projection output (q|k|v), which would stay alive.
            self.keys.append(k.clone(memory_format=torch.contiguous_format))
            self.values.append(v.clone(memory_format=torch.contiguous_format))
        elif 0 <= layer < len(self.keys):
            old_k, old_v = self.keys[layer], self.values[layer]
            if old_k.shape[:2] != k.shape[:2] or old_k.shape[-1] != k.shape[-1] or old_v.shape[-1] != v.shape[-1]:
                raise ValueError(
                    f"layer {layer}: new k{tuple(k.shape)}, v{tuple(v.shape)} do not fit the cached "
                    f"k{tuple(old_k.shape)}, v{tuple(old_v.shape)} (same B, H_kv and widths needed)"
                )
            self.keys[layer] = torch.cat([old_k, k], dim=-2)  # (B, H_kv, T_cached + T_new, d_head)
            self.values[layer] = torch.cat([old_v, v], dim=-2)
        else:
            raise ValueError(f"layer {layer}: the cache holds {len(self.keys)} layers; fill them in order")
        return self.keys[layer], self.values[layer]

    def nbytes(self) -> int:
        """Bytes held by the cached tensors (``numel · element_size`` summed over every stored tensor)."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


def kv_cache_bytes(
    n_layers: int,
    n_kv_heads: int,
    d_head: int,
    T: int,
    bytes_per_element: int = 4,
    *,
    n_kv_layers: int | None = None,
) -> int:
    """The cache of a (grouped-query) multi-head attention model: ``2 · n_kv_layers · n_kv_heads · d_head · T · bytes``.

    Per batch element: a key and a value vector of width ``d_head`` for every key/value head, layer and
    position. ``n_kv_heads = n_heads`` is multi-head attention (MHA), 1 is MQA (Shazeer 2019).

    Cross-layer KV sharing (跨层键值共享): only ``n_kv_layers`` of the ``n_layers`` layers compute and cache keys and
    values; the others attend to the cache of an earlier layer (Brandon et al. 2024's cross-layer attention; Gemma
    3n/4's "KV sharing"). ``None`` (the default) means every layer keeps its own cache.

    Raises:
        ValueError: if ``n_kv_layers`` is not in ``1 … n_layers``.

    Source: Shazeer 2019; Ainslie et al. 2023; Brandon et al. 2024, section 2.
    """
    n_kv_layers = n_layers if n_kv_layers is None else n_kv_layers
    if not 1 <= n_kv_layers <= n_layers:
        raise ValueError(f"n_kv_layers must lie in 1 … n_layers={n_layers}, got {n_kv_layers}")
    return 2 * n_kv_layers * n_kv_heads * d_head * T * bytes_per_element


# --------------------------------------------------------------------------------------------------
# 2. Sharing key/value heads: MQA and GQA (多查询注意力 / 分组查询注意力)
# --------------------------------------------------------------------------------------------------


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Repeat each key/value head ``n_rep`` times: ``(B, H_kv, T, d) -> (B, H_kv · n_rep, T, d)``.

    Output head ``i`` is input head ``i // n_rep``: query heads ``j·n_rep … (j+1)·n_rep - 1`` form group ``j``
    and share key/value head ``j`` (Ainslie et al. 2023, section 2.2) — the order of
    ``torch.repeat_interleave(x, n_rep, dim=1)``, of ``F.scaled_dot_product_attention(..., enable_gqa=True)``
    and of Hugging Face's Llama. (``x.repeat(1, n_rep, 1, 1)`` gives head ``i % H_kv`` instead: wrong groups.)

    Args:
        x: ``(B, H_kv, T, d)`` keys or values, any dtype/device.
        n_rep: ``n_heads // n_kv_heads`` (≥ 1); 1 returns ``x`` itself.

    Raises:
        ValueError: if ``x`` is not 4-D or ``n_rep < 1``.
    """
    if x.ndim != 4:
        raise ValueError(f"repeat_kv expects (B, H_kv, T, d), got shape {tuple(x.shape)}")
    if n_rep < 1:
        raise ValueError(f"n_rep must be >= 1, got {n_rep}")
    ### BEGIN SOLUTION
    if n_rep == 1:
        return x
    B, H_kv, T, d = x.shape
    x = x[:, :, None].expand(B, H_kv, n_rep, T, d)  # (B, H_kv, n_rep, T, d): a view, no copy yet
    return x.reshape(B, H_kv * n_rep, T, d)  # head j·n_rep + r is kv head j
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# 3. One attention step with the cache: append, then attend with a bottom-right causal mask
# --------------------------------------------------------------------------------------------------


def attend_with_cache(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache, layer: int) -> torch.Tensor:
    """Causal attention of the new tokens' queries to every cached key, after caching the new keys and values.

    The ``T_new`` new tokens sit at positions ``T_cached … T_cached + T_new - 1``; query ``i`` may attend to
    keys ``0 … T_cached + i``: the causal mask is aligned to the *bottom right* of the ``(T_q, T_k)`` score
    matrix (chapter 3's ``causal_mask(T_q, T_k)``). Prefill is the call with an empty cache (``T_q = T_k``);
    a decode step has ``T_q = 1`` and needs no mask at all.

    Args:
        q: ``(B, H, T_new, d_head)`` queries of the new tokens.
        k, v: ``(B, H_kv, T_new, d_head)``, ``(B, H_kv, T_new, d_v)`` their keys and values; ``H_kv`` divides
            ``H`` (``H_kv = H``: multi-head attention; 1: multi-query attention).
        cache: the :class:`KVCache`, updated in place.
        layer: which layer's cache to use.

    Returns:
        ``(B, H, T_new, d_v)``: the attention output per head (chapter 3's ``softmax(QK^T/sqrt(d))V``).

    Raises:
        ValueError: if the shapes do not fit (B, T_new, d_head shared; H divisible by H_kv).
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            f"q, k, v must be 4-D (B, H, T, d); got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2] or q.shape[-1] != k.shape[-1] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"q{tuple(q.shape)} and k{tuple(k.shape)} must share B, T_new and d_head, and H_kv must divide H"
        )
    ### BEGIN SOLUTION
    k, v = cache.update(layer, k, v)  # (B, H_kv, T_k, d): cached positions first, then the new ones
    T_q, T_k = q.shape[-2], k.shape[-2]
    mask = causal_mask(T_q, T_k, device=q.device)  # (T_q, T_k), bottom-right: query i is at position T_k - T_q + i
    n_rep = q.shape[1] // k.shape[1]  # query heads per key/value head
    heads, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)
    return heads  # (B, H, T_q, d_v)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# 4. Chapter 6's GPT with a cache
# --------------------------------------------------------------------------------------------------


def _attention_with_cache(
    attn: nn.Module, h: torch.Tensor, cache: KVCache, layer: int, attend: Callable[..., torch.Tensor] | None = None
) -> torch.Tensor:
    """One block's attention sub-layer on the new tokens ``h (B, T_new, C)`` with the cache -> ``(B, T_new, C)``;
    ``attend`` (default :func:`attend_with_cache`) attends with the cache."""
    attend = attend_with_cache if attend is None else attend
    if isinstance(attn, FusedMultiHeadSelfAttention):  # chapter 4/6: one W_qkv, n_kv_heads = n_heads
        q, k, v = attn.W_qkv(h).split(attn.d_model, dim=-1)  # 3 × (B, T_new, C)
        q, k, v = (split_heads(t, attn.n_heads) for t in (q, k, v))  # 3 × (B, H, T_new, d_head)
        return attn.W_o(merge_heads(attend(q, k, v, cache, layer)))  # (B, T_new, C)
    if isinstance(attn, (GroupedQueryAttention, MultiHeadLatentAttention)):
        return attn(h, cache=cache, layer=layer)[0]
    raise TypeError(f"no cached path for attention module {type(attn).__name__}")


def gpt_forward_with_cache(
    model: GPT, idx: torch.Tensor, cache: KVCache, attend: Callable[..., torch.Tensor] | None = None
) -> torch.Tensor:
    """Chapter 6's ``GPT.forward`` for new tokens ``idx (B, T_new)`` after the ``cache.length()`` cached ones.

    The new tokens get position ids ``T_cached … T_cached + T_new - 1`` (offset by the cache length: they
    continue the sequence), every block attends with :func:`attend_with_cache`, and the cache grows by
    ``T_new``. ``attend`` replaces :func:`attend_with_cache` in chapter 6's blocks (the notebook passes the
    student's own). Returns logits ``(B, T_new, vocab_size)``, equal to the last ``T_new`` rows of
    ``model(all tokens so far)``. Works for chapter 6's blocks and for blocks whose ``attn`` is a
    :class:`GroupedQueryAttention` (from :func:`convert_to_gqa`).

    Raises:
        ValueError: if ``idx`` is not ``(B, T_new)`` or the cached plus new tokens exceed ``context_length``.
    """
    if idx.ndim != 2:
        raise ValueError(f"idx must be (B, T_new) token ids, got shape {tuple(idx.shape)}")
    T_past, T_new = cache.length(), idx.shape[1]
    if T_past + T_new > model.context_length:
        raise ValueError(
            f"{T_past} cached + {T_new} new tokens exceed context_length={model.context_length}: crop and recompute"
        )
    position_ids = torch.arange(T_past, T_past + T_new, device=idx.device)  # (T_new,): continue after the cache
    x = model.drop(model.wte(idx) + model.wpe(position_ids))  # (B, T_new, C)
    for layer, block in enumerate(model.h):
        block = cast(Block, block)
        x = x + _attention_with_cache(block.attn, block.ln_1(x), cache, layer, attend)  # pre-LN, as ch. 6's Block
        x = x + block.mlp(block.ln_2(x))  # (B, T_new, C)
    return model.lm_head(model.ln_f(x))  # (B, T_new, vocab_size)


class CachedGPT(nn.Module):
    """Wrap a chapter 6 GPT so that chapter 6's :func:`~solutions.ch06_gpt.generate` decodes with a KV cache.

    ``generate`` calls ``model(window, position_ids)`` with the last ``≤ context_length`` tokens and positions
    ``0 … T-1``, and reads only the last position's logits. This wrapper compares the window with what it has
    cached:

    * window = cached tokens + one new token: a **decode** step — only the new token goes through the model;
    * anything else (the first call, or a window that has moved because the context was cropped): **prefill** —
      a fresh cache is filled from the whole window.

    With learned absolute positions (chapter 6), cropping shifts every token of the window to a new position, so
    every cached key is stale: the cache is recomputed at each step past ``context_length``, exactly what
    ``generate`` without a cache computes — the two give the same tokens. Counters ``prefills`` and
    ``decode_steps`` say which path each call took. ``attend`` (default :func:`attend_with_cache`) is the function
    the blocks attend with: the notebook passes the student's own.

    Shapes: ``forward(idx (B, T), position_ids (T,) = 0…T-1 | None) -> logits (B, T_new, vocab_size)`` with
    ``T_new = 1`` on a decode step, ``T`` on a prefill.

    Raises:
        ValueError: if ``position_ids`` is not ``0 … T-1`` (the cache assumes windows start at position 0).
    """

    def __init__(self, model: GPT, attend: Callable[..., torch.Tensor] | None = None):
        super().__init__()
        self.model = model
        self.attend = attend  # None: attend_with_cache (the notebook's Try-it cell passes the student's own)
        self.context_length = model.context_length
        self.cache = KVCache()
        self.tokens: torch.Tensor | None = None  # (B, T_cached): the tokens whose keys/values are cached
        self.prefills = 0
        self.decode_steps = 0

    def forward(self, idx: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        T = idx.shape[1]
        if position_ids is not None and not torch.equal(position_ids.cpu(), torch.arange(T)):
            raise ValueError("CachedGPT expects position ids 0 … T-1 for every window")
        n = self.cache.length()
        extends_cache = self.tokens is not None and T == n + 1 and torch.equal(idx[:, :n], self.tokens)
        if extends_cache:
            logits = gpt_forward_with_cache(self.model, idx[:, n:], self.cache, self.attend)  # decode: new token
            self.decode_steps += 1
        else:
            self.cache = KVCache()  # prefill (or recompute after a crop): the whole window
            logits = gpt_forward_with_cache(self.model, idx, self.cache, self.attend)
            self.prefills += 1
        self.tokens = idx
        return logits


def generate_with_cache(model: GPT, idx: torch.Tensor, max_new_tokens: int, **sampling) -> torch.Tensor:
    """Chapter 6's ``generate(model, idx, max_new_tokens, **sampling)`` with a KV cache (:class:`CachedGPT`).

    Same arguments (``temperature``, ``top_k``, ``top_p``, ``generator``), same output ``(B, T0 + max_new_tokens)``:
    the sampling code is chapter 6's, only the model calls are cached.
    """
    return generate(CachedGPT(model), idx, max_new_tokens, **sampling)


# --------------------------------------------------------------------------------------------------
# 5. Rotary position embeddings (旋转位置编码; Su et al. 2021)
# --------------------------------------------------------------------------------------------------


def rope_angles(position_ids: torch.Tensor, d: int, theta: float = 10000.0) -> torch.Tensor:
    r"""Rotation angles :math:`m\,\theta_i` with :math:`\theta_i = \mathrm{theta}^{-2i/d}`, ``i = 0 … d/2 - 1``.

    Args:
        position_ids: ``(T,)`` or ``(B, T)`` integer positions ``m``.
        d: the width that is rotated (even): pairs of features turn by the same angle.
        theta: the base (10000 in Su et al. 2021, eq. 15, and in Llama).

    Returns:
        ``(T, d/2)`` or ``(B, T, d/2)`` float32 angles on ``position_ids.device``.

    Raises:
        ValueError: if ``d`` is odd or not positive.
    """
    if d < 2 or d % 2:
        raise ValueError(f"the rotated width d must be even and positive, got {d}")
    inv_freq = theta ** (-torch.arange(0, d, 2, dtype=torch.float32, device=position_ids.device) / d)  # (d/2,)
    return position_ids[..., None].float() * inv_freq  # (..., T, d/2)


def apply_rope(x: torch.Tensor, angles: torch.Tensor, *, interleaved: bool = False) -> torch.Tensor:
    r"""Rotate each pair of features of ``x`` by its angle: RoPE (Su et al. 2021, eq. 34).

    :math:`(x_a, x_b) \mapsto (x_a\cos m\theta_i - x_b\sin m\theta_i,\ x_a\sin m\theta_i + x_b\cos m\theta_i)`.
    The dot product of a rotated query at position ``m`` and a rotated key at position ``n`` depends on
    ``m - n`` only: relative positions, with nothing added to the token embeddings.

    Which features form a pair is a convention: ``interleaved=True`` pairs ``(2i, 2i+1)`` as the paper and
    DeepSeek-V2 do; ``False`` pairs ``(i, i + d/2)`` as GPT-NeoX and Hugging Face's Llama (``rotate_half``).
    The two differ by a fixed permutation of the features, which a trained ``W^Q, W^K`` absorbs.

    Args:
        x: ``(B, H, T, d)`` queries or keys.
        angles: ``(T, d/2)`` or ``(B, T, d/2)`` from :func:`rope_angles`.

    Returns:
        ``(B, H, T, d)`` in ``x``'s dtype.

    Raises:
        ValueError: if the shapes do not fit.
    """
    if x.ndim != 4 or angles.shape[-1] * 2 != x.shape[-1] or angles.shape[-2] != x.shape[-2]:
        raise ValueError(f"x (B, H, T, d) {tuple(x.shape)} and angles (…, T, d/2) {tuple(angles.shape)} do not fit")
    if angles.ndim == 3:
        angles = angles[:, None]  # (B, 1, T, d/2): the same rotation for every head
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if interleaved:
        x_a, x_b = x[..., 0::2], x[..., 1::2]  # (…, d/2) each: pairs (2i, 2i+1)
        return torch.stack([x_a * cos - x_b * sin, x_a * sin + x_b * cos], dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    x_a, x_b = x[..., :half], x[..., half:]  # pairs (i, i + d/2)
    return torch.cat([x_a * cos - x_b * sin, x_a * sin + x_b * cos], dim=-1)


# --------------------------------------------------------------------------------------------------
# 6. Grouped-query attention (Llama-style), and converting a multi-head GPT
# --------------------------------------------------------------------------------------------------


class GroupedQueryAttention(nn.Module):
    """Causal grouped-query self-attention: ``n_heads`` query heads share ``n_kv_heads`` key/value heads.

    ``W_q: d_model → n_heads·d_head``, ``W_k, W_v: d_model → n_kv_heads·d_head``, ``W_o: n_heads·d_head →
    d_model``; rotary position embeddings on queries and keys unless ``rope_theta`` is None (Ainslie et al.
    2023; the layout of Hugging Face's ``LlamaAttention``, whose weights copy over one to one).

    Args:
        d_model: model width. n_heads: query heads. n_kv_heads: key/value heads, dividing ``n_heads``
            (= n_heads: MHA; 1: MQA).
        d_head: per-head width (default ``d_model // n_heads``).
        rope_theta: RoPE base; None: no rotation (the model has learned absolute positions, as chapter 6's).
        bias: biases in the four projections (Llama: False; chapter 6's GPT: True).

    Shapes:
        ``forward(x (B, T, d_model), mask=None, use_sdpa=False, is_causal=True, *, cache=None, layer=0) ->
        (output (B, T, d_model), None)``. Without ``mask`` the attention is causal, through
        :func:`attend_with_cache` (with ``cache``: positions continue after the cached ones; without: a throw-away
        cache); chapter 6's ``Block`` calls it so, with ``is_causal=True``. With ``mask`` (bool, True = may attend,
        broadcastable to ``(B, H, T, T)``), combined with the causal mask unless ``is_causal=False``, chapter 3's
        attention is used or, with ``use_sdpa``, PyTorch's ``F.scaled_dot_product_attention(...,
        enable_gqa=True)``. The second output (no weights) keeps
        chapter 4's ``(output, weights)`` interface.

    Raises:
        ValueError: if the sizes do not divide, ``x`` is not ``(B, T, d_model)``, or both mask and cache are given.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_kv_heads: int,
        *,
        d_head: int | None = None,
        rope_theta: float | None = 10000.0,
        bias: bool = False,
    ):
        super().__init__()
        if n_heads < 1 or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; give d_head")
            d_head = d_model // n_heads
        if rope_theta is not None and d_head % 2:
            raise ValueError(f"RoPE rotates pairs of features: d_head={d_head} must be even (or rope_theta=None)")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_head = d_model, n_heads, n_kv_heads, d_head
        self.rope_theta = rope_theta
        self.W_q = nn.Linear(d_model, n_heads * d_head, bias=bias)
        self.W_k = nn.Linear(d_model, n_kv_heads * d_head, bias=bias)
        self.W_v = nn.Linear(d_model, n_kv_heads * d_head, bias=bias)
        self.W_o = nn.Linear(n_heads * d_head, d_model, bias=bias)

    def project(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x (B, T, d_model)`` at positions ``position_ids (T,)`` -> ``q (B, H, T, d_head)``, ``k, v (B, H_kv,
        T, d_head)``, queries and keys rotated (RoPE, half-split pairs as Llama)."""
        q = split_heads(self.W_q(x), self.n_heads)  # (B, T, H·d_head) -> (B, H, T, d_head)
        k = split_heads(self.W_k(x), self.n_kv_heads)  # (B, H_kv, T, d_head)
        v = split_heads(self.W_v(x), self.n_kv_heads)  # (B, H_kv, T, d_head)
        if self.rope_theta is not None:
            angles = rope_angles(position_ids, self.d_head, self.rope_theta)  # (T, d_head/2)
            q, k = apply_rope(q, angles), apply_rope(k, angles)
        return q, k, v

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        use_sdpa: bool = False,
        is_causal: bool = True,
        *,
        cache: KVCache | None = None,
        layer: int = 0,
    ) -> tuple[torch.Tensor, None]:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        if mask is not None and is_causal:  # chapter 6's Block asks for is_causal=True: the mask then joins it
            mask = mask & causal_mask(x.shape[1], device=x.device)
        if mask is not None and cache is not None:
            raise ValueError("give a mask or a cache, not both: with a cache the mask is the causal one")
        T_past = cache.length(layer) if cache is not None else 0
        position_ids = torch.arange(T_past, T_past + x.shape[1], device=x.device)  # offset by the cache length
        q, k, v = self.project(x, position_ids)
        if mask is None:
            heads = attend_with_cache(q, k, v, KVCache() if cache is None else cache, layer)
        elif use_sdpa:
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        else:
            n_rep = self.n_heads // self.n_kv_heads
            heads = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)[0]
        return self.W_o(merge_heads(heads)), None  # (B, T, d_model)


@torch.no_grad()
def convert_to_gqa(model: GPT, n_kv_heads: int) -> GPT:
    """A copy of chapter 6's ``model`` whose attention has ``n_kv_heads`` key/value heads, by mean-pooling.

    Key (and value) heads ``j·g … (j+1)·g - 1``, ``g = n_heads / n_kv_heads``, are averaged into key head ``j``
    — weights and biases — the groups :func:`repeat_kv` forms (Ainslie et al. 2023, section 2.1: mean-pooling
    beat keeping one head or random initialisation; the model is then *uptrained* briefly). Queries, output
    projection, MLPs, norms and embeddings are copied unchanged; positions stay learned (``rope_theta=None``).
    The original is not modified. ``n_kv_heads = n_heads`` gives the same function as ``model``.

    Raises:
        ValueError: if ``n_kv_heads`` does not divide ``n_heads``.
    """
    config = model.config
    C, H = config.d_model, config.n_heads
    if n_kv_heads < 1 or H % n_kv_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={H}")
    g, d_head = H // n_kv_heads, C // H
    new = copy.deepcopy(model)
    for block in new.h:
        old = block.attn
        if not isinstance(old, FusedMultiHeadSelfAttention):
            raise ValueError(f"convert_to_gqa needs chapter 6's multi-head attention, found {type(old).__name__}")
        gqa = GroupedQueryAttention(C, H, n_kv_heads, rope_theta=None, bias=True).to(old.W_o.weight)
        W_q, W_k, W_v = old.W_qkv.weight.split(C)  # 3 × (C, C): rows are output features, head by head
        b_q, b_k, b_v = old.W_qkv.bias.split(C)
        gqa.W_q.weight.copy_(W_q)
        gqa.W_q.bias.copy_(b_q)
        for lin, W, b in ((gqa.W_k, W_k, b_k), (gqa.W_v, W_v, b_v)):
            lin.weight.copy_(W.view(n_kv_heads, g, d_head, C).mean(1).reshape(n_kv_heads * d_head, C))
            lin.bias.copy_(b.view(n_kv_heads, g, d_head).mean(1).reshape(n_kv_heads * d_head))
        gqa.W_o.load_state_dict(old.W_o.state_dict())
        block.attn = gqa
    return new


# --------------------------------------------------------------------------------------------------
# 7. Multi-head latent attention (多头潜在注意力; DeepSeek-V2, section 2.1)
# --------------------------------------------------------------------------------------------------


class MultiHeadLatentAttention(nn.Module):
    r"""DeepSeek-V2's multi-head latent attention (DeepSeek-AI 2024, section 2.1, eqs. 9-19), causal.

    Keys and values come from one low-rank latent per token, which is all the cache keeps besides a small
    rotary key shared by the heads:

    * down-projection :math:`c^{KV}_t = W^{DKV} h_t` (``W_dkv``: ``d_model → d_c``), RMS-normalised (``kv_norm``,
      as the released model);
    * up-projections :math:`k^C_t = W^{UK} c^{KV}_t`, :math:`v^C_t = W^{UV} c^{KV}_t` (``W_uk: d_c →
      n_heads·d_head``, ``W_uv: d_c → n_heads·d_v``);
    * decoupled RoPE (RoPE cannot be folded into the latent): a rotary key :math:`k^R_t = \mathrm{RoPE}(W^{KR}
      h_t)` (``W_kr: d_model → d_rope``) shared by all heads, and rotary query parts per head;
    * queries from ``W_q: d_model → n_heads·(d_head + d_rope)`` (each head ``[q^C | q^R]``), or with
      ``d_cq``, through their own latent ``W_dq``, ``q_norm``, ``W_uq`` (eqs. 12-13);
    * attention of ``[q^C; RoPE(q^R)]`` to ``[k^C; k^R]`` scaled by :math:`1/\sqrt{d_{head} + d_{rope}}`, then
      ``W_o: n_heads·d_v → d_model``.

    Cache per token and layer: ``d_c + d_rope`` numbers (:func:`mla_cache_bytes`), against ``2·n_heads·d_head``
    for MHA. The RoPE pairs are interleaved ``(2i, 2i+1)`` as in DeepSeek-V2.

    Shapes:
        ``forward(x (B, T, d_model), *, cache=None, layer=0) -> (output (B, T, d_model), None)``; with ``cache``
        the new tokens continue after the cached positions, and the cache stores ``c^KV (B, 1, T, d_c)`` as
        keys and ``k^R (B, 1, T, d_rope)`` as values.

    Raises:
        ValueError: if ``d_rope`` is odd or ``x`` is not ``(B, T, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_c: int,
        d_head: int,
        d_rope: int,
        d_v: int | None = None,
        *,
        d_cq: int | None = None,
        rope_theta: float = 10000.0,
        eps: float = 1e-6,
    ):
        super().__init__()
        if d_rope < 2 or d_rope % 2:
            raise ValueError(f"d_rope must be even and positive, got {d_rope}")
        d_v = d_head if d_v is None else d_v
        self.d_model, self.n_heads, self.d_c, self.d_head, self.d_rope, self.d_v = (
            d_model,
            n_heads,
            d_c,
            d_head,
            d_rope,
            d_v,
        )
        self.d_cq, self.rope_theta = d_cq, rope_theta
        d_qk = d_head + d_rope
        if d_cq is None:
            self.W_q = nn.Linear(d_model, n_heads * d_qk, bias=False)
        else:
            self.W_dq = nn.Linear(d_model, d_cq, bias=False)
            self.q_norm = nn.RMSNorm(d_cq, eps=eps)
            self.W_uq = nn.Linear(d_cq, n_heads * d_qk, bias=False)
        self.W_dkv = nn.Linear(d_model, d_c, bias=False)  # W^{DKV}: the latent
        self.kv_norm = nn.RMSNorm(d_c, eps=eps)
        self.W_kr = nn.Linear(d_model, d_rope, bias=False)  # W^{KR}: the shared rotary key
        self.W_uk = nn.Linear(d_c, n_heads * d_head, bias=False)  # W^{UK}
        self.W_uv = nn.Linear(d_c, n_heads * d_v, bias=False)  # W^{UV}
        self.W_o = nn.Linear(n_heads * d_v, d_model, bias=False)

    def forward(self, x: torch.Tensor, *, cache: KVCache | None = None, layer: int = 0) -> tuple[torch.Tensor, None]:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        cache = KVCache() if cache is None else cache
        T_past, T = cache.length(layer), x.shape[1]
        angles = rope_angles(torch.arange(T_past, T_past + T, device=x.device), self.d_rope, self.rope_theta)
        q = self.W_q(x) if self.d_cq is None else self.W_uq(self.q_norm(self.W_dq(x)))  # (B, T, H·(d_head+d_rope))
        q = split_heads(q, self.n_heads)  # (B, H, T, d_head + d_rope)
        q_c, q_r = q.split([self.d_head, self.d_rope], dim=-1)
        q = torch.cat([q_c, apply_rope(q_r, angles, interleaved=True)], dim=-1)  # (B, H, T, d_head + d_rope)
        ### BEGIN SOLUTION
        c_kv = self.kv_norm(self.W_dkv(x))[:, None]  # (B, 1, T, d_c): one latent per token, for all heads
        k_r = apply_rope(self.W_kr(x)[:, None], angles, interleaved=True)  # (B, 1, T, d_rope): shared by the heads
        c_kv, k_r = cache.update(layer, c_kv, k_r)  # only the latent and the rotary key are cached
        T_k = c_kv.shape[-2]
        k_c = split_heads(self.W_uk(c_kv[:, 0]), self.n_heads)  # (B, T_k, d_c) -> (B, H, T_k, d_head)
        v = split_heads(self.W_uv(c_kv[:, 0]), self.n_heads)  # (B, H, T_k, d_v)
        k = torch.cat([k_c, k_r.expand(-1, self.n_heads, -1, -1)], dim=-1)  # (B, H, T_k, d_head + d_rope)
        mask = causal_mask(T, T_k, device=x.device)  # bottom-right aligned
        heads, _ = scaled_dot_product_attention(q, k, v, mask)  # scaled by 1/sqrt(d_head + d_rope)
        ### END SOLUTION
        return self.W_o(merge_heads(heads)), None  # (B, T, d_model)


def mla_cache_bytes(n_layers: int, d_c: int, d_rope: int, T: int, bytes_per_element: int = 4) -> int:
    """MLA's cache: ``n_layers · (d_c + d_rope) · T · bytes`` — the latent and the shared rotary key per token."""
    return n_layers * (d_c + d_rope) * T * bytes_per_element
