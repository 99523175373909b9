"""The process limits around one submission's kernel, and what the kernel may see of the course.

* :func:`stage_solutions` — a copy of ``solutions/`` in which the graded chapter's solution regions raise
  ``NotImplementedError`` (earlier chapters stay real); the kernel imports ``solutions`` from there;
* :func:`hidden_files` — files the in-kernel guard refuses to open (every copy of the chapter's reference, the
  sample submissions, ...);
* :func:`unshare_prefix` — ``unshare --net --pid`` for the worker when it works here (root on Linux): no network,
  and every process the submission starts dies with its worker;
* :func:`uid_drop_possible`, :func:`kernel_main` — ``python -m autograder.grading.jail kernel CONNECTION_FILE`` is
  the grading kernel's launcher (the ``python3`` kernelspec that the worker puts first on ``JUPYTER_PATH``,
  :func:`write_kernelspec`): it sets resource limits (address space, file size, processes, no core dumps), drops
  to the submission's own unprivileged uid (when started as root), and execs ipykernel in the submission's
  working directory.

What these limits do and do not guarantee: docs/grading-design.md.
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys

from .. import notebooks

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
                "argv": [sys.executable, "-m", "autograder.grading.jail", "kernel", "{connection_file}"],
                "display_name": notebooks.KERNELSPEC["display_name"],
                "language": "python",
            }
        )
    )
    return where


def unshare_prefix() -> list[str]:
    """``unshare --net --pid`` when it works here (root on Linux), else nothing (documented best effort)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return []
    cmd = ["unshare", "--net", "--pid", "--fork", "--kill-child"]
    try:
        ok = subprocess.run(cmd + ["true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return cmd if ok else []


if __name__ == "__main__":
    if sys.argv[1] == "kernel":
        kernel_main(sys.argv[2])
