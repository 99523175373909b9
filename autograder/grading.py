"""Grade a folder of submitted notebooks with nbgrader, one row per submission.

``grade(paths, chapter, out)``:

1. canonicalises every file against the release notebook (``canonical.py``): a file that is not a notebook gets
   a zero with the reason at once, and the batch goes on; files whose canonical form is identical are grouped;
2. builds the grading notebook for ``chapter`` (the instructor notebook plus the guard's lines) and runs
   nbgrader's ``generate_assignment`` in a fresh course directory under ``out/course`` (this records every test
   cell, hidden tests included, and its points in nbgrader's sqlite gradebook);
3. runs each distinct canonical notebook once, ``jobs`` at a time, in its own sandboxed worker
   (``sandbox.py``): nbgrader's real ``autograde`` in a fresh kernel, which restores every test cell from the
   gradebook; the worker gives points only with the guard's passing records (``guard.py``);
4. writes ``out/grades.csv`` (one row per submission file: per-exercise scores, total, status, reason, warnings),
   ``out/summary.*`` and ``out/feedback/<student>.html``. The feedback shows the student's code and the check
   messages; the source of the hidden tests is removed and a failed test's traceback is cut to its message
   (hidden checks' messages never contain reference values).
"""

from __future__ import annotations

import collections
import concurrent.futures
import csv
import dataclasses
import hashlib
import html
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
import zipfile
import zlib

import nbformat

from . import lms, notebooks
from .releases import chapter_from_filename  # noqa: F401 - re-exported: one home, the self-check uses it too

CSV_NAME = "grades.csv"


@dataclasses.dataclass
class Row:
    submission: str
    student_id: str
    chapter: str
    scores: dict[str, float]
    score: float
    max_score: float
    status: str  # "graded", "error" (not gradeable: zero) or "integrity" (grading machinery changed: zero)
    reason: str
    warnings: list[str] = dataclasses.field(default_factory=list)
    lms: str = ""  # "canvas", "moodle" or "": whose download name the file has (autograder/lms.py)
    lms_id: str = ""  # Canvas user id / Moodle participant id from the name
    name: str = ""  # the student's name as the LMS wrote it
    late: bool | None = None  # Canvas's LATE marker; None when the name does not say
    graded_at: float = 0.0  # when the result was recorded (seconds since the epoch)


def student_id_from_filename(path, taken: set[str]) -> str:
    """A gradebook id from an LMS download name, unique in ``taken``: name and LMS id
    ('smithjane_1234_5678_ch03_x.ipynb' -> 'smithjane_1234'; Moodle's 'Jane Smith_77_assignsubmission_file/x.ipynb'
    -> 'Jane-Smith_77'), else the file's stem."""
    who = lms.parse(path)
    base = f"{who.name}_{who.lms_id}" if who.lms else pathlib.PurePath(path).stem
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-") or "student"
    sid, n = base, 1
    while sid in taken:
        n += 1
        sid = f"{base}-{n}"
    taken.add(sid)
    return sid


# ------------------------------------------------------------------------------------------------ feedback


def _sanitize_feedback(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove hidden-test source, cut tracebacks of test cells down to the check's message, drop the self-check
    cell's output (it reports on the grader's copy, not on the student's file), drop the "Open in Colab" badge (an
    image from the network: a broken image offline, and no use in feedback)."""
    pattern = re.compile(r"\n?### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
    nb.cells = [c for c in nb.cells if not (c.cell_type == "markdown" and "colab-badge.svg" in c.source)]
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "_autograder_guard" in cell.source:  # the grading guard's lines in the setup cell
            cell.source = "\n".join(ln for ln in cell.source.splitlines() if "_autograder_guard" not in ln)
        if "BEGIN HIDDEN TESTS" in cell.source:
            cell.source = pattern.sub("\n# (hidden tests run here)", cell.source)
        if "selfcheck_here(" in cell.source:  # the "Before you submit" cell cannot read the file while grading
            cell.outputs = []
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                out.traceback = [f"{out.ename}: {out.evalue}"]
    return nb


def _failure_reasons(nb: nbformat.NotebookNode) -> list[str]:
    """One short line per failed test cell, taken from the check's message."""
    reasons = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if not meta.get("grade") or cell.cell_type != "code":
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                lines = [ln.strip() for ln in (out.evalue or out.ename or "").strip().splitlines()]
                # "k of n checks failed for X:" / "✘ <check>" / "<what was wrong>": keep the last two.
                first = " — ".join(lines[1:3]) if len(lines) >= 3 and lines[1].startswith("✘") else (lines or [""])[0]
                first += "".join(f" {ln}" for ln in lines[3:6] if ln.startswith("Hint:"))
                if out.ename == "NameError":
                    first = f"{out.evalue} (was the exercise cell deleted or renamed?)"
                reasons.append(f"{meta['grade_id'].removeprefix('test_')}: {first}")
                break
    return reasons


