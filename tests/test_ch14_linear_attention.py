"""Chapter 14 (linear attention, the delta rule, hybrids): the solution against independent oracles — the papers'
equations written out in float64 with explicit matrices in the papers' own orientation (Katharopoulos et al. 2020,
eqs. 2-6; Schlag et al. 2021 / Yang et al. 2024, ``S_t = S_{t-1} - β_t (S_{t-1} k_t - v_t) k_tᵀ``; Yang et al.
2025, eq. 10; Dao & Gu 2024, the SSM recurrence), Hugging Face's PyTorch ports of flash-linear-attention's
reference gated delta rule (``transformers.models.qwen3_next``: recurrent and chunked), chapter 6's GPT and
chapter 8's cache estimate. ``flash-linear-attention`` itself is not installed in the course's environment."""

import math

import pytest
import torch
import torch.nn.functional as F

from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch08_kv_cache import kv_cache_bytes
from solutions.ch14_linear_attention import (
    QWEN3_NEXT_80B_A3B,
    DeltaNetAttention,
    LinearAttention,
    decode_state_bytes,
    delta_rule_chunkwise,
    delta_rule_recurrent,
    elu_feature_map,
    gated_delta_rule_chunkwise,
    gated_delta_rule_recurrent,
    gated_linear_attention_recurrent,
    hybrid_gpt,
    linear_attention_chunkwise,
    linear_attention_parallel,
    linear_attention_recurrent,
    mqar_batch,
    state_space_parallel,
)
from tests.conftest import tolerance

F64 = dict(rtol=1e-10, atol=1e-10)


def _inputs(B=2, H=3, T=11, d_k=4, d_v=5, seed=0, dtype=torch.float64, device="cpu", unit_keys=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=dtype) for d in (d_k, d_k, d_v))
    beta = torch.rand(B, H, T, generator=g, dtype=dtype)
    log_decay = -torch.rand(B, H, T, generator=g, dtype=dtype)  # α = exp(g) in (e^-1, 1]
    if unit_keys:
        k = F.normalize(k, dim=-1)
    return tuple(t.to(device) for t in (q, k, v, beta, log_decay))


# ---------------------------------------------------------------- oracles, float64, the papers' own orientation


def _linear_attention_oracle(q, k, v, normalize=True):
    """Katharopoulos et al. 2020, eq. 6 with the causal sum: V'_i = Σ_{j≤i} φ(Q_i)ᵀφ(K_j) V_j / Σ_{j≤i} φ(Q_i)ᵀφ(K_j)."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    out = torch.zeros(*q.shape[:3], v.shape[-1], dtype=q.dtype, device=q.device)
    for i in range(q.shape[2]):
        w = torch.einsum("bhd,bhjd->bhj", fq[:, :, i], fk[:, :, : i + 1])  # (B, H, i+1)
        num = torch.einsum("bhj,bhjv->bhv", w, v[:, :, : i + 1])
        out[:, :, i] = num / w.sum(-1, keepdim=True) if normalize else num
    return out


def _gated_delta_oracle(q, k, v, beta, g=None, S0=None):
    """Yang et al. 2025, eq. 10 with explicit matrices: S_t = α_t S_{t-1}(I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ
    (S_t ∈ R^{d_v × d_k}), o_t = S_t q_t. Returns o and the state transposed to (d_k, d_v)."""
    B, H, T, d_k = q.shape
    eye = torch.eye(d_k, dtype=q.dtype, device=q.device)
    S = torch.zeros(B, H, v.shape[-1], d_k, dtype=q.dtype, device=q.device) if S0 is None else S0.transpose(-1, -2)
    out = []
    for t in range(T):
        kt, vt, bt = k[:, :, t], v[:, :, t], beta[:, :, t, None, None]
        alpha = torch.ones_like(bt) if g is None else torch.exp(g[:, :, t])[..., None, None]
        S = alpha * S @ (eye - bt * kt[..., :, None] * kt[..., None, :]) + bt * vt[..., :, None] * kt[..., None, :]
        out.append((S @ q[:, :, t, :, None]).squeeze(-1))
    return torch.stack(out, 2), S.transpose(-1, -2)


# ---------------------------------------------------------------- linear attention, three ways


def test_elu_feature_map_is_elu_plus_one_and_positive():
    x = torch.linspace(-30, 5, 101, dtype=torch.float64)
    torch.testing.assert_close(elu_feature_map(x), torch.where(x > 0, x + 1, torch.exp(x)), **F64)
    assert bool((elu_feature_map(x) > 0).all())


@pytest.mark.parametrize("normalize", [True, False])
def test_three_forms_of_linear_attention_agree_with_the_paper(device, normalize):
    q, k, v, _, _ = _inputs(device=device)
    expected = _linear_attention_oracle(q, k, v, normalize)
    torch.testing.assert_close(linear_attention_parallel(q, k, v, normalize=normalize), expected, **F64)
    o, (S, z) = linear_attention_recurrent(q, k, v, normalize=normalize)
    torch.testing.assert_close(o, expected, **F64)
    torch.testing.assert_close(S, torch.einsum("bhtd,bhtv->bhdv", F.elu(k) + 1, v), **F64)
    torch.testing.assert_close(z, (F.elu(k) + 1).sum(2), **F64)
    for C in (1, 3, 4, 11, 16):  # 3 and 4 do not divide T = 11; 16 > T is the parallel form
        o_c, (S_c, z_c) = linear_attention_chunkwise(q, k, v, C, normalize=normalize)
        torch.testing.assert_close(o_c, expected, **F64)
        torch.testing.assert_close(S_c, S, **F64)
        torch.testing.assert_close(z_c, z, **F64)


def test_parallel_form_is_chapter_3s_attention_with_a_kernel_for_exp():
    """Katharopoulos et al. eq. 2: chapter 3's weights with sim(q, k) = φ(q)·φ(k) in place of exp(q·k/√d_k)."""
    q, k, v, _, _ = _inputs(T=6)
    sim = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # (B, H, T, T)
    sim = sim.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), 0)
    torch.testing.assert_close(linear_attention_parallel(q, k, v), (sim / sim.sum(-1, keepdim=True)) @ v, **F64)


