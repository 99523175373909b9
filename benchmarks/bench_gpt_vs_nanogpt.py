"""Benchmark: chapter 6's GPT against nanoGPT's ``model.py``, trained side by side in one run (issue 18).

The configuration of nanoGPT's README for a CPU (and of the course's ``scripts/train_gpt.py``): 4 layers, 4 heads,
``d_model`` 128, context 64, batch 12, dropout 0, character level; AdamW (lr 1e-3, betas 0.9/0.99, weight decay 0.1
on matrices), 100 warm-up steps then cosine decay to 1e-4, gradient clipping at 1.0 — nanoGPT's
``train_shakespeare_char`` recipe, which is also :func:`solutions.training.train`'s. The corpus is the one the
course ships offline (Python's documentation, :func:`solutions.text_data.python_docs_text`), the same for all.

Models (nanoGPT's is vendored unchanged in ``benchmarks/nanogpt/``, MIT licence):

* ``course``: :class:`solutions.ch06_gpt.GPT` (GPT-2 layout: biases, GELU-tanh);
* ``nanogpt``: nanoGPT with its default ``bias=False`` and exact GELU (what the issue timed);
* ``nanogpt_bias``: nanoGPT with ``bias=True`` (still exact GELU);
* ``nanogpt_gpt2``: nanoGPT with ``bias=True`` and its MLP's ``nn.GELU()`` swapped for
  ``nn.GELU(approximate="tanh")`` after construction — GPT-2's layout, the course's exactly (like with like).

The course keeps GPT-2's biases and tanh GELU because the Hugging Face parity (``scripts/hf_parity.py``) needs
them; the last two rows price each of the two differences. Every model sees the same batches and starts from its
own seed-0 initialisation (the course's and nanoGPT's draw their weights in the same order, so ``course`` and
``nanogpt_gpt2`` start from the same weights: the script prints their largest logit difference at the start). The
steps are interleaved — iteration ``i`` trains every model once, in an order that rotates — so a machine that gets
busier slows them alike; the step time of a model is the median over the timed iterations (the first 10 left out).
Each step is the same code for all: forward with the model's own loss (``GPT.loss``; nanoGPT's ``model(x, y)``,
which computes the cross-entropy inside), backward, clip, AdamW. At the end: the validation loss (the same 50
batches for all) and the step-time ratio course / each.

With ``--ddp``: tokens/second of ``scripts/train_gpt.py`` itself on 1 and on 2 processes (torchrun, gloo, one
thread each), the same global batch of 12.

    nice -n 10 python -m benchmarks.bench_gpt_vs_nanogpt --iters 600 --threads 1 --ddp
    python -m benchmarks.bench_gpt_vs_nanogpt --device cuda --iters 2000
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from benchmarks.nanogpt.model import GPT as NanoGPT
from benchmarks.nanogpt.model import GPTConfig as NanoConfig
from benchmarks.results_io import write_results
from solutions.ch06_gpt import GPT, GPTConfig
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text, train_val_split
from solutions.training import lr_at

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
ROOT = pathlib.Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=600)
    p.add_argument("--batch_size", type=int, default=12)
    p.add_argument("--context_length", type=int, default=64)
    p.add_argument("--eval_iters", type=int, default=50)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: PyTorch's default)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--ddp", action="store_true", help="also time scripts/train_gpt.py on 1 and 2 processes")
    p.add_argument("--ddp_iters", type=int, default=200)
    return p.parse_args(argv)


def build(name: str, vocab_size: int, T: int) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "course":
        return GPT(GPTConfig(vocab_size=vocab_size, context_length=T, n_layers=4, n_heads=4, d_model=128))
    bias = name in ("nanogpt_bias", "nanogpt_gpt2")
    sizes = dict(block_size=T, n_layer=4, n_head=4, n_embd=128)  # nanoGPT's names
    model = NanoGPT(NanoConfig(vocab_size=vocab_size, dropout=0.0, bias=bias, **sizes))
    if name == "nanogpt_gpt2":  # GPT-2's GELU (tanh approximation), as the course's; no parameters change
        for block in model.transformer.h:
            block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    return model


def loss_of(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The model's own training loss: nanoGPT computes it inside ``forward``, the course's ``GPT.loss``."""
    if isinstance(model, NanoGPT):
        return model(x, y)[1]  # cross-entropy over every position, computed once
    return model.loss(x, y)


