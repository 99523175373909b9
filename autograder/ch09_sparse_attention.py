"""Checks for chapter 9, sparse attention (notebook ``notebooks/ch09_sparse_attention.ipynb``).

The references are computed independently of the course's solution: window masks from ``torch.tril``/``torch.triu``
(a band is the lower triangle above one diagonal and the upper below another), global-token and routing masks
from plain Python loops over (query, key) pairs, and window attention from PyTorch's own
``torch.nn.functional.scaled_dot_product_attention`` under that band. The functions are bound here, at import
time, so that a student cell that later rebinds them does not change the reference.

Whether blocked window attention really avoids a ``T × T`` tensor is measured, forward and backward: with
``torch.autograd.graph.saved_tensors_hooks`` (every tensor the computation saves for its backward pass is seen, and
a dense softmax over ``T × T`` scores always saves one) and with the dispatch mode of chapter 10's tiles check
(``autograder/checks/properties.py``: every tensor any operation makes, so an ``autograd.Function`` that saves only
q, k, v and recomputes dense scores in its backward is measured too, and a result computed with the mode switched
off fails). The call returns the numbers and the result, so the grading worker judges them from the record.

Sizes are chosen so that batch, heads, T, window, block size, d_k and d_v all differ.
"""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks as _saved_tensors_hooks
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .checks.compare import _plain
from .checks.properties import UNSEEN, watching
from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_equal,
    expect_half_precision,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch09_sparse_attention")
_grad = torch.autograd.grad


def _band(T: int, window: int, causal: bool) -> torch.Tensor:
    """True where |i - j| <= window (and j <= i if causal): tril keeps j - i <= window, triu keeps j - i >= -window."""
    band = torch.ones(T, T, dtype=torch.bool).tril(window).triu(-window)
    return band.tril(0) if causal else band


def _window_hint(got, T, window, causal) -> Message | str:
    if not isinstance(got, torch.Tensor) or got.shape != (T, T) or got.dtype != torch.bool:
        return ""
    guesses = [
        (
            Message(
                "Your window is one too narrow: a query may attend to keys at distance exactly `window` too (use <=)."
            ),
            _band(T, window - 1, causal) if window > 0 else None,
        ),
        (
            Message(
                "Your window is one too wide: `window` is the farthest distance, not the number of keys behind the query."
            ),
            _band(T, window + 1, causal),
        ),
        (
            Message("With causal=True no query may see a key after it: combine the band with causal_mask(T)."),
            _band(T, window, False) if causal else None,
        ),
        (
            Message(
                "Your mask keeps the future instead of the past: True = may attend, and a causal query sees j <= i."
            ),
            _band(T, window, False).triu(0) if causal else None,
        ),
        (Message("Your mask polarity is inverted: in this course True means 'may attend'."), ~_band(T, window, causal)),
    ]
    return next((text for text, m in guesses if m is not None and torch.equal(got.cpu(), m)), "")


def _explained(err: CheckFailed, hint) -> CheckFailed:
    """``err`` (a failed comparison, which takes no hint) with ``hint`` on a line of its own."""
    if not hint:
        return CheckFailed(*err.args)
    failure = err.args[0] if err.args else str(err)
    return CheckFailed(Message("{failure}\n  {hint}", failure=failure, hint=Message("hint", hint=hint)))


# ---------------------------------------------------------------- exercise 1: sliding_window_mask


def _compare_window_mask(fn, T, window, causal, *, hidden=False):
    what = Message("sliding_window_mask({T}, {window}, causal={causal})", T=T, window=window, causal=causal)
    got = call(what, fn, T, window, causal=causal)
    expected = _band(T, window, causal)
    hint = "" if hidden else _window_hint(got, T, window, causal)
    try:
        expect_equal(what, got, expected, hidden=hidden)
    except CheckFailed as err:
        raise _explained(err, hint) from None


@EXERCISES.check("sliding_window_mask", points=2)
def _window_causal(fn):
    """sliding_window_mask(7, 2) (causal): each query sees itself and the 2 keys before it"""
    _compare_window_mask(fn, 7, 2, True)


@EXERCISES.check("sliding_window_mask")
def _window_bidirectional(fn):
    """sliding_window_mask(6, 1, causal=False): each query sees one key on each side"""
    _compare_window_mask(fn, 6, 1, False)


