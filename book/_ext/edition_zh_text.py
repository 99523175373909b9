"""The Chinese edition's words for what the pages' code writes besides figures: figure captions (in the code cells'
`mystnb: figure: caption:` metadata) and the tables and sentences that cells emit as Markdown. Used by the Chinese
build only (`book/_ext/edition.py`), which translates them as it renders the cached outputs: the English edition
shows what the code writes, unchanged, and a change here needs no re-execution. Figures' own text is translated in
the kernel (`book/edition_text.py`).

* `CAPTIONS`: figure name -> (the English caption, its Chinese). The English is checked against the page: a caption
  changed in English but not here fails the Chinese build (a warning; the build runs with -W).
* `OUTPUT_TEXT`: one paragraph or table cell of a Markdown output, written as Markdown (code spans in backticks,
  math in dollars, **bold**), -> its Chinese.
* `OUTPUT_PATTERNS`: the same for paragraphs and cells built with numbers: a regular expression matched against
  the whole paragraph or cell -> its Chinese; each group is itself translated (so a phrase inside a sentence can
  have its own entry) before it is put back. A measurement line without an entry is translated part by part
  between its "; ".
"""

from __future__ import annotations

CAPTIONS: dict[str, tuple[str, str]] = {
    "fig-roadmap": (
        "The fourteen chapters and what each takes from the one before.",
        "十四章内容，以及每一章从前一章继承了什么。",
    ),
    "fig-seq2seq": (
        "The encoder–decoder of Sutskever et al. (2014): the encoder LSTM reads $x_1 \\dots x_S$, and all the decoder "
        "ever learns about the source is its final state $v$, the same size for 3 tokens or 30.",
        "Sutskever et al.（2014）的编码器–解码器：编码器 LSTM 读入 $x_1 \\dots x_S$，而解码器对源句所知的一切只有"
        "它的最终状态 $v$——无论源句是 3 个词元还是 30 个，$v$ 的大小都一样。",
    ),
    "fig-bahdanau-step": (
        "One decoder step of Bahdanau et al. (2014): the previous state $s_{i-1}$ scores every annotation $h_j$, the "
        "softmax over $j$ turns the scores $e_{ij}$ into weights $\\alpha_{ij}$, their weighted sum is the context "
        "$c_i$, and the GRU turns $c_i$, $E y_{i-1}$ and $s_{i-1}$ into $s_i$.",
        "Bahdanau et al.（2014）的一个解码步：前一个状态 $s_{i-1}$ 给每个注解向量 $h_j$ 打分，对 $j$ 的 softmax 把"
        "分数 $e_{ij}$ 变成权重 $\\alpha_{ij}$，它们的加权和就是上下文向量 $c_i$，GRU 再把 $c_i$、$E y_{i-1}$ 和 "
        "$s_{i-1}$ 变成 $s_i$。",
    ),
    "fig-qkv": (
        "Self-attention: three learned maps turn the same tokens $X$ into queries, keys and values; the "
        "$T_q \\times T_k$ table of scaled scores, softmaxed row by row, weights the rows of $V$.",
        "自注意力：三个学到的映射把同一组词元 $X$ 变成查询、键和值；缩放后的分数构成一张 $T_q \\times T_k$ 的表，"
        "逐行做 softmax 之后，用来对 $V$ 的各行加权。",
    ),
    "fig-multi-head": (
        "Multi-head attention: one projection per role, split into $h$ heads of width $d_k = d_\\text{model}/h$, "
        "chapter 3's attention in every head at once, Concat (`merge_heads`), then $W^O$.",
        "多头注意力：每种角色一个投影，拆成 $h$ 个宽度为 $d_k = d_\\text{model}/h$ 的头，所有头同时做第 3 章的注意"
        "力，拼接（`merge_heads`），再乘以 $W^O$。",
    ),
    "fig-transformer": (
        "The Transformer's encoder and decoder layers (post-LN, as in the paper), each repeated $N$ times, with their "
        "three masks: source padding in the encoder's self-attention and in cross-attention, causal and target "
        "padding in the decoder's self-attention (dark = may attend, light = masked).",
        "Transformer 的编码器层和解码器层（与论文一样是 post-LN），各重复 $N$ 次，以及它们的三种掩码：编码器自注意"
        "力和交叉注意力中的源端填充掩码，解码器自注意力中的因果掩码和目标端填充掩码（深色 = 可以关注，浅色 = 被"
        "掩码）。",
    ),
    "fig-gpt": (
        "GPT-2: token and position embeddings, $n_\\text{layers}$ pre-LN blocks with causal self-attention, a final "
        "`ln_f`, and an LM head that shares its weight with `wte`.",
        "GPT-2：词元嵌入和位置嵌入，$n_\\text{layers}$ 个带因果自注意力的 pre-LN 块，最后的 `ln_f`，以及与 `wte` "
        "共享权重的语言模型头。",
    ),
    "fig-bert": (
        "BERT's input is the sum of three embeddings per token (token, segment, position), normalised; the encoder "
        "attends in both directions, and the MLM head predicts the original token at the selected positions (here "
        "the `[MASK]`).",
        "BERT 的输入是每个词元三种嵌入（词元、片段、位置）之和，再做归一化；编码器双向关注，MLM 头在选中的位置"
        "（这里是 `[MASK]`）预测原来的词元。",
    ),
    "fig-ch11-memory": (
        "Where the forward kernel keeps what. HBM holds the inputs and outputs; each program, on one SM, loads its "
        "query block once and one key/value block per step into shared memory, and keeps the score and probability "
        "tiles, the running statistics and the accumulator in registers. Only o and the log-sum-exp L go back to "
        "HBM.",
        "前向核函数把什么放在哪里。HBM 保存输入和输出；每个程序在一个 SM 上运行，把自己的查询块加载一次、每一步"
        "把一个键/值块加载到共享内存中，而分数块和概率块、当前的统计量和累加器都留在寄存器里。只有 o 和对数求和"
        "指数 L 写回 HBM。",
    ),
    "fig-ch13-block-table": (
        "The cache of the cell above after its three decode steps, drawn from its block tables and reference counts. "
        "Each sequence's block table maps its logical blocks (4 positions each) to physical blocks of the pool. Block "
        "0, the first four prompt tokens, is shared; block 1, shared until the first step, was copied into block 2 "
        "when sequence 0 wrote to it.",
        "上面那个单元在三个解码步之后的缓存，根据它的块表和引用计数画出。每条序列的块表把它的逻辑块（每块 4 个位置）"
        "映射到池中的物理块。块 0 存放前四个提示词元，是共享的；块 1 在第一步之前是共享的，序列 0 写入它时被复制到了"
        "块 2。",
    ),
}

