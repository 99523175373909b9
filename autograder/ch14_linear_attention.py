"""Checks for chapter 14, linear attention, the delta rule and hybrids (notebook
``notebooks/ch14_linear_attention.ipynb``).

The references are the papers' equations written out here in float64, independently of the course's solution:
Katharopoulos et al. 2020, eqs. 4-6, as running sums (``torch.cumsum`` of ``φ(k_j) v_jᵀ`` and ``φ(k_j)``, one
``d_k × d_v`` matrix per position); gated DeltaNet (Yang et al. 2025, eq. 10) in the papers' own orientation, a
``d_v × d_k`` state multiplied by explicit ``I - β k kᵀ`` matrices; and chapter 8's byte count written as a sum over
the layers of a stack. ``elu`` is bound here at import time, so that a student cell that rebinds it does not change
the reference.

Sizes are chosen so that batch, heads, T, d_k and d_v all differ, and so that the chunk sizes do not always divide T
(the last chunk is ragged).
"""

from __future__ import annotations

import math

import torch
from torch.nn.functional import elu as _elu
from torch.nn.functional import normalize as _normalize

from .checks.properties import UNSEEN
from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_half_precision,
    expect_true,
    largest_tensor,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch14_linear_attention")


def _randn(*shape, seed, dtype=torch.float32):
    return torch.randn(*shape, generator=rng(seed), dtype=torch.float64).to(dtype)


def _qkv(B, H, T, d_k, d_v, seed, dtype=torch.float32, unit_keys=False):
    q, k, v = _randn(B, H, T, d_k, seed=seed), _randn(B, H, T, d_k, seed=seed + 1), _randn(B, H, T, d_v, seed=seed + 2)
    if unit_keys:
        k = _normalize(k.double(), dim=-1).float()
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _phi(x):
    """φ = elu + 1, the feature map the checks pass (the notebook's own ``elu_feature_map`` may be rebound)."""
    return _elu(x) + 1


def _matches(got, mistaken) -> bool:
    """``got`` equals the value a known mistake gives (for hints: a cause is named only when the answer matches)."""
    return (
        isinstance(got, torch.Tensor)
        and mistaken is not None
        and got.shape == mistaken.shape
        and got.dtype == mistaken.dtype
        and bool(torch.allclose(got.double(), mistaken.double(), rtol=1e-4, atol=1e-5))
    )


def _hint_from(got, guesses: dict[Message, torch.Tensor | None]) -> Message | str:
    for text, value in guesses.items():
        if _matches(got, value):
            return text
    return ""


def _expect_pair(what, result, second: str) -> None:
    """The answer returned a pair ``(o, state)``: a tuple of two whose first is a tensor."""
    expect_true(
        isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.Tensor),
        Message(
            "{what} should return a pair (o, {second}); you returned {type}.",
            what=what,
            second=second,
            type=type(result).__name__,
        ),
    )


# ---------------------------------------------------------------- exercises 1 and 2: linear attention


def _linear_oracle(q, k, v, *, feature_map=_phi, normalize=True, state=None, strict=False):
    """Katharopoulos et al. 2020, eqs. 4-6 as running sums, float64: ``(o, S, z)`` in the inputs' dtype.
    ``strict``: the sums stop before the query's own token (a mistake, for hints)."""
    fq, fk = (q.double(), k.double()) if feature_map is None else (feature_map(q.double()), feature_map(k.double()))
    v64 = v.double()
    S_t = torch.einsum("bhtd,bhtv->bhtdv", fk, v64).cumsum(2)  # (B, H, T, d_k, d_v): S after token t
    z_t = fk.cumsum(2)  # (B, H, T, d_k)
    if state is not None:
        S_t = S_t + state[0].double()[:, :, None]
        z_t = z_t + state[1].double()[:, :, None]
    if strict:
        S0 = torch.zeros_like(S_t[:, :, :1]) if state is None else state[0].double()[:, :, None]
        z0 = torch.zeros_like(z_t[:, :, :1]) if state is None else state[1].double()[:, :, None]
        S_t, z_t = torch.cat([S0, S_t[:, :, :-1]], 2), torch.cat([z0, z_t[:, :, :-1]], 2)
    o = torch.einsum("bhtd,bhtdv->bhtv", fq, S_t)
    if normalize:
        o = o / torch.einsum("bhtd,bhtd->bht", fq, z_t)[..., None]
    dtype = q.dtype
    S_end = S_t[:, :, -1] if q.shape[2] else torch.zeros(*q.shape[:2], q.shape[-1], v.shape[-1], dtype=torch.float64)
    z_end = z_t[:, :, -1] if q.shape[2] else torch.zeros(*q.shape[:3:2], dtype=torch.float64)
    return o.to(dtype), S_end.to(dtype), z_end.to(dtype)


