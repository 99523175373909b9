"""How the worker runs the grading notebook (autograder/grading/runner.py, issue 47): nbclient, no nbgrader. The
grading notebook comes from the committed release notebook and must be the one the grader ran before (the
instructor notebook with the recorder's lines, through nbgrader's gradebook); the runner must run the very notebook
nbgrader's autograde ran, and say why a run could not finish from nbclient's typed errors. The shipped samples and
the variants grade through it: tests/test_robust_grading.py, tests/test_grading.py."""

import pathlib

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import runner
from scripts.build_notebooks import notebooks as builder

CHAPTER = "ch03_self_attention"


def _instructor_grading(chapter: str) -> nbformat.NotebookNode:
    """The grading notebook as the batch built it before issue 47, from the notebook builder's instructor notebook:
    the setup cell arming the recorder, each test cell whose hidden region ends it the verdict alone."""
    nb = builder.build_instructor(chapter)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "setup":
            cell.source += (
                "\nimport autograder.grading.guard as _autograder_guard  # grading only: see autograder/grading/guard.py\n"
                f'_autograder_guard.arm("{chapter}")'
            )
        elif meta.get("grade") and "### END HIDDEN TESTS" in cell.source:
            name = meta["grade_id"].removeprefix("test_")
            cell.source = f'### BEGIN HIDDEN TESTS\n_autograder_guard.verdict("{name}")\n### END HIDDEN TESTS'
    return nb


def _grader_cells(nb: nbformat.NotebookNode) -> list[tuple]:
    return [
        (c.cell_type, m["grade_id"], c.source, m.get("points"))
        for c in nb.cells
        for m in [c.metadata.get("nbgrader", {})]
        if m.get("grade_id") is not None and runner._locked(m)
    ]


@pytest.mark.parametrize("chapter", notebooks.chapters())
def test_the_grading_notebook_from_the_release_is_the_instructors(chapter):
    """The grading notebook is built from the committed release (no notebook builder, no nbgrader on the grading
    path): its setup and test cells, their points and the kernelspec are those of the instructor notebook's; its
    answer cells are the release's (no reference solution)."""
    grading = runner.grading_notebook(releases.release_notebook(chapter), chapter)
    before = _instructor_grading(chapter)
    assert _grader_cells(grading) == _grader_cells(before)
    assert grading.metadata["kernelspec"] == before.metadata["kernelspec"]
    release = releases.release_notebook(chapter)
    answers = [c.source for c in grading.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers and answers == [c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert all(notebooks.BEGIN not in c.source for c in grading.cells), "no reference solution in it"
    assert all(not c.get("outputs") for c in grading.cells if c.cell_type == "code")


def _canonical(name: str) -> nbformat.NotebookNode:
    path = next((notebooks.SAMPLES / CHAPTER).glob(f"{name}*.ipynb"))
    nb, _ = canonical.canonicalise(path.read_bytes(), releases.release_notebook(CHAPTER))
    return nb


def test_the_nbclient_runner_runs_the_notebook_nbgrader_ran(tmp_path):
    """What nbgrader's autograde made of a canonical submission before it ran it (ClearOutput,
    OverwriteKernelspec, OverwriteCells with the gradebook of the instructor's grading notebook) is what
    ``runner.graded_notebook`` makes of it with the grading notebook from the release alone: every cell's type and source, its
    nbgrader metadata (but nbgrader's checksums, which nothing reads) and the kernelspec. A test or setup cell
    the student edited gets the grader's; a grade id that is not the grader's is dropped."""
    from nbgrader.preprocessors import ClearOutput, OverwriteCells, OverwriteKernelspec

    course = tmp_path / "course"
    (course / "source" / CHAPTER).mkdir(parents=True)
    nbformat.write(_instructor_grading(CHAPTER), course / "source" / CHAPTER / f"{CHAPTER}.ipynb")
    builder.generate_assignment(course, CHAPTER)  # the reference: nbgrader as the grader used it before
    resources = {"nbgrader": {"notebook": CHAPTER, "assignment": CHAPTER, "db_url": f"sqlite:///{course}/gradebook.db"}}
    grading = runner.grading_notebook(releases.release_notebook(CHAPTER), CHAPTER)

    for name in ("lovelace", "hopper", "turing"):
        nb = _canonical(name)
        test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
        test.source = "pass  # edited"
        stray = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "not_ours", "grade": False}})
        nb.cells.append(stray)
        theirs = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))
        for pp in (ClearOutput(), OverwriteKernelspec(), OverwriteCells()):
            theirs, _ = pp.preprocess(theirs, resources)
        ours = runner.graded_notebook(nb, grading)

        assert ours.metadata["kernelspec"] == theirs.metadata["kernelspec"]
        assert len(ours.cells) == len(theirs.cells)
        for a, b in zip(ours.cells, theirs.cells):
            assert (a.cell_type, a.source, a.get("outputs")) == (b.cell_type, b.source, b.get("outputs")), a.id
            meta = {k: v for k, v in b.metadata.get("nbgrader", {}).items() if k != "checksum"}
            assert {k: v for k, v in a.metadata.get("nbgrader", {}).items() if k != "checksum"} == meta, a.id
        assert "_autograder_guard.verdict" in next(c for c in ours.cells if c.id == test.id).source
        assert "grade_id" not in ours.cells[-1].metadata["nbgrader"]


