"""Checks for chapter 11, FlashAttention in Triton (notebook ``notebooks/ch11_flash_attention_triton.ipynb``).

The answers are Triton kernels (``@triton.jit`` functions). The checks launch them with a harness of their own
(:func:`_launch_forward`, :func:`_launch_dkdv`; the kernels' signatures are the exercises' given code) and compare
what they write with independent oracles, bound here at import time: PyTorch's
``torch.nn.functional.scaled_dot_product_attention`` (the output), ``torch.logsumexp`` of the scaled scores (the
log-sum-exp) and ``torch.autograd.grad`` through PyTorch's kernel (the gradients). Without a CUDA device the kernels
run under Triton's interpreter (``TRITON_INTERPRET=1``, set here before anything imports Triton), on a GPU natively;
the inputs are small (one or two query blocks of 16, two or three key blocks) so that a check takes well under a
second on the interpreter.

Every input lives inside a NaN-filled buffer (:func:`_in_nan_padding`), padded before and after each (batch, head)'s
rows and columns: a load that is missing its mask, or that starts before the first row (a loop start not clamped at
0), reads NaN — never memory outside the buffer — so it shows up as NaN in the result, on the interpreter and on a
GPU alike. The outputs are written into padded buffers too.

The answers must be Triton kernels, exactly the objects ``@triton.jit`` makes, whose code is plain Triton (no Python
helper, nothing of the interpreter's): anything else is refused (:func:`_run`, :func:`_is_kernel`,
:func:`_kernel_problem`). Block skipping is checked by the loads the kernel makes: under the interpreter every
``tl.load`` is watched (:func:`_watching_loads`, as the chapter's ``count_hbm_traffic`` counts them) with its program
and addresses. The bytes a causal launch reads must be less than the same launch without the mask by at least the
blocks that lie wholly in the future, no program may load a block wholly out of its rows' reach, and every element the
results need must have been seen loaded, so that loads the watch does not see fail the check rather than pass it
(:func:`_expect_skipped`). On a GPU nothing is counted and that part is not checked.

This module imports neither Triton nor the chapter's solution at import time: the notebook's setup cell imports it
before the notebook installs Triton where it is missing (both are imported inside the launches).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import sys
import types
from typing import Any

import torch
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from .core import (
    CheckFailed,
    Exercises,
    call,
    default_tolerance,
    expect_close,
    expect_half_precision,
    expect_true,
    rng,
)
from .wording import Message

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
    """``x`` (B, H, T, d) copied into the middle of a NaN-filled (B, H, _PAD + T + _PAD, _PAD + d + _PAD) buffer: the
    view has x's values and strides of the buffer, and every element just before or past its rows or columns (in the
    same batch and head) is NaN."""
    B, H, T, d = x.shape
    buf = torch.full((B, H, T + 2 * _PAD, d + 2 * _PAD), math.nan, dtype=x.dtype, device=_DEVICE)
    buf[:, :, _PAD : _PAD + T, _PAD : _PAD + d] = x.to(_DEVICE)
    return buf[:, :, _PAD : _PAD + T, _PAD : _PAD + d]


def _flat_in_nan_padding(x: torch.Tensor) -> torch.Tensor:
    """``x`` (B, H, T) float32, contiguous, with _PAD NaNs before and after it in memory (the kernels index it as one
    array)."""
    buf = torch.full((x.numel() + 2 * _PAD,), math.nan, dtype=torch.float32, device=_DEVICE)
    buf[_PAD : _PAD + x.numel()] = x.reshape(-1).to(_DEVICE, torch.float32)
    return buf[_PAD : _PAD + x.numel()].view(x.shape)


def _empty_padded(B: int, H: int, T: int, d: int, dtype: torch.dtype) -> torch.Tensor:
    return _in_nan_padding(torch.full((B, H, T, d), math.nan, dtype=dtype))


def _source_of(kernel: Any) -> str:
    try:
        return inspect.getsource(getattr(kernel, "fn", kernel))
    except (OSError, TypeError):
        return ""


def _kernel_classes() -> tuple[type, ...]:
    """The classes ``@triton.jit`` makes: ``JITFunction`` (compiled for a GPU) and, under the interpreter,
    ``InterpretedFunction``."""
    import triton.runtime.interpreter as interpreter
    import triton.runtime.jit as jit

    return (jit.JITFunction, interpreter.InterpretedFunction)


def _is_kernel(kernel: Any) -> bool:
    """True for what ``@triton.jit`` makes: a ``JITFunction`` (compiled for a GPU) or, under the interpreter, an
    ``InterpretedFunction`` (Triton's front end rewrites the function's code for numpy) — of exactly that class, not a
    subclass (whose launch could run anything), with no launch hook and no method replaced on the object itself."""
    if type(kernel) not in _kernel_classes():
        return False
    own = vars(kernel)
    if own.get("pre_run_hooks") or any(callable(getattr(type(kernel), n, None)) for n in own if n != "fn"):
        return False
    if not isinstance(getattr(kernel, "fn", None), types.FunctionType):
        return False
    if type(kernel) is _kernel_classes()[1]:  # interpreted: the rewriter is Triton's, of this very function
        import triton.runtime.interpreter as interpreter

        rewriter: Any = own.get("rewriter")
        if type(rewriter) is not interpreter.FunctionRewriter or rewriter.fn is not getattr(kernel, "fn", None):
            return False
        if type(vars(interpreter.InterpretedFunction).get("rewritten_fn")) is not dict:
            return False
    return True


def _fresh_rewrite(kernel: Any) -> None:
    """Under the interpreter, forget the code Triton rewrote for the kernel (a class-wide cache the notebook can
    fill), so that the launch runs the kernel's own function, the one :func:`_kernel_problem` read."""
    if type(kernel) is _kernel_classes()[1]:
        import triton.runtime.interpreter as interpreter

        cache: Any = vars(interpreter.InterpretedFunction)["rewritten_fn"]
        cache.pop(getattr(kernel, "fn", None), None)


