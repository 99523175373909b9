"""Chapter 14 — After softmax: linear attention (线性注意力), the delta rule (增量规则) and hybrid models (混合架构).

Chapter 1's recurrent network carried a fixed-size state from token to token; attention replaced it by a look at
every earlier token, at a cost that grows with ``T`` (chapter 8's KV cache). Linear attention brings the state back.
Replace softmax's ``exp(q·k)`` by a product of feature maps (特征映射) ``φ(q)·φ(k)`` (Katharopoulos et al. 2020,
"Transformers are RNNs", eqs. 2-6) and causal attention becomes a recurrence over a ``d_k × d_v`` matrix state

    S_t = S_{t-1} + φ(k_t) v_tᵀ,   z_t = z_{t-1} + φ(k_t),   o_t = S_tᵀ φ(q_t) / (z_tᵀ φ(q_t)),

computed three ways that agree: the masked ``T × T`` *parallel* form (chapter 3's shape), the *recurrent* form
(chapter 1's), and the *chunkwise* form (分块形式: parallel inside a chunk, recurrent across chunks) that trains.

The delta rule (Schlag et al. 2021, "Linear Transformers Are Secretly Fast Weight Programmers", eq. 23) corrects
the state instead of only adding to it: with the value the state already predicts for ``k_t``, ``S_{t-1}ᵀ k_t``,

    S_t = S_{t-1} + β_t k_t (v_t - S_{t-1}ᵀ k_t)ᵀ = (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ,

and gated DeltaNet (Yang et al. 2025, "Gated Delta Networks", eq. 10) lets it forget, ``α_t = exp(g_t)``:

    S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ.

Orientation: every state here is ``(d_k, d_v)`` and read as ``o_t = S_tᵀ q_t``, as in Katharopoulos et al. and in
``flash-linear-attention``; Yang et al. write the transpose, ``S_t ∈ R^{d_v × d_k}``, ``o_t = S_t q_t`` and
``S_t = S_{t-1} - β_t (S_{t-1} k_t - v_t) k_tᵀ`` — the same numbers. The delta rule's functions take the keys as
given: DeltaNet L2-normalises them (and the queries) in the *layer* (Yang et al. 2024, section 3.3), which makes
``I - β k kᵀ`` a contraction for ``0 ≤ β ≤ 1``; :class:`DeltaNetAttention` does it.

Reading order follows the book:

1. :func:`elu_feature_map`, :func:`linear_attention_parallel`, :func:`linear_attention_recurrent`,
   :func:`linear_attention_chunkwise` — linear attention, three ways;
2. :func:`delta_rule_recurrent`, :func:`delta_rule_chunkwise` — DeltaNet, the chunkwise form through the
   WY / UT representation (Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence
   Length", section 3);
3. :func:`gated_delta_rule_recurrent`, :func:`gated_delta_rule_chunkwise` — gated DeltaNet;
4. :func:`gated_linear_attention_recurrent`, :func:`state_space_parallel` — Mamba-2's state-space duality (Dao &
   Gu 2024, section 3): a scalar-decay state-space model is gated linear attention, and its ``T × T`` form is a
   decay-masked attention;
5. :class:`LinearAttention`, :class:`DeltaNetAttention`, :func:`hybrid_gpt` — layers with chapter 4's attention
   interface, dropped into chapter 6's GPT three layers in four (Qwen3-Next's ``full_attention_interval: 4``);
6. :func:`decode_state_bytes` — chapter 8's cache estimate for linear and hybrid stacks: constant in ``T``;
7. :func:`mqar_batch` — multi-query associative recall (Arora et al. 2023, "Zoology", section 3), the task that
   shows what a fixed-size state forgets.

Shapes: ``q, k`` are ``(B, H, T, d_k)``, ``v`` ``(B, H, T, d_v)``, ``beta`` and ``g`` ``(B, H, T)``; states
``(B, H, d_k, d_v)``. Every function works in the inputs' dtype and on their device.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch04_multi_head_attention import merge_heads, split_heads
from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch08_kv_cache import kv_cache_bytes

__all__ = [
    "elu_feature_map",
    "linear_attention_parallel",
    "linear_attention_recurrent",
    "linear_attention_chunkwise",
    "delta_rule_recurrent",
    "delta_rule_chunkwise",
    "gated_delta_rule_recurrent",
    "gated_delta_rule_chunkwise",
    "gated_linear_attention_recurrent",
    "state_space_parallel",
    "LinearAttention",
    "DeltaNetAttention",
    "hybrid_gpt",
    "decode_state_bytes",
    "QWEN3_NEXT_80B_A3B",
    "mqar_batch",
]

FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """q, k ``(B, H, T, d_k)``, v ``(B, H, T, d_v)`` (ValueError naming the shapes otherwise)."""
    if q.ndim != 4 or k.shape != q.shape or v.ndim != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f"q, k must be (B, H, T, d_k) and v (B, H, T, d_v) with the same B, H, T; "
            f"got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )


def _check_gates(q: torch.Tensor, **gates: torch.Tensor | None) -> None:
    """Each gate (beta, g) is ``(B, H, T)`` like ``q``'s first three axes."""
    for name, x in gates.items():
        if x is not None and tuple(x.shape) != tuple(q.shape[:3]):
            raise ValueError(f"{name} must be (B, H, T) = {tuple(q.shape[:3])}, got {tuple(x.shape)}")


