"""Chapter 12's mask_mods and score_mods against chapter 9's boolean tables, explicit formulas and PyTorch's attention.

Oracles: chapter 9's masks (``solutions.ch09_sparse_attention``, imported, not copied), plain Python loops over
(query, key) pairs, ``F.scaled_dot_product_attention`` with an explicit boolean or float mask, chapter 8's cache
and ``repeat_kv``, chapter 10's log-sum-exp and chapter 11's causal loop bound. ``flex_attention`` runs eagerly
(never compiled here: compiling takes about a minute on a CPU).
"""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import (
    AuxRequest,
    and_masks,
    create_block_mask,
    flex_attention,
    or_masks,
)

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
from solutions.ch08_kv_cache import KVCache, attend_with_cache, kv_cache_bytes, repeat_kv
from solutions.ch09_sparse_attention import dilated_window_mask, global_token_mask, sliding_window_mask
from solutions.ch10_flash_attention import naive_attention
from solutions.ch12_flex_attention import (
    alibi_score_mod,
    alibi_slopes,
    attend_with_cache_flex,
    block_counts,
    causal,
    dilated_window,
    document_mask,
    flash_causal_key_blocks,
    flex_attention_reference,
    global_tokens,
    mask_table,
    offset_mask_mod,
    prefix_lm_mask,
    relative_bias_score_mod,
    sliding_window,
    sliding_window_with_globals,
    soft_cap_score_mod,
)
from tests.conftest import tolerance

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def _qkv(B, H, T_q, T_k, d_k, d_v, device, seed=0, H_kv=None):
    g = torch.Generator().manual_seed(seed)
    H_kv = H if H_kv is None else H_kv
    q = torch.randn(B, H, T_q, d_k, generator=g).to(device)
    k = torch.randn(B, H_kv, T_k, d_k, generator=g).to(device)
    v = torch.randn(B, H_kv, T_k, d_v, generator=g).to(device)
    return q, k, v


def _flex(q, k, v, mask_mod=None, score_mod=None, **kw):
    B, H, T_q, T_k = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, B, H, T_q, T_k, device=q.device)
    return flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask, **kw)


# ------------------------------------------------------------------ chapter 9's patterns, as rules


@pytest.mark.parametrize("window", [0, 1, 3, 20])
@pytest.mark.parametrize("is_causal", [True, False])
def test_sliding_window_is_chapter_9s_table(window, is_causal, device):
    T = 13
    table = mask_table(sliding_window(window, causal=is_causal), 1, 1, T, T, device=device)[0, 0]
    assert torch.equal(table, sliding_window_mask(T, window, causal=is_causal, device=device))


@pytest.mark.parametrize("is_causal", [True, False])
def test_dilated_window_is_chapter_9s_table(is_causal, device):
    table = mask_table(dilated_window(2, 3, causal=is_causal), 1, 1, 17, 17, device=device)[0, 0]
    assert torch.equal(table, dilated_window_mask(17, 2, 3, causal=is_causal, device=device))


def test_window_or_global_tokens_and_causal_is_chapter_9s_table(device):
    T = 15
    is_global = torch.zeros(T, dtype=torch.bool, device=device)
    is_global[[0, 6]] = True
    for is_causal in (False, True):
        mod = or_masks(sliding_window(2, causal=False), global_tokens(is_global))
        if is_causal:
            mod = and_masks(mod, causal)
        expected = global_token_mask(
            sliding_window_mask(T, 2, causal=False, device=device), is_global, causal=is_causal
        )
        assert torch.equal(mask_table(mod, 1, 1, T, T, device=device)[0, 0], expected)


def test_per_sequence_global_tokens(device):
    is_global = torch.rand(3, 10, generator=torch.Generator().manual_seed(1)).to(device) < 0.3
    mod = or_masks(sliding_window(1, causal=False), global_tokens(is_global))
    expected = global_token_mask(sliding_window_mask(10, 1, causal=False, device=device), is_global)  # (3, T, T)
    assert torch.equal(mask_table(mod, 3, 2, 10, 10, device=device), expected[:, None].expand(3, 2, 10, 10))


@pytest.mark.parametrize("window, n_global", [(2, 1), (0, 3), (5, 0), (1, 20)])
@pytest.mark.parametrize("is_causal", [True, False])
def test_sliding_window_with_globals_is_chapter_9s_window_plus_globals(window, n_global, is_causal, device):
    T = 12
    is_global = torch.arange(T, device=device) < n_global
    base = sliding_window_mask(T, window, causal=False, device=device)
    expected = global_token_mask(base, is_global, causal=is_causal)
    got = mask_table(sliding_window_with_globals(window, n_global, causal=is_causal), 2, 3, T, T, device=device)
    assert torch.equal(got, expected.expand(2, 3, T, T))


