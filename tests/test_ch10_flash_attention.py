"""The chapter 10 solution against PyTorch's own attention, softmax and autograd, on every device.

Oracles: ``torch.softmax``, ``torch.logsumexp``, ``F.scaled_dot_product_attention`` and autograd through it, and
``torch.autograd.gradcheck`` (finite differences). The memory claim (no ``T_q × T_k`` tensor is ever created) is
checked by recording the shape of every tensor that any operator returns, and the recorder is shown to catch the
naive form.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from solutions.ch03_self_attention import attention_mask_from_lengths, causal_mask
from solutions.ch10_flash_attention import (
    block_mask,
    flash_attention,
    flash_attention_backward,
    flash_attention_forward,
    naive_attention,
    naive_softmax,
    online_softmax,
    online_softmax_update,
)
from tests.conftest import tolerance

SIZES = dict(B=2, H=3, T_q=13, T_k=17, d_k=8, d_v=5)  # all different; T not a multiple of the blocks below
BLOCKS = [(4, 5), (1, 1), (64, 64), (13, 3)]  # ragged, single rows, one block for everything, mixed


def _qkv(device, dtype=torch.float32, B=2, H=3, T_q=13, T_k=17, d_k=8, d_v=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(device, dtype)
    return mk(B, H, T_q, d_k), mk(B, H, T_k, d_k), mk(B, H, T_k, d_v)


def _masks(kind, device, B=2, T_q=13, T_k=17, lengths=(17, 6)):
    """(causal, attention_mask, the same as one mask for F.scaled_dot_product_attention (True = may attend))."""
    causal = kind in ("causal", "both")
    attention_mask = (
        attention_mask_from_lengths(torch.tensor(lengths), T_k).to(device) if kind in ("padding", "both") else None
    )
    mask = causal_mask(T_q, T_k, device=device) if causal else None
    if attention_mask is not None:
        mask = attention_mask[:, None, None, :] if mask is None else mask & attention_mask[:, None, None, :]
    return causal, attention_mask, mask


def _lse_oracle(q, k, mask):
    scores = (q.double() @ k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.logsumexp(scores, dim=-1)


# ---------------------------------------------------------------- online softmax


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("block_k", [1, 3, 7, 100])
def test_online_softmax_matches_torch(device, dtype, block_k):
    x = torch.randn(4, 5, 23, dtype=dtype, device=device) * 10
    torch.testing.assert_close(online_softmax(x, block_k), torch.softmax(x, dim=-1), **tolerance(dtype))


def test_online_softmax_is_stable_where_the_naive_one_fails(device):
    x = torch.tensor([[0.0, 100.0, 200.0, 1000.0], [-1000.0, -999.0, -998.0, -1000.0]], device=device)
    assert torch.isnan(naive_softmax(x)[0]).any()  # exp(1000) = inf in float32: inf / inf
    assert torch.isnan(naive_softmax(x)[1]).all()  # exp(-1000) = 0 in float32: 0 / 0
    torch.testing.assert_close(online_softmax(x, 3), torch.softmax(x, dim=-1), **tolerance(torch.float32))


def test_online_softmax_masked_entries(device):
    x = torch.randn(3, 11, device=device)
    x[0, :4] = -math.inf  # a first block of masked entries only: the running max stays -inf, no NaN
    x[1, 5:] = -math.inf
    got = online_softmax(x, 4)
    torch.testing.assert_close(got[:2], torch.softmax(x[:2], dim=-1), **tolerance(torch.float32))
    x[2] = -math.inf
    assert torch.equal(online_softmax(x, 4)[2], torch.zeros(11, device=device))  # all masked: zeros, not NaN


def test_online_softmax_update_is_associative(device):
    """Folding blocks in one at a time gives the max and log-sum-exp of everything seen."""
    x = torch.randn(6, 20, dtype=torch.float64, device=device) * 5
    m = torch.full((6,), -math.inf, dtype=torch.float64, device=device)
    ell = torch.zeros(6, dtype=torch.float64, device=device)
    for start in (0, 3, 11, 12):
        stop = {0: 3, 3: 11, 11: 12, 12: 20}[start]
        m, ell = online_softmax_update(m, ell, x[:, start:stop])
    torch.testing.assert_close(m, x.amax(-1))
    torch.testing.assert_close(m + ell.log(), torch.logsumexp(x, -1))


def test_online_softmax_bad_input():
    with pytest.raises(ValueError, match="block_k"):
        online_softmax(torch.randn(3, 4), 0)
    with pytest.raises(ValueError, match=r"m\(3,\)"):
        online_softmax_update(torch.zeros(3), torch.zeros(3), torch.zeros(4, 2))


# ---------------------------------------------------------------- tiled forward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "both"])
@pytest.mark.parametrize("blocks", BLOCKS, ids=str)
def test_forward_matches_torch_sdpa(device, dtype, kind, blocks):
    q, k, v = _qkv(device, dtype)
    causal, attention_mask, mask = _masks(kind, device)
    o, lse = flash_attention_forward(
        q, k, v, causal=causal, attention_mask=attention_mask, block_q=blocks[0], block_k=blocks[1]
    )
    assert o.dtype == dtype and o.device == q.device and o.shape == (2, 3, 13, 5)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **tolerance(dtype))
    torch.testing.assert_close(lse.double(), _lse_oracle(q, k, mask), **tolerance(lse.dtype))


def test_forward_same_as_naive_form_to_1e_5(device):
    """The issue's target: the same output to 1e-5 (float32), on a longer sequence with both masks."""
    q, k, v = _qkv(device, T_q=300, T_k=300, B=1, H=2, d_k=16, d_v=16, seed=3)
    am = attention_mask_from_lengths(torch.tensor([290]), 300).to(device)
    ours = flash_attention_forward(q, k, v, causal=True, attention_mask=am, block_q=64, block_k=32)
    naive = naive_attention(q, k, v, causal=True, attention_mask=am)
    torch.testing.assert_close(ours[0], naive[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(ours[1], naive[1], rtol=0, atol=1e-5)


def test_fully_masked_queries_give_zeros(device):
    q, k, v = _qkv(device, torch.float64, T_q=6, T_k=6)
    am = attention_mask_from_lengths(torch.tensor([6, 0]), 6).to(device)  # the second sequence has no real key
    o, lse = flash_attention_forward(q, k, v, causal=True, attention_mask=am, block_q=4, block_k=4)
    assert torch.equal(o[1], torch.zeros_like(o[1])) and bool((lse[1] == -math.inf).all())
    torch.testing.assert_close(
        o[:1], F.scaled_dot_product_attention(q[:1], k[:1], v[:1], attn_mask=causal_mask(6, device=device))
    )


def test_large_scores_stay_finite(device):
    """Scores of several thousand: the running max keeps every exp in range (the naive softmax would overflow)."""
    q, k, v = _qkv(device, torch.float64, T_q=9, T_k=11)
    q, k = q * 40, k * 40  # float64: exp overflows above 709
    assert (q @ k.transpose(-2, -1)).abs().max() / math.sqrt(8) > 1000
    o, _ = flash_attention_forward(q, k, v, block_q=4, block_k=3)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), **tolerance(torch.float64))


