"""ch02_bahdanau_attention's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; each must be caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "multiplicative instead of additive",
        "additive_score",
        (("W_s.unsqueeze(1) + U_h", "W_s.unsqueeze(1) * U_h"),),
        "multiplies query and key projections",
    ),
    Mutant(
        "no tanh",
        "additive_score",
        (("torch.tanh(W_s.unsqueeze(1) + U_h)", "W_s.unsqueeze(1) + U_h"),),
        "drops the nonlinearity",
    ),
    Mutant("sum instead of v", "additive_score", (("hidden @ v", "hidden.sum(-1)"),), "ignores v_a"),
    Mutant(
        "W not transposed",
        "additive_score",
        (("s_prev @ W.T", "s_prev @ W"),),
        "only runs when A == N, and is wrong then",
    ),
    Mutant(
        "query broadcast over the batch",
        "additive_score",
        (("W_s.unsqueeze(1)", "W_s.unsqueeze(0)"),),
        "adds every sentence's query to every sentence (only runs when B == S)",
    ),
    Mutant(
        "mask ignored",
        "masked_softmax",
        (
            ("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, S)", "pass"),
            ("torch.softmax(scores, dim=-1) * mask", "torch.softmax(scores, dim=-1)"),
        ),
        "padding gets weight",
    ),
    Mutant(
        "mask polarity inverted",
        "masked_softmax",
        (("masked_fill(~mask,", "masked_fill(mask,"), ("* mask", "* ~mask")),
        "treats True as padding",
    ),
    Mutant(
        "-inf fill gives NaN",
        "masked_softmax",
        (
            ("torch.finfo(scores.dtype).min)  # (B, S)", "float('-inf'))  # (B, S)"),
            ("torch.softmax(scores, dim=-1) * mask", "torch.softmax(scores, dim=-1)"),
            ("weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)", "pass"),
        ),
        "fully masked rows become NaN",
    ),
    Mutant(
        "zeroed after softmax, not renormalised",
        "masked_softmax",
        (
            ("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # (B, S)", "pass"),
            ("weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)", "pass"),
        ),
        "rows no longer sum to 1",
    ),
    Mutant(
        "softmax over the batch",
        "masked_softmax",
        (("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=0)"),),
        "normalises over sentences instead of source positions",
    ),
    Mutant(
        "unweighted sum",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", "h.sum(dim=1)"),),
        "ignores the weights",
    ),
    Mutant(
        "mean of annotations",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", "h.mean(dim=1)"),),
        "a uniform average",
    ),
    Mutant(
        "sum over features",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", "(alpha.unsqueeze(-1) * h).sum(dim=-1)"),),
        "sums over the wrong axis",
    ),
    Mutant(
        "fill -1e9",
        "masked_softmax",
        (("torch.finfo(scores.dtype).min)", "-1e9)"),),
        "a fixed fill value that overflows float16",
    ),
    Mutant(
        "fill -1e4",
        "masked_softmax",
        (("torch.finfo(scores.dtype).min)", "-1e4)"),),
        "a fill value that real scores can go below",
    ),
    Mutant(
        "fill -6e4",
        "masked_softmax",
        (("torch.finfo(scores.dtype).min)  # (B, S)", "-6e4)  # (B, S)"),),
        "a fill that fits float16 but that float32 scores can go below",
    ),
    Mutant(
        "fill float16's minimum in every dtype",
        "masked_softmax",
        (("torch.finfo(scores.dtype).min)  # (B, S)", "torch.finfo(torch.float16).min)  # (B, S)"),),
        "-65504 for every dtype: float32 scores can go below it",
    ),
    Mutant(
        "tanh after the dot product with v",
        "additive_score",
        (
            ("hidden = torch.tanh(W_s.unsqueeze(1) + U_h)", "hidden = W_s.unsqueeze(1) + U_h"),
            ("hidden @ v", "torch.tanh(hidden @ v)"),
        ),
        "squashes the score instead of the hidden layer",
    ),
    Mutant(
        "squeeze() of the scores",
        "additive_score",
        (("scores = hidden @ v", "scores = (hidden @ v[:, None]).squeeze()"),),
        "a bare squeeze() also drops the source axis of a one-word sentence (and the batch axis of B = 1)",
    ),
    Mutant(
        "exp without subtracting the max",
        "masked_softmax",
        (("weights = torch.softmax(scores, dim=-1) * mask", "weights = torch.exp(scores) * mask"),),
        "the softmax by hand without its max: exp overflows for large scores (inf / inf = NaN)",
    ),
    Mutant(
        "float32 softmax not cast back",
        "masked_softmax",
        (("torch.softmax(scores, dim=-1) * mask", "torch.softmax(scores.float(), dim=-1) * mask"),),
        "half-precision scores give float32 weights",
    ),
    Mutant(
        "squeeze() of the context",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", "torch.bmm(alpha.unsqueeze(1), h).squeeze()"),),
        "a bare squeeze() also drops the batch axis of B = 1",
    ),
    Mutant(
        "float32 accumulator",
        "context_vector",
        (
            (
                "c = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)",
                "c = torch.zeros(h.shape[0], h.shape[2], device=h.device)\n"
                "    for j in range(h.shape[1]):\n"
                "        c += alpha[:, j, None] * h[:, j]",
            ),
        ),
        "an accumulator made without dtype=: float64 inputs give a float32 context",
    ),
    Mutant(
        "accumulator on the CPU",
        "context_vector",
        (
            (
                "c = torch.bmm(alpha.unsqueeze(1), h).squeeze(1)",
                "c = torch.zeros(h.shape[0], h.shape[2], dtype=h.dtype)\n"
                "    for j in range(h.shape[1]):\n"
                "        c = c + alpha[:, j, None] * h[:, j]",
            ),
        ),
        "an accumulator made without device=: fails on a GPU",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "einsum for the scores",
        "additive_score",
        (("scores = hidden @ v", 'scores = torch.einsum("bsa,a->bs", hidden, v)'),),
        "torch.einsum instead of matmul",
    ),
    Alternative(
        "F.linear for W s",
        "additive_score",
        (("W_s = s_prev @ W.T", "W_s = torch.nn.functional.linear(s_prev, W)"),),
        "F.linear(s, W) computes s W^T",
    ),
    Alternative(
        "torch.where instead of masked_fill",
        "masked_softmax",
        (
            (
                "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",
                "torch.where(mask, scores, torch.finfo(scores.dtype).min)",
            ),
        ),
        "torch.where with a scalar fill",
    ),
    Alternative(
        "-inf, then NaN re-zeroed",
        "masked_softmax",
        (
            ("torch.finfo(scores.dtype).min)  # (B, S)", 'float("-inf"))  # (B, S)'),
            ("torch.softmax(scores, dim=-1) * mask", "torch.softmax(scores, dim=-1).nan_to_num(0.0) * mask"),
        ),
        "fills with -inf and turns the NaN of fully masked rows into zeros",
    ),
    Alternative(
        "float64 inside",
        "masked_softmax",
        (
            (
                "weights = torch.softmax(scores, dim=-1) * mask",
                "weights = torch.softmax(scores.double(), dim=-1) * mask",
            ),
            (
                "weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(scores.dtype).tiny)",
                "weights = (weights / weights.sum(dim=-1, keepdim=True).clamp_min(1e-300)).to(scores.dtype)",
            ),
        ),
        "computes the softmax in float64 and casts back",
    ),
    Alternative(
        "einsum context",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", 'torch.einsum("bs,bsd->bd", alpha, h)'),),
        "torch.einsum instead of bmm",
    ),
    Alternative(
        "broadcast and sum",
        "context_vector",
        (("torch.bmm(alpha.unsqueeze(1), h).squeeze(1)", "(alpha.unsqueeze(-1) * h).sum(dim=1)"),),
        "weighted sum by broadcasting",
    ),
]


# Whole answers written from the page and the notebook, not from the reference (each a complete exercise cell).
_SCORE_HEAD = head("ch02_bahdanau_attention", "additive_score")  # the stub's given text, as the release notebook has it
_SOFTMAX_HEAD = head(
    "ch02_bahdanau_attention", "masked_softmax"
)  # the stub's given text, as the release notebook has it
_CONTEXT_HEAD = head(
    "ch02_bahdanau_attention", "context_vector"
)  # the stub's given text, as the release notebook has it


REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "score: einsum throughout",
        "additive_score",
        _SCORE_HEAD
        + """
    query = torch.einsum("an,bn->ba", W, s_prev)  # W_a s_{i-1}, one (A,) vector per sentence
    energy = torch.tanh(query[:, None, :] + U_h)  # (B, S, A)
    return torch.einsum("bsa,a->bs", energy, v)
