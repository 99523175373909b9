"""Grading survives real submissions: damaged and hostile variants of every chapter (tests/variants.py).

* every variant of every chapter is canonicalised (no kernel): answers found, tests restored, warnings given;
* graded with nbgrader's real gradebook and kernels, one parallel batch per chapter (files whose canonical form is
  identical share a kernel run). Each file gives exactly one row; harmless damage gives the reference's score,
  hostile code never more than earned, and the reason names what happened.

Kernel-graded tiers (each hostile variant costs a kernel run, and chapters keep coming): ``FULL_SET`` grades every
variant; every other chapter grades every harmless and invalid variant, ``imports_reference`` (it depends on the
chapter's staged solutions) and a rotation of ``ROTATION`` further hostile variants, so that each hostile variant
is graded with kernels on at least two chapters (``test_rotation_covers_every_hostile_variant``). Set
``ATTENTION_COURSE_ALL_VARIANTS=1`` to grade every variant of every chapter (before a release).
"""

import contextlib
import csv
import json
import os
import re
import subprocess
import sys
import threading
import zipfile

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import batch, collect, jail, lms, memory, report
from scripts.build_notebooks import notebooks as builder
from tests import variants
from tests.test_grading import check_sample_rows

CHAPTERS = notebooks.chapters()
FULL_SET = "ch03_self_attention"
ROTATION = 3
ALL_VARIANTS = os.environ.get("ATTENTION_COURSE_ALL_VARIANTS") == "1"
_RELEASES: dict = {}
# hostile variants of one chapter, graded by a test of their own (not in the rotation): chapter -> names
ECHOES = {"echoing_blocks_position_ids_ignored": "ch06_gpt", "echoing_blocks_never_run": "ch06_gpt"}
ORACLE_CALLS = {"calls_the_checks_oracles": "ch09_sparse_attention"}
OWN_TEST = {**ECHOES, **ORACLE_CALLS, "floods_the_records": variants.FLOOD_CHAPTER}
# hostile variants graded on every chapter that has them, not in the rotation (issue 46: CI grades them on chapters 8
# and 9): the grader's knowledge used as the answer
EVERY_CHAPTER = ("calls_the_checks_oracles", "answers_with_the_course_versions")
# issue 46's late verdicts: variants of a few chapters, graded on each by a test of their own (not in the rotation)
LATE_VERDICTS = (
    "late_verdict_with_kept_reference",
    "late_verdict_renumbered_by_json",
    "late_verdict_signed_again_with_the_recorders_key",
)
# hostile variants of one chapter, graded with kernels on that chapter in every run (issue 46: measurements that the
# answer switches off; issue 35: a chapter's own ways of changing the question, chapters 13 and 14): name -> chapter
OWN_CHAPTER = {**variants.MEASURED_VARIANTS, **variants.QUESTION_VARIANTS}


def kernel_tier(chapter: str, all_variants: dict) -> list[str]:
    """The variants of ``chapter`` graded with kernels in the default run (see the module docstring)."""
    if ALL_VARIANTS or chapter == FULL_SET:
        return list(all_variants)
    rotating = sorted(
        n
        for n, v in all_variants.items()
        if v.kind == "hostile"
        and n not in ("imports_reference", *OWN_TEST, *EVERY_CHAPTER, *LATE_VERDICTS, *OWN_CHAPTER)
    )
    others = [c for c in CHAPTERS if c != FULL_SET]
    start = others.index(chapter) * ROTATION
    chosen = {rotating[(start + i) % len(rotating)] for i in range(ROTATION)}
    # the strongest late verdict (signed again with the recorder's key) too, on every chapter that has it (CI: ch08)
    always = {"imports_reference", *EVERY_CHAPTER, *OWN_CHAPTER, LATE_VERDICTS[-1]}
    return [n for n, v in all_variants.items() if v.kind != "hostile" or n in always or n in chosen]


