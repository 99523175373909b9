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
# All records of one notebook together, kept in the worker (outside the kernel's memory cgroup). A full-marks
# notebook of chapters 6, 9 and 10 sends verdicts of 26 KB to 194 KB each; a notebook that sends more than this is
# cut off and its row says so (:attr:`RecordServer.overflow`), so no notebook can grow the worker without bound.
MAX_TOTAL_BYTES = 128 << 20
MAX_RECORDS = 4096  # "blocked" notes are one per refused action; verdicts one per exercise and run
RECORD_FILE = "autograder-records"  # the name of a record socket file (jailed kernels): only its recorder connects
RECORD_PREFIX = "\0autograder-"  # an abstract record address


class RecordServer:
    """The worker's end: collects records sent by the kernel's guard (run in the worker, never in the kernel).

    ``address`` is an abstract Unix socket address, or ``path`` (a socket file the jail binds read-only into the
    kernel's view). ``records(pid, key)`` returns (verified entries, number of
    rejected connections) keeping only connections from process ``pid`` that carried exactly one correctly
    signed line.
    """

    def __init__(self, path: str | None = None):
        self.address = path or RECORD_PREFIX + os.urandom(12).hex()
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.address)
        if path:  # a socket file (a jailed kernel has its own network namespace, so no abstract address)
            os.chmod(path, 0o666)
        self._srv.listen(128)
        self._srv.settimeout(0.2)
        self._got: list[tuple[int, bytes]] = []
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
        :attr:`overflow`). Chunks are joined once (no quadratic copies)."""
        size = struct.calcsize("3i")
        with conn:
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))[0]
            conn.settimeout(10)
            full = len(self._got) >= MAX_RECORDS
            budget = 0 if full else min(MAX_RECORD_BYTES, MAX_TOTAL_BYTES - self._kept)
            chunks: list[bytes] = []
            received = 0
            try:
                while received <= MAX_RECORD_BYTES:  # past the budget the sender's bytes are read and dropped
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    received += len(chunk)
                    if received <= budget:
                        chunks.append(chunk)
            except OSError:
                pass
            if full or received > budget:  # over what one notebook may send: nothing of it is kept
                self.overflow += 1
                return
            data = b"".join(chunks)
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


def decode_traces(text: str, limit: int = 256 << 20) -> list:
    """``guard.encode_traces``' inverse, in the worker: at most ``limit`` bytes decompressed."""
    import base64
    import io
    import zlib

    import torch

    raw = zlib.decompressobj().decompress(base64.b64decode(text, validate=True), limit)
    return torch.load(io.BytesIO(raw), weights_only=True)
