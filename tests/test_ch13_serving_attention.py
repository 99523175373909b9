"""Chapter 13 (attention at serving time) against independent oracles, on every device: PyTorch's
``scaled_dot_product_attention`` and float64 dense attention, chapter 8's dense ``KVCache``/``attend_with_cache``,
PyTorch's experimental ``PagedAttention`` (over ``flex_attention``, eager) where it imports, closed-form work
counts, ``torch.autograd.gradcheck`` for the sink's gradient, and real gloo processes for the ring."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from solutions.ch08_kv_cache import KVCache, attend_with_cache
from solutions.ch13_serving_attention import (
    PagedKVCache,
    attention_with_lse,
    attention_with_sink,
    causal_work_per_rank,
    flash_attention_with_sink,
    flash_attention_with_sink_forward,
    gather_kv,
    merge_attention_states,
    paged_attention_decode,
    ring_attention,
    ring_attention_simulated,
    ring_attention_step,
    run_ring_attention,
    shard_positions,
    shard_sequence,
    softmax_with_sink,
    split_kv_decode,
    unshard_sequence,
)
from tests.conftest import tolerance


def _randn(*shape, seed=0, dtype=torch.float32, device="cpu"):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)


def _dense_attention64(q, k, v, mask=None):
    """Float64 softmax(QK^T/sqrt(d))V written out, with a True = may attend mask; rows with no key give 0."""
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.masked_fill(lse == -math.inf, 0)[..., None])
    return p @ v, lse


# ---------------------------------------------------------------- 1. the paged KV cache


def _filled_cache(device, lengths=(7, 4, 0, 9), page_size=4, num_blocks=16, H_kv=2, d=8, d_v=5, seed=0):
    """A PagedKVCache and chapter 8's dense KVCache (one per sequence) filled with the same keys, in pieces."""
    g = torch.Generator().manual_seed(seed)
    paged = PagedKVCache(num_blocks, page_size, H_kv, d, d_v=d_v, device=device)
    dense = {}
    for s, n in enumerate(lengths):
        k, v = torch.randn(H_kv, n, d, generator=g).to(device), torch.randn(H_kv, n, d_v, generator=g).to(device)
        paged.allocate(s)
        dense[s] = KVCache()
        for lo, hi in ((0, min(n, 3)), (min(n, 3), n)):  # a prefill of 3, then the rest
            paged.append(s, k[:, lo:hi], v[:, lo:hi])
            if hi > lo:
                dense[s].update(0, k[None, :, lo:hi], v[None, :, lo:hi])
    return paged, dense


def test_gather_equals_chapter_8_dense_cache(device):
    paged, dense = _filled_cache(device)
    for s, cache in dense.items():
        k, v = paged.gather(s)
        if cache.length() == 0:
            assert k.shape == (2, 0, 8) and v.shape == (2, 0, 5)
            continue
        assert torch.equal(k, cache.keys[0][0]) and torch.equal(v, cache.values[0][0])
    assert paged.blocks_in_use == 2 + 1 + 0 + 3  # ceil(7/4) + ceil(4/4) + 0 + ceil(9/4)


def test_gather_kv_equals_the_caches_own_gather(device):
    paged, _ = _filled_cache(device, lengths=(7, 4, 0, 9, 12))
    for s in range(5):
        table, n = paged.block_table(s), paged.length(s)
        k, v = paged.gather(s)
        assert torch.equal(gather_kv(paged.k_blocks, table, n), k) and torch.equal(
            gather_kv(paged.v_blocks, table, n), v
        )


def test_gather_kv_reads_blocks_in_table_order_and_stops_at_length(device):
    blocks = torch.arange(5 * 1 * 3 * 1, dtype=torch.float32, device=device).reshape(5, 1, 3, 1)  # block b: 3b…3b+2
    got = gather_kv(blocks, torch.tensor([4, 0, 2]), 7)
    assert got.flatten().tolist() == [12, 13, 14, 0, 1, 2, 6]
    assert gather_kv(blocks, torch.tensor([3, 1]), 3).flatten().tolist() == [9, 10, 11]  # a full last block
    assert gather_kv(blocks, torch.tensor([3, 1]), 0).shape == (1, 0, 1)


