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
import torch.nn.functional as F
from torch.nn import MultiheadAttention as _TorchMHA

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_dropout_modes,
    expect_half_precision,
    expect_shape,
    expect_true,
    observe,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch04_multi_head_attention")


# ---------------------------------------------------------------- exercise 1: split_heads


def _split_oracle(x, H):
    return torch.stack(x.chunk(H, dim=-1), dim=1)  # head i = i-th contiguous block of features


def _split_hint(got, x, H):
    """The recipe; and the cause, when the answer is one of the two known wrong layouts."""
    B, T, d = x.shape
    recipe = Message(
        "head i holds features i*d_k ... (i+1)*d_k - 1 of every token: (B, T, d_model) -> (B, T, H, d_k) -> "
        "(B, H, T, d_k)."
    )
    straight = x.reshape(B, H, T, d // H)  # one reshape, no transpose: a head's "tokens" mix several tokens
    strided = x.view(B, T, d // H, H).permute(0, 3, 1, 2)  # head i takes every H-th feature
    if isinstance(got, torch.Tensor) and got.shape == straight.shape:
        if torch.equal(got.detach().cpu(), straight):
            return Message(
                "{recipe} Yours reshapes straight to (B, H, T, d_k), which mixes different tokens: reshape to "
                "(B, T, H, d_k) first, then swap the T and H axes.",
                recipe=recipe,
            )
        if torch.equal(got.detach().cpu(), strided):
            return Message(
                "{recipe} Yours gives head i every H-th feature: split the feature axis as (H, d_k), not (d_k, H).",
                recipe=recipe,
            )
    return recipe


@EXERCISES.check("split_heads", points=2)
def _split_basic(fn):
    """split_heads(x (2, 5, 12), 3) has shape (2, 3, 5, 4); head i holds features 4i..4i+3 of each token"""
    x = torch.arange(2 * 5 * 12, dtype=torch.float32).reshape(2, 5, 12)
    got = call("split_heads(x, 3)", fn, x, 3)
    expect_shape("split_heads(x, 3)", got, (2, 3, 5, 4))
    expect_close("split_heads(x, 3)", got, _split_oracle(x, 3), hint=_split_hint(got, x, 3))


@EXERCISES.check(
    "split_heads",
    hidden=True,
    requires="works for other sizes (one head, `d_k = 1`) and keeps gradients",
)
def _split_other_sizes(fn):
    """works for other sizes (one head, d_k = 1) and keeps gradients"""
    for B, T, d, H in ((3, 7, 8, 2), (1, 4, 6, 6), (2, 3, 10, 1)):
        x = torch.randn(B, T, d, generator=rng(B + T + d), requires_grad=True)
        got = call("split_heads", fn, x, H)
        expect_close(
            Message("split_heads(x {shape}, {H})", shape=(B, T, d), H=H), got, _split_oracle(x, H), hidden=True
        )
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
    hint = Message("token t holds [head_1[t], ..., head_H[t]]: (B, H, T, d_k) -> (B, T, H, d_k) -> (B, T, H*d_k).")
    if torch.equal(got.detach().cpu(), x.reshape(2, 5, 12)):
        hint = Message(
            "{recipe} Yours flattens (B, H, T, d_k) without bringing T next to the batch first (transpose H and T).",
            recipe=hint,
        )
    expect_close("merge_heads(x)", got, _merge_oracle(x), hint=hint)


@EXERCISES.check(
    "merge_heads",
    hidden=True,
    requires="inverts `split_heads` for other sizes too",
)
def _merge_other_sizes(fn):
    """inverts the head split for other sizes"""
    for shape in ((3, 2, 7, 5), (1, 6, 2, 3), (2, 1, 4, 9)):
        x = torch.randn(*shape, generator=rng(sum(shape)))
        expect_close(
            Message("merge_heads(x {shape})", shape=shape), call("merge_heads", fn, x), _merge_oracle(x), hidden=True
        )


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
    m = call(Message("MultiHeadAttention({d_model}, {H})", d_model=d_model, H=H), cls, d_model, H, bias=bias)
    for name in ("W_q", "W_k", "W_v", "W_o"):
        expect_true(
            isinstance(getattr(m, name, None), torch.nn.Linear),
            Message("MultiHeadAttention should keep its projection {name} as an nn.Linear attribute.", name=name),
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
        "MultiHeadAttention: weights averaged over heads" if average else "MultiHeadAttention: weights",
        weights,
        exp_w,
        hidden=hidden,
    )
    hint = "" if hidden else Message("project, split_heads, attend per head, merge_heads, then W_o.")
    expect_close("MultiHeadAttention: output", out, exp_out, hidden=hidden, hint=hint)


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


@EXERCISES.check(
    "MultiHeadAttention",
    requires="stays finite in float16 when the products q·k pass 65 504 but the scaled scores fit: divide q by √d_k before the product",
    extremes=True,
)
def _mha_half_large_products_visible(cls):
    """float16, d_model=24, 2 heads: the products q.k pass 65 504, the scaled scores q.k/sqrt(d_k) do not; results as
    in float32"""
    _large_products_case(cls, 24, 2, seed=11)  # d_k = 12


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="handles an attention mask and a key padding mask together, and `bias=False`",
)
def _mha_masks_averaged(cls):
    """attention mask and key padding together; head-averaged weights; 4 heads, no bias"""
    g = rng(3)
    q, k, v = torch.randn(2, 5, 16, generator=g), torch.randn(2, 7, 16, generator=g), torch.randn(2, 7, 16, generator=g)
    causal = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2)
    pad = torch.arange(7)[None, :] < torch.tensor([7, 5])[:, None]
    _compare_mha(cls, 16, 4, q, k, v, key_pad=pad, attn=causal, hidden=True)
    _compare_mha(cls, 16, 4, q, k, v, key_pad=pad, attn=causal, bias=False, hidden=True, average=True)


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="treats the tokens as a set: permuting the queries permutes the output; permuting keys and values together changes nothing",
)
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


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="keeps float64 and lets gradients reach every projection",
)
def _mha_float64_grad(cls):
    """keeps float64 and lets gradients reach every projection"""
    m = _build(cls, 8, 2).double()
    x = torch.randn(2, 3, 8, generator=rng(5), dtype=torch.float64)
    out, _ = call("MultiHeadAttention.forward", m, x, x, x, None)
    expect_true(
        out.dtype == torch.float64,
        Message("float64 inputs should give float64 outputs, not {dtype}.", dtype=out.dtype),
    )
    call("backpropagating through your output", lambda: out.square().sum().backward())
    for name in ("W_q", "W_k", "W_v", "W_o"):
        grad = observe(f"{name}.weight.grad", lambda name=name: getattr(m, name).weight.grad)
        expect_true(grad is not None and bool(grad.abs().sum() > 0), Message("No gradient reaches {name}.", name=name))


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="works in float16 with a key padding mask: float16 results, as in float32",
)
def _mha_half(cls):
    """float16 (a Colab GPU's dtype), with a key padding mask: float16 results, as in float32"""
    g = rng(7)
    q, kv = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    mask = (torch.arange(6)[None, :] < torch.tensor([6, 3])[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    m = _build(cls, 12, 3).eval()

    def run(dtype):
        with torch.no_grad():
            model = m.to(dtype)
            return call(
                Message("MultiHeadAttention.forward in {dtype}", dtype=dtype),
                model,
                q.to(dtype),
                kv.to(dtype),
                kv.to(dtype),
                mask,
            )

    expect_half_precision("MultiHeadAttention", run)


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _mha_dropout(cls):
    """dropout on the attention weights: off in eval mode, on in training mode"""
    g = rng(6)
    q, kv = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    expect_dropout_modes(
        "MultiHeadAttention(12, 3, dropout)",
        lambda p: call(Message("MultiHeadAttention(12, 3, dropout={p})", p=p), cls, 12, 3, dropout=p),
        lambda m: call("MultiHeadAttention.forward", m, q, kv, kv, None)[0],
    )


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="accepts a bare 2-D `(T_q, T_k)` mask shared by the batch and the heads",
)
def _mha_bare_2d_mask(cls):
    """a bare 2-D (T_q, T_k) mask, shared by the batch and the heads (B = 3, T_q = 4, T_k = 6)"""
    g = rng(8)
    q, k, v = torch.randn(3, 4, 8, generator=g), torch.randn(3, 6, 8, generator=g), torch.randn(3, 6, 8, generator=g)
    allowed = torch.rand(4, 6, generator=g) < 0.5
    allowed[:, 1] = True  # every query keeps a key
    _compare_mha(cls, 8, 2, q, k, v, attn=allowed, hidden=True)


def _projections_set(m, **weights):
    """Set the projections' weights (biases zero): the checks choose the scores exactly."""
    with torch.no_grad():
        for name, w in weights.items():
            getattr(m, name).weight.copy_(w)
        for name in ("W_q", "W_k", "W_v", "W_o"):
            if getattr(m, name).bias is not None:
                getattr(m, name).bias.zero_()


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="applies dropout to the attention weights (not the heads' outputs) and returns the weights before dropout",
)
def _mha_dropout_site(cls):
    """in training mode the dropout acts on the attention weights (not on the heads' outputs), and the weights
    returned are those before dropout"""
    d, H = 12, 3
    g = rng(12)
    q, kv = torch.randn(2, 4, d, generator=g), torch.randn(2, 6, d, generator=g)
    m = call(Message("MultiHeadAttention({d}, {H}, dropout=0.5)", d=d, H=H), cls, d, H, dropout=0.5)
    _projections_set(m, W_v=torch.eye(d), W_o=torch.eye(d))  # the output is the merged heads themselves
    m.train()
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            out, weights = call("MultiHeadAttention.forward in training mode", m, q, kv, kv, None)
    finally:
        torch.random.set_rng_state(state)
    expect_shape("output", out, (2, 4, d))
    expect_shape("weights", weights, (2, H, 4, 6))
    zeros = float((out == 0).float().mean())
    expect_true(
        zeros < 0.15,
        Message(
            "With dropout=0.5 in training mode, {share} of the output entries are exactly 0 (with W_v and W_o set "
            "to the identity): the dropout is applied to the heads' outputs. Apply self.dropout to the attention "
            "weights, before they multiply v (a dropped weight rarely zeroes a whole output entry).",
            share=f"{zeros:.0%}",
        ),
    )
    sums = weights.sum(-1)
    expect_true(
        bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-5)),
        "In training mode the weights you return do not sum to 1 over the keys: return the weights before "
        "dropout (the docstring: 'weights are before dropout'), and use the dropped ones only to multiply v.",
    )


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="gives a query's only allowed key all the weight, even when its scores are about ±2e5",
)
def _mha_extreme_scores(cls):
    """one allowed key per query whose scores are about -2e5 (batch 0) or +2e5 (batch 1): it gets all the weight"""
    d, H, T_q, T_k = 12, 3, 3, 5
    m = _build(cls, d, H)
    _projections_set(m, W_q=torch.eye(d), W_k=torch.eye(d))  # scores = q_h . k_h / sqrt(d_k) per head
    g = rng(9)
    u = torch.randint(0, 2, (2, 1, d), generator=g).float() * 2 - 1  # entries +-1: |u_h|^2 = d_k in every head
    query = 1e5 * u.expand(2, T_q, d)
    key = torch.randn(2, T_k, d, generator=g)
    key[:, 0] = torch.stack([-u[0, 0], u[1, 0]])  # the allowed key: scores -2e5 in batch 0, +2e5 in batch 1
    value = torch.randn(2, T_k, d, generator=g)
    mask = torch.zeros(2, 1, 1, T_k, dtype=torch.bool)
    mask[..., 0] = True  # (B, 1, 1, T_k): only key 0 may be attended to
    with torch.no_grad():
        result = call("MultiHeadAttention.forward", m, query, key, value, mask)
        expect_true(
            isinstance(result, tuple) and len(result) == 2,
            "MultiHeadAttention.forward should return (output, weights).",
        )
        out, weights = result
        expect_shape("MultiHeadAttention: weights", weights, (2, H, T_q, T_k))
        expect_shape("MultiHeadAttention: output", out, (2, T_q, d))
        one_hot = torch.zeros(2, H, T_q, T_k)
        one_hot[..., 0] = 1.0
        expected = F.linear(F.linear(value[:, :1], m.W_v.weight, m.W_v.bias), m.W_o.weight, m.W_o.bias)
    hint = Message(
        "with scores far below (or above) any fixed fill value, the masked keys must still get weight 0 and the "
        "softmax must not overflow: fill masked scores with -inf or torch.finfo(scores.dtype).min, and use "
        "torch.softmax (it subtracts the row's maximum) rather than exp by hand."
    )
    expect_close("MultiHeadAttention: weights with extreme scores", weights, one_hot, hidden=True, hint=hint)
    expect_close(
        "MultiHeadAttention: output with extreme scores", out, expected.expand(2, T_q, d), hidden=True, hint=hint
    )