def _document_oracle(ids, is_causal):
    B, T = ids.shape
    out = torch.zeros(B, T, T, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(T):
                out[b, i, j] = bool(ids[b, i] == ids[b, j]) and (j <= i or not is_causal)
    return out


@pytest.mark.parametrize("is_causal", [True, False])
def test_document_mask_against_pairs(is_causal, device):
    ids = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2, 2], [0, 1, 1, 1, 1, 1, 2, 3, 3]], device=device)
    got = mask_table(document_mask(ids, causal=is_causal), 2, 2, 9, 9, device=device)
    expected = _document_oracle(ids.cpu(), is_causal).to(device)
    assert torch.equal(got, expected[:, None].expand(2, 2, 9, 9))


def test_prefix_lm_against_pairs(device):
    lengths = torch.tensor([0, 3, 8], device=device)
    got = mask_table(prefix_lm_mask(lengths), 3, 1, 8, 8, device=device)[:, 0]
    for b, n in enumerate(lengths.tolist()):
        expected = causal_mask(8, device=device).clone()
        expected[:, :n] = True  # every query sees the whole prefix
        assert torch.equal(got[b], expected)


def test_patterns_through_flex_attention_equal_dense_attention(device):
    """flex_attention (eager) under each mask_mod = chapter 3's attention under chapter 9's table = the reference."""
    B, H, T = 2, 3, 40
    q, k, v = _qkv(B, H, T, T, 8, 5, device)
    ids = (torch.arange(T, device=device) // 13).expand(B, T).contiguous()
    ids[1] = torch.arange(T, device=device) // 7
    mods = [
        sliding_window(5),
        sliding_window_with_globals(4, 2),
        sliding_window_with_globals(3, 1, causal=False),
        document_mask(ids),
        prefix_lm_mask(torch.tensor([5, 17], device=device)),
        dilated_window(3, 2),
    ]
    for mod in mods:
        table = mask_table(mod, B, H, T, T, device=device)
        expected, _ = scaled_dot_product_attention(q, k, v, table)
        torch.testing.assert_close(_flex(q, k, v, mod), expected, **tolerance(q.dtype))
        ref, _ = flex_attention_reference(q, k, v, mask_mod=mod)
        torch.testing.assert_close(ref, expected, **tolerance(q.dtype))


def test_mods_use_tensor_operations_not_python_and(device):
    """A mask_mod written with Python ``and`` fails under flex's vmap: the reason the chapter uses & and |."""

    def wrong(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx and q_idx - kv_idx <= 2

    with pytest.raises(RuntimeError):
        mask_table(wrong, 1, 1, 6, 6, device=device)


# ------------------------------------------------------------------ score_mods


def test_alibi_slopes_are_the_papers():
    assert torch.equal(alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)]))
    torch.testing.assert_close(alibi_slopes(4), torch.tensor([2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]))


@pytest.mark.parametrize("H", [1, 2, 4, 8])
def test_alibi_equals_an_explicit_bias(H, device):
    B, T_q, T_k = 2, 9, 9
    q, k, v = _qkv(B, H, T_q, T_k, 6, 4, device, seed=2)
    i = torch.arange(T_q, device=device)[:, None]
    j = torch.arange(T_k, device=device)[None, :]
    slopes = torch.tensor([2 ** (-8 * (h + 1) / H) for h in range(H)], device=device)
    bias = -slopes[:, None, None] * (i - j)  # (H, T_q, T_k): -m_h (i - j)
    bias = bias.masked_fill(j > i, -math.inf)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    got = _flex(q, k, v, causal, alibi_score_mod(H))
    torch.testing.assert_close(got, expected, **tolerance(q.dtype))
    ref, _ = flex_attention_reference(q, k, v, alibi_score_mod(H), causal)
    torch.testing.assert_close(ref, expected, **tolerance(q.dtype))


def test_soft_cap_equals_the_explicit_form(device):
    q, k, v = _qkv(2, 2, 7, 11, 4, 3, device, seed=3)
    q = q * 10  # large scores, where the cap bites
    cap = 5.0
    scores = cap * torch.tanh(q @ k.transpose(-2, -1) / 2.0 / cap)  # d_k = 4: scale 1/2
    expected = torch.softmax(scores, dim=-1) @ v
    torch.testing.assert_close(_flex(q, k, v, score_mod=soft_cap_score_mod(cap)), expected, **tolerance(q.dtype))
    assert scores.abs().max() < cap


