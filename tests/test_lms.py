"""The LMS surfaces as their users meet them: the grade files as the LMS's own importer reads them, in the site's
interface language, and a download's files as `python -m autograder grade` collects, counts and reports them.
None of these tests starts a kernel (a batch of files that cannot be run needs none; a run is faked where one is
needed); the whole path with kernels is tests/test_grading.py::test_lms_downloads_give_every_student_one_right_row."""

import csv
import datetime
import html
import pathlib
import re
import subprocess
import sys
import zipfile

import nbformat
import pytest

from autograder import canonical, notebooks, releases
from autograder.grading import batch, collect, lms, report, submission

# What Moodle's importer looks for (mod/assign/feedback/offline/importgradeslib.php, init() and next()), in the
# uploader's interface language: get_string('recordid', 'assign'), get_string('grade'),
# get_string('lastmodifiedgrade', 'assign'), the comments plugin's get_string('pluginname',
# 'assignfeedback_comments'), and get_string('hiddenuser', 'assign') before the participant id. Written out here from
# Moodle's language packs (lang/en of github.com/moodle/moodle; the zh_cn pack as AMOS exports it), not taken from
# autograder/grading/lms.py, so that a change there is caught.
IMPORTER_STRINGS = {
    "en": {
        "id": "Identifier",
        "grade": "Grade",
        "modified": "Last modified (grade)",
        "comments": "Feedback comments",
        "hiddenuser": "Participant ",
    },
    "zh_cn": {
        "id": "标识符",
        "grade": "成绩",
        "modified": "上次修改（评分）",
        "comments": "评语反馈",
        "hiddenuser": "参与人",
    },
}
# Date forms PHP's strtotime() reads that a worksheet writes (a date it cannot read makes every row "stale")
STRTOTIME_FORMS = ("%A, %d %B %Y, %I:%M %p", "%Y-%m-%d %H:%M")


