"""Run one submission in its own worker process, sandbox directory and (when root) its own user id.

``python -m autograder.sandbox worker JOB.json`` grades one canonicalised submission (nbgrader autograde in a
private copy of the course directory, guard records, feedback) and writes its result JSON; the batch grader
starts one such worker per submission, under ``unshare --net --pid`` when it can (no network; every process
the submission starts dies with the worker).

``python -m autograder.sandbox kernel CONNECTION_FILE`` is the grading kernel's launcher (the ``python3``
kernelspec that the worker puts first on ``JUPYTER_PATH``): it sets resource limits (address space, file size,
processes, no core dumps), drops to the submission's own unprivileged uid (when started as root), and execs
ipykernel in the submission's working directory.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import traceback

from . import notebooks

# ------------------------------------------------------------------------------------------------ staging


def stub_solution_source(source: str) -> str:
    """A solution module with every ### BEGIN/END SOLUTION region replaced by ``raise NotImplementedError()``."""
    out, skipping = [], False
    for line in source.splitlines(keepends=True):
        if line.strip() == notebooks.BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}raise NotImplementedError()  # the reference is not available while grading\n")
            skipping = True
        elif line.strip() == notebooks.END:
            skipping = False
        elif not skipping:
            out.append(line)
    return "".join(out)


def stage_solutions(chapter: str, stage: pathlib.Path) -> pathlib.Path:
    """A copy of the ``solutions`` package in which ``chapter``'s module is stubbed (earlier chapters stay real)."""
    src = notebooks.ROOT / "solutions"
    dst = stage / "solutions"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    mod = dst / f"{chapter}.py"
    if mod.exists():
        mod.write_text(stub_solution_source(mod.read_text()))
    for p in stage.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    stage.chmod(0o755)
    return stage


def hidden_files(chapter: str) -> list[str]:
    """Files the grading kernel may not open: every copy of the chapter's reference and the sample submissions."""
    found = set()
    for entry in sys.path + [str(notebooks.ROOT)]:
        if not entry:
            continue
        base = pathlib.Path(entry)
        for p in (
            base / "solutions" / f"{chapter}.py",
            base / "autograder" / "samples",
            base / "build",
            base / ".git",
            base / "_build",
            base / "grading_out",
            *(base / "solutions" / "__pycache__").glob(f"{chapter}.*.pyc"),
        ):
            if p.exists():
                found.add(str(p.resolve()))
    return sorted(found)


# ------------------------------------------------------------------------------------------------ kernel


def kernel_main(connection_file: str) -> None:
    uid = int(os.environ.get("AUTOGRADER_UID", "-1"))
    mem_mb = int(os.environ.get("AUTOGRADER_MEMORY_MB", "0"))
    if mem_mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 << 20, 512 << 20))
    sandbox = pathlib.Path(os.environ["AUTOGRADER_SANDBOX"])
    (sandbox / "kernel.pid").write_text(str(os.getpid()))  # the worker accepts guard records from this pid only
    if uid > 0 and os.geteuid() == 0:
        conn = sandbox / "home" / "kernel-connection.json"
        shutil.copyfile(connection_file, conn)
        for p in [conn, pathlib.Path.cwd(), *pathlib.Path.cwd().iterdir()]:
            os.chown(p, uid, uid)
        connection_file = str(conn)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (512, 512))
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file])


def uid_drop_possible() -> bool:
    """True when running as root and the Python installation is readable by other users (every parent directory
    of the interpreter and its standard library world-searchable), so the kernel can run as its own uid."""
    import sysconfig

    if os.geteuid() != 0:
        return False
    for path in (os.path.realpath(sys.executable), sysconfig.get_paths()["stdlib"], sys.prefix):
        p = pathlib.Path(path)
        for parent in [p, *p.parents]:
            if parent.exists() and parent.is_dir() and not parent.stat().st_mode & 0o001:
                return False
    return True


def write_kernelspec(where: pathlib.Path) -> pathlib.Path:
    spec = where / "kernels" / notebooks.KERNELSPEC["name"]
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "autograder.sandbox", "kernel", "{connection_file}"],
                "display_name": notebooks.KERNELSPEC["display_name"],
                "language": "python",
            }
        )
    )
    return where


# ------------------------------------------------------------------------------------------------ worker


def _failure_reasons(nb) -> list[str]:
    from .grading import _failure_reasons as reasons

    return reasons(nb)


def worker_main(job_path: str) -> int:
    job = json.loads(pathlib.Path(job_path).read_text())
    result_path = pathlib.Path(job["result"])
    try:
        result = _grade_one(job)
    except Exception as exc:
        result = {
            "status": "error",
            "reason": f"grader error: {type(exc).__name__}: {str(exc)[:200]}",
            "scores": {},
            "warnings": [],
            "trace": traceback.format_exc()[-2000:],
        }
    result.update(submission=job["submission_name"], sha256=job["sha256"], student_id=job["student_id"])
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, sort_keys=True))
    tmp.replace(result_path)
    return 0