def _check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")


# --------------------------------------------------------------------------------------------------
# 1. Linear attention (线性注意力), three ways
# --------------------------------------------------------------------------------------------------


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """The feature map (特征映射) ``φ(x) = elu(x) + 1``, elementwise: positive, so every normaliser is positive.

    Args:
        x: any float tensor. Returns: same shape, dtype and device, every entry > 0.

    Source: Katharopoulos et al. 2020, eq. 7.
    """
    return F.elu(x) + 1


def _features(q: torch.Tensor, k: torch.Tensor, feature_map: FeatureMap | None) -> tuple[torch.Tensor, torch.Tensor]:
    return (q, k) if feature_map is None else (feature_map(q), feature_map(k))


def linear_attention_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    feature_map: FeatureMap | None = elu_feature_map,
    normalize: bool = True,
) -> torch.Tensor:
    r"""Causal linear attention in its masked ``T × T`` form: ``A = tril(φ(Q) φ(K)ᵀ)``, ``O = A V / (A 1)``.

    Chapter 3's attention with ``exp(q·k/√d_k)`` replaced by ``φ(q)·φ(k)``: the weights of query ``t`` are
    ``φ(q_t)·φ(k_j) / Σ_{j'≤t} φ(q_t)·φ(k_{j'})`` for ``j ≤ t``. Quadratic in ``T``, like softmax attention.

    Args:
        q, k: ``(B, H, T, d_k)``; v: ``(B, H, T, d_v)``; one float dtype.
        feature_map: ``φ``, applied to ``q`` and ``k`` (None: they are used as given).
        normalize: divide by the sum of the weights (Katharopoulos et al.); False: the unnormalised sum, as
            most recent linear-attention models (RetNet, GLA, DeltaNet) use with a norm after the layer instead.

    Returns:
        ``(B, H, T, d_v)``, same dtype and device.

    Raises:
        ValueError: if the shapes do not fit (the message names them).

    Source: Katharopoulos et al. 2020, eqs. 4 and 6 (the causal sum up to ``i``).
    """
    _check_qkv(q, k, v)
    phi_q, phi_k = _features(q, k, feature_map)  # (B, H, T, d_k)
    T = q.shape[-2]
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()  # (T, T), True = may attend
    A = (phi_q @ phi_k.transpose(-1, -2)).masked_fill(~causal, 0)  # (B, H, T, T)
    o = A @ v  # (B, H, T, d_v)
    return o / A.sum(-1, keepdim=True) if normalize else o


def linear_attention_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    feature_map: FeatureMap | None = elu_feature_map,
    normalize: bool = True,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    r"""Causal linear attention as a recurrence (循环形式): one ``d_k × d_v`` state update per token.

    For ``t = 0 … T-1``: ``S ← S + φ(k_t) v_tᵀ``, ``z ← z + φ(k_t)``, then ``o_t = S ᵀφ(q_t)``, divided by
    ``zᵀ φ(q_t)`` when ``normalize``. The state does not grow with ``T``: chapter 1's recurrence with a matrix state.

    Args:
        q, k: ``(B, H, T, d_k)``; v: ``(B, H, T, d_v)``; one float dtype.
        feature_map, normalize: as :func:`linear_attention_parallel`.
        state: ``(S (B, H, d_k, d_v), z (B, H, d_k))`` carried from an earlier call (the tokens before these);
            None: zeros — every sequence starts from an empty state.

    Returns:
        ``(o (B, H, T, d_v), (S, z))``: the outputs and the state after the last token, in the inputs' dtype. The
        state is returned whether or not ``normalize`` is set.

    Raises:
        ValueError: if the shapes, or the state's, do not fit.

    Source: Katharopoulos et al. 2020, eqs. 16-20 (section 3.4, "Transformers are RNNs").
    """
    _check_qkv(q, k, v)
    B, H, T, d_k = q.shape
    d_v = v.shape[-1]
    if state is not None and (state[0].shape != (B, H, d_k, d_v) or state[1].shape != (B, H, d_k)):
        raise ValueError(
            f"state must be (S (B, H, d_k, d_v), z (B, H, d_k)) = ({(B, H, d_k, d_v)}, {(B, H, d_k)}); "
            f"got ({tuple(state[0].shape)}, {tuple(state[1].shape)})"
        )
    ### BEGIN SOLUTION
    phi_q, phi_k = _features(q, k, feature_map)  # (B, H, T, d_k)
    if state is None:
        S = q.new_zeros(B, H, d_k, d_v)  # the memory: sum of φ(k) vᵀ
        z = q.new_zeros(B, H, d_k)  # the normaliser: sum of φ(k)
    else:
        S, z = state
    outputs = []
    for t in range(T):
        S = S + phi_k[:, :, t, :, None] * v[:, :, t, None, :]  # (B, H, d_k, d_v) += φ(k_t) v_tᵀ
        z = z + phi_k[:, :, t]  # (B, H, d_k)
        o_t = (phi_q[:, :, t, :, None] * S).sum(-2)  # (B, H, d_v): Sᵀ φ(q_t)
        if normalize:
            o_t = o_t / (phi_q[:, :, t] * z).sum(-1, keepdim=True)  # ÷ zᵀ φ(q_t), (B, H, 1)
        outputs.append(o_t)
    o = torch.stack(outputs, dim=2) if outputs else v.new_zeros(B, H, 0, d_v)  # (B, H, T, d_v)
    return o, (S, z)
    ### END SOLUTION


