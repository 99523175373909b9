"""The batch's worker fork server: ``python -m autograder.grading.forkserver CHAPTER NAMESPACES``.

A worker process spends seconds of CPU importing what it needs (nbformat, nbclient, jupyter_client, torch and the
chapter's checks for judge.py) before it grades anything. The batch can start one process per batch
that imports all of it once (this module) and fork each
worker from it: every worker is still a process of its own that no student code ever ran in, forked from a process
that has only imported modules (never from another worker), with its own network, PID and mount namespaces where
the batch would run it under ``unshare --net --pid --fork --kill-child --mount-proc`` (the same system calls).

Each forked worker runs the same job function as a worker started as a new interpreter (``worker.main``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # the same trick as worker.py's, for the same imports (see there)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import contextlib
import importlib
import json
import os
import pathlib
import subprocess
import threading
import traceback
from collections.abc import Iterator

from .worker import main

_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_PDEATHSIG = 1
FORK_SWITCH = "AUTOGRADER_FORK_WORKERS"  # "off": start every worker as a new interpreter (python -m ... JOB)


def _new_namespaces() -> None:
    """What ``unshare --net --pid --fork --kill-child --mount-proc`` does, in this (single-threaded) process: new
    network and mount namespaces, mounts private, then a fork; the parent waits and ends with the child's status;
    the child returns as process 1 of a new PID namespace, with a /proc of its own, and dies with its parent."""
    import ctypes
    import select
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    if libc.unshare(_CLONE_NEWNET | _CLONE_NEWNS | _CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID) failed")
    if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making the mounts private failed")
    alive_r, alive_w = os.pipe()  # closed (readable, at EOF) once the parent has died
    child = os.fork()
    if child:  # outside the new PID namespace: wait for the worker, end as it ended (as unshare does)
        os.close(alive_r)
        _, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        os._exit(code if code >= 0 else 128 - code)
    os.close(alive_w)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # --kill-child: killing the parent kills the whole namespace
    if select.select([alive_r], [], [], 0)[0]:  # the parent died before that: so must this process
        os._exit(1)
    os.close(alive_r)
    if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        raise OSError(ctypes.get_errno(), "mounting /proc failed")


def serve(chapter: str, namespaces: bool) -> None:
    """The batch's fork server. Imports everything a worker needs, then reads one request per line on stdin
    (``{"job": JOB.json, "log": FILE}``), forks a worker for each (in a new session, its output in FILE, in new
    namespaces when ``namespaces``) and writes ``{"job": ..., "pid": PID}`` when it started and
    ``{"job": ..., "status": CODE}`` when it ended, one line each on stdout. Ends when stdin closes."""
    import select

    importlib.import_module(f"autograder.{chapter}")  # torch and the checks, for judge.py

    def reply(message: dict) -> None:
        os.write(1, (json.dumps(message) + "\n").encode())

    if namespaces:  # tried once: where the namespaces cannot be made, the batch starts its workers as before
        probe = os.fork()
        if probe == 0:
            try:
                _new_namespaces()
                os._exit(0)
            except BaseException:
                os._exit(1)
        if os.waitstatus_to_exitcode(os.waitpid(probe, 0)[1]) != 0:
            reply({"ready": False})
            return
    reply({"ready": True})

    children: dict[int, str] = {}
    buffer, open_ = b"", True
    while open_ or children:
        ready, _, _ = select.select([0] if open_ else [], [], [], 0.05)
        if ready:
            chunk = os.read(0, 65536)
            open_ = bool(chunk)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    _forked_worker(request["job"], request["log"], namespaces)
                children[pid] = request["job"]
                reply({"job": request["job"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            reply({"job": children.pop(pid), "status": code if code >= 0 else 128 - code})


def _forked_worker(job_path: str, log: str, namespaces: bool) -> None:
    """In the fork server's child: become the worker of ``job_path`` (never returns)."""
    status = 70
    try:
        os.setsid()  # a process group of its own: the batch kills the group when the notebook runs too long
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if namespaces:
            _new_namespaces()
        status = main(job_path)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


class Spawner:
    """The batch's end of :func:`serve`: ``run(job_path, log, timeout)`` starts the worker of one job as a fork of the
    server and waits for it; (exit status, False), or (None, True) when it ran longer than ``timeout`` seconds (its
    process group is then killed, and with it its namespaces). ``alive`` is False once the server has ended (the
    batch then starts workers as before). The batch holds one while it runs (:func:`serving`)."""

    def __init__(self, chapter: str, namespaces: bool, env: dict[str, str], cwd: pathlib.Path):
        import queue

        cmd = [sys.executable, "-m", "autograder.grading.forkserver", chapter, "1" if namespaces else "0"]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True
        )
        self._lock = threading.Lock()
        self._replies: dict[str, queue.Queue] = {}
        self._queue = queue.Queue
        self._ready = threading.Event()  # the server has imported everything (or has ended)
        self._used = False
        self.alive = True
        threading.Thread(target=self._read, name="worker fork server", daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "ready" in message:
                self.alive = bool(message["ready"])
                self._ready.set()
                continue
            with self._lock:
                replies = self._replies.get(message.get("job"))
            if replies is not None:
                replies.put(message)
        with self._lock:
            self.alive = False
            for replies in self._replies.values():
                replies.put({"gone": True})
        self._ready.set()

    def run(self, job_path: str, log: str, timeout: float) -> tuple[int | None, bool]:
        import queue
        import signal
        import time

        replies: queue.Queue = self._queue()
        self._used = True
        self._ready.wait()
        with self._lock:
            if not self.alive:
                raise RuntimeError("the worker fork server has ended")
            self._replies[job_path] = replies
            assert self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps({"job": job_path, "log": log}) + "\n").encode())
                self._proc.stdin.flush()
            except OSError:
                self._replies.pop(job_path, None)
                raise RuntimeError("the worker fork server has ended") from None
        try:
            started = replies.get()
            if "pid" not in started:
                raise RuntimeError("the worker fork server has ended")
            deadline = time.monotonic() + timeout
            try:
                ended = replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                ended = None
            if ended is None or "status" not in ended:  # too long, or the server is gone: so is this worker
                try:
                    os.killpg(started["pid"], signal.SIGKILL)
                except OSError:
                    pass
                if ended is not None:  # (the batch grades it again, as a new interpreter)
                    raise RuntimeError("the worker fork server has ended")
                replies.get()
                return None, True
            return ended["status"], False
        finally:
            with self._lock:
                self._replies.pop(job_path, None)

    def close(self) -> None:
        """No more jobs: the server ends once its workers have (their results are all in by then); one that was
        never asked for a worker is stopped at once."""
        if not self._used:
            self._proc.kill()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


@contextlib.contextmanager
def serving(chapter: str, namespaces: bool, env: dict[str, str], cwd: pathlib.Path) -> Iterator[Spawner]:
    """The batch's fork server (:class:`Spawner`) while the batch runs: started on entering, so that it imports
    while the batch canonicalises, and closed on leaving (:meth:`Spawner.close`)."""
    spawner = Spawner(chapter, namespaces, env, cwd)
    try:
        yield spawner
    finally:
        spawner.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2] == "1")
    os._exit(0)
