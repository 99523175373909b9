"""Checks for chapter 10, FlashAttention (notebook ``notebooks/ch10_flash_attention.ipynb``).

The references are computed independently of the course's solution: ``torch.logsumexp`` and ``amax`` for the
online softmax; PyTorch's ``torch.nn.functional.scaled_dot_product_attention`` (its output), ``torch.logsumexp``
of the masked scores (the log-sum-exp) and ``torch.autograd.grad`` through PyTorch's kernel (the gradients) for
the tiled forward and backward passes. They are bound here, at import time, so that a student cell that later
rebinds them does not change the reference.

Sizes are chosen so that batch, heads, T_q, T_k, d_k and d_v all differ, and so that T is not a multiple of the
block sizes (the last block is ragged).

That the tiled passes never hold a ``T_q × T_k`` intermediate is measured, not assumed: a ``TorchDispatchMode``
active only inside the answer's call (:func:`~autograder.core.largest_tensor`) keeps the largest storage any operation
makes there, and whether every tensor the answer returned came from operations it saw, fed only by the check's
inputs; the call returns both and the result, so the grading worker judges them from the record like any other
result. A result computed with the mode switched off (``_disable_current_modes``, an excluded dispatch key, the mode
stack popped, numpy) is not seen and fails the check, rather than passing it unmeasured.
"""

from __future__ import annotations

import math

import torch
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .checks.properties import UNSEEN
from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_half_precision,
    expect_shape,
    expect_true,
    largest_tensor,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch10_flash_attention")

_logsumexp = torch.logsumexp
_grad = torch.autograd.grad


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=rng(seed), dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------- exercise 1: online_softmax_update


def _fold(fn, x, splits, what):
    """Run the student's update over the blocks of x (cut at ``splits``), from m = -inf, ell = 0."""
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype)
    edges = [0, *splits, x.shape[-1]]
    for a, b in zip(edges[:-1], edges[1:]):
        result = call(what, fn, m, ell, x[..., a:b])
        expect_true(
            isinstance(result, tuple) and len(result) == 2,
            Message(
                "online_softmax_update should return a tuple (m, ell); you returned {type}.",
                type=type(result).__name__,
            ),
        )
        m, ell = result
    return m, ell


def _fold_as(x, splits, mistake):
    """The running sum a fold of ``x`` gives with a known ``mistake`` (float64, from m = -inf, ell = 0)."""
    x = x.double()
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype)
    edges = [0, *splits, x.shape[-1]]
    for a, b in zip(edges[:-1], edges[1:]):
        block = x[..., a:b]
        top = block.amax(dim=-1)
        m_new = torch.maximum(m, top)
        shift = torch.where(m_new == -math.inf, torch.zeros((), dtype=x.dtype), m_new)
        own = torch.where(top == -math.inf, torch.zeros((), dtype=x.dtype), top)
        if mistake == "old not rescaled":
            ell = ell + torch.exp(block - shift[..., None]).sum(-1)
        elif mistake == "rescaled the wrong way":
            ell = ell * torch.exp(shift - m) + torch.exp(block - shift[..., None]).sum(-1)
        else:  # "new terms by their own max": the old sum rescaled, the block's sum left relative to its own max
            ell = ell * torch.exp(m - shift) + torch.exp(block - own[..., None]).sum(-1)
        m = m_new
    return ell


_FOLD_HINTS = {
    "old not rescaled": Message(
        "when the max grows from m to m_new, what was summed so far must be multiplied by exp(m - m_new)."
    ),
    "rescaled the wrong way": Message(
        "the old sum is multiplied by exp(m_new - m); the factor is exp(m - m_new) (at most 1)."
    ),
    "new terms by their own max": Message(
        "the old sum is rescaled to m_new, but the block's terms are relative to the block's own max: shift them by "
        "m_new too (or multiply their sum by exp(block max - m_new))."
    ),
}
_FOLD_RECIPE = Message(
    "ell' = ell * exp(m - m_new) + sum over the block of exp(x - m_new), with m_new = max(m, block max)."
)


def _fold_hint(x, splits, ell) -> Message:
    """Name the mistake whose running sum the answer's ``ell`` equals; otherwise the recipe, blaming no step."""
    if isinstance(ell, torch.Tensor) and ell.shape == x.shape[:-1]:
        got = ell.detach().double().cpu()
        for mistake, text in _FOLD_HINTS.items():
            if torch.allclose(got, _fold_as(x, splits, mistake), rtol=1e-4, atol=1e-5, equal_nan=True):
                return text
    return _FOLD_RECIPE


