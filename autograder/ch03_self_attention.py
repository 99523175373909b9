"""Checks for chapter 3, self-attention (notebook ``notebooks/ch03_self_attention.ipynb``).

The references are computed independently of the course's solution: PyTorch's own
``torch.nn.functional.scaled_dot_product_attention`` (its weights are read off by attending to an identity
matrix of values), ``torch.tril`` and ``torch.nn.utils.rnn.pad_sequence``. The functions are bound here, at
import time, so that a student cell that later rebinds ``F.scaled_dot_product_attention`` does not change the
reference.

Sizes are chosen so that batch, heads, T_q, T_k, d_k and d_v all differ: code that only works when two of
them coincide fails.
"""

from __future__ import annotations

import math

import torch
from torch.nn.functional import linear as _torch_linear
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa
from torch.nn.utils.rnn import pad_sequence as _pad_sequence

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_equal,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch03_self_attention")


def _qkv(B, H, T_q, T_k, d_k, d_v, seed=0, dtype=torch.float32):
    g = rng(seed)
    lead = (B, H) if H else (B,)
    q = torch.randn(*lead, T_q, d_k, generator=g, dtype=dtype)
    k = torch.randn(*lead, T_k, d_k, generator=g, dtype=dtype)
    v = torch.randn(*lead, T_k, d_v, generator=g, dtype=dtype)
    return q, k, v


def _oracle(q, k, v, mask=None):
    """(output, weights) from PyTorch's kernel; weights = attention applied to identity values."""
    out = _torch_sdpa(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype).expand(*k.shape[:-1], k.shape[-2])
    weights = _torch_sdpa(q, k, eye, attn_mask=mask)
    return out, weights


def _sdpa_hint(q, k, v, mask, got_w, *, d_model: int | None = None) -> Message | None:
    """Name a known mistake if the student's weights match it (None when none does: no guessing).

    ``d_model`` (the module check) adds the guess "scaled by sqrt(d_model)".
    """
    d_k = q.shape[-1]
    raw = q @ k.transpose(-2, -1)
    neg = torch.finfo(q.dtype).min

    def softmax(scores, dim=-1, m=mask):
        return torch.softmax(scores if m is None else scores.masked_fill(~m, neg), dim)

    guesses = [
        (Message("You did not divide the scores by sqrt(d_k) (Vaswani et al. 2017, eq. 1)."), softmax(raw)),
        (Message("You divided the scores by d_k; the scale is 1/sqrt(d_k)."), softmax(raw / d_k)),
        (
            Message("The softmax runs over the queries; it must run over the keys (the last dim, dim=-1)."),
            softmax(raw / math.sqrt(d_k), -2),
        ),
    ]
    if d_model is not None and d_model != d_k:
        scaled_by_d_model = Message(
            "The scores are divided by sqrt(d_model); the scale is 1/sqrt(d_k), the width of the queries and keys."
        )
        guesses.append((scaled_by_d_model, softmax(raw / math.sqrt(d_model))))
    if mask is not None:
        polarity = Message(
            "Your mask polarity is inverted: in this course True means 'may attend' (masked_fill(~mask, ...))."
        )
        guesses.append((polarity, softmax(raw / math.sqrt(d_k), m=~mask)))
        guesses.append((polarity, softmax(raw / math.sqrt(d_k), m=~mask).masked_fill(mask, 0.0)))  # re-zeroed too
        ignored = Message("The mask was ignored: masked keys must get weight 0.")
        guesses.append((ignored, softmax(raw / math.sqrt(d_k), m=None)))
        after = Message("The mask is applied after the softmax, so rows no longer sum to 1: mask the scores first.")
        guesses.append((after, softmax(raw / math.sqrt(d_k), m=None).masked_fill(~mask, 0.0)))
    for text, w in guesses:
        if isinstance(got_w, torch.Tensor) and got_w.shape == w.shape and torch.allclose(got_w, w, atol=1e-5):
            return text
    return None