# ------------------------------------------------------------------------------------------------ grading


def _api(course: pathlib.Path, cell_timeout: int):
    from nbgrader.apps import NbGraderAPI

    c = notebooks._course_config(course)
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    return NbGraderAPI(config=c)


def _gradebook_scores(course: pathlib.Path, chapter: str, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(chapter, chapter, student)
        return {g.name.removeprefix("test_"): float(g.score) for g in nb.grades if g.max_score > 0}


def grading_instructor(chapter: str):
    """The instructor notebook nbgrader grades with: the setup cell arms the guard; each test cell starts with the
    guard's verdict (run before the notebook's own check runs, so nothing they do comes between) and ends with
    its conclusion (raises when the verdict failed), both in hidden regions so the feedback never shows them."""
    nb = notebooks.build_instructor(chapter)
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade_id") == "setup":
            cell.source += (
                f"\nimport autograder.guard as _autograder_guard  # grading only: see autograder/guard.py\n"
                f'_autograder_guard.arm("{chapter}")'
            )
        elif meta.get("grade") and "### END HIDDEN TESTS" in cell.source:
            # first, so that neither the notebook's own check runs nor a failure in them can come between
            name = meta["grade_id"].removeprefix("test_")
            cell.source = (
                f'### BEGIN HIDDEN TESTS\n_autograder_guard.verdict("{name}", defer=True)\n'
                f"### END HIDDEN TESTS\n"
                + cell.source.replace(
                    "### END HIDDEN TESTS", f'_autograder_guard.conclude("{name}")\n### END HIDDEN TESTS'
                )
            )
    return nb


def _unshare_prefix() -> list[str]:
    """``unshare --net --pid`` when it works here (root on Linux), else nothing (documented best effort)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return []
    cmd = ["unshare", "--net", "--pid", "--fork", "--kill-child"]
    try:
        ok = subprocess.run(cmd + ["true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return cmd if ok else []


def _sha256(path: pathlib.Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _safe_part(part: str) -> str:
    """A file or folder name from a zip, kept readable (Moodle's folders carry the student's full name)."""
    part = re.sub(r"[^\w .()@+-]+", "_", part).strip()
    return part if part.strip(".") else "_"


def expand_submissions(paths, unzip_dir: pathlib.Path) -> list[pathlib.Path]:
    """.ipynb files from files, folders and LMS zip downloads (extracted under ``unzip_dir``, keeping the folder
    each file is in: Moodle names the student in the folder)."""
    files = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            files += sorted(q for q in p.rglob("*.ipynb") if ".ipynb_checkpoints" not in q.parts)
        elif p.suffix == ".zip":
            dest = unzip_dir / _safe_name(p.stem)
            with zipfile.ZipFile(p) as z:
                for info in z.infolist():
                    name = pathlib.PurePosixPath(info.filename.replace("\\", "/"))
                    if name.suffix == ".ipynb" and not info.is_dir() and ".ipynb_checkpoints" not in name.parts:
                        target = dest.joinpath(*(_safe_part(q) for q in name.parts if q not in ("", "/")))
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(z.read(info))
            files += sorted(dest.rglob("*.ipynb"))
        else:
            files.append(p)
    return files


def submission_labels(paths) -> dict[pathlib.Path, str]:
    """How grades.csv names each file: its name, with its folder in front where the folder names the student
    (Moodle) or where two files of the batch share a name."""
    shared = {n for n, k in collections.Counter(p.name for p in paths).items() if k > 1}
    labels, seen = {}, set()
    for p in paths:
        who = lms.parse(p)
        folder = p.name in shared or (who.lms == lms.MOODLE and who.file == p.name)
        label = f"{p.parent.name}/{p.name}" if folder else p.name
        base, n = label, 1
        while label in seen:
            n += 1
            label = f"{base} ({n})"
        seen.add(label)
        labels[p] = label
    return labels


def grade(
    paths: list[pathlib.Path],
    chapter: str,
    out: pathlib.Path,
    *,
    cell_timeout: int = 120,
    notebook_timeout: int = 900,
    memory_mb: int = 6144,
    jobs: int | None = None,
    force: bool = False,
    lms_assignment: str | None = None,
    log=print,
) -> list[Row]:
    """Grade ``paths`` (submitted .ipynb files) for ``chapter``, each in its own sandboxed worker, ``jobs`` at a
    time. Results are kept per submission under ``out/results``: a rerun skips files already graded (same
    contents) unless ``force``. Writes grades.csv, summary.md/.csv/.png and feedback/ under ``out``, and the
    grade files of the LMS whose download names the files have (``lms.py``; ``lms_assignment`` is the Canvas
    column, e.g. "ch03 (12345)"; default: the chapter)."""

    warnings.filterwarnings("ignore", module="nbgrader")  # SQLAlchemy chatter from nbgrader's gradebook
    out = pathlib.Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the kernels (other uids) cannot reach results, feedback or the gradebook
    for sub in ("results", "feedback", "graded"):
        (out / sub).mkdir(exist_ok=True)
    exercises = notebooks.checks_module(chapter).EXERCISES
    max_score = float(exercises.total_points)
    paths = sorted(pathlib.Path(p) for p in paths)
    labels = submission_labels(paths)
    taken: set[str] = set()
    todo = []
    for path in paths:
        sid = student_id_from_filename(path, taken)
        result = out / "results" / f"{_safe_name(labels[path])}.json"
        sha = _sha256(path)
        if result.exists() and not force:
            try:
                if json.loads(result.read_text()).get("sha256") == sha:
                    continue
            except (OSError, ValueError):
                pass
        todo.append((path, labels[path], sid, result, sha))

    if todo:
        _grade_todo(
            todo,
            chapter,
            out,
            exercises,
            max_score,
            cell_timeout=cell_timeout,
            notebook_timeout=notebook_timeout,
            memory_mb=memory_mb,
            jobs=jobs,
            log=log,
        )

    rows = []
    taken = set()
    for path in paths:
        sid = student_id_from_filename(path, taken)
        result = out / "results" / f"{_safe_name(labels[path])}.json"
        r = json.loads(result.read_text())
        scores = {ex.name: float(r["scores"].get(ex.name, 0.0)) for ex in exercises}
        reason = r["reason"] or ("" if sum(scores.values()) == max_score else "points lost: see the feedback")
        who = lms.parse(path)
        rows.append(
            Row(
                labels[path],
                sid,
                chapter,
                scores,
                sum(scores.values()),
                max_score,
                r["status"],
                reason,
                list(r.get("warnings", [])),
                lms=who.lms,
                lms_id=who.lms_id,
                name=who.name,
                late=who.late,
                graded_at=result.stat().st_mtime,
            )
        )
    names = [ex.name for ex in exercises]
    points = {ex.name: ex.points for ex in exercises}
    write_csv(rows, out / CSV_NAME, names)
    write_summary(rows, out, names, points)
    lms.write_exports(rows, out, points, assignment=lms_assignment or chapter, log=log)
    return rows


def _result_json(path: pathlib.Path, **fields) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(fields, indent=1, sort_keys=True))
    tmp.replace(path)


def _grade_todo(todo, chapter, out, exercises, max_score, *, cell_timeout, notebook_timeout, memory_mb, jobs, log):
    """Canonicalise every file here (an unreadable one is recorded at once), grade each distinct canonical
    notebook once in a sandboxed worker, and give identical submissions that one result (own warnings, own
    feedback)."""
    from . import canonical, sandbox

    release = notebooks.build_release(chapter)
    points = {ex.name: ex.points for ex in exercises}
    groups: dict[str, list] = {}
    canon: dict[str, tuple] = {}
    for path, label, sid, result, sha in todo:
        try:
            nb, warns = canonical.canonicalise(path.read_bytes(), release)
        except Exception as exc:
            if isinstance(exc, canonical.Ungradeable):
                why = str(exc)
            elif isinstance(exc, OSError):
                why = f"unreadable file: {exc.strerror}"
            else:
                why = f"not a readable notebook ({type(exc).__name__}: {str(exc)[:100]})"
            _result_json(
                result, submission=label, sha256=sha, student_id=sid, status="error", reason=why, scores={}, warnings=[]
            )
            _write_ungradeable_feedback(out / "feedback" / f"{sid}.html", sid, chapter, points, why)
            log(f"  {label}: 0/{max_score:g} — {why}")
            continue
        text = nbformat.writes(nb)
        key = hashlib.sha256(text.encode()).hexdigest()
        groups.setdefault(key, []).append((path, label, sid, result, sha))
        canon[key] = (text, canon.get(key, (None, {}))[1] | {sid: warns})
    if not groups:
        return

    course = out / "course"
    if course.exists():
        shutil.rmtree(course)
    (course / "source" / chapter).mkdir(parents=True)
    nbformat.write(grading_instructor(chapter), course / "source" / chapter / f"{chapter}.ipynb")
    result = _api(course, cell_timeout).generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"generate_assignment failed:\n{result.get('error')}\n{result.get('log')}")
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="autograder-"))
    scratch.chmod(0o711)
    jobs_dir = scratch / "jobs"  # every submission's canonical notebook: hidden from every kernel
    jobs_dir.mkdir(mode=0o700)
    stage = sandbox.stage_solutions(chapter, scratch / "stage")
    prefix = _unshare_prefix()
    drop_uid = sandbox.uid_drop_possible()
    hidden = sandbox.hidden_files(chapter) + [str(out), str(jobs_dir)]
    jobs = jobs or os.cpu_count() or 1
    copies = sum(len(g) - 1 for g in groups.values())
    log(
        f"  {len(groups)} distinct notebooks to run"
        + (f" ({copies} identical {'copy shares' if copies == 1 else 'copies share'} a run)" if copies else "")
        + f", {jobs} at a time"
        + ("" if prefix else " (no network isolation: not root or unshare unavailable)")
        + ("" if drop_uid else " (kernels keep this user's uid: the Python installation is not world-readable)")
    )

    def run_one(key):
        (path, label, sid, result, sha), *others = groups[key]
        text, warns = canon[key]
        canonical_path = jobs_dir / f"{_safe_name(sid)}.canonical.ipynb"
        canonical_path.write_text(text)
        job = {
            "canonical": str(canonical_path),
            "warnings": warns[sid],
            "submission_name": label,
            "sha256": sha,
            "chapter": chapter,
            "student_id": sid,
            "course_template": str(course),
            "stage": str(stage),
            "sandbox": str(scratch / _safe_name(sid)),
            "result": str(result),
            "feedback": str(out / "feedback" / f"{sid}.html"),
            "keep": str(out / "graded"),
            "cell_timeout": cell_timeout,
            "memory_mb": memory_mb,
            "max_score": max_score,
            "points": points,
            "hidden_files": hidden,
            "netns": bool(prefix),
            "uid": 100000 + zlib.crc32(sid.encode()) % 100000 if drop_uid else -1,
            # kernels share the cores: more torch threads than cores per kernel makes every kernel crawl
            "threads": max(1, (os.cpu_count() or 1) // jobs),
        }
        job_path = jobs_dir / f"{_safe_name(sid)}.job.json"
        job_path.write_text(json.dumps(job))
        if result.exists():
            result.unlink()
        cmd = prefix + [sys.executable, "-m", "autograder.sandbox", "worker", str(job_path)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd=scratch
        )
        try:
            output, _ = proc.communicate(timeout=notebook_timeout)
            why = f"the grading worker ended with exit code {proc.returncode}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            why = f"the notebook ran longer than {notebook_timeout} s in total"
        if not result.exists():
            tail = (output or b"").decode(errors="replace").strip().splitlines()[-1:]
            _result_json(
                result,
                submission=label,
                sha256=sha,
                student_id=sid,
                status="error",
                scores={},
                warnings=warns[sid],
                reason=why + (f" ({tail[0][:150]})" if tail and proc.returncode else ""),
            )
        shutil.rmtree(scratch / _safe_name(sid), ignore_errors=True)
        r = json.loads(result.read_text())
        log(
            f"  {label}: {sum(r['scores'].values()):g}/{max_score:g}"
            + (f" — {r['reason'][:120]}" if r["reason"] else "")
        )
        shared = [w for w in r["warnings"] if w not in warns[sid]]  # from running the code: same for every copy
        graded = out / "graded" / f"{sid}.ipynb"
        for _, o_label, o_sid, o_result, o_sha in others:
            same = f"identical code to {label} (graded once for both)"
            o_warns = warns[o_sid] + shared + [same]
            _result_json(
                o_result, **{**r, "submission": o_label, "sha256": o_sha, "student_id": o_sid, "warnings": o_warns}
            )
            if graded.exists():
                # The feedback goes to the student: it must not name the other student (grades.csv does).
                _write_feedback(
                    nbformat.read(graded, as_version=4),
                    out / "feedback" / f"{o_sid}.html",
                    o_sid,
                    chapter,
                    r["scores"],
                    points,
                    warnings=warns[o_sid] + shared,
                    reasons=r["reason"].split("; "),
                )
                shutil.copyfile(graded, out / "graded" / f"{o_sid}.ipynb")
            log(f"  {o_label}: {sum(r['scores'].values()):g}/{max_score:g} — {same}")

    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            list(pool.map(run_one, list(groups)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# The feedback page works offline: no MathJax, require.js or mermaid from a CDN (nbconvert's lab template loads
# them); formulas in the notebook's text are converted to MathML here, which browsers render natively.
_FEEDBACK_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""
_MATH = re.compile(
    r"(?P<code>```.*?```|`[^`\n]*`)"  # code is left alone
    r"|\$\$(?P<block>.+?)\$\$|(?<![\\$])\$(?P<inline>[^\s$][^$\n]*?)(?<![\s\\])\$",
    re.S,
)


def _math_to_mathml(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Replace $…$ and $$…$$ in markdown cells by placeholders (so markdown leaves them alone); returns
    placeholder -> MathML (LaTeX source in <code> where latex2mathml cannot convert it)."""
    import latex2mathml.converter

    found: dict[str, str] = {}

    def one(m):
        if m["code"]:
            return m["code"]
        tex = (m["block"] or m["inline"]).strip()
        try:
            markup = latex2mathml.converter.convert(tex, display="block" if m["block"] else "inline")
        except Exception:
            markup = f"<code>{html.escape(tex)}</code>"
        key = f"AUTOGRADERMATH{len(found)}X"
        found[key] = markup
        return key

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = _MATH.sub(one, cell.source)
    return found


def _points_table(scores: dict[str, float], points: dict[str, int]) -> str:
    cells = "".join(
        f"<tr><td><code>{html.escape(n)}</code></td><td style='text-align:right'>{scores.get(n, 0.0):g}"
        f"</td><td style='text-align:right'>{top:g}</td></tr>"
        for n, top in points.items()
    )
    total = (
        f"<tr style='font-weight:bold;border-top:1px solid #888'><td>total</td><td style='text-align:right'>"
        f"{sum(scores.get(n, 0.0) for n in points):g}</td><td style='text-align:right'>{sum(points.values()):g}"
        f"</td></tr>"
    )
    return (
        "<table class='autograder-points' style='border-collapse:collapse;margin:.5em 0'><thead><tr>"
        "<th style='text-align:left;padding-right:2em'>exercise</th><th>points</th><th style='padding-left:1em'>"
        f"max</th></tr></thead><tbody>{cells}{total}</tbody></table>"
    )


def _write_ungradeable_feedback(
    path: pathlib.Path, sid: str, chapter: str, points: dict[str, int], reason: str
) -> None:
    """The feedback page of a file that could not be read as a notebook: zero points and why (the student needs
    to know, e.g. to download the notebook again and resubmit); without it that student had no page at all."""
    path.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
        + html.escape(f"{chapter} — {sid}")
        + "</title></head><body><div style='padding:1em;font-family:sans-serif;background:#eef'><b>"
        + html.escape(chapter)
        + f"</b> — {html.escape(sid)}: <b>0 / {sum(points.values()):g}</b> points"
        + _points_table({}, points)
        + f"<p>Your file could not be graded: {html.escape(reason)}</p>"
        "<p>Download the notebook again (File &gt; Download &gt; .ipynb), check it with <code>python -m autograder "
        "selfcheck</code> or the notebook's last cell, and submit it again.</p></div></body></html>\n"
    )


