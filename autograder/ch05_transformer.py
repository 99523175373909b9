"""Checks for chapter 5, the Transformer (notebook ``notebooks/ch05_transformer.ipynb``).

References are independent of the course's solution:

* positional encoding: the paper's formula evaluated entry by entry with Python's ``math.sin``/``math.cos``;
* token embedding: ``embedding.weight[tokens] * sqrt(d_model)`` read off the student's own table;
* encoder and decoder layers: ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` (batch_first)
  into which the checks copy the student's weights — after filling every parameter of the student's layer
  (LayerNorm gains included) with random values, so that two sublayers or two norms cannot be confused;
* a future-leak test: changing target tokens after position t never changes the decoder's output at t.

Sizes: batch, heads, T (target), S (source), d_k, d_ff all differ.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn import Transformer as _TorchTransformer
from torch.nn import TransformerDecoderLayer as _TorchDecoderLayer
from torch.nn import TransformerEncoderLayer as _TorchEncoderLayer

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

EXERCISES = Exercises("ch05_transformer")


def _torch_causal(T: int) -> torch.Tensor:
    """PyTorch's causal mask (float, -inf above the diagonal) as a bool mask (True = masked out): bool like the
    padding masks, so that PyTorch warns about no mismatch (a test cell that writes to stderr scores zero)."""
    return torch.isinf(_TorchTransformer.generate_square_subsequent_mask(T))


_ACT = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}


# ---------------------------------------------------------------- exercise 1: PositionalEncoding


def _pe_oracle(T: int, d: int) -> torch.Tensor:
    rows = []
    for pos in range(T):
        row = []
        for j in range(d):
            angle = pos / 10000 ** ((j - j % 2) / d)  # dims 2i and 2i+1 share the frequency 1/10000^(2i/d)
            row.append(math.sin(angle) if j % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)


def _pe_hint(got, T: int, d: int) -> Message:
    """The formula; and the cause, when the table is the sin-block-then-cos-block one."""
    formula = Message(
        "PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) on the even dims, PE(pos, 2i+1) = cos(same angle) on the odd."
    )
    table = _pe_oracle(T, d)
    blocks = torch.cat([table[:, 0::2], table[:, 1::2]], dim=-1)  # sin of every frequency, then cos
    if isinstance(got, torch.Tensor) and got.shape[-2:] == blocks.shape and torch.allclose(got[0], blocks, atol=1e-4):
        return Message(
            "{formula} Yours puts all sines first, then all cosines: interleave them (pe[:, 0::2], pe[:, 1::2]).",
            formula=formula,
        )
    return formula


@EXERCISES.check("PositionalEncoding", points=2)
def _pe_table(cls):
    """PositionalEncoding(d_model=8) adds sin(pos/10000^(2i/8)) to even dims and cos to odd dims (x = 0, T = 6)"""
    pe = call("PositionalEncoding(8, context_length=50)", cls, 8, 50)
    got = call("PositionalEncoding.forward", pe, torch.zeros(2, 6, 8))
    expected = _pe_oracle(6, 8).expand(2, 6, 8)
    expect_close("PositionalEncoding()(zeros (2, 6, 8))", got, expected, hint=_pe_hint(got, 6, 8))


@EXERCISES.check(
    "PositionalEncoding",
    requires="works for an odd `d_model` too (its last dim is a sine)",
)
def _pe_odd_width(cls):
    """PositionalEncoding(d_model=5): an odd width has 3 sine dims and 2 cosine dims (x = 0, T = 4)"""
    pe = call("PositionalEncoding(5, context_length=10)", cls, 5, 10)
    got = call("PositionalEncoding.forward", pe, torch.zeros(2, 4, 5))
    hint = Message(
        "{hint} For an odd d_model the sine takes ceil(d_model/2) dims (0, 2, 4) and the cosine d_model // 2 (1, 3): "
        "pe[:, 1::2] has one column fewer than pe[:, 0::2].",
        hint=_pe_hint(got, 4, 5),
    )
    expect_close("PositionalEncoding(5)(zeros (2, 4, 5))", got, _pe_oracle(4, 5).expand(2, 4, 5), hint=hint)


@EXERCISES.check(
    "PositionalEncoding",
    hidden=True,
    requires="works for longer sequences and other widths, odd ones included",
)
def _pe_long_and_added(cls):
    """adds the encoding to the input, for longer sequences and other widths (an odd d_model too)"""
    for d, T in ((12, 40), (6, 17), (7, 9)):
        pe = call(Message("PositionalEncoding({d}, context_length=64)", d=d), cls, d, 64)
        x = torch.randn(3, T, d, generator=rng(d))
        expect_close(
            Message("PositionalEncoding({d})(x)", d=d),
            call("PositionalEncoding.forward", pe, x),
            x + _pe_oracle(T, d),
            hidden=True,
        )


@EXERCISES.check(
    "PositionalEncoding",
    hidden=True,
    requires="applies dropout to the sum, in training mode only",
)
def _pe_dropout(cls):
    """applies dropout to the sum in training mode only"""
    pe = call("PositionalEncoding(16, context_length=32, dropout=0.5)", cls, 16, 32, 0.5)
    x = torch.randn(4, 20, 16, generator=rng(7))
    pe.train()
    torch.manual_seed(0)
    out = call("PositionalEncoding.forward", pe, x)
    zeros = float((out == 0).float().mean())
    expect_true(
        0.3 < zeros < 0.7,
        Message(
            "With dropout=0.5 in training mode about half the outputs should be 0; {share} are.", share=f"{zeros:.0%}"
        ),
    )
    pe.eval()
    expect_close(
        "PositionalEncoding in eval mode",
        call("PositionalEncoding.forward", pe, x),
        x + _pe_oracle(20, 16),
        hidden=True,
    )


@EXERCISES.check(
    "PositionalEncoding",
    hidden=True,
    requires="keeps a float16 input's dtype, with or without `.half()` on the module",
)
def _pe_half(cls):
    """float16 x (a Colab GPU's dtype): the sum keeps x's dtype and values, with or without .half() on the module"""
    x = torch.randn(2, 7, 10, generator=rng(8))
    pe = call("PositionalEncoding(10, context_length=16)", cls, 10, 16)
    pe.eval()
    expect_half_precision("PositionalEncoding", lambda dtype: call("PositionalEncoding.forward", pe, x.to(dtype)))
    pe.half()
    expect_half_precision("PositionalEncoding after .half()", lambda dtype: call("forward", pe, x.to(dtype)))


@EXERCISES.check(
    "PositionalEncoding",
    hidden=True,
    requires="builds `pe` with exactly `context_length` rows",
)
def _pe_full_length(cls):
    """the table has exactly context_length rows (its documented shape) and serves a sequence of that length"""
    pe = call("PositionalEncoding(6, context_length=9)", cls, 6, 9)
    table = getattr(pe, "pe", None)
    expect_shape("PositionalEncoding(6, context_length=9).pe", table, (9, 6))
    x = torch.randn(2, 9, 6, generator=rng(9))
    expect_close(
        "PositionalEncoding(6, context_length=9)(x of length 9)",
        call("PositionalEncoding.forward", pe, x),
        x + _pe_oracle(9, 6),
        hidden=True,
    )


# ---------------------------------------------------------------- exercise 2: TokenEmbedding


def _embedding_hint(got, table, tokens, d):
    """The recipe; and the cause, when the answer is the unscaled lookup or the lookup times d_model."""
    recipe = Message(
        "look the tokens up with self.embedding(tokens), then multiply by sqrt(d_model) (Vaswani et al. 2017, §3.4)."
    )
    looked_up = table[tokens]
    if isinstance(got, torch.Tensor) and got.shape == looked_up.shape and got.dtype == looked_up.dtype:
        got = got.detach()
        if torch.allclose(got, looked_up, atol=1e-6):
            return Message("{recipe} Yours is the lookup without the scale.", recipe=recipe)
        if torch.allclose(got, looked_up * d, atol=1e-5):
            return Message("{recipe} Yours multiplies by d_model, not by its square root.", recipe=recipe)
    return recipe


@EXERCISES.check("TokenEmbedding", points=1)
def _embedding_scaled(cls):
    """TokenEmbedding(11, 6) looks tokens up and multiplies by sqrt(d_model) = sqrt(6)"""
    torch.manual_seed(0)
    emb = call("TokenEmbedding(11, 6)", cls, 11, 6)
    tokens = torch.tensor([[1, 5, 10], [0, 3, 3]])
    got = call("TokenEmbedding.forward", emb, tokens)
    table = emb.embedding.weight.detach()
    expect_close(
        "TokenEmbedding()(tokens)", got, table[tokens] * math.sqrt(6), hint=_embedding_hint(got, table, tokens, 6)
    )


@EXERCISES.check(
    "TokenEmbedding",
    hidden=True,
    requires="keeps `nn.Embedding`'s `padding_idx`: the `<pad>` embedding is zero and gets no gradient",
)
def _embedding_padding(cls):
    """with padding_idx = 2 the <pad> embedding is zero and gets no gradient (nn.Embedding's padding_idx)"""
    torch.manual_seed(1)
    emb = call("TokenEmbedding(9, 4, padding_idx=2)", cls, 9, 4, padding_idx=2)
    tokens = torch.tensor([[2, 4, 7, 2], [1, 2, 8, 0]])
    got = call("TokenEmbedding.forward", emb, tokens)
    table = emb.embedding.weight.detach()
    expect_close("TokenEmbedding(padding_idx=2)(tokens)", got, table[tokens] * 2.0, hidden=True)
    call("backpropagating through your output", lambda: got.sum().backward())  # linear: the zero <pad> row too
    grad = observe("TokenEmbedding's table gradient", lambda: emb.embedding.weight.grad)
    expect_true(
        grad is not None and bool(grad[[1, 4, 7, 8, 0]].abs().sum() > 0),
        "No gradient reaches the embedding table: avoid .detach() or building a new table in forward.",
    )
    expect_true(
        bool((grad[2] == 0).all()),
        "The <pad> row (padding_idx) of the table received a gradient: look tokens up through self.embedding (or "
        "F.embedding with padding_idx), not by indexing the weight, so that the <pad> embedding stays zero.",
    )


# ---------------------------------------------------------------- helpers for the layers


@torch.no_grad()
def _randomise(module: torch.nn.Module, seed: int) -> None:
    g = rng(seed)
    for name, p in module.named_parameters():
        noise = torch.randn(p.shape, generator=g) * 0.3
        is_norm_gain = "norm" in name and name.endswith("weight")
        p.copy_(1.0 + noise if is_norm_gain else noise)


@torch.no_grad()
def _copy_attn(ours, theirs) -> None:
    theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
    theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
    theirs.out_proj.weight.copy_(ours.W_o.weight)
    theirs.out_proj.bias.copy_(ours.W_o.bias)


@torch.no_grad()
def _copy_rest(ours, theirs, n_norms: int) -> None:
    pairs = [(ours.ffn.W_1, theirs.linear1), (ours.ffn.W_2, theirs.linear2)]
    pairs += [(getattr(ours, f"norm{i}"), getattr(theirs, f"norm{i}")) for i in range(1, n_norms + 1)]
    for a, b in pairs:
        b.weight.copy_(a.weight)
        b.bias.copy_(a.bias)


def _layer_args(d, H, d_ff, norm_first, activation, eps):
    return dict(
        d_model=d, n_heads=H, d_ff=d_ff, dropout=0.0, norm_first=norm_first, activation=activation, layer_norm_eps=eps
    )


def _torch_args(d, H, d_ff, norm_first, activation, eps):
    return dict(
        d_model=d,
        nhead=H,
        dim_feedforward=d_ff,
        dropout=0.0,
        activation=_ACT[activation],
        layer_norm_eps=eps,
        batch_first=True,
        norm_first=norm_first,
    )


def _pad(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T), True at real tokens


# ---------------------------------------------------------------- exercise 3: EncoderLayer


def _compare_encoder(cls, *, norm_first, activation="relu", eps=1e-5, lengths=None, causal=False, hidden=False, seed=0):
    d, H, d_ff, B, T = 12, 3, 20, len(lengths) if lengths else 2, 6
    kind = "pre-LN" if norm_first else "post-LN"
    layer = call(
        Message("EncoderLayer({kind})", kind=kind), cls, **_layer_args(d, H, d_ff, norm_first, activation, eps)
    )
    _randomise(layer, seed)
    twin = _TorchEncoderLayer(**_torch_args(d, H, d_ff, norm_first, activation, eps))
    _copy_attn(layer.self_attn, twin.self_attn)
    _copy_rest(layer, twin, 2)
    x = torch.randn(B, T, d, generator=rng(seed + 1))
    mask, kw = None, {}
    if lengths:
        pad = _pad(lengths, T)
        # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
        mask, kw["src_key_padding_mask"] = pad[:, None, None, :], ~pad
    if causal:
        c = torch.ones(T, T, dtype=torch.bool).tril()
        mask = c if mask is None else mask & c
        kw["src_mask"] = _torch_causal(T)
    got = call("EncoderLayer.forward", layer, x, mask)
    expected = twin(x, **kw)
    hint = ""
    if not hidden:
        if (
            kw
            and isinstance(got, torch.Tensor)
            and got.shape == expected.shape
            and torch.allclose(got, twin(x), atol=1e-5)
        ):
            hint = Message("your output is that of the layer without a mask: pass the mask on to self_attn.")
        elif norm_first:
            hint = Message("pre-LN: x + Sublayer(LayerNorm(x)) for both sublayers.")
        else:
            hint = Message("post-LN: LayerNorm(x + Sublayer(x)) for both sublayers (the paper).")
    expect_close(Message("EncoderLayer ({kind}) output", kind=kind), got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("EncoderLayer", points=3)
def _encoder_post_ln(cls):
    """post-LN (the paper) with a key padding mask matches nn.TransformerEncoderLayer(norm_first=False)"""
    _compare_encoder(cls, norm_first=False, lengths=[6, 3, 5])


@EXERCISES.check("EncoderLayer")
def _encoder_pre_ln(cls):
    """pre-LN with a causal mask and GELU matches nn.TransformerEncoderLayer(norm_first=True)"""
    _compare_encoder(cls, norm_first=True, activation="gelu", causal=True)


@EXERCISES.check(
    "EncoderLayer",
    hidden=True,
    requires="matches BERT-style (post-LN, GELU) and GPT-style (pre-LN, tanh GELU, causal and padding masks) layers",
)
def _encoder_variants(cls):
    """BERT-style (post-LN, GELU, eps 1e-12) and GPT-style (pre-LN, GELU tanh, causal + padding) layers"""
    _compare_encoder(cls, norm_first=False, activation="gelu", eps=1e-12, lengths=[4, 6], hidden=True, seed=3)
    _compare_encoder(cls, norm_first=True, activation="gelu_tanh", lengths=[6, 2, 5], causal=True, hidden=True, seed=4)
    _compare_encoder(cls, norm_first=False, causal=True, hidden=True, seed=5)


@EXERCISES.check(
    "EncoderLayer",
    hidden=True,
    requires="uses the layer's `layer_norm_eps` in its norms",
)
def _encoder_eps(cls):
    """layer_norm_eps = 0.1, post-LN and pre-LN: the norms use the layer's epsilon (at 1e-5 it could not matter)"""
    _compare_encoder(cls, norm_first=False, eps=0.1, lengths=[6, 4], hidden=True, seed=6)
    _compare_encoder(cls, norm_first=True, activation="gelu", eps=0.1, causal=True, hidden=True, seed=7)


# ---------------------------------------------------------------- exercise 4: DecoderLayer


def _decoder_setup(cls, norm_first, seed, activation="relu", eps=1e-5):
    d, H, d_ff = 12, 3, 20
    kind = "pre-LN" if norm_first else "post-LN"
    layer = call(
        Message("DecoderLayer({kind})", kind=kind), cls, **_layer_args(d, H, d_ff, norm_first, activation, eps)
    )
    _randomise(layer, seed)
    return layer, d, H, d_ff, kind


def _compare_decoder(
    cls, *, norm_first, tgt_lengths=None, src_lengths=None, hidden=False, seed=0, T=5, S=7, activation="relu", eps=1e-5
):
    layer, d, H, d_ff, kind = _decoder_setup(cls, norm_first, seed, activation, eps)
    twin = _TorchDecoderLayer(**_torch_args(d, H, d_ff, norm_first, activation, eps))
    _copy_attn(layer.self_attn, twin.self_attn)
    _copy_attn(layer.cross_attn, twin.multihead_attn)
    _copy_rest(layer, twin, 3)
    B = 3
    g = rng(seed + 1)
    y, memory = torch.randn(B, T, d, generator=g), torch.randn(B, S, d, generator=g)
    tgt_pad = _pad(tgt_lengths, T) if tgt_lengths else None
    src_pad = _pad(src_lengths, S) if src_lengths else None
    got = call("DecoderLayer.forward", layer, y, memory, tgt_pad, src_pad)
    expected = twin(
        y,
        memory,
        tgt_mask=_torch_causal(T),
        tgt_is_causal=True,
        # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
        tgt_key_padding_mask=None if tgt_pad is None else ~tgt_pad,
        memory_key_padding_mask=None if src_pad is None else ~src_pad,
    )
    hint = (
        ""
        if hidden
        else Message(
            "causal self-attention (with the target padding), then cross-attention with queries from "
            "the decoder and keys/values from memory (with the source padding), then the FFN."
        )
    )
    expect_close(Message("DecoderLayer ({kind}) output", kind=kind), got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("DecoderLayer", points=3)
def _decoder_post_ln(cls):
    """post-LN, target (3, 5, 12), memory (3, 7, 12), source padding: matches nn.TransformerDecoderLayer"""
    _compare_decoder(cls, norm_first=False, src_lengths=[7, 4, 2])


@EXERCISES.check("DecoderLayer")
def _decoder_no_future_leak(cls):
    """no future leak: changing target tokens after position t leaves the output at positions <= t unchanged"""
    layer, d, *_ = _decoder_setup(cls, False, seed=1)
    g = rng(2)
    y, memory = torch.randn(2, 6, d, generator=g), torch.randn(2, 4, d, generator=g)
    base = call("DecoderLayer.forward", layer, y, memory, None, None)
    for t in range(5):
        changed = y.clone()
        changed[:, t + 1 :] = torch.randn(2, 5 - t, d, generator=g)
        out = call("DecoderLayer.forward", layer, changed, memory, None, None)
        if not torch.allclose(out[:, : t + 1], base[:, : t + 1], atol=1e-5):
            raise CheckFailed(
                Message(
                    "Changing the target tokens after position {t} changed the output at positions <= {t}: "
                    "position t may only see targets <= t: the self-attention's mask must be causal_mask(T) (True on "
                    "and below the diagonal), combined with any padding mask by &.",
                    t=t,
                )
            )


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="handles target and source padding together, post-LN and pre-LN",
)
def _decoder_all_masks(cls):
    """post-LN and pre-LN with target padding and source padding together"""
    _compare_decoder(cls, norm_first=False, tgt_lengths=[5, 3, 4], src_lengths=[2, 7, 5], hidden=True, seed=3)
    _compare_decoder(cls, norm_first=True, tgt_lengths=[4, 5, 2], src_lengths=[7, 3, 6], hidden=True, seed=4)


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="takes the cross-attention's keys and values from `memory` (even when T = S)",
)
def _decoder_same_lengths(cls):
    """T = S without masks: keys and values of the cross-attention come from memory"""
    _compare_decoder(cls, norm_first=False, hidden=True, seed=5, T=6, S=6)


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="handles target padding without a source mask (`src_attention_mask=None`)",
)
def _decoder_target_padding_only(cls):
    """target padding without a source mask (src_attention_mask=None), post-LN and pre-LN"""
    _compare_decoder(cls, norm_first=False, tgt_lengths=[5, 3, 1], hidden=True, seed=8)
    _compare_decoder(cls, norm_first=True, tgt_lengths=[2, 5, 4], hidden=True, seed=9)


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="uses the layer's `layer_norm_eps` and activation (GELU too)",
)
def _decoder_eps_gelu(cls):
    """layer_norm_eps = 0.1 and GELU, post-LN and pre-LN, with both paddings: the norms use the layer's epsilon"""
    kw = dict(tgt_lengths=[5, 2, 4], src_lengths=[3, 7, 6], hidden=True, activation="gelu", eps=0.1)
    _compare_decoder(cls, norm_first=False, seed=6, **kw)
    _compare_decoder(cls, norm_first=True, seed=7, **kw)


