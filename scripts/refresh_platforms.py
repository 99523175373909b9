"""Refresh ``tests/platforms.toml``: what each platform the course runs on runs, read from its own published files.

* **Colab** (CPU and GPU runtimes): Google's ``backend-info`` repository, ``pip-freeze.txt`` and
  ``os-info.txt`` (CPU), ``pip-freeze.gpu.txt`` and ``os-info-gpu.txt`` (GPU), with the commit and its date. Only
  the packages the course touches are kept: the course package's dependencies (``pyproject.toml``), Triton, the
  kernel (ipykernel, ipython, jupyter-client) and pip.
* **Gradescope**: its base image is Ubuntu 22.04 (chosen in the assignment's settings, not published as a file);
  the versions of ``python3`` (3.10) and of ``python3.11`` (universe), from Ubuntu's own package indexes for
  jammy — the newest of ``jammy-updates``, ``jammy-security`` and ``jammy``, as apt installs it.
* **nbgrader**: the newest release that ``requirements.txt`` admits, its ``Requires-Python`` and upload date, from
  PyPI's simple index (JSON, PEP 691).

Run from the repository root; it prints what moved and rewrites the file and the README's "Platforms" table
(``--check``: exit 1 if anything moved, write nothing)::

    python -m scripts.refresh_platforms --backend-info PATH        # a git checkout of googlecolab/backend-info
    python -m scripts.refresh_platforms                            # the same from GitHub (network)
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tests" / "platforms.toml"
README = ROOT / "README.md"
README_TABLE = "| platform | OS | Python | torch | Triton | read from |\n|---|---|---|---|---|---|\n"
COLAB_RUNTIMES = ("colab-cpu", "colab-gpu")

BACKEND_INFO = "googlecolab/backend-info"
BACKEND_INFO_WEB = f"https://github.com/{BACKEND_INFO}"
UBUNTU_ARCHIVE = "http://archive.ubuntu.com/ubuntu"
UBUNTU_SUITES = ("jammy-updates", "jammy-security", "jammy")  # apt takes the newest: -updates first where it has it
UBUNTU_PACKAGES = {"python3": "main", "python3.10": "main", "python3.11": "universe", "python3.11-venv": "universe"}
PYPI_SIMPLE = "https://pypi.org/simple"
# Besides the course package's own dependencies: Triton (chapter 11), the kernel the notebooks run on, and pip (the
# setup cell installs with it).
ALSO_TOUCHED = ("triton", "ipykernel", "ipython", "jupyter-client", "pip")

HEADER = """\
# What each platform the course runs on runs, taken from the platform's own published files (source, commit and date
# with each). Written by `python -m scripts.refresh_platforms` (which prints what moved); do not edit by hand.
# Read by the tests (tests/platforms.py): the Colab-like notebooks' Python and packages, the course's torch floor
# (pyproject.toml), the README's "Platforms" section.
"""


def canonical(name: str) -> str:
    """PEP 503's normalised name: ``jupyter_client`` -> ``jupyter-client``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def touched_packages(root: Path = ROOT) -> list[str]:
    """The packages the course touches on a platform: its dependencies (``pyproject.toml``) and :data:`ALSO_TOUCHED`."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    names = [canonical(re.split(r"[<>=!~ ;\[]", dep, maxsplit=1)[0]) for dep in project["dependencies"]]
    return sorted(set(names) | set(ALSO_TOUCHED))


def freeze_versions(text: str, names: list[str]) -> dict[str, str]:
    """``{name: version}`` from ``pip freeze`` output, for ``names`` only. A direct reference (``torch @ URL``) gives
    the version in its wheel's file name, local label included (``2.11.0+cpu``)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if " @ " in line:
            name, url = (part.strip() for part in line.split(" @ ", 1))
            wheel = urllib.parse.unquote(url.rsplit("/", 1)[-1])
            version = wheel.split("-")[1] if wheel.endswith(".whl") else ""
        elif "==" in line:
            name, version = line.split("==", 1)
        else:
            continue
        if canonical(name) in names and version:
            found[canonical(name)] = version
    return dict(sorted(found.items()))


