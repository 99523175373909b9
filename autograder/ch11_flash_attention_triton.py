"""Checks for chapter 11, FlashAttention in Triton (notebook ``notebooks/ch11_flash_attention_triton.ipynb``).

The answers are Triton kernels (``@triton.jit`` functions). The checks launch them with a harness of their own
(:func:`_launch_forward`, :func:`_launch_dkdv`; the kernels' signatures are the exercises' given code) and compare
what they write with independent oracles, bound here at import time: PyTorch's
``torch.nn.functional.scaled_dot_product_attention`` (the output), ``torch.logsumexp`` of the scaled scores (the
log-sum-exp) and ``torch.autograd.grad`` through PyTorch's kernel (the gradients). Without a CUDA device the kernels
run under Triton's interpreter (``TRITON_INTERPRET=1``, set here before anything imports Triton), on a GPU natively;
the inputs are small (one or two query blocks of 16, two or three key blocks) so that a check takes well under a
second on the interpreter.

Every input lives inside a NaN-filled buffer (:func:`_in_nan_padding`): a load that is missing its mask reads NaN
past the last row or column — never memory outside the buffer — so it shows up as NaN in the result, on the
interpreter and on a GPU alike. The outputs are written into padded buffers too.

This module imports neither Triton nor the chapter's solution: the notebook's setup cell imports it before the
notebook installs Triton where it is missing.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
from typing import Any

import torch
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_half_precision,
    rng,
)

if not torch.cuda.is_available():  # before Triton is imported (by the notebook, or the chapter's solution module)
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TRITON_F32_DEFAULT", "ieee")  # float32 tl.dot in float32, not TF32: float32 tolerances hold

EXERCISES = Exercises("ch11_flash_attention_triton")

_logsumexp = torch.logsumexp
_grad = torch.autograd.grad
_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
_PAD = 48  # rows and columns of NaN around every input: more than a block (16 or 32) or a tile width (16) past it
_LN2 = math.log(2.0)


# ---------------------------------------------------------------- the harness: launching the answer's kernel


def _tile_width(d: int) -> int:
    """The kernels' BLOCK_D for ``d`` columns: the next power of two, at least 16 (tl.dot's smallest tile)."""
    return max(16, 1 << (d - 1).bit_length())


def _in_nan_padding(x: torch.Tensor) -> torch.Tensor:
    """``x`` (B, H, T, d) copied into the top-left corner of a NaN-filled (B, H, T + _PAD, d + _PAD) buffer: the
    view has x's values and strides of the buffer, and every element just past its rows or columns is NaN."""
    B, H, T, d = x.shape
    buf = torch.full((B, H, T + _PAD, d + _PAD), math.nan, dtype=x.dtype, device=_DEVICE)
    buf[:, :, :T, :d] = x.to(_DEVICE)
    return buf[:, :, :T, :d]


def _flat_in_nan_padding(x: torch.Tensor) -> torch.Tensor:
    """``x`` (B, H, T) float32, contiguous, followed in memory by _PAD NaNs (the kernels index it as one array)."""
    buf = torch.full((x.numel() + _PAD,), math.nan, dtype=torch.float32, device=_DEVICE)
    buf[: x.numel()] = x.reshape(-1).to(_DEVICE, torch.float32)
    return buf[: x.numel()].view(x.shape)


