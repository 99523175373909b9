"""The grading kernel's recorder and its channel, outside a kernel (autograder/grading/guard.py and channel.py;
design: docs/grading-design.md).

The recorder, the audit hook and the record sender hold the key and the socket address and stay closures inside
``_arm`` (they are exercised with real kernels by tests/test_robust_grading.py); what is tested here are the pure
parts they are built from, and the worker's end of the record channel."""

import hashlib
import hmac
import json
import os
import socket
import sys

import pytest

from autograder.grading import channel, guard, scoring


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
    assert open_problem((str(hidden / "answers.py"), "r", 0)) == "guard: grader's files"
    assert open_problem((str(hidden), "r", 0)) == "guard: grader's files"
    assert open_problem((str(elsewhere), "r", 0)) == "guard: directory"
    assert open_problem((str(elsewhere / "data.txt"), "r", 0)) is None, "reading elsewhere is the OS's business"
    assert open_problem((str(elsewhere / "data.txt"), "a", 0)) == "guard: writing outside"
    assert open_problem((str(home / "link"), None, os.O_WRONLY)) == "guard: writing outside"
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


def _signed(key, entries):
    """Lines signed by ``guard._signing`` with ``key``, this function being the one sender it signs for (in the
    kernel: the recorder's engine and its note writer)."""
    signer = guard._signing(
        guard._hmac_pads(key), frozenset({_signed.__code__}), sys._getframe, guard._plain_builtins()
    )
    next(signer)
    lines = []
    for entry in entries:  # (a loop, not a comprehension: the comprehension's frame would be the caller)
        lines.append(signer.send(entry))
    return lines


def _served(key, entries) -> channel.RecordServer:
    """A closed record server that received ``entries``, signed with ``key``, one connection each."""
    server = channel.RecordServer()
    try:
        for line in _signed(key, entries):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server.address)
                s.sendall(line)
    finally:
        server.close()
    return server


def test_records_reach_the_worker_only_signed_and_from_the_kernel():
    key = os.urandom(32)
    server = channel.RecordServer()
    entry = {"type": "verdict", "exercise": "causal_mask", "passed": True}
    good, twice = _signed(key, [entry, entry])
    lines = [
        good,
        _signed(os.urandom(32), [entry])[0],  # forged
        twice * 2,  # two lines in one connection
    ]
    try:
        for line in lines:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server.address)
                s.sendall(line)
    finally:
        server.close()
    assert server.records(os.getpid(), key) == ([dict(entry, seq=0)], 2)
    assert server.records(os.getpid() + 1, key) == ([], 3), "only the kernel's process id counts"
    assert json.loads(json.loads(good)["body"]) == dict(entry, seq=0)


def test_the_signer_numbers_what_it_signs_signs_for_its_senders_only_and_takes_plain_data_only():
    """Issue 46: the signer (``guard._signing``) is HMAC-SHA256, numbers its lines 0, 1, 2 … itself (so the worker
    sees a line held back or sent twice), signs nothing for another caller (the notebook may reach the recorder's
    frame and find ``send``), nothing but exact plain data (no code of the notebook's runs while it holds the key),
    and looks up no global name (the recorder's globals can be reached; names bound in them could be rebound)."""
    import dis

    key = os.urandom(32)

    class Sneaky(str):
        def __hash__(self):
            raise AssertionError("the notebook's code ran in the signer")

    entries = [{"type": "armed"}, {"type": "verdict", "failures": ["x", "é"], "deps": True, "threads": 0}]
    entries += [{"type": "verdict", "exercise": Sneaky("a")}, {"type": "verdict", "n": 1.5}, {"type": "verdict"}]
    lines = _signed(key, entries)
    assert lines[2] is None and lines[3] is None, "a str subclass, a float: not signed"
    bodies = []
    for line in [lines[0], lines[1], lines[4]]:
        outer = json.loads(line)
        assert hmac.compare_digest(outer["mac"], hmac.new(key, outer["body"].encode(), hashlib.sha256).hexdigest())
        bodies.append(json.loads(outer["body"]))
    assert bodies == [dict(entries[0], seq=0), dict(entries[1], seq=1), dict(entries[4], seq=2)], "no number skipped"
    signer = guard._signing(guard._hmac_pads(key), frozenset(), sys._getframe, guard._plain_builtins())
    next(signer)
    assert signer.send({"type": "verdict"}) is None, "signs for its senders only"
    codes = guard._codes_in(guard._signing.__code__)
    assert len(codes) > 1 and not [
        (c.co_name, i.argval)
        for c in codes
        for i in dis.get_instructions(c)
        if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    ]