def os_info(text: str) -> tuple[str, str]:
    """(the OS line, the Python version) of an ``os-info*.txt``."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    system = next(line for line in lines if line.startswith("Ubuntu"))
    python = next(line.split()[1] for line in lines if line.startswith("Python "))
    return system, python


def _get(url: str, accept: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()


class BackendInfo:
    """``googlecolab/backend-info`` at one commit: a local git checkout (``path``), else GitHub."""

    def __init__(self, path: str | None):
        self.path = path
        if path:
            git = ["git", "-C", path, "log", "-1", "--format=%H %cs"]
            self.commit, self.date = subprocess.run(git, capture_output=True, text=True, check=True).stdout.split()
        else:
            latest = json.loads(_get(f"https://api.github.com/repos/{BACKEND_INFO}/commits/HEAD"))
            self.commit, self.date = latest["sha"], latest["commit"]["committer"]["date"][:10]

    def read(self, name: str) -> str:
        if self.path:
            show = ["git", "-C", self.path, "show", f"{self.commit}:{name}"]
            return subprocess.run(show, capture_output=True, text=True, check=True).stdout
        return _get(f"https://raw.githubusercontent.com/{BACKEND_INFO}/{self.commit}/{name}").decode()

    def url(self, name: str) -> str:
        return f"{BACKEND_INFO_WEB}/blob/{self.commit}/{name}"


def colab(info: BackendInfo, runtime: str, names: list[str]) -> dict:
    suffix = "" if runtime == "cpu" else f".{runtime}"
    freeze, os_file = f"pip-freeze{suffix}.txt", f"os-info{'' if runtime == 'cpu' else '-' + runtime}.txt"
    system, python = os_info(info.read(os_file))
    return {
        "title": f"Colab, {runtime.upper()} runtime",
        "source": info.url(freeze),
        "os_source": info.url(os_file),
        "commit": info.commit,
        "date": info.date,
        "os": system,
        "python": python,
        "packages": freeze_versions(info.read(freeze), names),
    }


def _debian_packages(index: bytes, wanted: set[str]) -> dict[str, str]:
    versions: dict[str, str] = {}
    for stanza in gzip.decompress(index).decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if fields.get("Package") in wanted:
            versions[fields["Package"]] = fields["Version"]
    return versions


def gradescope() -> dict:
    """Ubuntu 22.04's ``python3`` and ``python3.11`` (the base image's distribution packages)."""
    found: dict[str, str] = {}
    date = ""
    for suite in UBUNTU_SUITES:
        for component in sorted(set(UBUNTU_PACKAGES.values())):
            wanted = {p for p, c in UBUNTU_PACKAGES.items() if c == component and p not in found}
            if wanted:
                index = _get(f"{UBUNTU_ARCHIVE}/dists/{suite}/{component}/binary-amd64/Packages.gz")
                found.update(_debian_packages(index, wanted))
        if not date:
            release = _get(f"{UBUNTU_ARCHIVE}/dists/{suite}/Release").decode()
            stamp = re.search(r"^Date: \w+, (\d+) (\w+) (\d+)", release, re.M)
            if stamp:
                months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
                day, month, year = stamp.groups()
                date = f"{year}-{months.index(month) + 1:02d}-{int(day):02d}"
    upstream = found["python3.10"].split("-", 1)[0]
    return {
        "title": "Gradescope, base image Ubuntu 22.04",
        "source": f"{UBUNTU_ARCHIVE}/dists/{UBUNTU_SUITES[0]}/",
        "date": date,
        "os": "Ubuntu 22.04",
        "python": upstream,
        "packages": dict(sorted(found.items())),
    }


def nbgrader(root: Path = ROOT) -> dict:
    """The newest nbgrader release that ``requirements.txt`` admits, with its Requires-Python."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    line = next(
        line.split("#", 1)[0].strip()
        for line in (root / "requirements.txt").read_text().splitlines()
        if canonical(re.split(r"[<>=!~ ;\[]", line, maxsplit=1)[0]) == "nbgrader"
    )
    spec = Requirement(line).specifier
    index = json.loads(_get(f"{PYPI_SIMPLE}/nbgrader/", "application/vnd.pypi.simple.v1+json"))
    wheels = [f for f in index["files"] if f["filename"].endswith(".whl") and not f.get("yanked")]
    releases = {Version(f["filename"].split("-")[1]): f for f in wheels}
    version = max(v for v in releases if v in spec and not v.is_prerelease)
    wheel = releases[version]
    return {
        "title": "nbgrader (plain nbgrader on JupyterHub)",
        "source": f"{PYPI_SIMPLE}/nbgrader/",
        "date": wheel["upload-time"][:10],
        "version": str(version),
        "requires_python": wheel["requires-python"],
    }