def test_gather_kv_rejects_a_short_table():
    with pytest.raises(ValueError, match=r"needs 3 blocks"):
        gather_kv(torch.zeros(4, 1, 3, 2), torch.tensor([0, 1]), 7)
    with pytest.raises(ValueError, match=r"\(num_blocks, H_kv, page_size, d\)"):
        gather_kv(torch.zeros(4, 3, 2), torch.tensor([0]), 1)
    with pytest.raises(ValueError, match="integer"):
        gather_kv(torch.zeros(4, 1, 3, 2), torch.tensor([0.0]), 1)


def test_fork_shares_blocks_and_copies_on_write(device):
    paged, _ = _filled_cache(device, lengths=(6,), num_blocks=8)
    parent_k, parent_v = paged.gather(0)
    paged.fork(0, "beam")
    assert paged.blocks_in_use == 2 and torch.equal(paged.block_table("beam"), paged.block_table(0))
    k_new, v_new = _randn(2, 1, 8, seed=3, device=device), _randn(2, 1, 5, seed=4, device=device)
    paged.append("beam", k_new, v_new)  # the shared last block is partly filled (6 % 4 = 2): copied first
    assert paged.blocks_in_use == 3
    assert paged.block_table("beam")[0] == paged.block_table(0)[0]  # the full block stays shared
    assert paged.block_table("beam")[1] != paged.block_table(0)[1]
    assert torch.equal(paged.gather(0)[0], parent_k) and torch.equal(paged.gather(0)[1], parent_v)  # untouched
    k, v = paged.gather("beam")
    assert torch.equal(k, torch.cat([parent_k, k_new], dim=1)) and torch.equal(v, torch.cat([parent_v, v_new], 1))
    paged.free(0)
    assert paged.blocks_in_use == 2  # the shared full block survives with the beam
    assert torch.equal(paged.gather("beam")[0], k)
    paged.free("beam")
    assert paged.blocks_in_use == 0


def test_a_freed_sequence_is_forgotten_and_its_blocks_reused(device):
    paged, dense = _filled_cache(device, lengths=(5, 3), num_blocks=4)
    old_table = paged.block_table(0)
    paged.free(0)
    with pytest.raises(ValueError, match="unknown sequence"):
        paged.gather(0)
    paged.allocate(2)
    paged.append(2, _randn(2, 12, 8, seed=5, device=device), _randn(2, 12, 5, seed=6, device=device))
    assert set(paged.block_table(2).tolist()) == set(old_table.tolist()) | {3}  # the freed blocks and the last free one
    assert torch.equal(paged.gather(1)[0], dense[1].keys[0][0])  # the other sequence is untouched
    with pytest.raises(RuntimeError, match="all in use"):
        paged.append(2, _randn(2, 1, 8, device=device), _randn(2, 1, 5, device=device))


def test_paged_cache_rejects_bad_input():
    paged = PagedKVCache(4, 2, 2, 8)
    paged.allocate("a")
    with pytest.raises(ValueError, match="already exists"):
        paged.allocate("a")
    with pytest.raises(ValueError, match=r"\(H_kv, T_new, d_head\)"):
        paged.append("a", torch.zeros(3, 1, 8), torch.zeros(3, 1, 8))
    with pytest.raises(ValueError, match=">= 1"):
        PagedKVCache(0, 2, 2, 8)


def test_paged_decode_equals_chapter_8_attend_with_cache(device):
    paged, dense = _filled_cache(device, lengths=(7, 4, 9, 1))
    H = 4  # two query heads per key/value head
    q = _randn(4, H, 8, seed=7, device=device)
    k_new, v_new = _randn(4, 2, 1, 8, seed=8, device=device), _randn(4, 2, 1, 5, seed=9, device=device)
    for s in range(4):  # the new token's key joins both caches first
        paged.append(s, k_new[s], v_new[s])
    tables, lengths = paged.batch(list(range(4)))
    got = paged_attention_decode(q, paged.k_blocks, paged.v_blocks, tables, lengths)
    assert got.shape == (4, H, 5)
    for s in range(4):
        expected = attend_with_cache(q[s : s + 1, :, None], k_new[s : s + 1], v_new[s : s + 1], dense[s], 0)
        torch.testing.assert_close(got[s], expected[0, :, 0], **tolerance(torch.float32))