def test_rotation_covers_every_hostile_variant():
    """Every hostile variant is kernel-graded on FULL_SET and on at least one other chapter."""
    covered: dict[str, set] = {}
    for chapter in CHAPTERS:
        vs = variants.variants(chapter, _release(chapter))
        for name in kernel_tier(chapter, vs):
            covered.setdefault(name, set()).add(chapter)
    hostile = {n for c in CHAPTERS for n, v in variants.variants(c, _release(c)).items() if v.kind == "hostile"}
    # attacks on one chapter's exercises (keeps_a_handed_reference: graded by the test of issue 35's attacks)
    one_chapter = {
        "dispatch_subclass_weights",
        "keeps_a_handed_reference",
        *OWN_TEST,
        *EVERY_CHAPTER,
        *LATE_VERDICTS,
        *OWN_CHAPTER,
    }
    assert all(
        FULL_SET in covered[n] for n in hostile if n not in ("keeps_a_handed_reference", *OWN_TEST, *OWN_CHAPTER)
    )
    assert all(covered[n] == {c} for n, c in OWN_CHAPTER.items())
    lonely = sorted(n for n in hostile if n not in one_chapter and len(covered[n]) < 2)
    assert not lonely, f"hostile variants graded with kernels on one chapter only: {lonely}"


