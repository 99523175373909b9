"""The Chinese edition's text that code writes (figures, captions, Markdown outputs) comes out in Chinese, the English
edition's unchanged; and the built-book check counts the English left on a Chinese page (tests/check_built_book.py).

The pages themselves are checked after a build (`python -m tests.check_built_book`); these tests hold the pieces.
"""

from __future__ import annotations

import os
import pathlib
import re
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "book"))
import edition  # noqa: E402  (book/_ext is the book's extension folder, not a package)
import edition_text  # noqa: E402  (book/ holds the pages' helpers)
import edition_zh_text  # noqa: E402

from tests.check_built_book import CJK_CHARS, chinese_pages_with_english, cjk_line_breaks, latin_words  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_latin_words_skip_code_math_citations_names_and_english_in_parentheses():
    page = (
        "<article><h1>用 Triton 写 FlashAttention（FlashAttention in Triton）</h1>"
        "<p>本章（Dao et al. 2022）用 <code>tl.dot</code> 写<em>核函数</em>（kernel），Tillet, Kung &amp; Cox 2019，"
        'GPUs 和 FlashAttention-2 的 softmax；<span class="math">\\(d_\\text{model}\\)</span></p>'
        "<pre>the printed output of a cell</pre></article>"
    )
    assert latin_words(page) == []
    assert latin_words("<article><p>the GPU is fast 很快</p></article>") == ["the", "is", "fast"]


def test_the_built_book_check_fails_a_chinese_page_with_english(tmp_path):
    pages = tmp_path / "zh" / "book"
    pages.mkdir(parents=True)
    (pages / "ch01_seq2seq.zh.html").write_text(
        "<article><p>" + "measured on a shared machine " * 4 + "</p></article>", encoding="utf-8"
    )
    (pages / "ch02_bahdanau_attention.zh.html").write_text("<article><p>全是中文，GPU 除外。</p></article>")
    counts, problems = chinese_pages_with_english(tmp_path)
    assert len(counts["ch01_seq2seq.zh"]) == 16 and counts["ch02_bahdanau_attention.zh"] == []
    assert len(problems) == 1 and "ch01_seq2seq.zh.html shows 16 English words" in problems[0]


def test_the_built_book_check_finds_a_wrapped_line_between_chinese_characters():
    """A line break between two Chinese characters in a built page's prose is a stray space ("循环。 这带来");
    between Chinese and Latin, inside an inline tag's boundary, or in code it is not counted."""
    page = (
        "<article><p>编译时则把它们内联进核函数的最内层循环。\n这带来两点影响。</p>"
        "<li>在窗口内，<em>或者</em>键或查询是前 g 个位置之一\n（Longformer）\n<em>并且</em>满足因果</li>"
        "<p>由 <code>torch.compile</code>\n生成，第 9 章\nthe rest</p><pre>代码\n代码</pre></article>"
    )
    assert cjk_line_breaks(page) == ["最内层循环。⏎这带来两点影", "个位置之一⏎（", "）⏎并且满足因果"]
    assert cjk_line_breaks("<article><p>一行中文，没有折行。</p></article>") == []
    math = '<article><p>之后因果：\n<span class="math notranslate nohighlight">\\(j \\le i\\)</span> 或</p></article>'
    assert cjk_line_breaks(math) == []  # inline math between: the space the source puts around math anyway


_CJK = f"[{CJK_CHARS}]"
_BLOCK_START = re.compile(r"\s*(?:[*+-]\s|\d+\.\s|#|\||```|~~~|\$\$|:::|\{|<|\(\S+\)=\s*$)")


def wrapped_chinese_lines(text: str) -> list[str]:
    """The places in a page's Markdown source where a prose line ending in a Chinese character is continued by a line
    starting with one (emphasis marks aside): the break that HTML shows as a space. Code cells, math blocks and the
    front matter are not prose; a line that starts a block (a list item, a heading, a table row) is not a
    continuation."""
    lines = text.split("\n")
    start = lines.index("---", 1) + 1 if lines and lines[0] == "---" else 0
    found, fence, math = [], False, False
    for i in range(start, len(lines) - 1):
        line, after = lines[i], lines[i + 1]
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            continue
        if not fence and stripped.startswith("$$") and not (len(stripped) > 2 and stripped.endswith("$$")):
            math = not math
            continue
        if fence or math or not stripped or not after.strip() or _BLOCK_START.match(after):
            continue
        if re.search(_CJK + r"\**$", line.rstrip()) and re.match(r"\**" + _CJK, after.strip()):
            found.append(f"line {i + 1}: …{line.rstrip()[-8:]}⏎{after.strip()[:8]}…")
    return found


def test_wrapped_chinese_lines_are_found_in_markdown():
    text = "---\na: b\n---\n第一行以中文结尾\n第二行以中文开头。\n\n* 列表项之一\n  *并且*满足\n* 新的列表项\n```\n代码\n代码\n```\n"
    assert [f.split(":")[0] for f in wrapped_chinese_lines(text)] == ["line 4", "line 7"]