def test_state_carries_over_between_calls_and_starts_empty():
    q, k, v, _, _ = _inputs(T=9)
    whole, state = linear_attention_recurrent(q, k, v)
    first, mid = linear_attention_recurrent(q[:, :, :4], k[:, :, :4], v[:, :, :4])
    second, end = linear_attention_chunkwise(q[:, :, 4:], k[:, :, 4:], v[:, :, 4:], 2, state=mid)
    torch.testing.assert_close(torch.cat([first, second], 2), whole, **F64)
    torch.testing.assert_close(end[0], state[0], **F64)
    again, _ = linear_attention_recurrent(q, k, v)  # a new call starts from zeros
    torch.testing.assert_close(again, whole, **F64)


def test_linear_attention_in_float32_and_float16(device):
    q, k, v, _, _ = _inputs(T=13, seed=3, dtype=torch.float32, device=device)
    expected = _linear_attention_oracle(q.double(), k.double(), v.double()).float()
    for dtype in (torch.float32, torch.float16):
        o, _ = linear_attention_chunkwise(q.to(dtype), k.to(dtype), v.to(dtype), 5)
        assert o.dtype == dtype
        torch.testing.assert_close(o.float(), expected, **tolerance(dtype))


# ---------------------------------------------------------------- the delta rule and gated DeltaNet


@pytest.mark.parametrize("gated", [False, True])
def test_delta_rule_recurrent_and_chunkwise_equal_the_papers_update(device, gated):
    q, k, v, beta, g = _inputs(T=13, unit_keys=True, device=device)
    g = g if gated else None
    expected, S_expected = _gated_delta_oracle(q, k, v, beta, g)
    rec = gated_delta_rule_recurrent if gated else (lambda q, k, v, b, g, **kw: delta_rule_recurrent(q, k, v, b, **kw))
    o, S = rec(q, k, v, beta, g)
    torch.testing.assert_close(o, expected, **F64)
    torch.testing.assert_close(S, S_expected, **F64)
    for C in (1, 4, 5, 13, 20):
        if gated:
            o_c, S_c = gated_delta_rule_chunkwise(q, k, v, beta, g, C)
        else:
            o_c, S_c = delta_rule_chunkwise(q, k, v, beta, C)
        torch.testing.assert_close(o_c, expected, **F64)
        torch.testing.assert_close(S_c, S_expected, **F64)