def _release(chapter):
    """The committed release notebook (equal to a fresh build: tests/test_notebooks.py checks that)."""
    if chapter not in _RELEASES:
        _RELEASES[chapter] = releases.release_notebook(chapter)
    return _RELEASES[chapter]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_canonicalisation_of_every_variant(chapter):
    release = _release(chapter)
    filled = builder.fill_release(release, chapter)
    answers = {c.id: c.source for c in filled.cells if c.metadata.get("nbgrader", {}).get("solution")}
    graded_cells = {c.id: c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("grade")}
    for name, var in variants.variants(chapter, release).items():
        if var.kind == "invalid":
            with pytest.raises(canonical.Ungradeable, match=var.reason):
                canonical.canonicalise(var.text, release)
            continue
        nb, warnings = canonical.canonicalise(var.text, release)
        nbformat.validate(nb)
        got = {c.id: c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
        assert set(got) == set(answers), name
        tests = {c.id: c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        assert tests == graded_cells, f"{name}: every test cell restored from the release"
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
        assert nb.metadata["kernelspec"]["name"] == notebooks.KERNELSPEC["name"]
        if var.expect == "full":
            assert got == answers, f"{name}: the student's answers are graded"
        if name in ("stub", "tests_edited_on_stub"):
            assert canonical.stub_answers(nb) == list(answers)
        if var.reason and (var.kind == "damage" and name != "stub" or name == "tests_edited_on_stub"):
            assert any(var.reason in str(w) for w in warnings), (name, warnings)
        if name == "reference":
            assert warnings == [], warnings


def test_stubbed_solution_module_keeps_helpers(tmp_path):
    chapter = FULL_SET
    stage = jail.stage_solutions(chapter, tmp_path / "stage")
    text = (stage / "solutions" / f"{chapter}.py").read_text()
    assert all(line.strip() != notebooks.BEGIN for line in text.splitlines()) and "raise NotImplementedError()" in text
    ns: dict = {}
    exec(compile(text, "stub", "exec"), ns)
    ns["check_qkv_shapes"]  # helpers outside the solution regions stay usable
    with pytest.raises(NotImplementedError):
        ns["causal_mask"](3)
    assert any(p.endswith(f"solutions/{chapter}.py") for p in jail.hidden_files(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_staged_solutions_hold_no_reference_of_this_or_a_later_chapter(chapter, tmp_path):
    """A grading kernel sees only the solution modules its chapter imports: earlier chapters and shared modules
    (real), its own (stubbed: no solution region's body), no later chapter; and they suffice to import it."""
    stage = jail.stage_solutions(chapter, tmp_path / "stage") / "solutions"
    staged = {q.stem for q in stage.glob("*.py")} - {"__init__"}
    order = CHAPTERS.index(chapter)
    later = {c for c in CHAPTERS[order + 1 :]}
    assert chapter in staged and not staged & later, sorted(staged)
    reference = (notebooks.ROOT / "solutions" / f"{chapter}.py").read_text()
    bodies = re.findall(re.escape(notebooks.BEGIN) + r"\n(.*?)" + re.escape(notebooks.END), reference, re.S)
    staged_text = (stage / f"{chapter}.py").read_text()
    lines = {ln.strip() for body in bodies for ln in body.splitlines() if len(ln.strip()) > 25}
    lines -= {ln.strip() for ln in jail.stub_solution_source(reference).splitlines()}  # also outside the regions
    assert lines and not [ln for ln in lines if ln in staged_text]
    for earlier in staged - {chapter}:
        assert (stage / f"{earlier}.py").read_bytes() == (notebooks.ROOT / "solutions" / f"{earlier}.py").read_bytes()
    code = f"import sys; sys.path.insert(0, {str(stage.parent)!r}); import solutions.{chapter}"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]


def test_lms_zip_is_expanded(tmp_path):
    """Every file of the zip is a submission (a row; a zero if it is no notebook) but what an OS or editor added."""
    z = tmp_path / "submissions.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("folder/smithjane_1_2_ch03_self_attention.ipynb", "{}")
        f.writestr("readme.txt", "x")
        f.writestr("__MACOSX/folder/._smithjane_1_2_ch03_self_attention.ipynb", "x")
        f.writestr("folder/.ipynb_checkpoints/smithjane_1_2_ch03_self_attention-checkpoint.ipynb", "{}")
    ignored: list[str] = []
    files = collect.expand_submissions([z], tmp_path / "unzipped", ignored)
    assert sorted(p.name for p in files) == ["readme.txt", "smithjane_1_2_ch03_self_attention.ipynb"]
    assert len(ignored) == 2 and all("operating system or editor" in i for i in ignored), ignored


def test_selfcheck_command(tmp_path):
    release = _release(FULL_SET)
    vs = variants.variants(FULL_SET, release)
    ok_file = tmp_path / f"me_{FULL_SET}.ipynb"
    ok_file.write_text(vs["metadata_stripped"].text)
    bad_file = tmp_path / f"me2_{FULL_SET}.ipynb"
    bad_file.write_text(vs["truncated_json"].text)
    run = lambda p: subprocess.run(
        [sys.executable, "-m", "autograder", "selfcheck", str(p)], capture_output=True, text=True, timeout=300
    )
    good, bad = run(ok_file), run(bad_file)
    assert good.returncode == 0 and "gradeable" in good.stdout and "metadata missing" in good.stdout
    assert bad.returncode == 1 and "NOT GRADEABLE" in bad.stdout


def test_selfcheck_cell_in_the_notebook(tmp_path, monkeypatch, capsys):
    """The notebook's "Before you submit" cell reads the file Jupyter has open (JPY_SESSION_NAME)."""
    release = _release(FULL_SET)
    assert any("selfcheck_here" in c.source for c in release.cells), "every notebook ends with the self-check cell"
    vs = variants.variants(FULL_SET, release)
    damaged = tmp_path / "mine.ipynb"
    damaged.write_text(vs["metadata_stripped"].text)
    monkeypatch.setenv("JPY_SESSION_NAME", str(damaged))
    assert canonical.selfcheck_here(FULL_SET) is True
    out = capsys.readouterr().out
    assert "gradeable" in out and "metadata missing" in out
    damaged.write_text(vs["truncated_json"].text)
    assert canonical.selfcheck_here(FULL_SET) is False
    assert "NOT GRADEABLE" in capsys.readouterr().out
    monkeypatch.delenv("JPY_SESSION_NAME")
    assert canonical.selfcheck_here(FULL_SET) is False
    assert "python -m autograder selfcheck" in capsys.readouterr().out


def _grade_named_variants(chapter, names, tmp_path, first_id):
    """Grade those of ``names`` that are variants of ``chapter`` through the real grader, one file each (Canvas
    names, ids from ``first_id``); returns (the variants, file name -> variant name, the rows, each exercise's full
    points)."""
    all_variants = variants.variants(chapter, _release(chapter))
    names = [n for n in names if n in all_variants]
    folder = tmp_path / "subs"
    folder.mkdir()
    files = {}
    for i, name in enumerate(names):
        path = folder / f"student{i:02d}_{first_id + i}_{first_id + 1000 + i}_{chapter}.ipynb"
        path.write_text(all_variants[name].text)
        files[path.name] = name
    rows = batch.grade(
        sorted(folder.glob("*.ipynb")),
        chapter,
        tmp_path / "out",
        cell_timeout=30,
        notebook_timeout=300,
        memory_mb=3072,
        jobs=2,
    )
    full = {ex.name: float(ex.points) for ex in notebooks.checks_module(chapter).EXERCISES}
    assert len(rows) == len(names)
    return all_variants, files, rows, full


QUESTION_CHAPTERS = [
    "ch03_self_attention",
    "ch04_multi_head_attention",
    "ch06_gpt",  # its checks judged in the kernel alone: the kernel registered inside a check
    "ch08_kv_cache",
    "ch09_sparse_attention",
    "ch10_flash_attention",
]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", QUESTION_CHAPTERS)
def test_answers_that_change_the_question_earn_nothing(chapter, tmp_path):
    """Issue 35, through the real grader: answers that zero the tensors a check hands them (and then compute the
    right thing from the zeroed inputs) score zero on every such exercise; a kernel registered from inside a
    check leaves the buggy answer at zero; chapter 4's kept course version of merge_heads earns nothing."""
    kinds = ["zeroes_its_inputs", "registers_a_kernel_in_the_check", "keeps_a_handed_reference"]
    all_variants, files, rows, full = _grade_named_variants(chapter, kinds, tmp_path, 7000)
    for row in rows:
        var = all_variants[files[row.submission]]
        explain = f"{files[row.submission]}: {row.scores} {row.status} {row.reason} {row.warnings}"
        assert all(row.scores[n] <= full[n] for n in full), explain
        if var.expect == "targets_zero":
            assert var.targets and all(row.scores[n] == 0 for n in var.targets), explain
            feedback = (tmp_path / "out" / "feedback" / f"{row.student_id}.html").read_text()
            assert "changed its input in place" in feedback, explain
        elif var.expect == "target_zero":
            assert row.scores[var.target] == 0, explain
        else:
            assert row.score == 0, explain


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(set(ECHOES.values())))
def test_parts_of_the_answer_feed_no_oracle(chapter, tmp_path):
    """Issue 46, through the real grader: sub-modules of the answer that, called by the check on their own, echo what
    the whole answer computed (chapter 6: blocks echoing the GPT's last hidden state) lift nothing; each variant
    scores as its bug without the echo (the buggy exercise zero, every other one full)."""
    chosen = [n for n, c in ECHOES.items() if c == chapter]
    all_variants, files, rows, full = _grade_named_variants(chapter, chosen, tmp_path, 7200)
    for row in rows:
        var = all_variants[files[row.submission]]
        explain = f"{files[row.submission]}: {row.scores} {row.status} {row.reason} {row.warnings}"
        assert var.expect == "one_zero" and row.status == "graded", explain
        assert row.scores == {**full, var.target: 0.0}, explain


class _Peaks(threading.Thread):
    """Samples, every 0.1 s until stopped, the resident peak (``VmHWM``) of every process below this one (the fork
    server, the workers, their kernels), this process's own resident memory (``VmRSS``: its peak may predate the
    batch), and the peak of each worker's memory cgroup (where the grader made one): name -> MB."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[str, int] = {}
        self.done = threading.Event()

    @staticmethod
    def _status(pid: str) -> dict[str, str]:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f if ":" in line)

    def _keep(self, name: str, mb: int) -> None:
        self.peaks[name] = max(self.peaks.get(name, 0), mb)

    def run(self) -> None:
        me = os.getpid()
        groups = [d for _, d in memory.cgroup_dirs("memory")]
        while not self.done.wait(0.1):
            parents, status = {}, {}
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                try:
                    status[pid] = self._status(pid)
                    parents[pid] = status[pid]["PPid"].strip()
                except (OSError, KeyError):
                    continue
            for pid, st in status.items():
                up = pid
                for _ in range(40):
                    up = parents.get(up, "0")
                    if up in ("0", str(me)):
                        break
                if up == str(me) and "VmHWM" in st:
                    with contextlib.suppress(OSError):
                        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                        role = next((a.decode() for a in cmd if a.startswith(b"autograder.grading.")), "")
                        role = "kernel" if any(b"ipykernel" in a for a in cmd) else role or cmd[0].decode()
                        if b"serve" in cmd:  # the fork server, or a worker forked from it
                            role = "worker (forked)" if parents[pid] != str(me) else "fork server"
                        self._keep(f"{role} (pid {pid})", int(st["VmHWM"].split()[0]) >> 10)
            self._keep("batch (this process, resident)", int(status.get(str(me), {}).get("VmRSS", "0 kB").split()[0]) >> 10)  # fmt: skip
            for group in (g for top in groups for g in top.glob("autograder-worker-*")):
                self._keep(f"cgroup {group.name}", memory.memory_peak(group) >> 20)

    def stop(self) -> dict[str, int]:
        self.done.set()
        self.join()
        return self.peaks


@pytest.mark.slow
def test_a_flood_of_records_leaves_every_grading_process_under_a_gigabyte(tmp_path):
    """Issue 46, the bounded worker, through the real grader: a notebook that runs the verdict 200 times itself, its
    answer returning 5 MB of random integers each time, as much as one call's record holds (200 records of about
    6.8 MB, 1.4 GB in all). The worker keeps 128 MB of them (in its own memory cgroup, where the grader may make one);
    every grading process — the batch, the fork server, the worker, the kernel — stays under 1 GB resident, sampled
    during the run; the row is an integrity zero that says how many records were dropped."""
    chapter = variants.FLOOD_CHAPTER
    var = variants.variants(chapter, _release(chapter))["floods_the_records"]
    path = tmp_path / f"student_7300_8300_{chapter}.ipynb"
    path.write_text(var.text)
    peaks = _Peaks()
    peaks.start()
    try:
        (row,) = batch.grade([path], chapter, tmp_path / "out", cell_timeout=120, notebook_timeout=600, memory_mb=3072)
    finally:
        seen = peaks.stop()
    print("peak resident memory, MB:", json.dumps(seen, indent=1))
    assert row.status == "integrity" and row.score == 0, row
    dropped = re.search(r"(\d+) record\(s\) dropped", row.reason)
    assert dropped and int(dropped[1]) >= variants.FLOOD_RECORDS - variants.FLOOD_KEPT, row.reason
    assert any(name.startswith("kernel") for name in seen) and any("worker" in name for name in seen), seen
    assert max(seen.values()) < 1024, seen


@pytest.mark.slow
@pytest.mark.parametrize("chapter", ["ch03_self_attention", "ch04_multi_head_attention", "ch09_sparse_attention"])
def test_the_graders_knowledge_earns_nothing(chapter, tmp_path):
    """Issue 46, through the real grader: answers that call the checks module's oracles (chapter 9, named from two
    strings) or return the course's versions of the exercises from ``EXERCISES`` score zero: the kernel imports the
    checks in their kernel form (``grading/questions.py``), which holds neither."""
    chosen = [n for n in ("calls_the_checks_oracles", "answers_with_the_course_versions") if n in variants.variants(chapter, _release(chapter))]  # fmt: skip
    all_variants, files, rows, full = _grade_named_variants(chapter, chosen, tmp_path, 7300)
    assert rows and len(rows) == len(chosen)
    for row in rows:
        explain = f"{files[row.submission]}: {row.scores} {row.status} {row.reason} {row.warnings}"
        assert row.score == 0, explain


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(variants.LATE_VERDICT_CHAPTERS))
def test_one_verdict_per_exercise_in_the_notebooks_order(chapter, tmp_path):
    """Issue 46, through the real grader: the first exercise's verdict sent by the notebook itself after a later
    exercise's, with the course's version of the first exercise kept from the later one's check (and, hiding it,
    the records renumbered through json.JSONEncoder, or signed again with the key taken from the recorder's frame by
    code with globals of its own), and every verdict run a second time: each an integrity zero that names it. The
    old grader gave the late verdict the first exercise's points (ch03 4/10, ch04 3/7, ch08 2/10)."""
    chosen = [*LATE_VERDICTS, "reruns_verdicts"]
    all_variants, files, rows, full = _grade_named_variants(chapter, chosen, tmp_path, 7300)
    assert len(rows) == len(chosen)
    for row in rows:
        var = all_variants[files[row.submission]]
        explain = f"{files[row.submission]}: {row.scores} {row.status} {row.reason} {row.warnings}"
        assert var.expect == "integrity" and row.status == "integrity" and row.score == 0, explain
        assert row.reason.startswith("integrity: ") and var.reason in row.reason, explain


