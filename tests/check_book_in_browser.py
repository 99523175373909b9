"""Open every page of the built book (`_build/html`) in headless Chromium and list what a reader would see broken.

Run by `make test` after the book build; `python -m tests.check_book_in_browser [--screenshots DIR]`
(from the repository root).
Exit status 0 when every page passes; 1 with one line per problem otherwise, or when Chromium, chromedriver or
selenium is missing (the message gives the command that installs it).

The browser is Debian's `chromium` driven through Debian's `chromedriver` (selenium, with an explicit driver
path, so nothing is downloaded). Pages are opened from disk (`file://`), as the README tells readers to, in a
1280 × 900 CSS-pixel viewport at device scale 1. Each page is checked for:

* **raw Markdown tables** — a paragraph (or list item, definition, caption) outside code whose visible text
  contains a Markdown table rule (`|---`, `|:--`) or starts with `| `: a table a code cell emitted as
  `text/markdown` that was rendered as plain CommonMark;
* **math not rendered** — MathJax did not load or start, a `.math` element has no `mjx-container`, or MathJax
  left an error node (`mjx-merror`) after typesetting;
* **display equations wider than the text column** — a display `mjx-container` whose content (`scrollWidth`,
  and the width of its `mjx-math`) exceeds the width of the block it sits in; and the page itself must not
  scroll sideways (`document.documentElement.scrollWidth > clientWidth`);
* **tables, figures and outputs wider than the text column** — every `<table>`, `<img>`, cell output
  (`.cell_output`) and text block in an output (`.cell_output pre`) of the article must fit the content width of
  `article.bd-article` (688 px at 1280 px): what is wider is cut off behind a scroll bar (the theme wraps tables in a
  scrolling container), so a reader sees only part of a result. Each is reported with its page, kind, number on
  the page, code cell, width and first words, innermost first (a cell output is not reported again for the text
  block in it). Code (cell inputs, literal blocks in the text) keeps its lines and may scroll: wrapping would break
  Python's indentation; such blocks are only counted in the summary line. Output text wraps (`_static/course.css`);
  a table must be made to fit (fewer or shorter columns, rounder numbers, two tables);
* **images** — every `<img>` must have loaded (`naturalWidth > 0`). Figures drawn by the page's code (images in
  cell outputs) must have legible text *as displayed*: matplotlib draws a font of `s` points at
  `s · dpi / 72` pixels of the PNG, and IPython's inline backend saves at the figure's dpi (`bbox_inches="tight"`
  only crops); the browser then scales the PNG by `displayed_width / natural_width`. So the smallest text of a
  figure is displayed at `min_font_pt · dpi / 72 · displayed_width / natural_width` CSS pixels, and that must be
  at least `MIN_TEXT_PX` (8 px, about the smallest text that stays readable on a screen). `min_font_pt` and
  `dpi` are read from the shared style `book/figures.mplstyle` (the smallest of its text sizes, matplotlib's
  defaults resolved for keys it leaves out). The bound holds only if every figure really uses that style, so
  the sources are checked too (`lint_page_sources`): every page that uses matplotlib applies the shared style,
  and no page's code sets rcParams, another style, a dpi, the inline backend's options, or a font size smaller
  than the style's smallest (or one that cannot be read off the source, e.g. a variable);
* **Colab links** — on a chapter page `book/chNN_name.html` the launch button must open the chapter's student
  notebook, `https://colab.research.google.com/github/<repository>/blob/<branch>/notebooks/chNN_name.ipynb`
  (repository and branch from `autograder/__init__.py`), and that notebook must exist; every other Colab link on
  any page must open an existing `notebooks/*.ipynb` of the same repository and branch;
* **Chinese search** — the built search page, asked for each query in `SEARCHES` (a Chinese term), must list the
  chapter page that introduces it: Sphinx indexes Chinese words only with `html_search_language: zh` and jieba,
  and only the glossary's terms as whole words (`book/_ext/chinese_search.py`);
* **console errors** — any browser console message of level SEVERE (JavaScript errors, failed loads) except
  those listed in `KNOWN_CONSOLE_ERRORS` with their reason; and any resource fetched from the network instead
  of the built book (the book must work offline: MathJax and every other script, style and font are bundled).
"""