def _write_feedback(
    graded,
    path: pathlib.Path,
    sid: str,
    chapter: str,
    scores: dict[str, float],
    points: dict[str, int],
    *,
    warnings=(),
    reasons=(),
) -> None:
    """The student's feedback page: points per exercise and the grader's notes at the top, then the graded notebook
    (hidden tests removed, tracebacks cut to the check's message, no self-check output), readable offline."""
    import jinja2
    from nbconvert import HTMLExporter

    nb = _sanitize_feedback(graded)
    math = _math_to_mathml(nb)
    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"feedback.html.j2": _FEEDBACK_TEMPLATE})], template_file="feedback.html.j2"
    )
    body, _ = exporter.from_notebook_node(nb)
    for key, markup in math.items():
        body = body.replace(key, markup)
    total, max_score = sum(scores.get(n, 0.0) for n in points), sum(points.values())
    notes = "".join(
        f"<li>{html.escape(w)}</li>"
        for w in list(warnings) + [r for r in reasons if "integrity" in r or "withheld" in r]
    )
    banner = (
        f"<div style='padding:1em;font-family:sans-serif;background:#eef'><b>{html.escape(chapter)}</b> — "
        f"{html.escape(sid)}: <b>{total:g} / {max_score:g}</b> points"
        + _points_table(scores, points)
        + (f"Notes from the grader:<ul>{notes}</ul>" if notes else "")
        + "</div>"
    )
    path.write_text(re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner, body, count=1))