def test_the_worker_keeps_a_bounded_number_of_record_bytes_and_says_how_many_it_dropped(monkeypatch):
    """A notebook that sends many large records (each under one record's cap) cannot grow the worker: past
    ``MAX_TOTAL_BYTES`` or ``MAX_RECORDS`` nothing is kept, the dropped connections are counted, and scoring turns
    them into an integrity row that says why. Caps made small here; the rule is the same at full size."""
    monkeypatch.setattr(channel, "MAX_RECORD_BYTES", 4096)
    monkeypatch.setattr(channel, "MAX_TOTAL_BYTES", 10_000)
    monkeypatch.setattr(channel, "MAX_RECORDS", 5)
    key = os.urandom(32)
    small = {"type": "verdict", "exercise": "causal_mask", "passed": True}
    big = {"type": "blocked", "event": "open", "what": "x" * 3000}  # one line of about 3.1 KB, under one record's cap
    entries = [small] + [big] * 4 + [small] * 3
    server = _served(key, entries)
    kept, forged = server.records(os.getpid(), key)
    assert [{k: v for k, v in r.items() if k != "seq"} for r in kept] == [small, big, big, big, small]
    assert [r["seq"] for r in kept] == [0, 1, 2, 3, 5] and forged == 0  # 3 big lines fill the bytes; 5 records in all
    assert server.overflow == 3
    assert sum(len(d) for _, d in server._got) <= channel.MAX_TOTAL_BYTES
    scored = scoring.score({"causal_mask": 2}, kept + [{"type": "armed"}], forged, [], overflow=server.overflow)
    assert scored.status == "integrity" and scored.scores == {"causal_mask": 0.0}
    assert "3 record(s) dropped" in str(scored.reasons[0]), scored.reasons


def test_the_worker_reads_each_record_once_and_lets_its_line_go():
    """``records(..., release=True)`` (the worker's call) gives the same records and lets go of every line it read;
    a line is one line as ``splitlines`` sees it (a trailing newline, CR or CRLF; none inside)."""
    key = os.urandom(32)
    entries = [{"type": "verdict", "exercise": "causal_mask", "traces": "x" * 3_000_000}, {"type": "armed"}]
    server = _served(key, entries)
    assert all(isinstance(data, bytearray) for _, data in server._got)
    numbered = [dict(e, seq=i) for i, e in enumerate(entries)]
    assert server.records(os.getpid(), key, release=True) == (numbered, 0)
    assert server._got == [] and server.records(os.getpid(), key) == ([], 0)
    one = [b"{}\n", b"{}", b"{}\r\n", b"{}\r"]
    assert all(channel._one_line(bytearray(d)) for d in one)
    assert not any(channel._one_line(d) for d in (b"", b"\n", b"{}\n{}", b"{}\r{}\n", b"{}\n\n"))
    assert [len(d.splitlines()) == 1 and d.splitlines()[0] != b"" for d in one] == [True] * 4


