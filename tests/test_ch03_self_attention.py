"""The chapter 3 solution against PyTorch's own scaled_dot_product_attention, on every device."""

import pytest
import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import (
    SelfAttention,
    attention_mask_from_lengths,
    causal_mask,
    scaled_dot_product_attention,
)
from tests.conftest import tolerance

SIZES = dict(B=2, H=3, T_q=5, T_k=7, d_k=4, d_v=6)  # all different: code that mixes them up fails


def _qkv(device, dtype=torch.float32, B=2, H=3, T_q=5, T_k=7, d_k=4, d_v=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=dtype).to(device)
    return mk(B, H, T_q, d_k), mk(B, H, T_k, d_k), mk(B, H, T_k, d_v)


def _masks(device, B=2, T_q=5, T_k=7):
    g = torch.Generator().manual_seed(1)
    random = torch.rand(B, 1, T_q, T_k, generator=g) < 0.5
    random[..., 0] = True  # PyTorch's result for a fully masked row is backend-dependent; compare separately
    return {
        "none": None,
        "padding": attention_mask_from_lengths(torch.tensor([7, 3]))[:, None, None, :],
        "causal": causal_mask(T_q, T_k),
        "random": random,
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mask_name", ["none", "padding", "causal", "random"])
def test_matches_torch_sdpa(device, dtype, mask_name):
    q, k, v = _qkv(device, dtype)
    mask = _masks(device)[mask_name]
    mask = mask.to(device) if mask is not None else None
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **tolerance(dtype))
    # The weights are what PyTorch's kernel gives when the values are the identity matrix.
    eye = torch.eye(k.shape[-2], dtype=dtype, device=device).expand(*k.shape[:-1], k.shape[-2])
    torch.testing.assert_close(weights, F.scaled_dot_product_attention(q, k, eye, attn_mask=mask), **tolerance(dtype))
    assert out.device == q.device and weights.device == q.device


def test_gradients_match_torch(device):
    q, k, v = (t.requires_grad_() for t in _qkv(device, torch.float64))
    mask = causal_mask(5, 7, device=device)
    scaled_dot_product_attention(q, k, v, mask)[0].square().sum().backward()
    ours = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).square().sum().backward()
    for a, t in zip(ours, (q, k, v)):
        torch.testing.assert_close(a, t.grad, **tolerance(torch.float64))


def test_any_number_of_leading_dims(device):
    g = torch.Generator().manual_seed(3)
    for lead in [(), (4,), (2, 3), (2, 1, 3)]:
        q = torch.randn(*lead, 5, 4, generator=g).to(device)
        k = torch.randn(*lead, 6, 4, generator=g).to(device)
        v = torch.randn(*lead, 6, 3, generator=g).to(device)
        out, w = scaled_dot_product_attention(q, k, v)
        assert out.shape == (*lead, 5, 3) and w.shape == (*lead, 5, 6)
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_fully_masked_row_is_zero_not_nan(device):
    q, k, v = _qkv(device)
    mask = torch.ones(2, 3, 5, 7, dtype=torch.bool, device=device)
    mask[1, 2, 4] = False
    q.requires_grad_()
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[1, 2, 4] == 0).all() and (out[1, 2, 4] == 0).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
    # every other row is unaffected
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out[0], ref[0])


def test_masked_weights_exactly_zero_and_rows_sum_to_one():
    q, k, v = _qkv("cpu")
    mask = _masks("cpu")["random"]
    _, w = scaled_dot_product_attention(q, k, v, mask)
    assert (w.masked_select(~mask.expand_as(w)) == 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 5))


def test_causal_mask_against_tril():
    for T_q, T_k in [(1, 1), (4, 4), (3, 8)]:
        expected = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)
        assert torch.equal(causal_mask(T_q, T_k), expected)
    with pytest.raises(ValueError, match="T_q=5, T_k=3"):
        causal_mask(5, 3)


def test_causal_mask_matches_torch_is_causal(device):
    q, k, v = _qkv(device, T_k=5)
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(5, device=device))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_attention_mask_from_lengths():
    m = attention_mask_from_lengths(torch.tensor([2, 0, 3]), T_k=4)
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, True, False, False], [False] * 4, [True, True, True, False]]
    with pytest.raises(ValueError, match="integer"):
        attention_mask_from_lengths(torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"\[0, T_k=2\]"):
        attention_mask_from_lengths(torch.tensor([1, 3]), T_k=2)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((2, 5, 4), (2, 7, 3), (2, 7, 6)), "share d_k"),
        (((2, 5, 4), (2, 7, 4), (2, 6, 6)), "same number of keys"),
        (((2, 5, 4), (3, 7, 4), (3, 7, 6)), "leading"),
        (((4,), (7, 4), (7, 6)), "at least 2 dims"),
    ],
)
def test_shape_errors_name_the_shapes(shapes, message):
    q, k, v = (torch.zeros(s) for s in shapes)
    with pytest.raises(ValueError, match=message) as err:
        scaled_dot_product_attention(q, k, v)
    assert str(tuple(shapes[1])) in str(err.value) or str(tuple(shapes[0])) in str(err.value)


def test_mask_errors():
    q, k, v = _qkv("cpu")
    with pytest.raises(ValueError, match="bool"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 7))
    with pytest.raises(ValueError, match=r"\(2, 3, 5, 7\)"):
        scaled_dot_product_attention(q, k, v, torch.ones(5, 6, dtype=torch.bool))


def test_self_attention_module(device):
    torch.manual_seed(0)
    layer = SelfAttention(d_model=10, d_k=4, d_v=6).to(device)
    x = torch.randn(3, 8, 10, device=device)
    mask = causal_mask(8, device=device)
    out, w = layer(x, mask)
    assert out.shape == (3, 8, 6) and w.shape == (3, 8, 8)
    q, k, v = x @ layer.W_q.weight.T, x @ layer.W_k.weight.T, x @ layer.W_v.weight.T
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    with pytest.raises(ValueError, match=r"\(3, 8, 9\)"):
        layer(torch.randn(3, 8, 9, device=device))


def test_self_attention_permutation_equivariant():
    """Without positions, permuting the tokens permutes the outputs the same way."""
    torch.manual_seed(0)
    layer = SelfAttention(8, 4)
    x = torch.randn(1, 6, 8)
    perm = torch.randperm(6)
    torch.testing.assert_close(layer(x[:, perm])[0], layer(x)[0][:, perm])
