"""Tests for chapter 2 (solutions/ch02_bahdanau_attention.py)."""

import math

import pytest
import torch

from solutions.ch01_seq2seq import greedy_decode, translate
from solutions.ch02_bahdanau_attention import AttentionSeq2Seq, additive_score, context_vector, masked_softmax
from solutions.training import train_seq2seq
from solutions.translation_data import BOS_ID, EOS_ID, PAD_ID, TranslationData, infinite_batches
from tests.conftest import TINY_PAIRS


def test_additive_score_hand_computed():
    # B=1, N=2, A=2, S=3, written out with plain Python floats
    s_prev = torch.tensor([[1.0, -2.0]])
    W = torch.tensor([[0.5, 0.0], [1.0, 1.0]])
    v = torch.tensor([2.0, -1.0])
    U_h = torch.tensor([[[0.0, 0.0], [1.0, -1.0], [-0.5, 3.0]]])
    Ws = [0.5 * 1.0 + 0.0 * -2.0, 1.0 * 1.0 + 1.0 * -2.0]  # [0.5, -1.0]
    expected = [2.0 * math.tanh(Ws[0] + u[0]) - 1.0 * math.tanh(Ws[1] + u[1]) for u in U_h[0].tolist()]
    got = additive_score(s_prev, W, v, U_h)
    assert got.shape == (1, 3)
    assert got[0].tolist() == pytest.approx(expected, rel=1e-6)


def test_additive_score_batches_independently(device):
    torch.manual_seed(0)
    s_prev, W, v, U_h = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5), torch.randn(3, 6, 5)
    full = additive_score(s_prev.to(device), W.to(device), v.to(device), U_h.to(device)).cpu()
    for b in range(3):
        for j in range(6):
            ref = sum(v[a] * torch.tanh(sum(W[a, k] * s_prev[b, k] for k in range(4)) + U_h[b, j, a]) for a in range(5))
            assert full[b, j].item() == pytest.approx(ref.item(), rel=1e-5, abs=1e-6)


def test_additive_score_rejects_bad_shapes():
    with pytest.raises(ValueError, match="s_prev"):
        additive_score(torch.randn(2, 4), torch.randn(5, 3), torch.randn(5), torch.randn(2, 6, 5))
    with pytest.raises(ValueError):
        additive_score(torch.randn(4), torch.randn(5, 4), torch.randn(5), torch.randn(2, 6, 5))


def test_masked_softmax_zero_on_padding_and_no_nan(device):
    scores = torch.tensor(
        [[1.0, 2.0, 3.0, 50.0], [0.5, -1.0, 9.0, 9.0], [1.0, 2.0, 3.0, 4.0]], device=device, requires_grad=True
    )
    mask = torch.tensor(
        [[True, True, True, False], [True, False, False, False], [False, False, False, False]], device=device
    )
    w = masked_softmax(scores, mask)
    assert not torch.isnan(w).any()
    assert torch.all(w[~mask] == 0)
    e = [math.exp(1.0), math.exp(2.0), math.exp(3.0)]
    assert w[0, :3].tolist() == pytest.approx([x / sum(e) for x in e], rel=1e-6)
    assert w[1, 0].item() == pytest.approx(1.0)
    assert w[2].tolist() == [0.0, 0.0, 0.0, 0.0]  # fully masked row: zeros, not NaN
    (w * torch.arange(4.0, device=device)).sum().backward()
    assert not torch.isnan(scores.grad).any()
    assert torch.all(scores.grad[~mask] == 0)


def test_masked_softmax_large_scores_stable():
    scores = torch.tensor([[1e4, 1e4 - 1.0, -1e4]])
    w = masked_softmax(scores, torch.tensor([[True, True, True]]))
    assert w[0].tolist() == pytest.approx([1 / (1 + math.exp(-1)), math.exp(-1) / (1 + math.exp(-1)), 0.0], rel=1e-5)
    with pytest.raises(ValueError):
        masked_softmax(scores, torch.tensor([[1, 1, 1]]))