def _compare_sdpa(fn, q, k, v, mask=None, *, hidden=False, what="scaled_dot_product_attention"):
    result = call(what, fn, q, k, v, mask)
    expect_true(
        isinstance(result, tuple) and len(result) == 2,
        Message(
            "{what} should return a tuple (output, weights); you returned {type}.",
            what=what,
            type=type(result).__name__,
        ),
    )
    out, weights = result
    exp_out, exp_w = _oracle(q, k, v, mask)
    hint = "" if hidden else _sdpa_hint(q, k, v, mask, weights)
    expect_close(Message("{what}: weights", what=what), weights, exp_w, hidden=hidden, hint=hint)
    expect_close(Message("{what}: output", what=what), out, exp_out, hidden=hidden, hint=hint)


# ---------------------------------------------------------------- exercise 1: scaled_dot_product_attention


@EXERCISES.check("scaled_dot_product_attention", points=4)
def _sdpa_no_mask(fn):
    """matches softmax(QK^T/sqrt(d_k))V without a mask, q (2, 3, 5, 4), k (2, 3, 7, 4), v (2, 3, 7, 6)"""
    _compare_sdpa(fn, *_qkv(2, 3, 5, 7, 4, 6, seed=1))


@EXERCISES.check("scaled_dot_product_attention")
def _sdpa_padding_mask(fn):
    """respects a key padding mask (True = may attend), broadcast as (B, 1, 1, T_k)"""
    q, k, v = _qkv(2, 3, 5, 7, 4, 6, seed=2)
    mask = (torch.arange(7)[None, :] < torch.tensor([7, 4])[:, None])[:, None, None, :]
    _compare_sdpa(fn, q, k, v, mask)


