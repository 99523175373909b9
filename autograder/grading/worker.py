"""The grading worker, a process of its own per distinct canonical notebook, and the batch's fork server it is
forked from (``execute.Spawner``); the student's code runs in neither.

    python -m autograder.grading.worker                               # one worker: its Job as JSON on stdin
    python -m autograder.grading.worker serve CHAPTER NAMESPACES      # the fork server

The worker runs the grading notebook with nbclient (``runner.py``) in a kernel it sets up (``jail.py``,
``memory.py``; its recorder armed by ``guard.py``), collects the recorder's signed records (``channel.py``), judges
every check again on them (``judge.py``: the only verdict) and scores (``scoring.py``); it writes only its result
(``job.result``) and the graded notebook (``job.graded``) into the batch's private folder. Security design:
docs/grading-design.md ("worker").
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # the worker and the fork server
    # nbformat imports jsonschema, which imports rfc3987_syntax where it is installed and compiles
    # its Lark grammars at import (≈ 1–3 s of CPU per worker, on every submission) for the "iri" string formats of
    # JSON Schema draft 7 and later. Notebooks are validated against nbformat's draft-4 schema, which has none.
    # (None in sys.modules: importing it raises ImportError, and jsonschema then leaves those two formats out.)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

import contextlib
import dataclasses
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import threading
import traceback
from collections.abc import Sequence

import nbformat

from ..wording import Message, Said, say
from . import channel, jail, judge, memory, questions, runner, scoring
from .reasons import failure_reasons, ungraded_cell_errors
from .redaction import grader_secrets, secret_output_lines
from .submission import Result, result_fields


@dataclasses.dataclass
class Job:
    """Everything the worker needs to grade one canonical notebook (sent as JSON by the batch)."""

    canonical: str  # the canonicalised notebook (canonical.py), in a folder no kernel can read
    chapter: str
    student_id: str  # the submission's id (collect.py): its feedback's and graded notebook's name
    grading: str  # the batch's grading notebook (runner.grading_notebook), in a folder no kernel can read
    stage: str  # the staged solutions package (jail.stage_solutions), first on the kernel's PYTHONPATH
    sandbox: str  # this submission's own directory (removed by the batch afterwards)
    result: str  # where the worker leaves its result (in the batch's private folder)
    graded: str  # where the worker leaves the graded notebook, when it ran to the end (same folder)
    cell_timeout: int  # seconds per cell
    memory_mb: int  # the kernel's address-space limit
    points: dict[str, int]  # exercise -> points
    hidden_files: list[str]  # files the guard refuses to open (jail.hidden_files, the batch's output, ...)
    netns: bool  # the worker runs in its own network namespace (bring loopback up)
    uid: int  # the kernel's uid (when the worker is root), or -1: keep this user's
    threads: int  # torch threads per kernel
    jail: bool = False  # the kernel runs in a bubblewrap jail (jail.py); else the fallback (the guard's file rules)
    worker_memory_mb: int = memory.WORKER_MB  # this worker's memory cgroup (--worker-memory-mb; 0: none)
    worker_cgroup: str = ""  # that cgroup, made by the execute step (execute.run_job), joined first; "": none


def main(job: Job) -> int:
    """Grade ``job`` and leave its result at ``job.result``, whatever happens (a crash of the grading itself is an
    "error" result with the traceback)."""
    if job.worker_cgroup:  # first: the records, the notebook's run and the judging count against the worker's own limit
        memory.join_memory_cgroup(job.worker_cgroup)
    try:
        result = grade_one(job)
    except Exception as exc:
        why = say("grader error", ename=type(exc).__name__, error=str(exc)[:200])
        result = Result(
            "", "", job.student_id, status="error", reason=str(why), trace=traceback.format_exc()[-2000:], reasons=[why]
        )
    out = pathlib.Path(job.result)
    out.with_suffix(".tmp").write_text(json.dumps(result_fields(result)))  # messages as data
    out.with_suffix(".tmp").replace(out)
    return 0


def _kernel_environment(job: Job, sandbox: pathlib.Path, short: pathlib.Path, home: pathlib.Path) -> dict[str, str]:
    kernels = jail.write_kernelspec(sandbox / "jupyter")
    return {
        "AUTOGRADER_GUARD_CONFIG": str(home / "guard.json"),
        "AUTOGRADER_SANDBOX": str(sandbox),
        "AUTOGRADER_UID": str(job.uid),
        "AUTOGRADER_MEMORY_MB": str(job.memory_mb),
        "AUTOGRADER_EXERCISE_TIMEOUT": str(exercise_timeout(job.cell_timeout)),
        "JUPYTER_PATH": str(kernels),
        "HOME": str(home),
        "MPLCONFIGDIR": str(home),
        "IPYTHONDIR": str(home / ".ipython"),
        "TMPDIR": str(home),
        "MPLBACKEND": "Agg",
        "JUPYTER_RUNTIME_DIR": str(short / "run"),  # the connection file and the channels' sockets
        "OMP_NUM_THREADS": str(job.threads),
        "MKL_NUM_THREADS": str(job.threads),
        "PYTHONPATH": os.pathsep.join([job.stage, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }


def exercise_timeout(cell_timeout: int) -> int:
    """Seconds one exercise's check run may take in the kernel (``core.time_limit``): half the cell's limit, so that
    an answer that never returns costs its own exercise, stopped by the check run, before the cell's limit
    interrupts the kernel (``runner.run_notebook``)."""
    return max(1, cell_timeout // 2)


def _short_folder(job: Job) -> tuple[pathlib.Path, bool]:
    """A short folder (Unix socket paths are limited to 107 bytes) whose ``run/`` holds the kernel's channel
    sockets, not TCP, whose ports a kernel started beside this one can take first. Jailed, it also holds the record
    socket, and where the worker may mount one (root, in its own mount namespace) it is a memory file system of
    ``--memory-mb`` with the kernel's home, /tmp and /dev/shm: all the kernel may write, counted in its memory
    cgroup (True: so sized). In fallback mode the kernel binds the sockets as its own uid."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ag-"))
    if job.jail:
        folder.chmod(0o755)
    sized = job.jail and job.netns and os.geteuid() == 0 and memory.mount_kernel_files(folder, job.memory_mb or 2048)
    (folder / "run").mkdir(mode=0o700)
    for name in ("tmp", "shm") if sized else ():
        (folder / name).mkdir()
        (folder / name).chmod(0o1777)
    if not job.jail:
        jail.give_to(job.uid, (folder, folder / "run"))
    return folder, sized


