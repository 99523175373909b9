"""The grading kernel's recorder: it runs the checks on the notebook's answers and sends what the answers returned.

Imported by the setup cell of the *grading* notebook, before any student code, with ``arm(chapter)``; each test cell
is ``verdict(name)``. The verdict is the worker's (``judge.py``), on the signed record this module sends over the one
writer channel (``channel.py``); the audit hook keeps the channel, the key and the recorder's frames out of the
notebook's reach and contains the kernel, each refusal a "blocked" record. Why the parts look the way they do:
docs/grading-design.md ("How guard.py is built", "Containment and secrecy").
"""

from __future__ import annotations

import _socket
import builtins
import gc
import hashlib
import json
import os
import socket
import sys
import threading
import time
import types

from .channel import RECORD_FILE, RECORD_PREFIX

_MISSING = object()
_ARMED: dict = {}  # "verdict": the recorder's entry point (replacing it only loses the student's own records)


class GradingIntegrityError(RuntimeError):
    """The grading recorder is not armed; the submission scores zero."""


# ------------------------------------------------------------------------------------------------ containment rules


def _path_rules(writable, hidden_files):
    """(outside, open_problem) for the audit hook. ``outside(path)``: True when ``path`` is not under one of the
    ``writable`` folders (nor /dev/null). ``open_problem(args)``: the refusal's key for the ``open`` event with
    ``args`` (a hidden file, a directory, writing outside), or None. The os functions they use are bound now."""
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
                return "guard: grader's files"
        if isdir(real):  # a directory descriptor would let os.open(..., dir_fd=) escape these checks
            return "guard: directory"
        mode, flags = (args[1] if len(args) > 1 else "r"), (args[2] if len(args) > 2 else 0)
        writing = (isinstance(mode, str) and any(ch in mode for ch in "wax+")) or (
            isinstance(flags, int) and flags & write_flags
        )
        if writing and outside(real):
            return "guard: writing outside"
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


# ------------------------------------------------------------------------------------------------ the record


def encode_traces(traces: list) -> str:
    """The checks' recorded calls (plain data: tensors, numbers, strings, lists) as the text a verdict record
    carries: ``torch.save``, zlib, base64 (the worker reads it with ``torch.load(weights_only=True)``)."""
    import base64
    import io
    import zlib

    import torch

    buf = io.BytesIO()
    torch.save(traces, buf)
    return base64.b64encode(zlib.compress(buf.getvalue(), 6)).decode("ascii")


def _hmac_pads(key: bytes, sha256=hashlib.sha256) -> tuple:
    """HMAC-SHA256 (RFC 2104) as its two keyed SHA-256 states ``(inner, outer)``, C hash objects the notebook cannot
    patch (``hmac.HMAC``'s methods it could); whoever holds them can sign, so only the signer's frame does."""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    return sha256(bytes(b ^ 0x36 for b in key)), sha256(bytes(b ^ 0x5C for b in key))


def _codes_in(code: types.CodeType) -> list:
    """``code`` and the code objects nested in it (its functions, comprehensions)."""
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _codes_in(const)
    return found


def _plain_builtins() -> tuple:
    """What :func:`_signing` needs of builtins and of the C JSON module, bound when called (at arming)."""
    import _json

    return str, int, bool, list, dict, type, sorted, _json.encode_basestring_ascii, int.__repr__, ", ".join


def _signing(pads, signers, getframe, plain):
    """The signer: a generator, sent an entry (a dict of exact str, int, bool, None, lists and dicts of them), that
    yields its signed line — ``{"body": <the entry as JSON, with "seq">, "mac": <HMAC of body>}`` and a newline — or
    None. It signs only for a caller whose code is one of ``signers`` and numbers what it signs, 0, 1, 2 …
    (``scoring.order_violations``). The key lives only in its frame; it looks up no global (every name is a
    parameter), calls nothing of the entry's and lets no exception out (docs/grading-design.md)."""
    str_t, int_t, bool_t, list_t, dict_t, type_, sorted_, quote, int_text, join = plain
    inner, outer = pads
    del pads, plain
    null, true, false = "null", "true", "false"

    def text(value):  # JSON of plain data; None (so the join fails) for anything else
        kind = type_(value)
        if kind is str_t:
            return quote(value)
        if value is None:
            return null
        if kind is bool_t:
            return true if value else false
        if kind is int_t:
            return int_text(value)
        if kind is list_t:
            return "[" + join([text(v) for v in value]) + "]"
        if kind is dict_t:
            return "{" + join([quote(k) + ": " + text(value[k]) for k in sorted_(value) if type_(k) is str_t]) + "}"
        return None

    seq, line = 0, None
    while True:
        entry = yield line
        line = None
        try:
            if getframe(1).f_code in signers and type_(entry) is dict_t:
                body = text(dict_t(entry, seq=seq))
                h = inner.copy()
                h.update(body.encode())
                mac = outer.copy()
                mac.update(h.digest())
                line = "{" + quote("body") + ": " + quote(body) + ", " + quote("mac") + ": "
                line = (line + quote(mac.hexdigest()) + "}\n").encode()
                seq = seq + 1
        except:  # noqa: E722 - a bare except looks up no exception class (a global the notebook could rebind)
            line = None


