# %% [markdown]
# # Chapter 8 — The KV cache (KV 缓存), GQA and MLA: exercises
#
# A decoder that generates token by token would recompute the keys and values of every earlier token at every
# step. The *key/value cache* keeps them; its size, `2 · n_layers · n_kv_heads · d_head · T · bytes`, is why
# multi-query (多查询注意力) and grouped-query attention (分组查询注意力) share key/value heads among query heads,
# and why DeepSeek-V2's multi-head latent attention (多头潜在注意力) caches a small latent instead.
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `repeat_kv` — one key/value head serves a group of neighbouring query heads | 2 |
# | 2 | `attend_with_cache` — cache the new keys/values, attend with a bottom-right causal mask | 4 |
# | 3 | `MultiHeadLatentAttention` — the latent down/up projections and what the cache keeps | 4 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it. The grader runs more (hidden) checks of the same kind.
#
# Imported below: `causal_mask(T_q, T_k)` and `scaled_dot_product_attention(q, k, v, mask) -> (output, weights)`
# (chapter 3; masks are True = may attend), `split_heads` / `merge_heads` (chapter 4), the chapter 6 GPT and its
# `generate`, and from this chapter's module the cache container `KVCache` (`cache.update(layer, k, v)` appends
# along the time axis and returns *all* keys and values of that layer; `cache.length(layer)`) and the rotary
# embedding `rope_angles`, `apply_rope`.

# %%
import time

import torch
from torch import nn

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
from solutions.ch04_multi_head_attention import merge_heads, split_heads
from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.ch08_kv_cache import KVCache, apply_rope, kv_cache_bytes, mla_cache_bytes, rope_angles

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — grouping keys and values (2 points)
#
# With `n_heads` query heads and `n_kv_heads` key/value heads, each key/value head is shared by
# `n_rep = n_heads // n_kv_heads` **neighbouring** query heads: query heads `0 … n_rep-1` use key/value head 0,
# the next `n_rep` use head 1, and so on (Ainslie et al. 2023). Turn `(B, H_kv, T, d)` into
# `(B, H_kv · n_rep, T, d)` in that order — what `torch.repeat_interleave(x, n_rep, dim=1)` does (try it with
# `expand` and `reshape`, which copy only once). `n_rep = 1` is ordinary multi-head attention.

# %% exercise="repeat_kv"

# %% [markdown]
# ## Exercise 2 — one attention step with the cache (4 points)
#
# `q` holds the queries of the `T_new` new tokens, `(B, H, T_new, d)`; `k`, `v` their keys and values with
# `H_kv` heads. Append `k`, `v` to layer `layer`'s cache and use **all** the keys and values the cache returns.
# The new tokens are the *last* `T_q` of the `T_k` positions, so query `i` may attend to keys
# `0 … T_k - T_q + i`: the causal mask is aligned bottom-right (`causal_mask(T_q, T_k)` does that). Repeat the
# key/value heads with your `repeat_kv`, attend with chapter 3's `scaled_dot_product_attention`, and return the
# per-head output `(B, H, T_new, d_v)`.

# %% exercise="attend_with_cache"

# %% [markdown]
# ### Try it: chapter 6's GPT with and without the cache
#
# The chapter's module wraps chapter 6's GPT so that chapter 6's own `generate` decodes with the cache
# (prefill once, then one token per step), attending with **your** `attend_with_cache`. The greedy tokens must be
# identical; the cached run is faster.

# %%
from solutions.ch08_kv_cache import CachedGPT

config = GPTConfig(vocab_size=96, context_length=256, n_layers=4, n_heads=4, d_model=128)
gpt = GPT(config).to(device).eval()
prompt = torch.randint(96, (1, 8), device=device)
outputs = {}
for name, model in (("no cache", gpt), ("KV cache", CachedGPT(gpt, attend=attend_with_cache))):
    t0 = time.perf_counter()
    outputs[name] = generate(model, prompt, 200, temperature=0.0)
    print(f"{name:9s} {200 / (time.perf_counter() - t0):7.0f} tokens/s")
print("identical tokens:", torch.equal(outputs["no cache"], outputs["KV cache"]))
d_head = config.d_model // config.n_heads
print(f"cache for 208 tokens: {kv_cache_bytes(config.n_layers, config.n_heads, d_head, 208):,} bytes (float32)")

# %% [markdown]
# ## Exercise 3 — multi-head latent attention (4 points)
#
# DeepSeek-V2 caches one latent vector per token instead of keys and values (DeepSeek-AI 2024, section 2.1):
#
# * down-projection and norm: `c_kv = kv_norm(W_dkv(x))`, shape `(B, T, d_c)`, viewed as one "head"
#   `(B, 1, T, d_c)`;
# * a small rotary key shared by all heads: `k_r = RoPE(W_kr(x))`, `(B, 1, T, d_rope)` — use
#   `apply_rope(..., angles, interleaved=True)` with the `angles` computed above the region;
# * cache **only these two**: `c_kv, k_r = cache.update(layer, c_kv, k_r)`;
# * up-projections of *all* cached latents: keys `W_uk(c_kv)` and values `W_uv(c_kv)`, split into heads;
#   each head's key is `[k_c ; k_r]` (the rotary part is the same for every head: `expand`);
# * attention of `q` (already built) with a bottom-right causal mask; chapter 3's function scales by
#   `1/sqrt(d_head + d_rope)`. Store the per-head output in `heads`.

# %% exercise="MultiHeadLatentAttention"

# %% [markdown]
# ### Bytes per token
#
# The cache per token for a model with 8 heads of width 64 in 4 layers, float16 (2 bytes per number):

# %%
for name, n in (
    ("MHA (8 kv heads)", kv_cache_bytes(4, 8, 64, 1, 2)),
    ("GQA (2 kv heads)", kv_cache_bytes(4, 2, 64, 1, 2)),
    ("MQA (1 kv head)", kv_cache_bytes(4, 1, 64, 1, 2)),
    ("MLA (d_c = 128, d_rope = 32)", mla_cache_bytes(4, 128, 32, 1, 2)),
):
    print(f"{name:30s} {n:6,d} bytes")

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch08_kv_cache")
