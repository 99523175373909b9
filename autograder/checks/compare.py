"""Comparisons inside checks, each raising :class:`CheckFailed` with "expected …, you gave …"; the one tolerance
table (:func:`default_tolerance`), the checks' own random generators (:func:`rng`) and :func:`_plain`."""

from __future__ import annotations

import textwrap
from typing import Any

import torch

from ..wording import EN, Message, Said, as_message, indented, lines, name_part, say, verbatim


class CheckFailed(AssertionError):
    """A check found a mistake: :attr:`message` (a :class:`~autograder.wording.Message`, or a plain string as its
    key; headline first, then "expected: …", "you gave: …", "Hint: …") is rendered where it is shown, in
    :attr:`edition` in the notebook; ``str(err)`` is its English."""

    def __init__(self, message: Said = "", edition: str = EN) -> None:  # no message: the kernel form's raise
        self.message: Message = as_message(message)
        self.edition = edition
        super().__init__(str(self.message))

    def render(self, edition: str = EN) -> str:
        return self.message.render(edition)

    def _render_traceback_(self) -> list[str]:
        """IPython shows these lines instead of a traceback: the student sees the message, not the checks' frames."""
        return [f"CheckFailed: {self.render(self.edition)}"]


def _fmt(t: Any, hidden: bool) -> Message:
    if hidden:
        return say("hidden value")
    if isinstance(t, torch.Tensor):
        with torch.no_grad():
            return verbatim(textwrap.indent(repr(t.detach().cpu()), "    ").lstrip())
    return verbatim(repr(t))


def _shown(expected: Any, got: Any, hidden: bool, by: str = "  ") -> list[Message]:
    """The "expected: …" and "you gave: …" lines."""
    return [
        indented(say("expected", value=_fmt(expected, hidden)), by),
        indented(say("you gave", value=_fmt(got, hidden)), by),
    ]


def _hint(hint: Said) -> Message | None:
    return indented(say("hint", hint=as_message(hint)), "  ") if hint else None


_as_subclass = torch.Tensor.as_subclass  # bound at import: a student's tensor subclass cannot override it


def _plain(value: Any) -> Any:
    """Tensor subclasses (which could override comparisons) become plain tensors sharing data and autograd graph."""
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
        return _as_subclass(value, torch.Tensor)
    if isinstance(value, tuple):  # subclasses of tuple and list too: they become plain ones
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def rng(seed: int) -> torch.Generator:
    """A new CPU ``torch.Generator`` seeded with ``seed``: the checks draw their inputs from their own generators,
    so the inputs do not depend on, or change, the global random state the answer's code may use."""
    return torch.Generator().manual_seed(seed)


def expect_true(cond: bool, message: Said) -> None:
    if not cond:
        raise CheckFailed(message)


def expect_shape(what: Said, got: Any, shape: tuple[int, ...]) -> None:
    what = as_message(what)
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(say("not a tensor", what=what, shape=tuple(shape), type=type(got).__name__))
    if tuple(got.shape) != tuple(shape):
        raise CheckFailed(say("wrong shape", what=what, shape=tuple(shape), got=tuple(got.shape)))


def expect_equal(what: Said, got: torch.Tensor, expected: torch.Tensor, *, hidden: bool = False) -> None:
    """Exact equality, with dtype and shape (for masks and integer outputs)."""
    what = as_message(what)
    expect_shape(what, got, tuple(expected.shape))
    if got.dtype != expected.dtype:
        raise CheckFailed(say("wrong dtype", what=what, dtype=expected.dtype, got=got.dtype))
    if not torch.equal(got.cpu(), expected.cpu()):
        raise CheckFailed(lines(say("wrong values", what=what), *_shown(expected, got, hidden)))


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) by dtype: fp64 tight, fp32 at single precision, half types loose."""
    return {
        torch.float64: (1e-10, 1e-12),
        torch.float32: (1e-5, 1e-5),
        torch.float16: (1e-2, 1e-2),
        torch.bfloat16: (2e-2, 2e-2),
    }.get(dtype, (1e-5, 1e-5))


def expect_close(what: Said, got: Any, expected: torch.Tensor, *, hidden: bool = False, hint: Said = "") -> None:
    """Shape, dtype and values within the dtype's tolerance; the message gives the largest difference."""
    what = as_message(what)
    expect_shape(what, got, tuple(expected.shape))
    if got.dtype != expected.dtype:
        raise CheckFailed(say("wrong dtype of inputs", what=what, dtype=expected.dtype, got=got.dtype))
    got_c, exp_c = got.detach().cpu(), expected.detach().cpu()
    if not torch.isfinite(got_c).all() and torch.isfinite(exp_c).all():
        raise CheckFailed(
            lines(
                say("not finite", what=what),
                None if hidden else indented(say("you gave", value=_fmt(got_c, hidden)), "  "),
                _hint(hint),
            )
        )
    rtol, atol = default_tolerance(expected.dtype)
    if not torch.allclose(got_c, exp_c, rtol=rtol, atol=atol):
        diff = (got_c - exp_c).abs()
        worst = diff.max().item()
        shown: list[Message] = []
        if not hidden:
            if exp_c.numel() <= 24:
                shown = _shown(exp_c, got_c, False)
            else:  # show the row that holds the largest difference
                idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
                row = "[" + ", ".join(map(str, idx[:-1])) + ", :]" if len(idx) > 1 else "[:]"
                label = Message("{name}{index}", name=name_part(what), index=row)  # in the reader's edition
                shown = [indented(say("largest difference", row=label), "  ")]
                shown += _shown(exp_c[idx[:-1]], got_c[idx[:-1]], False, "    ")
        differs = say("differs", what=what, worst=f"{worst:.3g}", atol=f"{atol:g}")
        raise CheckFailed(lines(differs, _hint(hint), *shown))