_DENIED = {  # refused always: the refusal's key -> the audit events it covers
    "guard: process": (
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
    ),
    "guard: ctypes": ("ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "ctypes.cdata", "ctypes.addressof"),
    "guard: gc": ("gc.get_objects", "gc.get_referrers", "gc.get_referents"),
    "guard: trace hooks": ("sys.settrace", "sys.setprofile"),
    "guard: frames": ("sys._current_frames",),
    "guard: audit hooks": ("sys.addaudithook", "cpython._PySys_ClearAuditHooks"),
}
_DENY_ALWAYS = {event: why for why, events in _DENIED.items() for event in events}

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
    """Called by the grading notebook's setup cell, before any student code (a no-op outside grading): runs
    :func:`_arm` on private copies of this module's functions, with a private copy of builtins."""
    if not os.environ.get("AUTOGRADER_GUARD_CONFIG") or _ARMED:
        return
    me = vars(sys.modules[__name__])
    own = dict(me)
    own["__builtins__"] = dict(vars(builtins))
    for k, v in list(own.items()):
        if isinstance(v, types.FunctionType) and v.__globals__ is me:
            own[k] = types.FunctionType(v.__code__, own, v.__name__, v.__defaults__, v.__closure__)
    own["_arm"](chapter)


def _arm(chapter: str) -> None:
    """Read the worker's key and address, start the recorder, install the audit hook. Everything with authority
    lives only in this function's closures (the socket address, the recorder's generator) or in the signer's frame
    (the key)."""
    config_path = os.environ["AUTOGRADER_GUARD_CONFIG"]
    with open(config_path) as f:
        config = json.load(f)
    os.unlink(config_path)
    pads = _hmac_pads(bytes.fromhex(config.pop("key")))  # handed to the signer below, and dropped here
    address = config["address"]
    sandbox = os.path.realpath(config["sandbox"])
    checks_mod = __import__(f"autograder.{chapter}", fromlist=["EXERCISES"])  # before any student code
    import _thread

    # The course's versions of the exercises (the kernel's form of the checks holds none): each built from the source
    # the worker sent, in a namespace of its own that holds what it needs and nothing else; reachable only from the
    # recorder, which swaps one into the notebook while a later exercise that calls it is recorded.
    references, given = {}, config.pop("references", None)
    for ref_name, ref_source in (given or {}).items():
        ns = {"__name__": f"autograder.{chapter}", "__package__": "autograder"}
        exec(compile(ref_source, f"<the course's {ref_name}>", "exec"), ns)
        references[ref_name] = ns["_course_version"]
    if given is None:  # a kernel started without the worker's references: the checks module's own, if it has any
        references = dict(checks_mod.EXERCISES._references)

    from ..checks import trace
    from ..wording import Message, say

    user_ns = sys.modules["__main__"].__dict__
    own_globals = globals()  # this copy's globals: every frame running the recorder's own code has them
    # Bound now: the module's names (and os.path, sys, ...) can be rebound by the notebook later.
    socket_address, remote, encode = _socket_address, _remote, encode_traces
    unreadable, missing = _UNREADABLE, _MISSING
    get_ident, thread_count, getframe = threading.get_ident, _thread._count, sys._getframe
    exercise_seconds = config.get("exercise_timeout") or None  # one exercise's whole run, in seconds
    # the C socket type (socket.socket is a Python subclass whose sendall the notebook could replace, and be handed
    # every signed line, or send what it likes on the recorder's connection)
    AF_UNIX, SOCK_STREAM, new_socket = socket.AF_UNIX, socket.SOCK_STREAM, _socket.socket
    str_t, type_ = str, type
    gc_collect, getpid, path_like = gc.collect, os.getpid, os.PathLike
    gc_isenabled, gc_disable, gc_enable, pause = gc.isenabled, gc.disable, gc.enable, time.sleep
    deny_always, path_events = dict(_DENY_ALWAYS), frozenset(_PATH_EVENTS)  # private: the module's can be mutated
    record_prefix, record_file = RECORD_PREFIX, RECORD_FILE
    # writable: the sandbox's home and the notebook's own directory
    outside, open_problem = _path_rules((sandbox, os.path.realpath(os.getcwd())), config.get("hidden_files", []))
    file_rules = config.get("file_rules", True)  # jailed kernels: the operating system keeps them to their files

    active = [False]  # a verdict is being recorded
    exercises = checks_mod.EXERCISES
    record_exercise = exercises.record  # the checks in record mode (autograder/checks/exercises.py)
    checks = {ex.name: tuple(ex.visible) + tuple(ex.hidden) for ex in exercises}
    threads_at_arm = thread_count()

    # bound before the student's code runs: the recorder's own messages, sent as data
    said, message_t, message_data = say, Message, Message.to_json

    def student_line(exc: BaseException) -> object:
        """ "(your line N)" for the innermost frame of ``exc``'s traceback whose globals are the notebook's, or "".
        The only reader of a traceback's frames allowed while the checks run; it reads no source text (linecache
        could run the notebook's code)."""
        tb, line = exc.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_globals is user_ns:
                line = tb.tb_lineno
            tb = tb.tb_next
        return said("your line number", n=line) if line is not None else ""

    student_line_code = student_line.__code__
    trace.student_line = student_line  # what call() names the student's line with

    def deliver(line: bytes) -> None:
        """One signed line, one connection (the audit hook lets only the recorder's own code connect here)."""
        s = new_socket(AF_UNIX, SOCK_STREAM)
        try:
            s.connect(address)
            s.sendall(line)
        finally:
            s.close()

    # ---------------------------------------------------------------- the recorder: the only writer of verdicts
    def engine():
        result = None
        while True:
            name = yield result
            gc_collect()
            reasons: list = []  # the recorder's own (not defined, a time-out ...), never a reading of the checks
            extra_threads = thread_count() - threads_at_arm
            obj = user_ns.get(name, missing)
            fns = checks.get(name, ())
            traces: list = []  # per run, per check: the calls into the student's code, for the worker to judge
            deps = False
            if not fns:
                reasons.append(said("not an exercise", name=name))
            elif obj is missing:
                reasons.append(said("not defined", name=name))
            elif isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", "__main__") != "__main__":
                reasons.append(said("not written in the notebook", name=name, module=str(obj.__module__)))
            else:
                active[0] = True
                try:
                    traces, reasons, deps = record_exercise(name, obj, exercise_seconds, references)
                except BaseException as err:  # the recorder goes on to the next exercise whatever happened here
                    traces, reasons = [], [said("not recorded", name=name, error=type(err).__name__)]
                finally:
                    active[0] = False
            try:  # plain data only (exact types): the signer takes nothing else
                text = encode(traces)
                traces = text if type_(text) is str_t else None
            except Exception:  # the worker then cannot judge it: the exercise earns nothing
                traces = None
            try:
                shown = [message_data(f) if type_(f) is message_t else "?" for f in list(reasons)[:3]]
            except Exception:
                shown = ["?"]
            entry = {
                "type": "verdict",
                "exercise": str_t.__str__(name) if isinstance(name, str_t) else "?",
                "reasons": shown,
                "threads": extra_threads,
                "deps": deps is True,
                "traces": traces,
            }
            collecting = gc_isenabled()
            gc_disable()  # no finalizer of the notebook's runs while the key's frame is on the stack
            try:
                for _ in range(2000):  # another thread's note being signed: "generator already executing"
                    try:
                        line = sign(entry)  # numbered ("seq") and signed by the signer, or None
                        break
                    except ValueError:
                        line = None
                        pause(0.001)
            finally:
                if collecting:
                    gc_enable()
            if line is not None:
                deliver(line)
            result = reasons  # the test cell shows them; the worker judges the checks

    gen = engine()
    next(gen)
    engine_code = engine.__code__
    del engine

    # ---------------------------------------------------------------- the audit hook
    busy: set = set()
    own_codes: set = set()

    def below(frame, codes, globals_=None) -> bool:
        """Whether ``frame`` runs one of ``codes`` (or with ``globals_``), or is called from one that does."""
        for _ in range(20000):  # deeper than any stack the recursion limit allows
            if frame is None:
                return False
            if frame.f_code in codes or frame.f_globals is globals_:
                return True
            frame = frame.f_back
        return False

    def write_note(entry: dict) -> None:
        """An "armed" or "blocked" record. Verdicts are sent only from the recorder's own code (a helper that could
        send any record would be a way to forge one)."""
        if type_(entry) is not dict or entry.get("type") not in ("armed", "blocked"):
            return
        collecting = gc_isenabled()
        gc_disable()  # no finalizer of the notebook's runs while the key's frame is on the stack
        try:
            for _ in range(2000):  # another thread's record being signed: "generator already executing"
                try:
                    line = sign(entry)  # the signer takes an exact dict of plain data only
                    break
                except ValueError:
                    line = None
                    pause(0.001)
        finally:
            if collecting:
                gc_enable()
        if line is not None:
            deliver(line)

    # The signer (``_signing``): the key only in its frame; it signs for the recorder's two senders alone, and
    # numbers what it signs. Made after them (it needs their code), before any student code.
    signer = _signing(pads, frozenset({engine_code, write_note.__code__}), getframe, _plain_builtins())
    next(signer)
    sign = signer.send  # a built-in method: no globals, no closure; its generator's frame is refused below
    del pads
    signer_codes = frozenset(_codes_in(_signing.__code__))

    def problem(event: str, args) -> str | None:
        why = deny_always.get(event)
        if why is not None:
            return why
        if event == "import" and args and str(args[0]).split(".")[0] in ("cffi", "_cffi_backend"):
            return "guard: C code"
        if event == "import" and args and str(args[0]).split(".")[-1] == "_posixsubprocess":
            return "guard: process"  # fork_exec has no audit event: no fresh copy of it, by any path or loader
        if event in ("socket.connect", "socket.sendto", "socket.sendmsg"):
            addr = socket_address(args)
            if addr is unreadable:
                return "guard: records"
            if isinstance(addr, str) and (addr.startswith(record_prefix) or record_file in addr):  # any worker's
                caller = getframe(2)  # 0: this function, 1: the hook, 2: the code that connects
                ok = addr == address and event == "socket.connect" and caller.f_code in own_codes
                return None if ok else "guard: records"
            return "guard: network" if remote(addr) else None
        if event == "object.__getattr__" and len(args) > 1:
            obj, attr = args[0], args[1]
            if attr == "gi_frame" and (obj is gen or obj is signer):
                return "guard: state"
            if attr == "tb_frame":
                if getframe(2).f_code is student_line_code:  # the recorder's own reader of the student's line
                    return None
                if not active[0] and below(obj.tb_frame, own_codes, own_globals):
                    return "guard: state"
                if active[0] and (getframe(2).f_globals is user_ns or obj.tb_frame.f_globals is user_ns):
                    return "guard: frames while checking"
                if active[0] and (obj.tb_frame.f_code in own_codes or obj.tb_frame.f_globals is own_globals):
                    return "guard: state"
            return None
        if event == "sys._getframe" and args:
            frame, caller = args[0], getframe(2)
            if caller.f_code in own_codes:  # the recorder's own (the signer asking who called it)
                return None
            if active[0] and (frame.f_globals is user_ns or caller.f_globals is user_ns):
                return "guard: frames while checking"  # the notebook's own code, called by a check
            if frame.f_code in own_codes or frame.f_globals is own_globals or below(frame, signer_codes):
                return "guard: state"  # the recorder's frame; any frame above the signer's (a finalizer's)
            return None
        if event in ("function.__new__", "exec") and args and args[0] in own_codes:
            return "guard: grader's code"
        if event == "object.__setattr__" and len(args) > 2 and args[1] == "__code__" and args[2] in own_codes:
            return "guard: grader's code"
        if event in path_events and args and file_rules:
            for arg in args[:2]:
                if isinstance(arg, (str, bytes, path_like)) and outside(arg):
                    return "guard: changing files"
            return None
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and args and args[0] not in (0, getpid()):
            return "guard: signals"
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
            raise PermissionError(said("guard: refused", what=said(why), event=event))  # in the reader's edition

    own_codes.update(
        {
            engine_code,
            hook.__code__,
            problem.__code__,
            write_note.__code__,
            deliver.__code__,
            below.__code__,
            student_line_code,
            *_codes_in(_signing.__code__),
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
    """Record exercise ``name``'s checks on the notebook's object and send the record (signed) to the worker, which
    judges it. The kernel reads no verdict (its form of the checks holds no comparison): raises ``CheckFailed`` only
    with the recorder's own reasons (not defined in the notebook, a time-out), so that the test cell shows them;
    :class:`GradingIntegrityError` when the recorder is not armed."""
    entry = _ARMED.get("verdict")
    if entry is None:
        raise GradingIntegrityError("the grading recorder is not armed")
    reasons = entry(name)
    if reasons:
        from autograder.core import CheckFailed  # absolute: this module is autograder.grading.guard
        from autograder.wording import Message, lines, say

        raise CheckFailed(lines(Message("{name}:", name=name), *(say("check label", check=f) for f in reasons)))