def test_output_is_limited_as_nbgrader_limited_it():
    cell = nbformat.v4.new_code_cell("print(...)")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="\n".join(map(str, range(600)))),
        nbformat.v4.new_output("stream", name="stdout", text="\n".join(map(str, range(600)))),
        nbformat.v4.new_output("stream", name="stderr", text="more"),
        nbformat.v4.new_output("error", ename="E", evalue="v", traceback=[f"frame {i}" for i in range(300)]),
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    runner.limit_output(nb)
    streams = [o for o in cell.outputs if o.output_type == "stream"]
    assert sum(len(o.text.split("\n")) for o in streams) == runner.MAX_LINES
    assert streams[-1].text.endswith(runner.TRUNCATED) and len(streams) == 2
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert len(error.traceback) == runner.MAX_TRACEBACK and error.traceback[0] == "frame 0"
    assert error.traceback[-1] == "frame 299"


def test_failures_come_from_nbclients_typed_errors():
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nb = nbformat.v4.new_notebook()
    died = "the kernel died while running a cell"
    assert runner.failure(runner.Run(nb, DeadKernelError("Kernel died")), 30, died) == died
    timeout = CellTimeoutError("Timeout waiting for IOPub output")
    assert str(runner.failure(runner.Run(nb, timeout), 30, died)) == "a cell ran longer than 30 s"
    # an error whose text merely mentions a dead kernel is not one
    other = runner.failure(runner.Run(nb, RuntimeError("kernel died? timed out?")), 30, died)
    assert str(other).startswith("autograde failed: RuntimeError") and other.key == "run failed"


