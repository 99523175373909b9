"""Chapter 2 (Bahdanau attention) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``):
the labels of the checks of ``autograder/ch02_bahdanau_attention.py`` (their docstrings, on one line), the names its comparisons
give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "matches v^T tanh(W s_prev + U_h) for s_prev (2, 3), W (4, 3), v (4,), U_h (2, 5, 4)": (
        "与 v^T tanh(W s_prev + U_h) 一致，s_prev (2, 3)，W (4, 3)，v (4,)，U_h (2, 5, 4)"
    ),
    "scores (3, 6) with source lengths [6, 2, 4]: padding gets weight 0, each row sums to 1": (
        "分数 (3, 6)，源句长度 [6, 2, 4]：填充位置权重为 0，每行之和为 1"
    ),
    "a row with no real position gives all zeros, not NaN": "没有真实位置的一行给出全零，而不是 NaN",
    "weighted sum of h (2, 5, 3) with alpha (2, 5)": "用 alpha (2, 5) 对 h (2, 5, 3) 加权求和",
    # hidden checks
    "other sizes, one sentence, float64": "其他尺寸、单个句子、float64",
    "gradients reach s_prev, W, v and U_h": "梯度能到达 s_prev、W、v 和 U_h",
    "large scores, random masks, float64, finite gradients": "大分数、随机掩码、float64、有限的梯度",
    "float16 and bfloat16 scores (no overflow); scores all below -1e4 or -1e5 give masked positions weight 0": (
        "float16 和 bfloat16 的分数（不溢出）；分数全低于 -1e4 或 -1e5 时，被屏蔽的位置权重为 0"
    ),
    "other sizes, zero weights on padding, float64": "其他尺寸、填充位置权重为零、float64",
    # messages and hints
    "A row with no real source position should get all-zero weights.": "没有真实源位置的一行应得到全零的权重。",
    "e_ij = v^T tanh(W s_{i-1} + U h_j): W s_{i-1} (one vector per sentence) is added to every source position of "
    "U_h, then tanh, then the dot product with v.": (
        "e_ij = v^T tanh(W s_{i-1} + U h_j)：W s_{i-1}（每个句子一个向量）加到 U_h 的每个源位置上，"
        "然后取 tanh，再与 v 做点积。"
    ),
    "your mask polarity is inverted: True marks a real source word (may attend), False the padding.": (
        "你的掩码极性反了：True 表示真实的源词（可以关注），False 表示填充。"
    ),
    "your softmax normalises over the batch (dim 0); it must run over the source positions (dim=-1).": (
        "你的 softmax 沿批次维（dim 0）归一化；它必须沿源位置（dim=-1）计算。"
    ),
    "your weights are the softmax over all positions, padding included: the mask was not applied.": (
        "你的权重是对所有位置（包括填充）做的 softmax：没有施加掩码。"
    ),
    "you zeroed the padding after the softmax, so the rows no longer sum to 1: mask the scores before the softmax "
    "(or renormalise).": "你在 softmax 之后才把填充置零，所以每行之和不再为 1：应在 softmax 之前对分数施加掩码（或重新归一化）。",
    "your context ignores the weights (a plain sum or mean of the annotations): c_i = sum_j alpha_ij h_j.": (
        "你的上下文向量忽略了权重（只是对注释向量简单求和或求平均）：c_i = sum_j alpha_ij h_j。"
    ),
}
