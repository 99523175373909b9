"""Checks for chapter 1, sequence to sequence learning (notebook ``notebooks/ch01_seq2seq.ipynb``).

The references are independent of ``solutions/``:

* the teacher-forcing shift is checked against hand-written rows;
* the loss against an explicit average of ``-log softmax`` over the non-padding positions;
* the encoder against the *student's own* embedding and recurrent layer run on each sentence alone, without
  padding or packing (what packing must reproduce);
* greedy decoding against tiny scripted "models" whose outputs are known in advance.

Sizes are chosen so that batch B, lengths S and T, embedding E, hidden N and vocabulary V all differ.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.functional import log_softmax as _log_softmax
from torch.nn.functional import one_hot as _one_hot

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_dropout_modes,
    expect_equal,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch01_seq2seq")

PAD, BOS, EOS = 0, 1, 2  # the course's special ids (solutions/translation_data.py)


# ---------------------------------------------------------------- exercise 1: shift_for_teacher_forcing


@EXERCISES.check("shift_for_teacher_forcing", points=1)
def _shift_basic(fn):
    """<bos> 10 11 <eos> <pad> gives inputs <bos> 10 11 <eos> and outputs 10 11 <eos> <pad>"""
    tgt = torch.tensor([[BOS, 10, 11, EOS, PAD], [BOS, 12, 13, 14, EOS]])
    result = call("shift_for_teacher_forcing(tgt)", fn, tgt)
    expect_true(
        isinstance(result, tuple) and len(result) == 2,
        "shift_for_teacher_forcing should return a tuple (dec_in, dec_out).",
    )
    expect_equal("dec_in", result[0], torch.tensor([[BOS, 10, 11, EOS], [BOS, 12, 13, 14]]))
    expect_equal("dec_out", result[1], torch.tensor([[10, 11, EOS, PAD], [12, 13, 14, EOS]]))


@EXERCISES.check(
    "shift_for_teacher_forcing",
    hidden=True,
    requires="works for any batch size and length (T = 2 too) and keeps the ids' integer dtype (int32 too)",
)
def _shift_other(fn):
    """other batch sizes and lengths; T = 2; int32 ids keep their dtype"""
    for B, T, dtype in ((3, 7, torch.long), (1, 2, torch.long), (2, 5, torch.int32)):
        tgt = torch.randint(3, 30, (B, T), generator=rng(B * T)).to(dtype)
        dec_in, dec_out = call("shift_for_teacher_forcing", fn, tgt)
        expect_equal("dec_in", dec_in, tgt[:, : T - 1].clone(), hidden=True)
        expect_equal("dec_out", dec_out, tgt[:, 1:].clone(), hidden=True)


# ---------------------------------------------------------------- exercise 2: sequence_loss


def _loss_oracle(logits, targets, pad_id):
    logp = _log_softmax(logits.double(), dim=-1)
    total, count = 0.0, 0
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            if int(targets[b, t]) != pad_id:
                total -= float(logp[b, t, targets[b, t]])
                count += 1
    return torch.tensor(total / count, dtype=logits.dtype)


@EXERCISES.check("sequence_loss", points=2)
def _loss_basic(fn):
    """mean cross-entropy over the 5 real tokens of targets (2, 4) with logits (2, 4, 6)"""
    logits = torch.randn(2, 4, 6, generator=rng(1))
    targets = torch.tensor([[4, 5, EOS, PAD], [3, 3, PAD, PAD]])
    got = call("sequence_loss(logits, targets)", fn, logits, targets)
    expected = _loss_oracle(logits, targets, PAD)
    nll = -_log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]  # (B, T), padding included
    real = targets != PAD
    guesses = {  # a cause is named only when the answer matches that mistake
        "the padding positions are counted: leave them out of both the sum and the count (ignore_index=pad_id).": (
            nll.mean()
        ),
        "the padding is left out of the sum but not of the count: divide by the number of real tokens.": (
            (nll * real).sum() / nll.numel()
        ),
        "you summed the per-token losses; the loss is their mean over the real tokens.": (nll * real).sum(),
    }
    hint = "average -log p(target) over the positions whose target is not <pad> (ignore_index)."
    if isinstance(got, torch.Tensor) and got.shape == () and got.is_floating_point():
        hint = next((t for t, v in guesses.items() if torch.allclose(got.detach().float(), v, atol=1e-5)), hint)
    expect_close("sequence_loss(logits, targets)", got, expected, hint=hint)


@EXERCISES.check(
    "sequence_loss",
    hidden=True,
    requires="ignores the logits at padded positions, for any `pad_id` and sizes",
)
def _loss_ignores_pad(fn):
    """logits at padded positions change nothing; other pad ids and sizes"""
    logits = torch.randn(3, 5, 7, generator=rng(2))
    targets = torch.tensor([[4, 5, 6, EOS, PAD], [3, EOS, PAD, PAD, PAD], [6, 6, 6, 6, EOS]])
    changed = logits.clone()
    changed[targets == PAD] = 50 * torch.randn(int((targets == PAD).sum()), 7, generator=rng(3))
    expect_close(
        "sequence_loss with other logits at padding",
        call("sequence_loss", fn, changed, targets),
        _loss_oracle(logits, targets, PAD),
        hidden=True,
    )
    targets9 = targets.masked_fill(targets == PAD, 6).masked_fill(targets == 6, PAD)  # swap: pad id 6
    expect_close(
        "sequence_loss(..., pad_id=6)",
        call("sequence_loss", fn, logits, targets9, 6),
        _loss_oracle(logits, targets9, 6),
        hidden=True,
    )


@EXERCISES.check(
    "sequence_loss",
    hidden=True,
    requires="gives a finite float32 loss for float16 logits with a wide spread, as in float32",
)
def _loss_half(fn):
    """float16 logits (a Colab GPU's dtype) with a wide spread: a finite float32 loss, as in float32"""
    logits = 12 * torch.randn(2, 4, 9, generator=rng(4))  # probabilities down to ~1e-10: below float16's range
    targets = torch.tensor([[3, 5, EOS, PAD], [8, 2, 7, EOS]])
    expect_half_precision(
        "sequence_loss",
        lambda dtype: call(Message("sequence_loss on {dtype} logits", dtype=dtype), fn, logits.to(dtype), targets),
        float32_results=(0,),
    )


# ---------------------------------------------------------------- exercise 3: Encoder


def _batch(lengths, vocab, seed, garbage=True):
    g = rng(seed)
    S = max(lengths) + 1  # one all-padding column: outputs must still span S positions
    seqs = [torch.randint(4, vocab, (n,), generator=g) for n in lengths]
    src = torch.full((len(lengths), S), PAD)
    for b, s in enumerate(seqs):
        src[b, : len(s)] = s
    if garbage:  # real-looking ids in the padding: a correct encoder never reads them
        pad = src == PAD
        src[pad] = torch.randint(4, vocab, (int(pad.sum()),), generator=g)
    return seqs, src, torch.tensor(lengths)


def _rnn_like(enc, kwargs):
    """A fresh ``nn.LSTM``/``nn.GRU`` of the sizes the check asked for (``kwargs``, Encoder's defaults for the others;
    never the sizes the answer's module reports) holding its ``self.rnn``'s weights: the oracle runs PyTorch's own
    recurrence on them, never the answer's module."""
    cell = kwargs.get("cell", "lstm")
    try:
        fresh = (nn.LSTM if cell == "lstm" else nn.GRU)(
            kwargs["emb_dim"],
            kwargs["hidden_size"],
            kwargs.get("num_layers", 1),
            batch_first=True,
            bidirectional=kwargs.get("bidirectional", False),
        )
        fresh.load_state_dict(dict(enc.rnn.named_parameters()))
    except (AttributeError, RuntimeError, TypeError) as err:
        raise CheckFailed(
            Message(
                "Encoder's self.rnn should be an nn.{cell} built from the arguments ({ename}: {error}).",
                cell=cell.upper(),
                ename=type(err).__name__,
                error=str(err),
            )
        ) from None
    return fresh.eval()


def _compare_encoder(cls, kwargs, lengths, *, hidden=False):
    torch.manual_seed(0)
    enc = call(Message("Encoder(**{kwargs})", kwargs=kwargs), cls, **kwargs)
    enc.eval()
    for name in ("embedding", "rnn"):
        expect_true(
            isinstance(getattr(enc, name, None), nn.Module),
            Message("Encoder should keep its {name} as self.{name}.", name=name),
        )
    seqs, src, lens = _batch(lengths, kwargs["vocab_size"], seed=len(lengths))
    rnn, embed = _rnn_like(enc, kwargs), (lambda tokens: F.embedding(tokens, enc.embedding.weight))
    with torch.no_grad():
        unpacked = rnn(embed(src))[0]  # what running over the padding gives
        result = call("Encoder.forward(src, src_lens)", enc, src, lens)
        expect_true(isinstance(result, tuple) and len(result) == 2, "Encoder.forward should return (outputs, state).")
        outputs, state = result
        D = kwargs["hidden_size"] * (2 if kwargs.get("bidirectional") else 1)
        expect_shape("outputs", outputs, (len(lengths), src.shape[1], D))
        is_lstm = kwargs.get("cell", "lstm") == "lstm"
        for b, s in enumerate(seqs):
            ref_out, ref_state = rnn(embed(s[None]))  # this sentence alone: no padding, no packing
            n = len(s)
            ran_over_padding = outputs.shape == unpacked.shape and torch.allclose(outputs[b, :n], unpacked[b, :n])
            expect_close(
                Message("outputs[{b}, :{n}]", b=b, n=n),
                outputs[b, :n],
                ref_out[0],
                hidden=hidden,
                hint="your RNN ran over the padding: pack the padded batch with pack_padded_sequence(..., "
                "enforce_sorted=False) so that it stops at each sentence's length."
                if ran_over_padding
                else "outputs[b, :n] should be what self.rnn gives for sentence b alone: embed, pack, run, unpack.",
            )
            expect_true(
                bool((outputs[b, n:] == 0).all()), Message("outputs[{b}, {n}:] (padding) should be zero.", b=b, n=n)
            )
            got_h = state[0] if is_lstm else state
            ref_h = ref_state[0] if is_lstm else ref_state
            expect_close(
                Message("final hidden state of sentence {b}", b=b),
                got_h[:, b],
                ref_h[:, 0],
                hidden=hidden,
                hint="the final state must be the one after the sentence's last real token.",
            )
            if is_lstm:
                expect_close(
                    Message("final cell state of sentence {b}", b=b), state[1][:, b], ref_state[1][:, 0], hidden=hidden
                )


@EXERCISES.check("Encoder", points=3)
def _encoder_lstm(cls):
    """2-layer LSTM: packed batch of lengths [5, 2, 7, 1] gives each sentence's own states"""
    _compare_encoder(cls, dict(vocab_size=23, emb_dim=6, hidden_size=9, num_layers=2, cell="lstm"), [5, 2, 7, 1])


@EXERCISES.check(
    "Encoder",
    hidden=True,
    requires="works with a bidirectional GRU and with sentences in increasing length order",
)
def _encoder_gru_bidirectional(cls):
    """bidirectional GRU, sentences in increasing length order"""
    _compare_encoder(
        cls,
        dict(vocab_size=17, emb_dim=5, hidden_size=4, num_layers=1, cell="gru", bidirectional=True),
        [1, 3, 4, 8, 8],
        hidden=True,
    )


@EXERCISES.check(
    "Encoder",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _encoder_dropout(cls):
    """dropout on the embeddings (a 1-layer encoder has no other): off in eval mode, on in training mode"""
    _, src, lens = _batch([4, 2, 5], 13, seed=5)
    expect_dropout_modes(
        "Encoder(13, 5, 4, dropout)",
        lambda p: call(Message("Encoder(13, 5, 4, dropout={p})", p=p), cls, 13, 5, 4, dropout=p),
        lambda enc: call("Encoder.forward(src, src_lens)", enc, src, lens)[0],
    )


@EXERCISES.check(
    "Encoder",
    hidden=True,
    requires="applies the dropout to the embeddings only",
)
def _encoder_dropout_site(cls):
    """the dropout acts on the embeddings only: in training mode it changes the final states, and no output is 0"""
    _, src, lens = _batch([4, 2, 5], 13, seed=6)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(1)
        enc = call("Encoder(13, 5, 4, dropout=0.5)", cls, 13, 5, 4, dropout=0.5)
        enc.train()
        with torch.no_grad():
            first = call("Encoder.forward(src, src_lens)", enc, src, lens)
            second = call("Encoder.forward(src, src_lens)", enc, src, lens)
    finally:
        torch.random.set_rng_state(state)
    for result in (first, second):
        expect_true(isinstance(result, tuple) and len(result) == 2, "Encoder.forward should return (outputs, state).")
        expect_true(
            isinstance(result[1], tuple) and len(result[1]) == 2, "an LSTM encoder's state should be the pair (h, c)."
        )
        expect_shape("h_n", result[1][0], (1, 3, 4))
    expect_true(
        not torch.allclose(first[1][0], second[1][0]),
        "In training mode two calls gave the same final state: the dropout must act on the embeddings (the "
        "RNN's input), not on its outputs.",
    )
    expect_shape("outputs", first[0], (3, src.shape[1], 4))
    real = torch.arange(src.shape[1])[None, :] < lens[:, None]  # (B, S)
    zeros = float((first[0][real] == 0).float().mean())
    expect_true(
        zeros < 0.1,
        Message(
            "In training mode {share} of your outputs at real tokens are exactly 0: the outputs are dropped out "
            "too. The encoder's dropout acts on the embeddings only (and between layers, inside the RNN).",
            share=f"{zeros:.0%}",
        ),
    )


# ---------------------------------------------------------------- exercise 4: greedy_decode


class _Scripted(nn.Module):
    """Emits script[:, t] at step t, whatever it is fed."""

    def __init__(self, script, vocab=12):
        super().__init__()
        self.script, self.vocab = torch.tensor(script), vocab
        self.w = nn.Parameter(torch.zeros(1))

    def encode(self, src, src_lens):
        return 0

    def decode_step(self, y_prev, t):
        col = self.script[:, min(t, self.script.shape[1] - 1)]
        return _one_hot(col, self.vocab).float() + 0.1, t + 1, None


class _Counter(nn.Module):
    """Predicts y_prev + 1 (after <bos>: the sentence's start token) and <eos> after ``stop``: checks feeding back."""

    def __init__(self, start, stop, vocab=12):
        super().__init__()
        self.start, self.stop, self.vocab = torch.tensor(start), stop, vocab
        self.w = nn.Parameter(torch.zeros(1))

    def encode(self, src, src_lens):
        return None

    def decode_step(self, y_prev, state):
        nxt = torch.where(y_prev == BOS, self.start, y_prev + 1)
        nxt = torch.where(y_prev >= self.stop, torch.full_like(nxt, EOS), nxt)
        nxt = torch.where(y_prev == EOS, torch.full_like(nxt, 3), nxt)  # would go on after <eos> if not stopped
        return _one_hot(nxt.clamp(max=self.vocab - 1), self.vocab).float(), state, torch.ones(len(y_prev), 4) / 4


@EXERCISES.check("greedy_decode", points=3)
def _greedy_stops(fn):
    """stops each sentence at its <eos>, pads after it, and ends when all are done"""
    model = _Scripted([[5, EOS, 7, 7, 7, 7], [6, 6, 6, EOS, 7, 7], [8, 9, EOS, 7, 7, 7]])
    out, attn = call(
        "greedy_decode(model, src, src_lens, max_new_tokens=20)",
        fn,
        model,
        torch.ones(3, 4, dtype=torch.long),
        torch.tensor([4, 2, 3]),
        20,
    )
    expect_equal("tokens", out, torch.tensor([[5, EOS, PAD, PAD], [6, 6, 6, EOS], [8, 9, EOS, PAD]]))
    expect_true(attn is None, "a model that returns no attention should give attn = None.")


@EXERCISES.check("greedy_decode")
def _greedy_feeds_back(fn):
    """feeds each prediction back as the next input"""
    model = _Counter([4, 6], stop=8)
    out, attn = call(
        "greedy_decode(model, ...)", fn, model, torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 4]), 20
    )
    expect_equal("tokens", out, torch.tensor([[4, 5, 6, 7, 8, EOS], [6, 7, 8, EOS, PAD, PAD]]))
    expect_shape("attn (stacked attention weights)", attn, (2, 6, 4))


