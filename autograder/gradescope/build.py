"""Building a chapter's autograder for Gradescope: ``CHAPTER_gradescope.zip``, made by one command.

``python -m autograder gradescope CHAPTER [--out DIR]`` (:func:`build_zip`) writes ``CHAPTER_gradescope.zip`` in
Gradescope's documented autograder format (gradescope/autograder_samples, docs/specs.md):

* ``setup.sh`` — run once, as root, when Gradescope builds the autograder's image: bubblewrap (the kernel's jail)
  where apt exists, a virtualenv made with Python 3.11 or later (:data:`MIN_PYTHON`; Ubuntu's own ``python3.11`` on
  Gradescope's 22.04) with CPU torch from the PyTorch CPU index (pinned as in ``requirements.txt``) and the grading
  packages (``requirements.txt`` of the zip: the course's dependencies and its ``grading`` extra but what only the
  notebook builder and the plain nbgrader course use, :data:`NOT_GRADING`), and this course version's package source
  (``course/``: ``autograder/`` without the sample submissions, ``solutions/``, the release notebooks of both
  editions) in ``/opt/attention-course``, root's, with the reference solutions readable by root only; nothing else
  (no conda, no browser);
* ``run_autograder`` — run for each submission, as root, in ``/autograder``: ``python -m autograder.gradescope
  run`` (:mod:`autograder.gradescope.run`) grades the one notebook in ``/autograder/submission/`` as ``python -m
  autograder grade`` does and writes ``/autograder/results/results.json`` (:mod:`autograder.gradescope.results_json`;
  its format: ``autograder/gradescope/gradescope_results.schema.json``);
* ``gradescope.json`` (:class:`Config`) — the chapter, the course version and commit it was made from, the
  visibility of the hidden checks' detail, the time and memory limits.

The settings Gradescope needs per chapter: README, "Gradescope".
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pathlib
import re
import subprocess
import sys
import zipfile
from typing import Any

from .. import __version__, notebooks

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's, docs/specs.md
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
COURSE_HOME = "/opt/attention-course"  # where setup.sh puts the virtualenv and the course (AUTOGRADER_COURSE_HOME)
CONFIG_NAME = "gradescope.json"
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # every zip entry's date: the same checkout gives the same zip, byte for byte


@dataclasses.dataclass
class Config:
    """What one chapter's autograder is (``gradescope.json`` in the zip and in the course folder)."""

    chapter: str
    version: str = __version__
    commit: str = ""  # the checkout's commit, "+changes" when its tree had uncommitted changes
    hidden_visibility: str = "after_published"  # of the tests that show what the hidden checks found
    cell_timeout: int = 120  # seconds per cell (python -m autograder grade --cell-timeout)
    timeout: int = 480  # seconds for the whole notebook: under Gradescope's default 10 minutes for everything
    memory_mb: int = 6144  # the kernel's address-space limit (--memory-mb); the container's memory is Gradescope's

    @classmethod
    def read(cls, path: pathlib.Path) -> Config:
        data = json.loads(pathlib.Path(path).read_text())
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


# ------------------------------------------------------------------------------------------------ the zip


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s<>=!~;\[@]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_requirements(text: str) -> list[str]:
    """The package's dependencies and its ``grading`` extra, from ``pyproject.toml``'s text."""
    try:
        toml: Any = importlib.import_module("tomllib")  # Python 3.11+
    except ModuleNotFoundError:
        toml = None
    if toml is not None:
        project = toml.loads(text)["project"]
        return list(project["dependencies"]) + list(project["optional-dependencies"]["grading"])
    found: list[str] = []
    for key in ("dependencies", "grading"):  # Python 3.10: the two lists, each on one line as the file has them
        m = re.search(rf"^{key}\s*=\s*\[(.*?)\]", text, re.M | re.S)
        found += re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return found


def needs_triton(chapter: str, root: pathlib.Path = notebooks.ROOT) -> bool:
    """Whether grading ``chapter`` needs Triton (its solution module or its checks import it: chapter 11's kernels,
    which the grader runs in Triton's interpreter on Gradescope's CPU)."""
    sources = (root / "solutions" / f"{chapter}.py", root / "autograder" / f"{chapter}.py")
    return any(re.search(r"^\s*import triton\b", p.read_text(), re.M) for p in sources if p.exists())


