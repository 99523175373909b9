"""Chapter 3 (self-attention) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``):
the labels of the checks of ``autograder/ch03_self_attention.py`` (their docstrings, on one line), the names its comparisons
give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "matches softmax(QK^T/sqrt(d_k))V without a mask, q (2, 3, 5, 4), k (2, 3, 7, 4), v (2, 3, 7, 6)": (
        "无掩码时与 softmax(QK^T/sqrt(d_k))V 一致，q (2, 3, 5, 4)，k (2, 3, 7, 4)，v (2, 3, 7, 6)"
    ),
    "respects a key padding mask (True = may attend), broadcast as (B, 1, 1, T_k)": (
        "遵守键填充掩码（True = 可以关注），按 (B, 1, 1, T_k) 广播"
    ),
    "respects a causal mask (T_q = T_k = 6)": "遵守因果掩码（T_q = T_k = 6）",
    "causal_mask(5) is the bool lower triangle, diagonal included": "causal_mask(5) 是含对角线的布尔下三角矩阵",
    "causal_mask(1) lets the only token see itself": "causal_mask(1) 让唯一的词元看到它自己",
    "attention_mask_from_lengths(torch.tensor([3, 1, 4])) marks the real tokens True": (
        "attention_mask_from_lengths(torch.tensor([3, 1, 4])) 把真实词元标为 True"
    ),
    "SelfAttention(d_model=8, d_k=4, d_v=6) on x (2, 5, 8) gives output (2, 5, 6) and weights (2, 5, 5)": (
        "SelfAttention(d_model=8, d_k=4, d_v=6) 作用于 x (2, 5, 8)，给出输出 (2, 5, 6) 和注意力权重 (2, 5, 5)"
    ),
    # hidden checks
    "works for 3-D (B, T, d) and 5-D inputs, with other sizes": "适用于三维 (B, T, d) 和五维输入，以及其他尺寸",
    "respects a random mask and a rectangular causal mask": "遵守随机掩码和矩形因果掩码",
    "a query whose keys are all masked gets zero weights and zero output, not NaN": (
        "所有键都被屏蔽的查询得到全零的权重和全零的输出，而不是 NaN"
    ),
    "float16 and bfloat16 (a Colab GPU's types) with padding and causal masks: no overflow, half-precision output": (
        "float16 和 bfloat16（Colab GPU 的类型），带填充掩码和因果掩码：不溢出，输出为半精度"
    ),
    "with every allowed score below -7e3, or -8e4, masked keys still get weight 0 (the fill is below any score)": (
        "所有允许的分数都低于 -7e3 或 -8e4 时，被屏蔽的键仍得到权重 0（填充值低于任何分数）"
    ),
    "batch-less (T, d) inputs, a (B, 1, T_k) mask for 3-D inputs and a (B, 1, T_q, T_k) mask shared by the heads": (
        "无批次维的 (T, d) 输入、三维输入的 (B, 1, T_k) 掩码，以及各头共享的 (B, 1, T_q, T_k) 掩码"
    ),
    "scores up to about 150 (float32) and 25 (float16): exp of them overflows unless the softmax is stable": (
        "分数高达约 150（float32）和 25（float16）：除非 softmax 数值稳定，否则其 exp 会溢出"
    ),
    "float16 with products QKᵀ past 65 504 whose scaled scores fit: scale before the product": (
        "float16 下乘积 QKᵀ 超过 65 504 而缩放后的分数不超：先缩放再相乘"
    ),
    "keeps float64 and lets gradients flow to q, k and v": "保持 float64，并让梯度流到 q、k 和 v",
    "causal_mask(T_q, T_k) with T_k > T_q is bottom-right aligned": "T_k > T_q 时 causal_mask(T_q, T_k) 右下对齐",
    "creates the mask on the requested device": "在指定的设备上创建掩码",
    "pads to an explicit T_k, handles a zero length and B != T_k": "填充到给定的 T_k，能处理长度为零和 B != T_k 的情况",
    "uses the mask ((T, T), (B, 1, T) and (B, T, T)), the bias option and the default d_v": (
        "使用掩码（(T, T)、(B, 1, T) 和 (B, T, T)）、bias 选项和默认的 d_v"
    ),
    # hints (_sdpa_hint and the checks' own)
    "You did not divide the scores by sqrt(d_k) (Vaswani et al. 2017, eq. 1).": (
        "你没有把分数除以 sqrt(d_k)（Vaswani et al. 2017，式 1）。"
    ),
    "You divided the scores by d_k; the scale is 1/sqrt(d_k).": "你把分数除以了 d_k；缩放因子应是 1/sqrt(d_k)。",
    "The softmax runs over the queries; it must run over the keys (the last dim, dim=-1).": (
        "你的 softmax 沿查询方向计算；它必须沿键方向计算（最后一维，dim=-1）。"
    ),
    "The scores are divided by sqrt(d_model); the scale is 1/sqrt(d_k), the width of the queries and keys.": (
        "分数被除以了 sqrt(d_model)；缩放因子应是 1/sqrt(d_k)，d_k 是查询和键的宽度。"
    ),
    "Your mask polarity is inverted: in this course True means 'may attend' (masked_fill(~mask, ...)).": (
        "你的掩码极性反了：本课程中 True 表示“可以关注”（masked_fill(~mask, ...)）。"
    ),
    "The mask was ignored: masked keys must get weight 0.": "掩码被忽略了：被屏蔽的键必须得到权重 0。",
    "The mask is applied after the softmax, so rows no longer sum to 1: mask the scores first.": (
        "掩码在 softmax 之后才施加，所以每行之和不再为 1：应先对分数施加掩码。"
    ),
    "your mask polarity is inverted: in this course True means 'may attend' (a real token), False the padding.": (
        "你的掩码极性反了：本课程中 True 表示“可以关注”（真实词元），False 表示填充。"
    ),
    "compare your forward with the recipe: queries from W_q, keys from W_k, values from W_v, all applied to x, then "
    "scaled dot-product attention with 1/sqrt(d_k) and the mask. If your scaled_dot_product_attention fails its own "
    "checks, fix that first.": (
        "对照步骤检查你的 forward：查询来自 W_q，键来自 W_k，值来自 W_v，都作用于 x，然后用 1/sqrt(d_k) 和掩码做"
        "缩放点积注意力。如果你的 scaled_dot_product_attention 自己的检查没通过，先修好它。"
    ),
    "A query that may attend to no key should get all-zero weights and a zero output.": (
        "不能关注任何键的查询应得到全零的权重和全零的输出。"
    ),
}