@EXERCISES.check(
    "EncoderLayer",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _encoder_dropout(cls):
    """dropout (attention, feed-forward, residual branches) is off in eval mode and on in training mode"""
    x = torch.randn(2, 5, 12, generator=rng(21))
    expect_dropout_modes(
        "EncoderLayer",
        lambda p: call("EncoderLayer", cls, **{**_layer_args(12, 3, 24, False, "relu", 1e-5), "dropout": p}),
        lambda m: call("EncoderLayer.forward", m, x, None),
    )


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="works in float16 with both paddings: float16 results, as in float32",
)
def _decoder_half(cls):
    """float16 (a Colab GPU's dtype) with target and source padding: float16 results, as in float32"""
    layer = call("DecoderLayer", cls, **_layer_args(12, 3, 24, True, "relu", 1e-5)).eval()
    g = rng(23)
    y, memory = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    tgt, src = (
        torch.tensor([[True] * 4, [True, True, False, False]]),
        torch.tensor([[True] * 6, [True] * 3 + [False] * 3]),
    )

    def run(dtype):
        with torch.no_grad():
            return call(
                Message("DecoderLayer.forward in {dtype}", dtype=dtype),
                layer.to(dtype),
                y.to(dtype),
                memory.to(dtype),
                tgt,
                src,
            )

    expect_half_precision("DecoderLayer", run)


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _decoder_dropout(cls):
    """dropout (both attentions, feed-forward, residual branches) is off in eval mode and on in training mode"""
    g = rng(22)
    y, memory = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    expect_dropout_modes(
        "DecoderLayer",
        lambda p: call("DecoderLayer", cls, **{**_layer_args(12, 3, 24, True, "relu", 1e-5), "dropout": p}),
        lambda m: call("DecoderLayer.forward", m, y, memory, None, None),
    )


