"""Let the book's search find Chinese terms on the pages that use them.

With `html_search_language: zh` (`_config.yml`) Sphinx splits page text into search words with jieba's
`cut_for_search`. Jieba's dictionary does not know the course's terms (自注意力, 缩放点积注意力, 滑动窗口注意力, ...):
it would cut 自注意力 into 自 + 注意力, and a search for 自注意力 would find no chapter. This extension adds every
Chinese term of the glossary (`book/glossary.md`, its 中文 column: the one list of the book's Chinese terms) to
jieba's dictionary before the pages are indexed, so each becomes one search word on every page that writes it.

Without jieba, Sphinx's Chinese search silently drops all Chinese text from the index; the build stops instead,
naming the package to install.

Words alone do not make a term *find its page*: a reader types 键值缓存 where the book writes "KV 缓存", 位置编码 is
a search word of chapter 5 but only a part of chapter 8's 旋转位置编码, and "softmax" is a word of most chapters,
so the page that introduces it came fifth. So every glossary term also gets *main index entries* on the section it
links (`search_names`): its English name and the names in its parentheses, its 中文 cell, and the other standard
names in `SYNONYMS`. The entries are added to the resolved doctree (`doctree-resolved`, after the general index
was collected, so `genindex` is unchanged; HTML does not render index nodes) and Sphinx's search index stores them
(`indexentries`). Sphinx's search page lists a main index entry that contains the query and is at most twice as
long first (score 100 for an exact match, far above a word's 5 or a title word's 15): 键值缓存 finds chapter 8, 位置编码
finds chapters 5 and 8, and softmax puts chapter 3 first.
"""

from __future__ import annotations

import logging
import pathlib
import re

GLOSSARY = pathlib.Path(__file__).resolve().parent.parent / "glossary.md"
HAN = re.compile(r"[\u4e00-\u9fff]+")
LABEL = re.compile(r"<(ch\d\d-[\w-]+)>`$")  # the label of a glossary row's last cell, {ref}`N · Section <label>`

# Other standard names of glossary terms, Chinese and English, under which readers look them up: the key is the
# glossary's term cell (tests/test_book_reference_pages.py checks that each key is one). The term's own names, its
# 中文 cell and the names in its parentheses need no entry here.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "additive attention": ("Bahdanau attention", "加法注意力"),
    "beam search": ("集束搜索",),
    "causal mask (look-ahead mask)": ("前瞻掩码",),
    "cross-attention": ("encoder-decoder attention",),
    "factorised embedding parameterisation": ("factorized embedding parameterization",),
    "FlashAttention": ("Flash Attention", "FlashAttention-2", "精确注意力"),
    "greedy decoding": ("贪婪解码",),
    "high-bandwidth memory (HBM)": ("显存",),
    "KV cache": ("键值缓存", "KV缓存", "key-value cache"),
    "layer normalisation": ("layer normalization", "LayerNorm", "层标准化"),
    "log-sum-exp (LogSumExp)": ("logsumexp",),
    "long short-term memory (LSTM)": ("长短期记忆", "长短时记忆网络"),
    "masked language model (MLM)": ("masked language modelling", "masked language modeling", "遮蔽语言模型"),
    "nucleus sampling (top-p)": ("top-p sampling", "top-p 采样"),
    "position embedding (learned)": ("learned position embedding", "可学习位置嵌入"),
    "position-wise feed-forward network": ("feed-forward network", "FFN", "前馈网络"),
    "positional encoding": ("position encoding", "sinusoidal positional encoding", "正弦位置编码"),
    "residual connection": ("skip connection", "跳跃连接"),
    "rotary position embedding (RoPE)": ("rotary positional embedding", "旋转位置嵌入", "旋转式位置编码"),
    "scaled dot-product attention": ("dot-product attention", "点积注意力"),
    "segment embedding (token type)": ("token type embedding", "segment id"),
    "self-attention": ("intra-attention", "自注意力机制"),
    "sequence to sequence (seq2seq)": ("sequence-to-sequence",),
    "softmax": ("softmax function", "softmax 函数"),
    "vanishing gradient": ("vanishing gradients", "梯度弥散"),
    "warm-up": ("warmup", "learning-rate warm-up", "预热"),
    "weight tying": ("tied embeddings", "权重绑定"),
}
# Words in a term's parentheses that qualify it rather than name it: "position embedding (learned)", "decode (phase)".
QUALIFIERS = {"learned", "phase"}