from __future__ import annotations

import argparse
import base64
import os
import pathlib
import re
import sys
import time
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
STYLE = ROOT / "book" / "figures.mplstyle"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
INSTALL = "apt-get update -qq && apt-get install -y -qq chromium chromium-driver"
WINDOW = (1280, 900)  # CSS pixels
MIN_TEXT_PX = 8  # smallest legible figure text, CSS pixels as displayed
# (regular expression on the console message, why it is acceptable); anything else fails the check.
KNOWN_CONSOLE_ERRORS: list[tuple[str, str]] = [
    (
        r"Identifier 'THEBE_JS_URL' has already been declared",
        "sphinx-thebe's inline config script is emitted twice under Sphinx 7.4 (its None file name and the "
        "builder's '' compare unequal); the second copy only re-declares the same constants, and thebe (live "
        "code) is not enabled in this book",
    ),
]
# (query typed into the book's search box, page that must be among the results)
SEARCHES: list[tuple[str, str]] = [
    ("自注意力", "book/ch03_self_attention.html"),
    ("滑动窗口注意力", "book/ch09_sparse_attention.html"),
    ("掩码语言模型", "book/ch07_bert.html"),
    ("键值缓存", "book/ch08_kv_cache.html"),
    ("旋转位置编码", "book/ch08_kv_cache.html"),
    ("掩码函数", "book/ch12_flex_attention.html"),
]
# the Chinese edition's search (zh/search.html), for the same terms and their synonyms
ZH_SEARCHES: list[tuple[str, str]] = [
    ("自注意力", "book/ch03_self_attention.zh.html"),
    ("键值缓存", "book/ch08_kv_cache.zh.html"),
    ("KV 缓存", "book/ch08_kv_cache.zh.html"),
    ("RoPE", "book/ch08_kv_cache.zh.html"),
    ("旋转位置编码", "book/ch08_kv_cache.zh.html"),
    ("掩码语言模型", "book/ch07_bert.zh.html"),
]
SEARCH_TIMEOUT_S = 30
# Sphinx's search page writes this summary line only once every result is listed.
SEARCH_STATUS = "const s = document.querySelector('#search-results .search-summary'); return s && s.innerText || null"

# Font sizes a page may pass to matplotlib by name (relative to font.size) that are never below it.
_LARGE_NAMES = {"medium", "large", "x-large", "xx-large", "larger"}
_FONT_KEYS = (
    "font.size",
    "axes.titlesize",
    "axes.labelsize",
    "xtick.labelsize",
    "ytick.labelsize",
    "legend.fontsize",
    "legend.title_fontsize",
    "figure.titlesize",
    "figure.labelsize",
)


def style_text_metrics(style: pathlib.Path = STYLE) -> tuple[float, float]:
    """(smallest font size in points, dpi) of every figure drawn with the shared matplotlib style."""
    import matplotlib
    from matplotlib.font_manager import font_scalings

    if not style.exists():
        raise SystemExit(f"BROWSER: the shared figure style {style.relative_to(ROOT)} is missing")
    own = matplotlib.rc_params_from_file(style, use_default_template=False)
    if "figure.dpi" not in own:
        raise SystemExit(f"{style.relative_to(ROOT)} must set figure.dpi (the inline backend saves at it)")
    base = float(own.get("font.size", matplotlib.rcParamsDefault["font.size"]))
    sizes = []
    for key in _FONT_KEYS:
        value = own[key] if key in own else matplotlib.rcParamsDefault[key]
        if value is None:  # legend.title_fontsize: None means legend.fontsize
            continue
        sizes.append(base * font_scalings[value] if isinstance(value, str) else float(value))
    return min(sizes), float(own["figure.dpi"])


