"""The edition a page is built for, and the Chinese edition's words for the text that the pages' code draws.

The two editions run the same code cells (the Chinese pages carry the English pages' cells byte for byte), and
`make book` runs each page's code once for both (`scripts/execute_book.py`): its kernels start with
`ATTENTION_COURSE_EDITION=both` and call `install()`, so every figure a cell shows is rendered twice from the same
matplotlib figure, as the code draws it (`image/png`: the English edition's) and with its text looked up here
(`ZH_PNG`: the Chinese edition's), in one display output; the executor stores each edition's figure in that
edition's execution cache. `book/diagrams.py`, which the chapter pages import after applying the shared style,
calls `install()` too. A kernel started with `ATTENTION_COURSE_EDITION=zh` (the Chinese build executing a page
itself, when the executor has not) draws every figure in Chinese instead, as it is drawn. Looked up are titles,
axis labels, legends, tick labels set as text, and the diagrams' labels. Elsewhere `install()` does nothing, and
figures are drawn exactly as the code writes them.

Two tables, one source for both editions (the English string in the code is the key):

* `FIGURE_TEXT`: a whole string as the code writes it -> its Chinese.
* `FIGURE_PATTERNS`: for strings built with numbers (f-strings), a regular expression matched against the whole
  string -> its Chinese, with the groups (`\\1`) kept.

Matplotlib's mathtext cannot draw CJK characters, so a Chinese string never contains `$...$`: a label with math
in it is translated around the math (or keeps the math's letters as plain text). Figure captions, tables and
sentences that cells emit as Markdown are translated by the Chinese build itself (`book/_ext/edition.py`, tables
in `book/_ext/output_text_zh.py`); they need no re-execution.

In the Chinese edition text is drawn in DejaVu Sans (the English figures' font, for Latin letters and digits)
with Noto Sans CJK SC (Debian's fonts-noto-cjk) as matplotlib's per-glyph fallback for the Chinese.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings

EDITION_VARIABLE = "ATTENTION_COURSE_EDITION"
CJK_FONT = "Noto Sans CJK SC"


ZH_PNG = "image/vnd.attention-course.zh+png"  # a figure's Chinese rendering, beside its image/png (base64 PNG)


def edition() -> str:
    """The edition this kernel draws for: "zh" (Chinese figures only), "both" (every figure rendered in both
    languages: `make book`'s kernels), else "en"."""
    value = os.environ.get(EDITION_VARIABLE, "en")
    return value if value in ("zh", "both") else "en"


FIGURE_TEXT: dict[str, str] = {
    # book/diagrams.py
    "may attend (True)": "可以关注（True）",
    "masked (False)": "被掩码（False）",
    # intro
    "1 seq2seq:\nfixed vector $v$": "1 seq2seq：\n固定向量 v",
    "2 additive\nattention": "2 加性\n注意力",
    # ch01
    "RNN (tanh)": "RNN（tanh）",
    "LSTM, default init": "LSTM，默认初始化",
    "LSTM, forget bias 1": "LSTM，遗忘门偏置 1",
    "distance d from the last step": "与最后一步的距离 d",
    "source length (tokens)": "源句长度（词元数）",
    "test sentences": "测试句子数",
    "encoder: reads the source": "编码器：读入源句",
    "fixed size,\nany length": "大小固定，\n长度任意",
    "decoder: writes the target, starting from $v$": "解码器：从 v 出发写出目标句",
    "bleu": "BLEU",
    "exact match": "完全匹配率",
    "token accuracy": "词元准确率",
    # ch02
    "annotations\n(encoder)": "注解向量\n（编码器）",
    "softmax over $j$": "对 j 做 softmax",
    "seq2seq_reversed": "seq2seq（源句倒序）",
    "attention": "注意力",
    # ch03
    "recurrent layer (nn.LSTM): T sequential steps": "循环层（nn.LSTM）：T 个串行步骤",
    "self-attention layer: O(1) sequential steps": "自注意力层：O(1) 个串行步骤",
    "sequence length T": "序列长度 T",
    "forward + backward (ms)": "前向 + 反向（ms）",
    "output": "输出",
    "weighted sum of\nthe rows of $V$": "对 V 的各行\n加权求和",
    "key (attended to)": "键（被关注者）",
    "query (attending)": "查询（关注者）",
    "attention weight": "注意力权重",
    "self-attention (every token sees all)": "自注意力（每个词元看到全部）",
    "measured Var(q·k)": "实测 Var(q·k)",
    "variance of a dot product": "点积的方差",
    "variance": "方差",
    "uniform over 32 keys": "32 个键上的均匀分布",
    "entropy (nats)": "熵（nats）",
    "softmax entropy": "softmax 的熵",
    "mean |Jacobian| of softmax": "softmax 雅可比矩阵的平均绝对值",
    "gradient through the softmax": "穿过 softmax 的梯度",
    "key": "键",
    "query": "查询",
    "key position": "键的位置",
    "sentence": "句子",
    "both, for sentence 1": "两者合并，句子 1",
    # ch04
    "split": "拆分",
    "out": "输出",
    "Cross-attention of the last decoder layer, one panel per head": "最后一个解码器层的交叉注意力，每个头一幅图",
    # ch05
    "position pos": "位置 pos",
    "dimension": "维度",
    "PE for d_model = 64": "d_model = 64 时的位置编码",
    "low dims oscillate fast, high dims slowly": "低维振荡快，高维振荡慢",
    "source tokens": "源句词元",
    "target tokens, shifted right": "目标句词元，右移一位",
    "linear → logits": "线性层 → logits",
    "keys, values": "键、值",
    "eq. 3, d_model = 512, warmup 4000 (paper)": "公式 3，d_model = 512，预热 4000 步（论文）",
    "step": "步数",
    "learning rate": "学习率",
    "test BLEU": "测试 BLEU",
    "training loss (nats/token)": "训练损失（nats/词元）",
    "training loss (seed 0)": "训练损失（种子 0）",
    "label-smoothed loss (10-step mean)": "标签平滑损失（10 步均值）",
    # ch06
    "key position j": "键的位置 j",
    "query position i": "查询的位置 i",
    "training batch": "训练批次",
    "train (50 batches)": "训练集（50 个批次）",
    "validation (50 batches)": "验证集（50 个批次）",
    "uniform guess, ln 94": "均匀猜测，ln 94",
    "iteration": "迭代次数",
    "cross-entropy (nats / character)": "交叉熵（nats/字符）",
    "same\nweight\n(tied)": "同一\n权重\n（绑定）",
    "lm_head → next-token logits": "lm_head → 下一个词元的 logits",
    # ch07
    "sum, then LayerNorm": "求和，再做 LayerNorm",
    "MLM head": "MLM 头",
    "predict the original token\n(loss only at selected positions)": "预测原来的词元\n（只在选中的位置计算损失）",
    "share of selected tokens": "在选中词元中的占比",
    "BERT training batch (MLM)": "BERT 训练批次（MLM）",
    "BERT held-out MLM": "BERT 留出集 MLM",
    "GPT held-out next token": "GPT 留出集下一个词元",
    "cross-entropy (nats / token)": "交叉熵（nats/词元）",
    "all selected": "全部选中位置",
    "at [MASK]": "[MASK] 处",
    "MLM accuracy (held-out)": "MLM 准确率（留出集）",
    "fine-tuning step": "微调步数",
    "test accuracy": "测试准确率",
    "seed 0 solid, the other seeds faint": "种子 0 为实线，其余种子为浅色",
    "chance": "随机水平",
    "nearest closing bracket": "最近的右括号",
    "training step": "训练步数",
    "test accuracy at the blank": "空白处的测试准确率",
    "held-out MLM loss (test topics)": "留出集 MLM 损失（测试主题）",
    # ch08
    "no cache: recomputed": "无缓存：重新计算",
    "KV cache": "KV 缓存",
    "position of key/value": "键/值的位置",
    "generation step": "生成步",
    "mask, 3 new after 5 cached": "掩码：已缓存 5 个之后新来 3 个",
    "new query": "新查询",
    "dark: keys/values computed at that step    light: read from the cache": "深色：该步计算的键/值    浅色：从缓存读取",
    "KiB per token": "每个词元的 KiB 数",
    "MHA's weights": "MHA 的权重",
    "context length T (cached tokens)": "上下文长度 T（已缓存词元数）",
    "decode steps per second": "每秒解码步数",
    "cache of the layer (MiB)": "该层的缓存（MiB）",
    "its cache, float32": "它的缓存，float32",
    # ch09
    "key $j$": "键 j",
    "query $i$": "查询 i",
    "seconds (forward)": "秒（前向）",
    "peak memory above inputs (MiB)": "超出输入的峰值内存（MiB）",
    "time": "时间",
    "memory": "内存",
    "full": "完整注意力",
    "accuracy": "准确率",
    "distance $d$ from the value to the query (bucket middle)": "值到查询的距离 d（分桶中点）",
    "Recall against distance, same budget for all three": "召回准确率与距离的关系，三者预算相同",
    # ch10
    "inner loop:\nkey blocks": "内层循环：\n键块",
    "inner loop:\nquery blocks": "内层循环：\n查询块",
    "forward: outer loop over query blocks": "前向：外层循环遍历查询块",
    "naive (chapter 3) + autograd": "朴素实现（第 3 章）+ 自动微分",
    "tiled + recomputation": "分块 + 重计算",
    "one T × T float32 table": "一张 T × T 的 float32 表",
    "peak allocated (MiB)": "峰值分配内存（MiB）",
    # ch11
    "SM 1, SM 2, …:\nthe other blocks\nof queries": "SM 1、SM 2、…：\n其余的\n查询块",
    "grid of programs: (blocks of queries) × (batch · heads)": "程序网格：（查询块数）×（批量 · 头数）",
    "standard (3 kernels)": "标准实现（3 个核函数）",
    "sequence length N": "序列长度 N",
    "HBM reads + writes (MiB)": "HBM 读 + 写（MiB）",
    "queries per program B": "每个程序的查询数 B",
    "standard": "标准实现",
    # ch12
    "distance i − j": "距离 i − j",
    "bias added to the score": "加到分数上的偏置",
    "no cap": "不截断",
    "score s": "分数 s",
    "modified score": "修改后的分数",
    "flex eager": "FlexAttention 即时执行",
    "flex compiled": "FlexAttention 编译执行",
    "SDPA + dense mask": "SDPA + 稠密掩码",
    "chapter 9 blocked": "第 9 章的分块实现",
    "ms per forward": "每次前向的毫秒数",
    "peak memory during the calls (MiB)": "调用期间的峰值内存（MiB）",
    "may attend / tile visited": "可以关注 / 访问的分块",
    "masked / tile skipped": "被掩码 / 跳过的分块",
    # labels with math: the math written as plain text (mathtext cannot draw CJK)
    "SM 0: one program\nshared memory: $Q_i$, $K_j$, $V_j$\nregisters: $S_{ij}$, $P_{ij}$, $m_i$, $\\ell_i$, acc": (
        "SM 0：一个程序\n共享内存：Qᵢ、Kⱼ、Vⱼ\n寄存器：Sᵢⱼ、Pᵢⱼ、mᵢ、ℓᵢ、acc"
    ),
    "each sublayer adds to the\nresidual stream:\n$x \\leftarrow x + f(\\mathrm{LN}(x))$": "每个子层都加到\n残差流上：\nx ← x + f(LN(x))",
    "causal mask\nquery $i$ sees keys $j \\leq i$": "因果掩码\n查询 i 看到键 j ≤ i",
    "tokens $x_1 \\dots x_T$": "词元 x₁ … x_T",
    "encoder: $n_\\mathrm{layers}$ post-LN layers, no causal mask": "编码器：n_layers 个 post-LN 层，无因果掩码",
    "dense + GELU + LayerNorm, then\nscores with $E_\\mathrm{token}^\\top$ (tied) + bias": (
        "dense + GELU + LayerNorm，\n再用 E_tokenᵀ（绑定）+ 偏置打分"
    ),
    "cached latent $c^{KV}$": "缓存的潜在向量 c^KV",
    "rotary key $k^R$": "旋转键 k^R",
    "blue: query heads   orange: what the cache stores   green: keys/values rebuilt from the latent\n"
    "dotted: the one rotary key $k^R$ is part of every head's key": (
        "蓝色：查询头   橙色：缓存中存的内容   绿色：由潜在向量重建的键/值\n虚线：唯一的旋转键 k^R 是每个头的键的一部分"
    ),
    "weights $\\mathrm{softmax}(QK^\\top/\\sqrt{d_k})$, $(T_q, T_k)$": "权重 softmax(QKᵀ/√d_k)，(T_q, T_k)",
    # more labels, by chapter
    "label-smoothed CE": "标签平滑交叉熵",
    "kept": "保持原词",
    "blocked": "分块",
    "dense": "稠密",
    "copy": "复制",
    "brackets": "括号匹配",
    "from scratch": "从头训练",
    "pretrained": "预训练",
    "lean": "精简版",
    "module": "模块版",
    "store": "写回",
    "scaled scores": "缩放后的分数",
    "unscaled scores": "未缩放的分数",
    "random": "随机词元",
    "CE": "交叉熵",
    "RNNs to\nattention": "从 RNN\n到注意力",
    "the\nTransformer": "Transformer",
    "pretrained\nmodels": "预训练\n模型",
    "attention\nat scale": "大规模\n注意力",
    "serving;\nafter softmax": "服务时；\nsoftmax 之后",
    "3 self-attention\n$QK^\\top/\\sqrt{d_k}$": "3 自注意力\nQKᵀ/√d_k",
    "4 multi-head\nattention": "4 多头\n注意力",
    "5 Transformer\nenc.–dec.": "5 Transformer\n编码器–解码器",
    "6 GPT:\ndecoder only": "6 GPT：\n仅解码器",
    "7 BERT:\nencoder only": "7 BERT：\n仅编码器",
    "8 KV cache,\nMQA, GQA, MLA": "8 KV 缓存\nMQA/GQA/MLA",
    "9 sparse\nattention": "9 稀疏\n注意力",
    "11 Triton\nkernels": "11 Triton\n核函数",
    "13 paged KV,\nring, sinks": "13 分页 KV、\n环形、汇聚",
    "14 linear\nattention": "14 线性\n注意力",
    "with a causal mask (no peeking ahead)": "加因果掩码（不能偷看后文）",
    "head 1": "头 1",
    "head 2": "头 2",
    "embedding + PE": "嵌入 + 位置编码",
    "Add & Norm": "残差相加与归一化",
    "masked self-attention": "带掩码的自注意力",
    "source padding": "源端填充",
    "causal + padding": "因果 + 填充",
    "Transformer, post-LN": "Transformer，post-LN",
    "Transformer, pre-LN": "Transformer，pre-LN",
    "Bahdanau (GRU + attention)": "Bahdanau（GRU + 注意力）",
    "training time, Bahdanau / post-LN": "训练时间，Bahdanau / post-LN",
    "decoding time, post-LN / Bahdanau": "解码时间，post-LN / Bahdanau",
    "multi-head self-attention": "多头自注意力",
    "multi-head cross-attention": "多头交叉注意力",
    "feed-forward": "前馈网络",
    "self-attention": "自注意力",
    "cross-attention": "交叉注意力",
    "causal": "因果",
    "causal self-attention": "因果自注意力",
    "MLP (GELU)": "MLP（GELU）",
    "BERT, both sides": "BERT，两侧可见",
    "BERT, left side only": "BERT，只见左侧",
    "GPT, left side only": "GPT，只见左侧",
    "BERT, right side masked": "BERT，右侧被掩码",
    "GPT (left to right)": "GPT（从左到右）",
    "the least a model that cannot see the answer can reach": "看不到答案的模型至少能达到的水平",
    "this chapter": "本章",
    "base (Lan et al. 2020, table 1)": "base（Lan et al. 2020，表 1）",
    "static": "静态",
    "dynamic": "动态",
    "MHA: 8 query heads, 8 kv heads": "MHA：8 个查询头，8 个键值头",
    "GQA: 8 query heads, 2 kv heads": "GQA：8 个查询头，2 个键值头",
    "MQA: 8 query heads, 1 kv head": "MQA：8 个查询头，1 个键值头",
    "MLA: per-head keys/values from one latent": "MLA：每个头的键/值由同一个潜在向量重建",
    "chapter 6 GPT (4 × 4 heads × 32, float32)": "第 6 章的 GPT（4 × 4 头 × 32，float32）",
    "7B-sized (32 × 32 heads × 128, float16)": "7B 规模（32 × 32 头 × 128，float16）",
    "GQA, 8 kv heads": "GQA，8 个键值头",
    "MLA, d_c = 4·d_head, d_rope = d_head/2": "MLA，d_c = 4·d_head，d_rope = d_head/2",
    "with cache": "有缓存",
    "without cache": "无缓存",
    "full causal": "完整因果",
    "causal window, w = 3": "因果窗口，w = 3",
    "bidirectional window, w = 3": "双向窗口，w = 3",
    "dilated window, w = 3, d = 2": "空洞窗口，w = 3，d = 2",
    "window + global tokens 0, 17": "窗口 + 全局词元 0、17",
    "BigBird: blocks of 4, window,\nglobal and 1 random block": "BigBird：块大小 4，窗口、\n全局和 1 个随机块",
    "routing mask (bidirectional)": "路由掩码（双向）",
    "the same, sorted by cluster": "同一掩码，按簇排序",
    "routing mask, causal": "路由掩码，因果",
    "compression: keys inside\nthe blocks summarised": "压缩：块内的键\n被汇总",
    "selection: n = 4 blocks of 8\n(first + 2 local + 1 chosen)": "选择：n = 4 个大小为 8 的块\n（首块 + 2 个局部块 + 1 个选中块）",
    "sliding window, w = 7": "滑动窗口，w = 7",
    "window": "窗口",
    "backward: outer loop over key blocks": "反向：外层循环遍历键块",
    "tile computed": "计算的块",
    "tile computed, partly masked": "计算的块，部分被掩码",
    "tile skipped (causal)": "跳过的块（因果）",
    "tiled": "分块实现",
    "naive": "朴素实现",
    "load once": "加载一次",
    "load per step": "每步加载",
    # ch13
    "reserved: contiguous": "预留：连续分配",
    "held: paged, blocks of 16": "占用：分页，每块 16 个",
    "tokens stored": "实际存放的词元",
    "decode step": "解码步",
    "cache slots (thousands)": "缓存槽位（千）",
    "block size (tokens)": "块大小（词元数）",
    "memory holding tokens (%)": "存放词元的内存（%）",
    "share of the cache in use": "缓存的利用率",
    "paged": "分页",
    "contiguous": "连续",
    "zig-zag": "之字形",
    "number of splits S": "分块数 S",
    "ms per decode step": "每个解码步的毫秒数",
    "this machine's CPU, 1 thread": "本机 CPU，1 个线程",
    "share of SMs with work": "有工作的 SM 所占比例",
    "B = 1, H = 32: B · H · S thread blocks": "B = 1，H = 32：B · H · S 个线程块",
    "contiguous: queries by rank": "连续切分：各进程的查询",
    "zig-zag: queries by rank": "之字形切分：各进程的查询",
    "query–key pairs (millions)": "查询–键对（百万）",
    "rank": "进程",
    "attention at a new symbol": "新符号处的注意力",
    "start token evicted": "逐出起始词元之后",
    "new symbol": "新符号",
    "symbol seen before": "符号此前出现过",
    "to the start token": "给起始词元",
    "to the sink": "给注意力汇聚",
    "no sink": "无注意力汇聚",
    "learned sink": "学到的注意力汇聚",
    "share of the attention": "注意力所占份额",
    "physical\nblocks": "物理块",
    "logical blocks: positions": "逻辑块：位置",
    # ch14
    "parallel (T × T)": "并行形式（T × T）",
    "recurrent": "循环形式",
    "chunkwise, C = 64": "分块形式，C = 64",
    "ms per call (best of 3)": "每次调用的毫秒数（3 次中最快的）",
    "softmax in all 48 layers": "48 层全部为 softmax",
    "hybrid 3 : 1 (Qwen3-Next)": "3 : 1 混合（Qwen3-Next）",
    "linear in all 48 layers": "48 层全部为线性层",
    "tokens in the context T": "上下文中的词元数 T",
    "GiB per sequence (bfloat16)": "每条序列的 GiB（bfloat16）",
    "decode memory of a Qwen3-Next-80B-A3B-shaped stack": "Qwen3-Next-80B-A3B 形状的层堆叠的解码内存",
    "GPT (all softmax)": "GPT（全部为 softmax）",
    "hybrid 3 : 1": "3 : 1 混合",
    "validation loss (nats/char)": "验证损失（nats/字符）",
    "training": "训练",
    "tokens decoded T": "已解码的词元数 T",
    "ms per token": "每个词元的毫秒数",
    "decode time": "解码时间",
    "KiB held (float32)": "占用的 KiB（float32）",
    "decode memory": "解码内存",
    "linear attention, elu + 1": "线性注意力，elu + 1",
    "sum of unit keys": "单位键的累加",
    "delta rule, β = 1": "增量规则，β = 1",
    "Gated DeltaNet": "门控 DeltaNet",
    "pairs written n": "写入的键值对数 n",
    "reads that find their value": "找回正确值的读出比例",
    "one state of 32 × 32, random unit keys": "一个 32 × 32 的状态，随机单位键",
    "linear attention": "线性注意力",
    "recall accuracy (held-out rows)": "回忆准确率（留出的行）",
    "two-layer models with a token shift": "带词元平移的两层模型",
}

FIGURE_PATTERNS: list[tuple[str, str]] = [
    # ch01
    (
        r"gradient reaching each input: mean and min–max over (\d+) seeds",
        r"到达每个输入的梯度：\1 个种子的均值与最小–最大范围",
    ),
    (
        r"(\d+) test sentences; vocabularies: (\d+) src, (\d+) tgt tokens",
        r"\1 个测试句子；词表：源语言 \2 个、目标语言 \3 个词元",
    ),
    (r"mean and min–max over (\d+) seeds", r"\1 个种子的均值与最小–最大范围"),
    (r"mean and min–max of (\d+) seeds", r"\1 个种子的均值与最小–最大范围"),
    # ch02
    (
        r"Test quality by source length, mean and min–max over (\d+) seeds \(cf\. Bahdanau et al\. 2014, Fig\. 2\)",
        r"按源句长度的测试质量，\1 个种子的均值与最小–最大范围（参见 Bahdanau et al. 2014，图 2）",
    ),
    (r"(\d+) source tokens, correct translation", r"\1 个源词元，翻译正确"),
    (r"(\d+) source tokens, wrong translation", r"\1 个源词元，翻译错误"),
    # ch03
    (r"(\w+) scores", r"\1 分数"),
    # ch04
    (r"head (\d+)", r"头 \1"),
    # ch07
    (r"seed (\d+)", r"种子 \1"),
    (r"(.+) \(chance ([\d/.]+)\)", r"\1（随机水平 \2）"),
    (r"ALBERT, E = (\d+)", r"ALBERT，E = \1"),
    # ch05
    (r"dim (\d+) \((sin|cos)\)", r"第 \1 维（\2）"),
    (r"our run: d_model = (\d+), warmup (\d+), factor ([\d.]+)", r"本页的训练：d_model = \1，预热 \2 步，系数 \3"),
    (
        r"test BLEU by source length: mean, band min–max of (\d+) seeds",
        r"按源句长度的测试 BLEU：均值，阴影为 \1 个种子的最小–最大范围",
    ),
    (r"(.+): last-20 mean ([\d.]+) \((\d+) s\)", r"\1：最后 20 步均值 \2（\3 秒）"),
    (
        r"(\d+)\+(\d+) layers, d_model (\d+), constant lr ([\d.e-]+), batch (\d+)",
        r"\1+\2 层，d_model \3，恒定学习率 \4，批量 \5",
    ),
    # ch07
    (r"(\w+) masking", r"\1 掩码"),
    # ch08
    (r"one attention layer, (\w+)", r"一个注意力层，\1"),
    (r"(\w+) step", r"\1解码步"),
    # ch09
    (r"window \+ global every (\d+)", r"窗口 + 每 \1 个一个全局词元"),
    (r"pairs kept: (\d+) of (\d+)", r"保留的对：\2 对中的 \1 对"),
    (r"(.+)\n(\d+) of (\d+) pairs", r"\1\n\3 对中的 \2 对"),
    (r"chance \(1/(\d+)\)", r"随机水平（1/\1）"),
    (r"window \(w = (\d+)\)", r"窗口（w = \1）"),
    # ch10
    (r"forward \+ backward, one head, d_k = (\d+), causal, (\w+)", r"前向 + 反向，单头，d_k = \1，因果，\2"),
    # ch11
    (r"FlashAttention, B = (\d+)", r"FlashAttention，B = \1"),
    (r"one head, d = (\d+), float32", r"单头，d = \1，float32"),
    (r"N = (\d+): traffic ∝ 1 / B", r"N = \1：流量 ∝ 1 / B"),
    # ch12
    (r"window \+ (\d+) global tokens", r"窗口 + \1 个全局词元"),
    (r"dilated, w = (\d+), d = (\d+)", r"空洞窗口，w = \1，d = \2"),
    (r"packed documents\n\(lengths (\d+), (\d+), (\d+)\)", r"打包的文档\n（长度 \1、\2、\3）"),
    (r"prefix LM, prefix of (\d+)", r"前缀语言模型，前缀长 \1"),
    (r"ALiBi, (\d+) heads", r"ALiBi，\1 个头"),
    (r"soft-capping, c = (\d+)", r"软截断，c = \1"),
    (r"pairs: causal window w = (\d+),\nT = (\d+)", r"位置对：因果窗口 w = \1，\nT = \2"),
    (r"(\d+) × (\d+) tiles visited\n\(([\d.]+)% skipped\)", r"访问的 \1 × \2 分块\n（跳过 \3%）"),
    # ch14
    (r"timed on this page's machine, (\d+) thread", r"在执行本页的机器上计时，\1 个线程"),
    (r"(\d+) pairs", r"\1 对"),
    # ch13
    (r"(\d+) requests at a time", r"同时运行 \1 个请求"),
    (r"(A100|T4): (\d+) SMs", r"\1：\2 个 SM"),
    (r"rank (\d+)", r"进程 \1"),
    (r"block (\d+)\nshared", r"块 \1\n共享"),
    (r"block (\d+)", r"块 \1"),
    (r"sequence (\d+)", r"序列 \1"),
    (r"work per rank, T = (\d+), P = (\d+)", r"各进程的工作量，T = \1，P = \2"),
    # last: a label with a remark in parentheses, each part translated on its own
    (r"(.+) \((.+)\)", r"\1（\2）"),
]

_PATTERNS = [(re.compile(p, re.S), r) for p, r in FIGURE_PATTERNS]
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
untranslated: set[str] = set()  # figure strings with English words that have no entry (for the maintainer)


def _expand(replacement: str, groups: list[str]) -> str:
    """``replacement`` with each ``\\N`` replaced by ``groups[N - 1]`` and ``\\n`` by a newline."""
    return re.sub(r"\\(\d+|n)", lambda k: "\n" if k.group(1) == "n" else groups[int(k.group(1)) - 1], replacement)


def figure_text(text: str) -> str:
    """The Chinese for one figure string (itself when it has no entry: a code name, a number, math)."""
    if text in FIGURE_TEXT:
        return FIGURE_TEXT[text]
    for pattern, replacement in _PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            groups = [figure_text(g) for g in match.groups()]
            return _expand(replacement, groups)
    if _LATIN_WORD.search(text) and "$" not in text and text not in untranslated:
        untranslated.add(text)
        log = os.environ.get("ATTENTION_COURSE_UNTRANSLATED")
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(repr(text) + "\n")
    return text


def _tick_label_dict(formatter):
    """The {tick: label} of tick labels set with ``set_xticks(ticks, labels)`` / ``set_ticklabels`` (matplotlib 3.9
    and later keep them in a ``FuncFormatter`` over ``functools.partial(Axis._format_with_dict, labels)``), else None."""
    from matplotlib.ticker import FuncFormatter

    func = getattr(formatter, "func", None) if isinstance(formatter, FuncFormatter) else None
    if isinstance(func, functools.partial) and len(func.args) == 1 and isinstance(func.args[0], dict):
        return func.args[0]
    return None


def _translate_figure(fig) -> None:
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, FixedFormatter):
                formatter.seq = [figure_text(s) for s in formatter.seq]
            elif isinstance(formatter, StrCategoryFormatter):  # bars named by strings: the formatter's own copy
                formatter._units = {figure_text(k): v for k, v in formatter._units.items()}
            elif (labels := _tick_label_dict(formatter)) is not None:  # set_xticks(ticks, labels), matplotlib ≥ 3.9
                formatter.func = functools.partial(
                    formatter.func.func, {k: figure_text(v) if isinstance(v, str) else v for k, v in labels.items()}
                )
    for text in fig.findobj(Text):
        s = text.get_text()
        if s:
            new = figure_text(s)
            if new != s:
                text.set_text(new)


