"""Chapter 9 — Sparse and long-context attention (稀疏注意力).

This module is the single home of the chapter's code. The book page ``book/ch09_sparse_attention.md`` explains
it, the student notebook ``notebooks/ch09_sparse_attention.ipynb`` is generated from it (the regions between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` become the exercises).

Full attention compares every query with every key: ``T²`` scores. Sparse attention keeps a fixed or learned
subset of the ``(query, key)`` pairs. Reading order follows the book:

1. **patterns as masks** (course polarity: True = may attend): the sliding window (滑动窗口注意力, causal and
   bidirectional), the dilated window, global tokens (全局注意力), BigBird's random blocks (随机注意力). Attention
   under such a mask is chapter 3's :func:`~solutions.ch03_self_attention.scaled_dot_product_attention` — it
   still costs ``T²``;
2. **the window as computation**: :func:`sliding_window_attention` cuts the sequence into blocks and lets each
   block of queries see only a slab of nearby keys, so its memory grows as ``O(T·w)`` instead of ``O(T²)``, with
   the same output as the masked dense form;
3. **Longformer's local + global attention** (:func:`longformer_attention`, with its second set of projections
   for the global tokens);
4. **routing attention** (路由注意力): :class:`OnlineKMeans` clusters queries and keys, :func:`routing_mask` lets a
   query see only the keys of its own cluster, :func:`routing_attention` computes that cluster by cluster.

The window width ``window`` is one-sided everywhere in this module: the farthest distance a query may look.
Query ``i`` may attend to key ``j`` when ``|i - j| <= window`` (bidirectional) or ``0 <= i - j <= window``
(causal; ``window + 1`` keys including itself). Libraries count differently: Mistral's ``sliding_window`` is
``window + 1`` (the number of keys a query sees), Longformer's ``attention_window`` is ``2 * window``.

Sources: Beltagy, Peters & Cohan 2020, *Longformer* (sections 3.1–3.2); Zaheer et al. 2020, *Big Bird*
(section 2); Roy, Saffar, Vaswani & Grangier 2021, *Efficient Content-Based Sparse Attention with Routing
Transformers* (section 4); Jiang et al. 2023, *Mistral 7B* (section 2, sliding window attention).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import causal_mask, check_qkv_shapes, scaled_dot_product_attention

__all__ = [
    "sliding_window_mask",
    "dilated_window_mask",
    "global_token_mask",
    "random_block_mask",
    "bigbird_mask",
    "sliding_window_attention",
    "longformer_attention",
    "OnlineKMeans",
    "routing_mask",
    "routing_attention",
    "topk_block_mask",
    "compress_blocks",
    "BlockCompressor",
    "compressed_causal_mask",
    "selection_block_scores",
    "selected_blocks_attention",
    "NativeSparseAttention",
    "lightning_indexer_scores",
]


# --------------------------------------------------------------------------------------------------
# Patterns as masks (稀疏模式即掩码)
# --------------------------------------------------------------------------------------------------


def sliding_window_mask(
    T: int, window: int, *, causal: bool = True, device: torch.device | str | None = None
) -> torch.Tensor:
    """Sliding-window mask (滑动窗口注意力): query ``i`` may attend to key ``j`` when ``j`` is at most ``window`` away.

    Args:
        T: sequence length (int ≥ 1); queries and keys are the same ``T`` positions (self-attention).
        window: one-sided width ``w`` (int ≥ 0). Bidirectional: ``|i - j| <= w`` (``2w + 1`` keys);
            causal: ``0 <= i - j <= w`` (``w + 1`` keys, the query itself included). Mistral's
            ``sliding_window`` is ``w + 1``; Longformer's ``attention_window`` is ``2w``.
        causal: whether keys after the query are hidden too (decoder; chapter 3's :func:`causal_mask`).
        device: where to create the mask.

    Returns:
        ``(T, T)`` bool tensor, True where attending is allowed (a band around the diagonal).

    Raises:
        ValueError: if ``T < 1`` or ``window < 0``.

    Source: Beltagy et al. 2020, section 3.1 ("sliding window"); Jiang et al. 2023, section 2.
    """
    if T < 1 or window < 0:
        raise ValueError(f"sliding_window_mask needs T >= 1 and window >= 0, got T={T}, window={window}")
    ### BEGIN SOLUTION
    i = torch.arange(T, device=device)[:, None]  # (T, 1) query positions
    j = torch.arange(T, device=device)[None, :]  # (1, T) key positions
    band = (i - j).abs() <= window  # (T, T)
    if causal:
        band = band & causal_mask(T, device=device)
    return band
    ### END SOLUTION


def dilated_window_mask(
    T: int, window: int, dilation: int, *, causal: bool = True, device: torch.device | str | None = None
) -> torch.Tensor:
    """Dilated sliding window: ``window`` keys on each side, ``dilation`` positions apart.

    Query ``i`` may attend to key ``j`` when ``i - j`` is a multiple of ``dilation`` and
    ``|i - j| <= window · dilation`` (and ``j <= i`` if ``causal``). The receptive field grows by ``dilation``
    at the same cost; ``dilation = 1`` is :func:`sliding_window_mask`.

    Args:
        T: sequence length (≥ 1). window: keys per side (≥ 0). dilation: gap between attended keys (≥ 1).
        causal: hide keys after the query. device: where to create the mask.

    Returns:
        ``(T, T)`` bool tensor, True = may attend.

    Raises:
        ValueError: if ``T < 1``, ``window < 0`` or ``dilation < 1``.

    Source: Beltagy et al. 2020, section 3.1 ("dilated sliding window").
    """
    if T < 1 or window < 0:
        raise ValueError(f"dilated_window_mask needs T >= 1 and window >= 0, got T={T}, window={window}")
    if dilation < 1:
        raise ValueError(f"dilated_window_mask needs dilation >= 1, got {dilation}")
    offset = torch.arange(T, device=device)[:, None] - torch.arange(T, device=device)[None, :]  # (T, T): i - j
    mask = (offset % dilation == 0) & (offset.abs() <= window * dilation)
    return mask & causal_mask(T, device=device) if causal else mask


def global_token_mask(mask: torch.Tensor, is_global: torch.Tensor, *, causal: bool = False) -> torch.Tensor:
    """Add global tokens (全局注意力) to a mask: they attend to every token, and every token attends to them.

    Args:
        mask: bool ``(..., T, T)`` (e.g. a sliding window), True = may attend.
        is_global: bool ``(..., T)``, True at the global tokens (e.g. ``[CLS]`` or a question's tokens);
            its leading dims broadcast with ``mask``'s, e.g. ``(B, T)`` with a ``(T, T)`` mask gives ``(B, T, T)``.
        causal: keep the result causal: a global token then sees every *earlier* token and is seen by every
            *later* one (no query ever sees its future).

    Returns:
        bool ``(..., T, T)``: ``mask`` plus the rows and the columns of the global tokens.

    Raises:
        ValueError: if the dtypes are not bool, ``mask`` is not square, or the ``T``s differ.

    Source: Beltagy et al. 2020, section 3.2 ("global attention ... symmetric").
    """
    if mask.dtype != torch.bool or is_global.dtype != torch.bool:
        raise ValueError(f"mask and is_global must be bool, got {mask.dtype} and {is_global.dtype}")
    if mask.ndim < 2 or mask.shape[-1] != mask.shape[-2] or is_global.ndim < 1 or is_global.shape[-1] != mask.shape[-1]:
        raise ValueError(
            f"global_token_mask needs mask (..., T, T) and is_global (..., T), "
            f"got mask {tuple(mask.shape)} and is_global {tuple(is_global.shape)}"
        )
    ### BEGIN SOLUTION
    T = mask.shape[-1]
    merged = mask | is_global[..., :, None] | is_global[..., None, :]  # rows and columns of the global tokens
    if causal:
        merged = merged & causal_mask(T, device=mask.device)
    return merged
    ### END SOLUTION


def random_block_mask(
    T: int,
    block_len: int,
    n_random: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """BigBird's random attention (随机注意力): each block of queries sees ``n_random`` random blocks of keys.

    The sequence is cut into ``T / block_len`` blocks; for each query block, ``n_random`` *other* key blocks are
    drawn uniformly without replacement. The draw uses ``generator`` (a CPU ``torch.Generator``): the same seed
    gives the same mask on every device.

    Args:
        T: sequence length, a multiple of ``block_len``. block_len: tokens per block (≥ 1).
        n_random: random key blocks per query block, ``0 <= n_random < T / block_len``.
        generator: CPU generator for the draw (None: torch's global one). device: where to put the mask.

    Returns:
        ``(T, T)`` bool tensor, constant on each ``block_len × block_len`` tile, False on the diagonal tiles.

    Raises:
        ValueError: if ``T`` is not a positive multiple of ``block_len`` or ``n_random`` is out of range.

    Source: Zaheer et al. 2020, section 2 ("random attention"), appendix D (blocked form).
    """
    if block_len < 1 or T < 1 or T % block_len:
        raise ValueError(f"random_block_mask needs T a positive multiple of block_len, got T={T}, block={block_len}")
    n_blocks = T // block_len
    if not 0 <= n_random < n_blocks:
        raise ValueError(f"n_random must lie in [0, {n_blocks - 1}] for {n_blocks} blocks, got {n_random}")
    draw = torch.rand(n_blocks, n_blocks, generator=generator)  # (n_blocks, n_blocks), on the CPU
    draw.fill_diagonal_(-1.0)  # a query block never draws itself
    chosen = draw.topk(n_random, dim=-1).indices  # (n_blocks, n_random): the largest draws, a uniform subset
    blocks = torch.zeros(n_blocks, n_blocks, dtype=torch.bool).scatter_(1, chosen, True)
    mask = blocks.repeat_interleave(block_len, 0).repeat_interleave(block_len, 1)  # (T, T)
    return mask.to(device) if device is not None else mask


def bigbird_mask(
    T: int,
    block_len: int,
    *,
    window_blocks: int = 1,
    n_global_blocks: int = 1,
    n_random: int = 1,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """BigBird's pattern (BigBird-ITC, bidirectional): window + global + random, all in blocks.

    A query block sees the ``window_blocks`` blocks on each side of it, the first ``n_global_blocks`` blocks
    are global (they see and are seen by everything), and each block sees ``n_random`` random blocks
    (:func:`random_block_mask`).

    Returns:
        ``(T, T)`` bool tensor, True = may attend.

    Raises:
        ValueError: as :func:`random_block_mask`, or if ``n_global_blocks`` exceeds the number of blocks.

    Source: Zaheer et al. 2020, section 2 and appendix D (``r`` random, ``w`` window, ``g`` global blocks).
    """
    random = random_block_mask(T, block_len, n_random, generator=generator, device=device)
    n_blocks = T // block_len
    if not 0 <= n_global_blocks <= n_blocks:
        raise ValueError(f"n_global_blocks must lie in [0, {n_blocks}], got {n_global_blocks}")
    block_window = sliding_window_mask(n_blocks, window_blocks, causal=False, device=device)
    window = block_window.repeat_interleave(block_len, 0).repeat_interleave(block_len, 1)  # (T, T)
    is_global = torch.arange(T, device=device) < n_global_blocks * block_len  # (T,)
    return global_token_mask(window | random, is_global)


# --------------------------------------------------------------------------------------------------
# The sliding window as computation: blocks and slabs, O(T·w) memory (分块滑动窗口注意力)
# --------------------------------------------------------------------------------------------------


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    causal: bool = True,
    block_len: int | None = None,
) -> torch.Tensor:
    r"""Sliding-window attention computed block by block: memory ``O(T·w)``, never a ``T × T`` tensor.

    The queries are cut into blocks of ``b`` positions. Block ``n`` (queries ``n·b … n·b + b - 1``) can only
    see keys ``n·b - w … n·b + b - 1 + w`` (``n·b + b - 1`` if causal): a *slab* of ``S = b + 2w`` keys
    (``b + w`` causal). Keys and values are padded with ``w`` zeros in front (and behind), and
    ``Tensor.unfold`` takes every slab as a view, one step of ``b`` apart. Scores are then
    ``(..., T/b, b, S)`` — ``T·S`` numbers, not ``T²``. Inside a slab a mask keeps the band ``-w <= i - j <= w``
    (``0 <= i - j <= w`` causal) and drops the padding; the rest is chapter 3's softmax.

    Args:
        q: ``(..., T, d_k)`` queries. k: ``(..., T, d_k)`` keys. v: ``(..., T, d_v)`` values (self-attention:
            the same ``T``; any leading dims, e.g. ``(B, H, T, d_k)``).
        window: one-sided width ``w`` (≥ 0), as in :func:`sliding_window_mask`.
        causal: hide keys after the query.
        block_len: queries per block ``b`` (default ``max(w, 1)``: memory ``≈ 3·T·w`` scores, ``2·T·w`` causal).

    Returns:
        ``(..., T, d_v)``, equal (to the dtype's tolerance) to
        ``scaled_dot_product_attention(q, k, v, sliding_window_mask(T, window, causal=causal))[0]``.

    Raises:
        ValueError: if the shapes do not fit, ``T_q != T_k``, ``window < 0`` or ``block_len < 1``.

    Source: Beltagy et al. 2020, section 3.1 and their "sliding chunks" implementation; Vaswani et al. 2017, eq. 1.
    """
    check_qkv_shapes(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"sliding_window_attention is self-attention: T_q must equal T_k, got q{tuple(q.shape)}, k{tuple(k.shape)}"
        )
    T = q.shape[-2]
    if T < 1 or window < 0:
        raise ValueError(f"sliding_window_attention needs T >= 1 and window >= 0, got T={T}, window={window}")
    b = max(window, 1) if block_len is None else block_len
    if b < 1:
        raise ValueError(f"block_len must be >= 1, got {block_len}")
    ### BEGIN SOLUTION
    n_blocks = math.ceil(T / b)
    pad_end = n_blocks * b - T  # queries padded to whole blocks
    left, right = window, 0 if causal else window  # keys a block sees before and after itself
    S = b + left + right  # slab width
    q_blocks = F.pad(q, (0, 0, 0, pad_end)).unflatten(-2, (n_blocks, b))  # (..., n_blocks, b, d_k)
    k_slabs = F.pad(k, (0, 0, left, pad_end + right)).unfold(-2, S, b)  # (..., n_blocks, d_k, S), a view
    v_slabs = F.pad(v, (0, 0, left, pad_end + right)).unfold(-2, S, b)  # (..., n_blocks, d_v, S), a view
    scores = q_blocks @ k_slabs / math.sqrt(q.shape[-1])  # (..., n_blocks, b, S)

    r = torch.arange(b, device=q.device)[:, None]  # (b, 1) query offset in its block
    c = torch.arange(S, device=q.device)[None, :]  # (1, S) key offset in the slab
    offset = r + left - c  # (b, S): i - j
    in_band = (offset <= left) & (offset >= -right)  # (b, S)
    key_pos = torch.arange(n_blocks, device=q.device)[:, None] * b - left + c  # (n_blocks, S)
    real_key = (key_pos >= 0) & (key_pos < T)  # (n_blocks, S): not padding
    allowed = in_band[None, :, :] & real_key[:, None, :]  # (n_blocks, b, S)

    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~allowed, 0.0)  # (..., n_blocks, b, S)
    out = weights @ v_slabs.transpose(-2, -1)  # (..., n_blocks, b, d_v)
    return out.flatten(-3, -2)[..., :T, :]  # (..., T, d_v)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# Longformer: local window + global tokens with their own projections (局部 + 全局注意力)
# --------------------------------------------------------------------------------------------------


def longformer_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_global: torch.Tensor,
    window: int,
    *,
    q_global: torch.Tensor,
    k_global: torch.Tensor,
    v_global: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Longformer self-attention: local (window + global keys) rows, and global rows with their own projections.

    * A **non-global** query ``i`` attends, with ``q, k, v``, to the keys in its bidirectional window and to every
      global token (:func:`global_token_mask` of :func:`sliding_window_mask`), in one softmax.
    * A **global** query attends to *every* token with the second set of projections ``q_global, k_global,
      v_global`` (Longformer's ``Q_g, K_g, V_g``).

    Both parts are computed here as chapter 3's dense attention under a mask (``O(T²)``): the point is the
    pattern; :func:`sliding_window_attention` shows the ``O(T·w)`` form of the local part.

    Args:
        q, k, q_global, k_global: ``(B, H, T, d_k)``. v, v_global: ``(B, H, T, d_v)``.
        is_global: bool ``(B, T)``, True at global tokens.
        window: one-sided width ``w`` (Hugging Face's ``attention_window`` is ``2w``).
        attention_mask: optional bool ``(B, T)``, True at real tokens (padding is never attended to).

    Returns:
        ``(B, H, T, d_v)``; rows of padding queries are zero.

    Raises:
        ValueError: if the shapes do not fit.

    Source: Beltagy et al. 2020, sections 3.1–3.2 ("two sets of projections, Q_s, K_s, V_s ... and Q_g, K_g, V_g").
    """
    B, T = q.shape[0], q.shape[-2]
    if q.ndim != 4 or is_global.shape != (B, T):
        raise ValueError(
            f"need q (B, H, T, d_k) and is_global (B, T), got q{tuple(q.shape)}, is_global {tuple(is_global.shape)}"
        )
    for name, t in (("q_global", q_global), ("k_global", k_global), ("v_global", v_global)):
        if t.shape[:-1] != q.shape[:-1]:
            raise ValueError(f"{name} must be (B, H, T, ·) like q{tuple(q.shape)}, got {tuple(t.shape)}")
    keys = torch.ones(B, T, dtype=torch.bool, device=q.device) if attention_mask is None else attention_mask
    if keys.shape != (B, T) or keys.dtype != torch.bool:
        raise ValueError(f"attention_mask must be bool (B, T) = {(B, T)}, got {tuple(keys.shape)} {keys.dtype}")
    local = global_token_mask(sliding_window_mask(T, window, causal=False, device=q.device), is_global)  # (B, T, T)
    local = local & keys[:, None, :] & keys[:, :, None]  # padding neither attends nor is attended to
    out_local, _ = scaled_dot_product_attention(q, k, v, local[:, None])  # (B, H, T, d_v)
    every = (keys[:, None, :] & keys[:, :, None])[:, None]  # (B, 1, T, T)
    out_global, _ = scaled_dot_product_attention(q_global, k_global, v_global, every)  # (B, H, T, d_v)
    return torch.where(is_global[:, None, :, None], out_global, out_local)


# --------------------------------------------------------------------------------------------------
# Routing attention: online k-means, attention within a cluster (路由注意力)
# --------------------------------------------------------------------------------------------------


class OnlineKMeans(nn.Module):
    r"""Online (mini-batch) k-means with centroids updated by an exponential moving average.

    Vectors are compared by direction: they are scaled to unit length, and each is assigned to the centroid
    with the largest dot product (Roy et al. route unit-normalised queries and keys the same way). After a
    batch, each centroid moves towards the mean of the vectors assigned to it:
    :math:`\mu_c \leftarrow \lambda\,\mu_c + (1 - \lambda)\,\bar{x}_c` (``λ = decay``); a centroid that got no
    vector stays. (Roy et al. write the update with queries and keys sharing each centroid: pass both, stacked.)
    The first update seeds the centroids from its own vectors (a random one, then repeatedly the vector farthest
    from every centroid so far: farthest-point seeding, Gonzalez 1985), so that no centroid starts where no vector
    ever goes.

    Args:
        n_clusters: number of centroids ``k`` (≥ 1). d_k: vector width. decay: ``λ`` in ``[0, 1)``.
        generator: CPU generator for the initial (random unit) centroids.

    Buffers:
        ``centroids``: ``(k, d_k)`` float32.

    Source: Roy et al. 2021, section 4.1 (eq. for the centroid update); Sculley 2010 (mini-batch k-means).
    """

    centroids: torch.Tensor
    seeded: torch.Tensor

    def __init__(self, n_clusters: int, d_k: int, decay: float = 0.999, generator: torch.Generator | None = None):
        super().__init__()
        if n_clusters < 1 or d_k < 1 or not 0.0 <= decay < 1.0:
            raise ValueError(f"need n_clusters >= 1, d_k >= 1, 0 <= decay < 1, got {n_clusters}, {d_k}, {decay}")
        self.n_clusters, self.d_k, self.decay, self.generator = n_clusters, d_k, decay, generator
        self.register_buffer("centroids", F.normalize(torch.randn(n_clusters, d_k, generator=generator), dim=-1))
        self.register_buffer("seeded", torch.tensor(False))

    def _seed(self, flat: torch.Tensor) -> None:
        """Farthest-point seeding on unit vectors ``flat (N, d_k)``: each next centroid is the vector farthest from all."""
        points = flat.cpu()
        chosen = [points[torch.randint(len(points), (1,), generator=self.generator)[0]]]
        for _ in range(1, self.n_clusters):
            d2 = ((points[:, None, :] - torch.stack(chosen)[None]) ** 2).sum(-1).min(-1).values  # (N,)
            chosen.append(points[d2.argmax()])
        self.centroids.copy_(torch.stack(chosen))
        self.seeded.fill_(True)

    def assign(self, x: torch.Tensor) -> torch.Tensor:
        """Cluster of each vector: ``x (..., d_k)`` float → ``(...)`` int64 in ``[0, k)``.

        Raises:
            ValueError: if the last dim of ``x`` is not ``d_k``.
        """
        if x.shape[-1] != self.d_k:
            raise ValueError(f"x must be (..., d_k={self.d_k}), got {tuple(x.shape)}")
        return (F.normalize(x, dim=-1) @ self.centroids.to(x.dtype).T).argmax(dim=-1)  # (..., k) -> (...)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> torch.Tensor:
        """One EMA step on the vectors ``x (..., d_k)`` (all leading dims are pooled); returns their clusters."""
        flat = F.normalize(x.detach().reshape(-1, self.d_k), dim=-1).to(self.centroids.dtype)  # (N, d_k)
        if not bool(self.seeded) and len(flat) >= self.n_clusters:
            self._seed(flat)
        clusters = self.assign(x)
        ids = clusters.reshape(-1)  # (N,)
        sums = torch.zeros_like(self.centroids).index_add_(0, ids, flat)  # (k, d_k)
        counts = torch.bincount(ids, minlength=self.n_clusters).to(flat.dtype)  # (k,)
        seen = counts > 0
        means = sums[seen] / counts[seen, None]
        self.centroids[seen] = self.decay * self.centroids[seen] + (1.0 - self.decay) * means
        return clusters


def routing_mask(query_clusters: torch.Tensor, key_clusters: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """The mask routing induces: query ``i`` may attend to key ``j`` only when they share a cluster.

    Args:
        query_clusters: integer ``(..., T_q)``, the cluster of each query (:meth:`OnlineKMeans.assign`).
        key_clusters: integer ``(..., T_k)``, same leading dims.
        causal: also hide future keys (chapter 3's :func:`causal_mask`, bottom-right aligned when ``T_k > T_q``).

    Returns:
        bool ``(..., T_q, T_k)``, True = may attend.

    Raises:
        ValueError: if the cluster tensors are not integer or their leading dims differ.

    Source: Roy et al. 2021, section 4.1 (attend to keys "assigned to the same cluster").
    """
    if (
        query_clusters.dtype.is_floating_point
        or query_clusters.dtype == torch.bool
        or key_clusters.dtype.is_floating_point
    ):
        raise ValueError(f"cluster ids must be integer, got {query_clusters.dtype} and {key_clusters.dtype}")
    if query_clusters.shape[:-1] != key_clusters.shape[:-1]:
        raise ValueError(
            f"query_clusters (..., T_q) and key_clusters (..., T_k) must share leading dims, got "
            f"{tuple(query_clusters.shape)} and {tuple(key_clusters.shape)}"
        )
    ### BEGIN SOLUTION
    same = query_clusters[..., :, None] == key_clusters[..., None, :]  # (..., T_q, T_k)
    if causal:
        same = same & causal_mask(query_clusters.shape[-1], key_clusters.shape[-1], device=query_clusters.device)
    return same
    ### END SOLUTION


def routing_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    query_clusters: torch.Tensor,
    key_clusters: torch.Tensor,
    *,
    causal: bool = True,
) -> torch.Tensor:
    """Attention within clusters, computed cluster by cluster: cost ``Σ_c |Q_c|·|K_c|`` instead of ``T_q·T_k``.

    For each sequence and each cluster ``c``, gather the queries and keys routed to ``c`` and attend among them
    (causal by their original positions). With ``k`` balanced clusters the cost is about ``T²/k``; Roy et al.
    choose ``k ≈ √T`` for ``O(T^1.5)``.

    Args:
        q: ``(..., T, d_k)``; k: ``(..., T, d_k)``; v: ``(..., T, d_v)`` (self-attention: one ``T``).
        query_clusters, key_clusters: integer ``(..., T)``.
        causal: hide future keys.

    Returns:
        ``(..., T, d_v)``, equal to ``scaled_dot_product_attention(q, k, v, routing_mask(...))[0]``: a query whose
        cluster holds no key it may see gets a zero output.

    Raises:
        ValueError: if the shapes do not fit.

    Source: Roy et al. 2021, section 4.1.
    """
    check_qkv_shapes(q, k, v)
    if q.shape[-2] != k.shape[-2] or query_clusters.shape != q.shape[:-1] or key_clusters.shape != k.shape[:-1]:
        raise ValueError(
            f"need q, k (..., T, d_k) with clusters (..., T): q{tuple(q.shape)}, k{tuple(k.shape)}, "
            f"query_clusters {tuple(query_clusters.shape)}, key_clusters {tuple(key_clusters.shape)}"
        )
    T = q.shape[-2]
    qf, kf, vf = q.reshape(-1, T, q.shape[-1]), k.reshape(-1, T, k.shape[-1]), v.reshape(-1, T, v.shape[-1])
    qc, kc = query_clusters.reshape(-1, T), key_clusters.reshape(-1, T)  # (N, T)
    out = q.new_zeros(qf.shape[0], T, v.shape[-1])  # (N, T, d_v)
    for n in range(qf.shape[0]):
        for c in torch.unique(qc[n]).tolist():
            qi = (qc[n] == c).nonzero().squeeze(-1)  # positions of the cluster's queries
            kj = (kc[n] == c).nonzero().squeeze(-1)  # positions of the cluster's keys
            if kj.numel() == 0:
                continue
            mask = kj[None, :] <= qi[:, None] if causal else None  # (|Q_c|, |K_c|) by original positions
            out[n, qi], _ = scaled_dot_product_attention(qf[n, qi], kf[n, kj], vf[n, kj], mask)
    return out.reshape(*q.shape[:-1], v.shape[-1])


# --------------------------------------------------------------------------------------------------
# Learned selection: top-k blocks (块选择) and native sparse attention (原生稀疏注意力, NSA)
# --------------------------------------------------------------------------------------------------


def topk_block_mask(
    block_scores: torch.Tensor,
    n_selected: int,
    block_len: int,
    *,
    causal: bool = True,
    n_initial: int = 1,
    n_local: int = 2,
) -> torch.Tensor:
    """Top-``n`` block selection (块选择): which key blocks each query attends to, from a score per block.

    The keys are cut into blocks of ``block_len`` positions (block ``j`` holds keys ``j·l' … j·l' + l' - 1``);
    query ``t`` sits at position ``t`` (self-attention), so its own block is ``t // block_len``. For every query:

    * with ``causal``, only blocks that start at or before the query are *visible* (``j <= t // block_len``): a
      future block is never selected, whatever its score. Its own block is visible (the keys after ``t`` inside
      it are hidden later, token by token);
    * the first ``n_initial`` blocks and the ``n_local`` blocks ending with the query's own block are always
      selected (NSA's "fixed activating the 1 initial block and 2 local blocks"), when visible;
    * the remaining places, up to ``n_selected`` blocks in all, go to the visible blocks with the highest scores.

    So every row selects ``min(n_selected, number of visible blocks)`` blocks.

    Args:
        block_scores: float ``(..., T_q, n_blocks)``, the importance of each key block for each query (NSA:
            the compressed attention scores summed per selection block, :func:`selection_block_scores`).
        n_selected: blocks per query ``n``, forced ones included (``>= n_initial + n_local``).
        block_len: positions per key block ``l'`` (≥ 1).
        causal: hide the blocks after the query's own block.
        n_initial, n_local: always-selected leading blocks and local blocks (≥ 0 each).

    Returns:
        bool ``(..., T_q, n_blocks)``, True = the query may attend to (the keys of) that block.

    Raises:
        ValueError: if ``block_scores`` is not floating point with at least 2 dims, or the counts are out of range.

    Source: Yuan et al. 2025, *Native Sparse Attention*, section 3.3.2 (eq. 11, "top-n sparse blocks") and
    section 4.1 (forced initial and local blocks).
    """
    if block_scores.ndim < 2 or not block_scores.dtype.is_floating_point:
        raise ValueError(
            f"block_scores must be float (..., T_q, n_blocks), got {tuple(block_scores.shape)} {block_scores.dtype}"
        )
    if block_len < 1 or n_initial < 0 or n_local < 0 or n_selected < max(n_initial + n_local, 1):
        raise ValueError(
            f"need block_len >= 1, n_initial >= 0, n_local >= 0 and n_selected >= max(n_initial + n_local, 1), got "
            f"block_len={block_len}, n_initial={n_initial}, n_local={n_local}, n_selected={n_selected}"
        )
    ### BEGIN SOLUTION
    T_q, n_blocks = block_scores.shape[-2:]
    t = torch.arange(T_q, device=block_scores.device)[:, None]  # (T_q, 1) query positions
    j = torch.arange(n_blocks, device=block_scores.device)[None, :]  # (1, n_blocks) block indices
    own = t // block_len  # (T_q, 1): the block holding the query
    visible = j <= own if causal else torch.ones(T_q, n_blocks, dtype=torch.bool, device=block_scores.device)
    forced = ((j < n_initial) | ((j <= own) & (j > own - n_local))) & visible  # (T_q, n_blocks)
    ranked = block_scores.masked_fill(forced, math.inf).masked_fill(~visible, -math.inf)
    top = ranked.topk(min(n_selected, n_blocks), dim=-1).indices  # (..., T_q, n)
    chosen = torch.zeros(ranked.shape, dtype=torch.bool, device=block_scores.device).scatter(-1, top, True)
    return chosen & visible  # a row with fewer visible blocks than n keeps only those
    ### END SOLUTION


def compress_blocks(
    x: torch.Tensor, block_len: int, stride: int, phi: Callable[[torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    r"""NSA's token compression: one vector per block of ``block_len`` positions, blocks ``stride`` apart.

    Compressed block ``i`` summarises positions ``i·d … i·d + l - 1``
    (:math:`\tilde K^{cmp} = \{\varphi(k_{id:id+l})\}`); only whole blocks are made, so there are
    ``(T - l) // d + 1`` of them (none when ``T < l``).

    Args:
        x: keys or values ``(..., T, d)``.
        block_len: ``l`` (≥ 1). stride: ``d``, with ``1 <= d <= l`` (``d < l``: overlapping blocks).
        phi: maps ``(..., n_cmp, l, d)`` to ``(..., n_cmp, d)`` (e.g. :class:`BlockCompressor`).

    Returns:
        ``(..., n_cmp, d)``.

    Raises:
        ValueError: if ``block_len``/``stride`` are out of range.

    Source: Yuan et al. 2025, section 3.3.1, eq. 7.
    """
    if block_len < 1 or not 1 <= stride <= block_len:
        raise ValueError(f"need block_len >= 1 and 1 <= stride <= block_len, got {block_len}, {stride}")
    T = x.shape[-2]
    if T < block_len:
        return x.new_zeros(*x.shape[:-2], 0, x.shape[-1])
    blocks = x.unfold(-2, block_len, stride).transpose(-1, -2)  # (..., n_cmp, l, d)
    return phi(blocks)


class BlockCompressor(nn.Module):
    r"""NSA's :math:`\varphi`: a learnable MLP with an intra-block position encoding, ``(l, d) -> d``.

    A learned position vector is added to each of the ``l`` vectors of a block, the block is flattened to
    ``l·d`` numbers and an MLP (``l·d → hidden → d``, GELU) maps it to one vector.

    Shapes: ``forward(blocks (..., n_cmp, l, d)) -> (..., n_cmp, d)``.

    Source: Yuan et al. 2025, section 3.3.1 ("φ is a learnable MLP with intra-block position encoding").
    """

    def __init__(self, block_len: int, d: int, hidden: int | None = None):
        super().__init__()
        self.block_len, self.d = block_len, d
        self.position = nn.Parameter(torch.zeros(block_len, d))
        hidden = hidden or 2 * d
        self.mlp = nn.Sequential(nn.Linear(block_len * d, hidden), nn.GELU(), nn.Linear(hidden, d))

    def forward(self, blocks: torch.Tensor) -> torch.Tensor:
        """Compress each block. Raises ValueError if ``blocks`` is not ``(..., l, d)``."""
        if blocks.shape[-2:] != (self.block_len, self.d):
            raise ValueError(f"blocks must be (..., l={self.block_len}, d={self.d}), got {tuple(blocks.shape)}")
        return self.mlp((blocks + self.position).flatten(-2))  # (..., n_cmp, l·d) -> (..., n_cmp, d)


def compressed_causal_mask(
    T: int, n_cmp: int, block_len: int, stride: int, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Which compressed blocks query ``t`` may see: those whose last position ``i·d + l - 1`` is ``<= t``.

    Returns:
        bool ``(T, n_cmp)``, True = may attend. A query before the end of the first block sees none.

    Source: Yuan et al. 2025, eq. 7 (blocks made of ``k_{:t}`` only).
    """
    t = torch.arange(T, device=device)[:, None]  # (T, 1)
    last = torch.arange(n_cmp, device=device)[None, :] * stride + block_len - 1  # (1, n_cmp)
    return last <= t


def selection_block_scores(
    p_cmp: torch.Tensor, T: int, block_len: int, stride: int, select_len: int, n_groups: int
) -> torch.Tensor:
    r"""Importance of each selection block from the compression branch's attention weights.

    A selection block ``j`` (positions ``j·l' … j·l' + l' - 1``) gets the weights of the compressed blocks that
    overlap it, each counted once per stride of ``d`` positions they share (eq. 9's double sum gives each
    compressed block that weight); then the heads that share keys (a GQA group) add their scores (eq. 10).

    Args:
        p_cmp: ``(B, H, T, n_cmp)`` compression-branch attention weights.
        T: sequence length. block_len, stride: ``l``, ``d`` of the compression. select_len: ``l'``.
        n_groups: key/value groups ``G`` (``H`` divisible by ``G``).

    Returns:
        ``(B, G, T, ceil(T / l'))`` float.

    Raises:
        ValueError: if ``d`` does not divide ``l`` and ``l'``, or ``H`` is not a multiple of ``G``.

    Source: Yuan et al. 2025, section 3.3.2, eqs. 8–10.
    """
    B, H, _, n_cmp = p_cmp.shape
    if block_len % stride or select_len % stride or H % n_groups:
        raise ValueError(
            f"need stride | block_len, stride | select_len and n_groups | H, got l={block_len}, d={stride}, "
            f"l'={select_len}, H={H}, G={n_groups}"
        )
    n_slc = math.ceil(T / select_len)
    start = torch.arange(n_cmp, device=p_cmp.device)[:, None] * stride  # (n_cmp, 1) first position
    lo = torch.arange(n_slc, device=p_cmp.device)[None, :] * select_len  # (1, n_slc)
    overlap = (torch.minimum(start + block_len, lo + select_len) - torch.maximum(start, lo)).clamp(min=0)
    weight = (overlap // stride).to(p_cmp.dtype)  # (n_cmp, n_slc): shared strides
    p_slc = p_cmp @ weight  # (B, H, T, n_slc)
    return p_slc.unflatten(1, (n_groups, H // n_groups)).sum(2)  # (B, G, T, n_slc)


def selected_blocks_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_mask: torch.Tensor, select_len: int, n_selected: int
) -> torch.Tensor:
    """Attention of each query to the keys of its selected blocks only, gathered: ``T·n·l'`` scores, not ``T²``.

    Args:
        q: ``(B, G, h, T, d_k)`` (``h`` query heads share each key/value group). k: ``(B, G, T, d_k)``.
            v: ``(B, G, T, d_v)``.
        block_mask: bool ``(B, G, T, n_slc)`` from :func:`topk_block_mask`, at most ``n_selected`` per row.
        select_len: ``l'``. n_selected: ``n``.

    Returns:
        ``(B, G, h, T, d_v)``, equal to dense causal attention under the block mask expanded to positions.

    Source: Yuan et al. 2025, section 3.3.2, eq. 12; Vaswani et al. 2017, eq. 1.
    """
    B, G, h, T, d_k = q.shape
    n_slc = block_mask.shape[-1]
    n = min(n_selected, n_slc)
    idx = block_mask.to(q.dtype).topk(n, dim=-1).indices  # (B, G, T, n): the selected blocks (and filler)
    valid = block_mask.gather(-1, idx)  # (B, G, T, n)
    pad = n_slc * select_len - T
    k_blocks = F.pad(k, (0, 0, 0, pad)).unflatten(-2, (n_slc, select_len))  # (B, G, n_slc, l', d_k)
    v_blocks = F.pad(v, (0, 0, 0, pad)).unflatten(-2, (n_slc, select_len))  # (B, G, n_slc, l', d_v)
    flat = idx.flatten(-2)  # (B, G, T·n)
    k_sel = k_blocks.gather(2, flat[..., None, None].expand(-1, -1, -1, select_len, d_k))
    v_sel = v_blocks.gather(2, flat[..., None, None].expand(-1, -1, -1, select_len, v.shape[-1]))
    k_sel = k_sel.view(B, G, T, n * select_len, d_k)  # (B, G, T, n·l', d_k)
    v_sel = v_sel.view(B, G, T, n * select_len, -1)  # (B, G, T, n·l', d_v)
    pos = (idx[..., None] * select_len + torch.arange(select_len, device=q.device)).flatten(-2)  # (B, G, T, n·l')
    t = torch.arange(T, device=q.device)[:, None]  # (T, 1)
    allowed = (pos <= t) & valid.repeat_interleave(select_len, -1)  # (B, G, T, n·l'): causal, selected
    scores = torch.einsum("bghtd,bgtsd->bghts", q, k_sel) / math.sqrt(d_k)  # (B, G, h, T, n·l')
    scores = scores.masked_fill(~allowed[:, :, None], torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1).masked_fill(~allowed[:, :, None], 0.0)
    return torch.einsum("bghts,bgtsd->bghtd", weights, v_sel)  # (B, G, h, T, d_v)


class NativeSparseAttention(nn.Module):
    r"""Native sparse attention (原生稀疏注意力, NSA): compressed, selected and sliding-window branches, gated.

    For each query ``t`` and head: :math:`o_t = \sum_{c \in \{cmp, slc, win\}} g_t^c\,
    \mathrm{Attn}(q_t, \tilde K_t^c, \tilde V_t^c)` with gates :math:`g_t^c = \sigma(\cdot) \in [0, 1]` from the
    input (eq. 5). Each branch has its own keys and values (section 3.3.3):

    * **compression** (压缩): keys/values of blocks of ``l = block_len`` positions, ``d = stride`` apart, mapped
      to one vector each by :class:`BlockCompressor`; a query sees the blocks that end at or before it;
    * **selection** (选择): the compression branch's weights, summed per selection block of ``l' = select_len``
      positions and over the heads of a group (eqs. 8–10), pick ``n_selected`` blocks per query with
      :func:`topk_block_mask` (the first and the ``n_local`` most recent blocks forced); the query attends
      causally to their raw keys (:func:`selected_blocks_attention`);
    * **sliding window** (滑动窗口): chapter's :func:`sliding_window_attention` with one-sided width ``window``.

    Args:
        d_model, n_heads, d_k: as in chapter 4; ``n_kv_heads`` key/value groups ``G`` (GQA, divides ``n_heads``).
        block_len, stride, select_len, n_selected, window: NSA's ``l, d, l', n, w``.
        n_initial, n_local: blocks always selected.

    Shapes:
        ``forward(x (B, T, d_model), return_branches=False) -> (B, T, d_model)``; with ``return_branches`` also a
        dict of the three branch outputs ``(B, H, T, d_k)``, the gates ``(B, H, T, 3)`` and the block mask.

    Source: Yuan et al. 2025, *Native Sparse Attention: Hardware-Aligned and Natively Trainable Sparse
    Attention*, section 3 (eqs. 5–12).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_k: int,
        *,
        n_kv_heads: int = 1,
        block_len: int = 8,
        stride: int = 4,
        select_len: int = 8,
        n_selected: int = 4,
        window: int = 16,
        n_initial: int = 1,
        n_local: int = 2,
    ):
        super().__init__()
        if n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must divide n_heads={n_heads}")
        if block_len % stride or select_len % stride:
            raise ValueError(f"stride={stride} must divide block_len={block_len} and select_len={select_len}")
        self.d_model, self.n_heads, self.d_k, self.n_kv_heads = d_model, n_heads, d_k, n_kv_heads
        self.block_len, self.stride, self.select_len = block_len, stride, select_len
        self.n_selected, self.window, self.n_initial, self.n_local = n_selected, window, n_initial, n_local
        self.W_q = nn.Linear(d_model, n_heads * d_k, bias=False)
        kv = n_kv_heads * d_k
        self.W_kv = nn.ModuleDict({c: nn.Linear(d_model, 2 * kv, bias=False) for c in ("cmp", "slc", "win")})
        self.phi_k = BlockCompressor(block_len, d_k)
        self.phi_v = BlockCompressor(block_len, d_k)
        self.W_gate = nn.Linear(d_model, 3 * n_heads)
        self.W_o = nn.Linear(n_heads * d_k, d_model, bias=False)

    def _kv(self, branch: str, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of one branch, ``(B, G, T, d_k)`` each."""
        k, v = self.W_kv[branch](x).chunk(2, dim=-1)  # (B, T, G·d_k) each
        return (t.unflatten(-1, (self.n_kv_heads, self.d_k)).transpose(1, 2) for t in (k, v))  # type: ignore[return-value]

    def forward(self, x: torch.Tensor, return_branches: bool = False):
        """NSA self-attention over ``x (B, T, d_model)``, causal. Raises ValueError on a wrong shape."""
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        B, T, _ = x.shape
        H, G = self.n_heads, self.n_kv_heads
        q = self.W_q(x).unflatten(-1, (H, self.d_k)).transpose(1, 2)  # (B, H, T, d_k)
        # compression branch: attend to the compressed blocks that have ended (eqs. 7-8)
        k_c, v_c = self._kv("cmp", x)
        k_cmp = compress_blocks(k_c, self.block_len, self.stride, self.phi_k)  # (B, G, n_cmp, d_k)
        v_cmp = compress_blocks(v_c, self.block_len, self.stride, self.phi_v)
        seen = compressed_causal_mask(T, k_cmp.shape[-2], self.block_len, self.stride, device=x.device)
        rep = H // G
        o_cmp, p_cmp = scaled_dot_product_attention(
            q, k_cmp.repeat_interleave(rep, 1), v_cmp.repeat_interleave(rep, 1), seen
        )  # (B, H, T, d_k), (B, H, T, n_cmp)
        # selection branch: blocks ranked by the compression weights (eqs. 9-12)
        p_slc = selection_block_scores(p_cmp, T, self.block_len, self.stride, self.select_len, G)
        block_mask = topk_block_mask(
            p_slc, self.n_selected, self.select_len, n_initial=self.n_initial, n_local=self.n_local
        )  # (B, G, T, n_slc)
        k_s, v_s = self._kv("slc", x)
        o_slc = selected_blocks_attention(
            q.unflatten(1, (G, rep)), k_s, v_s, block_mask, self.select_len, self.n_selected
        ).flatten(1, 2)  # (B, H, T, d_k)
        # sliding-window branch
        k_w, v_w = self._kv("win", x)
        o_win = sliding_window_attention(q, k_w.repeat_interleave(rep, 1), v_w.repeat_interleave(rep, 1), self.window)
        # gated sum (eq. 5)
        gates = torch.sigmoid(self.W_gate(x)).unflatten(-1, (H, 3)).transpose(1, 2)  # (B, H, T, 3)
        mixed = gates[..., 0:1] * o_cmp + gates[..., 1:2] * o_slc + gates[..., 2:3] * o_win  # (B, H, T, d_k)
        out = self.W_o(mixed.transpose(1, 2).flatten(-2))  # (B, T, d_model)
        if not return_branches:
            return out
        return out, {"cmp": o_cmp, "slc": o_slc, "win": o_win, "gates": gates, "block_mask": block_mask}


def lightning_indexer_scores(q_index: torch.Tensor, k_index: torch.Tensor, head_weights: torch.Tensor) -> torch.Tensor:
    r"""DeepSeek-V3.2's lightning indexer (闪电索引器): a cheap score for every (query, key) pair.

    :math:`I_{t,s} = \sum_j w_{t,j}\,\mathrm{ReLU}(q_{t,j} \cdot k_s)`: a few small indexer heads ``j`` (one shared
    key per token) whose ReLU'd dot products are mixed by per-query head weights. Each query then keeps its top-``k``
    keys (in a decoder, among the keys not after it): that is :func:`topk_block_mask` with ``block_len = 1`` and no
    forced blocks, and the main attention runs on those keys only.

    Args:
        q_index: ``(B, T_q, H_I, d_I)`` indexer queries. k_index: ``(B, T_k, d_I)`` indexer keys.
        head_weights: ``(B, T_q, H_I)``, the weight of each indexer head for each query.

    Returns:
        ``(B, T_q, T_k)`` float scores (no mask applied).

    Raises:
        ValueError: if the shapes do not fit.

    Source: DeepSeek-AI 2025, *DeepSeek-V3.2-Exp* technical report, section 2.1, eq. 1.
    """
    if (
        q_index.ndim != 4
        or k_index.ndim != 3
        or k_index.shape[0] != q_index.shape[0]
        or k_index.shape[-1] != q_index.shape[-1]
        or head_weights.shape != q_index.shape[:3]
    ):
        raise ValueError(
            f"need q_index (B, T_q, H_I, d_I), k_index (B, T_k, d_I), head_weights (B, T_q, H_I), got "
            f"{tuple(q_index.shape)}, {tuple(k_index.shape)}, {tuple(head_weights.shape)}"
        )
    per_head = torch.relu(torch.einsum("bthd,bsd->bths", q_index, k_index))  # (B, T_q, H_I, T_k)
    return (head_weights[..., None] * per_head).sum(-2)  # (B, T_q, T_k)
