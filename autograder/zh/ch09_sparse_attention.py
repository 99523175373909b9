"""Chapter 9 (sparse and long-context attention) in Chinese, for a Chinese submission's feedback page
(``autograder/wording.py``): the labels of the checks of ``autograder/ch09_sparse_attention.py`` (their docstrings,
on one line), the names its comparisons give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "sliding_window_mask(7, 2) (causal): each query sees itself and the 2 keys before it": (
        "sliding_window_mask(7, 2)（因果）：每个查询看到它自己和它前面的 2 个键"
    ),
    "sliding_window_mask(6, 1, causal=False): each query sees one key on each side": (
        "sliding_window_mask(6, 1, causal=False)：每个查询看到两侧各一个键"
    ),
    "a (7, 7) window of width 1 with global tokens 0 and 4: their rows and columns become True": (
        "宽度为 1 的 (7, 7) 窗口，全局词元为 0 和 4：它们的行和列都变为 True"
    ),
    "causal=True: global tokens see and are seen by all, but never across the future": (
        "causal=True：全局词元看到所有词元，也被所有词元看到，但绝不跨越到未来"
    ),
    "causal, q (2, 3, 13, 4), v (2, 3, 13, 6), window 3: equals dense attention under the window mask": (
        "因果，q (2, 3, 13, 4)，v (2, 3, 13, 6)，窗口 3：等于加了窗口掩码的稠密注意力"
    ),
    "bidirectional, window 2, block_len 5 (T = 11 is not a multiple of the block)": (
        "双向，窗口 2，block_len 5（T = 11 不是块长的整数倍）"
    ),
    "T = 512, window 4: no T x T tensor is kept (scores stay about T x 3·window)": (
        "T = 512，窗口 4：不保留 T x T 的张量（分数约为 T x 3·window 个）"
    ),
    "clusters (2, 7) of queries and keys, causal: same cluster and not in the future": (
        "查询和键的簇 (2, 7)，因果：同一个簇，且不在未来"
    ),
    "causal=False: same cluster is enough": "causal=False：同一个簇就足够了",
    "scores (2, 13, 5), blocks of 3, n = 3 with the initial and 2 local blocks forced: equals a brute-force loop": (
        "分数 (2, 13, 5)，块长 3，n = 3，强制选中开头的块和 2 个局部块：与暴力循环的结果相同"
    ),
    "causal: future blocks get the highest scores, and still are never selected": (
        "因果：未来的块得到最高的分数，但仍然从不被选中"
    ),
    "causal=False, nothing forced but the query's own block: every block may be chosen": (
        "causal=False，除查询自己所在的块外不强制选中任何块：每个块都可能被选中"
    ),
    # hidden checks
    "window 0, a window wider than the sequence, T = 1, both directions": "窗口为 0，窗口比序列还宽，T = 1，两个方向",
    "creates the mask on the requested device": "在指定的设备上创建掩码",
    "per-sequence global tokens (B, T) with a shared (T, T) mask and a batched (B, T, T) mask": (
        "每个序列各自的全局词元 (B, T)，配合共享的 (T, T) 掩码和按批次的 (B, T, T) 掩码"
    ),
    "per-head global tokens (B, H, T) with a (B, 1, T, T) mask, one shared is_global (T,) with a (B, T, T) mask": (
        "每个头各自的全局词元 (B, H, T) 配合 (B, 1, T, T) 掩码，共享的 is_global (T,) 配合 (B, T, T) 掩码"
    ),
    "many (T, window, block_len) combinations, 3-D and 5-D inputs, d_v != d_k": (
        "多种 (T, window, block_len) 组合，三维和五维输入，d_v != d_k"
    ),
    "float16 (a Colab GPU's dtype), causal and bidirectional: float16 results, as in float32": (
        "float16（Colab GPU 的 dtype），因果和双向：结果为 float16，与 float32 时一致"
    ),
    "keeps float64 and lets gradients flow to q, k and v": "保持 float64，梯度能流到 q、k 和 v",
    "(B, H, T) clusters, and T_k > T_q (queries are the last positions, as chapter 3's causal_mask)": (
        "(B, H, T) 的簇，以及 T_k > T_q（查询是最后的那些位置，与第 3 章的 causal_mask 相同）"
    ),
    "unbatched (T,) clusters, and more queries than keys without causality (T_q = 7 > T_k = 4)": (
        "不带批次维的 (T,) 簇，以及非因果时查询比键多（T_q = 7 > T_k = 4）"
    ),
    "(B, H, T, n_blocks) scores, n larger than the blocks, no forced blocks, T not a multiple of the block": (
        "(B, H, T, n_blocks) 的分数，n 大于块数，没有强制选中的块，T 不是块长的整数倍"
    ),
    # the values compared, and the hints
    "Your window is one too narrow: a query may attend to keys at distance exactly `window` too (use <=).": (
        "你的窗口窄了一格：查询也可以关注距离恰好为 `window` 的键（用 <=）。"
    ),
    "Your window is one too wide: `window` is the farthest distance, not the number of keys behind the query.": (
        "你的窗口宽了一格：`window` 是最远的距离，而不是查询身后键的个数。"
    ),
    "With causal=True no query may see a key after it: combine the band with causal_mask(T).": (
        "causal=True 时，任何查询都不能看到它之后的键：把带状掩码与 causal_mask(T) 组合起来。"
    ),
    "Your mask keeps the future instead of the past: True = may attend, and a causal query sees j <= i.": (
        "你的掩码保留的是未来而不是过去：True 表示可以关注，因果的查询看到的是 j <= i。"
    ),
    "Your mask polarity is inverted: in this course True means 'may attend'.": (
        "你的掩码极性反了：本课程中 True 表示“可以关注”。"
    ),
    "A global token must attend to every token: set its whole row to True.": (
        "全局词元必须关注每一个词元：把它的整行设为 True。"
    ),
    "Every token must attend to a global token: set its whole column to True.": (
        "每一个词元都必须关注全局词元：把它的整列设为 True。"
    ),
    "With causal=True no query may see a later key, not even a global one.": (
        "causal=True 时，任何查询都不能看到更晚的键，全局词元也不例外。"
    ),
    "Keep what the base mask allows: the global rows and columns are added to it, not put in its place.": (
        "保留基础掩码允许的部分：全局的行和列是加到它上面的，而不是替换它。"
    ),
    "Your causal output uses keys after the query: a causal slab ends at the block's last query.": (
        "你的因果输出用到了查询之后的键：因果的键片段（slab）应止于该块的最后一个查询。"
    ),
    "Scale the scores by 1/sqrt(d_k).": "把分数乘以 1/sqrt(d_k)。",
    "Check the slab's mask: inside a slab, key column c of block n is position n*b - window + c; it is allowed "
    "when it lies in the band and is not padding (0 <= position < T).": (
        "检查键片段（slab）的掩码：在片段内，第 n 块的第 c 列键对应位置 n*b - window + c；"
        "它落在带内且不是填充（0 <= position < T）时才允许关注。"
    ),
    "Your sliding_window_attention keeps a tensor of {largest} elements for T = {T}, window = 4 (causal={causal}): "
    "that is T x T-sized. Compute scores only between each block of queries and its slab of keys ((..., T/b, b, b "
    "+ 2·window) numbers, not (..., T, T)).": (
        "在 T = {T}、window = 4（causal={causal}）时，你的 sliding_window_attention 保留了一个有 {largest} 个元素的"
        "张量：这是 T x T 量级的。只在每个查询块与它的键片段之间计算分数（(..., T/b, b, b + 2·window) 个数，"
        "而不是 (..., T, T)）。"
    ),
    "With causal=True a query may not attend to later keys, even in its own cluster.": (
        "causal=True 时，查询不能关注更晚的键，即使它们在同一个簇中。"
    ),
    "A query selected a future block: with causal=True only blocks j <= t // block_len are visible.": (
        "有查询选中了未来的块：causal=True 时只有 j <= t // block_len 的块是可见的。"
    ),
    "The initial block(s) and the local blocks (the query's own and the ones before) are always selected.": (
        "开头的块和局部块（查询自己所在的块及其前面的块）总是被选中。"
    ),
    "Each row selects min(n_selected, visible blocks) blocks, the forced ones included.": (
        "每一行选中 min(n_selected, 可见块数) 个块，包括强制选中的块。"
    ),
    "Fill the remaining places with the visible blocks of highest score (topk over the last dim).": (
        "剩下的名额用分数最高的可见块填满（在最后一维上做 topk）。"
    ),
}
