"""Checks for chapter 2, additive (Bahdanau) attention (notebook ``notebooks/ch02_bahdanau_attention.ipynb``).

The references are written out here from the paper's formulas (Bahdanau et al. 2014, appendix A.1.2 and
eqs. 5-6), independently of ``solutions/``: the scores with ``torch.nn.functional.linear`` and an explicit
sum over the alignment dimension, the masked softmax one row at a time over the real positions only, the
context as an explicit weighted sum. The functions are bound at import time so that a student cell that
rebinds ``torch.softmax`` does not change the reference.

Sizes are chosen so that batch B, source length S, decoder size N, alignment size A and annotation size D
all differ: code that only works when two of them coincide fails.
"""

from __future__ import annotations

import torch
from torch.nn.functional import linear as _linear

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_shape,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch02_bahdanau_attention")

_softmax = torch.softmax
_tanh = torch.tanh


# ---------------------------------------------------------------- oracles


def _score_oracle(s_prev, W, v, U_h):
    """e_ij = sum_a v_a tanh((W s_{i-1})_a + (U h_j)_a)."""
    Ws = _linear(s_prev, W)  # (B, A)
    return (v * _tanh(Ws[:, None, :] + U_h)).sum(-1)  # (B, S)


def _softmax_oracle(scores, mask):
    out = torch.zeros_like(scores)
    for b in range(scores.shape[0]):
        keep = mask[b]
        if keep.any():
            out[b, keep] = _softmax(scores[b, keep], dim=0)
    return out


def _context_oracle(alpha, h):
    return (alpha[:, :, None] * h).sum(1)


def _score_inputs(B, S, N, A, seed, dtype=torch.float32):
    g = rng(seed)
    return (
        torch.randn(B, N, generator=g, dtype=dtype),
        torch.randn(A, N, generator=g, dtype=dtype),
        torch.randn(A, generator=g, dtype=dtype),
        torch.randn(B, S, A, generator=g, dtype=dtype),
    )


# ---------------------------------------------------------------- exercise 1: additive_score


@EXERCISES.check("additive_score", points=3)
def _score_basic(fn):
    """matches v^T tanh(W s_prev + U_h) for s_prev (2, 3), W (4, 3), v (4,), U_h (2, 5, 4)"""
    args = _score_inputs(2, 5, 3, 4, seed=1)
    got = call("additive_score(s_prev, W, v, U_h)", fn, *args)
    expect_shape("additive_score(s_prev, W, v, U_h)", got, (2, 5))
    expect_close(
        "additive_score(s_prev, W, v, U_h)",
        got,
        _score_oracle(*args),
        hint="e_ij = v^T tanh(W s_{i-1} + U h_j): W s_{i-1} (one vector per sentence) is added to every source "
        "position of U_h, then tanh, then the dot product with v.",
    )


@EXERCISES.check(
    "additive_score",
    hidden=True,
    requires="works for other sizes, a single sentence and float64",
)
def _score_other_sizes(fn):
    """other sizes, one sentence, float64"""
    for B, S, N, A, dtype in ((3, 7, 6, 2, torch.float32), (1, 4, 5, 9, torch.float64), (4, 1, 2, 3, torch.float32)):
        args = _score_inputs(B, S, N, A, seed=B + S, dtype=dtype)
        expect_close(
            Message("additive_score with B={B}, S={S}, N={N}, A={A}", B=B, S=S, N=N, A=A),
            call("additive_score", fn, *args),
            _score_oracle(*args),
            hidden=True,
        )


@EXERCISES.check(
    "additive_score",
    hidden=True,
    requires="lets gradients reach `s_prev`, `W`, `v` and `U_h`",
)
def _score_grad(fn):
    """gradients reach s_prev, W, v and U_h"""
    args = [t.requires_grad_() for t in _score_inputs(2, 5, 3, 4, seed=3)]
    out = call("additive_score", fn, *args)
    call("backpropagating through your scores", lambda: out.sum().backward())
    for name, t in zip(("s_prev", "W", "v", "U_h"), args):
        expect_true(
            t.grad is not None and bool(torch.isfinite(t.grad).all()) and bool(t.grad.abs().sum() > 0),
            Message(
                "No (finite, non-zero) gradient reaches {name}: avoid .detach(), .numpy() or in-place tricks.",
                name=name,
            ),
        )


