"""Answers to the exercises of ch02_bahdanau_attention written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch02_bahdanau_attention as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

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