""",
        "both products as einsum",
    ),
    Rewrite(
        "score: a loop over the source positions",
        "additive_score",
        _SCORE_HEAD
        + """
    Ws = torch.matmul(W, s_prev.unsqueeze(-1)).squeeze(-1)  # (B, A)
    columns = []
    for j in range(U_h.shape[1]):
        columns.append(torch.tanh(Ws + U_h[:, j, :]) @ v)  # (B,)
    return torch.stack(columns, dim=1)
""",
        "one source position at a time, W applied as W @ s (a column vector per sentence)",
    ),
    Rewrite(
        "score: broadcast product and sum",
        "additive_score",
        _SCORE_HEAD
        + """
    Ws = (W @ s_prev.T).T  # (A, B) -> (B, A)
    e = (v * torch.tanh(Ws.unsqueeze(-2) + U_h)).sum(dim=-1)
    return e
""",
        "W s as (W s^T)^T, v applied by broadcasting and summing over the alignment axis",
    ),
    Rewrite(
        "softmax: -inf, nan_to_num, torch.where",
        "masked_softmax",
        _SOFTMAX_HEAD
        + """
    filled = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    weights = torch.softmax(filled, dim=-1).nan_to_num(0.0)  # a fully masked row: NaN -> 0
    return torch.where(mask, weights, torch.zeros_like(weights))
