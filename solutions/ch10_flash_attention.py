"""Chapter 10 — FlashAttention from scratch: 分块 (tiling), 在线 softmax (online softmax), 重计算 (recomputation).

This module is the single home of the chapter's code. The book page ``book/ch10_flash_attention.md`` explains
it, the student notebook ``notebooks/ch10_flash_attention.ipynb`` is generated from it (the regions between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` become the exercises).

FlashAttention computes *exact* attention, ``softmax(QK^T / sqrt(d_k)) V``, without ever holding the
``T_q × T_k`` score matrix: the keys and values are visited block by block, the softmax is normalised on the
fly (the online softmax), and the backward pass recomputes each block of scores from Q, K and the saved
log-sum-exp (LogSumExp, 对数求和指数) instead of storing them. Here it is written in plain PyTorch loops over blocks, so that
every step of the papers' algorithms can be read and tested; batch and heads are vectorised, the loops run over
query blocks (``block_q`` rows) and key blocks (``block_k`` columns).

Reading order follows the book:

1. :func:`naive_softmax`, :func:`online_softmax_update`, :func:`online_softmax` — the running max and running
   sum over blocks (Milakov & Gimelshein 2018, algorithm 3);
2. :func:`naive_attention` — the reference that materialises the scores (chapter 3's function);
3. :func:`block_mask`, :func:`flash_attention_forward` — the tiled forward pass (Dao 2023, FlashAttention-2,
   algorithm 1), returning the output and the log-sum-exp;
4. :func:`flash_attention_backward` — the backward pass by recomputation (Dao 2023, algorithm 2; Dao et al.
   2022, algorithm 4 / appendix B.2);
5. :class:`FlashAttention`, :func:`flash_attention` — the two tied together as a ``torch.autograd.Function``.

Shapes: ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)``. Masks follow the course's
polarity, **True = may attend**: ``causal`` (bottom-right aligned, as chapter 3's ``causal_mask``) and
``attention_mask (B, T_k)`` (True at real tokens, chapter 3's ``attention_mask_from_lengths``). A query that may
attend to no key gets a zero output and a log-sum-exp of ``-inf``.

Sources: Dao, Fu, Ermon, Rudra & Ré 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention with
IO-Awareness" (NeurIPS); Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
Partitioning"; Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"; Rabe & Staats 2021,
"Self-attention Does Not Need O(n²) Memory".
"""

from __future__ import annotations

import functools
import math

import torch

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention

__all__ = [
    "naive_softmax",
    "online_softmax_update",
    "online_softmax",
    "check_flash_inputs",
    "naive_attention",
    "block_mask",
    "flash_attention_forward",
    "flash_attention_backward",
    "FlashAttention",
    "flash_attention",
]


