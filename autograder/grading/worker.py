"""Grade one submission in a process of its own: ``python -m autograder.grading.worker JOB.json``.

The batch (``batch.py``) writes a :class:`Job` and starts one worker per distinct canonical notebook, under
``unshare --net --pid`` when it can (``jail.py``). The worker stages a private copy of the course directory,
runs nbgrader's real ``autograde`` in a fresh kernel (launched by ``jail.py``, armed by ``guard.py``), collects
the guard's signed records over a socket only the guard's engine may open, applies the scoring rule
(``scoring.py``), and writes the result file and the feedback page (``results.py``). The student's code never
runs in this process.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Sequence

import nbformat

from . import guard, jail, judge, nbgrader_adapter, scoring
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


def _autograde_failure(
    log_text: str, cell_timeout: int, memory_mb: int = 0, records: Sequence[dict] = (), order: Sequence[str] = ()
) -> str:
    """Why nbgrader's autograde failed, in one line, from its log (and, for a kernel that died, the guard's
    records: the exercises graded before it died)."""
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
        return (
            f"the kernel died{where} (an exit such as os._exit, a crash, or the{limit} memory limit); "
            "nothing after that point could be graded"
        )
    if "CellTimeoutError" in log_text or "timed out" in log_text.lower():
        return f"a cell ran longer than {cell_timeout} s"
    last_line = [ln for ln in log_text.strip().splitlines() if ln.strip()]
    return "autograde failed" + (f": {last_line[-1][:200]}" if last_line else "")


def grade_one(job: Job) -> Result:
    """Run nbgrader's autograde on the job's notebook in a kernel armed with the guard; score; write feedback."""
    if job.netns:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    chapter, sid = job.chapter, job.student_id
    nb = nbformat.read(job.canonical, as_version=4)  # canonicalised by the batch (autograder/canonical.py)
    warnings = list(job.warnings) + [f"needs review: {w}" for w in suspicious(nb, chapter)]

    sandbox = pathlib.Path(job.sandbox)
    if sandbox.exists():
        shutil.rmtree(sandbox)
    sandbox.mkdir(parents=True, mode=0o711)
    home = sandbox / "home"
    home.mkdir(mode=0o700)
    course = _stage_course(job, nb, sandbox)

    key = os.urandom(32)
    # Jailed: the kernel has its own network namespace, so the records and the kernel's channels use socket files
    # in a short folder (Unix socket paths are limited to 107 bytes) that the jail binds: the socket read-only,
    # the runtime folder (connection file, channels) writable. Else: an abstract address, TCP on loopback.
    link = pathlib.Path(tempfile.mkdtemp(prefix="ag-")) if job.jail else None
    if link is not None:
        link.chmod(0o755)
        (link / "run").mkdir(mode=0o700)
    records = guard.RecordServer(str(link / guard.RECORD_FILE) if link else None)  # only the guard's engine may write
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
        )
        view.write(sandbox / "jail.json")
        env["AUTOGRADER_JAIL_VIEW"] = str(sandbox / "jail.json")
    os.environ.update(env)
    os.chdir(sandbox)

    try:
        success, log_text = nbgrader_adapter.autograde(
            course, chapter, sid, job.cell_timeout, ipc=f"{link}/run/k" if link else None
        )
    finally:
        records.close()
        if link is not None:
            shutil.rmtree(link, ignore_errors=True)
    graded_path = course / "autograded" / sid / chapter / f"{chapter}.ipynb"
    try:
        kernel_pid = int((sandbox / "kernel.pid").read_text())
    except (OSError, ValueError):
        kernel_pid = -1
    entries, forged = records.records(kernel_pid, key)
    entries = judge.judge(chapter, entries)  # the checks again, here, on what the student's code returned
    warnings += scoring.blocked_warnings(entries)
    if not success or not graded_path.exists():
        reason = _autograde_failure(log_text, job.cell_timeout, job.memory_mb, entries, list(job.points))
        write_feedback(
            pathlib.Path(job.feedback), None, sid, chapter, {}, job.points, warnings=warnings, reasons=[reason],
            unreadable=False,
        )  # fmt: skip
        return Result(job.submission_name, job.sha256, sid, "error", reason, warnings=warnings, log=log_text[-4000:])

    graded = nbformat.read(graded_path, as_version=4)
    warnings += ungraded_cell_errors(graded, job.cell_timeout)
    scored = scoring.score(
        nbgrader_adapter.gradebook_scores(course, chapter, sid),
        entries,
        forged,
        failure_reasons(graded, job.cell_timeout, job.memory_mb),
    )
    warnings += scored.warnings
    secrets = grader_secrets(graded, chapter)
    shown = secret_output_lines(graded, secrets)
    if shown:  # e.g. code that read the grading notebook or a reference solution and printed it
        warnings.append(
            f"needs review: {shown} output line(s) showed the hidden tests or the reference solution "
            "(removed from the feedback)"
        )
    details: dict[str, list[str]] = {}
    for e in entries:
        if e.get("type") == "verdict" and e.get("details"):
            details.setdefault(e["exercise"], e["details"])
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
    verdicts = [e for e in entries if e.get("type") == "verdict"]
    judged = {k: sum(e.get(f"judged_{k}", 0) for e in verdicts) for k in ("outside", "in_kernel")}
    return Result(
        job.submission_name,
        job.sha256,
        sid,
        scored.status,
        "; ".join(scored.reasons),
        scored.scores,
        warnings,
        judged={"outside": judged["outside"], "kernel": judged["in_kernel"]},
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
