"""`make book` executes each page once for both editions (scripts/execute_book.py) into the caches the two builds
read, keyed on the page's code and on the contents of what it read (book/_ext/page_inputs.py).

The builds find a page in their cache only when the executor cached the very notebook that build reads: these
tests hold the executor's notebook to the one each build's source-read handlers and myst-nb's reader make, and the
cache key to what the page read.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
import page_inputs  # noqa: E402  (book/_ext is the book's extension folder, not a package)

from scripts import execute_book  # noqa: E402

FRONT = "---\njupytext:\n  formats: md:myst\nkernelspec:\n  display_name: Python 3\n  name: python3\n---\n\n# T\n"


def test_the_digest_goes_into_the_kernelspec_and_nothing_else_changes():
    stamped = page_inputs.stamp_source(FRONT, "sha256:0123")
    assert '  course_page_inputs: "sha256:0123"\n---\n' in stamped
    assert stamped.replace('  course_page_inputs: "sha256:0123"\n', "") == FRONT
    assert page_inputs.stamp_source("# no front matter\n", "sha256:0") == "# no front matter\n"


def test_the_digest_follows_the_contents_of_what_the_page_read(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "edition_text.py").write_text("A = 1\n")
    (tmp_path / "solutions").mkdir()
    module = tmp_path / "solutions" / "ch03.py"
    module.write_text("x = 1\n")
    entry = {"files": ["solutions/ch03.py"], "dirs": ["solutions"]}
    first = page_inputs.inputs_digest(tmp_path, entry)
    assert page_inputs.inputs_digest(tmp_path, entry) == first
    assert page_inputs.inputs_digest(tmp_path, None) != first
    module.write_text("x = 2\n")
    assert page_inputs.inputs_digest(tmp_path, entry) != first, "a changed module"
    module.write_text("x = 1\n")
    assert page_inputs.inputs_digest(tmp_path, entry) == first
    (tmp_path / "solutions" / "new.csv").write_text("")
    assert page_inputs.inputs_digest(tmp_path, entry) != first, "a new file in a folder the page listed"
    (tmp_path / "solutions" / "new.csv").unlink()
    (tmp_path / "book" / "edition_text.py").write_text("A = 2\n")
    assert page_inputs.inputs_digest(tmp_path, entry) != first, "book/edition_text.py is every page's input"


def test_the_kernel_records_the_files_it_read_and_imported_but_not_those_it_wrote(tmp_path, monkeypatch):
    root = tmp_path
    (root / "data").mkdir()
    (root / "data" / "old.json").write_text("{}")
    os.utime(root / "data" / "old.json", (time.time() - 60, time.time() - 60))
    monkeypatch.setattr(page_inputs, "_opened", set())
    monkeypatch.setattr(page_inputs, "_listed", set())
    monkeypatch.setattr(page_inputs, "_started", time.time() - 1)
    for args in [
        (str(root / "data" / "old.json"), "r", 0),
        (str(root / "data" / "written.json"), "w", 0),
        (str(root / ".venv" / "lib.py"), "r", 0),
        ("/etc/hostname", "r", 0),
    ]:
        page_inputs._audit("open", args)
    page_inputs._audit("os.scandir", (str(root / "data"),))
    (root / "data" / "written.json").write_text("{}")
    recorded = json.loads(page_inputs.report(str(root)))
    assert recorded == {"files": ["data/old.json"], "dirs": ["data"]}


@pytest.mark.parametrize("page", ["book/ch03_self_attention", "book/ch08_kv_cache", "book/intro"])
@pytest.mark.parametrize("which", ["en", "zh"])
def test_the_executor_caches_the_notebook_each_build_reads(page, which):
    """The executor's notebook for an edition hashes as jupyter-cache hashes the notebook that edition's build
    reads (its source-read handlers, then myst-nb's reader), so the builds find every page in their cache."""
    import edition
    from jupyter_cache.cache.main import JupyterCacheBase
    from myst_nb.core.config import NbParserConfig
    from myst_nb.core.read import create_nb_reader
    from myst_parser.config.main import MdParserConfig

    docname = page + (".zh" if which == "zh" else "")

    class Config:
        course_edition = which

    class App:
        srcdir = str(ROOT)
        config = Config

    source = [(ROOT / f"{docname}.md").read_text(encoding="utf-8")]
    edition._on_source_read(App, docname, source)
    page_inputs._on_source_read(App, docname, source)
    reader = create_nb_reader(str(ROOT / f"{docname}.md"), MdParserConfig(), NbParserConfig(), source[0])
    assert reader is not None
    built = reader.read(source[0])
    digest = page_inputs.inputs_digest(ROOT, page_inputs.load_manifest(ROOT).get(page))
    executed = execute_book.notebook(page, which, digest)
    cache = JupyterCacheBase.__new__(JupyterCacheBase)
    assert cache.create_hashed_notebook(executed)[1] == cache.create_hashed_notebook(built)[1]
    assert built.metadata.kernelspec[page_inputs.STAMP_KEY] == digest


def test_the_executor_reads_the_pages_of_the_table_of_contents():
    found = execute_book.pages()
    assert found[0] == "book/intro" and "book/ch03_self_attention" in found and "book/glossary" in found
