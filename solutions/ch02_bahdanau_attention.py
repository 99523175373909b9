"""Chapter 2: jointly learning to align and translate (additive attention).

Reference: D. Bahdanau, K. Cho, Y. Bengio, "Neural Machine Translation by Jointly Learning to
Align and Translate", ICLR 2015 (arXiv:1409.0473).  Equation numbers refer to section 3 and
appendix A of that paper.

Instead of squeezing the source into one vector (chapter 1), the encoder keeps one *annotation*
h_j = [h_fwd_j ; h_bwd_j] per source word (bidirectional RNN, sec. 3.2), and before emitting
target word i the decoder computes

    e_ij     = v_a^T tanh(W_a s_{i-1} + U_a h_j)        alignment model, appendix A.1.2
    alpha_ij = exp(e_ij) / sum_k exp(e_ik)               eq. (6), over real source positions
    c_i      = sum_j alpha_ij h_j                         eq. (5)
    s_i      = GRU([E y_{i-1} ; c_i], s_{i-1})           eq. (4) / appendix A.2.2
    p(y_i | y_<i, x) = softmax(W_o tanh(L_o [s_i ; c_i ; E y_{i-1}]))

The alignment uses the *previous* decoder state s_{i-1} (as in the paper), so the attention for
word i is decided before the decoder state is updated with c_i.  Simplification: the paper's
output layer is a maxout layer over (s_{i-1}, E y_{i-1}, c_i); we use a tanh layer over
(s_i, c_i, E y_{i-1}) as in eq. (4) of the main text.

Reused from chapter 1: the packed :class:`~solutions.ch01_seq2seq.Encoder` (here as a
bidirectional GRU), the teacher-forcing shift, the loss, greedy decoding, training and evaluation.

Shape letters: B batch, S source length, T target length, E embedding size, N_e encoder hidden size
per direction, D = 2 N_e annotation size, N decoder hidden size, A alignment (attention) size.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from solutions.ch01_seq2seq import Encoder, check_tokens
from solutions.translation_data import PAD_ID


# ----------------------------------------------------------------------------------------------
# The three pieces of additive attention
# ----------------------------------------------------------------------------------------------
def additive_score(s_prev: torch.Tensor, W: torch.Tensor, v: torch.Tensor, U_h: torch.Tensor) -> torch.Tensor:
    """Alignment energies e_ij = v^T tanh(W s_{i-1} + U h_j) for one decoder step i, all j.

    Bahdanau et al. 2014, appendix A.1.2.  ``U h_j`` does not depend on i, so it is computed once
    per sentence and passed in as ``U_h`` (the paper notes the same pre-computation).

    Args:
        s_prev: ``(B, N)`` previous decoder state s_{i-1}.
        W: ``(A, N)`` weight W_a.
        v: ``(A,)`` weight vector v_a.
        U_h: ``(B, S, A)`` the projected annotations U_a h_j.
    Returns:
        ``(B, S)`` float scores e_ij (unnormalised, any real value), same dtype/device as inputs.
    Raises:
        ValueError: if the shapes do not fit together.
    """
    if s_prev.dim() != 2 or W.dim() != 2 or v.dim() != 1 or U_h.dim() != 3:
        raise ValueError(
            f"expected s_prev (B, N), W (A, N), v (A,), U_h (B, S, A); got {tuple(s_prev.shape)}, "
            f"{tuple(W.shape)}, {tuple(v.shape)}, {tuple(U_h.shape)}"
        )
    if (
        W.shape[1] != s_prev.shape[1]
        or W.shape[0] != v.shape[0]
        or U_h.shape[2] != v.shape[0]
        or U_h.shape[0] != s_prev.shape[0]
    ):
        raise ValueError(
            f"incompatible shapes s_prev {tuple(s_prev.shape)}, W {tuple(W.shape)}, v {tuple(v.shape)}, U_h {tuple(U_h.shape)}"
        )
    ### BEGIN SOLUTION
    W_s = s_prev @ W.T  # (B, N) @ (N, A) -> (B, A)
    hidden = torch.tanh(W_s.unsqueeze(1) + U_h)  # (B, 1, A) + (B, S, A) -> (B, S, A)
    scores = hidden @ v  # (B, S, A) @ (A,) -> (B, S)
    ### END SOLUTION
    return scores


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis that gives exactly zero weight where ``mask`` is False.

    Eq. (6) of Bahdanau et al. normalises over the source words; padding is not a word, so it must
    get no weight.  A row with no valid position at all returns all zeros (never NaN).

    Args:
        scores: ``(B, S)`` float energies.
        mask: ``(B, S)`` bool, True at real source positions.
    Returns:
        ``(B, S)`` weights in [0, 1] of ``scores``' dtype; each row sums to 1 (or to 0 if the row is
        fully masked).
    Raises:
        ValueError: if the shapes differ or ``mask`` is not bool.
    """
    if scores.shape != mask.shape or mask.dtype != torch.bool:
        raise ValueError(
            f"scores and a bool mask must have the same shape, got {tuple(scores.shape)} and "
            f"{tuple(mask.shape)} ({mask.dtype})"
        )
    ### BEGIN SOLUTION
    # a large finite negative (not -inf) keeps a fully masked row from computing -inf - (-inf) = NaN
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, S)
    weights = torch.softmax(scores, dim=-1) * mask  # (B, S); fully masked rows become all zero
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)
    ### END SOLUTION
    return weights