def _empty_padded(B: int, H: int, T: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    return _in_nan_padding(torch.full((B, H, T, d), math.nan, dtype=dtype))


def _source_of(kernel: Any) -> str:
    try:
        return inspect.getsource(getattr(kernel, "fn", kernel))
    except (OSError, TypeError):
        return ""


def _run(kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
    """``kernel[grid](*args, **kwargs)``, with the errors of Triton's interpreter and compiler made readable.

    An answer that is no kernel (a plain function: ``@triton.jit`` forgotten) is called once as what it is, with the
    arguments a launch would give each program — as the checks of the other chapters call any answer, so that what it
    does is seen — and then refused: the grid of programs needs a kernel."""
    if not (hasattr(kernel, "run") and callable(getattr(kernel, "__getitem__", None))):
        if callable(kernel):
            with contextlib.suppress(Exception):
                kernel(*args, **kwargs)
        raise TypeError(
            f"expected a Triton kernel (a function decorated with @triton.jit), got {type(kernel).__name__}"
        )
    try:
        kernel[grid](*args, **kwargs)
    except Exception as err:
        cause: BaseException = err
        while type(cause).__name__ == "InterpreterError" and cause.__cause__ is not None:
            cause = cause.__cause__  # the interpreter wraps what the kernel's own line raised
        if isinstance(cause, NotImplementedError):
            raise NotImplementedError() from None
        if "Raise" in str(err) and "NotImplementedError" in _source_of(kernel):  # a GPU cannot compile `raise`
            raise NotImplementedError() from None
        if cause is not err:
            raise cause from None
        raise


def _launch_forward(kernel, q, k, v, causal, block_q, block_k):
    """Run the answer's forward kernel on (q, k, v) as ``flash_attention_triton_forward`` does: (o, lse)."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    q, k, v = (_in_nan_padding(t) for t in (q, k, v))
    o = _empty_padded(B, H, T_q, d_v, q.dtype)
    lse = _flat_in_nan_padding(torch.full((B, H, T_q), math.nan))
    grid = (-(-T_q // block_q), B * H)
    _run(
        kernel, grid, q, k, v, o, lse,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k),
        CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
    )  # fmt: skip
    return o, lse


def _launch_dkdv(kernel, do, q, k, v, o, lse, causal, block_q, block_k):
    """Run the answer's dK/dV kernel as ``flash_attention_triton_backward`` does: (dk, dv)."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    D = _flat_in_nan_padding((do.float() * o.float()).sum(dim=-1))  # rowsum(dO ∘ O), as the launcher computes it
    lse = _flat_in_nan_padding(lse)
    q, k, v, do = (_in_nan_padding(t) for t in (q, k, v, do))
    dk = _empty_padded(B, H, T_k, d_k, k.dtype)
    dv = _empty_padded(B, H, T_k, d_v, v.dtype)
    grid = (-(-T_k // block_k), B * H)
    _run(
        kernel, grid, q, k, v, do, lse, D, dk, dv,
        *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
        H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k),
        CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
    )  # fmt: skip
    return dk, dv


# ---------------------------------------------------------------- inputs and oracles


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=rng(seed), dtype=torch.float64).to(dtype)


def _qkv(B, H, T_q, T_k, d_k, d_v, seed, dtype=torch.float32):
    return (
        _randn(B, H, T_q, d_k, seed=seed, dtype=dtype),
        _randn(B, H, T_k, d_k, seed=seed + 100, dtype=dtype),
        _randn(B, H, T_k, d_v, seed=seed + 200, dtype=dtype),
    )


def _mask(T_q, T_k, causal):
    """chapter 3's causal mask (T_q, T_k), True = may attend, bottom-right aligned; None without one."""
    return torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q) if causal else None


def _forward_oracle(q, k, v, causal):
    """(output, lse) from PyTorch, in float64 for the log-sum-exp."""
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return _torch_sdpa(q, k, v, attn_mask=mask), _logsumexp(scores, dim=-1)


def _lse_hint(lse, expected: torch.Tensor) -> str:
    """Name the base-2 log-sum-exp when the answer's equals it; else the recipe."""
    if isinstance(lse, torch.Tensor) and lse.shape == expected.shape and torch.isfinite(lse.cpu()).all():
        base2 = expected.double() / _LN2  # log2 of the same sum
        if torch.allclose(lse.detach().double().cpu(), base2, rtol=1e-4, atol=1e-4):
            return (
                "your lse is the log-sum-exp in base 2 (m_i + log2(l_i) with scores in base 2): multiply it by "
                "ln 2 = 0.6931471805599453 to store the natural log-sum-exp that the backward pass uses."
            )
    return "lse is the natural log of each query's sum of exp(score): with base-2 scores, ln 2 · (m_i + log2(l_i))."


_FORWARD_HINT = (
    "for each key block: load K and V with masks, s = dot(q, trans(k)) * qk_scale, set s to -inf where a key may not "
    "be attended to (past T_k, or in the query's future) before the max; m_new = max(m_i, rowmax(s)); rescale both "
    "l_i and acc by exp2(m_i - m_new) before adding the block's exp2(s - m_new)."
)


def _compare_forward(fn, q, k, v, *, causal, block_q=16, block_k=16, hidden=False, hint=_FORWARD_HINT):
    what = f"flash_attention_forward_kernel on q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    what += f" ({q.dtype}, causal={causal}, BLOCK_M={block_q}, BLOCK_N={block_k})"
    o, lse = call(what, lambda: _launch_forward(fn, q, k, v, causal, block_q, block_k))
    exp_o, exp_lse = _forward_oracle(q, k, v, causal)
    expect_close(f"{what}: o", o, exp_o.to(q.dtype), hidden=hidden, hint=hint)
    expect_close(f"{what}: lse", lse, exp_lse.float(), hidden=hidden, hint=_lse_hint(lse, exp_lse))


# ---------------------------------------------------------------- exercise 1: the forward kernel's loop


@EXERCISES.check("flash_attention_forward_kernel", points=5)
def _forward_no_mask(fn):
    """equals softmax(QK^T/sqrt(d_k))V and its log-sum-exp: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6), 16 × 16"""
    _compare_forward(fn, *_qkv(1, 2, 20, 29, 4, 6, seed=10), causal=False)


@EXERCISES.check("flash_attention_forward_kernel")
def _forward_causal(fn):
    """causal with T_q = 20 < T_k = 35 (bottom-right aligned): the last key block of the first query block is skipped"""
    _compare_forward(
        fn,
        *_qkv(2, 1, 20, 35, 4, 6, seed=11),
        causal=True,
        hint="query i sees keys j <= i + T_k - T_q (q_pos); stop the loop at min(T_k, (pid_m + 1) * BLOCK_M + T_k - "
        "T_q), so that the block holding the diagonal is still visited, and mask its future keys with -inf. "
        + _FORWARD_HINT,
    )


def _exact_negative_qkv(B, H, T_q, T_k, d_v, seed):
    """q > 0 and k < 0 with integer entries in [170, 260], d_k = 4: every score is an exact number below -57 000
    (scaled by 1/2), so exp(score - m) underflows to 0 for a running max m started anywhere above the scores."""
    g = rng(seed)
    q = torch.randint(170, 261, (B, H, T_q, 4), generator=g).float()
    k = -torch.randint(170, 261, (B, H, T_k, 4), generator=g).float()
    return q, k, torch.randn(B, H, T_k, d_v, generator=g)


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="starts the running max at -inf, so that scores below -57 000 work too",
    requires_zh="让运行最大值从 -inf 开始，因此低于 -57 000 的分数也能正确处理",
)
def _forward_very_negative_scores(fn):
    """every allowed score is below -57 000: the running max must start at -inf, not at a finite number"""
    _compare_forward(fn, *_exact_negative_qkv(1, 1, 20, 35, 3, seed=12), causal=True, hidden=True)


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="works for T_q > T_k and for BLOCK_M ≠ BLOCK_N, causal or not",
    requires_zh="适用于 T_q > T_k 以及 BLOCK_M ≠ BLOCK_N 的情况，无论是否因果",
)
def _forward_more_queries_other_blocks(fn):
    """T_q = 37 > T_k = 20 (not causal) with BLOCK_M = 32, BLOCK_N = 16; causal T_q = T_k = 40 with BLOCK_M = 16,
    BLOCK_N = 32"""
    _compare_forward(fn, *_qkv(1, 1, 37, 20, 4, 6, seed=14), causal=False, block_q=32, block_k=16, hidden=True)
    _compare_forward(fn, *_qkv(1, 1, 40, 40, 8, 4, seed=15), causal=True, block_q=16, block_k=32, hidden=True)


