"""Where a batch's workers run when not on this machine: a Dask distributed cluster (https://distributed.dask.org).

:class:`DaskCluster` sends each distinct notebook to a Dask worker as one task (:func:`grade_task`), which runs the
batch's job function (``execute.run_job``: the same sandboxed worker and limits as on one machine) in a private
scratch folder there and returns the result and the graded notebook; the batch writes the files from them. A task is
keyed by its inputs (the scheduler runs a lost one again elsewhere, and grades a notebook once), and every worker
must run the batch's course code (:func:`grader_fingerprint`). ``DaskCluster()`` starts a local cluster (TLS with a
throw-away certificate authority, so that a kernel that may reach loopback cannot talk to the scheduler);
``DaskCluster("tls://host:8786")`` joins a running one. README, "Grading on a cluster".
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import pathlib
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from .. import notebooks
from ..wording import Message, say
from . import execute, jail, runner
from .submission import Result, result_fields, result_from_fields
from .worker import Job

logger = logging.getLogger(__name__)


class GraderMismatch(RuntimeError):
    """A worker runs different course code from the batch's (its grades could differ from the checks'): raised
    before anything is graded there."""


@functools.cache
def grader_fingerprint() -> str:
    """A hash of the course code that grading runs (``autograder/`` and ``solutions/`` Python files), to check that
    every worker grades with the batch's checks (once per process)."""
    root = notebooks.ROOT
    h = hashlib.sha256()
    for folder in ("autograder", "solutions"):
        for p in sorted((root / folder).rglob("*.py")):
            if "__pycache__" not in p.parts:
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def _machine() -> tuple[list[str], bool, bool]:
    """This machine's worker prefix (``unshare`` when it works; the worker dies with its Dask worker process:
    ``setpriv --pdeathsig``), whether kernels can run as their own uid, and whether they can be jailed here (each
    worker machine decides for itself, as a local batch does; the fallback is logged once per machine)."""
    prefix = jail.unshare_prefix()
    if shutil.which("setpriv") and sys.platform.startswith("linux"):
        prefix = ["setpriv", "--pdeathsig", "KILL", "--", *prefix]
    no_jail, drop_uid = jail.isolation()
    if no_jail:
        logging.getLogger(__name__).warning(f"kernels are not jailed on this worker ({no_jail}): fallback mode")
    return prefix, drop_uid, not no_jail