def _large_products_case(cls, d: int, H: int, seed: int) -> None:
    """float16 with identity W_q, W_k: every product q.k of a head is about 78 000 (past float16's 65 504) while the
    scaled scores q.k/sqrt(d_k) stay below 30 000; the last key some hundreds ahead of the others after scaling."""
    d_k = d // H
    c = 280 / d_k**0.5  # d_k * c^2 = 78 400
    m = _build(cls, d, H, bias=False).eval()
    _projections_set(m, W_q=torch.eye(d), W_k=torch.eye(d))
    g = rng(seed)
    query = c * (1 + 0.02 * torch.rand(2, 3, d, generator=g))
    key = c * (1 + 0.05 * torch.arange(5.0)[None, :, None]) * torch.ones(2, 5, d)
    value = torch.randn(2, 5, d, generator=g)

    def run(dtype):
        with torch.no_grad():
            model = m.to(dtype)
            return call(
                Message("MultiHeadAttention.forward in {dtype}", dtype=dtype),
                model,
                query.to(dtype),
                key.to(dtype),
                value.to(dtype),
                None,
            )

    expect_half_precision(
        "MultiHeadAttention with large products q.k",
        run,
        hint="the products q.k of these inputs pass float16's 65 504 although the scaled scores do not: scale q by "
        "1/sqrt(d_k) before the product (scaled_dot_product_attention does).",
    )


@EXERCISES.check(
    "MultiHeadAttention",
    hidden=True,
    requires="stays finite in float16 when the products q·k pass 65 504 but the scaled scores fit: divide q by √d_k before the product",
    extremes=True,
)
def _mha_half_large_products(cls):
    """float16 where the products q.k pass 65 504 but the scaled scores q.k/sqrt(d_k) fit: scale before the product"""
    _large_products_case(cls, 128, 2, seed=10)  # d_k = 64


__all__ = ["EXERCISES", "CheckFailed"]