@pytest.mark.slow
def test_a_fresh_posixsubprocess_is_refused_without_the_jail(tmp_path, monkeypatch):
    """Fallback mode (no jail), where nothing but the guard keeps the kernel from starting processes: the fresh
    copy of _posixsubprocess is refused at its import, and the row says so."""
    monkeypatch.setenv(jail.JAIL_SWITCH, "off")
    chapter = "ch02_bahdanau_attention"
    var = variants.variants(chapter, _release(chapter))["loads_a_fresh_posixsubprocess"]
    path = tmp_path / f"student_7100_8100_{chapter}.ipynb"
    path.write_text(var.text)
    (row,) = batch.grade([path], chapter, tmp_path / "out", cell_timeout=30, notebook_timeout=300, memory_mb=3072)
    assert row.score == 0 and "spawning a process" in row.reason + " ".join(map(str, row.warnings)), row
    graded = next((tmp_path / "out" / "graded").glob("*.ipynb")).read_text()
    assert "loaded <module" not in graded


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_variants_grade_as_expected(chapter, tmp_path):
    release = _release(chapter)
    all_variants = variants.variants(chapter, release)
    chosen = kernel_tier(chapter, all_variants)
    folder = tmp_path / "subs"
    folder.mkdir()
    files = {}
    for i, name in enumerate(chosen):
        path = folder / f"student{i:02d}_{5000 + i}_{6000 + i}_{chapter}.ipynb"  # ids apart from the samples'
        path.write_text(all_variants[name].text)
        files[path.name] = name
    for sample in sorted((notebooks.SAMPLES / chapter).glob("*.ipynb")):  # the shipped samples, same batch
        (folder / sample.name).write_bytes(sample.read_bytes())
    out = tmp_path / "out"
    kwargs = dict(cell_timeout=30, notebook_timeout=300, memory_mb=3072, jobs=2)
    rows = batch.grade(sorted(folder.glob("*.ipynb")), chapter, out, **kwargs)

    n_files = len(list(folder.glob("*.ipynb")))
    assert len(rows) == n_files and len({r.submission for r in rows}) == n_files, "exactly one row per file"
    with open(out / report.CSV_NAME) as f:
        assert len(list(csv.DictReader(f))) == n_files
    check_sample_rows(chapter, rows, out)
    all_rows, rows = rows, [r for r in rows if r.submission in files]
    assert (out / "summary.md").exists() and (out / "summary.png").stat().st_size > 0
    exercises = notebooks.checks_module(chapter).EXERCISES
    full = {ex.name: float(ex.points) for ex in exercises}
    for row in rows:
        name = files[row.submission]
        var = all_variants[name]
        explain = f"{name}: {row.scores} {row.status} {row.reason} {row.warnings}"
        if var.expect == "full":
            assert row.scores == full, explain
        elif var.expect == "zero":
            assert row.score == 0 and row.reason, explain
        elif var.expect == "one_zero":
            assert row.status == "graded" and row.scores == {**full, var.target: 0.0}, explain
        elif var.expect == "target_zero":
            assert row.scores[var.target] == 0 and all(row.scores[n] <= full[n] for n in full), explain
        elif var.expect == "targets_zero":
            assert all(row.scores[n] == 0 for n in var.targets), explain
            assert all(row.scores[n] <= full[n] for n in full), explain
        elif var.expect == "integrity":
            assert row.status == "integrity" and row.score == 0 and row.reason.startswith("integrity: "), explain
        else:
            assert all(row.scores[n] <= full[n] for n in full) and (row.reason or row.warnings), explain
        if var.reason:
            assert var.reason in row.reason + " ".join(map(str, row.warnings)), explain
        if var.kind == "hostile":
            assert all(row.scores[n] <= full[n] for n in full)
        if row.status != "error":
            feedback = (out / "feedback" / f"{row.student_id}.html").read_text()
            assert "BEGIN HIDDEN TESTS" not in feedback and "hidden=True" not in feedback
            assert "_autograder_guard" not in feedback

    # Resumable and deterministic: a rerun skips every graded file and gives the same table.
    before = (out / report.CSV_NAME).read_text()
    results = {p.name: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}
    again = batch.grade(sorted(folder.glob("*.ipynb")), chapter, out, **kwargs)
    assert [(r.submission, r.scores) for r in again] == [(r.submission, r.scores) for r in all_rows]
    assert (out / report.CSV_NAME).read_text() == before
    assert {p.name: json.loads(p.read_text()) for p in (out / "results").glob("*.json")} == results