def linear_attention_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chunk_size: int,
    *,
    feature_map: FeatureMap | None = elu_feature_map,
    normalize: bool = True,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    r"""Causal linear attention chunk by chunk (分块形式): parallel inside a chunk, recurrent across chunks.

    Cut the ``T`` positions into chunks of ``chunk_size`` (the last one shorter when ``chunk_size`` does not divide
    ``T``). For a chunk ``[s, e)`` with the state ``(S, z)`` of the tokens before ``s``:

        A = tril(φ(Q_c) φ(K_c)ᵀ)  (diagonal included),   O_c = φ(Q_c) S + A V_c,   den_c = φ(Q_c) z + A 1,

    then ``S ← S + φ(K_c)ᵀ V_c`` and ``z ← z + φ(K_c)ᵀ 1``. ``chunk_size = 1`` is the recurrent form, ``chunk_size ≥
    T`` the parallel one; between, ``T/C`` state updates instead of ``T`` and ``C × C`` blocks instead of ``T × T``.

    Args:
        q, k, v, feature_map, normalize, state: as :func:`linear_attention_recurrent`.
        chunk_size: ``C ≥ 1`` positions per chunk.

    Returns:
        ``(o (B, H, T, d_v), (S, z))``, equal to :func:`linear_attention_recurrent`'s.

    Raises:
        ValueError: if the shapes do not fit or ``chunk_size < 1``.

    Source: the chunkwise form of Yang, Wang, Shen, Panda & Kim 2024 ("Gated Linear Attention Transformers with
    Hardware-Efficient Training", arXiv:2312.06635, section 2.2; not the DeltaNet paper of the bibliography), with
    Katharopoulos et al.'s normaliser carried alongside.
    """
    _check_qkv(q, k, v)
    _check_chunk_size(chunk_size)
    B, H, T, d_k = q.shape
    d_v = v.shape[-1]
    if state is not None and (state[0].shape != (B, H, d_k, d_v) or state[1].shape != (B, H, d_k)):
        raise ValueError(
            f"state must be (S (B, H, d_k, d_v), z (B, H, d_k)) = ({(B, H, d_k, d_v)}, {(B, H, d_k)}); "
            f"got ({tuple(state[0].shape)}, {tuple(state[1].shape)})"
        )
    ### BEGIN SOLUTION
    phi_q, phi_k = _features(q, k, feature_map)  # (B, H, T, d_k)
    if state is None:
        S, z = q.new_zeros(B, H, d_k, d_v), q.new_zeros(B, H, d_k)
    else:
        S, z = state
    outputs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)  # the last chunk may be shorter
        Qc, Kc, Vc = phi_q[:, :, s:e], phi_k[:, :, s:e], v[:, :, s:e]  # (B, H, C, ·)
        causal = torch.ones(e - s, e - s, dtype=torch.bool, device=q.device).tril()  # (C, C), diagonal included
        A = (Qc @ Kc.transpose(-1, -2)).masked_fill(~causal, 0)  # (B, H, C, C): inside the chunk
        o = Qc @ S + A @ Vc  # (B, H, C, d_v): the chunks before, then this one
        if normalize:
            o = o / ((Qc @ z.unsqueeze(-1)).squeeze(-1) + A.sum(-1)).unsqueeze(-1)  # ÷ (B, H, C, 1)
        outputs.append(o)
        S = S + Kc.transpose(-1, -2) @ Vc  # (B, H, d_k, d_v)
        z = z + Kc.sum(-2)  # (B, H, d_k)
    o = torch.cat(outputs, dim=2) if outputs else v.new_zeros(B, H, 0, d_v)  # (B, H, T, d_v)
    return o, (S, z)
    ### END SOLUTION


# --------------------------------------------------------------------------------------------------
# 2. The delta rule (增量规则; DeltaNet)
# --------------------------------------------------------------------------------------------------


def _check_state(S: torch.Tensor | None, q: torch.Tensor, v: torch.Tensor) -> None:
    want = (*q.shape[:2], q.shape[-1], v.shape[-1])
    if S is not None and tuple(S.shape) != want:
        raise ValueError(f"state must be (B, H, d_k, d_v) = {want}, got {tuple(S.shape)}")


