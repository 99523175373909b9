"""The process limits around one submission's kernel, and what the kernel may see of the course: the staged
``solutions`` and checks (:func:`stage_solutions`), the files the guard refuses to open (:func:`hidden_files`), the
worker's ``unshare`` prefix, the jail (bubblewrap: :func:`bwrap_argv`, :func:`jail_problem`) and the kernel's
launcher (:func:`kernel_main`, ``python -m autograder.grading.jail kernel CONNECTION_FILE``: resource limits, the
submission's own uid, ipykernel, jailed or in fallback mode). The memory cgroups are in ``memory.py``. What these
limits do and do not guarantee: docs/grading-design.md ("Containment and secrecy").
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import types
from collections.abc import Iterable

from . import memory

logger = logging.getLogger(__name__)

KERNEL_PROCESSES = 512  # RLIMIT_NPROC of a kernel that runs as its own uid


def _notebooks() -> types.ModuleType:
    """``autograder.notebooks``, imported when first needed: the kernel's launcher (:func:`kernel_main`) runs this
    module once per submission and needs none of it, and importing it loads nbformat and jsonschema (≈ 1–2 s of
    CPU per kernel start)."""
    from .. import notebooks

    return notebooks


# ------------------------------------------------------------------------------------------------ staging


def stub_solution_source(source: str) -> str:
    """A solution module with every ### BEGIN/END SOLUTION region replaced by ``raise NotImplementedError()``."""
    notebooks = _notebooks()
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


def solution_imports(source: str) -> set[str]:
    """The ``solutions`` modules (stems) that Python ``source`` imports, anywhere in it (functions too)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "solutions":
                found |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("solutions.")}
    return found


def staged_modules(chapter: str) -> set[str]:
    """The ``solutions`` modules a grading kernel of ``chapter`` needs: those its solution module, notebook template
    and checks import, and theirs in turn. Never a later chapter's (a chapter imports only earlier ones)."""
    notebooks = _notebooks()
    src = notebooks.ROOT / "solutions"
    roots = [src / f"{chapter}.py", notebooks.TEMPLATES / f"{chapter}.py", notebooks.PACKAGE_DIR / f"{chapter}.py"]
    todo = set().union(*(solution_imports(p.read_text()) for p in roots if p.exists())) | {chapter}
    needed: set[str] = set()
    while todo:
        name = todo.pop()
        if name in needed or not (src / f"{name}.py").exists():
            continue
        needed.add(name)
        todo |= solution_imports((src / f"{name}.py").read_text())
    return needed


def stage_solutions(chapter: str, stage: pathlib.Path) -> pathlib.Path:
    """The course as a grading kernel of ``chapter`` imports it, in ``stage`` (first on the kernel's path): a copy of
    the part of the ``solutions`` package that ``chapter`` imports (:func:`staged_modules`: earlier chapters and the
    shared modules, real), with ``chapter``'s own module stubbed, later chapters absent; and the ``autograder``
    package with every chapter's checks in their kernel form, which holds no oracle, comparison or course version
    of an exercise (``questions.stage_checks``)."""
    from .questions import stage_checks

    src = _notebooks().ROOT / "solutions"
    dst = stage / "solutions"
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "__init__.py", dst / "__init__.py")
    for name in sorted(staged_modules(chapter)):
        text = (src / f"{name}.py").read_text()
        (dst / f"{name}.py").write_text(stub_solution_source(text) if name == chapter else text)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    stage_checks(stage)
    stage.chmod(0o755)
    return stage


def hidden_files(chapter: str) -> list[str]:
    """Files the grading kernel may not open: every copy of the chapter's reference, the course's checks modules
    (the kernel imports their kernel form from the stage) and the sample submissions."""
    found = set()
    for entry in sys.path + [str(_notebooks().ROOT)]:
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
            *(base / "autograder").glob("ch[0-9][0-9]_*.py"),
            *(base / "autograder" / "__pycache__").glob("ch[0-9][0-9]_*.pyc"),
        ):
            if p.exists():
                found.add(str(p.resolve()))
    return sorted(found)


# ------------------------------------------------------------------------------------------------ kernel