def lint_page_sources(min_font_pt: float) -> list[str]:
    """Problems in the book pages' code that would make figures smaller than the shared style promises."""
    problems = []
    font_kw = re.compile(
        r"\b(fontsize|labelsize|titlesize|title_fontsize|size)\s*=\s*([\w.\"'+-]+)"
        r"|\.(set_fontsize|set_size)\(\s*([\w.\"'+-]+)"
    )
    for page in sorted((ROOT / "book").glob("*.md")):
        text, name = page.read_text(), page.relative_to(ROOT)
        code = "\n".join(re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, flags=re.S))
        if "matplotlib" in code and not re.search(r"""plt\.style\.use\(\s*["']figures\.mplstyle["']\s*\)""", code):
            problems.append(
                f"{name}: uses matplotlib but does not apply the shared style "
                f'(plt.style.use("figures.mplstyle") in its first cell)'
            )
        for pattern, what in [
            (r"rcParams|\bplt\.rc\(|\bmpl\.rc\(|matplotlib\.rc\(|rc_context", "sets rcParams"),
            (r"\bdpi\s*=|set_dpi\(", "sets a dpi"),
            (r"InlineBackend", "configures the inline backend"),
            (r"""style\.use\(\s*(?!["']figures\.mplstyle["'])""", "applies another style"),
        ]:
            for match in re.finditer(pattern, code):
                problems.append(
                    f"{name}: {what} ({match.group(0).strip()}…) — put figure settings in book/figures.mplstyle"
                )
        for match in font_kw.finditer(code):
            key, value = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
            bare = value.strip("\"'")
            try:
                ok = float(bare) >= min_font_pt
            except ValueError:
                if key == "size" and value[0] not in "\"'":  # e.g. torch's size=n: not a font
                    continue
                ok = bare in _LARGE_NAMES
            if not ok:
                problems.append(
                    f"{name}: {key}={value} is smaller than the shared style's smallest text "
                    f"({min_font_pt:g} pt) or cannot be checked — use the style's sizes"
                )
    return problems


def colab_target() -> tuple[str, str]:
    """(owner/name, branch) of the repository the Colab links must open."""
    import autograder

    return autograder.REPOSITORY.removeprefix("https://github.com/").strip("/"), autograder.BRANCH


