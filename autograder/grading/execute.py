"""The execute step: run one job (a canonical notebook and its settings) in a jailed worker and hand back what
it produced, nothing written to the batch's output folder.

:func:`run_job` is the one job function: the local pool (``jobs`` threads), the fork server (``forkserver.py``,
where it runs) and a Dask task (``executors.py``, on its machine) all call it. It starts the worker
(``python -m autograder.grading.worker JOB``: forked from the batch's fork server, else a new interpreter), waits
for it within the notebook's time limit, and returns its :class:`Result` and graded notebook: or, where the worker
left none (crashed, killed, too long), an "error" result that says why. Also here: what this machine gives the
kernels (cores, memory, uids, the jail).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import signal
import subprocess
import sys
import zlib
from collections.abc import Iterator

from .. import releases
from . import jail, memory
from .forkserver import FORK_SWITCH, Spawner
from .submission import Result, read_result
from .worker import Job

logger = logging.getLogger(__name__)


RUN_FILE = "grading_run.json"  # how the last run graded its kernels (jailed or not): the summary says so


def jail_status(out: pathlib.Path) -> str | None:
    """Can this run's kernels be jailed? None if so, else why not; said in the log and kept for the summary."""
    no_jail = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
    if no_jail:
        logger.warning(f"  kernels are not jailed ({no_jail}): the guard's file rules only (README, fallback mode)")
    else:
        logger.info("  kernels are jailed (bubblewrap: own filesystem view, no network, an unprivileged uid)")
    no_cgroup = memory.memory_cgroup_problem()
    if no_cgroup:
        logger.warning(
            f"  kernels' and workers' memory is not limited by a cgroup ({no_cgroup}): files a kernel writes to /tmp, "
            "/dev/shm or its home count against no memory limit, and a worker's against none (README, limits)"
        )
    (out / RUN_FILE).write_text(json.dumps({"jailed": not no_jail, "why_not": no_jail or ""}))
    return no_jail


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


@contextlib.contextmanager
def worker_spawner(chapter: str, prefix: list[str], cwd: pathlib.Path) -> Iterator[Spawner | None]:
    """The batch's worker fork server (``forkserver.serve``: the workers' imports paid once a batch, each worker forked
    from it in namespaces of its own when ``prefix`` is ``unshare``'s), closed when the batch is done; None where
    workers are to be started as new interpreters (``AUTOGRADER_FORK_WORKERS=off``)."""
    if os.environ.get(FORK_SWITCH, "").lower() in ("0", "off", "no", "false"):
        yield None
        return
    spawner = Spawner(chapter, bool(prefix), _worker_env(), cwd)
    try:
        yield spawner
    finally:
        spawner.close()


def run_job(
    job: Job, job_path: pathlib.Path, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None = None
) -> tuple[Result, str | None]:
    """Run the worker of ``job`` (written to ``job_path``; ``prefix``: :func:`jail.unshare_prefix`'s) and return its
    result and graded notebook's text (None where it did not run to the end), or an "error" result when it left
    none (crashed, killed, or ran longer than ``timeout`` seconds: then its whole process group is killed). With
    ``spawner``, the worker is forked from the batch's fork server, else started as a new interpreter."""
    result_path, graded_path = pathlib.Path(job.result), pathlib.Path(job.graded)
    for old in (result_path, graded_path):
        old.unlink(missing_ok=True)
    group = worker_cgroup(job)
    try:
        return _run_worker(job, job_path, prefix, cwd, timeout, spawner)
    finally:
        if group is not None:  # and its kernel's, which a worker that was killed could not remove
            memory.remove_memory_cgroup(memory.kernel_cgroup_beside(group))
            memory.remove_memory_cgroup(group)


def worker_cgroup(job: Job) -> pathlib.Path | None:
    """The worker's own memory cgroup of ``job.worker_memory_mb`` (set in ``job.worker_cgroup``, which the worker
    joins first; its kernel's cgroup is made beside it), or None where none can be made here (the batch says so
    once: :func:`jail_status`)."""
    group = None
    if job.worker_memory_mb > 0:
        group = memory.make_memory_cgroup(job.worker_memory_mb, f"autograder-worker-{os.urandom(6).hex()}")
    job.worker_cgroup = str(group or "")
    return group


def worker_out_of_memory(job: Job) -> str | None:
    """The row's reason when the OOM killer ended the worker in its memory cgroup (None otherwise)."""
    if not job.worker_cgroup or memory.oom_kills(pathlib.Path(job.worker_cgroup)) == 0:
        return None
    return (
        f"the grading worker ran out of its {job.worker_memory_mb} MB memory limit (--worker-memory-mb) while "
        "grading this notebook (it holds the records the notebook's kernel sent, and judges them): nothing of it "
        "could be graded"
    )


def _run_worker(
    job: Job, job_path: pathlib.Path, prefix: list[str], cwd: pathlib.Path, timeout: int, spawner: Spawner | None
) -> tuple[Result, str | None]:
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
            why = (
                f"the notebook ran longer than {timeout} s in total"
                if timed_out
                else f"the grading worker ended with exit code {returncode}"
            )
    if spawner is None:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd, env=_worker_env()
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
            why = f"the grading worker ended with exit code {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            why = f"the notebook ran longer than {timeout} s in total"
        returncode = proc.returncode
    if not result_path.exists():
        tail = (output or b"").decode(errors="replace").strip().splitlines()[-1:]
        reason = worker_out_of_memory(job) or why + (f" ({tail[0][:150]})" if tail and returncode else "")
        return Result("", "", job.student_id, "error", reason), None
    result = read_result(result_path)
    graded = graded_path.read_text() if result.status != "error" and graded_path.exists() else None
    return result, graded
