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


def test_records_reach_the_worker_only_signed_and_from_the_kernel():
    key = os.urandom(32)
    server = channel.RecordServer()
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


def test_the_worker_keeps_a_bounded_number_of_record_bytes_and_says_how_many_it_dropped(monkeypatch):
    """A notebook that sends many large records (each under one record's cap) cannot grow the worker: past
    ``MAX_TOTAL_BYTES`` or ``MAX_RECORDS`` nothing is kept, the dropped connections are counted, and scoring turns
    them into an integrity row that says why. Caps made small here; the rule is the same at full size."""
    monkeypatch.setattr(channel, "MAX_RECORD_BYTES", 4096)
    monkeypatch.setattr(channel, "MAX_TOTAL_BYTES", 10_000)
    monkeypatch.setattr(channel, "MAX_RECORDS", 5)
    key = os.urandom(32)
    signer = hmac.new(key, digestmod=hashlib.sha256)
    small = {"type": "verdict", "exercise": "causal_mask", "passed": True}
    big = {"type": "blocked", "event": "open", "what": "x" * 3000}  # one line of about 3.1 KB, under one record's cap
    server = channel.RecordServer()
    try:
        for entry in [small] + [big] * 4 + [small] * 3:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server.address)
                s.sendall(guard._signed_line(signer, entry))
    finally:
        server.close()
    kept, forged = server.records(os.getpid(), key)
    assert kept == [small, big, big, big, small] and forged == 0  # 3 big lines fill the bytes; then 5 records in all
    assert server.overflow == 3
    assert sum(len(d) for _, d in server._got) <= channel.MAX_TOTAL_BYTES
    scored = scoring.score({"causal_mask": 2}, kept + [{"type": "armed"}], forged, [], overflow=server.overflow)
    assert scored.status == "integrity" and scored.scores == {"causal_mask": 0.0}
    assert "3 record(s) dropped" in scored.reasons[0], scored.reasons


def test_the_worker_reads_each_record_once_and_lets_its_line_go():
    """``records(..., release=True)`` (the worker's call) gives the same records and lets go of every line it read;
    a line is one line as ``splitlines`` sees it (a trailing newline, CR or CRLF; none inside)."""
    key = os.urandom(32)
    signer = hmac.new(key, digestmod=hashlib.sha256)
    entries = [{"type": "verdict", "exercise": "causal_mask", "traces": "x" * 3_000_000}, {"type": "armed"}]
    server = channel.RecordServer()
    try:
        for entry in entries:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(server.address)
                s.sendall(guard._signed_line(signer, entry))
    finally:
        server.close()
    assert all(isinstance(data, bytearray) for _, data in server._got)
    assert server.records(os.getpid(), key, release=True) == (entries, 0)
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