@EXERCISES.check(
    "sliding_window_mask",
    hidden=True,
    requires="handles window 0, a window wider than the sequence and T = 1, causal or not",
)
def _window_edges(fn):
    """window 0, a window wider than the sequence, T = 1, both directions"""
    for T, window in ((5, 0), (4, 9), (1, 3), (11, 4)):
        for causal in (True, False):
            _compare_window_mask(fn, T, window, causal, hidden=True)


@EXERCISES.check(
    "sliding_window_mask",
    hidden=True,
    requires="creates the mask on the requested `device`",
)
def _window_device(fn):
    """creates the mask on the requested device"""
    m = call("sliding_window_mask(4, 1, device='meta')", fn, 4, 1, device="meta")
    expect_true(
        isinstance(m, torch.Tensor) and m.device.type == "meta",
        "sliding_window_mask(..., device=d) should create the mask on device d (pass device= to torch.arange).",
    )


# ---------------------------------------------------------------- exercise 2: global_token_mask


def _global_oracle(mask: torch.Tensor, is_global: torch.Tensor, causal: bool) -> torch.Tensor:
    """Pair by pair: allowed if the base mask allows it or either end is global (and j <= i when causal)."""
    shape = torch.broadcast_shapes(mask.shape, (*is_global.shape[:-1], 1, 1))
    m, g = mask.expand(shape).reshape(-1, *shape[-2:]), is_global.expand(*shape[:-2], shape[-1]).reshape(-1, shape[-1])
    out = torch.zeros(m.shape, dtype=torch.bool)
    T = shape[-1]
    for n in range(m.shape[0]):
        for i in range(T):
            for j in range(T):
                out[n, i, j] = bool(m[n, i, j] or g[n, i] or g[n, j]) and (j <= i or not causal)
    return out.reshape(shape)


def _compare_global(fn, mask, is_global, causal, *, hidden=False):
    what = Message(
        "global_token_mask(mask {mask}, is_global {is_global}, causal={causal})",
        mask=tuple(mask.shape),
        is_global=tuple(is_global.shape),
        causal=causal,
    )
    got = call(what, fn, mask, is_global, causal=causal)
    expected = _global_oracle(mask, is_global, causal)
    hint = ""
    if not hidden and isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == torch.bool:
        rows = is_global[..., :, None].expand(expected.shape)
        cols = is_global[..., None, :].expand(expected.shape)
        if not causal and not bool(got[rows].all()):
            hint = Message("A global token must attend to every token: set its whole row to True.")
        elif not causal and not bool(got[cols].all()):
            hint = Message("Every token must attend to a global token: set its whole column to True.")
        elif causal and bool((got & ~torch.ones(expected.shape[-2:], dtype=torch.bool).tril()).any()):
            hint = Message("With causal=True no query may see a later key, not even a global one.")
        elif not bool((got | ~mask.expand(expected.shape)).all()):
            hint = Message(
                "Keep what the base mask allows: the global rows and columns are added to it, not put in its place."
            )
    try:
        expect_equal(what, got, expected, hidden=hidden)
    except CheckFailed as err:
        raise _explained(err, hint) from None


@EXERCISES.check("global_token_mask", points=2)
def _global_basic(fn):
    """a (7, 7) window of width 1 with global tokens 0 and 4: their rows and columns become True"""
    is_global = torch.zeros(7, dtype=torch.bool)
    is_global[[0, 4]] = True
    window = torch.ones(7, 7, dtype=torch.bool).tril(1).triu(-1)  # the input, written out: _band is an oracle
    _compare_global(fn, window, is_global, False)


@EXERCISES.check("global_token_mask")
def _global_causal(fn):
    """causal=True: global tokens see and are seen by all, but never across the future"""
    is_global = torch.zeros(6, dtype=torch.bool)
    is_global[[1, 3]] = True
    _compare_global(fn, torch.ones(6, 6, dtype=torch.bool).tril(0).triu(-1), is_global, True)


@EXERCISES.check(
    "global_token_mask",
    hidden=True,
    requires="accepts per-sequence global tokens `(B, T)` with a shared `(T, T)` or a batched `(B, T, T)` mask",
)
def _global_batched(fn):
    """per-sequence global tokens (B, T) with a shared (T, T) mask and a batched (B, T, T) mask"""
    is_global = torch.rand(3, 9, generator=rng(1)) < 0.25
    is_global[0] = False  # a sequence without global tokens keeps its mask
    _compare_global(fn, torch.ones(9, 9, dtype=torch.bool).tril(2).triu(-2), is_global, False, hidden=True)
    _compare_global(fn, torch.rand(3, 9, 9, generator=rng(2)) < 0.3, is_global, True, hidden=True)


