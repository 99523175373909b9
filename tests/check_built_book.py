"""After `make book`: every chapter page in the built HTML has its executed figures, and no page shows a Python
object's repr where the reader expects a result.

Run by `make test` after the build as `python -m tests.check_built_book` (a page whose figures silently vanished —
e.g. because a non-inline matplotlib backend was forced — still builds without warnings, so the build alone does
not catch it; neither does it catch a cell whose last line returns an object, which Jupyter then prints as
``<matplotlib.legend.Legend at 0x7f...>`` or ``<Figure size 640x480 with 1 Axes>``).

The Chinese edition (`_build/html/zh/`) is held to Chinese: on every built Chinese page the check counts the
Latin-script words a reader meets in the article outside code (`<pre>`, `<code>`: code cells, printed output,
code spans), math, citations ("Dao et al. 2022"), the English names a Chinese term is introduced with
("核函数（kernel）": text in full-width parentheses), acronyms (GPU, HBM, LSTM) and the proper names and
standard symbols of `LATIN_NAMES` (PyTorch, Triton, softmax ...), and fails a page with more than
`LATIN_ALLOWANCE` words (`LATIN_ALLOWANCE_PAGES` for the pages that list English by design: the glossary's English
column, the bibliography's entries). So English cannot creep back into figure captions, tables that code cells
emit, generated sentences or prose. The cells' printed output (`<pre>`) is counted apart (`printed_latin_words`):
its labels and measurement lines are translated as the Chinese book renders them, its data stays English, and each
page may print no more English words than `PRINTED_ALLOWANCE_PAGES` allows it. `python -m tests.check_built_book
--latin` prints every page's counts and words. A Chinese page must not show a space between two Chinese
characters where its source line was wrapped (`cjk_line_breaks`: HTML renders the line break as a space, "循环。 这带来").
"""

import collections
import pathlib
import re
import sys

from bs4 import BeautifulSoup

ROOT = pathlib.Path(__file__).resolve().parent.parent
# an object's default repr, or matplotlib's Figure repr, as it appears (escaped) in a built page
LEAKED_REPR = re.compile(
    r"&lt;[A-Za-z_][\w.]*(?: object)? at 0x[0-9a-f]+&gt;|&lt;Figure size \d+x\d+ with \d+ Axes&gt;"
)


def leaked_reprs(html: str) -> list[str]:
    """The object reprs printed in ``html`` (a built page), in order."""
    return LEAKED_REPR.findall(html)


