"""Benchmark: four forms of multi-head self-attention, forward + backward, measured side by side in one run.

* ``teaching``   — :class:`MultiHeadAttention`: three projections, chapter 3's explicit attention;
* ``fused``      — :class:`FusedMultiHeadSelfAttention`: one ``W_qkv`` projection, chapter 3's attention;
* ``fused_sdpa`` — the same with ``F.scaled_dot_product_attention`` (fused kernel, no weight matrix);
* ``torch_mha``  — ``torch.nn.MultiheadAttention(batch_first=True, need_weights=False)``.

All four hold the same weights and see the same input and causal mask. The variants are timed in interleaved
rounds (round r times every variant once), so a machine that gets busier during the run slows them alike; the
table gives the median per variant and the ratio to ``torch_mha`` (higher = slower). Writes a CSV under
``benchmarks/results/`` that the book page reads.

    python -m benchmarks.bench_multi_head_attention --threads 1               # CPU, scaled-down sizes
    python -m benchmarks.bench_multi_head_attention --device cuda --sizes 8,1024,768,12 16,1024,768,12
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import torch
from torch import nn

from benchmarks.results_io import write_results
from solutions.ch03_self_attention import causal_mask
from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention, MultiHeadAttention
from solutions.interop import copy_fused_from_torch, copy_mha_from_torch

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
VARIANTS = ("teaching", "fused", "fused_sdpa", "torch_mha")


def make_variants(d_model: int, n_heads: int, device, dtype):
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device, dtype)
    teaching = copy_mha_from_torch(MultiHeadAttention(d_model, n_heads).to(device, dtype), theirs)
    fused = copy_fused_from_torch(FusedMultiHeadSelfAttention(d_model, n_heads).to(device, dtype), theirs)
    return {
        "teaching": lambda x, m: teaching(x, x, x, m)[0],
        "fused": lambda x, m: fused(x, m)[0],
        "fused_sdpa": lambda x, m: fused(x, m, use_sdpa=True)[0],
        "torch_mha": lambda x, m: theirs(x, x, x, attn_mask=~m, need_weights=False)[0],
    }


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument(
        "--sizes",
        nargs="+",
        default=["8,128,256,4", "4,256,384,6", "2,512,768,12"],
        help="B,T,d_model,H per size (the issue's GPU size: 8,1024,768,12)",
    )
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median over them)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for torch (1 on a shared machine)")
    p.add_argument(
        "--out", default=None, help="CSV path (default: benchmarks/results/ch04_multi_head_attention_<device>.csv)"
    )
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    rows = []
    for size in args.sizes:
        B, T, d_model, H = map(int, size.split(","))
        fns = make_variants(d_model, H, args.device, dtype)
        x = torch.randn(B, T, d_model, device=args.device, dtype=dtype, requires_grad=True)
        mask = causal_mask(T, device=args.device)
        times = {name: [] for name in VARIANTS}
        for r in range(args.rounds + 1):  # round 0 is a warm-up
            for name in VARIANTS:
                sync(args.device)
                t0 = time.perf_counter()
                fns[name](x, mask).sum().backward()
                sync(args.device)
                if r:
                    times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
        row = dict(B=B, T=T, d_model=d_model, H=H, dtype=args.dtype, device=args.device)
        row.update({f"{n}_ms": round(med[n], 2) for n in VARIANTS})
        row.update({f"{n}_ratio": round(med[n] / med["torch_mha"], 2) for n in VARIANTS})
        rows.append(row)
        print(row, flush=True)
    out = pathlib.Path(args.out) if args.out else RESULTS / f"ch04_multi_head_attention_{args.device}.csv"
    write_results(
        out,
        rows,
        args.device,
        f"causal mask; forward+backward; median of {args.rounds} interleaved rounds; ratio = time / torch_mha time",
    )


if __name__ == "__main__":
    main()
