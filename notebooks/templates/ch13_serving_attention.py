# %% [markdown]
# # Chapter 13 — Attention at serving time (分页 KV 缓存, 分块解码, 环形注意力, 注意力汇聚): exercises
#
# You will write the five steps that rearrange chapter 10's exact attention for serving and for long sequences, in
# the order the book explains them:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `gather_kv(blocks, block_table, length)` — read a sequence through its block table (块表) | 2 |
# | 2 | `paged_attention_decode(q, k_blocks, v_blocks, block_tables, lengths)` — one decode step over a paged KV cache (分页 KV 缓存) | 3 |
# | 3 | `merge_attention_states(outputs, lses)` — merge partial attention by log-sum-exp (分块解码, flash-decoding) | 3 |
# | 4 | `ring_attention_step(o, lse, q, k, v, ...)` — one step of ring attention (环形注意力) | 3 |
# | 5 | `flash_attention_with_sink_forward(q, k, v, sink, ...)` — a learned sink (注意力汇聚) in the tiled loop | 3 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind: ragged lengths, blocks shared between sequences, empty chunks, a shard
# pair wholly masked, very large or very small log-sum-exps, and float16.
#
# Shapes: `q (B, H, T_q, d_k)`, `k (B, H, T_k, d_k)`, `v (B, H, T_k, d_v)`; a block pool is
# `(num_blocks, H_kv, page_size, d)`. **Mask polarity**, as everywhere in the course: True = may attend. An
# *attention state* is a pair `(o, lse)`: the output of attention over some keys and the log-sum-exp of its scores;
# a query that sees no key has `o = 0`, `lse = -inf` (chapter 10's convention).
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import functools
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from solutions.ch08_kv_cache import repeat_kv  # (B, H_kv, T, d) -> (B, H_kv · n_rep, T, d), head h reads h // n_rep
from solutions.ch10_flash_attention import block_mask  # the mask of one tile, True = may attend (or None)
from solutions.ch10_flash_attention import check_flash_inputs  # raises ValueError for inputs that don't fit
from solutions.ch13_serving_attention import PagedKVCache  # the block pool, block tables, fork, free
from solutions.ch13_serving_attention import attention_with_lse  # (o, lse) of q over one chunk of keys
from solutions.ch13_serving_attention import causal_work_per_rank  # (query, key) pairs per rank, causal
from solutions.ch13_serving_attention import shard_positions  # a rank's absolute positions
from solutions.ch13_serving_attention import shard_sequence, unshard_sequence  # cut along T, and back

torch.manual_seed(0)

# %% [markdown]
# ## Exercise 1 — the block table's gather (2 points)
#
# A paged KV cache (Kwon et al. 2023, PagedAttention) keeps every sequence's keys in fixed-size blocks of one pool,
# `blocks (num_blocks, H_kv, page_size, d)`. A sequence's **block table** lists its blocks in order: position `t`
# lives in slot `t % page_size` of block `block_table[t // page_size]`. Return the sequence's `length` positions
# in order, `(H_kv, length, d)` — what chapter 8's contiguous cache would hold.
#
# * The last block may be partly filled: `length` positions need `ceil(length / page_size)` blocks, and only
#   `length` positions are returned. Entries of the table past the last block are ignored.
# * Indexing the pool with a tensor of block ids gives `(n, H_kv, page_size, d)`: the head axis must come first
#   before blocks and slots are merged into one time axis.
# * Keep the pool's dtype; the table may be int64 or int32.

# %% exercise="gather_kv"

# %% [markdown]
# The cache itself is given: `PagedKVCache` takes a free block whenever a sequence's last block is full, shares
# blocks between a sequence and its `fork` (a common prompt, a beam), and copies a shared, partly-filled block
# before writing to it (copy-on-write).

# %%
cache = PagedKVCache(num_blocks=8, page_size=4, n_kv_heads=1, head_dim=2)
cache.allocate("prompt")
cache.append("prompt", torch.randn(1, 6, 2), torch.randn(1, 6, 2))
cache.fork("prompt", "beam")
print("blocks in use after the fork:", cache.blocks_in_use, "| tables:", cache.block_table("prompt").tolist(), cache.block_table("beam").tolist())
cache.append("beam", torch.randn(1, 1, 2), torch.randn(1, 1, 2))
print("after the beam's first token:", cache.blocks_in_use, "| tables:", cache.block_table("prompt").tolist(), cache.block_table("beam").tolist())
k = gather_kv(cache.k_blocks, cache.block_table("beam"), cache.length("beam"))
print("the beam's keys:", tuple(k.shape), "— the prompt's six, then its own:", torch.equal(k[:, :6], gather_kv(cache.k_blocks, cache.block_table("prompt"), 6)))

