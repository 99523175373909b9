"""What a page's execution read, in the key of its execution cache: a page re-runs when a file it read changed.

jupyter-cache keys an executed page on its code cells (and their metadata) and its `kernelspec`, not on the
modules the code imports or the files it reads: a changed solution module, results file or `book/diagrams.py`
would leave the cached figures stale. `make book`'s executor (`scripts/execute_book.py`) records, in each page's
kernel, every file under the repository that the page imported or read and every folder it listed (an audit hook,
`kernel_setup`), into `_build/.page_inputs.json`; the digest of those files' contents (`inputs_digest`) is written
into the page's `kernelspec` metadata (`stamp_source`) both by the executor, when it caches a page, and by this
extension, as each edition's build reads the page. A changed input gives a new digest, so the cache misses and the
page executes again; a page whose code changed misses anyway, and its new inputs are recorded as it runs.
`book/edition_text.py` is an input of every page (every book kernel imports it).
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import sys

MANIFEST = "_build/.page_inputs.json"  # relative to the book's root (the repository)
ALWAYS = ("book/edition_text.py",)
STAMP_KEY = "course_page_inputs"
_SKIP = (".venv", "_build", ".git", "__pycache__", ".pytest_cache")
_NOT_INPUTS = ("book/_ext/page_inputs.py",)  # the recorder itself, loaded into every kernel


def page_of(docname: str) -> str:
    """The page whose execution serves ``docname`` in both editions: "book/ch03_self_attention.zh" ->
    "book/ch03_self_attention"."""
    return docname.removesuffix(".zh")


def load_manifest(root: pathlib.Path) -> dict:
    """The inputs recorded for each page ({page: {"files": [...], "dirs": [...], "seconds": s}}), or {}."""
    try:
        return json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: pathlib.Path) -> str:
    try:
        st = path.stat()
    except OSError:
        return "missing"
    if not path.is_file():
        return "not a file"
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _FILE_DIGESTS[key]


def inputs_digest(root: pathlib.Path, entry: dict | None) -> str:
    """One digest of the contents of a page's inputs (``entry``: its manifest entry; None: not recorded yet) and
    of the names in the folders it listed."""
    entry = entry or {}
    h = hashlib.sha256()
    for rel in sorted(set(ALWAYS) | set(entry.get("files", []))):
        h.update(f"file {rel} {_file_digest(root / rel)}\n".encode())
    for rel in sorted(entry.get("dirs", [])):
        folder = root / rel
        names = sorted(os.listdir(folder)) if folder.is_dir() else ["<missing>"]
        h.update(f"dir {rel} {json.dumps(names)}\n".encode())
    return "sha256:" + h.hexdigest()


_FRONT_MATTER = re.compile(r"\A---\n(.*?\n)---\n", re.S)
_KERNELSPEC = re.compile(r"^kernelspec:[ \t]*\n((?:[ \t]+\S.*\n)+)", re.M)


def stamp_source(text: str, digest: str) -> str:
    """A MyST notebook's text with ``digest`` in its front matter's `kernelspec` (which jupyter-cache hashes);
    text without a kernelspec (not a notebook) is returned as it is."""
    front = _FRONT_MATTER.match(text)
    if front is None:
        return text
    spec = _KERNELSPEC.search(front.group(1))
    if spec is None:
        return text
    indent = re.match(r"[ \t]+", spec.group(1)).group(0)  # type: ignore[union-attr]
    at = front.start(1) + spec.end()
    return text[:at] + f'{indent}{STAMP_KEY}: "{digest}"\n' + text[at:]


def _on_source_read(app, docname, source):
    root = pathlib.Path(app.srcdir)
    entry = load_manifest(root).get(page_of(docname))
    source[0] = stamp_source(source[0], inputs_digest(root, entry))


# In the page's kernel (scripts/execute_book.py starts it with `kernel_setup`).

_opened: set[str] = set()
_listed: set[str] = set()
_started = 0.0


def _audit(event: str, args: tuple) -> None:
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return
        if mode is not None and any(c in mode for c in "wax+"):
            return
        if mode is None and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            return
        _opened.add(os.path.abspath(os.fsdecode(path)))
    elif event == "os.scandir":  # pathlib's and glob's listings (the import system's os.listdir is not a read)
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            _listed.add(os.path.abspath(os.fsdecode(path)))


def kernel_setup() -> None:
    """Start recording what the kernel reads (an audit hook: files opened for reading, folders listed)."""
    global _started
    import time

    _started = time.time()
    sys.addaudithook(_audit)


def report(root: str) -> str:
    """What the kernel read under ``root`` as JSON ({"files": [...], "dirs": [...]}, relative paths): the files it
    opened and the modules it imported (their sources), less what it wrote itself (changed since it started)."""
    base = pathlib.Path(root).resolve()

    def inside(path: str) -> str | None:
        p = pathlib.Path(path)
        try:
            rel = p.resolve().relative_to(base)
        except (ValueError, OSError):
            return None
        return None if any(part in _SKIP for part in rel.parts) else rel.as_posix()

    files = set(_opened)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.endswith(".py"):
            files.add(os.path.abspath(file))
    kept = set()
    for file in files:
        rel = inside(file)
        if rel and rel not in _NOT_INPUTS and os.path.isfile(file) and os.stat(file).st_mtime < _started:
            kept.add(rel)
    dirs = {rel for d in _listed if (rel := inside(d)) is not None and os.path.isdir(d)}
    return json.dumps({"files": sorted(kept), "dirs": sorted(dirs)})


def setup(app):
    app.connect("source-read", _on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
