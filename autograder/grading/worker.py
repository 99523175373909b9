"""Grade one submission in a process of its own: ``python -m autograder.grading.worker JOB.json``.

The batch (``batch.py``) writes a :class:`Job` and starts one worker per distinct canonical notebook, under
``unshare --net --pid`` when it can (``jail.py``). The worker stages a private copy of the course directory,
runs nbgrader's real ``autograde`` in a fresh kernel (launched by ``jail.py``, its recorder armed by ``guard.py``),
collects the recorder's signed records over a socket only the recorder may open (``channel.py``), judges every
check again on them (``judge.py``: the only verdict), applies the scoring rule (``scoring.py``), and writes the
result file and the feedback page (``results.py``). The student's code never runs in this process.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # python -m autograder.grading.worker: this process grades one submission
    # nbformat (and so nbgrader) imports jsonschema, which imports rfc3987_syntax where it is installed and compiles
    # its Lark grammars at import (≈ 1–3 s of CPU per worker, on every submission) for the "iri" string formats of
    # JSON Schema draft 7 and later. Notebooks are validated against nbformat's draft-4 schema, which has none.
    # (None in sys.modules: importing it raises ImportError, and jsonschema then leaves those two formats out.)
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

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

from . import channel, jail, judge, nbgrader_adapter, scoring
from .results import (
    Result,
    failure_reasons,
    grader_secrets,
    secret_output_lines,
    ungraded_cell_errors,
    write_feedback,
    write_result,
)


@dataclasses.dataclass
class Job:
    """Everything the worker needs to grade one canonical notebook (written as JSON by the batch)."""

    canonical: str  # the canonicalised notebook (canonical.py), in a folder no kernel can read
    warnings: list[str]  # from canonicalising this student's file
    submission_name: str  # the file's label in grades.csv
    sha256: str  # of the submitted file, as submitted
    chapter: str
    student_id: str
    course_template: str  # the batch's nbgrader course directory (gradebook with every test cell)
    stage: str  # the staged solutions package (jail.stage_solutions), first on the kernel's PYTHONPATH
    sandbox: str  # this submission's own directory (removed by the batch afterwards)
    result: str  # the result file to write
    feedback: str  # the feedback page to write
    keep: str  # folder for a copy of the graded notebook
    cell_timeout: int  # seconds per cell
    memory_mb: int  # the kernel's address-space limit
    max_score: float
    points: dict[str, int]  # exercise -> points
    hidden_files: list[str]  # files the guard refuses to open (jail.hidden_files, the batch's output, ...)
    netns: bool  # the worker runs in its own network namespace (bring loopback up)
    uid: int  # the kernel's uid (when the worker is root), or -1: keep this user's
    threads: int  # torch threads per kernel
    jail: bool = False  # the kernel runs in a bubblewrap jail (jail.py); else the fallback (the guard's file rules)

    def write(self, path: pathlib.Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, path: pathlib.Path) -> Job:
        return cls(**json.loads(pathlib.Path(path).read_text()))


def main(job_path: str) -> int:
    """Grade the job at ``job_path`` and write its result file, whatever happens (a crash of the grading itself is
    an "error" result with the traceback)."""
    job = Job.read(pathlib.Path(job_path))
    try:
        result = grade_one(job)
    except Exception as exc:
        result = Result(
            job.submission_name,
            job.sha256,
            job.student_id,
            status="error",
            reason=f"grader error: {type(exc).__name__}: {str(exc)[:200]}",
            trace=traceback.format_exc()[-2000:],
        )
    write_result(pathlib.Path(job.result), result)
    return 0


def _stage_course(job: Job, nb: nbformat.NotebookNode, sandbox: pathlib.Path) -> pathlib.Path:
    """A private copy of the course directory with the notebook submitted under the student's id."""
    course = sandbox / "course"
    shutil.copytree(job.course_template, course)
    for p in [course, *course.iterdir()]:
        p.chmod(0o711 if p.is_dir() else 0o600)
    chapter, sid = job.chapter, job.student_id
    target = course / "submitted" / sid / chapter / f"{chapter}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    (course / "autograded").mkdir(mode=0o711, exist_ok=True)
    (course / "autograded" / sid).mkdir(mode=0o711, exist_ok=True)
    return course