@pytest.mark.parametrize("page", sorted((ROOT / "book").glob("*.zh.md")), ids=lambda p: p.name)
def test_no_chinese_page_wraps_a_line_between_chinese_characters(page):
    """The source-level twin of the built-book check (`cjk_line_breaks`): CI catches the stray space without a
    build."""
    found = wrapped_chinese_lines(page.read_text(encoding="utf-8"))
    assert not found, f"{page.name}: join these lines (HTML shows each break as a space): {found[:8]}"


def test_every_figure_caption_has_its_chinese_and_the_english_matches():
    """The Chinese build replaces each figure's caption (cell metadata) by its Chinese, and warns — failing the -W
    build — when a caption has none or its English changed."""
    captions = {}
    for page in sorted((ROOT / "book").glob("*.md")):
        if page.name.endswith(".zh.md"):
            continue
        warnings: list[str] = []
        zh = edition.to_chinese_captions(page.read_text(encoding="utf-8"), edition_zh_text.CAPTIONS, warnings.append)
        assert not warnings, f"{page.name}: {warnings}"
        captions.update({n: c for c, n in re.findall(r"caption: '((?:[^']|'')*)'\s*\n\s*name: ([\w-]+)", zh)})
    assert len(captions) >= 9
    assert all(CJK.search(c) for c in captions.values())
    warnings = []
    edition.to_chinese_captions(
        "    caption: 'Changed.'\n    name: fig-qkv\n", edition_zh_text.CAPTIONS, warnings.append
    )
    assert warnings and "changed" in warnings[0]


def test_markdown_outputs_are_translated_with_their_code_math_and_bold():
    from docutils import nodes

    md = (
        "No GPU measurement is committed yet: this page was built on a CPU. On a GPU of compute capability 8.0 or "
        "newer (Colab's L4 or A100; not the T4, which current Triton no longer supports), "
        "`python -m benchmarks.bench_flash_attention_triton` writes the results file this cell reads."
    )
    patterns = [(re.compile(p, re.S), r) for p, r in edition_zh_text.OUTPUT_PATTERNS]
    zh = edition.translate_output(md, edition_zh_text.OUTPUT_TEXT, patterns)
    assert zh is not None and CJK.search(zh)
    smart = md.replace("'", "’")  # as the doctree has it after Sphinx's smart quotes
    assert edition.translate_output(smart, edition_zh_text.OUTPUT_TEXT, patterns) == zh
    paragraph = nodes.paragraph("", "", *edition._inline_nodes(zh))
    assert edition._inline_markdown(paragraph) == zh
    assert any(isinstance(n, nodes.literal) for n in paragraph.children)
    bold = nodes.paragraph("", "", nodes.strong("", "CPU"), nodes.Text(" at "), nodes.math("T", "T"))
    assert edition._inline_markdown(bold) == "**CPU** at $T$"
    assert edition.translate_output("nothing like this", edition_zh_text.OUTPUT_TEXT, patterns) is None


def test_figure_text_is_chinese_without_math_and_patterns_translate_their_parts():
    for english, chinese in edition_text.FIGURE_TEXT.items():
        assert "$" not in chinese, f"{english!r}: matplotlib's mathtext cannot draw CJK; write the math as text"
    assert edition_text.figure_text("sequence length T") == "序列长度 T"
    assert edition_text.figure_text("head 3") == "头 3"
    assert edition_text.figure_text("full\n12 of 64 pairs") == "完整注意力\n64 对中的 12 对"
    assert edition_text.figure_text("$x_1$") == "$x_1$"


def test_figures_are_translated_only_in_the_chinese_edition(monkeypatch):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    draw = Figure.draw
    monkeypatch.setattr(edition_text, "_installed", False)
    monkeypatch.delenv(edition_text.EDITION_VARIABLE, raising=False)
    edition_text.install()
    assert Figure.draw is draw, "the English edition draws what the code writes"
    monkeypatch.setenv(edition_text.EDITION_VARIABLE, "zh")
    monkeypatch.setattr(Figure, "draw", draw)
    with matplotlib.rc_context():
        edition_text.install()
        fig, ax = plt.subplots()
        ax.set_xlabel("sequence length T")
        ax.plot([0, 1], label="standard")
        ax.legend()
        fig.canvas.draw()
        assert ax.get_xlabel() == "序列长度 T"
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["标准实现"]
        assert edition_text.CJK_FONT in matplotlib.rcParams["font.family"]
        plt.close(fig)


