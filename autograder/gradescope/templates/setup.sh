#!/usr/bin/env bash
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
# The oldest Python every package of requirements.txt installs on (autograder/gradescope/build.py, MIN_PYTHON):
# chapter 11's triton wheels need 3.11 or later. Ubuntu 22.04's python3 is 3.10; its python3.11 and python3.11-venv
# are the distribution's own (jammy-updates, universe).
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