# ---------------------------------------------------------------- exercise 2: masked_softmax


def _lengths_mask(lengths, S):
    return torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]


_OVER_BATCH = Message("your softmax normalises over the batch (dim 0); it must run over the source positions (dim=-1).")


@EXERCISES.check("masked_softmax", points=3)
def _softmax_basic(fn):
    """scores (3, 6) with source lengths [6, 2, 4]: padding gets weight 0, each row sums to 1"""
    scores = torch.randn(3, 6, generator=rng(4)) * 3
    mask = _lengths_mask([6, 2, 4], 6)
    got = call("masked_softmax(scores, mask)", fn, scores, mask)
    hint = Message(
        "give the padding weight 0 and normalise each row over its real source words (True = real word), along "
        "the last axis."
    )
    rows = (~mask).any(-1)  # rows where the inverted mask still allows a position
    if isinstance(got, torch.Tensor) and got.shape == scores.shape:
        flipped = _softmax_oracle(scores[rows], ~mask[rows])
        guesses = [  # a cause is named only when the answer matches that mistake
            (
                Message("your weights are the softmax over all positions, padding included: the mask was not applied."),
                _softmax(scores, -1),
            ),
            (
                Message(
                    "you zeroed the padding after the softmax, so the rows no longer sum to 1: mask the scores before "
                    "the softmax (or renormalise)."
                ),
                _softmax(scores, -1) * mask,
            ),
        ]
        over_batch = _softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), 0) * mask
        for w in (over_batch, over_batch / over_batch.sum(-1, keepdim=True).clamp_min(1e-30)):
            guesses.append((_OVER_BATCH, w))
        if torch.allclose(got[rows].detach().nan_to_num(0.0), flipped, atol=1e-5):
            hint = Message(
                "your mask polarity is inverted: True marks a real source word (may attend), False the padding."
            )
        else:
            hint = next((t for t, w in guesses if torch.allclose(got.detach(), w, atol=1e-5)), hint)
    expect_close("masked_softmax(scores, mask)", got, _softmax_oracle(scores, mask), hint=hint)


@EXERCISES.check("masked_softmax")
def _softmax_fully_masked(fn):
    """a row with no real position gives all zeros, not NaN"""
    scores = torch.randn(2, 4, generator=rng(5))
    mask = torch.tensor([[True, True, False, False], [False, False, False, False]])
    got = call("masked_softmax(scores, mask)", fn, scores, mask)
    expect_shape("masked_softmax(scores, mask)", got, (2, 4))
    expect_true(
        bool(torch.isfinite(got).all()),
        "With a fully masked row your weights contain NaN or inf. A softmax over a row of -inf scores is NaN "
        "(fill with torch.finfo(scores.dtype).min, or turn the NaN into 0), and so is dividing by a row sum of 0 "
        "(clamp the sum, as with .clamp_min(torch.finfo(scores.dtype).tiny)).",
    )
    expect_true(bool((got[1] == 0).all()), "A row with no real source position should get all-zero weights.")


@EXERCISES.check(
    "masked_softmax",
    hidden=True,
    requires="stays finite for large scores and random masks, keeps float64 and has finite gradients",
)
def _softmax_hidden(fn):
    """large scores, random masks, float64, finite gradients"""
    scores = torch.tensor([[1e4, 1e4 - 1.0, -1e4, 5e3]])
    mask = torch.tensor([[True, True, True, False]])
    expect_close(
        "masked_softmax with scores near 1e4",
        call("masked_softmax", fn, scores, mask),
        _softmax_oracle(scores, mask),
        hidden=True,
    )
    scores = torch.randn(5, 9, generator=rng(6), dtype=torch.float64)
    mask = torch.rand(5, 9, generator=rng(7)) < 0.5
    mask[2] = False
    expect_close(
        "masked_softmax on a random mask (float64)",
        call("masked_softmax", fn, scores, mask),
        _softmax_oracle(scores, mask),
        hidden=True,
    )
    scores = scores.clone().requires_grad_()
    out = call("masked_softmax", fn, scores, mask)
    ramp = torch.arange(9.0, dtype=out.dtype)
    call("backpropagating through your weights", lambda: (out * ramp).sum().backward())
    expect_true(
        scores.grad is not None and bool(torch.isfinite(scores.grad).all()),
        "The gradient through your masked softmax is missing or contains NaN.",
    )