def _kernel_cgroup(job: Job) -> pathlib.Path | None:
    """The kernel's memory cgroup of ``--memory-mb`` (None: none can be made here, or no limit): beside the worker's
    own (its sibling, so that neither counts against the other's limit), else under this process's cgroup."""
    if job.memory_mb <= 0:
        return None
    if job.worker_cgroup:  # named after the worker's, so that the execute step removes it if this worker is killed
        beside = memory.kernel_cgroup_beside(job.worker_cgroup)
        return memory.make_memory_cgroup(job.memory_mb, beside.name, beside.parent)
    return memory.make_memory_cgroup(job.memory_mb, f"autograder-kernel-{os.urandom(6).hex()}")


def _setup_error(graded: nbformat.NotebookNode | None) -> str:
    """The error the graded notebook's setup cell raised ("" if none, or no notebook)."""
    for cell in graded.cells if graded is not None else ():
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            return f"{errors[0].get('ename', '')}: {errors[0].get('evalue', '')}" if errors else ""
    return ""


def startup_failure(memory_mb: int, armed: bool, died: bool, oom_killed: bool, setup_error: str) -> Message | None:
    """The row's reason when the kernel could not start under ``--memory-mb`` (None otherwise): the grader's setup
    cell (which runs before any of the submission's code) never armed the guard, and the kernel was OOM-killed, its
    setup cell ran out of memory, or it died under a limit below what torch needs (:data:`memory.STARTUP_MB`)."""
    if armed or memory_mb <= 0:
        return None
    out_of_memory = "MemoryError" in setup_error or "allocate memory" in setup_error
    if not (oom_killed or out_of_memory or (died and memory_mb < memory.STARTUP_MB)):
        return None
    return say("kernel could not start", mb=memory_mb, need=memory.STARTUP_MB)