_CHUNK_HINTS = {
    "mask": Message(
        "Inside a chunk the attention is causal too: mask φ(Q_c)φ(K_c)ᵀ to its lower triangle, the diagonal included."
    ),
    "before": Message(
        "Your chunk reads a state that already holds the chunk itself: use the state of the tokens before the chunk, "
        "and add φ(K_c)ᵀV_c (and φ(K_c)ᵀ1) only after the chunk's output."
    ),
    "recipe": Message(
        "For each chunk [s, e): O_c = φ(Q_c) S + tril(φ(Q_c)φ(K_c)ᵀ) V_c with S the state of the tokens "
        "before s (and the same for the normaliser); then S += φ(K_c)ᵀ V_c. The last chunk may be shorter."
    ),
}


def _chunk_mistakes(q, k, v, chunk_size, normalize, state):
    """Outputs of two chunk mistakes, float64 then the inputs' dtype: (no mask inside a chunk, state read too late)."""
    fq, fk, v64 = _phi(q.double()), _phi(k.double()), v.double()
    T = q.shape[2]
    S = torch.zeros(*q.shape[:2], q.shape[-1], v.shape[-1], dtype=torch.float64)
    z = torch.zeros(*q.shape[:2], q.shape[-1], dtype=torch.float64)
    if state is not None:
        S, z = state[0].double(), state[1].double()
    nomask, late = [], []
    for s in range(0, T, chunk_size):
        Qc, Kc, Vc = fq[:, :, s : s + chunk_size], fk[:, :, s : s + chunk_size], v64[:, :, s : s + chunk_size]
        A = Qc @ Kc.transpose(-1, -2)
        A_c = A * torch.ones_like(A[0, 0]).tril()
        o1, d1 = Qc @ S + A @ Vc, (Qc @ z[..., None])[..., 0] + A.sum(-1)
        S2, z2 = S + Kc.transpose(-1, -2) @ Vc, z + Kc.sum(-2)
        o2, d2 = Qc @ S2 + A_c @ Vc, (Qc @ z2[..., None])[..., 0] + A_c.sum(-1)
        nomask.append(o1 / d1[..., None] if normalize else o1)
        late.append(o2 / d2[..., None] if normalize else o2)
        S, z = S2, z2
    return torch.cat(nomask, 2).to(q.dtype), torch.cat(late, 2).to(q.dtype)