# Runs in the page after MathJax has finished; returns what the Python side turns into problems.
PAGE_SCRIPT = r"""
const done = arguments[arguments.length - 1];
const minTextPx = arguments[0], minFontPt = arguments[1], dpi = arguments[2];
const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
const short = s => s.replace(/\s+/g, ' ').trim().slice(0, 90);
async function inspect(mathjax) {
  const out = {mathjax, rawTables: [], unrendered: [], mathErrors: [], wideMath: [], images: [], tinyText: [],
               colab: [], remote: [], pageScroll: null, column: null, wide: [], wideCode: 0};
  for (const el of document.querySelectorAll('p, li, dd, dt, caption, figcaption, td, th')) {
    if (el.closest('pre, code, .highlight') || !visible(el)) continue;
    const text = el.innerText;
    if (/\|\s*:?-{3,}/.test(text) || /^\s*\|\s/.test(text)) out.rawTables.push(short(text));
  }
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container')) out.unrendered.push(short(el.textContent));
  }
  for (const el of document.querySelectorAll('mjx-merror')) {  // TeX MathJax could not typeset
    out.mathErrors.push(el.getAttribute('data-mjx-error') || short(el.textContent));
  }
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const block = c.parentElement, math = c.querySelector('mjx-math');
    const needed = Math.max(c.scrollWidth, math ? math.getBoundingClientRect().width : 0);
    if (needed > block.clientWidth + 1 || c.scrollWidth > c.clientWidth + 1) {
      const item = MathJax.startup.document.getMathItemsWithin(c)[0];
      out.wideMath.push({needed: Math.round(needed), available: block.clientWidth,
                         tex: short(item ? item.math : c.textContent)});
    }
  }
  for (const img of document.images) {
    if (img.loading === 'lazy' && !img.complete) { img.loading = 'eager'; }
  }
  await Promise.all(Array.from(document.images, img => img.decode().catch(() => null)));
  for (const img of document.images) {
    const src = img.getAttribute('src');
    if (!img.complete || img.naturalWidth === 0) { out.images.push(src); continue; }
    if (!img.closest('.cell_output') || !visible(img)) continue;
    const shown = img.getBoundingClientRect().width;
    const px = minFontPt * dpi / 72 * shown / img.naturalWidth;
    if (px < minTextPx) out.tinyText.push({src, px, shown: Math.round(shown), natural: img.naturalWidth});
  }
  // Tables, images and output blocks against the text column: what is wider is cut off behind a scroll bar.
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const pad = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(pad.paddingLeft) - parseFloat(pad.paddingRight);
  out.column = Math.round(column);
  // Code (cell inputs, literal blocks in the text) keeps its lines and may scroll: it is only counted.
  const reported = [], cells = Array.from(article.querySelectorAll('.cell'));
  const kinds = [['table', 'table'], ['img', 'figure'], ['.cell_output pre', 'output text'],
                 ['.cell_output', 'cell output'], ['pre', 'code']];
  for (const [selector, kind] of kinds) {
    let i = 0;
    for (const el of article.querySelectorAll(selector)) {
      if (kind === 'code' && el.closest('.cell_output')) continue;
      i += 1;
      if (!visible(el) || reported.some(r => el.contains(r))) continue;
      const needed = Math.max(el.getBoundingClientRect().width, el.scrollWidth);
      if (needed <= column + 1) continue;
      if (kind === 'code') { out.wideCode += 1; continue; }
      reported.push(el);
      const what = el.tagName === 'IMG' ? el.getAttribute('src')
                 : short((el.tagName === 'TABLE' && el.querySelector('tr') || el).innerText).slice(0, 60);
      out.wide.push({kind, index: i, cell: cells.indexOf(el.closest('.cell')) + 1, needed: Math.round(needed), what});
    }
  }
  const sw = document.querySelector('p.edition-switch a');
  out.switch = sw ? sw.href : null;
  for (const a of document.querySelectorAll('a[href*="colab.research.google.com"]')) {
    out.colab.push({href: a.href, launch: !!a.closest('.dropdown-launch-buttons')});
  }
  for (const r of performance.getEntriesByType('resource')) {
    if (!/^(file|data|blob|about):/.test(r.name)) out.remote.push(r.name);
  }
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) out.pageScroll = [root.scrollWidth, root.clientWidth];
  return out;
}
const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => 'ok', e => 'failed: ' + e)
  : Promise.resolve(document.querySelector('.math') ? 'not loaded' : 'not needed');
ready.then(inspect).then(done, e => done({scriptError: String(e)}));
"""


def start_browser():
    """Headless Chromium through Debian's chromedriver, console logging on; exits 2 with the fix if missing."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not pathlib.Path(p).exists()]
    if missing:
        sys.exit(f"BROWSER: {', '.join(missing)} not found. Install them (as root): {INSTALL}")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        sys.exit("BROWSER: selenium is not installed: .venv/bin/pip install -r requirements.txt")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--allow-file-access-from-files",
        "--hide-scrollbars",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
    )
    driver.set_script_timeout(60)
    return driver


def launch_menu_problems(driver) -> list[str]:
    """Click the page's launch (rocket) button; its menu must then show the Colab entry."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        driver.find_element("css selector", ".dropdown-launch-buttons button").click()
        link = driver.find_element("css selector", '.dropdown-launch-buttons a[href*="colab.research.google.com"]')
        WebDriverWait(driver, 5).until(lambda d: link.is_displayed())
    except WebDriverException as error:
        return [f"the launch button does not open a menu with the Colab link ({type(error).__name__})"]
    return []


def wide_problem(w: dict, column: int) -> str:
    """One line for an element wider than the text column (see `PAGE_SCRIPT`): which, where, how wide."""
    where = f" (in code cell {w['cell']}'s output)" if w["cell"] else ""
    return (
        f"{w['kind']} #{w['index']}{where} is {w['needed']} px wide in the {column} px text column, "
        f"{w['needed'] - column} px hidden behind a scroll bar: {w['what']!r}"
    )


