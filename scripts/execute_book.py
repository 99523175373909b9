"""Execute the book's pages once for both editions, on every core, into the two editions' execution caches.

`make book` runs this before its two Jupyter Book builds, which then find every page in their caches
(`execute_notebooks: cache`) and execute nothing. Each page whose cache entry is missing or stale runs in one
kernel (jupyter-cache's own `single_nb_execution`, as Jupyter Book's cache mode runs it), several pages at a time
(a process pool; `-j`, default: the cores this process may use), longest first (by the last run's time):

* the kernel starts with `ATTENTION_COURSE_EDITION=both` and `book/edition_text.py` installed, so each figure is
  shown twice from the same figure the page's code drew: as drawn (image/png) and with its text in Chinese
  (`edition_text.ZH_PNG`); the English cache gets the first, the Chinese cache (`_build/.jupyter_cache_zh`) the
  second as its image/png, each under the notebook that edition's build reads (the Chinese page's cells, with
  its captions translated: `book/_ext/edition.py`, `chinese_source`). Printed output and tables are the same
  for both; the Chinese build translates them as it renders (book/_ext/edition.py).
* the kernel records every file under the repository that the page imported or read and every folder it listed
  (`book/_ext/page_inputs.py`), kept in `_build/.page_inputs.json`; the digest of their contents is in both
  cache entries' keys, so a changed solution module, results file or helper executes the pages that read it.

The builds' kernels run one thread each when pages run side by side (OMP/MKL/torch threads), so two kernels do
not fight over two cores. A page that fails is reported with its traceback and the command exits 1 after the
other pages ran (the builds would execute it again and fail on it).

    python -m scripts.execute_book            # what `make book` runs
    python -m scripts.execute_book -j 1       # one page at a time
    python -m scripts.execute_book --dry-run  # which pages would execute, and why
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import json
import multiprocessing
import os
import pathlib
import sys
import time

import nbformat
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "book" / "_ext"), str(ROOT / "book")]

import edition  # noqa: E402  (book/_ext/edition.py)
import edition_text  # noqa: E402  (book/edition_text.py)
import page_inputs  # noqa: E402  (book/_ext/page_inputs.py)

CACHES = {"en": ROOT / "_build" / ".jupyter_cache", "zh": ROOT / "_build" / ".jupyter_cache_zh"}  # _config*.yml
TIMEOUT = 900  # seconds per cell, as _config.yml's execute.timeout
PROBE = "import course_page_inputs\nprint(course_page_inputs.report({root!r}))"


def pages() -> list[str]:
    """The English edition's pages in _toc.yml's order ("book/ch03_self_attention")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    found = [toc["root"]]

    def walk(node) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc.get("parts", toc.get("chapters", [])))
    return found


def notebook(page: str, which: str, digest: str) -> nbformat.NotebookNode | None:
    """The notebook that edition ``which``'s build reads for ``page`` (None: no such page, or not a notebook)."""
    from myst_nb.core.read import is_myst_markdown_notebook, read_myst_markdown_notebook
    from myst_parser.config.main import MdParserConfig

    docname = page + (".zh" if which == "zh" else "")
    path = ROOT / f"{docname}.md"
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    if which == "zh":
        text = edition.chinese_source(text, ROOT, docname, lambda message: None)
    text = page_inputs.stamp_source(text, digest)
    if not is_myst_markdown_notebook(text):
        return None
    return read_myst_markdown_notebook(text, config=MdParserConfig(), add_source_map=True, path=str(path))


def _worker_init(threads: int | None) -> None:
    os.environ[edition_text.EDITION_VARIABLE] = "both"
    if threads is not None:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = str(threads)


def execute(page: str, source: str) -> tuple[str, str | None, dict | None, float, str | None]:
    """Run one page's notebook (``source``: its JSON) in a kernel started in book/; returns the page, the executed
    notebook (JSON) without the probe cell, what the page read, the seconds, and the traceback of a failure."""
    from jupyter_cache.executors.utils import single_nb_execution

    nb = nbformat.reads(source, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE.format(root=str(ROOT))))
    setup = (
        "import importlib.util as _u, sys as _s; "
        f"_p = _u.spec_from_file_location('course_page_inputs', {str(ROOT / 'book' / '_ext' / 'page_inputs.py')!r}); "
        "_m = _u.module_from_spec(_p); _p.loader.exec_module(_m); _s.modules['course_page_inputs'] = _m; "
        "_m.kernel_setup(); import edition_text as _e; _e.install(); del _u, _s, _p, _m, _e"
    )
    result = single_nb_execution(
        nb,
        cwd=str(ROOT / "book"),
        timeout=TIMEOUT,
        allow_errors=False,
        meta_override=True,
        extra_arguments=[f"--IPKernelApp.exec_lines={setup}"],
    )
    if result.err is not None:
        return page, None, None, result.time, result.exc_string
    probe = nb.cells.pop()
    printed = "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")
    return page, nbformat.writes(nb), json.loads(printed), result.time, None