OUTPUT_TEXT: dict[str, str] = {
    # table headers and row labels
    "network": "网络",
    "steps per factor 10 (d = 10…50)": "每衰减 10 倍所需步数（d = 10…50）",
    "RNN (tanh)": "RNN（tanh）",
    "LSTM, default init": "LSTM，默认初始化",
    "LSTM, forget bias 1": "LSTM，遗忘门偏置 1",
    "source length": "源句长度",
    "length": "长度",
    "additive (ms)": "加性（ms）",
    "dot product (ms)": "点积（ms）",
    "additive / dot": "加性 / 点积",
    "floats in the additive $\\tanh$": "加性分数中 $\\tanh$ 的浮点数个数",
    "floats in the dot score table": "点积分数表的浮点数个数",
    "ours (ms)": "本章实现（ms）",
    "F.sdpa (ms)": "F.sdpa（ms）",
    "ours / F.sdpa": "本章实现 / F.sdpa",
    "teaching": "教学版",
    "fused": "融合版",
    "fused + F.sdpa": "融合版 + F.sdpa",
    "nn.MultiheadAttention (ms)": "nn.MultiheadAttention（ms）",
    "variant": "变体",
    "max abs difference from nn.Transformer": "与 nn.Transformer 的最大绝对误差",
    "post-LN (paper)": "post-LN（论文）",
    "pre-LN, final LayerNorm": "pre-LN，最后加 LayerNorm",
    "model": "模型",
    "parameters": "参数量",
    "training wall time (s)": "训练耗时（s）",
    "greedy decoding of the test set (s)": "贪心解码测试集耗时（s）",
    "test BLEU (greedy)": "测试 BLEU（贪心）",
    "exact match": "完全匹配率",
    "greedy": "贪心解码",
    "beam 4, α = 0.6": "束宽 4，α = 0.6",
    "Transformer, post-LN": "Transformer，post-LN",
    "Transformer, pre-LN": "Transformer，pre-LN",
    "Bahdanau (GRU + attention)": "Bahdanau（GRU + 注意力）",
    "training time, Bahdanau / post-LN": "训练时间，Bahdanau / post-LN",
    "decoding time, post-LN / Bahdanau": "解码时间，post-LN / Bahdanau",
    "seed": "种子",
    "pretrained": "预训练",
    "from scratch": "从头训练",
    "pretraining changes it by": "预训练带来的变化",
    "mean": "均值",
    "blanks": "空白",
    "BERT, both sides": "BERT，两侧可见",
    "BERT, words only": "BERT，仅限单词",
    "GPT, left side": "GPT，只见左侧",
    "GPT, words only": "GPT，仅限单词",
    "all": "全部",
    "the other answers": "其余答案",
    "task (chance)": "任务（随机水平）",
    "BERT, left side only": "BERT，只见左侧",
    "GPT, left side only": "GPT，只见左侧",
    "BERT, right side masked": "BERT，右侧被掩码",
    "GPT (left to right)": "GPT（从左到右）",
    "sizes": "规模",
    "embeddings": "嵌入层",
    "encoder layers": "编码器层",
    "pooler": "池化层",
    "total": "合计",
    "this chapter": "本章",
    "base (Lan et al. 2020, table 1)": "base（Lan et al. 2020，表 1）",
    "new tokens": "新词元数",
    "tokens/s, no cache": "词元/秒，无缓存",
    "tokens/s, KV cache": "词元/秒，KV 缓存",
    "speed-up": "加速比",
    "cache at the end": "结束时的缓存",
    "key/value heads": "键值头数",
    "cache per token": "每个词元的缓存",
    "val loss, converted": "验证损失，转换后",
    "val loss after uptraining, mean (min–max)": "继续训练后的验证损失，均值（最小–最大）",
    "chapter 6 GPT (4 × 4 heads × 32, float32)": "第 6 章的 GPT（4 × 4 头 × 32，float32）",
    "7B-sized (32 × 32 heads × 128, float16)": "7B 规模（32 × 32 头 × 128，float16）",
    "GQA, 8 kv heads": "GQA，8 个键值头",
    "MLA, d_c = 4·d_head, d_rope = d_head/2": "MLA，d_c = 4·d_head，d_rope = d_head/2",
    "cache at T": "长度 T 时的缓存",
    "lean: tokens/s": "精简版：词元/秒",
    "lean: × MHA": "精简版：相对 MHA 的倍数",
    "module: tokens/s": "模块版：词元/秒",
    "module: × MHA": "模块版：相对 MHA 的倍数",
    "dense (s)": "稠密（s）",
    "blocked (s)": "分块（s）",
    "dense (MiB)": "稠密（MiB）",
    "blocked (MiB)": "分块（MiB）",
    "distance $d$": "距离 $d$",
    "pairs / $T^2$ (cost)": "对数 / $T^2$（代价）",
    "pairs / causal": "对数 / 因果",
    "training time (s)": "训练时间（s）",
    "full": "完整注意力",
    "standard": "标准实现",
    "FlashAttention (alg. 1)": "FlashAttention（算法 1）",
    "ratio": "比值",
    "naive: MiB": "朴素实现：MiB",
    "×, per doubling": "每翻倍的倍数",
    "naive: s": "朴素实现：s",
    "tiled: MiB": "分块实现：MiB",
    "tiled: s": "分块实现：s",
    "GPU (compute capability)": "GPU（计算能力）",
    "registers per SM": "每个 SM 的寄存器",
    "shared memory per SM": "每个 SM 的共享内存",
    "at most per program (thread block)": "每个程序（线程块）至多",
    "L2 cache": "L2 缓存",
    "shared memory (estimate)": "共享内存（估计）",
    "registers per thread, 4 warps": "每线程寄存器数，4 个 warp",
    "8 warps": "8 个 warp",
    "fits": "放得下",
    "too large": "太大",
    "tile": "块",
    "most num_stages": "num_stages 上限",
    "causal": "因果",
    "blocks": "块大小",
    "o vs F.sdpa": "o 对比 F.sdpa",
    "L vs logsumexp": "L 对比 logsumexp",
    "o vs chapter 10": "o 对比第 10 章",
    "True": "是",
    "False": "否",
    "B (launch_config)": "B（launch_config）",
    "Triton (this chapter): ms": "Triton（本章）：ms",
    "F.sdpa: ms": "F.sdpa：ms",
    "naive: ms": "朴素实现：ms",
    # sentences
    "causal mask": "因果掩码",
    "forward+backward": "前向 + 反向",
    "forward + backward": "前向 + 反向",
    "median of repeated runs": "多次运行的中位数",
    "ratio = time / torch_mha time": "比值 = 时间 / torch_mha 的时间",
    "identical tokens checked": "已核对生成的词元完全相同",
    "one decode step over T cached tokens": "在 T 个已缓存词元上解码一步",
    "peak RSS of a fresh process above its inputs": "新进程超出其输入的峰值 RSS",
    "memory = peak of the allocations made during the call (torch.profiler profile_memory events": "内存 = 调用期间所做分配的峰值（torch.profiler 的 profile_memory 事件",
    "the inputs q, k, v not counted)": "输入 q、k、v 不计在内）",
    "post-LN (paper), final LayerNorm": "post-LN（论文），最后加 LayerNorm",
    "F.sdpa: MiB": "F.sdpa：MiB",
    "F.sdpa: s": "F.sdpa：s",
    "brackets": "括号匹配",
    "copy": "复制",
    "Test accuracy after fine-tuning, one row per seed (the seed draws the pretraining, which sentences are shuffled, the classifier's initialisation and the batches):": "微调后的测试准确率，每个种子一行（种子决定预训练、哪些句子被打乱、分类器的初始化以及批次）：",
    "Top-1 accuracy at the blank on the test items, with each seed's 95% Wilson interval in brackets (percent):": "测试题目中空白处的 top-1 准确率，括号中是每个种子的 95% Wilson 区间（百分数）：",
    "Cache per token of one sequence, computed with `kv_cache_bytes` / `mla_cache_bytes` (GQA with 8 kv heads is MHA for the 4-head model):": "一个序列每个词元的缓存，用 `kv_cache_bytes` / `mla_cache_bytes` 计算（对 4 个头的模型而言，8 个键值头的 GQA 就是 MHA）：",
    "HBM reads + writes (numbers) for one head:": "单个头的 HBM 读 + 写（数的个数）：",
    "none": "无",
    "no seed range": "没有种子范围",
    "**Exact match** (sentences translated exactly):": "**完全匹配率**（完全译对的句子）：",
    # ch12
    "mask_mod": "掩码函数",
    "chapter 9's table": "第 9 章的表",
    "pairs equal": "相等的位置对",
    "NO": "并非全部",
    "Tiles of the causal block mask, counted by `block_counts`:": "因果块掩码的分块，由 `block_counts` 计数：",
    "partial": "部分",
    "skipped": "跳过",
    "visited": "访问",
    "chapter 11's loop": "第 11 章的循环",
    "flex eager": "即时执行的 FlexAttention",  # the Chinese first: a header breaks at the space
    "flex compiled": "编译后的 FlexAttention",
    "SDPA dense": "稠密掩码的 SDPA",
    "ch. 9 blocked": "第\u00a09\u00a0章\u2060分\u2060块",  # no-break space, word joiner: never "第 9 章分/块"
    "compile (s)": "编译（s）",
    "building the dense mask (ms)": "构造稠密掩码（ms）",
    "building the dense mask": "构造稠密掩码",
    "tiles skipped": "跳过的分块",
    "create_block_mask (s), fastest": "create_block_mask（s），最快",
    "slowest": "最慢",
    "Milliseconds per forward:": "每次前向的毫秒数：",
    "Peak memory during the calls (MiB):": "调用期间的峰值内存（MiB）：",
    # ch14
    "validation loss": "验证损失",
    "training tokens/s": "训练词元/秒",
    "decode ms/token": "解码毫秒/词元",
    "decode memory": "解码内存",
    "GPT (all softmax)": "GPT（全部为 softmax）",
    "hybrid 3 : 1": "3 : 1 混合",
    # ch11: the benchmark's cell on a machine without a committed GPU measurement
    "No GPU measurement is committed yet: this page was built on a CPU. On a GPU of compute capability 8.0 or "
    "newer (Colab's L4 or A100; not the T4, which current Triton no longer supports), "
    "`python -m benchmarks.bench_flash_attention_triton` writes the results file this cell reads.": (
        "仓库里还没有提交 GPU 上的测量结果：本页是在 CPU 上构建的。在计算能力 8.0 或更高的 GPU 上（Colab 的 L4 或 "
        "A100；不要用 T4，当前的 Triton 已不再支持它）运行 "
        "`python -m benchmarks.bench_flash_attention_triton`，它会写出本单元读取的结果文件。"
    ),
    # ch13
    "Accuracy with the start token evicted:": "逐出起始词元之后的准确率：",
    "accuracy": "准确率",
    "new symbol: to start": "新符号：给起始词元",
    "to sink": "给注意力汇聚",
    "seen symbol: to sink": "已见符号：给注意力汇聚",
    "new symbol": "新符号",
    "seen symbol": "已见符号",
    "no sink": "无注意力汇聚",
    "learned sink": "学到的注意力汇聚",
}

