"""Chapter 12 (FlexAttention) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``): the
labels of the checks of ``autograder/ch12_flex_attention.py`` (their docstrings, on one line), the names its
comparisons give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "causal, window 2, one global token, T = 9: every (q, kv) pair against the rule": (
        "因果，窗口 2，一个全局词元，T = 9：逐一对照规则检查每个 (q, kv) 对"
    ),
    "causal=False, window 1, two global tokens (rows and columns), T = 8": (
        "causal=False，窗口 1，两个全局词元（行和列），T = 8"
    ),
    "flex_attention (eager) under your mask equals attention under the rule's table, q (2, 3, 20, 4), v d_v = 6": (
        "在你的掩码下，flex_attention（eager）等于按规则表计算的注意力，q (2, 3, 20, 4)，v 的 d_v = 6"
    ),
    "one packed row of three documents (lengths 3, 2, 3), causal": "一行拼接了三个文档（长度 3、2、3），因果",
    "two rows packed differently, causal=False: each row compares its own ids": (
        "两行以不同方式拼接，causal=False：每一行只比较它自己的文档编号"
    ),
    "flex_attention (eager) with your document mask equals attention under the rule's table, q (2, 3, 18, 4)": (
        "使用你的文档掩码时，flex_attention（eager）等于按规则表计算的注意力，q (2, 3, 18, 4)"
    ),
    "one row, prefix of 3 tokens, T = 7: the prefix is seen by every query, the rest is causal": (
        "一行，前缀 3 个词元，T = 7：每个查询都能看到前缀，其余部分是因果的"
    ),
    "three rows with prefixes 0, 4 and 7 (no prefix, half, everything), T = 7": (
        "三行，前缀分别为 0、4 和 7（无前缀、一半、全部），T = 7"
    ),
    "4 heads, T = 6: score + m_h (kv_idx - q_idx), slopes 1/4, 1/16, 1/64, 1/256": (
        "4 个头，T = 6：score + m_h (kv_idx - q_idx)，斜率为 1/4、1/16、1/64、1/256"
    ),
    "flex_attention (eager, causal) with your score_mod equals attention with the explicit bias, 8 heads": (
        "使用你的 score_mod 时，flex_attention（eager，因果）等于显式加偏置的注意力，8 个头"
    ),
    # hidden checks
    "window 0, no globals, more globals than tokens, a window wider than T, T_q != T_k, several batches and heads": (
        "窗口为 0、没有全局词元、全局词元多于词元、窗口比 T 还宽、T_q != T_k、多个批次和头"
    ),
    "random packings of three rows, both directions, two heads, T_q < T_k, int32 ids": (
        "三行的随机拼接，因果与双向，两个头，T_q < T_k，int32 编号"
    ),
    "random prefixes, heads, T_q != T_k, int32 lengths, and flex_attention (eager) with the mask": (
        "随机前缀、多个头、T_q != T_k、int32 长度，以及使用该掩码的 flex_attention（eager）"
    ),
    "1, 2 and 16 heads, batches, T_q != T_k, float64 scores": "1、2 和 16 个头，多个批次，T_q != T_k，float64 分数",
    # what the comparisons name
    "your score_mod on every entry of score ({B}, {H}, {T_q}, {T_k}), {factory}": (
        "你的 score_mod 作用于 score ({B}, {H}, {T_q}, {T_k}) 的每个元素，{factory}"
    ),
    # hints
    "Your window is one too narrow: a key exactly `window` positions away is still inside (use <=).": (
        "你的窗口窄了一格：与查询恰好相距 `window` 个位置的键仍在窗口内（用 <=）。"
    ),
    "Your window is one too wide: `window` is the farthest distance a query may look, not one more.": (
        "你的窗口宽了一格：`window` 是查询能看到的最远距离，而不是再多一格。"
    ),
    "Your causal mask keeps the keys after the query instead of those before it (a query sees kv_idx <= q_idx).": (
        "你的因果掩码保留的是查询之后的键，而不是之前的键（查询能看到 kv_idx <= q_idx）。"
    ),
    "With causal=True no query may see a later key, not even a global one: combine with and_masks(..., causal).": (
        "causal=True 时，任何查询都不能看到之后的键，全局词元也不例外：用 and_masks(..., causal) 组合。"
    ),
    "A pair is allowed if it is in the window OR involves a global token: or_masks, not and_masks.": (
        "一个 (q, kv) 对只要在窗口内，或者涉及全局词元，就允许注意：用 or_masks，而不是 and_masks。"
    ),
    "The global tokens must also see every token: their rows (q_idx < n_global) are allowed too.": (
        "全局词元也必须能看到每个词元：它们所在的行（q_idx < n_global）也要允许。"
    ),
    "Your mask polarity is inverted: True means 'may attend'.": "你的掩码极性反了：True 表示“可以注意”。",
    "Each sequence of the batch has its own document ids: compare document_ids[b, q_idx] with "
    "document_ids[b, kv_idx], in row b (not row 0).": (
        "批次中的每个序列都有自己的文档编号：在第 b 行（而不是第 0 行）比较 document_ids[b, q_idx] 和 "
        "document_ids[b, kv_idx]。"
    ),
    "With causal=True a query also may not see later keys of its own document.": (
        "causal=True 时，查询也不能看到它自己文档中之后的键。"
    ),
    "Compare the query's document with the key's: document_ids[b, kv_idx].": (
        "把查询所在的文档与键所在的文档比较：document_ids[b, kv_idx]。"
    ),
    "Your bias has the wrong sign: a key farther back must get a *smaller* score, "
    "score + m_h * (kv_idx - q_idx) with kv_idx <= q_idx.": (
        "你的偏置符号反了：越靠前（越远）的键得分应当越*小*，即 score + m_h * (kv_idx - q_idx)，其中 kv_idx <= q_idx。"
    ),
    "Your slopes go the wrong way round: head 0 has the largest slope, 2^(-8/H), the last head 2^(-8).": (
        "你的斜率顺序反了：第 0 个头的斜率最大，为 2^(-8/H)，最后一个头为 2^(-8)。"
    ),
    "Your slopes are off by one head: head h (counting from 0) has slope 2^(-8 (h + 1) / H).": (
        "你的斜率错开了一个头：第 h 个头（从 0 数起）的斜率是 2^(-8 (h + 1) / H)。"
    ),
    "The prefix has prefix_lengths[b] tokens, positions 0 … prefix_lengths[b] - 1: use kv_idx < "
    "prefix_lengths[b].": "前缀有 prefix_lengths[b] 个词元，位置为 0 … prefix_lengths[b] - 1：用 kv_idx < prefix_lengths[b]。",
    "Each row has its own prefix length: index prefix_lengths with b.": (
        "每一行有自己的前缀长度：用 b 索引 prefix_lengths。"
    ),
    "A key is visible if it is not in the future OR lies in the prefix (|, not &).": (
        "一个键只要不在未来，或者位于前缀中，就可见（用 |，而不是 &）。"
    ),
    "A score_mod returns the modified score: add the bias to `score`, do not replace it.": (
        "score_mod 返回修改后的分数：把偏置加到 `score` 上，而不是替换它。"
    ),
}