@EXERCISES.check(
    "global_token_mask",
    hidden=True,
    requires="accepts per-head global tokens `(B, H, T)` with a `(B, 1, T, T)` mask, and one shared `is_global` `(T,)` with a `(B, T, T)` mask",
)
def _global_other_forms(fn):
    """per-head global tokens (B, H, T) with a (B, 1, T, T) mask, one shared is_global (T,) with a (B, T, T) mask"""
    g = rng(3)
    is_global = torch.rand(2, 3, 8, generator=g) < 0.3
    _compare_global(fn, torch.rand(2, 1, 8, 8, generator=g) < 0.4, is_global, False, hidden=True)
    shared = torch.zeros(6, dtype=torch.bool)
    shared[[2, 5]] = True
    for causal in (False, True):
        _compare_global(fn, torch.rand(3, 6, 6, generator=g) < 0.3, shared, causal, hidden=True)


# ---------------------------------------------------------------- exercise 3: sliding_window_attention


def _qkv(lead, T, d_k, d_v, seed, dtype=torch.float32):
    g = rng(seed)
    return (
        torch.randn(*lead, T, d_k, generator=g, dtype=dtype),
        torch.randn(*lead, T, d_k, generator=g, dtype=dtype),
        torch.randn(*lead, T, d_v, generator=g, dtype=dtype),
    )


def _compare_window_attention(fn, q, k, v, window, causal, block_len=None, *, hidden=False):
    T = q.shape[-2]
    kwargs = {"causal": causal} if block_len is None else {"causal": causal, "block_len": block_len}
    what = Message(
        "sliding_window_attention(q {shape}, ..., window={window}, {kwargs})",
        shape=tuple(q.shape),
        window=window,
        kwargs=", ".join(f"{k}={v}" for k, v in kwargs.items()),
    )
    got = call(what, fn, q, k, v, window, **kwargs)
    expected = _torch_sdpa(q, k, v, attn_mask=_band(T, window, causal))
    hint = ""
    if not hidden and isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if causal and torch.allclose(got, _torch_sdpa(q, k, v, attn_mask=_band(T, window, False)), atol=1e-5):
            hint = Message(
                "Your causal output uses keys after the query: a causal slab ends at the block's last query."
            )
        elif torch.allclose(got, _torch_sdpa(q, k, v, attn_mask=_band(T, window, causal), scale=1.0), atol=1e-5):
            hint = Message("Scale the scores by 1/sqrt(d_k).")
        else:
            hint = Message(
                "Check the slab's mask: inside a slab, key column c of block n is position n*b - window + c; it is "
                "allowed when it lies in the band and is not padding (0 <= position < T)."
            )
    expect_close(what, got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("sliding_window_attention", points=4)
def _attention_causal(fn):
    """causal, q (2, 3, 13, 4), v (2, 3, 13, 6), window 3: equals dense attention under the window mask"""
    _compare_window_attention(fn, *_qkv((2, 3), 13, 4, 6, seed=3), 3, True)


@EXERCISES.check("sliding_window_attention")
def _attention_bidirectional(fn):
    """bidirectional, window 2, block_len 5 (T = 11 is not a multiple of the block)"""
    _compare_window_attention(fn, *_qkv((2, 3), 11, 4, 6, seed=4), 2, False, 5)


def _measured(fn, q, k, v, window, causal, do):
    """Run the answer and its backward pass (``do``) on copies of q, k, v that require grad, watched: ``(largest
    tensor saved for backward, largest tensor made, whether the check saw the output and the gradients computed, the
    output, the gradients)``. Returned by the call, so that the grading worker judges the numbers from the record.

    Saved: ``saved_tensors_hooks`` sees every tensor autograd keeps for the backward pass. Made: the dispatch mode
    of :func:`~autograder.core.largest_tensor` sees every operation, forward and backward, so a custom
    ``autograd.Function`` that saves only q, k and v and recomputes dense scores in its backward is measured too; a
    result computed with the mode switched off is not seen (it fails, rather than passing unmeasured)."""
    sizes = [0]

    def pack(t):
        sizes.append(t.numel())
        return t

    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    watch, all_seen, largest = watching([q, k, v, do])
    grads = None
    with watch:
        with _saved_tensors_hooks(pack, lambda t: t):
            out = fn(q, k, v, window, causal=causal)
        if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == do.shape:
            grads = _grad(out, (q, k, v), do, allow_unused=True)
    return max(sizes), largest[0], all_seen((out, grads)), _plain(out), grads


@EXERCISES.check("sliding_window_attention")
def _attention_memory(fn):
    """T = 512, window 4: no T x T tensor is kept (scores stay about T x 3·window)"""
    T = 512
    q, k, v = _qkv((1,), T, 8, 8, seed=5)
    do = _qkv((1,), T, 8, 8, seed=6)[2]
    for causal in (True, False):
        what = Message(
            "sliding_window_attention(q {shape}, ..., window=4, causal={causal}) and its backward pass",
            shape=tuple(q.shape),
            causal=causal,
        )
        largest, made, seen, out, grads = call(what, lambda causal=causal: _measured(fn, q, k, v, 4, causal, do))
        expect_true(
            largest < T * T // 8,
            Message(
                "Your sliding_window_attention keeps a tensor of {largest} elements for T = {T}, window = 4 "
                "(causal={causal}): that is T x T-sized. Compute scores only between each block of queries and its "
                "slab of keys ((..., T/b, b, b + 2·window) numbers, not (..., T, T)).",
                largest=largest,
                T=T,
                causal=causal,
            ),
        )
        expect_true(
            seen,
            Message(
                "{what}: the output or its gradients {unseen}. The check measures the tensors your attention makes; "
                "it cannot measure what it does not see.",
                what=what,
                unseen=UNSEEN,
            ),
        )
        expect_true(
            made < T * T // 8,
            Message(
                "{what} made a tensor of {made} elements for T = {T}: that is T x T-sized, although it keeps none for "
                "the backward pass (a custom autograd.Function that recomputes dense scores in its backward?). "
                "Compute scores only between each block of queries and its slab of keys, in the forward and the "
                "backward pass.",
                what=what,
                made=made,
                T=T,
            ),
        )
        band = _band(T, 4, causal)
        expect_close(Message("{what}: output", what=what), out, _torch_sdpa(q, k, v, attn_mask=band))
        qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))
        expected = _grad(_torch_sdpa(qg, kg, vg, attn_mask=band), (qg, kg, vg), do)
        expect_true(
            grads is not None, Message("{what}: no gradient reaches q, k and v through your output.", what=what)
        )
        for name, got, exp in zip("qkv", grads, expected):
            expect_true(
                got is not None,
                Message("{what}: no gradient reaches {name} through your output.", what=what, name=name),
            )
            expect_close(Message("{what}: gradient of {name}", what=what, name=name), got, exp)


