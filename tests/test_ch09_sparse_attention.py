"""Chapter 9 (sparse attention): the solution against independent oracles — Hugging Face's mask functions, Mistral's
and Longformer's attention (small random configs, no downloads), PyTorch's scaled_dot_product_attention under the
mask, brute-force loops over (query, key) pairs — and a record of every tensor the blocked window attention creates."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from solutions.ch03_self_attention import scaled_dot_product_attention
from solutions.ch09_sparse_attention import (
    NativeSparseAttention,
    OnlineKMeans,
    bigbird_mask,
    compress_blocks,
    dilated_window_mask,
    global_token_mask,
    lightning_indexer_scores,
    longformer_attention,
    random_block_mask,
    routing_attention,
    routing_mask,
    selection_block_scores,
    sliding_window_attention,
    sliding_window_mask,
    topk_block_mask,
)
from tests.conftest import tolerance

transformers = pytest.importorskip("transformers")
from transformers import masking_utils  # noqa: E402


def _pairs(T, device="cpu"):
    i = torch.arange(T, device=device)
    return i[:, None], i[None, :]


def _qkv(lead, T, d_k, d_v, device, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*lead, T, d, generator=g, dtype=dtype).to(device) for d in (d_k, d_k, d_v))


# ------------------------------------------------------------------------------------------------ masks


@pytest.mark.parametrize("T, window", [(1, 0), (7, 0), (9, 2), (12, 5), (4, 10)])
def test_sliding_window_mask_matches_hugging_face(T, window, device):
    """HF's mask functions: Mistral's causal window counts keys (sliding_window = window + 1), the bidirectional
    one is one-sided like ours."""
    i, j = _pairs(T)
    causal = masking_utils.sliding_window_causal_mask_function(window + 1)(0, 0, i, j)
    both = masking_utils.sliding_window_bidirectional_overlay(window)(0, 0, i, j)
    got_causal = sliding_window_mask(T, window, device=device)
    assert got_causal.device.type == device.type and got_causal.dtype == torch.bool
    assert torch.equal(got_causal.cpu(), causal.expand(T, T))
    assert torch.equal(sliding_window_mask(T, window, causal=False, device=device).cpu(), both.expand(T, T))
    assert int(got_causal.sum(-1).max()) == min(window + 1, T)  # window + 1 keys, the query included


@pytest.mark.parametrize("causal", [True, False])
def test_dilated_window_mask_by_hand(causal):
    T, window, dilation = 13, 2, 3
    got = dilated_window_mask(T, window, dilation, causal=causal)
    for i in range(T):
        keys = {i + dilation * n for n in range(-window, window + 1)}
        keys = {j for j in keys if 0 <= j < T and (j <= i or not causal)}
        assert set(got[i].nonzero().flatten().tolist()) == keys
    assert torch.equal(dilated_window_mask(T, window, 1, causal=causal), sliding_window_mask(T, window, causal=causal))


@pytest.mark.parametrize("causal", [True, False])
def test_global_token_mask_by_hand(causal):
    g = torch.Generator().manual_seed(1)
    base = torch.rand(3, 8, 8, generator=g) < 0.3
    is_global = torch.rand(3, 8, generator=g) < 0.3
    got = global_token_mask(base, is_global, causal=causal)
    for b in range(3):
        for i in range(8):
            for j in range(8):
                allowed = bool(base[b, i, j] or is_global[b, i] or is_global[b, j]) and (j <= i or not causal)
                assert bool(got[b, i, j]) == allowed
    assert global_token_mask(base[0], is_global, causal=causal).shape == (3, 8, 8)  # (T, T) with (B, T) broadcasts


def test_random_block_mask_is_seeded_blocked_and_uniform_in_count():
    T, block, n_random = 24, 3, 2
    a = random_block_mask(T, block, n_random, generator=torch.Generator().manual_seed(0))
    b = random_block_mask(T, block, n_random, generator=torch.Generator().manual_seed(0))
    c = random_block_mask(T, block, n_random, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and not torch.equal(a, c)
    blocks = a[::block, ::block]  # one entry per tile
    assert torch.equal(a, blocks.repeat_interleave(block, 0).repeat_interleave(block, 1))
    assert (blocks.sum(-1) == n_random).all() and not blocks.diagonal().any()
    # every other block is drawn about equally often over many draws
    g = torch.Generator().manual_seed(2)
    counts = sum(random_block_mask(T, block, n_random, generator=g)[::block, ::block].int() for _ in range(700))
    off_diagonal = counts[~torch.eye(T // block, dtype=torch.bool)].float()
    expected = 700 * n_random / (T // block - 1)
    assert (off_diagonal - expected).abs().max() < 5 * expected**0.5


def test_bigbird_mask_holds_its_three_parts():
    T, block = 32, 4
    mask = bigbird_mask(T, block, window_blocks=1, n_global_blocks=1, n_random=1, generator=torch.Generator())
    blocks = mask[::block, ::block]
    n = T // block
    bi, bj = _pairs(n)
    assert blocks[(bi - bj).abs() <= 1].all()  # window
    assert blocks[0].all() and blocks[:, 0].all()  # the global block
    extra = blocks & ~((bi - bj).abs() <= 1) & (bi > 0) & (bj > 0)
    assert (extra.sum(-1)[1:] <= 1).all()  # at most the one random block beyond window and global


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, -1)
    with pytest.raises(ValueError, match="multiple of block_len"):
        random_block_mask(10, 3, 1)
    with pytest.raises(ValueError, match="n_random"):
        random_block_mask(12, 3, 4)
    with pytest.raises(ValueError, match=r"\(8, 8\)"):
        global_token_mask(torch.ones(8, 8, dtype=torch.bool), torch.ones(7, dtype=torch.bool))
    q = torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="T_q must equal T_k"):
        sliding_window_attention(q, torch.randn(2, 6, 4), torch.randn(2, 6, 3), 1)
    with pytest.raises(ValueError, match="integer"):
        routing_mask(torch.zeros(2, 3), torch.zeros(2, 3))


# ------------------------------------------------------------------------------------------------ attention under a mask


def _torch_reference(q, k, v, mask):
    """PyTorch's kernel under the mask; rows with no allowed key are zero (as chapter 3's attention returns)."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.where(mask.any(-1, keepdim=True), out, torch.zeros_like(out))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "T, window, causal, block_len",
    [
        (1, 0, True, None),
        (9, 0, False, None),
        (13, 3, True, None),
        (13, 3, False, 5),
        (16, 4, True, 4),
        (17, 20, False, 3),
        (30, 7, True, 1),
        (31, 2, False, 8),
    ],
)
def test_blocked_window_attention_equals_dense_under_the_mask(T, window, causal, block_len, dtype, device):
    q, k, v = _qkv((2, 3), T, 8, 5, device, dtype, seed=T + window)
    got = sliding_window_attention(q, k, v, window, causal=causal, block_len=block_len)
    expected = _torch_reference(q, k, v, sliding_window_mask(T, window, causal=causal, device=device))
    torch.testing.assert_close(got, expected, **tolerance(dtype))


