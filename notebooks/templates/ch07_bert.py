# %% [markdown]
# # Chapter 7 — BERT (掩码语言模型): exercises
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `mask_tokens` — BERT's masked-language-model corruption (15%, then 80/10/10) | 4 |
# | 2 | `BertEmbeddings` — token + position + segment embeddings, then LayerNorm | 3 |
# | 3 | `AlbertEmbeddings` — ALBERT's factorised embedding (因式分解嵌入): width E, then a projection to d_model | 3 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it. The grader runs more (hidden) checks of the same kind.

# %%
import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch07_bert import AlbertConfig, BertConfig  # vocab_size, context_length, d_model, embedding_size, ...

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — masking (4 points)
#
# Devlin et al. 2019, section 3.1: every token that is **not special** is *selected* with probability
# `mlm_probability` (0.15). Of the selected tokens, 80% are replaced by `[MASK]` (`mask_id`), 10% by a random
# token id in `[0, vocab_size)`, and 10% are left as they are. Return `(inputs, labels)`: `labels` holds the
# original id at selected positions and `-100` everywhere else, so that `F.cross_entropy(..., ignore_index=-100)`
# takes the loss on the selected positions only. Draw all randomness from `generator`; do not modify
# `input_ids` in place. `special` (a bool tensor, True at special tokens) is computed for you.

# %% exercise="mask_tokens"

# %% [markdown]
# ## Exercise 2 — the input embeddings (3 points)
#
# $$E = \mathrm{LayerNorm}\big(E_\text{token}[x_t] + E_\text{position}[t] + E_\text{segment}[s_t]\big)$$
#
# then dropout. Positions are `0 … T-1`; the segment (token type) is 0 for sentence A and 1 for sentence B.

# %% exercise="BertEmbeddings"

# %% [markdown]
# ## Exercise 3 — ALBERT's factorised embedding (3 points)
#
# ALBERT (Lan et al. 2020, section 3.1) keeps the three embedding tables in a small width $E$
# (`config.embedding_size`), sums and normalises there, and only then maps to `d_model` with one linear layer:
#
# $$E = \mathrm{LayerNorm}\big(E_\text{token}[x_t] + E_\text{position}[t] + E_\text{segment}[s_t]\big)\,W + b,
# \qquad E_\text{token} \in \mathbb{R}^{V\times E},\; W \in \mathbb{R}^{E\times d_\text{model}}$$
#
# Apply dropout after the LayerNorm (before the projection). The tables and `self.projection` are made for you in
# `__init__`; write `forward`. With $V = 30000$, $E = 128$, $d_\text{model} = 768$ the vocabulary costs
# $V E + E d_\text{model} \approx 3.9$ M parameters instead of BERT's $V d_\text{model} \approx 23$ M.

# %% exercise="AlbertEmbeddings"

# %% [markdown]
# ## Try it
#
# A word-level vocabulary from a few sentences of Python's documentation, and one corrupted batch. Count how
# many positions were selected, and what happened to them.

# %%
from solutions.text_data import python_docs_text, sentences

sents = sentences(python_docs_text())[:200]
words = sorted({w for s in sents for w in s.split()})
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
stoi = {w: i for i, w in enumerate(vocab)}
batch = [[2] + [stoi[w] for w in s.split()][:30] + [3] for s in sents]
T = max(map(len, batch))
ids = torch.tensor([b + [0] * (T - len(b)) for b in batch])
inputs, labels = mask_tokens(
    ids, mask_id=4, vocab_size=len(vocab), special_ids=range(5), generator=torch.Generator().manual_seed(0)
)
sel = labels != -100
print(
    f"{sel.sum().item()} of {(ids >= 5).sum().item()} ordinary tokens selected;",
    f"[MASK] {(inputs[sel] == 4).float().mean():.0%}, kept {(inputs[sel] == ids[sel]).float().mean():.0%}",
)
print(" ".join(vocab[i] for i in inputs[0].tolist() if i != 0))

# %%
emb = BertEmbeddings(BertConfig(vocab_size=len(vocab), context_length=T, d_model=32))
types = torch.zeros_like(ids)
types[:, T // 2 :] = 1
e = emb(ids, types)
print(tuple(e.shape), "mean", e.mean().item(), "std", e.std().item())

# %%
config = AlbertConfig(vocab_size=len(vocab), context_length=T, embedding_size=16, d_model=64)
albert_emb = AlbertEmbeddings(config)
print(
    tuple(albert_emb(ids, types).shape),
    "from",
    sum(p.numel() for p in albert_emb.parameters()),
    "parameters;",
    "BERT's embeddings at d_model = 64:",
    sum(
        p.numel() for p in BertEmbeddings(BertConfig(vocab_size=len(vocab), context_length=T, d_model=64)).parameters()
    ),
)

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch07_bert")
