"""ch03_self_attention's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "softmax over queries",
        "scaled_dot_product_attention",
        (("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)"),),
        "softmax over the wrong axis",
    ),
    Mutant("no scaling", "scaled_dot_product_attention", ((" / math.sqrt(d_k)", ""),), "missing 1/sqrt(d_k)"),
    Mutant("scale by d_k", "scaled_dot_product_attention", (("math.sqrt(d_k)", "d_k"),), "divides by d_k"),
    Mutant(
        "scale by sqrt(d_v)",
        "scaled_dot_product_attention",
        (("math.sqrt(d_k)", "math.sqrt(v.shape[-1])"),),
        "scales by the wrong width (only right when d_v == d_k)",
    ),
    Mutant(
        "scale by sqrt(d_model)",
        "SelfAttention",
        (
            (
                "return scaled_dot_product_attention(q, k, v, mask)",
                "w = torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(self.d_model)).masked_fill(~mask, -1e9)"
                " if mask is not None else q @ k.transpose(-2, -1) / math.sqrt(self.d_model), -1)\n"
                "        return w @ v, w",
            ),
        ),
        "an inline attention scaled by sqrt(d_model) instead of sqrt(d_k)",
    ),
    Mutant(
        "mask polarity inverted",
        "scaled_dot_product_attention",
        (
            ("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),
            ("weights.masked_fill(~mask,", "weights.masked_fill(mask,"),
        ),
        "treats True as 'masked out'",
    ),
    Mutant(
        "mask after softmax",
        "scaled_dot_product_attention",
        (("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", "pass"),),
        "zeros masked weights after the softmax without renormalising",
    ),
    Mutant(
        "mask ignored",
        "scaled_dot_product_attention",
        (
            ("scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)", "pass"),
            ("weights = weights.masked_fill(~mask, 0.0)", "pass"),
        ),
        "never applies the mask",
    ),
    Mutant(
        "-inf fill gives NaN",
        "scaled_dot_product_attention",
        (("torch.finfo(scores.dtype).min", "float('-inf')"), ("weights = weights.masked_fill(~mask, 0.0)", "pass")),
        "fully masked rows become NaN",
    ),
    Mutant(
        "weights not normalised",
        "scaled_dot_product_attention",
        (("torch.softmax(scores, dim=-1)", "torch.exp(scores)"),),
        "exp without normalisation",
    ),
    Mutant(
        "transpose of dims 1 and 2",
        "scaled_dot_product_attention",
        (("k.transpose(-2, -1)", "k.transpose(1, 2)"),),
        "only right for 3-D inputs",
    ),
    Mutant(
        "causal hides the diagonal",
        "causal_mask",
        (("return j <= i", "return j < i"),),
        "off by one: a token cannot see itself",
    ),
    Mutant(
        "causal upper triangle",
        "causal_mask",
        (("return j <= i", "return j >= i"),),
        "lets every token see the future instead of the past",
    ),
    Mutant(
        "causal top-left aligned",
        "causal_mask",
        ((" + (T_k - T_q)", ""),),
        "wrong for T_k > T_q (decoding with a cache)",
    ),
    Mutant(
        "causal ignores device",
        "causal_mask",
        (
            ("torch.arange(T_q, device=device)", "torch.arange(T_q)"),
            ("torch.arange(T_k, device=device)", "torch.arange(T_k)"),
        ),
        "always builds the mask on the CPU",
    ),
    Mutant(
        "padding mask off by one",
        "attention_mask_from_lengths",
        (("positions[None, :] < lengths[:, None]", "positions[None, :] <= lengths[:, None]"),),
        "marks one pad token as real",
    ),
    Mutant(
        "padding mask inverted",
        "attention_mask_from_lengths",
        (("positions[None, :] < lengths[:, None]", "positions[None, :] >= lengths[:, None]"),),
        "True at the padding",
    ),
    Mutant(
        "padding mask not broadcast",
        "attention_mask_from_lengths",
        (("positions[None, :] < lengths[:, None]", "(positions < lengths).expand(len(lengths), T_k)"),),
        "compares without broadcasting over the batch: only runs when B == T_k, and is wrong then",
    ),
    Mutant("keys from W_q", "SelfAttention", (("self.W_k(x)", "self.W_q(x)"),), "projects keys with W_q"),
    Mutant(
        "mask not passed on",
        "SelfAttention",
        (("scaled_dot_product_attention(q, k, v, mask)", "scaled_dot_product_attention(q, k, v)"),),
        "the module ignores its mask",
    ),
    Mutant(
        "positions on the CPU",
        "attention_mask_from_lengths",
        (("torch.arange(T_k, device=lengths.device)", "torch.arange(T_k)"),),
        "torch.arange without device=: the mask cannot be built for lengths on a GPU",
    ),
    Mutant(
        "fill -1e9",
        "scaled_dot_product_attention",
        (("torch.finfo(scores.dtype).min", "-1e9"),),
        "a fixed fill value that overflows float16",
    ),
    Mutant(
        "fill -1e4",
        "scaled_dot_product_attention",
        (("torch.finfo(scores.dtype).min", "-1e4"),),
        "a fill value that real scores can go below: masked keys then win the softmax",
    ),
    Mutant(
        "fill -6e4",
        "scaled_dot_product_attention",
        (("torch.finfo(scores.dtype).min", "-6e4"),),
        "a fill that fits float16 but that float32 scores can go below",
    ),
    Mutant(
        "fill float16's minimum in every dtype",
        "scaled_dot_product_attention",
        (("torch.finfo(scores.dtype).min", "torch.finfo(torch.float16).min"),),
        "-65504 for every dtype: float32 scores can go below it",
    ),
    Mutant(
        "softmax by hand without the max",
        "scaled_dot_product_attention",
        (
            (
                "weights = torch.softmax(scores, dim=-1)",
                "weights = torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)",
            ),
        ),
        "exp of the raw scores: overflows (inf / inf = NaN) for large scores, 0 / 0 for very negative ones",
    ),
    Mutant(
        "QKᵀ before the scaling",
        "scaled_dot_product_attention",
        (("(q / math.sqrt(d_k)) @ k.transpose(-2, -1)", "q @ k.transpose(-2, -1) / math.sqrt(d_k)"),),
        "QKᵀ first, then the division: in float16 the product passes 65 504 (inf) where the scaled scores fit",
    ),
    Mutant(
        "bmm over flattened batch dims",
        "scaled_dot_product_attention",
        (
            (
                "scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)",
                "scores = torch.bmm((q / math.sqrt(d_k)).flatten(0, -3), k.flatten(0, -3).transpose(1, 2)).view("
                "*q.shape[:-1], k.shape[-2])",
            ),
        ),
        "torch.bmm on the batch dims flattened: fails for batch-less (T, d) inputs",
    ),
    Mutant(
        "padding mask unsqueezed for heads",
        "scaled_dot_product_attention",
        (
            (
                "    if mask is not None:\n        # The most",
                "    if mask is not None and mask.ndim == 3:\n        mask = mask[:, None]\n"
                "    if mask is not None:\n        # The most",
            ),
        ),
        "assumes a 3-D mask is (B, T_q, T_k) of 4-D scores and adds a head axis: wrong for 3-D inputs",
    ),
    Mutant(
        "causal mask as floats",
        "causal_mask",
        (("return j <= i", "return (j <= i).float()"),),
        "a 0/1 float mask instead of a bool one",
    ),
    Mutant(
        "padding mask ignores T_k",
        "attention_mask_from_lengths",
        (("torch.arange(T_k, device=lengths.device)", "torch.arange(int(lengths.max()), device=lengths.device)"),),
        "always pads to the longest length, whatever T_k asks",
    ),
    Mutant(
        "padding mask as integers",
        "attention_mask_from_lengths",
        (("return positions[None, :] < lengths[:, None]", "return (positions[None, :] < lengths[:, None]).long()"),),
        "a 0/1 integer mask instead of a bool one",
    ),
    Mutant("queries from W_k", "SelfAttention", (("self.W_q(x)", "self.W_k(x)"),), "projects queries with W_k"),
    Mutant(
        "mask applied to the queries' axis",
        "SelfAttention",
        (
            (
                "return scaled_dot_product_attention(q, k, v, mask)",
                "return scaled_dot_product_attention(q, k, v, mask if mask is None else mask.transpose(-2, -1))",
            ),
        ),
        "transposes the mask: a (T, T) causal mask then hides the past, a (B, 1, T) padding mask no longer fits",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "einsum scores",
        "scaled_dot_product_attention",
        (("(q / math.sqrt(d_k)) @ k.transpose(-2, -1)", 'torch.einsum("...qd,...kd->...qk", q / math.sqrt(d_k), k)'),),
        "torch.einsum instead of matmul with a transpose",
    ),
    Alternative(
        "-inf, then NaN re-zeroed",
        "scaled_dot_product_attention",
        (
            ("torch.finfo(scores.dtype).min", 'float("-inf")'),
            ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-1).nan_to_num(0.0)"),
        ),
        "fills with -inf and turns the NaN of fully masked rows into zeros",
    ),
    Alternative(
        "torch.where instead of masked_fill",
        "scaled_dot_product_attention",
        (
            (
                "scores.masked_fill(~mask, torch.finfo(scores.dtype).min)",
                "torch.where(mask, scores, torch.finfo(scores.dtype).min)",
            ),
            ("weights.masked_fill(~mask, 0.0)", "torch.where(mask, weights, 0.0)"),
        ),
        "torch.where with scalar fills",
    ),
    Alternative(
        "float64 softmax",
        "scaled_dot_product_attention",
        (("torch.softmax(scores, dim=-1)", "torch.softmax(scores.double(), dim=-1).to(scores.dtype)"),),
        "the softmax in float64, cast back to the inputs' dtype",
    ),
    Alternative(
        "keys scaled first",
        "scaled_dot_product_attention",
        (("(q / math.sqrt(d_k)) @ k.transpose(-2, -1)", "q @ (k * d_k**-0.5).transpose(-2, -1)"),),
        "scales k instead of q before the product",
    ),
    Alternative(
        "causal mask by tril",
        "causal_mask",
        (("return j <= i", "return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q)"),),
        "Tensor.tril with an offset instead of comparing positions",
    ),
    Alternative(
        "padding mask by expand",
        "attention_mask_from_lengths",
        (("positions[None, :] < lengths[:, None]", "positions.expand(len(lengths), T_k) < lengths.unsqueeze(1)"),),
        "explicit expand and unsqueeze instead of None-indexing",
    ),
    Alternative(
        "F.linear projections",
        "SelfAttention",
        (
            (
                "self.W_q(x), self.W_k(x), self.W_v(x)",
                "(torch.nn.functional.linear(x, W.weight, W.bias) for W in (self.W_q, self.W_k, self.W_v))",
            ),
        ),
        "the projections through F.linear",
    ),
]


# Whole answers written from the page and the notebook, not from the reference (each a complete exercise cell).
_SDPA_HEAD = head(
    "ch03_self_attention", "scaled_dot_product_attention"
)  # the stub's given text, as the release notebook has it


_SELF_ATTENTION_INIT = head(
    "ch03_self_attention", "SelfAttention"
)  # the stub's given text, as the release notebook has it


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


# The checks at the edge of the dtype's range (``extremes=True``) -> correct answers of this catalogue that compute
# what they test by another stable formula: such a check's tolerance must let those through (issue 38).
STABLE_FOR: dict[str, tuple[str, ...]] = {
    "_sdpa_large_scores": ("sdpa: float64 inside, stable softmax by hand",),
    "_sdpa_half_precision_large_products": ("keys scaled first", "sdpa: queries scaled first, weights times the mask"),
}