@EXERCISES.check(
    "sliding_window_attention",
    hidden=True,
    requires="works for any `(T, window, block_len)`, 3-D and 5-D inputs, and `d_v` ≠ `d_k`",
)
def _attention_many_sizes(fn):
    """many (T, window, block_len) combinations, 3-D and 5-D inputs, d_v != d_k"""
    cases = [((3,), 1, 0, True, None), ((2,), 9, 0, False, 4), ((1, 2), 7, 10, True, 3), ((2, 1, 2), 17, 3, False, 1)]
    cases += [((2,), 16, 4, True, 4), ((2,), 16, 4, False, 8), ((3,), 10, 1, True, 7)]
    for seed, (lead, T, window, causal, block) in enumerate(cases):
        _compare_window_attention(fn, *_qkv(lead, T, 5, 3, seed=10 + seed), window, causal, block, hidden=True)


@EXERCISES.check(
    "sliding_window_attention",
    hidden=True,
    requires="works in float16, causal or not: float16 results, as in float32",
)
def _attention_half(fn):
    """float16 (a Colab GPU's dtype), causal and bidirectional: float16 results, as in float32"""
    q, k, v = _qkv((2, 2), 11, 4, 6, seed=21)
    for causal in (True, False):
        expect_half_precision(
            Message("sliding_window_attention(..., window=3, causal={causal})", causal=causal),
            lambda dtype, causal=causal: call(
                Message("sliding_window_attention in {dtype}", dtype=dtype),
                fn,
                q.to(dtype),
                k.to(dtype),
                v.to(dtype),
                3,
                causal=causal,
            ),
        )


@EXERCISES.check(
    "sliding_window_attention",
    hidden=True,
    requires="keeps float64 and lets gradients flow to q, k and v",
)
def _attention_dtype_and_grad(fn):
    """keeps float64 and lets gradients flow to q, k and v"""
    q, k, v = (t.requires_grad_() for t in _qkv((2,), 9, 4, 3, seed=20, dtype=torch.float64))
    out = call("sliding_window_attention (float64)", fn, q, k, v, 2, causal=True)
    expect_true(
        isinstance(out, torch.Tensor) and out.dtype == torch.float64,
        "float64 inputs should give a float64 output.",
    )
    call("backpropagating through your output", lambda: out.sum().backward())
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_true(
            t.grad is not None and bool(torch.isfinite(t.grad).all()) and bool(t.grad.abs().sum() > 0),
            Message("No (finite, non-zero) gradient reaches {name}.", name=name),
        )