def _kernel_environment(job: Job, sandbox: pathlib.Path, home: pathlib.Path, config: pathlib.Path) -> dict[str, str]:
    kernels = jail.write_kernelspec(sandbox / "jupyter")
    return {
        "AUTOGRADER_GUARD_CONFIG": str(config),
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
        "JUPYTER_RUNTIME_DIR": str(sandbox / "runtime"),
        "OMP_NUM_THREADS": str(job.threads),
        "MKL_NUM_THREADS": str(job.threads),
        "PYTHONPATH": os.pathsep.join([job.stage, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }


def exercise_timeout(cell_timeout: int) -> int:
    """Seconds one exercise's check run may take in the kernel (``core.time_limit``): half the cell's limit, so that
    an answer that never returns costs its own exercise, stopped by the check run, before nbgrader's cell limit
    interrupts the kernel (after which nbgrader abandons the notebook)."""
    return max(1, cell_timeout // 2)


def _kernel_files(link: pathlib.Path, job: Job) -> bool:
    """Make ``link`` (the jailed kernel's short folder) a memory file system of ``--memory-mb`` holding its
    runtime folder, home, /tmp and /dev/shm (:func:`jail.mount_kernel_files`), where the worker may mount one (root,
    in its own mount namespace); True if it did. Else only ``link/run`` is made, and the home stays on disk."""
    link.chmod(0o755)
    sized = job.netns and os.geteuid() == 0 and jail.mount_kernel_files(link, job.memory_mb or 2048)
    (link / "run").mkdir(mode=0o700)
    for name in ("tmp", "shm") if sized else ():
        (link / name).mkdir()
        (link / name).chmod(0o1777)
    return sized


def _setup_error(graded: nbformat.NotebookNode | None) -> str:
    """The error the graded notebook's setup cell raised ("" if none, or no notebook)."""
    for cell in graded.cells if graded is not None else ():
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            return f"{errors[0].get('ename', '')}: {errors[0].get('evalue', '')}" if errors else ""
    return ""


def startup_failure(memory_mb: int, armed: bool, died: bool, oom_killed: bool, setup_error: str) -> str | None:
    """The row's reason when the kernel could not start under ``--memory-mb`` (None otherwise): the grader's setup
    cell (which runs before any of the submission's code) never armed the guard, and the kernel was OOM-killed, its
    setup cell ran out of memory, or it died under a limit below what torch needs (:data:`jail.STARTUP_MB`)."""
    if armed or memory_mb <= 0:
        return None
    out_of_memory = "MemoryError" in setup_error or "allocate memory" in setup_error
    if not (oom_killed or out_of_memory or (died and memory_mb < jail.STARTUP_MB)):
        return None
    return (
        f"the kernel could not start within --memory-mb {memory_mb} (torch and the chapter's setup need about "
        f"{jail.STARTUP_MB} MB): raise --memory-mb; none of the submission's code ran (a grader setting, "
        "not the submission's fault)"
    )


def _autograde_failure(
    log_text: str,
    cell_timeout: int,
    memory_mb: int = 0,
    records: Sequence[dict] = (),
    order: Sequence[str] = (),
    oom_killed: bool = False,
) -> str:
    """Why nbgrader's autograde failed, in one line, from its log (and, for a kernel that died, the guard's
    records: the exercises graded before it died; ``oom_killed``: its memory cgroup's OOM killer ended it)."""
    if "DeadKernelError" in log_text or "Kernel died" in log_text or "kernel died" in log_text.lower():
        done = {r.get("exercise") for r in records if r.get("type") == "verdict"}
        last = [n for n in order if n in done]
        after = order[order.index(last[-1]) + 1 :] if last else list(order)
        following = [n for n in after if n not in done]
        nxt = f"the cells of {following[0]} (its answer, or a cell before its test)" if following else "a cell"
        where = (
            f" while running {nxt}, after the checks of {last[-1]}"
            if last
            else f" while running {nxt}, before any exercise was checked"
        )
        limit = f" {memory_mb} MB" if memory_mb else ""
        if oom_killed:
            return (
                f"the kernel ran out of its{limit} memory limit{where} (the limit counts its memory and the files it "
                "wrote to /tmp, /dev/shm and its home folder); nothing after that point could be graded"
            )
        return (
            f"the kernel died{where} (an exit such as os._exit, a crash, or the{limit} memory limit); "
            "nothing after that point could be graded"
        )
    if "CellTimeoutError" in log_text or "timed out" in log_text.lower():
        return f"a cell ran longer than {cell_timeout} s"
    last_line = [ln for ln in log_text.strip().splitlines() if ln.strip()]
    return "autograde failed" + (f": {last_line[-1][:200]}" if last_line else "")


def _import_in_background(module: str) -> threading.Thread:
    """Start importing ``module`` in a thread of this process and return the thread. The worker imports the
    chapter's checks (and with them torch, ≈ 1.5–3 s) only to judge the records after the kernel has finished; the
    kernel is started and runs meanwhile, so the import is done by the time they are judged."""

    def load() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # judge.judge imports it again and the error is reported there
            pass

    thread = threading.Thread(target=load, name=f"import {module}", daemon=True)
    thread.start()
    return thread


def grade_one(job: Job) -> Result:
    """Run nbgrader's autograde on the job's notebook in a kernel with the recorder armed; judge; score; write feedback."""
    if job.netns:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    chapter, sid = job.chapter, job.student_id
    nb = nbformat.read(job.canonical, as_version=4)  # canonicalised by the batch (autograder/canonical.py)
    warnings = list(job.warnings) + [f"needs review: {w}" for w in suspicious(nb, chapter)]

    sandbox = pathlib.Path(job.sandbox)
    if sandbox.exists():
        shutil.rmtree(sandbox)
    sandbox.mkdir(parents=True, mode=0o711)
    # Jailed: the kernel has its own network namespace, so the records and the kernel's channels use socket files
    # in a short folder (Unix socket paths are limited to 107 bytes) that the jail binds: the socket read-only,
    # the runtime folder (connection file, channels) writable. Else: an abstract address, TCP on loopback.
    # Where it can be, that folder is a memory file system of --memory-mb that also holds the kernel's home, /tmp
    # and /dev/shm: all it may write, bounded as a whole and counted in its memory cgroup.
    link = pathlib.Path(tempfile.mkdtemp(prefix="ag-")) if job.jail else None
    sized = link is not None and _kernel_files(link, job)
    home = (link if sized and link is not None else sandbox) / "home"
    home.mkdir(mode=0o700)
    course = _stage_course(job, nb, sandbox)
    group = jail.make_memory_cgroup(job.memory_mb, f"autograder-kernel-{os.urandom(6).hex()}") if job.memory_mb > 0 else None  # fmt: skip

    key = os.urandom(32)
    records = channel.RecordServer(str(link / channel.RECORD_FILE) if link else None)  # only the recorder may write
    config = home / "guard.json"
    files = {} if job.jail else {"hidden_files": job.hidden_files + [str(course / "source"), str(course / "gradebook.db"), str(sandbox / "kernel.pid")]}  # fmt: skip
    config.write_text(
        json.dumps(
            {
                "key": key.hex(),
                "address": records.address,
                "sandbox": str(home),
                "exercise_timeout": exercise_timeout(job.cell_timeout),
                "file_rules": not job.jail,  # jailed, the operating system keeps the kernel to its own files
                **files,
            }
        )
    )
    if job.uid > 0 and os.geteuid() == 0:
        for p in (home, config):
            os.chown(p, job.uid, job.uid)
    env = _kernel_environment(job, sandbox, home, config)
    if link is not None:
        env["JUPYTER_RUNTIME_DIR"] = str(link / "run")
        view = jail.JailView(
            ro=[str(link), *jail.course_package_view(job.stage)[0]],
            rw=[str(home), str(link / "run")],
            hide=jail.course_package_view(job.stage)[1],
            workdir=str(home),
            env=jail.kernel_env({k: v for k, v in env.items() if k != "AUTOGRADER_SANDBOX"}),
            tmp=str(link / "tmp") if sized else "",
            shm=str(link / "shm") if sized else "",
        )
        view.write(sandbox / "jail.json")
        env["AUTOGRADER_JAIL_VIEW"] = str(sandbox / "jail.json")
    if group is not None:
        env[jail.CGROUP_ENV] = str(group)
    os.environ.update(env)
    os.chdir(sandbox)

    checks = _import_in_background(f"autograder.{chapter}")  # for judge.py, while the kernel runs
    try:
        success, log_text = nbgrader_adapter.autograde(
            course, chapter, sid, job.cell_timeout, ipc=f"{link}/run/k" if link else None
        )
    finally:
        records.close()
        if link is not None:
            if sized:
                jail.unmount_kernel_files(link)  # the kernel's files freed before its cgroup goes
            shutil.rmtree(link, ignore_errors=True)
        oom_killed = group is not None and jail.oom_kills(group) > 0
        if group is not None:
            jail.remove_memory_cgroup(group)
    graded_path = course / "autograded" / sid / chapter / f"{chapter}.ipynb"
    try:
        kernel_pid = int((sandbox / "kernel.pid").read_text())
    except (OSError, ValueError):
        kernel_pid = -1
    entries, forged = records.records(kernel_pid, key)
    checks.join()  # (an import that failed there fails again, and is reported, in judge.judge)
    entries = judge.judge(chapter, entries)  # the checks again, here, on what the student's code returned
    warnings += scoring.blocked_warnings(entries)
    armed = any(e.get("type") == "armed" for e in entries)
    graded = nbformat.read(graded_path, as_version=4) if success and graded_path.exists() else None
    reason = startup_failure(job.memory_mb, armed, graded is None, oom_killed, _setup_error(graded))
    if reason is not None or graded is None:
        reason = reason or _autograde_failure(
            log_text, job.cell_timeout, job.memory_mb, entries, list(job.points), oom_killed
        )
        write_feedback(
            pathlib.Path(job.feedback), None, sid, chapter, {}, job.points, warnings=warnings, reasons=[reason],
            unreadable=False,
        )  # fmt: skip
        return Result(job.submission_name, job.sha256, sid, "error", reason, warnings=warnings, log=log_text[-4000:])

    warnings += ungraded_cell_errors(graded, job.cell_timeout)
    details: dict[str, list[str]] = {}  # exercise -> its failed checks' messages, as judged here
    for e in entries:
        if e.get("type") == "verdict" and e.get("details"):
            details.setdefault(e["exercise"], e["details"])
    scored = scoring.score(
        dict(job.points),
        entries,
        forged,
        failure_reasons(graded, job.cell_timeout, job.memory_mb, details),
    )
    warnings += scored.warnings
    secrets = grader_secrets(graded, chapter)
    shown = secret_output_lines(graded, secrets)
    if shown:  # e.g. code that read the grading notebook or a reference solution and printed it
        warnings.append(
            f"needs review: {shown} output line(s) showed the hidden tests or the reference solution "
            "(removed from the feedback)"
        )
    write_feedback(
        pathlib.Path(job.feedback),
        graded,
        sid,
        chapter,
        scored.scores,
        job.points,
        warnings=warnings,
        reasons=scored.reasons,
        secrets=secrets,
        details=details,
    )
    keep = pathlib.Path(job.keep)
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(graded_path, keep / f"{sid}.ipynb")
    judged = sum(e.get("judged", 0) for e in entries if e.get("type") == "verdict")
    return Result(
        job.submission_name,
        job.sha256,
        sid,
        scored.status,
        "; ".join(scored.reasons),
        scored.scores,
        warnings,
        judged={"outside": judged},
        details=details,
    )


_SUSPICIOUS = [
    (r"\bautograder\b|_autograder_guard", "refers to the grader's internals"),
    (r"__torch_dispatch__|_make_wrapper_subclass|__torch_function__", "tensor subclass tricks"),
    (r"^\s*EXERCISES\s*=|EXERCISES\.\w+\s*=", "rebinds EXERCISES"),
    (r"\b(torch|np|numpy|math|builtins|F)\.[A-Za-z_]\w*\s*=[^=]", "assigns to a library function"),
    (
        r"__closure__|__code__|__globals__|gc\.get_|ctypes|settrace|setprofile|addaudithook|_getframe|"
        r"currentframe|f_back|f_locals|f_globals|gi_frame|tb_frame|_posixsubprocess|/proc/net",
        "introspection tricks",
    ),
    (r"solutions\.{chapter}|solutions import {chapter}", "imports this chapter's reference solution"),
    (
        r"excepthook|set_custom_exc|showtraceback|showsyntaxerror|InteractiveTB|tracebacklimit|__tracebackhide__|"
        r"%xmode|\bxmode\b|_render_traceback_",
        "hides tracebacks or replaces the exception hook (error messages may be missing from the feedback)",
    ),
]


def suspicious(nb: nbformat.NotebookNode, chapter: str) -> list[str]:
    """Static flags for the instructor (not score changes): code that touches the grading machinery."""
    flags: list[str] = []
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


# ------------------------------------------------------------------------------------------------ forked workers
# A worker process spends ≈ 5 s of CPU importing what it needs (nbgrader, nbconvert, SQLAlchemy, jupyter_client,
# torch and the chapter's checks for judge.py) before it grades anything. The batch can start one process per batch
# that imports all of it once (``python -m autograder.grading.worker --serve CHAPTER NAMESPACES``) and fork each
# worker from it: every worker is still a process of its own that no student code ever ran in, forked from a process
# that has only imported modules (never from another worker), with its own network, PID and mount namespaces where
# the batch would run it under ``unshare --net --pid --fork --kill-child --mount-proc`` (the same system calls).

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
    importlib.import_module("nbconvert.exporters.html")  # the feedback page's exporter

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
    batch then starts workers as before)."""

    def __init__(self, chapter: str, namespaces: bool, env: dict[str, str], cwd: pathlib.Path):
        import queue

        cmd = [sys.executable, "-m", "autograder.grading.worker", "--serve", chapter, "1" if namespaces else "0"]
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


if __name__ == "__main__" and sys.argv[1] == "--serve":
    serve(sys.argv[2], sys.argv[3] == "1")
    os._exit(0)
elif __name__ == "__main__":
    status = main(sys.argv[1])  # the result file is written (and the feedback, and the graded notebook)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: unloading torch, nbgrader and SQLAlchemy took 1–2 s per submission
