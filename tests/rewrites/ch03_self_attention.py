"""Answers to the exercises of ch03_self_attention written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch03_self_attention as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "sdpa: einsum, -inf and torch.where",
        "scaled_dot_product_attention",
        _SDPA_HEAD
        + """
    scores = torch.einsum("...id,...jd->...ij", q / q.size(-1) ** 0.5, k)
    if mask is not None:
        scores = torch.where(mask, scores, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no key: NaN -> 0
    if mask is not None:
        weights = torch.where(mask, weights, torch.zeros_like(weights))
    output = torch.einsum("...ij,...jd->...id", weights, v)
    return output, weights
""",
        "einsum for both products, -inf fill with torch.where, NaN of fully masked rows turned into zeros",
    ),
    Rewrite(
        "sdpa: queries scaled first, weights times the mask",
        "scaled_dot_product_attention",
        _SDPA_HEAD
        + """
    import torch.nn.functional as F

    d_k = k.shape[-1]
    scores = torch.matmul(q / math.sqrt(d_k), k.mT)
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), torch.finfo(scores.dtype).min)
    weights = F.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask  # bool times float: exact zeros at masked keys, dtype kept
    return torch.matmul(weights, v), weights
""",
        "scales q before the product, k.mT, F.softmax, and multiplies the weights by the mask",
    ),
    Rewrite(
        "sdpa: float64 inside, stable softmax by hand",
        "scaled_dot_product_attention",
        _SDPA_HEAD
        + """
    q64, k64, v64 = q.double(), k.double(), v.double()
    scores = q64 @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1])
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    scores = scores.masked_fill(~allowed, -math.inf)
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))  # a fully masked row
    e = torch.where(allowed, torch.exp(scores - top), torch.zeros_like(scores))
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    return (weights @ v64).to(q.dtype), weights.to(q.dtype)
""",
        "float64 throughout, the softmax written out with its max subtracted, cast back to the inputs' dtype",
    ),
    Rewrite(
        "sdpa: reshape to 3-D and bmm",
        "scaled_dot_product_attention",
        _SDPA_HEAD
        + """
    *batch, T_q, d_k = q.shape
    T_k, d_v = k.shape[-2], v.shape[-1]
    q3, k3, v3 = q.reshape(-1, T_q, d_k), k.reshape(-1, T_k, d_k), v.reshape(-1, T_k, d_v)
    scores = torch.bmm(q3.div(math.sqrt(d_k)), k3.transpose(1, 2)).view(*batch, T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(q.dtype).min)
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0)
    out = torch.bmm(weights.reshape(-1, T_q, T_k), v3).view(*batch, T_q, d_v)
    return out, weights
