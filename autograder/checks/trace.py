"""Calls into the student's code, recorded in the grading kernel and replayed in the grading worker.

:func:`call` and :func:`observe` are the only ways a check touches the answer. In the notebook they just run it;
recording (:func:`recording`, :func:`record`) they also keep, for each outermost call, what came back and what it did
to the check's own arguments; replaying (:func:`replay`) they return the recorded values instead of running anything,
so the check's inputs, oracle and comparisons are computed where the student's code never ran
(docs/grading-design.md, "The verdict"). Every check replays (tests/test_replay.py).
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

import torch

from ..wording import Message, Said, say, verbatim
from .compare import CheckFailed, _as_subclass, _plain
from .device import DeviceMismatch, _device_probe, _owner, _StrayTensors, _Undecided
from .inputs import (
    _changed_inputs,
    _inputs_state,
    _modified_message,
    _snapshot_inputs,
    _updated_in_place,
)

# The mode: "trace" a list while recording, "replay" the record being replayed; "depth" of calls into the answer;
# "leaves" the check's leaf tensors handed to the answer, whose gradients a later backward pass sets.
_RECORDER: dict[str, Any] = {"trace": None, "replay": None, "depth": 0, "leaves": []}
_MAX_ITEMS = 20_000  # values recorded per call at most, a tensor counting numel // 64 (the references use < 1,100)


class NotReplayable(Exception):
    """The check used the student's object outside :func:`call`/:func:`observe`, or the record ran out."""


_MODE_SWITCHES = frozenset({"eval", "train", "zero_grad", "requires_grad_"})


class _Opaque:
    """What a replayed check holds in place of an object of the student's (their module, their class): it can be
    passed back to :func:`call` or have attributes taken (``model.forward``), nothing else."""

    __slots__ = ("_what",)

    def __init__(self, what: Said = "the answer") -> None:
        object.__setattr__(self, "_what", what)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _MODE_SWITCHES:  # module.eval(): its effect on the module shows in the calls recorded after it
            return lambda *args, **kwargs: self
        return _Opaque(f"{object.__getattribute__(self, '_what')}.{name}")

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NotReplayable(f"{object.__getattribute__(self, '_what')} was used outside call()")

    __call__ = __bool__ = __iter__ = __len__ = __getitem__ = __setattr__ = __setitem__ = _refuse
    __add__ = __radd__ = __sub__ = __mul__ = __matmul__ = __float__ = __int__ = __index__ = _refuse
    __contains__ = __lt__ = __le__ = __gt__ = __ge__ = __enter__ = __exit__ = _refuse


def _encode(value: Any, budget: list[int]) -> Any:
    """A value as plain data that ``torch.load(weights_only=True)`` reads back (no code runs on loading)."""
    budget[0] -= 1
    if isinstance(value, torch.Tensor) and value.layout == torch.strided and value.numel() // 64 > budget[0]:
        budget[0] = -1  # more values than a record holds: its shape and dtype only
        return ("shape", [int(d) for d in value.shape], str(value.dtype).removeprefix("torch."))
    if budget[0] < 0:
        return ("opaque",)
    if value is None or type(value) in (bool, int, float, str):
        return ("v", value)
    if isinstance(value, torch.Tensor):
        t = _as_subclass(value, torch.Tensor) if type(value) is not torch.Tensor else value
        if t.layout != torch.strided:
            return ("opaque",)
        budget[0] -= t.numel() // 64
        data = torch.empty(t.shape, dtype=t.dtype) if t.is_meta else t.detach().cpu().clone()
        return ("T", data, bool(t.requires_grad), str(t.device))
    if isinstance(value, torch.Size):
        return ("size", [int(d) for d in value])
    if isinstance(value, torch.dtype):
        return ("dtype", str(value).removeprefix("torch."))
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, (tuple, list)):
        return ("tuple" if isinstance(value, tuple) else "list", [_encode(v, budget) for v in value])
    if isinstance(value, dict) and all(type(k) in (str, int) for k in value):
        return ("dict", [[k, _encode(v, budget)] for k, v in value.items()])
    if isinstance(value, torch.nn.Module):
        return _encode_module(value, budget)
    return ("opaque",)