@EXERCISES.check("scaled_dot_product_attention")
def _sdpa_causal(fn):
    """respects a causal mask (T_q = T_k = 6)"""
    q, k, v = _qkv(2, 3, 6, 6, 4, 5, seed=3)
    _compare_sdpa(fn, q, k, v, torch.ones(6, 6, dtype=torch.bool).tril())


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="works for 3-D `(B, T, d)` and 5-D inputs",
)
def _sdpa_other_ranks(fn):
    """works for 3-D (B, T, d) and 5-D inputs, with other sizes"""
    _compare_sdpa(fn, *_qkv(3, 0, 8, 5, 6, 2, seed=4), hidden=True)
    g = rng(5)
    q, k, v = (
        torch.randn(2, 3, 4, 5, 7, generator=g),
        torch.randn(2, 3, 4, 9, 7, generator=g),
        torch.randn(2, 3, 4, 9, 3, generator=g),
    )
    _compare_sdpa(fn, q, k, v, hidden=True)


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="respects any bool mask, a rectangular causal mask included",
)
def _sdpa_masks_hidden(fn):
    """respects a random mask and a rectangular causal mask"""
    q, k, v = _qkv(3, 2, 6, 9, 8, 5, seed=6)
    mask = torch.rand(3, 2, 6, 9, generator=rng(7)) < 0.6
    mask[..., 0] = True  # every query sees at least one key
    _compare_sdpa(fn, q, k, v, mask, hidden=True)
    causal = torch.ones(6, 9, dtype=torch.bool).tril(diagonal=3)
    _compare_sdpa(fn, q, k, v, causal, hidden=True)


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="gives a query whose keys are all masked zero weights and a zero output, not NaN",
)
def _sdpa_fully_masked(fn):
    """a query whose keys are all masked gets zero weights and zero output, not NaN"""
    q, k, v = _qkv(2, 0, 4, 5, 3, 6, seed=8)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[1, 2, :] = False
    result = call("scaled_dot_product_attention", fn, q, k, v, mask)
    expect_true(
        isinstance(result, tuple) and len(result) == 2, "scaled_dot_product_attention should return (output, weights)."
    )
    out, weights = result
    expect_shape("output", out, (2, 4, 6))
    expect_shape("weights", weights, (2, 4, 5))
    expect_true(
        bool(torch.isfinite(out).all() and torch.isfinite(weights).all()),
        "With a fully masked query row your output contains NaN or inf. A softmax over a row of -inf scores "
        "is NaN (fill with torch.finfo(scores.dtype).min, or turn the NaN into 0), and so is dividing by a row "
        "sum of 0 (guard the division).",
    )
    expect_true(
        bool((weights[1, 2] == 0).all() and (out[1, 2] == 0).all()),
        "A query that may attend to no key should get all-zero weights and a zero output.",
    )


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="works in float16 and bfloat16 with masks: no overflow, results in the inputs' dtype",
)
def _sdpa_half_precision(fn):
    """float16 and bfloat16 (a Colab GPU's types) with padding and causal masks: no overflow, half-precision output"""
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = _qkv(2, 2, 5, 5, 8, 4, seed=10)
        pad = (torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
        mask = pad & torch.ones(5, 5, dtype=torch.bool).tril()
        exp_out, exp_w = _oracle(q.double(), k.double(), v.double(), mask)  # float64 reference, then rounded
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
        try:
            out, weights = call(Message("scaled_dot_product_attention in {dtype}", dtype=dtype), fn, q, k, v, mask)
        except CheckFailed as err:
            if "overflow" not in str(err):  # another crash: its own message says what went wrong
                raise
            raise CheckFailed(
                Message(
                    "{error}\n  Hint: a fixed fill value such as -1e9 does not fit in float16 (largest ≈ 65504); use "
                    "torch.finfo(scores.dtype).min or float('-inf').",
                    error=str(err),
                )
            ) from None
        expect_close(Message("weights in {dtype}", dtype=dtype), weights, exp_w.to(dtype), hidden=True)
        expect_close(Message("output in {dtype}", dtype=dtype), out, exp_out.to(dtype), hidden=True)


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="gives masked keys weight 0 even when every allowed score is below -8e4 (a fill below any score)",
)
def _sdpa_very_negative_scores(fn):
    """with every allowed score below -7e3, or -8e4, masked keys still get weight 0 (the fill is below any score)"""
    q, k, v = _qkv(1, 2, 3, 6, 4, 5, seed=11)
    q, k = q.abs() * 60 + 60, -(k.abs() * 60 + 60)  # every score q·k/sqrt(d_k) is below -7e3
    mask = torch.ones(3, 6, dtype=torch.bool).tril(diagonal=2)
    _compare_sdpa(fn, q, k, v, mask, hidden=True)
    # below -8e4 (past float16's range, so -6e4 or float16's -65504 is no fill for float32): at that size one
    # rounding step of a score is about 0.01, so the rows are compared by their properties, not value by value
    q, k = q / 60 * 200, k / 60 * 200
    result = call("scaled_dot_product_attention", fn, q, k, v, mask)
    expect_true(isinstance(result, tuple) and len(result) == 2, "scaled_dot_product_attention should return a pair.")
    expect_shape("weights", result[1], (1, 2, 3, 6))
    weights = result[1].detach()
    expect_true(
        bool(torch.isfinite(weights).all()) and bool((weights[..., ~mask] == 0).all()),
        "With every allowed score below -8e4 your masked keys get weight (or the weights are not finite): fill the "
        "masked scores with a value below every possible score, torch.finfo(scores.dtype).min or -inf.",
    )
    expect_true(
        torch.allclose(weights.sum(-1), torch.ones(1, 2, 3), atol=1e-3),
        "With every allowed score below -8e4 your rows of weights do not sum to 1.",
    )


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="accepts batch-less `(T, d)` inputs and every mask that broadcasts, e.g. `(B, 1, T_k)` and `(B, 1, T_q, T_k)`",
)
def _sdpa_mask_forms(fn):
    """batch-less (T, d) inputs, a (B, 1, T_k) mask for 3-D inputs and a (B, 1, T_q, T_k) mask shared by the heads"""
    q, k, v = (t[0, 0] for t in _qkv(1, 1, 4, 6, 3, 5, seed=12))  # (T_q, d_k), (T_k, d_k), (T_k, d_v)
    _compare_sdpa(fn, q, k, v, hidden=True)
    _compare_sdpa(fn, q, k, v, torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2), hidden=True)
    q, k, v = _qkv(3, 0, 5, 7, 4, 2, seed=13)
    pad = (torch.arange(7)[None, :] < torch.tensor([7, 2, 5])[:, None])[:, None, :]  # (B, 1, T_k)
    _compare_sdpa(fn, q, k, v, pad, hidden=True)
    q, k, v = _qkv(2, 3, 5, 7, 4, 6, seed=14)
    shared = torch.rand(2, 1, 5, 7, generator=rng(15)) < 0.5  # (B, 1, T_q, T_k): one mask for every head
    shared[..., 3] = True
    _compare_sdpa(fn, q, k, v, shared, hidden=True)


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="stays finite for large scores (about 150 in float32, 25 in float16): a stable softmax",
    extremes=True,
)
def _sdpa_large_scores(fn):
    """scores up to about 150 (float32) and 25 (float16): exp of them overflows unless the softmax is stable"""
    q, k, v = _qkv(2, 2, 4, 6, 5, 3, seed=16)
    q = q * 40  # scores q·k/sqrt(d_k) reach well past 88, where exp overflows float32
    mask = torch.ones(4, 6, dtype=torch.bool).tril(diagonal=2)
    _compare_sdpa(fn, q, k, v, mask, hidden=True)
    _compare_sdpa(fn, q, k, v, hidden=True)
    q, k, v = _qkv(2, 2, 4, 6, 5, 3, seed=17)
    q = q * 8  # scores up to about 25: exp overflows float16 (largest ≈ 65504) past 11
    expect_half_precision(
        "scaled_dot_product_attention with large scores",
        lambda dtype: call(
            Message("scaled_dot_product_attention in {dtype}", dtype=dtype),
            fn,
            q.to(dtype),
            k.to(dtype),
            v.to(dtype),
            mask,
        ),
    )