def kernel_main(connection_file: str) -> None:
    """The grading kernel's launcher (the kernelspec's argv): join the kernel's memory cgroup, set the limits, then
    start ipykernel in the jail (or, in fallback mode, exec it here as the submission's uid)."""
    if os.environ.get(memory.CGROUP_ENV):
        memory.join_memory_cgroup(os.environ[memory.CGROUP_ENV])  # first: everything started from here is counted
    uid = int(os.environ.get("AUTOGRADER_UID", "-1"))
    mem_mb = int(os.environ.get("AUTOGRADER_MEMORY_MB", "0"))
    if mem_mb > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 << 20, 512 << 20))
    sandbox = pathlib.Path(os.environ["AUTOGRADER_SANDBOX"])
    if os.environ.get("AUTOGRADER_JAIL_VIEW"):
        view = JailView.read(os.environ["AUTOGRADER_JAIL_VIEW"])
        conn = pathlib.Path(view.workdir) / "kernel-connection.json"  # the jail shows the kernel its workdir only
        shutil.copyfile(connection_file, conn)
        connection_file = str(conn)
        # the kernel's own folders (home, the connection's runtime folder)
        if give_to(uid, (p for f in view.rw for p in [pathlib.Path(f), *pathlib.Path(f).rglob("*")])):
            resource.setrlimit(resource.RLIMIT_NPROC, (KERNEL_PROCESSES, KERNEL_PROCESSES))
        # no input history file: it would keep the cells run so far (hidden tests included) on disk
        kernel = [jailed_python(), "-m", "ipykernel_launcher", "-f", connection_file, "--HistoryManager.enabled=False"]
        sys.exit(_jailed_kernel(view, uid, kernel, sandbox / "kernel.pid"))
    (sandbox / "kernel.pid").write_text(str(os.getpid()))  # the worker accepts guard records from this pid only
    if uid > 0 and os.geteuid() == 0:
        conn = sandbox / "home" / "kernel-connection.json"
        shutil.copyfile(connection_file, conn)
        give_to(uid, [conn, pathlib.Path.cwd(), *pathlib.Path.cwd().iterdir()])
        connection_file = str(conn)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (KERNEL_PROCESSES, KERNEL_PROCESSES))
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file])


def give_to(uid: int, paths: Iterable[str | pathlib.Path]) -> bool:
    """Make ``uid`` (a kernel's own, > 0) the owner and group of ``paths`` where this process is root: True; else
    nothing changes (``paths`` not even iterated): False."""
    if uid <= 0 or os.geteuid() != 0:
        return False
    for p in paths:
        os.chown(p, uid, uid)
    return True


def jailed_python() -> str:
    """This interpreter as the jail shows it: its environment's folder by its real path (the jail binds that), the
    interpreter's own name kept."""
    return os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))


ROOT_KERNELS = "AUTOGRADER_ROOT_KERNELS"  # "allow": fallback kernels may keep uid 0 (the test suite on a root machine)


class RootKernelRefused(RuntimeError):
    """Fallback mode (no jail) as root where the kernel cannot drop to its own uid: its kernels would run as root."""


def root_kernel_problem(jailed: bool) -> str | None:
    """Why this batch's kernels would run as root (unjailed, started as root, the Python installation unreadable to
    other users, so no uid drop), else None. A kernel as root could rewrite what the grader writes, other students'
    results included, the moment anything escapes the guard's audit rules."""
    if jailed or os.geteuid() != 0 or uid_drop_possible() or os.environ.get(ROOT_KERNELS) == "allow":
        return None
    return (
        "without the jail, kernels would run as root here (this Python installation is not readable by other users, "
        f"so a kernel cannot run as its own uid: {os.path.realpath(sys.executable)}); grade jailed (install "
        "bubblewrap), or from a Python installation every user can read (e.g. the system's /usr/bin/python3 or one "
        "under /opt)"
    )


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


def isolation() -> tuple[str | None, bool]:
    """How this machine keeps kernels apart, tried for real: (why they cannot be jailed, :func:`jail_problem` for a
    kernel's own uid when root, None: they are; whether each kernel runs as a uid of its own: jailed, or
    :func:`uid_drop_possible`). What a caller does without the jail is its own (refuse, fall back, say so)."""
    no_jail = jail_problem(100000 if os.geteuid() == 0 else -1)
    return no_jail, not no_jail or uid_drop_possible()