# Names and symbols that Chinese technical prose writes in Latin letters (case-sensitive; acronyms in capitals of
# two or more letters are names already): software, models and papers' systems, units, and the standard functions.
LATIN_NAMES = frozenset(
    """PyTorch Triton Transformer Transformers FlashAttention Tensor Jupyter Colab Python NumPy numpy Numba
    GitHub Gradescope Canvas Moodle LMS Sphinx MathJax Chromium Jupyter-Book Hugging Face HuggingFace Kaggle Linux
    Ampere Hopper Turing Volta Blackwell NVIDIA Nvidia Tesla Google Meta OpenAI DeepSeek Mistral LLaMA Llama
    Longformer BigBird Reformer Performer Linformer Sparse ELMo RoBERTa ALBERT DistilBERT XLNet ViT
    FlexAttention ALiBi Gemma
    Adam AdamW LayerNorm BatchNorm RMSNorm GELU ReLU SwiGLU Dropout Seq2seq seq2seq WordPiece SentencePiece
    softmax logsumexp tanh sigmoid sin cos exp log max min argmax sqrt diag mask logits logit token tokens
    float float16 float32 bfloat16 fp16 fp32 bf16 int8 TF32 tf32 nats nat bits bit bytes byte
    MiB GiB KiB MB GB KB TB ms GHz TFLOPS FLOPs FLOP FLOPS TB/s GB/s
    autograd Tensor tensor nn Function kernel warp num_warps num_stages tl dot load store
    Multi-Query Grouped-Query Multi-head Latent Attention MQA GQA MLA MHA
    Sutskever Bahdanau Luong Vaswani Devlin Radford Dao Tillet Kung Cox Shazeer Ainslie Child Beltagy Zaheer
    Kitaev Kaplan Press Su Liu Shah Rabe Staats Milakov Gimelshein Pope Kwon Karpathy Schuster Nakajima Wilson
    nanoGPT CPython Shakespeare Mamba DeltaNet PagedAttention SQuAD arXiv NeurIPS ICLR ICML ACL EMNLP NAACL
    True False None NaN inf pre-LN post-LN top-k top-p notebook torch cpu cuda""".split()
)
LATIN_ALLOWANCE = 15  # Latin-script words a Chinese page may show outside code, math, citations and names
LATIN_ALLOWANCE_PAGES = {
    "glossary.zh": 400,  # its English column: the term every Chinese term translates
    "bibliography.zh": 10_000,  # the references themselves
}
# Printed output (`print`, in <pre>) is held apart: its measurement lines and labels are translated as the Chinese
# book renders them (book/_ext/edition_zh_text.py, PRINTED_TEXT and PRINTED_PATTERNS), but the data a cell prints —
# the training text, the model's generated text, source sentences and their French translations — stays as printed.
# So each page has its own allowance of English words in printed output, the count its data leaves (measured
# 2026-12-06 after the translation of the printed lines; it was 1,532 words on the eleven chapters before): a label
# line that loses its translation, or a new English line without one, puts its page over.
PRINTED_ALLOWANCE = 10  # a page not listed below
PRINTED_ALLOWANCE_PAGES = {
    "ch01_seq2seq.zh": 225,  # the number words of the source sentences, their decoded translations
    "ch04_multi_head_attention.zh": 15,  # a translated sentence
    "ch05_transformer.zh": 115,  # the source sentences, their references and translations
    "ch06_gpt.zh": 240,  # a sample of the training text, generated text, a printed method's source
    "ch07_bert.zh": 245,  # the fill-in sentences and blanks, the swapped-sentence pairs, the predicted words
    "ch08_kv_cache.zh": 30,  # the generated continuation
    "ch10_flash_attention.zh": 15,  # "max |ours - F.sdpa|", tensors' names
}
_LATIN_WORD = re.compile(r"[A-Za-z][\w'’]*(?:-\w+)*")  # seq2seq, d_model and bf16 are one word each
_CITATION = re.compile(
    r"[A-Z][\w'’-]+(?:(?:, | & | and |，)[A-Z][\w'’-]+)*(?: et al\.?)?(?:,|，)? ?[（(]?(?:19|20)\d\d[a-z]?"
)
_TITLE = re.compile(
    r"(?:[A-Z0-9][\w'’:-]*|a|an|the|of|in|on|for|to|and|with|is|are|by|at|as)(?: (?:[A-Z0-9][\w'’:-]*|a|an|the|of|in|on|for|to|and|with|is|are|by|at|as))+[.?]?"
)
_REFERENCE = re.compile(r"[A-Z][^()（）]{0,200}\((?:19|20)\d\d[a-z]?\)\. ")
_ET_AL = re.compile(r"[A-Z][\w'’-]+ et al\.")  # "Bahdanau et al.（2014，图 2）"
_FULLWIDTH_PARENS = re.compile(r"（[^（）]*）")


