"""The execute step: run each distinct canonical notebook once in a jailed worker and hand back what it produced,
nothing written to the batch's output folder.

The batch enters it twice: :func:`workers` (first, so that the workers' fork server imports what a worker needs
while the batch canonicalises: ``jail.machine``, once, for what this machine gives the kernels and the staged
solutions in the batch's scratch folder; then the fork server, ``forkserver.serving``, once), then :func:`run` (the
grading notebook written once, one :class:`Job` per distinct notebook, ``jobs`` at a time here or through an
:class:`Executor`, each run's outcome given to the files that share it, :func:`share`, and handed back to the
batch as it ends). The worker runs the
notebook with nbclient (``worker.py``, ``runner.py``); no nbgrader, no gradebook.

:func:`run_job` is the one job function: the local pool (``jobs`` threads), the fork server (``forkserver.py``,
where it runs) and a Dask task (``executors.py``, on its machine) all call it. It starts the worker
(``python -m autograder.grading.worker JOB``: forked from the batch's fork server, else a new interpreter), waits
for it within the notebook's time limit, and returns its :class:`Result` and graded notebook: or, where the worker
left none (crashed, killed, too long), an "error" result that says why. Also here: what this machine gives the
kernels (cores, memory, uids).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from typing import Protocol

import nbformat

from .. import releases
from ..wording import Message, say
from . import forkserver, jail, memory, runner
from .forkserver import FORK_SWITCH, Spawner
from .submission import Result, Submission, read_result
from .worker import Job

logger = logging.getLogger(__name__)


RUN_FILE = "grading_run.json"  # how the last run graded its kernels (jailed or not): the summary says so


# this process's cgroup lookup lives with the kernel's memory limits (memory.py), which make a cgroup per kernel
CGROUP_ROOT, PROC_CGROUP, cgroup_dirs = memory.CGROUP_ROOT, memory.PROC_CGROUP, memory.cgroup_dirs


def usable_cores(proc_cgroup: pathlib.Path = PROC_CGROUP, root: pathlib.Path = CGROUP_ROOT) -> int:
    """The cores the batch may use: this process's CPU affinity, capped by its cgroup's CPU quota (v2 ``cpu.max``,
    v1 ``cpu.cfs_quota_us``), at least 1. A container given half a vCPU (Gradescope's default) reports the host's
    cores in ``os.cpu_count()``, and a kernel with that many torch threads crawls."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for version, d in cgroup_dirs("cpu", proc_cgroup, root):
        try:
            if version == 2:  # "max 100000" or "50000 100000"
                quota, period = d.joinpath("cpu.max").read_text().split()[:2]
            else:
                quota = d.joinpath("cpu.cfs_quota_us").read_text().strip()
                period = d.joinpath("cpu.cfs_period_us").read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0:
                cores = min(cores, max(1, -(-int(quota) // int(period))))
        except (OSError, ValueError):
            pass
    return max(1, cores)


def container_memory(
    proc_cgroup: pathlib.Path = PROC_CGROUP, root: pathlib.Path = CGROUP_ROOT
) -> tuple[int, int | None]:
    """(how many processes the OOM killer has ended in this process's memory cgroup so far, its memory limit in MB
    or None): v2 ``memory.events`` and ``memory.max``, v1 ``memory.oom_control`` and ``memory.limit_in_bytes``;
    (0, None) where neither can be read. A grader in a container with a memory limit (Gradescope) compares the
    count before and after grading: a kill in between means the grade cannot be trusted."""
    kills, limit = 0, None
    for version, d in cgroup_dirs("memory", proc_cgroup, root):
        events, cap = (
            ("memory.events", "memory.max") if version == 2 else ("memory.oom_control", "memory.limit_in_bytes")
        )
        try:
            for line in d.joinpath(events).read_text().splitlines():
                if line.startswith("oom_kill "):
                    kills = max(kills, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        try:
            text = d.joinpath(cap).read_text().strip()
            if text != "max" and int(text) < 1 << 50:  # v1 writes "no limit" as a huge number
                mb = int(text) // 2**20
                limit = mb if limit is None else min(limit, mb)
        except (OSError, ValueError):
            pass
    return kills, limit


def kernel_uid(student_id: str, drop_uid: bool) -> int:
    """The kernel's own unprivileged uid for ``student_id`` (``jail.uid_drop_possible()``), else -1."""
    return 100000 + zlib.crc32(student_id.encode()) % 100000 if drop_uid else -1


def worker_command(prefix: list[str], job_path: pathlib.Path) -> list[str]:
    """The command that grades the job at ``job_path`` (``prefix``: ``jail.unshare_prefix()``)."""
    return prefix + [sys.executable, "-m", "autograder.grading.worker", str(job_path)]


def _worker_env() -> dict[str, str]:
    """The worker's environment: in a checkout, the checkout first on PYTHONPATH, so that the worker and its kernel
    run this grader's code even where another copy of the course package is installed (e.g. an editable install
    of another checkout)."""
    env = dict(os.environ)
    root = releases.PACKAGE_DIR.parent
    if (root / "pyproject.toml").exists():
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


class Executor(Protocol):
    """Runs worker jobs elsewhere (``executors.py``: a Dask cluster) with the job function :func:`run_job` and gives
    ``(job, result, graded)`` here, once per job, as each ends (``graded``: the graded notebook's text, or None);
    ``job`` is as the batch built it, ``text`` the canonical notebook it grades."""

    def describe(self) -> str: ...

    def grade(
        self, jobs: Sequence[tuple[Job, str]], notebook_timeout: int
    ) -> Iterator[tuple[Job, Result, str | None]]: ...


@dataclasses.dataclass
class Workers:
    """What a batch's jobs share, made once (:func:`workers`)."""

    chapter: releases.Chapter  # as the batch read it: its name, points and release notebook
    out: pathlib.Path  # the batch's output folder (hidden from every kernel)
    machine: jail.Machine  # what this machine gives the kernels, and the staged solutions (machine.stage)
    scratch: pathlib.Path  # every job's sandbox; ``private``: the jobs, notebooks and results no kernel may read
    spawner: Spawner | None  # the fork server, or None: workers started as new interpreters (or run elsewhere)

    @property
    def private(self) -> pathlib.Path:
        return self.scratch / "jobs"


@contextlib.contextmanager
def workers(chapter: releases.Chapter, out: pathlib.Path, *, local: bool = True) -> Iterator[Workers]:
    """The batch's workers, ready before it canonicalises: the scratch folder; what this machine gives
    ``chapter``'s kernels and the course staged for them there (``jail.machine``: said in the log, and kept for the
    summary in ``out/grading_run.json``); the worker fork server (``forkserver.serving``: the workers' imports paid
    once a batch, each worker forked from it in namespaces of its own where the machine gives them; none where
    workers run elsewhere, ``local`` False, or are to be started as new interpreters, ``AUTOGRADER_FORK_WORKERS=off``),
    importing while the batch canonicalises. All closed and removed when the batch is done."""
    forked = local and os.environ.get(FORK_SWITCH, "").lower() not in ("0", "off", "no", "false")
    with tempfile.TemporaryDirectory(prefix="autograder-", ignore_cleanup_errors=True) as tmp:
        scratch = pathlib.Path(tmp)
        scratch.chmod(0o711)
        (scratch / "jobs").mkdir(mode=0o700)  # every submission's canonical notebook, job and result
        machine = jail.machine(chapter.name, scratch / "stage")
        (out / RUN_FILE).write_text(json.dumps({"jailed": not machine.no_jail, "why_not": machine.no_jail or ""}))
        server = forkserver.serving(chapter.name, bool(machine.prefix), _worker_env(), out) if forked else None
        with server or contextlib.nullcontext() as spawner:
            yield Workers(chapter, out, machine, scratch, spawner)


def run(
    runs: dict[str, tuple[str, list[Submission]]],
    workers: Workers,
    *,
    executor: Executor | None = None,
    jobs: int | None = None,
    cell_timeout: int,
    notebook_timeout: int,
    memory_mb: int,
    worker_memory_mb: int = memory.WORKER_MB,
) -> Iterator[list[Submission]]:
    """Run each distinct canonical notebook of ``runs`` (its hash -> its text and the submissions that share it)
    once, in the grading notebook's form (``runner.grading_notebook`` of the chapter's release notebook, written
    once into the private folder), with :func:`run_job` here (``jobs`` at a time) or through ``executor``; give
    each run's submissions as it ends, with its outcome (:func:`share`: the batch records them then, so that a
    rerun skips what is done)."""
    if not runs:
        return
    machine, private, chapter = workers.machine, workers.private, workers.chapter
    if machine.as_root:
        raise jail.RootKernelRefused(machine.as_root)
    grading = private / runner.GRADING_NOTEBOOK
    nbformat.write(runner.grading_notebook(chapter.release, chapter.name), grading)
    hidden = machine.hidden + [str(workers.out), str(private)]
    cores = usable_cores()
    jobs = jobs or cores
    copies = sum(len(group) - 1 for _, group in runs.values())
    logger.info(
        f"  {len(runs)} distinct notebooks to run"
        + (f" ({copies} identical {'copy shares' if copies == 1 else 'copies share'} a run)" if copies else "")
        + (f", {jobs} at a time" if executor is None else f", {executor.describe()}")
        + ("" if machine.prefix else " (no network isolation: not root or unshare unavailable)")
        + ("" if machine.drop_uid else " (kernels keep this user's uid: the Python installation is not world-readable)")
    )
    by_sid = {group[0].student_id: group for _, group in runs.values()}

    def job_for(group: list[Submission]) -> Job:
        sid = group[0].student_id
        name = group[0].result_file.stem  # a file name unique in the batch (collect.py made it)
        return Job(
            canonical=str(private / f"{name}.canonical.ipynb"),
            chapter=chapter.name,
            student_id=sid,
            grading=str(grading),
            stage=str(machine.stage),
            sandbox=str(workers.scratch / name),
            result=str(private / f"{name}.result.json"),
            graded=str(private / f"{name}.graded.ipynb"),
            cell_timeout=cell_timeout,
            memory_mb=memory_mb,
            worker_memory_mb=worker_memory_mb,
            points=chapter.points,
            hidden_files=hidden,
            netns=bool(machine.prefix),
            uid=kernel_uid(sid, machine.drop_uid),
            # kernels share the cores: more torch threads than cores per kernel makes every kernel crawl
            threads=max(1, cores // jobs),
            jail=not machine.no_jail,
        )

    def run_one(text: str, group: list[Submission]) -> tuple[Result, str | None]:
        job = job_for(group)
        pathlib.Path(job.canonical).write_text(text)
        job_path = private / f"{group[0].result_file.stem}.job.json"
        try:
            return run_job(job, job_path, machine.prefix, workers.scratch, notebook_timeout, workers.spawner)
        finally:
            shutil.rmtree(job.sandbox, ignore_errors=True)

    if executor is None:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            running = {pool.submit(run_one, text, group): group for text, group in runs.values()}
            for future in concurrent.futures.as_completed(running):
                yield share(running[future], *future.result())
    else:  # e.g. a Dask cluster: runs the same job function elsewhere, the results come back here
        done = executor.grade([(job_for(group), text) for text, group in runs.values()], notebook_timeout)
        for job, result, graded in done:
            yield share(by_sid[job.student_id], result, graded)


def share(group: list[Submission], result: Result, graded: str | None) -> list[Submission]:
    """Give one run's outcome (the worker's judgement) to the submissions whose canonical notebook it ran: the first
    as it came; each other its own warnings, the warnings from running the code (the same for every copy) and which
    file it shares the run with (grades.csv says so; its feedback never names the other student)."""
    first, *others = group
    first.outcome, first.graded = result, graded
    ran = dataclasses.replace(result, warnings=[w for w in result.warnings if w not in first.warnings])
    for other in others:
        other.outcome, other.graded, other.same_as = ran, graded, first.label
    return group


def run_job(
    job: Job, job_path: pathlib.Path, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None = None
) -> tuple[Result, str | None]:
    """Run the worker of ``job`` (written to ``job_path``; ``prefix``: :func:`jail.unshare_prefix`'s) and return its
    result and graded notebook's text (None where it did not run to the end), or an "error" result when it left
    none (crashed, killed, or ran longer than ``timeout`` seconds: then its whole process group is killed). With
    ``spawner``, the worker is forked from the batch's fork server, else started as a new interpreter."""
    for old in (pathlib.Path(job.result), pathlib.Path(job.graded)):
        old.unlink(missing_ok=True)
    with memory.worker_limit(job.worker_memory_mb) as limit:  # the worker's memory cgroup, removed after it
        job.worker_cgroup = str(limit.group or "")  # the worker joins it first; its kernel's is made beside it
        result, graded, why = _run_worker(job, job_path, prefix, cwd, timeout, spawner)
    if result is None:  # the worker left no result: crashed, killed, or too long
        said = worker_out_of_memory(job, limit.oom_killed) or why
        assert said is not None  # (a worker that left no result has its why)
        result = Result("", "", job.student_id, "error", str(said), reasons=[said])
    return result, graded


def worker_out_of_memory(job: Job, oom_killed: bool) -> Message | None:
    """The row's reason when the OOM killer ended the worker in its memory cgroup (None otherwise)."""
    if not oom_killed:
        return None
    return say("worker out of memory", mb=job.worker_memory_mb)


def _run_worker(
    job: Job, job_path: pathlib.Path, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None
) -> tuple[Result | None, str | None, Message | None]:
    """The worker's result and graded notebook, or (None, None, why it left no result)."""
    result_path, graded_path = pathlib.Path(job.result), pathlib.Path(job.graded)
    job.write(job_path)
    cmd = worker_command(prefix, job_path)
    returncode: int | None = None
    if spawner is not None:
        log = job_path.with_suffix(".log")  # beside the job file, where no kernel can read
        try:
            returncode, timed_out = spawner.run(str(job_path), str(log), timeout)
        except RuntimeError:  # the fork server has ended: start this worker as a new interpreter
            spawner = None
        else:
            output = log.read_bytes() if log.exists() else b""
            why = say("notebook too long", seconds=timeout) if timed_out else say("worker exit code", code=returncode)
    if spawner is None:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd, env=_worker_env()
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
            why = say("worker exit code", code=proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            why = say("notebook too long", seconds=timeout)
        returncode = proc.returncode
    if not result_path.exists():
        tail = (output or b"").decode(errors="replace").strip().splitlines()[-1:]
        return None, None, say("with last line", why=why, line=tail[0][:150]) if tail and returncode else why
    result = read_result(result_path)
    graded = graded_path.read_text() if result.status != "error" and graded_path.exists() else None
    return result, graded, None