def _expect_fold(fn, x, splits, *, hidden=False):
    """The folded (m, ell) must be the max of all entries and the sum of exp(x - max) (computed in float64)."""
    what = Message(
        "online_softmax_update over blocks {blocks} of x {shape}",
        blocks=[0, *splits, x.shape[-1]],
        shape=tuple(x.shape),
    )
    m, ell = _fold(fn, x, splits, what)
    m_exp = x.amax(dim=-1)
    ell_exp = torch.exp(_logsumexp(x.double(), dim=-1) - m_exp.double()).to(x.dtype)
    expect_close(Message("{what}: m", what=what), m, m_exp, hidden=hidden, hint="m is the largest entry seen so far.")
    expect_close(Message("{what}: ell", what=what), ell, ell_exp, hidden=hidden, hint=_fold_hint(x, splits, ell))


@EXERCISES.check("online_softmax_update", points=2)
def _update_one_block(fn):
    """from m = -inf, ell = 0, one block x (3, 7) gives m = max(x) and ell = sum(exp(x - m))"""
    _expect_fold(fn, _randn(3, 7, seed=1) * 4, [])


@EXERCISES.check("online_softmax_update")
def _update_several_blocks(fn):
    """folding blocks of 3, 5 and 2 entries one after the other, where the max grows in a later block"""
    x = _randn(4, 10, seed=2) * 4
    x[:, 8] += 12  # the largest entry arrives in the last block: the running sum must be rescaled
    _expect_fold(fn, x, [3, 8])


@EXERCISES.check(
    "online_softmax_update",
    hidden=True,
    requires="stays finite for entries of several hundreds (the running max keeps exp from overflowing)",
    extremes=True,
)
def _update_large_values(fn):
    """stays finite for entries of several hundreds (exp would overflow without the running max)"""
    x = _randn(2, 3, 12, seed=3) * 300
    _expect_fold(fn, x, [4, 5, 11], hidden=True)


@EXERCISES.check(
    "online_softmax_update",
    hidden=True,
    requires="leaves m = -inf and ell = 0 after a block of -inf entries, never NaN",
)
def _update_masked_block(fn):
    """a first block of -inf entries (masked scores) leaves m = -inf and ell = 0, never NaN"""
    x = _randn(3, 9, seed=4)
    x[:, :4] = -math.inf
    x[1, 4:7] = -math.inf
    m, ell = _fold(fn, x[:, :4], [], Message("online_softmax_update on a block of -inf"))
    expect_true(
        bool((m == -math.inf).all()) and bool((ell == 0).all()),
        "After a block where every entry is -inf, m should still be -inf and ell 0 (no NaN): "
        "exp(-inf - (-inf)) is NaN, so shift by a finite value where the new max is -inf.",
    )
    _expect_fold(fn, x, [4, 7], hidden=True)


@EXERCISES.check(
    "online_softmax_update",
    hidden=True,
    requires="works for rows whose every entry is about -1e5 (no finite floor on the shift)",
    extremes=True,
)
def _update_very_negative(fn):
    """rows whose every entry is about -1e5 or -2e5 (a shift clamped to some finite floor underflows them to 0)"""
    # float64: near 1e5 float32's spacing is 0.0078, too coarse for a formula that is exact but orders its
    # arithmetic differently (e.g. through torch.logsumexp); a floor still underflows every entry to 0 in float64
    x = _randn(3, 10, seed=6, dtype=torch.float64) * 3 - 1e5
    x[0] -= 1e5
    x[2, :4] = -math.inf  # a masked block first, then very negative entries
    _expect_fold(fn, x, [4, 7], hidden=True)


@EXERCISES.check(
    "online_softmax_update",
    hidden=True,
    requires="keeps float64",
)
def _update_float64(fn):
    """keeps float64"""
    _expect_fold(fn, _randn(5, 8, seed=5, dtype=torch.float64) * 10, [2, 6], hidden=True)


# ---------------------------------------------------------------- exercise 2: flash_attention_forward


