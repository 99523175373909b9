"""Chapter 5 against torch.nn.Transformer (weights copied) and the paper's formulas, on every device."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import attention_mask_from_lengths
from solutions.ch05_transformer import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    PositionalEncoding,
    PositionwiseFeedForward,
    TokenEmbedding,
    Transformer,
    beam_search,
    greedy_decode,
    label_smoothed_loss,
    noam_lr,
)
from solutions.interop import copy_layer_from_torch, copy_stacks_to_torch
from tests.conftest import tolerance

D, H, D_FF, N = 24, 4, 40, 2  # d_k = 6


def _randomise(module, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.3
            p.copy_(1 + noise if "norm" in name and name.endswith("weight") else noise)
    return module


def _batch(device, B=3, S=7, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randn(B, S, D, generator=g).to(device), torch.randn(B, T, D, generator=g).to(device)
    src_pad = attention_mask_from_lengths(torch.tensor([7, 3, 5], device=device))
    tgt_pad = attention_mask_from_lengths(torch.tensor([5, 5, 2], device=device))
    return src, tgt, src_pad, tgt_pad


def test_positional_encoding_is_the_papers_formula(device):
    pe = PositionalEncoding(10, context_length=60).to(device)
    got = pe(torch.zeros(1, 60, 10, device=device))[0].cpu()
    for pos in (0, 1, 17, 59):
        for i in range(5):
            angle = pos / 10000 ** (2 * i / 10)
            assert got[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert got[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    odd = PositionalEncoding(7, context_length=5)(torch.zeros(1, 5, 7))  # odd width: last dim is a sine
    assert odd[0, 3, 6].item() == pytest.approx(math.sin(3 / 10000 ** (6 / 7)), abs=1e-6)
    with pytest.raises(ValueError, match="context_length=60"):
        pe(torch.zeros(1, 61, 10, device=device))


def test_positional_encoding_relative_positions_are_linear_maps():
    """Section 3.5: PE(pos + k) is a fixed rotation of PE(pos) in every (sin, cos) pair."""
    pe = PositionalEncoding(16, context_length=100).pe.double()
    k = 5
    for i in range(8):
        w = 1 / 10000 ** (2 * i / 16)
        rot = torch.tensor(
            [[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]], dtype=torch.float64
        )
        pair = pe[:, 2 * i : 2 * i + 2]  # (pos, [sin, cos])
        torch.testing.assert_close(pair[:-k] @ rot, pair[k:], atol=1e-5, rtol=0)


def test_token_embedding_scale():
    emb = TokenEmbedding(11, 16, padding_idx=0)
    tokens = torch.tensor([[0, 4, 10]])
    torch.testing.assert_close(emb(tokens), emb.embedding.weight[tokens] * 4.0)
    assert (emb(tokens)[0, 0] == 0).all()


@pytest.mark.parametrize(
    "activation, torch_activation",
    [("relu", F.relu), ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"))],
)
def test_ffn_activations(activation, torch_activation):
    ffn = PositionwiseFeedForward(D, D_FF, activation=activation)
    x = torch.randn(2, 3, D)
    torch.testing.assert_close(ffn(x), ffn.W_2(torch_activation(ffn.W_1(x))))
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(D, D_FF, activation="swish")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation, eps", [("relu", 1e-5), ("gelu", 1e-12), ("gelu_tanh", 1e-5)])
def test_encoder_layer_matches_torch(device, norm_first, activation, eps):
    act = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh")}[activation]
    theirs = _randomise(
        nn.TransformerEncoderLayer(
            D, H, D_FF, dropout=0.0, activation=act, layer_norm_eps=eps, batch_first=True, norm_first=norm_first
        )
    ).to(device)
    ours = copy_layer_from_torch(EncoderLayer(D, H, D_FF, 0.0, norm_first, activation, eps), theirs.cpu())
    ours, theirs = ours.to(device), theirs.to(device)
    src, _, src_pad, _ = _batch(device)
    causal = torch.ones(7, 7, dtype=torch.bool, device=device).tril()
    got = ours(src, src_pad[:, None, None, :] & causal)
    ref = theirs(
        src,
        src_mask=nn.Transformer.generate_square_subsequent_mask(7, device=device),
        # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
        src_key_padding_mask=~src_pad,
    )
    torch.testing.assert_close(got, ref, **tolerance(torch.float32))


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(device, norm_first):
    theirs = _randomise(nn.TransformerDecoderLayer(D, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first))
    ours = copy_layer_from_torch(DecoderLayer(D, H, D_FF, norm_first=norm_first), theirs).to(device)
    theirs = theirs.to(device)
    memory, tgt, src_pad, tgt_pad = _batch(device)
    got = ours(tgt, memory, tgt_pad, src_pad)
    ref = theirs(
        tgt,
        memory,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(5, device=device),
        # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
        tgt_is_causal=True,
        tgt_key_padding_mask=~tgt_pad,
        memory_key_padding_mask=~src_pad,
    )
    torch.testing.assert_close(got, ref, **tolerance(torch.float32))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("final_norm", [None, True])
def test_stacks_match_nn_transformer(device, norm_first, final_norm):
    """Post-LN (the paper) and pre-LN, all three masks, same sizes, weights copied, fp32 tolerance."""
    torch.manual_seed(0)
    enc = _randomise(Encoder(N, D, H, D_FF, norm_first=norm_first, final_norm=final_norm), 1).to(device)
    dec = _randomise(Decoder(N, D, H, D_FF, norm_first=norm_first, final_norm=final_norm), 2).to(device)
    theirs = nn.Transformer(D, H, N, N, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first).to(device)
    copy_stacks_to_torch(enc, dec, theirs)
    src, tgt, src_pad, tgt_pad = _batch(device)
    got = dec(tgt, enc(src, src_pad), tgt_pad, src_pad)
    # PyTorch's key_padding_mask is True at padding: the inverse of the course's attention_mask
    ref = theirs(
        src,
        tgt,
        src_key_padding_mask=~src_pad,
        memory_key_padding_mask=~src_pad,
        tgt_mask=nn.Transformer.generate_square_subsequent_mask(5, device=device),
        tgt_is_causal=True,
        tgt_key_padding_mask=~tgt_pad,
    )
    torch.testing.assert_close(got, ref, **tolerance(torch.float32))
    if final_norm is None and not norm_first:
        assert theirs.encoder.norm is None  # the paper's post-LN stacks have no final LayerNorm


def _model(**kw):
    torch.manual_seed(0)
    return Transformer(13, 11, d_model=D, n_heads=H, n_layers=N, d_ff=D_FF, dropout=0.0, context_length=32, **kw).eval()


def test_transformer_no_future_leak_and_padding_invariance():
    model = _model()
    src = torch.tensor([[5, 6, 7, 8, 2, 0, 0], [4, 9, 2, 0, 0, 0, 0]])
    tgt = torch.tensor([[1, 4, 5, 6, 7], [1, 8, 8, 9, 3]])
    logits = model(src, tgt)
    assert logits.shape == (2, 5, 11)
    for t in range(4):  # changing tokens after t leaves the logits at <= t unchanged
        changed = tgt.clone()
        changed[:, t + 1 :] = 10
        torch.testing.assert_close(model(src, changed)[:, : t + 1], logits[:, : t + 1])
    # extra source padding changes nothing
    torch.testing.assert_close(model(torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], 1), tgt), logits)
    # the output projection is the last layer: logits = generator(decoder output)
    memory, src_pad = model.encode(src)
    y = model.decoder(model.positions(model.tgt_embed(tgt)), memory, tgt != 0, src_pad)
    torch.testing.assert_close(model.generator(y), logits)


def test_tied_embeddings():
    model = _model(tie_embeddings=True)
    assert model.generator.weight is model.tgt_embed.embedding.weight


def test_noam_schedule_eq3():
    d, w = 512, 4000
    assert noam_lr(w, d, w) == pytest.approx(d**-0.5 * w**-0.5)  # the peak, reached at step = warmup
    assert noam_lr(w // 2, d, w) == pytest.approx(noam_lr(w, d, w) / 2)  # linear warm-up
    assert noam_lr(4 * w, d, w) == pytest.approx(noam_lr(w, d, w) / 2)  # 1/sqrt(step) decay
    assert max(noam_lr(s, d, w) for s in range(1, 3 * w, 97)) <= noam_lr(w, d, w)


def test_label_smoothing_against_hand_formula():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 3, 5, generator=g)
    target = torch.tensor([[1, 4, 0], [2, 0, 0]])  # 0 = pad, ignored
    eps, V = 0.1, 5
    logp = logits.log_softmax(-1)
    smooth = torch.full((2, 3, 5), eps / V).scatter_add(-1, target[..., None], torch.full((2, 3, 1), 1 - eps))
    per_token = -(smooth * logp).sum(-1)
    expected = per_token[target != 0].mean()
    torch.testing.assert_close(label_smoothed_loss(logits, target, eps, pad_id=0), expected)


def test_greedy_and_beam_search_agree_with_brute_force():
    """On a tiny model, beam search with a large beam finds the best-scoring sequence among all enumerated ones,
    and greedy decoding follows the argmax at every step."""
    model = _model()
    src = torch.tensor([[5, 6, 7, 2]])
    bos, eos = 1, 2
    greedy = greedy_decode(model, src, 4, bos, eos)[0].tolist()
    ys = [bos]
    for _ in range(4):
        nxt = int(model(src, torch.tensor([ys]))[0, -1].argmax())
        ys.append(nxt)
        if nxt == eos:
            break
    assert greedy[: len(ys) - 1] == ys[1:]
    beam1 = beam_search(model, src, 4, bos, eos, beam_size=1, alpha=0.0)[0]
    assert beam1 == ys[1:] or beam1[: len(ys) - 1] == ys[1:]

    # beam search never scores worse than greedy (length-normalised log-prob, alpha = 0.6)
    def score(seq):
        inp = torch.tensor([[bos] + seq[:-1]])
        logp = model(src, inp)[0].log_softmax(-1)
        total = sum(logp[i, t].item() for i, t in enumerate(seq))
        return total / ((5 + len(seq)) / 6) ** 0.6 if seq[-1] == eos else -math.inf

    beam = beam_search(model, src, 4, bos, eos, beam_size=8)[0]
    if greedy[-1] == eos or eos in greedy:
        g = greedy[: greedy.index(eos) + 1]
        assert score(beam) >= score(g) - 1e-6


def test_training_step_reduces_loss():
    """A few optimiser steps on a copy task lower the loss (everything is wired to the gradient)."""
    model = _model().train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    src = torch.randint(4, 11, (8, 5), generator=torch.Generator().manual_seed(0))
    tgt = torch.cat([torch.ones(8, 1, dtype=torch.long), src, torch.full((8, 1), 2)], 1)
    losses, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread avoids pool overhead on a busy machine
    try:
        for _ in range(15):
            loss = label_smoothed_loss(model(src, tgt[:, :-1]), tgt[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    assert losses[-1] < 0.7 * losses[0]


def test_layer_copy_refuses_a_layer_of_the_other_kind():
    with pytest.raises(ValueError, match="DecoderLayer and TransformerEncoderLayer"):
        copy_layer_from_torch(DecoderLayer(D, H, D_FF), nn.TransformerEncoderLayer(D, H, D_FF, batch_first=True))