def test_paged_decode_matches_float64_dense_with_ragged_lengths_and_an_empty_sequence(device):
    paged, _ = _filled_cache(device, lengths=(13, 0, 2, 8), page_size=3, num_blocks=20, seed=1)
    seqs = [0, 1, 2, 3]
    tables, lengths = paged.batch(seqs)
    q = _randn(4, 2, 8, seed=11, device=device)
    got = paged_attention_decode(q, paged.k_blocks, paged.v_blocks, tables, lengths)
    for b, s in enumerate(seqs):
        k, v = paged.gather(s)
        expected, _ = _dense_attention64(q[b][:, None], k, v)
        torch.testing.assert_close(got[b].double(), expected[:, 0], **tolerance(torch.float32))
    assert torch.equal(got[1], torch.zeros_like(got[1]))


def test_paged_decode_in_half_precision_follows_float32(device):
    paged, _ = _filled_cache(device, lengths=(5, 11))
    tables, lengths = paged.batch([0, 1])
    q = _randn(2, 2, 8, seed=12, device=device)
    full = paged_attention_decode(q, paged.k_blocks, paged.v_blocks, tables, lengths)
    half = paged_attention_decode(q.half(), paged.k_blocks.half(), paged.v_blocks.half(), tables, lengths)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), full, **tolerance(torch.float16))


def test_paged_decode_rejects_bad_shapes():
    k_blocks = torch.zeros(4, 2, 3, 8)
    with pytest.raises(ValueError, match="H_kv must divide H"):
        paged_attention_decode(
            torch.zeros(1, 3, 8), k_blocks, k_blocks, torch.zeros(1, 2, dtype=torch.long), torch.tensor([1])
        )
    with pytest.raises(ValueError, match="lengths must lie"):
        paged_attention_decode(
            torch.zeros(1, 2, 8), k_blocks, k_blocks, torch.zeros(1, 2, dtype=torch.long), torch.tensor([7])
        )