def _qkv(B, H, T_q, T_k, d_k, d_v, seed, dtype=torch.float32):
    return (
        _randn(B, H, T_q, d_k, seed=seed, dtype=dtype),
        _randn(B, H, T_k, d_k, seed=seed + 100, dtype=dtype),
        _randn(B, H, T_k, d_v, seed=seed + 200, dtype=dtype),
    )


def _full_mask(T_q, T_k, causal, attention_mask):
    """The (B | 1, 1, T_q, T_k) mask (True = may attend) built directly, or None."""
    mask = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q) if causal else None
    if attention_mask is not None:
        pad = attention_mask[:, None, None, :]
        mask = pad if mask is None else mask & pad
    return mask


def _forward_oracle(q, k, v, mask):
    """(output, lse) from PyTorch; queries with no allowed key get 0 and -inf."""
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    lse = _logsumexp(scores, dim=-1)
    out = _torch_sdpa(q, k, v, attn_mask=mask)
    out = torch.where((lse > -math.inf)[..., None], out, torch.zeros((), dtype=out.dtype))
    return out, lse


def _lengths_mask(lengths, T_k):
    return torch.arange(T_k)[None, :] < torch.tensor(lengths)[:, None]  # (B, T_k)


def _forward_what(q, causal, attention_mask, block_q, block_k) -> Message:
    """The call's name in the checks' messages (and its identity in the grader's record)."""
    return Message(
        "flash_attention_forward(q {shape}, k, v, causal={causal}, attention_mask={attention_mask}, "
        "block_q={block_q}, block_k={block_k})",
        shape=tuple(q.shape),
        causal=causal,
        attention_mask="None" if attention_mask is None else "given",
        block_q=block_q,
        block_k=block_k,
    )


