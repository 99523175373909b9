"""Chapter 13 — Attention at serving time: a paged KV cache (分页 KV 缓存), split-KV decoding (分块解码,
flash-decoding), ring attention (环形注意力) across processes, and learned attention sinks (注意力汇聚).

Chapter 8's cache is one contiguous tensor per sequence and chapter 10 ends on one device. This chapter re-arranges
the same exact attention four ways, each resting on chapter 10's pair (output, log-sum-exp):

1. :class:`PagedKVCache`, :func:`gather_kv`, :func:`paged_attention_decode` — keys and values stored in fixed-size
   blocks (块) of one shared pool, a block table (块表) per sequence mapping its logical blocks to physical ones,
   blocks shared between sequences with copy-on-write (Kwon et al. 2023, "Efficient Memory Management for Large
   Language Model Serving with PagedAttention", sections 4.1–4.4);
2. :func:`attention_with_lse`, :func:`merge_attention_states`, :func:`split_kv_decode` — attention over chunks of the
   keys, merged exactly by their log-sum-exps (Dao, Haziza, Massa & Sizov 2023, "Flash-Decoding for long-context
   inference"; Ye et al. 2025, FlashInfer, its "attention states" and their merge operator);
3. :func:`shard_sequence`, :func:`unshard_sequence`, :func:`shard_positions`, :func:`causal_work_per_rank`,
   :func:`ring_attention_step`, :func:`ring_attention_simulated`, :func:`ring_attention`, :func:`run_ring_attention` —
   P processes each hold a shard of the sequence and pass K and V around a ring (Liu, Zaharia & Abbeel 2023, "Ring
   Attention with Blockwise Transformers for Near-Infinite Context", algorithm 1), with the contiguous split and
   the zig-zag split that balances causal work (Brandon et al. 2023, "Striped Attention", and the load-balanced
   split of ``torch.distributed.tensor.experimental.context_parallel``);
4. :func:`softmax_with_sink`, :func:`attention_with_sink`, :func:`flash_attention_with_sink_forward`,
   :func:`flash_attention_with_sink` — a learned per-head logit in the softmax's denominator (OpenAI 2025,
   gpt-oss model card, its architecture section; after Xiao et al. 2023's sink tokens, StreamingLLM), in plain
   softmax and in chapter 10's tiled loop, with its gradient.

Imported, not repeated: chapter 8's ``repeat_kv`` (grouped-query heads); chapter 10's ``online_softmax_update``,
``check_flash_inputs``, ``block_mask`` and ``flash_attention_backward``. Masks are True = may attend. A query that may
attend to no key gets a zero output and a log-sum-exp of ``-inf`` (chapter 10's convention).
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from solutions.ch08_kv_cache import repeat_kv
from solutions.ch10_flash_attention import block_mask, check_flash_inputs, flash_attention_backward

__all__ = [
    "gather_kv",
    "PagedKVCache",
    "paged_attention_decode",
    "attention_with_lse",
    "merge_attention_states",
    "split_kv_decode",
    "shard_sequence",
    "unshard_sequence",
    "shard_positions",
    "causal_work_per_rank",
    "ring_attention_step",
    "ring_attention_simulated",
    "ring_attention",
    "run_ring_attention",
    "softmax_with_sink",
    "attention_with_sink",
    "flash_attention_with_sink_forward",
    "flash_attention_with_sink",
]

SPLITS = ("contiguous", "zigzag")


# --------------------------------------------------------------------------------------------------
# 1. The paged KV cache (分页 KV 缓存): a block pool and a block table (块表) per sequence
# --------------------------------------------------------------------------------------------------


def gather_kv(blocks: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """One sequence's keys (or values) read from the block pool through its block table, in position order.

    Position ``t`` of the sequence lives in slot ``t % page_size`` of physical block ``block_table[t // page_size]``
    (Kwon et al. 2023, section 4.2, figure 6). The last block may be partly filled: only ``length`` positions are
    returned.

    Args:
        blocks: ``(num_blocks, H_kv, page_size, d)`` the pool (any dtype, any device).
        block_table: ``(n,)`` integer tensor of physical block ids, ``n ≥ ceil(length / page_size)``; entries past
            the sequence's last block are ignored.
        length: the sequence's number of cached positions (``≥ 0``).

    Returns:
        ``(H_kv, length, d)``, dtype and device of ``blocks`` — equal to chapter 8's dense cache of the sequence.

    Raises:
        ValueError: if ``blocks`` is not 4-D, ``block_table`` not a 1-D integer tensor, ``length < 0`` or the table
            has too few blocks for ``length``.
    """
    if blocks.ndim != 4:
        raise ValueError(f"blocks must be (num_blocks, H_kv, page_size, d), got {tuple(blocks.shape)}")
    if block_table.ndim != 1 or block_table.dtype.is_floating_point or block_table.dtype == torch.bool:
        raise ValueError(
            f"block_table must be a 1-D integer tensor, got {block_table.dtype} {tuple(block_table.shape)}"
        )
    page_size = blocks.shape[2]
    if length < 0 or block_table.shape[0] * page_size < length:
        raise ValueError(
            f"length {length} needs {-(-max(length, 0) // page_size)} blocks of {page_size}; the block table "
            f"{tuple(block_table.shape)} has {block_table.shape[0]}"
        )
    ### BEGIN SOLUTION
    n_blocks = -(-length // page_size)  # ceil: the last block may be partly filled
    used = blocks[block_table[:n_blocks].to(device=blocks.device, dtype=torch.long)]  # (n, H_kv, page_size, d)
    H_kv, d = blocks.shape[1], blocks.shape[3]
    flat = used.transpose(0, 1).reshape(H_kv, n_blocks * page_size, d)  # (H_kv, n · page_size, d), position order
    return flat[:, :length]  # (H_kv, length, d)
    ### END SOLUTION


class PagedKVCache:
    """A pool of fixed-size blocks of keys and values shared by many sequences (Kwon et al. 2023, section 4).

    ``k_blocks (num_blocks, H_kv, page_size, d_head)`` and ``v_blocks (num_blocks, H_kv, page_size, d_v)`` hold every
    sequence's keys and values; a sequence owns a *block table* (块表), the list of physical blocks holding its
    positions ``0 … page_size - 1``, ``page_size … 2·page_size - 1``, and so on; only its last block may be partly
    filled, so at most ``page_size - 1`` slots per sequence are wasted. A block may belong to several sequences
    (:meth:`fork`: a shared prompt, beams); each block carries a reference count, and appending to a shared,
    partly-filled last block first copies it (copy-on-write, section 4.4). Freed blocks return to the free list.

    Args:
        num_blocks: blocks in the pool (≥ 1).
        page_size: positions per block (≥ 1): the block size of vLLM, the ``page_size`` of PyTorch's
            ``PagedAttention`` and of FlashInfer (a block is a page of the cache, as in virtual memory).
        n_kv_heads: key/value heads ``H_kv``.
        head_dim: key width ``d_head``; ``d_v`` (keyword) the value width, ``head_dim`` by default.
        dtype, device: of the pool (float32, CPU by default).

    Raises:
        ValueError: on sizes below 1; in the methods, on an unknown or existing sequence id or ill-shaped keys.
        RuntimeError: when an append or a copy-on-write needs a block and the pool has none free.
    """

    def __init__(
        self,
        num_blocks: int,
        page_size: int,
        n_kv_heads: int,
        head_dim: int,
        *,
        d_v: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        d_v = head_dim if d_v is None else d_v
        if min(num_blocks, page_size, n_kv_heads, head_dim, d_v) < 1:
            raise ValueError(
                f"num_blocks, page_size, n_kv_heads, head_dim, d_v must be >= 1; got {num_blocks}, {page_size}, "
                f"{n_kv_heads}, {head_dim}, {d_v}"
            )
        self.page_size = page_size
        self.k_blocks = torch.zeros(num_blocks, n_kv_heads, page_size, head_dim, dtype=dtype, device=device)
        self.v_blocks = torch.zeros(num_blocks, n_kv_heads, page_size, d_v, dtype=dtype, device=device)
        self.ref_counts = [0] * num_blocks  # sequences whose table lists the block
        self.free_blocks = list(range(num_blocks - 1, -1, -1))  # a stack: pop() gives the lowest id first
        self.tables: dict[Any, list[int]] = {}
        self.lengths: dict[Any, int] = {}

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool."""
        return self.k_blocks.shape[0]

    @property
    def blocks_in_use(self) -> int:
        """Blocks referenced by at least one sequence (a shared block counts once)."""
        return self.num_blocks - len(self.free_blocks)

    def _check(self, seq_id: Any) -> None:
        if seq_id not in self.tables:
            raise ValueError(f"unknown sequence {seq_id!r}; allocate it first (known: {list(self.tables)})")

    def _take_block(self) -> int:
        if not self.free_blocks:
            raise RuntimeError(f"the pool's {self.num_blocks} blocks are all in use")
        block = self.free_blocks.pop()
        self.ref_counts[block] = 1
        return block

    def allocate(self, seq_id: Any) -> None:
        """Start an empty sequence ``seq_id`` (no block yet: blocks are taken as positions arrive).

        Raises:
            ValueError: if ``seq_id`` already exists.
        """
        if seq_id in self.tables:
            raise ValueError(f"sequence {seq_id!r} already exists")
        self.tables[seq_id], self.lengths[seq_id] = [], 0

    def append(self, seq_id: Any, k: torch.Tensor, v: torch.Tensor) -> None:
        """Append ``k (H_kv, T_new, d_head)``, ``v (H_kv, T_new, d_v)`` at positions ``length … length + T_new - 1``.

        A new block is taken whenever the last one is full; a shared last block is copied first (copy-on-write).

        Raises:
            ValueError: if the sequence is unknown or the shapes do not fit the pool.
            RuntimeError: if the pool runs out of blocks (the positions written so far stay).
        """
        self._check(seq_id)
        H_kv, bs = self.k_blocks.shape[1], self.page_size
        if (
            k.ndim != 3
            or v.ndim != 3
            or k.shape[:2] != v.shape[:2]
            or k.shape[0] != H_kv
            or k.shape[2] != self.k_blocks.shape[3]
            or v.shape[2] != self.v_blocks.shape[3]
        ):
            raise ValueError(
                f"k, v must be (H_kv, T_new, d_head) = ({H_kv}, T_new, {self.k_blocks.shape[3]}) and (H_kv, T_new, "
                f"d_v={self.v_blocks.shape[3]}); got k{tuple(k.shape)}, v{tuple(v.shape)}"
            )
        table, t, T_new = self.tables[seq_id], self.lengths[seq_id], k.shape[1]
        written = 0
        while written < T_new:
            slot = t % bs
            if slot == 0:  # the last block is full (or there is none): a fresh block
                table.append(self._take_block())
            elif self.ref_counts[table[-1]] > 1:  # copy-on-write: the partly-filled block is shared
                new = self._take_block()
                self.k_blocks[new] = self.k_blocks[table[-1]]
                self.v_blocks[new] = self.v_blocks[table[-1]]
                self.ref_counts[table[-1]] -= 1
                table[-1] = new
            n = min(bs - slot, T_new - written)  # positions that fit in this block
            self.k_blocks[table[-1], :, slot : slot + n] = k[:, written : written + n].to(self.k_blocks)
            self.v_blocks[table[-1], :, slot : slot + n] = v[:, written : written + n].to(self.v_blocks)
            written, t = written + n, t + n
            self.lengths[seq_id] = t

    def fork(self, parent: Any, child: Any) -> None:
        """Start ``child`` as a copy of ``parent`` that shares all its blocks (no data copied; counts + 1).

        Raises:
            ValueError: if ``parent`` is unknown or ``child`` exists.
        """
        self._check(parent)
        if child in self.tables:
            raise ValueError(f"sequence {child!r} already exists")
        self.tables[child], self.lengths[child] = list(self.tables[parent]), self.lengths[parent]
        for block in self.tables[child]:
            self.ref_counts[block] += 1

    def free(self, seq_id: Any) -> None:
        """Forget ``seq_id``; blocks no other sequence references return to the free list.

        Raises:
            ValueError: if the sequence is unknown.
        """
        self._check(seq_id)
        for block in reversed(self.tables.pop(seq_id)):
            self.ref_counts[block] -= 1
            if self.ref_counts[block] == 0:
                self.free_blocks.append(block)
        del self.lengths[seq_id]

    def block_table(self, seq_id: Any) -> torch.Tensor:
        """The sequence's block table, ``(ceil(length / page_size),)`` int64 on the pool's device (a copy)."""
        self._check(seq_id)
        return torch.tensor(self.tables[seq_id], dtype=torch.long, device=self.k_blocks.device)

    def length(self, seq_id: Any) -> int:
        """Cached positions of the sequence."""
        self._check(seq_id)
        return self.lengths[seq_id]

    def gather(self, seq_id: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The sequence's keys ``(H_kv, T, d_head)`` and values ``(H_kv, T, d_v)`` in position order.

        Read by one advanced index, a block id and a slot per position (what :func:`gather_kv` computes, written
        independently of it: the notebook's copy of this module has that exercise stubbed out)."""
        table, T = self.block_table(seq_id), self.length(seq_id)
        t = torch.arange(T, device=table.device)
        block, slot = table[t // self.page_size], t % self.page_size  # (T,), (T,)
        # two index tensors around a slice: the indexed axis comes first, (T, H_kv, d) -> (H_kv, T, d)
        return self.k_blocks[block, :, slot].transpose(0, 1), self.v_blocks[block, :, slot].transpose(0, 1)

    def batch(self, seq_ids: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Block tables and lengths of a batch, the inputs of :func:`paged_attention_decode`.

        Returns:
            ``block_tables (B, max_blocks)`` int64, padded with block 0 (ignored past each length), and
            ``lengths (B,)`` int64, both on the pool's device.
        """
        for s in seq_ids:
            self._check(s)
        width = max([len(self.tables[s]) for s in seq_ids] + [1])
        rows = [self.tables[s] + [0] * (width - len(self.tables[s])) for s in seq_ids]
        device = self.k_blocks.device
        return (
            torch.tensor(rows, dtype=torch.long, device=device).reshape(len(seq_ids), width),
            torch.tensor([self.lengths[s] for s in seq_ids], dtype=torch.long, device=device),
        )


def paged_attention_decode(
    q: torch.Tensor,
    k_blocks: torch.Tensor,
    v_blocks: torch.Tensor,
    block_tables: torch.Tensor,
    lengths: torch.Tensor,
) -> torch.Tensor:
    r"""One decode step for a batch of sequences of different lengths, reading keys and values through block tables.

    Sequence ``b``'s query attends to its ``lengths[b]`` cached positions (the new token's own key already
    appended): :math:`o_b = \mathrm{softmax}(q_b K_b^\top / \sqrt{d_k})\, V_b`, with :math:`K_b, V_b` gathered as in
    :func:`gather_kv` (Kwon et al. 2023, section 4.1). Query head ``h`` reads key/value head
    ``h // (H / H_kv)`` (grouped-query attention, chapter 8's ``repeat_kv``). Scores are accumulated in float32 for
    half inputs. Equal to chapter 8's ``attend_with_cache`` for each sequence.

    Args:
        q: ``(B, H, d_k)`` one query per sequence.
        k_blocks: ``(num_blocks, H_kv, page_size, d_k)``; v_blocks: ``(num_blocks, H_kv, page_size, d_v)``.
        block_tables: ``(B, max_blocks)`` integer; row ``b`` lists sequence ``b``'s blocks (entries past its last
            block: any valid id).
        lengths: ``(B,)`` integer, ``0 ≤ lengths[b] ≤ max_blocks · page_size``.

    Returns:
        ``(B, H, d_v)``, dtype of ``q``; zeros for a sequence of length 0.

    Raises:
        ValueError: if the shapes do not fit (H divisible by H_kv, d_k shared, one table row and length per query).
    """
    if q.ndim != 3 or k_blocks.ndim != 4 or v_blocks.ndim != 4 or block_tables.ndim != 2 or lengths.ndim != 1:
        raise ValueError(
            f"expected q (B, H, d_k), k_blocks/v_blocks (num_blocks, H_kv, page_size, d), "
            f"block_tables (B, max_blocks), lengths (B,); got q{tuple(q.shape)}, k_blocks{tuple(k_blocks.shape)}, v_blocks{tuple(v_blocks.shape)}, "
            f"block_tables{tuple(block_tables.shape)}, lengths{tuple(lengths.shape)}"
        )
    if (
        k_blocks.shape[:3] != v_blocks.shape[:3]
        or q.shape[-1] != k_blocks.shape[-1]
        or q.shape[1] % k_blocks.shape[1]
        or block_tables.shape[0] != q.shape[0]
        or lengths.shape[0] != q.shape[0]
    ):
        raise ValueError(
            f"shapes do not fit: q{tuple(q.shape)}, k_blocks{tuple(k_blocks.shape)}, v_blocks{tuple(v_blocks.shape)}, "
            f"block_tables{tuple(block_tables.shape)}, lengths{tuple(lengths.shape)} (H_kv must divide H, d_k shared)"
        )
    if bool((lengths < 0).any()) or bool((lengths > block_tables.shape[1] * k_blocks.shape[2]).any()):
        raise ValueError(
            f"lengths must lie in 0 … max_blocks · page_size = {block_tables.shape[1] * k_blocks.shape[2]}; "
            f"got {lengths.tolist()}"
        )
    ### BEGIN SOLUTION
    B, H, d_k = q.shape
    H_kv, page_size = k_blocks.shape[1], k_blocks.shape[2]
    acc = torch.promote_types(q.dtype, torch.float32)
    table = block_tables.long()
    T_max = table.shape[1] * page_size
    k = k_blocks[table].transpose(1, 2).reshape(B, H_kv, T_max, d_k)  # (B, H_kv, T_max, d_k)
    v = v_blocks[table].transpose(1, 2).reshape(B, H_kv, T_max, -1)  # (B, H_kv, T_max, d_v)
    k, v = repeat_kv(k, H // H_kv).to(acc), repeat_kv(v, H // H_kv).to(acc)  # (B, H, T_max, ·)
    scores = (k @ q.to(acc)[..., None]).squeeze(-1) / math.sqrt(d_k)  # (B, H, T_max)
    allowed = torch.arange(T_max, device=q.device)[None, :] < lengths.to(q.device)[:, None]  # (B, T_max)
    scores = scores.masked_fill(~allowed[:, None, :], -math.inf)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a sequence of length 0: all -inf, NaN -> 0
    return (weights[:, :, None, :] @ v).squeeze(-2).to(q.dtype)  # (B, H, d_v)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# 2. Split-KV decoding (分块解码, flash-decoding): partial attention, merged by log-sum-exp
# --------------------------------------------------------------------------------------------------


def _positions(start: int, n: int, positions: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    if positions is None:
        return torch.arange(start, start + n, device=device)
    if positions.shape != (n,):
        raise ValueError(f"positions must be ({n},) to match the rows, got {tuple(positions.shape)}")
    return positions.to(device)


def attention_with_lse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    q_start: int = 0,
    k_start: int = 0,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Attention of ``q`` over one chunk of keys, with the chunk's log-sum-exp: the *attention state* of the chunk.

    .. math::
        \mathrm{lse}_i = \log \sum_{j \in \text{chunk}} e^{s_{ij}}, \qquad
        o_i = \sum_{j \in \text{chunk}} e^{s_{ij} - \mathrm{lse}_i}\, v_j, \qquad s_{ij} = q_i \cdot k_j / \sqrt{d_k}

    (Ye et al. 2025, FlashInfer's attention state; chapter 10's ``flash_attention_forward`` returns the same pair.) Rows
    carry *absolute* positions, ``q_start + i`` and ``k_start + j`` (or given ``q_positions``, ``k_positions``, for
    a zig-zag shard); with ``causal`` a query sees the keys at its position or before. A query that sees no key of
    the chunk (an empty chunk, a chunk wholly in its future) gets ``o = 0`` and ``lse = -inf``.

    Args:
        q: ``(B, H, T_q, d_k)``; k: ``(B, H, T_k, d_k)``; v: ``(B, H, T_k, d_v)`` (``T_k = 0`` allowed).
        causal: mask keys after the query's position.
        q_start, k_start: absolute position of the first query and key row.
        q_positions, k_positions: ``(T_q,)``, ``(T_k,)`` integer absolute positions, overriding the starts.

    Returns:
        ``(o, lse)``: ``o (B, H, T_q, d_v)`` in ``q``'s dtype, ``lse (B, H, T_q)`` in float32 (float64 for float64).

    Raises:
        ValueError: if the shapes do not fit or positions do not match the rows.
    """
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"q, k, v must be (B, H, T_q, d_k), (B, H, T_k, d_k), (B, H, T_k, d_v); got q{tuple(q.shape)}, "
            f"k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share d_k: q{tuple(q.shape)}, k{tuple(k.shape)}")
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = q.to(acc) @ k.to(acc).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
    if causal:
        i = _positions(q_start, q.shape[-2], q_positions, q.device)
        j = _positions(k_start, k.shape[-2], k_positions, q.device)
        scores = scores.masked_fill(j[None, :] > i[:, None], -math.inf)  # key after the query: masked
    lse = torch.logsumexp(scores, dim=-1) if k.shape[-2] else scores.new_full(scores.shape[:-1], -math.inf)
    lse_safe = lse.masked_fill(lse == -math.inf, 0.0)  # no key: every weight exp(-inf) = 0
    o = torch.exp(scores - lse_safe[..., None]) @ v.to(acc)  # (B, H, T_q, d_v)
    return o.to(q.dtype), lse


def merge_attention_states(
    outputs: Sequence[torch.Tensor], lses: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Merge the attention states of disjoint chunks of keys into the state of their union, exactly.

    .. math::
        \mathrm{lse} = \log \sum_c e^{\mathrm{lse}_c}, \qquad
        o = \sum_c e^{\mathrm{lse}_c - \mathrm{lse}}\, o_c

    (each chunk's output is rescaled by its share of the softmax's denominator; Ye et al. 2025, FlashInfer's
    merge operator; Dao, Haziza, Massa & Sizov 2023, flash-decoding's final reduction; Milakov & Gimelshein 2018's
    running-sum rescaling.) A chunk with ``lse = -inf`` (no key) weighs 0; if every chunk has ``-inf``, the result is
    ``o = 0``, ``lse = -inf``. Computed in float32 for half inputs.

    Args:
        outputs: ``C ≥ 1`` tensors ``(..., T_q, d_v)``, same shape.
        lses: ``C`` tensors ``(..., T_q)``, the matching log-sum-exps.

    Returns:
        ``(o, lse)``: ``o (..., T_q, d_v)`` in ``outputs[0]``'s dtype, ``lse (..., T_q)`` in float32 (float64 for
        float64 inputs).

    Raises:
        ValueError: if the lists are empty or of different lengths, or shapes do not fit.
    """
    if len(outputs) == 0 or len(outputs) != len(lses):
        raise ValueError(f"need as many outputs as lses (at least one); got {len(outputs)} and {len(lses)}")
    for o_c, lse_c in zip(outputs, lses):
        if o_c.shape != outputs[0].shape or lse_c.shape != o_c.shape[:-1]:
            raise ValueError(
                f"every output must be {tuple(outputs[0].shape)} and its lse {tuple(outputs[0].shape[:-1])}; got "
                f"{tuple(o_c.shape)} and {tuple(lse_c.shape)}"
            )
    ### BEGIN SOLUTION
    acc = torch.promote_types(outputs[0].dtype, torch.float32)
    stacked_lse = torch.stack([lse_c.to(acc) for lse_c in lses])  # (C, ..., T_q)
    lse = torch.logsumexp(stacked_lse, dim=0)  # (..., T_q); -inf where every chunk is empty
    lse_safe = lse.masked_fill(lse == -math.inf, 0.0)
    weights = torch.exp(stacked_lse - lse_safe)  # (C, ..., T_q): each chunk's share, 0 for an empty one
    o = sum(w[..., None] * o_c.to(acc) for w, o_c in zip(weights, outputs))  # (..., T_q, d_v)
    return torch.as_tensor(o).to(outputs[0].dtype), lse
    ### END SOLUTION


def split_kv_decode(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_splits: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of the new queries to the whole cache, in ``num_splits`` chunks of the keys merged by log-sum-exp.

    On a GPU each chunk is one thread block, so a decode step with one query row still fills the device
    (flash-decoding, Dao, Haziza, Massa & Sizov 2023); here the chunks run one after another and the result is the
    same. Chunks are contiguous and as equal as possible (``torch.tensor_split``); some may be empty.

    Args:
        q: ``(B, H, T_q, d_k)`` (``T_q = 1`` in decoding); k: ``(B, H, T_k, d_k)``; v: ``(B, H, T_k, d_v)``.
        num_splits: number of chunks (≥ 1).

    Returns:
        ``(o, lse)`` as :func:`attention_with_lse` over all keys (no mask: every query sees the whole cache).

    Raises:
        ValueError: if ``num_splits < 1`` or the shapes do not fit.
    """
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    states = [
        attention_with_lse(q, k_c, v_c)
        for k_c, v_c in zip(torch.tensor_split(k, num_splits, dim=-2), torch.tensor_split(v, num_splits, dim=-2))
    ]
    return merge_attention_states([o for o, _ in states], [lse for _, lse in states])


# --------------------------------------------------------------------------------------------------
# 3. Ring attention (环形注意力): shards of the sequence, K and V passed around a ring of P processes
# --------------------------------------------------------------------------------------------------


def _check_split(T: int, world_size: int, split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    chunks = world_size * (2 if split == "zigzag" else 1)
    if T % chunks:
        raise ValueError(f"T={T} must be a multiple of {chunks} for the {split} split over {world_size} ranks")


def shard_positions(
    T: int, world_size: int, rank: int, split: str = "contiguous", *, device: torch.device | str | None = None
) -> torch.Tensor:
    """The absolute positions of rank ``rank``'s rows, ``(T / world_size,)`` int64.

    ``contiguous``: rank ``r`` holds positions ``r·c … (r+1)·c - 1``, ``c = T / P``. ``zigzag``: the sequence is cut
    into ``2P`` chunks of ``c = T / 2P`` and rank ``r`` holds chunks ``r`` and ``2P - 1 - r``, so under a causal
    mask every rank has the same number of (query, key) pairs to compute (the load-balanced split of PyTorch's
    context parallelism; Brandon et al. 2023 stripe instead).

    Raises:
        ValueError: for an unknown split, ``rank`` outside ``0 … P-1`` or ``T`` not a multiple of ``P`` (``2P``).
    """
    _check_split(T, world_size, split)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in 0 … {world_size - 1}, got {rank}")
    if split == "contiguous":
        c = T // world_size
        return torch.arange(rank * c, (rank + 1) * c, device=device)
    c = T // (2 * world_size)
    first, second = rank, 2 * world_size - 1 - rank
    return torch.cat(
        [
            torch.arange(first * c, (first + 1) * c, device=device),
            torch.arange(second * c, (second + 1) * c, device=device),
        ]
    )


def shard_sequence(x: torch.Tensor, world_size: int, split: str = "contiguous", *, dim: int = -2) -> list[torch.Tensor]:
    """Cut ``x`` along ``dim`` (the time axis, ``T``) into ``world_size`` shards, rank ``r``'s first.

    Shard ``r`` holds rows :func:`shard_positions` ``(T, P, r, split)``.

    Raises:
        ValueError: see :func:`shard_positions`.
    """
    T = x.shape[dim]
    _check_split(T, world_size, split)
    return [x.index_select(dim, shard_positions(T, world_size, r, split, device=x.device)) for r in range(world_size)]


def unshard_sequence(shards: Sequence[torch.Tensor], split: str = "contiguous", *, dim: int = -2) -> torch.Tensor:
    """The inverse of :func:`shard_sequence`: put every shard's rows back at their positions along ``dim``.

    Raises:
        ValueError: if there are no shards, they differ in shape, or see :func:`shard_positions`.
    """
    if not shards or any(s.shape != shards[0].shape for s in shards):
        raise ValueError(f"need shards of one shape, got {[tuple(s.shape) for s in shards]}")
    P = len(shards)
    T = shards[0].shape[dim] * P
    _check_split(T, P, split)
    order = torch.cat([shard_positions(T, P, r, split) for r in range(P)])  # row i of cat(shards) is position order[i]
    return torch.cat(list(shards), dim=dim).index_select(dim, torch.argsort(order).to(shards[0].device))


def causal_work_per_rank(T: int, world_size: int, split: str = "contiguous") -> list[int]:
    """(query, key) pairs each rank computes under a causal mask: ``Σ (p + 1)`` over its query positions ``p``.

    Contiguous: rank ``r`` has ``c²·r + c(c+1)/2`` (``c = T/P``), the last rank ``2P - 1`` times the first's.
    Zig-zag: every rank has ``T(T + 1) / (2P)`` — equal (chunks ``r`` and ``2P-1-r`` sum to the same).

    Raises:
        ValueError: see :func:`shard_positions`.
    """
    return [int((shard_positions(T, world_size, r, split) + 1).sum()) for r in range(world_size)]


def ring_attention_step(
    o: torch.Tensor,
    lse: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rank: int,
    source: int,
    world_size: int,
    causal: bool = True,
    split: str = "contiguous",
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of ring attention on rank ``rank``: attend its query shard to the K/V shard that came from ``source``,
    and merge the result into the running state ``(o, lse)``.

    The mask is that of the *pair* of shards: the query rows sit at ``shard_positions(T, P, rank, split)``, the key
    rows at ``shard_positions(T, P, source, split)``, ``T = P · T_shard`` (Liu et al. 2023, algorithm 1; a step's
    pair may be wholly masked, e.g. a later contiguous shard, and then leaves the state unchanged). The start state
    is ``o = 0``, ``lse = -inf``; after the ``P`` steps with ``source = rank, rank-1, …`` the state is that of full
    attention for the rank's queries.

    Args:
        o: ``(B, H, T_shard, d_v)`` running output; lse: ``(B, H, T_shard)`` its log-sum-exp.
        q: ``(B, H, T_shard, d_k)`` this rank's queries; k, v: ``(B, H, T_shard, d_k)``, ``(B, H, T_shard, d_v)``
            the visiting shard's keys and values.
        rank, source: the query shard's and the K/V shard's rank, ``0 … P-1``.
        world_size: ``P``.
        causal: mask keys after each query's absolute position.
        split: ``"contiguous"`` or ``"zigzag"`` (:func:`shard_positions`).

    Returns:
        The new ``(o, lse)``, shapes of the inputs (``o`` in ``q``'s dtype, ``lse`` float32 or float64).

    Raises:
        ValueError: if shards differ in length or ranks are out of range (see :func:`shard_positions`).
    """
    if q.ndim != 4 or k.shape[-2] != q.shape[-2] or o.shape[:-1] != q.shape[:-1] or lse.shape != q.shape[:-1]:
        raise ValueError(
            f"shards must be (B, H, T_shard, ·) of one length, o (B, H, T_shard, d_v), lse (B, H, T_shard); got "
            f"o{tuple(o.shape)}, lse{tuple(lse.shape)}, q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    ### BEGIN SOLUTION
    T = q.shape[-2] * world_size
    q_pos = shard_positions(T, world_size, rank, split, device=q.device)  # (T_shard,) where the queries sit
    k_pos = shard_positions(T, world_size, source, split, device=q.device)  # (T_shard,) where the keys sit
    o_part, lse_part = attention_with_lse(q, k, v, causal=causal, q_positions=q_pos, k_positions=k_pos)
    new_o, new_lse = merge_attention_states([o, o_part], [lse, lse_part])
    return new_o.to(q.dtype), new_lse
    ### END SOLUTION


def _start_state(q: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    acc = torch.promote_types(q.dtype, torch.float32)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    return o, torch.full(q.shape[:-1], -math.inf, dtype=acc, device=q.device)


def ring_attention_simulated(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    world_size: int,
    *,
    causal: bool = True,
    split: str = "contiguous",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ring attention for ``world_size`` shards in one process: at step ``s`` rank ``r`` holds the K/V shard of rank
    ``(r - s) mod P`` (what :func:`ring_attention` receives), and folds it in with :func:`ring_attention_step`.

    Args:
        q, k, v: ``(B, H, T, d_k)``, ``(B, H, T, d_k)``, ``(B, H, T, d_v)``, the full sequence (self-attention).
        world_size, causal, split: see :func:`ring_attention_step`.

    Returns:
        ``(o, lse)`` of the full sequence, ``(B, H, T, d_v)`` and ``(B, H, T)``, equal to full attention.

    Raises:
        ValueError: if q, k, v differ in ``T`` or ``T`` is not a multiple of ``P`` (``2P`` for zig-zag).
    """
    if q.ndim != 4 or k.shape[-2] != q.shape[-2] or v.shape[-2] != q.shape[-2]:
        raise ValueError(
            f"q, k, v must share T (self-attention); got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    qs, ks, vs = (shard_sequence(t, world_size, split) for t in (q, k, v))
    outs, lses = [], []
    for rank in range(world_size):
        o, lse = _start_state(qs[rank], vs[rank])
        for step in range(world_size):
            source = (rank - step) % world_size
            o, lse = ring_attention_step(
                o, lse, qs[rank], ks[source], vs[source], rank=rank, source=source, world_size=world_size,
                causal=causal, split=split,
            )  # fmt: skip
        outs.append(o)
        lses.append(lse)
    return unshard_sequence(outs, split), unshard_sequence(lses, split, dim=-1)


def _ring_pass(tensors: list[torch.Tensor], group: Any) -> list[torch.Tensor]:
    """Send ``tensors`` to the next rank of the ring and receive the previous rank's (same shapes)."""
    rank, P = dist.get_rank(group), dist.get_world_size(group)
    received = [torch.empty_like(t) for t in tensors]
    ops = [dist.P2POp(dist.isend, t.contiguous(), dist.get_global_rank(group, (rank + 1) % P), group) for t in tensors]
    ops += [dist.P2POp(dist.irecv, r, dist.get_global_rank(group, (rank - 1) % P), group) for r in received]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    return received


def _ring_forward(q, k, v, causal, split, group):
    rank, P = dist.get_rank(group), dist.get_world_size(group)
    o, lse = _start_state(q, v)
    for step in range(P):
        source = (rank - step) % P
        o, lse = ring_attention_step(
            o, lse, q, k, v, rank=rank, source=source, world_size=P, causal=causal, split=split
        )
        if step < P - 1:
            k, v = _ring_pass([k, v], group)  # overlapped with the next step's compute on a GPU
    return o, lse


class _RingAttention(torch.autograd.Function):
    """Ring attention's forward (K, V around the ring) and backward (K, V and their gradients around the ring)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, split, group):
        o, lse = _ring_forward(q, k, v, causal, split, group)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.split, ctx.group = causal, split, group
        return o, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        group, causal, split = ctx.group, ctx.causal, ctx.split
        rank, P = dist.get_rank(group), dist.get_world_size(group)
        T = q.shape[-2] * P
        acc = lse.dtype
        q_pos = shard_positions(T, P, rank, split, device=q.device)
        qa, doa = q.to(acc), do.to(acc)
        D = (doa * o.to(acc)).sum(-1)  # (B, H, T_shard): rowsum(dO ∘ O), Dao 2023 algorithm 2 line 4
        lse_safe = lse.masked_fill(lse == -math.inf, 0.0)
        scale = 1.0 / math.sqrt(q.shape[-1])
        dq = torch.zeros_like(qa)
        dk, dv = torch.zeros_like(k, dtype=acc), torch.zeros_like(v, dtype=acc)  # travel with the visiting shard
        for step in range(P):
            source = (rank - step) % P
            ka, va = k.to(acc), v.to(acc)
            s = qa @ ka.transpose(-2, -1) * scale  # (B, H, T_shard, T_shard), recomputed
            if causal:
                k_pos = shard_positions(T, P, source, split, device=q.device)
                s = s.masked_fill(k_pos[None, :] > q_pos[:, None], -math.inf)
            p = torch.exp(s - lse_safe[..., None])  # the final softmax weights of this pair
            dv = dv + p.transpose(-2, -1) @ doa
            ds = p * (doa @ va.transpose(-2, -1) - D[..., None])
            dq = dq + ds @ ka * scale
            dk = dk + ds.transpose(-2, -1) @ qa * scale
            k, v, dk, dv = _ring_pass([k, v, dk, dv], group) if step < P - 1 else (k, v, dk, dv)
        dk, dv = _ring_pass([dk, dv], group)  # one more hop: each shard's gradients arrive home
        if dlse is not None and bool(dlse.ne(0).any()):
            raise NotImplementedError("ring attention's backward does not take a gradient of lse")
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None


def ring_attention(
    q_shard: torch.Tensor,
    k_shard: torch.Tensor,
    v_shard: torch.Tensor,
    *,
    causal: bool = True,
    split: str = "contiguous",
    group: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ring attention inside a ``torch.distributed`` process group: each rank holds one shard and the K/V shards
    travel around the ring (rank ``r`` sends to ``r+1`` and receives from ``r-1``), ``P - 1`` hops forward.

    Differentiable with respect to the three shards: the backward recomputes each pair's weights from the saved
    log-sum-exp (chapter 10's recomputation) and sends K, V with their accumulating gradients around the ring once
    more, so every shard's ``dK``, ``dV`` arrives back at its rank (Liu et al. 2023, section 3).

    Args:
        q_shard, k_shard, v_shard: this rank's ``(B, H, T_shard, d_k)``, ``(B, H, T_shard, d_k)``,
            ``(B, H, T_shard, d_v)`` (every rank the same shapes), rows at ``shard_positions(T, P, rank, split)``.
        causal, split: see :func:`ring_attention_step`.
        group: the process group (default: the world); any backend with point-to-point ops (gloo, NCCL).

    Returns:
        ``(o, lse)`` of this rank's queries over the whole sequence, ``(B, H, T_shard, d_v)``, ``(B, H, T_shard)``.

    Raises:
        ValueError: if the shards do not fit (see :func:`ring_attention_step`); RuntimeError if no process group
            is initialised.
    """
    if not dist.is_initialized():
        raise RuntimeError("ring_attention needs torch.distributed.init_process_group first")
    group = dist.group.WORLD if group is None else group
    if q_shard.ndim != 4 or q_shard.shape[:3] != k_shard.shape[:3] or k_shard.shape[:3] != v_shard.shape[:3]:
        raise ValueError(
            f"shards must be (B, H, T_shard, d) of one (B, H, T_shard); got q{tuple(q_shard.shape)}, "
            f"k{tuple(k_shard.shape)}, v{tuple(v_shard.shape)}"
        )
    o, lse = _RingAttention.apply(q_shard, k_shard, v_shard, causal, split, group)
    return o, lse


def _ring_worker(rank: int, world_size: int, init_file: str, work_dir: str, causal: bool, split: str) -> None:
    """One process of :func:`run_ring_attention`: its shards from ``work_dir/inputs.pt``, its results to
    ``work_dir/rank{r}.pt``."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        inputs = torch.load(os.path.join(work_dir, "inputs.pt"))
        q, k, v = (shard_sequence(t, world_size, split)[rank].requires_grad_() for t in inputs["qkv"])
        o, lse = ring_attention(q, k, v, causal=causal, split=split)
        grads = torch.autograd.grad(o, (q, k, v), shard_sequence(inputs["do"], world_size, split)[rank])
        torch.save({"o": o.detach(), "lse": lse.detach(), "grads": grads}, os.path.join(work_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    world_size: int,
    *,
    causal: bool = True,
    split: str = "contiguous",
    do: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Start ``world_size`` real processes (``torch.multiprocessing``, gloo, CPU), shard ``q, k, v``, run
    :func:`ring_attention` forward and backward, and gather the results in position order.

    Args:
        q, k, v: ``(B, H, T, d_k)``, ``(B, H, T, d_k)``, ``(B, H, T, d_v)`` CPU tensors.
        world_size: processes ``P`` (``T`` a multiple of ``P``, of ``2P`` for zig-zag).
        causal, split: see :func:`ring_attention_step`.
        do: ``(B, H, T, d_v)`` the gradient of the loss with respect to the output (ones by default).

    Returns:
        ``(o, lse, (dq, dk, dv))`` for the full sequence.

    Raises:
        ValueError: see :func:`shard_positions`.
    """
    import torch.multiprocessing as mp

    _check_split(q.shape[-2], world_size, split)
    do = torch.ones(*q.shape[:-1], v.shape[-1], dtype=q.dtype) if do is None else do
    with tempfile.TemporaryDirectory() as work_dir:
        torch.save({"qkv": (q, k, v), "do": do}, os.path.join(work_dir, "inputs.pt"))
        init_file = os.path.join(work_dir, "init")
        mp.spawn(_ring_worker, args=(world_size, init_file, work_dir, causal, split), nprocs=world_size, join=True)
        results = [torch.load(os.path.join(work_dir, f"rank{r}.pt")) for r in range(world_size)]
    o = unshard_sequence([r["o"] for r in results], split)
    lse = unshard_sequence([r["lse"] for r in results], split, dim=-1)
    dq, dk, dv = (unshard_sequence([r["grads"][i] for r in results], split) for i in range(3))
    return o, lse, (dq, dk, dv)


# --------------------------------------------------------------------------------------------------
# 4. Learned attention sinks (注意力汇聚): one more logit in the softmax's denominator
# --------------------------------------------------------------------------------------------------


def _check_sink(sink: torch.Tensor, H: int) -> None:
    if sink.shape != (H,):
        raise ValueError(f"sink must be (H,) = ({H},), one logit per head; got {tuple(sink.shape)}")


def softmax_with_sink(scores: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    r"""Softmax over the keys with a learned sink logit per head: ``softmax([s; sink])[:-1]``.

    .. math:: p_j = \frac{e^{s_j}}{\sum_{j'} e^{s_{j'}} + e^{\mathrm{sink}_h}}

    The weights sum to less than 1: the rest goes to "no token" (OpenAI 2025, gpt-oss model card, architecture).
    Masked scores are ``-inf``; a row with every key masked gets zeros.

    Args:
        scores: ``(B, H, T_q, T_k)`` floating point.
        sink: ``(H,)`` one logit per head, same dtype.

    Returns:
        ``(B, H, T_q, T_k)``, dtype of ``scores``.

    Raises:
        ValueError: if ``scores`` is not 4-D or ``sink`` is not ``(H,)``.
    """
    if scores.ndim != 4:
        raise ValueError(f"scores must be (B, H, T_q, T_k), got {tuple(scores.shape)}")
    _check_sink(sink, scores.shape[1])
    column = sink.to(scores.dtype)[None, :, None, None].expand(*scores.shape[:-1], 1)  # (B, H, T_q, 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


def attention_with_sink(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sink: torch.Tensor, *, causal: bool = False
) -> torch.Tensor:
    """Attention whose softmax has a learned sink (:func:`softmax_with_sink`): the oracle of the tiled form.

    Args:
        q: ``(B, H, T_q, d_k)``; k: ``(B, H, T_k, d_k)``; v: ``(B, H, T_k, d_v)``; sink: ``(H,)``.
        causal: bottom-right aligned causal mask (chapter 3's ``causal_mask``, needs ``T_q ≤ T_k``).

    Returns:
        ``(B, H, T_q, d_v)``, differentiable with respect to q, k, v and the sink.

    Raises:
        ValueError: see chapter 10's ``check_flash_inputs``; or if ``sink`` is not ``(H,)``.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=None)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
    if causal:
        allowed = block_mask(0, q.shape[-2], 0, k.shape[-2], T_q=q.shape[-2], T_k=k.shape[-2], causal=True,
                             attention_mask=None, device=q.device)  # fmt: skip
        assert allowed is not None
        scores = scores.masked_fill(~allowed, -math.inf)
    return softmax_with_sink(scores, sink) @ v  # (B, H, T_q, d_v)


def flash_attention_with_sink_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sink: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Chapter 10's tiled forward pass with a learned sink: after the key blocks, one more online-softmax step.

    The sink is a key with score :math:`\mathrm{sink}_h` and a zero value, so it joins the running max and sum
    and leaves the output alone:

    .. math::
        m' = \max(m, \mathrm{sink}_h),\quad
        \ell' = e^{m - m'} \ell + e^{\mathrm{sink}_h - m'},\quad
        \tilde O' = e^{m - m'} \tilde O

    then :math:`O = \tilde O / \ell'`, :math:`L = m' + \log \ell'` (Dao 2023, algorithm 1, with the sink term as in
    the FlashAttention and FlashMLA kernels of 2025–26). ``L`` includes the sink, so chapter 10's backward, given
    it, returns the right ``dQ, dK, dV`` (:func:`flash_attention_with_sink`).

    Args:
        q, k, v, causal, block_q, block_k: as chapter 10's ``flash_attention_forward`` (no padding mask).
        sink: ``(H,)`` one logit per head.

    Returns:
        ``(o, lse)``: ``o (B, H, T_q, d_v)`` in ``q``'s dtype; ``lse (B, H, T_q)`` (float32 for half inputs), finite.

    Raises:
        ValueError: see chapter 10's ``check_flash_inputs``; or if ``sink`` is not ``(H,)``.
    """
    check_flash_inputs(q, k, v, causal=causal, attention_mask=None, block_q=block_q, block_k=block_k)
    if sink.shape != (q.shape[1],):
        raise ValueError(f"sink must be (H,) = ({q.shape[1]},), one logit per head; got {tuple(sink.shape)}")
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    acc = torch.promote_types(q.dtype, torch.float32)
    scale = 1.0 / math.sqrt(d_k)
    tile_mask = functools.partial(block_mask, T_q=T_q, T_k=T_k, causal=causal, attention_mask=None, device=q.device)
    sink_h = sink.to(acc)[None, :, None]  # (1, H, 1): the sink logit of each head
    o = torch.empty(B, H, T_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(B, H, T_q, dtype=acc, device=q.device)
    for q_start in range(0, T_q, block_q):
        q_end = min(q_start + block_q, T_q)
        q_i = q[:, :, q_start:q_end].to(acc)  # (B, H, n_q, d_k)
        m_i = torch.full((B, H, q_end - q_start), -math.inf, dtype=acc, device=q.device)  # running max
        l_i = torch.zeros(B, H, q_end - q_start, dtype=acc, device=q.device)  # running sum of exp
        o_i = torch.zeros(B, H, q_end - q_start, d_v, dtype=acc, device=q.device)  # unnormalised output
        for k_start in range(0, T_k, block_k):  # chapter 10's loop over key blocks
            k_end = min(k_start + block_k, T_k)
            s_ij = q_i @ k[:, :, k_start:k_end].to(acc).transpose(-2, -1) * scale  # (B, H, n_q, n_k)
            allowed = tile_mask(q_start, q_end, k_start, k_end)
            if allowed is not None:
                s_ij = s_ij.masked_fill(~allowed, -math.inf)
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)
            p_ij = torch.exp(s_ij - m_safe[..., None])
            alpha = torch.exp(m_i - m_safe)
            l_i = alpha * l_i + p_ij.sum(dim=-1)
            o_i = alpha[..., None] * o_i + p_ij @ v[:, :, k_start:k_end].to(acc)
            m_i = m_new
        ### BEGIN SOLUTION
        m_new = torch.maximum(m_i, sink_h)  # (B, H, n_q): the sink joins the running max (finite from here on)
        alpha = torch.exp(m_i - m_new)  # rescales what was summed under the old max (0 where m_i = -inf)
        l_i = alpha * l_i + torch.exp(sink_h - m_new)  # ℓ += exp(sink − m): the sink's term in the denominator
        o_i = alpha[..., None] * o_i  # the sink's value is zero: the output is only rescaled
        m_i = m_new
        ### END SOLUTION
        o[:, :, q_start:q_end] = (o_i / l_i[..., None]).to(q.dtype)
        lse[:, :, q_start:q_end] = m_i + torch.log(l_i)
    return o, lse


class _FlashAttentionWithSink(torch.autograd.Function):
    """The tiled forward with a sink, and chapter 10's recomputing backward plus the sink's gradient."""

    @staticmethod
    def forward(ctx, q, k, v, sink, causal, block_q, block_k):
        o, lse = flash_attention_with_sink_forward(q, k, v, sink, causal=causal, block_q=block_q, block_k=block_k)
        ctx.save_for_backward(q, k, v, sink, o, lse)
        ctx.causal, ctx.block_q, ctx.block_k = causal, block_q, block_k
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, sink, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(
            do, q, k, v, o, lse, causal=ctx.causal, block_q=ctx.block_q, block_k=ctx.block_k
        )
        # d o / d sink = -p_sink · o, so dL/d sink_h = -Σ_{b,i} p_sink · rowsum(dO ∘ O), p_sink = exp(sink - L)
        acc = lse.dtype
        p_sink = torch.exp(sink.to(acc)[None, :, None] - lse)  # (B, H, T_q)
        D = (do.to(acc) * o.to(acc)).sum(dim=-1)  # (B, H, T_q)
        dsink = -(p_sink * D).sum(dim=(0, 2))  # (H,)
        return dq, dk, dv, dsink.to(sink.dtype), None, None, None


def flash_attention_with_sink(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sink: torch.Tensor,
    *,
    causal: bool = False,
    block_q: int = 64,
    block_k: int = 64,
) -> torch.Tensor:
    r"""Tiled attention with a learned sink, differentiable with respect to ``q, k, v`` and the sink.

    The backward is chapter 10's ``flash_attention_backward`` given the log-sum-exp that includes the sink (its
    :math:`D_i = \mathrm{rowsum}(dO_i \circ O_i)` still holds: the sink's value is zero), plus the sink's gradient
    :math:`\partial L / \partial\, \mathrm{sink}_h = -\sum_{b,i} e^{\mathrm{sink}_h - L_{bhi}} D_{bhi}`.

    Args:
        q, k, v, sink, causal, block_q, block_k: see :func:`flash_attention_with_sink_forward`.

    Returns:
        ``(B, H, T_q, d_v)``, equal to :func:`attention_with_sink`.

    Raises:
        ValueError: see :func:`flash_attention_with_sink_forward`.
    """
    return _FlashAttentionWithSink.apply(q, k, v, sink, causal, block_q, block_k)