# %% [markdown]
# ## Exercise 2 — one decode step over a paged cache (3 points)
#
# A server decodes a batch of sequences of different lengths at once: sequence `b` has one query `q[b] (H, d_k)`
# and `lengths[b]` cached positions (its new token's key already appended), read through row `b` of
# `block_tables (B, max_blocks)`. Return `softmax(q_b K_b^T / sqrt(d_k)) V_b` for every sequence, `(B, H, d_v)`.
#
# * Query head `h` reads key/value head `h // (H / H_kv)` (grouped-query attention; chapter 8's `repeat_kv` on a
#   `(B, H_kv, T, d)` tensor).
# * Positions `t ≥ lengths[b]` — the rest of the last block, and the blocks the table's padding points at — hold
#   whatever was there: mask them.
# * A sequence of length 0 gets a zero output, not NaN. Accumulate in float32 for float16 inputs.

# %% exercise="paged_attention_decode"

# %% [markdown]
# Three sequences of different lengths, one step, against chapter 8's dense attention for each:

# %%
cache = PagedKVCache(num_blocks=32, page_size=8, n_kv_heads=2, head_dim=16)
for s, n in enumerate([30, 5, 17]):
    cache.allocate(s)
    cache.append(s, torch.randn(2, n, 16), torch.randn(2, n, 16))
block_tables, lengths = cache.batch([0, 1, 2])
q = torch.randn(3, 4, 16)
o = paged_attention_decode(q, cache.k_blocks, cache.v_blocks, block_tables, lengths)
for s in range(3):
    table, n = cache.block_table(s), cache.length(s)
    k, v = gather_kv(cache.k_blocks, table, n), gather_kv(cache.v_blocks, table, n)  # your exercise 1
    ref = F.scaled_dot_product_attention(q[s][None, :, None], k[None], v[None], enable_gqa=True)[0, :, 0]
    print(f"sequence {s}: length {int(lengths[s])}, largest difference {(o[s] - ref).abs().max().item():.1e}")

# %% [markdown]
# ## Exercise 3 — merging attention states (3 points)
#
# Attention over a set of keys can be computed in chunks: chunk `c` gives its state `(o_c, lse_c)` (its output,
# normalised over its own keys, and the log-sum-exp of its scores). The state of the union is
#
# $$\mathrm{lse} = \log \sum_c e^{\mathrm{lse}_c}, \qquad o = \sum_c e^{\mathrm{lse}_c - \mathrm{lse}}\, o_c$$
#
# (each chunk weighs its share of the whole softmax's denominator; FlashInfer's merge, flash-decoding's last step).
#
# * `outputs`: a list of `C` tensors `(..., T_q, d_v)`; `lses`: `C` tensors `(..., T_q)`. Return `(o, lse)`.
# * A chunk with `lse = -inf` (no key) weighs 0; where every chunk has `-inf`, return `o = 0`, `lse = -inf` — never
#   NaN. Log-sum-exps can be in the hundreds: never take `exp(lse_c)` unshifted.
# * Compute in float32 for float16 outputs; return `o` in the outputs' dtype and `lse` in float32 (float64 stays
#   float64).

# %% exercise="merge_attention_states"

# %% [markdown]
# Split-KV decoding (flash-decoding): one query row over a long cache, in chunks merged by your function — the same
# as one pass. On a GPU each chunk is one thread block, so that a batch-1 decode step still fills the device.

# %%
q, k, v = torch.randn(1, 8, 1, 64), torch.randn(1, 8, 1000, 64), torch.randn(1, 8, 1000, 64)
ref = F.scaled_dot_product_attention(q, k, v)
for num_splits in (1, 4, 16):
    states = [attention_with_lse(q, k_c, v_c) for k_c, v_c in zip(k.tensor_split(num_splits, dim=-2), v.tensor_split(num_splits, dim=-2))]
    o, lse = merge_attention_states([s[0] for s in states], [s[1] for s in states])
    print(f"{num_splits:2d} splits: largest difference {(o - ref).abs().max().item():.1e}")