def latin_words(page_html: str) -> list[str]:
    """The Latin-script words of a built Chinese page that are neither code, math, a citation, an English name in
    full-width parentheses, an acronym nor one of `LATIN_NAMES`, in order."""
    soup = BeautifulSoup(page_html, "html.parser")
    article = soup.find("article") or soup
    for tag in article.select(
        "pre, code, kbd, .math, .MathJax, mjx-container, script, style, .edition-switch, .headerlink, "
        "div.citation, .bibliography, dl.citation, .cell_input, .toggle-details, .sd-tab-set .sd-tab-label"
    ):
        tag.decompose()
    for tag in article.find_all(["p", "li", "tr", "em", "cite"]):
        if tag.decomposed:
            continue
        text = " ".join(tag.get_text(" ").split())
        if (
            (tag.name == "p" and text.startswith("参考文献"))  # a chapter's references: authors, titles, venues
            or (tag.name in ("p", "li") and _REFERENCE.match(text))  # one reference: "Dao, Fu ... (2022). Title."
            or (tag.name == "tr" and text.startswith("论文"))  # the header table's papers
            or (tag.name in ("em", "cite") and _TITLE.fullmatch(text))  # a paper's or a book's title
        ):
            tag.decompose()
    text = article.get_text(" ")
    text = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$", " ", text, flags=re.S)  # math MathJax has not typeset
    text = _CITATION.sub(" ", text)
    text = _ET_AL.sub(" ", text)
    text = _FULLWIDTH_PARENS.sub(" ", text)
    found = []
    for word in _LATIN_WORD.findall(text):
        bare = word.strip("'’")
        if len(bare) < 2 or bare in LATIN_NAMES or bare.isupper() or re.search(r"[\d_]", bare):
            continue
        if re.fullmatch(r"[A-Z]+s", bare) or any(p in LATIN_NAMES or p.isupper() for p in bare.split("-")):
            continue  # GPUs, SMs; FlashAttention-2, BERT-base (identifiers with digits or _ are code names)
        found.append(bare)
    return found


# Chinese characters and the full-width punctuation, dashes and quotes Chinese prose uses
CJK_CHARS = "\u4e00-\u9fff\u3000-\u303f\uff00-\uffef\u2014\u2026\u201c\u201d\u2018\u2019"
_CJK_BREAK = re.compile(rf"([{CJK_CHARS}]{{1,6}})([ \t]*\n\s*)([{CJK_CHARS}]{{1,6}})")


def cjk_line_breaks(page_html: str) -> list[str]:
    """Where a built Chinese page's prose holds a line break between two Chinese characters (a wrapped source line,
    which the browser shows as a space: "循环。 这带来"), each as the text around it; code, math and printed output
    are not prose (a break beside inline math is the space the source puts around math anyway)."""
    soup = BeautifulSoup(page_html, "html.parser")
    article = soup.find("article") or soup
    for tag in article.select("pre, script, style, .cell_input, .cell_output"):
        tag.decompose()
    for tag in article.select(".math, .MathJax, mjx-container"):  # inline math stands between the words it joins
        tag.replace_with("x")
    found = []
    for block in article.find_all(["p", "li", "td", "th", "dd", "h1", "h2", "h3", "h4", "figcaption"]):
        text = block.get_text("")  # no separator: an inline tag (<em>, <a>) adds no space of its own
        found += [f"{a}⏎{b}" for a, _, b in _CJK_BREAK.findall(text)]
    return list(dict.fromkeys(found))


def printed_latin_words(page_html: str) -> list[str]:
    """The Latin-script words in a built Chinese page's printed output (its cells' stream outputs, in <pre>),
    counted by the rules of `latin_words` (names, acronyms and identifiers do not count)."""
    import html

    soup = BeautifulSoup(page_html, "html.parser")
    article = soup.find("article") or soup
    found = []
    for pre in article.select(".cell_output .output.stream pre, .cell_output pre"):
        if pre.find_parent(class_="cell_input"):
            continue
        found += latin_words("<article><p>" + html.escape(pre.get_text()) + "</p></article>")
    return found