def check_page(
    driver,
    page: pathlib.Path,
    min_font_pt: float,
    dpi: float,
    repo: str,
    branch: str,
    screenshots: pathlib.Path | None = None,
    code_scrolls: dict[str, int] | None = None,
) -> list[str]:
    """Load one built page and return its problems, each a line a reader of the log can act on.

    `code_scrolls`, when given, gets the page's number of code blocks wider than the text column (not problems).
    """
    redirect = re.search(r'<meta http-equiv="Refresh" content="0; url=([^"]+)"', page.read_text(), re.I)
    if redirect:  # index.html only forwards to the first page, which is checked in its own right
        target = page.parent / redirect.group(1)
        return [] if target.exists() else [f"redirects to {redirect.group(1)}, which was not built"]
    driver.get(page.as_uri())
    r = driver.execute_async_script(PAGE_SCRIPT, MIN_TEXT_PX, min_font_pt, dpi)
    if screenshots:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        shot = driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": WINDOW[0], "height": min(height, 16000), "scale": 1},
            },
        )
        (screenshots / f"{page.parent.name}_{page.stem}.png").write_bytes(base64.b64decode(shot["data"]))
    if "scriptError" in r:
        return [f"the check itself failed in the page: {r['scriptError']}"]
    problems = []
    if r["mathjax"] not in ("ok", "not needed"):
        problems.append(f"MathJax {r['mathjax']}: math is shown as raw TeX")
    problems += [f"raw Markdown table text: {t!r}" for t in r["rawTables"]]
    if r["mathjax"] == "ok":
        problems += [f"math not rendered by MathJax: {t!r}" for t in r["unrendered"]]
    problems += [f"MathJax error: {t!r}" for t in r["mathErrors"]]
    problems += [
        f"display equation {w['needed']} px wide in a {w['available']} px column: '{w['tex']}'" for w in r["wideMath"]
    ]
    problems += [wide_problem(w, r["column"]) for w in r["wide"]]
    if code_scrolls is not None and r["wideCode"]:
        code_scrolls[page.name] = r["wideCode"]
    if r["pageScroll"]:
        problems.append(f"page scrolls sideways at {WINDOW[0]} px ({r['pageScroll'][0]} px of content)")
    problems += [f"image did not load: {src}" for src in r["images"]]
    problems += [
        f"figure text {t['px']:.1f} px tall as displayed (< {MIN_TEXT_PX} px): {t['src']} "
        f"({t['natural']} px wide, shown at {t['shown']} px)"
        for t in r["tinyText"]
    ]
    problems += [f"loads {url} from the network (the book must work offline)" for url in r["remote"]]

    zh = page.stem.endswith(".zh")  # the Chinese edition: its pages open the Chinese notebooks
    stem = page.stem.removesuffix(".zh")
    folder = "notebooks/zh" if zh else "notebooks"
    own = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{folder}/{stem}.ipynb"
    notebook_link = re.compile(
        rf"https://colab\.research\.google\.com/github/{re.escape(repo)}/blob/"
        rf"{re.escape(branch)}/(notebooks(?:/zh)?/ch\d\d_\w+\.ipynb)"
    )
    chapter = page.parent.name == "book" and re.fullmatch(r"ch\d\d_\w+", stem)
    launch = [c["href"] for c in r["colab"] if c["launch"]]
    if page.parent.name == "book":  # the language switch leads to the page's counterpart, which exists
        switch = r.get("switch")
        if not switch:
            problems.append("no language switch (中文版 / English) to the other edition's page")
        elif not pathlib.Path(urllib.parse.urlparse(switch).path).exists():
            problems.append(f"the language switch leads to a page that was not built: {switch}")
    if chapter:
        if not (ROOT / folder / f"{stem}.ipynb").exists():
            problems.append(f"no student notebook {folder}/{stem}.ipynb for the Colab button")
        if not launch:
            problems.append("no Colab launch button")
        problems += [f"Colab launch button opens {href}, not {own}" for href in launch if href != own]
        if launch:
            problems += launch_menu_problems(driver)
    for c in r["colab"]:
        m = notebook_link.fullmatch(c["href"])
        if not m or not (ROOT / m.group(1)).exists():
            if not (chapter and c["launch"]):  # already reported above
                problems.append(f"Colab link does not open a course notebook: {c['href']}")

    for entry in driver.get_log("browser"):  # everything logged since the last page, the menu click included
        if entry["level"] != "SEVERE":
            continue
        known = [why for pattern, why in KNOWN_CONSOLE_ERRORS if re.search(pattern, entry["message"])]
        if not known:
            problems.append(f"console error: {entry['message'][:300]}")
    return problems


