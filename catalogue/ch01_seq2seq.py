"""ch01_seq2seq's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

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
    Mutant(
        "mean over padded positions too",
        "sequence_loss",
        (
            ("ignore_index=pad_id\n", 'ignore_index=pad_id, reduction="none"\n'),
            ("    )  # (B*T, V)", "    ).mean()  #"),
        ),
        "the padding adds 0 to the sum but still counts in the mean",
    ),
    Mutant(
        "loss left in half precision",
        "sequence_loss",
        (("logits.reshape(B * T, V).float()", "logits.reshape(B * T, V)"),),
        "a float16 loss for float16 logits (the loss should be float32)",
    ),
    Mutant(
        "dropout on the outputs instead of the embeddings",
        "Encoder",
        (
            ("emb = self.dropout(self.embedding(src))", "emb = self.embedding(src)"),
            ("total_length=src.shape[1])", "total_length=src.shape[1])\n        outputs = self.dropout(outputs)"),
        ),
        "the RNN's outputs are dropped out, its input never: the final states ignore the dropout",
    ),
    Mutant(
        "dropout on the outputs too",
        "Encoder",
        (("total_length=src.shape[1])", "total_length=src.shape[1])\n        outputs = self.dropout(outputs)"),),
        "the RNN's outputs are dropped out as well as its input",
    ),
    Mutant(
        "bos id hard-coded in decoding",
        "greedy_decode",
        (("torch.full((B,), bos_id,", "torch.full((B,), BOS_ID,"),),
        "always starts from the course's <bos>, whatever bos_id says",
    ),
    Mutant(
        "eos id hard-coded in decoding",
        "greedy_decode",
        (("(y == eos_id)", "(y == EOS_ID)"),),
        "stops at the course's <eos>, whatever eos_id says",
    ),
    Mutant(
        "pad id hard-coded in decoding",
        "greedy_decode",
        (("torch.full_like(y, pad_id)", "torch.full_like(y, PAD_ID)"),),
        "pads with the course's <pad>, whatever pad_id says",
    ),
    Mutant(
        "start tokens on the CPU",
        "greedy_decode",
        (("torch.full((B,), bos_id, dtype=torch.long, device=src.device)", "torch.full((B,), bos_id)"),),
        "the <bos> inputs are made without device=: decoding fails on a GPU",
    ),
    Mutant(
        "attention stacked then viewed",
        "greedy_decode",
        (("torch.stack(attns, dim=1)", "torch.stack(attns).view(B, len(attns), -1)"),),
        "stacks the steps first and reshapes with view: the right shape, the steps and sentences interleaved",
    ),
    Mutant(
        "ids cast to int64",
        "shift_for_teacher_forcing",
        (("tgt[:, :-1]  #", "tgt[:, :-1].long()  #"), ("tgt[:, 1:]  #", "tgt[:, 1:].long()  #")),
        "the slices cast with .long(): int32 ids come back as int64, not in the input's dtype",
    ),
    Mutant(
        "one layer whatever num_layers says",
        "Encoder",
        (("            num_layers=num_layers,\n", "            num_layers=1,\n"),),
        "the given __init__ edited: a one-layer RNN (caught since the oracle takes its sizes from the check's "
        "arguments, not from self.rnn)",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
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


# Whole answers written from the page and the notebook, not from the reference (each a complete exercise cell).
_SHIFT_HEAD = head("ch01_seq2seq", "shift_for_teacher_forcing")  # the stub's given text, as the release notebook has it
_LOSS_HEAD = head("ch01_seq2seq", "sequence_loss")  # the stub's given text, as the release notebook has it
_ENCODER_HEAD = head("ch01_seq2seq", "Encoder")  # the stub's given text, as the release notebook has it
_GREEDY_HEAD = head("ch01_seq2seq", "greedy_decode")  # the stub's given text, as the release notebook has it


REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "shift: ellipsis slices",
        "shift_for_teacher_forcing",
        _SHIFT_HEAD
        + """
    return tgt[..., :-1], tgt[..., 1:]