# ---------------------------------------------------------------- exercise 4: routing_mask


def _routing_oracle(qc: torch.Tensor, kc: torch.Tensor, causal: bool) -> torch.Tensor:
    lead, T_q, T_k = qc.shape[:-1], qc.shape[-1], kc.shape[-1]
    qf, kf = qc.reshape(-1, T_q), kc.reshape(-1, T_k)
    out = torch.zeros(qf.shape[0], T_q, T_k, dtype=torch.bool)
    for n in range(qf.shape[0]):
        for i in range(T_q):
            for j in range(T_k):
                # query i sits at position T_k - T_q + i (queries are the last T_q positions, as chapter 3)
                out[n, i, j] = bool(qf[n, i] == kf[n, j]) and (j <= T_k - T_q + i or not causal)
    return out.reshape(*lead, T_q, T_k)


def _compare_routing(fn, qc, kc, causal, *, hidden=False):
    what = Message(
        "routing_mask(query_clusters {query_clusters}, key_clusters {key_clusters}, causal={causal})",
        query_clusters=tuple(qc.shape),
        key_clusters=tuple(kc.shape),
        causal=causal,
    )
    got = call(what, fn, qc, kc, causal=causal)
    expected = _routing_oracle(qc, kc, causal)
    hint = ""
    if not hidden and isinstance(got, torch.Tensor) and got.shape == expected.shape:
        if causal and torch.equal(got, _routing_oracle(qc, kc, False)):
            hint = Message("With causal=True a query may not attend to later keys, even in its own cluster.")
    try:
        expect_equal(what, got, expected, hidden=hidden)
    except CheckFailed as err:
        raise _explained(err, hint) from None


@EXERCISES.check("routing_mask", points=2)
def _routing_basic(fn):
    """clusters (2, 7) of queries and keys, causal: same cluster and not in the future"""
    g = rng(30)
    _compare_routing(fn, torch.randint(3, (2, 7), generator=g), torch.randint(3, (2, 7), generator=g), True)


@EXERCISES.check("routing_mask")
def _routing_bidirectional(fn):
    """causal=False: same cluster is enough"""
    g = rng(31)
    _compare_routing(fn, torch.randint(2, (3, 5), generator=g), torch.randint(2, (3, 5), generator=g), False)


@EXERCISES.check(
    "routing_mask",
    hidden=True,
    requires="accepts `(B, H, T)` clusters, and T_k > T_q with the queries at the last positions",
)
def _routing_heads_and_cache(fn):
    """(B, H, T) clusters, and T_k > T_q (queries are the last positions, as chapter 3's causal_mask)"""
    g = rng(32)
    qc, kc = torch.randint(4, (2, 3, 6), generator=g), torch.randint(4, (2, 3, 6), generator=g)
    for causal in (True, False):
        _compare_routing(fn, qc, kc, causal, hidden=True)
    _compare_routing(
        fn, torch.randint(3, (2, 4), generator=g), torch.randint(3, (2, 9), generator=g), True, hidden=True
    )


@EXERCISES.check(
    "routing_mask",
    hidden=True,
    requires="accepts unbatched `(T,)` clusters, and more queries than keys when not causal",
)
def _routing_other_forms(fn):
    """unbatched (T,) clusters, and more queries than keys without causality (T_q = 7 > T_k = 4)"""
    g = rng(33)
    qc, kc = torch.randint(3, (5,), generator=g), torch.randint(3, (8,), generator=g)
    for causal in (True, False):
        _compare_routing(fn, qc, kc, causal, hidden=True)
    _compare_routing(
        fn, torch.randint(2, (2, 7), generator=g), torch.randint(2, (2, 4), generator=g), False, hidden=True
    )


# ---------------------------------------------------------------- exercise 5: topk_block_mask