@EXERCISES.check(
    "greedy_decode",
    hidden=True,
    requires="stops after `max_new_tokens` steps when `<eos>` never comes",
)
def _greedy_limit(fn):
    """respects max_new_tokens when <eos> never comes"""
    model = _Scripted([[5, 5, 5, 5, 5], [6, EOS, 6, 6, 6]])
    out, _ = call(
        "greedy_decode(..., max_new_tokens=3)", fn, model, torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 3]), 3
    )
    expect_equal("tokens", out, torch.tensor([[5, 5, 5], [6, EOS, PAD]]), hidden=True)


class _Table(nn.Module):
    """Row b predicts ``table[b][y_prev]``; its attention at each step is the one-hot vector of ``y_prev % S``."""

    def __init__(self, table, S=4, vocab=12):
        super().__init__()
        self.table, self.S, self.vocab = torch.tensor(table), S, vocab
        self.w = nn.Parameter(torch.zeros(1))

    def encode(self, src, src_lens):
        return 0

    def decode_step(self, y_prev, state):
        nxt = self.table[torch.arange(len(y_prev)), y_prev.clamp(0, self.table.shape[1] - 1)]
        attn = _one_hot(y_prev % self.S, self.S).float() * 0.5 + 0.5 / self.S  # (B, S), rows sum to 1
        return _one_hot(nxt, self.vocab).float(), state + 1, attn


