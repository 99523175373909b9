"""The platform manifest (``tests/platforms.toml``) as the tests read it: what Colab's CPU and GPU runtimes,
Gradescope's image and nbgrader run, taken from their own published files by ``python -m scripts.refresh_platforms``.
"""

from __future__ import annotations

import glob
import pathlib
import shutil
import subprocess
import sys

from packaging.version import Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = pathlib.Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tests" / "platforms.toml"
COLAB_RUNTIMES = ("colab-cpu", "colab-gpu")


def load() -> dict:
    return tomllib.loads(MANIFEST.read_text())


def torch_versions(manifest: dict | None = None) -> dict[str, Version]:
    """``{platform: torch version}`` for the platforms that ship a torch (Colab's runtimes)."""
    manifest = load() if manifest is None else manifest
    return {
        name: Version(fields["packages"]["torch"])
        for name, fields in manifest.items()
        if "torch" in fields.get("packages", {})
    }


def oldest_torch(manifest: dict | None = None) -> str:
    """The oldest torch a platform runs, as ``major.minor`` (the course's floor): ``"2.11"``."""
    oldest = min(torch_versions(manifest).values())
    return f"{oldest.major}.{oldest.minor}"


def minor(version: str) -> str:
    """``"3.13.15"`` -> ``"3.13"``."""
    return ".".join(version.split(".")[:2])


def python(version: str) -> str | None:
    """An interpreter of Python ``version`` (major.minor, "3.13") with pip and venv on this machine: pyenv's, one
    on PATH, or this one; None where there is none."""
    found = sorted(glob.glob(str(pathlib.Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")))
    for candidate in filter(None, [*found, shutil.which(f"python{version}") or "", sys.executable]):
        ran = subprocess.run(
            [candidate, "-c", "import sys, pip, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        )
        if ran.returncode == 0 and ran.stdout.strip() == version:
            return candidate
    return None