_OUTPUTS = {"self-attention": "self_attn.W_o", "cross-attention": "cross_attn.W_o", "feed-forward": "ffn.W_2"}


@torch.no_grad()
def _only_sublayers(layer: torch.nn.Module, live: tuple[str, ...]) -> None:
    """Zero the output projection of every sublayer not in ``live`` (its output is then 0, whatever dropout does
    to it), and turn off the dropout inside the course's attention and feed-forward modules: what is random in
    training mode is then only the dropout the answer applies to the live sublayers' outputs."""
    for label, path in _OUTPUTS.items():
        owner = getattr(layer, path.split(".")[0], None)
        if owner is None:
            continue
        inner = getattr(owner, "dropout", None)
        if isinstance(inner, torch.nn.Dropout):
            inner.p = 0.0
        if label not in live:
            linear = getattr(owner, path.split(".")[1])
            linear.weight.zero_()
            linear.bias.zero_()


def _expect_dropout_sites(what, cls, sublayers, forward, shape):
    """Every sublayer's output has its own dropout, and dropout acts on nothing else (post-LN and pre-LN).

    With only one sublayer's output non-zero, two training-mode calls must differ (its dropout is there); with every
    sublayer's output zero, a training-mode call must equal the eval-mode one (no dropout on the residual stream)."""
    state = torch.random.get_rng_state()
    try:
        for norm_first in (False, True):
            kind = "pre-LN" if norm_first else "post-LN"
            for i, label in enumerate(sublayers, 1):
                torch.manual_seed(i)
                layer = call(what, cls, **{**_layer_args(12, 3, 24, norm_first, "relu", 1e-5), "dropout": 0.5})
                _only_sublayers(layer, (label,))
                layer.train()
                with torch.no_grad():
                    first, second = forward(layer), forward(layer)
                expect_shape(Message("{what} ({kind}) output", what=what, kind=kind), first, shape)
                expect_true(
                    not torch.allclose(first, second),
                    Message(
                        "{what} ({kind}, dropout=0.5, training mode) with every sublayer but the {label} silenced "
                        "gave the same output twice: the {label} sublayer's output needs its dropout (dropout{i}) "
                        "before the residual sum.",
                        what=what,
                        kind=kind,
                        label=Message(label),
                        i=i,
                    ),
                )
            torch.manual_seed(0)
            layer = call(what, cls, **{**_layer_args(12, 3, 24, norm_first, "relu", 1e-5), "dropout": 0.5})
            _only_sublayers(layer, ())
            with torch.no_grad():
                layer.train()
                trained = forward(layer)
                layer.eval()
                evaluated = forward(layer)
            expect_shape(Message("{what} ({kind}) output", what=what, kind=kind), trained, shape)
            expect_close(
                Message(
                    "{what} ({kind}, dropout=0.5, training mode) with every sublayer's output zero",
                    what=what,
                    kind=kind,
                ),
                trained,
                evaluated,
                hidden=True,
                hint="dropout acts on each sublayer's output before the residual sum, never on the residual stream "
                "x itself: with every sublayer's output zero the layer is the same in training and eval mode.",
            )
    finally:
        torch.random.set_rng_state(state)


