"""The machinery every chapter's checks share.

A chapter's check module (``autograder/chNN_<name>.py``) declares its exercises::

    EXERCISES = Exercises("ch03_self_attention")

    @EXERCISES.check("causal_mask", points=2)
    def _causal_mask_shape(causal_mask): ...

    @EXERCISES.check("causal_mask", hidden=True)
    def _causal_mask_rectangular(causal_mask): ...

A *check* is a function of the student's object (a function or a class) that returns nothing when the
object behaves and raises :class:`CheckFailed` with a student-readable explanation when it does not. The same
checks run in three places:

* the visible test cell after each exercise in the student notebook (``hidden=False`` checks),
* the hidden part of that cell, which exists only in the instructor notebook that nbgrader grades with,
* pytest, on the reference solution (``tests/``), and against the checkout's catalogue of plausible student bugs
  (``catalogue/``), each of which must be caught by at least one check.

Messages of hidden checks never contain reference values: they say what property was violated, not what the
right numbers are.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib.util
import io
import linecache
import logging
import os
import signal
import sys
import sysconfig
import textwrap
import threading
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorDeviceMismatchError, FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._device import DeviceContext

__all__ = [
    "CheckFailed",
    "Exercises",
    "Exercise",
    "expect_close",
    "expect_equal",
    "expect_shape",
    "expect_true",
    "expect_seeded",
    "expect_dropout_modes",
    "expect_half_precision",
    "call",
    "observe",
    "updated_in_place",
    "record",
    "replay",
    "NotReplayable",
    "DeviceMismatch",
    "ExerciseTimeout",
    "time_limit",
]


class CheckFailed(AssertionError):
    """A check found a mistake. ``str(err)`` is written for the student."""

    def _render_traceback_(self) -> list[str]:
        """IPython shows these lines instead of a traceback: the student sees the message, not the checks' frames."""
        return [f"CheckFailed: {self}"]


# --------------------------------------------------------------------------------------------------
# Helpers used inside checks: each raises CheckFailed with "expected … , you gave …" wording.
# --------------------------------------------------------------------------------------------------


def _fmt(t: Any, hidden: bool) -> str:
    if hidden:
        return "(hidden)"
    if isinstance(t, torch.Tensor):
        with torch.no_grad():
            return textwrap.indent(repr(t.detach().cpu()), "    ").lstrip()
    return repr(t)


_as_subclass = torch.Tensor.as_subclass  # bound at import: a student's tensor subclass cannot override it

# In the grading kernel, autograder/guard.py runs the checks on private copies of these functions whose globals
# set _BOUNDARY to its integrity check: it then runs after every call into student code and before every
# comparison, so a library function swapped by the student's code is caught before it can decide anything.
_BOUNDARY = None


def _boundary() -> None:
    if _BOUNDARY is not None:
        _BOUNDARY()


def _plain(value: Any) -> Any:
    """Tensor subclasses (which could override comparisons) become plain tensors sharing data and autograd graph."""
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
        return _as_subclass(value, torch.Tensor)
    if isinstance(value, tuple):  # subclasses of tuple and list too: they become plain ones
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------------
# Device mismatches, caught on a CPU-only machine
# --------------------------------------------------------------------------------------------------

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


class DeviceMismatch(RuntimeError):
    """A tensor the answer made without ``device=`` met a tensor on the inputs' device (it would fail on a GPU)."""


# Whose code a frame runs: the course's checks (``autograder``), the course's library (``solutions``), a library
# (torch, the standard library, site-packages), or else the student's (a notebook cell, a catalogue entry).
def _package_dir(name: str) -> str:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return os.path.realpath(locations[0]) + os.sep if locations else "\0"


_CHECKS_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep
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
    """ "checks", "course", "library" or "student" for a code object's ``co_filename``."""
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
    """Where a tensor made in ``frame`` (the innermost Python frame of the call that made it) is the student's doing:
    ``(file, line)`` of the student's frame that asked for it, or None when it is not.

    Made directly in the student's code: theirs. Made inside torch (its Python helpers): not. Made in the course's
    library (``causal_mask(T)`` without ``device=``): the student's if the student's code called that helper,
    not if the course's checks did (the checks' own toy models are the course's responsibility)."""
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


def _device_message(made_by: str, where: tuple[str, int] | None, op: str) -> str:
    text = linecache.getline(where[0], where[1]).strip() if where else ""
    line = f" by your line {where[1]}" + (f" ({text})" if text else "") if where else ""
    return (
        f"a tensor made{line} without device= (by {made_by}) was combined with the inputs in {op}(). That works "
        'on a CPU but fails on a GPU ("Expected all tensors to be on the same device"): create it on the inputs\' '
        f"device, e.g. {made_by}(..., device=x.device), or move it with .to(x.device)."
    )