# %% [markdown]
# ## Exercise 4 — one step of ring attention (3 points)
#
# Ring attention (Liu et al. 2023) shards a sequence of `T` positions over `P` processes. At step `s`, rank `r`
# holds its own queries and the keys and values of rank `source = (r - s) mod P`, then passes them on. One step:
# attend the rank's query shard to the visiting K/V shard and merge the result into the running state `(o, lse)`
# (start: `o = 0`, `lse = -inf`).
#
# * `T = world_size · T_shard`. The query rows sit at `shard_positions(T, world_size, rank, split)`, the key rows at
#   `shard_positions(T, world_size, source, split)` — not at `0 … T_shard - 1`. With `causal`, a query sees the
#   keys at its position or before: the mask of the *pair* of shards.
# * `attention_with_lse(q, k, v, causal=..., q_positions=..., k_positions=...)` gives the step's state;
#   `merge_attention_states` (yours) merges it. A pair wholly in the future leaves the state unchanged.
# * `split="contiguous"` gives rank `r` the `r`-th of `P` chunks; `split="zigzag"` gives it chunks `r` and
#   `2P - 1 - r` of `2P`.

# %% exercise="ring_attention_step"

# %% [markdown]
# The whole ring simulated in this process, both splits, against causal attention; and each rank's work under
# the causal mask — the zig-zag split balances it.

# %%
q, k, v = torch.randn(1, 2, 32, 8), torch.randn(1, 2, 32, 8), torch.randn(1, 2, 32, 8)
P = 4
for split in ("contiguous", "zigzag"):
    qs, ks, vs = (shard_sequence(t, P, split) for t in (q, k, v))
    outs = []
    for rank in range(P):
        o, lse = torch.zeros_like(qs[rank]), torch.full(qs[rank].shape[:-1], -math.inf)
        for step in range(P):
            source = (rank - step) % P
            o, lse = ring_attention_step(o, lse, qs[rank], ks[source], vs[source], rank=rank, source=source, world_size=P, causal=True, split=split)
        outs.append(o)
    o = unshard_sequence(outs, split)
    err = (o - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()
    print(f"{split:10s}: largest difference {err:.1e}; (query, key) pairs per rank: {causal_work_per_rank(32, P, split)}")

# %% [markdown]
# ## Exercise 5 — a learned sink in the tiled loop (3 points)
#
# gpt-oss (OpenAI 2025) gives each head a learned logit `sink[h]` that joins the softmax's denominator only:
# `softmax([s; sink])[:-1]`, so a head may put weight on no token. In chapter 10's tiled forward pass it is one more
# online-softmax step after the key blocks — a key with score `sink[h]` and a zero value:
#
# $$m' = \max(m_i, \mathrm{sink}_h), \qquad \ell' = e^{m_i - m'}\,\ell_i + e^{\mathrm{sink}_h - m'}, \qquad \tilde O' = e^{m_i - m'}\,\tilde O_i$$
#
# The loop over key blocks is written for you; write the sink's step, updating `m_i`, `l_i` and `o_i` (the given
# lines after it write `o = o_i / l_i` and `lse = m_i + log(l_i)`, which now includes the sink). `sink_h` is the
# sink shaped `(1, H, 1)`. With no key at all (`T_k = 0`, so `m_i = -inf`) every weight goes to the sink.

# %% exercise="flash_attention_with_sink_forward"

# %% [markdown]
# Against the softmax with the sink appended as one more column; and how much weight the sink takes:

# %%
q, k, v = torch.randn(1, 4, 20, 16), torch.randn(1, 4, 20, 16), torch.randn(1, 4, 20, 16)
sink = torch.tensor([-5.0, 0.0, 2.0, 5.0])
o, lse = flash_attention_with_sink_forward(q, k, v, sink, causal=True, block_q=8, block_k=8)
scores = (q @ k.transpose(-2, -1) / 4.0).masked_fill(~torch.ones(20, 20, dtype=torch.bool).tril(), -math.inf)
weights = torch.softmax(torch.cat([scores, sink[None, :, None, None].expand(1, 4, 20, 1)], dim=-1), dim=-1)
print("largest difference:", (o - weights[..., :-1] @ v).abs().max().item())
print("mean weight on the sink per head:", [round(w, 3) for w in weights[..., -1].mean(dim=(0, 2)).tolist()])

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch13_serving_attention")
