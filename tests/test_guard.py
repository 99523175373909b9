"""The in-kernel guard's parts, outside a kernel (autograder/grading/guard.py; design: docs/grading-design.md).

The engine, the audit hook and the record sender hold the key and the socket address and stay closures inside
``_arm`` (they are exercised with real kernels by tests/test_robust_grading.py); what is tested here are the pure
parts they are built from, and the worker's end of the record channel."""

import hashlib
import hmac
import json
import os
import socket
import types

import pytest

from autograder.grading import guard


def _module(**attrs):
    mod = types.ModuleType("fake")
    vars(mod).update(attrs)
    return mod


def _f(x):
    return x


def _g(x):
    return -x


def test_snapshot_changes_report_replaced_deleted_and_added():
    class Watched:
        def method(self):
            return 1

    mod = _module(f=_f, g=_g, constant=3)
    classes = {"Watched": Watched}
    before = guard._snapshot({"fake": mod}, classes, (), {})
    assert guard._changes(before, guard._snapshot({"fake": mod}, classes, (), {}), classes) == []
    mod.f = _g
    del mod.g
    Watched.extra = lambda self: 2
    found = guard._changes(before, guard._snapshot({"fake": mod}, classes, (), {}), classes)
    assert sorted(found) == ["Watched.extra was added", "fake.f was replaced", "fake.g was deleted"]


def test_snapshot_sees_code_swapped_in_place():
    def check(x):
        return x

    checks = {"ex": (check,)}
    before = guard._snapshot({}, {}, (), checks)
    check.__code__ = _g.__code__
    assert guard._changes(before, guard._snapshot({}, {}, (), checks), {}) == ["checks.ex:0 was replaced"]


def test_boundary_records_detect_and_restore():
    class Watched:
        def method(self):
            return 1

    original = Watched.__dict__["method"]
    mod = _module(f=_f)
    private = {"helper": _g}
    flat, owner_of, class_names = guard._boundary_records({"fake": mod}, {"Watched": Watched}, (private,))
    assert guard._boundary_problem(flat, class_names) is None

    mod.f, private["helper"] = _g, _f
    assert guard._boundary_problem(flat, class_names) == "fake.f was replaced while the checks ran"
    guard._restore(flat, owner_of, class_names)
    assert mod.f is _f and private["helper"] is _g and guard._boundary_problem(flat, class_names) is None

    Watched.method = lambda self: 2
    Watched.added = 1
    assert "Watched.method was replaced" in guard._boundary_problem(flat, class_names)
    guard._restore(flat, owner_of, class_names)
    assert Watched.__dict__["method"] is original and not hasattr(Watched, "added")

    Watched.added = 1  # an attribute added to a class: no entry was replaced
    assert guard._boundary_problem(flat, class_names) == "an attribute was added to Watched while the checks ran"


def test_path_rules(tmp_path):
    home, hidden, elsewhere = tmp_path / "home", tmp_path / "hidden", tmp_path / "elsewhere"
    for d in (home, hidden, elsewhere):
        d.mkdir()
    (hidden / "answers.py").write_text("x")
    (elsewhere / "data.txt").write_text("x")
    (home / "link").symlink_to(elsewhere / "data.txt")
    outside, open_problem = guard._path_rules([str(home)], [str(hidden)])

    assert not outside(home / "a.txt") and not outside(str(home)) and not outside("/dev/null")
    assert outside(elsewhere / "a.txt") and outside(str(home) + "-sibling/a.txt")
    assert outside(home / "link"), "a symlink is judged by where it leads"
    assert open_problem((str(hidden / "answers.py"), "r", 0)) == "reading the grader's files"
    assert open_problem((str(hidden), "r", 0)) == "reading the grader's files"
    assert open_problem((str(elsewhere), "r", 0)) == "opening a directory"
    assert open_problem((str(elsewhere / "data.txt"), "r", 0)) is None, "reading elsewhere is the OS's business"
    assert open_problem((str(elsewhere / "data.txt"), "a", 0)) == "writing outside the submission's sandbox"
    assert open_problem((str(home / "link"), None, os.O_WRONLY)) == "writing outside the submission's sandbox"
    assert open_problem((str(home / "out.txt"), "w", 0)) is None
    assert open_problem((3, "r", 0)) is None, "an open file descriptor was judged when it was opened"


def test_path_rules_keep_the_functions_bound_when_made(tmp_path, monkeypatch):
    outside, _ = guard._path_rules([str(tmp_path)], [])
    monkeypatch.setattr(os.path, "realpath", lambda p, **kw: str(tmp_path / "x"))
    assert outside("/etc/passwd"), "a later os.path.realpath = ... does not bend the rule"


def test_socket_addresses():
    record = "\0autograder-abc"
    assert guard._socket_address((None, record.encode())) == record
    assert guard._socket_address((None, bytearray(record.encode()))) == record
    assert guard._socket_address((None, ("10.0.0.1", 80))) == ("10.0.0.1", 80)
    assert [guard._remote(a) for a in (("10.0.0.1", 80), ("127.0.0.1", 80), ("::1", 80, 0, 0), "/tmp/x")] == [
        True,
        False,
        False,
        False,
    ]


def test_setattr_rules():
    class Protected:
        pass

    private = {"__name__": "private"}
    copied = types.FunctionType(_f.__code__, private)
    protected = {id(Protected): Protected}
    assert guard._setattr_problem(Protected, "x", protected, (private,)) == "patching a class the checks use"
    assert guard._setattr_problem(None, "x", protected, (private,)) is None
    assert guard._setattr_problem(copied, "__code__", protected, (private,)) == "patching a function the checks use"
    assert guard._setattr_problem(guard.verdict, "__defaults__", {}, ()) == "patching a function the checks use"
    assert guard._setattr_problem(_f, "__code__", protected, (private,)) is None, "the notebook's own functions"
    assert guard._setattr_problem(copied, "__doc__", protected, (private,)) is None


def test_records_reach_the_worker_only_signed_and_from_the_kernel():
    key = os.urandom(32)
    server = guard.RecordServer()
    signer = hmac.new(key, digestmod=hashlib.sha256)
    entry = {"type": "verdict", "exercise": "causal_mask", "passed": True}
    lines = [
        guard._signed_line(signer, entry),  # good
        guard._signed_line(hmac.new(b"guess", digestmod=hashlib.sha256), entry),  # forged
        guard._signed_line(signer, entry) * 2,  # two lines in one connection
    ]
    try:
        for line in lines:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server.address)
                s.sendall(line)
    finally:
        server.close()
    assert server.records(os.getpid(), key) == ([entry], 2)
    assert server.records(os.getpid() + 1, key) == ([], 3), "only the kernel's process id counts"
    assert json.loads(lines[0])["body"] == json.dumps(entry, sort_keys=True)


def test_verdict_without_arming_fails():
    with pytest.raises(guard.GradingIntegrityError):
        guard.verdict("causal_mask")
