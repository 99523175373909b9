"""Tests for chapter 1 (solutions/ch01_seq2seq.py)."""

import math

import pytest
import torch
import torch.nn as nn

from solutions.ch01_seq2seq import (
    Encoder,
    LSTMCell,
    Seq2Seq,
    evaluate_by_length,
    gradient_norm_by_distance,
    greedy_decode,
    reverse_padded,
    sequence_loss,
    shift_for_teacher_forcing,
    translate,
)
from solutions.training import load_checkpoint, save_checkpoint, train_seq2seq
from solutions.translation_data import BOS_ID, EOS_ID, PAD_ID, TranslationData, infinite_batches, pad_sequences
from tests.conftest import TINY_PAIRS


def _random_batch(lengths, vocab=20, seed=0, pad_garbage=False):
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(4, vocab, (n,), generator=g).tolist() for n in lengths]
    x, lens = pad_sequences(seqs)
    if pad_garbage:  # padding positions hold real-looking ids: packing must still ignore them
        pad = x == PAD_ID
        x[pad] = torch.randint(4, vocab, (int(pad.sum()),), generator=g)
    return seqs, x, lens


@pytest.mark.parametrize("cell,bidirectional", [("lstm", False), ("gru", True)])
def test_encoder_packing_matches_unpadded_runs(cell, bidirectional, device):
    torch.manual_seed(0)
    enc = Encoder(20, 8, 16, num_layers=2, cell=cell, bidirectional=bidirectional).to(device).eval()
    seqs, x, lens = _random_batch([5, 2, 7, 1], pad_garbage=True)
    outputs, state = enc(x.to(device), lens.to(device))
    assert outputs.device.type == device.type
    D = 32 if bidirectional else 16
    assert outputs.shape == (4, 7, D)
    for b, s in enumerate(seqs):
        # reference: the same RNN on this sequence alone, no padding, no packing
        ref_out, ref_state = enc.rnn(enc.embedding(torch.tensor([s], device=device)))
        n = len(s)
        torch.testing.assert_close(outputs[b, :n], ref_out[0], atol=1e-5, rtol=1e-5)
        assert torch.all(outputs[b, n:] == 0)
        if cell == "lstm":
            torch.testing.assert_close(state[0][:, b], ref_state[0][:, 0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(state[1][:, b], ref_state[1][:, 0], atol=1e-5, rtol=1e-5)
        else:
            torch.testing.assert_close(state[:, b], ref_state[:, 0], atol=1e-5, rtol=1e-5)


def test_encoder_rejects_bad_shapes():
    enc = Encoder(20, 8, 16)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        enc(torch.zeros(3, dtype=torch.long), torch.tensor([1, 1, 1]))
    with pytest.raises(ValueError, match="src_lens"):
        enc(torch.ones(2, 4, dtype=torch.long), torch.tensor([4, 4, 4]))
    with pytest.raises(ValueError, match="src_lens"):
        enc(torch.ones(2, 4, dtype=torch.long), torch.tensor([5, 1]))
    with pytest.raises(ValueError):
        enc(torch.ones(2, 4), torch.tensor([4, 4]))  # float ids


def test_reverse_padded_keeps_eos_and_padding(device):
    x = torch.tensor(
        [[5, 6, 7, EOS_ID, PAD_ID], [8, EOS_ID, PAD_ID, PAD_ID, PAD_ID], [4, 5, 6, 7, EOS_ID]], device=device
    )
    lens = torch.tensor([4, 2, 5], device=device)
    expected = torch.tensor([[7, 6, 5, EOS_ID, PAD_ID], [8, EOS_ID, PAD_ID, PAD_ID, PAD_ID], [7, 6, 5, 4, EOS_ID]])
    assert torch.equal(reverse_padded(x, lens).cpu(), expected)


def test_teacher_forcing_shift():
    tgt = torch.tensor([[BOS_ID, 10, 11, EOS_ID, PAD_ID], [BOS_ID, 12, 13, 14, EOS_ID]])
    dec_in, dec_out = shift_for_teacher_forcing(tgt)
    assert dec_in.tolist() == [[BOS_ID, 10, 11, EOS_ID], [BOS_ID, 12, 13, 14]]
    assert dec_out.tolist() == [[10, 11, EOS_ID, PAD_ID], [12, 13, 14, EOS_ID]]
    # input t is output t-1: the decoder always reads the reference previous token
    assert torch.equal(dec_in[:, 1:], dec_out[:, :-1])
    with pytest.raises(ValueError):
        shift_for_teacher_forcing(torch.tensor([[BOS_ID], [BOS_ID]]))
    with pytest.raises(ValueError):
        shift_for_teacher_forcing(torch.tensor([BOS_ID, 3, EOS_ID]))


def test_sequence_loss_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, requires_grad=True)
    targets = torch.tensor([[4, 5, EOS_ID, PAD_ID], [3, PAD_ID, PAD_ID, PAD_ID]])
    loss = sequence_loss(logits, targets)
    # independent reference: average of -log p(target) over the 4 real positions
    real = [(0, 0), (0, 1), (0, 2), (1, 0)]
    ref = sum(
        -math.log(math.exp(logits[b, t, targets[b, t]].item()) / sum(math.exp(v) for v in logits[b, t].tolist()))
        for b, t in real
    ) / len(real)
    assert loss.item() == pytest.approx(ref, rel=1e-5)
    # changing logits at padded positions changes nothing
    changed = logits.detach().clone()
    changed[0, 3] += 100 * torch.randn(6)
    changed[1, 1:] = torch.randn(3, 6) * 50
    assert sequence_loss(changed, targets).item() == pytest.approx(loss.item(), rel=1e-6)
    loss.backward()
    assert torch.all(logits.grad[0, 3] == 0) and torch.all(logits.grad[1, 1:] == 0)
    assert logits.grad[0, 0].abs().sum() > 0
    with pytest.raises(ValueError):
        sequence_loss(torch.randn(2, 4, 6), torch.zeros(2, 5, dtype=torch.long))


class ScriptedModel(nn.Module):
    """Emits a fixed token sequence per row, whatever the input: decoding is all that is tested."""

    def __init__(self, script, vocab=10):
        super().__init__()
        self.script, self.vocab = torch.tensor(script), vocab
        self.dummy = nn.Parameter(torch.zeros(1))

    def encode(self, src, src_lens):
        return 0

    def decode_step(self, y_prev, t):
        col = self.script[:, min(t, self.script.shape[1] - 1)]
        logits = torch.nn.functional.one_hot(col, self.vocab).float()
        return logits, t + 1, None


def test_greedy_decode_stops_at_eos_and_pads_after():
    model = ScriptedModel([[5, EOS_ID, 7, 7, 7, 7], [6, 6, 6, EOS_ID, 7, 7]])
    src, lens = torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 2])
    out, attn = greedy_decode(model, src, lens, max_new_tokens=20)
    assert attn is None
    assert out.tolist() == [[5, EOS_ID, PAD_ID, PAD_ID], [6, 6, 6, EOS_ID]]  # ends once all rows finished


