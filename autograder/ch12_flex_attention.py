"""Checks for chapter 12, FlexAttention (notebook ``notebooks/ch12_flex_attention.ipynb``).

Every exercise returns a *function* (a ``mask_mod`` or a ``score_mod``). A check first calls the student's factory,
then evaluates what it returned the way FlexAttention does: ``create_mask`` (a ``vmap`` over the four indices, the
code ``create_block_mask`` runs) for a mask_mod, the same ``vmap`` for a score_mod, and ``flex_attention`` itself in
eager mode (never compiled: a compile takes about a minute on a CPU). The references are plain Python rules over
integer (query, key) pairs and PyTorch's ``scaled_dot_product_attention`` with an explicit boolean or float mask,
bound here at import time — never chapter 12's solution.

Every (b, h, q_idx, kv_idx) of a grid is compared with the rule, on grids where batch, heads, T_q and T_k differ
(T_q ≠ T_k included: a rule of indices is defined on any rectangle).
"""

from __future__ import annotations

import math

import torch
from torch.nn.attention.flex_attention import create_block_mask as _create_block_mask
from torch.nn.attention.flex_attention import create_mask as _create_mask
from torch.nn.attention.flex_attention import flex_attention as _flex_attention
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .core import CheckFailed, Exercises, call, expect_close, expect_shape, rng
from .wording import Message

EXERCISES = Exercises("ch12_flex_attention")


# ---------------------------------------------------------------- evaluating what the student's factory returns


def _mask_grid(mask_mod, B: int, H: int, T_q: int, T_k: int) -> torch.Tensor:
    """The mask_mod at every (b, h, q_idx, kv_idx), as ``create_block_mask`` evaluates it: ``(B, H, T_q, T_k)``."""
    return _create_mask(mask_mod, B, H, T_q, T_k, device="cpu")


def _score_grid(score_mod, score: torch.Tensor) -> torch.Tensor:
    """The score_mod applied to every entry of ``score (B, H, T_q, T_k)`` with its indices, as flex_attention's eager
    path does (``vmap`` over b, h, q_idx, kv_idx; tensor[index] turned into an index op)."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    from torch.nn.attention.flex_attention import _vmap_for_bhqkv

    B, H, T_q, T_k = score.shape
    idx = [torch.arange(n) for n in (B, H, T_q, T_k)]
    with TransformGetItemToIndex():
        return _vmap_for_bhqkv(score_mod, prefix=(0,))(score, *idx)


def _flex_output(q, k, v, mask_mod, score_mod) -> torch.Tensor:
    """flex_attention (eager) with the student's mods: ``(B, H, T_q, d_v)``."""
    B, H, T_q, T_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    block_mask = None if mask_mod is None else _create_block_mask(mask_mod, B, H, T_q, T_k, device="cpu")
    return _flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask)


def _grid_what(name: Message, B: int, H: int, T_q: int, T_k: int) -> Message:
    return Message(
        "create_mask({name}, B={B}, H={H}, Q_LEN={T_q}, KV_LEN={T_k})", name=name, B=B, H=H, T_q=T_q, T_k=T_k
    )


def _rule_table(rule, B: int, H: int, T_q: int, T_k: int) -> torch.Tensor:
    """``rule(b, h, i, j)`` on Python ints at every pair: the oracle, ``(B, H, T_q, T_k)`` bool."""
    return torch.tensor(
        [[[[bool(rule(b, h, i, j)) for j in range(T_k)] for i in range(T_q)] for h in range(H)] for b in range(B)],
        dtype=torch.bool,
    )


