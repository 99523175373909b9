# %% [markdown]
# # Chapter 9 — Sparse attention (稀疏注意力): exercises
#
# Full attention compares every query with every key: $T^2$ scores. You will build the pieces of the sparse
# patterns from the chapter — first as masks, then the sliding window as a computation that never holds a
# $T \times T$ tensor:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `sliding_window_mask(T, window, causal=...)` — the local window (滑动窗口注意力) | 2 |
# | 2 | `global_token_mask(mask, is_global, causal=...)` — add global tokens (全局注意力) | 2 |
# | 3 | `sliding_window_attention(q, k, v, window, ...)` — blocked window attention, $O(T\cdot w)$ memory | 4 |
# | 4 | `routing_mask(query_clusters, key_clusters, causal=...)` — routing attention's mask (路由注意力) | 2 |
# | 5 | `topk_block_mask(block_scores, n_selected, block_len, ...)` — NSA's top-$n$ block selection (块选择) | 3 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind.
#
# **Mask polarity.** Throughout the course a boolean mask is **True where a query may attend** to a key.
#
# **Window width.** `window` is one-sided: the farthest distance a query may look. Bidirectional:
# $|i - j| \le w$; causal: $0 \le i - j \le w$ (so $w + 1$ keys, the query included).
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import math

import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import causal_mask, check_qkv_shapes, scaled_dot_product_attention  # chapter 3

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — the sliding-window mask (2 points)
#
# Query $i$ may attend to key $j$ when $|i - j| \le w$; with `causal=True` also only when $j \le i$ (chapter 3's
# `causal_mask(T, device=device)` is imported for you). Build it with `torch.arange` and comparisons on the
# requested `device`; return a `(T, T)` bool tensor.

# %% exercise="sliding_window_mask"

# %% [markdown]
# ## Exercise 2 — global tokens (2 points)
#
# Longformer lets a few chosen tokens (a `[CLS]`, a question) attend to **every** token, and every token attend
# to **them**: the rows *and* the columns of the global tokens become True, on top of the base mask. `mask` is
# `(..., T, T)`, `is_global` is `(..., T)` (e.g. `(B, T)`: each sequence has its own global tokens). With
# `causal=True` the result must still never let a query see a later key.

# %% exercise="global_token_mask"

# %% [markdown]
# ## Exercise 3 — blocked sliding-window attention (4 points)
#
# Dense attention under `sliding_window_mask` is right but still builds $T \times T$ scores. Instead:
#
# 1. cut the (zero-padded) queries into `n_blocks = ceil(T / b)` blocks of `b` queries: `(..., n_blocks, b, d_k)`;
# 2. pad keys and values with `window` zeros in front (and, bidirectional, `window` behind, plus the queries'
#    padding), and take each block's **slab** of `S = b + window (+ window)` keys with
#    `tensor.unfold(-2, S, b)` — a view, `(..., n_blocks, d_k, S)`;
# 3. scores `(..., n_blocks, b, S)`, scaled by $1/\sqrt{d_k}$; inside the slab, key column `c` of block `n` is
#    position `n*b - window + c` and query row `r` is position `n*b + r`: keep the pairs in the band that are not
#    padding, softmax, and multiply by the value slab;
# 4. put the blocks back to `(..., T, d_v)`.
#
# The checks compare with dense attention under the window mask and look at the sizes of the tensors your code
# keeps for the backward pass: none may be $T \times T$.

# %% exercise="sliding_window_attention"

# %% [markdown]
# ## Exercise 4 — the routing mask (2 points)
#
# The Routing Transformer clusters queries and keys (online k-means) and lets a query attend only to the keys of
# its own cluster. Given the cluster of each query `(..., T_q)` and of each key `(..., T_k)`, return the
# `(..., T_q, T_k)` mask; with `causal=True` also hide future keys (chapter 3's `causal_mask(T_q, T_k)`: the
# queries are the last `T_q` positions).

# %% exercise="routing_mask"

# %% [markdown]
# ## Exercise 5 — top-$n$ block selection (3 points)
#
# Native sparse attention (原生稀疏注意力, NSA) cuts the keys into blocks of `block_len` positions and lets each
# query attend to only `n_selected` of them, chosen from a score per block (`block_scores`, `(..., T_q, n_blocks)`).
# Query `t` sits at position `t`, so its own block is `t // block_len`. Return the `(..., T_q, n_blocks)` bool mask
# (True = may attend to that block):
#
# 1. with `causal=True` only blocks `j <= t // block_len` are *visible* — a future block is never selected,
#    however high its score;
# 2. the first `n_initial` blocks and the `n_local` blocks ending with the query's own block are always selected;
# 3. the remaining places (up to `n_selected` in all, the forced ones included) go to the visible blocks with the
#    highest scores: `tensor.topk(..., dim=-1)`, after setting forced scores to `+inf` and invisible ones to `-inf`;
# 4. a query with fewer visible blocks than `n_selected` selects just those.

# %% exercise="topk_block_mask"

# %% [markdown]
# ## Try it
#
# Causal window attention computed both ways on a longer sequence: the same output, and the largest score tensor
# each way holds.

# %%
T, window = 1024, 16
q, k, v = (torch.randn(1, 2, T, 32, device=device) for _ in range(3))
blocked = sliding_window_attention(q, k, v, window)
dense, weights = scaled_dot_product_attention(q, k, v, sliding_window_mask(T, window, device=device))
print("largest difference:", (blocked - dense).abs().max().item())
print(f"dense scores: {weights.numel():,} numbers; blocked: about {2 * T * window * 2:,}")

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch09_sparse_attention")
