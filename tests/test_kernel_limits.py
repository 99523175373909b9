"""A kernel's memory and files under one limit (issue 35; autograder/grading/jail.py "memory and files", README
"Limits"); the grading worker's memory under another (issue 46).

* the jail's /tmp and /dev/shm are the worker's sized folders when it has them (bubblewrap 0.8 has no ``--size``);
* a kernel that cannot start under ``--memory-mb`` gets a reason that says so, not the first exercise's cells;
* end to end (slow, real kernels, jailed, with a memory cgroup): a submission that writes 2 GB to the jail's /tmp
  and 2 GB to its home under ``--memory-mb 1536`` is stopped at the limit and its row says why; the batch's other
  row is unaffected; at ``--memory-mb 1024`` every kernel's row says the limit is too small for torch;
* the worker's own memory cgroup (``--worker-memory-mb``) is made by the execute step, its kernel's beside it (not
  inside: neither counts against the other), and a worker the OOM killer ended is one row that says so.
"""

import os

import nbformat
import pytest

from autograder.grading import batch, execute, jail, memory, worker
from catalogue import samples as sample_files
from scripts.build_notebooks import notebooks as builder
from tests import variants

JAIL = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
CGROUP = memory.memory_cgroup_problem()
needs_limits = pytest.mark.skipif(
    JAIL is not None or CGROUP is not None or os.geteuid() != 0, reason=f"no jail or cgroup here: {JAIL or CGROUP}"
)
CHAPTER = "ch03_self_attention"

# 4 MB at a time (the kernel's own address space stays small), 256 MB per file (under the 512 MB file-size limit)
_FILL = """
import os
_chunk = b"x" * (4 << 20)
_written = {}
for _where in ("/tmp", os.path.expanduser("~")):
    _written[_where] = 0
    try:
        for _i in range(8):
            with open(os.path.join(_where, f"fill-{_i}.bin"), "wb") as _f:
                for _j in range(64):
                    _f.write(_chunk)
                    _written[_where] += 4
    except OSError as _e:
        print("stopped", _where, _written[_where], "MB", _e)
print("FILLED", _written)
""".strip()


def test_bwrap_binds_the_sized_tmp_and_shm():
    """With the worker's folders, /tmp and /dev/shm are bound from them, not bubblewrap's unsized tmpfs."""
    view = jail.JailView(ro=[], rw=[], hide=[], workdir="/tmp", env={}, tmp="/x/tmp", shm="/x/shm")
    argv = jail.bwrap_argv(view)
    assert ["--bind", "/x/tmp", "/tmp"] == argv[argv.index("/x/tmp") - 1 : argv.index("/x/tmp") + 2]
    assert ["--bind", "/x/shm", "/dev/shm"] == argv[argv.index("/x/shm") - 1 : argv.index("/x/shm") + 2]
    assert "--tmpfs" not in argv
    plain = jail.bwrap_argv(jail.JailView(ro=[], rw=[], hide=[], workdir="/tmp", env={}))
    assert plain.count("--tmpfs") == 2


@pytest.mark.parametrize(
    ("memory_mb", "armed", "died", "oom", "setup", "too_small"),
    [
        (1024, False, True, False, "", True),  # died at start-up under a limit below torch's
        (1280, False, False, False, "MemoryError: Unable to allocate output buffer.", True),
        (6144, False, True, True, "", True),  # OOM-killed before the guard was armed
        (6144, False, True, False, "", False),  # died at start-up for another reason
        (1024, True, True, False, "", False),  # the guard was armed: the submission's code ran
        (0, False, True, False, "", False),  # no limit
    ],
)
def test_startup_failure(memory_mb, armed, died, oom, setup, too_small):
    said = worker.startup_failure(memory_mb, armed, died, oom, setup)
    assert (said is not None) == too_small
    if said is not None:
        reason = str(said)
        assert f"could not start within --memory-mb {memory_mb}" in reason and "raise --memory-mb" in reason
        assert said.render("zh").startswith(f"内核无法在 --memory-mb {memory_mb} 之内启动"), said.render("zh")


