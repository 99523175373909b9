"""Checks of properties rather than values: seeded randomness, dropout's modes, half precision, the largest tensor
a call makes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..wording import Message, Said, indented, lines, say
from .compare import CheckFailed, _plain, expect_close, expect_true
from .trace import call, observe


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def expect_seeded(what: Said, draw: Callable[[torch.Generator], Any]) -> None:
    """Randomness comes from the ``generator`` argument only: ``draw(generator)`` (which calls the student's code)
    run twice with generators seeded alike gives identical results and leaves torch's global random state as it was
    (restored either way)."""
    before = torch.random.get_rng_state()
    try:
        first = draw(torch.Generator().manual_seed(20_251_201))
        second = draw(torch.Generator().manual_seed(20_251_201))
        # what the answer did to the global state is seen in its own process (recorded while grading)
        drew = observe(
            say("global random state", what=what), lambda: not torch.equal(before, torch.random.get_rng_state())
        )
    finally:
        torch.random.set_rng_state(before)
    if drew:
        raise CheckFailed(say("drew from the global generator", what=what))
    if not _same(first, second):
        raise CheckFailed(say("not seeded alike", what=what))


def expect_dropout_modes(
    what: Said, build: Callable[[float], torch.nn.Module], forward: Callable[[torch.nn.Module], torch.Tensor]
) -> None:
    """Dropout follows the module's mode: ``build(p)`` makes the student's module with dropout ``p``, ``forward(m)``
    runs it on fixed inputs. With ``p = 0.5``, eval mode must give the output of the same weights built with
    ``p = 0``, and two calls in training mode must differ. The global random state is restored afterwards."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        module = build(0.5)
        plain = build(0.0)
        call(Message("{what}: load_state_dict", what=what), lambda: plain.load_state_dict(module.state_dict()))
        observe(Message("{what}: eval()", what=what), lambda: (module.eval(), plain.eval()) and None)
        with torch.no_grad():
            expected, first, second = forward(plain), forward(module), forward(module)
            hint = say("dropout in eval mode: hint")
            expect_close(say("dropout in eval mode", what=what), first, expected, hidden=True, hint=hint)
            expect_close(say("dropout in eval mode, again", what=what), second, expected, hidden=True, hint=hint)
            observe(Message("{what}: train()", what=what), lambda: module.train() and None)
            third, fourth = forward(module), forward(module)
    finally:
        torch.random.set_rng_state(state)
    expect_true(
        not torch.allclose(third, fourth),
        say("dropout missing", what=what),
    )


def expect_half_precision(
    what: Said,
    run: Callable[[torch.dtype], Any],
    dtype: torch.dtype = torch.float16,
    *,
    float32_results: tuple[int, ...] = (),
    hint: Said = "",
) -> None:
    """The answer works in half precision and agrees with itself in float32: ``run(d)`` calls the student's code
    with every floating input and weight in dtype ``d``. Every floating tensor of ``run(dtype)`` must have dtype
    ``dtype`` (float32 for the indices in ``float32_results``: a loss, a log-sum-exp) and match ``run(torch.float32)``
    cast to ``dtype`` within its tolerance. ``hint``: what to say when the values differ (default: the usual causes)."""
    expected, got = run(torch.float32), run(dtype)
    pairs = list(zip(*(pytree.tree_leaves(v) for v in (expected, got))))
    expect_true(len(pairs) == len(pytree.tree_leaves(expected)), say("half: another result", what=what, dtype=dtype))
    for i, (e, g) in enumerate(pairs):
        if isinstance(e, torch.Tensor) and e.is_floating_point():
            label = say("in dtype", what=what, dtype=str(dtype).removeprefix("torch."))
            label = say("result i", what=label, i=i) if len(pairs) > 1 else label
            want = torch.float32 if i in float32_results else dtype
            if isinstance(g, torch.Tensor) and g.dtype != want:
                keep = say("half: stays float32" if want == torch.float32 else "half: keep the dtype")
                wrong = say("wrong dtype", what=label, dtype=want, got=g.dtype)
                raise CheckFailed(lines(wrong, indented(say("hint", hint=keep), "  ")))
            # a float32 result of half-precision inputs is compared at the half type's tolerance too
            overflow = (
                isinstance(g, torch.Tensor) and not bool(torch.isfinite(g).all()) and bool(torch.isfinite(e).all())
            )
            why = hint or (say("half: hint") if overflow else say("half: differs from float32", dtype=dtype))
            expect_close(label, _plain(g).to(dtype), e.detach().to(dtype), hidden=True, hint=why)


UNSEEN = (
    "was computed where the check could not see it: every tensor the answer returns must come from PyTorch "
    "operations run while the check watches, fed only by the check's inputs (not computed with PyTorch's dispatch "
    "modes or dispatch keys switched off, in numpy or plain Python, nor written behind PyTorch's back through "
    "`.data` or a numpy view)"
)


def watching(inputs: list[torch.Tensor]) -> tuple[TorchDispatchMode, Callable[[Any], bool], list]:
    """``(mode, seen, largest)``: a dispatch mode that sees every operation of a call; ``seen(value)``, whether every
    tensor in ``value`` holds what operations the mode saw computed from ``inputs`` alone; and ``largest``,
    ``[numbers, shape]`` of the largest storage an operation made (a view counts as the storage it looks into).

    Kept per storage, by value: a copy of its bytes as the mode last saw them, and whether they came only from the
    inputs. A write the mode did not see (``.data``, a numpy view, the mode switched off) changes the bytes; an
    operation fed by anything else (numpy, a tensor subclass) makes unclean what it makes or writes. ``torch.tensor``
    of one number counts as a number. The state lives in closures, not in the mode (reachable from the mode stack)."""
    storages: dict[int, list] = {}  # storage's data_ptr -> [the storage (kept alive), its bytes, the bytes seen, clean]
    largest: list = [0, ()]
    aten = torch.ops.aten
    lifts = (aten.lift_fresh.default, aten.lift_fresh_copy.default)
    plain_types = (torch.Tensor, torch.nn.Parameter)
    writes: dict[Any, tuple[tuple[int, str], ...]] = {}  # an operator -> (position, name) of the arguments it writes

    def leaves(x: Any) -> list:
        return [t for t in pytree.tree_leaves(x) if isinstance(t, (torch.Tensor, torch.UntypedStorage))]

    def storage_of(t: Any) -> Any:
        if isinstance(t, torch.UntypedStorage):
            return t
        if type(t) not in plain_types or t.layout != torch.strided or t.is_meta:
            return None
        try:
            return t.untyped_storage()
        except Exception:
            return None

    def seen(t: Any) -> bool:
        if isinstance(t, torch.Tensor) and t.numel() == 0:
            return True
        st = storage_of(t)
        if st is None:
            return False
        nbytes = st.nbytes()
        if nbytes == 0:
            return isinstance(t, torch.UntypedStorage)
        entry = storages.get(st.data_ptr())
        if entry is None or not entry[3] or entry[0].nbytes() != nbytes:
            return False
        if not torch.equal(entry[1], entry[2]):
            entry[3] = False  # written while the mode did not look
        return entry[3]

    def note(t: Any, clean: bool, written: bool) -> None:
        st = storage_of(t)
        if st is None or st.nbytes() == 0:
            return
        entry = storages.get(st.data_ptr())
        if entry is None or entry[0].nbytes() != st.nbytes():
            view = torch.empty(0, dtype=torch.uint8, device=st.device).set_(st)
            storages[st.data_ptr()] = [st, view, view.clone(), clean]
            return
        entry[3] = entry[3] and clean
        if written:
            entry[2] = entry[1].clone()

    def written(func: Any) -> tuple[tuple[int, str], ...]:
        if func not in writes:
            schema = getattr(func, "_schema", None)
            arguments = schema.arguments if schema is not None else ()
            writes[func] = tuple(
                (i, a.name) for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write
            )
        return writes[func]

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in lifts:  # torch.tensor(...), torch.as_tensor(...), torch.from_numpy(...): data from outside
                clean = bool(args) and isinstance(args[0], torch.Tensor) and args[0].numel() <= 1
            else:  # every input looked at (a stale copy is found unclean now)
                clean = all([seen(x) for x in leaves((args, kwargs))])
            out = func(*args, **kwargs)
            for i, name in written(func):
                for t in leaves(args[i] if i < len(args) else kwargs.get(name)):
                    note(t, clean, True)
            for t in leaves(out):
                if isinstance(t, torch.Tensor):
                    note(t, clean, False)
                    st = storage_of(t)
                    size = max(t.element_size(), 1)
                    n = (st.nbytes() if st is not None else t.numel() * size) // size
                    if n > largest[0]:
                        largest[:] = [n, tuple(t.shape)]
            return out

    for t in inputs:
        note(t, True, True)

    def all_seen(value: Any) -> bool:
        return all(seen(t) for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor))

    return Watch(), all_seen, largest


def largest_tensor(fn: Callable, *args: Any, **kwargs: Any) -> tuple[int, list[int], bool, Any]:
    """``(numbers, shape, seen, result)``: the largest storage any operation makes while ``fn(*args, **kwargs)`` runs,
    whether every tensor of ``result`` was seen computed (:func:`watching`: else the measurement fails closed), and
    the result. Call it through ``call(what, lambda: largest_tensor(fn, ...))``: the four are the call's result."""
    watch, all_seen, largest = watching([t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)])
    with watch:
        result = fn(*args, **kwargs)
    return largest[0], list(largest[1]), all_seen(result), _plain(result)
