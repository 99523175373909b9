"""The worker's two ways of running the grading notebook (autograder/grading/runner.py, issue 47): nbgrader's
autograde, or nbclient directly. The nbclient runner must run the very notebook nbgrader ran, and say why a run
could not finish from nbclient's typed errors. Both runners grade the shipped samples and the variants alike:
tests/test_robust_grading.py and tests/test_grading.py with ``AUTOGRADER_RUNNER=nbclient``."""

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import batch, runner

CHAPTER = "ch03_self_attention"


def test_the_switch_says_which_runner_and_refuses_others(monkeypatch):
    monkeypatch.delenv(runner.RUNNER_SWITCH, raising=False)
    assert runner.chosen() == runner.DEFAULT
    for value, expected in (("nbclient", runner.NBCLIENT), (" NBGrader ", runner.NBGRADER), ("", runner.DEFAULT)):
        monkeypatch.setenv(runner.RUNNER_SWITCH, value)
        assert runner.chosen() == expected
    monkeypatch.setenv(runner.RUNNER_SWITCH, "papermill")
    with pytest.raises(ValueError, match="AUTOGRADER_RUNNER"):
        runner.chosen()


def test_the_course_folder_says_how_its_jobs_run(tmp_path, monkeypatch):
    """The batch builds the grading course once (the grading notebook alone for nbclient: no gradebook, no
    nbgrader) and its jobs follow what was built, here or on a cluster."""
    monkeypatch.setenv(runner.RUNNER_SWITCH, runner.NBCLIENT)
    course = batch.grading_course(CHAPTER, tmp_path / "course")
    assert sorted(p.name for p in course.iterdir()) == [runner.GRADING_NOTEBOOK]
    assert runner.of_course(course) == runner.NBCLIENT and runner.of_course(tmp_path) == runner.NBGRADER
    grading = nbformat.read(course / runner.GRADING_NOTEBOOK, as_version=4)
    answers = [c for c in grading.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers and all(c.source == releases.CODE_STUB for c in answers), "no reference solution kept"


def _canonical(name: str) -> nbformat.NotebookNode:
    path = next((notebooks.SAMPLES / CHAPTER).glob(f"{name}*.ipynb"))
    nb, _ = canonical.canonicalise(path.read_bytes(), releases.release_notebook(CHAPTER))
    return nb


def test_the_nbclient_runner_runs_the_notebook_nbgrader_ran(tmp_path):
    """What nbgrader's autograde makes of a canonical submission before it runs it (ClearOutput,
    OverwriteKernelspec, OverwriteCells with the gradebook of the grading notebook) is what
    ``runner.graded_notebook`` makes of it with the grading notebook alone: every cell's type and source, its
    nbgrader metadata (but nbgrader's checksums, which nothing reads) and the kernelspec. A test or setup cell
    the student edited gets the grader's; a grade id that is not the grader's is dropped."""
    from nbgrader.preprocessors import ClearOutput, OverwriteCells, OverwriteKernelspec

    from autograder.grading import nbgrader_adapter

    grading = batch.grading_instructor(CHAPTER)
    course = tmp_path / "course"
    (course / "source" / CHAPTER).mkdir(parents=True)
    nbformat.write(grading, course / "source" / CHAPTER / f"{CHAPTER}.ipynb")
    nbgrader_adapter.generate_assignment(course, CHAPTER)
    resources = {"nbgrader": {"notebook": CHAPTER, "assignment": CHAPTER, "db_url": f"sqlite:///{course}/gradebook.db"}}

    for name in ("lovelace", "hopper", "turing"):
        nb = _canonical(name)
        test = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade"))
        test.source = "pass  # edited"
        stray = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade_id": "not_ours", "grade": False}})
        nb.cells.append(stray)
        theirs = nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))
        for pp in (ClearOutput(), OverwriteKernelspec(), OverwriteCells()):
            theirs, _ = pp.preprocess(theirs, resources)
        ours = runner.graded_notebook(nb, nbformat.read(runner.write_grading_course(grading, tmp_path / name) / runner.GRADING_NOTEBOOK, as_version=4))  # fmt: skip

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
    assert runner.failure(runner.Run(nb, timeout), 30, died) == "a cell ran longer than 30 s"
    # an error whose text merely mentions a dead kernel is not one
    other = runner.failure(runner.Run(nb, RuntimeError("kernel died? timed out?")), 30, died)
    assert other.startswith("autograde failed: RuntimeError")


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