# --------------------------------------------------------------------------------------------------
# 1. The online softmax (在线 softmax)
# --------------------------------------------------------------------------------------------------


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    r"""Softmax over the last dim *as written*, :math:`e^{x_i} / \sum_j e^{x_j}` — numerically unstable.

    Shown only to fail: ``exp`` overflows to ``inf`` for ``x > 88.7`` in float32 (``> 11.1`` in float16), and
    ``inf / inf`` is NaN. :func:`torch.softmax` and :func:`online_softmax` subtract the row maximum first.

    Args:
        x: ``(..., N)`` floating point.

    Returns:
        ``(..., N)``, same dtype; NaN in rows with a large entry.
    """
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def online_softmax_update(
    m: torch.Tensor, ell: torch.Tensor, x_block: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""One step of the online softmax: fold a block of scores into the running max ``m`` and running sum ``ell`` (ℓ).

    .. math::
        m' = \max\big(m,\ \max_j x_j\big), \qquad
        \ell' = \ell\, e^{m - m'} + \sum_j e^{x_j - m'}

    (Milakov & Gimelshein 2018, algorithm 3; Dao et al. 2022, eq. in section 3.1.) After the last block,
    ``softmax(x)_j = exp(x_j - m) / ell``. The start is ``m = -inf``, ``ell = 0``. Entries equal to ``-inf`` (masked
    scores) contribute nothing; while every entry seen so far is ``-inf``, ``m`` stays ``-inf`` and ``ell`` stays 0
    (never NaN: ``exp(-inf - (-inf))`` is avoided).

    Args:
        m: running max, ``(...)``, floating point.
        ell: running sum, ``(...)``, same dtype; the sum of ``exp(x - m)`` over the entries seen so far.
        x_block: the next block of entries, ``(..., n)``, ``n ≥ 1``.

    Returns:
        ``(m', ell')``, both ``(...)``, dtype of ``m``.

    Raises:
        ValueError: if the shapes do not fit (``m``, ``ell`` and ``x_block[..., 0]`` must share their shape).
    """
    if m.shape != ell.shape or x_block.ndim < 1 or x_block.shape[:-1] != m.shape or x_block.shape[-1] < 1:
        raise ValueError(
            f"online_softmax_update needs m (...), ell (...) and x_block (..., n) with n >= 1; got "
            f"m{tuple(m.shape)}, ell{tuple(ell.shape)}, x_block{tuple(x_block.shape)}"
        )
    ### BEGIN SOLUTION
    m_new = torch.maximum(m, x_block.amax(dim=-1))  # (...)
    m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)  # all -inf so far: any finite shift keeps exp at 0
    ell_new = ell * torch.exp(m - m_safe) + torch.exp(x_block - m_safe[..., None]).sum(dim=-1)  # rescale, then add
    return m_new, ell_new
    ### END SOLUTION


def online_softmax(x: torch.Tensor, block_k: int) -> torch.Tensor:
    """Softmax over the last dim, computed with one pass over blocks of ``block_k`` entries for ``(m, ell)``.

    The first pass folds each block into the running max and sum (:func:`online_softmax_update`); the second
    writes ``exp(x - m) / ell``. Equal to :func:`torch.softmax` to the dtype's tolerance, and stable where
    :func:`naive_softmax` overflows. Rows that are all ``-inf`` give zeros.

    Args:
        x: ``(..., N)`` floating point.
        block_k: entries per block (int ≥ 1); ``N`` need not be a multiple of it.

    Returns:
        ``(..., N)``, same dtype as ``x``.

    Raises:
        ValueError: if ``block_k < 1`` or ``x`` has no entries along the last dim.
    """
    if block_k < 1 or x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"online_softmax needs block_k >= 1 and x (..., N >= 1); got {block_k}, {tuple(x.shape)}")
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype, device=x.device)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block_k):
        m, ell = online_softmax_update(m, ell, x[..., start : start + block_k])
    m_safe = m.masked_fill(m == -math.inf, 0.0)
    ell_safe = ell.masked_fill(ell == 0, 1.0)
    return torch.exp(x - m_safe[..., None]) / ell_safe[..., None]


# --------------------------------------------------------------------------------------------------
# 2. The reference: attention that materialises the scores (chapter 3)
# --------------------------------------------------------------------------------------------------


def check_flash_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool,
    attention_mask: torch.Tensor | None,
    block_q: int = 1,
    block_k: int = 1,
) -> None:
    """Raise ValueError, naming the shapes, unless the inputs of the chapter's attention functions fit.

    Expected: ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)``, the same floating dtype
    and device; ``attention_mask`` a bool ``(B, T_k)`` or None; ``T_q ≤ T_k`` when ``causal``; block sizes ≥ 1.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"q, k, v must be (B, H, T, d); got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(f"q, k, v must share (B, H): q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k (last dim): q{tuple(q.shape)} vs k{tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same T_k (dim -2): k{tuple(k.shape)} vs v{tuple(v.shape)}")
    if not q.dtype.is_floating_point or not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share one floating dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if attention_mask is not None and (
        attention_mask.dtype != torch.bool or tuple(attention_mask.shape) != (q.shape[0], k.shape[-2])
    ):
        raise ValueError(
            f"attention_mask must be a bool (B, T_k) = {(q.shape[0], k.shape[-2])} tensor (True = may attend), got "
            f"{attention_mask.dtype} {tuple(attention_mask.shape)}"
        )
    if causal and q.shape[-2] > k.shape[-2]:
        raise ValueError(f"causal attention needs T_q <= T_k, got q{tuple(q.shape)}, k{tuple(k.shape)}")
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1, got block_q={block_q}, block_k={block_k}")


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    attention_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention that materialises the ``(B, H, T_q, T_k)`` scores: chapter 3's function, plus the log-sum-exp.

    The reference the tiled form is measured against (memory, time) and the form autograd differentiates
    by storing the weights. Same arguments and returns as :func:`flash_attention_forward`.

    Raises:
        ValueError: see :func:`check_flash_inputs`.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask)
    T_q, T_k = q.shape[-2], k.shape[-2]
    mask = causal_mask(T_q, T_k, device=q.device) if causal else None  # (T_q, T_k)
    if attention_mask is not None:
        padding = attention_mask[:, None, None, :]  # (B, 1, 1, T_k)
        mask = padding if mask is None else mask & padding
    o, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T_q, d_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return o, torch.logsumexp(scores, dim=-1)  # (B, H, T_q, d_v), (B, H, T_q)


