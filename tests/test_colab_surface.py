"""Students in Colab: every release notebook, run as a student runs it, in a Python that looks like Colab's.

What Colab runs is read from ``tests/platforms.toml`` (Colab's own published ``pip freeze`` and OS info, refreshed by
``python -m scripts.refresh_platforms``): a fresh virtualenv on this machine's interpreter of Colab's Python
(major.minor; the tests skip, naming it, where there is none) holds only what Colab preinstalls that the course
touches — torch, numpy, matplotlib, tqdm, tokenizers, nbformat, the kernel (ipykernel, ipython, jupyter-client) and
pip — at Colab's versions, and no nbgrader, no jupytext, no course package, no PYTHONPATH into this checkout. One
virtualenv (built once per session) stands for both runtimes:

* **the CPU runtime**: Colab's ``torch==X+cpu`` comes without Triton and without a requirement on it. PyPI's torch
  (the CUDA build, which runs on a CPU) requires and brings Triton, so here Triton is uninstalled and the
  requirement struck from torch's metadata (pip would otherwise install it again with the course);
* **the GPU runtime's package set**: the same torch with the runtime's Triton back (run by Triton's interpreter on
  this CPU). Only what differs there runs in it: the chapters that use Triton (chapter 11).

A snapshot of the checkout (tracked and untracked, not ignored files) is committed to a local git repository, and
its ``git+file://`` URL reaches the notebooks' setup cell as ``ATTENTION_COURSE_SOURCE``, so the course is installed
exactly as the setup cell installs it in Colab. Then:

* the setup cell, on a runtime without the course, installs it from the git URL; again, with a course wheel
  uploaded next to the notebook, from the wheel; the student install holds no nbgrader, jupytext, sample
  submissions or attack variants;
* every release notebook, untouched: each exercise's check says it has not been filled in yet;
* every release notebook with the reference answers filled in (as a student who solved it): no cell fails, every
  visible check passes, and the "Before you submit" cell reads the file (as Jupyter's ``JPY_SESSION_NAME`` points
  it to) and reports it gradeable;
* the private torch names the course uses without a fallback (``tests/test_private_torch_names.py``) import on
  Colab's torch.

The notebooks run on the kernel of that virtualenv; nbclient (the harness) runs here.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import nbformat
import pytest
from packaging.version import Version

from autograder import notebooks, releases, wording
from autograder.gradescope.build import needs_triton
from scripts.build_notebooks import notebooks as builder
from tests import platforms

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTERS = notebooks.chapters()
TRITON_CHAPTERS = [chapter for chapter in CHAPTERS if needs_triton(chapter)]
MANIFEST = platforms.load()
CPU, GPU = MANIFEST["colab-cpu"], MANIFEST["colab-gpu"]
KERNEL = "colab-like"

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("colab")]


def _run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _snapshot_repo(dest: pathlib.Path) -> str:
    """A git repository holding the checkout as it is now (uncommitted work included); returns its pip URL."""
    files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT).stdout
    for rel in filter(None, files.split("\0")):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-C", str(dest)]
    _run(git + ["init", "-q", "-b", "main"])
    _run(git + ["add", "-A"])
    _run(git + ["commit", "-q", "-m", "snapshot"])
    return f"git+file://{dest}@main"


class ColabLike:
    """The virtualenv, its kernel spec and the environment its kernels get."""

    def __init__(self, base: pathlib.Path):
        self.base = base
        self.venv = base / "venv"
        self.python = self.venv / "bin" / "python"
        self.repo_url = ""
        self.work = base / "content"  # Colab's working folder: where uploaded files land
        self.work.mkdir()
        version = platforms.minor(CPU["python"])
        interpreter = platforms.python(version)
        if interpreter is None:
            pytest.skip(
                f"no Python {version} on this machine (Colab runs {CPU['python']}; e.g. pyenv install {version})"
            )
        _run([interpreter, "-m", "venv", str(self.venv)])
        pins = GPU["packages"]  # the GPU runtime's set; the CPU runtime differs only by its torch (see runtime())
        assert Version(pins["torch"]).public == Version(CPU["packages"]["torch"]).public, (pins, CPU["packages"])
        assert {k: v for k, v in pins.items() if k not in ("torch", "triton")} == {
            k: v for k, v in CPU["packages"].items() if k != "torch"
        }, "Colab's runtimes differ in more than torch and Triton: give each its own virtualenv"
        requirements = [f"{name}=={Version(v).public}" for name, v in pins.items() if name != "pip"]
        _run([str(self.python), "-m", "pip", "install", "-q", f"pip=={pins['pip']}"], timeout=300, env=self.env())
        _run([str(self.python), "-m", "pip", "install", "-q", *requirements], timeout=1200, env=self.env())
        (self.torch_metadata,) = self.venv.glob("lib/python*/site-packages/torch-*.dist-info/METADATA")
        self.gpu_metadata = self.torch_metadata.read_text()
        spec = base / "jupyter" / "kernels" / KERNEL
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(
            json.dumps(
                {
                    "argv": [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Colab-like Python",
                    "language": "python",
                }
            )
        )
        self.jupyter_path = str(base / "jupyter")
        self.repo_url = _snapshot_repo(base / "repo")

    def version(self, package: str) -> str | None:
        """The installed version of ``package`` in the virtualenv, or None."""
        found = sorted(self.venv.glob(f"lib/python*/site-packages/{package}-*.dist-info"))
        return found[0].name.removesuffix(".dist-info").split("-", 1)[1] if found else None

    def runtime(self, name: str) -> None:
        """Make the virtualenv Colab's CPU runtime (``"colab-cpu"``: no Triton, and torch's metadata without the
        requirement, as the ``+cpu`` build has none) or its GPU runtime's package set (``"colab-gpu"``: its Triton).
        Cheap when it is so already; called before each test, since a chapter's notebook may install Triton."""
        if name == "colab-cpu":
            if self.version("triton") is not None:
                _run([str(self.python), "-m", "pip", "uninstall", "-q", "-y", "triton"], env=self.env())
            lines = self.gpu_metadata.splitlines(keepends=True)
            self.torch_metadata.write_text("".join(x for x in lines if not x.startswith("Requires-Dist: triton")))
        else:
            self.torch_metadata.write_text(self.gpu_metadata)
            if self.version("triton") != GPU["packages"]["triton"]:
                pin = f"triton=={GPU['packages']['triton']}"
                _run([str(self.python), "-m", "pip", "install", "-q", pin], timeout=600, env=self.env())

    def env(self, **extra) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JPY_SESSION_NAME")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        if self.repo_url:
            env["ATTENTION_COURSE_SOURCE"] = self.repo_url
        env.update(extra)
        return env

    def execute(self, nb: nbformat.NotebookNode, path: pathlib.Path | None = None) -> nbformat.NotebookNode:
        """Run ``nb`` top to bottom on the Colab-like kernel in the Colab working folder (errors recorded, not
        raised). With ``path``, the notebook is saved there first and the kernel is told it has that file open."""
        from nbclient import NotebookClient

        extra = {}
        if path is not None:
            nbformat.write(nb, path)
            extra["JPY_SESSION_NAME"] = str(path)
        os.environ["JUPYTER_PATH"] = self.jupyter_path  # where the harness finds the kernel spec
        for attempt in (1, 2):
            client = NotebookClient(
                nb, kernel_name=KERNEL, timeout=600, allow_errors=True, resources={"metadata": {"path": str(self.work)}}
            )
            try:
                return client.execute(env=self.env(**extra))
            except RuntimeError as err:  # jupyter_client's port race between kernels started side by side: a port
                # it picked was taken before the kernel bound it ("Address already in use"), and the kernel died before
                # its first reply; no cell ran, so the notebook is run again on a new kernel, once
                if attempt == 2 or "before replying to kernel_info" not in str(err):
                    raise
        raise AssertionError("unreachable")

    def setup_cell_only(self, chapter: str) -> nbformat.NotebookNode:
        nb = releases.release_notebook(chapter)
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
        return self.execute(nb)