def _compare_table(what, got, expected, *, hidden, hint=""):
    """Every pair against the rule; the message names the first pair that differs (not in hidden checks)."""
    expect_shape(what, got, tuple(expected.shape))
    if got.dtype != torch.bool:
        raise CheckFailed(
            Message(
                "{what}: your mask_mod returns {dtype} values; it should return a bool (a comparison such as "
                "q_idx >= kv_idx, combined with & and |).",
                what=what,
                dtype=got.dtype,
            )
        )
    wrong = got != expected
    if not bool(wrong.any()):
        return
    n, total = int(wrong.sum()), wrong.numel()
    if hidden:
        msg = Message("{what}: {n} of {total} (query, key) pairs differ from the rule.", what=what, n=n, total=total)
    else:
        b, h, i, j = (int(x) for x in wrong.nonzero()[0])
        say = {True: Message("True (may attend)"), False: Message("False (masked)")}
        msg = Message(
            "{what}: {n} of {total} (query, key) pairs differ from the rule; the first is b={b}, h={h}, q_idx={i}, "
            "kv_idx={j}: expected {expected}, your mask_mod gives {got}.",
            what=what,
            n=n,
            total=total,
            b=b,
            h=h,
            i=i,
            j=j,
            expected=say[bool(expected[b, h, i, j])],
            got=say[bool(got[b, h, i, j])],
        )
    raise CheckFailed(Message("{failure}\n  {hint}", failure=msg, hint=Message("hint", hint=hint)) if hint else msg)


def _hint_from(got, guesses: dict[Message, torch.Tensor | None]) -> Message | str:
    """The text of the first mistaken table the answer equals exactly, else ""."""
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        return ""
    for text, table in guesses.items():
        if table is not None and got.shape == table.shape and torch.equal(got, table):
            return text
    return ""


def _qkv(B, H, T_q, T_k, d_k, d_v, seed):
    g = rng(seed)
    return (
        torch.randn(B, H, T_q, d_k, generator=g),
        torch.randn(B, H, T_k, d_k, generator=g),
        torch.randn(B, H, T_k, d_v, generator=g),
    )


def _check_in_flex(factory, mod_kind, mod, q, k, v, expected, *, hidden):
    """flex_attention (eager) with the student's mod equals the explicit attention ``expected``."""
    mask_mod, score_mod = (mod, None) if mod_kind == "mask" else (None, mod)
    extra = ", block_mask=create_block_mask(...)" if mod_kind == "mask" else ""
    name = f"flex_attention(q {tuple(q.shape)}, k, v{extra}, score_mod={'None' if mask_mod is not None else 'yours'})"
    what = Message("{name} with {factory}", name=name, factory=factory)
    got = call(what, _flex_output, q, k, v, mask_mod, score_mod)
    expect_close(what, got, expected, hidden=hidden)


# ---------------------------------------------------------------- exercise 1: sliding_window_with_globals


def _window_globals_rule(window: int, n_global: int, causal: bool, *, side=1, width=None, op="or", rows=True):
    """The rule of exercise 1 and, through the keyword arguments, the mistaken rules the hints recognise."""
    width = window if width is None else width

    def rule(b, h, i, j):
        near = abs(i - j) <= width
        glob = (j < n_global) or (rows and i < n_global)
        keep = (near or glob) if op == "or" else (near and glob)
        return keep and (side * (i - j) >= 0 or not causal)

    return rule


def _window_globals_hint(got, window, n_global, causal, B, H, T_q, T_k) -> Message | str:
    def table(**kw):
        rule_causal = kw.pop("causal", causal)
        return _rule_table(_window_globals_rule(window, n_global, rule_causal, **kw), B, H, T_q, T_k)

    right = table()
    return _hint_from(
        got,
        {
            Message(
                "Your window is one too narrow: a key exactly `window` positions away is still inside (use <=)."
            ): table(width=window - 1) if window > 0 else None,
            Message(
                "Your window is one too wide: `window` is the farthest distance a query may look, not one more."
            ): table(width=window + 1),
            Message(
                "Your causal mask keeps the keys after the query instead of those before it (a query sees kv_idx <= q_idx)."
            ): table(side=-1) if causal else None,
            Message(
                "With causal=True no query may see a later key, not even a global one: combine with and_masks(..., causal)."
            ): (table(causal=False)) if causal else None,
            Message(
                "A pair is allowed if it is in the window OR involves a global token: or_masks, not and_masks."
            ): table(op="and"),
            Message(
                "The global tokens must also see every token: their rows (q_idx < n_global) are allowed too."
            ): table(rows=False) if not torch.equal(table(rows=False), right) else None,
            Message("Your mask polarity is inverted: True means 'may attend'."): ~right,
        },
    )