def _topk_oracle(scores, n_selected, block_len, causal, n_initial, n_local) -> torch.Tensor:
    """Query by query with Python lists: visible blocks, forced ones first, then the rest by decreasing score."""
    T_q, n_blocks = scores.shape[-2:]
    flat = scores.reshape(-1, T_q, n_blocks).double()
    out = torch.zeros(flat.shape, dtype=torch.bool)
    for row in range(flat.shape[0]):
        for t in range(T_q):
            own = t // block_len
            visible = [j for j in range(n_blocks) if j <= own or not causal]
            forced = [j for j in visible if j < n_initial or own - n_local < j <= own]
            rest = sorted((j for j in visible if j not in forced), key=lambda j: -float(flat[row, t, j]))
            for j in forced + rest[: n_selected - len(forced)]:
                out[row, t, j] = True
    return out.reshape(scores.shape)


def _compare_topk(fn, scores, n_selected, block_len, causal=True, n_initial=1, n_local=2, *, hidden=False):
    what = Message(
        "topk_block_mask(block_scores {shape}, n_selected={n_selected}, block_len={block_len}, causal={causal}, "
        "n_initial={n_initial}, n_local={n_local})",
        shape=tuple(scores.shape),
        n_selected=n_selected,
        block_len=block_len,
        causal=causal,
        n_initial=n_initial,
        n_local=n_local,
    )
    got = call(what, fn, scores, n_selected, block_len, causal=causal, n_initial=n_initial, n_local=n_local)
    expected = _topk_oracle(scores, n_selected, block_len, causal, n_initial, n_local)
    hint = ""
    if not hidden and isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == torch.bool:
        T_q, n_blocks = scores.shape[-2:]
        future = torch.arange(n_blocks)[None, :] > (torch.arange(T_q) // block_len)[:, None]  # (T_q, n_blocks)
        forced = _topk_oracle(torch.zeros(T_q, n_blocks), n_initial + n_local, block_len, causal, n_initial, n_local)
        if causal and bool((got.cpu() & future).any()):
            hint = Message(
                "A query selected a future block: with causal=True only blocks j <= t // block_len are visible."
            )
        elif not bool((got.cpu() | ~forced).all()):
            hint = Message(
                "The initial block(s) and the local blocks (the query's own and the ones before) are always selected."
            )
        elif not torch.equal(got.sum(-1).cpu(), expected.sum(-1)):
            hint = Message("Each row selects min(n_selected, visible blocks) blocks, the forced ones included.")
        else:
            hint = Message(
                "Fill the remaining places with the visible blocks of highest score (topk over the last dim)."
            )
    try:
        expect_equal(what, got, expected, hidden=hidden)
    except CheckFailed as err:
        raise _explained(err, hint) from None


@EXERCISES.check("topk_block_mask", points=3)
def _topk_causal(fn):
    """scores (2, 13, 5), blocks of 3, n = 3 with the initial and 2 local blocks forced: equals a brute-force loop"""
    _compare_topk(fn, torch.randn(2, 13, 5, generator=rng(40)), 3, 3)


@EXERCISES.check("topk_block_mask")
def _topk_future_scores_high(fn):
    """causal: future blocks get the highest scores, and still are never selected"""
    scores = torch.randn(11, 6, generator=rng(41)) + 10.0 * torch.arange(6.0)  # later blocks score higher
    _compare_topk(fn, scores, 4, 2, n_initial=1, n_local=1)


@EXERCISES.check("topk_block_mask")
def _topk_bidirectional(fn):
    """causal=False, nothing forced but the query's own block: every block may be chosen"""
    _compare_topk(fn, torch.randn(3, 8, 4, generator=rng(42)), 2, 2, causal=False, n_initial=0, n_local=1)


@EXERCISES.check(
    "topk_block_mask",
    hidden=True,
    requires="accepts `(B, H, T, n_blocks)` scores, n larger than the number of blocks, no forced blocks, and T not a multiple of the block",
)
def _topk_many_shapes(fn):
    """(B, H, T, n_blocks) scores, n larger than the blocks, no forced blocks, T not a multiple of the block"""
    cases = [
        ((2, 3, 10, 4), 2, 3, True, 1, 1),
        ((2, 9, 3), 5, 4, True, 1, 2),
        ((1, 16, 8), 3, 2, True, 0, 0),
        ((2, 2, 7, 7), 4, 1, False, 2, 1),
        ((5, 6), 6, 1, True, 2, 3),
        ((3, 20, 10), 5, 2, True, 1, 2),
    ]
    for seed, (shape, n, block_len, causal, n_initial, n_local) in enumerate(cases):
        scores = torch.randn(*shape, generator=rng(50 + seed), dtype=torch.float64)
        _compare_topk(fn, scores, n, block_len, causal, n_initial, n_local, hidden=True)


__all__ = ["EXERCISES", "CheckFailed"]
