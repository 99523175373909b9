"""The answer cannot change the question: what a call hands the answer is copied before and compared after
(:func:`_inputs_state`; docs/grading-design.md, "The answer cannot change the question")."""

from __future__ import annotations

import types
from typing import Any

import torch

from ..wording import Message, Said, say, verbatim
from .device import _owner

_IN_PLACE: set[type] = set()  # the course's classes an exercise updates in place (:func:`updated_in_place`)


def updated_in_place(cls: type) -> type:
    """Declare that the answer may change objects of the course's class ``cls`` it is handed (their state is part of
    what the exercise computes, as chapter 8's ``KVCache``'s is): recorded, and put back when replaying."""
    _IN_PLACE.add(cls)
    return cls


def _course_object(value: Any) -> bool:
    """An object of the course's own classes (a ``KVCache`` the check hands the answer)."""
    mod = type(value).__module__ or ""
    return mod.split(".")[0] in ("solutions", "autograder") and hasattr(value, "__dict__")


def _updated_in_place(value: Any) -> bool:
    return _course_object(value) and type(value) in _IN_PLACE


_PLAIN_TYPES = (bool, int, float, str, type(None))


def _inputs_state(fn: Any, args: tuple, kwargs: dict) -> dict[Any, Any]:
    """label -> value of everything of the check's that a call hands to the answer: tensors among the arguments (in
    tuples, lists and dicts too), the weights of modules among them, the attributes of the course's objects (but
    those :func:`updated_in_place`), the tensors a check's own ``lambda`` closes over, the called module's
    parameters."""
    state: dict[Any, Any] = {}

    def module(label: Said, m: torch.nn.Module, buffers: bool) -> None:
        try:
            for n, p in torch.nn.Module.named_parameters(m):
                state[say("input's parameter", owner=label, p=n)] = p
            if buffers:
                for n, b in torch.nn.Module.named_buffers(m):
                    state[say("input's buffer", owner=label, p=n)] = b
        except Exception:  # a module too odd to walk: the worker's replay still judges it
            pass

    def visit(label: Said, value: Any, depth: int) -> None:
        if depth > 3 or len(state) > 4096:
            return
        if isinstance(value, torch.Tensor):
            state[label] = value
        elif type(value) in (tuple, list):
            for i, v in enumerate(value[:64]):
                visit(Message("{label}[{i}]", label=label, i=i), v, depth + 1)
        elif type(value) is dict:
            for k, v in list(value.items())[:64]:
                visit(Message("{label}[{k}]", label=label, k=repr(k)), v, depth + 1)
        elif isinstance(value, torch.nn.Module):
            module(label, value, _course_object(value) or type(value).__module__.startswith("torch."))
        elif _course_object(value) and not _updated_in_place(value):
            for k, v in list(vars(value).items())[:64]:
                if isinstance(v, _PLAIN_TYPES):
                    state[Message("{label}.{k}", label=label, k=k)] = v
                else:
                    visit(Message("{label}.{k}", label=label, k=k), v, depth + 1)

    for i, a in enumerate(args):
        visit(say("argument", i=i + 1), a, 0)
    for k, a in kwargs.items():
        visit(say("argument", i=k), a, 0)
    code = getattr(fn, "__code__", None)
    if type(fn) is types.FunctionType and code is not None and _owner(code.co_filename) == "checks":
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, torch.Tensor) or type(value) in (tuple, list, dict):
                visit(say("the check's", name=name), value, 1)
    owner = getattr(fn, "__self__", fn)
    if isinstance(owner, torch.nn.Module):
        module(say("the module called"), owner, False)
    return state


def _snapshot_inputs(state: dict[Any, Any]) -> dict[Any, Any]:
    out = {}
    for label, v in state.items():
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided or v.is_meta:
                continue
            out[label] = (v, v.detach().clone())
        else:
            out[label] = (v, v)
    return out


def _same_value(now: Any, before: Any) -> bool:
    if isinstance(before, torch.Tensor):
        if not isinstance(now, torch.Tensor) or now.shape != before.shape or now.dtype != before.dtype:
            return False
        if now.layout != torch.strided or now.is_meta:
            return False
        now = now.detach()
        if now.device != before.device:
            now = now.to(before.device)
        if now.is_floating_point() or now.is_complex():
            return bool(((now == before) | (now.isnan() & before.isnan())).all())
        return bool(torch.equal(now, before))
    return type(now) is type(before) and now == before


def _changed_inputs(snapshot: dict[Any, Any], state: dict[Any, Any]) -> list:
    """The labels of :func:`_snapshot_inputs` whose value is not what it was (the same object changed in place, or
    an attribute bound to another value)."""
    changed = []
    for label, (obj, before) in snapshot.items():
        now = state.get(label, obj)
        if not _same_value(now, before) or (isinstance(before, torch.Tensor) and not _same_value(obj, before)):
            changed.append(label)
    return changed


def _modified_message(what: Said, labels: list) -> Message:
    """The message for an answer that changed ``labels`` (messages, or names) of its inputs."""
    shown: Any = [label if isinstance(label, Message) else verbatim(label) for label in labels[:3]]
    if len(labels) > 3:
        shown = say("and more", last=shown, n=len(labels) - 3)
    return say("changed in place", what=what, inputs=shown)
