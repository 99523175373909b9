"""Grading overhead: seconds per graded submission ÷ seconds per plain run of the same notebook.

    python -m benchmarks.bench_grading_overhead --chapters ch03_self_attention ch10_flash_attention -n 6 --repeats 2

For each chapter, N distinct correct submissions (the correct sample plus one distinct cell each, so that none
shares another's run) are measured two ways, side by side on the same machine, interleaved (grade, run, run,
grade, ...) and repeated:

* **graded** — ``batch.grade`` of the N files, jailed (bubblewrap) unless ``--mode fallback``, ``--jobs`` at a
  time: the full path (canonicalisation, the grading notebook written once per batch, one sandboxed worker and
  kernel per submission running it with nbclient, the kernel's recorder, the worker's verdict on the record,
  feedback HTML, reports), wall time ÷ N;
* **run** — ``jupyter nbconvert --to notebook --execute`` of the same N files, ``--jobs`` at a time, same
  Python, same kernelspec, the same torch threads per kernel as the grader gives (cores ÷ jobs), wall time ÷ N.

The ratio graded ÷ run is what grading costs on top of running the notebook (the hidden checks, the recorder and the
worker's work). Where this process may make a cgroup v1 ``cpuacct`` group (root, as on the development machine), the
CPU seconds of each side are measured too (every process each one started, killed ones included): on a machine
shared with other jobs they vary less than the wall-clock times. Appends one line per chapter and repeat to
``benchmarks/results/grading_overhead.csv`` (when, 1-minute load before and after, cores, chapter, n, jobs, both
times, their ratio, both CPU times, their ratio, mode, ``--label``), and prints the medians.

Where one graded submission's time goes (issue 27): ch03_self_attention, one submission alone (``jobs=1``),
wall-clock timestamps around each phase (nbgrader's, nbclient's and the worker's functions wrapped, the kernel's
cells from nbclient), two runs of the code before and two after, interleaved, on the 2-core development machine
shared with other jobs (1-minute load 1.8–3.0), seconds, mean of the two:

=====================================================  ======  =====  =============================================
phase                                                  before  after  what changed
=====================================================  ======  =====  =============================================
batch, once: canonicalise (its generate_assignment)       4.1    5.4  (the fork server's imports run meanwhile)
batch, once: the grading course's generate_assignment     4.3    0.6  alembic's ``heads`` subprocess once a process
worker start: interpreter and imports                     3.1    0.0  forked from the batch's fork server
staging the course copy, nbgrader's set-up                0.2    0.2  (copying the course template: 0.01 s)
kernel start (launcher, bwrap, ipykernel)                 2.7    0.7  the launcher no longer imports nbformat
the notebook's cells in the kernel                       12.0   10.1  (same work: torch, the guard, all checks)
kernel shutdown                                           2.9    0.1  stopped at once, not asked and waited for
judge.py's replay (torch and the checks imported)         2.6    0.2  imports paid by the fork server
feedback page (nbconvert HTML)                            0.8    0.7
gradebook reads and writes                                0.3    0.4
worker exit until the batch sees it                       1.4    0.1  no interpreter teardown
the worker, from start to end                            26.5   13.0
batch, once: reports (grades.csv, summary.png)            1.0    0.9
=====================================================  ======  =====  =============================================

Found with those timestamps and py-spy (``pip install py-spy``; ``py-spy record --subprocesses`` samples the worker,
the kernel's launcher and the jailed kernel at once): the launcher imported nbformat, whose jsonschema compiles
rfc3987_syntax's grammars at import (≈ 1.7 s, in every worker too); jupyter_client asks a kernel to exit and waits
2.5 s before its SIGTERM, and a kernel that imported torch takes longer than that to tear itself down; nbgrader runs
``alembic heads`` in a subprocess for every new gradebook.

The notebook's own run (``nbconvert --execute``, same notebook, same moment) took ≈ 10 s alone: 4.5 s of cells,
≈ 1.5 s for nbconvert and the kernel to start, ≈ 2.5 s waiting for the kernel (torch loaded) to exit. The grading
kernel's cells take ≈ 5 s more than the notebook's own: the setup cell arms the guard (≈ 0.4 s, plus importing
``torch._dynamo``, which the plain run pays in its first check instead), and each test cell runs the guard's verdict
(every visible and hidden check on private copies, twice for an exercise that calls another one; the integrity
snapshot and PyTorch's operator table before and after, the comparison operators' kernels at every call into the
student's code, a full garbage collection) and then the cell's own visible and hidden checks again. That is the
main cost left; for ch10_flash_attention (heavier hidden checks of the backward pass, run with the reference forward
and with the student's own) it is most of the difference.

Since the one-verdict change (issue 37, 2026-12-06) the grading kernel only records: the checks run once, on the
public modules, with no private copies, snapshots or operator tables, and the worker judges the record. Medians of
three on the same machine that day (slower than the day before for both sides): ch03 0.89× wall (0.81× CPU), ch10
1.16× (1.06× CPU). Chapter 10's remaining cost is PyTorch's fake-GPU run of each answer (the device check, now the
same in grading as in the notebook; one run per piece of the student's code, later calls watched by the fallback):
about 0.8 s for the backward's tiled Python loops, measured in-process with the reference answers. With the hidden
checks making that run on a one-block call first (the same day, 05:05, load 1.0–3.8, single repeats 0.75–1.43×):
ch03 0.91× wall (0.84× CPU), ch10 1.08× (1.02× CPU).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import datetime
import logging
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat

from autograder import notebooks
from autograder.grading import batch
from benchmarks.bench_grading import use_mode

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "grading_overhead.csv"
FIELDS = [
    "when",
    "load_before",
    "load_after",
    "cores",
    "chapter",
    "n",
    "jobs",
    "repeat",
    "graded_s_per_submission",
    "run_s_per_notebook",
    "ratio",
    "graded_cpu_s_per_submission",
    "run_cpu_s_per_notebook",
    "cpu_ratio",
    "mode",
    "label",
]
CPUACCT = pathlib.Path("/sys/fs/cgroup/cpuacct")  # cgroup v1 CPU accounting, where this machine has it


class CpuMeter:
    """CPU seconds used by this process and everything it starts while measuring (a cgroup v1 ``cpuacct`` group of
    its own: processes killed mid-way, such as a kernel stopped at once, still count). ``seconds`` is None where
    there is no such cgroup or it cannot be made (not root); the CSV's CPU columns are then empty.

    The wall-clock times share the machine with whatever else runs on it; the CPU seconds do not depend on that."""

    def __init__(self, name: str):
        self.group = CPUACCT / f"bench-grading-{os.getpid()}-{name}"
        self.seconds: float | None = None

    def __enter__(self) -> CpuMeter:
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.group = pathlib.Path()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.group == pathlib.Path():
            return
        self.seconds = int((self.group / "cpuacct.usage").read_text()) / 1e9
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))  # back where it started (the root group)
        for _ in range(300):  # the group's processes have all ended or been killed: a moment to let it go
            try:
                self.group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def submissions(chapter: str, n: int, folder: pathlib.Path) -> list[pathlib.Path]:
    """N distinct correct submissions of ``chapter`` (the correct sample plus one distinct cell each)."""
    sample = next((notebooks.SAMPLES / chapter).glob("lovelace*.ipynb"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        nb = nbformat.read(sample, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(f"student_number = {i}  # makes this submission distinct"))
        path = folder / f"student{i:03d}_{1000 + i}_{5000 + i}_{chapter}.ipynb"
        nbformat.write(nb, path)
        paths.append(path)
    return paths


def graded_seconds(paths: list[pathlib.Path], chapter: str, out: pathlib.Path, jobs: int) -> float:
    """Wall seconds per submission of grading ``paths`` in one batch (every one must get full marks)."""
    t0 = time.perf_counter()
    rows = batch.grade(paths, chapter, out, jobs=jobs, force=True)
    wall = time.perf_counter() - t0
    bad = [(r.submission, r.reason) for r in rows if r.score != r.max_score]
    assert not bad, bad
    return wall / len(paths)


def run_seconds(paths: list[pathlib.Path], out: pathlib.Path, jobs: int) -> float:
    """Wall seconds per notebook of ``jupyter nbconvert --execute`` of ``paths``, ``jobs`` at a time."""
    out.mkdir(parents=True, exist_ok=True)
    threads = str(max(1, (os.cpu_count() or 1) // jobs))  # as the grader gives each kernel (batch.py)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    jupyter = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute"]

    def one(path: pathlib.Path) -> None:
        cmd = [*jupyter, str(path), "--output-dir", str(out), "--ExecutePreprocessor.timeout=900"]
        subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=out)

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, paths))
    return (time.perf_counter() - t0) / len(paths)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chapters", nargs="+", default=["ch03_self_attention", "ch10_flash_attention"])
    p.add_argument("-n", type=int, default=6)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--mode", choices=("jailed", "fallback"), default="jailed")
    p.add_argument("--first-repeat", type=int, default=0, help="number of the first repeat (odd: the plain runs first)")
    p.add_argument("--label", default="", help="a note for the CSV's label column (e.g. which code was measured)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    use_mode(args.mode)
    results: dict[str, list[tuple[float, float, float | None, float | None]]] = {c: [] for c in args.chapters}
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp)
        subs = {c: submissions(c, args.n, base / "subs" / c) for c in args.chapters}
        for repeat in range(args.first_repeat, args.first_repeat + args.repeats):
            for chapter in args.chapters:
                load_before = os.getloadavg()[0]
                # interleaved: every other repeat runs the plain notebooks first
                order = ("graded", "run") if repeat % 2 == 0 else ("run", "graded")
                times, cpu = {}, {}
                for what in order:
                    with CpuMeter(what) as meter:
                        if what == "graded":
                            times[what] = graded_seconds(subs[chapter], chapter, base / "out" / chapter, args.jobs)
                        else:
                            times[what] = run_seconds(subs[chapter], base / "run" / chapter / str(repeat), args.jobs)
                    cpu[what] = meter.seconds / args.n if meter.seconds is not None else None
                results[chapter].append((times["graded"], times["run"], cpu["graded"], cpu["run"]))
                row = {
                    "when": datetime.datetime.now().isoformat(timespec="seconds"),
                    "load_before": f"{load_before:.1f}",
                    "load_after": f"{os.getloadavg()[0]:.1f}",
                    "cores": os.cpu_count(),
                    "chapter": chapter,
                    "n": args.n,
                    "jobs": args.jobs,
                    "repeat": repeat,
                    "graded_s_per_submission": f"{times['graded']:.2f}",
                    "run_s_per_notebook": f"{times['run']:.2f}",
                    "ratio": f"{times['graded'] / times['run']:.2f}",
                    "graded_cpu_s_per_submission": f"{cpu['graded']:.2f}" if cpu["graded"] else "",
                    "run_cpu_s_per_notebook": f"{cpu['run']:.2f}" if cpu["run"] else "",
                    "cpu_ratio": f"{cpu['graded'] / cpu['run']:.2f}" if cpu["graded"] and cpu["run"] else "",
                    "mode": args.mode,
                    "label": args.label,
                }
                new = not OUT.exists()
                with open(OUT, "a", newline="") as f:
                    w = csv.DictWriter(f, fieldnames=FIELDS)
                    if new:
                        w.writeheader()
                    w.writerow(row)
                print(row, flush=True)
    for chapter, rows in results.items():
        graded = statistics.median(g for g, *_ in rows)
        run = statistics.median(r for _, r, *_ in rows)
        ratio = statistics.median(g / r for g, r, *_ in rows)
        line = f"{chapter}: graded {graded:.1f} s/submission, run {run:.1f} s/notebook, ratio {ratio:.2f}"
        cpus = [(cg, cr) for *_, cg, cr in rows if cg and cr]
        if cpus:
            line += f"; CPU ratio {statistics.median(cg / cr for cg, cr in cpus):.2f}"
        print(line + f" (medians of {len(rows)})")


if __name__ == "__main__":
    main()