# What a kernel's code may name besides its own variables: what Triton compiles for a GPU. Anything else (a Python
# function, torch, numpy, the interpreter's internals) runs only under the interpreter, unseen by a GPU's compiler
# and by the checks' watch on the loads, so it is refused (:func:`_kernel_problem`).
_KERNEL_BUILTINS = frozenset(
    {"range", "min", "max", "abs", "int", "float", "bool", "len", "print", "True", "False", "NotImplementedError"}
)  # the last: the notebook's stub (`raise NotImplementedError()`) says "not filled in"


def _kernel_problem(kernel: Any, seen: set | None = None) -> Message | str:
    """Why the answer's kernel is not plain Triton code (a message; "" when it is), read from its compiled code: every global
    name it uses is a number, ``triton.language`` (``tl``), ``math`` (its constants), a few builtins, or another
    kernel that is plain Triton code itself; no attribute it takes starts with ``_``; ``triton.x`` is
    ``triton.language``; no closure."""
    import builtins
    import dis

    seen = set() if seen is None else seen
    fn = kernel.fn
    if id(fn) in seen:
        return ""
    seen.add(id(fn))
    name = getattr(fn, "__name__", "the kernel")
    if fn.__closure__:
        return Message(
            "{name} uses variables of an enclosing function (a closure): define the kernel at the top of a cell",
            name=name,
        )
    codes = [fn.__code__]
    for code in codes:
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        previous = None
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR"):
                if str(ins.argval).startswith("_"):
                    return Message(
                        "{name} uses the attribute {attribute}, which is no part of Triton's language",
                        name=name,
                        attribute=ins.argval,
                    )
                root: Any = fn.__globals__.get(previous) if previous else None
                if root is sys.modules.get("triton") and ins.argval != "language":
                    return Message(
                        "{name} uses triton.{attribute}: inside a kernel, only triton.language (tl) is compiled",
                        name=name,
                        attribute=ins.argval,
                    )
                if root is math and not isinstance(getattr(math, str(ins.argval), None), float):
                    return Message(
                        "{name} calls math.{attribute}: inside a kernel use tl's functions (tl.exp2, tl.log2, ...)",
                        name=name,
                        attribute=ins.argval,
                    )
            elif ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                return Message("{name} changes the global {variable}", name=name, variable=ins.argval)
            elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                problem = _global_problem(name, str(ins.argval), fn.__globals__, builtins, seen)
                if problem:
                    return problem
            previous = str(ins.argval) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") else None
    return ""


def _global_problem(kernel_name: str, name: str, namespace: dict, builtins: Any, seen: set) -> Message | str:
    if name in namespace:
        return _name_problem(kernel_name, name, namespace[name], seen)
    if name in _KERNEL_BUILTINS or not hasattr(builtins, name):
        return ""  # an undefined name: Triton says so when it runs the kernel
    return Message("{kernel} calls {name}, which Triton cannot compile for a GPU", kernel=kernel_name, name=name)


def _name_problem(kernel_name: str, name: str, value: Any, seen: set) -> Message | str:
    if value is None or type(value) in (bool, int, float, str):
        return ""
    if isinstance(value, types.ModuleType):
        if value.__name__ in ("triton", "math") or value.__name__.startswith("triton.language"):
            return ""
        return Message(
            "{kernel} uses the module {module}, which Triton cannot compile for a GPU",
            kernel=kernel_name,
            module=value.__name__,
        )
    if type(value).__module__.startswith("triton.language") or getattr(value, "__module__", "").startswith(
        "triton.language"
    ):
        return ""  # tl.constexpr values, tl's types and functions named directly
    if type(value) in _kernel_classes():
        if not _is_kernel(value):
            return Message("{kernel} calls {name}, which is not a plain Triton kernel", kernel=kernel_name, name=name)
        return _kernel_problem(value, seen)
    return Message(
        "{kernel} uses {name} ({type}), which Triton cannot compile for a GPU: a kernel can call only tl's functions "
        "and other @triton.jit functions",
        kernel=kernel_name,
        name=name,
        type=type(value).__name__,
    )


class TritonError(Exception):
    """Triton refused the kernel's code (a construct this version does not support, a compile error). Its argument
    is a message (:class:`~autograder.wording.Message`, shown in the reader's edition; ``str()``: the English)."""


