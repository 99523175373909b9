"""Answers to the exercises of ch01_seq2seq written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch01_seq2seq as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

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
