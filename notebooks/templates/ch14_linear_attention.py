# %% [markdown]
# # Chapter 14 — Linear attention (线性注意力) and hybrid models (混合架构): exercises
#
# Replace softmax's `exp(q·k)` by a product of feature maps (特征映射) `φ(q)·φ(k)` and causal attention becomes a
# recurrence over a fixed-size `d_k × d_v` state — chapter 1's recurrent network with a matrix for its hidden
# state (Katharopoulos et al. 2020). The delta rule (增量规则; DeltaNet, Schlag et al. 2021) corrects that state
# instead of only adding to it; gated DeltaNet (Yang et al. 2025) also lets it forget. Models such as Qwen3-Next
# use three such layers for every softmax-attention layer, so most of their layers keep a state that does not grow
# with the context.
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `linear_attention_recurrent` — one state update per token | 3 |
# | 2 | `linear_attention_chunkwise` — parallel inside a chunk, recurrent across chunks | 3 |
# | 3 | `gated_delta_rule_recurrent` — the gated delta rule | 3 |
# | 4 | `decode_state_bytes` — memory at decode time for a hybrid stack | 2 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it compares your answer with the papers' equations and tells you what it expected and what you
# gave. The grader runs more (hidden) checks of the same kind.
#
# Shapes everywhere: `q, k` are `(B, H, T, d_k)`, `v` is `(B, H, T, d_v)`, `beta` and `g` are `(B, H, T)`; a state
# `S` is `(B, H, d_k, d_v)` and is read as `o_t = Sᵀ q_t` (Yang et al. write the transpose; the numbers are the
# same). Work in the inputs' dtype and on their device.
#
# Imported below: the shape checks the functions start with (`_check_qkv`, `_check_gates`, `_check_state`,
# `_check_chunk_size`), `_features(q, k, feature_map)` (returns `φ(q), φ(k)`, or `q, k` when `feature_map` is
# None), the feature map `elu_feature_map` (φ = elu + 1), chapter 8's `kv_cache_bytes`, and this chapter's
# parallel form `linear_attention_parallel` to compare with.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import math
import time

import torch

from solutions.ch08_kv_cache import kv_cache_bytes
from solutions.ch14_linear_attention import (
    FeatureMap,
    _check_chunk_size,
    _check_gates,
    _check_qkv,
    _check_state,
    _features,
    elu_feature_map,
    linear_attention_parallel,
)

torch.manual_seed(0)
q, k, v = torch.randn(1, 1, 4, 2), torch.randn(1, 1, 4, 2), torch.randn(1, 1, 4, 3)
print(linear_attention_parallel(q, k, v))  # the masked T × T form: what the recurrence must reproduce

# %% [markdown]
# ## Exercise 1 — the recurrent form (3 points)
#
# Start from `S = 0` (`(B, H, d_k, d_v)`) and `z = 0` (`(B, H, d_k)`), or from `state = (S, z)` when one is given
# (the tokens before these). For each token `t = 0 … T-1`, with `φ = feature_map`:
#
# $$S \leftarrow S + \varphi(k_t)\, v_t^\top,\qquad z \leftarrow z + \varphi(k_t),\qquad
# o_t = \frac{S^\top \varphi(q_t)}{z^\top \varphi(q_t)}$$
#
# (without the division when `normalize=False`). The token itself is included: write first, then read. Return
# `(o, (S, z))` with `o` of shape `(B, H, T, d_v)` and the state after the last token.

# %% exercise="linear_attention_recurrent"

# %% [markdown]
# ## Exercise 2 — the chunkwise form (3 points)
#
# Cut the `T` positions into chunks of `chunk_size` tokens (the last one shorter when `chunk_size` does not divide
# `T`). For a chunk `[s, e)` with the state `(S, z)` of the tokens **before** `s`, and `Q_c = φ(q[s:e])`,
# `K_c = φ(k[s:e])`, `V_c = v[s:e]`:
#
# $$A = \operatorname{tril}(Q_c K_c^\top)\ \text{(diagonal included)},\qquad O_c = Q_c S + A V_c,\qquad
# \text{den}_c = Q_c z + A\mathbf{1}$$
#
# then `S += K_cᵀ V_c` and `z += K_cᵀ 1`. `O_c / den_c` is the chunk's output (`O_c` alone when
# `normalize=False`). Return `(o, (S, z))` as in exercise 1 — the same numbers, with `T / chunk_size` state
# updates instead of `T`.