def for_edition(output: dict, which: str) -> list[dict]:
    """A cell output as edition ``which`` shows it: a figure's Chinese rendering becomes the Chinese edition's
    image/png (followed by the warnings of its rendering, as stderr) and is dropped from the English one."""
    data = output.get("data")
    if not data or edition_text.ZH_PNG not in data:
        return [output]
    out = copy.deepcopy(output)
    zh = out["data"].pop(edition_text.ZH_PNG)
    metadata = out.get("metadata", {})
    zh_metadata = metadata.pop(edition_text.ZH_PNG, {})
    if which != "zh":
        return [out]
    out["data"]["image/png"] = zh
    caught = zh_metadata.get("warnings", [])
    if not caught:
        return [out]
    return [out, nbformat.v4.new_output("stream", name="stderr", text="".join(w + "\n" for w in caught))]


def merged(target: nbformat.NotebookNode, executed: nbformat.NotebookNode, which: str) -> nbformat.NotebookNode:
    """``target`` (an edition's notebook) with the outputs of ``executed`` (the page's run), for edition ``which``."""
    nb = copy.deepcopy(target)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    ran = [cell for cell in executed.cells if cell.cell_type == "code"]
    if [c.source for c in code] != [c.source for c in ran]:
        raise ValueError("the edition's code cells differ from the executed page's")
    for cell, done in zip(code, ran):
        cell.outputs = [nbformat.from_dict(o) for output in done.outputs for o in for_edition(output, which)]
        cell.execution_count = done.execution_count
    for key in ("language_info",):
        if key in executed.metadata:
            nb.metadata[key] = executed.metadata[key]
    return nb


def cache_page(caches: dict, page: str, executed: nbformat.NotebookNode, digest: str, seconds: float) -> None:
    """Both editions' cache entries for ``page`` from its one run. Older entries stay, as Jupyter Book keeps them
    (up to jupyter-cache's limit of entries): a page changed back finds its earlier run."""
    from jupyter_cache.base import CacheBundleIn

    for which, cache in caches.items():
        target = notebook(page, which, digest)
        if target is None:
            continue
        uri = str(ROOT / f"{page}{'.zh' if which == 'zh' else ''}.md")
        try:
            nb = merged(target, executed, which)
        except ValueError as error:  # a Chinese page whose code is not the English page's (tests/test_translations.py)
            print(f"execute_book: {page}: {error}; the {which} build executes it itself", flush=True)
            continue
        cache.cache_notebook_bundle(
            CacheBundleIn(nb, uri, data={"execution_seconds": seconds}), check_validity=False, overwrite=True
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    parser.add_argument("-j", "--jobs", type=int, default=cores, help="pages at a time (default: the cores)")
    parser.add_argument("--dry-run", action="store_true", help="say which pages would execute, execute none")
    parser.add_argument("only", nargs="*", help="these pages only (book/ch03_self_attention); default: all")
    args = parser.parse_args(argv)
    from jupyter_cache import get_cache

    caches = {which: get_cache(str(path)) for which, path in CACHES.items()}
    manifest = page_inputs.load_manifest(ROOT)
    todo: dict[str, str] = {}
    for page in [p for p in pages() if not args.only or p in args.only]:
        digest = page_inputs.inputs_digest(ROOT, manifest.get(page))
        missing = []
        for which, cache in caches.items():
            nb = notebook(page, which, digest)
            if nb is None or not any(c.cell_type == "code" for c in nb.cells):
                continue
            try:
                cache.match_cache_notebook(nb)
            except KeyError:
                missing.append(which)
        if missing:
            todo[page] = nbformat.writes(notebook(page, "en", digest))  # type: ignore[arg-type]
            why = "inputs recorded" if page in manifest else "not run before"
            print(f"execute_book: {page}: to execute (no cache entry for {', '.join(missing)}; {why})", flush=True)
    if args.dry_run or not todo:
        print(f"execute_book: {len(todo)} page(s) to execute", flush=True)
        return 0
    order = sorted(todo, key=lambda p: -manifest.get(p, {}).get("seconds", 1e9))
    jobs = max(1, min(args.jobs, len(todo)))
    failed = []
    start = time.perf_counter()

    def done(page: str, executed: str | None, read: dict | None, seconds: float, error: str | None) -> None:
        if error is not None or executed is None or read is None:
            failed.append(page)
            print(f"execute_book: {page}: FAILED after {seconds:.1f} s\n{error}", flush=True)
            return
        entry = {**read, "seconds": round(seconds, 1)}
        manifest[page] = entry
        digest = page_inputs.inputs_digest(ROOT, entry)
        cache_page(caches, page, nbformat.reads(executed, as_version=4), digest, seconds)
        (ROOT / page_inputs.MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        print(f"execute_book: {page}: executed in {seconds:.1f} s (both editions)", flush=True)

    if jobs == 1:  # one page at a time: in this process (no pool to start)
        _worker_init(None)
        for page in order:
            done(*execute(page, todo[page]))
    else:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            jobs, mp_context=context, initializer=_worker_init, initargs=(1,)
        ) as pool:
            futures = [pool.submit(execute, page, todo[page]) for page in order]
            for future in concurrent.futures.as_completed(futures):
                done(*future.result())
    wall = time.perf_counter() - start
    print(f"execute_book: {len(todo) - len(failed)} page(s) executed in {wall:.1f} s with {jobs} at a time", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