def test_relative_bias_gets_gradients_and_matches_the_explicit_bias(device):
    H, D, T = 3, 4, 10
    bias = torch.randn(H, 2 * D + 1, generator=torch.Generator().manual_seed(4)).to(device).requires_grad_()
    q, k, v = _qkv(1, H, T, T, 4, 4, device, seed=5)
    i = torch.arange(T, device=device)[:, None]
    j = torch.arange(T, device=device)[None, :]
    explicit = bias[:, ((j - i).clamp(-D, D) + D)]  # (H, T, T)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=explicit)
    got = _flex(q, k, v, score_mod=relative_bias_score_mod(bias, D))
    torch.testing.assert_close(got, expected, **tolerance(q.dtype))
    (grad,) = torch.autograd.grad(got.sum(), bias)
    (expected_grad,) = torch.autograd.grad(expected.sum(), bias)
    torch.testing.assert_close(grad, expected_grad, **tolerance(q.dtype))


# ------------------------------------------------------------------ GQA, log-sum-exp, T_q != T_k


def test_enable_gqa_is_chapter_8s_repeat_kv(device):
    q, k, v = _qkv(2, 6, 8, 8, 4, 5, device, seed=6, H_kv=2)
    expected, _ = scaled_dot_product_attention(q, repeat_kv(k, 3), repeat_kv(v, 3), causal_mask(8, device=device))
    torch.testing.assert_close(_flex(q, k, v, causal, enable_gqa=True), expected, **tolerance(q.dtype))
    ref, _ = flex_attention_reference(q, k, v, mask_mod=causal, enable_gqa=True)
    torch.testing.assert_close(ref, expected, **tolerance(q.dtype))


def test_log_sum_exp_is_chapter_10s(device):
    q, k, v = _qkv(2, 3, 6, 10, 4, 5, device, seed=7)
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    expected_out, expected_lse = naive_attention(q, k, v)
    torch.testing.assert_close(out, expected_out, **tolerance(q.dtype))
    torch.testing.assert_close(aux.lse, expected_lse, **tolerance(q.dtype))
    _, ref_lse = flex_attention_reference(q, k, v)
    torch.testing.assert_close(ref_lse, expected_lse, **tolerance(q.dtype))


def test_a_row_that_sees_nothing_gives_zero_and_minus_infinity(device):
    q, k, v = _qkv(1, 1, 4, 4, 3, 3, device, seed=8)

    def nothing_for_query_0(b, h, q_idx, kv_idx):
        return q_idx > 0

    out, lse = flex_attention_reference(q, k, v, mask_mod=nothing_for_query_0)
    flex_out, aux = flex_attention(
        q,
        k,
        v,
        block_mask=create_block_mask(nothing_for_query_0, 1, 1, 4, 4, device=device),
        return_aux=AuxRequest(lse=True),
    )
    assert torch.equal(out[0, 0, 0], torch.zeros(3, device=device)) and lse[0, 0, 0] == -math.inf
    torch.testing.assert_close(out, flex_out, **tolerance(q.dtype))
    torch.testing.assert_close(lse, aux.lse, **tolerance(q.dtype))


# ------------------------------------------------------------------ BlockMask


def test_sliding_window_block_sparsity_is_the_measured_56_percent():
    block_mask = create_block_mask(sliding_window(64), 1, 4, 512, 512, device="cpu")
    counts = block_counts(block_mask)
    assert block_mask.sparsity() == pytest.approx(56.25)
    assert counts == {"partial": 28, "full": 0, "skipped": 36, "total": 64}


@pytest.mark.parametrize("T, block", [(512, 128), (384, 128), (256, 64)])
def test_causal_block_mask_visits_the_blocks_of_chapter_11s_loop(T, block):
    counts = block_counts(create_block_mask(causal, None, None, T, T, device="cpu", BLOCK_SIZE=block))
    n = T // block
    assert counts["partial"] == n and counts["full"] == n * (n - 1) // 2  # the diagonal is partial
    assert counts["partial"] + counts["full"] == flash_causal_key_blocks(T, block)


# ------------------------------------------------------------------ decoding with chapter 8's cache


def test_offset_causal_is_the_bottom_right_causal_mask(device):
    table = mask_table(offset_mask_mod(causal, 5), 1, 1, 3, 8, device=device)[0, 0]
    assert torch.equal(table, causal_mask(3, 8, device=device))