# ---------------------------------------------------------------- exercise 3: context_vector


@EXERCISES.check(
    "masked_softmax",
    hidden=True,
    requires="works in float16 and bfloat16 without overflow, and gives masked positions weight 0 even when every score is below -1e5",
)
def _masked_softmax_half_and_very_negative(fn):
    """float16 and bfloat16 scores (no overflow); scores all below -1e4 or -1e5 give masked positions weight 0"""
    scores = torch.randn(4, 7, generator=rng(8))
    mask = torch.rand(4, 7, generator=rng(9)) < 0.6
    mask[:, 0] = True
    expected = _softmax_oracle(scores.double(), mask)
    for dtype in (torch.float16, torch.bfloat16):
        try:
            got = call(Message("masked_softmax in {dtype}", dtype=dtype), fn, scores.to(dtype), mask)
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
        expect_close(Message("masked_softmax in {dtype}", dtype=dtype), got, expected.to(dtype), hidden=True)
    low = scores * 100 - 3e4  # every score is below -1e4
    expect_close(
        "masked_softmax of scores below -1e4",
        call("masked_softmax", fn, low, mask),
        _softmax_oracle(low, mask),
        hidden=True,
    )
    # below -1e5 (past float16's range, so -6e4 or float16's -65504 is no fill for float32): one rounding step of a
    # score is about 0.01 there, so the rows are compared by their properties, not value by value
    lower = scores * 1000 - 2e5
    got = call("masked_softmax", fn, lower, mask)
    expect_shape("masked_softmax of scores below -1e5", got, (4, 7))
    got = got.detach()
    expect_true(
        bool(torch.isfinite(got).all()) and bool((got[~mask] == 0).all()),
        "With every real score below -1e5 your padding gets weight (or the weights are not finite): fill the "
        "masked scores with a value below every possible score, torch.finfo(scores.dtype).min or -inf.",
    )
    expect_true(
        torch.allclose(got.sum(-1), torch.ones(4), atol=1e-3),
        "With every real score below -1e5 your rows of weights do not sum to 1.",
    )


@EXERCISES.check("context_vector", points=2)
def _context_basic(fn):
    """weighted sum of h (2, 5, 3) with alpha (2, 5)"""
    g = rng(8)
    alpha = _softmax(torch.randn(2, 5, generator=g), -1)
    h = torch.randn(2, 5, 3, generator=g)
    got = call("context_vector(alpha, h)", fn, alpha, h)
    expect_shape("context_vector(alpha, h)", got, (2, 3))
    expect_close(
        "context_vector(alpha, h)",
        got,
        _context_oracle(alpha, h),
        hint=(
            "your context ignores the weights (a plain sum or mean of the annotations): c_i = sum_j alpha_ij h_j."
            if isinstance(got, torch.Tensor)
            and got.shape == (2, 3)
            and any(torch.allclose(got.detach(), w, atol=1e-5) for w in (h.sum(1), h.mean(1)))
            else "c_i = sum over the source positions j (axis 1) of alpha_ij * h_j."
        ),
    )


@EXERCISES.check(
    "context_vector",
    hidden=True,
    requires="works for other sizes and float64, with zero weights on padding",
)
def _context_hidden(fn):
    """other sizes, zero weights on padding, float64"""
    g = rng(9)
    for B, S, D, dtype in ((4, 7, 6, torch.float32), (1, 3, 8, torch.float64), (3, 1, 2, torch.float32)):
        alpha = _softmax(torch.randn(B, S, generator=g, dtype=dtype), -1)
        alpha[0] = 0
        h = torch.randn(B, S, D, generator=g, dtype=dtype)
        expect_close(
            Message("context_vector with B={B}, S={S}, D={D}", B=B, S=S, D=D),
            call("context_vector", fn, alpha, h),
            _context_oracle(alpha, h),
            hidden=True,
        )


__all__ = ["EXERCISES", "CheckFailed"]
