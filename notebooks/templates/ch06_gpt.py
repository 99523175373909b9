# %% [markdown]
# # Chapter 6 — GPT (生成式预训练): exercises
#
# You will write the three pieces of a GPT-2-style language model (因果语言模型) from the chapter:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `Block` — a pre-LN, causal Transformer block | 3 |
# | 2 | `GPT` — embeddings, blocks, final layer norm, and an LM head tied to the token embedding | 3 |
# | 3 | `generate` — sampling with temperature, top-k and top-p, context cropped to `context_length` | 4 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it. The grader runs more (hidden) checks of the same kind.
#
# The parts you build on come from earlier chapters and are imported below: `FusedMultiHeadSelfAttention`
# (chapter 4: `attn(x, use_sdpa=..., is_causal=True)` returns `(output, weights)`; `is_causal=True` applies
# chapter 3's causal mask), `PositionwiseFeedForward` (chapter 5).

# %%
import math

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention
from solutions.ch05_transformer import PositionwiseFeedForward
from solutions.ch06_gpt import GPTConfig  # vocab_size, context_length, n_layers, n_heads, d_model, dropout, ...
from solutions.ch06_gpt import LanguageModel  # generate's model: context_length, model(idx, position_ids)
from solutions.training import count_parameters  # each distinct parameter once (used by GPT.num_parameters)

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — the block (3 points)
#
# GPT-2 puts the layer norm *before* each sub-layer (pre-LN) and keeps the residual stream clean:
#
# $$x \leftarrow x + \mathrm{Attn}(\mathrm{LN}_1(x)) \qquad x \leftarrow x + \mathrm{MLP}(\mathrm{LN}_2(x))$$
#
# The attention must be causal: position $t$ may attend to positions $\le t$ only. Ask for it with
# `is_causal=True` instead of building a mask: PyTorch's fused kernel then skips the future itself. Pass
# `use_sdpa=self.use_sdpa` to the attention too, and keep its first return value.

# %% exercise="Block"

# %% [markdown]
# ## Exercise 2 — the model (3 points)
#
# * In `__init__`, tie the LM head to the token embedding: the two must be **the same Parameter**, not a copy.
# * In `forward`, add token and position embeddings (`position_ids` default to `0 … T-1`), run the blocks, apply
#   the final layer norm `ln_f` (GPT-2 added it after the last block), and return the logits `(B, T, vocab)`.

# %% exercise="GPT"

# %% [markdown]
# ## Exercise 3 — generation (4 points)
#
# Each step: crop the context to the last `model.context_length` tokens, call `model(idx_cond, position_ids)` with
# positions `0 … T-1` *for that window* (the model was trained on windows that start at 0), take the last
# position's logits, and
#
# * `temperature == 0`: take the argmax (greedy);
# * otherwise divide the logits by the temperature (before the softmax), keep the `top_k` largest (set the rest
#   to `-inf`), then keep the smallest set of most likely tokens whose probability reaches `top_p` (the token
#   that crosses `top_p` stays), softmax, and draw with `torch.multinomial(..., generator=generator)`.

# %% exercise="generate"

# %% [markdown]
# ## Try it: a small GPT on Python's documentation
#
# A character-level model, two layers, a hundred steps — enough to see the loss fall below $\ln(\text{vocab})$
# and spaces and common words appear. (The book trains the chapter's full-size model.)

# %%
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text

text = python_docs_text()[:200_000]
tok = CharTokenizer.from_text(text)
data = torch.tensor(tok.encode(text))
model = GPT(GPTConfig(vocab_size=tok.vocab_size, context_length=32, n_layers=2, n_heads=2, d_model=64)).to(device)
print(f"{count_parameters(model):,} parameters; ln(vocab) = {math.log(tok.vocab_size):.2f}")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
g = torch.Generator().manual_seed(0)
for step in range(150):
    x, y = get_lm_batch(data, 32, 16, generator=g, device=device)
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0 or step == 149:
        print(f"step {step:3d}  loss {loss.item():.3f}")

# %%
prompt = torch.tensor([tok.encode("The ")], device=device)
model.eval()
for kw in (dict(temperature=0.0), dict(temperature=1.0, top_k=5), dict(temperature=0.8, top_p=0.9)):
    out = generate(model, prompt, 80, generator=torch.Generator(device=device).manual_seed(0), **kw)
    print(kw, repr(tok.decode(out[0].tolist())))

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch06_gpt")
