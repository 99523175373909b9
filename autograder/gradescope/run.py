"""Grading one submission inside Gradescope's container (:func:`run`, what ``run_autograder`` calls): the one
notebook in ``/autograder/submission/`` graded by :func:`batch.grade <autograder.grading.batch.grade>`, as
``python -m autograder grade`` grades it, into ``/autograder/results/results.json``
(:mod:`~autograder.gradescope.results_json`). A wrong submission, or a failure of the grader itself, gets a zero
and the reason in the edition submitted (in both where no notebook says which), never a crash. Who can write the
score, and how the kernel is kept from it (the jail, else its own uid; else nothing is graded): README, "Gradescope".
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Sequence
from typing import Any

from .. import canonical, releases, wording
from ..releases import points_text
from ..wording import Said
from .build import Config
from .results_json import results_payload, write_results, zero_payload

UNISOLATED_SWITCH = "AUTOGRADER_GRADESCOPE_UNISOLATED"  # "1": grade even where the kernel cannot be isolated


def submitted_files(folder: pathlib.Path) -> list[pathlib.Path]:
    """The files a student submitted (Gradescope puts them in ``/autograder/submission/``, in folders when they
    uploaded some), without the folders an editor or an archiver adds (``.ipynb_checkpoints``, ``__MACOSX``,
    hidden files)."""
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") or part == "__MACOSX" for part in p.relative_to(folder).parts)
    )


def choose_submission(files: Sequence[pathlib.Path], folder: pathlib.Path) -> tuple[pathlib.Path | None, Said]:
    """(the file to grade, "") or (None, why the submission gets zero). One notebook is graded (other files beside
    it are ignored); a single file of another kind is graded too, so the course grader says what it is."""
    shown = ", ".join(str(p.relative_to(folder)) for p in files[:6]) + (" …" if len(files) > 6 else "")
    notebooks_ = [p for p in files if p.suffix.lower() == ".ipynb"]
    if len(notebooks_) == 1:
        return notebooks_[0], ""
    if len(notebooks_) > 1:
        return None, wording.say("several notebooks", n=len(notebooks_), shown=shown)
    if len(files) == 1:
        return files[0], ""
    if files:
        return None, wording.say("no notebook submitted", shown=shown)
    return None, wording.say("nothing submitted")


def submitted_edition(folder: pathlib.Path, chapter: str) -> str | None:
    """The course edition of what was submitted in ``folder`` (``canonical.edition_of``): its notebook's (several:
    the first's; a single file of another kind: that file's); ``None`` where nothing says it (nothing submitted, no
    notebook among several files, a file that cannot be read): its zero is then told in both editions."""
    try:
        files = submitted_files(folder)
        chosen = [p for p in files if p.suffix.lower() == ".ipynb"] or (files if len(files) == 1 else [])
        return canonical.edition_of(chosen[0].read_bytes(), releases.read(chapter)) if chosen else None
    except Exception:
        return None


def isolation() -> tuple[str, str]:
    """(mode, what holds and why): "jailed" (bubblewrap works here), "unprivileged" (it does not, but the kernel can
    run as its own unprivileged uid), or "none"."""
    from ..grading import jail

    problem, drop_uid = jail.isolation()
    if problem is None:
        return "jailed", (
            "the kernel runs in a bubblewrap jail (own filesystem view without /autograder, no network, its own "
            "unprivileged uid)"
        )
    if drop_uid:
        return "unprivileged", (
            f"bubblewrap cannot be used here ({problem}): the kernel runs as its own unprivileged uid, which cannot "
            "write /autograder/results, the course or its Python installation, under the course grader's guard "
            "(fallback mode)"
        )
    return "none", (
        f"bubblewrap cannot be used here ({problem}) and the kernel cannot run as another uid (the grader is not "
        "root, or its Python installation is not readable by other users)"
    )


def end_processes_of(uid: int) -> int:
    """Kill every process whose real uid is ``uid`` (the kernel's own: anything it left running); how many."""
    if uid <= 0 or os.geteuid() != 0:
        return 0
    killed = 0
    for proc in pathlib.Path("/proc").glob("[0-9]*"):
        try:
            uids = next(ln for ln in (proc / "status").read_text().splitlines() if ln.startswith("Uid:"))
            if int(uids.split()[1]) == uid:
                os.kill(int(proc.name), signal.SIGKILL)
                killed += 1
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return killed


def _grade(root: pathlib.Path, config: Config, work: pathlib.Path, edition: str | None) -> dict:
    """results.json's content for the submission under ``root``, in ``edition`` (``None``: not known, a zero's reason
    in both; no exception escapes for a wrong submission)."""
    from ..grading import batch, execute, jail, submission

    chapter = config.chapter
    folder = root / "submission"
    files = submitted_files(folder)
    chosen, why = choose_submission(files, folder)
    mode, how = isolation()
    extra: dict[str, Any] = {"isolation": mode, "isolation_detail": how, "version": config.version}
    extra["commit"] = config.commit
    print(f"Attention in NLP, {chapter} (course {config.version} {config.commit}): {how}")
    if chosen is None:
        print(f"  zero: {why}")
        return zero_payload(chapter, why, extra=extra, edition=edition)
    if mode == "none" and os.environ.get(UNISOLATED_SWITCH) != "1":
        refused = wording.say("unisolated", how=how, switch=UNISOLATED_SWITCH)
        print(f"  refused: {refused}")
        return zero_payload(chapter, refused, extra=extra, edition=edition)
    incoming = work / "submission"
    incoming.mkdir(mode=0o700)
    copy = incoming / chosen.name
    shutil.copyfile(chosen, copy)
    out = work / "out"
    oom_before, memory_limit = execute.container_memory()
    switch = os.environ.get(jail.JAIL_SWITCH)
    if mode != "jailed":
        os.environ[jail.JAIL_SWITCH] = "off"  # the batch then grades in fallback mode, as said above
    try:
        rows = batch.grade(
            [copy],
            chapter,
            out,
            cell_timeout=config.cell_timeout,
            notebook_timeout=config.timeout,
            memory_mb=config.memory_mb,
            jobs=1,
            force=True,
        )
    finally:
        if switch is None:
            os.environ.pop(jail.JAIL_SWITCH, None)
        else:
            os.environ[jail.JAIL_SWITCH] = switch
    row = rows[0]
    oom_after, _ = execute.container_memory()
    if oom_after > oom_before:  # a process of the run was killed for memory: what it scored cannot be trusted
        limit = wording.say("memory limit", mb=memory_limit) if memory_limit else ""
        said = wording.say("container out of memory", limit=limit)
        gave = f"{row.score:g}/{row.max_score:g}: {str(row.reason)[:200]}"
        print(f"  zero: {said} (the course grader gave {gave})")
        extra["oom_kills"] = oom_after - oom_before
        return zero_payload(chapter, said, extra=extra, edition=edition)
    result_files = sorted((out / "results").glob("*.json"))
    result = submission.read_result(result_files[0])
    left = end_processes_of(execute.kernel_uid(result.student_id, mode != "none"))
    if left:
        print(f"  killed {left} process(es) the kernel's uid left running")
        extra["killed_after_grading"] = left
    graded_path = out / "graded" / f"{result.student_id}.ipynb"
    graded = None
    if graded_path.exists() and result.status != "error":
        import nbformat

        graded = nbformat.read(graded_path, as_version=4)
    print(f"  {row.submission}: {row.score:g}/{row.max_score:g} ({row.status}) {str(row.reason)[:200]}")
    for w in row.warnings:
        print(f"  warning: {w}")
    extra["judged"] = dict(result.judged)
    shown = edition or wording.EN  # a file that cannot be read, graded: the course grader's reasons, in English
    return results_payload(
        result, chapter, graded=graded, hidden_visibility=config.hidden_visibility, extra=extra, edition=shown
    )


def run(root: pathlib.Path, config: Config) -> dict:
    """Grade the submission under ``root`` (Gradescope's ``/autograder``) and write ``root/results/results.json``;
    returns what it wrote. Whatever happens, a results.json is written, by this process only, at the end."""
    start = time.monotonic()
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(results_dir, 0, 0)
    os.chmod(results_dir, 0o755)  # the kernel's uid (another user) cannot write here
    target = results_dir / "results.json"
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    edition = submitted_edition(root / "submission", config.chapter)
    work = pathlib.Path(tempfile.mkdtemp(prefix="gradescope-"))  # 0700: the grader's own
    try:
        payload = _grade(root, config, work, edition)
    except Exception as exc:  # the grader's own failure: a zero that says so, and the traceback for the instructor
        traceback.print_exc()
        failed = wording.say("autograder failed", ename=type(exc).__name__)
        payload = zero_payload(config.chapter, failed, edition=edition)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    payload["execution_time"] = round(time.monotonic() - start)
    with contextlib.suppress(FileNotFoundError):
        target.unlink()  # nothing but this process writes it: whatever is there now goes
    write_results(target, payload)
    print(f"wrote {target}: {points_text(payload['score'])}")
    return payload
