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