# The oldest Python every chapter's autograder installs on, which ``setup.sh`` uses where the image's ``python3`` is
# older (Gradescope's Ubuntu 22.04: 3.10; its ``python3.11`` and ``python3.11-venv`` come from the distribution).
# Chapter 11's ``triton==3.9.0`` wheels require 3.11 or later; every chapter grades on the same one.
# ``tests/test_gradescope.py`` resolves every chapter's requirements with the Python ``setup.sh`` picks where
# ``python3`` is 3.10.
MIN_PYTHON = "3.11"

# The ``grading`` extra's packages that grading does not import (issue 47: the worker runs the notebook with
# nbclient): the notebook builder's (jupytext; nbgrader's generate_assignment) and the plain nbgrader course's.
# Gradescope's image leaves them out — nbgrader brought ~60 packages (JupyterLab, Jupyter Server, SQLAlchemy,
# alembic, …); ``tests/test_runner.py`` holds grading to no nbgrader import.
NOT_GRADING = ("nbgrader", "jupytext")


def grading_requirements(root: pathlib.Path = notebooks.ROOT, chapter: str | None = None) -> tuple[str, list[str]]:
    """(torch's requirement, the other packages grading needs): the course's dependencies, its ``grading`` extra but
    :data:`NOT_GRADING`, and ipykernel — and Triton for a ``chapter`` that needs it (:func:`needs_triton`) — each
    pinned as ``requirements.txt`` pins it (else as ``pyproject.toml`` asks)."""
    pinned: dict[str, str] = {}
    for line in (root / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pinned[_requirement_name(line)] = line
    wanted = _pyproject_requirements((root / "pyproject.toml").read_text()) + ["ipykernel>=6"]
    if chapter is not None and needs_triton(chapter, root):
        wanted.append("triton")
    out: dict[str, str] = {}
    for spec in wanted:
        name = _requirement_name(spec)
        if name not in NOT_GRADING:
            out.setdefault(name, pinned.get(name, spec.strip()))
    torch = out.pop("torch")
    return torch, sorted(out.values(), key=str.lower)


def _commit(root: pathlib.Path) -> str:
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+changes" if head and dirty else "")


def course_files(root: pathlib.Path = notebooks.ROOT) -> list[tuple[pathlib.Path, str]]:
    """(file, its name in the zip under ``course/``): the course package at this version — ``autograder/`` (code;
    not the sample submissions, one of which scores full marks), ``solutions/`` (the grader
    needs the chapter's reference to build its grading notebook; the kernel sees only a staged copy in which it
    raises) the notebooks' templates and the release notebooks of both editions (the grader reads a file's chapter,
    its edition and its repairs from them, and writes a Chinese submission's page and tests from ``notebooks/zh/``,
    where ``releases.release_notebook`` finds them)."""
    found = []
    for top, pattern in (
        ("autograder", "**/*"),
        ("solutions", "**/*.py"),
        ("notebooks", "ch[0-9][0-9]_*.ipynb"),
        ("notebooks", "zh/ch[0-9][0-9]_*.ipynb"),
        ("notebooks", "templates/**/*"),
    ):
        for p in sorted((root / top).glob(pattern)):
            rel = p.relative_to(root)
            if not p.is_file() or "__pycache__" in rel.parts or p.suffix in (".pyc", ".tmp"):
                continue
            if rel.parts[:2] == ("autograder", "samples") or rel.parts[:2] == ("autograder", "_release"):
                continue
            found.append((p, "course/" + rel.as_posix()))
    return found


def build_zip(
    chapter: str,
    out: pathlib.Path,
    *,
    hidden_visibility: str = "after_published",
    cell_timeout: int = 120,
    timeout: int = 480,
    memory_mb: int = 6144,
    root: pathlib.Path = notebooks.ROOT,
) -> pathlib.Path:
    """Write ``out/CHAPTER_gradescope.zip`` (the module's docstring says what it holds) and return its path."""
    if chapter not in notebooks.chapters():
        raise ValueError(f"unknown chapter {chapter!r}; the chapters are: {', '.join(notebooks.chapters())}")
    if hidden_visibility not in VISIBILITIES:
        raise ValueError(f"--hidden-visibility must be one of {', '.join(VISIBILITIES)}")
    config = Config(chapter, __version__, _commit(root), hidden_visibility, cell_timeout, timeout, memory_mb)
    torch, requirements = grading_requirements(root, chapter)
    note = f"# The packages grading needs besides torch ({torch}, which setup.sh installs from the PyTorch CPU index)\n"
    texts = {
        "setup.sh": _SETUP.replace("{{TORCH}}", torch)
        .replace("{{TORCH_INDEX}}", TORCH_INDEX)
        .replace("{{MIN_PYTHON}}", MIN_PYTHON),
        "run_autograder": _RUN,
        "requirements.txt": note + "\n".join(requirements) + "\n",
        CONFIG_NAME: json.dumps(dataclasses.asdict(config), indent=1) + "\n",
    }
    header = f"course version {config.version}" + (f", commit {config.commit}" if config.commit else "")
    for name in ("setup.sh", "run_autograder"):
        texts[name] = (
            texts[name]
            .replace("{{CHAPTER}}", chapter)
            .replace("{{MADE_FROM}}", header)
            .replace("{{COURSE_HOME}}", COURSE_HOME)
        )
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{chapter}_gradescope.zip"
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in texts.items():
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.external_attr = (0o100755 if name in ("setup.sh", "run_autograder") else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        for path, name in course_files(root):
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, path.read_bytes())
    tmp.replace(target)
    return target


def unpack(zip_path: pathlib.Path, source: pathlib.Path) -> None:
    """Unpack the zip into ``source`` as Gradescope does (``/autograder/source``), keeping the scripts executable."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            z.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                (source / info.filename).chmod(mode)


_SETUP = r"""#!/usr/bin/env bash
# Attention in NLP: the Gradescope autograder of {{CHAPTER}} ({{MADE_FROM}}), made by
# `python -m autograder gradescope {{CHAPTER}}` (autograder/gradescope/build.py; README, "Gradescope").
#
# Gradescope runs this once, as root, when it builds the autograder's image, with the zip unpacked in
# /autograder/source. It installs what grading needs and nothing else: bubblewrap (the kernel's jail) where apt
# exists; a virtualenv with CPU torch ({{TORCH}}, from the PyTorch CPU index) and the packages of requirements.txt;
# the course package of this zip (course/), all in $COURSE_HOME, root's: the kernel's uid may read the Python
# installation and the course's code, not the reference solutions, and may write none of it.
#
# Environment (all optional; Gradescope sets none of them, tests and benchmarks do):
#   AUTOGRADER_COURSE_HOME   where the virtualenv and the course go (default {{COURSE_HOME}})
#   AUTOGRADER_PYTHON        the Python that makes the virtualenv (default: python3 where it is {{MIN_PYTHON}} or
#                            newer, else python{{MIN_PYTHON}}, from apt where there is apt)
#   AUTOGRADER_SKIP_APT=1    install no system packages
#   AUTOGRADER_TORCH_INDEX   the package index torch comes from (default {{TORCH_INDEX}}; empty: pip's own)
#   AUTOGRADER_PACKAGES_FROM a folder laid out as a virtualenv (lib/pythonX.Y/site-packages, share/) holding some
#                            packages: they go into the virtualenv first (hard links where they can), so pip downloads
#                            only what they lack (tests: torch, or every package, from the development virtualenv)
#   AUTOGRADER_PIP_OPTIONS   more options for every pip install (e.g. --no-index --find-links DIR)
# `setup.sh --course-only` puts only the course in place, in a virtualenv made before (benchmarks).
# `setup.sh --python` prints the Python it would make the virtualenv with, and installs nothing (tests).
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
COURSE_HOME="${AUTOGRADER_COURSE_HOME:-{{COURSE_HOME}}}"
VENV="$COURSE_HOME/venv"
TORCH="{{TORCH}}"
TORCH_INDEX="${AUTOGRADER_TORCH_INDEX-{{TORCH_INDEX}}}"
read -r -a PIP_OPTIONS <<< "${AUTOGRADER_PIP_OPTIONS:-}"
# The oldest Python every package of requirements.txt installs on (autograder/gradescope/build.py, MIN_PYTHON): the
# pinned nbgrader needs 3.11 or later. Ubuntu 22.04's python3 is 3.10; its python3.11 and python3.11-venv are the
# distribution's own (jammy-updates, universe).
MIN_PYTHON="{{MIN_PYTHON}}"

new_enough() {  # is the Python $1 there, and MIN_PYTHON or newer?
    command -v "$1" >/dev/null && "$1" -c "import sys; sys.exit(sys.version_info < (${MIN_PYTHON/./, }))"
}

choose_python() {  # AUTOGRADER_PYTHON, else python3 where it is new enough, else python$MIN_PYTHON
    if [ -n "${AUTOGRADER_PYTHON:-}" ]; then
        echo "$AUTOGRADER_PYTHON"
    elif new_enough python3; then
        echo python3
    else
        echo "python$MIN_PYTHON"
    fi
}

install_course() {
    rm -rf "$COURSE_HOME/course"
    cp -R "$SOURCE/course" "$COURSE_HOME/course"
    cp "$SOURCE/gradescope.json" "$COURSE_HOME/course/gradescope.json"
    "$VENV/bin/python" -m compileall -q "$COURSE_HOME/course" >/dev/null || true
    # Root's; the kernel's uid may read the course's code and the release notebooks (it imports autograder), not
    # the reference solutions (it imports a staged copy in which this chapter's answers raise), and write nothing.
    chmod -R u=rwX,go=rX "$COURSE_HOME/course"
    chmod -R go= "$COURSE_HOME/course/solutions"
    chmod 0755 "$COURSE_HOME"
    chmod -R go= "$SOURCE/course"  # the zip's own copy of the course
    PYTHONPATH="$COURSE_HOME/course" "$VENV/bin/python" -c "import autograder.gradescope.run, autograder.grading.batch" \
        || { echo "setup.sh: the course package does not import" >&2; exit 1; }
}

if [ "${1:-}" = "--course-only" ]; then
    install_course
    exit 0
fi
if [ "${1:-}" = "--python" ]; then
    choose_python
    exit 0
fi

APT=""
if [ -z "${AUTOGRADER_SKIP_APT:-}" ] && command -v apt-get >/dev/null; then
    APT=1
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip bubblewrap util-linux iproute2
fi
PYTHON="$(choose_python)"
if [ -n "$APT" ] && [ "$PYTHON" = "python$MIN_PYTHON" ] && ! new_enough "$PYTHON"; then
    apt-get install -y -qq --no-install-recommends "python$MIN_PYTHON" "python$MIN_PYTHON-venv"
fi
new_enough "$PYTHON" || {
    echo "setup.sh: grading {{CHAPTER}} needs Python $MIN_PYTHON or newer, and $PYTHON is older or missing" \
        "(set AUTOGRADER_PYTHON to one)" >&2
    exit 1
}

rm -rf "$VENV"
mkdir -p "$COURSE_HOME"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
if [ -n "${AUTOGRADER_PACKAGES_FROM:-}" ]; then
    # hard links where they can be made, nothing of the new virtualenv's own replaced; then the packages' commands,
    # which pip writes only for what it installs itself
    "$VENV/bin/python" - "$AUTOGRADER_PACKAGES_FROM" "$VENV" <<'PACKAGES'
import importlib.metadata, os, shutil, sys
source, venv = sys.argv[1], sys.argv[2]
for folder, _, files in os.walk(source):
    target = os.path.join(venv, os.path.relpath(folder, source))
    os.makedirs(target, exist_ok=True)
    for name in files:
        src, dst = os.path.join(folder, name), os.path.join(target, name)
        if not os.path.lexists(dst):
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
for ep in importlib.metadata.entry_points(group="console_scripts"):
    path = os.path.join(venv, "bin", ep.name)
    if not os.path.exists(path):
        module, _, attr = ep.value.partition(":")
        with open(path, "w") as f:
            f.write(f"#!{sys.executable}\nimport sys\nfrom {module} import {attr.split('.')[0]}\nsys.exit({attr}())\n")
        os.chmod(path, 0o755)
PACKAGES
fi
if [ -n "$TORCH_INDEX" ]; then
    "${PIP[@]}" install --progress-bar off ${PIP_OPTIONS[@]+"${PIP_OPTIONS[@]}"} --index-url "$TORCH_INDEX" "$TORCH"
else
    "${PIP[@]}" install --progress-bar off ${PIP_OPTIONS[@]+"${PIP_OPTIONS[@]}"} "$TORCH"
fi
"${PIP[@]}" install --progress-bar off ${PIP_OPTIONS[@]+"${PIP_OPTIONS[@]}"} -r "$SOURCE/requirements.txt"
# Readable by every uid (the kernel runs as its own), writable by root only.
chmod -R go-w "$VENV"
chmod -R a+rX "$VENV"
install_course
"$VENV/bin/python" -c "import torch, nbclient, nbconvert, ipykernel; print('torch', torch.__version__, 'nbclient', nbclient.__version__)"
"""

_RUN = r"""#!/usr/bin/env bash
# Attention in NLP: the Gradescope autograder of {{CHAPTER}} ({{MADE_FROM}}).
# Gradescope runs this for each submission, as root, in /autograder: it grades the one notebook in
# /autograder/submission/ with the course grader (python -m autograder.gradescope run; autograder/gradescope/run.py)
# and writes /autograder/results/results.json. Nothing else writes that file: a grader that fails leaves a zero
# that says so. AUTOGRADER_ROOT (tests) stands for /autograder, AUTOGRADER_COURSE_HOME for {{COURSE_HOME}}.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
COURSE_HOME="${AUTOGRADER_COURSE_HOME:-{{COURSE_HOME}}}"
RESULTS="$ROOT/results"
mkdir -p "$RESULTS"
rm -f "$RESULTS/results.json"
cd "$ROOT"
export PATH="$COURSE_HOME/venv/bin:$PATH"  # the grader's commands come from its virtualenv
PYTHONPATH="$COURSE_HOME/course" "$COURSE_HOME/venv/bin/python" -m autograder.gradescope run \
    --root "$ROOT" --config "$COURSE_HOME/course/gradescope.json"
status=$?
if [ "$status" -ne 0 ]; then
    rm -f "$RESULTS/results.json"
    printf '%s\n' '{"score": 0.0, "output": "The autograder itself failed before it could grade this submission (exit status '"$status"'): nothing was graded. Your instructor has been shown why; submit again later, or ask them.", "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden", "tests": []}' > "$RESULTS/results.json"
fi
exit 0
"""


# ------------------------------------------------------------------------------------------------ commands


def add_build_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m autograder gradescope`` (cli.py)."""
    p.add_argument("chapter", help="chapter stem, e.g. ch03_self_attention")
    p.add_argument("--out", default="grading_out", help="folder for CHAPTER_gradescope.zip (default: grading_out)")
    p.add_argument(
        "--hidden-visibility",
        choices=VISIBILITIES,
        default="after_published",
        help="when students see what each exercise's hidden checks found (a test of its own; default: "
        "after_published, i.e. once the grades are published). The points are visible at once either way",
    )
    p.add_argument("--cell-timeout", type=int, default=120, help="seconds per cell (default: 120)")
    p.add_argument(
        "--timeout",
        type=int,
        default=480,
        help="seconds for the whole notebook (default: 480, within Gradescope's default 10 minutes; raise it "
        "with Gradescope's own limit, up to 40 minutes)",
    )
    p.add_argument("--memory-mb", type=int, default=6144, help="address-space limit of the kernel (default: 6144)")


def build_command(args) -> int:
    """``python -m autograder gradescope CHAPTER``: write the zip and say what to do with it."""
    try:
        path = build_zip(
            args.chapter,
            pathlib.Path(args.out),
            hidden_visibility=args.hidden_visibility,
            cell_timeout=args.cell_timeout,
            timeout=args.timeout,
            memory_mb=args.memory_mb,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with zipfile.ZipFile(path) as z:
        config = json.loads(z.read(CONFIG_NAME))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB; course {config['version']} {config['commit']})")
    print(
        "Upload it as the assignment's autograder (Configure Autograder > Zip file upload, base image Ubuntu 22.04), "
        "and set the memory and time the README's 'Gradescope' table gives for this chapter."
    )
    return 0
