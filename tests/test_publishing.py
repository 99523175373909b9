"""Publishing: licences, version, citation, repository address, workflows (issue 19).

The release artefacts themselves (sdist, wheel, twine, workflow schema and audit) are checked by
`make release-check`; the wheel is installed through a setup cell in tests/test_colab_surface.py.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

import autograder
from scripts import repository

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent

WORKFLOWS = ROOT / ".github" / "workflows"
# A GitHub repository named anywhere: a github.com address or a Colab "open from GitHub" link.
ADDRESS = re.compile(
    r"(?:https?://)?(?:github\.com|colab\.research\.google\.com/github)/([\w.-]+)/([\w.-]+?)(?:\.git)?[/)\"'\s>@]"
)


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in names:
        path = ROOT / name
        if path.suffix in {".py", ".md", ".yml", ".yaml", ".toml", ".cff", ".ipynb", ".txt", ".cfg"} and path.is_file():
            yield path


def test_licence_files_and_where_they_are_named():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    content = (ROOT / "LICENSE-CONTENT").read_text()
    assert "Creative Commons Attribution 4.0 International Public License" in content
    assert "Section 8 – Interpretation." in content, "LICENSE-CONTENT must hold the whole legal code"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT AND CC-BY-4.0"
    assert set(project["license-files"]) == {"LICENSE", "LICENSE-CONTENT"}
    readme = (ROOT / "README.md").read_text()
    assert "[LICENSE](LICENSE)" in readme and "[CC BY 4.0](LICENSE-CONTENT)" in readme
    footer = yaml.safe_load((ROOT / "_config.yml").read_text())["html"]["extra_footer"]
    assert "CC BY 4.0" in footer and "MIT" in footer


def test_version_is_written_once_and_the_citation_repeats_it():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "autograder.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", autograder.__version__)
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["version"] == autograder.__version__
    assert citation["repository-code"] == autograder.REPOSITORY
    assert sorted(citation["license"]) == ["CC-BY-4.0", "MIT"]


def test_every_tracked_file_names_only_the_course_repository():
    own = tuple(autograder.REPOSITORY.removeprefix("https://github.com/").split("/"))
    found = []
    examples = {"tests/test_publishing.py", "scripts/repository.py"}  # they show made-up addresses
    # Other projects' repositories, named on purpose (a tool, a vendored file's origin, a paper's only copy): an
    # address outside this list is either the course's own (rewritten on a fork) or a mistake.
    third_party = {
        ("containers", "bubblewrap"),
        ("karpathy", "nanoGPT"),
        ("openai", "gpt-2"),
        ("huggingface", "transformers"),
        ("deepseek-ai", "DeepSeek-V3.2-Exp"),
        ("googlecolab", "backend-info"),  # Colab's published runtime: tests/platforms.toml's source
    }
    for path in _tracked_text_files():
        if path.relative_to(ROOT).as_posix() in examples:
            continue
        for match in ADDRESS.finditer(path.read_text(encoding="utf-8", errors="replace")):
            if match.groups() not in {own, *third_party} and match.group(1) not in {
                "assets",
                "YOU",
            }:  # colab .../assets/colab-badge.svg
                found.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert not found, "addresses that `python -m scripts.repository` would not rewrite:\n" + "\n".join(found)


def test_repository_command_rewrites_every_copy(tmp_path):
    for rel in repository.FILES:
        if (ROOT / rel).exists():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, tmp_path / rel)
    old = autograder.REPOSITORY.removeprefix("https://github.com/")
    changed = repository.rewrite(tmp_path, "https://github.com/someone/fork-of-course/", "teaching")
    assert {p.relative_to(tmp_path).as_posix() for p in changed} >= {
        "autograder/__init__.py",
        "_config.yml",
        "CITATION.cff",
        "pyproject.toml",
        "README.md",
    }
    for path in changed:
        text = path.read_text()
        assert old not in text, f"{path.name} still names {old}"
    init = (tmp_path / "autograder" / "__init__.py").read_text()
    assert 'REPOSITORY = "https://github.com/someone/fork-of-course"' in init and 'BRANCH = "teaching"' in init
    config = yaml.safe_load((tmp_path / "_config.yml").read_text())["repository"]
    assert config == {**config, "url": "https://github.com/someone/fork-of-course", "branch": "teaching"}
    assert (
        "colab.research.google.com/github/someone/fork-of-course/blob/teaching/" in (tmp_path / "README.md").read_text()
    )
    assert yaml.safe_load((tmp_path / "CITATION.cff").read_text())["url"] == "https://github.com/someone/fork-of-course"


@pytest.mark.parametrize(
    "bad", ["github.com/a/b", "https://gitlab.com/a/b", "https://github.com/a/b.git", "https://github.com/a/b/tree/x"]
)
def test_repository_command_rejects_what_is_not_a_github_repository(bad):
    with pytest.raises(ValueError, match="expected https://github.com/OWNER/NAME"):
        repository.parse(bad)


def _workflow(name):
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_ci_workflow_runs_the_projects_ci_script():
    steps = [step for job in _workflow("ci.yml")["jobs"].values() for step in job["steps"]]
    assert any(step.get("run", "").strip() == "bash .ci/run" for step in steps)


def test_book_workflow_builds_with_make_and_deploys_to_pages():
    jobs = _workflow("book.yml")["jobs"]
    assert any(step.get("run") == "make book" for step in jobs["build"]["steps"])
    upload = [s for s in jobs["build"]["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert upload and upload[0]["with"]["path"] == "_build/html"
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}


def test_release_workflow_publishes_by_trusted_publishing_only():
    text = (WORKFLOWS / "release.yml").read_text()
    assert "secrets." not in text and "password" not in text, "trusted publishing stores no token"
    jobs = _workflow("release.yml")["jobs"]
    assert jobs["publish"]["permissions"] == {"id-token": "write"}
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for s in jobs["publish"]["steps"])
    runs = " ".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "python -m build" in runs and "twine check --strict" in runs and "__version__" in runs


def test_every_action_is_pinned_to_a_commit():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), f"{path.name}: {step['uses']}"


def test_ci_entry_point_parses_and_runs_the_readme_test_command():
    """`.ci/run` is what CI executes on a clean clone: it must be valid bash, and its last command must be the
    README's test command (a bad merge once cut the script in the middle of a comment, which only CI would see)."""
    script = ROOT / ".ci" / "run"
    subprocess.run(["bash", "-n", str(script)], check=True)
    commands = [
        line.strip() for line in script.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-1] == "make test", f".ci/run ends with {commands[-1]!r}, not the README's `make test`"
    assert "make test" in (ROOT / "README.md").read_text()


def test_every_package_of_the_course_is_in_the_wheel():
    """pyproject.toml lists the packages explicitly: every folder of ``autograder`` and ``solutions`` with an
    ``__init__.py`` must be there, or an install (Colab's, the grader's) misses it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("autograder", "solutions")
        for init in (ROOT / top).rglob("__init__.py")
        if "samples" not in init.parts and "templates" not in init.parts
    }
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
