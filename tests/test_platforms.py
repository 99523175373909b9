"""The platform manifest (``tests/platforms.toml``) is well-formed, is what its script writes, and the course's stated
torch range and the README agree with it. Fast: nothing here reaches the network."""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from scripts import refresh_platforms
from tests import platforms

MANIFEST = platforms.load()
ROOT = platforms.ROOT


def test_the_manifest_names_each_platform_with_its_source_and_date():
    assert sorted(MANIFEST) == ["colab-cpu", "colab-gpu", "gradescope", "nbgrader"]
    for name, fields in MANIFEST.items():
        assert fields["title"] and fields["source"].startswith(("https://", "http://")), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", fields["date"]), (name, fields["date"])
    for name in platforms.COLAB_RUNTIMES:
        colab = MANIFEST[name]
        assert re.fullmatch(r"[0-9a-f]{40}", colab["commit"]), name
        assert colab["commit"] in colab["source"] and colab["commit"] in colab["os_source"], name
        assert re.fullmatch(r"\d+\.\d+\.\d+", colab["python"]), colab["python"]
        assert colab["os"].startswith("Ubuntu "), colab["os"]
        packages = colab["packages"]
        assert {"torch", "numpy", "matplotlib", "ipykernel", "nbformat", "tqdm", "pip"} <= set(packages), name
        assert set(packages) <= set(refresh_platforms.touched_packages()), name  # only what the course touches
        for version in packages.values():
            Version(version)  # each a PEP 440 version (raises if not)
    assert "triton" not in MANIFEST["colab-cpu"]["packages"]  # the CPU runtime's +cpu torch comes without Triton
    assert Version(MANIFEST["colab-cpu"]["packages"]["torch"]).local == "cpu"
    assert "triton" in MANIFEST["colab-gpu"]["packages"]
    gradescope = MANIFEST["gradescope"]
    assert platforms.minor(gradescope["python"]) == "3.10"  # Ubuntu 22.04's python3
    assert gradescope["packages"]["python3.11"].startswith("3.11")
    nbgrader = MANIFEST["nbgrader"]
    assert Requirement(f"nbgrader{_requirements_spec('nbgrader')}").specifier.contains(nbgrader["version"])
    assert re.fullmatch(r">=\d+\.\d+", nbgrader["requires_python"]), nbgrader["requires_python"]


def _requirements_spec(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if requirement and Requirement(requirement).name == name:
            return str(Requirement(requirement).specifier)
    raise AssertionError(f"requirements.txt does not name {name}")


def test_the_manifest_is_exactly_what_the_refresh_script_writes():
    """No hand edits: the file is the script's rendering of its own values."""
    assert refresh_platforms.to_toml(MANIFEST) == platforms.MANIFEST.read_text()


def test_the_course_asks_for_the_oldest_torch_its_platforms_run():
    """``pyproject.toml``'s torch floor is the oldest torch a platform runs, and the README states it."""
    dependencies = platforms.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch,) = [Requirement(d) for d in dependencies if Requirement(d).name == "torch"]
    floors = [s.version for s in torch.specifier if s.operator == ">="]
    assert floors == [platforms.oldest_torch()], (str(torch), platforms.torch_versions())
    assert [s.operator for s in torch.specifier] == [">="], f"{torch}: a floor only, so Colab keeps its own torch"
    readme = (ROOT / "README.md").read_text()
    assert f"`torch>={floors[0]}`" in readme and f"torch {floors[0]} and newer" in readme


def test_the_readme_platforms_table_is_the_manifests():
    readme = (ROOT / "README.md").read_text()
    assert refresh_platforms.README_TABLE in readme, "README.md has no Platforms table"
    expected = refresh_platforms.readme_with_rows(readme, MANIFEST)
    assert readme == expected, (
        "README.md's Platforms table differs from tests/platforms.toml; run "
        "`PYTHONPATH=. .venv/bin/python -m scripts.refresh_platforms --backend-info PATH`, or paste:\n"
        + "\n".join(refresh_platforms.readme_rows(MANIFEST))
    )


FREEZE = """\
# a comment
ipykernel==6.17.1
jupyter_client==7.4.9
torch @ https://download.pytorch.org/whl/cpu/torch-2.11.0%2Bcpu-cp313-cp313-manylinux_2_28_x86_64.whl
torchvision @ https://download.pytorch.org/whl/cpu/torchvision-0.26.0%2Bcpu-cp313-cp313-manylinux_2_28_x86_64.whl
-e git+https://example.invalid/x.git#egg=x
"""


def test_freeze_versions_reads_pins_and_wheel_urls_and_keeps_only_the_named():
    assert refresh_platforms.freeze_versions(FREEZE, ["torch", "jupyter-client", "triton"]) == {
        "jupyter-client": "7.4.9",
        "torch": "2.11.0+cpu",
    }


def test_os_info_reads_ubuntu_and_python():
    text = "# generated\nUbuntu 22.04.5 LTS\nPython 3.13.15\nR version 4.6.1\n"
    assert refresh_platforms.os_info(text) == ("Ubuntu 22.04.5 LTS", "3.13.15")


def test_changes_name_what_moved_appeared_and_went():
    old = {"colab-gpu": {"packages": {"torch": "2.10.0", "triton": "3.5.0"}}}
    new = {"colab-gpu": {"packages": {"torch": "2.11.0", "numpy": "2.1.3"}}}
    assert refresh_platforms.changes(old, new) == [
        "colab-gpu.packages.numpy: (none) -> 2.1.3",
        "colab-gpu.packages.torch: 2.10.0 -> 2.11.0",
        "colab-gpu.packages.triton: 3.5.0 -> (none)",
    ]
    assert refresh_platforms.changes(new, new) == []


@pytest.mark.parametrize("versions, floor", [({"a": "2.11.0+cpu", "b": "2.12.1"}, "2.11"), ({"a": "3.0.0"}, "3.0")])
def test_oldest_torch_is_the_oldest_platforms_major_minor(versions, floor):
    manifest = {name: {"packages": {"torch": v}} for name, v in versions.items()} | {"x": {"title": "no torch"}}
    assert platforms.oldest_torch(manifest) == floor