OUTPUT_PATTERNS: list[tuple[str, str]] = [
    # ch14
    (
        "Decode time and memory at \\$T = (\\d+)\\$, with untrained models of the same widths and a (\\d+)-position "
        "table\\. The cached decoding path gives the trained models' logits to (\\S+), and the bytes it holds equal "
        "`decode_state_bytes`: (\\w+)\\.",
        "解码时间和内存取自 $T = \\1$ 处，用的是宽度相同、位置表长 \\2 的未训练模型。带缓存的解码路径给出的 logit 与训练好的"
        "模型相差不超过 \\3，它占用的字节数等于 `decode_state_bytes` 的结果：\\4。",
    ),
    ("\\*\\*(\\w+), (\\w+)\\*\\* — (.+)", "**\\1，\\2**——\\3"),
    (
        "\\*\\*(\\w+), (\\w+)\\*\\*, time relative to nn\\.MultiheadAttention — (.+)",
        "**\\1，\\2**，时间相对于 nn.MultiheadAttention——\\3",
    ),
    ("\\*\\*(\\w+)\\*\\* — (.+)", "**\\1**——\\2"),
    (
        "measured (\\S+) on (\\S+), (\\d+) cores, torch (\\S+), (\\d+) threads?",
        "测量于 \\1，\\2，\\3 核，torch \\4，\\5 个线程",
    ),
    ("median of (\\d+) interleaved rounds", "交替进行的 \\1 轮的中位数"),
    ("time = median of (\\d+) interleaved rounds", "时间 = 交替进行的 \\1 轮的中位数"),
    (
        "chapter 6 sizes \\((\\d+) layers, (\\d+) heads, d_model (\\d+)\\), random weights, greedy, batch (\\d+), prompt (\\d+)",
        "第 6 章的规模（\\1 层，\\2 个头，d_model \\3），随机权重，贪心解码，批量 \\4，提示 \\5 个词元",
    ),
    (
        "one attention layer, d_model (\\d+), (\\d+) query heads x (\\d+), (\\w+), batch (\\d+)",
        "一个注意力层，d_model \\1，\\2 个查询头 × \\3，\\4，批量 \\5",
    ),
    (
        "MHA/GQA/MQA = GroupedQueryAttention with ([\\d/]+) kv heads, MLA d_c (\\d+), d_rope (\\d+)",
        "MHA/GQA/MQA = 键值头数为 \\1 的 GroupedQueryAttention，MLA 的 d_c 为 \\2、d_rope 为 \\3",
    ),
    (
        "median of (\\d+) rounds, each visiting every length and variant \\(rotating order\\)",
        "\\1 轮的中位数，每轮按轮换的顺序遍历每种长度和变体",
    ),
    ("(\\S+), Linux, torch (\\S+), (\\d+) thread\\(s\\)", "\\1，Linux，torch \\2，\\3 个线程"),
    ("(\\S+), (\\d+) cores \\(shared\\), (\\d+) thread", "\\1，\\2 核（共享），\\3 个线程"),
    ("(\\S+), (\\d+) cores", "\\1，\\2 核"),
    (
        "forward only, no gradients, q/k/v \\((.+?)\\) (\\w+), causal window w = (\\d+)",
        "只做前向，不求梯度，q/k/v 为 (\\1) \\2，因果窗口 w = \\3",
    ),
    ("fastest of (\\d+) runs after a warm-up", "预热之后 \\1 次运行中最快的一次"),
    ("dense measured up to T = (\\d+)", "稠密版只测到 T = \\1"),
    ("([-+\\d.]+) points", "\\1 个百分点"),
    ("(\\S+) exact", "\\1 完全匹配率"),
    ("(\\w+) \\((\\d+/\\d+) = ([\\d.]+)%\\)", "\\1（\\2 = \\3%）"),
    (
        "Accuracy at the query, (\\d+) held-out sequences per distance bucket, (.+); chance is 1/(\\d+) = ([\\d.]+)\\. \\$T = (\\d+)\\$, \\$d_\\{model\\} = (\\d+)\\$, (\\d+) layers, (\\d+) heads; (\\d+) steps of (\\d+) sequences, AdamW lr (\\S+)\\. Measured with torch (\\S+) on (\\S+) \\((\\d+) thread, a shared 2-core machine at low priority\\), ([\\d.]+) minutes for (\\d+) seeds?\\.",
        "查询处的准确率，每个距离分桶 \\1 个留出序列，\\2；随机水平为 1/\\3 = \\4。$T = \\5$，$d_{model} = \\6$，\\7 层，\\8 个头；\\9 步，每步 \\10 个序列，AdamW 学习率 \\11。用 torch \\12 在 \\13 上测量（\\14 个线程，一台低优先级运行的共享双核机器），\\16 个种子共 \\15 分钟。",
    ),
    ("mean over seeds (\\[.*\\]) \\[min–max\\]", "种子 \\1 的均值 [最小–最大]"),
    ("one training seed \\((\\d+)\\): no spread measured", "只有一个训练种子（\\1）：没有测量种子间的波动"),
    (
        "Top-1 accuracy on (\\d+) blanks in held-out sentences per seed \\(the seed draws the pretraining of both models and the blanks\\):",
        "每个种子在留出句子中 \\1 个空白上的 top-1 准确率（种子决定两个模型的预训练和空白位置）：",
    ),
    ("One head, N = ([\\d,]+), d = (\\d+), float16, forward:", "单头，N = \\1，d = \\2，float16，前向："),
    (
        "DeepSeek-V2 itself \\(60 layers, \\$d_c = 512\\$, \\$d\\^R_h = 64\\$, bf16\\): ([-+−\\d.,]+) KiB per token\\.",
        "DeepSeek-V2 本身（60 层，$d_c = 512$，$d^R_h = 64$，bf16）：每个词元 \\1 KiB。",
    ),
    (
        "Seeds (\\[.*?\\]) \\(the seed sets the initialisation and the batch order; the data split is fixed\\); torch (\\S+) on (\\S+), one thread; (\\d+) steps of batch (\\d+); Transformer: (.+); label smoothing ([\\d.]+), warm-up (\\d+) steps\\. Quality: mean over the seeds, in brackets the lowest and highest seed; times: one value per seed, in seed order\\.",
        "种子 \\1（种子决定初始化和批次顺序；数据划分是固定的）；torch \\2，运行在 \\3 上，单线程；\\4 步，批量 \\5；Transformer：\\6；标签平滑 \\7，预热 \\8 步。质量：各种子的均值，括号中为最低和最高的种子；时间：每个种子一个值，按种子顺序排列。",
    ),
    (
        "Chapter 6 model, validation loss \\(nats per character\\) ([\\d.]+); (\\d+) uptraining steps of batch (\\d+) at lr ([\\d.e-]+), once for each of (\\d+) seeds \\(the seed draws the training batches; the pooling itself has no randomness\\); measured (\\S+) \\((.+)\\)\\.",
        "第 6 章的模型，验证损失（nats/字符）\\1；以学习率 \\4、批量 \\3 继续训练 \\2 步，\\5 个种子各一次（种子决定训练批次；池化本身没有随机性）；测量于 \\6（\\7）。",
    ),
    (
        "At \\$T = ([\\d,]+)\\$ \\(× MHA: median over the rounds of the speed-up against the same round's MHA step\\) — (.+)",
        "在 $T = \\1$ 时（× MHA：相对同一轮 MHA 解码步的加速比在各轮中的中位数）——\\2",
    ),
    (
        "Measured (\\S+) on (.+?), torch (\\S+), Triton (\\S+); (.+)\\.",
        "测量于 \\1，设备 \\2，torch \\3，Triton \\4；\\5。",
    ),
    (
        "Measured (\\S+) on (.+?), torch (\\S+), (\\d+) thread; (.+)\\.",
        "测量于 \\1，机器 \\2，torch \\3，\\4 个线程；\\5。",
    ),
    ("Measured (\\S+) on (.+?), torch (\\S+); (.+)\\.", "测量于 \\1，机器 \\2，torch \\3；\\4。"),
    (
        "`(\\w+)`: BLEU falls from (\\S+) to (\\S+) tokens in (\\d+) of (\\d+) seeds \\(mean ([-+−\\d.,]+) → ([-+−\\d.,]+)\\); the seeds' range is ([-+−\\d.,]+) BLEU on the whole test set and widest, ([-+−\\d.,]+), in bucket (\\S+)\\.",
        "`\\1`：从 \\2 个词元到 \\3 个词元，BLEU 在 \\5 个种子中的 \\4 个里下降（均值 \\6 → \\7）；各种子的范围在整个测试集上为 \\8 BLEU，最宽的在 \\10 这一桶，为 \\9。",
    ),
    (
        "Reversal: the worst reversed seed beats the best plain seed in (\\d+) of (\\d+) buckets \\((.*)\\); mean gain on the whole test set ([-+−\\d.,]+) BLEU\\.",
        "倒序：在 \\2 个桶中的 \\1 个里（\\3），最差的倒序种子也胜过最好的正序种子；在整个测试集上平均提高 \\4 BLEU。",
    ),
    (
        "By source length \\(tokens; n sentences\\), mean over (\\d+) seeds, in brackets the lowest and highest seed\\. \\*\\*BLEU:\\*\\*",
        "按源句长度（词元数；n 为句子数）分组，\\1 个种子的均值，括号中为最低和最高的种子。**BLEU：**",
    ),
    (
        "`attention` on (\\S+) tokens: worst seed ([-+−\\d.,]+) BLEU, best ([-+−\\d.,]+)\\.",
        "`attention` 在 \\1 个词元的句子上：最差种子 \\2 BLEU，最好 \\3。",
    ),
    (
        "`(\\w+)` on (\\S+) tokens: best seed ([-+−\\d.,]+) BLEU, ([-+−\\d.,]+) below attention's worst seed — (.+); it keeps (\\S+) of its 9-12-token BLEU\\.",
        "`\\1` 在 \\2 个词元的句子上：最好种子 \\3 BLEU，比 attention 的最差种子低 \\4——\\5；它保留了自己在 9-12 个词元上 BLEU 的 \\6。",
    ),
    ("([-+−\\d.,]+) times the wider of the two models' seed ranges there", "是两个模型在该处种子范围中较宽者的 \\1 倍"),
    ("seed (\\d+)", "种子 \\1"),
    ("answer among the (\\d+) most frequent words", "答案在最常见的 \\1 个词中"),
    ('always "(.+)"', "总是猜“\\1”"),
    ("decoding \\((\\d+) test sentences\\)", "解码（\\1 个测试句子）"),
    ("window \\(w = (\\d+)\\)", "窗口（w = \\1）"),
    ("window \\+ global every (\\d+)", "窗口 + 每 \\1 个一个全局词元"),
    ("ALBERT, E = (\\d+)", "ALBERT，E = \\1"),
    ("(.+) \\((\\d+/\\d+) = ([\\d.]+)%\\)", "\\1（\\2 = \\3%）"),
    # ch12: the parts of the benchmark's measurement line (between its "; ")
    (
        "fastest of (\\d+) runs after a warm-up \\(the compile, for flex_compiled\\)",
        "预热（flex_compiled 的预热即编译）之后 \\1 次运行中最快的一次",
    ),
    (
        "peak resident memory during the timed runs above what the process held before them, glibc's mmap threshold "
        "fixed at 128 KiB \\(MALLOC_MMAP_THRESHOLD_\\) so that freed blocks leave the process",
        "峰值常驻内存按计时运行期间超出运行前进程已占用的部分计算，glibc 的 mmap 阈值固定为 128 KiB"
        "（MALLOC_MMAP_THRESHOLD_），使释放的内存块归还给系统",
    ),
    (
        "sdpa_dense's \\(T, T\\) boolean mask built before the timed runs \\(its construction: dense_mask_seconds, "
        "dense_mask_mib, the peak resident memory while building it\\)",
        "sdpa_dense 的 (T, T) 布尔掩码在计时运行之前构造（其构造代价见 dense_mask_seconds 和 dense_mask_mib，"
        "后者是构造期间的峰值常驻内存）",
    ),
    (
        "`create_block_mask\\(sliding_window\\((\\d+)\\), None, None, T, T\\)` on (.+?), once in each of the "
        "benchmark's four processes per length:",
        "`create_block_mask(sliding_window(\\1), None, None, T, T)`，机器 \\2，基准测试在每个长度下的四个进程中各构造一次：",
    ),
    (
        "From T = (\\d+) to (\\d+) the compiled forward took ([\\d.]+) times as long while the tiles it visits grew "
        "([\\d.]+) times \\((\\d+) to (\\d+) tiles of 128 × 128\\)\\. At T = (\\d+), building the dense mask took "
        "([\\d.]+) s and (\\d+) MiB; SDPA under it ([\\d.]+) s and (\\d+) MiB\\.",
        "从 T = \\1 到 \\2，编译后的前向耗时变为 \\3 倍，而它访问的分块增加到 \\4 倍（128 × 128 的分块从 \\5 个增加到 "
        "\\6 个）。T = \\7 时，构造稠密掩码用了 \\8 s 和 \\9 MiB；在它之下的 SDPA 用了 \\10 s 和 \\11 MiB。",
    ),
    # ch13
    (
        "After the first (\\d+) steps: contiguous reservation keeps ([\\d.]+) % of its memory in use, paging in "
        "blocks of (\\d+) keeps ([\\d.]+) %\\. A request holds (\\d+) slots on average when paged, so the memory "
        "of (\\d+) contiguous requests would hold about (\\d+) paged ones\\.",
        "前 \\1 步之后：连续预留的内存中有 \\2 % 在使用，按每块 \\3 个词元分页则有 \\4 %。分页时一个请求平均占用 "
        "\\5 个槽位，所以 \\6 个连续分配的请求所用的内存大约能容纳 \\7 个分页的请求。",
    ),
    (
        "Measured at build time on (.+), one thread: ([\\d.]+) ms with one chunk, ([\\d.]+) to ([\\d.]+) ms over all the "
        "splits\\.",
        "构建本页时在 \\1 上用一个线程测得：一个分块时 \\2 ms，所有分块数下为 \\3 到 \\4 ms。",
    ),
    (
        "Slowest rank's pairs against the mean: ([\\d.]+)× with contiguous shards, ([\\d.]+)× zig-zag\\.",
        "最慢进程的位置对数与平均值之比：连续切分 \\1×，之字形切分 \\2×。",
    ),
    ("(.+), one thread", "\\1，一个线程"),
    (
        "Trained (\\S+) on (.+), torch (\\S+) \\(`(.+)`\\); bars: the mean of the seeds, dots: each seed\\. Accuracy "
        "and attention on 512 held-out sequences:",
        "训练于 \\1，机器 \\2，torch \\3（`\\4`）；柱：各种子的均值，点：各个种子。在 512 条留出序列上的准确率和注意力：",
    ),
]

