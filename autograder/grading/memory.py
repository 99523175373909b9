"""The memory around one submission: a memory cgroup for its kernel (``--memory-mb``) and one for its worker
(``--worker-memory-mb``), siblings, where the grader may make them; a memory file system of ``--memory-mb`` for all
the jailed kernel may write; this process's cgroups (v1 or v2). What these limits guarantee: docs/grading-design.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import time
from collections.abc import Iterator

CGROUP_ENV = "AUTOGRADER_MEMORY_CGROUP"  # the kernel's memory cgroup (a folder the worker made), joined first
STARTUP_MB = 1536  # measured: ``--memory-mb`` a chapter's kernel needs to import torch and arm the guard (README)
WORKER_MB = 1024  # measured: a worker's own memory cgroup (``--worker-memory-mb``; docs/grading-design.md, worker)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 0x2, 0x4, 0x2
LIMIT_FILE = {2: "memory.max", 1: "memory.limit_in_bytes"}  # a cgroup's memory limit in bytes, by cgroup version


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def mount_kernel_files(folder: pathlib.Path, memory_mb: int) -> bool:
    """Mount a memory file system of ``memory_mb`` MB on ``folder`` (in this process's own mount namespace: the
    worker's, when it runs as root under ``unshare``), to hold everything a jailed kernel may write (its home,
    /tmp, /dev/shm, runtime folder): bounded as a whole, and charged to the kernel's memory cgroup. False (and
    nothing mounted) where it cannot be."""
    options = f"size={max(memory_mb, 16)}m,mode=0755".encode()
    return _libc().mount(b"tmpfs", str(folder).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options) == 0


def unmount_kernel_files(folder: pathlib.Path) -> None:
    """Unmount :func:`mount_kernel_files`'s file system (lazily: a kernel still running keeps it until it ends)."""
    _libc().umount2(str(folder).encode(), _MNT_DETACH)


def _cap_memory(group: pathlib.Path, version: int, limit: int) -> None:
    """Limit cgroup ``group`` to ``limit`` bytes of memory, swap included where the controller counts it."""
    (group / LIMIT_FILE[version]).write_text(str(limit))
    if version == 2:
        try:
            (group / "memory.swap.max").write_text("0")
        except OSError:
            pass  # no swap accounting: no swap to spill into either
        return
    if (group / "memory.memsw.limit_in_bytes").exists():
        (group / "memory.memsw.limit_in_bytes").write_text(str(limit))


def make_memory_cgroup(memory_mb: int, name: str, parent: pathlib.Path | None = None) -> pathlib.Path | None:
    """A memory cgroup ``name`` limited to ``memory_mb`` MB (swap included), made under this process's own memory
    cgroup (v1 or v2), or under ``parent`` (a sibling of a group made before: the worker's kernel beside the worker),
    for one kernel or one worker; None where none can be made here (not root, no writable memory controller, cgroup
    v2 without the memory controller delegated)."""

    tried: set[int] = set()
    beside = [(2 if (parent / "cgroup.controllers").exists() else 1, parent)] if parent is not None else []
    where = beside or cgroup_dirs("memory")
    for version, top in where:
        if version in tried or not top.is_dir():
            continue
        tried.add(version)  # this process's own group only (or the root it sees as its own), never one above it
        group = top / name
        try:
            if version == 2 and "memory" not in (top / "cgroup.subtree_control").read_text().split():
                (top / "cgroup.subtree_control").write_text("+memory")
            group.mkdir()
        except OSError:
            continue
        try:
            _cap_memory(group, version, memory_mb << 20)
            return group
        except OSError:
            remove_memory_cgroup(group)
    return None


def kernel_cgroup_beside(worker_group: str | pathlib.Path) -> pathlib.Path:
    """Where the kernel's cgroup of the worker whose cgroup is ``worker_group`` goes: beside it, named after it, so
    that the execute step removes it too when the worker could not (killed: out of memory, or out of time)."""
    group = pathlib.Path(worker_group)
    return group.parent / group.name.replace("autograder-worker-", "autograder-kernel-", 1)


