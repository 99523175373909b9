# %% [markdown]
# # Chapter 5 — The Transformer: exercises
#
# You will write the pieces of the Transformer (Vaswani et al. 2017) that are new in this chapter; multi-head
# attention comes from chapter 4 and the feed-forward network is given.
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `PositionalEncoding` — sinusoidal positions (位置编码), §3.5 | 2 |
# | 2 | `TokenEmbedding` — embeddings scaled by $\sqrt{d_{model}}$, §3.4 | 1 |
# | 3 | `EncoderLayer` — self-attention + FFN, residual connections (残差连接) and layer norm (层归一化), post-LN and pre-LN | 3 |
# | 4 | `DecoderLayer` — causal self-attention, cross-attention over the encoder output, FFN | 3 |
#
# Your layers are compared with PyTorch's `nn.TransformerEncoderLayer` / `nn.TransformerDecoderLayer` after
# copying your weights into them. Masks: bool, **True = may attend**; padding masks are `(B, T)`, True at real
# tokens.

# %%
import math

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import attention_mask_from_lengths, causal_mask  # chapter 3
from solutions.ch04_multi_head_attention import MultiHeadAttention  # chapter 4
from solutions.ch05_transformer import PositionwiseFeedForward  # FFN(x) = max(0, xW1 + b1)W2 + b2, given

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — positional encoding (2 points)
#
# $$PE_{(pos,2i)} = \sin\!\left(pos/10000^{2i/d_{model}}\right),\qquad
#   PE_{(pos,2i+1)} = \cos\!\left(pos/10000^{2i/d_{model}}\right)$$
#
# Build the `(context_length, d_model)` table `pe` in `__init__`: sine on the **even** dims, cosine on the **odd**
# dims, interleaved (dims $2i$ and $2i+1$ share one frequency). Compute it in float64 (the angles reach a few
# thousand radians); the buffer is stored as float32. `forward` (given) adds it and applies dropout.

# %% exercise="PositionalEncoding"

# %% [markdown]
# ## Exercise 2 — scaled token embeddings (1 point)
#
# "In the embedding layers, we multiply those weights by $\sqrt{d_{model}}$" (§3.4).

# %% exercise="TokenEmbedding"

# %% [markdown]
# ## Exercise 3 — the encoder layer (3 points)
#
# Two sublayers, self-attention then the FFN, each wrapped in a residual connection and a LayerNorm:
#
# * post-LN (the paper, `norm_first=False`): $x \leftarrow \mathrm{LayerNorm}(x + \mathrm{Dropout}(\mathrm{Sublayer}(x)))$
# * pre-LN (`norm_first=True`): $x \leftarrow x + \mathrm{Dropout}(\mathrm{Sublayer}(\mathrm{LayerNorm}(x)))$
#
# Use `self.norm1`/`self.dropout1` around the attention and `self.norm2`/`self.dropout2` around the FFN.
# `mask` is broadcastable to `(B, H, T, T)`; pass it to the attention. `self.self_attn(q, k, v, mask)`
# returns `(output, weights)`.

# %% exercise="EncoderLayer"

# %% [markdown]
# ## Exercise 4 — the decoder layer (3 points)
#
# Three sublayers (norms `norm1..3`, dropouts `dropout1..3`):
#
# 1. masked self-attention: position $t$ may only see target positions $\le t$ — combine `causal_mask(T)` with
#    the target padding mask `tgt_attention_mask` (`(B, T)`, True at real tokens) when given;
# 2. cross-attention (交叉注意力): queries from the decoder, **keys and values from `memory`** (the encoder
#    output), masking the source padding `src_attention_mask` (`(B, S)`) when given;
# 3. the FFN.
#
# Post-LN or pre-LN exactly as in the encoder layer.

# %% exercise="DecoderLayer"

# %% [markdown]
# ## Try it
#
# One encoder layer and one decoder layer on random embeddings with positions added; changing the last target
# token must not change the earlier outputs (no future leak).

# %%
pos = PositionalEncoding(16, context_length=100).to(device)
enc = EncoderLayer(16, 4, 32).to(device)
dec = DecoderLayer(16, 4, 32).to(device)
src = pos(torch.randn(2, 7, 16, device=device))
tgt = pos(torch.randn(2, 5, 16, device=device))
src_pad = attention_mask_from_lengths(torch.tensor([7, 4], device=device))
memory = enc(src, src_pad[:, None, None, :])
out = dec(tgt, memory, None, src_pad)
tgt2 = tgt.clone()
tgt2[:, -1] += 1.0
out2 = dec(tgt2, memory, None, src_pad)
print("output", tuple(out.shape), "| earlier positions unchanged:", torch.allclose(out[:, :-1], out2[:, :-1], atol=1e-6))

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch05_transformer")
