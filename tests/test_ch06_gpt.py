"""Chapter 6 (GPT): the solution against independent oracles — Hugging Face's GPT2LMHeadModel (weights copied),
hand-counted parameters, the causal property, HF's top-k/top-p warpers, the committed training results."""

import json
import math
import pathlib

import pytest
import torch
import torch.nn.functional as F

from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.interop import load_hf_gpt2
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text, sentences, train_val_split

ROOT = pathlib.Path(__file__).resolve().parent.parent
SMALL = dict(vocab_size=61, context_length=24, n_layers=3, n_heads=4, d_model=48)


def _hf_pair(device, seed=0):
    transformers = pytest.importorskip("transformers")
    from scripts.hf_parity import gpt2_config, randomise

    torch.manual_seed(seed)
    config = GPTConfig(**SMALL)
    hf = randomise(transformers.GPT2LMHeadModel(gpt2_config(config)))  # random layer norms and biases too
    ours = load_hf_gpt2(GPT(config), hf.state_dict()).eval()
    return ours.to(device), hf.to(device)


@pytest.mark.parametrize("use_sdpa", [True, False])
def test_logits_match_hugging_face(device, use_sdpa):
    ours, hf = _hf_pair(device)
    for block in ours.h:
        block.use_sdpa = use_sdpa
    idx = torch.randint(61, (3, 17), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        got, expected = ours(idx), hf(idx).logits
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=2e-5)


def test_greedy_continuation_matches_hugging_face(device):
    ours, hf = _hf_pair(device, seed=2)
    idx = torch.randint(61, (2, 5), generator=torch.Generator().manual_seed(3)).to(device)
    mine = generate(ours, idx, 19, temperature=0.0)
    theirs = hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=19, do_sample=False, pad_token_id=0)
    assert torch.equal(mine, theirs)


def test_parameter_count_by_hand_and_tying():
    m = GPT(GPTConfig(**SMALL))
    V, T, L, C = 61, 24, 3, 48
    per_block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
    assert m.num_parameters() == V * C + T * C + L * per_block + 2 * C
    assert m.num_parameters(non_embedding=True) == m.num_parameters() - T * C
    assert m.lm_head.weight is m.wte.weight
    # one tensor, fed by both uses: rows of tokens absent from the input still get a gradient (from the head)
    idx = torch.randint(10, (2, 7))
    F.cross_entropy(m(idx).flatten(0, 1), idx.flatten()).backward()
    assert m.wte.weight.grad[10:].abs().sum() > 0


def test_gpt2_initialisation():
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=500, context_length=64, n_layers=8, n_heads=4, d_model=128)
    m = GPT(cfg)
    assert abs(m.h[0].attn.W_qkv.weight.std().item() - 0.02) < 0.001
    assert abs(m.wte.weight.std().item() - 0.02) < 0.001
    for block in m.h:
        for proj in (block.attn.W_o, block.mlp.W_2):
            assert abs(proj.weight.std().item() - 0.02 / math.sqrt(2 * 8)) < 0.0006
            assert proj.bias.abs().max() == 0


def test_causal_no_peeking(device):
    torch.manual_seed(0)
    m = GPT(GPTConfig(**SMALL)).to(device).eval()
    a = torch.randint(61, (2, 12), device=device)
    b = a.clone()
    b[:, 8:] = torch.randint(61, (2, 4), device=device)
    with torch.no_grad():
        torch.testing.assert_close(m(a)[:, :8], m(b)[:, :8])
        assert not torch.allclose(m(a)[:, 8:], m(b)[:, 8:])


def test_generation_crops_context_and_restarts_positions(device):
    torch.manual_seed(0)
    m = GPT(GPTConfig(**SMALL)).to(device).eval()
    idx = torch.randint(61, (2, 20), device=device)
    out = generate(m, idx, 15, temperature=0.0)  # runs past context_length = 24
    expected = idx
    with torch.no_grad():
        for _ in range(15):
            window = expected[:, -24:]
            nxt = m(window, torch.arange(window.shape[1], device=device))[:, -1].argmax(-1, keepdim=True)
            expected = torch.cat([expected, nxt], 1)
    assert torch.equal(out, expected)
    with pytest.raises(ValueError):
        m(torch.zeros(1, 25, dtype=torch.long, device=device))