@EXERCISES.check(
    "EncoderLayer",
    hidden=True,
    requires="applies `dropout1` after the attention and `dropout2` after the FFN, and no other dropout",
)
def _encoder_dropout_sites(cls):
    """each sublayer's output has its own dropout (dropout1 after attention, dropout2 after the FFN), nothing else"""
    x = torch.randn(2, 5, 12, generator=rng(24))
    _expect_dropout_sites(
        "EncoderLayer",
        cls,
        ("self-attention", "feed-forward"),
        lambda m: call("EncoderLayer.forward", m, x, None),
        (2, 5, 12),
    )


@EXERCISES.check(
    "DecoderLayer",
    hidden=True,
    requires="applies `dropout1`, `dropout2`, `dropout3` after the three sublayers, and no other dropout",
)
def _decoder_dropout_sites(cls):
    """each sublayer's output has its own dropout (self-attention, cross-attention, FFN), and nothing else"""
    g = rng(25)
    y, memory = torch.randn(2, 4, 12, generator=g), torch.randn(2, 6, 12, generator=g)
    _expect_dropout_sites(
        "DecoderLayer",
        cls,
        ("self-attention", "cross-attention", "feed-forward"),
        lambda m: call("DecoderLayer.forward", m, y, memory, None, None),
        (2, 4, 12),
    )


__all__ = ["EXERCISES", "CheckFailed"]
