"""Train a one-layer, one-head attention model with and without a learned attention sink (OpenAI 2025, gpt-oss; after
Xiao et al. 2023, StreamingLLM) and record where it puts its attention; chapter 13's page reads the results.

    python -m scripts.train_attention_sinks   # ~1 min on one CPU core; writes results/ch13_serving_attention/attention_sinks.json

The task gives a head often nothing to find: a sequence is a start token at position 0 followed by ``--length``
symbols drawn uniformly from ``--symbols``; at each symbol the model says whether that symbol appeared earlier in the
sequence. Where it did, the head can attend to the earlier copy; where it did not, there is nothing to attend to.
The model: token and position embeddings, one causal attention head (``d_model`` wide, scores scaled by
``1/sqrt(d_model)``), its output projection added to the residual stream, LayerNorm, a two-way readout. With
``sink``, the softmax is chapter 13's ``softmax_with_sink`` with one learned logit (initialised at 0). For each seed,
both models start from the same weights (the sink is created last) and see the same batches; AdamW, ``--steps``
steps of ``--batch_size`` sequences. Measured on 512 held-out sequences: the accuracy, the mean attention a symbol's
query gives the start token and the sink (1 minus the row's sum), separately where the symbol is new and where it
was seen, and the accuracy at each kind of position when no query may attend to the start token (evicted from the
cache, as by StreamingLLM's sliding window without its kept first tokens).
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import time

import torch
import torch.nn.functional as F
from torch import nn

from solutions.ch03_self_attention import causal_mask
from solutions.ch13_serving_attention import softmax_with_sink

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (initial weights and batches)")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--weight_decay", type=float, default=0.1)
    p.add_argument("--symbols", type=int, default=24)
    p.add_argument("--length", type=int, default=16, help="symbols per sequence, after the start token")
    p.add_argument("--d_model", type=int, default=32)
    p.add_argument("--out", default=str(ROOT / "results/ch13_serving_attention/attention_sinks.json"))
    args = p.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    if min(args.steps, args.batch_size, args.symbols, args.length, args.d_model) < 1 or not args.seeds:
        p.error("steps, batch_size, symbols, length and d_model must be >= 1, and at least one seed given")
    return args


def seen_before_batch(n: int, symbols: int, length: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``x (n, length + 1)``: the start token (``symbols``), then symbols in ``0 … symbols - 1``; ``seen (n, length)``
    bool: symbol ``i`` equals some earlier symbol."""
    x = torch.randint(0, symbols, (n, length), generator=g)
    seen = (x[:, :, None] == x[:, None, :]).tril(-1).any(-1)
    return torch.cat([torch.full((n, 1), symbols), x], dim=1), seen


class OneHead(nn.Module):
    """Embeddings, one causal attention head (optionally with a learned sink), LayerNorm and a two-way readout."""

    def __init__(self, symbols: int, length: int, d_model: int, with_sink: bool):
        super().__init__()
        self.embed = nn.Embedding(symbols + 1, d_model)  # the symbols and the start token
        self.position = nn.Embedding(length + 1, d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.readout = nn.Linear(d_model, 2)
        self.sink = nn.Parameter(torch.zeros(1)) if with_sink else None  # one head: sink (H,) = (1,)
        self.weights = torch.empty(0)  # the last forward's attention weights (B, 1, T, T)

    def forward(self, x: torch.Tensor, evict_start: bool = False) -> torch.Tensor:
        """Logits ``(B, length, 2)``; ``evict_start``: no query may attend to position 0 (the start token evicted
        from the cache, as a sliding window without StreamingLLM's kept tokens would)."""
        T = x.shape[1]
        h = self.embed(x) + self.position(torch.arange(T, device=x.device))  # (B, T, d_model)
        q, k, v = self.qkv(h).unsqueeze(1).chunk(3, dim=-1)  # (B, 1, T, d_model) each
        allowed = causal_mask(T, device=x.device)  # True = may attend
        if evict_start:
            allowed = allowed & (torch.arange(T, device=x.device) > 0)
        scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(~allowed, -math.inf)
        self.weights = scores.softmax(dim=-1) if self.sink is None else softmax_with_sink(scores, self.sink)
        h = h + self.proj((self.weights @ v)[:, 0])
        return self.readout(self.norm(h))[:, 1:]  # (B, length, 2): the start token predicts nothing


def train_and_measure(args, with_sink: bool, seed: int) -> dict:
    torch.manual_seed(seed)  # the same initial weights with and without the sink (created last)
    model = OneHead(args.symbols, args.length, args.d_model, with_sink)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    g = torch.Generator().manual_seed(100 + seed)  # the same batches with and without the sink
    start = time.perf_counter()
    for _ in range(args.steps):
        x, seen = seen_before_batch(args.batch_size, args.symbols, args.length, g)
        loss = F.cross_entropy(model(x).flatten(0, 1), seen.long().flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - start
    x, seen = seen_before_batch(512, args.symbols, args.length, torch.Generator().manual_seed(999))
    model.eval()
    with torch.no_grad():
        evicted = model(x, evict_start=True).argmax(-1) == seen  # the start token's row is all masked: NaN, unused
        accuracy = (model(x).argmax(-1) == seen).float().mean().item()
    w = model.weights[:, 0, 1:]  # (512, length, length + 1): the symbols' query rows
    to_start, to_sink = w[..., 0], 1 - w.sum(-1)
    return {
        "sink": with_sink,
        "seed": seed,
        "accuracy": round(accuracy, 4),
        "accuracy_evicted_new": round(evicted[~seen].float().mean().item(), 4),
        "accuracy_evicted_seen": round(evicted[seen].float().mean().item(), 4),
        "final_loss": round(loss.item(), 5),
        "sink_logit": None if model.sink is None else round(model.sink.item(), 4),
        "start_new": round(to_start[~seen].mean().item(), 4),
        "sink_new": round(to_sink[~seen].mean().item(), 4),
        "start_seen": round(to_start[seen].mean().item(), 4),
        "sink_seen": round(to_sink[seen].mean().item(), 4),
        "seconds": round(seconds, 2),
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    runs = []
    for seed in args.seeds:
        for with_sink in (False, True):
            runs.append(train_and_measure(args, with_sink, seed))
            print(runs[-1])
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k != "out"}
    meta = {
        "command": "python -m scripts.train_attention_sinks",
        "measured": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.system()}, one thread",
        "torch": torch.__version__,
    }
    out.write_text(json.dumps({"meta": meta, "config": config, "runs": runs}, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