def test_decode_traces_reads_a_bounded_amount_a_slice_at_a_time():
    """A record is decoded a slice at a time (several slices here) and inflated to at most ``limit`` bytes: a
    compressed bomb, or text that is not base64 (padding in the middle), is refused, not read whole."""
    import base64
    import zlib

    import torch

    big = [torch.arange(600_000)]  # 4.8 MB saved: about 1.3 MB of base64, several slices
    text = guard.encode_traces(big)
    assert len(text) > 16 * channel._CHUNK
    assert torch.equal(channel.decode_traces(text)[0], big[0])
    bomb = base64.b64encode(zlib.compress(bytes(80 << 20))).decode()  # 80 MB of zeros, 0.1 MB compressed
    with pytest.raises(ValueError, match="decompressed"):
        channel.decode_traces(bomb)
    with pytest.raises(ValueError, match="decompressed"):
        channel.decode_traces(text, limit=1 << 20)
    with pytest.raises(ValueError):
        channel.decode_traces("QUI=QUJD")  # padding in the middle
    with pytest.raises(ValueError):
        channel.decode_traces(text[:-1])


def test_verdict_without_arming_fails():
    with pytest.raises(guard.GradingIntegrityError):
        guard.verdict("causal_mask")


def _armed_run(tmp_path, chapter: str, code: str) -> tuple[list[dict], int, str]:
    """Run ``code`` as a notebook would (``__main__``'s globals), in a Python armed as a grading kernel is (a plain
    process here, no kernel, no jail); returns the records the worker got, the forged count and the output."""
    import subprocess

    key = os.urandom(32)
    server = channel.RecordServer()
    config = tmp_path / "guard.json"
    config.write_text(
        json.dumps({"key": key.hex(), "address": server.address, "sandbox": str(tmp_path), "file_rules": False})
    )
    script = tmp_path / "notebook.py"
    script.write_text(
        f"import autograder.grading.guard as _autograder_guard\n_autograder_guard.arm({chapter!r})\n{code}"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, AUTOGRADER_GUARD_CONFIG=str(config), PYTHONPATH=root)
    try:
        ran = subprocess.Popen(
            [sys.executable, str(script)], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        out = ran.communicate(timeout=300)[0].decode()
    finally:
        server.close()
    records, forged = server.records(ran.pid, key)
    assert ran.returncode == 0, out[-3000:]
    return records, forged, out


_CORRECT_REPEAT_KV = "def repeat_kv(x, n_rep):\n    return x.repeat_interleave(n_rep, dim=1)\n"


def test_patching_json_hmac_or_socket_changes_no_record(tmp_path):
    """Issue 46: the recorder signed with ``hmac.HMAC`` and wrote with ``json.dumps`` and ``socket.socket``, whose
    Python-level classes a notebook can patch: ``json.JSONEncoder = …`` rewrote every record's body before it was
    signed (its exercise, its number), a patched ``hmac.HMAC.copy`` was handed the keyed signer, a patched
    ``socket.socket.sendall`` every signed line and the recorder's connection. Now the signer is C hash objects and
    its own JSON, the socket the C type: none of them is called."""
    code = (
        """
import hmac, json, socket
SEEN = []
class Relabel(json.JSONEncoder):
    def encode(self, o):
        SEEN.append("json")
        return super().encode(dict(o, exercise="attend_with_cache", seq=7) if isinstance(o, dict) else o)
json.JSONEncoder = Relabel
json._default_encoder = Relabel()
_copy, _sendall = hmac.HMAC.copy, socket.socket.sendall
hmac.HMAC.copy = lambda self: SEEN.append(("hmac", self)) or _copy(self)
socket.socket.sendall = lambda self, data: SEEN.append(("line", data)) or _sendall(self, data)
"""
        + _CORRECT_REPEAT_KV
        + """
_autograder_guard.verdict("repeat_kv")
print("SEEN", len(SEEN))
"""
    )
    records, forged, out = _armed_run(tmp_path, "ch08_kv_cache", code)
    assert "SEEN 0" in out, out[-2000:]
    assert forged == 0 and [(r["type"], r.get("exercise"), r["seq"]) for r in records] == [
        ("armed", None, 0),
        ("verdict", "repeat_kv", 1),
    ]


def test_code_with_globals_of_its_own_finds_no_key_above_a_check(tmp_path):
    """Issue 46, the frame rule: code whose globals are not the notebook's (``types.FunctionType`` with a fresh dict,
    code ``exec``-ed in one) was let call ``sys._getframe`` while a check ran, and walk ``f_back`` to the recorder's
    frame, whose locals held the keyed signer. Now ``sys._getframe`` never returns a frame of the recorder's own
    (nor one above the signer), and what the recorder's frame holds signs nothing: its ``send`` signs only for the
    recorder, and its generator's frame is refused. The answer itself is right and still passes (library code
    that looks at frames keeps working)."""
    code = """
import os, types
_src = '''
def probe(x, n_rep):
    import sys
    frames, f = [], sys._getframe(0)
    while f is not None:
        frames.append(f)
        f = f.f_back
    for depth, f in enumerate(frames):
        for k, v in list(f.f_locals.items()):
            kind = type(v).__name__
            if kind in ("HMAC", "HASH") or hasattr(v, "hexdigest"):
                FOUND.append(("key", f.f_code.co_name, k))
            if kind == "builtin_function_or_method" and getattr(v, "__name__", "") == "send" and k != "result":
                try:
                    FOUND.append(("signed", k, v({"type": "verdict", "exercise": "repeat_kv", "traces": None})))
                except Exception as exc:
                    FOUND.append(("send raised", k, type(exc).__name__))
                try:
                    FOUND.append(("frame", k, v.__self__.gi_frame))
                except PermissionError:
                    FOUND.append(("frame refused", k))
        if f.f_code.co_name == "engine":
            try:
                sys._getframe(depth)
                FOUND.append(("engine frame handed out",))
            except PermissionError:
                FOUND.append(("engine frame refused",))
    return x.repeat_interleave(n_rep, dim=1)
'''
FOUND = []
_g = {"__builtins__": __builtins__, "FOUND": FOUND}
exec(_src, _g)
repeat_kv = types.FunctionType(_g["probe"].__code__, _g, "repeat_kv")
repeat_kv.__module__ = "__main__"
_autograder_guard.verdict("repeat_kv")
print("FOUND", sorted(set(map(repr, FOUND))))
try:
    os.system("true")
except PermissionError as exc:  # the refusal is a message, rendered in the reader's edition
    print("REFUSED", exc.args[0].render("zh"))
"""
    records, forged, out = _armed_run(tmp_path, "ch08_kv_cache", code)
    assert "REFUSED 评分时不允许启动进程（os.system）" in out, out[-2000:]
    assert {"type": "blocked", "event": "os.system", "what": "guard: process"} in [
        {k: r.get(k) for k in ("type", "event", "what")} for r in records
    ]
    found = out.split("FOUND", 1)[1]
    assert "'key'" not in found and "engine frame handed out" not in found, found
    assert "('signed', 'sign', None)" in found and "('frame refused', 'sign')" in found, found
    assert "engine frame refused" in found, found
    verdicts = [r for r in records if r["type"] == "verdict"]
    assert forged == 0 and [r["exercise"] for r in verdicts] == ["repeat_kv"] and verdicts[0]["traces"]
    assert sorted(r["seq"] for r in records) == list(range(len(records)))


def test_the_notebooks_own_check_runs_send_no_record(tmp_path):
    """Issue 46: one verdict per exercise is the protocol, so nothing a notebook legitimately runs may send one: its own
    ``EXERCISES.run`` (the release's test cells, a student's extra cell, visible or hidden checks) runs the checks in
    the kernel and sends nothing; only the grading notebook's verdict cell does."""
    code = (
        "from autograder.ch08_kv_cache import EXERCISES\n"
        + _CORRECT_REPEAT_KV
        + 'EXERCISES.run("repeat_kv", repeat_kv)\nEXERCISES.run("repeat_kv", repeat_kv, hidden=True)\n'
        + '_autograder_guard.verdict("repeat_kv")\nEXERCISES.run("repeat_kv", repeat_kv)\n'
    )
    records, forged, out = _armed_run(tmp_path, "ch08_kv_cache", code)
    assert "checks passed for repeat_kv" in out, out[-2000:]
    assert forged == 0 and [(r["type"], r.get("exercise"), r["seq"]) for r in records] == [
        ("armed", None, 0),
        ("verdict", "repeat_kv", 1),
    ]