def delta_rule_recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, *, state: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""DeltaNet's recurrence: ``S ← S + β_t k_t (v_t - Sᵀk_t)ᵀ``, then ``o_t = Sᵀ q_t``.

    The state is a fast-weight memory (快权重) mapping keys to values; each token writes the *difference* between
    its value and what the memory already returns for its key, scaled by the learning rate ``β_t`` (β = 0: no write;
    β = 1 and a unit key: ``k_t`` now maps exactly to ``v_t``). No feature map, no normaliser.

    Args:
        q, k: ``(B, H, T, d_k)`` (DeltaNet L2-normalises both in the layer; here they are used as given);
        v: ``(B, H, T, d_v)``; beta: ``(B, H, T)``, usually in ``[0, 1]`` (a sigmoid);
        state: ``(B, H, d_k, d_v)`` from earlier tokens; None: zeros.

    Returns:
        ``(o (B, H, T, d_v), S (B, H, d_k, d_v))``, the inputs' dtype.

    Raises:
        ValueError: if the shapes do not fit.

    Source: Schlag et al. 2021, eqs. 23-24; Yang et al. 2024 (DeltaNet), eq. 1 (transposed: see the module).
    """
    return gated_delta_rule_recurrent(q, k, v, beta, None, state=state)


def delta_rule_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    chunk_size: int,
    *,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""DeltaNet chunk by chunk, through the WY / UT representation: equal to :func:`delta_rule_recurrent`.

    :func:`gated_delta_rule_chunkwise` with no gate (``g = 0``, ``α = 1``); its docstring derives the chunk.

    Source: Yang et al. 2024 (DeltaNet), section 3 (the WY representation and the chunkwise form).
    """
    return gated_delta_rule_chunkwise(q, k, v, beta, None, chunk_size, state=state)


# --------------------------------------------------------------------------------------------------
# 3. Gated DeltaNet (门控 DeltaNet)
# --------------------------------------------------------------------------------------------------