def test_top_k_top_p_agree_with_hugging_face_warpers():
    pytest.importorskip("transformers")
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(1, 40, generator=torch.Generator().manual_seed(0)) * 2

    class Fixed(torch.nn.Module):
        context_length = 8

        def forward(self, idx, position_ids=None):
            return logits.expand(idx.shape[0], idx.shape[1], -1)

    for kw, warper in (
        ({"top_k": 5}, TopKLogitsWarper(5)),
        ({"top_p": 0.7}, TopPLogitsWarper(0.7)),
        ({"top_k": 1}, TopKLogitsWarper(1)),
    ):
        allowed = torch.isfinite(warper(None, logits.clone() / 0.9))[0]
        out = generate(
            Fixed(),
            torch.zeros(4000, 1, dtype=torch.long),
            1,
            temperature=0.9,
            generator=torch.Generator().manual_seed(1),
            **kw,
        )[:, 1]
        seen = torch.zeros(40, dtype=torch.bool)
        seen[out] = True
        assert torch.equal(seen, allowed), kw
    # temperature scales the logits: frequencies follow softmax(logits / T)
    out = generate(
        Fixed(), torch.zeros(20000, 1, dtype=torch.long), 1, temperature=0.5, generator=torch.Generator().manual_seed(2)
    )[:, 1]
    freq = torch.bincount(out, minlength=40).float() / 20000
    assert (freq - torch.softmax(logits[0] / 0.5, -1)).abs().max() < 0.015


def test_text_data():
    text = python_docs_text()
    assert len(text) > 300_000 and text.isascii()
    tok = CharTokenizer.from_text(text)
    assert tok.decode(tok.encode(text[:1000])) == text[:1000]
    data = torch.tensor(tok.encode(text[:5000]))
    tr, va = train_val_split(data, 0.1)
    assert len(tr) == 4500 and torch.equal(torch.cat([tr, va]), data)
    x, y = get_lm_batch(tr, 16, 4, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 16) and torch.equal(x[:, 1:], y[:, :-1])
    assert len(sentences(text)) > 2000


def test_a_few_steps_lower_the_loss():
    from solutions.training import train

    torch.manual_seed(0)
    text = python_docs_text()[:20000]
    tok = CharTokenizer.from_text(text)
    data = torch.tensor(tok.encode(text))
    m = GPT(GPTConfig(vocab_size=tok.vocab_size, context_length=16, n_layers=1, n_heads=2, d_model=32))
    g = torch.Generator().manual_seed(0)

    def loss_fn(model, it, part):
        x, y = get_lm_batch(data, 16, 8, generator=g)
        return F.cross_entropy(model(x).flatten(0, 1), y.flatten()), x.numel()

    hist = train(m, loss_fn, max_iters=60, lr=3e-3, warmup=5, progress=False)
    first, last = hist["train"][0][1], sum(loss for _, loss in hist["train"][-10:]) / 10
    assert first > math.log(tok.vocab_size) - 0.3 and last < first - 0.8


def test_committed_checkpoint_reproduces_its_validation_loss():
    results = json.loads((ROOT / "results/ch06_gpt/gpt_char.json").read_text())
    ck = torch.load(ROOT / "results/ch06_gpt/gpt_char.pt")
    m = GPT(GPTConfig(**ck["config"])).eval()
    m.load_state_dict(ck["model"])
    text = python_docs_text()
    tok = CharTokenizer(ck["alphabet"])
    _, val = train_val_split(torch.tensor(tok.encode(text)), 0.1)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        losses = [
            F.cross_entropy(m(x).flatten(0, 1), y.flatten()).item()
            for x, y in (get_lm_batch(val, 64, 12, generator=g) for _ in range(10))
        ]
    assert abs(sum(losses) / len(losses) - results["final"]["val"]) < 0.15
    assert results["config"]["n_layers"] == 4 and results["args"]["max_iters"] == 2000
    assert (ROOT / "results/ch06_gpt/gpt_char.pt").stat().st_size < 5e6