def _kernel_died(memory_mb: int, records: Sequence[dict], order: Sequence[str], oom_killed: bool) -> Message:
    """Why the run ended with a kernel that died, in one line: where (the exercises the guard's records say were
    checked before it died) and, when its memory cgroup's OOM killer ended it, that."""
    done = {r.get("exercise") for r in records if r.get("type") == "verdict"}
    last = [n for n in order if n in done]
    after = order[order.index(last[-1]) + 1 :] if last else list(order)
    following = [n for n in after if n not in done]
    nxt = say("kernel: cells of", name=following[0]) if following else say("kernel: a cell")
    where = (
        say("kernel: after the checks", cells=nxt, name=last[-1])
        if last
        else say("kernel: before any checks", cells=nxt)
    )
    limit = say("kernel memory", mb=memory_mb) if memory_mb else ""
    return say("kernel out of memory" if oom_killed else "kernel died", limit=limit, where=where)


def _import_in_background(module: str) -> threading.Thread:
    """Start importing ``module`` (the chapter's checks and torch, ≈ 1.5–3 s, for judge.py; a new interpreter's
    worker, not a forked one, has not imported them yet) in a thread, while the kernel runs."""

    def load() -> None:
        with contextlib.suppress(Exception):  # judge.judge imports it again and the error is reported there
            importlib.import_module(module)

    thread = threading.Thread(target=load, name=f"import {module}", daemon=True)
    thread.start()
    return thread


