"""Grading throughput: grade N distinct correct submissions of a chapter, report seconds per submission.

    python -m benchmarks.bench_grading --chapter ch03_self_attention -n 8 --jobs 2 [--mode fallback]

``--mode jailed`` (default: each kernel in its bubblewrap jail where it works here) or ``--mode fallback``
(``AUTOGRADER_JAIL=off``: today's limits and the guard's file rules), to compare the two on the same machine.

Appends one line to benchmarks/results/grading_throughput.csv (when, machine cores, chapter, n, jobs, wall
seconds, seconds per submission, projected minutes for 100 submissions). Each submission runs the full grading
path: canonicalisation, its own sandboxed worker and kernel, nbgrader autograde, guard verdicts, feedback HTML.
The copies of the correct sample differ by one added cell, so none shares another's run (identical notebooks
are graded once: see autograder/grading/batch.py).
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
from autograder.grading import batch, jail

ROOT = pathlib.Path(__file__).resolve().parent.parent


def use_mode(mode: str) -> None:
    """Grade in ``mode``: "jailed" (exits when bubblewrap cannot run here) or "fallback" (the jail switched off)."""
    if mode == "fallback":
        os.environ[jail.JAIL_SWITCH] = "off"
    else:
        os.environ.pop(jail.JAIL_SWITCH, None)
        problem = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
        if problem:
            raise SystemExit(f"no jail here: {problem}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chapter", default="ch03_self_attention")
    p.add_argument("-n", type=int, default=8)
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--mode", choices=("jailed", "fallback"), default="jailed")
    args = p.parse_args()
    use_mode(args.mode)
    sample = next((notebooks.SAMPLES / args.chapter).glob("lovelace*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        subs = pathlib.Path(tmp) / "subs"
        subs.mkdir()
        for i in range(args.n):
            nb = nbformat.read(sample, as_version=4)
            nb.cells.append(nbformat.v4.new_code_cell(f"student_number = {i}  # makes this submission distinct"))
            nbformat.write(nb, subs / f"student{i:03d}_{1000 + i}_{5000 + i}_{args.chapter}.ipynb")
        t0 = time.perf_counter()
        rows = batch.grade(sorted(subs.glob("*.ipynb")), args.chapter, pathlib.Path(tmp) / "out", jobs=args.jobs)
        wall = time.perf_counter() - t0
    assert all(r.score == r.max_score for r in rows), [r.reason for r in rows]
    per = wall / args.n
    row = {
        "when": datetime.datetime.now().isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "load_1min": f"{os.getloadavg()[0]:.1f}",
        "chapter": args.chapter,
        "n": args.n,
        "jobs": args.jobs,
        "wall_s": f"{wall:.1f}",
        "s_per_submission": f"{per:.1f}",
        "minutes_per_100": f"{per * 100 / 60:.1f}",
        "mode": args.mode,
    }
    out = ROOT / "benchmarks" / "results" / "grading_throughput.csv"
    new = not out.exists()
    if not new and "mode" not in out.read_text().splitlines()[0]:  # lines from before the jail: no mode column
        old = list(csv.DictReader(out.read_text().splitlines()))
        with open(out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            w.writeheader()
            w.writerows(dict(r, mode="before-jail") for r in old)
    with open(out, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
    print(row)


if __name__ == "__main__":
    main()
