"""Chapter 8 (the KV cache, MQA, GQA and MLA) in Chinese, for a Chinese submission's feedback page
(``autograder/wording.py``): the labels of the checks of ``autograder/ch08_kv_cache.py`` (their docstrings, on one
line), the names its comparisons give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "repeat_kv(x (2, 3, 5, 4), 2) -> (2, 6, 5, 4), heads in the order 0, 0, 1, 1, 2, 2": (
        "repeat_kv(x (2, 3, 5, 4), 2) -> (2, 6, 5, 4)，头的顺序为 0, 0, 1, 1, 2, 2"
    ),
    "n_rep=1 (multi-head attention) leaves x as it is": "n_rep=1（多头注意力）时 x 保持原样",
    "empty cache, 5 tokens (prefill): causal attention, 4 query heads sharing 2 key/value heads": (
        "空缓存，5 个词元（预填充）：因果注意力，4 个查询头共享 2 个键/值头"
    ),
    "then one new token: it attends to all 6 keys, and the cache grows to 6 positions": (
        "接着来一个新词元：它关注全部 6 个键，缓存增长到 6 个位置"
    ),
    "MLA(d_model=20, 4 heads, d_c=6, d_head=3, d_rope=4, d_v=5) on x (2, 7, 20), no cache": (
        "MLA(d_model=20，4 个头，d_c=6，d_head=3，d_rope=4，d_v=5) 作用于 x (2, 7, 20)，不用缓存"
    ),
    "the cache holds only the normalised latent (B, 1, T, d_c) and the rotated shared key (B, 1, T, d_rope)": (
        "缓存中只保存归一化后的潜在向量 (B, 1, T, d_c) 和旋转后的共享键 (B, 1, T, d_rope)"
    ),
    # hidden checks
    "MQA (one key/value head for 6 query heads) and groups of 3": "MQA（6 个查询头共用一个键/值头）和每组 3 个头的分组",
    "several new tokens at once (bottom-right mask), MHA and MQA, two layers": (
        "一次来多个新词元（右下对齐的掩码），MHA 和 MQA，两层"
    ),
    "float16 (a Colab GPU's dtype): a prefill of 3 then 2 new tokens give float16 results, as in float32": (
        "float16（Colab GPU 的 dtype）：先预填充 3 个词元再来 2 个新词元，结果为 float16，与 float32 时一致"
    ),
    "batch 1, a first step of a single token (empty cache, T_q = T_k = 1), then decode steps; d_v != d_head": (
        "批大小 1，第一步只有一个词元（空缓存，T_q = T_k = 1），然后是解码步；d_v != d_head"
    ),
    "prefill, a chunk of 2, then single tokens with the cache; with a query latent (d_cq) too": (
        "预填充，一段 2 个词元，然后带缓存逐个生成词元；也检查有查询潜在向量（d_cq）的情形"
    ),
    "a RoPE base of 500 (not the default 10 000), d_v left at its default, two layers sharing one cache, batch 1": (
        "RoPE 的基数为 500（不是默认的 10 000），d_v 取默认值，两层共用一个缓存，批大小 1"
    ),
    # the values compared, and the hints
    "Your heads come in the order 0, 1, …, H_kv-1, 0, 1, … (x.repeat). Each key/value head must serve n_rep "
    "*neighbouring* query heads: 0, 0, 1, 1, … (like torch.repeat_interleave on dim 1).": (
        "你的头的顺序是 0, 1, …, H_kv-1, 0, 1, …（x.repeat）。每个键/值头必须服务 n_rep 个*相邻的*查询头："
        "0, 0, 1, 1, …（就像在第 1 维上做 torch.repeat_interleave）。"
    ),
    "attend_with_cache(q, k, v, cache, layer={layer}) with {t} cached and {n} new positions": (
        "attend_with_cache(q, k, v, cache, layer={layer})（已缓存 {t} 个位置，新增 {n} 个位置）"
    ),
    "The new query attends only to the new key: use the keys and values cache.update returns (all of them).": (
        "新的查询只关注了新的键：应使用 cache.update 返回的键和值（全部）。"
    ),
    "The new query sees only key 0: the causal mask is aligned top-left. With T_q < T_k the queries are the *last* "
    "T_q positions: causal_mask(T_q, T_k) aligns it bottom-right.": (
        "新的查询只看到了键 0：因果掩码是左上对齐的。当 T_q < T_k 时，查询是*最后* T_q 个位置："
        "causal_mask(T_q, T_k) 会把它右下对齐。"
    ),
    "After the prefill the cache should hold the 5 positions of layer 0: call cache.update(layer, k, v).": (
        "预填充之后，缓存中应有第 0 层的 5 个位置：调用 cache.update(layer, k, v)。"
    ),
    "output of the decode step": "解码步的输出",
    "After 5 + 1 positions the cache should hold 6, it holds {n}: cache every new key/value.": (
        "经过 5 + 1 个位置之后，缓存应有 6 个位置，实际有 {n} 个：每个新的键/值都要缓存。"
    ),
    "forward should return (output, None).": "forward 应返回 (output, None)。",
    "mla(x, cache=cache) should store layer 0 with cache.update(layer, c_kv, k_r).": (
        "mla(x, cache=cache) 应使用 cache.update(layer, c_kv, k_r) 保存第 0 层。"
    ),
    "cache.keys[0] (the latent c_KV)": "cache.keys[0]（潜在向量 c_KV）",
    "cache.values[0] (the rotary key k_R)": "cache.values[0]（旋转位置编码的键 k_R）",
}