def _run(kernel: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
    """``kernel[grid](*args, **kwargs)``, with the errors of Triton's interpreter and compiler made readable.

    Only a Triton kernel is launched (:func:`_is_kernel`). An answer that is no kernel is refused; a plain function
    (``@triton.jit`` forgotten) is first called once as what it is, with the arguments a launch would give each
    program — as the checks of the other chapters call any answer, so that what it does is seen. The notebook's stub
    (``raise NotImplementedError()``, no message) says the exercise is not filled in; an error that Triton raises
    while it runs or compiles the kernel (e.g. ``NotImplementedError: Block pointers have been removed``) is reported
    as that error, with the kernel's line (the traceback keeps the student's frame; :func:`~autograder.core.call`
    names it)."""
    if not _is_kernel(kernel):
        if callable(kernel) and not hasattr(kernel, "run"):
            with contextlib.suppress(Exception):
                kernel(*args, **kwargs)
        raise TypeError(
            Message(
                "expected a Triton kernel, a function decorated with @triton.jit in the notebook; got {type}. The "
                "checks launch it on a grid of programs, which only Triton does: write the exercise as a @triton.jit "
                "kernel (tl.load, tl.dot, tl.store), not as Python or PyTorch code.",
                type=type(kernel).__name__,
            )
        )
    problem = _kernel_problem(kernel)
    if problem:
        raise TypeError(
            Message(
                "the kernel is not plain Triton code: {problem}. The checks watch the loads of a kernel that Triton "
                "compiles for a GPU; Python code inside it runs only under the interpreter, where they cannot see it.",
                problem=problem,
            )
        )
    _fresh_rewrite(kernel)
    try:
        kernel[grid](*args, **kwargs)
    except Exception as err:
        cause: BaseException = err
        while type(cause).__name__ == "InterpreterError" and cause.__cause__ is not None:
            cause = cause.__cause__  # the interpreter wraps what the kernel's own line raised
        if isinstance(cause, NotImplementedError):
            if not str(cause):  # the stub's `raise NotImplementedError()`
                raise NotImplementedError() from None
            raise TritonError(
                Message("Triton cannot run this kernel: NotImplementedError: {error}", error=str(cause))
            ).with_traceback(cause.__traceback__) from None
        if "Raise" in str(err) and "raise NotImplementedError()" in _source_of(kernel):  # a GPU cannot compile it
            raise NotImplementedError() from None
        if type(cause).__name__ == "CompilationError":
            raise TritonError(Message("Triton cannot compile this kernel: {error}", error=str(cause))) from None
        if cause is not err:
            raise cause from None
        raise


def _watching_loads(launch: Any) -> tuple[int, list] | None:
    """Run ``launch()`` and watch every ``tl.load`` of its kernels under the interpreter: ``(bytes read, loads)``,
    each load ``(program's grid index, the addresses of its unmasked lanes, bytes per element)``; None on a GPU, where
    no interpreter runs the loads (``launch()`` runs, unwatched).

    The watch wraps the loads of Triton's interpreter (as the chapter's ``count_hbm_traffic`` does): every unmasked
    lane of every ``tl.load`` counts, as a GPU would move it."""
    from solutions.ch11_flash_attention_triton import INTERPRETING

    if not INTERPRETING:
        launch()
        return None
    import numpy as np
    from triton.runtime.interpreter import interpreter_builder as builder

    loads: list = []
    load, masked_load = builder.create_load, builder.create_masked_load

    def lanes(ptrs: Any, mask: Any) -> None:
        addresses = np.asarray(ptrs.data).reshape(-1)
        if mask is not None:
            m = np.asarray(mask if isinstance(mask, np.ndarray) else mask.data)
            addresses = addresses[np.broadcast_to(m, np.shape(ptrs.data)).reshape(-1).astype(bool)]
        size = ptrs.get_element_ty().primitive_bitwidth // 8
        loads.append((tuple(builder.grid_idx), addresses.astype(np.int64), size))

    def watched_load(ptr, *args):
        lanes(ptr, None)
        return load(ptr, *args)

    def watched_masked_load(ptrs, mask, *args):
        lanes(ptrs, mask)
        return masked_load(ptrs, mask, *args)

    builder.create_load, builder.create_masked_load = watched_load, watched_masked_load  # instance attributes
    try:
        launch()
    finally:
        del builder.create_load, builder.create_masked_load
    return sum(len(addresses) * size for _, addresses, size in loads), loads


def _loaded_rows(loads: list, t: torch.Tensor) -> dict[tuple, Any]:
    """Program's grid index -> a (B, H, T, d) bool array: the elements of ``t`` (made by :func:`_in_nan_padding`,
    the NaN around it excluded) that the program loaded."""
    import numpy as np

    B, H, T, d = t.shape
    base, size = t.untyped_storage().data_ptr(), t.element_size()
    full = (B, H, T + 2 * _PAD, d + 2 * _PAD)
    n = math.prod(full)
    out: dict[tuple, Any] = {}
    for program, addresses, _ in loads:
        offsets = addresses - base
        offsets = offsets[(offsets >= 0) & (offsets < n * size) & (offsets % size == 0)] // size
        hit = np.zeros(n, dtype=bool)
        hit[offsets] = True
        rows = hit.reshape(full)[:, :, _PAD : _PAD + T, _PAD : _PAD + d]
        out[program] = out[program] | rows if program in out else rows
    return out


def _loads_verdict(loads: list, watched: list, needed_from: int, forbidden: Any) -> tuple[int, int]:
    """``(bytes of rows a program loaded though they lie in blocks wholly outside its reach, elements the kernel
    needs that no load was seen to read)`` for the tensors ``watched``: ``forbidden(program's grid index)`` is the
    range of rows that program must not load, rows ``needed_from`` on are needed by some program (every column)."""
    import numpy as np

    future, missing = 0, 0
    for t in watched:
        per_program = _loaded_rows(loads, t)
        union = np.zeros(tuple(t.shape), dtype=bool)
        for program, rows in per_program.items():
            union |= rows
            lo, hi = forbidden(program)
            future += int(rows[:, :, lo:hi].sum()) * t.element_size()
        missing += int((~union[:, :, needed_from:]).sum())
    return future, missing


def _counted(launch: Any, watched: list, needed_from: int, forbidden: Any) -> tuple[int | None, int, int]:
    """``(bytes read or None on a GPU, bytes of rows loaded though out of reach, needed elements not seen loaded)``
    for ``launch()`` (:func:`_watching_loads`, :func:`_loads_verdict`)."""
    watch = _watching_loads(launch)
    if watch is None:
        return None, 0, 0
    read, loads = watch
    return (read, *_loads_verdict(loads, watched, needed_from, forbidden))


def _launch_forward(kernel, q, k, v, causal, block_q, block_k, count=False):
    """Run the answer's forward kernel on (q, k, v) as ``flash_attention_triton_forward`` does: (o, lse), or with
    ``count`` (o, lse, bytes read or None, bytes of key blocks loaded wholly in a program's future, needed key and
    value elements no load was seen to read)."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    q, k, v = (_in_nan_padding(t) for t in (q, k, v))
    o = _empty_padded(B, H, T_q, d_v, q.dtype)
    lse = _flat_in_nan_padding(torch.full((B, H, T_q), math.nan))
    grid = (-(-T_q // block_q), B * H)

    def launch():
        _run(
            kernel, grid, q, k, v, o, lse,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k),
            CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
        )  # fmt: skip

    if not count:
        launch()
        return o, lse

    def future_of(program):  # the key blocks after the one holding the program's last query position
        last = min((program[0] + 1) * block_q, T_q) - 1 + T_k - T_q
        return ((last // block_k + 1) * block_k if causal else T_k), T_k

    return o, lse, *_counted(launch, [k, v], 0, future_of)


def _launch_dkdv(kernel, do, q, k, v, o, lse, causal, block_q, block_k, count=False):
    """Run the answer's dK/dV kernel as ``flash_attention_triton_backward`` does: (dk, dv), or with ``count``
    (dk, dv, bytes read or None, bytes of query blocks loaded wholly before a program's keys, needed query and dO
    elements no load was seen to read)."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    D = _flat_in_nan_padding((do.float() * o.float()).sum(dim=-1))  # rowsum(dO ∘ O), as the launcher computes it
    lse = _flat_in_nan_padding(lse)
    q, k, v, do = (_in_nan_padding(t) for t in (q, k, v, do))
    dk = _empty_padded(B, H, T_k, d_k, k.dtype)
    dv = _empty_padded(B, H, T_k, d_v, v.dtype)
    grid = (-(-T_k // block_k), B * H)

    def launch():
        _run(
            kernel, grid, q, k, v, do, lse, D, dk, dv,
            *q.stride(), *k.stride(), *v.stride(), *do.stride(), *dk.stride(), *dv.stride(),
            H, T_q, T_k, d_k, d_v, 1.0 / math.sqrt(d_k),
            CAUSAL=causal, BLOCK_M=block_q, BLOCK_N=block_k, BLOCK_DK=_tile_width(d_k), BLOCK_DV=_tile_width(d_v),
        )  # fmt: skip

    if not count:
        launch()
        return dk, dv

    def before_of(program):  # the query blocks whose last query comes before the program's first key
        first_key, stop = program[0] * block_k, 0
        while causal and stop < T_q and min(stop + block_q, T_q) - 1 + T_k - T_q < first_key:
            stop = min(stop + block_q, T_q)
        return 0, stop

    needed_from = max(0, T_q - T_k) if causal else 0  # queries that see at least one key
    return dk, dv, *_counted(launch, [q, do], needed_from, before_of)


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


def _lse_hint(lse, expected: torch.Tensor) -> Message:
    """Name the base-2 log-sum-exp when the answer's equals it; else the recipe."""
    if isinstance(lse, torch.Tensor) and lse.shape == expected.shape and torch.isfinite(lse.cpu()).all():
        base2 = expected.double() / _LN2  # log2 of the same sum
        if torch.allclose(lse.detach().double().cpu(), base2, rtol=1e-4, atol=1e-4):
            return Message(
                "your lse is the log-sum-exp in base 2 (m_i + log2(l_i) with scores in base 2): multiply it by "
                "ln 2 = 0.6931471805599453 to store the natural log-sum-exp that the backward pass uses."
            )
    return Message(
        "lse is the natural log of each query's sum of exp(score): with base-2 scores, ln 2 · (m_i + log2(l_i))."
    )


_FORWARD_HINT = Message(
    "for each key block: load K and V with masks, s = dot(q, trans(k)) * qk_scale, set s to -inf where a key may not "
    "be attended to (past T_k, or in the query's future) before the max; m_new = max(m_i, rowmax(s)); rescale both "
    "l_i and acc by exp2(m_i - m_new) before adding the block's exp2(s - m_new)."
)
_CAUSAL_FORWARD_HINT = Message(
    "without CAUSAL your kernel is right, so look at the causal parts: query i sees keys j <= q_pos = i + T_k - T_q; "
    "stop the loop at hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q), so that the block holding a query block's "
    "last position is still visited, and set s to -inf at the keys in a query's future."
)
_SKIP_FORWARD_HINT = Message(
    "with CAUSAL, stop the loop at hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q): the key blocks after it lie "
    "wholly in the future of the program's queries and must not be loaded at all (masking them is not enough)."
)


def _close(got: Any, expected: torch.Tensor) -> bool:
    """``got`` equals ``expected`` within the tolerance of its dtype (what :func:`expect_close` accepts)."""
    if not (isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype):
        return False
    rtol, atol = default_tolerance(expected.dtype)
    return bool(torch.allclose(got.detach().cpu(), expected.cpu(), rtol=rtol, atol=atol))


def _launch_what(kernel, q, k, v, causal, block_q, block_k) -> Message:
    """A kernel launch's name in the checks' messages (and its identity in the grader's record)."""
    return Message(
        "{kernel} on q {q}, k {k}, v {v} ({dtype}, CAUSAL={causal}, BLOCK_M={block_m}, BLOCK_N={block_n})",
        kernel=kernel,
        q=tuple(q.shape),
        k=tuple(k.shape),
        v=tuple(v.shape),
        dtype=q.dtype,
        causal=causal,
        block_m=block_q,
        block_n=block_k,
    )


def _compare_forward(fn, q, k, v, *, causal, block_q=16, block_k=16, hidden=False, hint=_FORWARD_HINT):
    what = _launch_what("flash_attention_forward_kernel", q, k, v, causal, block_q, block_k)
    o, lse = call(what, lambda: _launch_forward(fn, q, k, v, causal, block_q, block_k))
    exp_o, exp_lse = _forward_oracle(q, k, v, causal)
    expect_close(Message("{what}: {name}", what=what, name="o"), o, exp_o.to(q.dtype), hidden=hidden, hint=hint)
    expect_close(
        Message("{what}: {name}", what=what, name="lse"),
        lse,
        exp_lse.float(),
        hidden=hidden,
        hint=_lse_hint(lse, exp_lse),
    )


def _bytes(n: int) -> Message:
    return Message("{n} byte", n=n) if n == 1 else Message("{n} bytes", n=n)


def _rows(n: int) -> Message:
    return Message("{n} row", n=n) if n == 1 else Message("{n} rows", n=n)


def _expect_skipped(what, counted, plain, skippable, rows, hint):
    """The causal launch read at least ``skippable`` bytes less than the same launch without CAUSAL, no program
    loaded a row of a block wholly out of its reach, and every row the kernel needs was seen loaded, in both launches
    (``counted`` and ``plain``: bytes read, bytes out of reach, needed elements not seen, from :func:`_counted`;
    None on a GPU, where nothing is counted and nothing is checked here). ``what``: the launch, ``hint``: what to do,
    both Messages."""
    read, future, missing = counted
    read_plain, _, missing_plain = plain
    if read is None or read_plain is None:
        return
    expect_true(
        missing == 0 and missing_plain == 0,
        Message(
            "{what}: the kernel's results do not come from loads the check saw ({n} of the input's elements that "
            "the result needs were never loaded by a tl.load the interpreter ran). The check counts the loads of a "
            "Triton kernel run by Triton's interpreter; it cannot count what it does not see.",
            what=what,
            n=missing or missing_plain,
        ),
    )
    expect_true(
        read <= read_plain - skippable,
        Message(
            "{what} loaded {read}, and {plain} in the same launch with CAUSAL=False: skipping the blocks that lie "
            "wholly in the future of a program's rows ({rows} here) saves {saved}, so at most {most} were expected. "
            "Your kernel loads blocks that it should skip.\n  {hint}",
            what=what,
            read=_bytes(read),
            plain=_bytes(read_plain),
            rows=_rows(rows),
            saved=_bytes(skippable),
            most=read_plain - skippable,
            hint=Message("hint", hint=hint),
        ),
    )
    expect_true(
        future == 0,
        Message(
            "{what}: its programs loaded {future} of blocks that lie wholly outside the reach of the program's rows. "
            "Your kernel loads blocks that it should skip.\n  {hint}",
            what=what,
            future=_bytes(future),
            hint=Message("hint", hint=hint),
        ),
    )


def _forward_skippable(q, k, v, block_q, block_k) -> tuple[int, int]:
    """(bytes, rows) of the keys and values in key blocks that start after the last query position of a program."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    rows = 0
    for start in range(0, T_q, block_q):
        last = min(start + block_q, T_q) - 1 + T_k - T_q  # the program's last query position
        rows += max(0, T_k - (last // block_k + 1) * block_k)
    return B * H * rows * (d_k + d_v) * q.element_size(), B * H * rows


def _forward_causal_and_skip(fn, q, k, v, *, block_q=16, block_k=16, hidden=False):
    """The causal launch against the oracle (the causal hint only where the same launch without CAUSAL is right),
    and its loads against those of the launch without CAUSAL."""
    plain = _launch_what("flash_attention_forward_kernel", q, k, v, False, block_q, block_k)
    o_plain, lse_plain, *counted_plain = call(
        plain, lambda: _launch_forward(fn, q, k, v, False, block_q, block_k, True)
    )
    exp_plain = _forward_oracle(q, k, v, False)
    plain_ok = _close(o_plain, exp_plain[0].to(q.dtype)) and _close(lse_plain, exp_plain[1].float())
    what = _launch_what("flash_attention_forward_kernel", q, k, v, True, block_q, block_k)
    o, lse, *counted = call(what, lambda: _launch_forward(fn, q, k, v, True, block_q, block_k, True))
    exp_o, exp_lse = _forward_oracle(q, k, v, True)
    hint = _CAUSAL_FORWARD_HINT if plain_ok else _FORWARD_HINT
    expect_close(Message("{what}: {name}", what=what, name="o"), o, exp_o.to(q.dtype), hidden=hidden, hint=hint)
    expect_close(
        Message("{what}: {name}", what=what, name="lse"),
        lse,
        exp_lse.float(),
        hidden=hidden,
        hint=_lse_hint(lse, exp_lse),
    )
    _expect_skipped(what, counted, counted_plain, *_forward_skippable(q, k, v, block_q, block_k), _SKIP_FORWARD_HINT)


# ---------------------------------------------------------------- exercise 1: the forward kernel's loop


@EXERCISES.check("flash_attention_forward_kernel", points=5)
def _forward_no_mask(fn):
    """equals softmax(QK^T/sqrt(d_k))V and its log-sum-exp: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6), 16 × 16"""
    _compare_forward(fn, *_qkv(1, 2, 20, 29, 4, 6, seed=10), causal=False)


@EXERCISES.check("flash_attention_forward_kernel")
def _forward_causal(fn):
    """causal with T_q = 20 < T_k = 35 (bottom-right aligned), 16 × 16: equals the masked attention, and the first
    query block's program loads no key or value of the last key block (the bytes its tl.load calls read are counted
    under the interpreter and compared with the same launch without CAUSAL)"""
    _forward_causal_and_skip(fn, *_qkv(2, 1, 20, 35, 4, 6, seed=11))


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
    extremes=True,
)
def _forward_very_negative_scores(fn):
    """Tried causal attention where every allowed score is below -57 000 (q > 0 and k < 0 with entries of 170 to
    260; T_q = 20, T_k = 35)."""
    _compare_forward(fn, *_exact_negative_qkv(1, 1, 20, 35, 3, seed=12), causal=True, hidden=True)


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="works for T_q > T_k and for BLOCK_M ≠ BLOCK_N, causal or not",
)
def _forward_more_queries_other_blocks(fn):
    """Tried T_q = 37 > T_k = 20 without CAUSAL with BLOCK_M = 32 and BLOCK_N = 16, and causal attention with
    T_q = T_k = 40, BLOCK_M = 16 and BLOCK_N = 32."""
    _compare_forward(fn, *_qkv(1, 1, 37, 20, 4, 6, seed=14), causal=False, block_q=32, block_k=16, hidden=True)
    _compare_forward(fn, *_qkv(1, 1, 40, 40, 8, 4, seed=15), causal=True, block_q=16, block_k=32, hidden=True)


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="works when T_k - T_q is not a multiple of the key block, and still skips the key blocks wholly in a query block's future",
)
def _forward_causal_ragged_gap(fn):
    """Tried causal attention where T_k - T_q is not a multiple of the key block: T_q = 20, T_k = 41 (a gap of 21)
    with 16 × 16 blocks, and T_q = 24, T_k = 61 (a gap of 37) with BLOCK_M = 16 and BLOCK_N = 32; the loads of each
    launch were counted too."""
    _forward_causal_and_skip(fn, *_qkv(1, 2, 20, 41, 4, 6, seed=31), hidden=True)
    _forward_causal_and_skip(fn, *_qkv(1, 1, 24, 61, 8, 4, seed=32), block_q=16, block_k=32, hidden=True)


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="visits the key block that starts at a query block's last visible key (the causal loop bound is not one short)",
)
def _forward_causal_last_key_starts_a_block(fn):
    """Tried causal attention where a query block's last visible key is the first key of a new key block: T_q = 16,
    T_k = 17 with 16 × 16 blocks (the last query sees key 16, the first of key block 1), and T_q = 20, T_k = 37 (the
    first query block's last visible key is 32, the first of key block 2); the loads of each launch were counted too."""
    _forward_causal_and_skip(fn, *_qkv(1, 2, 16, 17, 4, 6, seed=33), hidden=True)
    _forward_causal_and_skip(fn, *_qkv(1, 1, 20, 37, 4, 5, seed=34), hidden=True)


def _half_exact(*shape, seed, scale, offset=0.0):
    """float32 values that float16 holds exactly (so that both runs see the same numbers); with ``offset``,
    ``|randn| · scale + offset``."""
    x = torch.randn(*shape, generator=rng(seed)) * scale
    return (x.abs() + offset if offset else x).half().float()


@EXERCISES.check(
    "flash_attention_forward_kernel",
    hidden=True,
    requires="accumulates the running sum and the output in float32 for float16 inputs; `o` comes back in float16, `lse` in float32",
    extremes=True,
)
def _forward_half(fn):
    """Tried float16 inputs with values of about 3000 (29 keys of weight about 1, so sums beyond float16's 65504)
    against the kernel's own float32 run: o comes back in float16, lse in float32."""
    q = _half_exact(1, 1, 20, 4, seed=16, scale=0.1)
    k = _half_exact(1, 1, 29, 4, seed=17, scale=0.1)
    v = _half_exact(1, 1, 29, 6, seed=18, scale=100, offset=3000)

    def run(dtype):
        what = Message("flash_attention_forward_kernel in {dtype} (CAUSAL=False, BLOCK_M=16, BLOCK_N=16)", dtype=dtype)
        return call(what, lambda: _launch_forward(fn, q.to(dtype), k.to(dtype), v.to(dtype), False, 16, 16))

    expect_half_precision(
        "flash_attention_forward_kernel",
        run,
        float32_results=(1,),
        hint=Message(
            "keep m_i, l_i and acc in float32 (tl.zeros(..., dtype=tl.float32)); only p is cast to v's dtype for "
            "the tl.dot, and o to the output's dtype when it is stored."
        ),
    )


# ---------------------------------------------------------------- exercise 2: the dK/dV kernel's loop


def _dkdv_oracle(q, k, v, causal):
    """(do, o, lse, dk, dv): autograd through PyTorch's attention for the output gradient ``do``."""
    mask = _mask(q.shape[-2], k.shape[-2], causal)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = _torch_sdpa(qg, kg, vg, attn_mask=mask)
    do = _randn(*out.shape, seed=99, dtype=q.dtype)
    _, exp_dk, exp_dv = _grad(out, (qg, kg, vg), do)
    o, lse = _forward_oracle(q, k, v, causal)
    return do, o, lse.float(), exp_dk, exp_dv


def _compare_dkdv(fn, q, k, v, *, causal, block_q=16, block_k=16, hidden=False, hint=""):
    do, o, lse, exp_dk, exp_dv = _dkdv_oracle(q, k, v, causal)
    what = _launch_what("flash_attention_backward_dkdv_kernel", q, k, v, causal, block_q, block_k)
    dk, dv = call(what, lambda: _launch_dkdv(fn, do, q, k, v, o, lse, causal, block_q, block_k))
    expect_close(
        Message("{what}: {name}", what=what, name="dk"), dk, exp_dk, hidden=hidden, hint=hint or _BACKWARD_HINT
    )
    expect_close(
        Message("{what}: {name}", what=what, name="dv"), dv, exp_dv, hidden=hidden, hint=hint or _BACKWARD_HINT
    )


_BACKWARD_HINT = Message(
    "for each query block: load q, do, lse and D with masks; s = dot(q, trans(k)) * scale, p = exp(s - lse) (0 where "
    "a key is in the query's future); dv += dot(trans(p), do); dp = dot(do, trans(v)); ds = p * (dp - D); "
    "dk += dot(trans(ds), q); after the loop dk = dk * scale."
)
_CAUSAL_BACKWARD_HINT = Message(
    "without CAUSAL your kernel is right, so look at the causal parts: query i sees key j when j <= i + offset "
    "(offset = T_k - T_q); set p to 0 at the keys in a query's future, and start the loop at "
    "max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M, the query block that holds the first query seeing this "
    "key block (never below 0)."
)
_SKIP_BACKWARD_HINT = Message(
    "with CAUSAL, start the loop at max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M: the query blocks before "
    "it come wholly before the program's keys and must not be loaded at all (masking them is not enough)."
)


def _dkdv_skippable(q, k, v, block_q, block_k) -> tuple[int, int]:
    """(bytes, rows) of q and do in query blocks whose last query comes before a program's first key."""
    B, H, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    rows = 0
    for first_key in range(0, T_k, block_k):
        for start in range(0, T_q, block_q):
            stop = min(start + block_q, T_q)
            if stop - 1 + T_k - T_q < first_key:
                rows += stop - start
    return B * H * rows * (d_k + d_v) * q.element_size(), B * H * rows


def _dkdv_causal_and_skip(fn, q, k, v, *, block_q=16, block_k=16, hidden=False):
    """As :func:`_forward_causal_and_skip`, for the dK/dV kernel."""
    do, o, lse, exp_dk, exp_dv = _dkdv_oracle(q, k, v, False)
    plain = _launch_what("flash_attention_backward_dkdv_kernel", q, k, v, False, block_q, block_k)
    dk, dv, *counted_plain = call(plain, lambda: _launch_dkdv(fn, do, q, k, v, o, lse, False, block_q, block_k, True))
    plain_ok = _close(dk, exp_dk) and _close(dv, exp_dv)
    do, o, lse, exp_dk, exp_dv = _dkdv_oracle(q, k, v, True)
    what = _launch_what("flash_attention_backward_dkdv_kernel", q, k, v, True, block_q, block_k)
    dk, dv, *counted = call(what, lambda: _launch_dkdv(fn, do, q, k, v, o, lse, True, block_q, block_k, True))
    hint = _CAUSAL_BACKWARD_HINT if plain_ok else _BACKWARD_HINT
    expect_close(Message("{what}: {name}", what=what, name="dk"), dk, exp_dk, hidden=hidden, hint=hint)
    expect_close(Message("{what}: {name}", what=what, name="dv"), dv, exp_dv, hidden=hidden, hint=hint)
    _expect_skipped(what, counted, counted_plain, *_dkdv_skippable(q, k, v, block_q, block_k), _SKIP_BACKWARD_HINT)


@EXERCISES.check("flash_attention_backward_dkdv_kernel", points=4)
def _dkdv_no_mask(fn):
    """dk, dv equal autograd through softmax(QK^T/sqrt(d_k))V: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6)"""
    _compare_dkdv(fn, *_qkv(1, 2, 20, 29, 4, 6, seed=20), causal=False)


@EXERCISES.check("flash_attention_backward_dkdv_kernel")
def _dkdv_causal(fn):
    """causal with T_q = 20 < T_k = 35, 16 × 16: dk, dv equal autograd through the masked attention, and the last key
    block's program loads no q or do of the first query block, whose queries all come before its keys (the bytes
    its tl.load calls read are counted under the interpreter and compared with the same launch without CAUSAL)"""
    _dkdv_causal_and_skip(fn, *_qkv(2, 1, 20, 35, 4, 6, seed=21))


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="works for T_q > T_k and for BLOCK_M ≠ BLOCK_N, causal or not (a key block's first query block is not its own index)",
)
def _dkdv_more_queries_other_blocks(fn):
    """Tried T_q = 37 > T_k = 20 without CAUSAL with BLOCK_M = 16 and BLOCK_N = 32, and causal attention with
    T_q = T_k = 40, BLOCK_M = 32 and BLOCK_N = 16 (where the first query block a key block needs is not the key
    block's own index)."""
    _compare_dkdv(fn, *_qkv(1, 1, 37, 20, 4, 6, seed=22), causal=False, block_q=16, block_k=32, hidden=True)
    _compare_dkdv(fn, *_qkv(1, 1, 40, 40, 8, 4, seed=23), causal=True, block_q=32, block_k=16, hidden=True)


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="works when queries are fewer than keys by more than a block (a key block's first query block is clamped at 0)",
)
def _dkdv_many_more_keys(fn):
    """Tried causal attention with T_q = 20 and T_k = 57, 37 more keys than queries (more than two query blocks),
    with 16 × 16 blocks and again with BLOCK_M = 32, BLOCK_N = 16; the inputs had NaN just before and after their
    rows, and the loads of each launch were counted."""
    _dkdv_causal_and_skip(fn, *_qkv(1, 2, 20, 57, 4, 6, seed=33), hidden=True)
    _dkdv_causal_and_skip(fn, *_qkv(1, 1, 20, 57, 8, 4, seed=34), block_q=32, block_k=16, hidden=True)


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="returns dk and dv in float16 for float16 inputs, agreeing with float32",
)
def _dkdv_half(fn):
    """Tried float16 inputs with CAUSAL against the kernel's own float32 run: dk and dv come back in float16."""
    q, k, v = (_half_exact(1, 1, T, d, seed=24 + i, scale=1) for i, (T, d) in enumerate(((20, 4), (35, 4), (35, 6))))
    do = _half_exact(1, 1, 20, 6, seed=27, scale=1)
    o, lse = _forward_oracle(q.double(), k.double(), v.double(), True)
    o, lse = o.half().float(), lse.float()

    def run(dtype):
        what = Message(
            "flash_attention_backward_dkdv_kernel in {dtype} (CAUSAL=True, BLOCK_M=16, BLOCK_N=16)", dtype=dtype
        )
        args = (do.to(dtype), q.to(dtype), k.to(dtype), v.to(dtype), o.to(dtype), lse)
        return call(what, lambda: _launch_dkdv(fn, *args, True, 16, 16))

    expect_half_precision("flash_attention_backward_dkdv_kernel", run, hint=_HALF_DKDV_HINT)