def _full_submission() -> str:
    release = builder.build_release(CHAPTER)
    return next(t for t, e in sample_files.sample_submissions(CHAPTER, release).values() if e == "full")


@pytest.mark.slow
@needs_limits
def test_filling_tmp_and_home_stops_at_the_memory_limit(tmp_path, monkeypatch):
    monkeypatch.delenv(jail.JAIL_SWITCH, raising=False)
    full = _full_submission()
    fill = variants._insert_after_first_answer(nbformat.reads(full, as_version=4), _FILL)
    (tmp_path / f"full_1_2_{CHAPTER}.ipynb").write_text(full)
    (tmp_path / f"fill_3_4_{CHAPTER}.ipynb").write_text(nbformat.writes(fill))
    rows = {r.student_id: r for r in batch.grade(sorted(tmp_path.glob("*.ipynb")), CHAPTER, tmp_path / "out", memory_mb=1536, jobs=1)}  # fmt: skip
    filled = rows["fill_3"]
    assert filled.status == "error" and "ran out of its 1536 MB memory limit" in filled.reason, filled.reason
    assert "/tmp" in filled.reason and "home" in filled.reason
    assert filled.score == 0
    other = rows["full_1"]
    assert other.score == other.max_score, (other.reason, other.warnings)


@pytest.mark.slow
@needs_limits
def test_too_small_a_limit_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv(jail.JAIL_SWITCH, raising=False)
    (tmp_path / f"full_1_2_{CHAPTER}.ipynb").write_text(_full_submission())
    (row,) = batch.grade([tmp_path / f"full_1_2_{CHAPTER}.ipynb"], CHAPTER, tmp_path / "out", memory_mb=1024, jobs=1)
    assert row.status == "error" and "could not start within --memory-mb 1024" in row.reason, row.reason
    assert "raise --memory-mb" in row.reason and "the cells of" not in row.reason


def _job(**fields) -> worker.Job:
    blank = dict(canonical="", chapter=CHAPTER, student_id="a", grading="", stage="", sandbox="", result="",
                 graded="", cell_timeout=1, memory_mb=1536, points={}, hidden_files=[], netns=False, uid=-1, threads=1)  # fmt: skip
    return worker.Job(**{**blank, **fields})


def test_no_worker_cgroup_where_none_can_be_made(tmp_path, monkeypatch, caplog):
    """Where no cgroup can be made (not root, no delegated memory controller), the worker runs without one (its job
    says so: no group to join, its kernel's made as before), and the batch says so once."""
    monkeypatch.setattr(memory, "make_memory_cgroup", lambda *a, **k: None)
    job = _job(worker_memory_mb=1024)
    with memory.worker_limit(job.worker_memory_mb) as limit:
        assert limit.group is None and job.worker_cgroup == ""
        assert worker._kernel_cgroup(job) is None
    assert not limit.oom_killed
    monkeypatch.setattr(memory, "memory_cgroup_problem", lambda: "no writable memory cgroup here")
    monkeypatch.setattr(jail, "jail_problem", lambda uid: None)
    with caplog.at_level("WARNING"):
        jail.say(jail.Machine([], None, True, None, [], tmp_path))
    assert "workers' memory is not limited by a cgroup" in caplog.text


def test_a_worker_the_oom_killer_ended_says_so(tmp_path, monkeypatch):
    """The row's reason reads the worker's cgroup (v2 ``memory.events``, v1 ``memory.oom_control``) as the limit
    removes it, with its kernel's."""
    group = tmp_path / "autograder-worker-x"
    group.mkdir()
    removed = []
    monkeypatch.setattr(memory, "make_memory_cgroup", lambda *a, **k: group)
    monkeypatch.setattr(memory, "remove_memory_cgroup", removed.append)
    for events, killed in (("oom 0\noom_kill 0\n", False), ("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n", True)):
        (group / "memory.events").write_text(events)
        with memory.worker_limit(1024) as limit:
            assert limit.group == group
        assert limit.oom_killed is killed and removed[-2:] == [memory.kernel_cgroup_beside(group), group]
    job = _job(worker_memory_mb=1024)
    assert execute.worker_out_of_memory(job, False) is None
    reason = str(execute.worker_out_of_memory(job, True))
    assert "grading worker ran out of its 1024 MB memory limit (--worker-memory-mb)" in reason