# A cell whose English means something else on one page than the table above says (the page's name without .zh.md
# -> its own entries, looked up first): chapter 12's tile counts have a column "full" (full tiles), not chapter 9's
# full attention.
OUTPUT_TEXT_PAGES: dict[str, dict[str, str]] = {
    "ch12_flex_attention": {"full": "完整", "tile": "分块大小"},
}

# Printed output (a cell's `print`, shown in <pre>): the Chinese build translates it line by line as it renders
# (`book/_ext/edition.py`, `translate_printed`). `PRINTED_TEXT`: a whole line as printed (without its indentation)
# -> its Chinese; `PRINTED_PATTERNS`: a regular expression matched against the whole line -> its Chinese, its groups
# translated in turn (a line without an entry is tried part by part between its "; "). Lines of data — the
# training text, the model's generated text, source sentences and their translations, tensors — have no entry and
# stay as printed.
PRINTED_TEXT: dict[str, str] = {
    # ch01
    "(the other seeds and the summary: see the docstring of scripts/train_length_experiment.py)": (
        "（其他种子和汇总：见 scripts/train_length_experiment.py 的文档字符串）"
    ),
    "(one CPU thread of a shared machine: the range of times is its load, not the seed)": (
        "（共享机器上的一个 CPU 线程：时间的范围反映的是机器负载，而不是种子）"
    ),
    # ch03
    "scores / sqrt(d_k):": "分数 / sqrt(d_k)：",
    "weights (rows sum to 1):": "权重（每行之和为 1）：",
    "output:": "输出：",
    "nn.LSTM vs chapter 3 SelfAttention": "nn.LSTM 对比第 3 章的 SelfAttention",
    "median of repeats": "多次重复的中位数",
    "chapter 2 additive vs chapter 3 dot-product attention": "第 2 章的加性注意力对比第 3 章的点积注意力",
    # ch04
    "x:": "x：",
    "a reshape straight to (B, H, T, d_k) mixes the tokens:": "直接 reshape 成 (B, H, T, d_k) 会把词元混在一起：",
    # ch06
    "lm_head.weight is wte.weight: True": "lm_head.weight 就是 wte.weight：True",
    "each model's own loss": "各模型用自己的损失",
    "nanogpt: no biases, exact GELU": "nanogpt：无偏置，精确 GELU",
    "nanogpt_bias: biases, exact GELU": "nanogpt_bias：有偏置，精确 GELU",
    "nice -n 19, machine quiet": "nice -n 19，机器空闲",
    "validation losses identical in all": "验证损失在所有运行中都相同",
    "device cpu": "设备 cpu",
    # ch07
    "seed 0's first blanks:": "种子 0 的前几个空白：",
    # ch08
    "GQA, 1 kv head": "GQA，1 个键值头",
    "MHA + sharing": "MHA + 跨层共享",
    "GQA + sharing": "GQA + 跨层共享",
    # ch14
    "softmax in all 48 layers": "48 层全部为 softmax",
    "hybrid 3 : 1 (Qwen3-Next)": "3 : 1 混合（Qwen3-Next）",
    "linear in all 48 layers": "48 层全部为线性层",
}