def _large_products(dtype: torch.dtype, d_k: int = 64) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v whose products q·k reach about 8e4 (past float16's 65 504) while q·k/sqrt(d_k) stays near 1e4, keys
    some hundreds apart in score (far more than float16's resolution there), one key per row clearly ahead."""
    g = rng(18)
    q = 35 * (1 + 0.02 * torch.rand(2, 2, 3, d_k, generator=g))
    k = 35 * (1 + 0.05 * torch.arange(5.0)[:, None]) * torch.ones(2, 2, 5, d_k)
    v = torch.randn(2, 2, 5, 3, generator=g)
    return q.to(dtype), k.to(dtype), v.to(dtype)


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="stays finite in float16 when the products q·k pass 65 504 but the scaled scores fit: divide q by √d_k before the product",
    extremes=True,
)
def _sdpa_half_precision_large_products(fn):
    """float16 with products QKᵀ past 65 504 whose scaled scores fit: scale before the product"""
    expect_half_precision(
        "scaled_dot_product_attention with large products q·k",
        lambda dtype: call(
            Message("scaled_dot_product_attention in {dtype}", dtype=dtype), fn, *_large_products(dtype), None
        ),
        hint="no mask here: the products q·k of these inputs pass float16's 65 504 although the scaled scores do "
        "not; divide q by sqrt(d_k) before the product (q / math.sqrt(d_k)) @ k.transpose(-2, -1).",
    )


@EXERCISES.check(
    "scaled_dot_product_attention",
    hidden=True,
    requires="keeps float64 and lets gradients flow to q, k and v",
)
def _sdpa_dtype_and_grad(fn):
    """keeps float64 and lets gradients flow to q, k and v"""
    q, k, v = _qkv(2, 3, 4, 5, 6, 7, seed=9, dtype=torch.float64)
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    out, _ = call("scaled_dot_product_attention", fn, q, k, v, None)
    expect_true(
        out.dtype == torch.float64,
        Message("float64 inputs should give a float64 output, not {dtype}.", dtype=out.dtype),
    )
    call("backpropagating through your output", lambda: out.sum().backward())
    for name, t in (("q", q), ("k", k), ("v", v)):
        expect_true(
            t.grad is not None and bool(torch.isfinite(t.grad).all()) and bool(t.grad.abs().sum() > 0),
            Message(
                "No (finite, non-zero) gradient reaches {name}: avoid .detach(), .numpy() or in-place tricks.",
                name=name,
            ),
        )


@EXERCISES.reference("scaled_dot_product_attention")
def _sdpa_reference(q, k, v, mask=None):
    """The course's scaled_dot_product_attention, used while checking SelfAttention (which calls it): PyTorch's
    kernel, with the all-zero rows of fully masked queries the docstring asks for where the kernel gives NaN."""
    out = _torch_sdpa(q, k, v, attn_mask=mask)
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*k.shape[:-1], k.shape[-2])
    weights = _torch_sdpa(q, k, eye, attn_mask=mask)
    if mask is not None:
        out, weights = out.nan_to_num(0.0), weights.nan_to_num(0.0).masked_fill(~mask, 0.0)
    return out, weights


