"""The execute step, on the batch's side: run each distinct canonical notebook once in a worker (``worker.py``)
and hand back what it produced, nothing written to the batch's output folder.

The batch enters it twice: :func:`workers` (first, so that the fork server imports while the batch canonicalises),
then :func:`run`. :func:`run_job` is the one job function, called by the local pool and a Dask task
(``executors.py``) alike: it starts the worker (forked from the batch's fork server, :class:`Spawner`, else a new
interpreter), waits for it within the notebook's limit and returns its result and graded notebook, or an "error"
result that says why it left none. Also here: what this machine gives the kernels (cores, memory, uids).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import nbformat

from .. import releases
from ..wording import Message, say
from . import jail, memory, runner
from .submission import Result, Submission, read_result
from .worker import Job

logger = logging.getLogger(__name__)


RUN_FILE = "grading_run.json"  # how the last run graded its kernels (jailed or not): the summary says so
FORK_SWITCH = "AUTOGRADER_FORK_WORKERS"  # "off": start every worker as a new interpreter


def usable_cores(proc_cgroup: pathlib.Path = memory.PROC_CGROUP, root: pathlib.Path = memory.CGROUP_ROOT) -> int:
    """The cores the batch may use: this process's CPU affinity, capped by its cgroup's CPU quota (v2 ``cpu.max``,
    v1 ``cpu.cfs_quota_us``), at least 1. A container given half a vCPU (Gradescope's default) reports the host's
    cores in ``os.cpu_count()``, and a kernel with that many torch threads crawls."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for version, d in memory.cgroup_dirs("cpu", proc_cgroup, root):
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
    proc_cgroup: pathlib.Path = memory.PROC_CGROUP, root: pathlib.Path = memory.CGROUP_ROOT
) -> tuple[int, int | None]:
    """(how many processes the OOM killer has ended in this process's memory cgroup so far, its memory limit in MB
    or None): v2 ``memory.events`` and ``memory.max``, v1 ``memory.oom_control`` and ``memory.limit_in_bytes``;
    (0, None) where neither can be read. A grader in a container with a memory limit (Gradescope) compares the
    count before and after grading: a kill in between means the grade cannot be trusted."""
    kills, limit = 0, None
    for version, d in memory.cgroup_dirs("memory", proc_cgroup, root):
        kills = max(kills, memory.oom_kills(d))
        try:
            text = d.joinpath(memory.LIMIT_FILE[version]).read_text().strip()
            if text != "max" and int(text) < 1 << 50:  # v1 writes "no limit" as a huge number
                mb = int(text) // 2**20
                limit = mb if limit is None else min(limit, mb)
        except (OSError, ValueError):
            pass
    return kills, limit


def kernel_uid(student_id: str, drop_uid: bool) -> int:
    """The kernel's own unprivileged uid for ``student_id`` (``jail.uid_drop_possible()``), else -1."""
    return 100000 + zlib.crc32(student_id.encode()) % 100000 if drop_uid else -1


def _worker_env() -> dict[str, str]:
    """The worker's environment: in a checkout, the checkout first on PYTHONPATH, so that the worker and its kernel
    run this grader's code even where another copy of the course package is installed (e.g. an editable install
    of another checkout)."""
    env = dict(os.environ)
    root = releases.PACKAGE_DIR.parent
    if (root / "pyproject.toml").exists():
        env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def private_folder(scratch: pathlib.Path) -> pathlib.Path:
    """Make ``scratch`` (a new folder) the scratch folder of a batch or of one Dask task: its jobs' sandboxes go in it
    (0711), and in its private folder ``jobs`` (0700, returned) what no kernel may read: the canonical notebooks,
    the grading notebook, the results and the graded notebooks (:func:`job_files`)."""
    scratch.chmod(0o711)
    private = scratch / "jobs"
    private.mkdir(mode=0o700)
    return private


