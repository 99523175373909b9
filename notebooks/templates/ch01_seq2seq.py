# %% [markdown]
# # Chapter 1 — Sequence to sequence learning (序列到序列学习): exercises
#
# You will write the four pieces of the encoder–decoder of Sutskever, Vinyals & Le (2014) that the book
# explains, in the same order:
#
# | # | exercise | points |
# |---|----------|--------|
# | 1 | `shift_for_teacher_forcing(tgt)` — decoder inputs and outputs (教师强制) | 1 |
# | 2 | `sequence_loss(logits, targets)` — cross-entropy that ignores padding (填充) | 2 |
# | 3 | `Encoder.forward(src, src_lens)` — an RNN over a packed, padded batch (编码器) | 3 |
# | 4 | `greedy_decode(model, src, src_lens)` — translate until `<eos>` (贪心解码) | 3 |
#
# Write your code where it says `# YOUR CODE HERE` (delete the `raise NotImplementedError()` line), then run the
# cell below it: it runs the visible checks and tells you what it expected and what you gave. The grader runs
# more (hidden) checks of the same kind, so make your code general.
#
# Special token ids: `<pad>` = 0, `<bos>` = 1, `<eos>` = 2. Batches are `(B, T)` int64 tensors, right-padded.
#
# Do not rename the functions or change their arguments: the grader calls them by name.

# %%
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from solutions.ch01_seq2seq import EncoderDecoder  # what greedy_decode needs of a model: encode, decode_step
from solutions.ch01_seq2seq import check_tokens  # raises ValueError for token batches of the wrong shape
from solutions.translation_data import BOS_ID, EOS_ID, PAD_ID

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("running on", device)

# %% [markdown]
# ## Exercise 1 — teacher forcing (1 point)
#
# A target row is `<bos> y1 … yn <eos>` followed by padding. During training the decoder reads the reference
# previous word: its inputs are the row without its last column, and at each position it must predict the
# next word — the row without its first column. Return both, each `(B, T-1)`.

# %% exercise="shift_for_teacher_forcing"

# %% [markdown]
# ## Exercise 2 — a loss that ignores padding (2 points)
#
# The mean of $-\log p(y_t)$ over the **real** target tokens. Positions whose target is `pad_id` must not
# count at all. `logits: (B, T, V)`, `targets: (B, T)`; `F.cross_entropy` wants `(N, V)` and `(N,)` and has an
# `ignore_index` argument.

# %% exercise="sequence_loss"

# %% [markdown]
# ## Exercise 3 — the encoder over a packed batch (3 points)
#
# Embed `src (B, S)`, then run `self.rnn` so that each sentence stops at its own length `src_lens[b]`:
# pack with `pack_padded_sequence(..., batch_first=True, enforce_sorted=False)` (lengths on the CPU), run the
# RNN, and unpack the outputs with `pad_packed_sequence(..., total_length=S)`. Return `(outputs, state)`:
# `outputs (B, S, D)` is zero at padding and `state` is what the RNN returns (a pair `(h, c)` for an LSTM).

# %% exercise="Encoder"

# %% [markdown]
# ## Exercise 4 — greedy decoding (3 points)
#
# `model.encode(src, src_lens)` gives a state; `model.decode_step(y_prev, state)` gives
# `(logits (B, V), new_state, attn)`, where `attn` is `None` or `(B, S)` weights. Start every sentence with
# `<bos>`, feed back the most probable word, and stop a sentence at its first `<eos>` (keep the `<eos>`,
# then emit `pad_id`). Stop the loop when all sentences are done or after `max_new_tokens` tokens. Return
# `(tokens (B, T_out), attn (B, T_out, S) or None)`.

# %% exercise="greedy_decode"

# %% [markdown]
# ## Try it
#
# An untrained encoder–decoder built from your pieces (and the chapter's decoder) translates nonsense — but
# the shapes must be right, and decoding must stop.

# %%
from solutions.ch01_seq2seq import Decoder


class TinySeq2Seq(nn.Module):
    def __init__(self, V_src=12, V_tgt=10, E=8, N=16):
        super().__init__()
        self.encoder = Encoder(V_src, E, N, num_layers=2)
        self.decoder = Decoder(V_tgt, E, N, num_layers=2)

    def encode(self, src, src_lens):
        return self.encoder(src, src_lens)[1]

    def decode_step(self, y_prev, state):
        logits, state = self.decoder.step(y_prev, state)
        return logits, state, None


model = TinySeq2Seq().to(device)
src = torch.tensor([[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]], device=device)
tokens, _ = greedy_decode(model, src, torch.tensor([4, 2], device=device), max_new_tokens=8)
print(tokens)
tgt = torch.tensor([[BOS_ID, 4, 5, EOS_ID], [BOS_ID, 6, EOS_ID, PAD_ID]], device=device)
dec_in, dec_out = shift_for_teacher_forcing(tgt)
logits, _ = model.decoder(dec_in, model.encode(src, torch.tensor([4, 2], device=device)))
print("loss of the untrained model:", sequence_loss(logits, dec_out).item(), "(log V =", torch.log(torch.tensor(10.0)).item(), ")")

# %% [markdown]
# ## Before you submit
#
# Save the notebook (Ctrl-S; in Colab it is read as it is now), then run the cell below. It reads the file the
# way the grader will — nothing is executed — and says whether it is still gradeable, what was repaired, and
# which exercises are not attempted yet. (Outside Colab and Jupyter: `python -m autograder selfcheck FILE`.)

# %%
from autograder.canonical import selfcheck_here

gradeable = selfcheck_here("ch01_seq2seq")