# --------------------------------------------------------------------------------------------------
# 3. The tiled forward pass (分块前向)
# --------------------------------------------------------------------------------------------------


def block_mask(
    q_start: int,
    q_end: int,
    k_start: int,
    k_end: int,
    *,
    T_q: int,
    T_k: int,
    causal: bool,
    attention_mask: torch.Tensor | None,
    device: torch.device | str | None = None,
) -> torch.Tensor | None:
    """The mask of one tile: queries ``q_start:q_end`` against keys ``k_start:k_end`` (True = may attend).

    The causal rule is chapter 3's ``causal_mask(T_q, T_k)`` (bottom-right aligned: query ``i`` sits at position
    ``T_k - T_q + i``) restricted to the tile, built from the tile's positions so that no ``T_q × T_k`` mask exists.

    Returns:
        None when nothing is masked, else a bool tensor broadcastable to ``(B, H, q_end - q_start, k_end - k_start)``:
        ``(n_q, n_k)`` (causal only), ``(B, 1, 1, n_k)`` (padding only) or ``(B, 1, n_q, n_k)`` (both).
    """
    allowed = None
    if attention_mask is not None:
        allowed = attention_mask[:, None, None, k_start:k_end]  # (B, 1, 1, n_k)
    if causal:
        i = torch.arange(q_start, q_end, device=device)[:, None] + (T_k - T_q)  # (n_q, 1) query positions
        j = torch.arange(k_start, k_end, device=device)[None, :]  # (1, n_k) key positions
        allowed = j <= i if allowed is None else allowed & (j <= i)
    return allowed


def flash_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    attention_mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Exact attention, tiled: loops over query blocks and key blocks with the online softmax.

    For each query block :math:`Q_i` (``block_q`` rows), the key/value blocks :math:`K_j, V_j` (``block_k`` rows)
    are visited in order, keeping per query a running max :math:`m_i`, running sum :math:`\ell_i` and unnormalised
    output :math:`\tilde O_i` (Dao 2023, FlashAttention-2, algorithm 1, lines 8–10):

    .. math::
        S_{ij} = Q_i K_j^\top / \sqrt{d_k},\quad
        m_i' = \max(m_i, \mathrm{rowmax}\, S_{ij}),\quad
        \tilde P_{ij} = e^{S_{ij} - m_i'},\\
        \ell_i' = e^{m_i - m_i'} \ell_i + \mathrm{rowsum}\, \tilde P_{ij},\quad
        \tilde O_i' = e^{m_i - m_i'} \tilde O_i + \tilde P_{ij} V_j

    then :math:`O_i = \tilde O_i / \ell_i` and :math:`L_i = m_i + \log \ell_i` (lines 12–13). With ``causal``, key
    blocks entirely after the query block's last position are skipped (never computed).

    Scores are computed in float32 for float16/bfloat16 inputs (float64 stays float64), as FlashAttention
    accumulates in float32. Only tiles of ``block_q × block_k`` scores exist at any time.

    Args:
        q: ``(B, H, T_q, d_k)`` queries; k: ``(B, H, T_k, d_k)`` keys; v: ``(B, H, T_k, d_v)`` values.
        causal: query ``i`` may attend to keys ``j ≤ i + T_k - T_q`` (needs ``T_q ≤ T_k``).
        attention_mask: ``(B, T_k)`` bool, True at keys that may be attended to (padding False), or None.
        block_q, block_k: rows per query block and per key block (≥ 1; ``T`` need not be a multiple).

    Returns:
        ``(o, lse)``: ``o (B, H, T_q, d_v)`` in the dtype of ``q``; ``lse (B, H, T_q)`` the log-sum-exp of each
        query's scaled scores over the keys it may attend to (float32 for half inputs), ``-inf`` where there are
        none (and there ``o`` is 0).

    Raises:
        ValueError: see :func:`check_flash_inputs`.

    Source: Dao 2023, algorithm 1; Dao et al. 2022, algorithm 1 and section 3.1.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.promote_types(q.dtype, torch.float32)  # accumulate in float32 (float64 stays float64)
    scale = 1.0 / math.sqrt(d_k)
    offset = T_k - T_q  # query i sits at key position i + offset (causal, bottom-right aligned)
    tile_mask = functools.partial(
        block_mask, T_q=T_q, T_k=T_k, causal=causal, attention_mask=attention_mask, device=q.device
    )  # the mask of one tile (or None)
    o = torch.empty(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, T_q, dtype=acc, device=q.device)
    for q_start in range(0, T_q, block_q):
        q_end = min(q_start + block_q, T_q)
        q_i = q[:, :, q_start:q_end].to(acc)  # (B, H, n_q, d_k)
        ### BEGIN SOLUTION
        m_i = torch.full((B, H, q_end - q_start), -math.inf, dtype=acc, device=q.device)  # running max
        l_i = torch.zeros(B, H, q_end - q_start, dtype=acc, device=q.device)  # running sum of exp
        o_i = torch.zeros(B, H, q_end - q_start, d_v, dtype=acc, device=q.device)  # unnormalised output
        k_stop = min(T_k, q_end + offset) if causal else T_k  # later keys are in every query's future
        for k_start in range(0, k_stop, block_k):
            k_end = min(k_start + block_k, T_k)
            s_ij = q_i @ k[:, :, k_start:k_end].to(acc).transpose(-2, -1) * scale  # (B, H, n_q, n_k)
            allowed = tile_mask(q_start, q_end, k_start, k_end)
            if allowed is not None:
                s_ij = s_ij.masked_fill(~allowed, -math.inf)  # mask before the max
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))  # (B, H, n_q)
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)  # no key allowed yet: keep exp(...) at 0, not NaN
            p_ij = torch.exp(s_ij - m_safe[..., None])  # (B, H, n_q, n_k), unnormalised
            alpha = torch.exp(m_i - m_safe)  # (B, H, n_q): rescales what was summed under the old max
            l_i = alpha * l_i + p_ij.sum(dim=-1)
            o_i = alpha[..., None] * o_i + p_ij @ v[:, :, k_start:k_end].to(acc)  # (B, H, n_q, d_v)
            m_i = m_new
        l_safe = l_i.masked_fill(l_i == 0, 1.0)  # a query with no allowed key: o_i is 0, keep it 0
        o[:, :, q_start:q_end] = (o_i / l_safe[..., None]).to(q.dtype)
        lse[:, :, q_start:q_end] = m_i + torch.log(l_i)  # -inf + log(0) = -inf where no key is allowed
        ### END SOLUTION
    return o, lse