# ---------------------------------------------------------------- exercise 2: causal_mask


@EXERCISES.check("causal_mask", points=2)
def _causal_square(fn):
    """causal_mask(5) is the bool lower triangle, diagonal included"""
    expect_equal("causal_mask(5)", call("causal_mask(5)", fn, 5), torch.ones(5, 5, dtype=torch.bool).tril())


@EXERCISES.check("causal_mask")
def _causal_one(fn):
    """causal_mask(1) lets the only token see itself"""
    expect_equal("causal_mask(1)", call("causal_mask(1)", fn, 1), torch.ones(1, 1, dtype=torch.bool))


@EXERCISES.check(
    "causal_mask",
    hidden=True,
    requires="aligns `causal_mask(T_q, T_k)` bottom-right when `T_k > T_q`",
)
def _causal_rectangular(fn):
    """causal_mask(T_q, T_k) with T_k > T_q is bottom-right aligned"""
    for T_q, T_k in ((3, 7), (1, 4), (6, 6)):
        expected = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)
        what = str(Message("causal_mask({T_q}, {T_k})", T_q=T_q, T_k=T_k))
        expect_equal(what, call(what, fn, T_q, T_k), expected, hidden=True)


@EXERCISES.check(
    "causal_mask",
    hidden=True,
    requires="creates the mask on the requested `device`",
)
def _causal_device(fn):
    """creates the mask on the requested device"""
    m = call("causal_mask(4, device='meta')", fn, 4, device="meta")
    expect_true(
        isinstance(m, torch.Tensor) and m.device.type == "meta",
        "causal_mask(..., device=d) should create the mask on device d: pass device=device to the function that "
        "makes it (torch.arange, torch.ones, ...).",
    )


# ---------------------------------------------------------------- exercise 3: attention_mask_from_lengths


def _pad_oracle(lengths, T_k=None):
    rows = [torch.ones(int(n), dtype=torch.bool) for n in lengths]
    out = _pad_sequence(rows + [torch.ones(T_k or 0, dtype=torch.bool)], batch_first=True, padding_value=False)
    return out[: len(rows)]


@EXERCISES.check("attention_mask_from_lengths", points=2)
def _padding_basic(fn):
    """attention_mask_from_lengths(torch.tensor([3, 1, 4])) marks the real tokens True"""
    lengths = torch.tensor([3, 1, 4])
    got = call("attention_mask_from_lengths", fn, lengths)
    if (
        isinstance(got, torch.Tensor)
        and got.shape == _pad_oracle(lengths).shape
        and torch.equal(got, ~_pad_oracle(lengths))
    ):
        raise CheckFailed(
            Message(
                "attention_mask_from_lengths([3, 1, 4]) has the wrong values.\n  Hint: your mask polarity is inverted: "
                "in this course True means 'may attend' (a real token), False the padding."
            )
        )
    expect_equal("attention_mask_from_lengths([3, 1, 4])", got, _pad_oracle(lengths))