def test_gated_delta_rule_with_a_given_state_continues_the_sequence():
    q, k, v, beta, g = _inputs(T=10, unit_keys=True, seed=4)
    expected, S_end = _gated_delta_oracle(q, k, v, beta, g)
    _, mid = gated_delta_rule_recurrent(q[:, :, :3], k[:, :, :3], v[:, :, :3], beta[:, :, :3], g[:, :, :3])
    rest, end = gated_delta_rule_chunkwise(
        q[:, :, 3:], k[:, :, 3:], v[:, :, 3:], beta[:, :, 3:], g[:, :, 3:], 4, state=mid
    )
    torch.testing.assert_close(rest, expected[:, :, 3:], **F64)
    torch.testing.assert_close(end, S_end, **F64)


def test_delta_rule_with_beta_one_stores_the_value_exactly():
    """β = 1 and a unit key: afterwards the memory returns v for k (Schlag et al. 2021, section 4.2)."""
    q, k, v, _, _ = _inputs(T=5, unit_keys=True)
    beta = torch.ones(q.shape[:3], dtype=q.dtype)
    _, S = delta_rule_recurrent(q, k, v, beta)
    torch.testing.assert_close((S.transpose(-1, -2) @ k[:, :, -1, :, None]).squeeze(-1), v[:, :, -1], **F64)
    o0, S0 = delta_rule_recurrent(q, k, v, torch.zeros_like(beta))  # β = 0: nothing is written
    assert not S0.any() and not o0.any()


def test_extreme_gates():
    q, k, v, beta, g = _inputs(T=9, unit_keys=True, seed=5)
    # g = -inf: the state is wiped before each token writes: o_t = β_t (q_t·k_t) v_t
    wiped, _ = gated_delta_rule_recurrent(q, k, v, beta, torch.full_like(g, -math.inf))
    torch.testing.assert_close(wiped, beta[..., None] * (q * k).sum(-1, keepdim=True) * v, **F64)
    # the chunkwise form with a very negative but finite gate gives the same (no inf - inf, no overflow above the diagonal)
    chunked, _ = gated_delta_rule_chunkwise(q, k, v, beta, torch.full_like(g, -1e4), 4)
    assert torch.isfinite(chunked).all()
    torch.testing.assert_close(chunked, wiped, **F64)
    # g = 0 is DeltaNet
    torch.testing.assert_close(
        gated_delta_rule_chunkwise(q, k, v, beta, torch.zeros_like(g), 3)[0], delta_rule_recurrent(q, k, v, beta)[0]
    )


def test_against_the_flash_linear_attention_reference_ported_to_transformers():
    """transformers' Qwen3-Next ships PyTorch ports of flash-linear-attention's recurrent and chunked gated delta rule
    (float32 inside; they scale q by 1/√d_k and take (B, T, H, d) tensors)."""
    qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    q, k, v, beta, g = _inputs(B=2, H=2, T=19, d_k=8, d_v=6, unit_keys=True, seed=6, dtype=torch.float32)
    bt = lambda x: x.transpose(1, 2).contiguous()  # (B, H, T, ·) <-> (B, T, H, ·)
    for reference in (qwen3_next.torch_chunk_gated_delta_rule, qwen3_next.torch_recurrent_gated_delta_rule):
        o_ref, S_ref = reference(bt(q), bt(k), bt(v), bt(g), bt(beta), output_final_state=True)
        o, S = gated_delta_rule_chunkwise(q / math.sqrt(8), k, v, beta, g, 8)
        torch.testing.assert_close(bt(o_ref), o, **tolerance(torch.float32))
        torch.testing.assert_close(S_ref, S, **tolerance(torch.float32))


# ---------------------------------------------------------------- state-space duality


def test_state_space_model_is_gated_linear_attention():
    q, k, v, _, g = _inputs(T=12, seed=7)
    # the SSM recurrence h_t = a_t h_{t-1} + B_t x_tᵀ, y_t = h_tᵀ C_t, one step at a time with explicit a_t
    h = torch.zeros(*q.shape[:2], q.shape[-1], v.shape[-1], dtype=q.dtype)
    ys = []
    for t in range(12):
        h = torch.exp(g[:, :, t])[..., None, None] * h + torch.einsum("bhn,bhp->bhnp", k[:, :, t], v[:, :, t])
        ys.append(torch.einsum("bhnp,bhn->bhp", h, q[:, :, t]))
    expected = torch.stack(ys, 2)
    o, S = gated_linear_attention_recurrent(q, k, v, g)
    torch.testing.assert_close(o, expected, **F64)
    torch.testing.assert_close(S, h, **F64)
    torch.testing.assert_close(state_space_parallel(q, k, v, g), expected, **F64)
    # no decay: unnormalised linear attention with no feature map
    torch.testing.assert_close(
        state_space_parallel(q, k, v, torch.zeros_like(g)),
        linear_attention_parallel(q, k, v, feature_map=None, normalize=False),
        **F64,
    )


