"""A chapter's autograder for Gradescope, made by one command, that grades there as ``python -m autograder grade``
grades here.

``python -m autograder gradescope CHAPTER [--out DIR]`` (:func:`build_zip`) writes ``CHAPTER_gradescope.zip`` in
Gradescope's documented autograder format (gradescope/autograder_samples, docs/specs.md):

* ``setup.sh`` — run once, as root, when Gradescope builds the autograder's image: bubblewrap (the kernel's jail)
  where apt exists, a virtualenv with CPU torch from the PyTorch CPU index (pinned as in ``requirements.txt``) and
  the grading packages (``requirements.txt`` of the zip: the course's dependencies and its ``grading`` extra), and
  this course version's package source (``course/``: ``autograder/`` without the sample submissions,
  ``solutions/``, the release notebooks) in ``/opt/attention-course``, root's, with the reference solutions
  readable by root only; nothing else (no conda, no browser);
* ``run_autograder`` — run for each submission, as root, in ``/autograder``: ``python -m autograder.gradescope
  run`` (:func:`run`) grades the one notebook in ``/autograder/submission/`` with :func:`batch.grade
  <autograder.grading.batch.grade>` — the same canonicalisation, jailed kernel, guard, checks judged again in the
  worker, scoring and feedback as ``python -m autograder grade`` — and writes ``/autograder/results/results.json``
  (:func:`results_payload`; its format: ``autograder/gradescope_results.schema.json``);
* ``gradescope.json`` — the chapter, the course version and commit it was made from, the visibility of the hidden
  checks' detail, the time and memory limits.

What ``results.json`` holds: one scored test per exercise (its points, and the checks' messages the course's
feedback shows for it), visible at once; one unscored test per exercise with what its hidden checks found, shown
``after_published`` (``--hidden-visibility``); the total, equal to the course grader's on the same file; the
feedback page's content (``output``, HTML, the hidden checks' messages left to their own tests). A wrong
submission — another chapter's notebook, a file that is not a notebook, several notebooks, nothing — gets a zero
and the reason, never a crash; a failure of the grader itself also ends in a ``results.json`` (a zero saying so).

Who can write the score: only this process, after the worker (and with it the kernel) has ended, from the
worker's result file; the kernel of the student's code runs jailed (bubblewrap: ``/autograder`` is not in its
view) where bubblewrap works, else as its own unprivileged uid, which cannot write ``/autograder/results``, the
course or the virtualenv (root's, not writable by others); processes left behind by that uid are killed before
``results.json`` is written. Where neither holds (not root, or a Python installation other users cannot read), it
refuses to grade. How this follows the course grader's design, and the settings Gradescope needs per chapter:
README, "Gradescope".
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html
import importlib
import importlib.metadata
import json
import logging
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from . import __version__, notebooks

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's, docs/specs.md
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
COURSE_HOME = "/opt/attention-course"  # where setup.sh puts the virtualenv and the course (AUTOGRADER_COURSE_HOME)
CONFIG_NAME = "gradescope.json"
SCHEMA = pathlib.Path(__file__).resolve().parent / "gradescope_results.schema.json"
UNISOLATED_SWITCH = "AUTOGRADER_GRADESCOPE_UNISOLATED"  # "1": grade even where the kernel cannot be isolated
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


def min_python(chapter: str, root: pathlib.Path = notebooks.ROOT) -> str:
    """The oldest Python the chapter's autograder installs on ("3.11"), which ``setup.sh`` uses where the image's
    ``python3`` is older (Gradescope's Ubuntu 22.04: 3.10; its ``python3.11`` comes from the distribution): 3.11
    where grading needs Triton (:func:`needs_triton`; the pinned ``triton==3.9.0`` has wheels for CPython 3.11 and
    later only), else 3.10. ``tests/test_gradescope.py`` resolves every chapter's requirements with a 3.10
    interpreter, so a pin that leaves 3.10 behind fails there first."""
    return "3.11" if needs_triton(chapter, root) else "3.10"


def grading_requirements(root: pathlib.Path = notebooks.ROOT, chapter: str | None = None) -> tuple[str, list[str]]:
    """(torch's requirement, the other packages grading needs): the course's dependencies, its ``grading`` extra and
    ipykernel — and Triton for a ``chapter`` that needs it (:func:`needs_triton`) — each pinned as
    ``requirements.txt`` pins it (else as ``pyproject.toml`` asks)."""
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
    """(file, its name in the zip under ``course/``): the course package at this version — ``autograder/`` (code,
    notebook templates; not the sample submissions, one of which scores full marks), ``solutions/`` (the grader
    needs the chapter's reference to build its grading notebook; the kernel sees only a staged copy in which it
    raises) and the release notebooks (the grader reads a file's chapter and its repairs from them)."""
    found = []
    for top, pattern in (("autograder", "**/*"), ("solutions", "**/*.py"), ("notebooks", "ch[0-9][0-9]_*.ipynb")):
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
        .replace("{{MIN_PYTHON}}", min_python(chapter, root)),
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
# `python -m autograder gradescope {{CHAPTER}}` (autograder/gradescope.py; README, "Gradescope").
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
# The oldest Python every package of requirements.txt installs on (autograder/gradescope.py, min_python). Ubuntu
# 22.04's python3 is 3.10; its python3.11 and python3.11-venv are the distribution's own (jammy-updates, universe).
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
    PYTHONPATH="$COURSE_HOME/course" "$VENV/bin/python" -c "import autograder.gradescope, autograder.grading.batch" \
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
    # hard links where they can be made, nothing of the new virtualenv's own replaced; then the packages' commands
    # (nbgrader runs `alembic`), which pip writes only for what it installs itself
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
"$VENV/bin/python" -c "import torch, nbgrader, nbclient, ipykernel; print('torch', torch.__version__, 'nbgrader', nbgrader.__version__)"
"""

_RUN = r"""#!/usr/bin/env bash
# Attention in NLP: the Gradescope autograder of {{CHAPTER}} ({{MADE_FROM}}).
# Gradescope runs this for each submission, as root, in /autograder: it grades the one notebook in
# /autograder/submission/ with the course grader (python -m autograder.gradescope run; autograder/gradescope.py)
# and writes /autograder/results/results.json. Nothing else writes that file: a grader that fails leaves a zero
# that says so. AUTOGRADER_ROOT (tests) stands for /autograder, AUTOGRADER_COURSE_HOME for {{COURSE_HOME}}.
ROOT="${AUTOGRADER_ROOT:-/autograder}"
COURSE_HOME="${AUTOGRADER_COURSE_HOME:-{{COURSE_HOME}}}"
RESULTS="$ROOT/results"
mkdir -p "$RESULTS"
rm -f "$RESULTS/results.json"
cd "$ROOT"
export PATH="$COURSE_HOME/venv/bin:$PATH"  # the grader's commands (nbgrader runs alembic) come from its virtualenv
PYTHONPATH="$COURSE_HOME/course" "$COURSE_HOME/venv/bin/python" -m autograder.gradescope run \
    --root "$ROOT" --config "$COURSE_HOME/course/gradescope.json"
status=$?
if [ "$status" -ne 0 ]; then
    rm -f "$RESULTS/results.json"
    printf '%s\n' '{"score": 0.0, "output": "The autograder itself failed before it could grade this submission (exit status '"$status"'): nothing was graded. Your instructor has been shown why; submit again later, or ask them.", "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden", "tests": []}' > "$RESULTS/results.json"
fi
exit 0
"""


# ------------------------------------------------------------------------------------------------ results.json


def _label(fn) -> str:
    return (fn.__doc__ or fn.__name__).strip().splitlines()[0]


def _hidden_labels(exercise) -> tuple[set[str], set[str]]:
    """(labels of the visible checks, labels of the hidden checks only) of an exercise, as the messages name them."""
    visible = {_label(fn) for fn in exercise.visible}
    return visible, {_label(fn) for fn in exercise.hidden} - visible


def _is_hidden(line: str, hidden: set[str]) -> bool:
    """Whether a message line (``✘ <check's label>`` then what it found) is a hidden check's."""
    text = line.strip()
    return any(text.startswith(f"✘ {label}") for label in hidden)


def _reasons_by_exercise(reason: str, names: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The result's reason ("; "-joined lines, each "<exercise>: ..." or about the whole file) as (lines about the
    whole submission, exercise -> its lines)."""
    general: list[str] = []
    mine: dict[str, list[str]] = {n: [] for n in names}
    current: list[str] = general
    for part in reason.split("; ") if reason else []:
        owner = next((n for n in sorted(names, key=len, reverse=True) if part.startswith(f"{n}: ")), None)
        if owner is not None:
            current = mine[owner]
            current.append(part.removeprefix(f"{owner}: "))
        elif current:
            current[-1] += "; " + part
        else:
            general.append(part)
    return general, mine


def _pointer(name: str, visibility: str) -> str:
    when = {
        "after_published": " once the grades are published",
        "after_due_date": " after the due date",
        "visible": "",
    }
    if visibility == "hidden":
        return "a hidden check failed (its message is not shown)"
    return f'a hidden check failed: what it found is shown under "{name}: hidden checks"{when[visibility]}'


@dataclasses.dataclass
class _Exercise:
    """One exercise's outcome as results.json tells it."""

    name: str
    points: float
    got: float
    shown: list[str]  # the lines the scored test shows (and the feedback page)
    hidden: list[str]  # what the hidden checks found (their own test)
    n_hidden: int


def _exercises(result, chapter: str, hidden_visibility: str) -> tuple[list[str], list[_Exercise]]:
    """(lines about the whole submission, each exercise's outcome) from the course grader's result."""
    exercises = list(notebooks.checks_module(chapter).EXERCISES)
    names = [ex.name for ex in exercises]
    general, reasons = _reasons_by_exercise(result.reason, names)
    out = []
    for ex in exercises:
        _, hidden_labels = _hidden_labels(ex)
        got = float(result.scores.get(ex.name, 0.0))
        details = list((getattr(result, "details", None) or {}).get(ex.name, []))
        lines = details if got < ex.points and details else reasons[ex.name]
        hidden = [line for line in lines if _is_hidden(line, hidden_labels)]
        if hidden_visibility == "visible":  # as the course's own feedback: every message at once
            shown = list(lines)
        else:
            shown = [line for line in lines if line not in hidden] + (
                [_pointer(ex.name, hidden_visibility)] if hidden else []
            )
        out.append(_Exercise(ex.name, float(ex.points), got, shown, hidden, len(ex.hidden)))
    return general, out


def _exercise_text(ex: _Exercise, status: str, general: Sequence[str]) -> str:
    head = f"{'✔' if ex.got >= ex.points else '✘'} {ex.name}: {ex.got:g} of {ex.points:g} points"
    lines = list(ex.shown)
    why = "; ".join(general) or "see the top of this page"
    if status == "error":
        lines = [f"not graded: {why}"] + lines
    elif status == "integrity":
        lines = [f"the whole submission scores zero: {why}"] + lines
    return head + "".join("\n" + "\n".join("  " + ln for ln in line.splitlines()) for line in lines) + "\n"


def _hidden_text(ex: _Exercise, status: str) -> tuple[str, str]:
    """(status, output) of an exercise's hidden-checks test."""
    if status != "graded":
        return "failed", "The hidden checks did not run: the submission was not graded (see its first test).\n"
    if ex.hidden:
        return "failed", "".join(line.rstrip() + "\n" for line in ex.hidden)
    if ex.got >= ex.points:
        return "passed", f"All hidden checks passed ({ex.n_hidden} check{'s' if ex.n_hidden != 1 else ''}).\n"
    return "failed", (
        f"No hidden check of {ex.name} is reported as failed; the exercise lost its points for the reasons given in "
        f'"{ex.name}".\n'
    )


def page_content(page: str) -> str:
    """The content of a feedback page for results.json's ``output``: what is inside ``<body>``, without scripts and
    styles (Gradescope sanitises them away) and without images (embedded figures would make the results large;
    they are in the student's own notebook)."""
    m = re.search(r"<body[^>]*>(.*)</body>", page, re.S | re.I)
    body = m.group(1) if m else page
    body = re.sub(r"<(script|style)\b.*?</\1\s*>", "", body, flags=re.S | re.I)
    body = re.sub(r"<img\b[^>]*>", "<em>[a figure: see your notebook]</em>", body, flags=re.I)
    return body.strip()


def feedback_output(
    result,
    chapter: str,
    graded,
    exercises: Sequence[_Exercise],
    general: Sequence[str],
) -> str:
    """The feedback page of ``python -m autograder grade`` for this result (``feedback.write_feedback``), its
    content only (:func:`page_content`), with each exercise's hidden checks' messages left to their own tests."""
    from .grading import feedback

    points = {ex.name: int(ex.points) for ex in exercises}
    with tempfile.TemporaryDirectory(prefix="gradescope-feedback-") as tmp:
        page = pathlib.Path(tmp) / "feedback.html"
        if graded is None or result.status == "error":
            reasons = [result.reason] if result.reason else ["the file could not be graded"]
            feedback.write_feedback(
                page,
                None,
                result.student_id,
                chapter,
                {},
                points,
                warnings=result.warnings,
                reasons=reasons,
                unreadable=result.status == "error" and graded is None and _unreadable(result.reason),
            )
        else:
            reasons = list(general) + [f"{ex.name}: {line}" for ex in exercises for line in ex.shown]
            feedback.write_feedback(
                page,
                graded,
                result.student_id,
                chapter,
                dict(result.scores),
                points,
                warnings=result.warnings,
                reasons=reasons,
                secrets=feedback.grader_secrets(graded, chapter),
                details={ex.name: ex.shown for ex in exercises if ex.got < ex.points},
            )
        return page_content(page.read_text())


def _unreadable(reason: str) -> bool:
    """Whether a zero's reason is about the file itself (so the page's advice is to download it again)."""
    return not reason.startswith(("the kernel", "a cell", "autograde", "the notebook ran", "the grading worker"))


def results_payload(
    result,
    chapter: str,
    *,
    graded=None,
    hidden_visibility: str = "after_published",
    execution_time: float = 0.0,
    output: str | None = None,
    extra: dict | None = None,
) -> dict:
    """Gradescope's results.json for the course grader's ``result`` (a ``submission.Result``) of a ``chapter``
    submission; ``graded``: the graded notebook (for the feedback page), None for a file that was not run;
    ``output``: the page content to show (default: built here from ``result`` and ``graded``)."""
    general, exercises = _exercises(result, chapter, hidden_visibility)
    tests: list[dict] = []
    for i, ex in enumerate(exercises, start=1):
        tests.append(
            {
                "name": ex.name,
                "number": str(i),
                "score": ex.got,
                "max_score": ex.points,
                "status": "passed" if ex.got >= ex.points else "failed",
                "output": _exercise_text(ex, result.status, general),
                "output_format": "text",
                "tags": [chapter, "exercise"],
                "visibility": "visible",
            }
        )
        if ex.n_hidden:
            status, text = _hidden_text(ex, result.status)
            tests.append(
                {
                    "name": f"{ex.name}: hidden checks",
                    "number": f"{i}.1",
                    "status": status,
                    "output": text,
                    "output_format": "text",
                    "tags": [chapter, "hidden checks"],
                    "visibility": hidden_visibility,
                }
            )
    if output is None:
        output = feedback_output(result, chapter, graded, exercises, general)
    return {
        "score": sum(ex.got for ex in exercises),
        "execution_time": round(execution_time),
        "output": output,
        "output_format": "html",
        "visibility": "visible",
        "stdout_visibility": "hidden",  # the grader's log: for the instructor
        "tests": tests,
        "extra_data": {
            "course_grader": {
                "chapter": chapter,
                "status": result.status,
                "reason": result.reason,
                "warnings": list(result.warnings),
                **(extra or {}),
                # the course grader's result file as python -m autograder grade writes it (less nbgrader's log)
                "result": {k: v for k, v in dataclasses.asdict(result).items() if k not in ("log", "trace")},
            }
        },
    }


def zero_payload(chapter: str, why: str, *, execution_time: float = 0.0, extra: dict | None = None) -> dict:
    """results.json for a submission that gets zero without being graded (nothing submitted, several notebooks, the
    grader cannot isolate the kernel here, the grader itself failed): every exercise zero, with ``why``."""
    from .grading.submission import Result

    return results_payload(
        Result("", "", "submission", "error", why),
        chapter,
        execution_time=execution_time,
        output=f"<p><b>0 points.</b> {html.escape(why)}</p>",
        extra=extra,
    )


def write_results(path: pathlib.Path, payload: dict) -> None:
    """Write results.json at ``path`` atomically (a new file renamed into place, never through a link)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ grading one


def submitted_files(folder: pathlib.Path) -> list[pathlib.Path]:
    """The files a student submitted (Gradescope puts them in ``/autograder/submission/``, in folders when they
    uploaded some), without the folders an editor or an archiver adds (``.ipynb_checkpoints``, ``__MACOSX``,
    hidden files)."""
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") or part == "__MACOSX" for part in p.relative_to(folder).parts)
    )


def choose_submission(files: Sequence[pathlib.Path], folder: pathlib.Path) -> tuple[pathlib.Path | None, str]:
    """(the file to grade, "") or (None, why the submission gets zero). One notebook is graded (other files beside
    it are ignored); a single file of another kind is graded too, so the course grader says what it is."""
    shown = ", ".join(str(p.relative_to(folder)) for p in files[:6]) + (" …" if len(files) > 6 else "")
    notebooks_ = [p for p in files if p.suffix.lower() == ".ipynb"]
    if len(notebooks_) == 1:
        return notebooks_[0], ""
    if len(notebooks_) > 1:
        return None, (
            f"{len(notebooks_)} notebooks were submitted ({shown}): submit exactly one, the chapter's notebook"
        )
    if len(files) == 1:
        return files[0], ""
    if files:
        return None, f"no notebook (.ipynb file) was submitted, only: {shown}"
    return None, "nothing was submitted: upload the chapter's notebook (.ipynb file)"


def isolation() -> tuple[str, str]:
    """(mode, what holds and why): "jailed" (bubblewrap works here), "unprivileged" (it does not, but the kernel can
    run as its own unprivileged uid), or "none"."""
    from .grading import jail

    problem = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
    if problem is None:
        return "jailed", (
            "the kernel runs in a bubblewrap jail (own filesystem view without /autograder, no network, its own "
            "unprivileged uid)"
        )
    if jail.uid_drop_possible():
        return "unprivileged", (
            f"bubblewrap cannot be used here ({problem}): the kernel runs as its own unprivileged uid, which cannot "
            "write /autograder/results, the course or its Python installation, under the course grader's guard "
            "(fallback mode)"
        )
    return "none", (
        f"bubblewrap cannot be used here ({problem}) and the kernel cannot run as another uid (the grader is not "
        "root, or its Python installation is not readable by other users)"
    )


def end_processes_of(uid: int) -> int:
    """Kill every process whose real uid is ``uid`` (the kernel's own: anything it left running); how many."""
    if uid <= 0 or os.geteuid() != 0:
        return 0
    killed = 0
    for proc in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            uids = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("Uid:"))
            if int(uids.split()[1]) == uid:
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return killed


def _grade(root: pathlib.Path, config: Config, work: pathlib.Path) -> dict:
    """results.json's content for the submission under ``root`` (no exception escapes for a wrong submission)."""
    from .grading import batch, execute, jail, submission

    chapter = config.chapter
    folder = root / "submission"
    files = submitted_files(folder)
    chosen, why = choose_submission(files, folder)
    mode, how = isolation()
    extra: dict[str, Any] = {"isolation": mode, "isolation_detail": how, "version": config.version}
    extra["commit"] = config.commit
    print(f"Attention in NLP, {chapter} (course {config.version} {config.commit}): {how}")
    if chosen is None:
        print(f"  zero: {why}")
        return zero_payload(chapter, why, extra=extra)
    if mode == "none" and os.environ.get(UNISOLATED_SWITCH) != "1":
        why = (
            "the autograder could not keep the notebook's code away from its own files here, so it graded nothing: "
            f"{how}. Instructor: rebuild the autograder (setup.sh makes its Python installation readable and runs "
            f"as root), or set {UNISOLATED_SWITCH}=1 to grade anyway"
        )
        print(f"  refused: {why}")
        return zero_payload(chapter, why, extra=extra)
    incoming = work / "submission"
    incoming.mkdir(mode=0o700)
    copy = incoming / chosen.name
    shutil.copyfile(chosen, copy)
    out = work / "out"
    oom_before, memory_limit = execute.container_memory()
    switch = os.environ.get(jail.JAIL_SWITCH)
    if mode != "jailed":
        os.environ[jail.JAIL_SWITCH] = "off"  # the batch then grades in fallback mode, as said above
    try:
        rows = batch.grade(
            [copy],
            chapter,
            out,
            cell_timeout=config.cell_timeout,
            notebook_timeout=config.timeout,
            memory_mb=config.memory_mb,
            jobs=1,
            force=True,
        )
    finally:
        if switch is None:
            os.environ.pop(jail.JAIL_SWITCH, None)
        else:
            os.environ[jail.JAIL_SWITCH] = switch
    row = rows[0]
    oom_after, _ = execute.container_memory()
    if oom_after > oom_before:  # a process of the run was killed for memory: what it scored cannot be trusted
        limit = f" ({memory_limit} MB)" if memory_limit else ""
        why = (
            f"the autograder's container ran out of memory{limit} while grading this notebook, so its grade could not "
            "be trusted and nothing was graded; your instructor has been told. Instructor: raise the autograder's "
            f"memory (README, 'Gradescope': the memory this chapter needs) and regrade"
        )
        print(f"  zero: {why} (the course grader gave {row.score:g}/{row.max_score:g}: {row.reason[:200]})")
        extra["oom_kills"] = oom_after - oom_before
        return zero_payload(chapter, why, extra=extra)
    result_files = sorted((out / "results").glob("*.json"))
    result = submission.read_result(result_files[0])
    drop = mode == "jailed" or jail.uid_drop_possible()
    left = end_processes_of(execute.kernel_uid(result.student_id, drop))
    if left:
        print(f"  killed {left} process(es) the kernel's uid left running")
        extra["killed_after_grading"] = left
    graded_path = out / "graded" / f"{result.student_id}.ipynb"
    graded = None
    if graded_path.exists() and result.status != "error":
        import nbformat

        graded = nbformat.read(graded_path, as_version=4)
    print(f"  {row.submission}: {row.score:g}/{row.max_score:g} ({row.status}) {row.reason[:200]}")
    for w in row.warnings:
        print(f"  warning: {w}")
    extra["judged"] = dict(result.judged)
    return results_payload(result, chapter, graded=graded, hidden_visibility=config.hidden_visibility, extra=extra)


def run(root: pathlib.Path, config: Config) -> dict:
    """Grade the submission under ``root`` (Gradescope's ``/autograder``) and write ``root/results/results.json``;
    returns what it wrote. Whatever happens, a results.json is written, by this process only, at the end."""
    start = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(results_dir, 0, 0)
    os.chmod(results_dir, 0o755)  # the kernel's uid (another user) cannot write here
    target = results_dir / "results.json"
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    work = pathlib.Path(tempfile.mkdtemp(prefix="gradescope-"))  # 0700: the grader's own
    try:
        payload = _grade(root, config, work)
    except Exception as exc:  # the grader's own failure: a zero that says so, and the traceback for the instructor
        traceback.print_exc()
        payload = zero_payload(
            config.chapter,
            f"the autograder failed while grading this submission ({type(exc).__name__}): nothing was graded; "
            "your instructor can see why",
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    payload["execution_time"] = round(time.monotonic() - start)
    with contextlib.suppress(FileNotFoundError):
        target.unlink()  # nothing but this process writes it: whatever is there now goes
    write_results(target, payload)
    print(f"wrote {target}: {payload['score']:g} points")
    return payload


# ------------------------------------------------------------------------------------------------ simulated here
# Gradescope's container, simulated on this machine for the tests (tests/test_gradescope.py) and the measurement
# (benchmarks/bench_gradescope.py): the zip unpacked into a tree laid out as /autograder, setup.sh run in a clean
# virtualenv, run_autograder run on a submission.


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
        """Run run_autograder on ``files`` (``wrap``: a command to run it under); (results.json, its output)."""
        self.put(files)
        done = subprocess.run(
            [*wrap, str(self.root / "run_autograder")],
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


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.gradescope", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="grade /autograder/submission and write /autograder/results/results.json")
    p.add_argument("--root", default=os.environ.get("AUTOGRADER_ROOT", "/autograder"))
    p.add_argument("--config", required=True, help="the autograder's gradescope.json")
    p = sub.add_parser("build", help="write CHAPTER_gradescope.zip (as python -m autograder gradescope)")
    add_build_arguments(p)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.command == "build":
        return build_command(args)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("autograder")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    from .grading import execute

    cores = str(execute.usable_cores())  # this process's torch (the worker's judge) as the kernel's: no more threads
    os.environ.setdefault("OMP_NUM_THREADS", cores)
    os.environ.setdefault("MKL_NUM_THREADS", cores)
    run(pathlib.Path(args.root), Config.read(pathlib.Path(args.config)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