def _encode_module(m: torch.nn.Module, budget: list[int]) -> Any:
    """A module as its parts: parameters, buffers, plain attributes, submodules (each the same way), and its class
    when that is one of ``torch.nn``'s (a student's own class is only named). Replayed as a module shell holding the
    same weights (:func:`_decode_module`): the checks read and set its weights as they do the answer's."""
    cls = type(m)
    torch_class = f"{cls.__module__}:{cls.__qualname__}" if cls.__module__.startswith("torch.nn.") else ""
    plain = {}
    for k, v in vars(m).items():
        if not k.startswith("_") and (v is None or type(v) in (bool, int, float, str) or _plain_tuple(v)):
            plain[k] = _encode(v, budget)
    return (
        "module",
        torch_class,
        cls.__name__,
        bool(m.training),
        [[k, None if p is None else _encode(p, budget)] for k, p in m._parameters.items()],
        [[k, None if b is None else _encode(b, budget)] for k, b in m._buffers.items()],
        [[k, v] for k, v in plain.items()],
        [[k, None if c is None else _encode(c, budget)] for k, c in m._modules.items()],
    )


def _plain_tuple(v: Any) -> bool:
    return type(v) is tuple and len(v) < 16 and all(x is None or type(x) in (bool, int, float, str) for x in v)