def _grade_one(job: dict) -> dict:
    import nbformat

    from . import grading, guard

    if job.get("netns"):
        subprocess.run(["ip", "link", "set", "lo", "up"], check=False, capture_output=True)
    chapter, sid = job["chapter"], job["student_id"]
    nb = nbformat.read(job["canonical"], as_version=4)  # canonicalised by the batch (autograder/canonical.py)
    warnings = list(job["warnings"]) + [f"needs review: {w}" for w in suspicious(nb, chapter)]

    sandbox = pathlib.Path(job["sandbox"])
    if sandbox.exists():
        shutil.rmtree(sandbox)
    sandbox.mkdir(parents=True, mode=0o711)
    home = sandbox / "home"
    home.mkdir(mode=0o700)
    course = sandbox / "course"
    shutil.copytree(job["course_template"], course)
    for p in [course, *course.iterdir()]:
        p.chmod(0o711 if p.is_dir() else 0o600)
    target = course / "submitted" / sid / chapter / f"{chapter}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    (course / "autograded").mkdir(mode=0o711, exist_ok=True)
    (course / "autograded" / sid).mkdir(mode=0o711, exist_ok=True)

    key = os.urandom(32)
    records = guard.RecordServer()  # the guard's records come here over a socket only its own code may open
    config = home / "guard.json"
    config.write_text(
        json.dumps(
            {
                "key": key.hex(),
                "address": records.address,
                "sandbox": str(home),
                "hidden_files": job["hidden_files"]
                + [str(course / "source"), str(course / "gradebook.db"), str(sandbox / "kernel.pid")],
            }
        )
    )
    uid = int(job.get("uid", -1))
    if uid > 0 and os.geteuid() == 0:
        for p in (home, config):
            os.chown(p, uid, uid)
    kernels = write_kernelspec(sandbox / "jupyter")
    env = {
        "AUTOGRADER_GUARD_CONFIG": str(config),
        "AUTOGRADER_SANDBOX": str(sandbox),
        "AUTOGRADER_UID": str(uid),
        "AUTOGRADER_MEMORY_MB": str(job["memory_mb"]),
        "JUPYTER_PATH": str(kernels),
        "HOME": str(home),
        "MPLCONFIGDIR": str(home),
        "IPYTHONDIR": str(home / ".ipython"),
        "TMPDIR": str(home),
        "MPLBACKEND": "Agg",
        "JUPYTER_RUNTIME_DIR": str(sandbox / "runtime"),
        "OMP_NUM_THREADS": str(job.get("threads", 1)),
        "MKL_NUM_THREADS": str(job.get("threads", 1)),
        "PYTHONPATH": os.pathsep.join([job["stage"], os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    os.environ.update(env)
    os.chdir(sandbox)

    api = grading._api(course, job["cell_timeout"])
    try:
        result = api.autograde(chapter, sid, force=True, create=True)
    finally:
        records.close()
    graded_path = course / "autograded" / sid / chapter / f"{chapter}.ipynb"
    log_text = (result.get("log") or "") + (result.get("error") or "")
    try:
        kernel_pid = int((sandbox / "kernel.pid").read_text())
    except (OSError, ValueError):
        kernel_pid = -1
    entries, bad = records.records(kernel_pid, key)
    blocked = sorted({f"{e['what']} ({e['event']})" for e in entries if e.get("type") == "blocked"})
    warnings += [f"blocked: {b}" for b in blocked]
    if not result["success"] or not graded_path.exists():
        reason = "autograde failed"
        if "DeadKernelError" in log_text or "Kernel died" in log_text or "kernel died" in log_text.lower():
            reason = "the kernel died (the notebook exited, crashed or ran out of memory)"
        elif "CellTimeoutError" in log_text or "timed out" in log_text.lower():
            reason = f"a cell ran longer than {job['cell_timeout']} s"
        else:
            last = [ln for ln in log_text.strip().splitlines() if ln.strip()]
            reason += f": {last[-1][:200]}" if last else ""
        return {"status": "error", "reason": reason, "scores": {}, "warnings": warnings, "log": log_text[-4000:]}

    nbg_scores = grading._gradebook_scores(course, chapter, sid)
    graded = nbformat.read(graded_path, as_version=4)
    reasons = _failure_reasons(graded)
    verdict_entries = [e for e in entries if e.get("type") == "verdict"]
    by_exercise: dict[str, list] = {}
    for e in verdict_entries:
        by_exercise.setdefault(e["exercise"], []).append(e)
    # every record counts: a violation in any of them, and a failure in any run of an exercise's verdict
    violations = sorted({v for e in verdict_entries for v in e["violations"]})
    reruns = sorted(n for n, es in by_exercise.items() if len(es) > 1)
    if reruns:
        warnings.append(f"needs review: the notebook ran the grader's verdict itself ({', '.join(reruns)})")
    armed = any(e.get("type") == "armed" for e in entries)
    scores = {}
    for name, score in nbg_scores.items():
        runs = by_exercise.get(name, [])
        failed = [e for e in runs if not e["passed"]]
        if score > 0 and (not runs or failed):
            why = (
                "no signed verdict from the grader's own checks"
                if not runs
                else "; ".join(failed[0]["failures"] + failed[0]["violations"])[:200]
            )
            reasons.append(f"{name}: points withheld — {why}")
            score = 0.0
        scores[name] = score
    status = "graded"
    if bad:
        violations.append(f"{bad} forged or corrupted guard record(s)")
    if any(e.get("threads", 0) > 0 for e in verdict_entries):
        warnings.append("needs review: the notebook's own threads were running while the checks ran")
    if not armed:
        violations.append("the grading guard did not start")
    if violations:
        scores = {n: 0.0 for n in scores}
        reasons.insert(0, "integrity: " + "; ".join(violations)[:300])
        status = "integrity"
    fb = pathlib.Path(job["feedback"])
    grading._write_feedback(graded, fb, sid, chapter, scores, job["points"], warnings=warnings, reasons=reasons)
    keep = pathlib.Path(job["keep"])
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(graded_path, keep / f"{sid}.ipynb")
    return {"status": status, "reason": "; ".join(reasons), "scores": scores, "warnings": warnings}


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
]


def suspicious(nb, chapter: str) -> list[str]:
    """Static flags for the instructor (not score changes): code that touches the grading machinery."""
    flags = []
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
    if sys.argv[1] == "kernel":
        kernel_main(sys.argv[2])
    elif sys.argv[1] == "worker":
        sys.exit(worker_main(sys.argv[2]))
