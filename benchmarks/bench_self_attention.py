"""Benchmark: the course's scaled_dot_product_attention against torch.nn.functional.scaled_dot_product_attention.

Forward + backward on the same inputs, at several sequence lengths, measured side by side in one run with
torch.utils.benchmark (which handles warm-up, CUDA synchronisation and repeats). Reports the ratio
ours / PyTorch (higher = the teaching code is slower). Writes a CSV under benchmarks/results/ that the book
page reads.

    python -m benchmarks.bench_self_attention                 # CPU, default sizes
    python -m benchmarks.bench_self_attention --device cuda   # on a GPU
"""

from __future__ import annotations

import argparse
import pathlib

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from benchmarks.results_io import write_results
from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def fwd_bwd(fn, q, k, v, mask):
    out = fn(q, k, v, mask)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()


def ours(q, k, v, mask):
    return scaled_dot_product_attention(q, k, v, mask)


def torch_sdpa(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch (default: torch's choice). Use 1 on a machine shared with other work: "
        "torch's thread pool slows down badly when its cores are busy",
    )
    p.add_argument("--min-run-time", type=float, default=1.0, help="seconds per measurement")
    p.add_argument(
        "--out", default=None, help="CSV path (default: benchmarks/results/ch03_self_attention_<device>.csv)"
    )
    args = p.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for T in args.lengths:
        g = torch.Generator().manual_seed(T)
        q, k, v = (
            torch.randn(args.batch, args.heads, T, args.d_k, generator=g).to(args.device, dtype).requires_grad_()
            for _ in range(3)
        )
        mask = causal_mask(T, device=args.device)
        times = {}
        for name, fn in (("ours", ours), ("torch_sdpa", torch_sdpa)):  # same inputs, one after the other
            t = benchmark.Timer(
                "fwd_bwd(fn, q, k, v, mask)",
                globals=dict(fwd_bwd=fwd_bwd, fn=fn, q=q, k=k, v=v, mask=mask),
                num_threads=torch.get_num_threads(),
            )
            times[name] = t.blocked_autorange(min_run_time=args.min_run_time).median * 1e3
        rows.append(
            dict(
                T=T,
                B=args.batch,
                H=args.heads,
                d_k=args.d_k,
                dtype=args.dtype,
                device=args.device,
                ours_ms=round(times["ours"], 3),
                torch_sdpa_ms=round(times["torch_sdpa"], 3),
                ratio=round(times["ours"] / times["torch_sdpa"], 2),
            )
        )
        print(rows[-1])
    out = pathlib.Path(args.out) if args.out else RESULTS / f"ch03_self_attention_{args.device}.csv"
    write_results(out, rows, args.device, "causal mask; forward+backward; median of repeated runs")


if __name__ == "__main__":
    main()
