# %% [markdown]
# # Chapter 2 — Additive attention (加性注意力): exercises
#
# You will write the three pieces of the attention step of Bahdanau, Cho & Bengio (2014), in the order the
# book explains them:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `additive_score(s_prev, W, v, U_h)` — the alignment model, appendix A.1.2 | 3 |
# | 2 | `masked_softmax(scores, mask)` — eq. (6) over real source words only | 3 |
# | 3 | `context_vector(alpha, h)` — eq. (5) | 2 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind, so make your code general: the batch size B, source length S, decoder
# size N, alignment size A and annotation size D can all differ.
#
# **Mask polarity.** Throughout the course a boolean mask is **True where the decoder may attend** (a real
# source word) and False at padding.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — the alignment model (3 points)
#
# Before writing target word $i$, the decoder scores every source annotation $h_j$ against its *previous*
# state $s_{i-1}$:
#
# $$e_{ij} = v_a^\top \tanh\left(W_a s_{i-1} + U_a h_j\right)$$
#
# * `s_prev: (B, N)`, `W: (A, N)`, `v: (A,)`, and `U_h: (B, S, A)` — the annotations already multiplied by
#   $U_a$ (they do not depend on $i$, so the model computes them once per sentence).
# * Return the scores `(B, S)`. Hint: `W_a s_{i-1}` is one `(A,)` vector per sentence; add it to every source
#   position with `unsqueeze` and broadcasting.

# %% exercise="additive_score"

# %% [markdown]
# ## Exercise 2 — softmax over real source words (3 points)
#
# $$\alpha_{ij} = \frac{\exp(e_{ij})}{\sum_{k\,\text{real}} \exp(e_{ik})}$$
#
# * `scores: (B, S)` float, `mask: (B, S)` bool (True at real words). Return `(B, S)` weights.
# * Padding must get weight exactly 0 and each row must sum to 1 over its real words. A row with *no* real
#   word must give all zeros — never NaN. (Hint: fill masked scores with `torch.finfo(scores.dtype).min`
#   rather than `-inf`, then zero the masked weights.)

# %% exercise="masked_softmax"

# %% [markdown]
# ## Exercise 3 — the context vector (2 points)
#
# $$c_i = \sum_j \alpha_{ij} h_j$$
#
# * `alpha: (B, S)`, `h: (B, S, D)`. Return `(B, D)`.

# %% exercise="context_vector"

# %% [markdown]
# ## Try it
#
# One attention step with random parameters: two sentences of 5 and 3 words (the second padded).

# %%
B, S, N, A, D = 2, 5, 6, 4, 8
h = torch.randn(B, S, D, device=device)
U, W, v = torch.randn(A, D, device=device), torch.randn(A, N, device=device), torch.randn(A, device=device)
s_prev = torch.randn(B, N, device=device)
mask = torch.arange(S, device=device)[None, :] < torch.tensor([5, 3], device=device)[:, None]
alpha = masked_softmax(additive_score(s_prev, W, v, h @ U.T), mask)
print("weights:\n", alpha.cpu().numpy().round(3))
print("context:", tuple(context_vector(alpha, h).shape))

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch02_bahdanau_attention")
