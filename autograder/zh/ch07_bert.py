"""Chapter 7 (BERT) in Chinese, for a Chinese submission's feedback page (``autograder/wording.py``): the labels of
the checks of ``autograder/ch07_bert.py`` (their docstrings, on one line), the names its comparisons give the values
(``what``) and its hints, ``ZH = {English: Chinese}``."""

ZH = {
    # visible checks
    "special tokens never selected; labels = original id where selected, -100 elsewhere; the rest untouched": (
        "特殊词元永远不被选中；被选中处的标签为原词元 id，其他位置为 -100；其余部分保持不变"
    ),
    "15% of ordinary tokens selected; of those 80% [MASK], 10% random, 10% unchanged": (
        "普通词元中有 15% 被选中；其中 80% 换成 [MASK]，10% 换成随机词元，10% 保持不变"
    ),
    "LayerNorm(token + position + segment) for ids (2, 7), segments 0 then 1": (
        "对 ids (2, 7) 计算 LayerNorm(词元 + 位置 + 片段)，片段先为 0 后为 1"
    ),
    "without token_type_ids every token is in segment 0": "不给 token_type_ids 时，每个词元都属于片段 0",
    "LayerNorm(token + position + segment) in width E = 6, then the projection to d_model = 10; ids (2, 7)": (
        "在宽度 E = 6 中计算 LayerNorm(词元 + 位置 + 片段)，再投影到 d_model = 10；ids (2, 7)"
    ),
    # hidden checks
    "honours mlm_probability (0.3), spreads random replacements over the vocabulary": (
        "遵守 mlm_probability（0.3），随机替换的词元分布在整个词表上"
    ),
    "all randomness from `generator`: equal seeds give equal results; the global random state is untouched": (
        "所有随机性都来自 `generator`：相同的种子给出相同的结果；全局随机状态不受影响"
    ),
    "uses the given special_ids (not a hard-coded list) and the given mask_id": (
        "使用传入的 special_ids（而不是写死的列表）和传入的 mask_id"
    ),
    "random replacements are drawn uniformly from the vocabulary, not from the batch (a batch of two tokens)": (
        "随机替换的词元从词表中均匀抽取，而不是从批次中抽取（批次只由两种词元组成）"
    ),
    "each token is selected on its own (a Bernoulli draw), so the number selected varies from row to row": (
        "每个词元独立地被选中（一次伯努利抽样），所以每行被选中的个数各不相同"
    ),
    "input_ids of any shape: a 1-D sequence and a (2, 3, 200) batch keep their shape and bookkeeping": (
        "任意形状的 input_ids：一维序列和 (2, 3, 200) 的批次都保持形状，标签也都正确"
    ),
    "other sizes, random segments, BERT's eps 1e-12": "其他尺寸、随机片段、BERT 的 eps 1e-12",
    "dropout after the LayerNorm: off in eval mode, on in training mode": (
        "LayerNorm 之后的 dropout：评估模式下关闭，训练模式下开启"
    ),
    "after .half() (a Colab GPU's dtype), with and without segments: float16 results, as in float32": (
        "调用 .half() 之后（Colab GPU 的 dtype），有片段和无片段：结果为 float16，与 float32 时一致"
    ),
    "the dropout comes after the LayerNorm: in training mode each element is 0 or the eval value times 2": (
        "dropout 在 LayerNorm 之后：训练模式下每个元素要么是 0，要么是评估模式下的值乘以 2"
    ),
    "the LayerNorm's own eps (config.layer_norm_eps = 0.001, embeddings of small variance)": (
        "LayerNorm 使用自己的 eps（config.layer_norm_eps = 0.001，嵌入的方差很小）"
    ),
    "a batch of one with T = context_length, token_type_ids by keyword, a single token": (
        "只有一个样本、T = context_length 的批次，以关键字参数传入 token_type_ids，单个词元"
    ),
    "other sizes (E larger than d_model too), random segments": "其他尺寸（包括 E 大于 d_model 的情形），随机片段",
    "the dropout sits between the LayerNorm and the projection (projection set to [I; 0] plus a bias of 1)": (
        "dropout 位于 LayerNorm 与投影之间（投影设为 [I; 0]，偏置为 1）"
    ),
    # the values compared, and the hints
    "mask_tokens should return (inputs, labels).": "mask_tokens 应返回 (inputs, labels)。",
    "mask_tokens modified input_ids in place; work on new tensors.": "mask_tokens 原地修改了 input_ids；请在新张量上操作。",
    "{name} should be an int64 tensor shaped like input_ids {shape}.": (
        "{name} 应是与 input_ids {shape} 形状相同的 int64 张量。"
    ),
    "No position was selected (every label is -100).": "没有选中任何位置（所有标签都是 -100）。",
    "A special token ([CLS], [SEP], [PAD], [UNK] …) was selected: they must never be (set their selection "
    "probability to 0).": "选中了特殊词元（[CLS]、[SEP]、[PAD]、[UNK] ……）：它们永远不能被选中（把它们被选中的概率设为 0）。",
    "At selected positions the label must be the original token id.": "被选中位置的标签必须是原来的词元 id。",
    "A position that was not selected was changed: only selected positions may be corrupted (and every changed "
    "position must have a label, or the loss cannot learn from it).": (
        "一个没有被选中的位置被改动了：只有被选中的位置才能被破坏（而且每个被改动的位置都必须有标签，否则损失无法从中学习）。"
    ),
    "More than half of the positions carry a label: the loss must be taken only on the ~15% selected (set the "
    "labels of all other positions to -100).": (
        "超过一半的位置带有标签：损失只能在约 15% 被选中的位置上计算（把其他所有位置的标签设为 -100）。"
    ),
    "{rate} of the ordinary tokens were selected; expected 15%.": "普通词元中有 {rate} 被选中；应为 15%。",
    "Of the selected tokens {masked} became [MASK], {random} a random token and {kept} stayed; expected 80% / 10% / "
    "10% (Devlin et al. 2019, section 3.1).": (
        "被选中的词元中 {masked} 换成了 [MASK]，{random} 换成了随机词元，{kept} 保持不变；应为 80% / 10% / 10%"
        "（Devlin et al. 2019，第 3.1 节）。"
    ),
    "token_type_ids are ignored: add the segment embeddings.": "token_type_ids 被忽略了：要加上片段嵌入。",
    "The output has width E = embedding_size: project it to d_model with self.projection.": (
        "输出的宽度是 E = embedding_size：要用 self.projection 把它投影到 d_model。"
    ),
}
