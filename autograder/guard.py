"""The grading kernel's guard: checks that run on code the student's cells could not have replaced.

Imported by the setup cell of the *grading* notebook (never by the students' notebooks), before any student
code runs, with ``arm(chapter)``. From then on:

* **captured checks** — the check functions of every exercise, and the helpers they use, are captured now;
  each test cell ends with ``verdict(name)``, which runs the captured visible *and* hidden checks itself on the
  object named ``name`` in the notebook (so replacing ``EXERCISES``, ``EXERCISES.run`` or ``CheckFailed`` in the
  notebook changes nothing), with tensor subclasses' ``__torch_function__`` disabled and outputs converted to
  plain tensors (``core.call``);
* **integrity snapshot** — the identity of every callable the checks rely on (builtins, math, torch,
  torch.nn.functional, torch.linalg, torch.Tensor and its C base, nn.Module/Linear, numpy, autograder.core,
  the chapter's check module, this module; for Python functions also their code, defaults and closures), the
  ``sys.modules`` entries of those modules, and the absence of torch function/dispatch modes and trace/profile
  hooks is verified before and after each verdict; any change is a *violation*;
* **audit hook** (cannot be removed from Python) — spawning processes, non-loopback network, ctypes, gc
  introspection, trace/profile hooks, setting attributes on protected classes, opening the reference solution
  of this chapter, the sample submissions, or writing outside the sandbox are refused; each refusal is recorded;
* **signed records** — each verdict and each refusal is written, signed with a key that was read from a file
  deleted before any student code ran, to a log the grading worker reads after the kernel has gone. A missing,
  unsigned or violating record scores zero. The worker, not this kernel, decides the score.

This is defence in depth inside one process, not a proof: see README, "What the grader guarantees".
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import json
import math
import os
import sys
import types

_STATE: dict = {}
_MISSING = object()


class GradingIntegrityError(RuntimeError):
    """The grading machinery was tampered with; the submission scores zero."""


def _watched(chapter: str):
    """(owner label, owner object) pairs whose attributes are snapshotted."""
    import torch
    import torch.nn.functional as F

    from . import core

    mods = {"builtins": builtins, "math": math, "torch": torch, "torch.nn.functional": F,
            "torch.linalg": torch.linalg, "torch.nn.utils.rnn": torch.nn.utils.rnn, "torch.autograd": torch.autograd,
            "torch.nn.init": torch.nn.init, "autograder.core": core, "autograder.guard": sys.modules[__name__],
            f"autograder.{chapter}": sys.modules[f"autograder.{chapter}"]}
    if "numpy" in sys.modules:
        mods["numpy"] = sys.modules["numpy"]
    classes = {"torch.Tensor": torch.Tensor, "TensorBase": torch._C.TensorBase, "nn.Module": torch.nn.Module,
               "nn.Linear": torch.nn.Linear, "nn.Parameter": torch.nn.Parameter, "torch.Generator": torch.Generator,
               "core.Exercises": core.Exercises, "core.Exercise": core.Exercise, "core.CheckFailed": core.CheckFailed,
               "core.Mutant": core.Mutant, "VariableFunctions": torch._C._VariableFunctions}
    return mods, classes


def _fn_parts(value):
    if isinstance(value, types.FunctionType):
        cells = tuple(c.cell_contents if c.cell_contents is not None else None
                      for c in (value.__closure__ or ()) if _cell_ok(c))
        return (value.__code__, value.__defaults__, value.__kwdefaults__, value.__globals__, cells)
    return None


def _cell_ok(cell) -> bool:
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


_VOLATILE = {"input", "raw_input", "_", "__", "___", "exit", "quit", "get_ipython", "display", "help",
             "__IPYTHON__", "copyright", "credits", "license"}  # rebound by IPython/ipykernel on every request


def _take(owner) -> dict:
    snap = {}
    d = getattr(owner, "__dict__", None)
    items = list(d.items()) if d is not None else [(n, getattr(owner, n, None)) for n in dir(owner)
                                                          if not n.startswith("__")]
    for name, value in items:
        if owner is builtins and name in _VOLATILE:
            continue
        if callable(value) or isinstance(value, (types.ModuleType, property, staticmethod, classmethod)) or \
                type(value).__name__ in ("getset_descriptor", "member_descriptor", "method_descriptor"):
            snap[name] = (value, _fn_parts(value))
    return snap


def _snapshot(chapter: str) -> dict:
    mods, classes = _watched(chapter)
    snap = {label: _take(obj) for label, obj in {**mods, **classes}.items()}
    snap["sys.modules"] = {name: (mod, None) for name, mod in mods.items() if sys.modules.get(name) is mod}
    checks = sys.modules[f"autograder.{chapter}"].EXERCISES
    snap["checks"] = {f"{ex.name}:{kind}:{i}": (fn, _fn_parts(fn)) for ex in checks
                      for kind in ("visible", "hidden") for i, fn in enumerate(getattr(ex, kind))}
    return snap


def _same(a, b) -> bool:
    if a[0] is not b[0]:
        return False
    if a[1] is None or b[1] is None:
        return a[1] is b[1]
    return len(a[1][4]) == len(b[1][4]) and all(x is y for x, y in zip(a[1][:4], b[1][:4])) and all(
        x is y for x, y in zip(a[1][4], b[1][4]))


def _dynamic_problems() -> list[str]:
    import torch

    problems = []
    if sys.gettrace() is not None or sys.getprofile() is not None:
        problems.append("a trace/profile hook is installed")
    if torch._C._len_torch_function_stack() > 0:
        problems.append("a torch function mode is active")
    if hasattr(torch._C, "_len_torch_dispatch_stack") and torch._C._len_torch_dispatch_stack() > 0:
        problems.append("a torch dispatch mode is active")
    return problems


def _integrity() -> list[str]:
    chapter, before = _STATE["chapter"], _STATE["snapshot"]
    now = _snapshot(chapter)
    problems = []
    for owner, entries in before.items():
        for name, old in entries.items():
            new = now.get(owner, {}).get(name, _MISSING)
            if new is _MISSING:
                problems.append(f"{owner}.{name} was deleted")
            elif not _same(old, new):
                problems.append(f"{owner}.{name} was replaced")
    for owner in _STATE["class_labels"]:  # a class attribute added after arming can shadow a base method
        for name in set(now.get(owner, {})) - set(before.get(owner, {})):
            problems.append(f"{owner}.{name} was added")
    if sys.modules.get(f"autograder.{chapter}") is None or len(now["checks"]) != len(before["checks"]):
        problems.append("the checks were changed")
    return problems[:5] + _dynamic_problems()


# ------------------------------------------------------------------------------------------------ audit hook

_DENY_ALWAYS = {"subprocess.Popen": "spawning a process", "os.system": "spawning a process",
                "os.exec": "spawning a process", "os.posix_spawn": "spawning a process",
                "os.spawn": "spawning a process", "os.fork": "spawning a process",
                "os.forkpty": "spawning a process", "pty.spawn": "spawning a process",
                "ctypes.dlopen": "ctypes", "ctypes.dlsym": "ctypes", "ctypes.call_function": "ctypes",
                "gc.get_objects": "gc introspection", "gc.get_referrers": "gc introspection",
                "gc.get_referents": "gc introspection", "sys.settrace": "trace hooks",
                "sys.setprofile": "trace hooks", "sys._current_frames": "frame introspection",
                "sys.addaudithook": "audit hooks", "cpython._PySys_ClearAuditHooks": "audit hooks"}


def _audit(event: str, args) -> None:
    if not _STATE.get("armed") or _STATE.get("in_hook"):
        return
    reason = _DENY_ALWAYS.get(event)
    if reason is None:
        if event in ("socket.connect", "socket.sendto", "socket.bind") and len(args) > 1:
            addr = args[1]
            host = addr[0] if isinstance(addr, tuple) and addr else addr
            if not (isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1", "")))\
                    and not isinstance(host, (bytes,)) and not (isinstance(addr, str)):
                reason = "network access"
        elif event in ("object.__setattr__", "object.__delattr__") and args and args[0] in _STATE["protected"]:
            reason = "patching a class the checks use"
        elif event in _PATH_EVENTS and args:
            for arg in args[:2]:
                if isinstance(arg, (str, bytes, os.PathLike)) and _outside(arg):
                    reason = "changing files outside the submission's sandbox"
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill") and args and args[0] not in (0, os.getpid()):
            reason = "signalling other processes"
        elif event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            reason = _open_problem(args[0], args[1] if len(args) > 1 else "r", args[2] if len(args) > 2 else 0)
    if reason is None:
        return
    _STATE["in_hook"] = True
    try:
        _record({"type": "blocked", "event": event, "what": reason})
    finally:
        _STATE["in_hook"] = False
    raise PermissionError(f"{reason} is not allowed while grading ({event})")


_PATH_EVENTS = {"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
                "os.symlink", "os.link", "os.utime", "shutil.rmtree", "shutil.move", "shutil.copyfile",
                "shutil.copymode", "shutil.copystat", "shutil.chown", "os.chflags", "os.lchmod", "os.setxattr",
                "os.removexattr"}


def _outside(path) -> bool:
    try:
        real = os.path.realpath(os.fsdecode(path))
    except Exception:  # noqa: BLE001
        return True
    return not any(real == a or real.startswith(a.rstrip("/") + "/") for a in (_STATE["sandbox"], "/dev/null"))


def _open_problem(path, mode, flags) -> str | None:
    try:
        real = os.path.realpath(os.fsdecode(path))
    except Exception:  # noqa: BLE001
        return None
    for bad in _STATE["hidden_files"]:
        if real == bad or real.startswith(bad.rstrip("/") + "/"):
            return "reading the grader's files"
    writing = (isinstance(mode, str) and any(ch in mode for ch in "wax+")) or (
        isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    if writing and _outside(real):
        return "writing outside the submission's sandbox"
    return None


# ------------------------------------------------------------------------------------------------ records


def _record(entry: dict) -> None:
    entry = dict(entry, seq=_STATE["seq"])
    _STATE["seq"] += 1
    body = json.dumps(entry, sort_keys=True)
    mac = _STATE["mac"](body.encode())
    os.write(_STATE["log_fd"], (json.dumps({"body": body, "mac": mac}) + "\n").encode())


def verify_log(path, key: bytes) -> tuple[list[dict], int]:
    """(verified entries, number of lines with a bad signature) of a guard log — used by the worker."""
    good, bad = [], 0
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return [], 0
    for line in lines:
        try:
            rec = json.loads(line)
            ok = hmac.compare_digest(hmac.new(key, rec["body"].encode(), hashlib.sha256).hexdigest(), rec["mac"])
        except Exception:  # noqa: BLE001
            ok = False
        if ok:
            good.append(json.loads(rec["body"]))
        else:
            bad += 1
    return good, bad


# ------------------------------------------------------------------------------------------------ API


def arm(chapter: str) -> None:
    """Called by the grading notebook's setup cell, before any student code. A no-op outside grading."""
    config_path = os.environ.get("AUTOGRADER_GUARD_CONFIG")
    if not config_path or _STATE.get("armed"):
        return
    with open(config_path) as f:
        config = json.load(f)
    os.unlink(config_path)
    key = bytes.fromhex(config.pop("key"))
    signer = hmac.new(key, digestmod=hashlib.sha256)
    del key
    _STATE["mac"] = lambda data: (lambda h: (h.update(data), h.hexdigest())[1])(signer.copy())
    __import__(f"autograder.{chapter}")  # the checks, imported before any student code
    import numpy  # noqa: F401 - so that numpy's functions are in the snapshot too
    import torch
    import torch._dynamo  # noqa: F401 - on import it wraps torch.manual_seed & co.: do that before the snapshot

    from . import core

    _STATE.update(chapter=chapter, seq=0, sandbox=os.path.realpath(config["sandbox"]),
                  hidden_files=[os.path.realpath(p) for p in config.get("hidden_files", [])],
                  log_fd=os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
                  user_ns=sys.modules["__main__"].__dict__, exercises=sys.modules[f"autograder.{chapter}"].EXERCISES,
                  core=core, disable=torch._C.DisableTorchFunctionSubclass)
    ex = _STATE["exercises"]
    _STATE["checks"] = {e.name: (list(e.visible), list(e.hidden), e.points) for e in ex}
    _STATE["snapshot"] = _snapshot(chapter)
    mods, classes = _watched(chapter)
    _STATE["protected"] = tuple(classes.values())
    _STATE["class_labels"] = tuple(classes)
    _STATE["armed"] = True
    sys.addaudithook(_audit)
    _record({"type": "armed", "chapter": chapter})


