"""Training past one process (issue 18): DistributedDataParallel under torchrun, gradient accumulation, rank 0's
files; and the tokenizer's clear error for characters it does not know.

The oracle for the distributed run is the same script on one process: the ``world_size × grad_accum`` parts are
equal shares of the same global batch, so the updates agree up to float rounding (summation order in the
all-reduce). Tolerance: 1e-4 nats per training loss over the run (measured: under 1e-6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solutions.ch06_gpt import GPT, GPTConfig
from solutions.text_data import CharTokenizer
from solutions.training import Part, init_distributed, once_per_iteration, train_loop

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-4  # nats: the loss curves of 1 and 2 processes with the same global batch and seed
GPT_ARGS = ["--n_layers", "1", "--n_heads", "2", "--d_model", "16", "--context_length", "16", "--batch_size", "8"]
GPT_ARGS += ["--max_iters", "12", "--eval_interval", "6", "--eval_iters", "1", "--sample_tokens", "5"]
GPT_ARGS += ["--no-progress", "--curve_every", "1", "--threads", "1"]


def test_parts_cut_a_global_batch_into_equal_disjoint_shares():
    rows = torch.arange(12)
    parts = [rows[Part(i, 4).rows(12)] for i in range(4)]
    assert torch.equal(torch.cat(parts), rows) and {len(p) for p in parts} == {3}
    assert Part().rows(5) == slice(0, 5)
    with pytest.raises(ValueError, match="12 rows .* 5 equal parts"):
        Part(0, 5).rows(12)


def test_once_per_iteration_draws_each_iteration_once():
    calls = []
    get = once_per_iteration(lambda it: calls.append(it) or it * 10)
    assert [get(0), get(0), get(1), get(1), get(2)] == [0, 0, 10, 10, 20] and calls == [0, 1, 2]


def test_one_process_is_rank_0_of_1(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    dist, device = init_distributed("cpu")
    assert (dist.rank, dist.world_size, dist.is_main, device.type) == (0, 1, True, "cpu")


def test_grad_accum_gives_the_full_batch_update():
    """Two micro-steps of half the batch = one step on the whole batch (the same weights after training)."""
    data = torch.randint(0, 20, (4, 8, 9), generator=torch.Generator().manual_seed(0))  # 4 iterations of batch 8

    def run(grad_accum: int) -> tuple[GPT, list[float]]:
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=20, context_length=8, n_layers=1, n_heads=2, d_model=16))

        def loss_fn(m, it, part):
            batch = data[it][part.rows(8)]
            return m.loss(batch[:, :-1], batch[:, 1:]), batch.numel()

        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)  # linear in the gradient: no sign noise
        hist = train_loop(model, loss_fn, opt, max_iters=4, clip=1.0, progress=False, grad_accum=grad_accum)
        return model, [loss for _, loss in hist["train"]]

    (m1, c1), (m2, c2) = run(1), run(2)
    assert c1 == pytest.approx(c2, abs=TOL)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(p1, p2, atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="grad_accum"):
        train_loop(m1, lambda m, it, part: (m.loss(data[0], data[0]), 1), opt_none(m1), max_iters=1, grad_accum=0)


def opt_none(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.0)


def test_char_tokenizer_names_the_characters_it_lacks():
    tok = CharTokenizer("abc ")
    assert tok.encode("a cab") == [0, 3, 2, 0, 1]
    with pytest.raises(ValueError) as err:
        tok.encode('a "cab"!')
    assert all(repr(c) in str(err.value) for c in '"!') and "'a'" not in str(err.value.args[0]).split(":")[-1]


@pytest.mark.slow
def test_train_gpt_on_two_processes_matches_one(tmp_path):
    """`torchrun --nproc_per_node 2` (gloo, 2 micro-steps each: 4 parts of 2 rows) against one process with the
    whole batch of 8: the same loss curve; only rank 0 writes; its checkpoint loads into one process."""
    from scripts import train_gpt

    one = train_gpt.main([*GPT_ARGS, "--out", str(tmp_path / "one")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    cmd += ["-m", "scripts.train_gpt", *GPT_ARGS, "--grad_accum", "2", "--out", str(tmp_path / "two")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["gpt_char.json", "gpt_char.pt"]
    two = json.loads((tmp_path / "two" / "gpt_char.json").read_text())
    assert two["machine"]["world_size"] == 2 and len(two["train_curve"]) == 12
    assert [it for it, _ in two["train_curve"]] == [it for it, _ in one["train_curve"]]
    assert [loss for _, loss in two["train_curve"]] == pytest.approx([loss for _, loss in one["train_curve"]], abs=TOL)
    assert two["final"] == pytest.approx(one["final"], abs=TOL)
    assert proc.stdout.count("tokens/s") == 1  # rank 0 alone prints the summary

    ck = torch.load(tmp_path / "two" / "gpt_char.pt")
    model = GPT(GPTConfig(**ck["config"]))
    model.load_state_dict(ck["model"])  # no "module." prefix: the bare model was saved, not the DDP wrapper
    ref = torch.load(tmp_path / "one" / "gpt_char.pt")["model"]
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, ref[name], atol=1e-4, rtol=1e-3)


@pytest.mark.slow
def test_train_bert_on_two_processes_matches_one(tmp_path):
    """BERT's masked-LM pretraining under torchrun (2 gloo processes × 2 micro-steps) against one process, dropout
    off: the parts' losses are weighted by their share of the selected positions, so the curves agree too."""
    import shutil

    from scripts import train_bert

    args = ["--n_layers", "1", "--n_heads", "2", "--d_model", "32", "--seq_len", "32", "--batch_size", "8"]
    args += ["--max_iters", "4", "--eval_interval", "4", "--vocab_size", "500", "--dropout", "0", "--threads", "1"]
    args += ["--no-progress"]
    train_bert.main(["--part", "tokenizer", *args, "--out", str(tmp_path / "one")])
    (tmp_path / "two").mkdir()
    shutil.copy(tmp_path / "one" / "wordpiece.json", tmp_path / "two" / "wordpiece.json")
    train_bert.main(["--part", "bert", *args, "--out", str(tmp_path / "one")])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    cmd += ["-m", "scripts.train_bert", "--part", "bert", *args, "--grad_accum", "2", "--out", str(tmp_path / "two")]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = (json.loads((tmp_path / d / "bert_history.json").read_text()) for d in ("one", "two"))
    assert [loss for _, loss in two["train"]] == pytest.approx([loss for _, loss in one["train"]], abs=TOL)
    assert two["eval"][-1][1]["loss"] == pytest.approx(one["eval"][-1][1]["loss"], abs=TOL)