@EXERCISES.check(
    "greedy_decode",
    hidden=True,
    requires="uses the `bos_id`, `eos_id` and `pad_id` it is given, and stacks each step's attention weights in order",
)
def _greedy_other_ids(fn):
    """uses the bos_id, eos_id and pad_id it is given, and stacks each step's attention in order"""
    #        ids: 0  1  2  3  4  5  6  7  8  9 10 11
    table = [
        [8, 8, 8, 3, 5, 6, 9, 9, 8, 3, 3, 3],  # bos 4 -> 5 -> 6 -> eos 9
        [8, 8, 8, 3, 7, 3, 3, 9, 8, 3, 3, 3],  # bos 4 -> 7 -> eos 9, then padding
    ]
    src, lens = torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 3])
    result = call(
        "greedy_decode(model, src, src_lens, 10, bos_id=4, eos_id=9, pad_id=11)",
        fn,
        _Table(table),
        src,
        lens,
        10,
        bos_id=4,
        eos_id=9,
        pad_id=11,
    )
    expect_true(isinstance(result, tuple) and len(result) == 2, "greedy_decode should return (tokens, attn).")
    out, attn = result
    expect_equal("tokens with bos_id=4, eos_id=9, pad_id=11", out, torch.tensor([[5, 6, 9], [7, 9, 11]]), hidden=True)
    fed = torch.tensor([[4, 5, 6], [4, 7, 9]])  # what each step was fed
    expected = _one_hot(fed % 4, 4).float() * 0.5 + 0.125
    expect_shape("attn", attn, (2, 3, 4))
    what = Message("attn (each step's weights, stacked along axis 1)")
    expect_close(what, attn[:, :2], expected[:, :2], hidden=True)
    expect_close(what, attn[0, 2], expected[0, 2], hidden=True)  # what a finished sentence is fed is free


__all__ = ["EXERCISES", "CheckFailed"]
