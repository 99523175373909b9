"""``python -m autograder gradescope CHAPTER``: write ``CHAPTER_gradescope.zip``, a chapter's autograder in
Gradescope's documented format — ``setup.sh`` and ``run_autograder`` (shell templates beside this file,
``templates/``), the grading packages' ``requirements.txt``, ``gradescope.json`` (:class:`Config`) and the course
package (``course/``). What each does and the settings Gradescope needs per chapter: README, "Gradescope".
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import pathlib
import re
import shlex
import subprocess
import sys
import zipfile
from typing import Any

from .. import __version__, notebooks, wording

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # Gradescope's, docs/specs.md
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
COURSE_HOME = "/opt/attention-course"  # where setup.sh puts the virtualenv and the course (AUTOGRADER_COURSE_HOME)
CONFIG_NAME = "gradescope.json"
_ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # every zip entry's date: the same checkout gives the same zip, byte for byte
TEMPLATES = pathlib.Path(__file__).resolve().parent / "templates"
SCRIPTS = ("setup.sh", "run_autograder")  # Gradescope runs them: setup.sh once per image, run_autograder per submission


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


# The oldest Python every chapter's autograder installs on (chapter 11's triton wheels need it), which ``setup.sh``
# uses where the image's ``python3`` is older (Gradescope's Ubuntu 22.04: 3.10).
MIN_PYTHON = "3.11"

# The ``grading`` extra's packages that grading does not import (the notebook builder's and the plain nbgrader
# course's): Gradescope's image leaves them out (nbgrader alone brought ~60 packages).
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
    """(file, its name in the zip under ``course/``): the course package at this version — ``autograder/`` but the
    sample submissions (one scores full marks), ``solutions/`` (the grader stages the chapter's reference), the
    notebooks' templates, the release notebooks of both editions and their test cells' history."""
    found = []
    for top, pattern in (
        ("autograder", "**/*"),
        ("solutions", "**/*.py"),
        ("notebooks", "ch[0-9][0-9]_*.ipynb"),
        ("notebooks", "zh/ch[0-9][0-9]_*.ipynb"),
        ("notebooks", "templates/**/*"),
        ("notebooks", "test_history/*.json"),
    ):
        for p in sorted((root / top).glob(pattern)):
            rel = p.relative_to(root)
            if not p.is_file() or "__pycache__" in rel.parts or p.suffix in (".pyc", ".tmp"):
                continue
            if rel.parts[:2] == ("autograder", "samples") or rel.parts[:2] == ("autograder", "_release"):
                continue
            found.append((p, "course/" + rel.as_posix()))
    return found


def build_zip(chapter: str, out: pathlib.Path, *, root: pathlib.Path = notebooks.ROOT, **settings: Any) -> pathlib.Path:
    """Write ``out/CHAPTER_gradescope.zip`` and return its path; ``settings``: :class:`Config`'s limits and
    ``hidden_visibility``. Raises ValueError for an unknown chapter or visibility."""
    if chapter not in notebooks.chapters():
        raise ValueError(f"unknown chapter {chapter!r}; the chapters are: {', '.join(notebooks.chapters())}")
    config = Config(chapter, commit=_commit(root), **settings)
    if config.hidden_visibility not in VISIBILITIES:
        raise ValueError(f"--hidden-visibility must be one of {', '.join(VISIBILITIES)}")
    torch, requirements = grading_requirements(root, chapter)
    fields = {
        "CHAPTER": chapter,
        "MADE_FROM": f"course version {config.version}" + (f", commit {config.commit}" if config.commit else ""),
        "COURSE_HOME": COURSE_HOME,
        "TORCH": torch,
        "TORCH_INDEX": TORCH_INDEX,
        "MIN_PYTHON": MIN_PYTHON,
        "FAILED_RESULTS": failed_results(),
    }
    note = f"# The packages grading needs besides torch ({torch}, which setup.sh installs from the PyTorch CPU index)\n"
    files: dict[str, tuple[str | bytes, int]] = {name: (_script(name, fields), 0o755) for name in SCRIPTS}
    files["requirements.txt"] = (note + "\n".join(requirements) + "\n", 0o644)
    files[CONFIG_NAME] = (json.dumps(dataclasses.asdict(config), indent=1) + "\n", 0o644)
    files |= {name: (path.read_bytes(), 0o644) for path, name in course_files(root)}
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{chapter}_gradescope.zip"
    tmp = target.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name, _ZIP_TIME)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    tmp.replace(target)
    return target


def failed_results() -> str:
    """The results.json ``run_autograder`` writes itself when Python cannot run the grader, as a shell word: a zero
    and the catalogues' "autograder did not run" in English and in Chinese (no notebook was read, so no edition is
    known; a translator edits only the catalogues), the script's ``$status`` where the message has its exit status."""
    mark = "@STATUS@"
    said = wording.both(wording.say("autograder did not run", status=mark)).render()
    payload = {
        "score": 0.0,
        "output": said,
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }
    return '"$status"'.join(shlex.quote(part) for part in json.dumps(payload, ensure_ascii=True).split(mark))


def _script(name: str, fields: dict[str, str]) -> str:
    """The shell script ``name`` of the zip: its template (``templates/<name>``) with ``{{FIELD}}`` filled in."""
    text = (TEMPLATES / name).read_text(encoding="utf-8")
    for field, value in fields.items():
        text = text.replace("{{" + field + "}}", value)
    return text


# ------------------------------------------------------------------------------------------------ commands


def add_build_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m autograder gradescope`` (cli.py); their defaults are :class:`Config`'s."""
    p.add_argument("chapter", help="chapter stem, e.g. ch03_self_attention")
    p.add_argument("--out", default="grading_out", help="folder for CHAPTER_gradescope.zip (default: grading_out)")
    p.add_argument(
        "--hidden-visibility",
        choices=VISIBILITIES,
        default=Config.hidden_visibility,
        help="when students see what each exercise's hidden checks found (a test of its own; default: "
        "after_published, i.e. once the grades are published). The points are visible at once either way",
    )
    p.add_argument("--cell-timeout", type=int, default=Config.cell_timeout, help="seconds per cell (default: 120)")
    p.add_argument(
        "--timeout",
        type=int,
        default=Config.timeout,
        help="seconds for the whole notebook (default: 480, within Gradescope's default 10 minutes; raise it "
        "with Gradescope's own limit, up to 40 minutes)",
    )
    p.add_argument("--memory-mb", type=int, default=Config.memory_mb, help="the kernel's address-space limit (6144)")


def build_command(args) -> int:
    """``python -m autograder gradescope CHAPTER``: write the zip and say what to do with it."""
    settings = {name: getattr(args, name) for name in ("hidden_visibility", "cell_timeout", "timeout", "memory_mb")}
    try:
        path = build_zip(args.chapter, pathlib.Path(args.out), **settings)
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
