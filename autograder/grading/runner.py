"""How the worker runs a submission's grading notebook: with nbclient, in the kernel the worker set up.

:func:`grading_notebook` (once per batch) and :func:`graded_notebook` (per submission) put the notebook in the
form nbgrader's autograde gave it, without nbgrader or a gradebook; :func:`run_notebook` runs it in one kernel: a
time limit per cell that interrupts, every cell run, outputs capped, the kernel stopped at once; :func:`failure`
says a run that could not finish from nbclient's typed errors. docs/grading-design.md, "worker".
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import os
import pathlib
import traceback
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from ..releases import KERNELSPEC
from ..wording import Said, say

GRADING_NOTEBOOK = "grading.ipynb"  # the batch's grading notebook, in its private folder

OUTPUT_CHARS = 1_000_000  # characters of output one cell may keep while it runs (the rest is dropped at once)
MAX_LINES = 1000  # lines of stream output per cell in the graded notebook (nbgrader's LimitOutput.max_lines)
MAX_TRACEBACK = 100  # lines of an error's traceback (nbgrader's LimitOutput.max_traceback)
TRUNCATED = "... Output truncated ..."  # nbgrader's marker (the graded notebooks read as nbgrader's did)
# nbgrader's error for a cell interrupted at its time limit (nbgrader.preprocessors.Execute.error_on_timeout)
TIMEOUT_ERROR = {
    "ename": "CellTimeoutError",
    "evalue": "",
    "traceback": ["\x1b[0;31mCellTimeoutError\x1b[0m: No reply from kernel before timeout"],
}
_NEVER_SKIPPED = "autograder-runs-every-cell"  # nbclient skips cells tagged "skip-execution": no tag skips one here


def grading_notebook(release: nbformat.NotebookNode, chapter: str) -> nbformat.NotebookNode:
    """The notebook the kernel runs, from ``chapter``'s committed ``release`` notebook (the one every submission is
    canonicalised against, cell for cell): the setup cell arms the recorder (``guard.arm``); each test cell is
    ``guard.verdict`` alone — it records the exercise's checks, visible and hidden, and sends the record to the
    worker, whose replay (``judge.py``) is the only verdict — in a hidden region so the feedback never shows it. The
    notebook's own check runs (``EXERCISES.run``) are left out: neither the score nor the feedback reads their
    output. Its answer cells are the release's stubs (the worker takes only the setup and test cells from it)."""
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if meta.get("grade_id") == "setup":
            cell.source += (
                "\nimport autograder.grading.guard as _autograder_guard  # grading only: see autograder/grading/guard.py\n"
                f'_autograder_guard.arm("{chapter}")'
            )
        elif meta.get("grade"):
            name = meta["grade_id"].removeprefix("test_")
            cell.source = f'### BEGIN HIDDEN TESTS\n_autograder_guard.verdict("{name}")\n### END HIDDEN TESTS'
    return nb


def _locked(meta: dict) -> bool:
    """Whether a cell's source is the grader's, never the student's (nbgrader's ``utils.is_locked``)."""
    return not meta.get("solution") and bool(meta.get("grade") or meta.get("locked"))