def _compare_forward(fn, q, k, v, *, causal=False, attention_mask=None, block_q, block_k, hidden=False, hint=""):
    what = _forward_what(q, causal, attention_mask, block_q, block_k)
    result = call(what, fn, q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
    expect_true(
        isinstance(result, tuple) and len(result) == 2,
        Message(
            "flash_attention_forward should return a tuple (o, lse); you returned {type}.", type=type(result).__name__
        ),
    )
    o, lse = result
    exp_o, exp_lse = _forward_oracle(q, k, v, _full_mask(q.shape[-2], k.shape[-2], causal, attention_mask))
    expect_close(Message("{what}: o", what=what), o, exp_o, hidden=hidden, hint=hint)
    expect_true(isinstance(lse, torch.Tensor), "lse should be a tensor (B, H, T_q).")
    expect_close(
        Message("{what}: lse", what=what),
        lse,
        exp_lse.to(torch.promote_types(q.dtype, torch.float32)),
        hidden=hidden,
        hint=hint or "lse = m_i + log(l_i) with the final running max and sum of each query.",
    )


_FORWARD_HINT = Message(
    "for each key block: mask the scores (-inf) before taking the max; m_new = max(m_i, rowmax(s)); "
    "rescale both l_i and o_i by exp(m_i - m_new) before adding the new block."
)


@EXERCISES.check("flash_attention_forward", points=4)
def _forward_no_mask(fn):
    """equals softmax(QK^T/sqrt(d_k))V without a mask: q (2, 3, 10, 4), k (2, 3, 14, 4), v (2, 3, 14, 6), blocks 4 × 5"""
    _compare_forward(fn, *_qkv(2, 3, 10, 14, 4, 6, seed=10), block_q=4, block_k=5, hint=_FORWARD_HINT)


@EXERCISES.check("flash_attention_forward")
def _forward_causal(fn):
    """causal with T_q = 9 < T_k = 12 (bottom-right aligned), blocks 4 × 5"""
    _compare_forward(
        fn,
        *_qkv(2, 3, 9, 12, 4, 6, seed=11),
        causal=True,
        block_q=4,
        block_k=5,
        hint="query i sees keys j <= i + T_k - T_q; skip only key blocks that lie entirely after the query "
        "block's last position (the block holding the diagonal must still be computed).",
    )


@EXERCISES.check("flash_attention_forward")
def _forward_padding(fn):
    """a padding mask attention_mask (B, T_k), True at real keys, blocks 3 × 4"""
    q, k, v = _qkv(2, 3, 7, 11, 5, 4, seed=12)
    _compare_forward(fn, q, k, v, attention_mask=_lengths_mask([11, 5], 11), block_q=3, block_k=4, hint=_FORWARD_HINT)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="handles both masks together, for any block sizes (1 × 1, 64 × 64, 3 × 7)",
)
def _forward_both_masks_and_blocks(fn):
    """both masks together, for blocks 1 × 1, 64 × 64 and 3 × 7"""
    q, k, v = _qkv(3, 2, 11, 13, 6, 5, seed=13)
    am = _lengths_mask([13, 9, 12], 13)
    for block_q, block_k in ((64, 64), (3, 7), (1, 1)):  # one block first: the device probe runs on the first call
        _compare_forward(fn, q, k, v, causal=True, attention_mask=am, block_q=block_q, block_k=block_k, hidden=True)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="gives a query that may attend to no key a zero output and lse = -inf, not NaN",
)
def _forward_fully_masked(fn):
    """a query that may attend to no key gets a zero output and lse = -inf, not NaN"""
    q, k, v = _qkv(2, 2, 6, 6, 3, 4, seed=14)
    am = _lengths_mask([6, 0], 6)
    result = call("flash_attention_forward", fn, q, k, v, causal=True, attention_mask=am, block_q=4, block_k=4)
    expect_true(isinstance(result, tuple) and len(result) == 2, "flash_attention_forward should return (o, lse).")
    o, lse = result
    expect_shape("o", o, (2, 2, 6, 4))
    expect_shape("lse", lse, (2, 2, 6))
    expect_true(
        bool(torch.isfinite(o).all()),
        "A query that may attend to no key gave NaN or inf: keep the running max's shift finite while it is -inf "
        "(exp(-inf - (-inf)) is NaN), and divide by l_i only where it is not 0.",
    )
    cause = Message("mask every score a query may not attend to with -inf, before the max")
    if not bool((o[1] == 0).all()):
        causal_only = _forward_oracle(q, k, v, _full_mask(6, 6, True, None))[0][1]
        if torch.allclose(o[1], v[1].mean(dim=-2, keepdim=True).expand_as(o[1]), atol=1e-4):
            cause = Message(
                "your output there is the plain mean of the values: the masked scores were filled with a finite "
                "number (finfo.min), so they all tie and get equal weights; fill with -inf"
            )
        elif torch.allclose(o[1], causal_only, atol=1e-4):
            cause = Message(
                "your output there ignores the padding mask: apply attention_mask as well as the causal mask"
            )
    expect_true(
        bool((o[1] == 0).all()) and bool((lse[1] == -math.inf).all()),
        Message("A query that may attend to no key should get o = 0 and lse = -inf: {cause}.", cause=cause),
    )
    _compare_forward(fn, q, k, v, causal=True, attention_mask=am, block_q=4, block_k=4, hidden=True)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="masks the scores before taking the max, so padded keys with huge scores change nothing",
    extremes=True,
)
def _forward_masked_keys_with_huge_scores(fn):
    """padded keys whose scores dwarf the real ones do not disturb the result (mask before the max)"""
    q, k, v = _qkv(2, 2, 5, 9, 4, 3, seed=15)
    q = q.abs()
    k[:, :, 6:] = 1000.0  # padding keys with scores of several thousands
    _compare_forward(fn, q, k, v, attention_mask=_lengths_mask([6, 6], 9), block_q=2, block_k=4, hidden=True)
    _compare_forward(
        fn, q, k, v, causal=True, attention_mask=_lengths_mask([6, 6], 9), block_q=3, block_k=3, hidden=True
    )


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="keeps float64 and stays exact for scores of several thousands",
    extremes=True,
)
def _forward_float64_large_scores(fn):
    """keeps float64 and stays exact for scores of several thousands"""
    q, k, v = _qkv(2, 1, 7, 8, 4, 5, seed=16, dtype=torch.float64)
    _compare_forward(fn, q * 40, k * 40, v, causal=True, block_q=3, block_k=2, hidden=True)


