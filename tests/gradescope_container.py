"""Gradescope's container, simulated on this machine, for the tests (``tests/test_gradescope.py``) and the
measurement (``benchmarks/bench_gradescope.py``): the zip (:mod:`autograder.gradescope.build`) unpacked into a tree
laid out as ``/autograder``, ``setup.sh`` run in a clean virtualenv (:meth:`Simulation.setup`, with packages staged
from this environment: :func:`stage_packages`), ``run_autograder`` run on a submission (:meth:`Simulation.run`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from autograder.gradescope.build import build_zip


@functools.cache
def own_pid_namespace() -> list[str]:
    """The prefix that gives run_autograder a PID namespace of its own, as Docker gives Gradescope's container (root
    only; [] elsewhere). Without it, run_autograder's end (``run.end_processes_of``: every process of the kernel's uid
    killed) reaches the kernels of tests running beside it that grade the same samples, whose uids are the same."""
    command = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return []
    return command if subprocess.run([*command, "true"], capture_output=True).returncode == 0 else []


def unpack(zip_path: pathlib.Path, source: pathlib.Path) -> None:
    """Unpack the zip into ``source`` as Gradescope does (``/autograder/source``), keeping the scripts executable."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (source / info.filename).chmod(mode)


def system_python() -> str:
    """A Python for the clean virtualenv that, like Gradescope's /usr/bin/python3, every uid may read (the kernel's own
    uid runs it in fallback mode), of this interpreter's version (so that this environment's packages fit it)."""
    mine = str(tuple(sys.version_info[:2]))
    for candidate in ("/usr/bin/python3", f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"):
        if os.path.exists(candidate):
            out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True)
            if out.stdout.decode().strip() == mine:
                return candidate
    return getattr(sys, "_base_executable", sys.executable)


def _closure(names: Iterable[str]) -> set[str]:
    """The distributions of this environment that ``names`` need (their requirements, extras included)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, set[str]] = {}
    todo: list[tuple[str, set[str]]] = [(n, set()) for n in names]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if key in seen and extras <= seen[key]:
            continue
        seen.setdefault(key, set()).update(extras)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (seen[key] or {""})):
                todo.append((req.name, set(req.extras)))
    return set(seen)


def stage_packages(dest: pathlib.Path, names: Iterable[str], *, closure: bool, link: bool = True) -> pathlib.Path:
    """A folder laid out as this virtualenv (``lib/pythonX.Y/site-packages``, ``share/``) with its distributions
    ``names`` (and what they need, with ``closure``), hard-linked where it can (copied with ``link=False``: files of
    their own, whose memory no other process on this machine shares, for measurements): setup.sh's
    ``AUTOGRADER_PACKAGES_FROM``, so that a simulated install does not download what this machine has. Commands
    (``bin/``) are left out: setup.sh writes them for the new virtualenv's Python; pip, setuptools and wheel are the
    new virtualenv's own."""
    from packaging.utils import canonicalize_name

    wanted = _closure(names) if closure else {canonicalize_name(n) for n in names}
    wanted -= {"pip", "setuptools", "wheel"}
    prefix = pathlib.Path(sys.prefix).resolve()
    dest.mkdir(parents=True)
    for dist in importlib.metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) not in wanted:
            continue
        for rel in dist.files or []:
            src = pathlib.Path(os.path.normpath(str(dist.locate_file(rel))))
            try:
                inside = src.relative_to(prefix)
            except ValueError:
                continue
            if inside.parts[:1] == ("bin",) or not src.is_file():
                continue
            compiled = [] if src.suffix != ".py" else list(src.parent.glob(f"__pycache__/{src.stem}.*.pyc"))
            for one in [src, *compiled]:  # with their compiled forms, valid for the same (linked) source
                dst = dest / one.relative_to(prefix)
                if dst.exists():
                    continue
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    if not link:
                        raise OSError("a copy of its own")
                    os.link(one, dst)
                except OSError:
                    shutil.copy2(one, dst)
    return dest


class Simulation:
    """Gradescope's container, laid out under one world-searchable folder (in fallback mode the kernel's own uid must
    reach the Python installation, as it does in /opt there): ``autograder/`` (source/ with the unpacked zip,
    submission/, results/, run_autograder) and ``opt/attention-course`` (setup.sh's virtualenv and course).
    ``setup()`` runs setup.sh as Gradescope does, with no apt; ``run(files)`` puts ``files`` in submission/, runs
    run_autograder and returns (results.json, its output)."""

    def __init__(self, chapter: str, base: pathlib.Path | None = None, **build: Any):
        self.chapter = chapter
        self.base = pathlib.Path(base or tempfile.mkdtemp(prefix="gradescope-sim-"))
        self.base.mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)
        self.root = self.base / "autograder"
        self.course_home = self.base / "opt" / "attention-course"
        for sub in ("source", "submission", "results"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.zip = build_zip(chapter, self.base / "zip", **build)
        unpack(self.zip, self.root / "source")
        shutil.copy2(self.root / "source" / "run_autograder", self.root / "run_autograder")  # as Gradescope does

    def env(self, **extra: str) -> dict[str, str]:
        """This machine's environment less this checkout's (its Python path, virtualenv, jail switch)."""
        drop = ("PYTHONPATH", "VIRTUAL_ENV", "AUTOGRADER_JAIL")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
        env.update(AUTOGRADER_ROOT=str(self.root), AUTOGRADER_COURSE_HOME=str(self.course_home), **extra)
        return env

    def setup(
        self, packages_from: pathlib.Path | None = None, *, python: str | None = None, course_only: bool = False
    ) -> str:
        """Run setup.sh (``packages_from``: its AUTOGRADER_PACKAGES_FROM; ``python``: the virtualenv's, default
        :func:`system_python`; use this environment's own base Python with packages staged from every distribution:
        pip chose them for its exact version); its output. Raises RuntimeError if it fails."""
        env = self.env(
            AUTOGRADER_SKIP_APT="1",
            AUTOGRADER_PYTHON=python or system_python(),
            AUTOGRADER_TORCH_INDEX="",  # pip's own index: the PyTorch index may be out of reach here
            **({"AUTOGRADER_PACKAGES_FROM": str(packages_from)} if packages_from else {}),
        )
        cmd = ["bash", "setup.sh"] + (["--course-only"] if course_only else [])
        done = subprocess.run(cmd, cwd=self.root / "source", env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"setup.sh failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done.stdout + done.stderr

    def put(self, files: Iterable[pathlib.Path]) -> None:
        """Make ``files`` the submission."""
        submission = self.root / "submission"
        shutil.rmtree(submission)
        submission.mkdir()
        for f in files:
            shutil.copy2(f, submission / f.name)

    def run(self, files: Iterable[pathlib.Path], *, wrap: Sequence[str] = (), **extra: str) -> tuple[dict, str]:
        """Run run_autograder on ``files`` (``wrap``: a command to run it under), in a PID namespace of its own where
        this machine allows one (:func:`own_pid_namespace`); (results.json, its output)."""
        self.put(files)
        done = subprocess.run(
            [*own_pid_namespace(), *wrap, str(self.root / "run_autograder")],
            cwd=self.root,
            env=self.env(**extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=3600,
        )
        return json.loads((self.root / "results" / "results.json").read_text()), done.stdout

    def close(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