# ---------------------------------------------------------------- layers and the hybrid GPT


def test_linear_attention_layer_is_the_function_behind_chapter_4s_projections(device):
    torch.manual_seed(0)
    layer = LinearAttention(12, 3, chunk_size=4).to(device).double()
    x = torch.randn(2, 9, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).to(device)
    q, k, v = (
        t.view(2, 9, 3, 4).transpose(1, 2) for t in F.linear(x, layer.W_qkv.weight, layer.W_qkv.bias).split(12, -1)
    )
    heads = _linear_attention_oracle(q, k, v).transpose(1, 2).reshape(2, 9, 12)
    out, weights = layer(x)
    assert weights is None
    torch.testing.assert_close(out, F.linear(heads, layer.W_o.weight, layer.W_o.bias), **F64)


@pytest.mark.parametrize("gated", [False, True])
def test_deltanet_layer_is_causal_and_matches_its_recurrence(gated):
    torch.manual_seed(0)
    layer = DeltaNetAttention(16, 2, gated=gated, chunk_size=3).double()
    x = torch.randn(2, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    out, _ = layer(x)
    q, k, v = (t.view(2, 8, 2, 8).transpose(1, 2) for t in layer.W_qkv(x).split(16, -1))
    beta = torch.sigmoid(layer.W_beta(x)).transpose(1, 2)
    g = F.logsigmoid(layer.W_g(x)).transpose(1, 2) if gated else None
    heads, _ = _gated_delta_oracle(F.normalize(q, dim=-1) / math.sqrt(8), F.normalize(k, dim=-1), v, beta, g)
    torch.testing.assert_close(out, layer.W_o(heads.transpose(1, 2).reshape(2, 8, 16)), **F64)
    y = x.clone()
    y[:, 5:] += 1.0  # change the future: positions before 5 keep their outputs
    torch.testing.assert_close(layer(y)[0][:, :5], out[:, :5], **F64)


def test_hybrid_gpt_puts_softmax_attention_in_every_fourth_layer(device):
    config = GPTConfig(vocab_size=19, context_length=16, n_layers=8, n_heads=2, d_model=16)
    torch.manual_seed(0)
    model = hybrid_gpt(config).to(device)
    kinds = [type(block.attn).__name__ for block in model.h]
    assert kinds == ["DeltaNetAttention"] * 3 + ["FusedMultiHeadSelfAttention"] + ["DeltaNetAttention"] * 3 + [
        "FusedMultiHeadSelfAttention"
    ]
    baseline = GPT(config)
    extra = 6 * 2 * 2 * (16 + 1)  # six linear layers, W_beta and W_g: 2 heads × (16 + 1) each
    assert model.num_parameters() == baseline.num_parameters() + extra
    assert hybrid_gpt(config, linear="linear").num_parameters() == baseline.num_parameters()
    idx = torch.randint(19, (2, 16), generator=torch.Generator().manual_seed(3)).to(device)
    loss = model.loss(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert math.isfinite(loss.item()) and abs(loss.item() - math.log(19)) < 0.5  # near uniform at initialisation
    assert all(p.grad is not None for p in model.parameters())
    logits = model(idx)  # causal: the first 7 positions do not see a change at position 7
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 19
    torch.testing.assert_close(model(changed)[:, :7], logits[:, :7], **tolerance(torch.float32))
    assert all(isinstance(b.attn, type(GPT(config).h[0].attn)) for b in hybrid_gpt(config, 1).h)


# ---------------------------------------------------------------- decode memory


def test_decode_state_bytes_for_qwen3_next():
    """Qwen3-Next-80B-A3B in bfloat16: 12 softmax layers × 2 × 2 KV heads × 256 × 2 bytes = 24 KiB per token; 36
    Gated DeltaNet layers × 32 heads × 128 × 128 × 2 bytes = 36 MiB, whatever T."""
    state = 36 * 32 * 128 * 128 * 2
    assert state == 36 * 2**20
    for T in (0, 1, 4096, 262144):
        assert decode_state_bytes(T=T, **QWEN3_NEXT_80B_A3B) == 12 * 2 * 2 * 256 * 2 * T + state
    everything_linear = {**QWEN3_NEXT_80B_A3B, "full_attention_interval": None}
    assert decode_state_bytes(T=1, **everything_linear) == decode_state_bytes(T=10**6, **everything_linear)
    all_softmax = {**QWEN3_NEXT_80B_A3B, "full_attention_interval": 1}
    assert decode_state_bytes(T=777, **all_softmax) == kv_cache_bytes(48, 2, 256, 777, 2)
    ragged = dict(n_layers=10, full_attention_interval=4, n_kv_heads=1, d_head=8, n_linear_heads=2, d_k=3, d_v=5)
    assert decode_state_bytes(T=7, bytes_per_element=4, **ragged) == 4 * (2 * 2 * 1 * 8 * 7 + 8 * 2 * 3 * 5)
    with pytest.raises(ValueError, match="full_attention_interval"):
        decode_state_bytes(T=7, **{**ragged, "full_attention_interval": 0})


# ---------------------------------------------------------------- the recall task


def test_mqar_batch_asks_for_values_seen_in_the_context():
    inputs, targets = mqar_batch(4, 6, 3, 40, seed=0)
    assert inputs.shape == targets.shape == (4, 18) and inputs.dtype == torch.int64
    again, _ = mqar_batch(4, 6, 3, 40, seed=0)
    assert torch.equal(inputs, again) and not torch.equal(inputs, mqar_batch(4, 6, 3, 40, seed=1)[0])
    for row, target in zip(inputs.tolist(), targets.tolist()):
        pairs = dict(zip(row[0:12:2], row[1:12:2]))
        assert len(pairs) == 6 and all(key < 20 <= value for key, value in pairs.items())
        asked = row[12::2]
        assert len(set(asked)) == 3 and all(key in pairs for key in asked)
        assert row[13::2] == [pairs[key] for key in asked]
        assert target[12::2] == [pairs[key] for key in asked]
        assert all(t == -100 for i, t in enumerate(target) if i < 12 or i % 2)


# ---------------------------------------------------------------- bad input


def test_bad_input_raises_naming_the_shapes():
    q, k, v, beta, g = _inputs(T=5)
    with pytest.raises(ValueError, match=r"q\(2, 3, 5, 4\), k\(2, 3, 4, 4\)"):
        linear_attention_parallel(q, k[:, :, :4], v)
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        linear_attention_chunkwise(q, k, v, 0)
    with pytest.raises(ValueError, match=r"state must be .*got"):
        linear_attention_recurrent(q, k, v, state=(torch.zeros(2, 3, 4, 4), torch.zeros(2, 3, 4)))
    with pytest.raises(ValueError, match=r"beta must be \(B, H, T\) = \(2, 3, 5\), got \(2, 3, 4\)"):
        gated_delta_rule_recurrent(q, k, v, beta[..., :4], g)
    with pytest.raises(ValueError, match=r"g must be \(B, H, T\)"):
        gated_delta_rule_chunkwise(q, k, v, beta, g[:, :1], 2)
    with pytest.raises(ValueError, match=r"state must be \(B, H, d_k, d_v\) = \(2, 3, 4, 5\)"):
        delta_rule_recurrent(q, k, v, beta, state=torch.zeros(2, 3, 5, 4))
    with pytest.raises(ValueError, match="not divisible"):
        DeltaNetAttention(10, 3)
    with pytest.raises(ValueError, match="causal by construction"):
        LinearAttention(8, 2)(torch.randn(1, 3, 8), mask=torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"x must be \(B, T, d_model=8\), got \(3, 8\)"):
        LinearAttention(8, 2)(torch.randn(3, 8))
    with pytest.raises(ValueError, match="linear must be one of"):
        hybrid_gpt(GPTConfig(), linear="mamba")
    with pytest.raises(ValueError, match="n_queries"):
        mqar_batch(2, 4, 5, 40, seed=0)