@pytest.mark.slow
def test_notebook_time_limit(tmp_path):
    """No cell passes the per-cell limit, but together they pass the per-notebook limit: a zero with the reason."""
    release = _release(FULL_SET)
    nb = variants._insert_after_first_answer(release, "import time\ntime.sleep(60)")
    sub = tmp_path / f"slowpoke_1_2_{FULL_SET}.ipynb"
    sub.write_text(nbformat.writes(nb))
    rows = batch.grade([sub], FULL_SET, tmp_path / "out", cell_timeout=90, notebook_timeout=25, jobs=1)
    assert len(rows) == 1 and rows[0].score == 0 and rows[0].status == "error"
    assert "longer than 25 s in total" in rows[0].reason


def test_zip_entries_with_long_or_clashing_names_each_become_a_file(tmp_path):
    """A 300-character entry name (over the file system's 255 bytes) is cut, keeping its start and suffix; two
    entries whose names differ only in characters a file name cannot keep both survive; a rerun extracts the
    same files again, without duplicates."""
    z = tmp_path / "submissions.zip"
    long_name = "smithjane_1_2_" + "x" * 300 + "_ch03_self_attention.ipynb"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(long_name, "{}")
        f.writestr("doe?john_3_4_ch03_self_attention.ipynb", "{}")
        f.writestr("doe*john_3_4_ch03_self_attention.ipynb", "{}")
    for _ in range(2):
        files = collect.expand_submissions([z], tmp_path / "unzipped")
        names = sorted(p.name for p in files)
        assert len(names) == 3, names
        assert all(len(n.encode()) <= 160 and n.endswith(".ipynb") for n in names), names
        assert any(n.startswith("smithjane_1_2_x") for n in names)
    labels = collect.submission_labels(files, {p: lms.parse(p) for p in files})
    assert len(set(labels.values())) == 3


@pytest.mark.parametrize(
    "data, says",
    [
        (b"", "the file is empty"),
        (b" \n\t", "the file is empty (only blank space)"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3", "this is a PDF, not a .ipynb file"),
        (b"PK\x03\x04\x14\x00", "this is a zip archive"),
        (b'{"cells": [', "not valid JSON"),
    ],
)
def test_zero_reasons_say_what_the_file_is(data, says):
    with pytest.raises(canonical.Ungradeable, match=re.escape(says)):
        canonical.parse(data)