# --------------------------------------------------------------------------------------------------
# 4. The backward pass by recomputation (重计算)
# --------------------------------------------------------------------------------------------------


def flash_attention_backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    *,
    causal: bool = False,
    attention_mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Gradients of attention with respect to q, k, v, recomputing each tile of scores from Q, K and the log-sum-exp.

    Nothing of size ``T_q × T_k`` was saved by the forward pass: for each key block :math:`K_j, V_j` (outer
    loop) and query block :math:`Q_i` (inner loop) the probabilities are recomputed exactly from the saved
    :math:`L_i` (Dao 2023, FlashAttention-2, algorithm 2, lines 4 and 8–15):

    .. math::
        D_i = \mathrm{rowsum}(dO_i \circ O_i),\quad
        S_{ij} = Q_i K_j^\top/\sqrt{d_k},\quad P_{ij} = e^{S_{ij} - L_i},\\
        dV_j \mathrel{+}= P_{ij}^\top dO_i,\quad dP_{ij} = dO_i V_j^\top,\quad
        dS_{ij} = P_{ij} \circ (dP_{ij} - D_i),\\
        dQ_i \mathrel{+}= dS_{ij} K_j / \sqrt{d_k},\quad dK_j \mathrel{+}= dS_{ij}^\top Q_i / \sqrt{d_k}

    (the softmax gradient :math:`dS = P \circ (dP - \mathrm{rowsum}(dP \circ P))`, with
    :math:`\mathrm{rowsum}(dP \circ P) = \mathrm{rowsum}(dO \circ O)`: Dao et al. 2022, appendix B.2, eq. 4).
    With ``causal``, query blocks that see none of the key block are skipped.

    Args:
        do: ``(B, H, T_q, d_v)``, the gradient of the loss with respect to the output ``o``.
        q, k, v, causal, attention_mask, block_q, block_k: as given to :func:`flash_attention_forward`.
        o, lse: what :func:`flash_attention_forward` returned for them.

    Returns:
        ``(dq, dk, dv)`` with the shapes and dtypes of ``q, k, v``.

    Raises:
        ValueError: see :func:`check_flash_inputs`; or if ``do``, ``o``, ``lse`` do not fit ``q`` and ``v``.

    Source: Dao 2023, algorithm 2; Dao et al. 2022, algorithm 4 and appendix B.2.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    if do.shape != (B, H, T_q, d_v) or o.shape != (B, H, T_q, d_v) or lse.shape != (B, H, T_q):
        raise ValueError(
            f"do and o must be (B, H, T_q, d_v) = {(B, H, T_q, d_v)} and lse (B, H, T_q); got do{tuple(do.shape)}, "
            f"o{tuple(o.shape)}, lse{tuple(lse.shape)}"
        )
    acc = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d_k)
    offset = T_k - T_q
    tile_mask = functools.partial(
        block_mask, T_q=T_q, T_k=T_k, causal=causal, attention_mask=attention_mask, device=q.device
    )
    D = (do.to(acc) * o.to(acc)).sum(dim=-1)  # (B, H, T_q)  algorithm 2, line 4
    lse_safe = lse.to(acc).masked_fill(lse == -math.inf, 0.0)  # a query with no key: its P row is 0 anyway
    dq = torch.zeros(B, H, T_q, d_k, dtype=acc, device=q.device)
    dk = torch.zeros(B, H, T_k, d_k, dtype=acc, device=q.device)
    dv = torch.zeros(B, H, T_k, d_v, dtype=acc, device=q.device)
    for k_start in range(0, T_k, block_k):
        k_end = min(k_start + block_k, T_k)
        k_j, v_j = k[:, :, k_start:k_end].to(acc), v[:, :, k_start:k_end].to(acc)  # (B, H, n_k, d_k), (.., d_v)
        ### BEGIN SOLUTION
        dk_j = torch.zeros_like(k_j)
        dv_j = torch.zeros_like(v_j)
        # first query that sees key k_start is k_start - offset; earlier query blocks are skipped
        q_first = (max(0, k_start - offset) // block_q) * block_q if causal else 0
        for q_start in range(q_first, T_q, block_q):
            q_end = min(q_start + block_q, T_q)
            q_i, do_i = q[:, :, q_start:q_end].to(acc), do[:, :, q_start:q_end].to(acc)
            s_ij = q_i @ k_j.transpose(-2, -1) * scale  # (B, H, n_q, n_k)  recomputed (line 8)
            allowed = tile_mask(q_start, q_end, k_start, k_end)
            if allowed is not None:
                s_ij = s_ij.masked_fill(~allowed, -math.inf)
            p_ij = torch.exp(s_ij - lse_safe[:, :, q_start:q_end, None])  # (B, H, n_q, n_k)  line 9
            dv_j += p_ij.transpose(-2, -1) @ do_i  # (B, H, n_k, d_v)  line 10
            dp_ij = do_i @ v_j.transpose(-2, -1)  # (B, H, n_q, n_k)  line 11
            ds_ij = p_ij * (dp_ij - D[:, :, q_start:q_end, None])  # line 12
            dq[:, :, q_start:q_end] += ds_ij @ k_j * scale  # (B, H, n_q, d_k)  line 13
            dk_j += ds_ij.transpose(-2, -1) @ q_i * scale  # (B, H, n_k, d_k)  line 14
        dk[:, :, k_start:k_end] = dk_j
        dv[:, :, k_start:k_end] = dv_j
        ### END SOLUTION
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


# --------------------------------------------------------------------------------------------------
# 5. Forward and backward together: a torch.autograd.Function
# --------------------------------------------------------------------------------------------------


class FlashAttention(torch.autograd.Function):
    """Autograd wrapper: the forward saves ``q, k, v, o, lse`` (``O(T d)``), the backward recomputes the scores.

    ``FlashAttention.apply(q, k, v, causal, attention_mask, block_q, block_k) -> o``; prefer :func:`flash_attention`.
    Gradients flow to ``q``, ``k`` and ``v`` (not to the mask or block sizes). Double backward is not supported.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal, attention_mask, block_q, block_k):
        o, lse = flash_attention_forward(
            q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k
        )
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.attention_mask, ctx.block_q, ctx.block_k = causal, attention_mask, block_q, block_k
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(
            do,
            q,
            k,
            v,
            o,
            lse,
            causal=ctx.causal,
            attention_mask=ctx.attention_mask,
            block_q=ctx.block_q,
            block_k=ctx.block_k,
        )
        return dq, dk, dv, None, None, None, None


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    attention_mask: torch.Tensor | None = None,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    """Exact attention with FlashAttention's memory: the tiled forward and the recomputing backward.

    Same result as ``F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`` for the mask built from
    ``causal`` and ``attention_mask`` (True = may attend), except that a query with no allowed key gets 0.

    Args:
        q, k, v, causal, attention_mask, block_q, block_k: see :func:`flash_attention_forward`.

    Returns:
        ``o (B, H, T_q, d_v)``, dtype of ``q``; differentiable with respect to ``q``, ``k``, ``v``.

    Raises:
        ValueError: see :func:`check_flash_inputs`.

    Source: Dao et al. 2022; Dao 2023.
    """
    return FlashAttention.apply(q, k, v, causal, attention_mask, block_q, block_k)