def _linear_hints(got, q, k, v, chunk_size, feature_map, normalize, state) -> Message | str:
    """The causes the output of a linear-attention answer (chunkwise where ``chunk_size`` is given) can be
    recognised by; for a chunkwise answer of the right shape that matches none, the chunks' recipe."""
    guesses: dict[Message, torch.Tensor | None] = {}
    if chunk_size is not None:
        nomask, late = _chunk_mistakes(q, k, v, chunk_size, normalize, state)
        guesses = {_CHUNK_HINTS["mask"]: nomask, _CHUNK_HINTS["before"]: late}
    text = _hint_from(
        got,
        {
            **guesses,
            Message(
                "Your output is not divided by the normaliser: with normalize=True, o_t = S_tᵀ φ(q_t) / (z_tᵀ φ(q_t))."
            ): _linear_oracle(q, k, v, feature_map=feature_map, normalize=False, state=state)[0] if normalize else None,
            Message(
                "Your output at token t leaves token t out: add φ(k_t) v_tᵀ (and φ(k_t)) to the state before you read "
                "it with φ(q_t) — the causal sum runs over j ≤ t, the token itself included."
            ): _linear_oracle(q, k, v, feature_map=feature_map, normalize=normalize, state=state, strict=True)[0],
            Message("Your output uses q and k without the feature map: apply φ = feature_map to both."): (
                _linear_oracle(q, k, v, feature_map=None, normalize=normalize, state=state)[0]
                if feature_map is not None and not normalize
                else None
            ),
            Message("Your output ignores the state it was given: start from state = (S, z) when one is passed."): (
                _linear_oracle(q, k, v, feature_map=feature_map, normalize=normalize)[0] if state is not None else None
            ),
        },
    )
    shape = (*q.shape[:-1], v.shape[-1])
    if not text and chunk_size is not None and chunk_size > 1 and isinstance(got, torch.Tensor) and got.shape == shape:
        return _CHUNK_HINTS["recipe"]
    return text


def _compare_linear(fn, q, k, v, *, chunk_size=None, feature_map=_phi, normalize=True, state=None, hidden=False):
    """The student's ``linear_attention_recurrent`` (``chunk_size`` None) or ``linear_attention_chunkwise`` against
    the running sums: the output, then the state ``(S, z)`` after the last token."""
    what = Message(
        "{name}(q {shape}, k, v {v_shape}{chunk}, feature_map={feature_map}, normalize={normalize}, state={state})",
        name="linear_attention_recurrent" if chunk_size is None else "linear_attention_chunkwise",
        shape=tuple(q.shape),
        v_shape=tuple(v.shape),
        chunk="" if chunk_size is None else f", chunk_size={chunk_size}",
        feature_map="φ" if feature_map is _phi else ("None" if feature_map is None else "softplus"),
        normalize=normalize,
        state="None" if state is None else "given",
    )
    args = (q, k, v) if chunk_size is None else (q, k, v, chunk_size)
    result = call(what, fn, *args, feature_map=feature_map, normalize=normalize, state=state)
    _expect_pair(what, result, "(S, z)")
    o, new_state = result
    exp_o, exp_S, exp_z = _linear_oracle(q, k, v, feature_map=feature_map, normalize=normalize, state=state)
    hint = "" if hidden else _linear_hints(o, q, k, v, chunk_size, feature_map, normalize, state)
    expect_close(Message("{what}: o", what=what), o, exp_o, hidden=hidden, hint=hint)
    expect_true(
        isinstance(new_state, tuple) and len(new_state) == 2,
        Message("{what}: the state should be a pair (S, z).", what=what),
    )
    expect_close(Message("{what}: S", what=what), new_state[0], exp_S, hidden=hidden)
    expect_close(Message("{what}: z", what=what), new_state[1], exp_z, hidden=hidden)


def _softplus_features(x: torch.Tensor) -> torch.Tensor:
    return torch.log1p(torch.exp(x))


def _given_state(B, H, d_k, d_v, seed, dtype=torch.float32):
    """A state as earlier tokens would leave it: S any matrix, z positive."""
    return _randn(B, H, d_k, d_v, seed=seed, dtype=dtype), (_randn(B, H, d_k, seed=seed + 1).abs() + 1).to(dtype)


@EXERCISES.check("linear_attention_recurrent", points=3)
def _recurrent_basic(fn):
    """equals Katharopoulos et al.'s causal linear attention, φ = elu + 1, normalised: q, k (2, 3, 7, 4), v (2, 3, 7, 5)"""
    _compare_linear(fn, *_qkv(2, 3, 7, 4, 5, seed=1))