def _with_chinese_text(fig, render):
    """``render(fig)`` with the figure's text in Chinese and the CJK font as fallback, and the warnings it gave (a
    missing glyph ...); the figure is as it was afterwards (its texts, fonts and tick formatters restored), so the
    English rendering is the code's own."""
    import matplotlib
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter

    texts = [(text, text.get_text(), text.get_fontproperties().copy()) for text in fig.findobj(Text)]
    formatters = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            formatter = axis.get_major_formatter()
            if isinstance(formatter, FixedFormatter):
                formatters.append((formatter, "seq", list(formatter.seq)))
            elif isinstance(formatter, StrCategoryFormatter):
                formatters.append((formatter, "_units", dict(formatter._units)))
            elif _tick_label_dict(formatter) is not None:
                formatters.append((formatter, "func", formatter.func))
    try:
        # matplotlib falls back glyph by glyph only along a text's list of families: the CJK font joins each list
        with (
            matplotlib.rc_context({"font.family": [*matplotlib.rcParams["font.family"], CJK_FONT]}),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            for text, _, font in texts:
                text.set_fontfamily([*font.get_family(), CJK_FONT])
            _translate_figure(fig)
            return render(fig), sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    finally:
        for text, s, font in texts:
            text.set_text(s)
            text.set_fontproperties(font)
        for formatter, name, value in formatters:
            setattr(formatter, name, value)


def _install_both(shell) -> None:
    """Every figure a cell shows gets its Chinese rendering (`ZH_PNG`) beside its English one (image/png)."""
    from IPython.core.formatters import BaseFormatter, catch_format_error
    from traitlets import Unicode

    class ChineseFigureFormatter(BaseFormatter):
        """The PNG of a matplotlib figure with its text in Chinese, made by the image/png formatter registered for
        figures (the inline backend's, with its options); the warnings of its rendering go in its metadata, for the
        Chinese edition alone (scripts/execute_book.py). Registered by no type: the inline backend drops every
        formatter's Figure entry when it configures itself."""

        format_type = Unicode(ZH_PNG)

        @catch_format_error
        def __call__(self, obj):
            figure = sys.modules.get("matplotlib.figure")
            if figure is None or not isinstance(obj, figure.Figure):
                return None
            try:
                render = shell.display_formatter.formatters["image/png"].lookup(obj)
            except KeyError:
                return None
            png, caught = _with_chinese_text(obj, render)
            return (png, {"warnings": caught}) if caught else png

    shell.display_formatter.formatters[ZH_PNG] = ChineseFigureFormatter(parent=shell.display_formatter)


_installed = False


def install() -> None:
    """In `make book`'s kernels (edition "both"): every figure shown in both languages (`_install_both`). In a
    kernel of the Chinese edition ("zh"): a CJK fallback font, and every figure's text translated as it is drawn.
    Does nothing in the English edition."""
    global _installed
    if edition() == "en" or _installed:
        return
    _installed = True
    if edition() == "both":
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and hasattr(shell, "display_formatter"):
            _install_both(shell)
        return
    import matplotlib
    from matplotlib.figure import Figure

    matplotlib.rcParams["font.family"] = ["DejaVu Sans", CJK_FONT]
    draw = Figure.draw

    def draw_translated(self, renderer):
        _translate_figure(self)
        return draw(self, renderer)

    Figure.draw = draw_translated  # type: ignore[method-assign]
