"""The grading kernel's guard: verdicts that the student's code in the same process cannot write or bend.

Imported by the setup cell of the *grading* notebook (never by the students' notebooks), before any student
code runs, with ``arm(chapter)``; each test cell is ``verdict(name)``. The worker that started the kernel
(``autograder/grading/worker.py``) gives an exercise its points only when it received a passing *record* for it.

How a record is made, and why student code cannot make one:

* **one writer** — records travel to the worker over a Unix socket (an abstract address, no file to open). An
  audit hook (which Python code cannot remove) refuses ``socket.connect`` to that address unless the calling
  frame is the guard's own engine or the hook itself; the worker also accepts a connection only from the
  kernel's process id (``SO_PEERCRED``: a spawned process is refused) and only one signed line per connection.
  So a record exists only if the engine wrote it, and the engine writes only what the checks decided.
* **private checks** — at arming, the chapter's check functions and ``autograder.core``'s helpers are copied
  into private globals (their own copy of builtins; ``torch``, ``torch.nn``, ``torch.nn.functional`` and
  ``math`` as snapshots of those modules taken now). Rebinding ``EXERCISES``, ``expect_close`` or
  ``torch.allclose`` in any module changes nothing the engine runs. The engine lives in a generator whose frame
  (``gi_frame``) the hook refuses to hand out; tracebacks that lead into the engine or the private copies are
  refused too, and while a check runs the notebook's own code may not call ``sys._getframe`` or read a
  traceback's frame (frames taken earlier, or handed out by library helpers, remain a known gap: README).
* **integrity at every boundary** — PyTorch's operator table (a kernel registered from Python with
  ``torch.library`` for an aten operator: the comparison operators after every call, all of aten before and after
  each verdict), and every callable of builtins, math, torch, torch.nn.functional, torch.linalg,
  torch.nn.utils.rnn, torch.autograd, torch.nn.init, numpy, autograder.core, the chapter's checks (and the
  private copies) is recorded at arming. After every call into the student's code and before every comparison,
  the engine checks that none was replaced (so a function swapped for one call and restored after is caught at
  the next boundary), and before/after each verdict also code, defaults and closures, ``sys.modules``, torch
  function/dispatch modes and trace hooks. Setting attributes on classes of torch, numpy, builtins or the
  grader, or a function's ``__code__``/``__defaults__``, is refused outright.
* **containment** — spawning processes, non-loopback network, ctypes, gc introspection and trace/profile hooks
  are refused; so are, in fallback mode only (``file_rules`` in the config: a kernel without the bubblewrap jail
  of ``jail.py``), opening the chapter's reference solution, the sample submissions or the grader's files and
  writing outside the sandbox. Each refusal is a record (shown to the instructor as a warning).

This is a defence inside one process, not a proof: see README, "What the grader guarantees".
"""

from __future__ import annotations

import builtins
import gc
import hashlib
import hmac
import json
import math
import os
import socket
import struct
import sys
import threading
import types

_MISSING = object()
MAX_RECORD_BYTES = 64 << 20  # one record line at most (a verdict carries its checks' recorded calls)
RECORD_FILE = "autograder-records"  # the name of a record socket file (jailed kernels): only its engine connects
_ARMED: dict = {}  # "verdict": the engine's entry point (replacing it only loses the student's own records)


# The aten operators (all overloads) the checks' comparisons run on: their kernels are compared with the ones at
# arming after every call into the student's code (the whole aten table is compared before and after each verdict).
_COMPARISON_OPS = frozenset(
    "allclose equal isclose isfinite isnan isinf all any abs sub max ne eq lt le gt ge logical_not "
    "_local_scalar_dense is_nonzero detach _to_copy copy_ clone argmax".split()
)


class GradingIntegrityError(RuntimeError):
    """The grading machinery was tampered with; the submission scores zero."""


# ------------------------------------------------------------------------------------------------ worker side