""",
        "slices on the last axis, returned directly",
    ),
    Rewrite(
        "shift: split",
        "shift_for_teacher_forcing",
        _SHIFT_HEAD
        + """
    T = tgt.size(1)
    dec_in, _ = tgt.split([T - 1, 1], dim=1)
    _, dec_out = tgt.split([1, T - 1], dim=1)
    return dec_in, dec_out
""",
        "Tensor.split into the first T-1 and the last T-1 columns",
    ),
    Rewrite(
        "shift: index_select of positions",
        "shift_for_teacher_forcing",
        _SHIFT_HEAD
        + """
    positions = torch.arange(tgt.shape[1] - 1, device=tgt.device)
    return tgt.index_select(1, positions), tgt.index_select(1, positions + 1)
""",
        "index_select with a position vector made on tgt's device",
    ),
    Rewrite(
        "loss: nll_loss of log_softmax",
        "sequence_loss",
        _LOSS_HEAD
        + """
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    return F.nll_loss(logp.flatten(0, 1), targets.flatten(), ignore_index=pad_id)
""",
        "F.nll_loss on log-probabilities, flattened with flatten(0, 1)",
    ),
    Rewrite(
        "loss: logsumexp minus the target's logit",
        "sequence_loss",
        _LOSS_HEAD
        + """
    x = logits.float()
    real = targets != pad_id  # (B, T)
    picked = x.gather(-1, targets.clamp(0, x.shape[-1] - 1).unsqueeze(-1)).squeeze(-1)  # (B, T)
    nll = torch.logsumexp(x, dim=-1) - picked
    return (nll * real).sum() / real.sum()
""",
        "-log p = logsumexp(logits) - logit of the target, a masked mean over the real tokens",
    ),
    Rewrite(
        "loss: per sentence in float64",
        "sequence_loss",
        _LOSS_HEAD
        + """
    total = logits.new_zeros((), dtype=torch.float64)
    count = 0
    for b in range(logits.shape[0]):
        keep = targets[b] != pad_id
        if keep.any():
            total = total + F.cross_entropy(logits[b][keep].double(), targets[b][keep], reduction="sum")
            count += int(keep.sum())
    return (total / count).to(torch.float32)
""",
        "summed cross-entropy of each sentence's real tokens in float64, divided by their count, as float32",
    ),
    Rewrite(
        "encoder: sorted by hand, enforce_sorted left at True",
        "Encoder",
        _ENCODER_HEAD
        + """
        emb = self.dropout(self.embedding(src))
        lengths = src_lens.to("cpu")
        order = torch.argsort(lengths, descending=True)
        packed = pack_padded_sequence(emb[order.to(emb.device)], lengths[order], batch_first=True)
        out, state = self.rnn(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.size(1))
        undo = torch.argsort(order).to(src.device)  # back to the batch's own order
        outputs = out[undo]
        if isinstance(state, tuple):
            state = tuple(s[:, undo] for s in state)
        else:
            state = state[:, undo]
        return outputs, state
""",
        "sorts the batch by length itself, packs it sorted and puts outputs and states back in order",
    ),
    Rewrite(
        "encoder: one sentence at a time",
        "Encoder",
        _ENCODER_HEAD
        + """
        emb = self.dropout(self.embedding(src))  # (B, S, E)
        S = src.shape[1]
        outs, states = [], []
        for b, n in enumerate(src_lens.tolist()):
            out_b, state_b = self.rnn(emb[b : b + 1, :n])  # the real tokens only
            outs.append(F.pad(out_b, (0, 0, 0, S - n)))  # zeros at the padding
            states.append(state_b)
        outputs = torch.cat(outs, dim=0)
        if isinstance(states[0], tuple):
            state = tuple(torch.cat([st[i] for st in states], dim=1) for i in range(len(states[0])))
        else:
            state = torch.cat(states, dim=1)
        return outputs, state