def _exact_negative_qkv(B, H, T_q, T_k, d_v, seed):
    """float64 q > 0 and k < 0 with integer entries in [170, 260], d_k = 4: every score is an exact number below
    -57 000 (scaled by 1/2, exact too), so exp(score - 0) or exp(score + 50 000) underflows to 0."""
    g = rng(seed)
    q = torch.randint(170, 261, (B, H, T_q, 4), generator=g).double()
    k = -torch.randint(170, 261, (B, H, T_k, 4), generator=g).double()
    return q, k, torch.randn(B, H, T_k, d_v, generator=g, dtype=torch.float64)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="starts the running max at -inf, so that scores below -57 000 work too",
    extremes=True,
)
def _forward_very_negative_scores(fn):
    """every allowed score of every query is below -57 000 (float64): the running max must start at -inf"""
    q, k, v = _exact_negative_qkv(2, 2, 7, 10, 3, seed=18)
    am = _lengths_mask([10, 8], 10)
    for causal, attention_mask, block_q, block_k in ((False, None, 3, 4), (True, am, 4, 3)):
        what = _forward_what(q, causal, attention_mask, block_q, block_k)
        result = call(what, fn, q, k, v, causal=causal, attention_mask=attention_mask, block_q=block_q, block_k=block_k)
        expect_true(isinstance(result, tuple) and len(result) == 2, "flash_attention_forward should return (o, lse).")
        mask = _full_mask(7, 10, causal, attention_mask)
        scores = (q @ k.transpose(-2, -1)) / 2.0  # exact: integers times 1/2
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        o, lse = result
        hint = ""
        if isinstance(o, torch.Tensor) and o.shape == v.shape[:2] + (7, 3) and bool((o == 0).all()):
            hint = Message(  # what a running max started at 0, or at any finite number above the scores, gives
                "your output is 0 for every query although each has allowed keys: every allowed score here is below "
                "-57 000, so a running max started at a finite number (0, -5e4) makes exp(s - m) underflow to 0. "
                "Start it at -inf."
            )
        expect_close(Message("{what}: o", what=what), o, torch.softmax(scores, dim=-1) @ v, hidden=True, hint=hint)
        expect_close(Message("{what}: lse", what=what), lse, _logsumexp(scores, dim=-1), hidden=True, hint=hint)


def _half_exact(*shape, seed, scale, offset=0.0):
    """float32 values that float16 holds exactly (so a float16 run sees the same numbers as the float32 one);
    with ``offset``, ``|randn| · scale + offset``."""
    x = torch.randn(*shape, generator=rng(seed)) * scale
    return (x.abs() + offset if offset else x).half().float()


def _large_qk(T_q, T_k, seed):
    """q and k with entries of 100 to 500, half of them positive: many of QK^T's entries (up to ~10^6) exceed
    float16's 65504, the rest are of several thousands."""
    q = _half_exact(2, 2, T_q, 4, seed=seed, scale=100, offset=100)
    k = _half_exact(2, 2, T_k, 4, seed=seed + 1, scale=100, offset=100)
    k[1] = -k[1]  # the second batch element: large negative scores
    return q, k


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="computes the tile scores in float32 for float16 inputs (QKᵀ can pass 65 504)",
    extremes=True,
)
def _forward_half_large(fn):
    """float16 inputs with entries of 100 to 500: the tile scores (QK^T beyond 65504) are computed in float32"""
    q, k = _large_qk(6, 9, seed=19)
    v = _half_exact(2, 2, 9, 5, seed=21, scale=1)
    am = _lengths_mask([9, 7], 9)

    def run(dtype):
        args = (q.to(dtype), k.to(dtype), v.to(dtype))
        return call(
            Message("flash_attention_forward in {dtype}", dtype=dtype),
            fn,
            *args,
            causal=True,
            attention_mask=am,
            block_q=4,
            block_k=4,
        )

    expect_half_precision("flash_attention_forward (large entries)", run, float32_results=(1,))


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="handles batch 1 and more queries than keys (not causal) with padding",
)
def _forward_batch_one_more_queries(fn):
    """batch 1, and more queries than keys (T_q = 9 > T_k = 5, not causal) with padding"""
    _compare_forward(fn, *_qkv(1, 2, 6, 11, 3, 4, seed=22), causal=True, block_q=4, block_k=3, hidden=True)
    q, k, v = _qkv(2, 1, 9, 5, 4, 3, seed=23)
    _compare_forward(fn, q, k, v, attention_mask=_lengths_mask([5, 2], 5), block_q=4, block_k=2, hidden=True)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="returns `o` in float16 and `lse` in float32 for float16 inputs, as in float32",
)
def _forward_half(fn):
    """float16 inputs (a Colab GPU's dtype), causal with padding: o in float16 and lse in float32, as in float32"""
    q, k, v = _qkv(2, 2, 6, 9, 4, 5, seed=17)
    am = _lengths_mask([9, 7], 9)

    def run(dtype):
        args = (q.to(dtype), k.to(dtype), v.to(dtype))
        return call(
            Message("flash_attention_forward in {dtype}", dtype=dtype),
            fn,
            *args,
            causal=True,
            attention_mask=am,
            block_q=4,
            block_k=4,
        )

    expect_half_precision("flash_attention_forward", run, float32_results=(1,))