def gated_delta_rule_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor | None,
    *,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Gated DeltaNet's recurrence: ``S ← α_t S``, then ``S ← S + β_t k_t (v_t - Sᵀk_t)ᵀ``, ``o_t = Sᵀ q_t``.

    Together ``S_t = α_t (I - β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`` with ``α_t = exp(g_t) ∈ [0, 1]``: the decay
    forgets (``g = -∞``: the state is wiped before token ``t`` writes; ``g = 0``: DeltaNet), the delta rule
    overwrites what ``k_t`` retrieved.

    Args:
        q, k: ``(B, H, T, d_k)``; v: ``(B, H, T, d_v)``; beta: ``(B, H, T)``;
        g: ``(B, H, T)`` log decay, ``≤ 0`` (``-inf`` allowed); None: no decay (DeltaNet).
        state: ``(B, H, d_k, d_v)`` from earlier tokens; None: zeros.

    Returns:
        ``(o (B, H, T, d_v), S (B, H, d_k, d_v))``, the inputs' dtype.

    Raises:
        ValueError: if the shapes do not fit.

    Source: Yang et al. 2025 ("Gated Delta Networks: Improving Mamba2 with Delta Rule"), eq. 10.
    """
    _check_qkv(q, k, v)
    _check_gates(q, beta=beta, g=g)
    _check_state(state, q, v)
    B, H, T, d_k = q.shape
    d_v = v.shape[-1]
    ### BEGIN SOLUTION
    S = q.new_zeros(B, H, d_k, d_v) if state is None else state
    outputs = []
    for t in range(T):
        k_t, v_t = k[:, :, t], v[:, :, t]  # (B, H, d_k), (B, H, d_v)
        if g is not None:
            S = torch.exp(g[:, :, t])[:, :, None, None] * S  # forget: α_t S
        v_old = (S * k_t[..., None]).sum(-2)  # (B, H, d_v): Sᵀ k_t, what the memory holds for k_t
        S = S + k_t[..., None] * (beta[:, :, t, None] * (v_t - v_old))[:, :, None, :]  # += β k (v - v_old)ᵀ
        outputs.append((S * q[:, :, t, :, None]).sum(-2))  # (B, H, d_v): Sᵀ q_t
    o = torch.stack(outputs, dim=2) if outputs else v.new_zeros(B, H, 0, d_v)  # (B, H, T, d_v)
    return o, S
    ### END SOLUTION


def gated_delta_rule_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor | None,
    chunk_size: int,
    *,
    state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Gated DeltaNet chunk by chunk (the UT transform): equal to :func:`gated_delta_rule_recurrent`.

    Inside a chunk of ``C`` tokens entering with state ``S_0``, let ``G_i = g_1 + … + g_i`` (the log decay since
    the chunk began, ``γ_i = exp(G_i)``). Writing the update as ``S_i = α_i S_{i-1} + k_i u_iᵀ`` with the
    *pseudo-value* ``u_i = β_i (v_i - α_i S_{i-1}ᵀ k_i)`` and unrolling gives the lower-triangular system

        (I + A) U = diag(β) V - diag(β γ) K S_0,   A_ij = β_i e^{G_i - G_j} k_iᵀ k_j  (j < i, else 0),

    solved once per chunk by ``T = (I + A)⁻¹`` (unit lower triangular: a triangular solve — the UT transform,
    which the WY representation of a product of Householder-like matrices ``I - β k kᵀ`` amounts to). Then

        O = diag(γ) Q S_0 + (Q Kᵀ ∘ Γ) U,   Γ_ij = e^{G_i - G_j} (j ≤ i, else 0),
        S_C = γ_C S_0 + (K ∘ e^{G_C - G})ᵀ U.

    ``Γ`` is masked *before* the exponential: above the diagonal ``G_i - G_j`` is positive and can overflow.

    Args:
        q, k, v, beta, state: as :func:`gated_delta_rule_recurrent`.
        g: ``(B, H, T)`` log decay ``≤ 0`` and *finite* (a wipe is a large negative number such as ``-1e4``:
            ``-inf`` would give ``G_i - G_j = -inf + inf``); None: DeltaNet.
        chunk_size: ``C ≥ 1`` positions per chunk; the last chunk may be shorter.

    Returns:
        ``(o (B, H, T, d_v), S (B, H, d_k, d_v))``, the inputs' dtype.

    Raises:
        ValueError: if the shapes do not fit or ``chunk_size < 1``.

    Source: Yang et al. 2024 (DeltaNet), section 3 (the chunkwise form with the UT transform); Yang et al. 2025,
    section 3.3 (the gated chunk). The same computation as ``flash-linear-attention``'s ``chunk_gated_delta_rule``.
    """
    _check_qkv(q, k, v)
    _check_gates(q, beta=beta, g=g)
    _check_state(state, q, v)
    _check_chunk_size(chunk_size)
    B, H, T, d_k = q.shape
    d_v = v.shape[-1]
    S = q.new_zeros(B, H, d_k, d_v) if state is None else state
    outputs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        C = e - s
        Qc, Kc, Vc, bc = q[:, :, s:e], k[:, :, s:e], v[:, :, s:e], beta[:, :, s:e]  # (B, H, C, ·), (B, H, C)
        G = g[:, :, s:e].cumsum(-1) if g is not None else torch.zeros_like(bc)  # (B, H, C): log γ
        tril = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()  # (C, C), diagonal included
        Gamma = (G[..., :, None] - G[..., None, :]).masked_fill(~tril, -math.inf).exp()  # (B, H, C, C)
        A = (bc[..., None] * (Kc @ Kc.transpose(-1, -2)) * Gamma).tril(-1)  # (B, H, C, C), strictly lower
        eye = torch.eye(C, dtype=q.dtype, device=q.device)
        rhs = bc[..., None] * (Vc - G.exp()[..., None] * (Kc @ S))  # (B, H, C, d_v): β (v - γ Kc S_0)
        U = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)  # (B, H, C, d_v)
        o = G.exp()[..., None] * (Qc @ S) + ((Qc @ Kc.transpose(-1, -2)) * Gamma) @ U  # (B, H, C, d_v)
        outputs.append(o)
        G_C = G[..., -1:]  # (B, H, 1)
        S = G_C.exp()[..., None] * S + (Kc * (G_C - G).exp()[..., None]).transpose(-1, -2) @ U  # (B, H, d_k, d_v)
    o = torch.cat(outputs, dim=2) if outputs else v.new_zeros(B, H, 0, d_v)
    return o, S


# --------------------------------------------------------------------------------------------------
# 4. State-space models as the same family (状态空间模型; Mamba-2's state-space duality)
# --------------------------------------------------------------------------------------------------