def moodle_import(path: pathlib.Path, language: str) -> dict[str, tuple[str, float | None, str]] | None:
    """What a Moodle site in ``language`` takes from the worksheet at ``path``, as importgradeslib.php reads it:
    the columns found by their exact names (None where one of Identifier, Grade, Last modified (grade) is missing:
    Moodle refuses the file, "invalidgradeimport"), the participant id as the Identifier after its first
    strlen(hiddenuser) BYTES (PHP's substr), the date as strtotime() would read it (None: unreadable).
    Returns participant id -> (grade, modified, feedback comments)."""
    strings = IMPORTER_STRINGS[language]
    with open(path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header = table[0]
    if not all(strings[k] in header for k in ("id", "grade", "modified")):
        return None
    at = {k: header.index(strings[k]) for k in ("id", "grade", "modified", "comments") if strings[k] in header}
    got = {}
    for line in table[1:]:
        pid = line[at["id"]].encode()[len(strings["hiddenuser"].encode()) :].decode()
        assert pid.isdigit(), f"{line[at['id']]!r}: Moodle would look up the participant {pid!r}"
        modified = None
        for form in STRTOTIME_FORMS:
            try:
                modified = datetime.datetime.strptime(line[at["modified"]], form).timestamp()
                break
            except ValueError:
                continue
        got[pid] = (line[at["grade"]], modified, line[at["comments"]] if "comments" in at else "")
    return got


def _row(name: str, score: float) -> report.Row:
    who = lms.parse(name)
    return report.Row(
        name, who.name, "ch08_kv_cache", {"x": score}, score, 10.0, "graded", "",
        lms=who.lms, lms_id=who.lms_id, name=who.name, late=who.late, graded_at=1_700_000_000.0,
    )  # fmt: skip


@pytest.mark.parametrize("language", ["en", "zh_cn"])
def test_moodle_reads_the_worksheet_in_its_interface_language(tmp_path, language):
    """The worksheet in the site's language is read by Moodle's importer in that language, every row and date; the
    other language's site refuses it (the issue: a Chinese site rejected the English worksheet)."""
    rows = [
        _row("Ada Lovelace_5001_assignsubmission_file/ch08.ipynb", 7),
        _row("李伟_5005_assignsubmission_file_x.ipynb", 4),
    ]
    lms.write_exports(rows, tmp_path, {"x": 10}, assignment="ch08", moodle_language=language)
    sheet = tmp_path / lms.MOODLE_FILE
    got = moodle_import(sheet, language)
    assert got is not None and {pid: v[0] for pid, v in got.items()} == {"5001": "7", "5005": "4"}
    assert all(modified is not None for _, modified, _ in got.values()), "a date strtotime() reads"
    assert got["5001"][2].startswith("7/10 (x 7/10)"), "the feedback comments column is found"
    other = "en" if language == "zh_cn" else "zh_cn"
    assert moodle_import(sheet, other) is None, f"a site in {other} refuses it"


@pytest.mark.parametrize(
    "name",
    [
        "lovelaceada_late_1001_90011_ch05-1.ipynb",
        "lovelaceada_LATE_1001_90011_ch05-1.ipynb",
        "lovelaceada_Late_1001_90011_ch05-1.ipynb",
    ],
)
def test_canvas_late_marker_is_read_in_any_case(name):
    who = lms.parse(name)
    assert (who.lms, who.name, who.lms_id, who.late, who.file) == (
        lms.CANVAS,
        "lovelaceada",
        "1001",
        True,
        "ch05-1.ipynb",
    )
    assert lms.parse("lovelaceada_1001_90001_late_notes.ipynb").late is False, "'late' in the student's own name"


def _fake_runs(monkeypatch, scores_of: dict[str, dict[str, float]]) -> None:
    """Each run's result by its canonical notebook (``scores_of``: canonical text -> scores), without a kernel."""

    def run_job(job, prefix, cwd, timeout, spawner=None):
        text = pathlib.Path(job.canonical).read_text()
        return submission.Result("", "", job.student_id, "graded", "", scores_of[text], []), text

    monkeypatch.setattr(batch.execute, "run_job", run_job)
    monkeypatch.setenv("AUTOGRADER_FORK_WORKERS", "off")


def _canonical(data: bytes, chapter: str) -> str:
    return nbformat.writes(canonical.canonicalise(data, releases.release_notebook(chapter))[0])


def test_a_lower_case_late_reupload_is_the_students_canvas_grade(tmp_path, monkeypatch):
    """The issue's Canvas download: a first upload that scores 5 and a late re-upload named with a lower-case
    marker that scores 7. The re-upload is the student's, her Canvas grade is 7, and the batch counts one student."""
    ch = "ch05_transformer"
    samples = notebooks.SAMPLES / ch
    bug, full = (next(samples.glob(f"{who}*.ipynb")).read_bytes() for who in ("hopper", "lovelace"))
    exercises = releases.checks_module(ch).EXERCISES
    top = {ex.name: float(ex.points) for ex in exercises}
    _fake_runs(
        monkeypatch, {_canonical(full, ch): top, _canonical(bug, ch): {**top, "EncoderLayer": 0.0, "DecoderLayer": 1.0}}
    )
    folder = tmp_path / "download"
    folder.mkdir()
    (folder / f"lovelaceada_1001_90001_{ch}.ipynb").write_bytes(bug)
    (folder / f"lovelaceada_late_1001_90011_{ch}-1.ipynb").write_bytes(full)
    subs = collect.collect(sorted(folder.iterdir()), tmp_path / "out", releases.read(ch))
    assert collect.describe(subs) == "2 files from 1 student: 2 notebooks"
    rows = batch.grade(sorted(folder.iterdir()), ch, tmp_path / "out", jobs=1, lms_assignment="Chapter 5 (12345)")
    assert {r.lms_id for r in rows} == {"1001"} and {r.late for r in rows} == {False, True}
    with open(tmp_path / "out" / lms.CANVAS_FILE, newline="") as f:
        assert [(r["ID"], r["Chapter 5 (12345)"]) for r in csv.DictReader(f)] == [("1001", f"{sum(top.values()):g}")]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "1 rows, one per student, from 2 files" in summary and "names no student" not in summary


def test_the_report_reads_the_choice_collection_made_in_a_line(tmp_path, monkeypatch):
    """Issue 47: which file is each student's row in the LMS file is chosen once, at collection (``lms.choose``,
    kept on the records), and the report reads it. Followed at every depth (``scripts/grading_path.py``), the report
    step enters report and lms once each and its path returns to a module it left twice: batch -> report -> lms ->
    report -> batch. The rows and rules are those of the choice: a re-upload supersedes the first upload, a notebook
    of the assignment a stray chapter, and a student's only file, a stray chapter, is their row and listed."""
    from scripts import grading_path

    ch = "ch03_self_attention"
    samples = sorted((notebooks.SAMPLES / ch).glob("*.ipynb"))
    stray = next((notebooks.SAMPLES / "ch10_flash_attention").glob("lovelace*.ipynb")).read_bytes()
    top = {ex.name: float(ex.points) for ex in releases.checks_module(ch).EXERCISES}
    readable = [p for p in samples if not p.name.startswith("babbage")]  # babbage's download was cut short
    _fake_runs(monkeypatch, {_canonical(p.read_bytes(), ch): top for p in readable})
    folder = tmp_path / "download"
    folder.mkdir()
    for p in samples:
        (folder / p.name).write_bytes(p.read_bytes())
    lovelace = next(p for p in samples if p.name.startswith("lovelace"))
    (folder / f"lovelaceada_1001_90011_{ch}-1.ipynb").write_bytes(lovelace.read_bytes())  # a re-upload
    (folder / "turingalan_1002_90077_notebook.ipynb").write_bytes(stray)  # later, but another chapter's
    (folder / "knuthdonald_1009_90009_notebook.ipynb").write_bytes(stray)  # the student's only file
    out = tmp_path / "out"
    files = sorted(folder.iterdir())
    steps = grading_path.watch(lambda: batch.grade(files, ch, out, jobs=1, lms_assignment="Chapter 3 (12345)"))

    line = steps["report"]
    assert line.entered == {"report": 1, "lms": 1}, line.entered
    assert line.path == ["batch", "report", "lms", "report", "batch"] and line.returns == 2, line.path
    assert "lms.one_per_student" in steps["collect"].called and "lms.one_per_student" not in line.called
    with open(out / lms.CANVAS_FILE, newline="") as f:
        canvas = {r["ID"]: r["Chapter 3 (12345)"] for r in csv.DictReader(f)}
    full = f"{sum(top.values()):g}"
    assert canvas == {"1001": full, "1002": full, "1003": full, "1004": "0", "1009": "0"}
    with open(out / report.CSV_NAME, newline="") as f:
        warnings = {r["submission"]: r["warnings"] for r in csv.DictReader(f)}
    assert len(warnings) == 7
    assert (
        f"lovelaceada_1001_90011_{ch}-1.ipynb is this student's row there (the latest upload" in warnings[lovelace.name]
    )
    assert "(a notebook of the assignment; this file is not)" in warnings["turingalan_1002_90077_notebook.ipynb"]
    attention = (out / "summary.md").read_text().split("## Needs attention")[1]
    assert f"* {lovelace.name} ({full} points): not in the LMS file" in attention
    assert "* knuthdonald_1009_90009_notebook.ipynb: another chapter's notebook" in attention
    assert "grade it with --chapter ch10_flash_attention" in attention and attention.count("* turingalan") == 1


def test_moodle_online_text_is_listed_never_graded():
    """Online text, in a folder download or a flat one, is no submission: listed with its reason, no row. A file
    upload is one whatever its own name holds (the first marker names the plugin)."""
    for parts in (
        ["Ada Lovelace_5001_assignsubmission_onlinetext", "onlinetext.html"],
        ["Ada Lovelace_5001_assignsubmission_onlinetext_onlinetext.html"],
        ["download", "Ada Lovelace_5001_assignsubmission_onlinetext_onlinetext.html"],
    ):
        assert collect.ignored_because(parts).startswith(collect.ONLINE_TEXT), parts
    assert "(comments)" in collect.ignored_because(["Ada Lovelace_5001_assignsubmission_comments_x.html"])
    for parts in (
        ["Ada Lovelace_5001_assignsubmission_file_onlinetext.html"],
        ["Ada Lovelace_5001_assignsubmission_file_x_5002_assignsubmission_onlinetext_y.ipynb"],
        ["Ada Lovelace_5001_assignsubmission_file", "x_5002_assignsubmission_onlinetext_y.ipynb"],
        ["lovelaceada_1001_90001_x_5002_assignsubmission_onlinetext_y.ipynb"],
    ):
        assert collect.ignored_because(parts) == "", parts


PDF = b"%PDF-1.7\n1 0 obj\n<<>>\nendobj\n"


def test_a_chinese_moodle_download_through_the_grade_command(tmp_path):
    """`python -m autograder grade` on a flat Moodle download, for a Moodle site in Chinese (no kernel: no file is
    this chapter's notebook): the worksheet is read by Moodle's importer in zh_cn; the online text is listed with
    its reason, never a row nor in the statistics; a file that names no student is counted and listed as such; the
    console counts "k of N" and shows each reason whole; a stray chapter's page speaks to the student in the
    edition submitted, the instructor's command only in the summary."""
    ch = "ch05_transformer"
    zh10 = (notebooks.ROOT / "notebooks" / "zh" / "ch10_flash_attention.ipynb").read_bytes()
    en10 = next((notebooks.SAMPLES / "ch10_flash_attention").glob("lovelace*.ipynb")).read_bytes()
    z = tmp_path / "moodle.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr(f"Ada Lovelace_5001_assignsubmission_file_{ch}.pdf", PDF)
        f.writestr("Ada Lovelace_5001_assignsubmission_onlinetext_onlinetext.html", "<p>my answers are in the PDF</p>")
        f.writestr("Alan Turing_5002_assignsubmission_file_ch10_flash_attention.ipynb", en10)
        f.writestr("李伟_5005_assignsubmission_file_ch10_flash_attention.ipynb", zh10)
        f.writestr("notes.pdf", PDF)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "autograder", "grade", str(z), "--chapter", ch, "--moodle-language", "zh_cn"]
    ran = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, cwd=notebooks.ROOT, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    console, folder = ran.stdout, out / ch

    got = moodle_import(folder / lms.MOODLE_FILE, "zh_cn")
    assert got is not None and {pid: v[0] for pid, v in got.items()} == {"5001": "0", "5002": "0", "5005": "0"}
    assert all(v[1] is not None for v in got.values())
    assert "请提交第 5 章的笔记本" in got["5005"][2] and "submit chapter 5's notebook" in got["5002"][2], (
        "the feedback comment in the edition the student submitted"
    )

    # online text: listed once with its reason (console, summary), no row, no grade file, no statistics
    assert console.count("assignsubmission_onlinetext") == 1 and "Moodle's online text" in console
    with open(folder / report.CSV_NAME, encoding="utf-8") as f:
        rows = {r["submission"]: r for r in csv.DictReader(f)}
    assert len(rows) == 4 and not any("onlinetext" in name for name in rows)
    summary = (folder / "summary.md").read_text(encoding="utf-8")
    ignored = summary.split("## Ignored (not submissions)")[1]
    assert "Ada Lovelace_5001_assignsubmission_onlinetext_onlinetext.html: Moodle's online text" in ignored

    # a file that names no student: counted and listed as such, out of the statistics
    assert "4 files from 3 students and 1 file that names no student: " in console, console
    assert "3 rows, one per student, from 4 files" in summary and "1 more listed below, not counted" in summary
    attention = summary.split("## Needs attention")[1].split("## Ignored")[0]
    assert re.search(r"\* notes\.pdf \(0 points\): names no student", attention)
    assert "needs attention: notes.pdf: names no student" in console

    # the console: "k of N" with what is left, and every reason whole (wrapped, never cut)
    assert re.search(r"\[1 of 4 \(3 left, about \d+ s to go\)\]", console) and "[4 of 4 (0 left)]" in console
    unwrapped = re.sub(r"\n +", " ", console)
    stray = collect.other_chapter_reason("ch10_flash_attention", ch)
    assert len(str(stray)) > 120 and str(stray) in unwrapped
    assert all(len(line) <= 118 for line in console.splitlines() if line.startswith("      "))

    # the stray chapter's page speaks to the student, in the edition submitted; the instructor's command is theirs
    for page, says in (
        ("Alan-Turing_5002", "submit chapter 5's notebook (ch05_transformer.ipynb)"),
        ("李伟_5005", "请提交第 5 章的笔记本"),
    ):
        text = html.unescape((folder / "feedback" / f"{page}.html").read_text(encoding="utf-8"))
        assert says in text and "--chapter" not in text
        assert "Download the notebook again" not in text and "请重新下载笔记本" not in text, "no advice that misleads"
    assert "grade it with --chapter ch10_flash_attention" in attention
    assert rows["Alan Turing_5002_assignsubmission_file_ch10_flash_attention.ipynb"]["reason"] == str(stray)