def _compare_window_globals(fn, window, n_global, causal, B, H, T_q, T_k, *, hidden=False):
    factory = Message(
        "sliding_window_with_globals({window}, {n_global}, causal={causal})",
        window=window,
        n_global=n_global,
        causal=causal,
    )
    mask_mod = call(factory, fn, window, n_global, causal=causal)
    what = _grid_what(factory, B, H, T_q, T_k)
    got = call(what, _mask_grid, mask_mod, B, H, T_q, T_k)
    expected = _rule_table(_window_globals_rule(window, n_global, causal), B, H, T_q, T_k)
    hint = "" if hidden else _window_globals_hint(got, window, n_global, causal, B, H, T_q, T_k)
    _compare_table(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("sliding_window_with_globals", points=3)
def _window_globals_causal(fn):
    """causal, window 2, one global token, T = 9: every (q, kv) pair against the rule"""
    _compare_window_globals(fn, 2, 1, True, 1, 1, 9, 9)


@EXERCISES.check("sliding_window_with_globals")
def _window_globals_bidirectional(fn):
    """causal=False, window 1, two global tokens (rows and columns), T = 8"""
    _compare_window_globals(fn, 1, 2, False, 1, 1, 8, 8)


@EXERCISES.check("sliding_window_with_globals")
def _window_globals_in_flex(fn):
    """flex_attention (eager) under your mask equals attention under the rule's table, q (2, 3, 20, 4), v d_v = 6"""
    window, n_global = 3, 2
    factory = Message("sliding_window_with_globals({window}, {n_global})", window=window, n_global=n_global)
    mask_mod = call(factory, fn, window, n_global)
    q, k, v = _qkv(2, 3, 20, 20, 4, 6, seed=1)
    table = _rule_table(_window_globals_rule(window, n_global, True), 1, 1, 20, 20)
    expected = _torch_sdpa(q, k, v, attn_mask=table)
    _check_in_flex(factory, "mask", mask_mod, q, k, v, expected, hidden=False)


@EXERCISES.check(
    "sliding_window_with_globals",
    hidden=True,
    requires="works for a window of 0, no global tokens, more global tokens than tokens, a window wider than the sequence, T_q ≠ T_k, and any batch and head",
)
def _window_globals_many_shapes(fn):
    """window 0, no globals, more globals than tokens, a window wider than T, T_q != T_k, several batches and heads"""
    cases = [(0, 0, 7, 7), (0, 2, 6, 6), (4, 0, 10, 10), (1, 12, 9, 9), (20, 1, 8, 8), (2, 1, 5, 11), (2, 3, 11, 5)]
    for window, n_global, T_q, T_k in cases:
        for causal in (True, False):
            _compare_window_globals(fn, window, n_global, causal, 2, 3, T_q, T_k, hidden=True)


# ---------------------------------------------------------------- exercise 2: document_mask


def _document_rule(ids: list[list[int]], causal: bool, *, row=None, key_of_query=False):
    def rule(b, h, i, j):
        r = b if row is None else row
        same = ids[r][i] == ids[r][i if key_of_query else j]
        return same and (j <= i or not causal)

    return rule


def _compare_document(fn, document_ids, causal, H, T_q=None, *, hidden=False):
    B, T = document_ids.shape
    T_q = T if T_q is None else T_q
    factory = Message(
        "document_mask(document_ids {shape} {dtype}, causal={causal})",
        shape=tuple(document_ids.shape),
        dtype=document_ids.dtype,
        causal=causal,
    )
    mask_mod = call(factory, fn, document_ids, causal=causal)
    what = _grid_what(factory, B, H, T_q, T)
    got = call(what, _mask_grid, mask_mod, B, H, T_q, T)
    ids = document_ids.tolist()
    expected = _rule_table(_document_rule(ids, causal), B, H, T_q, T)
    hint = ""
    if not hidden:
        hint = _hint_from(
            got,
            {
                Message(
                    "Each sequence of the batch has its own document ids: compare document_ids[b, q_idx] with "
                    "document_ids[b, kv_idx], in row b (not row 0)."
                ): _rule_table(_document_rule(ids, causal, row=0), B, H, T_q, T) if B > 1 else None,
                Message("With causal=True a query also may not see later keys of its own document."): _rule_table(
                    _document_rule(ids, False), B, H, T_q, T
                )
                if causal
                else None,
                Message("Compare the query's document with the key's: document_ids[b, kv_idx]."): _rule_table(
                    _document_rule(ids, causal, key_of_query=True), B, H, T_q, T
                ),
            },
        )
    _compare_table(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("document_mask", points=3)
def _document_one_row(fn):
    """one packed row of three documents (lengths 3, 2, 3), causal"""
    _compare_document(fn, torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2]]), True, 1)


