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
from torch.nn.functional import log_softmax as _log_softmax
from torch.nn.functional import one_hot as _one_hot

from .core import (
    Alternative,
    CheckFailed,
    Exercises,
    Mutant,
    call,
    expect_close,
    expect_dropout_modes,
    expect_equal,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
)

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


@EXERCISES.check("shift_for_teacher_forcing", hidden=True)
def _shift_other(fn):
    """other batch sizes and lengths; T = 2"""
    for B, T in ((3, 7), (1, 2)):
        tgt = torch.randint(3, 30, (B, T), generator=rng(B * T))
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
    expect_close(
        "sequence_loss(logits, targets)",
        got,
        _loss_oracle(logits, targets, PAD),
        hint="average -log p(target) over the positions whose target is not <pad> (ignore_index).",
    )


@EXERCISES.check("sequence_loss", hidden=True)
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


@EXERCISES.check("sequence_loss", hidden=True)
def _loss_half(fn):
    """float16 logits (a Colab GPU's dtype) with a wide spread: a finite float32 loss, as in float32"""
    logits = 12 * torch.randn(2, 4, 9, generator=rng(4))  # probabilities down to ~1e-10: below float16's range
    targets = torch.tensor([[3, 5, EOS, PAD], [8, 2, 7, EOS]])
    expect_half_precision(
        "sequence_loss",
        lambda dtype: call(f"sequence_loss on {dtype} logits", fn, logits.to(dtype), targets),
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


def _compare_encoder(cls, kwargs, lengths, *, hidden=False):
    torch.manual_seed(0)
    enc = call(f"Encoder(**{kwargs})", cls, **kwargs)
    enc.eval()
    for name in ("embedding", "rnn"):
        expect_true(isinstance(getattr(enc, name, None), nn.Module), f"Encoder should keep its {name} as self.{name}.")
    seqs, src, lens = _batch(lengths, kwargs["vocab_size"], seed=len(lengths))
    with torch.no_grad():
        result = call("Encoder.forward(src, src_lens)", enc, src, lens)
        expect_true(isinstance(result, tuple) and len(result) == 2, "Encoder.forward should return (outputs, state).")
        outputs, state = result
        D = kwargs["hidden_size"] * (2 if kwargs.get("bidirectional") else 1)
        expect_shape("outputs", outputs, (len(lengths), src.shape[1], D))
        is_lstm = kwargs.get("cell", "lstm") == "lstm"
        for b, s in enumerate(seqs):
            ref_out, ref_state = enc.rnn(enc.embedding(s[None]))  # this sentence alone: no padding, no packing
            n = len(s)
            expect_close(
                f"outputs[{b}, :{n}]",
                outputs[b, :n],
                ref_out[0],
                hidden=hidden,
                hint="pack the padded batch with pack_padded_sequence(..., enforce_sorted=False) so the "
                "RNN stops at each sentence's length.",
            )
            expect_true(bool((outputs[b, n:] == 0).all()), f"outputs[{b}, {n}:] (padding) should be zero.")
            got_h = state[0] if is_lstm else state
            ref_h = ref_state[0] if is_lstm else ref_state
            expect_close(
                f"final hidden state of sentence {b}",
                got_h[:, b],
                ref_h[:, 0],
                hidden=hidden,
                hint="the final state must be the one after the sentence's last real token.",
            )
            if is_lstm:
                expect_close(f"final cell state of sentence {b}", state[1][:, b], ref_state[1][:, 0], hidden=hidden)


@EXERCISES.check("Encoder", points=3)
def _encoder_lstm(cls):
    """2-layer LSTM: packed batch of lengths [5, 2, 7, 1] gives each sentence's own states"""
    _compare_encoder(cls, dict(vocab_size=23, emb_dim=6, hidden_size=9, num_layers=2, cell="lstm"), [5, 2, 7, 1])


@EXERCISES.check("Encoder", hidden=True)
def _encoder_gru_bidirectional(cls):
    """bidirectional GRU, sentences in increasing length order"""
    _compare_encoder(
        cls,
        dict(vocab_size=17, emb_dim=5, hidden_size=4, num_layers=1, cell="gru", bidirectional=True),
        [1, 3, 4, 8, 8],
        hidden=True,
    )


@EXERCISES.check("Encoder", hidden=True)
def _encoder_dropout(cls):
    """dropout on the embeddings (a 1-layer encoder has no other): off in eval mode, on in training mode"""
    _, src, lens = _batch([4, 2, 5], 13, seed=5)
    expect_dropout_modes(
        "Encoder(13, 5, 4, dropout)",
        lambda p: call(f"Encoder(13, 5, 4, dropout={p})", cls, 13, 5, 4, dropout=p),
        lambda enc: call("Encoder.forward(src, src_lens)", enc, src, lens)[0],
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


@EXERCISES.check("greedy_decode", hidden=True)
def _greedy_limit(fn):
    """respects max_new_tokens when <eos> never comes"""
    model = _Scripted([[5, 5, 5, 5, 5], [6, EOS, 6, 6, 6]])
    out, _ = call(
        "greedy_decode(..., max_new_tokens=3)", fn, model, torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 3]), 3
    )
    expect_equal("tokens", out, torch.tensor([[5, 5, 5], [6, EOS, PAD]]), hidden=True)


# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; each must be caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "inputs not shifted",
        "shift_for_teacher_forcing",
        (("dec_in = tgt[:, :-1]", "dec_in = tgt[:, 1:]"),),
        "the decoder reads the word it must predict",
    ),
    Mutant(
        "outputs not shifted",
        "shift_for_teacher_forcing",
        (("dec_out = tgt[:, 1:]", "dec_out = tgt[:, :-1]"),),
        "the decoder must predict its own input",
    ),
    Mutant("padding counted", "sequence_loss", ((", ignore_index=pad_id", ""),), "padding enters the loss"),
    Mutant(
        "sum not mean",
        "sequence_loss",
        (("ignore_index=pad_id\n", "ignore_index=pad_id, reduction='sum'\n"),),
        "sums instead of averaging over real tokens",
    ),
    Mutant("pad id hard-coded", "sequence_loss", (("ignore_index=pad_id", "ignore_index=0"),), "ignores the argument"),
    Mutant(
        "no packing",
        "Encoder",
        (
            (
                "packed = pack_padded_sequence(emb, src_lens.cpu(), batch_first=True, enforce_sorted=False)",
                "packed = emb",
            ),
            (
                "outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.shape[1])",
                "outputs = packed_out",
            ),
        ),
        "the RNN runs over the padding",
    ),
    Mutant(
        "sorted lengths assumed",
        "Encoder",
        (("enforce_sorted=False", "enforce_sorted=True"),),
        "fails on batches not sorted by length",
    ),
    Mutant(
        "outputs cut to the longest sentence",
        "Encoder",
        ((", total_length=src.shape[1]", ""),),
        "outputs shorter than S when the batch has trailing padding",
    ),
    Mutant(
        "never stops",
        "greedy_decode",
        (("finished = finished | (y == eos_id)", "pass"),),
        "keeps generating after <eos>",
    ),
    Mutant(
        "no padding after eos",
        "greedy_decode",
        (("y = torch.where(finished, torch.full_like(y, pad_id), y)", "pass"),),
        "tokens after <eos> are kept",
    ),
    Mutant("does not feed back", "greedy_decode", (("y_prev = y\n", "pass\n"),), "always feeds <bos>"),
    Mutant(
        "argmax over the batch",
        "greedy_decode",
        (("logits.argmax(dim=-1)", "logits.argmax(dim=0)"),),
        "picks the wrong axis",
    ),
    Mutant(
        "finished flags on the CPU",
        "greedy_decode",
        (("torch.zeros(B, dtype=torch.bool, device=src.device)", "torch.zeros(B, dtype=torch.bool)"),),
        "the per-sentence <eos> flags are made without device=: decoding fails on a GPU",
    ),
    Mutant(
        "embedding dropout in eval mode",
        "Encoder",
        (("self.dropout(self.embedding(src))", "F.dropout(self.embedding(src), self.dropout.p)"),),
        "F.dropout without training=self.training: dropout stays on after .eval()",
    ),
    Mutant(
        "embedding dropout forgotten",
        "Encoder",
        (("self.dropout(self.embedding(src))", "self.embedding(src)"),),
        "the embeddings are never dropped out (and a 1-layer encoder has no dropout at all)",
    ),
    Mutant(
        "log of the softmax in half precision",
        "sequence_loss",
        (
            (
                "loss = F.cross_entropy(\n"
                "        logits.reshape(B * T, V).float(), targets.reshape(B * T), ignore_index=pad_id\n"
                "    )",
                "real = targets != pad_id  # (B, T)\n"
                "    p = torch.softmax(logits, dim=-1).gather(-1, targets.clamp(0, V - 1)[..., None])[..., 0]\n"
                "    loss = -torch.where(real, torch.log(p), 0.0).sum() / real.sum()",
            ),
        ),
        "log(softmax) in the logits' dtype: small probabilities underflow to 0 in float16, the loss is inf",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES = [
    Alternative(
        "narrow instead of slicing",
        "shift_for_teacher_forcing",
        (("tgt[:, :-1]", "tgt.narrow(1, 0, tgt.shape[1] - 1)"), ("tgt[:, 1:]", "tgt.narrow(1, 1, tgt.shape[1] - 1)")),
        "Tensor.narrow gives the same views as slicing",
    ),
    Alternative(
        "classes on dim 1",
        "sequence_loss",
        (("logits.reshape(B * T, V).float(), targets.reshape(B * T),", "logits.transpose(1, 2).float(), targets,"),),
        "F.cross_entropy on (B, V, T) logits and (B, T) targets, without flattening",
    ),
    Alternative(
        "log_softmax, gather and a masked mean",
        "sequence_loss",
        (
            (
                "loss = F.cross_entropy(\n"
                "        logits.reshape(B * T, V).float(), targets.reshape(B * T), ignore_index=pad_id\n"
                "    )",
                "real = targets != pad_id  # (B, T)\n"
                "    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)\n"
                "    nll = -logp.gather(-1, targets.clamp(0, V - 1)[..., None])[..., 0]  # (B, T)\n"
                "    loss = torch.where(real, nll, 0.0).sum() / real.sum()",
            ),
        ),
        "the cross-entropy written out by hand, padding excluded from sum and count",
    ),
    Alternative(
        "F.dropout with the module's mode",
        "Encoder",
        (("self.dropout(self.embedding(src))", "F.dropout(self.embedding(src), self.dropout.p, self.training)"),),
        "functional dropout that follows .train()/.eval()",
    ),
    Alternative(
        "masked_fill for finished rows",
        "greedy_decode",
        (("torch.where(finished, torch.full_like(y, pad_id), y)", "y.masked_fill(finished, pad_id)"),),
        "masked_fill instead of torch.where",
    ),
    Alternative(
        "new_full and zeros_like",
        "greedy_decode",
        (
            ("torch.full((B,), bos_id, dtype=torch.long, device=src.device)", "src.new_full((B,), bos_id)"),
            ("torch.zeros(B, dtype=torch.bool, device=src.device)", "torch.zeros_like(src[:, 0], dtype=torch.bool)"),
        ),
        "tensors made from src, so on its device without device=",
    ),
]

__all__ = ["EXERCISES", "MUTANTS", "ALTERNATIVES", "CheckFailed"]
