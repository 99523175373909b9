"""Chapter 11 (FlashAttention in Triton) in Chinese, for a Chinese submission's feedback page
(``autograder/wording.py``): the labels of the checks of ``autograder/ch11_flash_attention_triton.py`` (their
docstrings, on one line), the names its comparisons give the values (``what``) and its hints,
``ZH = {English: Chinese}``."""

_COUNTED = (
    "the bytes its tl.load calls read are counted under the interpreter and compared with the same launch without "
    "CAUSAL"
)

ZH = {
    # visible checks
    "equals softmax(QK^T/sqrt(d_k))V and its log-sum-exp: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6), "
    "16 × 16": "等于 softmax(QK^T/sqrt(d_k))V 及其对数求和指数：q (1, 2, 20, 4)，k (1, 2, 29, 4)，v (1, 2, 29, 6)，16 × 16",
    "causal with T_q = 20 < T_k = 35 (bottom-right aligned), 16 × 16: equals the masked attention, and the first "
    f"query block's program loads no key or value of the last key block ({_COUNTED})": (
        "因果，T_q = 20 < T_k = 35（右下对齐），16 × 16：等于加掩码的注意力，且第一个查询块的程序实例不加载最后一个"
        "键块的任何键或值（在解释器下统计它的 tl.load 调用读取的字节数，并与不带 CAUSAL 的同一次启动比较）"
    ),
    "dk, dv equal autograd through softmax(QK^T/sqrt(d_k))V: q (1, 2, 20, 4), k (1, 2, 29, 4), v (1, 2, 29, 6)": (
        "dk、dv 等于 autograd 对 softmax(QK^T/sqrt(d_k))V 求出的梯度：q (1, 2, 20, 4)，k (1, 2, 29, 4)，v (1, 2, 29, 6)"
    ),
    "causal with T_q = 20 < T_k = 35, 16 × 16: dk, dv equal autograd through the masked attention, and the last "
    "key block's program loads no q or do of the first query block, whose queries all come before its keys "
    f"({_COUNTED})": (
        "因果，T_q = 20 < T_k = 35，16 × 16：dk、dv 等于 autograd 对加掩码的注意力求出的梯度，且最后一个键块的"
        "程序实例不加载第一个查询块的任何 q 或 do（这个查询块的查询全都在它的键之前）（在解释器下统计它的 tl.load "
        "调用读取的字节数，并与不带 CAUSAL 的同一次启动比较）"
    ),
    # hidden checks
    "Tried causal attention where every allowed score is below -57 000 (q > 0 and k < 0 with entries of 170 to "
    "260; T_q = 20, T_k = 35).": (
        "试了每个允许的分数都低于 -57 000 的因果注意力（q > 0、k < 0，元素为 170 到 260；T_q = 20，T_k = 35）。"
    ),
    "Tried T_q = 37 > T_k = 20 without CAUSAL with BLOCK_M = 32 and BLOCK_N = 16, and causal attention with "
    "T_q = T_k = 40, BLOCK_M = 16 and BLOCK_N = 32.": (
        "试了不带 CAUSAL 的 T_q = 37 > T_k = 20（BLOCK_M = 32，BLOCK_N = 16），以及 T_q = T_k = 40 的因果注意力"
        "（BLOCK_M = 16，BLOCK_N = 32）。"
    ),
    "Tried causal attention where T_k - T_q is not a multiple of the key block: T_q = 20, T_k = 41 (a gap of 21) "
    "with 16 × 16 blocks, and T_q = 24, T_k = 61 (a gap of 37) with BLOCK_M = 16 and BLOCK_N = 32; the loads of each "
    "launch were counted too.": (
        "试了 T_k - T_q 不是键块整数倍的因果注意力：T_q = 20、T_k = 41（相差 21），块大小 16 × 16；以及 T_q = 24、"
        "T_k = 61（相差 37），BLOCK_M = 16、BLOCK_N = 32；每次启动的加载也都做了统计。"
    ),
    "Tried float16 inputs with values of about 3000 (29 keys of weight about 1, so sums beyond float16's 65504) "
    "against the kernel's own float32 run: o comes back in float16, lse in float32.": (
        "试了值约为 3000 的 float16 输入（29 个权重约为 1 的键，和超过 float16 的 65504），与该核函数自己的 float32 "
        "运行结果比较：o 以 float16 返回，lse 以 float32 返回。"
    ),
    "Tried T_q = 37 > T_k = 20 without CAUSAL with BLOCK_M = 16 and BLOCK_N = 32, and causal attention with "
    "T_q = T_k = 40, BLOCK_M = 32 and BLOCK_N = 16 (where the first query block a key block needs is not the key "
    "block's own index).": (
        "试了不带 CAUSAL 的 T_q = 37 > T_k = 20（BLOCK_M = 16，BLOCK_N = 32），以及 T_q = T_k = 40 的因果注意力"
        "（BLOCK_M = 32，BLOCK_N = 16；此时一个键块需要的第一个查询块不是该键块自己的序号）。"
    ),
    "Tried causal attention with T_q = 20 and T_k = 57, 37 more keys than queries (more than two query blocks), "
    "with 16 × 16 blocks and again with BLOCK_M = 32, BLOCK_N = 16; the inputs had NaN just before and after their "
    "rows, and the loads of each launch were counted.": (
        "试了 T_q = 20、T_k = 57 的因果注意力，键比查询多 37 个（超过两个查询块），块大小 16 × 16，再用 "
        "BLOCK_M = 32、BLOCK_N = 16 试一次；输入在各行之前和之后紧挨着 NaN，每次启动的加载也都做了统计。"
    ),
    "Tried float16 inputs with CAUSAL against the kernel's own float32 run: dk and dv come back in float16.": (
        "试了带 CAUSAL 的 float16 输入，与该核函数自己的 float32 运行结果比较：dk 和 dv 以 float16 返回。"
    ),
    "Tried float16 inputs with 2048 queries (128 query blocks of 16) and 16 keys, where the first query block's do "
    "is about 4096 times larger than the others', against the kernel's own float32 run.": (
        "试了有 2048 个查询（128 个大小为 16 的查询块）和 16 个键的 float16 输入，其中第一个查询块的 do 约为其他块的 "
        "4096 倍，与该核函数自己的 float32 运行结果比较。"
    ),
    # the values compared, and the hints
    "flash_attention_forward_kernel on q {q}, k {k}, v {v}": "flash_attention_forward_kernel 作用于 q {q}、k {k}、v {v}",
    "flash_attention_backward_dkdv_kernel on q {q}, k {k}, v {v}": (
        "flash_attention_backward_dkdv_kernel 作用于 q {q}、k {k}、v {v}"
    ),
    "your lse is the log-sum-exp in base 2 (m_i + log2(l_i) with scores in base 2): multiply it by ln 2 = "
    "0.6931471805599453 to store the natural log-sum-exp that the backward pass uses.": (
        "你的 lse 是以 2 为底的对数求和指数（分数以 2 为底时的 m_i + log2(l_i)）：要乘以 ln 2 = 0.6931471805599453，"
        "保存反向传播要用的自然对数求和指数。"
    ),
    "lse is the natural log of each query's sum of exp(score): with base-2 scores, ln 2 · (m_i + log2(l_i)).": (
        "lse 是每个查询的 exp(score) 之和的自然对数：分数以 2 为底时，为 ln 2 · (m_i + log2(l_i))。"
    ),
    "for each key block: load K and V with masks, s = dot(q, trans(k)) * qk_scale, set s to -inf where a key may not "
    "be attended to (past T_k, or in the query's future) before the max; m_new = max(m_i, rowmax(s)); rescale both "
    "l_i and acc by exp2(m_i - m_new) before adding the block's exp2(s - m_new).": (
        "对每个键块：带掩码加载 K 和 V，s = dot(q, trans(k)) * qk_scale，在取最大值之前，把不可关注的键"
        "（超出 T_k，或在查询的未来）处的 s 设为 -inf；m_new = max(m_i, rowmax(s))；在加上该块的 exp2(s - m_new) "
        "之前，把 l_i 和 acc 都乘以 exp2(m_i - m_new) 重新缩放。"
    ),
    "without CAUSAL your kernel is right, so look at the causal parts: query i sees keys j <= q_pos = i + T_k - T_q; "
    "stop the loop at hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q), so that the block holding a query block's "
    "last position is still visited, and set s to -inf at the keys in a query's future.": (
        "不带 CAUSAL 时你的核函数是对的，所以请检查因果部分：查询 i 看到的键是 j <= q_pos = i + T_k - T_q；"
        "循环在 hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q) 处结束，使包含查询块最后一个位置的块仍被访问，"
        "并把查询未来的键处的 s 设为 -inf。"
    ),
    "with CAUSAL, stop the loop at hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q): the key blocks after it lie "
    "wholly in the future of the program's queries and must not be loaded at all (masking them is not enough).": (
        "带 CAUSAL 时，循环在 hi = min(T_k, (pid_m + 1) * BLOCK_M + T_k - T_q) 处结束：之后的键块完全位于该程序实例"
        "各查询的未来，根本不应加载（只加掩码是不够的）。"
    ),
    "keep m_i, l_i and acc in float32 (tl.zeros(..., dtype=tl.float32)); only p is cast to v's dtype for the "
    "tl.dot, and o to the output's dtype when it is stored.": (
        "让 m_i、l_i 和 acc 保持 float32（tl.zeros(..., dtype=tl.float32)）；只有 p 为了 tl.dot 转换成 v 的 dtype，"
        "o 在保存时转换成输出的 dtype。"
    ),
    "for each query block: load q, do, lse and D with masks; s = dot(q, trans(k)) * scale, p = exp(s - lse) (0 "
    "where a key is in the query's future); dv += dot(trans(p), do); dp = dot(do, trans(v)); ds = p * (dp - D); "
    "dk += dot(trans(ds), q); after the loop dk = dk * scale.": (
        "对每个查询块：带掩码加载 q、do、lse 和 D；s = dot(q, trans(k)) * scale，p = exp(s - lse)"
        "（键在查询的未来时为 0）；dv += dot(trans(p), do)；dp = dot(do, trans(v))；ds = p * (dp - D)；"
        "dk += dot(trans(ds), q)；循环结束后 dk = dk * scale。"
    ),
    "without CAUSAL your kernel is right, so look at the causal parts: query i sees key j when j <= i + offset "
    "(offset = T_k - T_q); set p to 0 at the keys in a query's future, and start the loop at max(pid_n * BLOCK_N - "
    "offset, 0) // BLOCK_M * BLOCK_M, the query block that holds the first query seeing this key block (never below "
    "0).": (
        "不带 CAUSAL 时你的核函数是对的，所以请检查因果部分：当 j <= i + offset（offset = T_k - T_q）时查询 i "
        "看到键 j；把查询未来的键处的 p 设为 0，并让循环从 max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M "
        "开始，即包含第一个能看到该键块的查询的那个查询块（绝不小于 0）。"
    ),
    "with CAUSAL, start the loop at max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M: the query blocks before "
    "it come wholly before the program's keys and must not be loaded at all (masking them is not enough).": (
        "带 CAUSAL 时，循环从 max(pid_n * BLOCK_N - offset, 0) // BLOCK_M * BLOCK_M 开始：之前的查询块完全位于该"
        "程序实例的键之前，根本不应加载（只加掩码是不够的）。"
    ),
    "{what} loaded {read}, and {plain} in the same launch with CAUSAL=False: skipping the blocks that lie wholly in "
    "the future of a program's rows ({rows} here) saves {saved}, so at most {most} were expected. Your kernel loads "
    "blocks that it should skip.": (
        "{what} 读取了 {read}，而 CAUSAL=False 的同一次启动读取了 {plain}：跳过完全位于程序实例各行（这里为 {rows}）"
        "未来的块可以省下 {saved}，因此预期至多 {most} 字节。你的核函数加载了本应跳过的块。"
    ),
}
