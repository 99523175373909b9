"""Checks for chapter 13, attention at serving time (notebook ``notebooks/ch13_serving_attention.ipynb``).

The references are computed independently of the course's solution: a block table is read position by position
in Python (``block_table[t // page_size]``, slot ``t % page_size``); attention is PyTorch's
``scaled_dot_product_attention`` and ``torch.logsumexp`` of the masked scores (in float64); the softmax with a sink
is ``torch.softmax`` over the scores with the sink appended as one more column; a shard's positions are written
out here from the split's definition. They are bound here at import time, so that a student cell that rebinds them
does not change the reference.

The pools the checks build hold random values in every slot, the unused slots of a partly filled last block and
the blocks a table's padding points at included: reading one position too many changes the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch13_serving_attention")

_logsumexp = torch.logsumexp
_softmax = torch.softmax


def _randn(*shape, seed, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, generator=rng(seed), dtype=torch.float64) * scale).to(dtype)


def _qkv(B, H, T_q, T_k, d_k, d_v, *, seed, scale=1.0):
    """Float32 ``q (B, H, T_q, d_k)``, ``k (B, H, T_k, d_k)``, ``v (B, H, T_k, d_v)`` from seeds ``seed``, ``seed + 1``,
    ``seed + 2``; ``scale`` multiplies q and k (the scores grow by its square)."""
    q, k = _randn(B, H, T_q, d_k, seed=seed, scale=scale), _randn(B, H, T_k, d_k, seed=seed + 1, scale=scale)
    return q, k, _randn(B, H, T_k, d_v, seed=seed + 2)


def _in_dtype(fn, name: str, *args, keep: tuple[int, ...] = (), **kwargs):
    """``run(dtype)`` for :func:`expect_half_precision`: ``fn(*args, **kwargs)`` with the floating tensors of ``args``
    in ``dtype``, but for those at the positions in ``keep`` (passed as they are)."""

    def run(dtype):
        cast = [
            a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() and i not in keep else a
            for i, a in enumerate(args)
        ]
        return call(Message("{name} in {dtype}", name=name, dtype=dtype), fn, *cast, **kwargs)

    return run


def _call_state(what, name: str, fn, *args, o_shape, lse_shape, **kwargs):
    """``fn(*args, **kwargs)`` through :func:`call`, which must return a pair ``(o, lse)`` of these shapes."""
    result = call(what, fn, *args, **kwargs)
    expect_true(
        isinstance(result, tuple) and len(result) == 2,
        Message("{name} should return a tuple (o, lse); you returned {type}.", name=name, type=type(result).__name__),
    )
    o, lse = result
    expect_shape(Message("{what}: o", what=what), o, tuple(o_shape))
    expect_shape(Message("{what}: lse", what=what), lse, tuple(lse_shape))
    return o, lse


def _expect_state(what, o, lse, expected_o, expected_lse, *, hidden=False, hint: Message | str = "") -> None:
    """The answer's state ``(o, lse)`` equals the expected one (the same hint for both)."""
    expect_close(Message("{what}: o", what=what), o, expected_o, hidden=hidden, hint=hint)
    expect_close(Message("{what}: lse", what=what), lse, expected_lse, hidden=hidden, hint=hint)


def _tril(T_q, T_k) -> torch.Tensor:
    """The causal mask ``(T_q, T_k)``, True where query i may see key j: the queries are the keys' last T_q."""
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)


def _same(got, value) -> bool:
    """Whether the answer ``got`` equals ``value`` (a mistaken result) to float32's tolerance."""
    return (
        isinstance(got, torch.Tensor)
        and got.shape == value.shape
        and bool(torch.allclose(got.detach().double().cpu(), value.double(), rtol=1e-4, atol=1e-5, equal_nan=True))
    )


def _hint_from(got, guesses: Mapping[Message, torch.Tensor | None], recipe: Message | str = "") -> Message | str:
    """The text of the first mistaken result the answer equals, else ``recipe``."""
    for text, value in guesses.items():
        if value is not None and _same(got, value):
            return text
    return recipe


# ---------------------------------------------------------------- exercise 1: gather_kv