def optimizer_for(model: torch.nn.Module) -> torch.optim.Optimizer:
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))


def ddp_tokens_per_s(nproc: int, iters: int) -> float:
    """tokens/s (all ranks) of ``scripts/train_gpt.py`` under torchrun with ``nproc`` processes of one thread."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
        cmd += ["-m", "scripts.train_gpt", "--max_iters", str(iters), "--eval_interval", str(iters), "--eval_iters"]
        cmd += ["5", "--sample_tokens", "5", "--threads", "1", "--no-progress", "--out", out]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        return json.loads((pathlib.Path(out) / "gpt_char.json").read_text())["tokens_per_s"]


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    text = python_docs_text()
    tok = CharTokenizer.from_text(text)
    train_data, val_data = train_val_split(torch.tensor(tok.encode(text)), 0.1)
    T, B = args.context_length, args.batch_size
    names = ["course", "nanogpt", "nanogpt_bias", "nanogpt_gpt2"]
    models = {n: build(n, tok.vocab_size, T).to(device).train() for n in names}
    x0 = get_lm_batch(train_data, T, B, generator=torch.Generator().manual_seed(0), device=device)[0]
    with torch.no_grad():
        same = (models["course"](x0) - models["nanogpt_gpt2"](x0, x0)[0]).abs().max().item()
    print(f"course vs nanogpt_gpt2 at the start: largest logit difference {same:.2e}")
    opts = {n: optimizer_for(m) for n, m in models.items()}
    times: dict[str, list[float]] = {n: [] for n in names}
    g = torch.Generator().manual_seed(1337)
    t_start, load_start = time.time(), os.getloadavg()[0]
    for it in range(args.iters):
        x, y = get_lm_batch(train_data, T, B, generator=g, device=device)
        lr = lr_at(it, lr=1e-3, warmup=100, max_iters=args.iters)
        for name in names[it % len(names) :] + names[: it % len(names)]:  # rotate the order
            model, opt = models[name], opts[name]
            for group in opt.param_groups:
                group["lr"] = lr
            t0 = time.perf_counter()
            loss = loss_of(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if it >= 10:
                times[name].append(time.perf_counter() - t0)
        if (it + 1) % 100 == 0:
            print(f"iter {it + 1}/{args.iters}, {time.time() - t_start:.0f} s", flush=True)

    rows = []
    for name, model in models.items():
        model.eval()
        gv = torch.Generator().manual_seed(0)
        with torch.no_grad():
            val = statistics.mean(
                loss_of(model, x, y).item()
                for x, y in (get_lm_batch(val_data, T, B, generator=gv, device=device) for _ in range(args.eval_iters))
            )
        ms = 1000 * statistics.median(times[name])
        rows.append(
            {
                "model": name,
                "ms_per_step": round(ms, 2),
                "tokens_per_s": round(B * T / ms * 1000),
                "val_loss": round(val, 4),
            }
        )
    base = {r["model"]: r["ms_per_step"] for r in rows}
    for r in rows:
        r["ratio_course_over_this"] = round(base["course"] / r["ms_per_step"], 3)
        print(r)
    how = (
        f"python -m benchmarks.bench_gpt_vs_nanogpt {' '.join(sys.argv[1:] if argv is None else argv)}; "
        f"{args.iters} interleaved iterations each, batch {B}, context {T}, 4x4x128, python docs, "
        f"median step time after 10; device {device}; load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end; course and nanogpt_gpt2: GPT-2 layout (biases, GELU-tanh), "
        f"nanogpt: no biases, exact GELU; nanogpt_bias: biases, exact GELU; each model's own loss"
    )
    out = RESULTS / f"gpt_vs_nanogpt_{device.type}.csv"
    write_results(out, rows, device.type, how)  # now: the DDP runs below take minutes and may be cut short
    if args.ddp:
        for nproc in (1, 2):
            tps = ddp_tokens_per_s(nproc, args.ddp_iters)
            rows.append(
                {
                    "model": f"train_gpt_ddp_{nproc}proc",
                    "ms_per_step": "",
                    "tokens_per_s": round(tps),
                    "val_loss": "",
                    "ratio_course_over_this": "",
                }
            )
            print(rows[-1])
        write_results(out, rows, device.type, how + f"; train_gpt_ddp rows: {args.ddp_iters} iterations each")
    return rows


if __name__ == "__main__":
    main()