def verdict(name: str) -> None:
    """Run exercise ``name``'s captured checks on the notebook's object; record the result; raise on failure."""
    if not _STATE.get("armed"):
        raise GradingIntegrityError("the grading guard is not armed")
    core, check_failed = _STATE["core"], _STATE["core"].CheckFailed
    violations = _integrity()
    obj = _STATE["user_ns"].get(name, _MISSING)
    failures = []
    if obj is _MISSING:
        failures.append(f"{name} is not defined in the notebook")
    elif isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", "__main__") != "__main__":
        failures.append(f"{name} was not written in the notebook (it comes from {obj.__module__})")
    else:
        visible, hidden, _ = _STATE["checks"][name]
        for fn in visible + hidden:
            try:
                with _STATE["disable"]():
                    fn(obj)
            except check_failed as err:
                failures.append(str(err).splitlines()[0][:200] if fn in hidden else str(err)[:300])
            except Exception as err:  # noqa: BLE001
                failures.append(f"the check crashed: {type(err).__name__}")
            except BaseException as err:  # noqa: BLE001 - SystemExit/KeyboardInterrupt from the student's code
                failures.append(f"the student's code raised {type(err).__name__}")
    violations += [v for v in _integrity() if v not in violations]
    _record({"type": "verdict", "exercise": name, "passed": not failures and not violations,
             "failures": failures[:3], "violations": violations})
    if violations:
        raise GradingIntegrityError("the grading machinery was changed by the notebook: " + "; ".join(violations))
    if failures:
        raise core.CheckFailed(f"{len(failures)} check(s) failed for {name}.")