def test_a_zip_with_utf8_names_but_no_utf8_flag_keeps_the_students_id(tmp_path):
    """Info-ZIP on Linux and macOS's Archive Utility write UTF-8 names without the zip's UTF-8 flag; read as code page
    437 (the format's default), "李雷" came out as "µ_ÄΘ_", whose underscores hid Canvas's name marker: the file named
    no student. The name is read as the UTF-8 it is."""
    name = "李雷_1005_90005_ch03_self_attention.ipynb"
    placeholder = "X" * len(name.split("_")[0].encode()) + name[name.index("_") :]
    zip_path = tmp_path / "subs.zip"
    with zipfile.ZipFile(zip_path, "w") as z:
        z.writestr(placeholder, "{}")  # an ASCII name: no UTF-8 flag
    raw = zip_path.read_bytes()
    assert raw.count(placeholder.encode()) == 2  # the local header and the central directory
    zip_path.write_bytes(raw.replace(placeholder.encode(), name.encode()))  # UTF-8 bytes, still no flag
    with zipfile.ZipFile(zip_path) as z:
        assert z.infolist()[0].filename != name  # what Python reads from such a zip, as cp437
    (path,) = collect.expand_submissions([zip_path], tmp_path / "unzipped")
    assert path.name == name
    who = lms.parse(path)
    assert (who.lms, who.lms_id) == (lms.CANVAS, "1005"), who