def search_problems(driver, html: pathlib.Path, searches: list[tuple[str, str]] | None = None) -> list[str]:
    """Search the built book for each of `SEARCHES` as a reader would (search.html?q=...) and list what is missing.

    The result list is complete when Sphinx writes its summary line ("Search finished ..." or "Your search did not
    match ..."). Pages opened from disk cannot fetch the result pages' text for the snippets under each result
    (Chromium refuses `fetch` of file:// URLs); those console errors are the search page's, not the book's, and are
    dropped here.
    """
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    page = html / "search.html"
    if not page.exists():
        return ["search.html was not built"]
    problems = []
    for query, expected in SEARCHES if searches is None else searches:
        driver.get(f"{page.as_uri()}?q={urllib.parse.quote(query)}")
        try:
            status = WebDriverWait(driver, SEARCH_TIMEOUT_S).until(lambda d: d.execute_script(SEARCH_STATUS))
        except TimeoutException:
            problems.append(f"search for {query} did not finish within {SEARCH_TIMEOUT_S} s")
            continue
        hrefs = driver.execute_script(
            "return [...document.querySelectorAll('#search-results ul.search li > a')].map(a => a.getAttribute('href'))"
        )
        found = sorted({h.split("#")[0].split("?")[0] for h in hrefs})
        if expected not in found:
            problems.append(f"search for {query} does not find {expected} ({status!r}; found {found})")
        driver.get_log("browser")  # the snippet fetches' file:// errors, see above
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=pathlib.Path, default=HTML, help="the built book (default: _build/html)")
    parser.add_argument("--screenshots", type=pathlib.Path, help="also save a full-page PNG of each page here")
    args = parser.parse_args()
    html = args.html.resolve()
    pages = sorted(
        p for p in html.rglob("*.html") if not any(part.startswith("_") for part in p.relative_to(html).parts)
    )
    if not pages:
        print(f"BROWSER: no built pages under {os.path.relpath(html)} — run `make book` first")
        return 1
    min_font_pt, dpi = style_text_metrics()
    repo, branch = colab_target()
    problems = [f"book sources: {p}" for p in lint_page_sources(min_font_pt)]
    if args.screenshots:
        args.screenshots.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    code_scrolls: dict[str, int] = {}
    driver = start_browser()
    try:
        for page in pages:
            name = os.path.relpath(page, ROOT)
            problems += [
                f"{name}: {p}"
                for p in check_page(driver, page, min_font_pt, dpi, repo, branch, args.screenshots, code_scrolls)
            ]
        problems += [f"search: {p}" for p in search_problems(driver, html)]
        if (html / "zh" / "search.html").exists():
            problems += [f"zh/search: {p}" for p in search_problems(driver, html / "zh", ZH_SEARCHES)]
    finally:
        driver.quit()
    for p in problems:
        print("BROWSER:", p)
    print(
        f"browser check: {len(pages)} pages at {WINDOW[0]}x{WINDOW[1]} in {time.monotonic() - start:.0f} s, "
        f"figure text >= {MIN_TEXT_PX} px ({min_font_pt:g} pt at {dpi:g} dpi); tables, figures and outputs within "
        f"the text column ({sum(code_scrolls.values())} code blocks wider, which scroll): "
        f"{len(problems)} problem{'s' * (len(problems) != 1)}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
