"""Device mistakes caught on a CPU-only machine: would this call fail on a GPU?

PyTorch decides first (:func:`_device_probe`, a fake-GPU run); where it cannot, tensors made without ``device=`` are
watched during the real call (:class:`_StrayTensors`). Either way only a tensor made by the student's own code is
blamed (:func:`_made_by_student`).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import linecache
import logging
import os
import sys
import sysconfig
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._device import DeviceContext

from ..wording import Message, say

# Factory functions that put their result on the default device (the CPU) unless given ``device=``.
_FACTORIES = {
    getattr(torch, name): f"torch.{name}"
    for name in (
        "arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint", "randperm", "tensor", "as_tensor",
        "eye", "linspace", "logspace", "tril_indices", "triu_indices", "bernoulli_",
    )
    if hasattr(torch, name)
}  # fmt: skip
_MOVES = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.type_as, torch.Tensor.new_tensor}


def _is_device_mismatch(error: RuntimeError) -> bool:
    """Whether PyTorch's fake-tensor device rule failed an op. torch 2.12 and later raise a subclass for it
    (``FakeTensorDeviceMismatchError``); earlier releases (torch 2.11, Colab's since 2026-08) a plain RuntimeError whose
    message has said the same words since torch 2.0. A private name, so it is looked up, never imported."""
    import torch._subclasses.fake_tensor as fake_tensor

    subclass = getattr(fake_tensor, "FakeTensorDeviceMismatchError", None)
    if subclass is not None and isinstance(error, subclass):
        return True
    return "Unhandled FakeTensor Device Propagation" in str(error)


class DeviceMismatch(RuntimeError):
    """A tensor the answer made without ``device=`` met a tensor on the inputs' device (it would fail on a GPU)."""


def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.realpath(locations[0]) + os.sep if locations else "\0"


_CHECKS_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep  # autograder/
_COURSE_DIR = _package_dir("solutions")
_LIBRARY_DIRS = tuple(
    {
        os.path.realpath(p) + os.sep
        for p in (
            os.path.dirname(torch.__file__),
            os.path.dirname(os.__file__),
            *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        )
    }
)
_REALPATHS: dict[str, str] = {}


def _owner(filename: str) -> str:
    """Whose code a frame runs, from its ``co_filename``: "checks" (``autograder``), "course" (``solutions``),
    "library" (torch, the standard library, site-packages) or else "student" (a notebook cell, a catalogue entry)."""
    if filename.startswith("<"):
        return "library" if filename.startswith(("<frozen", "<string>")) else "student"
    path = _REALPATHS.get(filename)
    if path is None:
        path = _REALPATHS[filename] = os.path.realpath(filename)
    if path.startswith(_CHECKS_DIR):
        return "checks"
    if path.startswith(_COURSE_DIR):
        return "course"
    return "library" if path.startswith(_LIBRARY_DIRS) else "student"


def _made_by_student(frame: Any) -> tuple[str, int] | None:
    """``(file, line)`` of the student's frame that asked for a tensor made in ``frame``, or None when it is not the
    student's doing: made inside torch's Python helpers, or by the course's library called from the checks."""
    first = True
    for _ in range(200):
        if frame is None:
            return None
        owner = _owner(frame.f_code.co_filename)
        if owner == "student":
            return frame.f_code.co_filename, frame.f_lineno
        if owner == "checks" or (owner == "library" and first):
            return None
        first = first and owner == "library"
        frame = frame.f_back
    return None


def _caller_frame() -> Any:
    """The innermost frame outside this module and torch's function-mode machinery."""
    frame: Any = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename == __file__ or frame.f_code.co_filename.startswith(_TORCH_OVERRIDES)
    ):
        frame = frame.f_back
    return frame


_TORCH_OVERRIDES = tuple(
    os.path.join(os.path.dirname(torch.__file__), name) for name in ("overrides.py", "utils/_device.py")
)