def grade_task(
    job_fields: dict[str, Any],
    text: str,
    grading: str,
    notebook_timeout: int,
    kernels_per_host: dict[str, int],
    fingerprint: str,
) -> dict[str, Any]:
    """One Dask task: grade one canonical notebook (``text``; ``grading``: the batch's grading notebook, its text)
    on this worker's machine, in a private scratch folder removed afterwards. Returns the result (as a dict), the
    graded notebook's text (or None), and where it ran."""
    if grader_fingerprint() != fingerprint:
        raise GraderMismatch(
            f"{socket.gethostname()} runs other course code than the batch (grader fingerprint "
            f"{grader_fingerprint()[:12]} vs {fingerprint[:12]}): install the batch's version on every worker"
        )
    try:
        from distributed import get_worker

        worker = get_worker()
        where, local_dir = worker.address, str(worker.local_directory)
        threads = max(1, (os.cpu_count() or 1) // max(1, kernels_per_host.get(_host(where), worker.state.nthreads)))
    except (ImportError, ValueError):  # called outside a Dask worker (tests, debugging)
        where, local_dir, threads = socket.gethostname(), "", 1
    prefix, drop_uid, jailed = _machine()
    job = Job(**job_fields)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="autograder-task-"))
    try:
        private = execute.private_folder(scratch)  # the notebook and the grading notebook: hidden from the kernel
        (private / runner.GRADING_NOTEBOOK).write_text(grading)
        here = dataclasses.replace(
            job,
            **execute.job_files(scratch, "task"),
            grading=str(private / runner.GRADING_NOTEBOOK),
            stage=str(jail.stage_solutions(job.chapter, scratch / "stage")),
            # the batch's own hidden files (its output folder, on a local cluster), this machine's copies of the
            # reference, this task's private folder, and the Dask worker's folder (other tasks' spilled data)
            hidden_files=sorted(
                {*job.hidden_files, *jail.hidden_files(job.chapter), str(private), *([local_dir] if local_dir else [])}
            ),
            netns="unshare" in prefix,
            uid=execute.kernel_uid(job.student_id, drop_uid),
            jail=jailed,
            threads=threads,
        )
        pathlib.Path(here.canonical).write_text(text)
        result, graded = execute.run_job(here, prefix, scratch, notebook_timeout)
        return {"result": result_fields(result), "graded": graded, "where": where}  # messages as data
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _host(address: str) -> str:
    """'tls://10.0.0.5:40123' -> '10.0.0.5'."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


def _task_key(job: Job, text: str, grading_hash: str, notebook_timeout: int) -> str:
    """The same inputs give the same key: the scheduler then runs that notebook once, however often it is sent."""
    h = hashlib.sha256()
    for part in (repr(sorted(dataclasses.asdict(job).items())), text, grading_hash, str(notebook_timeout)):
        h.update(part.encode() + b"\0")
    return f"autograder-grade-{h.hexdigest()[:32]}"  # one task group: the scheduler queues them, hands out by load


def lost(job: Job, reason: Message) -> Result:
    """The "error" result of a submission the cluster could not grade (its worker lost too often, a task error)."""
    return Result("", "", job.student_id, "error", str(reason), reasons=[reason])


class DaskCluster:
    """Grade on a Dask distributed cluster: ``DaskCluster()`` starts a local one (``workers`` processes, default one
    per core, each one task at a time), ``DaskCluster("tls://scheduler:8786")`` joins a running one. Use as a
    context manager (``with DaskCluster() as cluster: batch.grade(..., executor=cluster)``); ``retries``: how often
    a task that raised (not a lost worker: the scheduler retries those itself) is run again."""

    def __init__(self, scheduler: str | None = None, *, workers: int | None = None, retries: int = 1) -> None:
        self.scheduler = scheduler
        self.workers = workers or os.cpu_count() or 1
        self.retries = retries
        self.client: Any = None
        self.cluster: Any = None
        self.ran_on: dict[str, str] = {}  # student id -> the worker address whose result was used

    def __enter__(self) -> DaskCluster:
        try:
            from distributed import Client, LocalCluster
            from distributed.security import Security
        except ImportError:
            raise RuntimeError(
                "grading on a Dask cluster needs the `cluster` extra: pip install 'attention-course[cluster]'"
            ) from None
        if self.scheduler is None:
            import dask

            # one task per single-threaded worker at a time: the next notebook goes to whichever worker frees up
            with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
                self.cluster = LocalCluster(
                    n_workers=self.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    security=Security.temporary(),
                    memory_limit=0,  # each kernel has its own address-space limit (jail.py)
                    silence_logs=logging.ERROR,
                )
            self.client = Client(self.cluster)
        else:
            self.client = Client(self.scheduler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None

    def describe(self) -> str:
        where = self.scheduler or "a local Dask cluster"
        return f"on {where} ({self._kernels()} workers)" if self.client else f"on {where}"

    def _kernels(self) -> int:
        return sum(w["nthreads"] for w in self.client.scheduler_info(n_workers=-1)["workers"].values())

    def _check_workers(self, fingerprint: str) -> None:
        theirs = self.client.run(grader_fingerprint)
        wrong = sorted(addr for addr, fp in theirs.items() if fp != fingerprint)
        if wrong:
            raise GraderMismatch(
                f"workers {', '.join(wrong)} run other course code than this batch: install the same version of the "
                "course on every worker (the grades would otherwise come from other checks)"
            )

    def grade(self, jobs: Sequence[tuple[Job, str]], notebook_timeout: int) -> Iterator[tuple[Job, Result, str | None]]:
        """Send every job to the cluster; as each ends, give its job, result and graded notebook (in this process)."""
        from distributed import as_completed

        if self.client is None:
            raise RuntimeError("use DaskCluster as a context manager: with DaskCluster() as cluster: ...")
        if not jobs:
            return
        fingerprint = grader_fingerprint()
        self._check_workers(fingerprint)
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        per_host: dict[str, int] = {}
        for addr, info in workers.items():
            per_host[_host(addr)] = per_host.get(_host(addr), 0) + int(info["nthreads"])
        grading = pathlib.Path(jobs[0][0].grading).read_text()
        grading_hash = hashlib.sha256(grading.encode()).hexdigest()
        by_future: dict[Any, Job] = {}
        for job, text in jobs:
            future = self.client.submit(
                grade_task,
                dataclasses.asdict(job),
                text,
                grading,  # in each task, not a shared dependency: Dask would run every task where that lives
                notebook_timeout,
                per_host,
                fingerprint,
                key=_task_key(job, text, grading_hash, notebook_timeout),
                retries=self.retries,
            )
            by_future[future] = job
        try:
            for future in as_completed(list(by_future)):
                job = by_future[future]
                if future.status == "finished":
                    output = future.result()
                    self.ran_on[job.student_id] = output["where"]
                    yield job, result_from_fields(output["result"]), output["graded"]
                else:
                    error = future.exception()
                    if isinstance(error, GraderMismatch):
                        raise error
                    yield job, lost(job, _lost_reason(error)), None
        finally:  # interrupted (or a worker with other code): nothing is left running for this batch
            unfinished = [f for f in by_future if not f.done()]
            if unfinished:
                self.client.cancel(unfinished)


def _lost_reason(error: BaseException | None) -> Message:
    from distributed import KilledWorker

    if isinstance(error, KilledWorker):
        return say("cluster lost the worker")
    return say("cluster could not run", ename=type(error).__name__, error=str(error)[:150])