def test_blocked_window_attention_gradients_equal_dense(device):
    q, k, v = (t.requires_grad_() for t in _qkv((2,), 19, 4, 3, device, torch.float64, seed=3))
    grads = []
    for fn in (
        lambda: sliding_window_attention(q, k, v, 3, causal=True, block_len=4),
        lambda: scaled_dot_product_attention(q, k, v, sliding_window_mask(19, 3, device=device))[0],
    ):
        out = fn()
        grads.append(
            torch.autograd.grad((out * torch.arange(out.numel(), device=device).view_as(out)).sum(), (q, k, v))
        )
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, **tolerance(torch.float64))


class _CreatedShapes(TorchDispatchMode):
    """Records the shape of every tensor any operation creates (views included) while active."""

    def __init__(self):
        super().__init__()
        self.numels: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.numels += [t.numel() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        return out


def _largest_created(fn, T, window, causal):
    q, k, v = (t.requires_grad_() for t in _qkv((1, 1), T, 16, 16, "cpu", seed=T))
    with _CreatedShapes() as record:
        fn(q, k, v, window, causal).sum().backward()
    return max(record.numels)


def _dense(q, k, v, window, causal):
    return scaled_dot_product_attention(q, k, v, sliding_window_mask(q.shape[-2], window, causal=causal))[0]


def _blocked(q, k, v, window, causal):
    return sliding_window_attention(q, k, v, window, causal=causal)


@pytest.mark.parametrize("causal", [True, False])
def test_blocked_window_attention_never_creates_a_T_by_T_tensor(causal):
    """Forward and backward: no tensor (scores, mask, weights, gradients) with T·T elements, and the largest grows
    linearly in T. The same record catches the dense form."""
    window = 8
    small, large = (_largest_created(_blocked, T, window, causal) for T in (512, 1024))
    assert large < 1024 * 1024 // 16
    assert large <= 2 * small  # linear in T, not quadratic
    assert small <= 512 * (window + 2 * window) * 2  # about T x (b + 2w) scores, or T x d_k inputs
    assert _largest_created(_dense, 512, window, causal) >= 512 * 512  # the record can fail


# ------------------------------------------------------------------------------------------------ Mistral


def _mistral(sliding_window, seed=0):
    torch.manual_seed(seed)
    cfg = transformers.MistralConfig(
        vocab_size=53,
        hidden_size=48,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,  # grouped-query attention: 3 query heads share each key/value head
        max_position_embeddings=64,
        sliding_window=sliding_window,
        attn_implementation="eager",
    )
    return transformers.MistralForCausalLM(cfg).eval()


def _course_sliding_window(module, query, key, value, attention_mask, scaling, dropout=0.0, sliding_window=None, **_):
    """Hugging Face's attention interface, computed by the course's blocked window attention (no mask used)."""
    assert abs(scaling - query.shape[-1] ** -0.5) < 1e-12 and dropout == 0.0
    groups = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)  # (B, H, T, d_k)
    out = sliding_window_attention(query, key, value, sliding_window - 1, causal=True, block_len=3)
    return out.transpose(1, 2), None  # HF wants (B, T, H, d_v)


