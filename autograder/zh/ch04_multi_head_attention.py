"""Chapter 4 (multi-head attention) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``):
the labels of the checks of ``autograder/ch04_multi_head_attention.py`` (their docstrings, on one line), the names its comparisons
give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    "float16, d_model=24, 2 heads: the products q.k pass 65 504, the scaled scores q.k/sqrt(d_k) do not; results as in float32": (
        "float16，d_model=24，2 个头：乘积 q.k 超过 65 504，而缩放后的分数 q.k/sqrt(d_k) 不超过；结果与 float32 一致"
    ),
    # visible checks
    "split_heads(x (2, 5, 12), 3) has shape (2, 3, 5, 4); head i holds features 4i..4i+3 of each token": (
        "split_heads(x (2, 5, 12), 3) 的形状为 (2, 3, 5, 4)；第 i 个头保存每个词元的第 4i..4i+3 个特征"
    ),
    "merge_heads(x (2, 3, 5, 4)) has shape (2, 5, 12): token t holds [head_1[t], head_2[t], head_3[t]]": (
        "merge_heads(x (2, 3, 5, 4)) 的形状为 (2, 5, 12)：词元 t 保存 [head_1[t], head_2[t], head_3[t]]"
    ),
    "self-attention, d_model=12, 3 heads, x (2, 5, 12): same output and per-head weights as nn.MultiheadAttention": (
        "自注意力，d_model=12，3 个头，x (2, 5, 12)：输出和每个头的权重与 nn.MultiheadAttention 相同"
    ),
    "cross-attention: query (3, 4, 12), key (3, 6, 12), value (3, 6, 12) ≠ key, with a key padding mask": (
        "交叉注意力：query (3, 4, 12)，key (3, 6, 12)，value (3, 6, 12) ≠ key，带键填充掩码"
    ),
    # hidden checks
    "works for other sizes (one head, d_k = 1) and keeps gradients": "适用于其他尺寸（一个头，d_k = 1），并保留梯度",
    "inverts the head split for other sizes": "对其他尺寸也能还原头的拆分",
    "attention mask and key padding together; head-averaged weights; 4 heads, no bias": (
        "注意力掩码与键填充同时使用；对头取平均的权重；4 个头，无偏置"
    ),
    "without positions, attention is permutation equivariant in the queries and invariant to reordering keys+values": (
        "没有位置信息时，注意力对查询的置换等变，对键与值一起重排不变"
    ),
    "keeps float64 and lets gradients reach every projection": "保持 float64，并让梯度到达每个投影",
    "float16 (a Colab GPU's dtype), with a key padding mask: float16 results, as in float32": (
        "float16（Colab GPU 的 dtype），带键填充掩码：结果为 float16，与 float32 时相同"
    ),
    "dropout on the attention weights: off in eval mode, on in training mode": (
        "注意力权重上的 dropout：评估模式下关闭，训练模式下开启"
    ),
    "a bare 2-D (T_q, T_k) mask, shared by the batch and the heads (B = 3, T_q = 4, T_k = 6)": (
        "批次和各头共享的二维 (T_q, T_k) 掩码（B = 3，T_q = 4，T_k = 6）"
    ),
    "in training mode the dropout acts on the attention weights (not on the heads' outputs), and the weights "
    "returned are those before dropout": "训练模式下 dropout 作用于注意力权重（而不是各头的输出），返回的是 dropout 之前的权重",
    "one allowed key per query whose scores are about -2e5 (batch 0) or +2e5 (batch 1): it gets all the weight": (
        "每个查询只允许一个键，其分数约为 -2e5（批次 0）或 +2e5（批次 1）：它得到全部权重"
    ),
    "float16 where the products q.k pass 65 504 but the scaled scores q.k/sqrt(d_k) fit: scale before the product": (
        "float16 下乘积 q.k 超过 65 504 而缩放后的分数 q.k/sqrt(d_k) 不超：先缩放再相乘"
    ),
    # hints
    "project, split_heads, attend per head, merge_heads, then W_o.": (
        "先投影，再 split_heads，每个头分别做注意力，然后 merge_heads，最后乘 W_o。"
    ),
}