def join_memory_cgroup(group: str | pathlib.Path) -> bool:
    """Move this process (and so everything it starts) into cgroup ``group`` (best effort: False where it could
    not)."""
    try:
        (pathlib.Path(group) / "cgroup.procs").write_text(str(os.getpid()))
        return True
    except OSError:
        return False


def memory_peak(group: pathlib.Path) -> int:
    """The most memory cgroup ``group`` has held so far, in bytes (v2 ``memory.peak``, v1
    ``memory.max_usage_in_bytes``); 0 where it cannot be read (v2 before Linux 5.19)."""
    for name in ("memory.peak", "memory.max_usage_in_bytes"):
        try:
            return int((group / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return 0


def oom_kills(group: pathlib.Path) -> int:
    """How many processes the OOM killer has ended in cgroup ``group`` (v2 ``memory.events``, v1
    ``memory.oom_control``); 0 where it cannot be read."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            for line in (group / name).read_text().splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        except (OSError, ValueError):
            continue
    return 0


def remove_memory_cgroup(group: pathlib.Path, wait: float = 10.0) -> None:
    """Remove cgroup ``group``, killing what is left in it (the kernel's processes) first."""
    import signal

    deadline = time.monotonic() + wait
    while True:
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                if pid > 0:
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)


@dataclasses.dataclass
class WorkerLimit:
    """A grading worker's own memory cgroup (:func:`worker_limit`)."""

    group: pathlib.Path | None  # None: no limit, or none can be made here (the batch says so once)
    oom_killed: bool = False  # read as it is removed: whether the OOM killer ended a process in it


@contextlib.contextmanager
def worker_limit(memory_mb: int) -> Iterator[WorkerLimit]:
    """A worker's memory cgroup of ``memory_mb`` (0: none) for as long as the block runs (the worker joins it first;
    its kernel's is made beside it, :func:`kernel_cgroup_beside`); then whether the OOM killer ended anything in it
    is read, and it and its kernel's (which a worker that was killed could not remove) are removed."""
    group = make_memory_cgroup(memory_mb, f"autograder-worker-{os.urandom(6).hex()}") if memory_mb > 0 else None
    limit = WorkerLimit(group)
    try:
        yield limit
    finally:
        if group is not None:
            limit.oom_killed = oom_kills(group) > 0
            remove_memory_cgroup(kernel_cgroup_beside(group))
            remove_memory_cgroup(group)


def memory_cgroup_problem() -> str | None:
    """Why no memory cgroup per kernel can be made here (None: one can), tried for real."""
    import secrets

    group = make_memory_cgroup(64, f"autograder-probe-{secrets.token_hex(6)}")
    if group is None:
        return "no writable memory cgroup here (not root, or the memory controller is not delegated)"
    remove_memory_cgroup(group)
    return None


PROC_CGROUP = pathlib.Path("/proc/self/cgroup")
CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")


def cgroup_dirs(
    controller: str, proc_cgroup: pathlib.Path = PROC_CGROUP, root: pathlib.Path = CGROUP_ROOT
) -> list[tuple[int, pathlib.Path]]:
    """(cgroup version, folder) of this process's own cgroup for ``controller`` ("cpu", "memory"), then of the
    hierarchy's root (a container often sees its own group as the root), where they may exist: cgroup v2's one
    hierarchy, v1's ``root/<controller>`` (or the folder named by the co-mounted controllers, "cpu,cpuacct").
    (``proc_cgroup``, ``root``: where this process's cgroup and the cgroup file system are read; tests point them
    at a made-up tree.)"""
    try:
        own = [line.split(":", 2) for line in proc_cgroup.read_text().splitlines()]
    except OSError:
        return []
    found: list[tuple[int, pathlib.Path]] = []
    for _, controllers, where in (entry for entry in own if len(entry) == 3):
        if controllers == "":
            tops, version = [root], 2
        elif controller in controllers.split(","):
            tops, version = [root / controller, root / controllers], 1
        else:
            continue
        found += [(version, d) for top in tops for d in (top / where.lstrip("/"), top)]
    return found