# %% exercise="linear_attention_chunkwise"

# %% [markdown]
# ### Try it: the three forms against T
#
# The parallel form builds a `T × T` matrix; the recurrent form makes `T` small steps; the chunkwise form makes
# `T / 64` steps of `64 × 64` blocks. All three give the same output.

# %%
q, k, v = torch.randn(1, 4, 512, 32), torch.randn(1, 4, 512, 32), torch.randn(1, 4, 512, 32)
for name, run in [
    ("parallel", lambda: linear_attention_parallel(q, k, v)),
    ("recurrent", lambda: linear_attention_recurrent(q, k, v)[0]),
    ("chunkwise (64)", lambda: linear_attention_chunkwise(q, k, v, 64)[0]),
]:
    start = time.perf_counter()
    o = run()
    print(
        f"{name:15s} {1000 * (time.perf_counter() - start):7.1f} ms, max |o - parallel| = "
        f"{(o - linear_attention_parallel(q, k, v)).abs().max():.1e}"
    )

# %% [markdown]
# ## Exercise 3 — the gated delta rule (3 points)
#
# The state is a memory that maps keys to values; `Sᵀ k_t` is what it returns for `k_t`. For each token, with the
# decay `α_t = exp(g_t)` (skip it when `g` is None) and the learning rate `β_t`:
#
# $$S \leftarrow \alpha_t S,\qquad S \leftarrow S + \beta_t\, k_t \big(v_t - S^\top k_t\big)^\top,\qquad
# o_t = S^\top q_t$$
#
# — together `S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ` (Yang et al. 2025, eq. 10). There is no
# feature map and no normaliser; use the keys as they are given (the layer normalises them, not this function).
# Start from `state` when one is given, else from zeros; return `(o, S)`.

# %% exercise="gated_delta_rule_recurrent"

# %% [markdown]
# ### Try it: the delta rule overwrites, plain linear attention piles up
#
# Store the value 1 under a key, then the value −1 under the same key, and ask for it: the delta rule (β = 1)
# returns the last value; without the correction the two writes add up.

# %%
key = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2).expand(1, 1, 2, 2)
values = torch.tensor([1.0, -1.0]).view(1, 1, 2, 1)
_, S = gated_delta_rule_recurrent(key, key, values, torch.ones(1, 1, 2), None)
print(
    "delta rule recalls", S[0, 0].T @ key[0, 0, 0], "; plain sum recalls", (key[0, 0].T @ values[0, 0]).T @ key[0, 0, 0]
)

# %% [markdown]
# ## Exercise 4 — memory at decode time (2 points)
#
# Layer `i` (counting from 0) of the stack is softmax attention when `(i + 1) % full_attention_interval == 0`
# (every layer when it is 1, none when it is None) and linear attention otherwise. A softmax layer keeps chapter 8's
# key/value cache, `2 · n_kv_heads · d_head · T` numbers (use `kv_cache_bytes`); a linear layer keeps
# `n_linear_heads` states of `d_k × d_v` numbers, whatever `T`. Return the bytes one sequence holds, an `int`.

# %% exercise="decode_state_bytes"

# %% [markdown]
# ### Try it: Qwen3-Next's 3 : 1 hybrid against all softmax layers
#
# Qwen3-Next-80B-A3B has 48 layers, every fourth one softmax attention (2 key/value heads of width 256), the others
# Gated DeltaNet with 32 heads of `128 × 128` states.

# %%
qwen3_next = dict(n_kv_heads=2, d_head=256, n_linear_heads=32, d_k=128, d_v=128)
for T in (4096, 32768, 262144):
    hybrid = decode_state_bytes(48, T, full_attention_interval=4, **qwen3_next)
    softmax = decode_state_bytes(48, T, full_attention_interval=1, **qwen3_next)
    print(f"T = {T:6d}: hybrid {hybrid / 2**20:7.0f} MiB, all softmax {softmax / 2**20:7.0f} MiB")

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch14_linear_attention")