@EXERCISES.check("linear_attention_recurrent")
def _recurrent_unnormalised(fn):
    """normalize=False (the running sum Sᵀφ(q_t) alone) and feature_map=None (q, k used as given)"""
    q, k, v = _qkv(1, 2, 6, 3, 4, seed=2)
    _compare_linear(fn, q, k, v, normalize=False)
    _compare_linear(fn, q, k, v, feature_map=None, normalize=False)


@EXERCISES.check(
    "linear_attention_recurrent",
    hidden=True,
    requires="starts from the state it is given, and from zeros when none is given (the same inputs give the same output twice)",
)
def _recurrent_state(fn):
    """continues from a given state (S, z); two calls without one give the same result"""
    q, k, v = _qkv(2, 2, 5, 4, 3, seed=3)
    _compare_linear(fn, q, k, v, state=_given_state(2, 2, 4, 3, seed=4), hidden=True)
    _compare_linear(fn, q, k, v, hidden=True)
    _compare_linear(fn, q, k, v, hidden=True)


@EXERCISES.check(
    "linear_attention_recurrent",
    hidden=True,
    requires="uses the feature_map it is given, in float64, for one token and for a batch of one",
)
def _recurrent_other(fn):
    """softplus as the feature map in float64; T = 1; B = 1"""
    q, k, v = _qkv(3, 2, 8, 5, 2, seed=5, dtype=torch.float64)
    _compare_linear(fn, q, k, v, feature_map=_softplus_features, hidden=True)
    _compare_linear(fn, *_qkv(2, 3, 1, 4, 6, seed=6), hidden=True)
    _compare_linear(fn, *_qkv(1, 1, 9, 2, 3, seed=7), hidden=True)


def _half_run(fn, name: str, *args, second="(S, z)", **kwargs):
    """``run(dtype)`` for :func:`expect_half_precision`: ``fn(*args, **kwargs)`` with the floating tensors of ``args``
    in ``dtype``, which must return a pair ``(o, second)``."""

    def run(dtype):
        cast = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        result = call(Message("{name} in {dtype}", name=name, dtype=dtype), fn, *cast, **kwargs)
        _expect_pair(name, result, second)
        return result

    return run


@EXERCISES.check(
    "linear_attention_recurrent",
    hidden=True,
    requires="keeps float16 inputs in float16 (output and state), agreeing with its float32 run",
)
def _recurrent_half(fn):
    """float16 inputs: o, S and z in float16, as in float32"""
    q, k, v = _qkv(2, 2, 8, 4, 3, seed=8)
    run = _half_run(fn, "linear_attention_recurrent", q, k, v, feature_map=_phi)
    expect_half_precision("linear_attention_recurrent", run)


@EXERCISES.check("linear_attention_chunkwise", points=3)
def _chunkwise_divides(fn):
    """equals the recurrence: q, k (2, 3, 12, 4), v (2, 3, 12, 5), chunk_size=4 (three full chunks)"""
    _compare_linear(fn, *_qkv(2, 3, 12, 4, 5, seed=11), chunk_size=4)


@EXERCISES.check("linear_attention_chunkwise")
def _chunkwise_ragged(fn):
    """chunk_size=5 does not divide T = 12 (the last chunk holds 2 tokens); normalize=False too"""
    q, k, v = _qkv(2, 2, 12, 3, 4, seed=12)
    _compare_linear(fn, q, k, v, chunk_size=5)
    _compare_linear(fn, q, k, v, chunk_size=5, normalize=False)


@EXERCISES.check(
    "linear_attention_chunkwise",
    hidden=True,
    requires="works for chunks of 1 token, of exactly T tokens and longer than T, and for sizes that do not divide T",
)
def _chunkwise_sizes(fn):
    """chunk_size 1, T, T + 3 and 3 (not dividing T = 10)"""
    q, k, v = _qkv(1, 2, 10, 5, 3, seed=13)
    for chunk_size in (1, 10, 13, 3):
        _compare_linear(fn, q, k, v, chunk_size=chunk_size, hidden=True)