def graded_notebook(canonical: nbformat.NotebookNode, grading: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook the kernel runs: the canonical submission with every locked cell (the setup cell, the test
    cells) as the grading notebook has it, matched by nbgrader ``grade_id``; what nbgrader's autograde did before
    running it (``ClearOutput``, ``OverwriteKernelspec``, ``OverwriteCells``). The student's answer cells and the
    cells they added are kept as they are; a ``grade_id`` the grading notebook does not have is dropped (nbgrader:
    "does not exist in the database"), so that no cell of the student's counts as a grader's cell."""
    nb = copy.deepcopy(canonical)
    ours = {
        c.metadata["nbgrader"]["grade_id"]: c
        for c in grading.cells
        if c.metadata.get("nbgrader", {}).get("grade_id") is not None
    }
    nb.metadata["kernelspec"] = dict(grading.metadata.get("kernelspec") or KERNELSPEC)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        meta = cell.metadata.get("nbgrader")
        if not meta or meta.get("grade_id") is None:
            continue
        source = ours.get(meta["grade_id"])
        if source is None:
            del meta["grade_id"]
            continue
        theirs = source.metadata["nbgrader"]
        meta.pop("checksum", None)  # the release's, not the grading notebook's (nbgrader rewrote it; nothing reads it)
        if cell.cell_type != source.cell_type:  # (canonicalisation already restores the release's cell types)
            kind = nbformat.v4.new_code_cell if source.cell_type == "code" else nbformat.v4.new_markdown_cell
            cell = nb.cells[i] = kind(cell.source, id=cell.get("id"), metadata=cell.metadata)
            meta = cell.metadata["nbgrader"]
        meta["locked"] = _locked(theirs)
        if meta.get("grade") and "points" in theirs:
            meta["points"] = theirs["points"]
        if _locked(theirs):
            cell.source = source.source
    return nb


def limit_output(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """nbgrader's ``LimitOutput`` on the graded notebook, in place: at most :data:`MAX_LINES` lines of stream output
    per cell (then :data:`TRUNCATED`), an error's traceback cut to :data:`MAX_TRACEBACK` lines, its middle left out."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        length, kept = 0, []
        for out in cell.outputs:
            if out.output_type == "stream":
                if length == MAX_LINES:
                    continue
                text = out.text.split("\n")
                if len(text) + length > MAX_LINES:
                    text = text[: MAX_LINES - length - 1] + [TRUNCATED]
                length += len(text)
                out.text = "\n".join(text)
            elif out.output_type == "error" and len(out.traceback) > MAX_TRACEBACK:
                start = MAX_TRACEBACK // 2
                end = MAX_TRACEBACK - start - 1
                out.traceback = out.traceback[:start] + ["... Traceback truncated ..."] + out.traceback[-end:]
            kept.append(out)
        cell.outputs = kept
    return nb


# ------------------------------------------------------------------------------------------------ the run


@dataclasses.dataclass
class Run:
    """What :func:`run_notebook` leaves: the notebook with its outputs (every cell run), or the error that ended
    the run (then ``notebook`` holds the outputs so far and is not graded)."""

    notebook: nbformat.NotebookNode
    error: BaseException | None = None

    @property
    def finished(self) -> bool:
        return self.error is None

    def log(self) -> str:
        """The error that ended the run, with its traceback (for the worker's result), or ""."""
        if self.error is None:
            return ""
        return "".join(traceback.format_exception(self.error))[-4000:]


class GradingClient(NotebookClient):
    """nbclient's client with the grader's output cap: a cell's outputs past :data:`OUTPUT_CHARS` characters are
    dropped as they arrive (one note says so), so that a cell that prints without end cannot fill the worker's
    memory; errors are always kept (the reasons come from them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shown: dict[int, int] = {}  # cell index -> characters of output kept so far

    def output(self, outs, msg, display_id, cell_index):
        if msg["msg_type"] in ("stream", "display_data", "execute_result"):
            content = msg["content"]
            size = len(content.get("text", "")) + sum(len(str(v)) for v in (content.get("data") or {}).values())
            shown = self._shown.get(cell_index, 0)
            self._shown[cell_index] = shown + size
            if shown + size > OUTPUT_CHARS:
                if shown <= OUTPUT_CHARS:  # the first output past the cap: one note, then nothing more
                    note = f"\n{TRUNCATED} (more than {OUTPUT_CHARS} characters)\n"
                    outs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
                return None
        return super().output(outs, msg, display_id, cell_index)

    def clear_output(self, outs, msg, cell_index):
        super().clear_output(outs, msg, cell_index)
        if not msg["content"].get("wait"):
            self._shown[cell_index] = 0


def _record_reply_error(cell=None, cell_index=None, execute_reply=None, **_: Any) -> None:
    """A cell whose reply was an error its outputs do not show (the time limit's :data:`TIMEOUT_ERROR` after the
    interrupt's own KeyboardInterrupt) gets that error as an output too (what nbgrader's ``Execute`` does)."""
    content = (execute_reply or {}).get("content", {})
    if cell is None or content.get("status") != "error":
        return
    if any(o.output_type == "error" and o.get("ename") == content.get("ename") for o in cell.outputs):
        return
    cell.outputs.append(
        nbformat.v4.new_output(
            "error",
            ename=content.get("ename", ""),
            evalue=content.get("evalue", ""),
            traceback=content.get("traceback") or ["ERROR: An error occurred while showtraceback was disabled"],
        )
    )


async def _run(nb: nbformat.NotebookNode, cwd: pathlib.Path, cell_timeout: int, ipc: str | None) -> Run:
    # the kernel's channels: socket files <ipc>-N in the worker's short folder (jailed or not), else TCP on loopback
    km = AsyncKernelManager(
        kernel_name=KERNELSPEC["name"], **({"transport": "ipc", "ip": ipc} if ipc else {"ip": "127.0.0.1"})
    )
    client = GradingClient(
        nb,
        km=km,
        kernel_name=KERNELSPEC["name"],
        timeout=cell_timeout,  # per cell; the notebook's own limit is the batch's (execute.run_job)
        interrupt_on_timeout=True,  # then the cell ends with TIMEOUT_ERROR and the next cell runs
        error_on_timeout=TIMEOUT_ERROR,
        raise_on_iopub_timeout=True,  # a kernel that ignores the interrupt ends the run (CellTimeoutError)
        allow_errors=True,  # every cell runs, whatever the one before raised
        record_timing=False,
        skip_cells_with_tag=_NEVER_SKIPPED,
        on_cell_executed=_record_reply_error,
        resources={"metadata": {"path": str(cwd)}},
    )
    run = Run(client.nb)
    kc = None
    try:
        await km.start_kernel(cwd=str(cwd), extra_arguments=["--HistoryManager.hist_file=:memory:"])
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=client.startup_timeout)
        except RuntimeError as exc:  # "Kernel died before replying to kernel_info", or no reply in time
            if not await km.is_alive():
                raise DeadKernelError("Kernel died before replying to kernel_info") from exc
            raise
        kc.allow_stdin = False
        client.kc = kc
        await client.async_execute()  # the client does not own the kernel: stopped below, at once
    except Exception as exc:
        run.error = exc
    finally:
        # After the last cell nothing more comes from the kernel (the recorder's records are sent while each test
        # cell runs): stop it at once rather than ask it to exit and wait (1–3 s for a kernel that imported torch).
        try:
            if km.has_kernel:
                await km.shutdown_kernel(now=True)
        finally:
            if kc is not None:
                kc.stop_channels()
    return run


def run_notebook(nb: nbformat.NotebookNode, *, cwd: pathlib.Path, cell_timeout: int, ipc: str | None = None) -> Run:
    """Run ``nb`` (:func:`graded_notebook`'s) in a new grading kernel, in this process's environment as the worker
    set it; ``cwd``: the kernel's working folder (outside the jail); ``ipc``: the path prefix of the kernel's
    channel sockets. Returns the :class:`Run`, its outputs limited (:func:`limit_output`)."""
    # as under nbgrader's autograde: the notebook's self-check cell reads it (canonical.selfcheck_here)
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        run = asyncio.run(_run(nb, cwd, cell_timeout, ipc))
    finally:
        os.environ.pop("NBGRADER_EXECUTION", None)
    limit_output(run.notebook)
    return run


def failure(run: Run, cell_timeout: int, died: Said) -> Said:
    """Why the run did not finish, in one line, from nbclient's typed error: ``died`` (the worker's account of a
    kernel that died, :class:`nbclient.exceptions.DeadKernelError`), a cell that ran past its limit and ignored the
    interrupt (``CellTimeoutError``), else the error itself."""
    error = run.error
    if isinstance(error, DeadKernelError):
        return died
    if isinstance(error, CellTimeoutError):
        return say("cell ran too long", seconds=cell_timeout)
    return say("run failed", ename=type(error).__name__, error=str(error)[:200])
