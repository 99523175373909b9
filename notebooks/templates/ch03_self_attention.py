# %% [markdown]
# # Chapter 3 — Self-attention (自注意力): exercises
#
# You will write the four pieces of single-head self-attention from the chapter, in the order the book
# explains them:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `scaled_dot_product_attention(q, k, v, mask)` — Vaswani et al. 2017, eq. 1 | 4 |
# | 2 | `causal_mask(T_q, T_k)` — the look-ahead mask (因果掩码) | 2 |
# | 3 | `attention_mask_from_lengths(lengths)` — the padding mask (填充掩码) | 2 |
# | 4 | `SelfAttention` — queries, keys and values from one sequence | 2 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind, so make your code general: any number of leading batch dimensions,
# `T_q ≠ T_k`, `d_v ≠ d_k`.
#
# **Mask polarity.** Throughout the course a boolean mask is **True where a query may attend** to a key,
# as in `torch.nn.functional.scaled_dot_product_attention`.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import math

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import check_qkv_shapes  # raises ValueError for shapes that don't fit

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — scaled dot-product attention (4 points)
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$$
#
# * `q: (..., T_q, d_k)`, `k: (..., T_k, d_k)`, `v: (..., T_k, d_v)`; `...` is any number of batch dims.
# * Return `(output, weights)` with shapes `(..., T_q, d_v)` and `(..., T_q, T_k)`.
# * Where `mask` is False the weight must be exactly 0, and each row must still sum to 1 over the keys it
#   may see. A query that may see *no* key gets zero weights and a zero output — never NaN. (Hint: fill masked
#   scores with `torch.finfo(scores.dtype).min` rather than `-inf`, and zero the masked weights after the
#   softmax.)
# * It must work in half precision (float16 on a Colab GPU), whose largest value is 65 504: divide `q` by
#   $\sqrt{d_k}$ *before* the product. $QK^\top$ itself can pass 65 504 when the scaled scores do not.

# %% exercise="scaled_dot_product_attention"

# %% [markdown]
# ## Exercise 2 — the causal mask (2 points)
#
# Query `i` may attend to key `j` only if `j` is not in its future. For `T_q = T_k` that is the lower
# triangle, diagonal included. When `T_k > T_q` the queries are the *last* `T_q` positions (this is what
# decoding with a key/value cache needs later in the course): query `i` sits at position `T_k - T_q + i`.
# Build it with `torch.arange` and a comparison, on the requested `device`.

# %% exercise="causal_mask"

# %% [markdown]
# ## Exercise 3 — the padding mask from lengths (2 points)
#
# A batch of sentences of different lengths is right-padded to a common length `T_k`. Return a `(B, T_k)` bool
# mask that is True at real tokens and False at padding (an `attention_mask`, as Hugging Face calls it;
# PyTorch's `key_padding_mask` argument is the opposite, True at padding).

# %% exercise="attention_mask_from_lengths"

# %% [markdown]
# ## Exercise 4 — a self-attention layer (2 points)
#
# $Q = XW^Q$, $K = XW^K$, $V = XW^V$, then your attention function. The projections are created for you in
# `__init__`; write `forward`.

# %% exercise="SelfAttention"

# %% [markdown]
# ## Try it
#
# Six tokens with a causal mask: each row of the weight matrix is one query; the upper triangle must be zero.

# %%
layer = SelfAttention(d_model=16, d_k=8).to(device)
x = torch.randn(1, 6, 16, device=device)
out, weights = layer(x, causal_mask(6, device=device))
print("output", tuple(out.shape), "weights", tuple(weights.shape))
print(weights[0].detach().cpu().numpy().round(2))

# %% [markdown]
# Compare with PyTorch's fused kernel on the same inputs (same mask polarity):

# %%
q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
mask = attention_mask_from_lengths(torch.tensor([7, 4]))[:, None, None, :]
ours, _ = scaled_dot_product_attention(q, k, v, mask)
theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("largest difference from F.scaled_dot_product_attention:", (ours - theirs).abs().max().item())

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch03_self_attention")