@EXERCISES.check(
    "linear_attention_chunkwise",
    hidden=True,
    requires="starts from the state it is given and returns the state after the last chunk",
)
def _chunkwise_state(fn):
    """a given state (S, z), chunk_size=3 with T = 8"""
    q, k, v = _qkv(2, 3, 8, 4, 2, seed=14)
    _compare_linear(fn, q, k, v, chunk_size=3, state=_given_state(2, 3, 4, 2, seed=15), hidden=True)


@EXERCISES.check(
    "linear_attention_chunkwise",
    hidden=True,
    requires="keeps float16 inputs in float16 (output and state), agreeing with its float32 run",
)
def _chunkwise_half(fn):
    """float16 inputs, chunk_size=3 with T = 8: o, S and z in float16, as in float32"""
    q, k, v = _qkv(2, 2, 8, 4, 3, seed=16)
    run = _half_run(fn, "linear_attention_chunkwise", q, k, v, 3, feature_map=_phi)
    expect_half_precision("linear_attention_chunkwise", run)


@EXERCISES.check(
    "linear_attention_chunkwise",
    hidden=True,
    requires="works chunk by chunk: never makes a tensor as large as one head's whole T × T matrix",
)
def _chunkwise_blocks_only(fn):
    """Tried q, k (1, 2, 48, 4), v (1, 2, 48, 6), chunk_size=8, and measured the largest tensor the call makes
    (T · T = 2304 numbers would be one head's whole matrix)."""
    q, k, v = _qkv(1, 2, 48, 4, 6, seed=17)
    what = "linear_attention_chunkwise(q (1, 2, 48, 4), k, v (1, 2, 48, 6), 8)"
    numel, shape, seen, result = call(what, lambda: largest_tensor(fn, q, k, v, 8, feature_map=_phi))
    _expect_pair(what, result, "(S, z)")
    expect_true(
        seen,
        Message(
            "{what}: the result {unseen}. The check measures the tensors your passes make; it cannot measure what it "
            "does not see.",
            what=what,
            unseen=UNSEEN,
        ),
    )
    expect_true(
        numel < 48 * 48,
        Message(
            "{what} made a tensor of {numel} numbers (shape {shape}): at least T · T = {total}, one head's whole "
            "matrix. The chunkwise form holds one chunk_size × chunk_size block of φ(Q_c)φ(K_c)ᵀ at a time.",
            what=what,
            numel=numel,
            shape=tuple(shape),
            total=48 * 48,
        ),
    )
    expect_close(Message("{what}: o", what=what), result[0], _linear_oracle(q, k, v)[0], hidden=True)


# ---------------------------------------------------------------- exercise 3: gated_delta_rule_recurrent