def test_context_vector_is_weighted_sum(device):
    alpha = torch.tensor([[0.25, 0.75, 0.0], [1.0, 0.0, 0.0]], device=device)
    h = torch.tensor([[[1.0, 0.0], [0.0, 4.0], [100.0, 100.0]], [[2.0, 3.0], [9.0, 9.0], [9.0, 9.0]]], device=device)
    c = context_vector(alpha, h).cpu()
    assert c.tolist() == [[0.25, 3.0], [2.0, 3.0]]
    with pytest.raises(ValueError):
        context_vector(alpha, h[:, :2])


def _model(seed=0):
    torch.manual_seed(seed)
    return AttentionSeq2Seq(20, 15, emb_dim=8, enc_hidden_size=8, dec_hidden_size=12, attn_dim=6).eval()


def test_alignment_uses_previous_decoder_state():
    # step 1's attention depends only on s_0 (the encoder), not on the token being fed
    model = _model()
    src = torch.tensor([[5, 6, 7, EOS_ID]])
    state = model.encode(src, torch.tensor([4]))
    _, new_a, alpha_a = model.decode_step(torch.tensor([BOS_ID]), state)
    _, new_b, alpha_b = model.decode_step(torch.tensor([9]), state)
    torch.testing.assert_close(alpha_a, alpha_b)
    assert not torch.allclose(new_a["s"], new_b["s"])  # ... while the new state s_1 does depend on it


def test_attention_model_padding_invariance_and_weights():
    model = _model()
    src = torch.tensor([[5, 6, 7, 8, EOS_ID], [9, EOS_ID, 11, 12, 13]])  # row 1 padded with garbage ids
    lens = torch.tensor([5, 2])
    dec_in = torch.tensor([[BOS_ID, 4, 5], [BOS_ID, 6, 7]])
    logits, attn = model(src, lens, dec_in, return_attention=True)
    assert logits.shape == (2, 3, 15) and attn.shape == (2, 3, 5)
    assert torch.all(attn[1, :, 2:] == 0)
    torch.testing.assert_close(attn.sum(-1), torch.ones(2, 3))
    alone = model(src[1:, :2], lens[1:], dec_in[1:])
    torch.testing.assert_close(logits[1:], alone, atol=1e-5, rtol=1e-5)
    out, g_attn = greedy_decode(model, src, lens, max_new_tokens=4)
    assert g_attn.shape == (2, out.shape[1], 5)


def test_attention_model_overfits_a_handful_of_pairs():
    torch.manual_seed(0)
    data = TranslationData({"train": TINY_PAIRS})
    model = AttentionSeq2Seq(
        len(data.src_vocab), len(data.tgt_vocab), emb_dim=16, enc_hidden_size=32, dec_hidden_size=48, attn_dim=32
    )
    losses = train_seq2seq(
        model, infinite_batches(data.encoded["train"], 6, seed=0), steps=100, lr=1e-2, device="cpu", progress=False
    )
    assert losses[-1] < 0.05 < losses[0]
    hyps, attns = translate(model, data.encoded["train"], data.tgt_vocab, max_new_tokens=10, return_attention=True)
    assert hyps == [t for _, t in data.tokens["train"]]
    for (s, _), a, h in zip(data.tokens["train"], attns, hyps):
        assert a.shape == (len(h) + 1, len(s) + 1)  # generated tokens incl. <eos> x source tokens incl. <eos>


def test_attention_greedy_on_device_matches_cpu(device):
    model = _model()
    src, lens = torch.tensor([[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]), torch.tensor([4, 2])
    cpu_out, cpu_attn = greedy_decode(model, src, lens, max_new_tokens=5)
    out, attn = greedy_decode(model.to(device), src.to(device), lens.to(device), max_new_tokens=5)
    assert out.device.type == device.type and torch.equal(out.cpu(), cpu_out)
    torch.testing.assert_close(attn.cpu(), cpu_attn, atol=1e-4, rtol=1e-4)