def test_greedy_decode_respects_length_limit():
    model = ScriptedModel([[5, 5, 5, 5], [6, EOS_ID, 6, 6]])
    out, _ = greedy_decode(model, torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 3]), max_new_tokens=3)
    assert out.tolist() == [[5, 5, 5], [6, EOS_ID, PAD_ID]]
    with pytest.raises(ValueError):
        greedy_decode(model, torch.ones(2, 3, dtype=torch.long), torch.tensor([3, 3]), max_new_tokens=0)


def test_seq2seq_forward_shapes_and_padding_invariance(device):
    torch.manual_seed(0)
    model = Seq2Seq(20, 15, emb_dim=8, hidden_size=16, num_layers=2).to(device).eval()
    _, src, lens = _random_batch([6, 3], vocab=20)
    src, lens = src.to(device), lens.to(device)
    dec_in = torch.tensor([[BOS_ID, 5, 6], [BOS_ID, 7, 8]], device=device)
    logits = model(src, lens, dec_in)
    assert logits.shape == (2, 3, 15)
    alone = model(src[1:, :3], lens[1:], dec_in[1:])  # second sentence without the extra padding
    torch.testing.assert_close(logits[1:], alone, atol=1e-5, rtol=1e-5)


def test_reverse_source_option_equals_reversed_input():
    torch.manual_seed(0)
    fwd = Seq2Seq(20, 15, emb_dim=8, hidden_size=16, num_layers=1).eval()
    rev = Seq2Seq(20, 15, emb_dim=8, hidden_size=16, num_layers=1, reverse_source=True).eval()
    rev.load_state_dict(fwd.state_dict())
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])
    lens = torch.tensor([4, 3])
    manual = torch.tensor([[7, 6, 5, EOS_ID], [9, 8, EOS_ID, PAD_ID]])
    dec_in = torch.tensor([[BOS_ID, 4], [BOS_ID, 4]])
    torch.testing.assert_close(rev(src, lens, dec_in), fwd(manual, lens, dec_in))