_HALF_DKDV_HINT = Message(
    "keep dk and dv in float32 (tl.zeros(..., dtype=tl.float32)) and cast only the tl.dot operands (p, ds) to the "
    "inputs' dtype."
)


@EXERCISES.check(
    "flash_attention_backward_dkdv_kernel",
    hidden=True,
    requires="accumulates dk and dv in float32 for float16 inputs, over many query blocks",
)
def _dkdv_half_long(fn):
    """Tried float16 inputs with 2048 queries (128 query blocks of 16) and 16 keys, where the first query block's do
    is about 4096 times larger than the others', against the kernel's own float32 run."""
    g = rng(35)
    q = torch.zeros(1, 1, 2048, 4)  # every score 0: p = 1/16 at every key
    k = _half_exact(1, 1, 16, 4, seed=36, scale=1)
    v = _half_exact(1, 1, 16, 6, seed=37, scale=1)
    do = ((torch.rand(1, 1, 2048, 6, generator=g) + 0.5) / 64).half().float()
    do[:, :, :16] = 64.0  # dv is 64 after the first block; each later block adds about 1/64, under half a float16 step
    o, lse = _forward_oracle(q.double(), k.double(), v.double(), False)
    o, lse = o.half().float(), lse.float()

    def run(dtype):
        what = Message(
            "flash_attention_backward_dkdv_kernel in {dtype} on 2048 queries (CAUSAL=False, BLOCK_M=16, BLOCK_N=16)",
            dtype=dtype,
        )
        args = (do.to(dtype), q.to(dtype), k.to(dtype), v.to(dtype), o.to(dtype), lse)
        return call(what, lambda: _launch_dkdv(fn, *args, False, 16, 16))

    expect_half_precision("flash_attention_backward_dkdv_kernel (2048 queries)", run, hint=_HALF_DKDV_HINT)


__all__ = ["EXERCISES", "CheckFailed"]