def grade_one(job: Job) -> Result:
    """Run the job's notebook in the grading notebook's form (``runner.py``) in a kernel with the recorder armed;
    judge and score; the result (the graded notebook left at ``job.graded``)."""
    if job.netns:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    chapter, sid = job.chapter, job.student_id
    nb = nbformat.read(job.canonical, as_version=4)  # canonicalised by the batch (autograder/canonical.py)
    warnings: list[Said] = [
        say("needs review", what=w) for w in suspicious(nb, chapter)
    ]  # the batch puts the file's own before them

    sandbox = pathlib.Path(job.sandbox)
    if sandbox.exists():
        shutil.rmtree(sandbox)
    sandbox.mkdir(parents=True, mode=0o711)
    short, sized = _short_folder(job)
    home = (short if sized else sandbox) / "home"
    home.mkdir(mode=0o700)
    group = _kernel_cgroup(job)

    key = os.urandom(32)
    # jailed, a socket file the jail binds read-only (the kernel has its own network namespace); else abstract
    records = channel.RecordServer(str(short / channel.RECORD_FILE) if job.jail else None)  # only the recorder writes
    config = home / "guard.json"
    files = {} if job.jail else {"hidden_files": job.hidden_files + [str(sandbox / "kernel.pid")]}
    config.write_text(
        json.dumps(
            {
                "key": key.hex(),
                "address": records.address,
                "sandbox": str(home),
                "exercise_timeout": exercise_timeout(job.cell_timeout),
                "file_rules": not job.jail,  # jailed, the operating system keeps the kernel to its own files
                # the course's versions of the exercises, which the kernel's form of the checks does not hold: the
                # recorder swaps one in only while a later exercise that calls it is recorded (questions.py)
                "references": questions.reference_sources((questions.package_dir() / f"{chapter}.py").read_text()),
                **files,
            }
        )
    )
    jail.give_to(job.uid, (home, config))
    env = _kernel_environment(job, sandbox, short, home)
    if job.jail:  # the stage, not the course's own package (its checks hold the oracles)
        view = jail.JailView(
            ro=[str(short), job.stage],
            rw=[str(home), str(short / "run")],
            hide=[],
            workdir=str(home),
            env=jail.kernel_env({k: v for k, v in env.items() if k != "AUTOGRADER_SANDBOX"}),
            tmp=str(short / "tmp") if sized else "",
            shm=str(short / "shm") if sized else "",
        )
        view.write(sandbox / "jail.json")
        env["AUTOGRADER_JAIL_VIEW"] = str(sandbox / "jail.json")
    if group is not None:
        env[memory.CGROUP_ENV] = str(group)
    os.environ.update(env)
    os.chdir(sandbox)

    checks = _import_in_background(f"autograder.{chapter}")
    cwd = sandbox / "notebook"  # the kernel's working folder (in fallback mode it may write there)
    cwd.mkdir(mode=0o700)
    try:
        graded_form = runner.graded_notebook(nb, nbformat.read(job.grading, as_version=4))
        run = runner.run_notebook(graded_form, cwd=cwd, cell_timeout=job.cell_timeout, ipc=f"{short}/run/k")
    finally:
        records.close()
        if sized:
            memory.unmount_kernel_files(short)  # the kernel's files freed before its cgroup goes
        shutil.rmtree(short, ignore_errors=True)
        oom_killed = group is not None and memory.oom_kills(group) > 0
        if group is not None:
            memory.remove_memory_cgroup(group)
    try:
        kernel_pid = int((sandbox / "kernel.pid").read_text())
    except (OSError, ValueError):
        kernel_pid = -1
    entries, forged = records.records(kernel_pid, key, release=True)  # each line let go once read
    checks.join()  # (an import that failed there fails again, and is reported, in judge.judge)
    entries = judge.judge(chapter, entries)  # the checks again, here, on what the student's code returned
    warnings += scoring.blocked_warnings(entries)
    armed = any(e.get("type") == "armed" for e in entries)
    graded = run.notebook if run.finished else None
    reason: Said | None = startup_failure(job.memory_mb, armed, graded is None, oom_killed, _setup_error(graded))
    if reason is not None or graded is None:
        if reason is None:  # nbclient's typed error, not log text
            died = _kernel_died(job.memory_mb, entries, list(job.points), oom_killed)
            reason = runner.failure(run, job.cell_timeout, died)
        return Result("", "", sid, "error", str(reason), warnings=warnings, log=run.log(), reasons=[reason])

    warnings += ungraded_cell_errors(graded, job.cell_timeout)
    details: dict[str, list[Said]] = {}  # exercise -> its failed checks' messages, as judged here
    for e in entries:
        if e.get("type") == "verdict" and e.get("details"):
            details.setdefault(e["exercise"], e["details"])
    scored = scoring.score(
        dict(job.points),
        entries,
        forged,
        failure_reasons(graded, job.cell_timeout, job.memory_mb, details),
        overflow=records.overflow,
    )
    warnings += scored.warnings
    secrets = grader_secrets(graded, chapter)
    shown = secret_output_lines(graded, secrets)
    if shown:  # e.g. code that read the grading notebook or a reference solution and printed it
        warnings.append(say("needs review", what=say("showed the secrets", n=shown)))
    nbformat.write(graded, job.graded)  # the batch writes the feedback from it
    judged = sum(e.get("judged", 0) for e in entries if e.get("type") == "verdict")
    return Result(
        "",
        "",
        sid,
        scored.status,
        "; ".join(map(str, scored.reasons)),
        scored.scores,
        warnings,
        judged={"outside": judged},
        details=details,
        reasons=list(scored.reasons),
    )


_SUSPICIOUS = [
    (r"\bautograder\b|_autograder_guard", say("flag: internals")),
    (r"__torch_dispatch__|_make_wrapper_subclass|__torch_function__", say("flag: subclass")),
    (r"^\s*EXERCISES\s*=|EXERCISES\.\w+\s*=", say("flag: EXERCISES")),
    (r"\b(torch|np|numpy|math|builtins|F)\.[A-Za-z_]\w*\s*=[^=]", say("flag: library")),
    (
        r"__closure__|__code__|__globals__|gc\.get_|ctypes|settrace|setprofile|addaudithook|_getframe|"
        r"currentframe|f_back|f_locals|f_globals|gi_frame|tb_frame|_posixsubprocess|/proc/net",
        say("flag: introspection"),
    ),
    (r"solutions\.{chapter}|solutions import {chapter}", say("flag: solution")),
    (
        r"excepthook|set_custom_exc|showtraceback|showsyntaxerror|InteractiveTB|tracebacklimit|__tracebackhide__|"
        r"%xmode|\bxmode\b|_render_traceback_",
        say("flag: tracebacks"),
    ),
    (
        r"_python_dispatch|_disable_current_modes|_pop_mode|_get_current_dispatch_mode|_ExcludeDispatchKeyGuard|"
        r"_DisableTorchDispatch|_len_torch_dispatch_stack|TorchDispatchMode|saved_tensors_hooks",
        say("flag: measurement"),
    ),
    (
        r"\btriton\.runtime\b|interpreter_builder|InterpretedFunction|JITFunction|\btriton\.[\w.]*\s*=[^=]|linecache",
        say("flag: triton internals"),
    ),
]


