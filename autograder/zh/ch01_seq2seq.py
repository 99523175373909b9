"""Chapter 1 (sequence to sequence) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``):
the labels of the checks of ``autograder/ch01_seq2seq.py`` (their docstrings, on one line), the names its comparisons
give the values (``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "<bos> 10 11 <eos> <pad> gives inputs <bos> 10 11 <eos> and outputs 10 11 <eos> <pad>": (
        "<bos> 10 11 <eos> <pad> 给出输入 <bos> 10 11 <eos> 和输出 10 11 <eos> <pad>"
    ),
    "mean cross-entropy over the 5 real tokens of targets (2, 4) with logits (2, 4, 6)": (
        "targets (2, 4) 中 5 个真实词元上的平均交叉熵，logits 为 (2, 4, 6)"
    ),
    "2-layer LSTM: packed batch of lengths [5, 2, 7, 1] gives each sentence's own states": (
        "两层 LSTM：长度为 [5, 2, 7, 1] 的打包批次给出每个句子自己的状态"
    ),
    "stops each sentence at its <eos>, pads after it, and ends when all are done": (
        "每个句子在它的 <eos> 处停止，之后填充，全部结束时停止解码"
    ),
    "feeds each prediction back as the next input": "把每一步的预测作为下一步的输入",
    # hidden checks
    "other batch sizes and lengths; T = 2; int32 ids keep their dtype": "其他批大小和长度；T = 2；int32 的 id 保持其 dtype",
    "logits at padded positions change nothing; other pad ids and sizes": "填充位置的 logits 不影响结果；其他填充 id 和尺寸",
    "float16 logits (a Colab GPU's dtype) with a wide spread: a finite float32 loss, as in float32": (
        "取值范围很大的 float16 logits（Colab GPU 的 dtype）：得到有限的 float32 损失，与 float32 时相同"
    ),
    "bidirectional GRU, sentences in increasing length order": "双向 GRU，句子按长度递增排列",
    "dropout on the embeddings (a 1-layer encoder has no other): off in eval mode, on in training mode": (
        "嵌入上的 dropout（单层编码器没有别的 dropout）：评估模式下关闭，训练模式下开启"
    ),
    "the dropout acts on the embeddings only: in training mode it changes the final states, and no output is 0": (
        "dropout 只作用于嵌入：训练模式下它改变最终状态，且没有输出为 0"
    ),
    "respects max_new_tokens when <eos> never comes": "<eos> 始终不出现时遵守 max_new_tokens",
    "uses the bos_id, eos_id and pad_id it is given, and stacks each step's attention in order": (
        "使用传入的 bos_id、eos_id 和 pad_id，并按顺序堆叠每一步的注意力"
    ),
    # hints
    "you summed the per-token losses; the loss is their mean over the real tokens.": (
        "你把每个词元的损失加起来了；损失应是它们在真实词元上的平均值。"
    ),
    "the padding positions are counted: leave them out of both the sum and the count (ignore_index=pad_id).": (
        "填充位置被计入了：求和和计数都要排除它们（ignore_index=pad_id）。"
    ),
    "the padding is left out of the sum but not of the count: divide by the number of real tokens.": (
        "求和排除了填充，但计数没有：应除以真实词元的个数。"
    ),
    "your RNN ran over the padding: pack the padded batch with pack_padded_sequence(..., enforce_sorted=False) so "
    "that it stops at each sentence's length.": (
        "你的 RNN 跑过了填充部分：用 pack_padded_sequence(..., enforce_sorted=False) 打包填充后的批次，"
        "让它在每个句子的长度处停止。"
    ),
}
