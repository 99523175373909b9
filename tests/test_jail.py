"""Grading isolation by the operating system (issue 13; autograder/grading/jail.py, README "What the grader
guarantees").

* the jail itself (when bubblewrap works here): a command sees only the view built for it, runs as a uid other
  than 0 when started as root, has a private /tmp and no network;
* the feedback's second line of defence: output lines showing the hidden tests or the reference solution are
  removed and counted (results.py), the student's own printed code is kept;
* end to end (slow, real kernels): a probe submission that walks its whole visible filesystem, graded while a
  batch of another chapter runs, finds no notebook, no gradebook, no hidden-test line, none of its chapter's
  reference, nothing of either batch's folders; its kernel's uid is not 0; and the same probe in fallback mode
  (``AUTOGRADER_JAIL=off``) still gets its row and its score.
"""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import nbformat
import pytest

from autograder import notebooks, releases
from autograder.grading import batch, feedback, jail, redaction, runner, submission
from catalogue import samples as sample_files
from scripts.build_notebooks import notebooks as builder
from tests import variants

JAIL = jail.jail_problem(100000 if os.geteuid() == 0 else -1)
needs_jail = pytest.mark.skipif(JAIL is not None, reason=f"no jail here: {JAIL}")


def _in_jail(view: jail.JailView, code: str) -> subprocess.CompletedProcess:
    python = os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))
    argv = jail.bwrap_argv(view, 100123) + [python, "-I", "-c", code]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