""",
        "-inf at padding, the NaN of fully masked rows turned into zeros",
    ),
    Rewrite(
        "softmax: by hand, max subtracted",
        "masked_softmax",
        _SOFTMAX_HEAD
        + """
    lowest = torch.finfo(scores.dtype).min
    top = scores.masked_fill(~mask, lowest).max(dim=-1, keepdim=True).values
    e = torch.exp(torch.where(mask, scores - top, torch.zeros_like(scores))) * mask
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))
""",
        "exp of the scores minus the row's largest real score, zeroed at padding, divided by a guarded sum",
    ),
    Rewrite(
        "softmax: one row at a time",
        "masked_softmax",
        _SOFTMAX_HEAD
        + """
    rows = []
    for b in range(scores.shape[0]):
        row = torch.zeros_like(scores[b])
        if mask[b].any():
            row = row.masked_scatter(mask[b], torch.softmax(scores[b][mask[b]], dim=0))
        rows.append(row)
    return torch.stack(rows)
""",
        "a softmax over each sentence's real positions only, scattered back into a row of zeros",
    ),
    Rewrite(
        "context: matmul of a row vector",
        "context_vector",
        _CONTEXT_HEAD
        + """
    return torch.matmul(alpha.unsqueeze(-2), h).squeeze(-2)
""",
        "(B, 1, S) @ (B, S, D) with torch.matmul",
    ),
    Rewrite(
        "context: a loop over the source positions",
        "context_vector",
        _CONTEXT_HEAD
        + """
    c = h.new_zeros(h.shape[0], h.shape[2])
    for j in range(h.shape[1]):
        c = c + alpha[:, j].unsqueeze(1) * h[:, j]
    return c
""",
        "the weighted sum accumulated position by position in a tensor made with new_zeros",
    ),
    Rewrite(
        "context: annotations transposed",
        "context_vector",
        _CONTEXT_HEAD
        + """
    c = h.transpose(1, 2) @ alpha.unsqueeze(2)  # (B, D, S) @ (B, S, 1) -> (B, D, 1)
    return c[..., 0]
""",
        "h^T alpha as a batched matrix-vector product",
    ),
]