def _delta_oracle(q, k, v, beta, g, state=None, *, mistake=None):
    """Yang et al. 2025, eq. 10, float64, the paper's orientation (S ∈ R^{d_v × d_k}, o_t = S_t q_t):
    S_t = α_t S_{t-1} (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ. Returns ``(o, S transposed to (d_k, d_v))`` in the inputs'
    dtype. ``mistake`` (for hints): "beta_side", "decay_twice", "decay_after", "read_before", "no_delta"."""
    q64, k64, v64, b64 = q.double(), k.double(), v.double(), beta.double()
    B, H, T, d_k = q.shape
    eye = torch.eye(d_k, dtype=torch.float64)
    S = torch.zeros(B, H, v.shape[-1], d_k, dtype=torch.float64) if state is None else state.double().transpose(-1, -2)
    outs = []
    for t in range(T):
        kt, vt, bt, qt = k64[:, :, t, :, None], v64[:, :, t, :, None], b64[:, :, t, None, None], q64[:, :, t, :, None]
        a = torch.ones_like(bt) if g is None else torch.exp(g.double()[:, :, t])[..., None, None]
        if mistake == "read_before":
            outs.append((a * S @ qt)[..., 0])
        if mistake == "beta_side":
            S_new = a * S - a * S @ kt @ kt.transpose(-1, -2) + bt * vt @ kt.transpose(-1, -2)
        elif mistake == "no_delta":
            S_new = a * S + bt * vt @ kt.transpose(-1, -2)
        elif mistake == "decay_after":
            S_new = a * (S @ (eye - bt * kt @ kt.transpose(-1, -2)) + bt * vt @ kt.transpose(-1, -2))
        elif mistake == "decay_twice":
            S_new = a * a * S @ (eye - bt * kt @ kt.transpose(-1, -2)) + bt * vt @ kt.transpose(-1, -2)
        else:
            S_new = a * S @ (eye - bt * kt @ kt.transpose(-1, -2)) + bt * vt @ kt.transpose(-1, -2)
        S = S_new
        if mistake != "read_before":
            outs.append((S @ qt)[..., 0])
    o = torch.stack(outs, 2) if outs else torch.zeros(B, H, 0, v.shape[-1], dtype=torch.float64)
    return o.to(q.dtype), S.transpose(-1, -2).to(q.dtype)


_DELTA_HINTS = {
    "beta_side": Message(
        "β scales the whole correction, β_t (v_t - Sᵀk_t): your update subtracts what the state returns for k_t "
        "without β."
    ),
    "no_delta": Message(
        "Your update only adds β_t k_t v_tᵀ: the delta rule writes the difference v_t - Sᵀk_t between the value and "
        "what the state already returns for k_t."
    ),
    "decay_after": Message(
        "The decay α_t = exp(g_t) forgets the old state before token t writes; your update decays token t's own write "
        "as well."
    ),
    "decay_twice": Message("Your old state is decayed twice per token (α_t² S): multiply by α_t = exp(g_t) once."),
    "read_before": Message(
        "Your output at token t is read before token t is written: update S first, then o_t = Sᵀ q_t."
    ),
}


def _delta_inputs(B, H, T, d_k, d_v, seed, dtype=torch.float32, unit_keys=True):
    q, k, v = _qkv(B, H, T, d_k, d_v, seed, unit_keys=unit_keys)
    beta = torch.rand(B, H, T, generator=rng(seed + 3), dtype=torch.float64).float()
    g = -torch.rand(B, H, T, generator=rng(seed + 4), dtype=torch.float64).float()  # α in (e^-1, 1]
    return tuple(t.to(dtype) for t in (q, k, v, beta, g))


def _compare_delta(fn, q, k, v, beta, g, *, state=None, hidden=False, label=""):
    what = Message(
        "gated_delta_rule_recurrent(q {shape}, k, v {v_shape}, beta, g={g}, state={state})",
        shape=tuple(q.shape),
        v_shape=tuple(v.shape),
        g="None" if g is None else (label or "given"),
        state="None" if state is None else "given",
    )
    result = call(what, fn, q, k, v, beta, g, state=state)
    _expect_pair(what, result, "S")
    o, S = result
    exp_o, exp_S = _delta_oracle(q, k, v, beta, g, state)
    hint: Message | str = ""
    if not hidden:
        mistakes = ["beta_side", "no_delta", "read_before"] + (["decay_after", "decay_twice"] if g is not None else [])
        hint = _hint_from(o, {_DELTA_HINTS[m]: _delta_oracle(q, k, v, beta, g, state, mistake=m)[0] for m in mistakes})
    expect_close(Message("{what}: o", what=what), o, exp_o, hidden=hidden, hint=hint)
    expect_close(Message("{what}: S", what=what), S, exp_S, hidden=hidden)


