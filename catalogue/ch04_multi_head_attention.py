"""ch04_multi_head_attention's catalogue."""

from catalogue.entries import Alternative, Mutant, Rewrite
from catalogue.stubs import head

# --------------------------------------------------------------------------------------------------
# The catalogue of plausible student bugs; tests/ asserts each is caught by at least one check.
# --------------------------------------------------------------------------------------------------

MUTANTS = [
    Mutant(
        "split without transpose",
        "split_heads",
        (("return x.view(B, T, n_heads, d_k).transpose(1, 2)", "return x.reshape(B, n_heads, T, d_k)"),),
        "reshapes (B, T, d_model) straight to (B, H, T, d_k): a head's 'tokens' are pieces of several tokens",
    ),
    Mutant(
        "heads strided",
        "split_heads",
        (
            (
                "return x.view(B, T, n_heads, d_k).transpose(1, 2)",
                "return x.view(B, T, d_k, n_heads).permute(0, 3, 1, 2)",
            ),
        ),
        "head i takes every H-th feature instead of a contiguous block (not nn.MultiheadAttention's layout)",
    ),
    Mutant(
        "merge without transpose",
        "merge_heads",
        (("return x.transpose(1, 2).reshape(B, T, H * d_k)", "return x.reshape(B, T, H * d_k)"),),
        "flattens (B, H, T, d_k) without bringing T forward",
    ),
    Mutant(
        "merge transposes the wrong axes",
        "merge_heads",
        (("x.transpose(1, 2).reshape", "x.transpose(2, 3).reshape"),),
        "swaps T and d_k instead of H and T",
    ),
    Mutant(
        "scale by sqrt(d_model)",
        "MultiHeadAttention",
        (
            (
                "scaled_dot_product_attention(q, k, v, mask)",
                "scaled_dot_product_attention(q * (self.d_k / self.d_model) ** 0.5, k, v, mask)",
            ),
        ),
        "scores divided by sqrt(d_model) instead of sqrt(d_k)",
    ),
    Mutant(
        "output projection missing",
        "MultiHeadAttention",
        (("return self.W_o(merge_heads(heads)), weights", "return merge_heads(heads), weights"),),
        "returns the concatenated heads without W_O",
    ),
    Mutant(
        "keys from the query",
        "MultiHeadAttention",
        (("self.W_k(key)", "self.W_k(query)"),),
        "self-attention hard-wired: wrong (or crashes) for cross-attention",
    ),
    Mutant(
        "values from the key",
        "MultiHeadAttention",
        (("self.W_v(value)", "self.W_v(key)"),),
        "projects the key tensor as values",
    ),
    Mutant(
        "mask ignored",
        "MultiHeadAttention",
        (("scaled_dot_product_attention(q, k, v, mask)", "scaled_dot_product_attention(q, k, v)"),),
        "never passes the mask on",
    ),
    Mutant(
        "weights averaged over heads",
        "MultiHeadAttention",
        (("return self.W_o(merge_heads(heads)), weights", "return self.W_o(merge_heads(heads)), weights.mean(1)"),),
        "returns (B, T_q, T_k) instead of per-head weights",
    ),
    Mutant(
        "attention dropout in eval mode",
        "MultiHeadAttention",
        (
            ("if self.training and self.dropout.p > 0:", "if self.dropout.p > 0:"),
            ("heads = self.dropout(weights) @ v", "heads = F.dropout(weights, self.dropout.p) @ v"),
        ),
        "F.dropout without training=self.training: attention is random at evaluation time too",
    ),
    Mutant(
        "attention dropout forgotten",
        "MultiHeadAttention",
        (("heads = self.dropout(weights) @ v", "pass"),),
        "the dropout argument is accepted and ignored",
    ),
    Mutant(
        "masked scores filled with -1e9",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, -1e9)\n"
                "        weights = torch.softmax(scores, dim=-1)\n"
                "        heads = weights @ v",
            ),
        ),
        "attention written out with a -1e9 fill, which overflows float16",
    ),
    Mutant(
        "inline attention, fill -1e4",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "scores = (q / self.d_k**0.5) @ k.transpose(-2, -1)\n"
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, -1e4)\n"
                "        weights = torch.softmax(scores, dim=-1)\n"
                "        heads = weights @ v",
            ),
        ),
        "attention written out with a -1e4 fill (float16-safe), which real scores can go below",
    ),
    Mutant(
        "inline attention, softmax by hand",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "scores = (q / self.d_k**0.5) @ k.transpose(-2, -1)\n"
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, float('-inf'))\n"
                "        weights = scores.exp() / scores.exp().sum(-1, keepdim=True)\n"
                "        heads = weights @ v",
            ),
        ),
        "exp of the raw scores: inf / inf for large scores, 0 / 0 for very negative ones",
    ),
    Mutant(
        "inline attention, QKᵀ before the scaling",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "scores = q @ k.transpose(-2, -1) / self.d_k**0.5\n"
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, torch.finfo(q.dtype).min)\n"
                "        weights = torch.softmax(scores, dim=-1)\n"
                "        heads = weights @ v",
            ),
        ),
        "QKᵀ first, then the division: in float16 the products pass 65 504 (inf) where the scaled scores fit",
    ),
    Mutant(
        "textbook attention: einsum QKᵀ, then ÷√d_k, finfo.min fill",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                'scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.d_k**0.5\n'
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
                "        weights = scores.softmax(dim=-1)\n"
                '        heads = torch.einsum("bhqk,bhkd->bhqd", weights, v)',
            ),
        ),
        "the textbook's order, einsum then the division: in float16 the products q·k pass 65 504 (inf, then NaN) "
        "where the scaled scores fit; the notebook says to divide q first",
    ),
    Mutant(
        "2-D mask read as a key padding mask",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "if mask is not None and mask.ndim == 2:\n"
                "            mask = mask[:, None, None, :]  # (B, T_k) -> (B, 1, 1, T_k)\n"
                "        heads, weights = scaled_dot_product_attention(q, k, v, mask)",
            ),
        ),
        "a bare (T_q, T_k) mask is taken for a (B, T_k) padding mask",
    ),
    Mutant(
        "head axis added to the mask",
        "MultiHeadAttention",
        (
            (
                "scaled_dot_product_attention(q, k, v, mask)",
                "scaled_dot_product_attention(q, k, v, None if mask is None else mask.unsqueeze(1))",
            ),
        ),
        "unsqueezes a head axis into a mask that already broadcasts to (B, H, T_q, T_k)",
    ),
    Mutant(
        "dropout on the heads' outputs",
        "MultiHeadAttention",
        (("heads = self.dropout(weights) @ v", "heads = self.dropout(heads)"),),
        "dropout applied to the heads' outputs instead of the attention weights",
    ),
    Mutant(
        "dropped weights returned",
        "MultiHeadAttention",
        (("heads = self.dropout(weights) @ v", "weights = self.dropout(weights)\n            heads = weights @ v"),),
        "returns the attention weights after dropout (the docstring: before)",
    ),
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES: list[Alternative] = [
    Alternative(
        "reshape and permute",
        "split_heads",
        (("x.view(B, T, n_heads, d_k).transpose(1, 2)", "x.reshape(B, T, n_heads, d_k).permute(0, 2, 1, 3)"),),
        "reshape/permute instead of view/transpose",
    ),
    Alternative(
        "unflatten",
        "split_heads",
        (("x.view(B, T, n_heads, d_k).transpose(1, 2)", "x.unflatten(-1, (n_heads, d_k)).transpose(-3, -2)"),),
        "Tensor.unflatten, negative dims",
    ),
    Alternative(
        "permute and flatten",
        "merge_heads",
        (("x.transpose(1, 2).reshape(B, T, H * d_k)", "x.permute(0, 2, 1, 3).flatten(2)"),),
        "permute then flatten",
    ),
    Alternative(
        "contiguous view",
        "merge_heads",
        (("x.transpose(1, 2).reshape(B, T, H * d_k)", "x.transpose(1, 2).contiguous().view(B, T, H * d_k)"),),
        "the classic .contiguous().view(...)",
    ),
    Alternative(
        "inline attention, q and k each scaled by d_k^(-1/4)",
        "MultiHeadAttention",
        (
            (
                "heads, weights = scaled_dot_product_attention(q, k, v, mask)",
                "s = self.d_k**-0.25  # the 1/sqrt(d_k) split between q and k: the products stay small too\n"
                '        scores = torch.einsum("bhqd,bhkd->bhqk", q * s, k * s)\n'
                "        if mask is not None:\n"
                "            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
                "        weights = scores.softmax(dim=-1)\n"
                "        if mask is not None:\n"
                "            weights = weights.masked_fill(~mask, 0.0)\n"
                '        heads = torch.einsum("bhqk,bhkd->bhqd", weights, v)',
            ),
        ),
        "attention written out with einsum, scaled before the product as the notebook says, but half the scaling "
        "on q and half on k",
    ),
    Alternative(
        "F.dropout with the module's mode",
        "MultiHeadAttention",
        (("self.dropout(weights) @ v", "F.dropout(weights, self.dropout.p, training=self.training) @ v"),),
        "functional dropout on the weights that follows .train()/.eval()",
    ),
    Alternative(
        "dropout branch without the p > 0 test",
        "MultiHeadAttention",
        (("if self.training and self.dropout.p > 0:", "if self.training:"),),
        "recomputes the heads through dropout whenever training",
    ),
]


