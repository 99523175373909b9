# %% [markdown]
# # Chapter 10 — FlashAttention from scratch (分块, 在线 softmax, 重计算): exercises
#
# You will write the three steps that let FlashAttention compute exact attention without ever holding the
# `T_q × T_k` score matrix, in the order the book explains them:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `online_softmax_update(m, ell, x_block)` — the running max and running sum (在线 softmax) | 2 |
# | 2 | `flash_attention_forward(q, k, v, ...)` — the inner loop over key blocks (分块, tiling) | 4 |
# | 3 | `flash_attention_backward(do, q, k, v, o, lse, ...)` — gradients by recomputation (重计算) | 4 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind: other block sizes (including `1` and blocks larger than `T`), both masks
# at once, queries that may attend to no key, and very large scores.
#
# Shapes: `q (B, H, T_q, d_k)`, `k (B, H, T_k, d_k)`, `v (B, H, T_k, d_v)`; blocks of `block_q` queries and
# `block_k` keys, and `T` need not be a multiple of them. **Mask polarity**, as everywhere in the course: True =
# may attend. `causal=True` lets query `i` see keys `j ≤ i + T_k - T_q` (chapter 3's `causal_mask`);
# `attention_mask (B, T_k)` is True at real keys (chapter 3's `attention_mask_from_lengths`).
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import functools
import math

import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import attention_mask_from_lengths
from solutions.ch10_flash_attention import block_mask  # the mask of one tile, True = may attend (or None)
from solutions.ch10_flash_attention import check_flash_inputs  # raises ValueError for inputs that don't fit
from solutions.ch10_flash_attention import naive_softmax  # exp(x) / sum(exp(x)): the unstable formula

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## The problem with the formula as written
#
# $\mathrm{softmax}(x)_j = e^{x_j} / \sum_k e^{x_k}$ overflows as soon as a score exceeds about 88 in float32:

# %%
x = torch.tensor([0.0, 10.0, 100.0, 1000.0])
print("naive:", naive_softmax(x))
print("torch:", torch.softmax(x, dim=-1))

# %% [markdown]
# ## Exercise 1 — the online softmax update (2 points)
#
# Subtracting the maximum fixes it, but the maximum is known only after every score has been seen. The online
# softmax (Milakov & Gimelshein 2018) keeps a **running max** $m$ and a **running sum** $\ell$ of
# $e^{x - m}$, and folds in one block at a time:
#
# $$m' = \max\big(m, \max_j x_j\big), \qquad \ell' = \ell\, e^{m - m'} + \sum_j e^{x_j - m'}$$
#
# * `m`, `ell`: shape `(...)`; `x_block`: shape `(..., n)`. Return `(m', ell')`.
# * The start is `m = -inf`, `ell = 0`. A block whose entries are all `-inf` (masked scores) must leave
#   `m = -inf`, `ell = 0` — and no NaN: `exp(-inf - (-inf))` is NaN, so where `m'` is `-inf` shift by `0` instead.

# %% exercise="online_softmax_update"

# %% [markdown]
# Fold the scores in blocks of 3 and normalise at the end: the same as `torch.softmax`, and finite.

# %%
x = torch.randn(2, 10) * 300
m, ell = torch.full((2,), -math.inf), torch.zeros(2)
for start in range(0, 10, 3):
    m, ell = online_softmax_update(m, ell, x[:, start : start + 3])
ours = torch.exp(x - m[:, None]) / ell[:, None]
print("largest difference from torch.softmax:", (ours - torch.softmax(x, dim=-1)).abs().max().item())