# ---------------------------------------------------------------- exercise 3: flash_attention_backward


def _compare_backward(fn, q, k, v, *, causal=False, attention_mask=None, block_q, block_k, hidden=False, hint=""):
    mask = _full_mask(q.shape[-2], k.shape[-2], causal, attention_mask)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = _torch_sdpa(qg, kg, vg, attn_mask=mask)
    do = _randn(*out.shape, seed=99, dtype=q.dtype)
    expected = _grad(out, (qg, kg, vg), do)
    o, lse = _forward_oracle(q, k, v, mask)
    lse = lse.to(torch.promote_types(q.dtype, torch.float32))
    what = Message(
        "flash_attention_backward(do, q {shape}, k, v, o, lse, causal={causal}, attention_mask={attention_mask}, "
        "block_q={block_q}, block_k={block_k})",
        shape=tuple(q.shape),
        causal=causal,
        attention_mask="None" if attention_mask is None else "given",
        block_q=block_q,
        block_k=block_k,
    )
    result = call(
        what,
        fn,
        do,
        q,
        k,
        v,
        o,
        lse,
        causal=causal,
        attention_mask=attention_mask,
        block_q=block_q,
        block_k=block_k,
    )
    expect_true(
        isinstance(result, tuple) and len(result) == 3,
        Message(
            "flash_attention_backward should return a tuple (dq, dk, dv); you returned {type}.",
            type=type(result).__name__,
        ),
    )
    for name, got, exp in zip(("dq", "dk", "dv"), result, expected):
        expect_close(Message("{what}: {name}", what=what, name=name), got, exp, hidden=hidden, hint=hint)


_BACKWARD_HINT = Message(
    "recompute s_ij = q_i k_j^T / sqrt(d_k) (masked with -inf), p_ij = exp(s_ij - lse_i); then "
    "dv_j += p_ij^T do_i, dp_ij = do_i v_j^T, ds_ij = p_ij * (dp_ij - D_i), "
    "dq_i += ds_ij k_j / sqrt(d_k), dk_j += ds_ij^T q_i / sqrt(d_k)."
)


@EXERCISES.check("flash_attention_backward", points=4)
def _backward_no_mask(fn):
    """dq, dk, dv equal autograd through softmax(QK^T/sqrt(d_k))V: q (2, 3, 10, 4), k (2, 3, 14, 4), v (2, 3, 14, 6)"""
    _compare_backward(fn, *_qkv(2, 3, 10, 14, 4, 6, seed=20), block_q=4, block_k=5, hint=_BACKWARD_HINT)