""",
        "no packing: the RNN runs on each sentence's real tokens alone, outputs zero-padded and states joined",
    ),
    Rewrite(
        "encoder: functional dropout and torch.nn.utils.rnn",
        "Encoder",
        _ENCODER_HEAD
        + """
        from torch.nn.utils import rnn as rnn_utils

        x = F.dropout(self.embedding(src), p=self.dropout.p, training=self.training)
        packed = rnn_utils.pack_padded_sequence(
            x, src_lens.to("cpu", torch.int64), batch_first=True, enforce_sorted=False
        )
        packed_out, state = self.rnn(packed)
        outputs, lengths = rnn_utils.pad_packed_sequence(
            packed_out, batch_first=True, padding_value=0.0, total_length=src.shape[-1]
        )
        return outputs, state
""",
        "F.dropout with training=self.training; the packing helpers through their module",
    ),
    Rewrite(
        "greedy: preallocated output",
        "greedy_decode",
        _GREEDY_HEAD
        + """
    state = model.encode(src, src_lens)
    tokens = src.new_full((B, max_new_tokens), pad_id)
    done = src.new_zeros(B, dtype=torch.bool)
    y_prev = src.new_full((B,), bos_id)
    attns, steps = [], 0
    for t in range(max_new_tokens):
        logits, state, attn = model.decode_step(y_prev, state)
        if attn is not None:
            attns.append(attn)
        y = logits.argmax(dim=-1).masked_fill(done, pad_id)
        tokens[:, t] = y
        steps = t + 1
        done = done | y.eq(eos_id)
        y_prev = y
        if done.all():
            break
    model.train(was_training)
    return tokens[:, :steps], (torch.stack(attns, dim=1) if attns else None)
""",
        "a (B, max_new_tokens) tensor of padding filled column by column and cut to the steps taken",
    ),
    Rewrite(
        "greedy: while loop, alive flags, growing output",
        "greedy_decode",
        _GREEDY_HEAD
        + """
    state = model.encode(src, src_lens)
    y_prev = torch.full((B,), bos_id, dtype=torch.long, device=src.device)
    alive = torch.ones(B, dtype=torch.bool, device=src.device)
    out = src.new_empty((B, 0))
    steps_attn = []
    while out.shape[1] < max_new_tokens and bool(alive.any()):
        logits, state, attn = model.decode_step(y_prev, state)
        y = torch.where(alive, logits.max(dim=-1).indices, pad_id)
        out = torch.cat([out, y.unsqueeze(1)], dim=1)
        steps_attn.append(attn)
        alive = alive & (y != eos_id)
        y_prev = y
    attn_out = None if steps_attn[0] is None else torch.stack(steps_attn, dim=1)
    model.train(was_training)
    return out, attn_out
""",
        "a while loop on the sentences still alive, the output grown with torch.cat",
    ),
    Rewrite(
        "greedy: raw predictions fed back, flags from src_lens",
        "greedy_decode",
        _GREEDY_HEAD
        + """
    state = model.encode(src, src_lens)
    y_prev = torch.full_like(src[:, 0], bos_id)
    finished = torch.zeros_like(src_lens, dtype=torch.bool).to(src.device)
    tokens, weights = [], []
    for _ in range(max_new_tokens):
        logits, state, attn = model.decode_step(y_prev, state)
        pred = logits.argmax(-1)
        tokens.append(torch.where(finished, torch.full_like(pred, pad_id), pred))
        weights.append(attn)
        finished = finished | (pred == eos_id)
        y_prev = pred  # finished sentences' inputs do not matter: their tokens are padding
        if finished.all():
            break
    model.train(was_training)
    attn_out = torch.stack(weights, dim=-2) if weights[0] is not None else None
    return torch.stack(tokens, dim=-1), attn_out
""",
        "feeds back the raw argmax, flags made like src_lens and moved to src's device, stacks on dim=-2",
    ),
]
