"""Grading on a Dask cluster (autograder/grading/executors.py) gives what grading on this machine gives.

One small chapter's shipped samples plus variants that share their kernel runs (harmless damage, an untouched
notebook, a file that is not a notebook: three kernel runs per batch) are graded twice: by the local pool, and by a
local Dask cluster of two worker processes, one of which is killed while it grades. Both must give the same rows,
grades.csv, summary, LMS file and feedback pages, with one result per file and nothing lost.
"""

import dataclasses
import os
import signal
import threading
import time

import pytest

from autograder import releases
from autograder.grading import batch, collect, execute, executors, feedback, report
from autograder.grading.worker import Job
from tests import variants

CHAPTER = "ch03_self_attention"
# Variants whose canonical form equals a sample's (or that are no notebook): no kernel run of their own.
SHARED = ["metadata_stripped", "editor_metadata_colab", "tests_deleted", "stub", "not_a_notebook"]
OPTIONS = dict(cell_timeout=60, notebook_timeout=400, memory_mb=3072, jobs=2)


def _files(folder):
    from autograder import notebooks

    folder.mkdir()
    all_variants = variants.variants(CHAPTER, releases.release_notebook(CHAPTER))
    for i, name in enumerate(SHARED):
        (folder / f"student{i:02d}_{7000 + i}_{8000 + i}_{CHAPTER}.ipynb").write_text(all_variants[name].text)
    for sample in sorted((notebooks.SAMPLES / CHAPTER).glob("*.ipynb")):
        (folder / sample.name).write_bytes(sample.read_bytes())
    return sorted(folder.glob("*.ipynb"))


def _kill_a_busy_worker(cluster: executors.DaskCluster, killed: list) -> None:
    """Wait until a worker grades a notebook, let the kernel start, then SIGKILL that worker process."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        busy = {
            w: keys
            for w, keys in cluster.client.processing().items()
            if any(str(k).startswith("autograder-grade-") for k in keys)
        }
        if busy:
            time.sleep(3)
            victim = sorted(busy)[0]
            pid = cluster.client.run(os.getpid, workers=[victim])[victim]
            os.kill(pid, signal.SIGKILL)
            killed.append(victim)
            return
        time.sleep(0.2)


@pytest.mark.slow
def test_dask_cluster_grades_like_the_local_pool_and_survives_a_killed_worker(tmp_path):
    files = _files(tmp_path / "subs")
    local = batch.grade(files, CHAPTER, tmp_path / "local", **OPTIONS)

    killed: list[str] = []
    with executors.DaskCluster(workers=2) as cluster:
        killer = threading.Thread(target=_kill_a_busy_worker, args=(cluster, killed), daemon=True)
        killer.start()
        dask = batch.grade(files, CHAPTER, tmp_path / "dask", executor=cluster, **OPTIONS)
        killer.join(timeout=1)
        ran_on = dict(cluster.ran_on)

    assert killed, "a worker was killed while it graded"
    assert killed[0] not in ran_on.values(), "the killed worker's notebook was graded again by another worker"
    assert len(ran_on) == 3, "three distinct notebooks, each graded once"
    assert len(dask) == len(files) and len({r.submission for r in dask}) == len(files), "one row per file"
    assert len(list((tmp_path / "dask" / "results").glob("*.json"))) == len(files), "one result file each"
    same = lambda rows: [dataclasses.replace(r, graded_at=0.0) for r in rows]
    assert same(dask) == same(local)
    assert {r.status for r in local} == {"graded", "error"} and any(0 < r.score < r.max_score for r in local)
    for name in (report.CSV_NAME, "summary.md", "summary.csv", "canvas_import.csv"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    feedback = sorted(p.name for p in (tmp_path / "local" / "feedback").iterdir())
    assert sorted(p.name for p in (tmp_path / "dask" / "feedback").iterdir()) == feedback
    for name in feedback:
        local_page = (tmp_path / "local" / "feedback" / name).read_bytes()
        assert (tmp_path / "dask" / "feedback" / name).read_bytes() == local_page, name

    # A rerun on the cluster skips every file (same contents): nothing is sent, the table is the same.
    with executors.DaskCluster(workers=1) as cluster:
        again = batch.grade(files, CHAPTER, tmp_path / "dask", executor=cluster, **OPTIONS)
        assert cluster.ran_on == {}
    assert same(again) == same(dask)


def test_a_worker_with_other_course_code_is_refused(tmp_path):
    job = Job(**{f.name: None for f in dataclasses.fields(Job)})
    with pytest.raises(executors.GraderMismatch, match="other course code"):
        executors.grade_task(dataclasses.asdict(job), "", b"", 1, {}, "0" * 64)


def test_a_lost_submission_gets_a_row_and_feedback(tmp_path):
    """A notebook the cluster could not grade gets an "error" result, and the batch's one feedback writer its page."""
    from distributed import KilledWorker

    job = Job(
        canonical="", chapter=CHAPTER, student_id="a", grading="", stage="", sandbox="",
        result=str(tmp_path / "a.json"), graded=str(tmp_path / "a.ipynb"), cell_timeout=1, memory_mb=1,
        points={"x": 10}, hidden_files=[], netns=False, uid=-1, threads=1,
    )  # fmt: skip
    result = executors.lost(job, executors._lost_reason(KilledWorker("k", None, 3)))
    upload = tmp_path / "a.ipynb"
    upload.write_text("{}")
    (sub,) = collect.collect([upload], tmp_path, releases.read(CHAPTER))
    sub.warnings = ["w"]
    execute.share([sub], result, None)
    feedback.Pages(releases.read(CHAPTER), tmp_path).write(sub)
    row = sub.result()
    assert row.status == "error" and "lost the worker" in row.reason and row.warnings == ["w"]
    assert "lost the worker" in (tmp_path / f"{sub.student_id}.html").read_text()
