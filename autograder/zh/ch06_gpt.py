"""Chapter 6 (GPT) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``): the labels of the
checks of ``autograder/ch06_gpt.py`` (their docstrings, on one line), the names its comparisons give the values
(``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "Block(d_model=16, n_heads=4) on x (2, 7, 16) is x + attn(LN1(x)) then + mlp(LN2(x)), causal": (
        "Block(d_model=16, n_heads=4) 作用于 x (2, 7, 16)：先 x + attn(LN1(x))，再 + mlp(LN2(x))，注意力是因果的"
    ),
    "output at position t does not change when tokens after t change": "位置 t 之后的词元改变时，位置 t 的输出不变",
    "the LM head and the token embedding are one Parameter": "语言模型输出头与词元嵌入是同一个 Parameter（权重共享）",
    "GPT(vocab 13, block 8, 2 layers, width 8) on idx (2, 6): logits = LN_f(blocks(wte + wpe)) @ wte^T": (
        "GPT（词表 13，上下文 8，2 层，宽度 8）作用于 idx (2, 6)：logits = LN_f(blocks(wte + wpe)) @ wte^T"
    ),
    "temperature=0 is greedy; runs past context_length with the context cropped and positions from 0": (
        "temperature=0 即贪心解码；生成长度超过 context_length 时裁剪上下文，位置从 0 开始"
    ),
    "top_k=3 samples only the 3 most likely tokens, in proportion to their probabilities": (
        "top_k=3 只从最可能的 3 个词元中按其概率比例采样"
    ),
    "temperature=0.5 divides the logits before the softmax: frequencies follow softmax(logits / 0.5)": (
        "temperature=0.5 在 softmax 之前除 logits：频率服从 softmax(logits / 0.5)"
    ),
    # hidden checks
    "other sizes (B=3, T=9, d_model=24, 3 heads), both attention paths": (
        "其他尺寸（B=3，T=9，d_model=24，3 个头），两条注意力路径都检查"
    ),
    "each dropout site on its own: the attention's (MLP silenced, both paths) and the MLP's (attention silenced)": (
        "逐个检查每处 dropout：注意力的（MLP 被静音，两条路径）和 MLP 的（注意力被静音）"
    ),
    "the layer norms' own eps (config.layer_norm_eps = 0.01, inputs of small variance)": (
        "层归一化使用自己的 eps（config.layer_norm_eps = 0.01，输入的方差很小）"
    ),
    "after .half() (a Colab GPU's dtype), both attention paths: float16 output, as in float32": (
        "调用 .half() 之后（Colab GPU 的 dtype），两条注意力路径：输出为 float16，与 float32 时一致"
    ),
    "uses explicit position_ids, other sizes; the head's gradient reaches the embedding": (
        "使用显式给出的 position_ids，其他尺寸；输出头的梯度能到达嵌入"
    ),
    "after model.half() (a Colab GPU's dtype): float16 logits, as in float32": (
        "调用 model.half() 之后（Colab GPU 的 dtype）：logits 为 float16，与 float32 时一致"
    ),
    "dropout (embeddings, attention, MLP) is off in eval mode and on in training mode": (
        "dropout（嵌入、注意力、MLP）在评估模式下关闭，在训练模式下开启"
    ),
    "the embeddings' dropout acts on their sum (blocks silenced): on the token part and on the position part": (
        "嵌入的 dropout 作用于它们的和（各块被静音）：词元部分和位置部分都受影响"
    ),
    "ln_f's own eps (config.layer_norm_eps = 0.001 on GPT-2's small initial embeddings)": (
        "ln_f 使用自己的 eps（config.layer_norm_eps = 0.001，作用于 GPT-2 很小的初始嵌入）"
    ),
    "position_ids of shape (B, T), a batch of one, a full window (T = context_length), a single token": (
        "形状为 (B, T) 的 position_ids，只有一个样本的批次，满窗口（T = context_length），单个词元"
    ),
    "top_p keeps the smallest most-likely set whose probability reaches p (the crossing token included)": (
        "top_p 保留概率之和达到 p 的最小的一组最可能词元（包括使和越过 p 的那个词元）"
    ),
    "top_k=1 is greedy, other k, top_k and top_p together, shuffled logits": (
        "top_k=1 即贪心解码，其他 k 值，top_k 与 top_p 同时使用，打乱顺序的 logits"
    ),
    "all randomness from `generator`: equal seeds give equal tokens; the global random state is untouched": (
        "所有随机性都来自 `generator`：相同的种子给出相同的词元；全局随机状态不受影响"
    ),
    "a one-token prompt grown to three times context_length, batch of 2": (
        "只有一个词元的提示生成到 context_length 的三倍长，批大小为 2"
    ),
    "a prompt longer than context_length, a batch of one, max_new_tokens=0 (the prompt back, unchanged)": (
        "比 context_length 更长的提示，只有一个样本的批次，max_new_tokens=0（原样返回提示）"
    ),
    "temperature=2 together with top_k=4: the kept tokens follow softmax(logits / 2)": (
        "temperature=2 与 top_k=4 同时使用：保留的词元服从 softmax(logits / 2)"
    ),
    # the values compared, and the hints
    "This is post-LN, LN(x + Sublayer(x)); GPT-2 is pre-LN: x + Sublayer(LN(x)).": (
        "这是后置归一化 LN(x + Sublayer(x))；GPT-2 用的是前置归一化：x + Sublayer(LN(x))。"
    ),
    "The attention is not causal: call self.attn(..., is_causal=True).": (
        "注意力不是因果的：应调用 self.attn(..., is_causal=True)。"
    ),
    "Changing tokens 4 and 5 changed the output at positions 0-3: the block looks into the future. Make the "
    "attention causal: self.attn(..., is_causal=True).": (
        "改变词元 4 和 5 改变了位置 0-3 的输出：这个块看到了未来。请让注意力成为因果的：self.attn(..., is_causal=True)。"
    ),
    "model.lm_head.weight should be the very same Parameter as model.wte.weight (weight tying): assign it, "
    "`self.lm_head.weight = self.wte.weight`; a copy (clone, nn.Parameter(...), .data copy) is two tensors that "
    "drift apart as soon as training starts.": (
        "model.lm_head.weight 应与 model.wte.weight 是同一个 Parameter（权重共享）：直接赋值，"
        "`self.lm_head.weight = self.wte.weight`；复制（clone、nn.Parameter(...)、复制 .data）得到的是两个张量，"
        "训练一开始它们就会各自变化。"
    ),
    "The final layer norm ln_f is missing (GPT-2 applies it after the last block).": (
        "缺少最终的层归一化 ln_f（GPT-2 在最后一个块之后使用它）。"
    ),
    "GPT should keep the attribute {name} created in __init__.": "GPT 应保留在 __init__ 中创建的属性 {name}。",
    "GPT should keep the config.n_layers = {n} blocks created in __init__ (model.h).": (
        "GPT 应保留在 __init__ 中创建的 config.n_layers = {n} 个块（model.h）。"
    ),
    "{what}: the set of tokens ever sampled": "{what}：采样到过的词元的集合",
    "generate should return (B, T0 + max_new_tokens) = ({n}, 2) tokens.": (
        "generate 应返回 (B, T0 + max_new_tokens) = ({n}, 2) 个词元。"
    ),
    "top_k=3: the three tokens should be drawn with probabilities {expected} (softmax over the kept logits); yours "
    "came out {got}.": "top_k=3：这三个词元应以概率 {expected} 被采样（对保留的 logits 做 softmax）；你的结果是 {got}。",
    "With temperature 0.5 the tokens should come with probabilities {expected}; yours came out {got}. Divide the "
    "logits by the temperature, then softmax.": (
        "温度为 0.5 时，各词元的概率应为 {expected}；你的结果是 {got}。应先把 logits 除以温度，再做 softmax。"
    ),
}