@pytest.mark.parametrize("H_kv", [4, 2, 1])
def test_attend_with_cache_flex_equals_chapter_8(H_kv, device):
    B, H, d = 2, 4, 8
    g = torch.Generator().manual_seed(9)
    cache_a, cache_b = KVCache(), KVCache()
    for T_new in (6, 1, 1, 3):  # prefill, two decode steps, a chunk
        q = torch.randn(B, H, T_new, d, generator=g).to(device)
        k = torch.randn(B, H_kv, T_new, d, generator=g).to(device)
        v = torch.randn(B, H_kv, T_new, d, generator=g).to(device)
        expected = attend_with_cache(q, k, v, cache_a, 0)
        got = attend_with_cache_flex(q, k, v, cache_b, 0)
        torch.testing.assert_close(got, expected, **tolerance(q.dtype))


def test_attend_with_cache_flex_keeps_a_sliding_window_and_alibi_on_absolute_positions(device):
    B, H, d, window = 1, 2, 4, 3
    g = torch.Generator().manual_seed(10)
    cache = KVCache()
    ks, vs = [], []
    for T_new in (5, 1, 1):
        q = torch.randn(B, H, T_new, d, generator=g).to(device)
        k = torch.randn(B, H, T_new, d, generator=g).to(device)
        v = torch.randn(B, H, T_new, d, generator=g).to(device)
        ks.append(k)
        vs.append(v)
        got = attend_with_cache_flex(q, k, v, cache, 0, sliding_window(window), score_mod=alibi_score_mod(H))
        K, V = torch.cat(ks, 2), torch.cat(vs, 2)
        T_k = K.shape[2]
        i = torch.arange(T_k - T_new, T_k, device=device)[:, None]  # absolute query positions
        j = torch.arange(T_k, device=device)[None, :]
        bias = -alibi_slopes(H, device=device)[:, None, None] * (i - j)
        bias = bias.masked_fill(~((i - j >= 0) & (i - j <= window)), -math.inf)
        expected = F.scaled_dot_product_attention(q, K, V, attn_mask=bias)
        torch.testing.assert_close(got, expected, **tolerance(q.dtype))


# ------------------------------------------------------------------ chapter 8's cross-layer sharing row


def test_cross_layer_sharing_reproduces_the_gemma_like_numbers():
    """Raschka's LLMs-from-scratch estimate for a Gemma-4-E2B-like setup: 35 layers, 15 producing K/V, 8 heads of
    256, T = 131072, bf16: 37.58 GB under MHA, 2.01 GB with one kv head and sharing."""
    mha = kv_cache_bytes(35, 8, 256, 131072, 2)
    shared = kv_cache_bytes(35, 1, 256, 131072, 2, n_kv_layers=15)
    assert round(mha / 1e9, 2) == 37.58 and round(shared / 1e9, 2) == 2.01
    assert kv_cache_bytes(35, 8, 256, 131072, 2, n_kv_layers=35) == mha


# ------------------------------------------------------------------ errors


def test_bad_inputs_raise_value_errors_naming_shapes():
    with pytest.raises(ValueError, match=r"window >= 0"):
        sliding_window(-1)
    with pytest.raises(ValueError, match=r"window >= 0"):
        sliding_window_with_globals(-1, 2)
    with pytest.raises(ValueError, match=r"\(3,\)"):
        document_mask(torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        prefix_lm_mask(torch.zeros(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"n_heads >= 1"):
        alibi_score_mod(0)
    with pytest.raises(ValueError, match=r"cap > 0"):
        soft_cap_score_mod(0.0)
    with pytest.raises(ValueError, match=r"\(2, 5\)"):
        relative_bias_score_mod(torch.zeros(2, 5), 3)
    with pytest.raises(ValueError, match=r"q\(1, 2, 3, 4\)"):
        flex_attention_reference(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 5), torch.zeros(1, 2, 3, 5))
    with pytest.raises(ValueError, match=r"k\(1, 3, 3, 4\)"):
        flex_attention_reference(torch.zeros(1, 2, 3, 4), torch.zeros(1, 3, 3, 4), torch.zeros(1, 3, 3, 4))
    with pytest.raises(ValueError, match=r"q\(1, 3, 2, 4\)"):
        attend_with_cache_flex(torch.zeros(1, 3, 2, 4), torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), KVCache(), 0)
    with pytest.raises(ValueError, match="offset"):
        offset_mask_mod(causal, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alibi_slopes(3)  # no warning for a non-power-of-two head count


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_benchmark_measures_the_compiled_kernel_on_a_gpu():
    """The benchmark's GPU path (``--device cuda``: a Triton kernel), one small length; not run on the CPU."""
    from benchmarks.bench_flex_attention import measure

    row = measure("flex_compiled", 512, window=64, n_heads=4, d_k=32, repeats=2, device="cuda")
    assert row["sparsity"] == pytest.approx(56.25) and row["seconds"] > 0 and row["compile_seconds"] > 0
