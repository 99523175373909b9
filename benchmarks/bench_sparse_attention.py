"""Benchmark: blocked sliding-window attention against dense attention under the window mask, on the CPU.

For each method and sequence length T, a fresh Python process builds q, k, v of shape (1, 1, T, d_k), runs the
forward pass (no gradients) once to warm up and then ``--repeats`` times, and reports the fastest time and its
peak resident memory (``ru_maxrss``) above what it held once the inputs existed. One process per configuration,
so that one measurement's memory high-water mark cannot hide another's. Dense attention is chapter 3's
``scaled_dot_product_attention`` under chapter 9's ``sliding_window_mask`` (it builds the T x T mask, scores and
weights); blocked is ``sliding_window_attention``. Writes ``benchmarks/results/ch09_sparse_attention_cpu.json``,
which the book page reads.

    python -m benchmarks.bench_sparse_attention                       # T = 512 ... 16384, dense up to 8192
    python -m benchmarks.bench_sparse_attention --dense-max 16384     # dense too at 16k (needs ~6 GB)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def _one(method: str, T: int, window: int, d_k: int, repeats: int) -> dict:
    """Run in the child process: measure one (method, T)."""
    import torch

    from solutions.ch03_self_attention import scaled_dot_product_attention
    from solutions.ch09_sparse_attention import sliding_window_attention, sliding_window_mask

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, T, d_k, generator=g) for _ in range(3))

    def run():
        if method == "dense":
            return scaled_dot_product_attention(q, k, v, sliding_window_mask(T, window))[0]
        return sliding_window_attention(q, k, v, window)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    times = []
    with torch.no_grad():
        for _ in range(repeats + 1):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"method": method, "T": T, "seconds": min(times[1:]), "peak_rss_mib": round((peak - before) / 1024, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--window", type=int, default=128, help="one-sided window w (causal: w + 1 keys per query)")
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dense-max", type=int, default=8192, help="longest T measured for dense attention")
    p.add_argument("--one", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)  # the child process
    p.add_argument("--out", default=str(RESULTS / "ch09_sparse_attention_cpu.json"))
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(_one(args.one[0], int(args.one[1]), args.window, args.d_k, args.repeats)))
        return
    rows = []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for T in args.lengths:
        for method in ("blocked", "dense"):
            if method == "dense" and T > args.dense_max:
                continue
            child = [
                sys.executable,
                "-m",
                "benchmarks.bench_sparse_attention",
                "--one",
                method,
                str(T),
                "--window",
                str(args.window),
            ]
            child += ["--d-k", str(args.d_k), "--repeats", str(args.repeats)]
            out = subprocess.run(child, env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    import torch

    record = {
        "measured": str(datetime.date.today()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), 1 thread",
        "torch": torch.__version__,
        "how": (
            f"forward only, no gradients, q/k/v (1, 1, T, {args.d_k}) float32, causal window w = {args.window}; "
            f"fastest of {args.repeats} runs after a warm-up; peak RSS of a fresh process above its inputs; "
            f"dense measured up to T = {args.dense_max}"
        ),
        "config": {"window": args.window, "d_k": args.d_k, "repeats": args.repeats, "dense_max": args.dense_max},
        "rows": rows,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
