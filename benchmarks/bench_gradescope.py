"""Memory and time of grading one submission with a chapter's Gradescope autograder, for the settings in the README
("Gradescope"): ``python -m benchmarks.bench_gradescope [--chapters ch01_seq2seq ...] [--no-limits]``.

Each chapter in turn (one at a time: grading one submission uses one core) gets its zip built and installed in a
simulated container (``tests/gradescope_container.py``, ``Simulation``: ``setup.sh`` once, in a clean virtualenv with this
environment's packages hard-linked in, so nothing is downloaded; each further chapter only swaps its course in with
``setup.sh --course-only``), and its reference sample (``autograder/samples/<chapter>/lovelace*``) is graded by
``run_autograder``:

1. unlimited: wall time; CPU time of run_autograder and everything it started (its cgroup's ``cpuacct``, else
   ``getrusage`` of the children); peak memory as a container's limit counts it (the cgroup's
   ``memory.max_usage_in_bytes`` / ``memory.peak``: resident memory and page cache), as the processes hold it (the
   peak of the process tree's summed PSS, sampled every 0.05 s) and the largest single process (``ru_maxrss``);
2. as Gradescope's default container (unless ``--no-limits``): a cgroup of 768 MB and half a CPU (a CFS quota of
   50 ms per 100 ms): its score, wall time and whether the kernel's OOM killer struck in it; if that does not give
   full marks without an OOM kill, again with more memory (1024, 1536, 2048, 3072 MB) until it does
   (``--start-mb 1024`` skips the 768 MB run: one that does not fit thrashes for minutes before the OOM killer
   ends it).

The packages are copied (not linked) from this environment and the page cache of every file the run reads (the
virtualenv, the course, this Python's standard library) is dropped before each run (``posix_fadvise``), so that the
run's cgroup is charged for the file pages it uses, as a container's is, not the process that happened to read them
first.

Writes ``benchmarks/results/gradescope_resources.csv`` (one row per run, appended) and
``benchmarks/results/gradescope/<chapter>.json`` (the unlimited run's results.json, the feedback page left out: it
carries the course grader's result file; ``tests/test_gradescope.py`` checks it). Needs root (cgroups, the jail).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import json
import os
import pathlib
import resource
import sys
import tempfile
import threading
import time

from autograder import notebooks
from autograder.gradescope import build
from tests import gradescope_container as simulate

OUT = pathlib.Path(__file__).resolve().parent / "results"
CSV = OUT / "gradescope_resources.csv"
STORED = OUT / "gradescope"
DEFAULT_MB = 768  # Gradescope's default container: 768 MB, half a vCPU, 10 minutes
MORE_MB = (1024, 1536, 2048, 3072)
FIELDS = [
    "measured",
    "chapter",
    "mode",
    "memory_limit_mb",
    "cpu_limit",
    "score",
    "max_score",
    "status",
    "isolation",
    "wall_s",
    "cpu_s",
    "peak_cgroup_mb",
    "peak_pss_mb",
    "peak_rss_sum_mb",
    "largest_process_mb",
    "oom_kills",
    "load_1min",
    "machine",
]


class Cgroup:
    """A cgroup of its own for one run (v1: memory, cpu and cpuacct hierarchies; v2: the unified one), made under this
    process's own, with optional memory and CPU limits; None where cgroups cannot be made here."""

    def __init__(self, memory_mb: int | None = None, cpus: float | None = None):
        self.dirs: dict[str, pathlib.Path] = {}
        name = f"bench-gradescope-{os.getpid()}-{time.monotonic_ns()}"
        own = {}
        for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, where = line.split(":", 2)
            for c in controllers.split(",") if controllers else ["unified"]:
                own[c] = where.lstrip("/")
        root = pathlib.Path("/sys/fs/cgroup")
        if (root / "memory").is_dir():  # v1
            for controller in ("memory", "cpu", "cpuacct"):
                base = root / controller / own.get(controller, "")
                if base.is_dir():
                    (base / name).mkdir()
                    self.dirs[controller] = base / name
        elif (root / "cgroup.controllers").exists():  # v2
            (root / own.get("unified", "") / name).mkdir()
            self.dirs["unified"] = root / own.get("unified", "") / name
        if "memory" not in self.dirs and "unified" not in self.dirs:
            raise OSError("no memory cgroup can be made here")
        if memory_mb:
            limit = str(memory_mb << 20)
            if "memory" in self.dirs:
                (self.dirs["memory"] / "memory.limit_in_bytes").write_text(limit)
                with contextlib.suppress(OSError):
                    (self.dirs["memory"] / "memory.memsw.limit_in_bytes").write_text(limit)
            else:
                (self.dirs["unified"] / "memory.max").write_text(limit)
                with contextlib.suppress(OSError):
                    (self.dirs["unified"] / "memory.swap.max").write_text("0")
        if cpus:
            quota = str(int(cpus * 100000))
            if "cpu" in self.dirs:
                (self.dirs["cpu"] / "cpu.cfs_period_us").write_text("100000")
                (self.dirs["cpu"] / "cpu.cfs_quota_us").write_text(quota)
            elif "unified" in self.dirs:
                (self.dirs["unified"] / "cpu.max").write_text(f"{quota} 100000")

    def enter(self) -> None:
        """Move the calling process into the group (a child's preexec_fn: everything it starts stays in)."""
        for d in self.dirs.values():
            (d / "cgroup.procs").write_text(str(os.getpid()))

    def peak_mb(self) -> float | None:
        for d, name in (
            (self.dirs.get("memory"), "memory.max_usage_in_bytes"),
            (self.dirs.get("unified"), "memory.peak"),
        ):
            if d is not None and (d / name).exists():
                return int((d / name).read_text()) / 2**20
        return None

    def oom_kills(self) -> int:
        """How many processes of the group the kernel's OOM killer ended."""
        for d, name in ((self.dirs.get("memory"), "memory.oom_control"), (self.dirs.get("unified"), "memory.events")):
            if d is not None and (d / name).exists():
                for line in (d / name).read_text().splitlines():
                    if line.startswith("oom_kill "):
                        return int(line.split()[1])
        return 0

    def cpu_s(self) -> float | None:
        if "cpuacct" in self.dirs:
            return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        if "unified" in self.dirs:
            stat = dict(ln.split() for ln in (self.dirs["unified"] / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        return None

    def close(self) -> None:
        for d in self.dirs.values():
            for _ in range(50):  # the group's processes are gone once the run has ended; the kernel may lag
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def _memory_kb(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of a process in kB (0, 0 when it is gone)."""
    pss = rss = 0
    try:
        for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
            elif line.startswith("Rss:"):
                rss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pss, rss


class TreeSampler(threading.Thread):
    """Samples the summed PSS and RSS of a process and its descendants until stopped; keeps the peaks (MB)."""

    def __init__(self, pid: int, every: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak_pss = self.peak_rss = 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            sums = [_memory_kb(p) for p in _descendants(self.pid)]
            self.peak_pss = max(self.peak_pss, sum(s[0] for s in sums) / 1024)
            self.peak_rss = max(self.peak_rss, sum(s[1] for s in sums) / 1024)
            self.done.wait(self.every)


def drop_page_cache(*folders: pathlib.Path) -> None:
    """Drop the cached pages of every file under ``folders`` (pages a running process maps stay)."""
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for name in files:
                with contextlib.suppress(OSError):
                    fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW)
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)


def measure(sim: simulate.Simulation, sample: pathlib.Path, memory_mb: int | None, cpus: float | None) -> dict:
    """One run_autograder of ``sample`` in a cgroup of its own (with the limits given), from a cold page cache; what
    it used."""
    import subprocess

    drop_page_cache(sim.course_home, pathlib.Path(sys.base_prefix) / "lib")
    group = Cgroup(memory_mb, cpus)
    sim.put([sample])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(sim.root / "run_autograder")],
        cwd=sim.root,
        env=sim.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=group.enter,
    )
    sampler = TreeSampler(proc.pid)
    sampler.start()
    output, _ = proc.communicate(timeout=3600)
    wall = time.monotonic() - start
    sampler.done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    payload = json.loads((sim.root / "results" / "results.json").read_text())
    cpu = group.cpu_s()
    if cpu is None:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {
        "measured": datetime.date.today().isoformat(),
        "chapter": sim.chapter,
        "mode": "limited" if memory_mb or cpus else "unlimited",
        "memory_limit_mb": memory_mb or "",
        "cpu_limit": cpus or "",
        "score": payload["score"],
        "max_score": sum(ex.points for ex in notebooks.checks_module(sim.chapter).EXERCISES),
        "status": payload["extra_data"]["course_grader"]["status"],
        "isolation": payload["extra_data"]["course_grader"].get("isolation", ""),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_cgroup_mb": round(group.peak_mb() or 0, 0),
        "peak_pss_mb": round(sampler.peak_pss, 0),
        "peak_rss_sum_mb": round(sampler.peak_rss, 0),
        "largest_process_mb": round(after.ru_maxrss / 1024, 0),  # the largest reaped descendant (kB on Linux)
        "oom_kills": group.oom_kills(),
        "load_1min": round(load, 1),
        "machine": f"{os.cpu_count()} cores",
    }
    group.close()
    return {"row": row, "payload": payload, "output": output}


def _append(row: dict) -> None:
    new = not CSV.exists()
    with CSV.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)
    print("  " + ", ".join(f"{k}={row[k]}" for k in FIELDS[2:-1]), flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chapters", nargs="*", default=None, help="default: every chapter")
    p.add_argument("--no-limits", action="store_true", help="skip the runs in Gradescope's default container")
    p.add_argument(
        "--start-mb",
        type=int,
        default=DEFAULT_MB,
        help=f"the first memory limit tried (default {DEFAULT_MB}, Gradescope's default; a run that does not fit "
        "thrashes for minutes before the OOM killer ends it, so once that is shown, later runs may start higher)",
    )
    args = p.parse_args(argv)
    chapters = args.chapters or notebooks.chapters()
    STORED.mkdir(parents=True, exist_ok=True)
    base = pathlib.Path(tempfile.mkdtemp(prefix="bench-gradescope-"))
    base.chmod(0o755)
    sim = None
    try:
        for i, chapter in enumerate(chapters):
            print(f"{chapter}:", flush=True)
            sim = simulate.Simulation(chapter, base / chapter)
            if i == 0:
                requirements = sorted({r for c in chapters for r in build.grading_requirements(chapter=c)[1]})
                names = ["torch"] + [build._requirement_name(r) for r in requirements]
                staged = simulate.stage_packages(base / "site", names, closure=True, link=False)
                python = getattr(sys, "_base_executable", sys.executable)  # the Python these packages were made for
                home = sim.course_home
                sim.setup(staged, python=python)
            else:  # the same virtualenv, this chapter's course
                sim.course_home = home
                sim.setup(course_only=True)
            sample = next((notebooks.SAMPLES / chapter).glob("lovelace*.ipynb"))
            run = measure(sim, sample, None, None)
            _append(run["row"])
            stored = dict(run["payload"])
            stored["output"] = ""  # the feedback page (tens of kB): not what the stored file is for
            (STORED / f"{chapter}.json").write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
            if args.no_limits:
                continue
            for memory in [mb for mb in (DEFAULT_MB, *MORE_MB) if mb >= args.start_mb]:
                limited = measure(sim, sample, memory, 0.5)
                _append(limited["row"])
                if limited["row"]["score"] == limited["row"]["max_score"] and not limited["row"]["oom_kills"]:
                    break
                print("  " + limited["output"].strip().splitlines()[-1][:300] if limited["output"].strip() else "")
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
