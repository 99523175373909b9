"""A kernel's memory and files under one limit (issue 35; autograder/grading/jail.py "memory and files", README
"Limits").

* the jail's /tmp and /dev/shm are the worker's sized folders when it has them (bubblewrap 0.8 has no ``--size``);
* a kernel that cannot start under ``--memory-mb`` gets a reason that says so, not the first exercise's cells;
* end to end (slow, real kernels, jailed, with a memory cgroup): a submission that writes 2 GB to the jail's /tmp
  and 2 GB to its home under ``--memory-mb 1536`` is stopped at the limit and its row says why; the batch's other
  row is unaffected; at ``--memory-mb 1024`` every kernel's row says the limit is too small for torch.
"""

import os

import nbformat
import pytest

from autograder import notebooks
from autograder.grading import batch, jail, memory, worker
from catalogue import samples as sample_files
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
    reason = worker.startup_failure(memory_mb, armed, died, oom, setup)
    assert (reason is not None) == too_small
    if too_small:
        assert f"could not start within --memory-mb {memory_mb}" in reason and "raise --memory-mb" in reason


def _full_submission() -> str:
    release = notebooks.build_release(CHAPTER)
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