def context_vector(alpha: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Context c_i = sum_j alpha_ij h_j (Bahdanau et al. 2014, eq. 5).

    Args:
        alpha: ``(B, S)`` attention weights.
        h: ``(B, S, D)`` annotations.
    Returns:
        ``(B, D)`` context vectors.
    Raises:
        ValueError: if the batch or source dimensions differ.
    """
    if alpha.dim() != 2 or h.dim() != 3 or alpha.shape != h.shape[:2]:
        raise ValueError(f"alpha (B, S) and h (B, S, D) must match, got {tuple(alpha.shape)} and {tuple(h.shape)}")
    ### BEGIN SOLUTION
    c = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)  # (B, 1, S) @ (B, S, D) -> (B, 1, D) -> (B, D)
    ### END SOLUTION
    return c


class AdditiveAttention(nn.Module):
    """Additive ("Bahdanau") attention with parameters W_a (A x N), U_a (A x D), v_a (A).

    Use :meth:`project` once per sentence, then call the module once per decoder step.
    """

    def __init__(self, dec_dim: int, enc_dim: int, attn_dim: int):
        super().__init__()
        self.W = nn.Linear(dec_dim, attn_dim, bias=False)  # W_a
        self.U = nn.Linear(enc_dim, attn_dim, bias=False)  # U_a
        self.v = nn.Parameter(torch.empty(attn_dim).uniform_(-(attn_dim**-0.5), attn_dim**-0.5))  # v_a

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """``h (B, S, D)`` -> ``U_h (B, S, A)``."""
        return self.U(h)

    def forward(self, s_prev: torch.Tensor, h: torch.Tensor, U_h: torch.Tensor, mask: torch.Tensor):
        """``s_prev (B, N)``, ``h (B, S, D)``, ``U_h (B, S, A)``, ``mask (B, S)`` bool ->
        ``(c (B, D), alpha (B, S))``."""
        e = additive_score(s_prev, self.W.weight, self.v, U_h)  # (B, S)
        alpha = masked_softmax(e, mask)  # (B, S)
        return context_vector(alpha, h), alpha  # (B, D), (B, S)


# ----------------------------------------------------------------------------------------------
# The attention encoder-decoder ("RNNsearch")
# ----------------------------------------------------------------------------------------------
class AttentionSeq2Seq(nn.Module):
    """RNNsearch of Bahdanau et al. (2014): bidirectional GRU encoder + attentive GRU decoder.

    Implements the same interface as :class:`solutions.ch01_seq2seq.Seq2Seq`, so greedy decoding,
    training and evaluation from chapter 1 work unchanged; ``decode_step`` additionally returns the
    attention weights alpha_i of shape ``(B, S)``.

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        emb_dim: E; enc_hidden_size: N_e per direction; dec_hidden_size: N; attn_dim: A.
        dropout: on embeddings and before the output layer.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb_dim: int = 64,
        enc_hidden_size: int = 128,
        dec_hidden_size: int = 256,
        attn_dim: int = 128,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.config = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            emb_dim=emb_dim,
            enc_hidden_size=enc_hidden_size,
            dec_hidden_size=dec_hidden_size,
            attn_dim=attn_dim,
            dropout=dropout,
        )
        D = 2 * enc_hidden_size
        self.encoder = Encoder(
            src_vocab, emb_dim, enc_hidden_size, num_layers=1, cell="gru", bidirectional=True, dropout=dropout
        )
        self.init_state = nn.Linear(enc_hidden_size, dec_hidden_size)  # W_s: s_0 = tanh(W_s h_bwd_1)
        self.attention = AdditiveAttention(dec_hidden_size, D, attn_dim)
        self.embedding = nn.Embedding(tgt_vocab, emb_dim, padding_idx=PAD_ID)
        self.cell = nn.GRUCell(emb_dim + D, dec_hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.pre_out = nn.Linear(dec_hidden_size + D + emb_dim, dec_hidden_size)
        self.out = nn.Linear(dec_hidden_size, tgt_vocab)

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> dict:
        """Annotations and initial decoder state.

        Returns a dict with ``h (B, S, D)``, ``U_h (B, S, A)``, ``mask (B, S)`` bool (True at real
        tokens) and ``s (B, N)`` = s_0 = tanh(W_s h_bwd_1) (appendix A.2.2: the backward RNN's state
        after reading the whole source, ending at the first word).
        """
        h, h_n = self.encoder(src, src_lens)  # (B, S, D), (2, B, N_e): [forward final, backward final]
        mask = torch.arange(src.shape[1], device=src.device).unsqueeze(0) < src_lens.to(src.device).unsqueeze(
            1
        )  # (B, S)
        s0 = torch.tanh(self.init_state(h_n[-1]))  # backward direction's final state (B, N_e) -> (B, N)
        return {"h": h, "U_h": self.attention.project(h), "mask": mask, "s": s0}

    def decode_step(self, y_prev: torch.Tensor, state: dict):
        """One decoder step: ``y_prev (B,)`` ids -> ``(logits (B, V), new state, alpha (B, S))``."""
        emb = self.dropout(self.embedding(y_prev))  # (B, E)
        c, alpha = self.attention(state["s"], state["h"], state["U_h"], state["mask"])  # uses s_{i-1}: (B, D), (B, S)
        s = self.cell(torch.cat([emb, c], dim=-1), state["s"])  # (B, E + D) -> (B, N)
        t = torch.tanh(self.pre_out(self.dropout(torch.cat([s, c, emb], dim=-1))))  # (B, N + D + E) -> (B, N)
        logits = self.out(t)  # (B, V)
        return logits, {**state, "s": s}, alpha

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor, dec_in: torch.Tensor, return_attention: bool = False):
        """Teacher-forced logits ``(B, T, V)`` (and attention ``(B, T, S)`` if asked)."""
        check_tokens("dec_in", dec_in)
        state = self.encode(src, src_lens)
        steps, alphas = [], []
        for t in range(dec_in.shape[1]):
            step_logits, state, alpha = self.decode_step(dec_in[:, t], state)  # (B, V), _, (B, S)
            steps.append(step_logits)
            alphas.append(alpha)
        logits = torch.stack(steps, dim=1)  # (B, T, V)
        if return_attention:
            return logits, torch.stack(alphas, dim=1)  # (B, T, S)
        return logits