def _half_exact(*shape, seed, scale, offset=0.0):
    """float32 values that float16 holds exactly (so that both runs see the same numbers); with ``offset``,
    ``|randn| · scale + offset``."""
    x = torch.randn(*shape, generator=rng(seed)) * scale
    return (x.abs() + offset if offset else x).half().float()


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="accumulates the running sum and the output in float32 for float16 inputs; `o` comes back in float16, `lse` in float32",
    requires_zh="对 float16 输入在 float32 中累加运行和与输出；`o` 以 float16 返回，`lse` 以 float32 返回",
)
def _forward_half(fn):
    """float16 inputs with values of about 3000: the running sum and output accumulate in float32 (29 keys of
    weight ~1 times 3000 exceed float16's 65504), o comes back in float16 and lse in float32"""
    q = _half_exact(1, 1, 20, 4, seed=16, scale=0.1)
    k = _half_exact(1, 1, 29, 4, seed=17, scale=0.1)
    v = _half_exact(1, 1, 29, 6, seed=18, scale=100, offset=3000)

    def run(dtype):
        what = f"flash_attention_forward_kernel in {dtype} (causal=False, BLOCK_M=16, BLOCK_N=16)"
        return call(what, lambda: _launch_forward(fn, q.to(dtype), k.to(dtype), v.to(dtype), False, 16, 16))

    expect_half_precision(
        "flash_attention_forward_kernel",
        run,
        float32_results=(1,),
        hint="keep m_i, l_i and acc in float32 (tl.zeros(..., dtype=tl.float32)); only p is cast to v's dtype for "
        "the tl.dot, and o to the output's dtype when it is stored.",
    )


# ---------------------------------------------------------------- exercise 2: the dK/dV kernel's loop