def test_one_run_shows_each_figure_in_both_languages_and_leaves_it_as_drawn(monkeypatch):
    """`make book`'s kernels (edition "both"): a figure's display carries its English rendering (image/png, as the
    code drew it) and its Chinese one (`ZH_PNG`), and the figure is as drawn afterwards (its texts, fonts and tick
    labels), so the English rendering never depends on the order in which the two are made."""
    import base64

    import matplotlib.pyplot as plt
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.pylabtools import select_figure_formats

    shell = InteractiveShell.instance()
    select_figure_formats(shell, {"png"})
    monkeypatch.setattr(edition_text, "_installed", False)
    monkeypatch.setenv(edition_text.EDITION_VARIABLE, "both")
    monkeypatch.setattr(shell.display_formatter, "formatters", dict(shell.display_formatter.formatters))
    edition_text.install()
    fig, ax = plt.subplots()
    ax.set_xlabel("sequence length T")
    ax.bar(["standard", "flash"], [1, 2], label="standard")
    ax.legend()
    font = ax.xaxis.label.get_fontproperties().get_family()
    data, metadata = shell.display_formatter.format(fig)
    english, chinese = base64.b64decode(data["image/png"]), base64.b64decode(data[edition_text.ZH_PNG])
    assert english.startswith(b"\x89PNG") and chinese.startswith(b"\x89PNG") and english != chinese
    from matplotlib import font_manager

    try:
        font_manager.findfont(edition_text.CJK_FONT, fallback_to_default=False)
    except ValueError:  # no CJK font here (.ci/run installs Debian's fonts-noto-cjk): the glyphs are missing
        assert "Glyph" in " ".join(metadata[edition_text.ZH_PNG]["warnings"])
    else:
        assert "warnings" not in metadata.get(edition_text.ZH_PNG, {}), metadata  # no glyph missing
    assert ax.get_xlabel() == "sequence length T" and ax.xaxis.label.get_fontproperties().get_family() == font
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["standard"]
    again, _ = shell.display_formatter.format(fig)
    assert base64.b64decode(again["image/png"]) == english, "the English rendering is the same after the Chinese"
    plt.close(fig)


def test_the_chinese_build_tells_its_kernels_where_it_executes_a_page_itself(monkeypatch):
    monkeypatch.delenv(edition.EDITION_VARIABLE, raising=False)

    class Config:
        course_edition = "en"

    edition._on_config_inited(None, Config)
    assert edition.EDITION_VARIABLE not in os.environ
    Config.course_edition = "zh"
    edition._on_config_inited(None, Config)
    assert os.environ[edition.EDITION_VARIABLE] == "zh"


def test_each_edition_gets_its_own_figure_from_the_one_run():
    """scripts/execute_book.py: the English cache entry keeps the figure as drawn, the Chinese one the Chinese
    rendering as its image/png, followed by the warnings of that rendering (the Chinese edition's alone)."""
    from scripts import execute_book

    output = {
        "output_type": "display_data",
        "data": {"text/plain": "<Figure>", "image/png": "EN", edition_text.ZH_PNG: "ZH"},
        "metadata": {edition_text.ZH_PNG: {"warnings": ["UserWarning: Glyph missing"]}},
    }
    [en] = execute_book.for_edition(output, "en")
    assert en["data"] == {"text/plain": "<Figure>", "image/png": "EN"} and en["metadata"] == {}
    zh, warning = execute_book.for_edition(output, "zh")
    assert zh["data"] == {"text/plain": "<Figure>", "image/png": "ZH"}
    assert warning["name"] == "stderr" and "Glyph missing" in warning["text"]
    assert output["data"][edition_text.ZH_PNG] == "ZH", "the run's output is left as it is"
    plain = {"output_type": "stream", "name": "stdout", "text": "x\n"}
    assert execute_book.for_edition(plain, "zh") == [plain]


def test_printed_output_is_translated_line_by_line_and_its_data_kept():
    """book/_ext/edition.py, `translate_printed`: a printed measurement line comes out in Chinese with its numbers
    and indentation, a line of data (generated text, a tensor) stays as printed; the built-book check counts the
    English of a page's printed output apart from its prose."""
    patterns = [(re.compile(p, re.S), r) for p, r in edition_zh_text.PRINTED_PATTERNS]
    printed = (
        "final: train 1.347, validation 1.417 nats/char (2.05 bits/char)\n"
        "  seed 0: final held-out MLM loss dynamic 5.894, static 6.144 (+0.250)\n"
        "The value of the class a suite as a support\n"
        "tensor([[0.6285, 0.2312]])\n"
    )
    zh = edition.translate_printed(printed, edition_zh_text.PRINTED_TEXT, patterns)
    assert zh.splitlines() == [
        "最终：训练 1.347，验证 1.417 nats/字符（2.05 bits/字符）",
        "  种子 0：最终留出集 MLM 损失 动态 5.894，静态 6.144（+0.250）",
        "The value of the class a suite as a support",
        "tensor([[0.6285, 0.2312]])",
    ]
    assert all(re.compile(p) for p, _ in edition_zh_text.PRINTED_PATTERNS)
    from tests.check_built_book import printed_latin_words

    page = "<article><div class='cell_output'><pre>held-out loss went down</pre></div><p>正文</p></article>"
    assert printed_latin_words(page) == ["held-out", "loss", "went", "down"]
    assert latin_words(page) == []
