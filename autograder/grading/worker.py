"""Grade one submission in a process of its own: ``python -m autograder.grading.worker JOB.json``.

The batch's execute step (``execute.py``) writes a :class:`Job` and starts one worker per distinct canonical
notebook, under ``unshare --net --pid`` when it can (``jail.py``), or forks it from the batch's fork server
(``forkserver.py``). The worker runs the grading notebook itself with nbclient (``runner.py``) in a fresh kernel
(launched by ``jail.py``, its recorder armed by ``guard.py``), collects the recorder's signed
records over a socket only the recorder may open (``channel.py``), judges every check again on them (``judge.py``:
the only verdict) and applies the scoring rule (``scoring.py``).
It writes only into the batch's private folder: its result (``job.result``) and the graded notebook
(``job.graded``); the batch writes the feedback, the result file and the reports. The student's code never runs in
this process.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # python -m autograder.grading.worker: this process grades one submission
    # nbformat imports jsonschema, which imports rfc3987_syntax where it is installed and compiles
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

from ..wording import Message, Said, say
from . import channel, jail, judge, memory, questions, runner, scoring
from .reasons import failure_reasons, ungraded_cell_errors
from .redaction import grader_secrets, secret_output_lines
from .submission import Result, result_fields


@dataclasses.dataclass
class Job:
    """Everything the worker needs to grade one canonical notebook (written as JSON by the batch)."""

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

    def write(self, path: pathlib.Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, path: pathlib.Path) -> Job:
        return cls(**json.loads(pathlib.Path(path).read_text()))


def main(job_path: str) -> int:
    """Grade the job at ``job_path`` and leave its result at ``job.result``, whatever happens (a crash of the
    grading itself is an "error" result with the traceback)."""
    job = Job.read(pathlib.Path(job_path))
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


def _kernel_folder(sandbox: pathlib.Path) -> pathlib.Path:
    """The kernel's working folder (its launcher gives it to the kernel's uid), empty: in fallback mode the kernel
    may write there."""
    folder = sandbox / "notebook"
    folder.mkdir(mode=0o700)
    return folder


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
    an answer that never returns costs its own exercise, stopped by the check run, before the cell's limit
    interrupts the kernel (``runner.run_notebook``)."""
    return max(1, cell_timeout // 2)


def _kernel_files(link: pathlib.Path, job: Job) -> bool:
    """Make ``link`` (the jailed kernel's short folder) a memory file system of ``--memory-mb`` holding its
    runtime folder, home, /tmp and /dev/shm (:func:`memory.mount_kernel_files`), where the worker may mount one (root,
    in its own mount namespace); True if it did. Else only ``link/run`` is made, and the home stays on disk."""
    link.chmod(0o755)
    sized = job.netns and os.geteuid() == 0 and memory.mount_kernel_files(link, job.memory_mb or 2048)
    (link / "run").mkdir(mode=0o700)
    for name in ("tmp", "shm") if sized else ():
        (link / name).mkdir()
        (link / name).chmod(0o1777)
    return sized


def _channel_folder(job: Job) -> pathlib.Path:
    """Fallback mode: a short folder (Unix socket paths are limited to 107 bytes) whose ``run/`` holds the kernel's
    channel sockets, which the kernel binds as its own uid (where the worker, as root, drops it to one)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ag-"))
    (folder / "run").mkdir(mode=0o700)
    if job.uid > 0 and os.geteuid() == 0:
        for p in (folder, folder / "run"):
            os.chown(p, job.uid, job.uid)
    return folder


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
    # Jailed: the kernel has its own network namespace, so the records and the kernel's channels use socket files
    # in a short folder (Unix socket paths are limited to 107 bytes) that the jail binds: the socket read-only,
    # the runtime folder (connection file, channels) writable. Else: an abstract address for the records, and the
    # kernel's channels socket files in a short folder of its own all the same — not TCP, whose ports jupyter_client
    # picks free and a kernel started beside this one can take before this one binds them ("Address already in use":
    # the kernel dies before its first reply). Where it can be, the jail's folder is a memory file system of
    # --memory-mb that also holds the kernel's home, /tmp and /dev/shm: all it may write, bounded as a whole and
    # counted in its memory cgroup.
    link = pathlib.Path(tempfile.mkdtemp(prefix="ag-")) if job.jail else None
    channels = link if link is not None else _channel_folder(job)
    sized = link is not None and _kernel_files(link, job)
    home = (link if sized and link is not None else sandbox) / "home"
    home.mkdir(mode=0o700)
    group = _kernel_cgroup(job)

    key = os.urandom(32)
    records = channel.RecordServer(str(link / channel.RECORD_FILE) if link else None)  # only the recorder may write
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
        env[memory.CGROUP_ENV] = str(group)
    os.environ.update(env)
    os.chdir(sandbox)

    checks = _import_in_background(f"autograder.{chapter}")  # for judge.py, while the kernel runs
    try:
        run = runner.run_notebook(
            runner.graded_notebook(nb, nbformat.read(job.grading, as_version=4)),
            cwd=_kernel_folder(sandbox),
            cell_timeout=job.cell_timeout,
            ipc=f"{channels}/run/k",
        )
    finally:
        records.close()
        if link is not None and sized:
            memory.unmount_kernel_files(link)  # the kernel's files freed before its cgroup goes
        shutil.rmtree(channels, ignore_errors=True)
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


if __name__ == "__main__":
    status = main(sys.argv[1])  # the worker's result file is written (and the graded notebook, when it ran)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: unloading torch took 1–2 s per submission
