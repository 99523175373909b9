"""Answers to the exercises of ch04_multi_head_attention written from scratch (see tests/rewrites/__init__.py)."""
# ruff: noqa: F821 - the heads of the exercise cells (_SDPA_HEAD ...) come from the checks module, by globals().update

from autograder import ch04_multi_head_attention as _checks
from autograder.core import Rewrite

globals().update({k: v for k, v in vars(_checks).items() if not k.startswith("__")})  # the checks' helpers

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