# %% [markdown]
# ## Exercise 2 — the tiled forward pass (4 points)
#
# The outer loop over query blocks $Q_i$ is written for you; write its body, the loop over key blocks (Dao 2023,
# FlashAttention-2, algorithm 1). For each query block keep a running max `m_i`, running sum `l_i` and an
# *unnormalised* output `o_i` (start: `-inf`, `0`, `0`), then for each key block $K_j, V_j$:
#
# $$S_{ij} = Q_i K_j^\top / \sqrt{d_k} \ \text{(masked entries} = -\infty), \qquad m_i' = \max(m_i, \mathrm{rowmax}\,S_{ij}), \qquad \tilde P_{ij} = e^{S_{ij} - m_i'}$$
#
# $$\ell_i' = e^{m_i - m_i'}\,\ell_i + \mathrm{rowsum}\,\tilde P_{ij}, \qquad \tilde O_i' = e^{m_i - m_i'}\,\tilde O_i + \tilde P_{ij} V_j$$
#
# After the last key block write `o[:, :, q_start:q_end] = o_i / l_i` and `lse[:, :, q_start:q_end] = m_i + log(l_i)`
# (the log-sum-exp, LogSumExp, 对数求和指数, that the backward pass needs).
#
# * The last key block may be shorter: `k_end = min(k_start + block_k, T_k)`.
# * `tile_mask(q_start, q_end, k_start, k_end)` gives the tile's mask (or `None` when nothing is masked). Mask
#   **before** taking the max.
# * With `causal`, key blocks that lie entirely after the block's last query position (`q_end - 1 + offset`) are
#   never visited: stop the key loop at `min(T_k, q_end + offset)`.
# * A query that may attend to no key gets output 0 and `lse = -inf` — never NaN.

# %% exercise="flash_attention_forward"

# %% [markdown]
# Compare with PyTorch's fused kernel, with a causal and a padding mask, blocks that do not divide `T`:

# %%
q, k, v = torch.randn(2, 4, 100, 16), torch.randn(2, 4, 100, 16), torch.randn(2, 4, 100, 8)
am = attention_mask_from_lengths(torch.tensor([100, 70]), 100)
o, lse = flash_attention_forward(q, k, v, causal=True, attention_mask=am, block_q=32, block_k=24)
mask = torch.ones(100, 100, dtype=torch.bool).tril() & am[:, None, None, :]
ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
print("largest difference from F.scaled_dot_product_attention:", (o - ref).abs().max().item())

# %% [markdown]
# ## Exercise 3 — the backward pass by recomputation (4 points)
#
# The forward pass saved only `q, k, v, o` and `lse`. The backward pass recomputes each tile of probabilities
# exactly, $P_{ij} = e^{S_{ij} - L_i}$, and never stores more than a tile (Dao 2023, algorithm 2). The outer loop
# over key blocks $K_j, V_j$ and $D = \mathrm{rowsum}(dO \circ O)$ are written for you; for each key block, loop
# over the query blocks $Q_i$ and accumulate
#
# $$dV_j \mathrel{+}= P_{ij}^\top dO_i, \qquad dP_{ij} = dO_i V_j^\top, \qquad dS_{ij} = P_{ij} \circ (dP_{ij} - D_i)$$
#
# $$dQ_i \mathrel{+}= dS_{ij} K_j / \sqrt{d_k}, \qquad dK_j \mathrel{+}= dS_{ij}^\top Q_i / \sqrt{d_k}$$
#
# then store `dk_j`, `dv_j` into `dk`, `dv`. Use `lse_safe` (the log-sum-exp with `-inf` replaced by 0) and mask
# the recomputed scores as in the forward pass. With `causal`, the query blocks whose every query comes before
# key `k_start` (query `i` sees key `j` when `j ≤ i + offset`) can be skipped.

# %% exercise="flash_attention_backward"

# %% [markdown]
# Check the gradients against autograd through PyTorch's kernel:

# %%
q, k, v = (torch.randn(1, 2, 50, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
o, lse = flash_attention_forward(q, k, v, causal=True, block_q=16, block_k=16)
do = torch.randn_like(o)
dq, dk, dv = flash_attention_backward(do, q, k, v, o, lse, causal=True, block_q=16, block_k=16)
ref = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v), do)
for name, ours, theirs in zip(("dq", "dk", "dv"), (dq, dk, dv), ref):
    print(name, "largest difference:", (ours - theirs).abs().max().item())

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch10_flash_attention")