def test_block_masks_tile_chapter_3_masks(device):
    T_q, T_k = 7, 10
    am = attention_mask_from_lengths(torch.tensor([10, 4]), T_k).to(device)
    expected = causal_mask(T_q, T_k, device=device) & am[:, None, None, :]  # (B, 1, T_q, T_k)
    got = torch.zeros(2, 1, T_q, T_k, dtype=torch.bool, device=device)
    for qs in range(0, T_q, 3):
        for ks in range(0, T_k, 4):
            qe, ke = min(qs + 3, T_q), min(ks + 4, T_k)
            tile = block_mask(qs, qe, ks, ke, T_q=T_q, T_k=T_k, causal=True, attention_mask=am, device=device)
            got[:, :, qs:qe, ks:ke] = tile
    assert torch.equal(got, expected)
    assert block_mask(0, 3, 0, 4, T_q=T_q, T_k=T_k, causal=False, attention_mask=None) is None


def test_bad_inputs_raise_value_errors():
    q, k, v = _qkv("cpu")
    with pytest.raises(ValueError, match=r"\(B, H, T, d\)"):
        flash_attention_forward(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="d_k"):
        flash_attention_forward(q, k[..., :3], v)
    with pytest.raises(ValueError, match="T_k"):
        flash_attention_forward(q, k, v[:, :, :4])
    with pytest.raises(ValueError, match="attention_mask"):
        flash_attention_forward(q, k, v, attention_mask=torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="T_q <= T_k"):
        flash_attention_forward(k, q, q[..., :5], causal=True)
    with pytest.raises(ValueError, match="block"):
        flash_attention_forward(q, k, v, block_q=0)
    o, lse = flash_attention_forward(q, k, v)
    with pytest.raises(ValueError, match="lse"):
        flash_attention_backward(o, q, k, v, o, lse[..., :3])