def _compare_dkdv(fn, q, k, v, *, causal, block_q=16, block_k=16, hidden=False, hint=""):
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = _torch_sdpa(qg, kg, vg, attn_mask=mask)
    do = _randn(*out.shape, seed=99, dtype=q.dtype)
    _, exp_dk, exp_dv = _grad(out, (qg, kg, vg), do)
    o, lse = _forward_oracle(q, k, v, causal)
    what = f"flash_attention_backward_dkdv_kernel on q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    what += f" ({q.dtype}, causal={causal}, BLOCK_M={block_q}, BLOCK_N={block_k})"
    dk, dv = call(what, lambda: _launch_dkdv(fn, do, q, k, v, o, lse.float(), causal, block_q, block_k))
    expect_close(f"{what}: dk", dk, exp_dk, hidden=hidden, hint=hint or _BACKWARD_HINT)
    expect_close(f"{what}: dv", dv, exp_dv, hidden=hidden, hint=hint or _BACKWARD_HINT)


_BACKWARD_HINT = (
    "for each query block: load q, do (masked), lse and delta; s = dot(q, trans(k)) * scale, p = exp(s - lse) (0 "
    "where a key is in the query's future); dv += dot(trans(p), do); dp = dot(do, trans(v)); ds = p * (dp - delta); "
    "dk += dot(trans(ds), q); after the loop dk = dk * scale."
)


@EXERCISES.check("flash_attention_backward_dkdv_kernel", points=4)
def _dkdv_no_mask(fn):
    """dk, dv equal autograd through softmax(QK^T/sqrt(d_k))V: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6)"""
    _compare_dkdv(fn, *_qkv(1, 2, 20, 29, 4, 6, seed=20), causal=False)


@EXERCISES.check("flash_attention_backward_dkdv_kernel")
def _dkdv_causal(fn):
    """causal with T_q = 20 < T_k = 35: key blocks whose queries all come before them skip those query blocks"""
    _compare_dkdv(
        fn,
        *_qkv(2, 1, 20, 35, 4, 6, seed=21),
        causal=True,
        hint="query i sees key j when j <= i + T_k - T_q; start the loop at the query block that holds the first query "
        "seeing this key block (max(pid_n * BLOCK_N - offset, 0) rounded down to a multiple of BLOCK_M) and set p to "
        "0 at the keys in a query's future. " + _BACKWARD_HINT,
    )


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="works for T_q > T_k and for BLOCK_M ≠ BLOCK_N, causal or not (a key block's first query block is not its own index)",
    requires_zh="适用于 T_q > T_k 以及 BLOCK_M ≠ BLOCK_N 的情况，无论是否因果（键块所需的第一个查询块不一定是它自己的序号）",
)
def _dkdv_more_queries_other_blocks(fn):
    """T_q = 37 > T_k = 20 (not causal) with BLOCK_M = 16, BLOCK_N = 32; causal T_q = T_k = 40 with BLOCK_M = 32,
    BLOCK_N = 16 (the first query block a key block needs is not the key block's own index)"""
    _compare_dkdv(fn, *_qkv(1, 1, 37, 20, 4, 6, seed=22), causal=False, block_q=16, block_k=32, hidden=True)
    _compare_dkdv(fn, *_qkv(1, 1, 40, 40, 8, 4, seed=23), causal=True, block_q=32, block_k=16, hidden=True)


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="returns dk and dv in float16 for float16 inputs, agreeing with float32",
    requires_zh="对 float16 输入返回 float16 的 dk 和 dv，与 float32 下一致",
)
def _dkdv_half(fn):
    """float16 inputs, causal: dk and dv come back in float16 and agree with the answer's own float32 run"""
    q, k, v = (_half_exact(1, 1, T, d, seed=24 + i, scale=1) for i, (T, d) in enumerate(((20, 4), (35, 4), (35, 6))))
    do = _half_exact(1, 1, 20, 6, seed=27, scale=1)
    o, lse = _forward_oracle(q.double(), k.double(), v.double(), True)
    o, lse = o.half().float(), lse.float()

    def run(dtype):
        what = f"flash_attention_backward_dkdv_kernel in {dtype} (causal=True, BLOCK_M=16, BLOCK_N=16)"
        args = (do.to(dtype), q.to(dtype), k.to(dtype), v.to(dtype), o.to(dtype), lse)
        return call(what, lambda: _launch_dkdv(fn, *args, True, 16, 16))

    expect_half_precision(
        "flash_attention_backward_dkdv_kernel",
        run,
        hint="keep dk and dv in float32 (tl.zeros(..., dtype=tl.float32)) and cast only the tl.dot operands (p, ds) "
        "to the inputs' dtype.",
    )


__all__ = ["EXERCISES", "CheckFailed"]
