"""Benchmark: why the Transformer dropped recurrence, and why it scores with dot products.

Two measurements, forward + backward, with torch.utils.benchmark (warm-up, repeats, median), written as CSVs
under benchmarks/results/ that the chapter 3 page reads:

1. ``ch03_recurrence_vs_attention_<device>.csv``: one recurrent layer (``torch.nn.LSTM``, PyTorch's fused
   implementation: T sequential steps) against one self-attention layer (chapter 3's ``SelfAttention``: a constant
   number of sequential operations, O(T^2 d) work) on the same ``(B, T, d_model)`` input, as T grows
   (Vaswani et al. 2017, section 4 and Table 1).
2. ``ch03_additive_vs_dot_<device>.csv``: the full score-softmax-average of additive attention (chapter 2's
   ``AdditiveAttention``, Bahdanau et al. 2014) against scaled dot-product attention (chapter 3's
   ``scaled_dot_product_attention``; dot scoring as in Luong et al. 2015), every one of T queries against T keys,
   with the same projections W (queries) and U (keys) of width A = d_model.

    python -m benchmarks.bench_recurrence_vs_attention --threads 1             # CPU, default sizes
    python -m benchmarks.bench_recurrence_vs_attention --device cuda           # on a GPU
"""

from __future__ import annotations

import argparse
import pathlib

import torch
import torch.nn as nn
from torch.utils import benchmark

from benchmarks.results_io import write_results
from solutions.ch02_bahdanau_attention import AdditiveAttention
from solutions.ch03_self_attention import SelfAttention, scaled_dot_product_attention

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def fwd_bwd(fn, *args) -> None:
    """Run ``fn(*args)``, reduce its (first) output to a scalar and backpropagate."""
    out = fn(*args)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()


def time_ms(fn, args, min_run_time: float) -> float:
    """Median milliseconds of ``fwd_bwd(fn, *args)``."""
    t = benchmark.Timer(
        "fwd_bwd(fn, *args)", globals=dict(fwd_bwd=fwd_bwd, fn=fn, args=args), num_threads=torch.get_num_threads()
    )
    return t.blocked_autorange(min_run_time=min_run_time).median * 1e3


def additive_all_queries(attn: AdditiveAttention, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Chapter 2's additive attention for every query at once: the T_q queries are folded into the batch.

    ``s (B, T_q, N)``, ``h (B, T_k, D)`` -> context ``(B, T_q, D)``. The tanh inside materialises a
    ``(B * T_q, T_k, A)`` tensor: the cost that dot-product scoring avoids.
    """
    B, T_q, _ = s.shape
    T_k = h.shape[1]
    h_rep = h.unsqueeze(1).expand(B, T_q, T_k, h.shape[-1]).reshape(B * T_q, T_k, -1)  # (B*T_q, T_k, D)
    U_h = attn.project(h).unsqueeze(1).expand(B, T_q, T_k, -1).reshape(B * T_q, T_k, -1)  # (B*T_q, T_k, A)
    mask = torch.ones(B * T_q, T_k, dtype=torch.bool, device=s.device)
    c, _ = attn(s.reshape(B * T_q, -1), h_rep, U_h, mask)  # (B*T_q, D)
    return c.reshape(B, T_q, -1)


def dot_all_queries(attn: AdditiveAttention, s: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The same projections, scored by a scaled dot product: ``softmax((sW^T)(hU^T)^T / sqrt(A)) h``."""
    out, _ = scaled_dot_product_attention(attn.W(s), attn.project(h), h)  # (B, T_q, D)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024])
    p.add_argument("--score-lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (1 is robust on a machine shared with other work)",
    )
    p.add_argument("--min-run-time", type=float, default=0.5, help="seconds per measurement")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev, d, B = args.device, args.d_model, args.batch
    torch.manual_seed(0)

    lstm = nn.LSTM(d, d, batch_first=True).to(dev)
    self_attn = SelfAttention(d, d).to(dev)
    rows = []
    for T in args.lengths:
        x = torch.randn(B, T, d, device=dev, requires_grad=True)
        lstm_ms = time_ms(lstm, (x,), args.min_run_time)
        attn_ms = time_ms(self_attn, (x,), args.min_run_time)
        rows.append(
            dict(
                T=T,
                B=B,
                d_model=d,
                device=dev,
                lstm_ms=round(lstm_ms, 3),
                self_attention_ms=round(attn_ms, 3),
                lstm_sequential_steps=T,
                self_attention_sequential_steps=1,
            )
        )
        print(rows[-1])
    write_results(
        RESULTS / f"ch03_recurrence_vs_attention_{dev}.csv",
        rows,
        dev,
        f"one layer, forward+backward, B={B}, d_model={d}; nn.LSTM vs chapter 3 SelfAttention; median of repeats",
    )

    attn = AdditiveAttention(d, d, d).to(dev)
    rows = []
    for T in args.score_lengths:
        s = torch.randn(B, T, d, device=dev, requires_grad=True)
        h = torch.randn(B, T, d, device=dev, requires_grad=True)
        add_ms = time_ms(additive_all_queries, (attn, s, h), args.min_run_time)
        dot_ms = time_ms(dot_all_queries, (attn, s, h), args.min_run_time)
        rows.append(
            dict(
                T_q=T,
                T_k=T,
                B=B,
                A=d,
                device=dev,
                additive_ms=round(add_ms, 3),
                dot_ms=round(dot_ms, 3),
                ratio=round(add_ms / dot_ms, 1),
                additive_tanh_floats=B * T * T * d,
                dot_score_floats=B * T * T,
            )
        )
        print(rows[-1])
    write_results(
        RESULTS / f"ch03_additive_vs_dot_{dev}.csv",
        rows,
        dev,
        f"T_q = T_k queries and keys, forward+backward, B={B}, A=d_model={d}; chapter 2 additive vs chapter 3 "
        "dot-product attention; median of repeats",
    )


if __name__ == "__main__":
    main()