PRINTED_PATTERNS: list[tuple[str, str]] = [
    # measurement lines shared by several chapters
    (
        "measured (\\S+) on (\\S+), (\\d+) cores, torch (\\S+), (\\d+) threads?",
        "测量于 \\1，\\2，\\3 核，torch \\4，\\5 个线程",
    ),
    ("measured (\\S+) on (\\S+) \\((\\d+) thread\\(s\\)\\)", "测量于 \\1，\\2（\\3 个线程）"),
    ("retrain: (python -m .+)", "重新训练：\\1"),
    (
        "measured with torch (\\S+) on (\\S+); (\\d+) updates of (\\d+) pairs, seeds (\\[.*?\\])(, greedy decoding)?",
        "用 torch \\1 在 \\2 上测量；\\3 次更新，每次 \\4 个句对，种子 \\5\\6",
    ),
    (", greedy decoding", "，贪心解码"),
    ("(\\w+) +([\\d,]+) parameters, trained in ([\\d–]+) s", "\\1  \\2 个参数，训练用时 \\3 秒"),
    (
        "(\\w+) +([\\d,]+) parameters, trained in ([\\d–]+) s \\(one thread of a shared machine: the range is its load\\)",
        "\\1  \\2 个参数，训练用时 \\3 秒（共享机器的一个线程：范围反映的是机器负载）",
    ),
    # ch01
    ("largest difference after (\\d+) steps: h (\\S+)  c (\\S+)", "\\1 步之后的最大差异：h \\2  c \\3"),
    (
        "forget bias 1 vs default init: ([\\d.]+) times as many steps per factor of ten",
        "遗忘门偏置 1 对比默认初始化：每衰减十倍所需的步数是 \\1 倍",
    ),
    ("decoder input : (.+)", "解码器输入：\\1"),
    ("([\\d,]+ +)?(\\d+) tokens  (.+)", "\\1\\2 个词元  \\3"),
    ("\\[(\\d+) tokens\\] (.+)", "[\\1 个词元] \\2"),
    ("must predict  : (.+)", "应预测    ：\\1"),
    # ch03
    (
        "one layer, forward\\+backward, B=(\\d+), d_model=(\\d+)",
        "一层，前向 + 反向，B=\\1，d_model=\\2",
    ),
    (
        "T_q = T_k queries and keys, forward\\+backward, B=(\\d+), A=d_model=(\\d+)",
        "查询数与键数 T_q = T_k，前向 + 反向，B=\\1，A=d_model=\\2",
    ),
    ("self-attention / LSTM time: (.+)", "自注意力 / LSTM 的时间比：\\1"),
    ("first T where the self-attention layer is the slower one: (\\d+)", "自注意力层开始更慢的第一个 T：\\1"),
    ("query scaled by +(\\d+): weights (.+)  ->  value (\\S+)", "查询放大 \\1 倍：权重 \\2  ->  值 \\3"),
    (
        "cross-attention weights: (\\(.+?\\)) = \\(B, T_q = (\\d+) target positions, T_k = (\\d+) source positions\\)",
        "交叉注意力权重：\\1 = (B, T_q = \\2 个目标位置, T_k = \\3 个源位置)",
    ),
    (
        "self-attention weights: +(\\(.+?\\)) = \\(B, T_q = T_k = (\\d+) source positions\\)",
        "自注意力权重：  \\1 = (B, T_q = T_k = \\2 个源位置)",
    ),
    ("entropy, scaled: +(.+)", "熵，缩放：  \\1"),
    ("entropy, unscaled: (.+)", "熵，未缩放：\\1"),
    ("output (\\(.+?\\))  weights (\\(.+?\\))", "输出 \\1  权重 \\2"),
    ("permutation equivariant \\(no mask\\): (\\w+)", "置换等变（无掩码）：\\1"),
    ("max \\|ours - F\\.scaled_dot_product_attention\\|: (\\S+)", "max |我们的 - F.scaled_dot_product_attention|：\\1"),
    (
        "average_attn_weights=(\\w+): max \\|Δ output\\| = (\\S+), max \\|Δ weights\\| = (\\S+)",
        "average_attn_weights=\\1：max |Δ 输出| = \\2，max |Δ 权重| = \\3",
    ),
    ("fused vs teaching: +(\\S+)", "融合版对比教学版：       \\1"),
    ("fused\\+F\\.sdpa vs teaching: (\\S+)", "融合版+F.sdpa 对比教学版：\\1"),
    ("--- greedy", "--- 贪心"),
    # ch04
    (
        "split_heads\\(x, (\\d+)\\): head i holds features 2i, 2i\\+1 of both tokens",
        "split_heads(x, \\1)：第 i 个头持有两个词元的特征 2i、2i+1",
    ),
    ("merge_heads undoes the split: (\\w+)", "merge_heads 撤销了拆分：\\1"),
    ("translation: (.+)", "译文：\\1"),
    # ch05
    ("ratios within each run, seeds (\\[.*?\\]):", "每次运行内部的比值，种子 \\1："),
    ("training time, Bahdanau / post-LN: (.+)", "训练时间，Bahdanau / post-LN：\\1"),
    ("decoding time, post-LN / Bahdanau: (.+)", "解码时间，post-LN / Bahdanau：\\1"),
    ("lowest overall test BLEU of any model and seed: (\\S+)", "所有模型和种子中最低的整体测试 BLEU：\\1"),
    ("reference: (.+)", "参考译文：\\1"),
    ("greedy: +(.+)", "贪心：  \\1"),
    ("beam (\\d+): +(.+)", "束宽 \\1：\\2"),
    # ch06
    ("largest logit change per position: (.+)", "每个位置 logit 的最大变化：\\1"),
    (
        "by hand ([\\d,]+)   num_parameters\\(\\) ([\\d,]+)   \\(an untied head would add ([\\d,]+)\\)",
        "手工计算 \\1   num_parameters() \\2   （不共享权重的输出头会多出 \\3）",
    ),
    (
        "max \\|logit difference\\|: (\\S+) \\(fused kernel\\), (\\S+) \\(chapter 3's explicit softmax\\); logits are of size ~(\\S+)",
        "最大 |logit 差异|：\\1（融合核函数），\\2（第 3 章的显式 softmax）；logit 的量级约为 \\3",
    ),
    (
        "greedy continuations identical token for token: (\\w+) \\(transformers (\\S+)\\)",
        "贪心续写逐词元一致：\\1（transformers \\2）",
    ),
    ("(\\d+) topics, ([\\d,]+) characters; a sample:", "\\1 个主题，\\2 个字符；样例："),
    (
        "final: train ([\\d.]+), validation ([\\d.]+) nats/char \\(([\\d.]+) bits/char\\)",
        "最终：训练 \\1，验证 \\2 nats/字符（\\3 bits/字符）",
    ),
    (
        "throughput: ([\\d,]+) tokens/s on (\\S+) with (\\d+) thread\\(s\\), ([\\d.]+) min of training; measured (\\S+), torch (\\S+)",
        "吞吐量：在 \\2 上用 \\3 个线程每秒 \\1 个词元，训练 \\4 分钟；测量于 \\5，torch \\6",
    ),
    (
        "(\\d+) interleaved iterations each, batch (\\d+), context (\\d+), (\\S+), python docs, median step time after (\\d+)",
        "各交替运行 \\1 次迭代，批量 \\2，上下文 \\3，\\4，Python 文档，去掉前 \\5 步后的单步时间中位数",
    ),
    ("load average ([\\d.]+) at the start, ([\\d.]+) at the end", "开始时平均负载 \\1，结束时 \\2"),
    (
        "course and nanogpt_gpt2: GPT-2 layout \\(biases, GELU-tanh\\), nanogpt: no biases, exact GELU",
        "course 和 nanogpt_gpt2：GPT-2 的布局（有偏置，GELU-tanh），nanogpt：无偏置，精确 GELU",
    ),
    ("train_gpt_ddp rows: (\\d+) iterations each", "train_gpt_ddp 各行：每行 \\1 次迭代"),
    (
        "course/this in three other (\\d+)-iteration runs the same day \\(nanogpt, nanogpt_bias, nanogpt_gpt2\\): (.+)",
        "同一天另外三次 \\1 次迭代的运行中的 course/this（nanogpt、nanogpt_bias、nanogpt_gpt2）：\\2",
    ),
    ("([\\d.]+, [\\d.]+, [\\d.]+) \\(load ([\\d.-]+)\\)", "\\1（负载 \\2）"),
    (
        "(\\w+): +([\\d.]+) ms/step, +([\\d,]+) tokens/s, validation loss ([\\d.]+); course / this = ([\\d.]+)",
        "\\1：\\2 ms/步，每秒 \\3 个词元，验证损失 \\4；course / this = \\5",
    ),
    (
        "(\\w+): +([\\d,]+) tokens/s \\(scripts/train_gpt\\.py, all ranks\\)",
        "\\1：每秒 \\2 个词元（scripts/train_gpt.py，所有进程合计）",
    ),
    # ch07
    ("vocabulary: (\\d+)  special: (.+)", "词表：\\1  特殊词元：\\2"),
    ("tokens: +(\\[.+)", "词元：  \\1"),
    ("segments: (\\[.+)", "片段：\\1"),
    (
        "embeddings (\\(.+?\\)) \\| change when segments are dropped, per token:",
        "嵌入 \\1 | 去掉片段嵌入后每个词元的变化：",
    ),
    (
        "change of each position's output when only the last word changes: (.+)",
        "只改变最后一个词时各位置输出的变化：\\1",
    ),
    (
        "MLM logits: max \\|difference\\| (\\S+) \\(logits ~(\\S+)\\); hidden states (\\S+); pooler (\\S+)",
        "MLM logit：最大 |差异| \\1（logit 约 \\2）；隐藏状态 \\3；pooler \\4",
    ),
    (
        "selected: ([\\d.]+)% of ordinary tokens, special tokens selected: (\\d+)",
        "被选中：普通词元的 \\1%，被选中的特殊词元：\\2",
    ),
    (
        "BERT ([\\d,]+) parameters, GPT ([\\d,]+); (\\d+) iterations of (\\d+) × (\\d+) tokens each",
        "BERT \\1 个参数，GPT \\2；\\3 次迭代，每次 \\4 × \\5 个词元",
    ),
    (
        "held-out MLM: loss ([\\d.]+), accuracy ([\\d.]+)% over all selected positions, ([\\d.]+)% at \\[MASK\\] positions \\(measured (\\S+) on a shared 2-core CPU\\)",
        "留出集 MLM：损失 \\1，在所有被选中位置上的准确率 \\2%，在 [MASK] 位置上 \\3%（测量于 \\4，共享的双核 CPU）",
    ),
    (
        "(\\d+) training, (\\d+) test sentences \\((\\d+)% of the test sentences shuffled, seed (\\d+)\\)",
        "\\1 个训练句子，\\2 个测试句子（\\3% 的测试句子被打乱，种子 \\4）",
    ),
    ("original: (.+)", "原句：  \\1"),
    ("shuffled: (.+)", "打乱后：\\1"),
    (
        "gain from pretraining: ([-+\\d.]+) points on average over the seeds, from ([-+\\d.]+) to ([-+\\d.]+)",
        "预训练带来的提升：各种子平均 \\1 个百分点，范围从 \\2 到 \\3",
    ),
    (
        "with about (\\d+) test sentences, one accuracy has a standard error of about ±(\\d+) points",
        "大约 \\1 个测试句子时，单个准确率的标准误约为 ±\\2 个百分点",
    ),
    (
        "answer ('.*?'): BERT (.+?), BERT left-only (.+?), GPT (.+)",
        "答案 \\1：BERT \\2，只看左侧的 BERT \\3，GPT \\4",
    ),
    (
        "held-out MLM loss at the (\\d+) selected test positions: BERT ([\\d.]+) nats, the unigram baseline \\(training-text frequencies, no context\\) ([\\d.]+); GPT next-token loss ([\\d.]+)",
        "在 \\1 个被选中的测试位置上的留出集 MLM 损失：BERT \\2 nats，一元基线（训练文本词频，无上下文）\\3；GPT 下一个词元的损失 \\4",
    ),
    (
        "distinct predictions over the blanks: BERT (\\d+), GPT (\\d+) \\(distinct answers: (\\d+)\\); BERT's most common: (.+)",
        "各空白上不同预测的个数：BERT \\1，GPT \\2（不同答案：\\3）；BERT 最常见的预测：\\4",
    ),
    (
        "validation sweep \\((\\d+) steps, the script's default sizes\\): BERT (\\{.*?\\}) -> (\\S+); GPT (\\{.*?\\}) -> (\\S+)",
        "验证集扫描（\\1 步，脚本的默认规模）：BERT \\2 -> \\3；GPT \\4 -> \\5",
    ),
    ("(copy|brackets) +e\\.g\\. (.+)", "\\1 例如 \\2"),
    (
        "(copy|brackets) +(bert - right-masked BERT|bert - gpt) +(.+) points \\(seeds ([\\d, ]+), paired bootstrap 95%\\)",
        "\\1 \\2  \\3 个百分点（种子 \\4，配对 bootstrap 95%）",
    ),
    (
        "brackets: answering with the nearest closing bracket \\(no counting\\) scores ([\\d.]+)%",
        "brackets：用最近的闭括号作答（不计数）得分 \\1%",
    ),
    (
        "measured (\\S+): all (\\d+) runs in (\\d+) minutes on 1 thread of a shared 2-core CPU",
        "测量于 \\1：全部 \\2 次运行在共享双核 CPU 的 1 个线程上共用 \\3 分钟",
    ),
    (
        "left-side models' final test loss: at most ([\\d.]+) nats above ln\\(number of answers\\), the least a model that cannot see the answer can reach",
        "只看左侧的模型的最终测试损失：至多比 ln(答案个数) 高 \\1 nats，这是看不到答案的模型所能达到的最低值",
    ),
    (
        "(\\d+)-layer, (\\d+)-wide BERT, (\\d+) training pairs, (\\d+) steps of (\\d+) = (\\d+) passes, learning rate ([\\d.]+); seeds (\\[.*?\\]) \\(the seed draws the pairs, the initialisation, the batches and the masks\\)",
        "\\1 层、宽 \\2 的 BERT，\\3 个训练句对，\\4 步、每步 \\5 个 = \\6 遍，学习率 \\7；种子 \\8（种子决定句对、初始化、批次和掩码）",
    ),
    (
        "seed (\\d+): final held-out MLM loss dynamic ([\\d.]+), static ([\\d.]+) \\(([-+\\d.]+)\\)",
        "种子 \\1：最终留出集 MLM 损失 动态 \\2，静态 \\3（\\4）",
    ),
    (
        "ALBERT vs Hugging Face: MLM logits max \\|difference\\| (\\S+), SOP logits (\\S+), hidden states (\\S+)",
        "ALBERT 对比 Hugging Face：MLM logit 最大 |差异| \\1，SOP logit \\2，隐藏状态 \\3",
    ),
    ("label 0 \\(in order\\): (.+)", "标签 0（顺序正确）：\\1"),
    ("label 1 \\(swapped\\): (.+)", "标签 1（顺序颠倒）：\\1"),
    # ch08
    ("largest difference of the logits: (\\S+)", "logit 的最大差异：\\1"),
    (
        "cached positions: (\\d+)  layers: (\\d+)  key tensor of a layer: (\\(.+\\))",
        "缓存的位置数：\\1  层数：\\2  一层的键张量：\\3",
    ),
    ("identical tokens: (\\w+)", "词元完全相同：\\1"),
    (
        "prompt (\\d+) tokens, context_length (\\d+): decode steps (\\d+) \\(= (\\d+) - (\\d+)\\), prefills (\\d+) \\(1 \\+ one per step past the window\\)",
        "提示 \\1 个词元，context_length \\2：解码 \\3 步（= \\4 - \\5），预填充 \\6 次（1 + 超出窗口后每步一次）",
    ),
    ("(\\[.*\\]) \\(query (\\d+) positions after the key\\)", "\\1（查询在键之后 \\2 个位置）"),
    # ch09
    ("largest difference: (\\S+)", "最大差异：\\1"),
    ("dense weights: ([\\d,]+) numbers; blocked scores: ([\\d,]+)", "稠密权重：\\1 个数；分块分数：\\2"),
    (
        "routing attention vs dense under its mask: (\\S+); pairs kept: (\\d+) of (\\d+)",
        "路由注意力对比同一掩码下的稠密注意力：\\1；保留的对数：\\3 中的 \\2",
    ),
    # ch10, ch11
    ("max \\|(d[qkv]) - autograd through F\\.sdpa\\| = (\\S+)", "max |\\1 - 经 F.sdpa 自动求导| = \\2"),
    ("no key at all -> output, lse +: (.+)", "完全没有键 -> 输出、lse：\\1"),
    (
        "(d[qkv]): max \\|ours - autograd through F\\.sdpa\\| = (\\S+), max \\|ours - chapter 10\\| = (\\S+)",
        "\\1：max |我们的 - 经 F.sdpa 自动求导| = \\2，max |我们的 - 第 10 章| = \\3",
    ),
    (
        "(\\d+) kernel runs counted; every count equals its formula: (\\w+)",
        "统计了 \\1 次核函数运行；每个计数都等于它的公式：\\2",
    ),
    ("interpreter: (.+)", "解释器：\\1"),
    # ch08: cross-layer KV sharing
    ("(MHA|GQA, 1 kv head|MHA \\+ sharing|GQA \\+ sharing)( +)([\\d.]+) GB", "\\1\\2\\3 GB"),
    # ch12
    (
        "flex vs reference: (\\S+), flex vs SDPA: (\\S+)",
        "FlexAttention 对比参考实现：\\1，FlexAttention 对比 SDPA：\\2",
    ),
    ("output vs chapter 10: (\\S+), lse: (\\S+)", "输出对比第 10 章：\\1，lse：\\2"),
    ("largest difference over the four steps: (\\S+)", "四步中的最大差异：\\1"),
    # ch14
    ("recurrent vs parallel: (\\S+)", "循环形式对比并行形式：\\1"),
    ("chunkwise vs parallel: (\\S+)", "分块形式对比并行形式：\\1"),
    ("state S (\\(.+?\\)) and z (\\(.+?\\)), whatever T is", "状态 S \\1 和 z \\2，与 T 无关"),
    ("linear attention, read at t = 1: (\\[.*\\])", "线性注意力，在 t = 1 读出：\\1"),
    ("delta rule, read at t = 1: +(\\[.*\\])", "增量规则，在 t = 1 读出：\\1"),
    ("C = (\\d+): DeltaNet (\\S+), Gated DeltaNet (\\S+)", "C = \\1：DeltaNet \\2，门控 DeltaNet \\3"),
    (
        "state-space form vs attention form: (\\S+); state h (\\(.+\\))",
        "状态空间形式对比注意力形式：\\1；状态 h \\2",
    ),
    (
        "(.+ 48 layers|hybrid 3 : 1 \\(Qwen3-Next\\)): (\\d+) MiB at T = (\\d+), ([\\d.]+) GiB at T = (\\d+)",
        "\\1：T = \\3 时 \\2 MiB，T = \\5 时 \\4 GiB",
    ),
    (
        "tiles skipped: (\\S+)%; eager output vs unmasked attention: (\\S+)",
        "跳过的分块：\\1%；即时执行的输出对比不加掩码的注意力：\\2",
    ),
    # ch13
    ("after the fork: tables (.+) \\| blocks in use: (\\d+)", "分叉之后：块表 \\1 | 使用中的块：\\2"),
    ("after step (\\d+): tables (.+) \\| blocks in use: (\\d+)", "第 \\1 步之后：块表 \\2 | 使用中的块：\\3"),
    ("largest difference from chapter 8's attend_with_cache: (\\S+)", "与第 8 章 attend_with_cache 的最大差异：\\1"),
    ("gather\\(0\\) equals chapter 8's cached keys: (True|False)", "gather(0) 等于第 8 章缓存的键：\\1"),
    (
        "three chunks of (\\d+), (\\d+), (\\d+) keys, merged: max \\|merged - F\\.sdpa\\| = (\\S+)",
        "\\1、\\2、\\3 个键的三个分块合并后：与 SDPA 的最大差异 = \\4",
    ),
    ("(\\d+) splits: max \\|split-KV - F\\.sdpa\\| = (\\S+)", "\\1 个分块：分块解码与 SDPA 的最大差异 = \\2"),
    ("contiguous: max \\|ring - F\\.sdpa\\| = (\\S+)", "连续切分：环形注意力与 SDPA 的最大差异 = \\1"),
    ("zigzag *: max \\|ring - F\\.sdpa\\| = (\\S+)", "之字形切分：环形注意力与 SDPA 的最大差异 = \\1"),
    (
        "row sums: (\\S+) to (\\S+) \\(below 1: the rest goes to the sink\\)",
        "行和：\\1 到 \\2（小于 1：其余部分归注意力汇聚）",
    ),
]