def chinese_pages_with_english(html_root: pathlib.Path) -> tuple[dict[str, list[str]], list[str]]:
    """Every built Chinese page's Latin words (`latin_words`), and the problems: pages over their allowance."""
    counts = {}
    problems = []
    for page in sorted((html_root / "zh" / "book").glob("*.zh.html")):
        words = latin_words(page.read_text())
        counts[page.stem] = words
        allowance = LATIN_ALLOWANCE_PAGES.get(page.stem, LATIN_ALLOWANCE)
        if len(words) > allowance:
            common = ", ".join(f"{w} ×{n}" for w, n in collections.Counter(words).most_common(8))
            problems.append(
                f"{page.relative_to(html_root.parent.parent)} shows {len(words)} English words outside code, math and names "
                f"(allowed: {allowance}); most common: {common}"
            )
        printed = printed_latin_words(page.read_text())
        allowance = PRINTED_ALLOWANCE_PAGES.get(page.stem, PRINTED_ALLOWANCE)
        if len(printed) > allowance:
            common = ", ".join(f"{w} ×{n}" for w, n in collections.Counter(printed).most_common(8))
            problems.append(
                f"{page.relative_to(html_root.parent.parent)} prints {len(printed)} English words in its cells' output "
                f"(allowed: {allowance}; translate the line in book/_ext/edition_zh_text.py, PRINTED_PATTERNS); "
                f"most common: {common}"
            )
    return counts, problems


def figures_in(page: pathlib.Path) -> set[str]:
    """The executed figures a built page shows (their files, named by their contents' hash)."""
    return set(re.findall(r'<img[^>]+src="(?:\.\./)+_images/([^"]+\.(?:png|svg))"', page.read_text()))


def main() -> int:
    html_dir = ROOT / "_build" / "html" / "book"
    problems = []
    pages = sorted(p.stem for p in (ROOT / "book").glob("ch[0-9][0-9]_*.md") if not p.name.endswith(".zh.md"))
    for stem in pages:
        page = html_dir / f"{stem}.html"
        if not page.exists():
            problems.append(f"{page.relative_to(ROOT)} was not built")
            continue
        figures = re.findall(r'<img[^>]+src="\.\./_images/[^"]+\.(?:png|svg)"', page.read_text())
        if not figures:
            problems.append(f"{page.relative_to(ROOT)} has no executed figure")
    missing = len(problems)
    untranslated = 0
    for stem in pages:
        english, chinese = html_dir / f"{stem}.html", ROOT / "_build" / "html" / "zh" / "book" / f"{stem}.zh.html"
        if english.exists() and chinese.exists() and figures_in(english) and figures_in(chinese) <= figures_in(english):
            untranslated += 1
            problems.append(
                f"{chinese.relative_to(ROOT)} shows the English page's figures, none drawn in Chinese "
                "(scripts/execute_book.py renders each figure in both languages: book/edition_text.py)"
            )
    for page in sorted(html_dir.glob("*.html")) + sorted((ROOT / "_build" / "html").glob("*.html")):
        for found in leaked_reprs(page.read_text()):
            problems.append(f"{page.relative_to(ROOT)} prints {found} (end the cell with plt.show() or ';')")
    reprs = len(problems) - missing - untranslated
    counts, english = chinese_pages_with_english(ROOT / "_build" / "html")
    if not counts:
        english = ["_build/html/zh/book has no Chinese page (the Chinese edition was not built)"]
    problems += english
    for page in sorted((ROOT / "_build" / "html" / "zh" / "book").glob("*.zh.html")):
        breaks = cjk_line_breaks(page.read_text())
        if breaks:
            problems.append(
                f"{page.relative_to(ROOT)} shows a space between Chinese characters where its source line was wrapped "
                f"({len(breaks)}: {', '.join(breaks[:5])}); join the lines in book/{page.stem}.md"
            )
    if "--latin" in sys.argv:
        for stem, words in counts.items():
            printed = printed_latin_words((ROOT / "_build" / "html" / "zh" / "book" / f"{stem}.html").read_text())
            print(f"{stem}: {len(words)}  {' '.join(words)}")
            print(f"{stem} (printed output): {len(printed)}  {' '.join(printed)}")
    for p in problems:
        print("BOOK:", p)
    print(
        f"built book: {len(pages) - missing} of {len(pages)} chapter pages have executed figures, "
        f"{len(pages) - untranslated} with Chinese figures in the Chinese edition; "
        f"{reprs} printed object repr(s); {len(counts) - len(english)} of {len(counts)} Chinese pages within "
        f"their allowance of English words"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