def collect(backend_info: str | None) -> dict:
    info = BackendInfo(backend_info)
    names = touched_packages()
    return {
        "colab-cpu": colab(info, "cpu", names),
        "colab-gpu": colab(info, "gpu", names),
        "gradescope": gradescope(),
        "nbgrader": nbgrader(),
    }


def _toml_value(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string for these values


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_value(key)


def to_toml(platforms: dict) -> str:
    out = [HEADER]
    for name, fields in platforms.items():
        out.append(f"[{name}]")
        out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in fields.items() if not isinstance(v, dict)]
        for key, table in fields.items():
            if isinstance(table, dict):
                out.append(f"\n[{name}.{key}]")
                out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items()]
        out.append("")
    return "\n".join(out)


def readme_rows(manifest: dict) -> list[str]:
    """The README's "Platforms" table rows, made from the manifest (the README must hold them as they are here)."""
    rows = []
    for name in COLAB_RUNTIMES:
        p = manifest[name]
        triton = p["packages"].get("triton", "none")
        rows.append(
            f"| {p['title']} | {p['os']} | {p['python']} | {p['packages']['torch']} | {triton} | "
            f"[backend-info]({p['source']}) `{p['commit'][:7]}`, {p['date']} |"
        )
    g = manifest["gradescope"]
    pkgs = g["packages"]
    rows.append(
        f"| {g['title']} | {g['os']} | python3 {g['python']}; python3.11 {pkgs['python3.11']} (universe) | "
        f"`setup.sh` installs `requirements.txt`'s | — | [Ubuntu's package index]({g['source']}), {g['date']} |"
    )
    n = manifest["nbgrader"]
    rows.append(
        f"| nbgrader {n['version']} | — | Requires-Python {n['requires_python']} | the course's | — | "
        f"[PyPI]({n['source']}), {n['date']} |"
    )
    return rows


def readme_with_rows(text: str, manifest: dict) -> str:
    """``text`` (the README) with its "Platforms" table's rows made anew from ``manifest``."""
    start = text.index(README_TABLE) + len(README_TABLE)
    end = text.find("\n\n", start)
    return text[:start] + "\n".join(readme_rows(manifest)) + text[end if end != -1 else len(text) :]


def _flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def changes(old: dict, new: dict) -> list[str]:
    """One line per value that moved, appeared or went: ``colab-gpu.packages.torch: 2.10.0 -> 2.11.0``."""
    before, after = _flatten(old), _flatten(new)
    return [
        f"{key}: {before.get(key, '(none)')} -> {after.get(key, '(none)')}"
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend-info", help="a git checkout of googlecolab/backend-info (default: GitHub)")
    parser.add_argument("--check", action="store_true", help="exit 1 if anything moved; write nothing")
    args = parser.parse_args(argv)
    old = tomllib.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    new = collect(args.backend_info)
    moved = changes(old, new)
    print("\n".join(moved) if moved else f"{MANIFEST.relative_to(ROOT)}: nothing moved")
    readme = README.read_text()
    if args.check:
        return 1 if moved or readme != readme_with_rows(readme, new) else 0
    if moved:
        MANIFEST.write_text(to_toml(new))
        print(f"wrote {MANIFEST.relative_to(ROOT)}")
    if readme != readme_with_rows(readme, new):
        README.write_text(readme_with_rows(readme, new))
        print(f"wrote {README.relative_to(ROOT)} (the Platforms table)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