class _StrayTensors(TorchFunctionMode):
    """The fallback device check, for calls the fake-GPU run of :func:`_device_probe` cannot decide (code that
    reads values, such as ``.item()``): inside the student's call, remember every tensor (of at least one dimension)
    that a factory function made without ``device=`` *at the student's request* (see :func:`_made_by_student`),
    and everything computed from such tensors alone; raise :class:`DeviceMismatch` when one of them meets a tensor
    that came from elsewhere (the inputs, the module's parameters).

    ``.to(x.device)``, ``.type_as(x)``, ``.cuda()`` and ``x.new_tensor`` move a tensor to the right device: their
    result is never stray, even when it is the same tensor object (``.to`` returns its input when already there).
    Zero-dimensional tensors are exempt, as PyTorch lets CPU scalars mix with GPU tensors.
    """

    def __init__(self) -> None:
        super().__init__()
        # id(tensor) -> (tensor, the factory that made it, where); strong references, so ids are not reused
        self.stray: dict[int, tuple[torch.Tensor, str, tuple[str, int] | None]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        origin = next((self.stray[id(t)][1:] for t in flat if id(t) in self.stray), None)
        moved = func in _MOVES and (len(args) > 1 or "device" in kwargs or func is not torch.Tensor.to)
        indexing = func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and not (
            args and id(args[0]) in self.stray
        )  # CPU index tensors may index a GPU tensor
        if origin is not None and func not in _MOVES and not indexing:
            other = next((t for t in flat if id(t) not in self.stray and (t.ndim > 0 or t.requires_grad)), None)
            if other is not None:
                raise DeviceMismatch(_device_message(origin[0], origin[1], getattr(func, "__name__", str(func))))
        out = func(*args, **kwargs)
        if moved:
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    self.stray.pop(id(t), None)
        elif func in _FACTORIES and kwargs.get("device") is None:
            if not (func in (torch.tensor, torch.as_tensor) and args and isinstance(args[0], torch.Tensor)):
                where = _made_by_student(_caller_frame())
                if where is not None:
                    self._mark(out, (_FACTORIES[func], where))
        elif origin is not None:
            self._mark(out, origin)
        return out

    def _mark(self, out: Any, origin: tuple[str, tuple[str, int] | None]) -> None:
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.ndim > 0:
                self.stray[id(t)] = (t, *origin)


class _Undecided(Exception):
    """The fake-GPU run could not decide (an op without a fake kernel, code that reads values)."""


class _FakeGPUOrigins(TorchFunctionMode):
    """Inside :func:`_device_probe`'s run: tensors made on the default device (which stands for the CPU there) are
    remembered with who asked for them; when PyTorch's own device rule fails an op, the blame goes to the student's
    line that made the tensor (or to nobody, when the course's checks made it)."""

    def __init__(self, gpu: torch.device) -> None:
        super().__init__()
        self.gpu = gpu
        self.origins: dict[int, tuple[torch.Tensor, str, tuple[str, int] | None]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            out = func(*args, **kwargs)
        except FakeTensorDeviceMismatchError:
            for t in pytree.tree_leaves((args, kwargs)):
                if isinstance(t, torch.Tensor) and id(t) in self.origins:
                    _, made_by, where = self.origins[id(t)]
                    if where is not None:
                        raise DeviceMismatch(
                            _device_message(made_by, where, getattr(func, "__name__", str(func)))
                        ) from None
            raise _Undecided() from None  # made by the course's own code, or not traceable: not the student's
        if func in _FACTORIES and kwargs.get("device") is None:
            where = _made_by_student(_caller_frame())
            if isinstance(out, torch.Tensor) and out.device == self.gpu:
                if out.ndim == 0:  # a CPU scalar mixes with GPU tensors: it stands for one on the inputs' device
                    return out.to("cpu")
                self.origins[id(out)] = (out, _FACTORIES[func], where)
            return out
        src = next(
            (self.origins[id(a)] for a in pytree.tree_leaves((args, kwargs)) if id(a) in self.origins),
            None,
        )
        if src is not None:  # what is computed from a stray tensor (and stays on its device) is stray, origin kept
            for t in pytree.tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device == self.gpu and id(t) not in self.origins:
                    self.origins[id(t)] = (t, src[1], src[2])
        return out


FAKE_GPU = True  # tests set it False to check the fallback (_StrayTensors) on its own
_PROBED: set = set()  # plain functions' calls found device-correct, by their code and the kinds of inputs


def _device_probe(fn: Callable, args: tuple, kwargs: dict) -> str | None:
    """Would ``fn(*args, **kwargs)`` fail on a GPU because of a tensor the student's code made on the CPU?

    Decided by PyTorch itself: the call runs once more on deep copies of its arguments under PyTorch's
    ``FakeTensorMode`` (shapes and devices, no values), with the roles of the devices swapped — the inputs and the
    module's weights stay on the CPU (standing for the GPU they would be on) and every tensor made without
    ``device=`` lands on a fake CUDA device (standing for the CPU it would be on), so PyTorch's own device rule
    (``Expected all tensors to be on the same device``) fails exactly the ops that would fail on a GPU. Returns the
    student's message, None when the call is device-correct, or raises :class:`_Undecided` when the fake run
    cannot tell (then :class:`_StrayTensors` watches the real call).
    """
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
    key = None
    if target[0] is None:  # a plain function: one fake run per kind of call (its code, the inputs' ranks, dtypes)
        kinds = tuple((t.ndim, t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__ for t in leaves)
        key = (fn.__code__, kinds, tuple(sorted(kwargs)))
        if key in _PROBED:
            return None
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
    fake.cache_enabled = False  # its cache counters are class attributes, which the grading guard protects
    # A wrong answer that fails inside the fake run makes PyTorch log a traceback through a handler that holds the
    # original stderr (redirecting sys.stderr does not reach it): nbgrader scores a test cell with stderr as zero.
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
    if key is not None and len(_PROBED) < 10_000:
        _PROBED.add(key)  # holds the code object: its id is not reused while remembered
    return None


# --------------------------------------------------------------------------------------------------
# The per-exercise time limit (set while grading: one endless loop costs only its own exercise)
# --------------------------------------------------------------------------------------------------


class ExerciseTimeout(BaseException):
    """An exercise's checks ran longer than the grader's time limit (raised by the timer of :func:`time_limit`).

    A ``BaseException``, so that an answer's ``except Exception`` does not swallow it; it rings again every half
    second until the check run stops, so that a bare ``except:`` in an endless loop does not either."""


def exercise_time_limit() -> float | None:
    """Seconds one exercise's check run may take: ``AUTOGRADER_EXERCISE_TIMEOUT`` (set by the grader), else None."""
    try:
        seconds = float(os.environ.get("AUTOGRADER_EXERCISE_TIMEOUT", ""))
    except ValueError:
        return None
    return seconds if seconds > 0 else None


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`ExerciseTimeout` in the block once it has run ``seconds``, and every half second after (no
    limit for None, off the main thread, or where there is no ``SIGALRM``). Yields a list whose first item turns
    True at the first ring: code that swallowed the exception can still tell."""
    expired = [False]
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield expired
        return
    armed = [True]

    def ring(signum, frame):
        if armed[0]:
            expired[0] = True
            raise ExerciseTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.5)
    try:
        yield expired
    finally:
        for _ in range(100):  # a last ring may interrupt the disarming itself: disarm again
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                break
            except ExerciseTimeout:
                continue


def timeout_message(name: str, seconds: float) -> str:
    """The student's explanation of a time-out in exercise ``name``'s checks."""
    return (
        f"{name} timed out after {seconds:g} s: its checks did not finish (an endless loop, or a loop whose stop "
        "condition is never reached?). The remaining checks of this exercise were not run."
    )


# --------------------------------------------------------------------------------------------------
# Judged outside the student's process: record and replay
# --------------------------------------------------------------------------------------------------
# While grading, the kernel's guard runs each check with _RECORDER["trace"] set to a list: every outermost call into
# the student's code (:func:`call`, :func:`observe`) appends what came back (values, shapes, dtypes, the error it
# raised) and what it did to the check's own arguments. The grading worker, a process the student's code never runs
# in, then runs the same check again (:func:`replay`) with that list: call and observe return the recorded values
# instead of running anything, and the check's inputs, oracle, comparisons and verdict are computed there. Whatever
# the kernel sends is then a right or a wrong answer: patching torch or the checks inside it changes nothing the
# worker computes. A check that uses the student's object other than through call/observe cannot be replayed; the
# chapter lists those in ``EXERCISES.judged_in_kernel`` (tests/test_replay.py keeps the list true).
_RECORDER: dict[str, Any] = {"trace": None, "replay": None, "depth": 0, "leaves": []}
_MAX_ITEMS = 20_000  # values recorded per call at most (a bigger result is not replayable)


class NotReplayable(Exception):
    """The check used the student's object outside :func:`call`/:func:`observe`, or the record ran out."""


_MODE_SWITCHES = frozenset({"eval", "train", "zero_grad", "requires_grad_"})


class _Opaque:
    """What a replayed check holds in place of an object of the student's (their module, their class): it can be
    passed back to :func:`call` or have attributes taken (``model.forward``), nothing else."""

    __slots__ = ("_what",)

    def __init__(self, what: str = "the answer") -> None:
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


def _decode(data: Any, what: str = "the result") -> Any:
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


# The course's classes an exercise updates in place by definition (chapter 8's ``KVCache``: ``update`` appends to it),
# registered by the chapter's checks with :func:`updated_in_place`. Their state after a call is recorded and put back
# when replaying; every other input the answer is handed must come back as it went in (:func:`_inputs_state`).
_IN_PLACE: set[type] = set()


def updated_in_place(cls: type) -> type:
    """Declare that the answer may change objects of the course's class ``cls`` it is handed (their state is part of
    what the exercise computes, as a KV cache's is). Any other input changed by the answer fails the check."""
    _IN_PLACE.add(cls)
    return cls


def _course_object(value: Any) -> bool:
    """An object of the course's own classes (a ``KVCache`` the check hands the answer)."""
    mod = type(value).__module__ or ""
    return mod.split(".")[0] in ("solutions", "autograder") and hasattr(value, "__dict__")


def _updated_in_place(value: Any) -> bool:
    return _course_object(value) and type(value) in _IN_PLACE


_PLAIN_TYPES = (bool, int, float, str, type(None))


def _inputs_state(fn: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """label -> value of everything of the check's that a call hands to the answer: tensors among the arguments (in
    tuples, lists and dicts too), the weights of modules among them, the attributes of the course's objects (but
    those :func:`updated_in_place`), the tensors a check's own ``lambda`` closes over, and the parameters of the
    module being called. Compared before and after the call (:func:`_changed_inputs`): the answer must not change
    the question (an input zeroed in place would zero the oracle computed from it after the call)."""
    state: dict[str, Any] = {}

    def module(label: str, m: torch.nn.Module, buffers: bool) -> None:
        try:
            for n, p in torch.nn.Module.named_parameters(m):
                state[f"{label}'s parameter {n}"] = p
            if buffers:
                for n, b in torch.nn.Module.named_buffers(m):
                    state[f"{label}'s buffer {n}"] = b
        except Exception:  # a module too odd to walk: the worker's replay still judges it
            pass

    def visit(label: str, value: Any, depth: int) -> None:
        if depth > 3 or len(state) > 4096:
            return
        if isinstance(value, torch.Tensor):
            state[label] = value
        elif type(value) in (tuple, list):
            for i, v in enumerate(value[:64]):
                visit(f"{label}[{i}]", v, depth + 1)
        elif type(value) is dict:
            for k, v in list(value.items())[:64]:
                visit(f"{label}[{k!r}]", v, depth + 1)
        elif isinstance(value, torch.nn.Module):
            module(label, value, _course_object(value) or type(value).__module__.startswith("torch."))
        elif _course_object(value) and not _updated_in_place(value):
            for k, v in list(vars(value).items())[:64]:
                if isinstance(v, _PLAIN_TYPES):
                    state[f"{label}.{k}"] = v
                else:
                    visit(f"{label}.{k}", v, depth + 1)

    for i, a in enumerate(args):
        visit(f"argument {i + 1}", a, 0)
    for k, a in kwargs.items():
        visit(f"argument {k}", a, 0)
    code = getattr(fn, "__code__", None)
    if type(fn) is types.FunctionType and code is not None and _owner(code.co_filename) == "checks":
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, torch.Tensor) or type(value) in (tuple, list, dict):
                visit(f"the check's {name}", value, 1)
    owner = getattr(fn, "__self__", fn)
    if isinstance(owner, torch.nn.Module):
        module("the module called", owner, False)
    return state


def _snapshot_inputs(state: dict[str, Any]) -> dict[str, Any]:
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


def _changed_inputs(snapshot: dict[str, Any], state: dict[str, Any]) -> list[str]:
    """The labels of :func:`_snapshot_inputs` whose value is not what it was (the same object changed in place, or
    an attribute bound to another value)."""
    changed = []
    for label, (obj, before) in snapshot.items():
        now = state.get(label, obj)
        if not _same_value(now, before) or (isinstance(before, torch.Tensor) and not _same_value(obj, before)):
            changed.append(label)
    return changed


def _modified_message(what: str, labels: list[str]) -> str:
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return (
        f"{what} changed its input in place ({shown}): an answer must leave what it is given as it was — compute "
        "new tensors (x * 2, torch.cat, x.masked_fill(...)) instead of changing them (x.mul_(2), x[...] = ..., "
        "x.zero_(), x.fill_(...))."
    )


def _watch_leaves(args: tuple, kwargs: dict) -> None:
    """The check's own leaf tensors that require grad, in the order calls first receive them: a later backward pass
    (``call("backward", lambda: out.sum().backward())``) gives them gradients, which are recorded and put back."""
    leaves = _RECORDER.setdefault("leaves", [])
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf and not any(a is b for b in leaves):
            leaves.append(a)


def _effects_before(args: tuple, kwargs: dict) -> tuple[list, list]:
    _watch_leaves(args, kwargs)
    items = list(args) + list(kwargs.values())
    grads = [(g, None if g is None else g._version) for g in (t.grad for t in _RECORDER["leaves"])]
    return [(i, a, a._version) for i, a in enumerate(items) if isinstance(a, torch.Tensor)], grads


def _effects_after(args: tuple, kwargs: dict, before: tuple[list, list], budget: list[int]) -> list:
    """What the call did to the check's own objects: its arguments' tensors changed in place, course objects' state,
    the gradients of the leaf tensors it handed to the answer."""
    versions, grads = before
    items = list(args) + list(kwargs.values())
    out: list = []
    for i, a, version in versions:
        if a._version != version:
            out.append([i, "T", _encode(a, budget)])
    for i, a in enumerate(items):
        if _updated_in_place(a):
            out.append([i, "state", _encode(dict(vars(a)), budget)])
    for j, leaf in enumerate(_RECORDER["leaves"]):
        g0, v0 = grads[j] if j < len(grads) else (None, None)
        g = leaf.grad
        if g is not g0 or (g is not None and g._version != v0):
            out.append([j, "grad", _encode(g, budget)])
    return out


def _apply_effects(what: str, args: tuple, kwargs: dict, effects: list) -> None:
    """Put back what the recorded call did to the check's objects: gradients of its leaf tensors and the state of
    objects :func:`updated_in_place`. A recorded change to any other input fails the check (the worker's own inputs
    stay as the check made them, so the oracle computed from them is the question the check asked)."""
    items = list(args) + list(kwargs.values())
    names = [f"argument {i + 1}" for i in range(len(args))] + [f"argument {k}" for k in kwargs]
    leaves = _RECORDER["leaves"]
    for i, kind, data in effects:
        if kind == "grad":
            if i >= len(leaves):
                raise NotReplayable("the recorded gradient has no tensor to go to")
            leaves[i].grad = _decode(data)
            continue
        target = items[i] if type(i) is int and 0 <= i < len(items) else None
        if kind == "T" and isinstance(target, torch.Tensor):
            raise CheckFailed(_modified_message(what, [names[i]]))
        elif kind == "state" and _updated_in_place(target):
            vars(target).update(_decode(data))
        elif kind == "state" and target is not None:
            raise CheckFailed(_modified_message(what, [names[i]]))
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


def _replayed(what: str, args: tuple, kwargs: dict) -> Any:
    """Replaying: the recorded outcome of this call (its value, or its CheckFailed raised again)."""
    state = _RECORDER["replay"]
    if state["at"] >= len(state["entries"]):
        raise NotReplayable(f"the record has no call {what!r}")
    kind, recorded_what, payload, effects = state["entries"][state["at"]]
    state["at"] += 1
    if recorded_what != what:
        raise NotReplayable(f"the record has {recorded_what!r} where the check calls {what!r}")
    _watch_leaves(args, kwargs)
    _apply_effects(what, args, kwargs, effects)
    if kind == "failed":
        raise CheckFailed(payload)
    return _decode(payload, what)


def _recorded(what: str, run: Callable, args: tuple, kwargs: dict) -> Any:
    """Run ``run()`` (the call into the student's code), recording its outcome when a trace is being kept."""
    trace = _RECORDER["trace"]
    if trace is None:
        return run()
    versions = _effects_before(args, kwargs)
    try:
        result = run()
    except CheckFailed as err:
        trace.append(["failed", what, str(err), _effects_after(args, kwargs, versions, [_MAX_ITEMS])])
        raise
    budget = [_MAX_ITEMS]
    trace.append(["ok", what, _encode(result, budget), _effects_after(args, kwargs, versions, budget)])
    return result


def observe(what: str, thunk: Callable[[], Any]) -> Any:
    """``thunk()``: a look at the student's object that the check needs as a value (a parameter count, weights to
    compute an oracle from, ``module.eval()``). Recorded while grading, so the check can be judged outside the
    kernel; an exception becomes a CheckFailed naming ``what``."""
    with _outermost() as outer:
        if outer and _RECORDER["replay"] is not None:
            return _replayed(what, (), {})

        def run() -> Any:
            try:
                return _plain(thunk())
            except CheckFailed:
                raise
            except Exception as exc:
                raise CheckFailed(f"{what} raised {type(exc).__name__}: {exc}") from None

        try:
            return _recorded(what, run, (), {}) if outer else run()
        finally:
            _boundary()


def replay(check: Callable, entries: list) -> tuple[str, str]:
    """Run ``check`` again on a recorded trace, outside the kernel: ("passed" | "failed" | "unjudged", message).

    "unjudged": the check used the object outside call/observe, or called something the record does not have."""
    saved = dict(_RECORDER)
    _RECORDER.update(trace=None, replay={"entries": entries, "at": 0}, depth=0, leaves=[])
    try:
        check(_Opaque())
        if _RECORDER["replay"]["at"] != len(entries):
            return "unjudged", "the check made fewer calls than the record holds"
        return "passed", ""
    except CheckFailed as err:
        return "failed", str(err)
    except NotReplayable as err:
        return "unjudged", str(err)
    except Exception as err:
        return "unjudged", f"{type(err).__name__}: {err}"
    finally:
        _RECORDER.update(saved)


def record(check: Callable, obj: Any) -> tuple[str, str, list]:
    """Run ``check`` on ``obj`` keeping the trace :func:`replay` needs: (outcome, message, trace)."""
    saved = dict(_RECORDER)
    trace: list = []
    _RECORDER.update(trace=trace, replay=None, depth=0, leaves=[])
    try:
        check(obj)
        return "passed", "", trace
    except CheckFailed as err:
        return "failed", str(err), trace
    finally:
        _RECORDER.update(saved)


def call(what: str, fn: Callable, *args, **kwargs):
    """Call the student's ``fn``; turn an exception inside it into a CheckFailed that says what was called.

    Tensors returned (alone or in a tuple) are converted to plain ``torch.Tensor``. Device mistakes are caught on a
    CPU-only machine: PyTorch decides whether the call would fail on a GPU (:func:`_device_probe`), and where it
    cannot, tensors made without ``device=`` are watched during the real call (:class:`_StrayTensors`); either
    way only a tensor made by the student's own code is blamed. A crash names the student's own line. While grading,
    the outcome is recorded, so that the grading worker can judge the check again outside the kernel (:func:`replay`).
    """
    with _outermost() as outer:
        if outer and _RECORDER["replay"] is not None:
            return _replayed(what, args, kwargs)
        if outer:
            return _recorded(what, lambda: _call_leaving_inputs(what, fn, args, kwargs), args, kwargs)
        return _call(what, fn, args, kwargs)


def _call_leaving_inputs(what: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """:func:`_call`, failing when the answer changed what the check handed it (:func:`_inputs_state`)."""
    snapshot = _snapshot_inputs(_inputs_state(fn, args, kwargs))
    result = _call(what, fn, args, kwargs)
    changed = _changed_inputs(snapshot, _inputs_state(fn, args, kwargs))
    _boundary()
    if changed:
        raise CheckFailed(_modified_message(what, changed))
    return result


def _call(what: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
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
        _boundary()
        raise
    except DeviceMismatch as exc:
        _boundary()
        raise CheckFailed(f"{what}: {exc}") from None
    except NotImplementedError:
        _boundary()
        raise CheckFailed(f"{what} raised NotImplementedError: the exercise has not been filled in yet.") from None
    except SystemExit as exc:
        _boundary()
        raise CheckFailed(
            f"{what} exited (SystemExit: {exc.code!r}): an answer must return its result, not end the program "
            "(sys.exit, exit() or quit() in the answer?)."
        ) from None
    except Exception as exc:
        _boundary()
        # while grading, the guard's private copy of this module has the guard's own student_line (frame access
        # is refused to everyone else while the checks run)
        raise CheckFailed(f"{what} raised {type(exc).__name__}: {exc}{student_line(exc)}") from None
    _boundary()
    return result


def student_line(exc: BaseException) -> str:
    """`` (your line N: source)`` for the innermost frame of ``exc``'s traceback that runs the student's code (not
    torch's, the course's library or the checks'), or "" when there is none."""
    tb = [f for f in traceback.extract_tb(exc.__traceback__) if _owner(f.filename) == "student"]
    if not tb:
        return ""
    line = (tb[-1].line or "").strip()
    return f" (your line {tb[-1].lineno}: {line})" if line else f" (your line {tb[-1].lineno})"


def rng(seed: int) -> torch.Generator:
    """A new CPU ``torch.Generator`` seeded with ``seed``: the checks draw their inputs from their own generators,
    so the inputs do not depend on, or change, the global random state the answer's code may use."""
    return torch.Generator().manual_seed(seed)


def expect_true(cond: bool, message: str) -> None:
    _boundary()
    if not cond:
        raise CheckFailed(message)


def expect_shape(what: str, got: Any, shape: tuple[int, ...]) -> None:
    _boundary()
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what} should be a torch.Tensor of shape {tuple(shape)}, you gave {type(got).__name__}.")
    if tuple(got.shape) != tuple(shape):
        raise CheckFailed(f"{what} should have shape {tuple(shape)}, yours has shape {tuple(got.shape)}.")


def expect_equal(what: str, got: torch.Tensor, expected: torch.Tensor, *, hidden: bool = False) -> None:
    """Exact equality, with dtype and shape (for masks and integer outputs)."""
    _boundary()
    expect_shape(what, got, tuple(expected.shape))
    if got.dtype != expected.dtype:
        raise CheckFailed(f"{what} should have dtype {expected.dtype}, yours has dtype {got.dtype}.")
    if not torch.equal(got.cpu(), expected.cpu()):
        raise CheckFailed(
            f"{what} has the wrong values.\n  expected: {_fmt(expected, hidden)}\n  you gave: {_fmt(got, hidden)}"
        )


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
    _boundary()
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
    _boundary()
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
    _boundary()
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
    _boundary()
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


def default_tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) by dtype: fp64 tight, fp32 at single precision, half types loose."""
    return {
        torch.float64: (1e-10, 1e-12),
        torch.float32: (1e-5, 1e-5),
        torch.float16: (1e-2, 1e-2),
        torch.bfloat16: (2e-2, 2e-2),
    }.get(dtype, (1e-5, 1e-5))


def expect_close(what: str, got: Any, expected: torch.Tensor, *, hidden: bool = False, hint: str = "") -> None:
    """Shape, dtype and values within the dtype's tolerance; the message gives the largest difference."""
    _boundary()
    expect_shape(what, got, tuple(expected.shape))
    if got.dtype != expected.dtype:
        raise CheckFailed(
            f"{what} should have dtype {expected.dtype} (the dtype of the inputs), yours has {got.dtype}."
        )
    got_c, exp_c = got.detach().cpu(), expected.detach().cpu()
    if not torch.isfinite(got_c).all() and torch.isfinite(exp_c).all():
        raise CheckFailed(
            f"{what} contains NaN or inf where the expected values are all finite."
            + (f"\n  you gave: {_fmt(got_c, hidden)}" if not hidden else "")
            + (f"\n  Hint: {hint}" if hint else "")
        )
    rtol, atol = default_tolerance(expected.dtype)
    if not torch.allclose(got_c, exp_c, rtol=rtol, atol=atol):
        diff = (got_c - exp_c).abs()
        worst = diff.max().item()
        msg = f"{what} differs from the expected values by up to {worst:.3g} (allowed: about {atol:g})."
        if hint:
            msg += f"\n  Hint: {hint}"
        if not hidden:
            if exp_c.numel() <= 24:
                msg += f"\n  expected: {_fmt(exp_c, False)}\n  you gave: {_fmt(got_c, False)}"
            else:  # show the row that holds the largest difference
                idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
                row = "[" + ", ".join(map(str, idx[:-1])) + ", :]" if len(idx) > 1 else "[:]"
                msg += (
                    f"\n  largest difference in row {what.split(':')[-1].strip()}{row}:"
                    f"\n    expected: {_fmt(exp_c[idx[:-1]], False)}\n    you gave: {_fmt(got_c[idx[:-1]], False)}"
                )
        raise CheckFailed(msg)


# --------------------------------------------------------------------------------------------------
# Exercises: a registry of checks per exercise, with points
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Exercise:
    name: str  # the function/class the student writes, also the nbgrader grade_id stem
    points: int
    visible: list[Callable] = dataclasses.field(default_factory=list)
    hidden: list[Callable] = dataclasses.field(default_factory=list)


class Exercises:
    """Registry of a chapter's exercises and their checks, in notebook order."""

    def __init__(self, chapter: str):
        self.chapter = chapter
        self._by_name: dict[str, Exercise] = {}
        self._references: dict[str, Callable] = {}
        # names of the checks whose verdict is the grading kernel's alone (they read the answer in ways a record of
        # its calls cannot stand for); every other check is judged again outside the kernel (grading/judge.py)
        self.judged_in_kernel: frozenset[str] = frozenset()

    def __iter__(self):
        return iter(self._by_name.values())

    def __getitem__(self, name: str) -> Exercise:
        return self._by_name[name]

    @property
    def total_points(self) -> int:
        return sum(ex.points for ex in self)

    def check(self, name: str, *, points: int | None = None, hidden: bool = False):
        """Decorator: register a check for exercise ``name`` (``points`` on its first registration)."""

        def register(fn: Callable) -> Callable:
            if name not in self._by_name:
                if points is None:
                    raise ValueError(f"the first check of exercise {name!r} must give its points")
                self._by_name[name] = Exercise(name, points)
            elif points is not None and points != self._by_name[name].points:
                raise ValueError(f"exercise {name!r} already has {self._by_name[name].points} points")
            (self._by_name[name].hidden if hidden else self._by_name[name].visible).append(fn)
            return fn

        return register

    def reference(self, name: str):
        """Decorator: register the course's version of exercise ``name`` (a function), written in the checks module
        from an oracle. While *another* exercise that calls ``name`` is checked, the student's ``name`` is replaced
        by it, so that a mistake in ``name`` costs ``name``'s points only (each exercise is graded on its own)."""

        def register(fn: Callable) -> Callable:
            if name not in self._by_name:
                raise ValueError(f"register the checks of {name!r} before its reference")
            self._references[name] = fn
            return fn

        return register

    @property
    def references(self) -> dict[str, Callable]:
        """Exercise name -> the course's version registered with :meth:`reference` (a copy)."""
        return dict(self._references)

    def run(self, name: str, obj: Any, *, hidden: bool = False, verbose: bool = True) -> None:
        """Run the visible (or, with ``hidden=True``, the hidden) checks of exercise ``name`` on ``obj``.

        Prints one line per passed check; raises :class:`CheckFailed` listing every failed one. Warnings
        raised by the student's code are silenced here: nbgrader scores a test cell that writes to stderr
        as zero, and a deprecation warning is not a mistake.

        Returns None on purpose: nbgrader reads a number left as a test cell's value as a partial score.
        """
        __tracebackhide__ = True  # IPython: show the student the message, not this function's frame
        ex = self._by_name[name]
        checks = ex.hidden if hidden else ex.visible
        kind = "hidden" if hidden else "visible"
        deps = dependencies(self._references, name, obj, list(self._by_name))
        limit = exercise_time_limit()
        failures: list[str] = []
        own_failures: list[str] = []
        sink, completed = failures, False
        try:
            with time_limit(limit) as expired:
                if not deps:
                    self._run_checks(checks, obj, failures, verbose, expired, limit)
                else:  # checked with the reference versions of the exercises it calls, then with the student's own
                    with _swapped({dep: (g, self._references[dep]) for dep, g in deps.items()}):
                        self._run_checks(checks, obj, failures, verbose, expired, limit)
                    sink = own_failures
                    self._run_checks(checks, obj, own_failures, False, expired, limit)
                completed = True
        except ExerciseTimeout:
            sink.append(f"✘ {timeout_message(name, limit or 0)}")
        own = ", ".join(deps)
        if failures and deps and completed and not own_failures:
            failures = []  # the student's own versions fit this answer (e.g. an extra argument): full marks
        if failures:
            note = (
                f"\n({name} was checked with the course's version of {own} in place of yours, so that a mistake "
                "there is not charged twice.)"
                if deps
                else ""
            )
            raise CheckFailed(
                f"{len(failures)} of {len(checks)} {kind} checks failed for {name}:\n" + "\n".join(failures) + note
            )
        if own_failures:
            print(
                f"Note: {name} is right, but with your own {own} its results change ({len(own_failures)} of "
                f"{len(checks)} {kind} checks fail): the mistake is in your {own}, whose own checks say what it "
                f"is. {name} keeps its points."
            )
        if verbose:
            print(f"All {len(checks)} {kind} checks passed for {name}.")

    @staticmethod
    def _run_checks(checks, obj, failures: list[str], verbose: bool, expired: list[bool], limit) -> None:
        """Run ``checks`` on ``obj``, appending a failure line per failed check (so a time-out keeps them)."""
        for fn in checks:
            label = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
            try:
                with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
                    warnings.simplefilter("ignore")
                    fn(obj)
            except CheckFailed as err:
                failures.append(f"✘ {label}\n{textwrap.indent(str(err), '    ')}")
            except Exception as err:
                failures.append(f"✘ {label}\n    {crash_message(err)}")
            else:
                if verbose:
                    print(f"✔ {label}")
            if expired[0]:  # the answer swallowed the time-out (a bare except): stop all the same
                raise ExerciseTimeout(limit)


def dependencies(
    references: dict[str, Callable], name: str, obj: Any, order: list[str] | tuple[str, ...]
) -> dict[str, dict[str, Any]]:
    """The exercises in ``references`` that come before exercise ``name`` in ``order`` (the notebook's) and that
    ``obj`` (a function or a class) calls by their global name, each with the globals dict it is looked up in (the
    notebook's namespace while grading). A later exercise is never swapped in: the course's version of it would be
    handed to the notebook before the notebook's own answer to it is checked."""
    found: dict[str, dict[str, Any]] = {}
    earlier = set(order[: order.index(name)]) if name in order else set()
    try:
        for fn in _functions_of(obj):
            names = _global_names(fn.__code__)
            for dep in references:
                if dep in earlier and dep in names and dep in fn.__globals__:
                    found[dep] = fn.__globals__
    except Exception:  # an object too odd to inspect: checked as it is
        return {}
    return found


def _functions_of(obj: Any) -> list[Any]:
    """The plain functions that make up ``obj``: itself, or a class's methods (its own and its bases' up to
    ``torch.nn.Module``)."""
    if isinstance(obj, type):
        found = []
        for klass in obj.__mro__:
            if klass.__module__.startswith(("torch", "builtins")):
                continue
            for value in list(vars(klass).values()):
                if type(value) in (staticmethod, classmethod):
                    value = value.__func__
                if type(value) is types.FunctionType:  # exact types: nothing of the student's code runs here
                    found.append(value)
        return found
    return [obj] if type(obj) is types.FunctionType else []


def _global_names(code: types.CodeType) -> set[str]:
    """Names ``code`` (and the functions, lambdas and comprehensions inside it) may look up as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is types.CodeType:
            names |= _global_names(const)
    return names


@contextlib.contextmanager
def _swapped(entries: dict[str, tuple[dict[str, Any], Any]]):
    """Set ``globals[name] = value`` for each entry while the block runs; restore the student's afterwards."""
    saved = {name: g[name] for name, (g, _) in entries.items()}
    try:
        for name, (g, value) in entries.items():
            g[name] = value
        yield
    finally:
        for name, (g, _) in entries.items():
            g[name] = saved[name]


def crash_message(err: BaseException) -> str:
    """A check that raised something other than CheckFailed: almost always an answer whose output has another
    shape or type than the docstring says (the check indexed or combined it), said so for the student."""
    return (
        f"your answer's result could not be checked ({type(err).__name__}: {str(err)[:200]}): compare the shapes, "
        "dtypes and types it returns with the docstring."
    )