def job_files(scratch: pathlib.Path, name: str) -> dict[str, Any]:
    """The Job fields of the job ``name`` (a file name unique in its scratch folder) in ``scratch``
    (:func:`private_folder`): its canonical notebook, result and graded notebook in the private folder; its sandbox
    beside it."""
    private = scratch / "jobs"
    return {
        "canonical": str(private / f"{name}.canonical.ipynb"),
        "sandbox": str(scratch / name),
        "result": str(private / f"{name}.result.json"),
        "graded": str(private / f"{name}.graded.ipynb"),
    }


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
    summary in ``out/grading_run.json``); the fork server (:class:`Spawner`; none where workers run elsewhere,
    ``local`` False, or ``AUTOGRADER_FORK_WORKERS=off``). All closed and removed when the batch is done."""
    forked = local and os.environ.get(FORK_SWITCH, "").lower() not in ("0", "off", "no", "false")
    with tempfile.TemporaryDirectory(prefix="autograder-", ignore_cleanup_errors=True) as tmp:
        scratch = pathlib.Path(tmp)
        private_folder(scratch)
        machine = jail.machine(chapter.name, scratch / "stage")
        (out / RUN_FILE).write_text(json.dumps({"jailed": not machine.no_jail, "why_not": machine.no_jail or ""}))
        spawner = Spawner(chapter.name, bool(machine.prefix), out) if forked else None
        try:
            yield Workers(chapter, out, machine, scratch, spawner)
        finally:
            if spawner is not None:
                spawner.close()


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
            **job_files(workers.scratch, name),
            chapter=chapter.name,
            student_id=sid,
            grading=str(grading),
            stage=str(machine.stage),
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
        try:
            return run_job(job, machine.prefix, workers.scratch, notebook_timeout, workers.spawner)
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
    job: Job, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None = None
) -> tuple[Result, str | None]:
    """Run the worker of ``job`` (``prefix``: :func:`jail.unshare_prefix`'s) in its own memory cgroup and return its
    result and graded notebook's text (None where it did not run to the end), or an "error" result when it left
    none (crashed, killed, or ran longer than ``timeout`` seconds: then its whole process group is killed)."""
    result_path, graded_path = pathlib.Path(job.result), pathlib.Path(job.graded)
    for old in (result_path, graded_path):
        old.unlink(missing_ok=True)
    with memory.worker_limit(job.worker_memory_mb) as limit:  # the worker's memory cgroup, removed after it
        job.worker_cgroup = str(limit.group or "")  # the worker joins it first; its kernel's is made beside it
        code, output = _start_worker(job, prefix, cwd, timeout, spawner)
    if result_path.exists():
        result = read_result(result_path)
        graded = graded_path.read_text() if result.status != "error" and graded_path.exists() else None
        return result, graded
    why = say("notebook too long", seconds=timeout) if code is None else say("worker exit code", code=code)
    tail = output.decode(errors="replace").strip().splitlines()[-1:]
    if tail and code:
        why = say("with last line", why=why, line=tail[0][:150])
    said = worker_out_of_memory(job, limit.oom_killed) or why
    return Result("", "", job.student_id, "error", str(said), reasons=[said]), None


def worker_out_of_memory(job: Job, oom_killed: bool) -> Message | None:
    """The row's reason when the OOM killer ended the worker in its memory cgroup (None otherwise)."""
    if not oom_killed:
        return None
    return say("worker out of memory", mb=job.worker_memory_mb)


def _start_worker(
    job: Job, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None
) -> tuple[int | None, bytes]:
    """Run the worker of ``job``, forked from ``spawner`` (or, without one or once it has ended, as a new
    interpreter): (its exit status, or None when it ran longer than ``timeout`` and was killed; its output)."""
    if spawner is not None:
        log = pathlib.Path(job.result).with_suffix(".log")  # in the private folder, where no kernel can read
        try:
            code = spawner.run(job, str(log), timeout)
            return code, log.read_bytes() if log.exists() else b""
        except RuntimeError:  # the fork server has ended: start this worker as a new interpreter
            pass
    proc = subprocess.Popen(
        prefix + [sys.executable, "-m", "autograder.grading.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=cwd,
        env=_worker_env(),
    )
    try:
        output = proc.communicate(json.dumps(dataclasses.asdict(job)).encode(), timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return None, proc.communicate()[0]
    return proc.returncode, output


class Spawner:
    """The batch's end of its fork server (``worker.serve``), started at once so that it imports while the batch
    canonicalises: :meth:`run` forks the worker of one job from it and waits for it. The requests go over a socket
    pair that no other process holds, each with its own reply pipe."""

    def __init__(self, chapter: str, namespaces: bool, cwd: pathlib.Path):
        self._requests, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cmd = [sys.executable, "-m", "autograder.grading.worker", "serve", chapter, "1" if namespaces else "0"]
        self._proc = subprocess.Popen(cmd, stdin=theirs.fileno(), env=_worker_env(), cwd=cwd, start_new_session=True)
        theirs.close()
        self._used = False

    def run(self, job: Job, log: str, timeout: float) -> int | None:
        """Fork the worker of ``job`` (its output in ``log``) and wait for it: its exit status, or None when it ran
        longer than ``timeout`` seconds (its process group, and with it its namespaces, is then killed). Raises
        RuntimeError when the server has ended."""
        self._used = True
        read_end, write_end = os.pipe()
        try:
            with open(log, "wb") as out:
                request = json.dumps(dataclasses.asdict(job)).encode()
                socket.send_fds(self._requests, [request], [write_end, out.fileno()])
        except OSError:
            os.close(read_end)
            raise RuntimeError("the worker fork server has ended") from None
        finally:
            os.close(write_end)
        with open(read_end, "rb", buffering=0) as replies:  # unbuffered: select sees every line not yet read
            started = replies.readline()
            if not started:
                raise RuntimeError("the worker fork server has ended")
            ended = replies.readline() if select.select([replies], [], [], timeout)[0] else None
            if ended:
                return int(ended)
            with contextlib.suppress(OSError):  # too long, or the server is gone: so is this worker
                os.killpg(int(started), signal.SIGKILL)
            if ended is not None:  # (the batch grades it again, as a new interpreter)
                raise RuntimeError("the worker fork server has ended")
            replies.readline()  # its status, once killed
            return None

    def close(self) -> None:
        """No more jobs: the server ends once its workers have (their results are all in by then); one that was
        never asked for a worker is stopped at once."""
        if not self._used:
            self._proc.kill()
        self._requests.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
