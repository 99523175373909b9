"""The signed one-writer channel, worker side: the records the grading kernel's recorder (``guard.py``) sends.

The worker listens on an abstract Unix socket address (or a socket file the jail binds read-only into the kernel's
view) and keeps only connections from the kernel's process id (``SO_PEERCRED``: a process the kernel spawned is
refused) that carried exactly one line signed with the key it gave the kernel. A verdict record carries the
checks' recorded calls into the student's code as :func:`decode_traces` reads them: plain data loaded with
``torch.load(weights_only=True)``, so no code of the kernel's runs here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
import threading

MAX_RECORD_BYTES = 64 << 20  # one record line at most (a verdict carries its checks' recorded calls)
# All records of one notebook together: past it the row says so (:attr:`RecordServer.overflow`). A full-marks
# verdict is 1 KB to 0.8 MB encoded, 2 KB to 2 MB decompressed (every chapter's reference, measured).
MAX_TOTAL_BYTES = 128 << 20
MAX_RECORDS = 4096  # "blocked" notes are one per refused action; verdicts one per exercise and run
_CHUNK = 1 << 16  # bytes read from a connection at a time
RECORD_FILE = "autograder-records"  # the name of a record socket file (jailed kernels): only its recorder connects
RECORD_PREFIX = "\0autograder-"  # an abstract record address


class RecordServer:
    """The worker's end, listening from construction to :meth:`close` on ``address``: an abstract Unix socket
    address, or ``path`` (a socket file the jail binds read-only into the kernel's view)."""

    def __init__(self, path: str | None = None):
        self.address = path or RECORD_PREFIX + os.urandom(12).hex()
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.address)
        if path:  # a socket file (a jailed kernel has its own network namespace, so no abstract address)
            os.chmod(path, 0o666)
        self._srv.listen(128)
        self._srv.settimeout(0.2)
        self._got: list[tuple[int, bytearray]] = []
        self._kept = 0  # bytes in self._got
        self.overflow = 0  # connections whose data was not kept (over MAX_RECORDS or MAX_TOTAL_BYTES)
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
        """Read one connection: at most one record line's bytes, and nothing once the notebook's records have used
        up :data:`MAX_RECORDS` or :data:`MAX_TOTAL_BYTES` (then the connection is read and dropped, and counted in
        :attr:`overflow`). The bytes kept grow one buffer in place (a ``bytearray``: amortised, no quadratic copies,
        no list of chunks joined into a second copy at the end)."""
        size = struct.calcsize("3i")
        with conn:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))[0]
            conn.settimeout(10)
            full = len(self._got) >= MAX_RECORDS
            budget = 0 if full else min(MAX_RECORD_BYTES, MAX_TOTAL_BYTES - self._kept)
            data, received = bytearray(), 0
            try:
                while received <= MAX_RECORD_BYTES:  # past the budget the sender's bytes are read and dropped
                    chunk = conn.recv(_CHUNK)
                    if not chunk:
                        break
                    received += len(chunk)
                    if received <= budget:
                        data += chunk
                    elif data:
                        data = bytearray()  # over the budget: nothing of this connection is kept
            except OSError:
                pass
            if full or received > budget:  # over what one notebook may send: nothing of it is kept
                self.overflow += 1
                return
            self._kept += len(data)
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

    def records(self, pid: int, key: bytes, release: bool = False) -> tuple[list[dict], int]:
        """(the verified records, the number refused). Each line is parsed once, in place (no copy split off it),
        its body's signature checked a slice at a time (no encoded copy of the whole body); ``release``: each line's
        bytes are let go once read (the worker reads them once), so that they and the records made of them are not
        held at the same time."""
        good, bad = [], 0
        for i, (from_pid, data) in enumerate(self._got):
            if release:
                self._got[i] = (from_pid, bytearray())
            try:
                if from_pid != pid or not _one_line(data):
                    raise ValueError
                rec = json.loads(data)
                del data
                body = rec["body"]
                signer = hmac.new(key, digestmod=hashlib.sha256)
                for at in range(0, len(body), _CHUNK * 16):
                    signer.update(body[at : at + _CHUNK * 16].encode())
                if not hmac.compare_digest(signer.hexdigest(), rec["mac"]):
                    raise ValueError
                del rec
                good.append(json.loads(body))
            except Exception:
                bad += 1
        if release:
            self._got = []
        return good, bad


def _one_line(data: bytes | bytearray) -> bool:
    """Whether ``data`` is exactly one line (``splitlines`` would give one), without splitting a copy off it."""
    end = len(data) - (2 if data.endswith(b"\r\n") else 1 if data.endswith((b"\n", b"\r")) else 0)
    return end > 0 and data.find(b"\n", 0, end) < 0 and data.find(b"\r", 0, end) < 0


def decode_traces(text: str, limit: int = MAX_RECORD_BYTES) -> list:
    """``guard.encode_traces``' inverse, in the worker: at most ``limit`` bytes decompressed (a full-marks verdict
    is 2 KB to 2 MB; past the limit nothing more is inflated, and the record cannot be judged), a slice of the text
    at a time (no whole copy of it as bytes, nor of the compressed bytes), loaded with
    ``torch.load(weights_only=True)``."""
    import base64
    import io
    import zlib

    import torch

    if len(text) % 4 or text.find("=", 0, len(text) - 2) >= 0:  # padding only at the end: each slice checked alone
        raise ValueError("not base64")
    inflate, raw = zlib.decompressobj(), io.BytesIO()
    step = _CHUNK * 16  # characters of base64 at a time (a multiple of 4)
    for at in range(0, len(text), step):
        piece = base64.b64decode(text[at : at + step], validate=True)
        raw.write(inflate.decompress(piece, limit + 1 - raw.tell()))  # all of it, unless past the limit
        if raw.tell() > limit:
            raise ValueError(f"a record over {limit} bytes decompressed")
    raw.write(inflate.flush())
    if raw.tell() > limit:
        raise ValueError(f"a record over {limit} bytes decompressed")
    raw.seek(0)
    return torch.load(raw, weights_only=True)