class RecordServer:
    """The worker's end: collects records sent by the kernel's guard (run in the worker, never in the kernel).

    ``address`` is an abstract Unix socket address, or ``path`` (a socket file the jail binds read-only into the
    kernel's view). ``records(pid, key)`` returns (verified entries, number of
    rejected connections) keeping only connections from process ``pid`` that carried exactly one correctly
    signed line.
    """

    def __init__(self, path: str | None = None):
        self.address = path or "\0autograder-" + os.urandom(12).hex()
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.address)
        if path:  # a socket file (a jailed kernel has its own network namespace, so no abstract address)
            os.chmod(path, 0o666)
        self._srv.listen(128)
        self._srv.settimeout(0.2)
        self._got: list[tuple[int, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._receive(conn)

    def _receive(self, conn: socket.socket) -> None:
        size = struct.calcsize("3i")
        with conn:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))[0]
            conn.settimeout(10)
            data = b""
            try:
                while len(data) < MAX_RECORD_BYTES:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self._got.append((pid, data))

    def close(self) -> None:
        """Stop listening; connections already made but not yet accepted are still read (none is lost)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._srv.setblocking(False)
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:  # BlockingIOError: none left
                break
            conn.setblocking(True)
            self._receive(conn)
        self._srv.close()

    def records(self, pid: int, key: bytes) -> tuple[list[dict], int]:
        good, bad = [], 0
        for from_pid, data in self._got:
            lines = data.splitlines()
            try:
                if from_pid != pid or len(lines) != 1:
                    raise ValueError
                rec = json.loads(lines[0])
                if not hmac.compare_digest(hmac.new(key, rec["body"].encode(), hashlib.sha256).hexdigest(), rec["mac"]):
                    raise ValueError
                good.append(json.loads(rec["body"]))
            except Exception:
                bad += 1
        return good, bad


# ------------------------------------------------------------------------------------------------ what is watched


def _watched(chapter: str):
    """(modules, classes) whose attributes are recorded at arming."""
    import torch
    import torch.nn.functional as F

    from .. import core

    mods = {
        "builtins": builtins,
        "math": math,
        "torch": torch,
        "torch.nn.functional": F,
        "torch.linalg": torch.linalg,
        "torch.nn.utils.rnn": torch.nn.utils.rnn,
        "torch.autograd": torch.autograd,
        "torch.nn.init": torch.nn.init,
        "torch.nn": torch.nn,
        "autograder.core": core,
        "autograder.grading.guard": sys.modules[__name__],
        f"autograder.{chapter}": sys.modules[f"autograder.{chapter}"],
        "os": os,
    }
    if "numpy" in sys.modules:
        mods["numpy"] = sys.modules["numpy"]
    classes = {
        "torch.Tensor": torch.Tensor,
        "TensorBase": torch._C.TensorBase,
        "nn.Module": torch.nn.Module,
        "nn.Linear": torch.nn.Linear,
        "nn.Parameter": torch.nn.Parameter,
        "torch.Generator": torch.Generator,
        "core.Exercises": core.Exercises,
        "core.Exercise": core.Exercise,
        "core.CheckFailed": core.CheckFailed,
        "VariableFunctions": torch._C._VariableFunctions,
        "DispatchModule": torch._C._DispatchModule,
    }
    return mods, classes


_VOLATILE = {
    "input",
    "raw_input",
    "_",
    "__",
    "___",
    "exit",
    "quit",
    "get_ipython",
    "display",
    "help",
    "__IPYTHON__",
    "copyright",
    "credits",
    "license",
}  # rebound by IPython/ipykernel on every request


def _fn_parts(value):
    if isinstance(value, types.FunctionType):
        cells = []
        for c in value.__closure__ or ():
            try:
                cells.append(c.cell_contents)
            except ValueError:
                cells.append(_MISSING)
        return (value.__code__, value.__defaults__, value.__kwdefaults__, value.__globals__, tuple(cells))
    return None


def _attrs(obj) -> dict:
    d = getattr(obj, "__dict__", None)
    if isinstance(d, (dict, types.MappingProxyType)):
        return dict(d)
    return {n: getattr(obj, n, None) for n in dir(obj) if not n.startswith("__")}


def _entries(owner_dict: dict, skip=()) -> dict:
    return {
        name: value
        for name, value in owner_dict.items()
        if name not in skip
        and (
            callable(value)
            or isinstance(value, (types.ModuleType, property, staticmethod, classmethod))
            or type(value).__name__ in ("getset_descriptor", "member_descriptor", "method_descriptor")
        )
    }


def _clone(fn: types.FunctionType, globs: dict) -> types.FunctionType:
    new = types.FunctionType(fn.__code__, globs, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__, new.__qualname__, new.__doc__ = fn.__kwdefaults__, fn.__qualname__, fn.__doc__
    new.__dict__.update(fn.__dict__)
    return new


def _private_world(core, checks_mod, boundary) -> tuple[dict, dict]:
    """Private globals for copies of core's and the check module's functions (see the module docstring)."""
    import torch
    import torch.nn.functional as F

    own_builtins = dict(vars(builtins))
    frozen = {id(m): types.SimpleNamespace(**vars(m)) for m in (torch, torch.nn, F, math)}
    frozen[id(torch)].nn = frozen[id(torch.nn)]
    frozen[id(torch.nn)].functional = frozen[id(F)]

    def private(mod, extra):
        g = {k: frozen.get(id(v), v) for k, v in vars(mod).items()}
        g["__builtins__"] = own_builtins
        g.update(extra)
        for k, v in list(g.items()):
            if isinstance(v, types.FunctionType) and v.__globals__ is vars(mod):
                g[k] = _clone(v, g)
        return g

    # the private core keeps its own record of each check's calls (the module's dict is the notebook's to change)
    core_g = private(
        core, {"_BOUNDARY": boundary, "_RECORDER": {"trace": None, "replay": None, "depth": 0, "leaves": []}}
    )
    shared = {
        k: core_g[k]
        for k, v in vars(checks_mod).items()
        if isinstance(v, types.FunctionType) and v.__globals__ is vars(core)
    }
    return core_g, private(checks_mod, shared)


# ------------------------------------------------------------------------------------------------ integrity records
# Pure parts of the engine, unit-tested in tests/test_guard.py. They hold no key, address or state: the engine
# binds them when it arms (a student who rebinds them in this module changes nothing it runs).


def _snapshot(mods: dict, classes: dict, private_dicts: tuple, checks: dict) -> dict:
    """label -> {name: (value, its function parts)} of everything the integrity check compares."""
    snap = {
        label: {n: (v, _fn_parts(v)) for n, v in _entries(vars(obj), _VOLATILE if obj is builtins else ()).items()}
        for label, obj in mods.items()
    }
    snap.update(
        {label: {n: (v, _fn_parts(v)) for n, v in _entries(_attrs(cls)).items()} for label, cls in classes.items()}
    )
    snap.update(
        {f"private{i}": {n: (v, _fn_parts(v)) for n, v in _entries(d).items()} for i, d in enumerate(private_dicts)}
    )
    snap["sys.modules"] = {name: (mod, None) for name, mod in mods.items() if sys.modules.get(name) is mod}
    snap["checks"] = {f"{name}:{i}": (fn, _fn_parts(fn)) for name, fns in checks.items() for i, fn in enumerate(fns)}
    return snap


def _same(a: tuple, b: tuple) -> bool:
    """Two snapshot entries are the same object with the same code, defaults, globals and closure cells."""
    if a[0] is not b[0]:
        return False
    if a[1] is None or b[1] is None:
        return a[1] is b[1]
    return (
        len(a[1][4]) == len(b[1][4])
        and all(x is y for x, y in zip(a[1][:4], b[1][:4]))
        and all(x is y for x, y in zip(a[1][4], b[1][4]))
    )


def _changes(before: dict, now: dict, class_labels) -> list[str]:
    """What differs between two snapshots: deleted or replaced entries, attributes added to watched classes."""
    problems = []
    for owner, entries in before.items():
        for name, old in entries.items():
            new = now.get(owner, {}).get(name, _MISSING)
            if new is _MISSING:
                problems.append(f"{owner}.{name} was deleted")
            elif not _same(old, new):
                problems.append(f"{owner}.{name} was replaced")
    for owner in class_labels:  # a class attribute added after arming can shadow a base method
        problems += [f"{owner}.{name} was added" for name in set(now.get(owner, {})) - set(before[owner])]
    return problems


def _boundary_records(mods: dict, classes: dict, private_dicts: tuple) -> tuple[list, dict, list]:
    """(flat, owner_of, class_names) checked at every boundary: flat holds (dict, name, value, label) for every
    watched entry; owner_of maps id(a class's __dict__) to the class; class_names holds (class, its names now)."""
    flat: list = []
    owner_of: dict = {}
    class_names: list = []
    for label, obj in mods.items():
        d = vars(obj)
        flat.extend((d, n, v, label) for n, v in _entries(d, _VOLATILE if obj is builtins else ()).items())
    for d, label in zip(private_dicts, ("the grader's copy of autograder.core", "the grader's copy of the checks")):
        flat.extend((d, n, v, label) for n, v in _entries(d).items())
    for label, cls in classes.items():
        d = getattr(cls, "__dict__", None)
        if isinstance(d, types.MappingProxyType):  # class attributes: no audit event covers setting them
            owner_of[id(d)] = cls
            flat.extend((d, n, v, label) for n, v in _entries(dict(d)).items())
            class_names.append((cls, frozenset(d)))
    return flat, owner_of, class_names


def _boundary_problem(flat: list, class_names: list) -> str | None:
    """The first recorded entry replaced, deleted or (on a class) added since arming, as a sentence; else None."""
    for d, name, value, label in flat:
        if d.get(name, _MISSING) is not value:
            return f"{label}.{name} was replaced while the checks ran"
    for cls, names in class_names:
        if len(vars(cls)) != len(names):
            return f"an attribute was added to {cls.__name__} while the checks ran"
    return None


def _restore(flat: list, owner_of: dict, class_names: list) -> None:
    """Put back every recorded entry that was replaced or deleted, and remove attributes added to classes."""
    for d, name, value, _label in flat:
        if d.get(name, _MISSING) is not value:
            if isinstance(d, dict):
                d[name] = value
            else:
                setattr(owner_of[id(d)], name, value)
    for cls, names in class_names:
        if len(vars(cls)) != len(names):
            for extra in [n for n in vars(cls) if n not in names]:
                delattr(cls, extra)


# ------------------------------------------------------------------------------------------------ audit rules


def _path_rules(writable, hidden_files):
    """(outside, open_problem) for the audit hook. ``outside(path)``: True when ``path`` is not under one of the
    ``writable`` folders (nor /dev/null). ``open_problem(args)``: why the ``open`` event with ``args`` is refused
    (a hidden file, a directory, writing outside), or None. The os functions they use are bound now, so a later
    ``os.path.realpath = ...`` cannot bend them."""
    realpath, fsdecode, isdir, path_like = os.path.realpath, os.fsdecode, os.path.isdir, os.PathLike
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    writable = tuple(writable)
    hidden_files = tuple(hidden_files)

    def outside(path) -> bool:
        try:
            real = realpath(fsdecode(path))
        except Exception:
            return True
        return not (real == "/dev/null" or any(real == w or real.startswith(w.rstrip("/") + "/") for w in writable))

    def open_problem(args) -> str | None:
        if not args or isinstance(args[0], int):
            return None
        if not isinstance(args[0], (str, bytes, path_like)):
            return None
        try:
            real = realpath(fsdecode(args[0]))
        except Exception:
            return None
        for bad in hidden_files:
            if real == bad or real.startswith(bad.rstrip("/") + "/"):
                return "reading the grader's files"
        if isdir(real):  # a directory descriptor would let os.open(..., dir_fd=) escape these checks
            return "opening a directory"
        mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
        writing = (isinstance(mode, str) and any(ch in mode for ch in "wax+")) or (
            isinstance(flags, int) and flags & write_flags
        )
        if writing and outside(real):
            return "writing outside the submission's sandbox"
        return None

    return outside, open_problem


_UNREADABLE = object()  # a socket address that is not text


def _socket_address(args):
    """The address of a socket.connect/sendto/sendmsg audit event: a str for a Unix address (bytes decoded), the
    (host, port, ...) tuple for an internet one, or _UNREADABLE."""
    addr = args[1] if len(args) > 1 else None
    if isinstance(addr, (bytes, bytearray, memoryview)):
        try:
            return bytes(addr).decode("latin-1")
        except Exception:
            return _UNREADABLE
    return addr


def _remote(addr) -> bool:
    """True for an internet address that is not loopback."""
    host = addr[0] if isinstance(addr, tuple) and addr else addr
    return isinstance(addr, tuple) and not (
        isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1", ""))
    )


def _setattr_problem(target, attr, protected_classes: dict, private_globals: tuple) -> str | None:
    """Why setting ``attr`` on ``target`` is refused: a watched class, or the code/defaults of a function the
    checks use (the grader's private copies, torch, numpy, autograder); else None."""
    if protected_classes.get(id(target), _MISSING) is target:
        return "patching a class the checks use"
    if (
        isinstance(target, types.FunctionType)
        and attr in ("__code__", "__defaults__", "__kwdefaults__")
        and (
            any(target.__globals__ is g for g in private_globals)
            or str(getattr(target, "__module__", "")).split(".")[0] in ("torch", "numpy", "autograder")
        )
    ):
        return "patching a function the checks use"
    return None


def _encode_traces(traces: list) -> str:
    """The checks' recorded calls (``core.record``'s plain data: tensors, numbers, strings, lists) as the text a
    verdict record carries: ``torch.save``, zlib, base64. The worker reads it with ``torch.load(weights_only=True)``,
    which runs no code of the kernel's."""
    import base64
    import io
    import zlib

    import torch

    buf = io.BytesIO()
    torch.save(traces, buf)
    return base64.b64encode(zlib.compress(buf.getvalue(), 6)).decode("ascii")


def decode_traces(text: str, limit: int = 256 << 20) -> list:
    """:func:`_encode_traces`' inverse, in the worker: at most ``limit`` bytes decompressed."""
    import base64
    import io
    import zlib

    import torch

    raw = zlib.decompressobj().decompress(base64.b64decode(text, validate=True), limit)
    return torch.load(io.BytesIO(raw), weights_only=True)


def _signed_line(signer, entry: dict, dumps=json.dumps) -> bytes:
    """The line that carries ``entry`` to the worker: its JSON body and the body's HMAC with ``signer`` (a keyed
    ``hmac`` object, copied, never updated)."""
    body = dumps(entry, sort_keys=True)
    h = signer.copy()
    h.update(body.encode())
    return (dumps({"body": body, "mac": h.hexdigest()}) + "\n").encode()


# the methods of torch's dispatcher module that register a kernel or an operator (torch.library's Library calls them)
_REGISTRATIONS = (
    "def_",
    "def_legacy",
    "def_name_t_t",
    "def_schema_t_t",
    "define",
    "impl",
    "impl_t_t",
    "impl_with_aoti_compile",
    "fallback",
    "fallback_fallthrough",
    "register_ad_inplace_or_view_fallback",
)

_DENY_ALWAYS = {
    "subprocess.Popen": "spawning a process",
    "os.system": "spawning a process",
    "os.exec": "spawning a process",
    "os.posix_spawn": "spawning a process",
    "os.spawn": "spawning a process",
    "os.fork": "spawning a process",
    "os.forkpty": "spawning a process",
    "pty.spawn": "spawning a process",
    "ctypes.dlopen": "ctypes",
    "ctypes.dlsym": "ctypes",
    "ctypes.call_function": "ctypes",
    "ctypes.cdata": "ctypes",
    "ctypes.addressof": "ctypes",
    "gc.get_objects": "gc introspection",
    "gc.get_referrers": "gc introspection",
    "gc.get_referents": "gc introspection",
    "sys.settrace": "trace hooks",
    "sys.setprofile": "trace hooks",
    "sys._current_frames": "frame introspection",
    "sys.addaudithook": "audit hooks",
    "cpython._PySys_ClearAuditHooks": "audit hooks",
}

_PATH_EVENTS = {
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.truncate",
    "os.symlink",
    "os.link",
    "os.utime",
    "shutil.rmtree",
    "shutil.move",
    "shutil.copyfile",
    "shutil.copymode",
    "shutil.copystat",
    "shutil.chown",
    "os.chflags",
    "os.lchmod",
    "os.setxattr",
    "os.removexattr",
}


# ------------------------------------------------------------------------------------------------ API


def arm(chapter: str) -> None:
    """Called by the grading notebook's setup cell, before any student code. A no-op outside grading.

    The guard's own code then runs on private copies of this module's functions with a private copy of
    builtins, so that a student's ``builtins.len = ...`` cannot break the engine or the hook."""
    if not os.environ.get("AUTOGRADER_GUARD_CONFIG") or _ARMED:
        return
    me = vars(sys.modules[__name__])
    own = dict(me)
    own["__builtins__"] = dict(vars(builtins))
    for k, v in list(own.items()):
        if isinstance(v, types.FunctionType) and v.__globals__ is me:
            own[k] = _clone(v, own)
    own["_arm"](chapter)


def _arm(chapter: str) -> None:
    """Read the worker's key and address, record what is watched, start the engine, install the audit hook.

    Runs as a private copy (globals: a copy of this module's, with their own builtins), before any student code.
    Everything with authority — the signing key, the socket address, the engine generator — lives only in this
    function's closures; the module-level helpers it binds below are pure."""
    config_path = os.environ["AUTOGRADER_GUARD_CONFIG"]
    with open(config_path) as f:
        config = json.load(f)
    os.unlink(config_path)
    signer = hmac.new(bytes.fromhex(config.pop("key")), digestmod=hashlib.sha256)
    address = config["address"]
    sandbox = os.path.realpath(config["sandbox"])
    __import__(f"autograder.{chapter}")  # the checks, imported before any student code
    import _thread

    import numpy  # noqa: F401 - so that numpy's functions are recorded too
    import torch
    import torch._dynamo

    from .. import core

    checks_mod = sys.modules[f"autograder.{chapter}"]
    user_ns = sys.modules["__main__"].__dict__
    own_globals = globals()  # this copy's globals: every frame running the guard's own code has them
    # Bound now: the module's names (and os.path, sys, torch._C ...) can be rebound by the notebook later.
    snapshot_of, changes, boundary_problem, restore_records = _snapshot, _changes, _boundary_problem, _restore
    socket_address, remote, setattr_problem, signed_line = _socket_address, _remote, _setattr_problem, _signed_line
    unreadable, missing, integrity_error = _UNREADABLE, _MISSING, GradingIntegrityError
    disable_subclasses = torch._C.DisableTorchFunctionSubclass
    disable_dispatch = torch._C._DisableTorchDispatch  # no tensor subclass's __torch_dispatch__ runs in a check
    # PyTorch's operator table: a kernel registered from Python (torch.library) for an aten operator would change
    # what the checks compute below Python, where no attribute of any module changes. The comparison operators
    # are checked at every boundary, every aten operator before and after each verdict.
    dispatch_dump = torch._C._dispatch_dump
    aten_ops = tuple(n for n in torch._C._dispatch_get_all_op_names() if n.startswith(("aten::", "prims::")))
    compare_ops = tuple(n for n in aten_ops if n.split("::")[1].split(".")[0] in _COMPARISON_OPS)
    ops_at_arm = tuple(dispatch_dump(n) for n in aten_ops)
    compare_at_arm = tuple(dispatch_dump(n) for n in compare_ops)
    len_function_modes = torch._C._len_torch_function_stack
    len_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
    get_ident, thread_count, getframe = threading.get_ident, _thread._count, sys._getframe
    check_failed, timeout_error = core.CheckFailed, core.ExerciseTimeout
    exercise_seconds = config.get("exercise_timeout") or None  # one exercise's whole verdict, in seconds
    AF_UNIX, SOCK_STREAM, new_socket = socket.AF_UNIX, socket.SOCK_STREAM, socket.socket
    gc_enable, gc_disable, gc_isenabled, gc_collect = gc.enable, gc.disable, gc.isenabled, gc.collect
    gettrace, getprofile, getpid, path_like = sys.gettrace, sys.getprofile, os.getpid, os.PathLike
    deny_always, path_events = dict(_DENY_ALWAYS), frozenset(_PATH_EVENTS)  # private: the module's can be mutated
    record_prefix, record_file = "\0autograder-", RECORD_FILE
    # writable: the sandbox's home and the notebook's own directory
    outside, open_problem = _path_rules((sandbox, os.path.realpath(os.getcwd())), config.get("hidden_files", []))
    file_rules = config.get("file_rules", True)  # jailed kernels: the operating system keeps them to their files

    active = [False]  # a verdict is running
    whole_table = [False]  # a check judged in the kernel alone is running: the whole operator table at every boundary
    in_kernel_checks = frozenset(getattr(checks_mod.EXERCISES, "judged_in_kernel", ()))
    seq = [0]
    boundary_problems: list = []

    # registering a kernel for a PyTorch operator (torch.library calls these methods of the dispatcher's module)
    # while a verdict runs would change what a check computes below Python: refused, and counted as a violation
    # (the whole operator table is also compared before and after each verdict, and at every boundary of a check
    # judged in the kernel alone, for a registration made some other way)
    # (the wrappers close over objects made now: a cell filled later would read as a replaced function to the
    # integrity records, which compare closures; write_note is put into its holder once it exists)
    note_holder: list = []

    def refusing(original):
        def registration(*args, **kwargs):
            if active[0]:
                boundary_problems.append("registering a PyTorch operator kernel while the checks ran")
                for send in note_holder:
                    send({"type": "blocked", "event": "torch.library", "what": "registering an operator kernel"})
                raise PermissionError("registering a PyTorch operator kernel is not allowed while grading")
            return original(*args, **kwargs)

        return registration

    dispatch_module = torch._C._DispatchModule
    for method in _REGISTRATIONS:
        if hasattr(dispatch_module, method):
            setattr(dispatch_module, method, refusing(getattr(dispatch_module, method)))

    # ---------------------------------------------------------------- integrity records
    mods, classes = _watched(chapter)
    flat: list = []  # (dict, name, value, label): checked at every boundary
    owner_of: dict = {}  # id(class __dict__) -> class
    class_names: list = []  # (class, its attribute names at arming)

    def boundary() -> None:
        """Called by the private core after every call into student code and before every comparison."""
        why = boundary_problem(flat, class_names)
        if why is not None:
            boundary_problems.append(why)
            restore_records(flat, owner_of, class_names)
            raise integrity_error("a function the checks use was replaced or a class they use was changed")
        if len_function_modes() or len_dispatch_modes() or gettrace() is not None:
            boundary_problems.append("a torch mode or trace hook was installed while the checks ran")
            raise integrity_error("a torch mode or trace hook was installed")
        if tuple(dispatch_dump(n) for n in compare_ops) != compare_at_arm:
            boundary_problems.append("a kernel of a PyTorch operator the checks compare with was replaced")
            raise integrity_error("a PyTorch operator's kernel was replaced")
        # a check whose verdict is the kernel's alone: every operator, so that a kernel registered inside the
        # check (and freed with it before the verdict ends) is seen at the next boundary
        if whole_table[0] and tuple(dispatch_dump(n) for n in aten_ops) != ops_at_arm:
            boundary_problems.append("a kernel of a PyTorch operator was replaced (torch.library)")
            raise integrity_error("a PyTorch operator's kernel was replaced")

    def student_line(exc: BaseException) -> str:
        """`` (your line N)`` for the innermost frame of ``exc``'s traceback that runs the notebook's own code (its
        globals are the notebook's): the private core's crash messages name the student's line, as the public
        one's do. Only this function may read a traceback's frames while the checks run (the hook's rule); it reads
        line numbers and globals' identity, no source text (linecache could run the notebook's code)."""
        tb, line = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_globals is user_ns:
                line = tb.tb_lineno
            tb = tb.tb_next
        return f" (your line {line})" if line is not None else ""

    student_line_code = student_line.__code__
    core_g, checks_g = _private_world(core, checks_mod, boundary)
    core_g["student_line"] = student_line
    time_limit, timeout_message, crash_message = (
        core_g["time_limit"],
        core_g["timeout_message"],
        core_g["crash_message"],
    )
    private_dicts = (core_g, checks_g)
    recorder = core_g["_RECORDER"]
    encode_traces = _encode_traces
    exercises = checks_mod.EXERCISES
    # each exercise graded on its own: one that calls another exercise also runs with the course's version of it
    find_dependencies = core_g["dependencies"]
    # the course's versions of earlier exercises, swapped into the notebook while a later one is checked: copies
    # whose globals are a copy of the public checks module's (what the notebook can import anyway), so an object
    # the notebook keeps leads nowhere near the private copies
    public_globals = dict(vars(checks_mod))
    references = {
        dep: _clone(fn, public_globals) if isinstance(fn, types.FunctionType) else fn  # a class: the public one
        for dep, fn in exercises.references.items()
    }
    exercise_order = tuple(ex.name for ex in exercises)
    checks = {
        ex.name: tuple(
            checks_g[fn.__name__]
            if checks_g.get(fn.__name__) is not None and checks_g[fn.__name__].__code__ is fn.__code__
            else _clone(fn, checks_g)
            for fn in list(ex.visible) + list(ex.hidden)
        )
        for ex in exercises
    }
    before = snapshot_of(mods, classes, private_dicts, checks)
    flat[:], owner_of_now, class_names[:] = _boundary_records(mods, classes, private_dicts)
    owner_of.update(owner_of_now)
    threads_at_arm = thread_count()
    # classes whose attributes may not be set: every class the watched modules hold now, and torch's C bases
    protected_classes = {id(c): c for c in classes.values()}
    for obj in mods.values():
        protected_classes.update({id(v): v for v in vars(obj).values() if isinstance(v, type)})

    def integrity() -> list:
        problems = changes(before, snapshot_of(mods, classes, private_dicts, checks), classes)
        if gettrace() is not None or getprofile() is not None:
            problems.append("a trace/profile hook is installed")
        if len_function_modes() or len_dispatch_modes():
            problems.append("a torch function/dispatch mode is active")
        if tuple(dispatch_dump(n) for n in aten_ops) != ops_at_arm:
            problems.append("a kernel of a PyTorch operator was replaced (torch.library)")
        return problems[:6]

    # ---------------------------------------------------------------- the engine: the only writer of verdicts
    def engine():
        result = None
        while True:
            name = yield result
            gc_collect()
            gc_was = gc_isenabled()
            gc_disable()  # no finalizer of the student's objects runs in the middle of a comparison
            boundary_problems.clear()
            try:
                violations = integrity()
            except Exception as err:
                violations = [f"the grader's integrity check failed: {type(err).__name__}"]
            restore_records(flat, owner_of, class_names)  # the checks run on what was recorded at arming
            failures = []
            extra_threads = thread_count() - threads_at_arm
            obj = user_ns.get(name, missing)
            fns = checks.get(name, ())
            traces: list = []  # per run, per check: the calls into the student's code, for the worker to judge
            had_deps = [False]
            if not fns:
                failures.append(f"{name} is not an exercise of this chapter")
            elif obj is missing:
                failures.append(f"{name} is not defined in the notebook")
            elif isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", "__main__") != "__main__":
                failures.append(f"{name} was not written in the notebook (it comes from {obj.__module__})")
            else:
                active[0] = True
                deps = find_dependencies(references, name, obj, exercise_order)
                had_deps[0] = bool(deps)
                own_failures: list = []  # with deps: the same checks on the student's own versions of them
                runs = ((failures, deps), (own_failures, {})) if deps else ((failures, {}),)
                sink, completed = failures, False
                try:
                    with time_limit(exercise_seconds) as expired:
                        for sink, swap in runs:
                            saved = {dep: g[dep] for dep, g in swap.items()}
                            try:
                                for dep, g in swap.items():
                                    g[dep] = references[dep]
                                run_traces: list = []
                                traces.append(run_traces)
                                for fn in fns:
                                    trace: list = []
                                    run_traces.append(trace)
                                    recorder.update(trace=trace, replay=None, depth=0, leaves=[])
                                    whole_table[0] = fn.__name__ in in_kernel_checks
                                    try:
                                        with disable_subclasses(), disable_dispatch():
                                            fn(obj)
                                    except check_failed as err:
                                        sink.append(str(err).splitlines()[0][:200])
                                    except integrity_error:
                                        sink.append("the grading machinery was changed while the checks ran")
                                    except Exception as err:
                                        sink.append(crash_message(err)[:200])
                                    except (timeout_error, KeyboardInterrupt):
                                        raise  # the time limit (or the cell's): stop, do not call the answer again
                                    except BaseException as err:
                                        sink.append(f"the student's code raised {type(err).__name__}")
                                    finally:
                                        recorder.update(trace=None, depth=0, leaves=[])
                                        whole_table[0] = False
                                    if expired[0]:  # the answer swallowed the time-out: stop all the same
                                        raise timeout_error(exercise_seconds)
                            finally:
                                for dep, g in swap.items():
                                    g[dep] = saved[dep]
                        completed = True
                except timeout_error:
                    sink.append(timeout_message(name, exercise_seconds))
                except KeyboardInterrupt:
                    sink.append(f"{name}: the checks were interrupted (the cell ran past its time limit)")
                finally:
                    active[0] = False
                if deps and failures and completed and not own_failures:
                    failures.clear()  # the student's own versions fit this answer: full marks either way
            try:
                after = integrity()
            except Exception as err:
                after = [f"the grader's integrity check failed: {type(err).__name__}"]
            violations += [v for v in boundary_problems + after if v not in violations]
            restore_records(flat, owner_of, class_names)
            if gc_was:
                gc_enable()
            entry = {
                "type": "verdict",
                "exercise": name,
                "passed": not failures and not violations and bool(fns),
                "failures": failures[:3],
                "violations": violations[:6],
                "threads": extra_threads,
                "seq": seq[0],
                "deps": had_deps[0],
            }
            try:
                entry["traces"] = encode_traces(traces)
            except Exception:  # the worker then cannot judge it: the exercise earns nothing
                entry["traces"] = None
            seq[0] += 1
            line = signed_line(signer, entry)
            s = new_socket(AF_UNIX, SOCK_STREAM)
            try:
                s.connect(address)  # the audit hook lets only this frame (and write_note) connect here
                s.sendall(line)
            finally:
                s.close()
            result = (entry["passed"], failures, violations)

    gen = engine()
    next(gen)
    engine_code = engine.__code__
    del engine

    # ---------------------------------------------------------------- the audit hook
    busy: set = set()
    own_codes = set()

    def protected_frame_chain(frame) -> bool:
        for _ in range(20000):  # deeper than any stack the recursion limit allows
            if frame is None:
                return False
            if (
                frame.f_code in own_codes
                or frame.f_globals is own_globals
                or frame.f_globals is core_g
                or frame.f_globals is checks_g
            ):
                return True
            frame = frame.f_back
        return False

    def write_note(entry: dict) -> None:
        """An "armed" or "blocked" record. Verdicts are sent only from the engine's own code (a helper that could
        send any record would be a way to forge one)."""
        if entry.get("type") not in ("armed", "blocked"):
            return
        line = signed_line(signer, dict(entry, seq=seq[0]))
        seq[0] += 1
        s = new_socket(AF_UNIX, SOCK_STREAM)
        try:
            s.connect(address)
            s.sendall(line)
        finally:
            s.close()

    note_holder.append(write_note)

    def problem(event: str, args) -> str | None:
        why = deny_always.get(event)
        if why is not None:
            return why
        if event == "import" and args and str(args[0]).split(".")[0] in ("cffi", "_cffi_backend"):
            return "loading C code"
        if event == "import" and args and str(args[0]).split(".")[-1] == "_posixsubprocess":
            return "spawning a process"  # fork_exec has no audit event: no fresh copy of it, by any path or loader
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            addr = socket_address(args)
            if addr is unreadable:
                return "writing the grader's records"
            if isinstance(addr, str) and (addr.startswith(record_prefix) or record_file in addr):  # any worker's
                caller = getframe(2)  # 0: this function, 1: the hook, 2: the code that connects
                ok = addr == address and event == "socket.connect" and caller.f_code in own_codes
                return None if ok else "writing the grader's records"
            return "network access" if remote(addr) else None
        if event == "object.__getattr__" and len(args) > 1:
            obj, attr = args[0], args[1]
            if attr == "gi_frame" and obj is gen:
                return "reading the grader's state"
            if attr == "tb_frame":
                if getframe(2).f_code is student_line_code:  # the guard's own reader of the student's line
                    return None
                if not active[0] and protected_frame_chain(obj.tb_frame):
                    return "reading the grader's state"
                if active[0] and (getframe(2).f_globals is user_ns or obj.tb_frame.f_globals is user_ns):
                    return "frame introspection while the checks run"
            return None
        if (
            event == "sys._getframe"
            and active[0]
            and args
            and (args[0].f_globals is user_ns or getframe(2).f_globals is user_ns)
        ):
            return "frame introspection while the checks run"  # the notebook's own code, called by a check
        if event in ("function.__new__", "exec") and args and args[0] in own_codes:
            return "running the grader's code outside the grader"
        if event == "object.__setattr__" and args:
            return setattr_problem(args[0], args[1] if len(args) > 1 else "", protected_classes, private_dicts)
        if event == "object.__delattr__" and args and protected_classes.get(id(args[0]), missing) is args[0]:
            return "patching a class the checks use"
        if event in path_events and args and file_rules:
            for arg in args[:2]:
                if isinstance(arg, (str, bytes, path_like)) and outside(arg):
                    return "changing files outside the submission's sandbox"
            return None
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args and args[0] not in (0, getpid()):
            return "signalling other processes"
        if event == "open" and file_rules:
            return open_problem(args)
        return None

    def hook(event: str, args) -> None:
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            why = problem(event, args)
            if why is not None:
                write_note({"type": "blocked", "event": event, "what": why})
        finally:
            busy.discard(me)
        if why is not None:
            raise PermissionError(f"{why} is not allowed while grading ({event})")

    own_codes.update(
        {
            engine_code,
            hook.__code__,
            problem.__code__,
            write_note.__code__,
            protected_frame_chain.__code__,
            boundary.__code__,
            student_line_code,
        }
    )

    # process spawning that no audit event covers: remove the module that does it from every module's reach
    for mod in list(sys.modules.values()):
        if getattr(mod, "_posixsubprocess", None) is sys.modules.get("_posixsubprocess"):
            try:
                setattr(mod, "_posixsubprocess", None)  # noqa: B010 - a module attribute mypy does not know
            except Exception:
                pass
    sys.modules["_posixsubprocess"] = None  # type: ignore[assignment]  # a fresh import of it now fails

    sys.addaudithook(hook)

    # The entry point is the generator's own send (a built-in method: no __globals__ that lead to this copy's).
    _ARMED["verdict"] = gen.send
    busy.add(get_ident())  # the "armed" record goes through the same channel
    try:
        write_note({"type": "armed", "chapter": chapter})
    finally:
        busy.discard(get_ident())


def verdict(name: str) -> None:
    """Run exercise ``name``'s private checks on the notebook's object; the engine records the result (signed, for
    the worker, which judges the checks again on it). Raises when they failed (so nbgrader's own score of the test
    cell agrees): :class:`GradingIntegrityError` when the grading machinery was changed, else ``CheckFailed`` with
    the failed checks' first lines."""
    entry = _ARMED.get("verdict")
    if entry is None:
        raise GradingIntegrityError("the grading guard is not armed")
    passed, failures, violations = entry(name)
    if violations:
        raise GradingIntegrityError("the grading machinery was changed by the notebook: " + "; ".join(violations))
    if not passed:
        from autograder.core import CheckFailed  # absolute: this module is autograder.grading.guard

        raise CheckFailed(f"{len(failures)} check(s) failed for {name}:\n" + "\n".join(f"✘ {f}" for f in failures))