def _device_message(made_by: str, where: tuple[str, int] | None, op: str) -> Message:
    if where is None:
        return say("device mismatch", made_by=made_by, op=op)
    text = linecache.getline(where[0], where[1]).strip()
    return say("device mismatch at line", n=where[1], source=f" ({text})" if text else "", made_by=made_by, op=op)


class _Origins(TorchFunctionMode):
    """A function mode that keeps, for each tensor it marks, the factory that made it and the student's line that
    asked for it (``origins``: id -> (tensor, factory, where); strong references, so ids are not reused)."""

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[int, tuple[torch.Tensor, str, tuple[str, int] | None]] = {}

    def origin(self, values: Any) -> tuple[str, tuple[str, int] | None] | None:
        """The origin of the first marked tensor among ``values`` (nested), or None. Only tensors are asked for their
        ``id``: under torch.compile (flex_attention's eager path on torch 2.11) Dynamo traces this mode, and
        ``id()`` of another leaf (a function, a BlockMask) is unsupported there."""
        tensors = [t for t in pytree.tree_leaves(values) if isinstance(t, torch.Tensor)]
        return next((self.origins[id(t)][1:] for t in tensors if id(t) in self.origins), None)

    def mark(self, out: Any, origin: tuple[str, tuple[str, int] | None], keep: Callable[[torch.Tensor], bool]) -> None:
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and keep(t):
                self.origins[id(t)] = (t, *origin)