def _outputs(cell) -> tuple[str, list[str]]:
    """(stdout text, error messages) of an executed cell."""
    text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")
    errors = [f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error"]
    return text, errors


def _installed_course(colab: ColabLike) -> pathlib.Path:
    out = _run(
        [str(colab.python), "-c", "import autograder, pathlib; print(pathlib.Path(autograder.__file__).parent)"],
        env=colab.env(),
        cwd=colab.work,
    ).stdout
    return pathlib.Path(out.strip())


@pytest.fixture(scope="session")  # built once per worker, whatever runs in between
def colab(tmp_path_factory):
    saved = os.environ.get("JUPYTER_PATH")
    env = ColabLike(tmp_path_factory.mktemp("colab"))
    yield env
    if saved is None:
        os.environ.pop("JUPYTER_PATH", None)
    else:
        os.environ["JUPYTER_PATH"] = saved


@pytest.fixture(scope="session")  # built once per worker, whatever runs in between
def installed(colab):
    """The course installed by the setup cell: first from the git URL, then (uninstalled) from an uploaded wheel."""
    chapter = CHAPTERS[0]
    colab.runtime("colab-cpu")  # as on Colab's CPU runtime: pip must not bring Triton back with the course
    setup = colab.setup_cell_only(chapter).cells[0]
    text, errors = _outputs(setup)
    assert not errors, errors
    assert f"Installing the course package from {colab.repo_url}" in text, text
    package = _installed_course(colab)
    assert "site-packages" in str(package), package  # installed, not read from this checkout
    assert colab.version("triton") is None, "installing the course brought Triton onto the CPU runtime"

    # The student install is the student's: no grading tools, no sample submissions, no attack variants.
    probe = (
        "import importlib.util as u; print([m for m in ('nbgrader', 'jupytext', 'autograder.variants') "
        "if u.find_spec(m)])"
    )
    assert _run([str(colab.python), "-c", probe], env=colab.env(), cwd=colab.work).stdout.strip() == "[]"
    assert not (package / "samples").exists()
    assert sorted(p.stem for p in (package / "_release").glob("*.ipynb")) == CHAPTERS
    assert sorted(p.stem for p in (package / "_release" / "test_history").glob("*.json")) == CHAPTERS

    # A wheel uploaded next to the notebook (no ATTENTION_COURSE_SOURCE) is what the setup cell installs.
    _run([str(colab.python), "-m", "pip", "uninstall", "-q", "-y", "attention-course"], env=colab.env())
    gone = subprocess.run([str(colab.python), "-c", "import autograder"], env=colab.env(), cwd=colab.work)
    assert gone.returncode != 0, "the course package is still importable after pip uninstall"
    # The wheel a release publishes (`make release-check`, .github/workflows/release.yml): `python -m build` makes
    # the sdist and builds the wheel from it, so files the sdist leaves out are missing here too.
    dist = colab.base / "dist"
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(colab.base / "repo")],
        timeout=600,
    )
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    with tarfile.open(sdists[0]) as sdist:
        names = sdist.getnames()
    assert not [n for n in names if "/samples/" in n], "the sdist carries the sample submissions"
    wheels = [pathlib.Path(shutil.copy(wheels[0], colab.work))]
    saved, colab.repo_url = colab.repo_url, ""
    try:
        setup = colab.setup_cell_only(chapter).cells[0]
    finally:
        colab.repo_url = saved
    text, errors = _outputs(setup)
    assert not errors and f"Installing the course package from {wheels[0].name}" in text, (text, errors)
    wheels[0].unlink()

    # Installed now: the setup cell installs nothing.
    text, errors = _outputs(colab.setup_cell_only(chapter).cells[0])
    assert not errors and "Installing" not in text, (text, errors)
    return package


