"""Grading throughput on this machine's process pool vs a local Dask cluster (the engine's overhead).

    python -m benchmarks.bench_grading_cluster -n 4 --jobs 2           # both paths, then the engine alone
    python -m benchmarks.bench_grading_cluster --engine-only            # only the per-task cost of Dask

Two measurements, each appended as one line per path to benchmarks/results/grading_cluster.csv (when, cores,
1-minute load, what, n, wall seconds, seconds per submission, submissions per minute):

* end to end: N distinct correct submissions of a chapter (the correct sample plus one distinct cell each, as in
  bench_grading.py) graded by ``batch.grade`` with the local pool (``jobs`` at a time) and with a local Dask
  cluster of ``jobs`` single-threaded worker processes (``executors.DaskCluster``, started inside the timing:
  an instructor pays for it once per command), each path in its own output folder;
* the engine alone: N tasks that carry what a grading task carries (the zipped course directory and one canonical
  notebook each) and return a result of the same size, without running a worker:
  the time Dask adds per submission, and the cluster's start-up.

Sizing a cluster (README, "Grading on a cluster"): wall time ≈ submissions × seconds per submission on one
worker / workers, where one worker is one core's worth of kernel.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import pathlib
import tempfile
import time

import nbformat

from autograder import notebooks
from autograder.grading import batch, executors

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "grading_cluster.csv"


def _submissions(chapter: str, n: int, folder: pathlib.Path) -> list[pathlib.Path]:
    sample = next((notebooks.SAMPLES / chapter).glob("lovelace*.ipynb"))
    folder.mkdir(parents=True)
    for i in range(n):
        nb = nbformat.read(sample, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(f"student_number = {i}  # makes this submission distinct"))
        nbformat.write(nb, folder / f"student{i:03d}_{1000 + i}_{5000 + i}_{chapter}.ipynb")
    return sorted(folder.glob("*.ipynb"))


def _echo(course: bytes, text: str) -> dict:
    """A grading task's shape without the grading: the inputs in, a result of the usual size out."""
    return {"result": {"n": len(course)}, "feedback": text.encode(), "graded": text.encode(), "where": ""}


def engine_only(n: int, jobs: int, chapter: str) -> list[dict]:
    text = nbformat.writes(nbformat.read(next((notebooks.SAMPLES / chapter).glob("lovelace*.ipynb")), as_version=4))
    course = os.urandom(120_000)  # about the size of a zipped course directory (gradebook + two notebooks)
    t0 = time.perf_counter()
    with executors.DaskCluster(workers=jobs) as cluster:
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        futures = [cluster.client.submit(_echo, course, text + str(i), key=f"bench-{i}") for i in range(n)]
        cluster.client.gather(futures)
        per = (time.perf_counter() - t1) / n
    return [
        {"what": "dask cluster start-up (2 TLS workers)", "n": 1, "wall_s": start, "s_per_submission": ""},
        {"what": "dask engine per task (no worker run)", "n": n, "wall_s": per * n, "s_per_submission": per},
    ]


def end_to_end(n: int, jobs: int, chapter: str) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files = _submissions(chapter, n, pathlib.Path(tmp) / "subs")
        for what in ("local pool", "local dask cluster"):
            out = pathlib.Path(tmp) / what.replace(" ", "_")
            t0 = time.perf_counter()
            if what == "local pool":
                graded = batch.grade(files, chapter, out, jobs=jobs)
            else:
                with executors.DaskCluster(workers=jobs) as cluster:
                    graded = batch.grade(files, chapter, out, jobs=jobs, executor=cluster)
            wall = time.perf_counter() - t0
            assert all(r.score == r.max_score for r in graded), [r.reason for r in graded]
            rows.append({"what": f"{what}, {jobs} at a time", "n": n, "wall_s": wall, "s_per_submission": wall / n})
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chapter", default="ch03_self_attention")
    p.add_argument("-n", type=int, default=4, help="submissions per path (engine only: tasks)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--engine-only", action="store_true", help="skip the end-to-end grading")
    args = p.parse_args()
    rows = [] if args.engine_only else end_to_end(args.n, args.jobs, args.chapter)
    rows += engine_only(max(args.n, 200), args.jobs, args.chapter)
    new = not OUT.exists()
    with open(OUT, "a", newline="") as f:
        fields = ["when", "cores", "load_1min", "chapter", "what", "n", "wall_s", "s_per_submission", "per_minute"]
        w = csv.DictWriter(f, fieldnames=fields)
        if new:
            w.writeheader()
        for row in rows:
            per = row["s_per_submission"]
            line = {
                "when": datetime.datetime.now().isoformat(timespec="seconds"),
                "cores": os.cpu_count(),
                "load_1min": f"{os.getloadavg()[0]:.1f}",
                "chapter": args.chapter,
                **row,
                "wall_s": f"{row['wall_s']:.3f}",
                "s_per_submission": f"{per:.4f}" if per != "" else "",
                "per_minute": f"{60 / per:.1f}" if per else "",
            }
            w.writerow(line)
            print(line)


if __name__ == "__main__":
    main()