class _StrayTensors(_Origins):
    """The fallback, for calls the fake-GPU run cannot decide (``.item()``): tensors of at least one dimension that
    a factory made without ``device=`` at the student's request, and what is computed from them alone, are stray;
    one meeting any other tensor raises :class:`DeviceMismatch`. A move (``.to(x.device)``, ``.type_as``, ``.cuda``,
    ``new_tensor``) makes its result not stray; zero-dimensional tensors mix with GPU tensors, as in PyTorch."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        origin = self.origin((args, kwargs))
        moved = func in _MOVES and (len(args) > 1 or "device" in kwargs or func is not torch.Tensor.to)
        indexing = func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and not (
            args and id(args[0]) in self.origins
        )  # CPU index tensors may index a GPU tensor
        if origin is not None and func not in _MOVES and not indexing:
            flat = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            other = next((t for t in flat if id(t) not in self.origins and (t.ndim > 0 or t.requires_grad)), None)
            if other is not None:
                raise DeviceMismatch(_device_message(origin[0], origin[1], getattr(func, "__name__", str(func))))
        out = func(*args, **kwargs)
        if moved:
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.origins.pop(id(t), None)
        elif func in _FACTORIES and kwargs.get("device") is None:
            if not (func in (torch.tensor, torch.as_tensor) and args and isinstance(args[0], torch.Tensor)):
                where = _made_by_student(_caller_frame())
                if where is not None:
                    self.mark(out, (_FACTORIES[func], where), lambda t: t.ndim > 0)
        elif origin is not None:
            self.mark(out, origin, lambda t: t.ndim > 0)
        return out


class _Undecided(Exception):
    """The fake-GPU run could not decide (an op without a fake kernel, code that reads values)."""


class _FakeGPUOrigins(_Origins):
    """Inside :func:`_device_probe`'s run: who asked for each tensor made on the default device (the CPU's stand-in);
    when PyTorch's device rule fails an op, the blame goes to that student's line (or the run is undecided)."""

    def __init__(self, gpu: torch.device) -> None:
        super().__init__()
        self.gpu = gpu

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except RuntimeError as error:
            if isinstance(error, DeviceMismatch) or not _is_device_mismatch(error):
                raise
            blamed = [self.origins[id(t)][1:] for t in pytree.tree_leaves((args, kwargs)) if id(t) in self.origins]
            made_by, where = next(((m, w) for m, w in blamed if w is not None), ("", None))
            if where is None:  # made by the course's own code, or not traceable: not the student's
                raise _Undecided() from None
            raise DeviceMismatch(_device_message(made_by, where, getattr(func, "__name__", str(func)))) from None
        if func in _FACTORIES and kwargs.get("device") is None:
            where = _made_by_student(_caller_frame())
            if isinstance(out, torch.Tensor) and out.device == self.gpu:
                if out.ndim == 0:  # a CPU scalar mixes with GPU tensors: it stands for one on the inputs' device
                    return out.to("cpu")
                self.origins[id(out)] = (out, _FACTORIES[func], where)
            return out
        src = self.origin((args, kwargs))
        if src is not None:  # what is computed from a stray tensor (and stays on its device) is stray, origin kept
            self.mark(out, src, lambda t: t.device == self.gpu and id(t) not in self.origins)
        return out


FAKE_GPU = True  # tests set it False to check the fallback (_StrayTensors) on its own
_PROBED: set = set()  # the student's code found device-correct by a fake run (its code or class, keyword names)


def _device_probe(fn: Callable, args: tuple, kwargs: dict) -> str | None:
    """Would ``fn(*args, **kwargs)`` fail on a GPU because of a tensor the student's code made on the CPU? The call
    runs again on deep copies under ``FakeTensorMode`` with the devices' roles swapped (the inputs stay on the CPU,
    standing for the GPU; tensors made without ``device=`` land on a fake CUDA device), so PyTorch's own device rule
    fails exactly the ops that would fail on a GPU. Returns the student's message, None when device-correct, or
    raises :class:`_Undecided` (then :class:`_StrayTensors` watches the real call)."""
    if not FAKE_GPU or torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.Python):
        raise _Undecided()  # dispatch modes are off (the grading guard runs checks so): no fake run possible
    bound_self = getattr(fn, "__self__", None)
    if isinstance(fn, torch.nn.Module):
        target: Any = (fn, args, kwargs)
    elif isinstance(bound_self, torch.nn.Module) and type(fn) is types.MethodType:
        target = (bound_self, args, kwargs)
    elif type(fn) is types.FunctionType and not fn.__closure__:
        target = (None, args, kwargs)
    else:
        raise _Undecided()  # a lambda or closure over the checks' objects: its side effects cannot be copied
    leaves = pytree.tree_leaves(target[1:])
    if not (target[0] is not None or any(isinstance(t, torch.Tensor) for t in leaves)):
        raise _Undecided()  # nothing on a device (a constructor, a shape function)
    if any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in leaves):
        raise _Undecided()  # already on a GPU: the real call says
    # One fake run per piece of the student's code and keyword names (it costs about the call's Python-level ops
    # three times over); later calls of the same code are watched by the fallback instead.
    code = getattr(fn, "__code__", None) if target[0] is None else (type(target[0]), getattr(fn, "__func__", None))
    key = (code, tuple(sorted(kwargs)))
    if key in _PROBED:
        raise _Undecided()
    try:
        module, c_args, c_kwargs = copy.deepcopy(target)
    except Exception:
        raise _Undecided() from None
    if module is not None:
        method: Any = fn
        c_fn: Any = module if fn is target[0] else types.MethodType(method.__func__, module)
    else:
        c_fn = fn
    gpu = torch.device("cuda", 0)
    rng_state = torch.random.get_rng_state()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    # a wrong answer failing in the fake run makes PyTorch log to the original stderr: nbgrader scores that as zero
    fake_log = logging.getLogger("torch._subclasses.fake_tensor")
    log_was = fake_log.disabled
    fake_log.disabled = True
    try:
        with (
            torch.no_grad(),
            fake,
            DeviceContext(gpu),
            _FakeGPUOrigins(gpu),
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            c_fn(*c_args, **c_kwargs)
    except DeviceMismatch as exc:
        return str(exc)
    except Exception:  # anything else the fake run cannot settle
        raise _Undecided() from None
    finally:
        torch.random.set_rng_state(rng_state)
        fake_log.disabled = log_was
    if len(_PROBED) < 10_000:
        _PROBED.add(key)  # holds the code object or class: its id is not reused while remembered
    return None