@pytest.mark.slow
def test_a_run_interrupts_endless_cells_goes_on_after_errors_caps_output_and_names_a_dead_kernel(tmp_path, monkeypatch):
    """nbclient in this environment's own python3 kernel (no jail, no recorder): a cell past its limit is
    interrupted and the next one runs; an error does not stop the run; a cell that prints without end keeps
    at most ``OUTPUT_CHARS``; a kernel that exits ends the run with nbclient's DeadKernelError."""
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "none"))  # the environment's own python3 kernelspec
    monkeypatch.chdir(tmp_path)
    cells = [
        "import time\nwhile True:\n    time.sleep(0.05)",
        "raise ValueError('an answer that raises')",
        "for _ in range(400):\n    print('x' * 10_000)",
        "print('still running')",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = dict(releases.KERNELSPEC)
    run = runner.run_notebook(nb, cwd=tmp_path, cell_timeout=3)
    assert run.finished, run.log()
    endless, raises, prints, last = run.notebook.cells
    assert [o.ename for o in endless.outputs if o.output_type == "error"] == ["KeyboardInterrupt", "CellTimeoutError"]
    assert [o.ename for o in raises.outputs if o.output_type == "error"] == ["ValueError"]
    assert sum(len(o.get("text", "")) for o in prints.outputs) < runner.OUTPUT_CHARS + 20_000
    assert runner.TRUNCATED in prints.outputs[-1].text
    assert last.outputs[0].text == "still running\n"

    nb.cells = [nbformat.v4.new_code_cell(c) for c in ("x = 1", "import os\nos._exit(3)", "print('never')")]
    run = runner.run_notebook(nb, cwd=tmp_path, cell_timeout=30)
    assert not run.finished and runner.failure(run, 30, "died") == "died", run.log()
    assert not run.notebook.cells[2].outputs


_NO_NBGRADER = """
import pathlib, sys, tempfile
sys.modules.setdefault("rfc3987_syntax", None)
from autograder.grading import batch, execute, executors, runner, submission, worker
from autograder.gradescope import results_json, run
from autograder import notebooks, releases
assert "nbgrader" not in sys.modules, "imported"

chapter = "ch03_self_attention"
top = {ex.name: float(ex.points) for ex in releases.checks_module(chapter).EXERCISES}

def run_job(job, prefix, cwd, timeout, spawner=None):  # the worker's side: tests/test_grading.py
    graded = runner.graded_notebook(
        __import__("nbformat").read(job.canonical, as_version=4), __import__("nbformat").read(job.grading, as_version=4)
    )
    return submission.Result("", "", job.student_id, "graded", "", top, []), __import__("nbformat").writes(graded)

execute.run_job = run_job
files = sorted((notebooks.SAMPLES / chapter).glob("*.ipynb"))
batch.grade(files, chapter, pathlib.Path(tempfile.mkdtemp()) / "out", jobs=2)
assert "nbgrader" not in sys.modules, "imported while grading"
print("no nbgrader")
"""


def test_nbgrader_is_not_on_the_grading_path(tmp_path):
    """Issue 47: the grading machinery (``autograder/grading`` but the nbgrader adapter, ``autograder/gradescope``)
    imports no nbgrader, at import or while a batch grades (the worker's side faked here: the real worker runs
    ``runner.py``, covered by tests/test_robust_grading.py)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, AUTOGRADER_FORK_WORKERS="off", PYTHONPATH=str(notebooks.ROOT))
    out = subprocess.run([sys.executable, "-c", _NO_NBGRADER], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0 and "no nbgrader" in out.stdout, out.stderr[-3000:]


def test_the_execute_step_leaves_the_builder_and_nbgrader_out(monkeypatch):
    """Followed at every depth (``scripts/grading_path.py``), the execute step enters the execute module from the
    batch and the runner once (the grading notebook, from the release); never the notebook builder, the chapter's
    checks, nbgrader's adapter or the releases (the batch read the release once, in its chapter step)."""
    import tempfile

    from autograder.grading import batch, execute, submission
    from scripts import grading_path

    top = {ex.name: float(ex.points) for ex in releases.checks_module(CHAPTER).EXERCISES}

    def run_job(job, prefix, cwd, timeout, spawner=None):
        return submission.Result("", "", job.student_id, "graded", "", top, []), None

    monkeypatch.setattr(execute, "run_job", run_job)
    monkeypatch.setenv("AUTOGRADER_FORK_WORKERS", "off")
    files = sorted((notebooks.SAMPLES / CHAPTER).glob("*.ipynb"))
    out = tempfile.mkdtemp()
    steps = grading_path.watch(lambda: batch.grade(files, CHAPTER, pathlib.Path(out), jobs=2))
    line = steps["execute"]
    assert line.path[:2] == ["batch", "execute"] and line.entered["runner"] == 1, (line.entered, line.path)
    assert not {"notebooks", "releases", "checks.exercises", "requirements", "nbgrader_adapter"} & set(line.entered)
    assert line.path.count("batch") == 3, line.path  # into execute.workers, back, into execute.run, back, out
    assert steps["judge"].entered == {}, steps["judge"].entered