def test_paged_decode_agrees_with_pytorch_paged_attention():
    """PyTorch's experimental PagedAttention (page table + flex_attention, eager on CPU) as an oracle: its batch
    conversion. (Its single-sequence conversion, ``convert_logical_block_mask(..., batch_idx=...)``, reads the page
    table's row of the block mask's *local* batch index, so it attends to the wrong pages — measured on torch 2.13:
    errors 2.4 and 0.9 for sequences 1 and 2 of this batch; the dense oracles above are the ones to trust.)"""
    paged_mod = pytest.importorskip("torch.nn.attention.experimental._paged_attention")
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    H, d, page, lengths = 2, 8, 4, [7, 1, 12]
    n_pages, B = 12, len(lengths)
    torch_paged = paged_mod.PagedAttention(n_pages, page, B, device="cpu")
    k_cache, v_cache = torch.zeros(1, H, n_pages * page, d), torch.zeros(1, H, n_pages * page, d)
    ours = PagedKVCache(n_pages, page, H, d)
    for b, n in enumerate(lengths):
        k, v = _randn(1, H, n, d, seed=20 + b), _randn(1, H, n, d, seed=40 + b)
        torch_paged.reserve(torch.tensor(b), torch.tensor(n))
        torch_paged.assign(torch.tensor([b]), torch.arange(n)[None], k, v, k_cache, v_cache)
        ours.allocate(b)
        ours.append(b, k[0], v[0])
    q = _randn(B, H, d, seed=60)
    kv_len = torch.tensor(lengths)
    T_max = -(-max(lengths) // page) * page
    logical = flex.create_block_mask(
        lambda b, h, q_idx, kv_idx: kv_idx < kv_len[b], B, None, 1, T_max, device="cpu", BLOCK_SIZE=(128, page)
    )
    with warnings.catch_warnings():  # eager flex_attention warns that it is not compiled: that is the point here
        warnings.simplefilter("ignore", UserWarning)
        expected = flex.flex_attention(
            q[:, :, None], k_cache, v_cache, block_mask=torch_paged.convert_logical_block_mask(logical, kv_len=kv_len)
        )
    tables, lens = ours.batch(list(range(B)))
    got = paged_attention_decode(q, ours.k_blocks, ours.v_blocks, tables, lens)
    torch.testing.assert_close(got, expected[:, :, 0], **tolerance(torch.float32))


# ---------------------------------------------------------------- 2. split-KV decoding


def test_attention_with_lse_over_a_chunk_matches_float64(device):
    q, k, v = (
        _randn(2, 3, 5, 8, seed=1, device=device),
        _randn(2, 3, 7, 8, seed=2, device=device),
        _randn(2, 3, 7, 4, seed=3, device=device),
    )
    # queries at positions 10…14, keys at 8…14: a causal mask that is not the chunk's diagonal
    o, lse = attention_with_lse(q, k, v, causal=True, q_start=10, k_start=8)
    mask = torch.arange(8, 15, device=device)[None, :] <= torch.arange(10, 15, device=device)[:, None]
    o64, lse64 = _dense_attention64(q, k, v, mask)
    torch.testing.assert_close(o.double(), o64, **tolerance(torch.float32))
    torch.testing.assert_close(lse.double(), lse64, **tolerance(torch.float32))


def test_attention_with_lse_of_an_empty_or_future_chunk_is_zero_and_minus_inf(device):
    q = _randn(1, 2, 3, 4, device=device)
    o, lse = attention_with_lse(q, q[:, :, :0], _randn(1, 2, 0, 6, device=device))
    assert o.shape == (1, 2, 3, 6) and torch.equal(o, torch.zeros_like(o)) and bool((lse == -math.inf).all())
    o, lse = attention_with_lse(q, q, q, causal=True, q_start=0, k_start=3)  # every key in the future
    assert torch.equal(o, torch.zeros_like(o)) and bool((lse == -math.inf).all())


def test_merging_chunks_equals_attention_over_their_union(device):
    q, k, v = (
        _randn(2, 3, 4, 8, seed=1, device=device),
        _randn(2, 3, 10, 8, seed=2, device=device),
        _randn(2, 3, 10, 5, seed=3, device=device),
    )
    cuts = [(0, 3), (3, 3), (3, 9), (9, 10)]  # an empty chunk among them
    states = [attention_with_lse(q, k[:, :, a:b], v[:, :, a:b]) for a, b in cuts]
    o, lse = merge_attention_states([s[0] for s in states], [s[1] for s in states])
    o64, lse64 = _dense_attention64(q, k, v)
    torch.testing.assert_close(o.double(), o64, **tolerance(torch.float32))
    torch.testing.assert_close(lse.double(), lse64, **tolerance(torch.float32))


def test_merging_only_empty_states_gives_zero_and_minus_inf():
    o, lse = merge_attention_states([torch.zeros(2, 3), torch.zeros(2, 3)], [torch.full((2,), -math.inf)] * 2)
    assert torch.equal(o, torch.zeros(2, 3)) and bool((lse == -math.inf).all())


def test_merge_rejects_mismatched_states():
    with pytest.raises(ValueError, match="as many outputs as lses"):
        merge_attention_states([torch.zeros(2, 3)], [])
    with pytest.raises(ValueError, match=r"its lse \(2,\)"):
        merge_attention_states([torch.zeros(2, 3)], [torch.zeros(3)])


@pytest.mark.parametrize("num_splits", [1, 2, 5, 40])
def test_split_kv_decode_equals_one_pass_sdpa(device, num_splits):
    q, k, v = (
        _randn(2, 4, 1, 16, seed=1, device=device),
        _randn(2, 4, 33, 16, seed=2, device=device),
        _randn(2, 4, 33, 8, seed=3, device=device),
    )
    o, lse = split_kv_decode(q, k, v, num_splits)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v), **tolerance(torch.float32))
    torch.testing.assert_close(lse, torch.logsumexp(q @ k.transpose(-2, -1) / 4.0, dim=-1), **tolerance(torch.float32))
    with pytest.raises(ValueError, match="num_splits"):
        split_kv_decode(q, k, v, 0)