def test_mistral_sliding_window_logits_match_hugging_face(device):
    transformers.AttentionInterface.register("course_sliding_window", _course_sliding_window)
    model = _mistral(sliding_window=5).to(device)
    idx = torch.randint(53, (2, 21), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        expected = model(idx).logits
        model.set_attn_implementation("course_sliding_window")
        got = model(idx).logits
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=2e-5)
        model.set_attn_implementation("eager")
        model.config.sliding_window = None  # the window matters: full causal attention gives other logits
        assert not torch.allclose(model(idx).logits[:, 6:], expected[:, 6:], atol=1e-3)


# ------------------------------------------------------------------------------------------------ Longformer


def test_longformer_self_attention_matches_hugging_face(device):
    from transformers.models.longformer.modeling_longformer import LongformerSelfAttention

    torch.manual_seed(0)
    B, T, C, H, window = 2, 24, 40, 4, 3
    config = transformers.LongformerConfig(
        hidden_size=C, num_attention_heads=H, attention_window=[2 * window], attention_probs_dropout_prob=0.0
    )
    layer = LongformerSelfAttention(config, layer_id=0).eval().to(device)
    with torch.no_grad():  # random biases too, so a swapped projection shows
        for p in layer.parameters():
            p.normal_(0.0, 0.3)
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(2)).to(device)
    is_global = torch.zeros(B, T, dtype=torch.bool, device=device)
    is_global[0, [0, 9]] = True
    is_global[1, 3] = True
    real = torch.ones(B, T, dtype=torch.bool, device=device)
    real[1, 19:] = False
    # LongformerModel hands its layers: 0 = local, +max = global, min = padding
    hf_mask = torch.zeros(B, T, device=device)
    hf_mask[~real], hf_mask[is_global] = torch.finfo(torch.float32).min, torch.finfo(torch.float32).max
    with torch.no_grad():
        expected = layer(
            x, attention_mask=hf_mask, is_index_masked=~real, is_index_global_attn=is_global, is_global_attn=True
        )[0]

        def heads(linear):  # (B, T, C) -> (B, H, T, d_k)
            return linear(x).view(B, T, H, C // H).transpose(1, 2)

        got = (
            longformer_attention(
                heads(layer.query),
                heads(layer.key),
                heads(layer.value),
                is_global,
                window,
                q_global=heads(layer.query_global),
                k_global=heads(layer.key_global),
                v_global=heads(layer.value_global),
                attention_mask=real,
            )
            .transpose(1, 2)
            .reshape(B, T, C)
        )
    torch.testing.assert_close(got[real], expected[real], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------ routing


def test_online_kmeans_update_is_the_ema_of_cluster_means():
    km = OnlineKMeans(3, 4, decay=0.9, generator=torch.Generator().manual_seed(0))
    x = torch.randn(2, 11, 4, generator=torch.Generator().manual_seed(1))
    km.update(x[:, :5])  # the first update seeds the centroids from its vectors
    unit = x / x.norm(dim=-1, keepdim=True)
    before = km.centroids.clone()
    clusters = km.update(x)
    for c in range(3):
        members = unit[clusters == c]
        expected = before[c] if len(members) == 0 else 0.9 * before[c] + 0.1 * members.mean(0)
        torch.testing.assert_close(km.centroids[c], expected)
    # assignment: the centroid with the largest cosine similarity
    cos = unit @ (before / before.norm(dim=-1, keepdim=True)).T
    assert torch.equal(clusters, cos.argmax(-1))


def test_online_kmeans_finds_separated_directions():
    g = torch.Generator().manual_seed(3)
    centres = F.normalize(torch.randn(4, 16, generator=g), dim=-1) * 5
    km = OnlineKMeans(4, 16, decay=0.8, generator=g)
    for _ in range(30):
        labels = torch.randint(4, (64,), generator=g)
        km.update(centres[labels] + 0.3 * torch.randn(64, 16, generator=g))
    labels = torch.randint(4, (200,), generator=g)
    found = km.assign(centres[labels] + 0.3 * torch.randn(200, 16, generator=g))
    # one cluster per true direction, up to relabelling: labels and clusters determine each other
    pairs = set(zip(labels.tolist(), found.tolist()))
    assert len(pairs) == 4 and len({a for a, _ in pairs}) == 4 and len({b for _, b in pairs}) == 4


def test_routing_mask_by_hand():
    g = torch.Generator().manual_seed(4)
    qc, kc = torch.randint(3, (2, 3, 5), generator=g), torch.randint(3, (2, 3, 8), generator=g)
    got = routing_mask(qc, kc)
    for idx in torch.cartesian_prod(torch.arange(2), torch.arange(3), torch.arange(5), torch.arange(8)).tolist():
        b, h, i, j = idx
        assert bool(got[b, h, i, j]) == (bool(qc[b, h, i] == kc[b, h, j]) and j <= i + 3)


@pytest.mark.parametrize("causal", [True, False])
def test_routing_attention_equals_dense_under_the_induced_mask(causal, device):
    q, k, v = _qkv((2, 3), 17, 8, 5, device, torch.float64, seed=5)
    km = OnlineKMeans(4, 8, generator=torch.Generator().manual_seed(6)).to(device)
    qc, kc = km.assign(q), km.assign(k)
    got = routing_attention(q, k, v, qc, kc, causal=causal)
    expected = _torch_reference(q, k, v, routing_mask(qc, kc, causal=causal))
    torch.testing.assert_close(got, expected, **tolerance(torch.float64))


# ------------------------------------------------------------------------------------------------ top-n block selection


def _topk_by_loops(scores, n, block_len, causal, n_initial, n_local):
    """Brute force: per query, the visible blocks; the forced ones, then the others by decreasing score."""
    T_q, n_blocks = scores.shape[-2:]
    flat = scores.reshape(-1, T_q, n_blocks).cpu()
    out = torch.zeros(flat.shape, dtype=torch.bool)
    for r in range(flat.shape[0]):
        for t in range(T_q):
            own = t // block_len
            visible = [j for j in range(n_blocks) if not causal or j <= own]
            forced = [j for j in visible if j < n_initial or own - n_local < j <= own]
            others = sorted(set(visible) - set(forced), key=lambda j: float(flat[r, t, j]), reverse=True)
            out[r, t, forced + others[: n - len(forced)]] = True
    return out.reshape(scores.shape)


@pytest.mark.parametrize(
    "shape, n, block_len, causal, n_initial, n_local",
    [
        ((2, 3, 17, 6), 3, 3, True, 1, 2),
        ((2, 17, 6), 3, 3, False, 1, 2),
        ((4, 9, 9), 9, 1, True, 0, 0),
        ((1, 2, 32, 8), 4, 4, True, 2, 1),
        ((12, 3), 2, 5, True, 1, 1),
    ],
)
def test_topk_block_mask_matches_brute_force(shape, n, block_len, causal, n_initial, n_local, device):
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))).to(device)
    got = topk_block_mask(scores, n, block_len, causal=causal, n_initial=n_initial, n_local=n_local)
    assert got.device.type == device.type and got.dtype == torch.bool
    assert torch.equal(got.cpu(), _topk_by_loops(scores, n, block_len, causal, n_initial, n_local))
    T_q, n_blocks = shape[-2:]
    own = torch.arange(T_q) // block_len
    visible = (torch.arange(n_blocks)[None, :] <= own[:, None]) | (not causal)
    assert not (got.cpu() & ~visible).any()  # never a future block
    assert torch.equal(got.sum(-1).cpu(), visible.sum(-1).clamp(max=n).expand(shape[:-1]))