def write_kernelspec(where: pathlib.Path) -> pathlib.Path:
    notebooks = _notebooks()
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
    # --mount-proc: a /proc of the worker's own PID namespace (bwrap reads the jailed kernel's pid from there)
    cmd = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    try:
        ok = subprocess.run(cmd + ["true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return cmd if ok else []


@dataclasses.dataclass
class Machine:
    """How this machine runs a batch's kernels, and the course as they import it: made once per batch
    (:func:`machine`)."""

    prefix: list[str]  # the worker's command prefix (unshare_prefix): its own network and PID namespaces, or []
    no_jail: str | None  # why the kernels cannot be jailed here (jail_problem), None: they are jailed
    drop_uid: bool  # whether each kernel runs as a uid of its own
    as_root: str | None  # why the kernels would run as root (root_kernel_problem): the batch refuses to run them
    hidden: list[str]  # the chapter's files no kernel may open (hidden_files)
    stage: pathlib.Path  # the staged solutions package and checks (stage_solutions), first on the kernels' path


def machine(chapter: str, stage: pathlib.Path) -> Machine:
    """What this machine gives ``chapter``'s kernels — the worker's namespaces, the jail (or why not), their uid,
    the files hidden from them — said in the log (:func:`say`); and the course as they import it, staged in
    ``stage`` (:func:`stage_solutions`)."""
    no_jail, drop_uid = isolation()
    found = Machine(
        prefix=unshare_prefix(),
        no_jail=no_jail,
        drop_uid=drop_uid,
        as_root=root_kernel_problem(jailed=not no_jail),
        hidden=hidden_files(chapter),
        stage=stage_solutions(chapter, stage),
    )
    say(found)
    return found


def say(found: Machine) -> None:
    """Whether the batch's kernels are jailed (``found.no_jail``), and whether the memory cgroups can be made, said
    in the log."""
    if found.no_jail:
        logger.warning(
            f"  kernels are not jailed ({found.no_jail}): the guard's file rules only (README, fallback mode)"
        )
    else:
        logger.info("  kernels are jailed (bubblewrap: own filesystem view, no network, an unprivileged uid)")
    no_cgroup = memory.memory_cgroup_problem()
    if no_cgroup:
        logger.warning(
            f"  kernels' and workers' memory is not limited by a cgroup ({no_cgroup}): files a kernel writes to /tmp, "
            "/dev/shm or its home count against no memory limit, and a worker's against none (README, limits)"
        )


# ------------------------------------------------------------------------------------------------ the jail

JAIL_SWITCH = "AUTOGRADER_JAIL"  # "off": grade without the jail (the fallback mode), e.g. to compare or to test it
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "fonts", "localtime", "nsswitch.conf", "mime.types")
_KERNEL_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONHASHSEED", "TZ")


def python_installation() -> list[str]:
    """The folders of this Python installation (the environment, its base installation, the interpreter's own
    folder), each bound read-only into the jail at the same path."""
    import sysconfig

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(str(pathlib.Path(os.path.realpath(sys.executable)).parent.parent))
    paths.update(p for p in sysconfig.get_paths().values() if p)
    found = sorted(os.path.realpath(p) for p in paths if os.path.isdir(p))
    system = ("/usr/", "/bin/", "/lib/", "/lib64/", "/sbin/")  # the system folders are bound as a whole anyway
    keep = [p for p in found if not (p + "/").startswith(system)]
    return [p for p in keep if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in keep)]


@dataclasses.dataclass
class JailView:
    """What one kernel sees: read-only folders (``ro``), writable ones (``rw``), folders replaced by an empty one
    (``hide``), the working directory and the environment (nothing else of the host's)."""

    ro: list[str]
    rw: list[str]
    hide: list[str]
    workdir: str
    env: dict[str, str]
    tmp: str = ""  # a host folder bound as the jail's /tmp (else a tmpfs of bwrap's: half the host's RAM)
    shm: str = ""  # the same for /dev/shm

    def write(self, path: pathlib.Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def read(cls, path: str | pathlib.Path) -> JailView:
        return cls(**json.loads(pathlib.Path(path).read_text()))


def bwrap_argv(view: JailView, uid: int = -1, info_fd: int | None = None) -> list[str]:
    """The ``bwrap`` command line that starts a command in a jail showing ``view``: new mount, PID, network, IPC
    and UTS namespaces; /usr (and the /bin, /lib links) and the Python installation read-only, a private /tmp,
    /proc and /dev; no network at all. When started as root with ``uid`` > 0 the command runs under ``setpriv``
    as that uid (no groups, no new privileges); bwrap itself then needs no user namespace."""
    argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    argv += ["--die-with-parent", "--as-pid-1", "--clearenv", "--ro-bind", "/usr", "/usr"]
    if os.geteuid() != 0:
        argv += ["--unshare-user"]
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    # bwrap 0.8 has no --size: its tmpfs may fill half the host's RAM; the worker's folders are sized and counted
    argv += ["--bind", view.shm, "/dev/shm"] if view.shm else ["--perms", "1777", "--tmpfs", "/dev/shm"]
    argv += ["--bind", view.tmp, "/tmp"] if view.tmp else ["--perms", "1777", "--tmpfs", "/tmp"]
    made = {"/", "/usr", "/tmp", "/proc", "/dev"}

    def parents(path: str) -> list[str]:
        out = []
        for parent in reversed(pathlib.PurePosixPath(path).parents):
            p = str(parent)
            if p not in made and not any(p.startswith(m.rstrip("/") + "/") for m in ("/usr", "/proc", "/dev")):
                made.add(p)
                out += ["--perms", "0755", "--dir", p]  # bwrap would make them 0700: the uid could not pass
        return out

    for name in _ETC:
        if os.path.exists(f"/etc/{name}"):
            argv += parents(f"/etc/{name}") + ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for path in [*python_installation(), *view.ro]:
        argv += parents(path) + ["--ro-bind", path, path]
        made.add(path)
    for path in view.hide:
        argv += ["--tmpfs", path]
    for path in view.rw:
        argv += parents(path) + ["--bind", path, path]
        made.add(path)
    for key, value in view.env.items():
        argv += ["--setenv", key, value]
    argv += ["--chdir", view.workdir]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    if uid > 0 and os.geteuid() == 0:
        argv += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]
    else:
        argv += ["--"]
    return argv