def test_seq2seq_overfits_a_handful_of_pairs(tmp_path):
    torch.manual_seed(0)
    data = TranslationData({"train": TINY_PAIRS})
    model = Seq2Seq(len(data.src_vocab), len(data.tgt_vocab), emb_dim=16, hidden_size=64, num_layers=1)
    losses = train_seq2seq(
        model, infinite_batches(data.encoded["train"], 6, seed=0), steps=120, lr=1e-2, device="cpu", progress=False
    )
    assert losses[-1] < 0.05 < losses[0]
    hyps = translate(model, data.encoded["train"], data.tgt_vocab, max_new_tokens=10)
    refs = [t for _, t in data.tokens["train"]]
    assert hyps == refs
    # checkpoint round trip (float16 weights) still translates the same
    save_checkpoint(model, tmp_path / "m.pt", src_vocab=data.src_vocab.itos)
    loaded, ckpt = load_checkpoint(tmp_path / "m.pt", Seq2Seq)
    assert ckpt["src_vocab"] == data.src_vocab.itos
    assert translate(loaded, data.encoded["train"], data.tgt_vocab, max_new_tokens=10) == refs


def test_evaluate_by_length_buckets_and_scores():
    refs = [["a", "b", "c", "d"], ["a", "b", "c", "d"], ["x", "y", "z", "w", "v"]]
    hyps = [["a", "b", "c", "d"], ["q", "r", "s", "t"], ["x", "y", "z", "w", "v"]]
    rows = evaluate_by_length(hyps, refs, [2, 3, 9], edges=[4])
    by = {r["bucket"]: r for r in rows}
    assert set(by) == {"1-4", "5+", "all"}
    assert by["1-4"]["n"] == 2 and by["1-4"]["exact_match"] == 0.5
    assert by["5+"]["bleu"] == pytest.approx(100.0) and by["5+"]["exact_match"] == 1.0
    assert 0 < by["all"]["bleu"] < 100 and by["all"]["exact_match"] == pytest.approx(2 / 3, abs=1e-3)
    with pytest.raises(ValueError):
        evaluate_by_length(hyps, refs[:2], [1, 2, 3])


def test_greedy_decode_on_device_matches_cpu(device):
    torch.manual_seed(0)
    model = Seq2Seq(20, 15, emb_dim=8, hidden_size=16, num_layers=2).eval()
    _, src, lens = _random_batch([6, 3], vocab=20)
    cpu_out, _ = greedy_decode(model, src, lens, max_new_tokens=5)
    out, _ = greedy_decode(model.to(device), src.to(device), lens.to(device), max_new_tokens=5)
    assert out.device.type == device.type
    assert torch.equal(out.cpu(), cpu_out)