def _read_table(blocks, table, length, *, heads_mixed=False):
    """Position by position: position t is slot t % page_size of block table[t // page_size]; ``(H_kv, length, d)``.
    With ``heads_mixed`` the blocks are flattened without moving the head axis first (a mistake, for hints)."""
    bs, H_kv, d = blocks.shape[2], blocks.shape[1], blocks.shape[3]
    if heads_mixed:
        n = -(-length // bs)
        return blocks[[int(b) for b in table[:n]]].reshape(H_kv, n * bs, d)[:, :length]
    rows = [blocks[int(table[t // bs]), :, t % bs] for t in range(length)]  # each (H_kv, d)
    return torch.stack(rows, dim=1) if rows else blocks.new_zeros(H_kv, 0, d)


_GATHER_RECIPE = Message(
    "position t of the sequence is slot t % page_size of block block_table[t // page_size]: take the first "
    "ceil(length / page_size) blocks of the table, put their slots in order for each head, keep `length` positions."
)


def _compare_gather(fn, blocks, table, length, *, hidden=False):
    what = Message(
        "gather_kv(blocks {shape}, block_table={table}, length={length})",
        shape=tuple(blocks.shape),
        table=[int(b) for b in table],
        length=length,
    )
    got = call(what, fn, blocks, table, length)
    H_kv, bs, d = blocks.shape[1], blocks.shape[2], blocks.shape[3]
    expect_true(isinstance(got, torch.Tensor), Message("{what} should return a tensor.", what=what))
    if got.ndim == 3 and got.shape[0] == H_kv and got.shape[2] == d and got.shape[1] != length and not hidden:
        n_full, n_all = length // bs, -(-length // bs)
        why: Message | None = None
        if got.shape[1] == n_full * bs and n_full != n_all:
            why = Message(
                "the last block is partly filled, and length positions need ceil(length / page_size) blocks, not "
                "length // page_size."
            )
        elif got.shape[1] in (n_all * bs, len(table) * bs):
            why = Message("keep only the first `length` positions (the rest of the last block is unused).")
        if why is not None:
            n = got.shape[1]
            raise CheckFailed(
                Message(
                    "{what}: you returned {n} positions instead of {length}: {why}",
                    what=what,
                    n=n,
                    length=length,
                    why=why,
                )
            )
    expect_shape(what, got, (H_kv, length, d))
    expect_true(
        got.dtype == blocks.dtype,
        Message(
            "{what}: the result should keep the blocks' dtype {dtype}, got {got}.",
            what=what,
            dtype=blocks.dtype,
            got=got.dtype,
        ),
    )
    expected = _read_table(blocks, table, length)
    hint: Message | str = ""
    if not hidden:
        in_pool_order = (
            _read_table(blocks, torch.arange(blocks.shape[0]), length) if length <= len(blocks) * bs else None
        )
        guesses = {
            Message(
                "the blocks were flattened with the head axis inside: move the head axis first "
                "((n, H_kv, page_size, d) -> (H_kv, n, page_size, d)) before merging blocks and slots."
            ): _read_table(blocks, table, length, heads_mixed=True),
            Message(
                "you read blocks 0, 1, 2, … of the pool: read the blocks the block table lists, in its order."
            ): in_pool_order,
        }
        hint = _hint_from(got, guesses, _GATHER_RECIPE)
    expect_close(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("gather_kv", points=2)
def _gather_ragged(fn):
    """reads length 10 from blocks of 4 through the table [5, 0, 3] (the last block partly filled)"""
    blocks = _randn(7, 2, 4, 3, seed=1)
    _compare_gather(fn, blocks, torch.tensor([5, 0, 3]), 10)


@EXERCISES.check("gather_kv")
def _gather_full_and_single(fn):
    """a full last block (length 12, table [2, 6, 1]) and a single position (length 1, table [4])"""
    blocks = _randn(7, 3, 4, 5, seed=2)
    _compare_gather(fn, blocks, torch.tensor([2, 6, 1]), 12)
    _compare_gather(fn, blocks, torch.tensor([4]), 1)


@EXERCISES.check(
    "gather_kv",
    hidden=True,
    requires="ignores table entries past the sequence's last block, and returns (H_kv, 0, d) for length 0",
)
def _gather_padding_and_empty(fn):
    """table entries past the last block are ignored; length 0 gives (H_kv, 0, d)"""
    blocks = _randn(8, 2, 3, 4, seed=3)
    _compare_gather(fn, blocks, torch.tensor([3, 1, 6, 0, 2]), 5, hidden=True)
    _compare_gather(fn, blocks, torch.tensor([7, 2]), 0, hidden=True)


@EXERCISES.check(
    "gather_kv",
    hidden=True,
    requires="takes an int32 block table and keeps the blocks' dtype (float16)",
)
def _gather_int32_half(fn):
    """an int32 block table and float16 blocks"""
    blocks = _randn(6, 2, 5, 3, seed=4, dtype=torch.float16)
    _compare_gather(fn, blocks, torch.tensor([4, 1, 5], dtype=torch.int32), 13, hidden=True)


# ---------------------------------------------------------------- exercise 2: paged_attention_decode


def _pool_case(B_lengths, H, H_kv, page_size, d_k, d_v, seed, *, shared=0):
    """A random pool, tables drawing distinct blocks (the first ``shared`` blocks of sequence 0 also start
    sequence 1's table), padded with random block ids; returns q, k_blocks, v_blocks, tables, lengths."""
    g = rng(seed)
    n_blocks = [-(-n // page_size) for n in B_lengths]
    num_blocks = sum(n_blocks) + 3
    perm = torch.randperm(num_blocks, generator=g).tolist()
    width = max(n_blocks + [1]) + 1  # one padding column at least
    rows, used = [], 0
    for b, n in enumerate(n_blocks):
        own = perm[used : used + n]
        used += n
        if b == 1 and shared:
            own = rows[0][:shared] + own[shared:]
        pad = torch.randint(0, num_blocks, (width - n,), generator=g).tolist()
        rows.append(own + pad)
    tables = torch.tensor(rows, dtype=torch.long)
    q = _randn(len(B_lengths), H, d_k, seed=seed + 1)
    k_blocks = _randn(num_blocks, H_kv, page_size, d_k, seed=seed + 2)
    v_blocks = _randn(num_blocks, H_kv, page_size, d_v, seed=seed + 3)
    return q, k_blocks, v_blocks, tables, torch.tensor(B_lengths, dtype=torch.long)


def _decode_oracle(q, k_blocks, v_blocks, tables, lengths, *, shift=0, grouping="interleave"):
    """Each sequence on its own: its keys read position by position, PyTorch's attention with its query;
    ``(B, H, d_v)``, zeros for length 0. ``shift`` and ``grouping="repeat"`` give mistaken results."""
    B, H = q.shape[:2]
    n_rep = H // k_blocks.shape[1]
    out = []
    for b in range(B):
        n = int(lengths[b]) + shift
        n = max(0, min(n, tables.shape[1] * k_blocks.shape[2]))
        if n == 0:
            out.append(torch.zeros(H, v_blocks.shape[-1], dtype=torch.float64))
            continue
        k = _read_table(k_blocks, tables[b], n).double()  # (H_kv, n, d_k)
        v = _read_table(v_blocks, tables[b], n).double()
        if grouping == "interleave":
            k, v = k.repeat_interleave(n_rep, dim=0), v.repeat_interleave(n_rep, dim=0)  # head h reads h // n_rep
        else:
            k, v = k.repeat(n_rep, 1, 1), v.repeat(n_rep, 1, 1)
        out.append(_torch_sdpa(q[b].double()[:, None], k, v)[:, 0])  # (H, d_v)
    return torch.stack(out)


def _compare_decode(fn, case, *, hidden=False):
    q, k_blocks, v_blocks, tables, lengths = case
    what = Message(
        "paged_attention_decode(q {q}, k_blocks {k}, v_blocks, block_tables {t}, lengths={lengths})",
        q=tuple(q.shape),
        k=tuple(k_blocks.shape),
        t=tuple(tables.shape),
        lengths=lengths.tolist(),
    )
    got = call(what, fn, q, k_blocks, v_blocks, tables, lengths)
    expect_shape(what, got, (q.shape[0], q.shape[1], v_blocks.shape[-1]))
    expected = _decode_oracle(q, k_blocks, v_blocks, tables, lengths).to(q.dtype)
    hint = ""
    if not hidden:
        n_rep = q.shape[1] // k_blocks.shape[1]
        hint = _hint_from(
            got,
            {
                Message(
                    "each sequence attends to one position too many: positions 0 … length - 1 are cached, "
                    "mask t >= length."
                ): _decode_oracle(q, k_blocks, v_blocks, tables, lengths, shift=1),
                Message("each sequence attends to one position too few: position length - 1 is the new token's."): (
                    _decode_oracle(q, k_blocks, v_blocks, tables, lengths, shift=-1)
                ),
                Message(
                    "query head h reads key/value head h // (H / H_kv) (repeat_interleave, chapter 8's repeat_kv), "
                    "not h % H_kv (repeat)."
                ): _decode_oracle(q, k_blocks, v_blocks, tables, lengths, grouping="repeat") if n_rep > 1 else None,
            },
            Message(
                "gather each sequence's keys and values through its block table, mask the positions t >= length, "
                "softmax(q k^T / sqrt(d_k)) v, with query head h reading key/value head h // (H / H_kv)."
            ),
        )
    expect_close(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("paged_attention_decode", points=3)
def _decode_ragged_gqa(fn):
    """3 sequences of lengths 9, 4, 1 in blocks of 4, H = 4 query heads on H_kv = 2 key/value heads"""
    _compare_decode(fn, _pool_case([9, 4, 1], H=4, H_kv=2, page_size=4, d_k=6, d_v=5, seed=10))


@EXERCISES.check("paged_attention_decode")
def _decode_mha(fn):
    """2 sequences of lengths 5 and 12 in blocks of 3, H = H_kv = 3"""
    _compare_decode(fn, _pool_case([5, 12], H=3, H_kv=3, page_size=3, d_k=4, d_v=7, seed=20))


@EXERCISES.check(
    "paged_attention_decode",
    hidden=True,
    requires="handles sequences that share blocks, and gives a sequence of length 0 a zero output (not NaN)",
)
def _decode_shared_and_empty(fn):
    """two sequences sharing their first blocks, and one of length 0"""
    _compare_decode(
        fn, _pool_case([11, 9, 0, 6], H=6, H_kv=2, page_size=4, d_k=5, d_v=3, seed=30, shared=2), hidden=True
    )


@EXERCISES.check(
    "paged_attention_decode",
    hidden=True,
    requires="works for blocks of 1 and for one sequence with one key/value head (multi-query attention)",
)
def _decode_block_one_mqa(fn):
    """blocks of 1 position; a batch of one sequence with H_kv = 1"""
    _compare_decode(fn, _pool_case([7, 2], H=2, H_kv=2, page_size=1, d_k=3, d_v=4, seed=40), hidden=True)
    _compare_decode(fn, _pool_case([13], H=4, H_kv=1, page_size=5, d_k=6, d_v=2, seed=50), hidden=True)


@EXERCISES.check(
    "paged_attention_decode",
    hidden=True,
    requires="works in float16 as in float32",
)
def _decode_half(fn):
    """float16 inputs agree with the answer's own float32 run"""
    case = _pool_case([6, 10], H=4, H_kv=2, page_size=4, d_k=8, d_v=4, seed=60)
    expect_half_precision("paged_attention_decode", _in_dtype(fn, "paged_attention_decode", *case))


# ---------------------------------------------------------------- exercise 3: merge_attention_states


def _state_oracle(q, k, v, mask=None):
    """PyTorch's attention of q over (k, v) and the log-sum-exp of its scores, in float64: o = 0, lse = -inf where
    no key is allowed (or there are none)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    if k.shape[-2] == 0:
        shape = q.shape[:-1]
        return torch.zeros(*shape, v.shape[-1], dtype=torch.float64), torch.full(shape, -math.inf, dtype=torch.float64)
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    lse = _logsumexp(scores, dim=-1)
    o = _torch_sdpa(q64, k64, v64, attn_mask=mask) if mask is not None else _torch_sdpa(q64, k64, v64)
    o = torch.where((lse > -math.inf)[..., None], o, torch.zeros((), dtype=torch.float64))
    return o, lse


def _chunk_states(q, k, v, cuts, dtype=torch.float32, mask=None):
    """The states of the chunks of keys between ``cuts``, as the student's merge receives them (o in ``dtype``,
    lse in float32, or float64 for float64)."""
    edges = [0, *cuts, k.shape[-2]]
    outs, lses = [], []
    lse_dtype = torch.promote_types(dtype, torch.float32)
    for a, b in zip(edges[:-1], edges[1:]):
        o, lse = _state_oracle(q, k[..., a:b, :], v[..., a:b, :], None if mask is None else mask[..., a:b])
        outs.append(o.to(dtype))
        lses.append(lse.to(lse_dtype))
    return outs, lses


_MERGE_RECIPE = Message(
    "lse = log(sum_c exp(lse_c)) (torch.logsumexp over the stacked lses), and o = sum_c exp(lse_c - lse) * o_c; "
    "where every lse_c is -inf, shift by 0 instead so that the weights are 0, not NaN."
)


def _merge_hint(got_o, got_lse, outs, lses) -> Message | str:
    o = torch.stack([t.double() for t in outs])
    lse = torch.stack([t.double() for t in lses])
    top = lse.amax(dim=0)
    by_max = torch.exp(lse - top) / torch.exp(lse - top).sum(dim=0)
    guesses = {
        Message(
            "the chunks' outputs were averaged: each one is normalised over its own keys, so weigh it by its share "
            "of the whole denominator, exp(lse_c - lse)."
        ): o.mean(dim=0),
        Message(
            "the chunks' outputs were added without rescaling: weigh each by exp(lse_c - lse), its share of the "
            "whole softmax's denominator."
        ): o.sum(dim=0),
        Message("the outputs were weighed by lse_c itself; the weight is exp(lse_c - lse)."): (
            (lse[..., None] * o).sum(0) / lse.sum(0)[..., None]
        ),
    }
    text = _hint_from(got_o, guesses)
    if text:
        return text
    if _same(got_o, (by_max[..., None] * o).sum(0)) and isinstance(got_lse, torch.Tensor) and _same(got_lse, top):
        return Message("the merged lse is log(sum_c exp(lse_c)) (torch.logsumexp), not the largest lse_c.")
    return _MERGE_RECIPE


def _compare_merge(fn, q, k, v, cuts, *, label, mask=None, dtype=torch.float32, shift=0.0, hidden=False):
    """The answer's merge of the states of the chunks of keys between ``cuts`` (:func:`_chunk_states`, every lse
    shifted by ``shift``) against attention over all the keys, whose lse shifts by as much (its output does not)."""
    outs, lses = _chunk_states(q, k, v, cuts, dtype, mask)
    lses = [t + shift for t in lses]
    expected_o, expected_lse = _state_oracle(q, k, v, mask)
    what = Message(
        "merge_attention_states({n} states: o {shape}, lse {lse_shape}) — {label}",
        n=len(outs),
        shape=tuple(outs[0].shape),
        lse_shape=tuple(lses[0].shape),
        label=label,
    )
    shapes = dict(o_shape=outs[0].shape, lse_shape=lses[0].shape)
    o, lse = _call_state(what, "merge_attention_states", fn, list(outs), list(lses), **shapes)
    hint = "" if hidden else _merge_hint(o, lse, outs, lses)
    expected_lse = (expected_lse + shift).to(lses[0].dtype)
    _expect_state(what, o, lse, expected_o.to(dtype), expected_lse, hidden=hidden, hint=hint)


@EXERCISES.check("merge_attention_states", points=3)
def _merge_two_chunks(fn):
    """two chunks of keys (5 and 6 of 11), q (2, 3, 4, 6): the merge equals attention over all 11 keys"""
    _compare_merge(fn, *_qkv(2, 3, 4, 11, 6, 5, seed=70), [5], label=Message("keys cut at 5"))


@EXERCISES.check("merge_attention_states")
def _merge_four_chunks(fn):
    """four chunks of sizes 1, 4, 2, 6 of 13 keys (a decode step's one query row: T_q = 1)"""
    _compare_merge(fn, *_qkv(3, 2, 1, 13, 4, 3, seed=73), [1, 5, 7], label=Message("keys cut at 1, 5, 7"))


@EXERCISES.check(
    "merge_attention_states",
    hidden=True,
    requires="gives a chunk with lse = -inf (no key) weight 0, and o = 0, lse = -inf where every chunk is empty, "
    "never NaN",
)
def _merge_empty_chunks(fn):
    """an empty chunk, a chunk wholly masked for some queries, and queries that see no key at all"""
    q, k, v = _qkv(2, 2, 5, 9, 4, 6, seed=76)
    mask = torch.ones(5, 9, dtype=torch.bool)
    mask[1, :] = False  # query 1 sees nothing
    mask[2, 3:] = False  # query 2 sees only the first chunk
    label = Message("an empty chunk and masked queries")
    _compare_merge(fn, q, k, v, [3, 3], label=label, mask=mask, hidden=True)  # chunks 0:3, 3:3 (empty), 3:9


@EXERCISES.check(
    "merge_attention_states",
    hidden=True,
    extremes=True,
    requires="stays finite when the log-sum-exps are in the hundreds or below -1000 (shift by their maximum)",
)
def _merge_large_lse(fn):
    """log-sum-exps of several hundreds, and of about -3000 (exp overflows or underflows in float32)"""
    q, k, v = _qkv(2, 2, 3, 10, 8, 4, seed=79, scale=12.0)
    _compare_merge(fn, q, k, v, [4], label=Message("scores of hundreds"), hidden=True)
    _compare_merge(fn, q, k, v, [4], label=Message("lses near -3000"), shift=-3000.0, hidden=True)


@EXERCISES.check(
    "merge_attention_states",
    hidden=True,
    requires="returns o in float16 and lse in float32 for float16 outputs, as in float32, and keeps float64",
)
def _merge_half_and_double(fn):
    """float16 outputs with float32 lses, and float64 states"""
    q, k, v = _qkv(2, 3, 2, 12, 5, 4, seed=82)

    def run(dtype):
        outs, lses = _chunk_states(q, k, v, [2, 8], dtype=dtype)
        return call(Message("merge_attention_states in {dtype}", dtype=dtype), fn, outs, lses)

    expect_half_precision("merge_attention_states", run, float32_results=(1,))
    _compare_merge(fn, q, k, v, [6], label=Message("float64"), dtype=torch.float64, hidden=True)  # dtypes compared


@EXERCISES.reference("merge_attention_states")
def _merge_reference(outputs, lses):
    acc = torch.promote_types(outputs[0].dtype, torch.float32)
    stacked = torch.stack([t.to(acc) for t in lses])
    lse = _logsumexp(stacked, dim=0)
    shift = torch.where(lse == -math.inf, torch.zeros((), dtype=acc), lse)
    weights = torch.exp(stacked - shift)
    o = (weights[..., None] * torch.stack([t.to(acc) for t in outputs])).sum(dim=0)
    return o.to(outputs[0].dtype), lse


# ---------------------------------------------------------------- exercise 4: ring_attention_step


def _positions(T, P, rank, split):
    """Rank ``rank``'s absolute positions, from the split's definition (contiguous: chunk r of P; zig-zag: chunks r
    and 2P - 1 - r of 2P)."""
    if split == "contiguous":
        c = T // P
        return list(range(rank * c, (rank + 1) * c))
    c = T // (2 * P)
    return list(range(rank * c, (rank + 1) * c)) + list(range((2 * P - 1 - rank) * c, (2 * P - rank) * c))


def _causal(q_pos, k_pos):
    return torch.tensor([[j <= i for j in k_pos] for i in q_pos], dtype=torch.bool)


def _step(fn, o, lse, q, k, v, *, rank, source, P, causal, split):
    """The answer's step from the state ``(o, lse)`` of ``q``'s shard: ``(what, o, lse)``, the state checked to keep
    its shapes."""
    what = Message(
        "ring_attention_step(o, lse, q {shape}, k, v, rank={rank}, source={source}, world_size={P}, causal={causal}, "
        "split={split})",
        shape=tuple(q.shape),
        rank=rank,
        source=source,
        P=P,
        causal=causal,
        split=repr(split),
    )
    ring = dict(rank=rank, source=source, world_size=P, causal=causal, split=split)
    o, lse = _call_state(what, "ring_attention_step", fn, o, lse, q, k, v, o_shape=o.shape, lse_shape=lse.shape, **ring)
    return what, o, lse


def _ring_full(fn, q, k, v, P, causal, split):
    """The whole ring simulated with the student's step: every rank, every step; the unsharded ``(o, lse)``."""
    T = q.shape[-2]
    o_full = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    lse_full = torch.zeros(q.shape[:-1], dtype=torch.promote_types(q.dtype, torch.float32))
    for rank in range(P):
        pos = _positions(T, P, rank, split)
        q_r = q[..., pos, :]
        o = torch.zeros(*q_r.shape[:-1], v.shape[-1], dtype=q.dtype)
        lse = torch.full(q_r.shape[:-1], -math.inf, dtype=lse_full.dtype)
        for step in range(P):
            source = (rank - step) % P
            k_pos = _positions(T, P, source, split)
            kv = k[..., k_pos, :], v[..., k_pos, :]
            _, o, lse = _step(fn, o, lse, q_r, *kv, rank=rank, source=source, P=P, causal=causal, split=split)
        o_full[..., pos, :] = o.detach().to(q.dtype)
        lse_full[..., pos] = lse.detach().to(lse_full.dtype)
    return o_full, lse_full


def _compare_ring(fn, q, k, v, P, causal, split, *, hidden=False):
    o, lse = _ring_full(fn, q, k, v, P, causal, split)
    T = q.shape[-2]
    mask = _tril(T, T) if causal else None
    exp_o, exp_lse = _state_oracle(q, k, v, mask)
    what = Message(
        "the ring of {P} ranks ({split} split, causal={causal}) with your ring_attention_step, T = {T}",
        P=P,
        split=split,
        causal=causal,
        T=T,
    )
    hint = Message(
        "for each rank's queries, the P steps together must give attention over the whole sequence: check the "
        "single-step check's message first."
    )
    _expect_state(what, o, lse, exp_o.to(q.dtype), exp_lse.to(lse.dtype), hidden=hidden, hint="" if hidden else hint)


@EXERCISES.check("ring_attention_step", points=3)
def _ring_single_step(fn):
    """one step, contiguous split of T = 8 over 2 ranks: rank 1's queries, the keys of rank 0 after its own"""
    P, split = 2, "contiguous"
    q, k, v = _qkv(2, 3, 8, 8, 4, 5, seed=90)
    own, other = _positions(8, P, 1, split), _positions(8, P, 0, split)
    q1 = q[..., own, :]

    def keys(pos):  # the keys and values at positions pos
        return k[..., pos, :], v[..., pos, :]

    o0, lse0 = _state_oracle(q1, *keys(own), _causal(own, own))  # after step 0 (the own shard)
    o0, lse0 = o0.float(), lse0.float()
    what, o, lse = _step(fn, o0, lse0, q1, *keys(other), rank=1, source=0, P=P, causal=True, split=split)
    exp_o, exp_lse = _state_oracle(q1, *keys(own + other), _causal(own, own + other))
    # the visiting keys masked as if they sat at the query shard's own positions
    wrong_mask, _ = _state_oracle(q1, *keys(own + other), _causal(own, own + own))
    part, _ = _state_oracle(q1, *keys(other))
    hint = _hint_from(
        o,
        {
            Message(
                "you masked the visiting shard as if its keys sat at the query shard's positions: the keys' positions "
                "are those of rank `source` (shard_positions(T, world_size, source, split))."
            ): wrong_mask,
            Message(
                "you returned the visiting shard's attention alone: merge it with the running state (o, lse) "
                "(merge_attention_states)."
            ): part,
            Message(
                "the visiting shard's output was added to the running one without rescaling: merge the two states "
                "by their log-sum-exps (merge_attention_states)."
            ): o0.double() + part,
        },
        Message(
            "build the causal mask from the absolute positions of the two shards (query rows of `rank`, key rows of "
            "`source`), attend, then merge with the running (o, lse)."
        ),
    )
    _expect_state(what, o, lse, exp_o.float(), exp_lse.float(), hint=hint)


@EXERCISES.check("ring_attention_step")
def _ring_contiguous_causal(fn):
    """the whole ring of 3 ranks, contiguous split, causal, T = 12: equals causal attention over the sequence"""
    q, k, v = _qkv(2, 2, 12, 12, 4, 3, seed=93)
    _compare_ring(fn, q, k, v, 3, True, "contiguous")


@EXERCISES.check("ring_attention_step")
def _ring_zigzag_causal(fn):
    """the whole ring of 2 ranks, zig-zag split (rank 0 holds chunks 0 and 3 of 4), causal, T = 16"""
    q, k, v = _qkv(1, 3, 16, 16, 5, 4, seed=96)
    _compare_ring(fn, q, k, v, 2, True, "zigzag")


@EXERCISES.check(
    "ring_attention_step",
    hidden=True,
    requires="leaves the state unchanged when the visiting shard lies wholly in the queries' future",
)
def _ring_wholly_masked(fn):
    """a step whose shard pair is wholly masked (rank 0's queries, rank 2's keys, contiguous)"""
    P, split = 3, "contiguous"
    q, k, v = _qkv(2, 2, 4, 4, 6, 2, seed=99)
    o0, lse0 = _state_oracle(q, _randn(2, 2, 4, 6, seed=102), v, _causal(range(4), range(4)))
    o0, lse0 = o0.float(), lse0.float()
    what, o, lse = _step(fn, o0, lse0, q, k, v, rank=0, source=2, P=P, causal=True, split=split)
    _expect_state(what, o, lse, o0, lse0, hidden=True)


@EXERCISES.check(
    "ring_attention_step",
    hidden=True,
    requires="works for 4 ranks with either split, with and without the causal mask",
)
def _ring_four_ranks(fn):
    """4 ranks, both splits, causal and not"""
    q, k, v = _qkv(2, 2, 16, 16, 4, 6, seed=103)
    for split in ("zigzag", "contiguous"):
        for causal in (True, False):
            _compare_ring(fn, q, k, v, 4, causal, split, hidden=True)


@EXERCISES.check(
    "ring_attention_step",
    hidden=True,
    requires="works in float16 as in float32 (o in float16, lse in float32)",
)
def _ring_half(fn):
    """one zig-zag step in float16 agrees with the answer's own float32 run"""
    q, k, v = _qkv(2, 2, 4, 4, 8, 4, seed=106)
    o0, lse0 = _state_oracle(q, k, v, _causal([1, 2, 5, 6], [1, 2, 5, 6]))
    ring = dict(rank=1, source=0, world_size=2, causal=True, split="zigzag")
    run = _in_dtype(fn, "ring_attention_step", o0, lse0.float(), q, k, v, keep=(1,), **ring)  # lse stays float32
    expect_half_precision("ring_attention_step", run, float32_results=(1,))


# ---------------------------------------------------------------- exercise 5: flash_attention_with_sink_forward


def _sink_oracle(q, k, v, sink, causal):
    """softmax over [scores; sink] (the sink one more column), its last column dropped, times v; and the log-sum-exp
    of the whole row, sink included. Float64."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    scores = q64 @ k64.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~_tril(q.shape[-2], k.shape[-2]), -math.inf)
    column = sink.double()[None, :, None, None].expand(*scores.shape[:-1], 1)
    row = torch.cat([scores, column], dim=-1)
    return _softmax(row, dim=-1)[..., :-1] @ v64, _logsumexp(row, dim=-1)


def _compare_sink(fn, q, k, v, sink, *, causal=False, block_q, block_k, hidden=False, hint=""):
    what = Message(
        "flash_attention_with_sink_forward(q {shape}, k {k_shape}, v, sink {sink}, causal={causal}, block_q={bq}, "
        "block_k={bk})",
        shape=tuple(q.shape),
        k_shape=tuple(k.shape),
        sink=tuple(sink.shape),
        causal=causal,
        bq=block_q,
        bk=block_k,
    )
    shapes = dict(o_shape=(*q.shape[:-1], v.shape[-1]), lse_shape=q.shape[:-1])
    blocks = dict(causal=causal, block_q=block_q, block_k=block_k)
    o, lse = _call_state(what, "flash_attention_with_sink_forward", fn, q, k, v, sink, **shapes, **blocks)
    exp_o, exp_lse = _sink_oracle(q, k, v, sink, causal)
    if not hidden and not hint:
        no_sink, _ = _state_oracle(q, k, v, _tril(q.shape[-2], k.shape[-2]) if causal else None)
        hint = _hint_from(
            o,
            {
                Message("the output ignores the sink: after the key blocks, add exp(sink - m) to ell."): no_sink,
                Message(
                    "the sink was added after normalising (softmax(s) / (1 + exp(sink))): add exp(sink - m) to the "
                    "running sum ell, where ell and exp(sink) share the running max m."
                ): no_sink / (1 + torch.exp(sink.double()))[None, :, None, None],
            },
            Message(
                "the sink is one more key with score sink[h] and a zero value: m_new = max(m, sink), rescale ell and "
                "o by exp(m - m_new), add exp(sink - m_new) to ell, keep m_new."
            ),
        )
    acc = torch.promote_types(q.dtype, torch.float32)
    _expect_state(what, o, lse, exp_o.to(q.dtype), exp_lse.to(acc), hidden=hidden, hint=hint)


@EXERCISES.check("flash_attention_with_sink_forward", points=3)
def _sink_no_mask(fn):
    """q (2, 3, 7, 4), k (2, 3, 10, 4), v (2, 3, 10, 5), a sink per head, blocks 3 × 4: equals softmax([s; sink])"""
    q, k, v = _qkv(2, 3, 7, 10, 4, 5, seed=110)
    sink = torch.tensor([0.5, -1.0, 2.0])
    _compare_sink(fn, q, k, v, sink, block_q=3, block_k=4)


@EXERCISES.check("flash_attention_with_sink_forward")
def _sink_causal(fn):
    """causal with T_q = 6 < T_k = 9, blocks 4 × 4"""
    q, k, v = _qkv(2, 2, 6, 9, 5, 3, seed=113)
    _compare_sink(fn, q, k, v, torch.tensor([1.5, -0.5]), causal=True, block_q=4, block_k=4)


@EXERCISES.check(
    "flash_attention_with_sink_forward",
    hidden=True,
    extremes=True,
    requires="keeps the sink in the running max, so that a sink of 200 above every score, or of -1e4, stays exact",
)
def _sink_far_away(fn):
    """sinks far above and far below the scores"""
    q, k, v = _qkv(2, 3, 5, 8, 4, 6, seed=116)
    _compare_sink(fn, q, k, v, torch.tensor([200.0, -1e4, 0.0]), block_q=2, block_k=3, hidden=True)


@EXERCISES.check(
    "flash_attention_with_sink_forward",
    hidden=True,
    requires="gives every weight to the sink when there are no keys (o = 0, lse = sink), and treats a sink of -inf "
    "as plain attention",
)
def _sink_no_keys_and_minus_inf(fn):
    """T_k = 0; a sink of -inf for one head"""
    q = _randn(1, 2, 3, 4, seed=119)
    _compare_sink(fn, q, q[..., :0, :], _randn(1, 2, 0, 5, seed=120), torch.tensor([0.7, -2.0]), block_q=2, block_k=2, hidden=True)  # fmt: skip
    k, v = _randn(1, 2, 6, 4, seed=121), _randn(1, 2, 6, 5, seed=122)
    _compare_sink(fn, q, k, v, torch.tensor([-math.inf, 1.0]), causal=True, block_q=1, block_k=1, hidden=True)


@EXERCISES.check(
    "flash_attention_with_sink_forward",
    hidden=True,
    requires="works for any block sizes (1 × 1, 64 × 64, 3 × 7) with the causal mask",
)
def _sink_page_sizes(fn):
    """blocks 1 × 1, 64 × 64 and 3 × 7, causal"""
    q, k, v = _qkv(2, 2, 9, 11, 3, 4, seed=123)
    for block_q, block_k in ((64, 64), (3, 7), (1, 1)):
        _compare_sink(fn, q, k, v, torch.tensor([0.3, 2.5]), causal=True, block_q=block_q, block_k=block_k, hidden=True)


@EXERCISES.check(
    "flash_attention_with_sink_forward",
    hidden=True,
    requires="returns o in float16 and lse in float32 for float16 inputs, as in float32",
)
def _sink_half(fn):
    """float16 inputs agree with the answer's own float32 run"""
    q, k, v = _qkv(2, 2, 6, 9, 8, 4, seed=126)
    sink = torch.tensor([1.0, -1.0])
    run = _in_dtype(fn, "flash_attention_with_sink_forward", q, k, v, sink, causal=True, block_q=4, block_k=4)
    expect_half_precision("flash_attention_with_sink_forward", run, float32_results=(1,))