def write_csv(rows: list[Row], path: pathlib.Path, exercise_names: list[str]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "submission",
                "student_id",
                "lms",
                "lms_id",
                "late",
                "chapter",
                *exercise_names,
                "score",
                "max_score",
                "status",
                "reason",
                "warnings",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.submission,
                    r.student_id,
                    r.lms,
                    r.lms_id,
                    lms.late_text(r.late),
                    r.chapter,
                    *(f"{r.scores[n]:g}" for n in exercise_names),
                    f"{r.score:g}",
                    f"{r.max_score:g}",
                    r.status,
                    r.reason,
                    "; ".join(r.warnings),
                ]
            )


def write_summary(rows: list[Row], out: pathlib.Path, names: list[str], points: dict[str, int]) -> None:
    """summary.csv / summary.md (per exercise: how many scored full, partial, zero; mean) and summary.png."""
    table = []
    for n in names + ["total"]:
        vals = [r.score if n == "total" else r.scores[n] for r in rows]
        top = float(sum(points.values()) if n == "total" else points[n])
        table.append(
            {
                "exercise": n,
                "max": top,
                "full": sum(v == top for v in vals),
                "partial": sum(0 < v < top for v in vals),
                "zero": sum(v == 0 for v in vals),
                "mean": round(sum(vals) / len(vals), 2) if vals else 0.0,
            }
        )
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    status = {s: sum(r.status == s for r in rows) for s in ("graded", "error", "integrity")}
    md = [
        f"# {rows[0].chapter if rows else ''}: {len(rows)} submissions "
        f"({status['graded']} graded, {status['error']} not gradeable, {status['integrity']} integrity zero)",
        "",
        "| exercise | max | full | partial | zero | mean |",
        "|---|---|---|---|---|---|",
    ]
    md += [
        f"| {t['exercise']} | {t['max']:g} | {t['full']} | {t['partial']} | {t['zero']} | {t['mean']:g} |"
        for t in table
    ]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, len(names) + 1, figsize=(2.6 * (len(names) + 1), 2.6), squeeze=False)
    for ax, n in zip(axes[0], names + ["total"]):
        vals = [r.score if n == "total" else r.scores[n] for r in rows]
        top = sum(points.values()) if n == "total" else points[n]
        ax.hist(vals, bins=[x - 0.5 for x in range(int(top) + 2)], color="#4a7", edgecolor="black")
        ax.set_title(n if len(n) < 22 else n[:20] + "…", fontsize=8)
        ax.set_xlabel(f"points (of {top:g})", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # points and counts are whole numbers
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("submissions")
    fig.tight_layout()
    fig.savefig(out / "summary.png", dpi=80)
    plt.close(fig)