@EXERCISES.check(
    "attention_mask_from_lengths",
    hidden=True,
    requires="pads to an explicit `T_k`, handles a zero length, and works when B ≠ T_k",
)
def _padding_longer(fn):
    """pads to an explicit T_k, handles a zero length and B != T_k"""
    lengths = torch.tensor([0, 6, 2, 5, 1])
    expect_equal(
        "attention_mask_from_lengths(lengths, T_k=8)",
        call("attention_mask_from_lengths", fn, lengths, 8),
        _pad_oracle(lengths, 8),
        hidden=True,
    )
    lengths = torch.tensor([2, 7])
    expect_equal(
        "attention_mask_from_lengths(lengths)",
        call("attention_mask_from_lengths", fn, lengths),
        _pad_oracle(lengths),
        hidden=True,
    )


# ---------------------------------------------------------------- exercise 4: SelfAttention


def _module_oracle(module, x, mask=None):
    q = x @ module.W_q.weight.T
    k = x @ module.W_k.weight.T
    v = x @ module.W_v.weight.T
    if module.W_q.bias is not None:
        q, k, v = q + module.W_q.bias, k + module.W_k.bias, v + module.W_v.bias
    return _oracle(q, k, v, mask)


def _compare_module(cls, args, x, mask=None, *, hidden=False):
    torch.manual_seed(0)
    module = call(Message("SelfAttention{args}", args=args), cls, *args)
    for name in ("W_q", "W_k", "W_v"):
        expect_true(
            isinstance(getattr(module, name, None), torch.nn.Linear),
            Message("SelfAttention should keep its projection {name} as an nn.Linear attribute.", name=name),
        )
    with torch.no_grad():
        result = call("SelfAttention.forward", module, x, mask)
        expect_true(
            isinstance(result, tuple) and len(result) == 2, "SelfAttention.forward should return (output, weights)."
        )
        exp_out, exp_w = _module_oracle(module, x, mask)
        hint = ""
        if not hidden:  # name the cause only when the weights match a known mistake; otherwise stay generic
            q, k, v = (_torch_linear(x, W.weight, W.bias) for W in (module.W_q, module.W_k, module.W_v))
            hint = _sdpa_hint(q, k, v, mask, result[1], d_model=x.shape[-1]) or Message(
                "compare your forward with the recipe: queries from W_q, keys from W_k, values from W_v, all "
                "applied to x, then scaled dot-product attention with 1/sqrt(d_k) and the mask. If your "
                "scaled_dot_product_attention fails its own checks, fix that first."
            )
    expect_close("SelfAttention: weights", result[1], exp_w, hidden=hidden, hint=hint)
    expect_close("SelfAttention: output", result[0], exp_out, hidden=hidden)


@EXERCISES.check("SelfAttention", points=2)
def _module_basic(cls):
    """SelfAttention(d_model=8, d_k=4, d_v=6) on x (2, 5, 8) gives output (2, 5, 6) and weights (2, 5, 5)"""
    x = torch.randn(2, 5, 8, generator=rng(10))
    _compare_module(cls, (8, 4, 6), x)


@EXERCISES.check(
    "SelfAttention",
    hidden=True,
    requires="passes the mask on (`(T, T)`, `(B, 1, T)` and `(B, T, T)`), and supports `bias` and the default `d_v`",
)
def _module_masked(cls):
    """uses the mask ((T, T), (B, 1, T) and (B, T, T)), the bias option and the default d_v"""
    x = torch.randn(3, 7, 10, generator=rng(11))
    _compare_module(cls, (10, 3), x, torch.ones(7, 7, dtype=torch.bool).tril(), hidden=True)
    _compare_module(cls, (10, 5, 2, True), x, (torch.arange(7) < 4)[None, None, :].expand(3, 1, 7), hidden=True)
    full = torch.rand(3, 7, 7, generator=rng(12)) < 0.5  # a full (B, T, T) mask
    full |= torch.eye(7, dtype=torch.bool)
    _compare_module(cls, (10, 4, 6, True), x, full, hidden=True)


__all__ = ["EXERCISES", "CheckFailed"]
