"""Checks of properties rather than values: seeded randomness, dropout's modes, half precision, the largest tensor
a call makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .compare import CheckFailed, _plain, expect_close, expect_true
from .trace import call, observe


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def expect_seeded(what: str, draw: Callable[[torch.Generator], Any]) -> None:
    """Randomness comes from the ``generator`` argument only.

    ``draw(generator)`` (which calls the student's code through :func:`call`) runs twice with generators seeded
    alike: the two results must be identical, and torch's global random state must be as it was (it is restored
    either way, so one answer cannot disturb the next check).
    """
    before = torch.random.get_rng_state()
    try:
        first = draw(torch.Generator().manual_seed(20_251_201))
        second = draw(torch.Generator().manual_seed(20_251_201))
        # what the answer did to the global state is seen in its own process (recorded while grading)
        drew = observe(
            f"{what}: the global random state", lambda: not torch.equal(before, torch.random.get_rng_state())
        )
    finally:
        torch.random.set_rng_state(before)
    if drew:
        raise CheckFailed(
            f"{what} drew from torch's global random generator: take every random number from the `generator` "
            "argument (torch.rand(..., generator=generator), torch.multinomial(..., generator=generator)), so that "
            "a run can be repeated and the caller's random state is left alone."
        )
    if not _same(first, second):
        raise CheckFailed(
            f"{what} gave different results for two generators seeded alike: all its randomness must come from "
            "the `generator` argument."
        )


def expect_dropout_modes(
    what: str, build: Callable[[float], torch.nn.Module], forward: Callable[[torch.nn.Module], torch.Tensor]
) -> None:
    """Dropout follows the module's mode: off in eval mode, on in training mode.

    ``build(p)`` makes the student's module with dropout probability ``p`` (through :func:`call`); ``forward(m)``
    runs it on fixed inputs. With ``p = 0.5``: in eval mode the output must equal that of the same weights built
    with ``p = 0`` (``F.dropout(x, p)`` without ``training=self.training`` fails here); in training mode two calls
    must differ (a forgotten dropout fails here). The global random state is restored afterwards.
    """
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        module = build(0.5)
        plain = build(0.0)
        call(f"{what}: load_state_dict", lambda: plain.load_state_dict(module.state_dict()))
        observe(f"{what}: eval()", lambda: (module.eval(), plain.eval()) and None)
        with torch.no_grad():
            expected, first, second = forward(plain), forward(module), forward(module)
            hint = (
                "dropout must be off in eval mode: use nn.Dropout modules (they follow .train()/.eval()), or "
                "F.dropout(x, p, training=self.training)."
            )
            expect_close(f"{what} with dropout=0.5 in eval mode", first, expected, hidden=True, hint=hint)
            expect_close(
                f"{what} with dropout=0.5 in eval mode, called again", second, expected, hidden=True, hint=hint
            )
            observe(f"{what}: train()", lambda: module.train() and None)
            third, fourth = forward(module), forward(module)
    finally:
        torch.random.set_rng_state(state)
    expect_true(
        not torch.allclose(third, fourth),
        f"{what} with dropout=0.5 in training mode gave the same output twice: the dropout is missing.",
    )


def expect_half_precision(
    what: str,
    run: Callable[[torch.dtype], Any],
    dtype: torch.dtype = torch.float16,
    *,
    float32_results: tuple[int, ...] = (),
    hint: str = "",
) -> None:
    """The answer works in half precision (the notebooks target a Colab GPU) and agrees with itself in float32.

    ``run(d)`` calls the student's code (through :func:`call`) with every floating input, and the module's weights,
    in dtype ``d``, and returns a tensor or a tuple of them. Every floating tensor of ``run(dtype)`` must have dtype
    ``dtype`` and match ``run(torch.float32)`` (cast to ``dtype``) within ``dtype``'s tolerance: a fill of ``-1e9``
    (which overflows float16), a float32 constant that promotes the result, or an overflowing intermediate fails
    here. The float32 run is the student's own, so the comparison needs no oracle; other checks compare it with one.
    Results whose index is in ``float32_results`` (a loss, a log-sum-exp) must stay float32 instead. ``hint``: what
    to say when the values differ, where the inputs point at one cause (default: the usual causes of half-precision
    trouble).
    """
    expected, got = run(torch.float32), run(dtype)
    pairs = list(zip(*(pytree.tree_leaves(v) for v in (expected, got))))
    expect_true(
        len(pairs) == len(pytree.tree_leaves(expected)), f"{what} returns something else in {dtype} than in float32."
    )
    for i, (e, g) in enumerate(pairs):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            label = f"{what} in {dtype}" + (f" (result {i})" if len(pairs) > 1 else "")
            want = torch.float32 if i in float32_results else dtype
            if isinstance(g, torch.Tensor) and g.dtype != want:
                raise CheckFailed(
                    f"{label} should have dtype {want}, yours has {g.dtype}.\n  Hint: "
                    + (
                        "this result stays float32 for half-precision inputs (compute it in float32)."
                        if want == torch.float32
                        else "keep the inputs' dtype: make new tensors with dtype=x.dtype and cast back any part "
                        "computed in float32."
                    )
                )
            # a float32 result of half-precision inputs is compared at the half type's tolerance too
            overflow = (
                isinstance(g, torch.Tensor) and not bool(torch.isfinite(g).all()) and bool(torch.isfinite(e).all())
            )
            why = hint or (_HALF_HINT if overflow else f"its {dtype} result differs from its own float32 result.")
            expect_close(label, _plain(g).to(dtype), e.detach().to(dtype), hidden=True, hint=why)


_HALF_HINT = (
    "in half precision keep every value in range (fill masked scores with torch.finfo(scores.dtype).min or -inf, "
    "not -1e9) and make new tensors in the inputs' dtype (dtype=x.dtype), so the result keeps the inputs' dtype."
)


class _LargestTensor(TorchDispatchMode):
    """While active: the largest storage (in elements) that any operation returns, with its tensor's shape. A view
    counts as the storage it looks into (an ``expand``ed tile mask as the tile, a slice of an input as the input), so
    only what was really allocated is counted."""

    def __init__(self) -> None:
        super().__init__()
        self.numel, self.shape = 0, ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                n = t.untyped_storage().nbytes() // max(t.element_size(), 1)
                if n > self.numel:
                    self.numel, self.shape = n, tuple(t.shape)
        return out


def largest_tensor(fn: Callable, *args: Any, **kwargs: Any) -> tuple[int, list[int]]:
    """``(numbers, shape)`` of the largest storage any operation makes while ``fn(*args, **kwargs)`` runs (a view
    counts as the storage it looks into). Call it through :func:`~autograder.checks.trace.call` (``call(what, lambda:
    largest_tensor(fn, ...))``): the number is the call's result, so the grading worker judges it from the record."""
    with _LargestTensor() as seen:
        fn(*args, **kwargs)
    return seen.numel, list(seen.shape)