@EXERCISES.check("flash_attention_backward")
def _backward_causal(fn):
    """causal with T_q = 9 < T_k = 12, blocks 4 × 5"""
    _compare_backward(
        fn,
        *_qkv(2, 3, 9, 12, 4, 6, seed=21),
        causal=True,
        block_q=4,
        block_k=5,
        hint=Message(
            "mask the recomputed scores exactly as in the forward pass; skip only query blocks whose every query "
            "comes before the key block's first key. {recipe}",
            recipe=_BACKWARD_HINT,
        ),
    )


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="handles padding and causal masks, for any block sizes",
)
def _backward_masks_and_blocks(fn):
    """padding and causal masks, for blocks 64 × 64 and 3 × 4, and 1 × 1 with both masks"""
    q, k, v = _qkv(3, 2, 8, 11, 5, 3, seed=22)
    am = _lengths_mask([11, 4, 9], 11)
    for causal, blocks in ((False, ((64, 64), (3, 4))), (True, ((64, 64), (3, 4), (1, 1)))):
        for block_q, block_k in blocks:  # one block first: the device probe runs on the first call
            _compare_backward(
                fn, q, k, v, causal=causal, attention_mask=am, block_q=block_q, block_k=block_k, hidden=True
            )


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="gives finite, zero gradients for a query that may attend to no key (lse = -inf)",
)
def _backward_fully_masked(fn):
    """a query that may attend to no key (lse = -inf) gives finite, zero gradients"""
    q, k, v = _qkv(2, 2, 5, 5, 3, 4, seed=23)
    am = _lengths_mask([5, 0], 5)
    o, lse = _forward_oracle(q, k, v, _full_mask(5, 5, True, am))
    do = _randn(2, 2, 5, 4, seed=24)
    result = call(
        "flash_attention_backward",
        fn,
        do,
        q,
        k,
        v,
        o,
        lse.float(),
        causal=True,
        attention_mask=am,
        block_q=2,
        block_k=3,
    )
    expect_true(isinstance(result, tuple) and len(result) == 3, "flash_attention_backward should return (dq, dk, dv).")
    for name, g, like in zip(("dq", "dk", "dv"), result, (q, k, v)):
        expect_shape(name, g, tuple(like.shape))
    expect_true(
        all(bool(torch.isfinite(g).all()) for g in result),
        "Where a query may attend to no key its lse is -inf: your gradients there hold NaN or inf "
        "(exp(s_ij - lse_i) with both -inf is NaN: shift by a finite value instead of -inf when you recompute p_ij).",
    )
    expect_true(
        all(bool((g[1] == 0).all()) for g in result),
        "Where a query may attend to no key (here: every key is padding) the gradients must be zero: mask the "
        "recomputed scores with -inf exactly as in the forward pass, causal and padding mask both, so that p_ij "
        "is 0 at every masked key.",
    )
    _compare_backward(fn, q[:1], k[:1], v[:1], causal=True, block_q=2, block_k=3, hidden=True)


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="keeps float64 and matches to float64 precision",
)
def _backward_float64(fn):
    """keeps float64 and matches to float64 precision"""
    q, k, v = _qkv(1, 2, 7, 9, 4, 5, seed=25, dtype=torch.float64)
    _compare_backward(fn, q, k, v, causal=True, attention_mask=_lengths_mask([8], 9), block_q=3, block_k=2, hidden=True)


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="recomputes the scores in float32 for float16 inputs (QKᵀ can pass 65 504)",
    extremes=True,
)
def _backward_half_large(fn):
    """float16 inputs with entries of 100 to 500: the recomputed scores (beyond 65504) are computed in float32"""
    q, k = _large_qk(6, 9, seed=26)
    v, do = _half_exact(2, 2, 9, 5, seed=28, scale=1), _half_exact(2, 2, 6, 5, seed=29, scale=1)
    am = _lengths_mask([9, 7], 9)
    o, lse = _forward_oracle(q.double(), k.double(), v.double(), _full_mask(6, 9, True, am))
    o, lse = o.half().float(), lse.float()

    def run(dtype):
        args = (do.to(dtype), q.to(dtype), k.to(dtype), v.to(dtype), o.to(dtype), lse)
        return call(
            Message("flash_attention_backward in {dtype}", dtype=dtype),
            fn,
            *args,
            causal=True,
            attention_mask=am,
            block_q=4,
            block_k=4,
        )

    expect_half_precision("flash_attention_backward (large entries)", run)


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="handles batch 1 and more queries than keys (not causal) with padding",
)
def _backward_batch_one_more_queries(fn):
    """batch 1, and more queries than keys (T_q = 9 > T_k = 5, not causal) with padding"""
    _compare_backward(fn, *_qkv(1, 2, 6, 11, 3, 4, seed=30), causal=True, block_q=4, block_k=3, hidden=True)
    q, k, v = _qkv(2, 1, 9, 5, 4, 3, seed=31)
    _compare_backward(fn, q, k, v, attention_mask=_lengths_mask([5, 2], 5), block_q=4, block_k=2, hidden=True)


# ---------------------------------------------------------------- both passes: tiles only, measured