@needs_jail
def test_interrupt_reaches_the_jailed_kernel_only(tmp_path):
    """Jupyter interrupts a kernel by SIGINT to its launcher's process group (jupyter_client's local provisioner):
    the jailed program gets it and lives on; bwrap, which would die of it and take the kernel along, does not."""
    (tmp_path / "rw").mkdir()
    if os.geteuid() == 0:
        os.chown(tmp_path / "rw", 100123, 100123)
    tmp_path.chmod(0o755)
    view = jail.JailView(
        ro=[], rw=[str(tmp_path / "rw")], hide=[], workdir=str(tmp_path / "rw"), env=jail.kernel_env({})
    )
    view.write(tmp_path / "view.json")
    python = os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))
    kernel = (
        "import signal, sys, time\n"
        "hits = []\n"
        "signal.signal(signal.SIGINT, lambda *a: hits.append(1))\n"
        "print('ready', flush=True)\n"
        "end = time.time() + 20\n"
        "while not hits and time.time() < end: time.sleep(0.05)\n"
        "print('interrupted' if hits else 'never interrupted', flush=True)\n"
        "sys.exit(7)\n"
    )
    launcher = (
        "import pathlib, sys; from autograder.grading import jail\n"
        f"view = jail.JailView.read({str(tmp_path / 'view.json')!r})\n"
        f"sys.exit(jail._jailed_kernel(view, 100123, [{python!r}, '-I', '-c', {kernel!r}], "
        f"pathlib.Path({str(tmp_path / 'kernel.pid')!r})))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True, start_new_session=True,
        cwd=notebooks.ROOT,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.time() + 10
        while not (tmp_path / "kernel.pid").exists() and time.time() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # as jupyter_client interrupts
        assert proc.stdout.readline().strip() == "interrupted"
        assert proc.wait(timeout=30) == 7, "the jailed program ended by itself, not killed with its jail"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@needs_jail
def test_jail_shows_only_its_view(tmp_path):
    """Only the view's folders exist; the hidden folder is empty; /tmp is private; no network; uid is not 0."""
    (tmp_path / "rw").mkdir()
    (tmp_path / "ro" / "secret").mkdir(parents=True)
    (tmp_path / "ro" / "secret" / "answer.txt").write_text("42")
    (tmp_path / "ro" / "visible.txt").write_text("ok")
    (tmp_path / "outside.txt").write_text("not shown")
    if os.geteuid() == 0:
        os.chown(tmp_path / "rw", 100123, 100123)
    for p in (tmp_path, tmp_path / "ro", tmp_path / "ro" / "secret"):
        p.chmod(0o755)
    (pathlib.Path("/tmp") / f"host-only-{os.getpid()}").write_text("host")
    view = jail.JailView(
        ro=[str(tmp_path / "ro")],
        rw=[str(tmp_path / "rw")],
        hide=[str(tmp_path / "ro" / "secret")],
        workdir=str(tmp_path / "rw"),
        env=jail.kernel_env({"MARK": "1"}),
    )
    code = (
        "import json, os, socket\n"
        "out = {'uid': os.getuid(), 'cwd': os.getcwd(), 'tmp': os.listdir('/tmp'), 'top': sorted(os.listdir('/')),\n"
        f"  'base': sorted(os.listdir({str(tmp_path)!r})), 'ro': sorted(os.listdir({str(tmp_path / 'ro')!r})),\n"
        f"  'secret': os.listdir({str(tmp_path / 'ro' / 'secret')!r}), 'env': sorted(os.environ)}}\n"
        "open('written.txt', 'w').write('x')\n"
        "open('/tmp/private.txt', 'w').write('x')\n"
        "try:\n"
        "    socket.create_connection(('1.1.1.1', 53), timeout=3); out['net'] = True\n"
        "except OSError:\n"
        "    out['net'] = False\n"
        "print(json.dumps(out))\n"
    )
    run = _in_jail(view, code)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    if os.geteuid() == 0:
        assert seen["uid"] == 100123
    assert seen["cwd"] == str(tmp_path / "rw") and (tmp_path / "rw" / "written.txt").exists()
    assert not any(n.startswith("host-only-") for n in seen["tmp"]), "a private /tmp"
    assert seen["base"] == ["ro", "rw"], "outside.txt and the rest of the host folder are not in the view"
    assert seen["ro"] == ["secret", "visible.txt"] and seen["secret"] == []
    system = {"usr", "bin", "lib", "lib64", "sbin", "proc", "dev", "tmp", "etc"}
    python = {pathlib.PurePosixPath(p).parts[1] for p in jail.python_installation()}
    assert set(seen["top"]) <= system | python, "nothing else of the host's root"
    assert not seen["net"]
    assert "MARK" in seen["env"] and not set(seen["env"]) - {"MARK", "PWD", *jail._KERNEL_ENV}
    (pathlib.Path("/tmp") / f"host-only-{os.getpid()}").unlink()


def test_switch_turns_the_jail_off(monkeypatch):
    monkeypatch.setenv(jail.JAIL_SWITCH, "off")
    assert "switched off" in (jail.jail_problem() or "")


def test_feedback_removes_grader_text_from_outputs(tmp_path):
    """An output that prints hidden-test lines or reference lines is cut from the feedback and counted; the
    student's own code printed back stays."""
    chapter = "ch03_self_attention"
    graded = runner.grading_notebook(releases.release_notebook(chapter), chapter)
    secrets = redaction.grader_secrets(graded, chapter)
    hidden_line = next(s for s in secrets if "_autograder_guard.verdict(" in s)  # the grading test cell's line
    solution = (notebooks.ROOT / "solutions" / f"{chapter}.py").read_text()
    region = re.search(re.escape(notebooks.BEGIN) + r"\n(.*?)" + re.escape(notebooks.END), solution, re.S)
    assert region
    reference = max((ln.strip() for ln in region.group(1).splitlines()), key=len)
    release = builder.build_release(chapter)
    student = variants._insert_after_first_answer(release, "print('mine')")
    for cell in student.cells:  # the grading notebook's test cells, the student's answers
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = "my_own_line_of_code = 12345"
    student.cells.extend(c for c in graded.cells if "BEGIN HIDDEN TESTS" in c.source)
    secrets = redaction.grader_secrets(student, chapter)
    assert hidden_line in secrets and reference in secrets
    leak = nbformat.v4.new_output(
        "stream", name="stdout", text=f"before\n    {hidden_line}\nmy_own_line_of_code = 12345\n{reference}\nafter\n"
    )
    own = next(c for c in student.cells if c.cell_type == "code" and "print('mine')" in c.source)
    own.outputs = [leak]
    # a test cell's output (where the hidden tests run) re-encoded so that no known line matches
    import base64

    encoded = base64.b64encode(hidden_line.encode()).decode()
    student.cells[-1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{encoded}\n")]
    assert redaction.secret_output_lines(student, secrets) == 2
    assert hidden_line in own.outputs[0].text, "counting does not change the notebook"
    page = tmp_path / "feedback.html"
    feedback.write_feedback(page, student, "s1", releases.read(chapter), {}, secrets=secrets)
    html = page.read_text()
    assert "before" in html and "after" in html and "my_own_line_of_code = 12345" in html
    assert "removed by the grader" in html
    import html as html_lib

    assert html_lib.escape(hidden_line) not in html and html_lib.escape(reference) not in html
    # the feedback shows the grader's decision in a test cell, never what the kernel printed there
    assert encoded not in html and "SelfAttention: 0 of 2 points" in html


# ------------------------------------------------------------------------------------------------ end to end

_PROBE = """
import json as _json, os as _os, sys as _sys, time as _time
_install = tuple({_p.rstrip('/') + '/' for _p in (_sys.prefix, _sys.base_prefix, _os.path.realpath(_sys.prefix))})
_seen, _texts = [], {}
for _root, _dirs, _files in _os.walk('/'):
    if _root.startswith(('/proc', '/sys', '/dev', '/usr')) or (_root + '/').startswith(_install):
        _dirs[:] = []
        continue
    for _f in _files:
        _p = _os.path.join(_root, _f)
        _seen.append(_p)
        try:
            if _os.path.getsize(_p) < 5_000_000:
                with open(_p, 'rb') as _fh:
                    _texts[_p] = _fh.read().decode('utf-8', 'ignore')
        except OSError:
            pass
_os.makedirs('/tmp/probe-out', exist_ok=True)
print('PROBE', _json.dumps({'uid': _os.getuid(), 'time': _time.time(), 'paths': sorted(_seen)}))
""".strip()


def _probe_submission(chapter: str, hashes: list[str]) -> str:
    """The chapter's full-score sample with the probe as an extra cell after its last answer; the probe writes
    what it found (paths) to its output, and the file texts it could read go to a file the test reads back."""
    release = builder.build_release(chapter)
    name, (text, expectation) = next(
        (n, v) for n, v in sample_files.sample_submissions(chapter, release).items() if v[1] == "full"
    )
    nb = nbformat.reads(text, as_version=4)
    # the probe's texts: printed as a digest of the secret lines it found (the test gives it the secrets' hashes)
    return nbformat.writes(
        variants._insert_after_first_answer(
            nb, _PROBE + "\n" + _MATCHER.replace("SECRET_HASHES", f"set({hashes!r})"), last=True
        )
    )


_MATCHER = """
import hashlib as _hashlib
_found = []
for _p, _t in _texts.items():
    for _line in _t.splitlines():
        _h = _hashlib.sha256(_line.strip().encode()).hexdigest()
        if _h in SECRET_HASHES:
            _found.append(_p)
            break
print('FOUND', _json.dumps(sorted(set(_found))))
""".strip()


def _secrets(chapter: str, reference: bool = True) -> set[str]:
    """Lines the probe must not find anywhere: the chapter's hidden-test lines and (``reference``) its reference
    solution (other chapters' references are real in the staged ``solutions``, by design: later chapters import
    them)."""
    graded = runner.grading_notebook(releases.release_notebook(chapter), chapter)
    lines = {
        ln.strip()
        for c in graded.cells
        for r in redaction.HIDDEN_REGION.finditer(c.source)
        for ln in r.group(0).split("\n")
    }
    solution = (notebooks.ROOT / "solutions" / f"{chapter}.py").read_text()
    for region in re.finditer(re.escape(notebooks.BEGIN) + r"\n(.*?)" + re.escape(notebooks.END), solution, re.S):
        if reference:
            lines.update(ln.strip() for ln in region.group(1).splitlines())
    visible = {ln.strip() for ln in jail.stub_solution_source(solution).splitlines()}  # the stub keeps these
    return {ln for ln in lines - visible if len(ln) >= 20 and not ln.startswith("#")}


def _grade_probe(tmp_path: pathlib.Path, mode: str) -> dict:
    """Grade the ch03 probe while a ch02 batch runs; what the probe saw, its row and the other batch's window."""
    import hashlib

    chapter, other = "ch03_self_attention", "ch02_bahdanau_attention"
    hashes = sorted(
        hashlib.sha256(s.encode()).hexdigest() for s in _secrets(chapter) | _secrets(other, reference=False)
    )
    text = _probe_submission(chapter, hashes)
    sub = tmp_path / "subs" / f"probe_1_2_{chapter}.ipynb"
    sub.parent.mkdir()
    sub.write_text(text)
    release = builder.build_release(other)
    other_text = next(t for t, e in sample_files.sample_submissions(other, release).values() if e == "full")
    slow = nbformat.writes(
        variants._insert_after_setup(nbformat.reads(other_text, as_version=4), "import time\ntime.sleep(30)")
    )
    other_sub = tmp_path / "other" / f"other_3_4_{other}.ipynb"
    other_sub.parent.mkdir()
    other_sub.write_text(slow)
    window: dict = {}

    def run_other() -> None:  # another instructor's batch: a process of its own (as from the command line)
        window["start"] = time.time()
        cmd = [sys.executable, "-m", "autograder", "grade", "--chapter", other, "--out", str(tmp_path / "out-other")]
        window["run"] = subprocess.run(
            [*cmd, "-j", "1", str(other_sub)], capture_output=True, text=True, timeout=900, cwd=notebooks.ROOT
        )
        window["end"] = time.time()

    thread = threading.Thread(target=run_other)
    thread.start()
    rows = batch.grade([sub], chapter, tmp_path / "out-probe", jobs=1)
    thread.join()
    assert window["run"].returncode == 0, window["run"].stderr[-2000:]
    (result,) = (tmp_path / "out-other" / other / "results").glob("*.json")
    window["result"] = submission.read_result(result)
    graded = nbformat.read(tmp_path / "out-probe" / "graded" / f"{rows[0].student_id}.ipynb", as_version=4)
    outputs = "".join(
        o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
        for c in graded.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    probe = re.search(r"^PROBE (.*)$", outputs, re.M)
    found = re.search(r"^FOUND (.*)$", outputs, re.M)
    assert probe and found, (mode, rows[0].reason, outputs[-2000:])
    return {"rows": rows, "probe": json.loads(probe.group(1)), "found": json.loads(found.group(1)), "window": window}


@pytest.mark.slow
@needs_jail
def test_probe_sees_only_itself_jailed(tmp_path, monkeypatch):
    monkeypatch.delenv(jail.JAIL_SWITCH, raising=False)
    got = _grade_probe(tmp_path, "jailed")
    row, seen = got["rows"][0], got["probe"]
    assert row.score == row.max_score, (row.reason, row.warnings)
    assert got["found"] == [], "no file in the kernel's view holds a hidden-test line or this chapter's reference"
    if os.geteuid() == 0:
        assert seen["uid"] != 0
    paths = seen["paths"]
    assert not [p for p in paths if p.endswith((".ipynb", ".db", ".sqlite"))] or all(
        "/.ipython/" in p for p in paths if p.endswith((".db", ".sqlite"))
    ), "no notebook and no gradebook in view"
    for folder in (tmp_path, pathlib.Path(notebooks.ROOT / "solutions"), pathlib.Path.home()):
        assert not [p for p in paths if p.startswith(str(folder) + "/")], f"nothing of {folder} in view"
    assert not [p for p in paths if "/autograder/samples/" in p or "/.git/" in p]
    assert got["window"]["start"] <= seen["time"] <= got["window"]["end"], "the other batch was running"
    other = got["window"]["result"]
    assert other.status == "graded" and not other.reason, (other.reason, other.warnings)


@pytest.mark.slow
def test_fallback_mode(tmp_path, monkeypatch, caplog):
    """With the jail switched off the batch says so once and grades as before (the guard's file rules)."""
    monkeypatch.setenv(jail.JAIL_SWITCH, "off")
    chapter = "ch03_self_attention"
    release = builder.build_release(chapter)
    text = next(t for t, e in sample_files.sample_submissions(chapter, release).values() if e == "full")
    sub = tmp_path / f"full_1_2_{chapter}.ipynb"
    sub.write_text(text)
    with caplog.at_level("WARNING", logger="autograder.grading"):
        rows = batch.grade([sub], chapter, tmp_path / "out", jobs=1)
    assert sum("not jailed" in r.getMessage() for r in caplog.records) == 1
    assert rows[0].score == rows[0].max_score, (rows[0].reason, rows[0].warnings)


@pytest.mark.slow
def test_fallback_kernels_talk_over_socket_files_not_tcp_ports(tmp_path, monkeypatch):
    """In fallback mode too the kernel's channels are socket files (zmq's ipc transport) in a short folder of the
    worker's, not TCP ports on loopback: jupyter_client picks free ports that a kernel started beside it can take
    before this one binds them ("Address already in use", the kernel dead before its first reply). Two kernels side
    by side, each saying its transport; both graded in full."""
    monkeypatch.setenv(jail.JAIL_SWITCH, "off")
    chapter = "ch03_self_attention"
    release = builder.build_release(chapter)
    text = next(t for t, e in sample_files.sample_submissions(chapter, release).values() if e == "full")
    said = "from ipykernel.kernelapp import IPKernelApp\nprint('transport:', IPKernelApp.instance().transport)"
    nb = variants._insert_after_first_answer(nbformat.reads(text, as_version=4), said)
    subs = []
    for who in ("a", "b"):
        cell = next(c for c in nb.cells if c.id == "student-cell")
        cell.source += f"\n# {who}"  # two distinct notebooks: two kernels, started side by side
        subs.append(tmp_path / f"{who}_1_2_{chapter}.ipynb")
        nbformat.write(nb, subs[-1])
    rows = batch.grade(subs, chapter, tmp_path / "out", jobs=2)
    for row in rows:
        assert row.score == row.max_score, (row.reason, row.warnings)
        graded = (tmp_path / "out" / "graded" / f"{row.student_id}.ipynb").read_text()
        assert "transport: ipc" in graded and "transport: tcp" not in graded


def test_grading_refuses_to_run_unjailed_without_the_flag(tmp_path):
    """Fail closed: where the jail cannot run (here: switched off), `python -m autograder grade` refuses untrusted
    submissions and says how to install bubblewrap; with --no-jail it grades, and the summary says the kernels were
    not jailed. (An empty file needs no kernel: its row is a zero with its reason.)"""
    sub = tmp_path / f"empty_1_2_{'ch03_self_attention'}.ipynb"
    sub.write_text("")
    env = {**os.environ, jail.JAIL_SWITCH: "off"}
    cmd = [sys.executable, "-m", "autograder", "grade", str(sub), "--out", str(tmp_path / "out"), "-j", "1"]
    refused = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=notebooks.ROOT, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "apt-get install bubblewrap" in refused.stderr and "--no-jail" in refused.stderr
    assert not (tmp_path / "out").exists(), "nothing graded"
    ran = subprocess.run([*cmd, "--no-jail"], capture_output=True, text=True, env=env, cwd=notebooks.ROOT, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "WITHOUT the jail" in ran.stdout
    summary = (tmp_path / "out" / "ch03_self_attention" / "summary.md").read_text()
    assert "NOT jailed" in summary, summary
    grades = (tmp_path / "out" / "ch03_self_attention" / "grades.csv").read_text()
    assert "the file is empty" in grades


@pytest.mark.slow
@pytest.mark.parametrize("chapter", ["ch08_kv_cache", "ch10_flash_attention"])
def test_replacing_pytorchs_comparison_kernels_gains_nothing(chapter, tmp_path):
    """The red team's attack below Python (jailed or not): CPU kernels for aten::allclose and aten::equal that always
    say True, registered through torch.library next to a buggy answer. They bend only the kernel's own comparisons:
    the worker judges the record with its own, so the buggy exercise still scores zero, for the check's reason."""
    release = nbformat.read(notebooks.RELEASE_DIR / f"{chapter}.ipynb", as_version=4)
    var = variants.variants(chapter, release)["kernel_override_on_a_bug"]
    sub = tmp_path / f"override_1_2_{chapter}.ipynb"
    sub.write_text(var.text)
    (row,) = batch.grade([sub], chapter, tmp_path / "out", jobs=1)
    full = {ex.name: float(ex.points) for ex in notebooks.checks_module(chapter).EXERCISES}
    assert row.scores[var.target] == 0, (row.scores, row.reason, row.warnings)
    assert all(row.scores[n] <= full[n] for n in full)
    assert f"{var.target}: " in row.reason, (row.reason, row.warnings)  # the worker's failed check, not a crash


def test_fallback_kernels_never_run_as_root_unless_allowed(tmp_path, monkeypatch):
    """Issue 35: without the jail, a kernel that cannot drop to its own uid (root, the Python installation unreadable
    to others) would run as root: the batch refuses before any kernel starts, and says what to do instead."""
    monkeypatch.setenv(jail.JAIL_SWITCH, "off")
    monkeypatch.delenv(jail.ROOT_KERNELS, raising=False)
    monkeypatch.setattr(jail, "uid_drop_possible", lambda: False)
    monkeypatch.setattr(jail.os, "geteuid", lambda: 0)
    assert "would run as root" in jail.root_kernel_problem(jailed=False)
    assert jail.root_kernel_problem(jailed=True) is None
    sample = next((notebooks.SAMPLES / "ch02_bahdanau_attention").glob("lovelace*.ipynb"))  # a readable notebook
    with pytest.raises(jail.RootKernelRefused, match="bubblewrap"):
        batch.grade([sample], "ch02_bahdanau_attention", tmp_path / "out", memory_mb=3072)
    monkeypatch.setenv(jail.ROOT_KERNELS, "allow")
    assert jail.root_kernel_problem(jailed=False) is None
