"""Chapter 5 (the Transformer) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``): the
labels of the checks of ``autograder/ch05_transformer.py`` (their docstrings, on one line), the names its comparisons
give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    "PositionalEncoding(d_model=5): an odd width has 3 sine dims and 2 cosine dims (x = 0, T = 4)": (
        "PositionalEncoding(d_model=5)：奇数宽度有 3 个正弦维度和 2 个余弦维度（x = 0，T = 4）"
    ),
    # visible checks
    "PositionalEncoding(d_model=8) adds sin(pos/10000^(2i/8)) to even dims and cos to odd dims (x = 0, T = 6)": (
        "PositionalEncoding(d_model=8) 在偶数维上加 sin(pos/10000^(2i/8))，在奇数维上加 cos（x = 0，T = 6）"
    ),
    "TokenEmbedding(11, 6) looks tokens up and multiplies by sqrt(d_model) = sqrt(6)": (
        "TokenEmbedding(11, 6) 查出词元的嵌入，再乘以 sqrt(d_model) = sqrt(6)"
    ),
    "post-LN (the paper) with a key padding mask matches nn.TransformerEncoderLayer(norm_first=False)": (
        "后置归一化（论文的做法）加键的填充掩码：与 nn.TransformerEncoderLayer(norm_first=False) 一致"
    ),
    "pre-LN with a causal mask and GELU matches nn.TransformerEncoderLayer(norm_first=True)": (
        "前置归一化加因果掩码和 GELU：与 nn.TransformerEncoderLayer(norm_first=True) 一致"
    ),
    "post-LN, target (3, 5, 12), memory (3, 7, 12), source padding: matches nn.TransformerDecoderLayer": (
        "后置归一化，目标序列 (3, 5, 12)，memory (3, 7, 12)，源序列有填充：与 nn.TransformerDecoderLayer 一致"
    ),
    "no future leak: changing target tokens after position t leaves the output at positions <= t unchanged": (
        "不泄露未来：改变位置 t 之后的目标词元，位置 <= t 的输出保持不变"
    ),
    # hidden checks
    "adds the encoding to the input, for longer sequences and other widths (an odd d_model too)": (
        "把位置编码加到输入上，适用于更长的序列和其他宽度（包括奇数的 d_model）"
    ),
    "applies dropout to the sum in training mode only": "只在训练模式下对相加之和施加 dropout",
    "float16 x (a Colab GPU's dtype): the sum keeps x's dtype and values, with or without .half() on the module": (
        "float16 的 x（Colab GPU 的 dtype）：无论模块是否调用了 .half()，相加之和都保持 x 的 dtype 和数值"
    ),
    "the table has exactly context_length rows (its documented shape) and serves a sequence of that length": (
        "编码表恰好有 context_length 行（文档中给出的形状），并能用于这个长度的序列"
    ),
    "with padding_idx = 2 the <pad> embedding is zero and gets no gradient (nn.Embedding's padding_idx)": (
        "padding_idx = 2 时，<pad> 的嵌入为零且得不到梯度（nn.Embedding 的 padding_idx）"
    ),
    "BERT-style (post-LN, GELU, eps 1e-12) and GPT-style (pre-LN, GELU tanh, causal + padding) layers": (
        "BERT 式（后置归一化、GELU、eps 1e-12）和 GPT 式（前置归一化、GELU tanh、因果掩码加填充掩码）的层"
    ),
    "layer_norm_eps = 0.1, post-LN and pre-LN: the norms use the layer's epsilon (at 1e-5 it could not matter)": (
        "layer_norm_eps = 0.1，后置归一化和前置归一化：层归一化使用该层自己的 epsilon（取 1e-5 时看不出差别）"
    ),
    "dropout (attention, feed-forward, residual branches) is off in eval mode and on in training mode": (
        "dropout（注意力、前馈网络、残差分支）在评估模式下关闭，在训练模式下开启"
    ),
    "each sublayer's output has its own dropout (dropout1 after attention, dropout2 after the FFN), nothing else": (
        "每个子层的输出有它自己的 dropout（注意力之后是 dropout1，前馈网络之后是 dropout2），别处没有"
    ),
    "post-LN and pre-LN with target padding and source padding together": "后置归一化和前置归一化，目标序列和源序列同时有填充",
    "T = S without masks: keys and values of the cross-attention come from memory": (
        "T = S 且没有掩码：交叉注意力的键和值来自 memory"
    ),
    "target padding without a source mask (src_attention_mask=None), post-LN and pre-LN": (
        "目标序列有填充而没有源序列掩码（src_attention_mask=None），后置归一化和前置归一化"
    ),
    "layer_norm_eps = 0.1 and GELU, post-LN and pre-LN, with both paddings: the norms use the layer's epsilon": (
        "layer_norm_eps = 0.1 和 GELU，后置归一化和前置归一化，两种填充都有：层归一化使用该层自己的 epsilon"
    ),
    "float16 (a Colab GPU's dtype) with target and source padding: float16 results, as in float32": (
        "float16（Colab GPU 的 dtype），目标序列和源序列都有填充：结果为 float16，与 float32 时一致"
    ),
    "dropout (both attentions, feed-forward, residual branches) is off in eval mode and on in training mode": (
        "dropout（两个注意力、前馈网络、残差分支）在评估模式下关闭，在训练模式下开启"
    ),
    "each sublayer's output has its own dropout (self-attention, cross-attention, FFN), and nothing else": (
        "每个子层的输出有它自己的 dropout（自注意力、交叉注意力、前馈网络），别处没有"
    ),
    # the values compared, and the hints
    "EncoderLayer ({kind}) output": "EncoderLayer（{kind}）的输出",
    "DecoderLayer ({kind}) output": "DecoderLayer（{kind}）的输出",
    "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) on the even dims, PE(pos, 2i+1) = cos(same angle) on the odd.": (
        "偶数维上 PE(pos, 2i) = sin(pos / 10000^(2i/d_model))，奇数维上 PE(pos, 2i+1) = cos(同一角度)。"
    ),
    "Yours puts all sines first, then all cosines: interleave them (pe[:, 0::2], pe[:, 1::2]).": (
        "你的实现把所有正弦放在前面、所有余弦放在后面：应让它们交错排列（pe[:, 0::2]、pe[:, 1::2]）。"
    ),
    "look the tokens up with self.embedding(tokens), then multiply by sqrt(d_model) (Vaswani et al. 2017, §3.4).": (
        "用 self.embedding(tokens) 查出词元的嵌入，再乘以 sqrt(d_model)（Vaswani et al. 2017，§3.4）。"
    ),
    "Yours is the lookup without the scale.": "你的结果只查了嵌入，没有乘以缩放因子。",
    "Yours multiplies by d_model, not by its square root.": "你的实现乘的是 d_model，而不是它的平方根。",
    "your output is that of the layer without a mask: pass the mask on to self_attn.": (
        "你的输出是不带掩码的层的输出：要把掩码传给 self_attn。"
    ),
    "x + Sublayer(LayerNorm(x)) for both sublayers.": "两个子层都是 x + Sublayer(LayerNorm(x))。",
    "LayerNorm(x + Sublayer(x)) for both sublayers (the paper).": "两个子层都是 LayerNorm(x + Sublayer(x))（论文的做法）。",
    "causal self-attention (with the target padding), then cross-attention with queries from the decoder and "
    "keys/values from memory (with the source padding), then the FFN.": (
        "先做因果自注意力（带目标序列的填充掩码），再做交叉注意力：查询来自解码器，键和值来自 memory"
        "（带源序列的填充掩码），最后是前馈网络。"
    ),
    "Changing the target tokens after position {t} changed the output at positions <= {t}: position t may only see "
    "targets <= t: the self-attention's mask must be causal_mask(T) (True on and below the diagonal), combined with "
    "any padding mask by &.": (
        "改变位置 {t} 之后的目标词元，改变了位置 <= {t} 的输出：位置 t 只能看到 <= t 的目标词元：自注意力的掩码"
        "必须是 causal_mask(T)（对角线及其下方为 True），并用 & 与填充掩码组合。"
    ),
}