def kernel_env(extra: dict[str, str]) -> dict[str, str]:
    """The jailed kernel's whole environment: a few of the host's variables (path, locale) and ``extra``."""
    env = {k: os.environ[k] for k in _KERNEL_ENV if k in os.environ}
    env.update(extra)
    return env


def jail_problem(uid: int = -1) -> str | None:
    """Why kernels cannot be jailed here (None: they can): switched off (``AUTOGRADER_JAIL=off``), bubblewrap or
    ``setpriv`` missing, or namespaces refused. Tried for real: this Python starts in a jail as ``uid``."""
    if os.environ.get(JAIL_SWITCH, "").lower() in ("0", "off", "no", "false"):
        return f"the jail is switched off ({JAIL_SWITCH}={os.environ[JAIL_SWITCH]})"
    if not sys.platform.startswith("linux") or not shutil.which("bwrap"):
        return "bubblewrap (bwrap) is not installed"
    if uid > 0 and os.geteuid() == 0 and not shutil.which("setpriv"):
        return "setpriv (util-linux) is not installed"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ag-probe-") as tmp:
        os.chmod(tmp, 0o755)
        view = JailView(ro=[], rw=[], hide=[], workdir="/tmp", env=kernel_env({}))
        # the jail's /tmp is private: this host folder (made just now in the host's temporary folder) is not in it
        # (/tmp may hold the folders above a Python installation that lives under /tmp, so not "/tmp is empty")
        probe = f"import os, sys; sys.exit(3 if os.path.exists({tmp!r}) else 0)"
        try:
            run = subprocess.run(
                bwrap_argv(view, uid) + [jailed_python(), "-I", "-c", probe], capture_output=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bubblewrap could not start ({type(exc).__name__})"
    if run.returncode != 0:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return "bubblewrap cannot make namespaces here" + (f" ({tail[0][:150]})" if tail else "")
    return None


def _jailed_kernel(view: JailView, uid: int, argv: list[str], pid_file: pathlib.Path) -> int:
    """Start ``argv`` (the kernel) in the jail; write its process id (as the worker sees it) to ``pid_file``; wait
    for it and return its exit status.

    Jupyter interrupts a kernel by sending SIGINT to the launcher's whole process group. ``bwrap`` itself would die
    of it (and take the kernel with it, ``--die-with-parent``), so it runs in a session of its own and this
    launcher forwards the interrupt to the kernel alone."""
    import signal

    kernel_pid = [0]

    def forward(signum, frame):
        if kernel_pid[0] > 0:
            try:
                os.kill(kernel_pid[0], signum)
            except OSError:
                pass

    signal.signal(signal.SIGINT, forward)
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        bwrap_argv(view, uid, info_fd=write_end) + argv, pass_fds=(write_end,), start_new_session=True
    )
    os.close(write_end)
    info = b""
    while chunk := os.read(read_end, 4096):
        info += chunk
    os.close(read_end)
    try:
        kernel_pid[0] = int(json.loads(info)["child-pid"])  # --as-pid-1: the kernel itself
        pid_file.write_text(str(kernel_pid[0]))
    except (ValueError, KeyError):
        pass  # bwrap failed to start: no records will be accepted, the worker reports the dead kernel
    return proc.wait()


if __name__ == "__main__":
    if sys.argv[1] == "kernel":
        kernel_main(sys.argv[2])