def _expect_tiles_only(name, inputs, fn, args, attention_mask, T_q, T_k, expected):
    """The largest tensor ``name(*args, causal=True, attention_mask=..., 8 × 8 blocks)`` makes holds fewer numbers
    than one head's score matrix, T_q · T_k; the check saw the result computed
    (:func:`~autograder.core.largest_tensor`) and it equals ``expected`` (name -> the oracle's value, in the order the
    answer returns them). ``inputs``: the positional arguments as the messages show them. (Not annotated: the
    comparisons take ``str`` messages until the checks' signatures take a Message.)"""
    kwargs = dict(causal=True, attention_mask=attention_mask, block_q=8, block_k=8)
    what = Message(
        "{name}({inputs}, {kwargs})",
        name=name,
        inputs=inputs,
        kwargs=", ".join(f"{k}={'given' if k == 'attention_mask' else v}" for k, v in kwargs.items()),
    )

    numel, shape, seen, result = call(what, lambda: largest_tensor(fn, *args, **kwargs))  # what is recorded
    expect_true(
        isinstance(result, tuple) and len(result) == len(expected),
        Message(
            "{what} should return a tuple ({names}); you returned {type}.",
            what=what,
            names=", ".join(expected),
            type=type(result).__name__,
        ),
    )
    expect_true(
        seen,
        Message(
            "{what}: the result {unseen}. The check measures the tensors your passes make; it cannot measure what it "
            "does not see.",
            what=what,
            unseen=UNSEEN,
        ),
    )
    expect_true(
        numel < T_q * T_k,
        Message(
            "{what} made a tensor of {numel} numbers (shape {shape}): at least T_q · T_k = {total}, the whole score "
            "matrix of one head. A tiled pass holds at most one block_q × block_k tile of scores (and the tile's mask) "
            "at a time.\n  Hint: compute the scores, probabilities and masks tile by tile inside the loops over query "
            "and key blocks (block_mask gives one tile's mask); do not build them for all queries and keys, and do not "
            "call torch.autograd or F.scaled_dot_product_attention on the whole matrices.",
            what=what,
            numel=numel,
            shape=tuple(shape),
            total=T_q * T_k,
        ),
    )
    for (key, exp), got in zip(expected.items(), result):  # the measured call computed the right thing
        expect_close(Message("{what}: {name}", what=what, name=key), got, exp, hidden=True)


def _tiles_inputs():
    q, k, v = _qkv(1, 2, 40, 48, 4, 6, seed=40)
    return q, k, v, _lengths_mask([45], 48)


@EXERCISES.check(
    "flash_attention_forward",
    hidden=True,
    requires="never makes a tensor as large as a whole T_q × T_k score matrix: it works tile by tile",
)
def _forward_tiles_only(fn):
    """Tried q (1, 2, 40, 4), k (1, 2, 48, 4), v (1, 2, 48, 6), causal with padding, blocks 8 × 8, and measured the
    largest tensor the call makes (T_q · T_k = 1920 numbers would be a whole score matrix)."""
    q, k, v, am = _tiles_inputs()
    inputs = "q (1, 2, 40, 4), k (1, 2, 48, 4), v (1, 2, 48, 6)"
    o, lse = _forward_oracle(q, k, v, _full_mask(40, 48, True, am))
    _expect_tiles_only("flash_attention_forward", inputs, fn, (q, k, v), am, 40, 48, {"o": o, "lse": lse.float()})


@EXERCISES.check(
    "flash_attention_backward",
    hidden=True,
    requires="never makes a tensor as large as a whole T_q × T_k matrix (no torch.autograd through the full attention): it works tile by tile",
)
def _backward_tiles_only(fn):
    """Tried q (1, 2, 40, 4), k (1, 2, 48, 4), v (1, 2, 48, 6), causal with padding, blocks 8 × 8, and measured the
    largest tensor the call makes (T_q · T_k = 1920 numbers would be a whole score matrix)."""
    q, k, v, am = _tiles_inputs()
    o, lse = _forward_oracle(q, k, v, _full_mask(40, 48, True, am))
    do = _randn(1, 2, 40, 6, seed=41)
    inputs = "do, q (1, 2, 40, 4), k (1, 2, 48, 4), v (1, 2, 48, 6), o, lse"
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    grads = _grad(_torch_sdpa(qg, kg, vg, attn_mask=_full_mask(40, 48, True, am)), (qg, kg, vg), do)
    expected = dict(zip(("dq", "dk", "dv"), grads))
    _expect_tiles_only("flash_attention_backward", inputs, fn, (do, q, k, v, o, lse.float()), am, 40, 48, expected)


__all__ = ["EXERCISES", "CheckFailed"]
