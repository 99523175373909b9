"""Checks for chapter 8, the KV cache, GQA and MLA (notebook ``notebooks/ch08_kv_cache.ipynb``).

References are computed independently of the course's solution: ``torch.repeat_interleave`` for the grouping of
key/value heads; ``F.scaled_dot_product_attention(..., enable_gqa=True)`` over *all* keys so far (with the
causal mask of the full sequence, then the rows of the new tokens) for a step with the cache; and for multi-head
latent attention a functional recomputation from the student's own parameters (``F.linear``, an RMS norm
written out, RoPE by complex multiplication as in DeepSeek-V2's code, ``F.scaled_dot_product_attention`` with
``is_causal=True`` on the whole sequence).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from solutions.ch08_kv_cache import KVCache  # the cache container (a list of tensors per layer): plumbing

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_half_precision,
    expect_shape,
    expect_true,
    rng,
    updated_in_place,
)
from .wording import Message

EXERCISES = Exercises("ch08_kv_cache")
updated_in_place(KVCache)  # attend_with_cache and MLA append to the cache they are handed: that is the exercise


# ---------------------------------------------------------------- exercise 1: repeat_kv


def _check_repeat(fn, B, H_kv, T, d, n_rep, seed, *, hidden=False):
    x = torch.randn(B, H_kv, T, d, generator=rng(seed))
    got = call(
        Message("repeat_kv(x of shape {shape}, n_rep={n_rep})", shape=(B, H_kv, T, d), n_rep=n_rep), fn, x, n_rep
    )
    expected = torch.repeat_interleave(x, n_rep, dim=1)
    hint = ""
    if not hidden and isinstance(got, torch.Tensor) and got.shape == expected.shape and n_rep > 1:
        if torch.equal(got, x.repeat(1, n_rep, 1, 1)):
            hint = Message(
                "Your heads come in the order 0, 1, …, H_kv-1, 0, 1, … (x.repeat). Each key/value head must serve "
                "n_rep *neighbouring* query heads: 0, 0, 1, 1, … (like torch.repeat_interleave on dim 1)."
            )
    expect_close(Message("repeat_kv(x, {n_rep})", n_rep=n_rep), got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("repeat_kv", points=2)
def _repeat_basic(fn):
    """repeat_kv(x (2, 3, 5, 4), 2) -> (2, 6, 5, 4), heads in the order 0, 0, 1, 1, 2, 2"""
    _check_repeat(fn, 2, 3, 5, 4, 2, seed=1)


@EXERCISES.check("repeat_kv")
def _repeat_identity(fn):
    """n_rep=1 (multi-head attention) leaves x as it is"""
    _check_repeat(fn, 2, 4, 3, 5, 1, seed=2)


@EXERCISES.check(
    "repeat_kv",
    hidden=True,
    requires="works for multi-query attention (one key/value head) and for groups of 3",
)
def _repeat_other(fn):
    """MQA (one key/value head for 6 query heads) and groups of 3"""
    _check_repeat(fn, 3, 1, 4, 2, 6, seed=3, hidden=True)
    _check_repeat(fn, 1, 2, 7, 3, 3, seed=4, hidden=True)


@EXERCISES.reference("repeat_kv")
def _repeat_kv_reference(x, n_rep):
    """The course's repeat_kv, used while checking attend_with_cache (which calls it): head j·n_rep + r is kv head
    j."""
    return x.repeat_interleave(n_rep, dim=1)


# ---------------------------------------------------------------- exercise 2: attend_with_cache


def _attention_oracle(q_all, k_all, v_all, T_new):
    """Causal GQA attention of the full sequence (PyTorch's kernel); the rows of the last T_new queries."""
    out = F.scaled_dot_product_attention(q_all, k_all, v_all, is_causal=True, enable_gqa=True)
    return out[:, :, -T_new:]


def _qkv(B, H, H_kv, T, d_k, d_v, seed):
    g = rng(seed)
    return (
        torch.randn(B, H, T, d_k, generator=g),
        torch.randn(B, H_kv, T, d_k, generator=g),
        torch.randn(B, H_kv, T, d_v, generator=g),
    )


def _run_steps(fn, q, k, v, chunks, layer=0, cache=None):
    """Feed the sequence in ``chunks`` (lengths) through the student's function; return outputs and the cache."""
    cache = KVCache() if cache is None else cache
    outs, t = [], 0
    for n in chunks:
        sl = slice(t, t + n)
        what = str(
            Message(
                "attend_with_cache(q, k, v, cache, layer={layer}) with {t} cached and {n} new positions",
                layer=layer,
                t=t,
                n=n,
            )
        )
        outs.append(call(what, fn, q[:, :, sl], k[:, :, sl], v[:, :, sl], cache, layer))
        t += n
    return outs, cache


def _decode_hint(got, q, k, v):
    """Name a known mistake when the student's single-step output matches it."""
    if not isinstance(got, torch.Tensor) or got.shape != q[:, :, -1:].shape[:-1] + (v.shape[-1],):
        return ""
    n_rep = q.shape[1] // k.shape[1]
    kk, vv = torch.repeat_interleave(k, n_rep, 1), torch.repeat_interleave(v, n_rep, 1)
    only_new = F.scaled_dot_product_attention(q[:, :, -1:], kk[:, :, -1:], vv[:, :, -1:])
    top_left = F.scaled_dot_product_attention(q[:, :, -1:], kk[:, :, :1], vv[:, :, :1])
    if torch.allclose(got, only_new, atol=1e-5):
        return "The new query attends only to the new key: use the keys and values cache.update returns (all of them)."
    if torch.allclose(got, top_left, atol=1e-5):
        return (
            "The new query sees only key 0: the causal mask is aligned top-left. With T_q < T_k the queries are "
            "the *last* T_q positions: causal_mask(T_q, T_k) aligns it bottom-right."
        )
    return ""


@EXERCISES.check("attend_with_cache", points=4)
def _prefill(fn):
    """empty cache, 5 tokens (prefill): causal attention, 4 query heads sharing 2 key/value heads"""
    q, k, v = _qkv(2, 4, 2, 5, 6, 7, seed=5)
    (got,), cache = _run_steps(fn, q, k, v, [5])
    expect_close("output", got, _attention_oracle(q, k, v, 5))
    expect_true(
        len(cache.keys) == 1 and cache.length(0) == 5,
        "After the prefill the cache should hold the 5 positions of layer 0: call cache.update(layer, k, v).",
    )


@EXERCISES.check("attend_with_cache")
def _decode(fn):
    """then one new token: it attends to all 6 keys, and the cache grows to 6 positions"""
    q, k, v = _qkv(2, 4, 2, 6, 6, 7, seed=6)
    outs, cache = _run_steps(fn, q, k, v, [5, 1])
    expected = _attention_oracle(q, k, v, 1)
    expect_close("output of the decode step", outs[1], expected, hint=_decode_hint(outs[1], q, k, v))
    expect_true(
        cache.length(0) == 6,
        Message(
            "After 5 + 1 positions the cache should hold 6, it holds {n}: cache every new key/value.", n=cache.length(0)
        ),
    )
    expect_close("cache.keys[0]", cache.keys[0], k)
    expect_close("cache.values[0]", cache.values[0], v)


@EXERCISES.check(
    "attend_with_cache",
    hidden=True,
    requires="handles several new tokens at once (bottom-right causal mask), MHA and MQA, and keeps each layer's keys and values under its `layer` in one cache",
)
def _chunks_and_layers(fn):
    """several new tokens at once (bottom-right mask), MHA and MQA, two layers"""
    for H_kv, seed in ((3, 7), (1, 8)):
        q, k, v = _qkv(3, 3, H_kv, 9, 4, 5, seed=seed)
        cache = KVCache()
        _run_steps(fn, *_qkv(3, 3, H_kv, 2, 4, 5, seed=seed + 10), [2], layer=0, cache=cache)  # layer 0 first
        outs, cache = _run_steps(fn, q, k, v, [4, 3, 1, 1], layer=1, cache=cache)
        for t, (got, n) in enumerate(zip(outs, (4, 3, 1, 1))):
            end = (4, 7, 8, 9)[t]
            expect_close(
                Message("output of step {t}", t=t),
                got,
                _attention_oracle(q[:, :, :end], k[:, :, :end], v[:, :, :end], n),
                hidden=True,
            )
        expect_true(cache.length(1) == 9 and cache.length(0) == 2, "each layer keeps its own cache (cache, layer)")


@EXERCISES.check(
    "attend_with_cache",
    hidden=True,
    requires="works in float16: float16 results, as in float32",
)
def _cache_half(fn):
    """float16 (a Colab GPU's dtype): a prefill of 3 then 2 new tokens give float16 results, as in float32"""
    q, k, v = _qkv(2, 4, 2, 5, 6, 7, seed=9)

    def run(dtype):
        return tuple(_run_steps(fn, q.to(dtype), k.to(dtype), v.to(dtype), [3, 2])[0])

    expect_half_precision("attend_with_cache", run)


@EXERCISES.check(
    "attend_with_cache",
    hidden=True,
    requires="handles a first step of a single token (empty cache), batch 1, and `d_v` ≠ `d_head`",
)
def _first_token_alone(fn):
    """batch 1, a first step of a single token (empty cache, T_q = T_k = 1), then decode steps; d_v != d_head"""
    q, k, v = _qkv(1, 6, 2, 4, 3, 5, seed=10)
    outs, cache = _run_steps(fn, q, k, v, [1, 1, 2])
    for got, end, n in zip(outs, (1, 2, 4), (1, 1, 2)):
        expect_close(
            Message("output after {end} positions", end=end),
            got,
            _attention_oracle(q[:, :, :end], k[:, :, :end], v[:, :, :end], n),
            hidden=True,
        )
    expect_true(cache.length(0) == 4, "the cache should hold the 4 positions fed so far")


# ---------------------------------------------------------------- exercise 3: MultiHeadLatentAttention


def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope_complex(x, positions, theta):
    """Interleaved RoPE as DeepSeek-V2's code: pairs (2i, 2i+1) as complex numbers, times e^{i m θ_i}."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64), positions[:, None] * inv_freq)
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(xc * freqs).flatten(-2).to(x.dtype)


_MLA_DEFAULTS = dict(d_v=None, d_cq=None, rope_theta=10000.0, eps=1e-6)  # MultiHeadLatentAttention's defaults


def _mla_oracle(m, x, sizes):
    """The whole sequence at once, from the module's parameters and the check's own ``sizes`` (the arguments it was
    built with, the defaults for the others; never the module's attributes, which its forward could change):
    (output, latent (B, T, d_c), rotary key (B, T, d_rope))."""
    sizes = {**_MLA_DEFAULTS, **sizes}
    B, T, _ = x.shape
    H, d_head, d_rope = sizes["n_heads"], sizes["d_head"], sizes["d_rope"]
    d_v = d_head if sizes["d_v"] is None else sizes["d_v"]
    theta, eps = sizes["rope_theta"], sizes["eps"]
    pos = torch.arange(T, dtype=torch.float64)
    if sizes["d_cq"] is None:
        q = F.linear(x, m.W_q.weight)
    else:
        q = F.linear(_rms(F.linear(x, m.W_dq.weight), m.q_norm.weight, eps), m.W_uq.weight)
    q = q.view(B, T, H, d_head + d_rope).transpose(1, 2)
    q = torch.cat([q[..., :d_head], _rope_complex(q[..., d_head:], pos, theta)], -1)
    latent = _rms(F.linear(x, m.W_dkv.weight), m.kv_norm.weight, eps)  # (B, T, d_c)
    k_rot = _rope_complex(F.linear(x, m.W_kr.weight), pos, theta)  # (B, T, d_rope)
    k_c = F.linear(latent, m.W_uk.weight).view(B, T, H, d_head).transpose(1, 2)
    v = F.linear(latent, m.W_uv.weight).view(B, T, H, d_v).transpose(1, 2)
    k = torch.cat([k_c, k_rot[:, None].expand(B, H, T, d_rope)], -1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * d_v)
    return F.linear(out, m.W_o.weight), latent, k_rot


def _build_mla(cls, seed, **sizes):
    torch.manual_seed(seed)
    args = ", ".join(f"{k}={v}" for k, v in sizes.items())
    m = call(Message("MultiHeadLatentAttention({args})", args=args), cls, **sizes)
    with torch.no_grad():
        g = rng(seed)
        for name, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3 + (1.0 if "norm" in name else 0.0))
    return m.eval()


_SIZES = dict(d_model=20, n_heads=4, d_c=6, d_head=3, d_rope=4, d_v=5)


@EXERCISES.check("MultiHeadLatentAttention", points=4)
def _mla_full(cls):
    """MLA(d_model=20, 4 heads, d_c=6, d_head=3, d_rope=4, d_v=5) on x (2, 7, 20), no cache"""
    m = _build_mla(cls, 1, **_SIZES)
    x = torch.randn(2, 7, 20, generator=rng(11))
    with torch.no_grad():
        expected = _mla_oracle(m, x, _SIZES)[0]
        got = call("mla(x)", m, x)
    expect_true(isinstance(got, tuple) and len(got) == 2, "forward should return (output, None).")
    expect_close("mla(x)[0]", got[0], expected)


@EXERCISES.check("MultiHeadLatentAttention")
def _mla_caches_latent(cls):
    """the cache holds only the normalised latent (B, 1, T, d_c) and the rotated shared key (B, 1, T, d_rope)"""
    m = _build_mla(cls, 2, **_SIZES)
    x = torch.randn(2, 5, 20, generator=rng(12))
    cache = KVCache()
    with torch.no_grad():
        _, latent, k_rot = _mla_oracle(m, x, _SIZES)
        call("mla(x, cache=cache)", m, x, cache=cache)
    expect_true(len(cache.keys) == 1, "mla(x, cache=cache) should store layer 0 with cache.update(layer, c_kv, k_r).")
    expect_close("cache.keys[0] (the latent c_KV)", cache.keys[0], latent[:, None])
    expect_close("cache.values[0] (the rotary key k_R)", cache.values[0], k_rot[:, None])


@EXERCISES.check(
    "MultiHeadLatentAttention",
    hidden=True,
    requires="decodes with the cache (a prefill, a chunk, single tokens), with a query latent (`d_cq`) too",
)
def _mla_decode(cls):
    """prefill, a chunk of 2, then single tokens with the cache; with a query latent (d_cq) too"""
    for seed, sizes in ((3, _SIZES), (4, dict(d_model=16, n_heads=2, d_c=5, d_head=4, d_rope=2, d_v=3, d_cq=7))):
        m = _build_mla(cls, seed, **sizes)
        x = torch.randn(3, 8, sizes["d_model"], generator=rng(seed + 20))
        cache = KVCache()
        with torch.no_grad():
            expected = _mla_oracle(m, x, sizes)[0]
            outs, t = [], 0
            for n in (3, 2, 1, 1, 1):
                outs.append(call("mla(x_new, cache=cache)", m, x[:, t : t + n], cache=cache)[0])
                t += n
        expect_close("outputs of the cached steps", torch.cat(outs, 1), expected, hidden=True)


@EXERCISES.check(
    "MultiHeadLatentAttention",
    hidden=True,
    requires="rotates with the module's own RoPE base (`self.rope_theta`), works with `d_v` at its default, and keeps each layer's latents under its `layer` in a shared cache",
)
def _mla_rope_base_and_layers(cls):
    """a RoPE base of 500 (not the default 10 000), d_v left at its default, two layers sharing one cache, batch 1"""
    sizes = dict(d_model=12, n_heads=3, d_c=4, d_head=2, d_rope=6, rope_theta=500.0)
    first = _build_mla(cls, 5, **sizes)
    second = _build_mla(cls, 6, **sizes)
    x0 = torch.randn(1, 7, 12, generator=rng(25))
    x1 = torch.randn(1, 7, 12, generator=rng(26))
    cache = KVCache()
    with torch.no_grad():
        expected, latent, k_rot = _mla_oracle(second, x1, sizes)  # the RoPE base 500 from the check's own sizes
        outs, t = [], 0
        for n in (1, 4, 2):  # a first step of one token, then a chunk, then two more
            call("layer 0: mla(x_new, cache=cache, layer=0)", first, x0[:, t : t + n], cache=cache, layer=0)
            out = call("layer 1: mla(x_new, cache=cache, layer=1)", second, x1[:, t : t + n], cache=cache, layer=1)
            expect_true(isinstance(out, tuple) and len(out) == 2, "forward should return (output, None).")
            expect_shape(Message("the output of a step of {n} new tokens", n=n), out[0], (1, n, 12))
            outs.append(out)
            t += n
    expect_true(
        len(cache.keys) == 2 and cache.length(1) == 7,
        "each layer keeps its own latents: cache.update(layer, c_kv, k_r) with the layer given to forward.",
    )
    expect_close("cache.keys[1] (layer 1's latent)", cache.keys[1], latent[:, None], hidden=True)
    expect_close(
        "cache.values[1] (layer 1's rotary key, RoPE base 500)",
        cache.values[1],
        k_rot[:, None],
        hidden=True,
        hint="rotate with the module's own base (self.rope_theta), not a fixed 10 000.",
    )
    expect_close("outputs of layer 1's cached steps", torch.cat([o[0] for o in outs], 1), expected, hidden=True)


__all__ = ["EXERCISES", "CheckFailed"]
