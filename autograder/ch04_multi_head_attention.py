"""Checks for chapter 4, multi-head attention (notebook ``notebooks/ch04_multi_head_attention.ipynb``).

References are independent of the course's solution:

* head split/merge: hand formulas — head ``i`` is the ``i``-th contiguous chunk of the features
  (``torch.stack(x.chunk(H, -1), 1)``) and merging concatenates the heads (``torch.cat(x.unbind(1), -1)``);
* the module: ``torch.nn.MultiheadAttention(batch_first=True)`` into which the checks copy the student's
  ``W_q, W_k, W_v, W_o`` (its masks use the opposite polarity, True = masked out; the checks invert them);
* permutation equivariance: without positions, permuting the query tokens permutes the output rows, and
  permuting keys together with values changes nothing.

Sizes: batch, heads, T_q, T_k, d_k all differ.
"""

from __future__ import annotations

import torch
from torch.nn import MultiheadAttention as _TorchMHA

from .core import (
    Alternative,
    CheckFailed,
    Exercises,
    Mutant,
    call,
    expect_close,
    expect_dropout_modes,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
)

EXERCISES = Exercises("ch04_multi_head_attention")


# ---------------------------------------------------------------- exercise 1: split_heads


def _split_oracle(x, H):
    return torch.stack(x.chunk(H, dim=-1), dim=1)  # head i = i-th contiguous block of features


_SPLIT_HINT = (
    "Head i must hold features i*d_k ... (i+1)*d_k - 1 of *every* token: reshape to (B, T, H, d_k) first, "
    "then swap the T and H axes. Reshaping straight to (B, H, T, d_k) mixes different tokens."
)


@EXERCISES.check("split_heads", points=2)
def _split_basic(fn):
    """split_heads(x (2, 5, 12), 3) has shape (2, 3, 5, 4); head i holds features 4i..4i+3 of each token"""
    x = torch.arange(2 * 5 * 12, dtype=torch.float32).reshape(2, 5, 12)
    got = call("split_heads(x, 3)", fn, x, 3)
    expect_shape("split_heads(x, 3)", got, (2, 3, 5, 4))
    expect_close("split_heads(x, 3)", got, _split_oracle(x, 3), hint=_SPLIT_HINT)


@EXERCISES.check("split_heads", hidden=True)
def _split_other_sizes(fn):
    """works for other sizes (one head, d_k = 1) and keeps gradients"""
    for B, T, d, H in ((3, 7, 8, 2), (1, 4, 6, 6), (2, 3, 10, 1)):
        x = torch.randn(B, T, d, generator=rng(B + T + d), requires_grad=True)
        got = call("split_heads", fn, x, H)
        expect_close(f"split_heads(x {(B, T, d)}, {H})", got, _split_oracle(x, H), hidden=True)
    call("backpropagating through split_heads", lambda: got.sum().backward())
    expect_true(x.grad is not None, "No gradient flows back through split_heads.")


# ---------------------------------------------------------------- exercise 2: merge_heads


def _merge_oracle(x):
    return torch.cat(x.unbind(dim=1), dim=-1)  # Concat(head_1, ..., head_h) per token


@EXERCISES.check("merge_heads", points=1)
def _merge_basic(fn):
    """merge_heads(x (2, 3, 5, 4)) has shape (2, 5, 12): token t holds [head_1[t], head_2[t], head_3[t]]"""
    x = torch.arange(2 * 3 * 5 * 4, dtype=torch.float32).reshape(2, 3, 5, 4)
    got = call("merge_heads(x)", fn, x)
    expect_shape("merge_heads(x)", got, (2, 5, 12))
    expect_close(
        "merge_heads(x)",
        got,
        _merge_oracle(x),
        hint="Bring T next to the batch first (transpose H and T), then flatten (H, d_k).",
    )


@EXERCISES.check("merge_heads", hidden=True)
def _merge_other_sizes(fn):
    """inverts the head split for other sizes"""
    for shape in ((3, 2, 7, 5), (1, 6, 2, 3), (2, 1, 4, 9)):
        x = torch.randn(*shape, generator=rng(sum(shape)))
        expect_close(f"merge_heads(x {shape})", call("merge_heads", fn, x), _merge_oracle(x), hidden=True)