@EXERCISES.check("document_mask")
def _document_batch(fn):
    """two rows packed differently, causal=False: each row compares its own ids"""
    _compare_document(fn, torch.tensor([[0, 0, 1, 1, 1, 1, 2], [0, 0, 0, 0, 1, 2, 2]]), False, 2)


@EXERCISES.check("document_mask")
def _document_in_flex(fn):
    """flex_attention (eager) with your document mask equals attention under the rule's table, q (2, 3, 18, 4)"""
    ids = torch.tensor([[0] * 5 + [1] * 9 + [2] * 4, [0] * 11 + [1] * 7])
    factory = Message("document_mask(document_ids {shape})", shape=tuple(ids.shape))
    mask_mod = call(factory, fn, ids)
    q, k, v = _qkv(2, 3, 18, 18, 4, 5, seed=2)
    table = _rule_table(_document_rule(ids.tolist(), True), 2, 1, 18, 18)
    expected = _torch_sdpa(q, k, v, attn_mask=table)
    _check_in_flex(factory, "mask", mask_mod, q, k, v, expected, hidden=False)


@EXERCISES.check(
    "document_mask",
    hidden=True,
    requires="works for any packing of documents, T_q < T_k and int32 document ids",
)
def _document_random(fn):
    """random packings of three rows, both directions, two heads, T_q < T_k, int32 ids"""
    g = rng(3)
    for T in (1, 6, 13):
        lengths = torch.randint(0, 4, (3, T), generator=g)
        ids = (lengths == 0).cumsum(-1)  # a new document where a 0 was drawn
        for causal in (True, False):
            _compare_document(fn, ids, causal, 2, hidden=True)
            _compare_document(fn, ids.to(torch.int32), causal, 1, T_q=max(1, T // 2), hidden=True)


@EXERCISES.check(
    "document_mask",
    hidden=True,
    requires="works for document ids in any order along a row (not only ascending) and for an id that comes back in a separate run of the row",
)
def _document_any_order(fn):
    """ids that do not ascend along a row ([[2, 2, 2, 0, 0, 1, 1, 1]]) and an id in two separate runs, both directions"""
    rows = torch.tensor([[2, 2, 2, 0, 0, 1, 1, 1], [1, 1, 0, 0, 0, 1, 1, 2]])
    for causal in (True, False):
        _compare_document(fn, rows[:1], causal, 1, hidden=True)
        _compare_document(fn, rows, causal, 2, hidden=True)
        _compare_document(fn, rows.flip(-1).to(torch.int32), causal, 1, hidden=True)


# ---------------------------------------------------------------- exercise 3: prefix_lm_mask


def _prefix_rule(lengths: list[int], *, inclusive=False, row=None, op="or"):
    def rule(b, h, i, j):
        n = lengths[b if row is None else row]
        in_prefix = j <= n if inclusive else j < n
        return (j <= i or in_prefix) if op == "or" else (j <= i and in_prefix)

    return rule


def _compare_prefix(fn, prefix_lengths, H, T_q, T_k, *, hidden=False):
    B = prefix_lengths.shape[0]
    factory = Message("prefix_lm_mask(prefix_lengths={lengths})", lengths=prefix_lengths.tolist())
    mask_mod = call(factory, fn, prefix_lengths)
    what = _grid_what(factory, B, H, T_q, T_k)
    got = call(what, _mask_grid, mask_mod, B, H, T_q, T_k)
    lengths = prefix_lengths.tolist()
    expected = _rule_table(_prefix_rule(lengths), B, H, T_q, T_k)
    hint = ""
    if not hidden:
        hint = _hint_from(
            got,
            {
                Message(
                    "The prefix has prefix_lengths[b] tokens, positions 0 … prefix_lengths[b] - 1: use kv_idx < "
                    "prefix_lengths[b]."
                ): _rule_table(_prefix_rule(lengths, inclusive=True), B, H, T_q, T_k),
                Message("Each row has its own prefix length: index prefix_lengths with b."): _rule_table(
                    _prefix_rule(lengths, row=0), B, H, T_q, T_k
                )
                if B > 1
                else None,
                Message("A key is visible if it is not in the future OR lies in the prefix (|, not &)."): _rule_table(
                    _prefix_rule(lengths, op="and"), B, H, T_q, T_k
                ),
            },
        )
    _compare_table(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("prefix_lm_mask", points=2)
def _prefix_one_row(fn):
    """one row, prefix of 3 tokens, T = 7: the prefix is seen by every query, the rest is causal"""
    _compare_prefix(fn, torch.tensor([3]), 1, 7, 7)


@EXERCISES.check("prefix_lm_mask")
def _prefix_batch(fn):
    """three rows with prefixes 0, 4 and 7 (no prefix, half, everything), T = 7"""
    _compare_prefix(fn, torch.tensor([0, 4, 7]), 2, 7, 7)


@EXERCISES.check(
    "prefix_lm_mask",
    hidden=True,
    requires="works for any prefix lengths (int64 or int32), T_q ≠ T_k, and inside flex_attention",
)
def _prefix_many_shapes(fn):
    """random prefixes, heads, T_q != T_k, int32 lengths, and flex_attention (eager) with the mask"""
    g = rng(4)
    for T_q, T_k in ((9, 9), (4, 10), (10, 4), (1, 1)):
        lengths = torch.randint(0, T_k + 1, (3,), generator=g)
        _compare_prefix(fn, lengths, 2, T_q, T_k, hidden=True)
        _compare_prefix(fn, lengths.to(torch.int32), 1, T_q, T_k, hidden=True)
    lengths = torch.tensor([2, 9])
    mask_mod = call("prefix_lm_mask(prefix_lengths=[2, 9])", fn, lengths)
    q, k, v = _qkv(2, 2, 16, 16, 4, 3, seed=5)
    expected = _torch_sdpa(q, k, v, attn_mask=_rule_table(_prefix_rule([2, 9]), 2, 1, 16, 16))
    _check_in_flex(Message("prefix_lm_mask(prefix_lengths=[2, 9])"), "mask", mask_mod, q, k, v, expected, hidden=True)


# ---------------------------------------------------------------- exercise 4: alibi_score_mod


def _slopes(H: int, *, first: int = 1) -> torch.Tensor:
    """2^(-8 (h + first) / H) for h = 0 … H - 1, float64 (Press et al. 2022, section 3)."""
    return torch.tensor([2.0 ** (-8.0 * (h + first) / H) for h in range(H)], dtype=torch.float64)


def _alibi_bias(H: int, T_q: int, T_k: int, slopes: torch.Tensor | None = None) -> torch.Tensor:
    """-m_h (i - j) for every head and pair, float64 ``(H, T_q, T_k)``."""
    slopes = _slopes(H) if slopes is None else slopes
    i = torch.arange(T_q, dtype=torch.float64)[:, None]
    j = torch.arange(T_k, dtype=torch.float64)[None, :]
    return -slopes[:, None, None] * (i - j)


def _alibi_hint(got_bias: torch.Tensor, H: int, T_q: int, T_k: int, seen: torch.Tensor) -> Message | str:
    """Compare the answer's bias (its scores minus the input, on the pairs a causal query sees) with mistaken ones."""
    guesses = {
        Message(
            "Your bias has the wrong sign: a key farther back must get a *smaller* score, "
            "score + m_h * (kv_idx - q_idx) with kv_idx <= q_idx."
        ): -_alibi_bias(H, T_q, T_k),
        Message("Your slopes go the wrong way round: head 0 has the largest slope, 2^(-8/H), the last head 2^(-8)."): (
            _alibi_bias(H, T_q, T_k, _slopes(H).flip(0))
        ),
        Message("Your slopes are off by one head: head h (counting from 0) has slope 2^(-8 (h + 1) / H)."): _alibi_bias(
            H, T_q, T_k, _slopes(H, first=0)
        ),
    }
    for text, bias in guesses.items():
        if bias is not None and torch.allclose(got_bias[..., seen], bias.expand_as(got_bias)[..., seen], atol=1e-5):
            return text
    return ""


def _compare_alibi(fn, B, H, T_q, T_k, seed, dtype=torch.float32, *, hidden=False):
    factory = Message("alibi_score_mod({H})", H=H)
    score_mod = call(factory, fn, H)
    score = torch.randn(B, H, T_q, T_k, generator=rng(seed), dtype=dtype)
    what = Message(
        "your score_mod on every entry of score ({B}, {H}, {T_q}, {T_k}), {factory}",
        B=B,
        H=H,
        T_q=T_q,
        T_k=T_k,
        factory=factory,
    )
    got = call(what, _score_grid, score_mod, score)
    expected = score + _alibi_bias(H, T_q, T_k).to(dtype)  # (B, H, T_q, T_k)
    seen = torch.ones(T_q, T_k, dtype=torch.bool).tril()  # kv_idx <= q_idx: the pairs ALiBi is defined on
    expect_shape(what, got, tuple(expected.shape))
    hint = ""
    if not hidden and got.is_floating_point():
        gb = (got - score).double()
        hint = _alibi_hint(gb, H, T_q, T_k, seen)
        if not hint and torch.allclose(got.double()[..., seen], _alibi_bias(H, T_q, T_k).expand_as(got)[..., seen]):
            hint = Message("A score_mod returns the modified score: add the bias to `score`, do not replace it.")
    expect_close(
        Message("{what} (on the pairs kv_idx <= q_idx)", what=what),
        got[..., seen] if got.shape == expected.shape else got,
        expected[..., seen],
        hidden=hidden,
        hint=hint,
    )


@EXERCISES.check("alibi_score_mod", points=3)
def _alibi_four_heads(fn):
    """4 heads, T = 6: score + m_h (kv_idx - q_idx), slopes 1/4, 1/16, 1/64, 1/256"""
    _compare_alibi(fn, 1, 4, 6, 6, seed=6)


@EXERCISES.check("alibi_score_mod")
def _alibi_in_flex(fn):
    """flex_attention (eager, causal) with your score_mod equals attention with the explicit bias, 8 heads"""
    H, T = 8, 12
    factory = Message("alibi_score_mod({H})", H=H)
    score_mod = call(factory, fn, H)
    q, k, v = _qkv(2, H, T, T, 4, 5, seed=7)
    bias = _alibi_bias(H, T, T).float().masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)
    expected = _torch_sdpa(q, k, v, attn_mask=bias)
    mask = "kv_idx <= q_idx"
    q_what = f"flex_attention(q {tuple(q.shape)}, k, v, score_mod=yours, block_mask=causal ({mask}))"
    what = Message("{name} with {factory}", name=q_what, factory=factory)
    got = call(what, _flex_output, q, k, v, _causal_rule, score_mod)
    expect_close(what, got, expected)


def _causal_rule(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@EXERCISES.check(
    "alibi_score_mod",
    hidden=True,
    requires="works for any number of heads (1, 2, 16), T_q ≠ T_k and float64 scores",
)
def _alibi_many_shapes(fn):
    """1, 2 and 16 heads, batches, T_q != T_k, float64 scores"""
    for B, H, T_q, T_k, seed in ((2, 1, 5, 5, 8), (3, 2, 4, 9, 9), (1, 16, 7, 3, 10)):
        _compare_alibi(fn, B, H, T_q, T_k, seed, hidden=True)
    _compare_alibi(fn, 2, 4, 6, 8, 11, dtype=torch.float64, hidden=True)


@EXERCISES.check(
    "alibi_score_mod",
    hidden=True,
    requires="gives head h the slope 2^(-8 (h + 1) / H) for a head count that is not a power of two (3, 12)",
)
def _alibi_heads_not_a_power_of_two(fn):
    """3 and 12 heads: the slopes 2^(-8 (h + 1) / H) of the exercise, not the power-of-two interleaving of ALiBi's code"""
    for B, H, T_q, T_k, seed in ((1, 3, 6, 6, 12), (2, 12, 5, 7, 13)):
        _compare_alibi(fn, B, H, T_q, T_k, seed, hidden=True)
