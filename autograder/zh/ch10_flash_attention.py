"""Chapter 10 (FlashAttention) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``): the
labels of the checks of ``autograder/ch10_flash_attention.py`` (their docstrings, on one line), the names its
comparisons give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

_MEASURED = (
    "Tried q (1, 2, 40, 4), k (1, 2, 48, 4), v (1, 2, 48, 6), causal with padding, blocks 8 × 8, and measured the "
    "largest tensor the call makes (T_q · T_k = 1920 numbers would be a whole score matrix)."
)

ZH = {
    # visible checks
    "from m = -inf, ell = 0, one block x (3, 7) gives m = max(x) and ell = sum(exp(x - m))": (
        "从 m = -inf、ell = 0 出发，一个块 x (3, 7) 给出 m = max(x) 和 ell = sum(exp(x - m))"
    ),
    "folding blocks of 3, 5 and 2 entries one after the other, where the max grows in a later block": (
        "依次并入 3、5、2 个元素的块，最大值在后面的块中变大"
    ),
    "equals softmax(QK^T/sqrt(d_k))V without a mask: q (2, 3, 10, 4), k (2, 3, 14, 4), v (2, 3, 14, 6), blocks 4 × 5": (
        "无掩码时等于 softmax(QK^T/sqrt(d_k))V：q (2, 3, 10, 4)，k (2, 3, 14, 4)，v (2, 3, 14, 6)，块大小 4 × 5"
    ),
    "causal with T_q = 9 < T_k = 12 (bottom-right aligned), blocks 4 × 5": (
        "因果，T_q = 9 < T_k = 12（右下对齐），块大小 4 × 5"
    ),
    "a padding mask attention_mask (B, T_k), True at real keys, blocks 3 × 4": (
        "填充掩码 attention_mask (B, T_k)，真实的键处为 True，块大小 3 × 4"
    ),
    "dq, dk, dv equal autograd through softmax(QK^T/sqrt(d_k))V: q (2, 3, 10, 4), k (2, 3, 14, 4), v (2, 3, 14, 6)": (
        "dq、dk、dv 等于 autograd 对 softmax(QK^T/sqrt(d_k))V 求出的梯度：q (2, 3, 10, 4)，k (2, 3, 14, 4)，"
        "v (2, 3, 14, 6)"
    ),
    "causal with T_q = 9 < T_k = 12, blocks 4 × 5": "因果，T_q = 9 < T_k = 12，块大小 4 × 5",
    # hidden checks
    "stays finite for entries of several hundreds (exp would overflow without the running max)": (
        "元素达到几百时仍保持有限（没有当前最大值，exp 会溢出）"
    ),
    "a first block of -inf entries (masked scores) leaves m = -inf and ell = 0, never NaN": (
        "第一个块全是 -inf（被掩码的分数）时，m = -inf、ell = 0，绝不出现 NaN"
    ),
    "rows whose every entry is about -1e5 or -2e5 (a shift clamped to some finite floor underflows them to 0)": (
        "每个元素都约为 -1e5 或 -2e5 的行（把平移量截断到某个有限下限会使它们下溢为 0）"
    ),
    "keeps float64": "保持 float64",
    "both masks together, for blocks 1 × 1, 64 × 64 and 3 × 7": "两种掩码同时使用，块大小 1 × 1、64 × 64 和 3 × 7",
    "a query that may attend to no key gets a zero output and lse = -inf, not NaN": (
        "不能关注任何键的查询得到零输出和 lse = -inf，而不是 NaN"
    ),
    "padded keys whose scores dwarf the real ones do not disturb the result (mask before the max)": (
        "分数远大于真实键的填充键不影响结果（在取最大值之前施加掩码）"
    ),
    "keeps float64 and stays exact for scores of several thousands": "保持 float64，分数达到几千时仍然精确",
    "every allowed score of every query is below -57 000 (float64): the running max must start at -inf": (
        "每个查询的每个允许的分数都低于 -57 000（float64）：当前最大值必须从 -inf 开始"
    ),
    "float16 inputs with entries of 100 to 500: the tile scores (QK^T beyond 65504) are computed in float32": (
        "元素为 100 到 500 的 float16 输入：分块的分数（QK^T 超过 65504）要用 float32 计算"
    ),
    "batch 1, and more queries than keys (T_q = 9 > T_k = 5, not causal) with padding": (
        "批大小 1，以及查询比键多（T_q = 9 > T_k = 5，非因果）且有填充"
    ),
    "float16 inputs (a Colab GPU's dtype), causal with padding: o in float16 and lse in float32, as in float32": (
        "float16 输入（Colab GPU 的 dtype），因果且有填充：o 为 float16，lse 为 float32，与 float32 时一致"
    ),
    _MEASURED: (
        "试了 q (1, 2, 40, 4)、k (1, 2, 48, 4)、v (1, 2, 48, 6)，因果且有填充，块大小 8 × 8，并测量了这次调用创建的"
        "最大张量（T_q · T_k = 1920 个数就是一整张分数矩阵）。"
    ),
    "padding and causal masks, for blocks 64 × 64 and 3 × 4, and 1 × 1 with both masks": (
        "填充掩码和因果掩码，块大小 64 × 64 和 3 × 4，以及两种掩码同时使用时的 1 × 1"
    ),
    "a query that may attend to no key (lse = -inf) gives finite, zero gradients": (
        "不能关注任何键的查询（lse = -inf）给出有限的零梯度"
    ),
    "keeps float64 and matches to float64 precision": "保持 float64，并在 float64 精度下一致",
    "float16 inputs with entries of 100 to 500: the recomputed scores (beyond 65504) are computed in float32": (
        "元素为 100 到 500 的 float16 输入：重计算的分数（超过 65504）要用 float32 计算"
    ),
    # the values compared, and the hints
    "online_softmax_update over blocks {blocks} of x {shape}": "online_softmax_update 逐块处理 x {shape}（块的边界 {blocks}）",
    "m is the largest entry seen so far.": "m 是到目前为止见过的最大元素。",
    "when the max grows from m to m_new, what was summed so far must be multiplied by exp(m - m_new).": (
        "当最大值从 m 增大到 m_new 时，到目前为止累加的和必须乘以 exp(m - m_new)。"
    ),
    "the old sum is multiplied by exp(m_new - m); the factor is exp(m - m_new) (at most 1).": (
        "旧的和被乘以了 exp(m_new - m)；因子应是 exp(m - m_new)（至多为 1）。"
    ),
    "the old sum is rescaled to m_new, but the block's terms are relative to the block's own max: shift them by "
    "m_new too (or multiply their sum by exp(block max - m_new)).": (
        "旧的和已重新缩放到 m_new，但块内的项是相对于块自己的最大值的：它们也要减去 m_new"
        "（或者把它们的和乘以 exp(块最大值 - m_new)）。"
    ),
    "ell' = ell * exp(m - m_new) + sum over the block of exp(x - m_new), with m_new = max(m, block max).": (
        "ell' = ell * exp(m - m_new) + 块内 exp(x - m_new) 之和，其中 m_new = max(m, 块最大值)。"
    ),
    "flash_attention_forward should return a tuple (o, lse); you returned {type}.": (
        "flash_attention_forward 应返回元组 (o, lse)；你返回的是 {type}。"
    ),
    "lse should be a tensor (B, H, T_q).": "lse 应是形状为 (B, H, T_q) 的张量。",
    "lse = m_i + log(l_i) with the final running max and sum of each query.": (
        "lse = m_i + log(l_i)，用每个查询最终的当前最大值和累计和计算。"
    ),
    "for each key block: mask the scores (-inf) before taking the max; m_new = max(m_i, rowmax(s)); rescale both "
    "l_i and o_i by exp(m_i - m_new) before adding the new block.": (
        "对每个键块：先对分数施加掩码（-inf），再取最大值；m_new = max(m_i, rowmax(s))；"
        "在加入新块之前，把 l_i 和 o_i 都乘以 exp(m_i - m_new) 重新缩放。"
    ),
    "query i sees keys j <= i + T_k - T_q; skip only key blocks that lie entirely after the query block's last "
    "position (the block holding the diagonal must still be computed).": (
        "查询 i 看到的键是 j <= i + T_k - T_q；只跳过完全位于查询块最后一个位置之后的键块（包含对角线的块仍然要计算）。"
    ),
    "flash_attention_backward should return a tuple (dq, dk, dv); you returned {type}.": (
        "flash_attention_backward 应返回元组 (dq, dk, dv)；你返回的是 {type}。"
    ),
    "recompute s_ij = q_i k_j^T / sqrt(d_k) (masked with -inf), p_ij = exp(s_ij - lse_i); then dv_j += p_ij^T do_i, "
    "dp_ij = do_i v_j^T, ds_ij = p_ij * (dp_ij - D_i), dq_i += ds_ij k_j / sqrt(d_k), dk_j += ds_ij^T q_i / "
    "sqrt(d_k).": (
        "重计算 s_ij = q_i k_j^T / sqrt(d_k)（用 -inf 施加掩码），p_ij = exp(s_ij - lse_i)；然后 "
        "dv_j += p_ij^T do_i，dp_ij = do_i v_j^T，ds_ij = p_ij * (dp_ij - D_i)，dq_i += ds_ij k_j / sqrt(d_k)，"
        "dk_j += ds_ij^T q_i / sqrt(d_k)。"
    ),
    "mask the recomputed scores exactly as in the forward pass; skip only query blocks whose every query comes "
    "before the key block's first key.": (
        "对重计算的分数施加与前向传播完全相同的掩码；只跳过其中每个查询都在该键块第一个键之前的查询块。"
    ),
}