# ----------------------------------------------------------------------------------------------
# The LSTM cell from its equations, and the vanishing gradient measurement
# ----------------------------------------------------------------------------------------------
def test_lstm_cell_matches_torch_lstm_cell(device):
    torch.manual_seed(0)
    ref = nn.LSTMCell(5, 7).to(device)
    cell = LSTMCell(5, 7).to(device)
    cell.load_state_dict(ref.state_dict())  # same names, shapes and gate order as nn.LSTMCell
    xs = torch.randn(6, 3, 5, device=device)  # six steps of a batch of 3
    state_ref = state = None
    for x in xs:  # unrolled over time, each step's state fed to the next
        state_ref = ref(x, state_ref)
        state = cell(x, state)
        torch.testing.assert_close(state[0], state_ref[0], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(state[1], state_ref[1], atol=1e-6, rtol=1e-5)
    (state[0].sum() + state[1].square().sum()).backward()
    (state_ref[0].sum() + state_ref[1].square().sum()).backward()
    for name, p in cell.named_parameters():
        torch.testing.assert_close(p.grad, dict(ref.named_parameters())[name].grad, atol=1e-5, rtol=1e-4)


def test_lstm_cell_rejects_bad_shapes():
    cell = LSTMCell(5, 7)
    with pytest.raises(ValueError, match=r"\(B, E\)"):
        cell(torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"\(B, N\)"):
        cell(torch.randn(3, 5), (torch.zeros(3, 7), torch.zeros(2, 7)))


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_gradient_norm_by_distance_matches_finite_differences(kind):
    torch.manual_seed(0)
    rnn = (nn.RNN if kind == "rnn" else nn.LSTM)(3, 4, batch_first=True).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    w = torch.randn(4, dtype=torch.float64)
    got = gradient_norm_by_distance(rnn, x, w)

    def loss(x):
        with torch.no_grad():
            return float((rnn(x)[0][:, -1] @ w).sum())

    eps = 1e-6
    grad = torch.zeros_like(x)
    for idx in torch.cartesian_prod(*(torch.arange(n) for n in x.shape)).tolist():  # central differences
        e = torch.zeros_like(x)
        e[tuple(idx)] = eps
        grad[tuple(idx)] = (loss(x + e) - loss(x - e)) / (2 * eps)
    expected = grad.norm(dim=-1).mean(0).flip(0)  # distance 0 = the last input
    torch.testing.assert_close(got, expected, atol=1e-7, rtol=1e-6)


def test_gradient_norm_by_distance_last_step_of_a_tanh_rnn_by_hand():
    torch.manual_seed(1)
    rnn = nn.RNN(3, 4, batch_first=True)
    x, w = torch.randn(2, 6, 3), torch.randn(4)
    h_T = rnn(x)[0][:, -1].detach()  # (B, N)
    # d = 0: dL/dx_T = W_ih^T ((1 - h_T^2) * w), since h_T = tanh(W_ih x_T + W_hh h_{T-1} + b)
    by_hand = (((1 - h_T**2) * w) @ rnn.weight_ih_l0).norm(dim=-1).mean()
    got = gradient_norm_by_distance(rnn, x, w)
    torch.testing.assert_close(got[0], by_hand)
    with torch.no_grad():
        rnn.weight_hh_l0.zero_()  # no recurrence: earlier inputs cannot reach the last output
    assert torch.all(gradient_norm_by_distance(rnn, x, w)[1:] == 0)
    with pytest.raises(ValueError, match="readout"):
        gradient_norm_by_distance(rnn, x, torch.randn(5))
    with pytest.raises(ValueError, match=r"\(B, T, E\)"):
        gradient_norm_by_distance(rnn, x[0], w)


def test_forget_bias_prose_states_the_measured_ratio():
    """The vanishing-gradient section's "about 2.6 times as many steps per factor of ten" is the ratio that the
    page's cell computes and prints under its table (forget bias 1 vs PyTorch's default LSTM initialisation)."""
    import contextlib
    import io
    import pathlib
    import re

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    page = (pathlib.Path(__file__).resolve().parent.parent / "book/ch01_seq2seq.md").read_text()
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page, flags=re.S)
    (cell,) = [c for c in cells if "steps per factor of ten" in c]
    shown = []
    namespace = dict(torch=torch, plt=plt, gradient_norm_by_distance=gradient_norm_by_distance)
    namespace |= dict(Markdown=str, display=shown.append)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(cell, namespace)
    plt.close("all")
    steps = namespace["steps"]
    ratio = steps["LSTM, forget bias 1"] / steps["LSTM, default init"]
    assert f"{ratio:.1f} times as many steps per factor of ten" in out.getvalue()
    m = re.search(r"the gradient travels about ([\d.]+) times as many steps per factor of ten", " ".join(page.split()))
    assert m, "the page no longer states the ratio"
    assert float(m[1]) == round(ratio, 1)