@EXERCISES.check("gated_delta_rule_recurrent", points=3)
def _delta_gated(fn):
    """equals gated DeltaNet's update S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ: q, k (2, 3, 6, 4) with unit keys, v (2, 3, 6, 5)"""
    _compare_delta(fn, *_delta_inputs(2, 3, 6, 4, 5, seed=21))


@EXERCISES.check("gated_delta_rule_recurrent")
def _delta_ungated(fn):
    """g=None is DeltaNet (no decay): q, k (1, 2, 7, 3), v (1, 2, 7, 2)"""
    q, k, v, beta, _ = _delta_inputs(1, 2, 7, 3, 2, seed=22)
    _compare_delta(fn, q, k, v, beta, None)


@EXERCISES.check(
    "gated_delta_rule_recurrent",
    hidden=True,
    requires="handles the extreme gates: β = 0 (nothing written), β = 1, g = -inf (the state wiped) and g = 0",
)
def _delta_extremes(fn):
    """β = 0, β = 1, g = -inf and g = 0"""
    q, k, v, beta, g = _delta_inputs(2, 2, 6, 4, 3, seed=23)
    _compare_delta(fn, q, k, v, torch.zeros_like(beta), g, hidden=True)
    _compare_delta(fn, q, k, v, torch.ones_like(beta), g, hidden=True)
    _compare_delta(fn, q, k, v, beta, torch.full_like(g, -math.inf), hidden=True, label="-inf")
    _compare_delta(fn, q, k, v, beta, torch.zeros_like(g), hidden=True, label="0")


@EXERCISES.check(
    "gated_delta_rule_recurrent",
    hidden=True,
    requires="starts from the state it is given, uses the keys as given (no normalisation inside) and works in float64",
)
def _delta_state(fn):
    """a given state, keys that are not unit vectors, float64"""
    q, k, v, beta, g = _delta_inputs(2, 3, 5, 4, 6, seed=24, dtype=torch.float64, unit_keys=False)
    k = k / 2  # short keys: ‖k‖ about 1, not exactly
    state = _randn(2, 3, 4, 6, seed=25, dtype=torch.float64)
    _compare_delta(fn, q, k, v, beta, g, state=state, hidden=True)


@EXERCISES.check(
    "gated_delta_rule_recurrent",
    hidden=True,
    requires="keeps float16 inputs in float16 (output and state), agreeing with its float32 run",
)
def _delta_half(fn):
    """float16 inputs: o and S in float16, as in float32"""
    run = _half_run(fn, "gated_delta_rule_recurrent", *_delta_inputs(2, 2, 6, 4, 3, seed=26), second="S")
    expect_half_precision("gated_delta_rule_recurrent", run)


# ---------------------------------------------------------------- exercise 4: decode_state_bytes


def _bytes_oracle(
    n_layers,
    T,
    *,
    full_attention_interval,
    n_kv_heads,
    d_head,
    n_linear_heads,
    d_k,
    d_v,
    bytes_per_element,
    mistake=None,
) -> int:
    """A sum over the stack, layer by layer: chapter 8's 2·H_kv·d_head·T per softmax layer, H·d_k·d_v per linear one."""
    interval, bpe = full_attention_interval, bytes_per_element
    total = 0
    for i in range(n_layers):
        full = interval is not None and (i + 1) % interval == 0
        if mistake == "ceil" and interval is not None:
            full = i % interval == 0
        if full:
            total += (1 if mistake == "no_two" else 2) * n_kv_heads * d_head * T * bpe
        else:
            state = n_linear_heads * d_k * d_v * (T if mistake == "per_token" else 1)
            total += state * (1 if mistake == "no_bytes" else bpe)
    return total


_BYTES_HINTS = {
    "per_token": Message("A linear layer's state does not grow with T: it is n_linear_heads · d_k · d_v numbers."),
    "no_two": Message("A softmax layer caches a key and a value per token: 2 · n_kv_heads · d_head · T numbers."),
    "no_bytes": Message("Multiply the linear layers' states by bytes_per_element too."),
    "ceil": Message(
        "Layer i is softmax attention when (i + 1) % full_attention_interval == 0: n_layers // "
        "full_attention_interval layers, the last of each group of full_attention_interval."
    ),
}