def suspicious(nb: nbformat.NotebookNode, chapter: str) -> list[Said]:
    """Static flags for the instructor (not score changes): code that touches the grading machinery."""
    flags: list[Said] = []
    for cell in nb.cells:
        student = (
            cell.metadata.get("nbgrader", {}).get("solution") or cell.id.startswith("inserted-") or "-part" in cell.id
        )
        if cell.cell_type != "code" or not student:
            continue
        for pattern, what in _SUSPICIOUS:
            pattern = pattern.replace("{chapter}", chapter)
            if re.search(pattern, cell.source, re.M) and what not in flags:
                flags.append(what)
    return flags


# ------------------------------------------------------------------------------------------------ the fork server
# A worker started as a new interpreter spends seconds of CPU importing nbclient, torch and the chapter's checks
# before it grades anything. The batch's fork server imports them once and forks each worker from itself: a process
# that has only imported modules, never another worker.

_CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
_PR_SET_PDEATHSIG = 1


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
    """The fork server (``execute.Spawner``). Imports everything a worker needs, then reads its requests from the
    socket at fd 0, one message each: the Job's fields as JSON, with two file descriptors, a reply pipe and the
    worker's log. Forks a worker for each (in a new session, its output in the log, in new namespaces when
    ``namespaces``) and writes on its reply pipe the worker's pid when it started and its exit status when it
    ended, a line each. Ends when the batch closes its end and the workers have ended; at once where the namespaces
    cannot be made (the batch then starts its workers as new interpreters)."""
    import select
    import socket

    importlib.import_module(f"autograder.{chapter}")  # torch and the checks, for judge.py
    if namespaces:  # tried once
        probe = os.fork()
        if probe == 0:
            try:
                _new_namespaces()
                os._exit(0)
            except BaseException:
                os._exit(1)
        if os.waitstatus_to_exitcode(os.waitpid(probe, 0)[1]) != 0:
            return
    requests, listening = socket.socket(fileno=0), True
    replies: dict[int, int] = {}  # a worker's pid -> its reply pipe
    while listening or replies:
        if select.select([requests] if listening else [], [], [], 0.05)[0]:
            message, fds, _, _ = socket.recv_fds(requests, 1 << 20, 2)
            listening = bool(message)
            if message:
                reply, log = fds
                pid = os.fork()
                if pid == 0:
                    for fd in (*replies.values(), reply):  # the worker holds no reply pipe
                        os.close(fd)
                    _forked_worker(Job(**json.loads(message)), log, namespaces)
                os.close(log)
                os.write(reply, b"%d\n" % pid)
                replies[pid] = reply
        while replies:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            code, reply = os.waitstatus_to_exitcode(status), replies.pop(pid)
            with contextlib.suppress(OSError):  # (a batch that is gone)
                os.write(reply, b"%d\n" % (code if code >= 0 else 128 - code))
            os.close(reply)


def _forked_worker(job: Job, log: int, namespaces: bool) -> None:
    """In the fork server's child: become the worker of ``job``, its output in file descriptor ``log`` (never
    returns)."""
    status = 70
    try:
        os.setsid()  # a process group of its own: the batch kills the group when the notebook runs too long
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        if namespaces:
            _new_namespaces()
        status = main(job)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3] == "1")
        os._exit(0)
    status = main(Job(**json.load(sys.stdin)))  # the result file is written (and the graded notebook, when it ran)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: unloading torch took 1–2 s per submission