# ---------------------------------------------------------------- 3. ring attention


def test_shards_round_trip_and_hold_the_right_positions():
    x = torch.arange(16)[:, None]
    assert [s.flatten().tolist() for s in shard_sequence(x, 4, "zigzag")] == [
        [0, 1, 14, 15],
        [2, 3, 12, 13],
        [4, 5, 10, 11],
        [6, 7, 8, 9],
    ]
    assert shard_positions(12, 3, 1, "contiguous").tolist() == [4, 5, 6, 7]
    for split in ("contiguous", "zigzag"):
        assert torch.equal(unshard_sequence(shard_sequence(x, 4, split), split), x)
    with pytest.raises(ValueError, match="multiple of 8"):
        shard_sequence(torch.zeros(12, 1), 4, "zigzag")
    with pytest.raises(ValueError, match="split must be"):
        shard_positions(8, 2, 0, "striped")


def test_causal_work_per_rank_closed_forms():
    T, P = 64, 4
    c = T // P
    assert causal_work_per_rank(T, P, "contiguous") == [c * c * r + c * (c + 1) // 2 for r in range(P)]
    assert causal_work_per_rank(T, P, "zigzag") == [T * (T + 1) // (2 * P)] * P
    assert sum(causal_work_per_rank(T, P, "contiguous")) == T * (T + 1) // 2


@pytest.mark.parametrize("split", ["contiguous", "zigzag"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_simulated_ring_equals_full_attention(device, split, causal, world_size):
    q, k, v = (
        _randn(2, 3, 16, 8, seed=1, device=device),
        _randn(2, 3, 16, 8, seed=2, device=device),
        _randn(2, 3, 16, 5, seed=3, device=device),
    )
    o, lse = ring_attention_simulated(q, k, v, world_size, causal=causal, split=split)
    torch.testing.assert_close(o, F.scaled_dot_product_attention(q, k, v, is_causal=causal), **tolerance(torch.float32))
    _, lse64 = _dense_attention64(
        q, k, v, torch.ones(16, 16, dtype=torch.bool, device=device).tril() if causal else None
    )
    torch.testing.assert_close(lse.double(), lse64, **tolerance(torch.float32))


def test_a_wholly_masked_ring_step_leaves_the_state_unchanged():
    q, k, v = _randn(1, 2, 4, 8, seed=1), _randn(1, 2, 4, 8, seed=2), _randn(1, 2, 4, 5, seed=3)
    o0, lse0 = attention_with_lse(q, k, v, causal=True, q_start=0, k_start=0)
    o, lse = ring_attention_step(o0, lse0, q, k, v, rank=0, source=1, world_size=2, causal=True, split="contiguous")
    torch.testing.assert_close(o, o0)
    torch.testing.assert_close(lse, lse0)


@pytest.mark.slow
@pytest.mark.parametrize("split,world_size", [("zigzag", 2), ("contiguous", 4)])
def test_ring_attention_on_real_processes_equals_full_attention_forward_and_backward(split, world_size):
    q, k, v = _randn(2, 3, 16, 8, seed=1), _randn(2, 3, 16, 8, seed=2), _randn(2, 3, 16, 5, seed=3)
    do = _randn(2, 3, 16, 5, seed=4)
    o, lse, grads = run_ring_attention(q, k, v, world_size, causal=True, split=split, do=do)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    expected = F.scaled_dot_product_attention(*leaves, is_causal=True)
    expected.backward(do)
    torch.testing.assert_close(o, expected.detach(), **tolerance(torch.float32))
    torch.testing.assert_close(lse, torch.logsumexp((q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(
        torch.ones(16, 16, dtype=torch.bool).triu(1), -math.inf), dim=-1), **tolerance(torch.float32))  # fmt: skip
    for got, leaf in zip(grads, leaves):
        torch.testing.assert_close(got, leaf.grad, **tolerance(torch.float32))


# ---------------------------------------------------------------- 4. learned attention sinks


def test_softmax_with_sink_is_the_formula(device):
    s, sink = _randn(2, 3, 4, 5, seed=1, device=device), _randn(3, seed=2, device=device)
    e = torch.exp(s.double())
    expected = e / (e.sum(-1, keepdim=True) + torch.exp(sink.double())[None, :, None, None])
    torch.testing.assert_close(softmax_with_sink(s, sink).double(), expected, **tolerance(torch.float32))
    with pytest.raises(ValueError, match=r"sink must be \(H,\)"):
        softmax_with_sink(s, sink[:2])


def test_a_sink_of_minus_infinity_is_plain_attention(device):
    q, k, v = (
        _randn(2, 3, 4, 8, seed=1, device=device),
        _randn(2, 3, 6, 8, seed=2, device=device),
        _randn(2, 3, 6, 5, seed=3, device=device),
    )
    sink = torch.full((3,), -math.inf, device=device)
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(attention_with_sink(q, k, v, sink), expected, **tolerance(torch.float32))
    torch.testing.assert_close(
        flash_attention_with_sink(q, k, v, sink, block_q=3, block_k=4), expected, **tolerance(torch.float32)
    )


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_sink_equals_dense_sink_forward_and_backward(device, causal):
    q, k, v = (
        _randn(2, 3, n, d, seed=s, device=device).requires_grad_() for n, d, s in ((5, 8, 1), (9, 8, 2), (9, 4, 3))
    )
    sink = _randn(3, seed=4, device=device).mul(3).requires_grad_()
    o = flash_attention_with_sink(q, k, v, sink, causal=causal, block_q=2, block_k=4)
    expected = attention_with_sink(q, k, v, sink, causal=causal)
    torch.testing.assert_close(o, expected, **tolerance(torch.float32))
    do = _randn(*o.shape, seed=5, device=device)
    got = torch.autograd.grad(o, (q, k, v, sink), do)
    want = torch.autograd.grad(expected, (q, k, v, sink), do)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tolerance(torch.float32))
    _, lse = flash_attention_with_sink_forward(q.detach(), k.detach(), v.detach(), sink.detach(), causal=causal)
    scores = torch.cat(
        [(q @ k.transpose(-2, -1)).detach() / math.sqrt(8), sink.detach()[None, :, None, None].expand(2, 3, 5, 1)], -1
    )
    if not causal:  # the lse includes the sink's term
        torch.testing.assert_close(lse, torch.logsumexp(scores, -1), **tolerance(torch.float32))


def test_sink_gradient_passes_gradcheck_in_float64():
    q, k, v = (_randn(1, 2, n, 4, seed=s, dtype=torch.float64).requires_grad_() for n, s in ((3, 1), (5, 2), (5, 3)))
    sink = _randn(2, seed=4, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda *t: flash_attention_with_sink(*t, causal=True, block_q=2, block_k=2), (q, k, v, sink)
    )


def test_sink_rejects_a_sink_of_the_wrong_shape():
    q = torch.zeros(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"sink must be \(H,\) = \(2,\)"):
        flash_attention_with_sink_forward(q, q, q, torch.zeros(3))


def test_ring_functions_reject_bad_input():
    q = torch.zeros(1, 2, 4, 3)
    with pytest.raises(ValueError, match="one length"):
        ring_attention_step(
            torch.zeros(1, 2, 4, 3), torch.zeros(1, 2, 4), q, q[:, :, :3], q[:, :, :3], rank=0, source=0, world_size=2
        )
    with pytest.raises(ValueError, match="rank must lie"):
        ring_attention_step(torch.zeros(1, 2, 4, 3), torch.zeros(1, 2, 4), q, q, q, rank=2, source=0, world_size=2)
    with pytest.raises(ValueError, match="share T"):
        ring_attention_simulated(q, q[:, :, :2], q[:, :, :2], 2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        ring_attention(q, q, q)
    with pytest.raises(ValueError, match=r"positions must be \(4,\)"):
        attention_with_lse(q, q, q, causal=True, q_positions=torch.arange(3))