def _compare_bytes(fn, *, n_layers, T, hidden=False, **sizes):
    """The answer's ``decode_state_bytes(n_layers, T, **sizes)`` against the sum over the layers."""
    said = ", ".join(f"{name}={value}" for name, value in sizes.items())
    what = Message("decode_state_bytes({n_layers}, {T}, {sizes})", n_layers=n_layers, T=T, sizes=said)
    got = call(what, fn, n_layers, T, **sizes)
    expected = _bytes_oracle(n_layers, T, **sizes)
    hint = "" if hidden else _bytes_hint(got, n_layers, T, sizes)
    _expect_bytes(what, got, expected, hidden=hidden, hint=hint)


def _bytes_hint(got, n_layers, T, sizes) -> Message | str:
    """The cause, when the answer equals what one of the catalogued mistakes gives."""
    if not isinstance(got, int):
        return ""
    return next((text for m, text in _BYTES_HINTS.items() if got == _bytes_oracle(n_layers, T, **sizes, mistake=m)), "")


def _expect_bytes(what, got, expected: int, *, hidden: bool, hint) -> None:
    """An int equal to ``expected``; a hidden check's message names neither number."""
    expect_true(
        isinstance(got, int) and not isinstance(got, bool),
        Message("{what} should return an int (bytes); you returned {type}.", what=what, type=type(got).__name__),
    )
    if got != expected:
        if hidden:
            raise CheckFailed(Message("{what}: not the number of bytes the stack holds.", what=what))
        msg = Message("{what}: expected {expected} bytes, you gave {got}.", what=what, expected=expected, got=got)
        raise CheckFailed(Message("{failure}\n  {hint}", failure=msg, hint=Message("hint", hint=hint)) if hint else msg)


_QWEN3_NEXT = dict(
    n_layers=48, full_attention_interval=4, n_kv_heads=2, d_head=256, n_linear_heads=32, d_k=128, d_v=128
)


@EXERCISES.check("decode_state_bytes", points=2)
def _bytes_qwen(fn):
    """Qwen3-Next-80B-A3B's shape (48 layers, every fourth softmax) in bfloat16 at T = 4096"""
    _compare_bytes(fn, T=4096, **_QWEN3_NEXT, bytes_per_element=2)


@EXERCISES.check("decode_state_bytes")
def _bytes_all_or_none(fn):
    """full_attention_interval=1 is chapter 8's KV cache; None keeps no cache at all (same bytes at T = 10 and 10⁶)"""
    _compare_bytes(fn, T=100, **{**_QWEN3_NEXT, "full_attention_interval": 1}, bytes_per_element=4)
    for T in (10, 10**6):
        _compare_bytes(fn, T=T, **{**_QWEN3_NEXT, "full_attention_interval": None}, bytes_per_element=2)


@EXERCISES.check(
    "decode_state_bytes",
    hidden=True,
    requires="counts the softmax layers right when full_attention_interval does not divide n_layers, and at T = 0",
)
def _bytes_ragged(fn):
    """10 layers with interval 4 (softmax at layers 3 and 7); T = 0"""
    small = dict(n_layers=10, full_attention_interval=4, n_kv_heads=3, d_head=8, n_linear_heads=2, d_k=5, d_v=7)
    _compare_bytes(fn, T=9, hidden=True, **small, bytes_per_element=4)
    _compare_bytes(fn, T=0, hidden=True, **small, bytes_per_element=2)
    fewer = {**small, "n_layers": 3}  # fewer layers than the interval
    _compare_bytes(fn, T=5, hidden=True, **fewer, bytes_per_element=1)


__all__ = ["EXERCISES", "CheckFailed"]