def glossary_rows(text: str) -> list[list[str]]:
    """The body rows of the glossary's first Markdown table, each a list of stripped cells (header and rule left out).

    Args:
        text: the glossary page's Markdown source.

    Returns:
        One list of cell strings per table row, in page order; empty when the page has no table.
    """
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            block.append(line)
        elif block:
            break
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in block[2:]]


def chinese_words(name: str) -> list[str]:
    """The runs of Chinese characters in a glossary 中文 cell that are search words (two characters or more).

    "KV 缓存" gives ["缓存"] (the Latin part is indexed as a word of its own), "查询 / 键 / 值" gives ["查询"]: a
    single character is no search word in Sphinx (its `word_filter` drops words shorter than two characters).
    """
    return [run for run in HAN.findall(name) if len(run) >= 2]


def glossary_terms(path: pathlib.Path = GLOSSARY) -> list[str]:
    """Every Chinese search word of the glossary's 中文 column (second column), without repeats, in page order."""
    words: list[str] = []
    for row in glossary_rows(path.read_text(encoding="utf-8")):
        if len(row) > 1:
            words += [w for w in chinese_words(row[1]) if w not in words]
    return words


def search_names(row: list[str]) -> list[str]:
    """Every name under which the search finds a glossary row's term: the term cell's name and the names in its
    parentheses (code marks removed, qualifiers such as "(learned)" left out), its 中文 cell, its `SYNONYMS`.

    "causal mask (look-ahead mask)" gives ["causal mask", "look-ahead mask", "因果掩码", "前瞻掩码"].
    """
    term, chinese = row[0], row[1]
    m = re.fullmatch(r"(.*?)\s*\((.*)\)", term)
    english = [m[1], *(n.strip() for n in m[2].split(","))] if m else [term]
    names = [n.replace("`", "") for n in english if n not in QUALIFIERS] + [chinese, *SYNONYMS.get(term, ())]
    return list(dict.fromkeys(n for n in names if n))


def search_entries(path: pathlib.Path = GLOSSARY) -> dict[str, list[str]]:
    """The main index entries the search gets: for each section label that glossary rows link, their names
    (`search_names`), in page order.

    Returns:
        ``{label: [name, ...]}``, e.g. ``"ch08-kv-cache": ["KV cache", "KV 缓存", "键值缓存", ...]``.
    """
    entries: dict[str, list[str]] = {}
    for row in glossary_rows(path.read_text(encoding="utf-8")):
        m = LABEL.search(row[-1]) if len(row) == 4 else None
        if m:
            names = entries.setdefault(m[1], [])
            names += [n for n in search_names(row) if n not in names]
    return entries


def index_node_entries(labels: dict[str, tuple[str, str, str]], docname: str) -> list[tuple]:
    """The index entries of page ``docname``: ``("single", name, section id, "main", None)`` for each name of each
    glossary label whose section is on that page.

    Args:
        labels: Sphinx's standard-domain labels, ``{label: (docname, section id, section name)}``.
        docname: the page, e.g. ``"book/ch08_kv_cache"``.
    """
    return [
        ("single", name, labels[label][1], "main", None)
        for label, names in search_entries().items()
        if label in labels and labels[label][0] == docname
        for name in names
    ]


def add_index_entries(app, doctree, docname: str) -> None:
    """`doctree-resolved`: append an (invisible) index node with the page's glossary entries, for the search."""
    from sphinx import addnodes

    entries = index_node_entries(app.env.get_domain("std").labels, docname)
    if entries:
        doctree.append(addnodes.index(entries=entries))


def add_terms_to_jieba(words: list[str]) -> None:
    """Add each word to jieba's default dictionary with a frequency that keeps it in one piece."""
    import jieba

    jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict" chatter in the build log
    for word in words:
        jieba.add_word(word)


def _on_builder_inited(app) -> None:
    if (app.config.html_search_language or "")[:2] != "zh":
        return
    try:
        import jieba  # noqa: F401
    except ImportError as error:
        from sphinx.errors import ExtensionError

        raise ExtensionError(
            "html_search_language 'zh' needs the jieba package, or the search index loses every Chinese "
            "word: .venv/bin/pip install -r requirements.txt"
        ) from error
    add_terms_to_jieba(glossary_terms())


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    app.connect("doctree-resolved", add_index_entries)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