@EXERCISES.reference("split_heads")
def _split_reference(x, n_heads):
    """The course's split_heads, used while checking MultiHeadAttention (which calls it)."""
    return _split_oracle(x, n_heads)


@EXERCISES.reference("merge_heads")
def _merge_reference(x):
    """The course's merge_heads, used while checking MultiHeadAttention (which calls it)."""
    return _merge_oracle(x)


# ---------------------------------------------------------------- exercise 3: MultiHeadAttention


def _build(cls, d_model, H, bias=True, seed=0):
    torch.manual_seed(seed)
    m = call(f"MultiHeadAttention({d_model}, {H})", cls, d_model, H, bias=bias)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        expect_true(
            isinstance(getattr(m, name, None), torch.nn.Linear),
            f"MultiHeadAttention should keep its projection {name} as an nn.Linear attribute.",
        )
    return m


def _torch_twin(m, d_model, H, bias=True):
    """nn.MultiheadAttention holding the student's weights (in_proj = [W_q; W_k; W_v] stacked)."""
    twin = _TorchMHA(d_model, H, bias=bias, batch_first=True)
    with torch.no_grad():
        twin.in_proj_weight.copy_(torch.cat([m.W_q.weight, m.W_k.weight, m.W_v.weight]))
        twin.out_proj.weight.copy_(m.W_o.weight)
        if bias:
            twin.in_proj_bias.copy_(torch.cat([m.W_q.bias, m.W_k.bias, m.W_v.bias]))
            twin.out_proj.bias.copy_(m.W_o.bias)
    return twin


def _compare_mha(cls, d_model, H, q, k, v, key_pad=None, attn=None, *, bias=True, hidden=False, average=False):
    """key_pad (B, T_k) and attn (T_q, T_k): course polarity (True = may attend)."""
    m = _build(cls, d_model, H, bias)
    mask = None
    if key_pad is not None:
        mask = key_pad[:, None, None, :]
    if attn is not None:
        mask = attn if mask is None else mask & attn
    result = call("MultiHeadAttention.forward", m, q, k, v, mask)
    expect_true(
        isinstance(result, tuple) and len(result) == 2, "MultiHeadAttention.forward should return (output, weights)."
    )
    out, weights = result
    twin = _torch_twin(m, d_model, H, bias)
    # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
    exp_out, exp_w = twin(
        q,
        k,
        v,
        key_padding_mask=None if key_pad is None else ~key_pad,
        attn_mask=None if attn is None else ~attn,
        need_weights=True,
        average_attn_weights=average,
    )
    B, T_q, T_k = q.shape[0], q.shape[1], k.shape[1]
    expect_shape("MultiHeadAttention: weights", weights, (B, H, T_q, T_k))
    if average:
        weights = weights.mean(dim=1)  # what nn.MultiheadAttention returns with average_attn_weights=True
    expect_close(
        "MultiHeadAttention: weights" + (" averaged over heads" if average else ""), weights, exp_w, hidden=hidden
    )
    expect_close(
        "MultiHeadAttention: output",
        out,
        exp_out,
        hidden=hidden,
        hint="" if hidden else "project, split_heads, attend per head, merge_heads, then W_o.",
    )


@EXERCISES.check("MultiHeadAttention", points=4)
def _mha_self(cls):
    """self-attention, d_model=12, 3 heads, x (2, 5, 12): same output and per-head weights as nn.MultiheadAttention"""
    x = torch.randn(2, 5, 12, generator=rng(1))
    _compare_mha(cls, 12, 3, x, x, x)


