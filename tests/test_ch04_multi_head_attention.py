"""Chapter 4 against torch.nn.MultiheadAttention (weights copied), on every device."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import attention_mask_from_lengths, causal_mask
from solutions.ch04_multi_head_attention import (
    FusedMultiHeadSelfAttention,
    MultiHeadAttention,
    merge_heads,
    split_heads,
)
from solutions.interop import (
    copy_fused_from_torch,
    copy_mha_from_torch,
    from_torch_mask,
    to_torch_mask,
    torch_mha_like,
    torch_mha_masks,
)
from tests.conftest import tolerance

D, H = 24, 4  # d_k = 6; B = 3, T_q = 5, T_k = 7 below: all different


def _inputs(device, dtype=torch.float32, B=3, T_q=5, T_k=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=dtype).to(device)
    return mk(B, T_q, D), mk(B, T_k, D), mk(B, T_k, D)


def _torch_mha(device, dtype=torch.float32, bias=True, seed=0):
    torch.manual_seed(seed)
    return nn.MultiheadAttention(D, H, bias=bias, batch_first=True).to(device, dtype)


def test_split_and_merge_heads_against_chunks(device):
    x = torch.randn(2, 5, 12, device=device)
    heads = split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads, torch.stack(x.chunk(3, dim=-1), dim=1))  # head i = i-th feature block
    assert torch.equal(merge_heads(heads), x)
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(x, 5)
    with pytest.raises(ValueError, match=r"\(2, 5\)"):
        split_heads(x[..., 0], 3)
    with pytest.raises(ValueError, match="not divisible"):
        MultiHeadAttention(10, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("masks", ["none", "padding", "attn", "both"])
@pytest.mark.parametrize("average", [True, False])
def test_matches_nn_multihead_attention(device, dtype, masks, average):
    theirs = _torch_mha(device, dtype)
    ours = copy_mha_from_torch(MultiHeadAttention(D, H).to(device, dtype), theirs)
    q, k, v = _inputs(device, dtype)
    kp = attention_mask_from_lengths(torch.tensor([7, 3, 5], device=device)) if masks in ("padding", "both") else None
    am = causal_mask(5, 7, device=device) if masks in ("attn", "both") else None
    torch_kp, torch_am, course = torch_mha_masks(kp, am)
    out, w = ours(q, k, v, course)
    # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
    ref_out, ref_w = theirs(
        q, k, v, key_padding_mask=torch_kp, attn_mask=torch_am, need_weights=True, average_attn_weights=average
    )
    torch.testing.assert_close(out, ref_out, **tolerance(dtype))
    torch.testing.assert_close(w.mean(1) if average else w, ref_w, **tolerance(dtype))


def test_float_additive_mask_boundary(device):
    """nn.MultiheadAttention's float masks (-inf = blocked) convert to the course's bool masks too."""
    theirs = _torch_mha(device)
    ours = copy_mha_from_torch(MultiHeadAttention(D, H).to(device), theirs)
    q, k, v = _inputs(device)
    float_mask = torch.zeros(5, 7, device=device).masked_fill(~causal_mask(5, 7, device=device), float("-inf"))
    out, _ = ours(q, k, v, from_torch_mask(float_mask))
    torch.testing.assert_close(out, theirs(q, k, v, attn_mask=float_mask)[0])
    assert to_torch_mask(None) is None
    with pytest.raises(ValueError, match="bool"):
        to_torch_mask(float_mask)


def test_gradients_match(device):
    theirs = _torch_mha(device, torch.float64)
    ours = copy_mha_from_torch(MultiHeadAttention(D, H).to(device, torch.float64), theirs)
    q, k, v = _inputs(device, torch.float64)
    kp = attention_mask_from_lengths(torch.tensor([7, 3, 5], device=device))
    ours(q, k, v, kp[:, None, None, :])[0].square().sum().backward()
    # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
    theirs(q, k, v, key_padding_mask=~kp)[0].square().sum().backward()
    torch.testing.assert_close(ours.W_q.weight.grad, theirs.in_proj_weight.grad[:D], **tolerance(torch.float64))
    torch.testing.assert_close(ours.W_v.weight.grad, theirs.in_proj_weight.grad[2 * D :], **tolerance(torch.float64))
    torch.testing.assert_close(ours.W_o.weight.grad, theirs.out_proj.weight.grad, **tolerance(torch.float64))


@pytest.mark.parametrize("use_sdpa", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_form_matches(device, use_sdpa, bias):
    theirs = _torch_mha(device, bias=bias)
    fused = copy_fused_from_torch(FusedMultiHeadSelfAttention(D, H, bias=bias).to(device), theirs)
    x = _inputs(device, T_q=6)[0]
    mask = causal_mask(6, device=device)
    out, w = fused(x, mask, use_sdpa=use_sdpa)
    ref_out, ref_w = theirs(x, x, x, attn_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out)
    if use_sdpa:
        assert w is None
    else:
        torch.testing.assert_close(w, ref_w)


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_fused_is_causal_is_nn_multihead_attention_with_a_causal_mask(device, use_sdpa):
    theirs = _torch_mha(device)
    fused = copy_fused_from_torch(FusedMultiHeadSelfAttention(D, H).to(device), theirs)
    x = _inputs(device, T_q=6)[0]
    # PyTorch's bool attn_mask is True where attention is NOT allowed: above the diagonal
    future = torch.ones(6, 6, dtype=torch.bool, device=device).triu(1)
    torch.testing.assert_close(fused(x, use_sdpa=use_sdpa, is_causal=True)[0], theirs(x, x, x, attn_mask=future)[0])
    # another mask given: combined with the causal one (a key padding mask here)
    pad = attention_mask_from_lengths(torch.tensor([6, 2, 4]), 6).to(device)  # (B, T), True at real tokens
    got = fused(x, pad[:, None, None, :], use_sdpa=use_sdpa, is_causal=True)[0]
    ref = theirs(x, x, x, attn_mask=future, key_padding_mask=~pad)[0]  # PyTorch's key_padding_mask: True = padding
    torch.testing.assert_close(got, ref)


def test_fused_is_causal_without_a_mask_takes_the_kernel_causal_path(monkeypatch):
    calls = []
    sdpa = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    FusedMultiHeadSelfAttention(D, H)(_inputs("cpu")[0], use_sdpa=True, is_causal=True)
    assert calls == [{"attn_mask": None, "dropout_p": 0.0, "is_causal": True}]  # no (T, T) mask was built


def test_teaching_and_fused_forms_agree_and_round_trip(device):
    torch.manual_seed(1)
    ours = MultiHeadAttention(D, H, bias=True).to(device)
    theirs = torch_mha_like(ours)  # our weights -> nn.MultiheadAttention
    fused = copy_fused_from_torch(FusedMultiHeadSelfAttention(D, H).to(device), theirs)
    x = _inputs(device)[0]
    torch.testing.assert_close(ours(x, x, x)[0], fused(x)[0])
    torch.testing.assert_close(ours(x, x, x)[0], theirs(x, x, x)[0])


def test_split_without_transpose_is_a_different_function():
    """The classic bug (reshape straight to (B, H, T, d_k)) has the right shapes but not nn.MultiheadAttention's values."""
    torch.manual_seed(0)
    theirs = _torch_mha("cpu")
    ours = copy_mha_from_torch(MultiHeadAttention(D, H), theirs)
    x = _inputs("cpu")[0]
    B, T, _ = x.shape
    bad = lambda t: t.reshape(B, H, T, D // H)
    q, k, v = bad(ours.W_q(x)), bad(ours.W_k(x)), bad(ours.W_v(x))
    wrong = ours.W_o(merge_heads(F.scaled_dot_product_attention(q, k, v)))
    assert wrong.shape == theirs(x, x, x)[0].shape
    assert not torch.allclose(wrong, theirs(x, x, x)[0], atol=1e-3)


def test_permutation_equivariance_without_positions():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H)
    x = torch.randn(2, 6, D)
    perm = torch.randperm(6)
    torch.testing.assert_close(mha(x[:, perm], x[:, perm], x[:, perm])[0], mha(x, x, x)[0][:, perm])


def test_dropout_only_in_training():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(2, 6, D)
    mha.eval()
    a, b = mha(x, x, x)[0], mha(x, x, x)[0]
    assert torch.equal(a, b)
    mha.train()
    assert not torch.allclose(mha(x, x, x)[0], a)


def test_shape_errors():
    mha = MultiHeadAttention(D, H)
    q, k, v = _inputs("cpu")
    with pytest.raises(ValueError, match=r"\(3, 7, 23\)"):
        mha(q, k[..., :-1], v)
    with pytest.raises(ValueError, match="T_k"):
        mha(q, k, v[:, :6])