# ---------------------------------------------------------------- backward by recomputation


@pytest.mark.parametrize("kind", ["none", "causal", "padding", "both"])
def test_gradcheck_float64(device, kind):
    """Finite differences (an oracle that knows nothing of attention), small shapes, ragged blocks."""
    q, k, v = (t.requires_grad_() for t in _qkv(device, torch.float64, B=2, H=1, T_q=5, T_k=7, d_k=3, d_v=2))
    causal, attention_mask, _ = _masks(kind, device, T_q=5, T_k=7, lengths=(7, 3))
    fn = lambda q, k, v: flash_attention(q, k, v, causal=causal, attention_mask=attention_mask, block_q=2, block_k=3)
    assert torch.autograd.gradcheck(fn, (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["none", "causal", "padding", "both"])
@pytest.mark.parametrize("blocks", BLOCKS, ids=str)
def test_gradients_match_torch_sdpa(device, dtype, kind, blocks):
    q, k, v = (t.requires_grad_() for t in _qkv(device, dtype, seed=1))
    causal, attention_mask, mask = _masks(kind, device)
    do = torch.randn(2, 3, 13, 5, dtype=dtype, generator=torch.Generator().manual_seed(2)).to(device)
    out = flash_attention(q, k, v, causal=causal, attention_mask=attention_mask, block_q=blocks[0], block_k=blocks[1])
    ours = torch.autograd.grad(out, (q, k, v), do)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), do)
    for name, a, b in zip("qkv", ours, theirs):
        torch.testing.assert_close(a, b, **tolerance(dtype), msg=lambda m, name=name: f"d{name}: {m}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_gradients_match_torch_sdpa(device, dtype):
    q, k, v = (t.requires_grad_() for t in _qkv(device, dtype, seed=4))
    causal, attention_mask, mask = _masks("both", device)
    do = torch.randn(2, 3, 13, 5, generator=torch.Generator().manual_seed(5)).to(device, dtype)
    ours = torch.autograd.grad(flash_attention(q, k, v, causal=causal, attention_mask=attention_mask), (q, k, v), do)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), do)
    for a, b in zip(ours, theirs):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b, **tolerance(dtype))


def test_fully_masked_queries_get_zero_gradient(device):
    q, k, v = (t.requires_grad_() for t in _qkv(device, torch.float64, T_q=6, T_k=6))
    am = attention_mask_from_lengths(torch.tensor([6, 0]), 6).to(device)
    flash_attention(q, k, v, causal=True, attention_mask=am, block_q=4, block_k=4).sum().backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all()) and torch.equal(t.grad[1], torch.zeros_like(t.grad[1]))


# ---------------------------------------------------------------- memory: no T_q × T_k tensor


class _ShapeRecorder(TorchDispatchMode):
    """Records the shape of every tensor that any operator returns (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.shapes += [tuple(t.shape) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        return out


def _largest_tensor(fn, device, T_q=96, T_k=160):
    q, k, v = (t.requires_grad_() for t in _qkv(device, B=1, H=1, T_q=T_q, T_k=T_k, d_k=8, d_v=8))
    am = attention_mask_from_lengths(torch.tensor([150]), T_k).to(device)
    with _ShapeRecorder() as rec:
        fn(q, k, v, am).sum().backward()
    assert rec.shapes, "the recorder saw nothing"
    return max(math.prod(s) for s in rec.shapes)


def test_tiled_form_never_creates_a_score_matrix(device):
    T_q, T_k, block_q, block_k = 96, 160, 16, 32
    tiled = lambda q, k, v, am: flash_attention(
        q, k, v, causal=True, attention_mask=am, block_q=block_q, block_k=block_k
    )
    largest = _largest_tensor(tiled, device, T_q, T_k)
    assert largest <= max(T_k * 8, block_q * block_k), f"a tensor of {largest} elements (T_q × T_k = {T_q * T_k})"


def test_the_recorder_catches_the_naive_form(device):
    """The check above can fail: the naive form creates T_q × T_k tensors, and the recorder sees them."""
    naive = lambda q, k, v, am: naive_attention(q, k, v, causal=True, attention_mask=am)[0]
    assert _largest_tensor(naive, device) >= 96 * 160


# ---------------------------------------------------------------- the measured memory (the benchmark)


def test_peak_allocated_bytes_counts_what_the_call_allocates():
    """The benchmark's CPU measure: the peak of the allocations made during the call, frees included, inputs not."""
    from benchmarks.bench_flash_attention import peak_allocated_bytes

    inputs = torch.zeros(1 << 20)  # 4 MiB made before the call: not counted

    def pattern():
        a = torch.empty(1 << 19)  # 2 MiB
        del a  # freed: the next allocations do not add to it
        b, c = torch.empty(1 << 18), torch.empty(1 << 18)  # 1 + 1 MiB, both alive at the end
        return inputs.clone(), b, c  # and 4 MiB more: the peak is 6 MiB

    assert 0 <= peak_allocated_bytes(pattern, torch.device("cpu")) - 6 * 2**20 < 1024