@pytest.fixture
def cpu_runtime(installed, colab):
    """The virtualenv as Colab's CPU runtime, the course installed."""
    colab.runtime("colab-cpu")
    return colab


@pytest.fixture
def gpu_runtime(installed, colab):
    """The virtualenv with Colab's GPU runtime's packages (its Triton, run by Triton's interpreter here)."""
    colab.runtime("colab-gpu")
    return colab


def _untouched_notebook_says_each_exercise_is_not_filled_in(colab, chapter):
    release = releases.release_notebook(chapter)
    nb = colab.execute(release, colab.work / f"{chapter}.ipynb")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        text, errors = _outputs(cell)
        if meta.get("grade_id") == "setup":
            assert not errors, errors
        if meta.get("grade"):
            name = meta["grade_id"].removeprefix("test_")
            assert errors and "has not been filled in yet" in errors[0], f"{name}: {errors or text}"
    text, errors = _outputs(nb.cells[-1])
    assert "selfcheck_here" in nb.cells[-1].source and not errors, errors
    assert "gradeable" in text and "not attempted yet" in text, text


def _reference_answers_pass_every_visible_check(colab, chapter) -> nbformat.NotebookNode:
    filled = builder.fill_release(releases.release_notebook(chapter), chapter)
    nb = colab.execute(filled, colab.work / f"{chapter}.ipynb")
    exercises = notebooks.checks_module(chapter).EXERCISES
    for i, cell in enumerate(nb.cells):
        text, errors = _outputs(cell)
        assert not errors, f"cell {i} ({cell.get('id')}) failed:\n{cell.source[:300]}\n{errors}"
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            name = meta["grade_id"].removeprefix("test_")
            n = len(exercises[name].visible)
            passed = f"All {n} visible checks passed for {name}." if n > 1 else f"The visible check passed for {name}."
            assert passed in text, text
    text, _ = _outputs(nb.cells[-1])
    assert f"This notebook: gradeable as {chapter}." in text and "no problems found" in text, text
    return nb


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_untouched_notebook_says_each_exercise_is_not_filled_in(cpu_runtime, chapter):
    """On Colab's CPU runtime (chapter 11's notebook installs its Triton there itself)."""
    _untouched_notebook_says_each_exercise_is_not_filled_in(cpu_runtime, chapter)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_reference_answers_pass_every_visible_check(cpu_runtime, chapter):
    """On Colab's CPU runtime."""
    _reference_answers_pass_every_visible_check(cpu_runtime, chapter)