# Whole answers written from the page and the notebook, not from the reference (each a complete exercise cell).
_SPLIT_HEAD = head("ch04_multi_head_attention", "split_heads")  # the stub's given text, as the release notebook has it
_MERGE_HEAD = head("ch04_multi_head_attention", "merge_heads")  # the stub's given text, as the release notebook has it

_MHA_HEAD = head(
    "ch04_multi_head_attention", "MultiHeadAttention"
)  # the stub's given text, as the release notebook has it
REWRITES: list[Rewrite] = []

REWRITES += [
    Rewrite(
        "split: reshape and swapaxes",
        "split_heads",
        _SPLIT_HEAD
        + """
    B, T, _ = x.shape
    return x.reshape(B, T, n_heads, -1).swapaxes(1, 2)
""",
        "reshape with an inferred d_k, then Tensor.swapaxes",
    ),
    Rewrite(
        "split: unflatten and movedim",
        "split_heads",
        _SPLIT_HEAD
        + """
    d_k = x.shape[-1] // n_heads
    return torch.movedim(x.unflatten(-1, (n_heads, d_k)), -2, 1)
""",
        "the feature axis unflattened into (H, d_k), the head axis moved next to the batch",
    ),
    Rewrite(
        "split: a loop over the heads",
        "split_heads",
        _SPLIT_HEAD
        + """
    d_k = x.size(-1) // n_heads
    heads = [x[:, :, i * d_k : (i + 1) * d_k] for i in range(n_heads)]  # head i: its block of features
    return torch.stack(heads, dim=1)
""",
        "slices each head's block of features in a Python loop and stacks them on a new axis 1",
    ),
    Rewrite(
        "split: view and permute",
        "split_heads",
        _SPLIT_HEAD
        + """
    batch, length, d_model = x.size()
    return x.view(batch, length, n_heads, d_model // n_heads).permute(0, 2, 1, 3)
""",
        "view to (B, T, H, d_k) and permute(0, 2, 1, 3)",
    ),
    Rewrite(
        "merge: cat over the heads",
        "merge_heads",
        _MERGE_HEAD
        + """
    return torch.cat([x[:, h] for h in range(x.shape[1])], dim=-1)
""",
        "the paper's Concat literally: a Python loop over the heads and torch.cat on the feature axis",
    ),
    Rewrite(
        "merge: movedim and flatten",
        "merge_heads",
        _MERGE_HEAD
        + """
    return torch.movedim(x, 1, 2).flatten(start_dim=2)
""",
        "moves the head axis behind T and flattens (H, d_k)",
    ),
    Rewrite(
        "merge: permute, contiguous, view with -1",
        "merge_heads",
        _MERGE_HEAD
        + """
    B, H, T, d_k = x.size()
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, -1)
""",
        "permute, .contiguous() and a view with an inferred width",
    ),
    Rewrite(
        "MHA: a loop over the heads",
        "MultiHeadAttention",
        _MHA_HEAD
        + """
        B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
        Q, K, V = self.W_q(query), self.W_k(key), self.W_v(value)
        outputs, all_weights = [], []
        for h in range(self.n_heads):
            cols = slice(h * self.d_k, (h + 1) * self.d_k)
            m = None if mask is None else mask.expand(B, self.n_heads, T_q, T_k)[:, h]
            out_h, w_h = scaled_dot_product_attention(Q[..., cols], K[..., cols], V[..., cols], m)
            if self.training:
                out_h = self.dropout(w_h) @ V[..., cols]
            outputs.append(out_h)
            all_weights.append(w_h)
        return self.W_o(torch.cat(outputs, dim=-1)), torch.stack(all_weights, dim=1)
""",
        "one head at a time: its columns of the projections, its slice of the expanded mask, then concat",
    ),
    Rewrite(
        "MHA: einsum, -inf and nan_to_num",
        "MultiHeadAttention",
        "import math\n"
        + _MHA_HEAD
        + """
        B, T_q, _ = query.shape
        T_k = key.shape[1]
        q = self.W_q(query).view(B, T_q, self.n_heads, self.d_k)
        k = self.W_k(key).view(B, T_k, self.n_heads, self.d_k)
        v = self.W_v(value).view(B, T_k, self.n_heads, self.d_k)
        scores = torch.einsum("bqhd,bkhd->bhqk", q / math.sqrt(self.d_k), k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        heads = torch.einsum("bhqk,bkhd->bqhd", self.dropout(weights), v)
        return self.W_o(heads.reshape(B, T_q, self.d_model)), weights
""",
        "attention written out with einsum on (B, T, H, d_k) tensors (no split/merge helpers), -inf fill",
    ),
    Rewrite(
        "MHA: fused projection for self-attention",
        "MultiHeadAttention",
        _MHA_HEAD
        + """
        if query is key and key is value:  # self-attention: one matrix multiply for Q, K and V
            weight = torch.cat([self.W_q.weight, self.W_k.weight, self.W_v.weight])
            bias = None if self.W_q.bias is None else torch.cat([self.W_q.bias, self.W_k.bias, self.W_v.bias])
            q, k, v = F.linear(query, weight, bias).chunk(3, dim=-1)
        else:
            q, k, v = self.W_q(query), self.W_k(key), self.W_v(value)
        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training:
            heads = F.dropout(weights, p=self.dropout.p, training=True) @ v
        return self.W_o(merge_heads(heads)), weights
""",
        "one F.linear with the three weights stacked when query, key and value are the same tensor",
    ),
    Rewrite(
        "MHA: float64 inside, finfo fill",
        "MultiHeadAttention",
        _MHA_HEAD
        + """
        dtype = query.dtype
        q = split_heads(self.W_q(query), self.n_heads).double()
        k = split_heads(self.W_k(key), self.n_heads).double()
        v = split_heads(self.W_v(value), self.n_heads).double()
        scores = (q * self.d_k**-0.5) @ k.mT
        if mask is not None:
            scores = torch.where(mask, scores, torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        if mask is not None:
            weights = weights * mask
        heads = self.dropout(weights) @ v
        return self.W_o(merge_heads(heads).to(dtype)), weights.to(dtype)
""",
        "the attention in float64 (finfo fill, weights times the mask), cast back before W_o",
    ),
]


# The checks at the edge of the dtype's range (``extremes=True``) -> correct answers of this catalogue that compute
# what they test by another stable formula: such a check's tolerance must let those through (issue 38).
STABLE_FOR: dict[str, tuple[str, ...]] = {
    "_mha_half_large_products_visible": ("inline attention, q and k each scaled by d_k^(-1/4)",),
    "_mha_half_large_products": (
        "inline attention, q and k each scaled by d_k^(-1/4)",
        "MHA: float64 inside, finfo fill",
    ),
}