def test_benchmark_measure_sees_the_naive_tables_and_not_the_tiled_ones():
    from benchmarks.bench_flash_attention import (
        attention,
        clear_grads,
        forward_backward,
        make_inputs,
        peak_allocated_bytes,
    )

    T, cpu = 512, torch.device("cpu")
    qkv = make_inputs(T, 16, cpu)
    peaks = {}
    for impl in ("naive", "tiled", "sdpa"):
        fn = attention(impl, 64)
        clear_grads(qkv)
        peaks[impl] = peak_allocated_bytes(lambda fn=fn: forward_backward(fn, qkv), cpu)
    assert peaks["naive"] >= 3 * 4 * T * T  # three float32 T × T tables at once, at least
    assert peaks["tiled"] < 4 * T * T and peaks["sdpa"] < 4 * T * T  # less than one


def _flash_results():
    import json
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks/results/ch10_flash_attention_cpu.json"
    if not path.exists():
        pytest.skip(
            "benchmarks/results/ch10_flash_attention_cpu.json not written (python -m benchmarks.bench_flash_attention)"
        )
    return json.loads(path.read_text())


def test_committed_memory_results_hold_the_page_claims():
    """The page's "Memory, measured": naive grows 4× per doubling of T (about 15 bytes per query–key pair), tiled and
    PyTorch's kernel as T and about alike; naive slowest, tiled faster, F.sdpa fastest; the same outputs."""
    import pathlib
    import re

    record = _flash_results()
    assert "torch.profiler" in record["meta"]["how"] and "median of 5" in record["meta"]["how"]  # "five rounds"
    by = {(r["impl"], r["T"]): r for r in record["rows"]}
    Ts = sorted({r["T"] for r in record["rows"]})
    naive_Ts = [T for T in Ts if ("naive", T) in by]
    assert len(naive_Ts) >= 3
    for T in naive_Ts:
        assert 14 <= by[("naive", T)]["peak_alloc_bytes"] / T**2 <= 17  # "about 15 bytes per query–key pair"
    for a, b in zip(naive_Ts, naive_Ts[1:]):
        assert b == 2 * a
        assert 3.6 <= by[("naive", b)]["peak_alloc_bytes"] / by[("naive", a)]["peak_alloc_bytes"] <= 4.4  # ~ 4×
    for impl in ("tiled", "sdpa"):
        for a, b in zip(Ts, Ts[1:]):
            assert by[(impl, b)]["peak_alloc_bytes"] / by[(impl, a)]["peak_alloc_bytes"] <= 2.2  # grows as T
    for T in Ts:
        assert 1 / 1.5 <= by[("sdpa", T)]["peak_alloc_bytes"] / by[("tiled", T)]["peak_alloc_bytes"] <= 1.5
        assert by[("sdpa", T)]["seconds"] < by[("tiled", T)]["seconds"]
        if ("naive", T) in by:
            assert by[("tiled", T)]["seconds"] < by[("naive", T)]["seconds"]  # "faster from 1k tokens on"
        for impl in ("tiled", "sdpa"):
            assert by[(impl, T)].get("max_abs_diff_vs_naive", 0.0) < 1e-5
    page = " ".join((pathlib.Path(__file__).resolve().parents[1] / "book/ch10_flash_attention.md").read_text().split())
    m = re.search(r"([\d,]+) MiB at \$T = (\d+)\$", page)
    assert m and round(by[("naive", int(m[2]))]["peak_alloc_mib"]) == int(m[1].replace(",", ""))
    assert Ts[0] == 1024 and "faster from 1k tokens on" in page