@pytest.mark.parametrize("version", [1, 2])
def test_a_cgroup_made_beside_another(tmp_path, version):
    """``make_memory_cgroup(..., parent)`` makes the group in ``parent`` alone (a made-up tree here): v2 with the
    memory controller enabled for its children and no swap, v1 with the memory limit."""
    parent = tmp_path / "batch"
    parent.mkdir()
    if version == 2:
        (parent / "cgroup.controllers").write_text("cpu memory pids\n")
        (parent / "cgroup.subtree_control").write_text("cpu\n")
    group = memory.make_memory_cgroup(256, "autograder-kernel-x", parent)
    assert group == parent / "autograder-kernel-x"
    if version == 2:
        assert (parent / "cgroup.subtree_control").read_text() == "+memory"
        assert (group / "memory.max").read_text() == str(256 << 20) and (group / "memory.swap.max").read_text() == "0"
    else:
        assert (group / "memory.limit_in_bytes").read_text() == str(256 << 20)
    assert memory.make_memory_cgroup(256, "y", tmp_path / "missing") is None


@needs_limits
def test_the_worker_and_its_kernel_get_sibling_cgroups():
    with memory.worker_limit(256) as worker_limit:
        group = worker_limit.group
        assert group is not None and group.name.startswith("autograder-worker-")
        job = _job(worker_memory_mb=256, worker_cgroup=str(group))
        kernel = worker._kernel_cgroup(job)
        assert kernel is not None and kernel.parent == group.parent, "beside the worker's, not inside it"
        assert kernel == memory.kernel_cgroup_beside(group) and kernel.name.startswith("autograder-kernel-")
        limits = [memory.memory_peak(g) >= 0 for g in (group, kernel)]
        assert limits == [True, True]
        version_2 = (group / "memory.max").exists()
        limit = (group / ("memory.max" if version_2 else "memory.limit_in_bytes")).read_text().strip()
        assert int(limit) == 256 << 20
    assert not group.exists() and not kernel.exists(), "both removed with the limit"
    with memory.worker_limit(0) as none:
        assert none.group is None, "0: no worker cgroup"


@needs_limits
def test_a_worker_out_of_memory_is_one_row_that_says_so(tmp_path, monkeypatch):
    """A worker limit far below what grading needs (a full-marks worker allocates tens of MB beyond its fork
    server's imports): the OOM killer ends the worker, its row says so, and its cgroup and its kernel's (which the
    killed worker could not remove) are removed (about 10 s)."""
    monkeypatch.delenv(jail.JAIL_SWITCH, raising=False)
    (tmp_path / f"full_1_2_{CHAPTER}.ipynb").write_text(_full_submission())
    made = []
    make = memory.make_memory_cgroup

    def recorded(memory_mb, name, parent=None):  # the worker's cgroups, made in this process (execute.run_job)
        group = make(memory_mb, name, parent)
        made.extend([group] if group is not None and name.startswith("autograder-worker-") else [])
        return group

    monkeypatch.setattr(memory, "make_memory_cgroup", recorded)
    (row,) = batch.grade(
        [tmp_path / f"full_1_2_{CHAPTER}.ipynb"], CHAPTER, tmp_path / "out", memory_mb=3072, worker_memory_mb=12, jobs=1
    )
    assert row.status == "error" and row.score == 0, row
    assert "grading worker ran out of its 12 MB memory limit" in row.reason, row.reason
    assert made and not any(g.exists() or memory.kernel_cgroup_beside(g).exists() for g in made), "both removed"