TINY_ARGS = ["--n_layers", "1", "--n_heads", "2", "--d_model", "16", "--context_length", "16", "--batch_size", "4"]
TINY_ARGS += ["--max_iters", "4", "--eval_interval", "2", "--eval_iters", "1", "--sample_tokens", "5", "--no-progress"]
# Two speeches from the opening of Coriolanus, as in tiny Shakespeare: no double quote, no digits, no underscore.
SHAKESPEARE_LIKE = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\n"
) * 20


def test_train_gpt_shakespeare_samples_from_a_prompt_in_its_alphabet(tmp_path, monkeypatch):
    """`--data shakespeare` (issue 18): the python-docs prompt has characters the corpus lacks; the run must
    sample from a prompt of its own alphabet (no KeyError after training)."""
    from scripts import train_gpt

    monkeypatch.setattr(train_gpt, "tiny_shakespeare", lambda: SHAKESPEARE_LIKE)
    res = train_gpt.main(["--data", "shakespeare", "--out", str(tmp_path), *TINY_ARGS])
    assert set(res["prompt"]) <= set(SHAKESPEARE_LIKE)
    saved = json.loads((tmp_path / "gpt_char_shakespeare.json").read_text())
    assert saved["samples"] == res["samples"] and all(s.startswith(res["prompt"]) for s in saved["samples"].values())


def test_train_gpt_refuses_a_prompt_outside_the_alphabet_before_training(tmp_path, monkeypatch):
    from scripts import train_gpt

    monkeypatch.setattr(train_gpt, "tiny_shakespeare", lambda: SHAKESPEARE_LIKE)
    monkeypatch.setattr(train_gpt, "train", lambda *a, **k: pytest.fail("trained before checking the prompt"))
    with pytest.raises(ValueError, match="--prompt") as err:
        train_gpt.main(["--data", "shakespeare", "--prompt", 'Act 1: "Speak"', "--out", str(tmp_path), *TINY_ARGS])
    assert all(repr(c) in str(err.value) for c in '"1') and not list(tmp_path.iterdir())


def test_train_gpt_saves_the_checkpoint_before_sampling(tmp_path, monkeypatch):
    """Whatever fails after training must not lose the trained model (issue 18)."""
    from scripts import train_gpt

    def broken_generate(*args, **kwargs):
        raise RuntimeError("sampling failed")

    monkeypatch.setattr(train_gpt, "generate", broken_generate)
    with pytest.raises(RuntimeError, match="sampling failed"):
        train_gpt.main(["--out", str(tmp_path), *TINY_ARGS])
    saved = json.loads((tmp_path / "gpt_char.json").read_text())
    assert set(saved["final"]) == {"train", "val"} and saved["samples"] == {}
    ck = torch.load(tmp_path / "gpt_char.pt")
    GPT(GPTConfig(**ck["config"])).load_state_dict(ck["model"])


def test_train_gpt_cli_smoke(tmp_path):
    from scripts import train_gpt as script

    res = script.main(
        [
            "--n_layers",
            "1",
            "--n_heads",
            "2",
            "--d_model",
            "16",
            "--context_length",
            "16",
            "--batch_size",
            "4",
            "--max_iters",
            "12",
            "--eval_interval",
            "6",
            "--eval_iters",
            "2",
            "--sample_tokens",
            "20",
            "--out",
            str(tmp_path),
            "--no-progress",
            "--seed",
            "0",
        ]
    )
    saved = json.loads((tmp_path / "gpt_char.json").read_text())
    assert saved["tokens_per_s"] > 0 and len(saved["eval_curve"]) == 3 and set(saved["final"]) == {"train", "val"}
    assert all(len(s) == len(saved["prompt"]) + 20 for s in saved["samples"].values())
    ck = torch.load(tmp_path / "gpt_char.pt")
    GPT(GPTConfig(**ck["config"])).load_state_dict(ck["model"])
    assert res["parameters"] == saved["parameters"]
