# %% [markdown]
# # Chapter 12 — Attention as a program: FlexAttention (可编程注意力): exercises
#
# PyTorch's FlexAttention (`torch.nn.attention.flex_attention`) computes
# $\mathrm{softmax}\big(\mathrm{mask}(\mathrm{score\_mod}(QK^\top/\sqrt{d_k}))\big)V$ from two small functions of
# *indices* that you write:
#
# * a **mask_mod** (掩码函数) `mask_mod(b, h, q_idx, kv_idx) -> bool`: may query `q_idx` of batch row `b`, head
#   `h` attend to key `kv_idx`? (True = may attend, as everywhere in the course) — chapter 9's boolean table
#   written as a rule;
# * a **score_mod** (分数修改函数) `score_mod(score, b, h, q_idx, kv_idx) -> score`: the scaled score, changed.
#
# Each exercise is a *factory*: it takes the pattern's settings and returns the mod.
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `sliding_window_with_globals(window, n_global, causal=...)` — window + global tokens | 3 |
# | 2 | `document_mask(document_ids, causal=...)` — packed sequences (打包序列) | 3 |
# | 3 | `prefix_lm_mask(prefix_lengths)` — prefix language model (前缀语言模型) | 2 |
# | 4 | `alibi_score_mod(n_heads)` — ALiBi's linear bias (线性偏置) | 3 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it evaluates your mod at every (query, key) pair, runs `flex_attention` with it, and tells you
# what it expected and what you gave. The grader runs more (hidden) checks of the same kind.
#
# **Indices are tensors.** FlexAttention calls a mod with 0-dimensional integer tensors (under `vmap`), so
# combine conditions with `&`, `|`, `~` or `torch.where` — Python's `and`, `or` and `if` on them fail. A Python
# `if` on the factory's own arguments (`if causal:`) is fine: it runs once, when the mod is built.
#
# **Eager mode only.** Everything here runs `flex_attention` without `torch.compile` (PyTorch warns that this is
# slow: it builds the whole score table, which is exactly what the checks need). Compiling takes about a minute on
# a CPU; the book page measures it.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import warnings

import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask, create_mask, flex_attention, or_masks

from solutions.ch12_flex_attention import MaskMod, ScoreMod  # the mods' types, for the signatures

warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.manual_seed(0)


def causal(b, h, q_idx, kv_idx):
    """The causal mask_mod: a query sees itself and the keys before it."""
    return q_idx >= kv_idx


print(create_mask(causal, 1, 1, 5, 5, device="cpu")[0, 0].int())  # the table a mask_mod stands for

# %% [markdown]
# ## Exercise 1 — a sliding window with global tokens (3 points)
#
# Return a mask_mod for chapter 9's sliding window of one-sided width `window` plus the first `n_global` positions
# as **global tokens** (全局注意力): query `q` may attend to key `kv` when
#
# * `|q - kv| <= window` (the window), **or**
# * `kv < n_global` (every token sees the global tokens), **or** `q < n_global` (a global token sees every token),
#
# and, with `causal=True`, **only** when `kv <= q` as well. Either write one function of tensor comparisons, or
# compose small ones: `or_masks(m1, m2, ...)` allows a pair when any of them does, `and_masks(...)` when all do.

# %% exercise="sliding_window_with_globals"

# %% [markdown]
# ## Exercise 2 — the document mask for packed sequences (3 points)
#
# Training packs several short documents into one row of `T` tokens; they must not attend to each other.
# `document_ids` is an integer `(B, T)` tensor: `document_ids[b, t]` is the document of token `t` in row `b`.
# Query `q` may attend to key `kv` when both are in the same document **of the same row `b`**, and (with
# `causal=True`) `kv <= q`. Your mod can index the captured tensor with the index tensors:
# `document_ids[b, q_idx]`.

# %% exercise="document_mask"

# %% [markdown]
# ## Exercise 3 — the prefix-LM mask (2 points)
#
# A prefix language model reads its first `prefix_lengths[b]` tokens (the prompt) bidirectionally and generates
# the rest causally: query `q` of row `b` may attend to key `kv` when `kv <= q` **or** `kv` lies in the prefix,
# `kv < prefix_lengths[b]`. `prefix_lengths` is an integer `(B,)` tensor (each row has its own).

# %% exercise="prefix_lm_mask"

# %% [markdown]
# ## Exercise 4 — ALiBi as a score_mod (3 points)
#
# ALiBi (Press et al. 2022) adds no position embeddings; it adds to each score a penalty proportional to the
# distance between query and key, with a different slope per head:
#
# $$ \mathrm{score} + m_h\,(kv - q), \qquad m_h = 2^{-8(h+1)/H}, \quad h = 0, \dots, H - 1 $$
#
# (for $H = 8$: $1/2, 1/4, \dots, 1/256$). For the keys a causal query sees ($kv \le q$) the bias is $\le 0$:
# zero for the query itself, more negative farther back. Return the `score_mod`. Compute the slope from `h`
# inside it (e.g. `torch.exp2(...)`), or keep a table of slopes and move it to `score.device` before indexing it
# with `h`. The checks look at the pairs a causal query sees.

# %% exercise="alibi_score_mod"

# %% [markdown]
# ## Try it
#
# Your mods together: packed documents with ALiBi, through `flex_attention` in eager mode, against attention
# written out with the same table. `create_block_mask` also tells how many 128 × 128 tiles a compiled kernel would
# skip for a longer sliding window with global tokens.

# %%
B, H, T, d = 2, 4, 64, 16
ids = torch.tensor([[0] * 20 + [1] * 30 + [2] * 14, [0] * 40 + [1] * 24])
q, k, v = (torch.randn(B, H, T, d) for _ in range(3))
mask_mod = document_mask(ids)
out = flex_attention(q, k, v, score_mod=alibi_score_mod(H), block_mask=create_block_mask(mask_mod, B, H, T, T, "cpu"))
table = create_mask(mask_mod, B, H, T, T, device="cpu")
slopes = torch.exp2(-8.0 * torch.arange(1, H + 1) / H)
bias = -slopes[:, None, None] * (torch.arange(T)[:, None] - torch.arange(T)[None, :])
scores = (q @ k.transpose(-2, -1) / d**0.5 + bias).masked_fill(~table, float("-inf"))
print("largest difference:", (out - torch.softmax(scores, -1) @ v).abs().max().item())
long_mask = create_block_mask(sliding_window_with_globals(128, 4), 1, 1, 2048, 2048, device="cpu")
print(f"T = 2048, window 128, 4 global tokens: {long_mask.sparsity():.1f}% of the tiles skipped")

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch12_flex_attention")
