# %% [markdown]
# # Chapter 4 — Multi-head attention (多头注意力): exercises
#
# You will build multi-head attention from chapter 3's `scaled_dot_product_attention`, in the order the book
# explains it:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `split_heads(x, n_heads)` — `(B, T, d_model) -> (B, H, T, d_k)` | 2 |
# | 2 | `merge_heads(x)` — `(B, H, T, d_k) -> (B, T, H·d_k)`, the paper's Concat | 1 |
# | 3 | `MultiHeadAttention` — project, split, attend per head, merge, `W^O` (Vaswani et al. 2017, §3.2.2) | 4 |
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)W^O,\qquad
# \mathrm{head}_i = \mathrm{Attention}(QW_i^Q, KW_i^K, VW_i^V)$$
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it. Your module is compared with PyTorch's own `nn.MultiheadAttention` after copying your weights
# into it; the grader runs more (hidden) checks of the same kind.
#
# **Mask polarity.** In this course a boolean mask is **True where a query may attend** (as
# `F.scaled_dot_product_attention`). `nn.MultiheadAttention` uses the opposite convention — the checks convert.

# %%
import math

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import (attention_mask_from_lengths, causal_mask,  # chapter 3
                                           scaled_dot_product_attention)

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — split the features into heads (2 points)
#
# Head $i$ works on features $i\,d_k, \dots, (i+1)\,d_k - 1$ of **every** token, where $d_k = d_{model}/h$.
# Reshape `(B, T, d_model)` to `(B, T, H, d_k)`, *then* swap the `T` and `H` axes. (A single reshape to
# `(B, H, T, d_k)` has the right shape and the wrong contents — and a model built on it may still train!)

# %% exercise="split_heads"

# %% [markdown]
# ## Exercise 2 — merge the heads back (1 point)
#
# The inverse: `(B, H, T, d_k) -> (B, T, H·d_k)`, token `t` holding `[head_1[t], …, head_H[t]]`.

# %% exercise="merge_heads"

# %%
x = torch.arange(2 * 3 * 4.0).reshape(1, 2, 12)  # one sequence, two tokens, d_model = 12
print(split_heads(x, 3)[0])  # 3 heads × 2 tokens × 4 features
print("round trip exact:", torch.equal(merge_heads(split_heads(x, 3)), x))

# %% [markdown]
# ## Exercise 3 — multi-head attention (4 points)
#
# `W_q, W_k, W_v, W_o` are `nn.Linear(d_model, d_model)`: `W_q` holds the $h$ matrices $W_i^Q$ side by side.
# In `forward`: project `query`, `key` and `value` (they may be different tensors — cross-attention), split
# each into heads, call `scaled_dot_product_attention` once for all heads (it accepts `(B, H, T, d_k)`), merge,
# apply `W_o`. Return `(output (B, T_q, d_model), weights (B, H, T_q, T_k))`. The `mask` is already
# broadcastable to `(B, H, T_q, T_k)`. (With `dropout > 0` in training mode, apply `self.dropout` to the
# weights before they multiply `v`, as `nn.MultiheadAttention` does.)
#
# It must work in half precision (float16 on a Colab GPU), whose largest value is 65 504. If you write the attention
# out yourself instead of calling `scaled_dot_product_attention`, divide `q` by $\sqrt{d_k}$ *before* the product, as
# in chapter 3: $QK^\top$ itself can pass 65 504 when the scaled scores do not.

# %% exercise="MultiHeadAttention"

# %% [markdown]
# ## Try it
#
# Four heads over a causal mask: each head has its own weight matrix.

# %%
mha = MultiHeadAttention(d_model=16, n_heads=4).to(device)
x = torch.randn(1, 6, 16, device=device)
out, weights = mha(x, x, x, causal_mask(6, device=device))
print("output", tuple(out.shape), "weights", tuple(weights.shape))
print(weights[0, :, -1].detach().cpu().numpy().round(2))  # the last token's weights, one row per head

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch04_multi_head_attention")
