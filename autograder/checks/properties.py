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
    """A dispatch mode that sees every operation of a call, and ``seen(value)``: whether every tensor in ``value``
    holds what operations the mode saw computed from ``inputs`` alone.

    What the mode keeps is about storages (memory), by value: each storage an operation it saw made or wrote, or one
    of ``inputs``' storages, with a copy of its bytes as the mode last saw them and whether they came only from the
    inputs. A tensor is seen when its storage is one of those, clean, and its bytes are still the copy (a write
    through ``.data``, a numpy view or with the mode switched off changes bytes, not what the mode saw). An operation
    fed by anything else (a tensor made while the mode was off, a numpy array, a tensor subclass) makes unclean
    everything it makes or writes. ``torch.tensor(x)`` of one number counts as a number, as Python scalars do.
    ``largest`` (the third item) is ``[numbers, shape]`` of the largest storage an operation made (a view counts
    as the storage it looks into, so only what was really allocated is counted).

    The state lives in this function's closures, not in attributes of the mode (which is reachable from the mode
    stack): switching the mode off or replacing its method leaves values unseen, which fails the check."""
    storages: dict[
        int, list
    ] = {}  # storage's data_ptr -> [the storage (kept alive), its bytes, the bytes as seen, clean]
    largest: list = [0, ()]
    aten = torch.ops.aten
    lifts = (aten.lift_fresh.default, aten.lift_fresh_copy.default)
    plain_types = (torch.Tensor, torch.nn.Parameter)
    writes: dict[Any, tuple[int, ...]] = {}  # an operator -> the positions of the arguments it writes

    def leaves(x: Any, into: list) -> list:
        if isinstance(x, (torch.Tensor, torch.UntypedStorage)):
            into.append(x)
        elif isinstance(x, (tuple, list)):
            for y in x:
                leaves(y, into)
        elif isinstance(x, dict):
            for y in x.values():
                leaves(y, into)
        return into

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

    def written_positions(func: Any) -> tuple[int, ...]:
        if func not in writes:
            schema = getattr(func, "_schema", None)
            arguments = schema.arguments if schema is not None else ()
            writes[func] = tuple(
                i for i, a in enumerate(arguments) if a.alias_info is not None and a.alias_info.is_write
            )
        return writes[func]

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in lifts:  # torch.tensor(...), torch.as_tensor(...), torch.from_numpy(...): data from outside
                clean = bool(args) and isinstance(args[0], torch.Tensor) and args[0].numel() <= 1
            else:  # every input looked at (a stale copy is found unclean now)
                clean = all([seen(x) for x in leaves((args, kwargs), [])])
            out = func(*args, **kwargs)
            mutated: list = []
            positions = written_positions(func)
            if positions:
                names = [a.name for a in func._schema.arguments]
                for i in positions:
                    leaves(args[i] if i < len(args) else kwargs.get(names[i]), mutated)
                for t in mutated:
                    note(t, clean, True)
            for t in leaves(out, []):
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
    """``(numbers, shape, seen, result)``: the largest storage any operation makes while ``fn(*args, **kwargs)`` runs
    (a view counts as the storage it looks into), whether the check saw every tensor of ``result`` computed (see
    :func:`watching`: a result computed with the watch switched off is not seen, so the measurement fails closed
    instead of passing), and the call's result, which the check compares with its oracle like any other (an answer
    that behaves otherwise when watched gains nothing). Call it through :func:`~autograder.checks.trace.call`
    (``call(what, lambda: largest_tensor(fn, ...))``): the four are the call's result, so the grading worker judges
    them from the record."""
    watch, all_seen, largest = watching([t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)])
    with watch:
        result = fn(*args, **kwargs)
    return largest[0], list(largest[1]), all_seen(result), _plain(result)