@EXERCISES.check("MultiHeadAttention")
def _mha_cross_padding(cls):
    """cross-attention: query (3, 4, 12), key (3, 6, 12), value (3, 6, 12) ≠ key, with a key padding mask"""
    g = rng(2)
    q, k, v = torch.randn(3, 4, 12, generator=g), torch.randn(3, 6, 12, generator=g), torch.randn(3, 6, 12, generator=g)
    pad = torch.arange(6)[None, :] < torch.tensor([6, 2, 4])[:, None]  # (B, T_k), True at real keys
    _compare_mha(cls, 12, 3, q, k, v, key_pad=pad)


@EXERCISES.check("MultiHeadAttention", hidden=True)
def _mha_masks_averaged(cls):
    """attention mask and key padding together; head-averaged weights; 4 heads, no bias"""
    g = rng(3)
    q, k, v = torch.randn(2, 5, 16, generator=g), torch.randn(2, 7, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    causal = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2)
    pad = torch.arange(7)[None, :] < torch.tensor([7, 5])[:, None]
    _compare_mha(cls, 16, 4, q, k, v, key_pad=pad, attn=causal, hidden=True)
    _compare_mha(cls, 16, 4, q, k, v, key_pad=pad, attn=causal, bias=False, hidden=True, average=True)


@EXERCISES.check("MultiHeadAttention", hidden=True)
def _mha_permutation(cls):
    """without positions, attention is permutation equivariant in the queries and invariant to reordering keys+values"""
    m = _build(cls, 12, 2)
    g = rng(4)
    q, kv = torch.randn(2, 5, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    p_q, p_k = torch.randperm(5, generator=g), torch.randperm(6, generator=g)
    with torch.no_grad():
        base = call("MultiHeadAttention.forward", m, q, kv, kv, None)[0]
        perm_q = call("MultiHeadAttention.forward", m, q[:, p_q], kv, kv, None)[0]
        perm_k = call("MultiHeadAttention.forward", m, q, kv[:, p_k], kv[:, p_k], None)[0]
    expect_close("output with permuted queries", perm_q, base[:, p_q], hidden=True)
    expect_close("output with keys and values permuted together", perm_k, base, hidden=True)


@EXERCISES.check("MultiHeadAttention", hidden=True)
def _mha_float64_grad(cls):
    """keeps float64 and lets gradients reach every projection"""
    m = _build(cls, 8, 2).double()
    x = torch.randn(2, 3, 8, generator=rng(5), dtype=torch.float64)
    out, _ = call("MultiHeadAttention.forward", m, x, x, x, None)
    expect_true(out.dtype == torch.float64, f"float64 inputs should give float64 outputs, not {out.dtype}.")
    call("backpropagating through your output", lambda: out.square().sum().backward())
    for name in ("W_q", "W_k", "W_v", "W_o"):
        grad = getattr(m, name).weight.grad
        expect_true(grad is not None and bool(grad.abs().sum() > 0), f"No gradient reaches {name}.")


@EXERCISES.check("MultiHeadAttention", hidden=True)
def _mha_half(cls):
    """float16 (a Colab GPU's dtype), with a key padding mask: float16 results, as in float32"""
    g = rng(7)
    q, kv = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 3])[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    m = _build(cls, 12, 3).eval()

    def run(dtype):
        with torch.no_grad():
            model = m.to(dtype)
            return call(f"MultiHeadAttention.forward in {dtype}", model, q.to(dtype), kv.to(dtype), kv.to(dtype), mask)

    expect_half_precision("MultiHeadAttention", run)


@EXERCISES.check("MultiHeadAttention", hidden=True)
def _mha_dropout(cls):
    """dropout on the attention weights: off in eval mode, on in training mode"""
    g = rng(6)
    q, kv = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    expect_dropout_modes(
        "MultiHeadAttention(12, 3, dropout)",
        lambda p: call(f"MultiHeadAttention(12, 3, dropout={p})", cls, 12, 3, dropout=p),
        lambda m: call("MultiHeadAttention.forward", m, q, kv, kv, None)[0],
    )


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
]

# Valid answers written differently from the reference; tests/ asserts each gets full marks.
ALTERNATIVES = [
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

__all__ = ["EXERCISES", "MUTANTS", "ALTERNATIVES", "CheckFailed"]