class _ReplayedModule(torch.nn.Module):
    """The shell of a student's module class in a replayed check: its weights and submodules, no forward."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotReplayable(f"the check called {getattr(self, '_student_class', 'a module')}'s forward directly")


def _decode_module(data: Any) -> torch.nn.Module:
    import importlib

    _, torch_class, name, training, params, buffers, plain, children = data
    cls: Any = _ReplayedModule
    if torch_class:
        mod_name, qual = torch_class.split(":")
        if not mod_name.startswith("torch.nn."):
            raise NotReplayable(f"{torch_class} is no torch.nn class")
        cls = importlib.import_module(mod_name)
        for part in qual.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise NotReplayable(f"{torch_class} is no module class")
    m = cls.__new__(cls)
    torch.nn.Module.__init__(m)
    if cls is _ReplayedModule:
        object.__setattr__(m, "_student_class", name)
    for k, v in plain:
        object.__setattr__(m, k, _decode(v))
    for k, v in params:
        t = None if v is None else _decode(v)
        m._parameters[k] = None if t is None else torch.nn.Parameter(t.detach(), requires_grad=t.requires_grad)
    for k, v in buffers:
        m._buffers[k] = None if v is None else _decode(v).detach()
    for k, v in children:
        m._modules[k] = None if v is None else _decode_module(v)
    object.__setattr__(m, "training", training)
    return m


def _decode(data: Any, what: Said = "the result") -> Any:
    kind = data[0]
    if kind == "v":
        return data[1]
    if kind == "T":
        t = data[1]
        if data[3] == "meta":
            t = t.to("meta")
        if data[2] and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        return t
    if kind == "shape":  # a tensor too big to record: its shape and dtype, on the meta device (no values)
        return torch.empty(data[1], dtype=getattr(torch, data[2]), device="meta")
    if kind == "size":
        return torch.Size(data[1])
    if kind == "dtype":
        return getattr(torch, data[1])
    if kind == "device":
        return torch.device(data[1])
    if kind == "tuple":
        return tuple(_decode(v, what) for v in data[1])
    if kind == "list":
        return [_decode(v, what) for v in data[1]]
    if kind == "dict":
        return {k: _decode(v, what) for k, v in data[1]}
    if kind == "module":
        return _decode_module(data)
    return _Opaque(what)


def _watch_leaves(args: tuple, kwargs: dict) -> None:
    """The check's own leaf tensors that require grad, in the order calls first receive them: a later backward pass
    (``call("backward", lambda: out.sum().backward())``) gives them gradients, which are recorded and put back."""
    leaves = _RECORDER.setdefault("leaves", [])
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf and not any(a is b for b in leaves):
            leaves.append(a)


def _effects_before(args: tuple, kwargs: dict) -> list:
    _watch_leaves(args, kwargs)
    return [(g, None if g is None else g._version) for g in (t.grad for t in _RECORDER["leaves"])]


def _effects_after(args: tuple, kwargs: dict, grads: list, budget: list[int]) -> list:
    """What the call did to the check's own objects that a replay puts back: the state of the course's objects
    :func:`updated_in_place`, the gradients of the leaf tensors it handed to the answer. (A change to any other input
    fails the call itself, :func:`_call_leaving_inputs`: the worker's inputs stay as the check made them.)"""
    items = [*args, *kwargs.values()]
    out = [[i, "state", _encode(dict(vars(a)), budget)] for i, a in enumerate(items) if _updated_in_place(a)]
    for j, leaf in enumerate(_RECORDER["leaves"]):
        g0, v0 = grads[j] if j < len(grads) else (None, None)
        g = leaf.grad
        if g is not g0 or (g is not None and g._version != v0):
            out.append([j, "grad", _encode(g, budget)])
    return out


def _apply_effects(args: tuple, kwargs: dict, effects: list) -> None:
    """Put back what the recorded call did to the check's objects (:func:`_effects_after`)."""
    items, leaves = [*args, *kwargs.values()], _RECORDER["leaves"]
    for i, kind, data in effects:
        if kind == "grad" and type(i) is int and 0 <= i < len(leaves):
            leaves[i].grad = _decode(data)
        elif kind == "state" and type(i) is int and 0 <= i < len(items) and _updated_in_place(items[i]):
            vars(items[i]).update(_decode(data))
        else:
            raise NotReplayable("the recorded effect does not fit the replayed arguments")


@contextlib.contextmanager
def _outermost():
    """True for the outermost call into the student's code (only that one is recorded or replayed)."""
    _RECORDER["depth"] += 1
    try:
        yield _RECORDER["depth"] == 1
    finally:
        _RECORDER["depth"] -= 1


def _replayed(what: Said, args: tuple, kwargs: dict) -> Any:
    """Replaying: the recorded outcome of this call (its value, or its CheckFailed raised again)."""
    state = _RECORDER["replay"]
    if state["at"] >= len(state["entries"]):
        raise NotReplayable(f"the record has no call {what!r}")
    kind, recorded_what, payload, effects = state["entries"][state["at"]]
    state["at"] += 1
    if recorded_what != str(what):  # the call's identity: its English
        raise NotReplayable(f"the record has {recorded_what!r} where the check calls {what!r}")
    _watch_leaves(args, kwargs)
    _apply_effects(args, kwargs, effects)
    if kind == "failed":  # the message as data (Message.to_json), rendered where it is shown
        raise CheckFailed(Message.from_json(payload) if isinstance(payload, dict) else str(payload))
    return _decode(payload, what)


def _recorded(what: Said, run: Callable, args: tuple, kwargs: dict) -> Any:
    """Run ``run()`` (the call into the student's code), recording its outcome when a trace is being kept."""
    trace = _RECORDER["trace"]
    if trace is None:
        return run()
    grads = _effects_before(args, kwargs)
    try:
        result = run()
    except CheckFailed as err:
        trace.append(["failed", str(what), err.message.to_json(), _effects_after(args, kwargs, grads, [_MAX_ITEMS])])
        raise
    budget = [_MAX_ITEMS]
    trace.append(["ok", str(what), _encode(result, budget), _effects_after(args, kwargs, grads, budget)])
    if budget[0] < 0:  # the rest of the check cannot be replayed: it stops here, where the replay's record ends
        raise NotReplayable(f"{what} returned more than a record holds")
    return result


def observe(what: Said, thunk: Callable[[], Any]) -> Any:
    """``thunk()``: a look at the student's object that the check needs as a value (a parameter count, weights to
    compute an oracle from, ``module.eval()``), recorded as :func:`call` is; an exception fails naming ``what``."""
    with _outermost() as outer:
        if outer and _RECORDER["replay"] is not None:
            return _replayed(what, (), {})

        def run() -> Any:
            try:
                return _plain(thunk())
            except CheckFailed:
                raise
            except Exception as exc:
                raise CheckFailed(say("raised", what=what, ename=type(exc).__name__, error=error_text(exc))) from None

        return _recorded(what, run, (), {}) if outer else run()


def replay(check: Callable, entries: list) -> tuple[str, Said]:
    """Run ``check`` again on a recorded trace, outside the kernel: ("passed" | "failed" | "unjudged", message); a
    failure's message is the check's :class:`~autograder.wording.Message`. "unjudged": the check used the object
    outside call/observe, or called something the record does not have."""
    with _mode(None, {"entries": entries, "at": 0}) as state:
        try:
            check(_Opaque())
            if state["at"] != len(entries):
                return "unjudged", "the check made fewer calls than the record holds"
            return "passed", ""
        except CheckFailed as err:
            return "failed", err.message
        except NotReplayable as err:
            return "unjudged", str(err)
        except Exception as err:
            return "unjudged", f"{type(err).__name__}: {err}"


@contextlib.contextmanager
def _mode(trace: list | None, replaying: dict | None):
    """Record into ``trace``, or replay ``replaying``, while the block runs (the mode before it is put back)."""
    saved = dict(_RECORDER)
    _RECORDER.update(trace=trace, replay=replaying, depth=0, leaves=[])
    try:
        yield trace if replaying is None else replaying
    finally:
        _RECORDER.update(saved)


def recording(trace: list) -> contextlib.AbstractContextManager:
    """Record mode while the block runs: every outermost :func:`call` / :func:`observe` appends to ``trace``."""
    return _mode(trace, None)


def record(check: Callable, obj: Any) -> tuple[str, Said, list]:
    """Run ``check`` on ``obj`` keeping the trace :func:`replay` needs: (outcome, message, trace); "unjudged" when a
    result was bigger than the record holds (the check stopped there)."""
    with recording([]) as trace:
        try:
            check(obj)
            return "passed", "", trace
        except CheckFailed as err:
            return "failed", err.message, trace
        except NotReplayable as err:
            return "unjudged", str(err), trace


def call(what: Said, fn: Callable, *args, **kwargs):
    """Call the student's ``fn``; turn an exception inside it into a CheckFailed that says what was called (and the
    student's line). Tensors returned become plain ``torch.Tensor``; a device mistake fails (``device.py``), so does
    a change to what the check handed over (``inputs.py``); recorded or replayed in those modes."""
    with _outermost() as outer:
        if outer and _RECORDER["replay"] is not None:
            return _replayed(what, args, kwargs)
        if outer:
            return _recorded(what, lambda: _call_leaving_inputs(what, fn, args, kwargs), args, kwargs)
        return _call(what, fn, args, kwargs)


def _call_leaving_inputs(what: Said, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """:func:`_call`, failing when the answer changed what the check handed it (:func:`_inputs_state`)."""
    snapshot = _snapshot_inputs(_inputs_state(fn, args, kwargs))
    result = _call(what, fn, args, kwargs)
    changed = _changed_inputs(snapshot, _inputs_state(fn, args, kwargs))
    if changed:
        raise CheckFailed(_modified_message(what, changed))
    return result


def _call(what: Said, fn: Callable, args: tuple, kwargs: dict) -> Any:
    try:
        try:
            mismatch = _device_probe(fn, args, kwargs)
            watch: Any = contextlib.nullcontext()
        except _Undecided:
            mismatch, watch = None, _StrayTensors()
        if mismatch is not None:
            raise DeviceMismatch(mismatch)
        with watch:
            result = fn(*args, **kwargs)
        result = _plain(result)
    except CheckFailed:
        raise
    except DeviceMismatch as exc:
        raise CheckFailed(say("device mismatch in", what=what, mismatch=exc.args[0])) from None
    except NotImplementedError:
        raise CheckFailed(say("not filled in", what=what)) from None
    except SystemExit as exc:
        raise CheckFailed(say("answer exited", what=what, value=repr(exc.code))) from None
    except Exception as exc:
        line = student_line(exc)
        error = Message("{error} {line}", error=error_text(exc), line=line) if line else error_text(exc)
        raise CheckFailed(say("raised", what=what, ename=type(exc).__name__, error=error)) from None
    return result


def error_text(exc: BaseException) -> Message:
    """What ``exc`` says: the message it carries where the course raised it with one (``TypeError(Message(…))``,
    rendered in the reader's edition), else its text as it is (Python's, a library's, the student's)."""
    said = exc.args[0] if len(exc.args) == 1 else None
    return said if isinstance(said, Message) else verbatim(exc)


def student_line(exc: BaseException) -> object:
    """ "(your line N: source)" for the innermost frame of ``exc``'s traceback that runs the student's code, or ""
    (while grading, the recorder puts its own reader here: ``grading/guard.py``)."""
    tb = [f for f in traceback.extract_tb(exc.__traceback__) if _owner(f.filename) == "student"]
    if not tb:
        return ""
    line = (tb[-1].line or "").strip()
    n = tb[-1].lineno
    return say("your line", n=n, line=line) if line else say("your line number", n=n)