def test_topk_block_mask_rejects_bad_counts():
    with pytest.raises(ValueError, match="n_selected"):
        topk_block_mask(torch.randn(4, 3), 2, 2, n_initial=1, n_local=2)
    with pytest.raises(ValueError, match=r"\(4,\)"):
        topk_block_mask(torch.randn(4), 3, 2)


# ------------------------------------------------------------------------------------------------ NSA


def test_compress_blocks_by_hand():
    x = torch.randn(2, 3, 19, 4, generator=torch.Generator().manual_seed(7))
    phi = lambda blocks: blocks.sum(-2) + blocks[..., 0, :]
    got = compress_blocks(x, 6, 3, phi)
    starts = range(0, 19 - 6 + 1, 3)
    expected = torch.stack([x[..., s : s + 6, :].sum(-2) + x[..., s, :] for s in starts], dim=-2)
    torch.testing.assert_close(got, expected)
    assert compress_blocks(x[..., :5, :], 6, 3, phi).shape == (2, 3, 0, 4)


def test_selection_block_scores_count_shared_positions():
    """Eq. 9-10 by loops: each compressed block adds its weight once per stride it shares with a selection block;
    the heads of a group add up."""
    B, H, G, T, l_cmp, d, l_sel = 2, 4, 2, 23, 4, 2, 8
    n_cmp = (T - l_cmp) // d + 1
    p = torch.rand(B, H, T, n_cmp, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    got = selection_block_scores(p, T, l_cmp, d, l_sel, G)
    n_slc = -(-T // l_sel)
    expected = torch.zeros(B, G, T, n_slc, dtype=torch.float64)
    for i in range(n_cmp):
        for j in range(n_slc):
            shared = len(set(range(i * d, i * d + l_cmp)) & set(range(j * l_sel, (j + 1) * l_sel)))
            for h in range(H):
                expected[:, h // (H // G), :, j] += p[:, h, :, i] * (shared // d)
    torch.testing.assert_close(got, expected)


def _nsa(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = dict(n_kv_heads=2, block_len=4, stride=2, select_len=4, n_selected=3, window=5)
    cfg.update(kw)
    return NativeSparseAttention(24, 4, 6, **cfg)


def _dense_under(q, k, v, mask):
    """PyTorch's kernel under a bool mask (True = may attend), zero rows where nothing is allowed."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.where(mask.any(-1, keepdim=True), out, torch.zeros_like(out))


def test_nsa_branches_equal_dense_attention_on_the_keys_they_select(device):
    """Each branch against F.scaled_dot_product_attention restricted, by a mask built here, to the keys it may
    see; and the output against the gated sum of those oracles (eq. 5)."""
    model = _nsa().to(device).double()
    B, T = 2, 29
    x = torch.randn(B, T, 24, generator=torch.Generator().manual_seed(9), dtype=torch.float64).to(device)
    with torch.no_grad():
        out, br = model(x, return_branches=True)
        H, G, d_k = 4, 2, 6
        q = model.W_q(x).view(B, T, H, d_k).transpose(1, 2)

        def kv(branch):  # (B, H, T, d_k): each group's keys/values repeated for its heads
            k, v = model.W_kv[branch](x).chunk(2, -1)
            return [t.view(B, T, G, d_k).transpose(1, 2).repeat_interleave(H // G, 1) for t in (k, v)]

        pos = torch.arange(T, device=device)
        # compression: block i = positions 2i .. 2i + 3, visible once it has ended
        k, v = kv("cmp")
        starts = range(0, T - 4 + 1, 2)
        k_cmp = torch.stack([model.phi_k(k[..., s : s + 4, :]) for s in starts], -2)
        v_cmp = torch.stack([model.phi_v(v[..., s : s + 4, :]) for s in starts], -2)
        seen = torch.tensor([[s + 3 <= t for s in starts] for t in range(T)], device=device)
        torch.testing.assert_close(br["cmp"], _dense_under(q, k_cmp, v_cmp, seen))
        # selection: raw keys of the selected blocks (block of 4 positions), never after the query
        k, v = kv("slc")
        token_mask = br["block_mask"].repeat_interleave(4, -1)[..., :T].repeat_interleave(H // G, 1)
        token_mask = token_mask & (pos[None, :] <= pos[:, None])
        assert int(br["block_mask"].sum(-1).max()) == 3
        torch.testing.assert_close(br["slc"], _dense_under(q, k, v, token_mask))
        # sliding window: keys t - 5 .. t
        k, v = kv("win")
        band = (pos[:, None] - pos[None, :] >= 0) & (pos[:, None] - pos[None, :] <= 5)
        torch.testing.assert_close(br["win"], _dense_under(q, k, v, band))
        # gated sum, then the output projection
        g = torch.sigmoid(model.W_gate(x)).view(B, T, H, 3).transpose(1, 2)
        mixed = g[..., :1] * br["cmp"] + g[..., 1:2] * br["slc"] + g[..., 2:] * br["win"]
        torch.testing.assert_close(out, model.W_o(mixed.transpose(1, 2).reshape(B, T, H * d_k)))


def test_nsa_is_causal(device):
    """The output at t does not change when any token after t changes, and no gradient flows back from t to them."""
    model = _nsa(seed=1).to(device).double()
    x = torch.randn(1, 33, 24, generator=torch.Generator().manual_seed(10), dtype=torch.float64).to(device)
    t = 17
    y = x.clone()
    y[:, t + 1 :] = torch.randn(1, 33 - t - 1, 24, dtype=torch.float64).to(device) * 3
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1])
    assert not torch.allclose(a[:, t + 1 :], b[:, t + 1 :])
    x.requires_grad_()
    model(x)[:, t].sum().backward()
    assert x.grad[:, t + 1 :].abs().max() == 0 and x.grad[:, : t + 1].abs().max() > 0


# ------------------------------------------------------------------------------------------------ DeepSeek-V3.2


def test_lightning_indexer_top_k_matches_hugging_face(device):
    """HF's DeepseekV32Indexer (random weights) against the course's scores and top-k selection (topk_block_mask
    with blocks of one key, nothing forced). HF scales q by d_I^-1/2 and the head weights by H_I^-1/2; ReLU commutes
    with a positive scale, so the course gets the same scaled inputs. Ties (all heads' ReLU zero) may be broken
    differently, so the selected *scores* are compared, and the sets of keys wherever the k-th and (k+1)-th differ."""
    from transformers.models.deepseek_v32 import modeling_deepseek_v32 as ds

    torch.manual_seed(0)
    config = transformers.DeepseekV32Config(
        hidden_size=32, q_lora_rank=16, qk_rope_head_dim=4, index_head_dim=8, index_n_heads=3, index_topk=5,
        num_attention_heads=2, num_key_value_heads=2, qk_nope_head_dim=4, v_head_dim=4, kv_lora_rank=8,
    )  # fmt: skip
    indexer = ds.DeepseekV32Indexer(config, layer_idx=0).to(device).eval()
    rope = ds.DeepseekV32RotaryEmbedding(config).to(device)
    B, T = 2, 19
    g = torch.Generator().manual_seed(11)
    x, q_resid = torch.randn(B, T, 32, generator=g).to(device), torch.randn(B, T, 16, generator=g).to(device)
    position_ids = torch.arange(T, device=device)[None].expand(B, T)
    cos, sin = rope(x, position_ids)
    causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()[None].expand(B, T, T)
    with torch.no_grad():
        hf_idx = indexer(x, q_resid, (cos, sin), causal, position_ids).long()  # (B, T, 5)
        q = indexer.wq_b(q_resid).view(B, T, 3, 8)
        k = indexer.k_norm(indexer.wk(x))[:, :, None]  # (B, T, 1, 8)
        q_rot, k_rot = ds.apply_rotary_pos_emb(q[..., :4], k[..., :4], cos, sin, unsqueeze_dim=2)
        q, k = torch.cat([q_rot, q[..., 4:]], -1) * 8**-0.5, torch.cat([k_rot, k[..., 4:]], -1)[:, :, 0]
        w = indexer.weights_proj(x) * 3**-0.5
        scores = lightning_indexer_scores(q, k, w)  # (B, T, T)
    chosen = topk_block_mask(scores, 5, 1, n_initial=0, n_local=0)  # (B, T, T), never a future key
    ref = scores.masked_fill(~causal, -torch.inf)
    hf_mask = torch.zeros_like(chosen).scatter(-1, hf_idx, True) & causal  # HF pads short rows with masked keys
    torch.testing.assert_close(
        ref.masked_fill(~chosen, -torch.inf).sort(-1).values, ref.masked_fill(~hf_mask, -torch.inf).sort(-1).values
    )
    top = ref.sort(-1, descending=True).values
    clear = (top[..., 4] > top[..., 5]) | ~torch.isfinite(top[..., 5])  # no tie at the cut
    assert clear.float().mean() > 0.5 and torch.equal(chosen[clear], hf_mask[clear])
    assert torch.equal(chosen.sum(-1), causal.sum(-1).clamp(max=5))


# ------------------------------------------------------------------------------------------------ BigBird


def test_bigbird_block_sparse_attention_matches_hugging_face(device):
    """HF's BigBirdBlockSparseAttention (ITC: first and last block global, a window of 3 blocks, r random blocks per
    query block and head) against chapter 3's attention under the mask built from the course's window and global
    masks plus HF's random blocks.

    Randomness: HF draws the random blocks with NumPy's *global* generator, seeded with the layer's `seed` (its
    layer index) at every forward pass, and only in training mode (in eval mode the adjacency list is all zeros:
    every random slot points at block 0, see the next test). The test runs the layer in train() (block-sparse attention has no dropout)
    and re-draws the same adjacency list by seeding NumPy with the same seed and calling HF's own plan functions."""
    np = pytest.importorskip("numpy")
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention, BigBirdModel

    B, C, H, r, seed = 2, 32, 2, 2, 3
    block = 64  # the library's default block length (BigBirdConfig default), so the config need not name it
    T = 12 * block  # 12 blocks: enough for 2 random blocks besides window and global ones
    config = transformers.BigBirdConfig(
        hidden_size=C, num_attention_heads=H, num_random_blocks=r, max_position_embeddings=1024,
        attention_type="block_sparse", use_bias=True,
    )  # fmt: skip
    torch.manual_seed(0)
    layer = BigBirdBlockSparseAttention(config, seed=seed).to(device).train()
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(12)).to(device)
    blocked, band, from_mask, to_mask = BigBirdModel.create_masks_for_block_sparse_attn(
        torch.ones(B, T, device=device), block
    )
    with torch.no_grad():
        expected = layer(x, band_mask=band, from_mask=from_mask, to_mask=to_mask, from_blocked_mask=blocked,
                         to_blocked_mask=blocked)[0]  # fmt: skip
        np.random.seed(seed)
        plan_len, plan_r = layer._get_rand_attn_plan(T, block, r)
        rand = layer._bigbird_block_rand_mask_with_head(
            from_seq_length=T, to_seq_length=T, from_block_size=block, to_block_size=block, num_heads=H,
            plan_from_length=plan_len, plan_num_rand_blocks=plan_r,
        )  # fmt: skip  # per head: (n_blocks - 2, r) random key blocks of query blocks 1 .. n_blocks - 2
        n = T // block
        random = torch.zeros(H, n, n, dtype=torch.bool)
        for h in range(H):
            random[h, 1:-1].scatter_(-1, torch.as_tensor(np.asarray(rand[h]), dtype=torch.long), True)
        is_global = torch.zeros(n, dtype=torch.bool)
        is_global[[0, -1]] = True
        blocks = global_token_mask(sliding_window_mask(n, 1, causal=False) | random, is_global)  # (H, n, n)
        mask = blocks.repeat_interleave(block, -1).repeat_interleave(block, -2).to(device)  # (H, T, T)

        def heads(linear):  # (B, T, C) -> (B, H, T, d_k)
            return linear(x).view(B, T, H, C // H).transpose(1, 2)

        q, k, v = heads(layer.query), heads(layer.key), heads(layer.value)
        got, _ = scaled_dot_product_attention(q, k, v, mask)
        plain = global_token_mask(sliding_window_mask(n, 1, causal=False), is_global)  # without the random blocks
        without, _ = scaled_dot_product_attention(
            q, k, v, plain.repeat_interleave(block, -1).repeat_interleave(block, -2).to(device)
        )
    torch.testing.assert_close(got.transpose(1, 2).reshape(B, T, C), expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(without.transpose(1, 2).reshape(B, T, C), expected, atol=1e-3)  # the draw matters


def test_bigbird_eval_mode_points_every_random_slot_at_block_0(device):
    """In eval mode HF's random block indices are zeros (transformers PR #23056): each of the r random slots of a
    non-global query block gathers block 0, which is already global, so block 0's keys enter that block's softmax
    1 + r times. The page says so; here the layer's output equals chapter 3's attention over the keys with block 0
    appended r more times (visible to the non-global query blocks only), and differs from plain window + global."""
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention, BigBirdModel

    B, C, H, r, seed, block = 2, 32, 2, 2, 3, 64
    T = 12 * block
    config = transformers.BigBirdConfig(
        hidden_size=C, num_attention_heads=H, num_random_blocks=r, max_position_embeddings=1024,
        attention_type="block_sparse", use_bias=True,
    )  # fmt: skip
    torch.manual_seed(0)
    layer = BigBirdBlockSparseAttention(config, seed=seed).to(device).eval()
    plan_len, plan_r = layer._get_rand_attn_plan(T, block, r)
    rand = layer._bigbird_block_rand_mask_with_head(
        from_seq_length=T, to_seq_length=T, from_block_size=block, to_block_size=block, num_heads=H,
        plan_from_length=plan_len, plan_num_rand_blocks=plan_r,
    )  # fmt: skip
    assert all(a.shape == (T // block - 2, r) and not a.any() for a in rand)  # every random slot: block 0
    x = torch.randn(B, T, C, generator=torch.Generator().manual_seed(12)).to(device)
    blocked, band, from_mask, to_mask = BigBirdModel.create_masks_for_block_sparse_attn(
        torch.ones(B, T, device=device), block
    )
    n = T // block
    is_global = torch.zeros(n, dtype=torch.bool)
    is_global[[0, -1]] = True
    plain = global_token_mask(sliding_window_mask(n, 1, causal=False), is_global)
    plain = plain.repeat_interleave(block, -1).repeat_interleave(block, -2).to(device)  # (T, T)
    extra = torch.zeros(T, r * block, dtype=torch.bool, device=device)
    extra[block:-block] = True  # the r copies of block 0, seen by query blocks 1 .. n - 2
    with torch.no_grad():
        expected = layer(x, band_mask=band, from_mask=from_mask, to_mask=to_mask, from_blocked_mask=blocked,
                         to_blocked_mask=blocked)[0]  # fmt: skip

        def heads(linear):  # (B, T, C) -> (B, H, T, d_k)
            return linear(x).view(B, T, H, C // H).transpose(1, 2)

        q, k, v = heads(layer.query), heads(layer.key), heads(layer.value)
        k_dup = torch.cat([k, k[:, :, :block].repeat(1, 1, r, 1)], dim=-2)  # (B, H, T + r * block, d_k)
        v_dup = torch.cat([v, v[:, :, :block].repeat(1, 1, r, 1)], dim=-2)
        got, _ = scaled_dot_product_attention(q, k_dup, v_dup, torch.cat([plain, extra], dim=-1))
        without, _ = scaled_dot_product_attention(q, k, v, plain)
    torch.testing.assert_close(got.transpose(1, 2).reshape(B, T, C), expected, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(without.transpose(1, 2).reshape(B, T, C), expected, atol=1e-3)