def gated_linear_attention_recurrent(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *, state: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""A scalar-decay state-space model, read as gated linear attention: ``S ← α_t S + k_t v_tᵀ``, ``o_t = Sᵀ q_t``.

    Mamba-2's SSM ``h_t = a_t h_{t-1} + B_t x_t``, ``y_t = C_tᵀ h_t`` with a scalar ``a_t = exp(g_t)`` per head is
    this recurrence with ``C → q``, ``B → k``, ``x → v`` (Dao & Gu 2024, section 3: "state-space duality"). It is
    gated DeltaNet without the delta correction (no ``-β k kᵀ S`` term, ``β = 1``).

    Args:
        q, k: ``(B, H, T, d_k)`` (Mamba-2's ``C``, ``B``; ``d_k`` its state size ``N``); v: ``(B, H, T, d_v)``
            (its ``x``, ``d_v`` the head dimension ``P``); g: ``(B, H, T)`` log decay ``≤ 0``; state: as
            :func:`gated_delta_rule_recurrent`.

    Returns:
        ``(o (B, H, T, d_v), S (B, H, d_k, d_v))``.

    Raises:
        ValueError: if the shapes do not fit.

    Source: Dao & Gu 2024, eq. 4 (the selective SSM with scalar ``A``) and section 3.
    """
    _check_qkv(q, k, v)
    _check_gates(q, g=g)
    _check_state(state, q, v)
    B, H, T, d_k = q.shape
    S = q.new_zeros(B, H, d_k, v.shape[-1]) if state is None else state
    outputs = []
    for t in range(T):
        S = torch.exp(g[:, :, t])[:, :, None, None] * S + k[:, :, t, :, None] * v[:, :, t, None, :]
        outputs.append((S * q[:, :, t, :, None]).sum(-2))  # (B, H, d_v)
    o = torch.stack(outputs, dim=2) if outputs else v.new_zeros(B, H, 0, v.shape[-1])
    return o, S


def state_space_parallel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    r"""The same model in its quadratic form: ``O = (L ∘ Q Kᵀ) V`` with the decay mask ``L_ij = exp(G_i - G_j)``.

    ``G`` is the running sum of ``g`` and ``L`` is zero above the diagonal: a 1-semiseparable matrix (Dao & Gu 2024,
    section 3.3, "the SSD layer as attention"), chapter 3's causal mask with a decay in place of 1. Equal to
    :func:`gated_linear_attention_recurrent`'s output. Quadratic in ``T``.

    Args/Raises: as :func:`gated_linear_attention_recurrent`. Returns: ``(B, H, T, d_v)``.

    Source: Dao & Gu 2024, eqs. 16 and 17 (``M = L ∘ C Bᵀ``).
    """
    _check_qkv(q, k, v)
    _check_gates(q, g=g)
    T = q.shape[-2]
    G = g.cumsum(-1)  # (B, H, T)
    tril = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    L = (G[..., :, None] - G[..., None, :]).masked_fill(~tril, -math.inf).exp()  # (B, H, T, T), masked first
    return (L * (q @ k.transpose(-1, -2))) @ v  # (B, H, T, d_v)


# --------------------------------------------------------------------------------------------------
# 5. Layers, and chapter 6's GPT made hybrid (混合架构)
# --------------------------------------------------------------------------------------------------


class _TokenMixer(nn.Module):
    """Chapter 4's interface: ``forward(x (B, T, d_model), mask=None, use_sdpa=False, is_causal=True) ->
    (output (B, T, d_model), None)``; always causal (a recurrence has no other direction)."""

    def _start(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool) -> None:
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, d_model={self.d_model}), got {tuple(x.shape)}")
        if mask is not None or not is_causal:
            raise ValueError("linear-attention layers are causal by construction: give no mask and is_causal=True")

    d_model: int


class LinearAttention(_TokenMixer):
    """Multi-head causal linear attention (Katharopoulos et al. 2020) with chapter 4's projections ``W_qkv``, ``W_o``.

    Computed chunk by chunk (:func:`linear_attention_chunkwise`), ``φ = elu + 1``, normalised. A drop-in for
    chapter 6's attention: ``Block`` calls ``attn(x, use_sdpa=..., is_causal=True)[0]``.

    Args:
        d_model, n_heads: as chapter 4 (``d_k = d_v = d_model / n_heads``). chunk_size: the chunk length.

    Shapes: ``forward(x (B, T, d_model)) -> (output (B, T, d_model), None)``.

    Raises:
        ValueError: if ``n_heads`` does not divide ``d_model``, ``x`` is not ``(B, T, d_model)``, or a mask is given.
    """

    def __init__(self, d_model: int, n_heads: int, *, chunk_size: int = 64):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.chunk_size = d_model, n_heads, chunk_size
        self.W_qkv = nn.Linear(d_model, 3 * d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, use_sdpa: bool = False, is_causal: bool = True
    ) -> tuple[torch.Tensor, None]:
        self._start(x, mask, is_causal)
        q, k, v = (split_heads(t, self.n_heads) for t in self.W_qkv(x).split(self.d_model, dim=-1))  # (B, H, T, d_k)
        o, _ = linear_attention_chunkwise(q, k, v, self.chunk_size)  # (B, H, T, d_v)
        return self.W_o(merge_heads(o)), None  # (B, T, d_model)


class DeltaNetAttention(_TokenMixer):
    """Multi-head (gated) DeltaNet: ``q, k`` L2-normalised, ``q`` scaled by ``1/√d_k``, ``β = σ(W_β x)``, and, when
    ``gated``, ``g = log σ(W_g x)`` (a log decay in ``(-∞, 0)``).

    A simplified layer for the chapter's small models: Gated DeltaNet (Yang et al. 2025, section 3.4) and
    Qwen3-Next also run a short causal convolution over ``q, k, v``, derive ``g`` Mamba-2-style
    (``-exp(A) · softplus(W x + b)``), and gate and norm the output; here the decay is GLA's log-sigmoid and none
    of the rest is used.

    Args:
        d_model, n_heads: as chapter 4. gated: gated DeltaNet (True) or DeltaNet. chunk_size: the chunk length.

    Attributes:
        W_qkv, W_o: as chapter 4; W_beta: ``d_model → n_heads``; W_g: ``d_model → n_heads`` (gated only).

    Shapes: ``forward(x (B, T, d_model)) -> (output (B, T, d_model), None)``.

    Raises:
        ValueError: as :class:`LinearAttention`.

    Source: Yang et al. 2024 (DeltaNet), section 3.3 (L2 norm, sigmoid β); Yang et al. 2025 (the gate).
    """

    def __init__(self, d_model: int, n_heads: int, *, gated: bool = True, chunk_size: int = 64):
        super().__init__()
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.chunk_size, self.gated = d_model, n_heads, chunk_size, gated
        self.W_qkv = nn.Linear(d_model, 3 * d_model)
        self.W_beta = nn.Linear(d_model, n_heads)
        self.W_g = nn.Linear(d_model, n_heads) if gated else None
        self.W_o = nn.Linear(d_model, d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, use_sdpa: bool = False, is_causal: bool = True
    ) -> tuple[torch.Tensor, None]:
        self._start(x, mask, is_causal)
        q, k, v = (split_heads(t, self.n_heads) for t in self.W_qkv(x).split(self.d_model, dim=-1))  # (B, H, T, d_k)
        q = F.normalize(q, dim=-1) / math.sqrt(q.shape[-1])  # unit queries, scaled
        k = F.normalize(k, dim=-1)  # unit keys: I - β k kᵀ is a contraction
        beta = torch.sigmoid(self.W_beta(x)).transpose(1, 2)  # (B, T, H) -> (B, H, T)
        g = F.logsigmoid(self.W_g(x)).transpose(1, 2) if self.W_g is not None else None  # (B, H, T)
        o, _ = gated_delta_rule_chunkwise(q, k, v, beta, g, self.chunk_size)  # (B, H, T, d_v)
        return self.W_o(merge_heads(o)), None  # (B, T, d_model)


def hybrid_gpt(config: GPTConfig, full_attention_interval: int = 4, linear: str = "gated_delta") -> GPT:
    """Chapter 6's GPT with layer ``i`` softmax attention when ``(i + 1) % full_attention_interval == 0`` and linear
    otherwise: three linear layers for every full one at the default (Qwen3-Next's ``layer_types``).

    Every other part (embeddings, MLPs, norms, weight tying, GPT-2 initialisation with the residual projections
    ``W_o`` scaled by ``1/√(2·n_layers)``) is chapter 6's. The linear layers add ``2·n_heads·(d_model+1)`` parameters
    each for ``gated_delta`` (``W_beta``, ``W_g``), ``n_heads·(d_model+1)`` for ``delta``, none for ``linear``.

    Args:
        config: chapter 6's sizes. full_attention_interval: ``≥ 1`` (1: all softmax, chapter 6's GPT).
        linear: ``"gated_delta"`` (:class:`DeltaNetAttention`, gated), ``"delta"`` (ungated) or ``"linear"``
            (:class:`LinearAttention`).

    Returns:
        A :class:`~solutions.ch06_gpt.GPT` whose ``h[i].attn`` are the layers above.

    Raises:
        ValueError: for an unknown ``linear`` or an interval below 1.
    """
    if full_attention_interval < 1:
        raise ValueError(f"full_attention_interval must be at least 1, got {full_attention_interval}")
    layers: dict[str, Callable[[], nn.Module]] = {
        "gated_delta": lambda: DeltaNetAttention(config.d_model, config.n_heads, gated=True),
        "delta": lambda: DeltaNetAttention(config.d_model, config.n_heads, gated=False),
        "linear": lambda: LinearAttention(config.d_model, config.n_heads),
    }
    if linear not in layers:
        raise ValueError(f"linear must be one of {sorted(layers)}, got {linear!r}")
    model = GPT(config)
    for i, block in enumerate(model.h):
        if (i + 1) % full_attention_interval:
            attn = layers[linear]()
            attn.apply(GPT._init_weights)  # N(0, 0.02), zero biases, as chapter 6
            W_o = attn.W_o
            assert isinstance(W_o, nn.Linear)
            nn.init.normal_(W_o.weight, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))
            block.attn = attn
    return model


# --------------------------------------------------------------------------------------------------
# 6. Memory at decode time: a state that does not grow with T
# --------------------------------------------------------------------------------------------------


def decode_state_bytes(
    n_layers: int,
    T: int,
    *,
    full_attention_interval: int | None,
    n_kv_heads: int,
    d_head: int,
    n_linear_heads: int,
    d_k: int,
    d_v: int,
    bytes_per_element: int = 2,
) -> int:
    """Bytes one sequence holds at decode time: KV caches of the softmax layers plus states of the linear ones.

    Layer ``i`` (0-based) is softmax attention when ``(i + 1) % full_attention_interval == 0`` (Qwen3-Next's rule;
    ``1``: every layer, ``None``: none), linear otherwise. A softmax layer caches chapter 8's
    ``2 · n_kv_heads · d_head · T`` elements (:func:`~solutions.ch08_kv_cache.kv_cache_bytes`); a linear layer
    holds one ``d_k × d_v`` state per head, ``n_linear_heads · d_k · d_v`` elements whatever ``T``. Left out: the
    normaliser ``z`` of normalised linear attention (``d_k`` per head) and the short convolutions' last few inputs
    of DeltaNet-style layers — both small and constant in ``T``.

    Args:
        n_layers: layers. T: tokens in the context (prompt and generated). full_attention_interval: as above.
        n_kv_heads, d_head: the softmax layers' key/value heads and head width.
        n_linear_heads, d_k, d_v: the linear layers' state heads and key/value widths.
        bytes_per_element: 2 (bfloat16, the default), 4 (float32).

    Returns:
        Bytes per sequence (an int).

    Raises:
        ValueError: if ``full_attention_interval`` is below 1 or a size is negative.

    Source: chapter 8's estimate (Shazeer 2019; Ainslie et al. 2023) and Katharopoulos et al. 2020, section 3.4
    (the constant-size state).
    """
    if full_attention_interval is not None and full_attention_interval < 1:
        raise ValueError(f"full_attention_interval must be at least 1 (or None), got {full_attention_interval}")
    if min(n_layers, T, n_kv_heads, d_head, n_linear_heads, d_k, d_v, bytes_per_element) < 0:
        raise ValueError("sizes must not be negative")
    ### BEGIN SOLUTION
    n_full = 0 if full_attention_interval is None else n_layers // full_attention_interval
    n_linear = n_layers - n_full
    kv = kv_cache_bytes(n_full, n_kv_heads, d_head, T, bytes_per_element) if n_full else 0  # grows with T
    state = n_linear * n_linear_heads * d_k * d_v * bytes_per_element  # constant in T
    return kv + state
    ### END SOLUTION


# Qwen3-Next-80B-A3B's shape (the defaults of Hugging Face's ``Qwen3NextConfig``, transformers 5.x, which mirror the
# model's config.json): 48 layers, every fourth softmax attention (12 layers, GQA with 2 key/value heads of width
# 256), 36 Gated DeltaNet layers with 32 value heads of 128 × 128 states (16 key heads shared by pairs).
QWEN3_NEXT_80B_A3B = dict(
    n_layers=48, full_attention_interval=4, n_kv_heads=2, d_head=256, n_linear_heads=32, d_k=128, d_v=128
)


# --------------------------------------------------------------------------------------------------
# 7. Multi-query associative recall (多查询联想回忆; Arora et al. 2023)
# --------------------------------------------------------------------------------------------------


def mqar_batch(
    batch_size: int, n_pairs: int, n_queries: int, vocab_size: int, *, seed: int, ignore_index: int = -100
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of multi-query associative recall (MQAR): ``n_pairs`` key-value pairs, then keys asked again.

    Each row is ``k_1 v_1 k_2 v_2 … k_N v_N q_1 a_1 q_2 a_2 … q_M a_M`` with keys drawn without repetition from the
    lower half of the vocabulary, values (with repetition) from the upper half, and the ``M = n_queries`` queries a
    random choice of distinct keys of the row, each followed by its value ``a``. A language model reads the row and
    is scored only where it must recall: the target at the position of ``q_m`` is ``a_m``; every other target is
    ``ignore_index`` (``F.cross_entropy``'s default). Softmax attention looks the key up; a fixed-size state must have
    kept it.

    Args:
        batch_size: rows. n_pairs: ``N`` pairs per row. n_queries: ``M ≤ N`` queries. vocab_size: even, with at
            least ``N`` keys in its lower half. seed: the draw (a ``torch.Generator`` of its own; the global random
            state is untouched). ignore_index: the target where nothing is scored.

    Returns:
        ``(inputs (batch_size, 2N + 2M) int64, targets (batch_size, 2N + 2M) int64)``, on the CPU.

    Raises:
        ValueError: if ``n_queries > n_pairs``, the vocabulary is odd, or too small for ``n_pairs`` distinct keys.

    Source: Arora et al. 2023 ("Zoology: Measuring and Improving Recall in Efficient Language Models"), section 3.1.
    """
    half = vocab_size // 2
    if vocab_size % 2 or n_pairs > half or not 1 <= n_queries <= n_pairs:
        raise ValueError(
            f"need an even vocab_size with n_pairs <= vocab_size/2 and 1 <= n_queries <= n_pairs; got "
            f"vocab_size={vocab_size}, n_pairs={n_pairs}, n_queries={n_queries}"
        )
    gen = torch.Generator().manual_seed(seed)
    keys = torch.rand(batch_size, half, generator=gen).argsort(-1)[:, :n_pairs]  # (B, N) distinct keys
    values = torch.randint(half, vocab_size, (batch_size, n_pairs), generator=gen)  # (B, N)
    asked = torch.rand(batch_size, n_pairs, generator=gen).argsort(-1)[:, :n_queries]  # (B, M) which pairs
    context = torch.stack([keys, values], dim=-1).flatten(1)  # (B, 2N): k v k v …
    query = torch.stack([keys.gather(1, asked), values.gather(1, asked)], dim=-1).flatten(1)  # (B, 2M): q a q a …
    inputs = torch.cat([context, query], dim=1)  # (B, 2N + 2M)
    targets = torch.full_like(inputs, ignore_index)
    targets[:, 2 * n_pairs :: 2] = values.gather(1, asked)  # at q_m, predict a_m
    return inputs, targets
