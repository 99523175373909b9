"""Chapter 1: sequence to sequence learning with RNN encoder-decoders.

Reference: I. Sutskever, O. Vinyals, Q. V. Le, "Sequence to Sequence Learning with Neural
Networks", NeurIPS 2014 (arXiv:1409.3215).  Section numbers below refer to that paper.

The model (section 2): an encoder LSTM reads the source x_1..x_S (ending in <eos>) and its final
hidden and cell states -- one fixed-size vector per layer, whatever the source length -- initialise
a decoder LSTM that models p(y_1..y_T | x) = prod_t p(y_t | v, y_1..y_{t-1}).  That fixed-size
summary ``v`` is the bottleneck that chapter 2 (Bahdanau attention) removes.

Before the model, the recurrence itself: an LSTM cell written from its equations (:class:`LSTMCell`,
Hochreiter & Schmidhuber 1997 with the forget gate of Gers et al. 2000) and the measured vanishing gradient
(:func:`gradient_norm_by_distance`).

Also here, and reused by chapter 2 (and by later chapters where it fits):
  * packing of padded batches for the encoder (:class:`Encoder`),
  * the teacher-forcing shift (:func:`shift_for_teacher_forcing`) and the padding-aware loss
    (:func:`sequence_loss`),
  * model-agnostic greedy decoding (:func:`greedy_decode`), translation of a split and BLEU / exact match
    by source length (:func:`evaluate_by_length`).
The training loop, its teacher-forced recipe (:func:`solutions.training.train_seq2seq`) and checkpoints live in
:mod:`solutions.training`.

Any model used with those helpers implements (:class:`EncoderDecoder`)
  ``encode(src, src_lens) -> state`` and ``decode_step(y_prev, state) -> (logits, state, attn)``
where ``attn`` is ``None`` (no attention) or the ``(B, S)`` attention weights of that step, and
``forward(src, src_lens, dec_in) -> logits (B, T, V)`` for teacher-forced training.

Shape letters: B batch, S source length, T target length, E embedding size, N hidden size (``hidden_size``),
L number of layers, V vocabulary size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from solutions.translation_data import BOS_ID, EOS_ID, PAD_ID, EncodedPair, Vocab, iterate_batches


# ----------------------------------------------------------------------------------------------
# Small helpers
# ----------------------------------------------------------------------------------------------
def check_tokens(name: str, x: torch.Tensor, lens: torch.Tensor | None = None) -> None:
    """Raise ValueError unless ``x`` is a ``(B, T)`` integer tensor (and ``lens`` a matching
    ``(B,)`` vector with 1 <= lens <= T)."""
    if x.dim() != 2 or x.dtype not in (torch.long, torch.int32, torch.int64):
        raise ValueError(f"{name} must be a (B, T) integer tensor, got shape {tuple(x.shape)} dtype {x.dtype}")
    if lens is not None:
        if lens.shape != (x.shape[0],):
            raise ValueError(
                f"{name}_lens must have shape ({x.shape[0]},) to match {name} {tuple(x.shape)}, got {tuple(lens.shape)}"
            )
        if len(lens) and (int(lens.min()) < 1 or int(lens.max()) > x.shape[1]):
            raise ValueError(
                f"{name}_lens must lie in [1, {x.shape[1]}], got min {int(lens.min())} max {int(lens.max())}"
            )


def reverse_padded(x: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """Reverse the first ``lens[b]`` tokens of every row, leaving the padding in place.

    Sutskever et al. 2014, section 3.3: reading the source backwards ("c b a" for "a b c")
    puts the first source words next to the first target words, which they found made
    optimisation much easier.  The final <eos> is kept last so the encoder still sees it last.

    Args:
        x: ``(B, S)`` integer token ids, right-padded.
        lens: ``(B,)`` integer valid lengths, each including the trailing <eos>.
    Returns:
        ``(B, S)`` tensor on ``x``'s device: row b is ``x[b, lens[b]-2::-1], <eos>, pad...``.
    Raises:
        ValueError: on mismatched shapes.
    """
    check_tokens("x", x, lens)
    B, S = x.shape
    pos = torch.arange(S, device=x.device).unsqueeze(0).expand(B, S)  # (B, S)
    n = (lens.to(x.device) - 1).unsqueeze(1)  # (B, 1) tokens before <eos>
    # position p < n reads from n-1-p; <eos> (p = n) and padding (p > n) stay where they are
    src_pos = torch.where(pos < n, n - 1 - pos, pos)  # (B, S)
    return x.gather(1, src_pos)


# ----------------------------------------------------------------------------------------------
# Recurrence and the LSTM cell (循环神经网络, 长短期记忆网络)
# ----------------------------------------------------------------------------------------------
class LSTMCell(nn.Module):
    r"""One step of a long short-term memory cell, written from its equations.

    Hochreiter & Schmidhuber 1997 (input gate, output gate, the cell state as a "constant error
    carousel") with the forget gate of Gers et al. 2000, in the form ``torch.nn.LSTMCell`` computes::

        i_t = sigmoid(W_i x_t + b_i + U_i h_{t-1} + c_i)      input gate  (输入门)
        f_t = sigmoid(W_f x_t + b_f + U_f h_{t-1} + c_f)      forget gate (遗忘门), Gers et al. 2000
        g_t = tanh   (W_g x_t + b_g + U_g h_{t-1} + c_g)      candidate cell input
        o_t = sigmoid(W_o x_t + b_o + U_o h_{t-1} + c_o)      output gate (输出门)
        c_t = f_t * c_{t-1} + i_t * g_t                       cell state: a gated sum, no squashing
        h_t = o_t * tanh(c_t)

    The parameters have ``nn.LSTMCell``'s names, shapes and gate order (i, f, g, o stacked along the first
    axis), so ``cell.load_state_dict(torch_cell.state_dict())`` gives the same function:
    ``weight_ih`` ``(4N, E)`` = [W_i; W_f; W_g; W_o], ``weight_hh`` ``(4N, N)`` = [U_i; ...], ``bias_ih`` and
    ``bias_hh`` ``(4N,)``.

    Args:
        input_size: E, the width of x_t.
        hidden_size: N, the width of h_t and c_t.
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        if input_size < 1 or hidden_size < 1:
            raise ValueError(f"input_size and hidden_size must be >= 1, got {input_size}, {hidden_size}")
        self.input_size, self.hidden_size = input_size, hidden_size
        bound = hidden_size**-0.5  # nn.LSTMCell's initialisation: U(-1/sqrt(N), 1/sqrt(N))
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size).uniform_(-bound, bound))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden_size).uniform_(-bound, bound))
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden_size).uniform_(-bound, bound))

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One time step.

        Args:
            x: ``(B, E)`` float input x_t.
            state: ``(h_{t-1}, c_{t-1})``, each ``(B, N)``, same dtype and device as ``x``; zeros when None.
        Returns:
            ``(h_t, c_t)``, each ``(B, N)``.
        Raises:
            ValueError: if ``x`` is not ``(B, E)`` or the state is not a pair of ``(B, N)`` tensors.
        """
        if x.dim() != 2 or x.shape[1] != self.input_size:
            raise ValueError(f"x must be (B, E) = (B, {self.input_size}), got {tuple(x.shape)}")
        B, N = x.shape[0], self.hidden_size
        if state is None:
            zeros = x.new_zeros(B, N)
            state = (zeros, zeros)
        h_prev, c_prev = state
        if h_prev.shape != (B, N) or c_prev.shape != (B, N):
            raise ValueError(
                f"state must be two (B, N) = ({B}, {N}) tensors, got {tuple(h_prev.shape)} and {tuple(c_prev.shape)}"
            )
        z = x @ self.weight_ih.T + self.bias_ih + h_prev @ self.weight_hh.T + self.bias_hh  # (B, 4N)
        i, f, g, o = z.chunk(4, dim=1)  # four (B, N) pre-activations, PyTorch's gate order
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c_prev + i * g  # (B, N): the only path from c_{t-1} to c_t is the product with f_t
        h = o * torch.tanh(c)  # (B, N)
        return h, c


def gradient_norm_by_distance(rnn: nn.Module, x: torch.Tensor, readout: torch.Tensor) -> torch.Tensor:
    r"""How much the last step's output still depends on each earlier input: the vanishing gradient, measured.

    Runs ``rnn`` (a batch-first ``nn.RNN``, ``nn.LSTM`` or ``nn.GRU``, or any module returning
    ``(outputs (B, T, N), state)``) over ``x``, takes the scalar loss :math:`L = \sum_b w^\top h_T^{(b)}` of its
    last output (a fixed readout ``w``; the sum over examples keeps each example's gradient independent of B),
    and returns, for every distance d = 0, ..., T-1, the norm of :math:`\partial L / \partial x_{T-d}` averaged
    over the batch. For a plain tanh RNN the chain rule multiplies d Jacobians
    :math:`\mathrm{diag}(1-h_t^2)\,W_{hh}`, so the norm shrinks geometrically when they are contractions
    (Bengio et al. 1994; Hochreiter & Schmidhuber 1997, section 3).

    Args:
        rnn: the recurrent module (batch_first=True).
        x: ``(B, T, E)`` float inputs.
        readout: ``(N,)`` the vector w, N the module's output width.
    Returns:
        ``(T,)`` float tensor on ``x``'s device; entry d is the mean over the batch of
        :math:`\|\partial L/\partial x_{T-d}\|_2` (d = 0 is the last input).
    Raises:
        ValueError: if ``x`` is not 3-D or ``readout`` does not match the output width.
    """
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, E), got {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    outputs, _ = rnn(x)  # (B, T, N)
    if readout.shape != (outputs.shape[-1],):
        raise ValueError(
            f"readout must have shape ({outputs.shape[-1]},) to match the outputs, got {tuple(readout.shape)}"
        )
    loss = (outputs[:, -1] @ readout).sum()  # (B, N) @ (N,) -> (B,) -> scalar
    (grad,) = torch.autograd.grad(loss, x)  # (B, T, E)
    return grad.norm(dim=-1).mean(0).flip(0)  # (T,), index = distance from the last step


# ----------------------------------------------------------------------------------------------
# Encoder
# ----------------------------------------------------------------------------------------------
class Encoder(nn.Module):
    """Embedding + multi-layer recurrent network over a padded batch (Sutskever et al. 2014, sec. 2).

    Padded positions never influence the result: the batch is packed with
    :func:`torch.nn.utils.rnn.pack_padded_sequence`, so the recurrent net stops at each sequence's
    true length and the final states are those after its last real token.

    Args:
        vocab_size: source vocabulary size V_src.
        emb_dim: embedding size E.
        hidden_size: hidden size N (per direction), as in ``nn.LSTM``/``nn.GRU``.
        num_layers: L stacked layers (Sutskever et al. used 4).
        cell: ``"lstm"`` (chapter 1) or ``"gru"`` (chapter 2, as in Bahdanau et al.).
        bidirectional: also read the sequence backwards (chapter 2).
        dropout: dropout between layers (only when ``num_layers > 1``) and on embeddings.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_size: int,
        num_layers: int = 1,
        cell: str = "lstm",
        bidirectional: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        rnn_cls = {"lstm": nn.LSTM, "gru": nn.GRU}.get(cell)
        if rnn_cls is None:
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        self.cell, self.hidden_size, self.num_layers, self.bidirectional = cell, hidden_size, num_layers, bidirectional
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        self.rnn = rnn_cls(
            emb_dim,
            hidden_size,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor):
        """Encode a padded batch.

        Args:
            src: ``(B, S)`` int64 source ids, right-padded with ``PAD_ID``.
            src_lens: ``(B,)`` int64 true lengths (1 <= len <= S), on any device.
        Returns:
            outputs: ``(B, S, D)`` float top-layer states for every position (D = N, or 2N when
                bidirectional: forward and backward states concatenated); zeros at padding.
            state: final states after each sequence's last real token: ``h_n`` of shape
                ``(L * num_directions, B, N)`` for a GRU, the pair ``(h_n, c_n)`` for an LSTM
                (PyTorch's layout: layer-major, forward before backward).
        Raises:
            ValueError: if ``src`` is not ``(B, S)`` integer or ``src_lens`` does not match it.
        """
        check_tokens("src", src, src_lens)
        ### BEGIN SOLUTION
        emb = self.dropout(self.embedding(src))  # (B, S, E)
        # pack_padded_sequence wants the lengths on the CPU; enforce_sorted=False sorts internally
        packed = pack_padded_sequence(emb, src_lens.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, state = self.rnn(packed)  # state: (L*dirs, B, N) or a pair of them, original order
        outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.shape[1])  # (B, S, D)
        ### END SOLUTION
        return outputs, state


# ----------------------------------------------------------------------------------------------
# Teacher forcing and the loss
# ----------------------------------------------------------------------------------------------
def shift_for_teacher_forcing(tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split framed targets into decoder inputs and the tokens they must predict.

    With teacher forcing the decoder reads the *reference* previous token y_{t-1} at step t, not its
    own guess (Sutskever et al. 2014, eq. 1 factorises p(y|x) into p(y_t | v, y_<t)).  For a row
    ``<bos> y1 y2 <eos> <pad>`` the inputs are ``<bos> y1 y2 <eos>`` (the targets shifted right by
    one, starting with <bos>) and the outputs ``y1 y2 <eos> <pad>``: input t predicts output t.

    Args:
        tgt: ``(B, T)`` integer ids ``<bos> y_1 .. y_n <eos>`` right-padded with ``PAD_ID``; T >= 2.
    Returns:
        ``(dec_in, dec_out)``, both ``(B, T-1)`` views of ``tgt`` (same dtype and device).
    Raises:
        ValueError: if ``tgt`` is not 2-D with at least two columns.
    """
    if tgt.dim() != 2 or tgt.shape[1] < 2:
        raise ValueError(f"tgt must be (B, T) with T >= 2, got shape {tuple(tgt.shape)}")
    ### BEGIN SOLUTION
    dec_in = tgt[:, :-1]  # (B, T-1): <bos> y_1 .. y_n (and <eos>/<pad> that only predict padding)
    dec_out = tgt[:, 1:]  # (B, T-1): y_1 .. y_n <eos> <pad>...
    ### END SOLUTION
    return dec_in, dec_out


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor, pad_id: int = PAD_ID) -> torch.Tensor:
    """Mean token-level cross-entropy (nats per real target token), ignoring padding.

    Positions whose target is ``pad_id`` contribute nothing: neither to the sum nor to the count,
    so the logits there can be anything.

    Args:
        logits: ``(B, T, V)`` unnormalised float scores.
        targets: ``(B, T)`` integer ids.
        pad_id: id to ignore.
    Returns:
        scalar float tensor (NaN if every target is padding, as with ``F.cross_entropy``).
    Raises:
        ValueError: if the shapes do not match.
    """
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(
            f"logits (B, T, V) and targets (B, T) must match, got {tuple(logits.shape)} and {tuple(targets.shape)}"
        )
    ### BEGIN SOLUTION
    B, T, V = logits.shape
    loss = F.cross_entropy(
        logits.reshape(B * T, V).float(), targets.reshape(B * T), ignore_index=pad_id
    )  # (B*T, V) vs (B*T,)
    ### END SOLUTION
    return loss


# ----------------------------------------------------------------------------------------------
# Decoder and the full model
# ----------------------------------------------------------------------------------------------
class Decoder(nn.Module):
    """Embedding + L-layer LSTM + linear output layer (Sutskever et al. 2014, sec. 2).

    The initial state is the encoder's final ``(h, c)``: the only thing the decoder knows about the
    source.  ``forward`` runs a whole teacher-forced target at once; ``step`` runs one token.
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden_size: int, num_layers: int = 1, dropout: float = 0.0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.LSTM(
            emb_dim, hidden_size, num_layers=num_layers, batch_first=True, dropout=dropout if num_layers > 1 else 0.0
        )
        self.out = nn.Linear(hidden_size, vocab_size)

    def forward(self, dec_in: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """``dec_in (B, T)`` ids, ``state`` = (h, c) each ``(L, B, N)`` ->
        ``logits (B, T, V)``, new state."""
        emb = self.dropout(self.embedding(dec_in))  # (B, T, E)
        out, state = self.rnn(emb, state)  # (B, T, N)
        return self.out(self.dropout(out)), state  # (B, T, V)

    def step(self, y_prev: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        """One step: ``y_prev (B,)`` ids -> ``logits (B, V)``, new state."""
        logits, state = self.forward(y_prev.unsqueeze(1), state)  # (B, 1, V)
        return logits.squeeze(1), state  # (B, V)


class Seq2Seq(nn.Module):
    """The encoder-decoder of Sutskever et al. (2014): a deep LSTM reads the source, a second deep
    LSTM started from its final states writes the target.

    Args:
        src_vocab, tgt_vocab: vocabulary sizes.
        emb_dim, hidden_size, num_layers, dropout: sizes shared by encoder and decoder.
        reverse_source: read the source backwards (section 3.3); applied inside :meth:`encode`, so
            the data and the evaluation code stay the same.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        emb_dim: int = 64,
        hidden_size: int = 256,
        num_layers: int = 2,
        dropout: float = 0.0,
        reverse_source: bool = False,
    ):
        super().__init__()
        self.config = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            emb_dim=emb_dim,
            hidden_size=hidden_size,
            num_layers=num_layers,
            dropout=dropout,
            reverse_source=reverse_source,
        )
        self.reverse_source = reverse_source
        self.encoder = Encoder(src_vocab, emb_dim, hidden_size, num_layers, cell="lstm", dropout=dropout)
        self.decoder = Decoder(tgt_vocab, emb_dim, hidden_size, num_layers, dropout=dropout)

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor):
        """``src (B, S)``, ``src_lens (B,)`` -> decoder state ``(h, c)``, each ``(L, B, N)``."""
        if self.reverse_source:
            src = reverse_padded(src, src_lens)
        _, state = self.encoder(src, src_lens)
        return state

    def decode_step(self, y_prev: torch.Tensor, state):
        """``y_prev (B,)`` -> ``(logits (B, V), state, None)``; no attention in this model."""
        logits, state = self.decoder.step(y_prev, state)
        return logits, state, None

    def forward(self, src: torch.Tensor, src_lens: torch.Tensor, dec_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits ``(B, T, V)`` for decoder inputs ``dec_in (B, T)``."""
        check_tokens("dec_in", dec_in)
        logits, _ = self.decoder(dec_in, self.encode(src, src_lens))
        return logits


# ----------------------------------------------------------------------------------------------
# Greedy decoding (model-agnostic)
# ----------------------------------------------------------------------------------------------
class EncoderDecoder(Protocol):
    """What :func:`greedy_decode` and :func:`translate` need of a model: :class:`Seq2Seq` here,
    ``AttentionSeq2Seq`` in chapter 2 (both ``nn.Module`` s, which bring ``training``, ``train``, ``eval`` and
    ``parameters``).

    ``encode(src (B, S), src_lens (B,)) -> state``; ``decode_step(y_prev (B,), state) -> (logits (B, V), state,
    attn)`` with ``attn`` the ``(B, S)`` attention weights of that step, or ``None`` for a model without attention.
    """

    training: bool

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> Any: ...

    def decode_step(self, y_prev: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any, torch.Tensor | None]: ...

    def train(self, mode: bool = True) -> Any: ...

    def eval(self) -> Any: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoder,
    src: torch.Tensor,
    src_lens: torch.Tensor,
    max_new_tokens: int = 60,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
    pad_id: int = PAD_ID,
):
    """Translate a batch by always taking the most probable next token.

    Decoding of a sentence stops at its first ``<eos>`` (which is kept) or after ``max_new_tokens`` tokens;
    tokens after that are ``pad_id``.  The loop ends early once every sentence has finished.
    Sutskever et al. used a small beam search (sec. 3.2); greedy is beam size 1.

    Args:
        model: any model with ``encode`` and ``decode_step`` (see the module docstring).
        src: ``(B, S)`` int64 source ids; ``src_lens``: ``(B,)`` lengths.
        max_new_tokens: maximum number of generated tokens (>= 1).
    Returns:
        tokens: ``(B, T_out)`` int64 generated ids (no <bos>), ``T_out <= max_new_tokens``, on src's device.
        attn: ``(B, T_out, S)`` float attention weights stacked over the steps, or ``None`` if the
            model returns no attention.
    Raises:
        ValueError: on malformed ``src`` / ``src_lens`` or ``max_new_tokens < 1``.
    """
    check_tokens("src", src, src_lens)
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    was_training = model.training
    model.eval()
    B = src.shape[0]
    ### BEGIN SOLUTION
    state = model.encode(src, src_lens)
    y_prev = torch.full((B,), bos_id, dtype=torch.long, device=src.device)  # (B,)
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
    tokens, attns = [], []
    for _ in range(max_new_tokens):
        logits, state, attn = model.decode_step(y_prev, state)  # (B, V)
        y = logits.argmax(dim=-1)  # (B,)
        y = torch.where(finished, torch.full_like(y, pad_id), y)  # finished rows emit padding
        tokens.append(y)
        if attn is not None:
            attns.append(attn)  # (B, S)
        finished = finished | (y == eos_id)
        y_prev = y
        if bool(finished.all()):
            break
    out = torch.stack(tokens, dim=1)  # (B, T_out)
    attn_out = torch.stack(attns, dim=1) if attns else None  # (B, T_out, S)
    ### END SOLUTION
    model.train(was_training)
    return out, attn_out


# ----------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def translate(
    model: EncoderDecoder,
    pairs: Sequence[EncodedPair],
    tgt_vocab: Vocab,
    batch_size: int = 256,
    max_new_tokens: int = 60,
    device: str | torch.device | None = None,
    return_attention: bool = False,
):
    """Greedy translations of encoded pairs, in order.

    Returns:
        list of hypothesis token lists (specials stripped, cut at <eos>); with
        ``return_attention=True`` also a list of ``(T_out_i, S_i)`` CPU float tensors (or ``None``).
    """
    device = torch.device(device) if device is not None else next(model.parameters()).device
    hyps: list[list[str]] = []
    attns: list[torch.Tensor | None] = []
    for batch in iterate_batches(pairs, batch_size):
        batch = batch.to(device)
        # (B, T_out), (B, T_out, S)
        out, attn = greedy_decode(model, batch.src, batch.src_lens, max_new_tokens=max_new_tokens)
        for b in range(out.shape[0]):
            toks = tgt_vocab.decode(out[b].cpu())
            hyps.append(toks)
            if return_attention:
                if attn is None:
                    attns.append(None)
                else:
                    n_out = min(len(toks) + 1, out.shape[1])  # generated tokens incl. <eos>
                    attns.append(attn[b, :n_out, : int(batch.src_lens[b])].float().cpu())
    return (hyps, attns) if return_attention else hyps


def evaluate_by_length(
    hyps: Sequence[Sequence[str]],
    refs: Sequence[Sequence[str]],
    src_lengths: Sequence[int],
    edges: Sequence[int] = (5, 10, 15, 20, 25, 30),
) -> list[dict]:
    """Corpus BLEU (sacrebleu) and exact-match accuracy, overall and per source-length bucket.

    Bahdanau et al. 2014, Fig. 2 plots BLEU against sentence length; this is the same measurement.
    BLEU is computed by ``sacrebleu.corpus_bleu`` on the space-joined tokens with
    ``tokenize="none"`` (our tokens are already split) and is in [0, 100].

    Args:
        hyps, refs: token lists (hypothesis, single reference) per sentence.
        src_lengths: source length in tokens (without <eos>) per sentence.
        edges: increasing upper bucket bounds.
    Returns:
        list of dicts ``{"bucket", "n", "bleu", "exact_match"}``; the last has bucket ``"all"``.
        ``exact_match`` is a fraction in [0, 1].
    Raises:
        ValueError: if the three lists differ in length.
    """
    import sacrebleu

    from solutions.translation_data import source_length_buckets

    if not (len(hyps) == len(refs) == len(src_lengths)):
        raise ValueError(
            f"hyps, refs, src_lengths must have equal length, got {len(hyps)}, {len(refs)}, {len(src_lengths)}"
        )
    labels = source_length_buckets(src_lengths, edges)
    order = sorted(set(labels), key=lambda s: int(s.split("-")[0].rstrip("+")))
    rows = []
    for bucket in order + ["all"]:
        idx = [i for i, lab in enumerate(labels) if bucket == "all" or lab == bucket]
        h = [" ".join(hyps[i]) for i in idx]
        r = [" ".join(refs[i]) for i in idx]
        bleu = sacrebleu.corpus_bleu(h, [r], tokenize="none").score
        em = sum(list(hyps[i]) == list(refs[i]) for i in idx) / len(idx)
        rows.append({"bucket": bucket, "n": len(idx), "bleu": round(bleu, 2), "exact_match": round(em, 4)})
    return rows