ZH_CHAPTERS = [c for c in CHAPTERS if (notebooks.RELEASE_DIR / "zh" / f"{c}.ipynb").exists()]


@pytest.mark.parametrize("chapter", ZH_CHAPTERS)
def test_chinese_notebook_with_the_reference_answers_passes_and_is_gradeable(cpu_runtime, chapter):
    """The Chinese edition's notebook (notebooks/zh/, as Colab opens it from the repository) runs like the English
    one: every visible check passes with the reference answers, and its own last cell says, in Chinese, that it is
    gradeable."""
    zh = nbformat.read(notebooks.RELEASE_DIR / "zh" / f"{chapter}.ipynb", as_version=4)
    nb = cpu_runtime.execute(builder.fill_release(zh, chapter), cpu_runtime.work / f"{chapter}.ipynb")
    for i, cell in enumerate(nb.cells):
        text, errors = _outputs(cell)
        assert not errors, f"cell {i} ({cell.get('id')}) failed:\n{cell.source[:300]}\n{errors}"
    text, _ = _outputs(nb.cells[-1])  # the self-check speaks the notebook's edition
    gradeable = wording.say("selfcheck: gradeable", file=wording.say("selfcheck: this notebook"), chapter=chapter)
    assert gradeable.render("zh") in text and wording.say("selfcheck: no problems").render("zh") in text, text


def test_private_torch_names_import_on_colabs_torch(cpu_runtime):
    """Each private torch name the course uses without a fallback is in Colab's torch, whose release the allow-list
    (tests/test_private_torch_names.py) must name."""
    import inspect

    from tests.test_private_torch_names import ALLOWED, resolve

    version = Version(CPU["packages"]["torch"]).public
    needed = sorted(name for name, entry in ALLOWED.items() if not entry.fallback)
    assert all(version in ALLOWED[name].present_in for name in needed), (version, needed)
    probe = f"import importlib\n{inspect.getsource(resolve)}\nfor name in {needed!r}:\n    resolve(name)\n"
    _run([str(cpu_runtime.python), "-c", probe], env=cpu_runtime.env(), cwd=cpu_runtime.work)


@pytest.mark.parametrize("chapter", TRITON_CHAPTERS)
def test_gpu_runtime_untouched_notebook_says_each_exercise_is_not_filled_in(gpu_runtime, chapter):
    """With the GPU runtime's Triton (what differs from the CPU runtime), run by its interpreter on this CPU."""
    _untouched_notebook_says_each_exercise_is_not_filled_in(gpu_runtime, chapter)


@pytest.mark.parametrize("chapter", TRITON_CHAPTERS)
def test_gpu_runtime_reference_answers_pass_every_visible_check(gpu_runtime, chapter):
    """With the GPU runtime's Triton, run by its interpreter on this CPU: the notebook uses it, installs none."""
    nb = _reference_answers_pass_every_visible_check(gpu_runtime, chapter)
    printed = "".join(_outputs(cell)[0] for cell in nb.cells)
    assert "Installing Triton" not in printed, printed[-2000:]
    assert gpu_runtime.version("triton") == GPU["packages"]["triton"]