""",
        "any leading dims flattened into one batch axis for torch.bmm, then restored",
    ),
    Rewrite(
        "causal: tril of ones",
        "causal_mask",
        '''
def causal_mask(T_q, T_k=None, *, device=None):
    """(T_q, T_k) bool, True where query i (at position T_k - T_q + i) may attend key j."""
    if T_k is None:
        T_k = T_q
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={T_q}, T_k={T_k}")
    return torch.tril(torch.ones(T_q, T_k, dtype=torch.bool, device=device), diagonal=T_k - T_q)
''',
        "torch.tril of a bool matrix of ones, shifted by T_k - T_q",
    ),
    Rewrite(
        "causal: not the strict upper triangle",
        "causal_mask",
        '''
def causal_mask(T_q, T_k=None, *, device=None):
    """(T_q, T_k) bool, True where query i (at position T_k - T_q + i) may attend key j."""
    T_k = T_q if T_k is None else T_k
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={T_q}, T_k={T_k}")
    future = torch.ones(T_q, T_k, device=device).triu(diagonal=T_k - T_q + 1).bool()
    return ~future
''',
        "the complement of the future (a float triu, then .bool())",
    ),
    Rewrite(
        "causal: offsets compared",
        "causal_mask",
        '''
def causal_mask(T_q, T_k=None, *, device=None):
    """(T_q, T_k) bool, True where query i (at position T_k - T_q + i) may attend key j."""
    if T_k is None:
        T_k = T_q
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={T_q}, T_k={T_k}")
    rows = torch.arange(T_q, device=device).unsqueeze(1)
    cols = torch.arange(T_k, device=device).unsqueeze(0)
    return cols - rows <= T_k - T_q
''',
        "key index minus query index against the offset T_k - T_q",
    ),
    Rewrite(
        "causal: a loop over the rows",
        "causal_mask",
        '''
def causal_mask(T_q, T_k=None, *, device=None):
    """(T_q, T_k) bool, True where query i (at position T_k - T_q + i) may attend key j."""
    if T_k is None:
        T_k = T_q
    if T_q < 1 or T_k < T_q:
        raise ValueError(f"causal_mask needs 1 <= T_q <= T_k, got T_q={T_q}, T_k={T_k}")
    mask = torch.zeros(T_q, T_k, dtype=torch.bool, device=device)
    for i in range(T_q):
        mask[i, : T_k - T_q + i + 1] = True  # query i sees keys up to its own position
    return mask
''',
        "fills each row's visible prefix in a Python loop",
    ),
    Rewrite(
        "lengths: comparison with .to(device)",
        "attention_mask_from_lengths",
        '''
def attention_mask_from_lengths(lengths, T_k=None):
    """(B, T_k) bool, True at the first lengths[b] positions of row b."""
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {tuple(lengths.shape)} {lengths.dtype}")
    if T_k is None:
        T_k = int(lengths.max()) if lengths.numel() else 0
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > T_k):
        raise ValueError(f"lengths must lie in [0, T_k={T_k}], got {lengths.tolist()}")
    steps = torch.arange(T_k).to(lengths.device)
    return lengths.unsqueeze(-1) > steps
''',
        "torch.arange made on the CPU and moved with .to(lengths.device); lengths > positions",
    ),
    Rewrite(
        "lengths: a loop over the sentences",
        "attention_mask_from_lengths",
        '''
def attention_mask_from_lengths(lengths, T_k=None):
    """(B, T_k) bool, True at the first lengths[b] positions of row b."""
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {tuple(lengths.shape)} {lengths.dtype}")
    if T_k is None:
        T_k = int(lengths.max()) if lengths.numel() else 0
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > T_k):
        raise ValueError(f"lengths must lie in [0, T_k={T_k}], got {lengths.tolist()}")
    mask = torch.zeros(len(lengths), T_k, dtype=torch.bool, device=lengths.device)
    for b, n in enumerate(lengths.tolist()):
        mask[b, :n] = True
    return mask
''',
        "sets each row's real tokens in a Python loop",
    ),
    Rewrite(
        "lengths: cumulative count",
        "attention_mask_from_lengths",
        '''
def attention_mask_from_lengths(lengths, T_k=None):
    """(B, T_k) bool, True at the first lengths[b] positions of row b."""
    if lengths.ndim != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D integer tensor (B,), got {tuple(lengths.shape)} {lengths.dtype}")
    if T_k is None:
        T_k = int(lengths.max()) if lengths.numel() else 0
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > T_k):
        raise ValueError(f"lengths must lie in [0, T_k={T_k}], got {lengths.tolist()}")
    ones = lengths.new_ones(lengths.shape[0], T_k)
    return ones.cumsum(dim=1) <= lengths.view(-1, 1)  # position p (1-based) is real when p <= length
''',
        "a running count of positions (new_ones, cumsum) compared with the lengths",
    ),
]


REWRITES += [
    Rewrite(
        "SelfAttention: attention written inline",
        "SelfAttention",
        _SELF_ATTENTION_INIT
        + """
        q = self.W_q(x)
        k = self.W_k(x)
        v = self.W_v(x)
        scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return weights @ v, weights
""",
        "the attention computed in forward itself (einsum, masked_fill), not through the exercise-1 function",
    ),
    Rewrite(
        "SelfAttention: one fused projection",
        "SelfAttention",
        _SELF_ATTENTION_INIT
        + """
        import torch.nn.functional as F

        weight = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight], dim=0)
        bias = None
        if self.W_q.bias is not None:
            bias = torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
        q, k, v = F.linear(x, weight, bias).split([self.d_k, self.d_k, self.d_v], dim=-1)
        return scaled_dot_product_attention(q, k, v, mask=mask)
""",
        "the three projections as one F.linear with concatenated weights, split afterwards",
    ),
    Rewrite(
        "SelfAttention: weights read by hand, -inf and nan_to_num",
        "SelfAttention",
        _SELF_ATTENTION_INIT
        + """
        q = x @ self.W_q.weight.T
        k = x @ self.W_k.weight.T
        v = x @ self.W_v.weight.T
        if self.W_q.bias is not None:
            q, k, v = q + self.W_q.bias, k + self.W_k.bias, v + self.W_v.bias
        scores = (q * self.d_k**-0.5) @ k.transpose(1, 2)
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return torch.bmm(weights, v), weights
""",
        "the projections from the Linear weights by hand, queries scaled first, -inf fill with NaN zeroed",
    ),
]
