"""Benchmark: a causal sliding window four ways — FlexAttention eager and compiled, SDPA with a dense mask, chapter 9.

For each method and sequence length T, a fresh Python process builds q, k, v of shape (1, H, T, d_k) and runs the
forward pass (no gradients):

* ``flex_eager``: ``flex_attention(q, k, v, block_mask=...)`` without compiling (it materialises the scores);
* ``flex_compiled``: ``torch.compile(flex_attention)`` — its first call (the compile) is timed on its own;
* ``sdpa_dense``: ``F.scaled_dot_product_attention`` under chapter 9's ``(T, T)`` boolean ``sliding_window_mask``,
  built once before the timed calls (its construction is timed and sized on its own: ``dense_mask_seconds``,
  ``dense_mask_mib``; built inside the call, its int64 ``i - j`` and ``.abs()`` — 2·8·T² bytes — dominated the
  column's memory);
* ``ch09_blocked``: chapter 9's ``sliding_window_attention`` (blocks and slabs, ``O(T·w)`` memory).

The block mask comes from chapter 12's ``sliding_window`` mask_mod; its creation is timed separately. Each method
runs once to warm up (compile included), then ``--repeats`` times; the fastest time is reported, and the peak
resident memory during those runs above what the process held before them (Linux: ``/proc/self/clear_refs``
resets the high-water mark ``VmHWM`` after the warm-up, so the compile's own memory is not counted; glibc's mmap
threshold is fixed at 128 KiB, so that a block freed after the warm-up leaves the process and its reuse shows). Writes
``benchmarks/results/flex_attention_cpu.json``, which the book page reads; the page never compiles.

    python -m benchmarks.bench_flex_attention                    # CPU: T = 512 ... 4096, about 5 minutes
    python -m benchmarks.bench_flex_attention --device cuda      # a GPU: flex_attention_cuda.json (Triton kernel)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
ROOT = pathlib.Path(__file__).resolve().parent.parent
METHODS = ("flex_eager", "flex_compiled", "sdpa_dense", "ch09_blocked")


def _hwm_kib() -> int:
    """Peak resident memory of this process (KiB), from /proc/self/status."""
    return int(re.search(r"VmHWM:\s+(\d+)", pathlib.Path("/proc/self/status").read_text()).group(1))  # type: ignore[union-attr]


def _rss_kib() -> int:
    return int(re.search(r"VmRSS:\s+(\d+)", pathlib.Path("/proc/self/status").read_text()).group(1))  # type: ignore[union-attr]


def measure(method: str, T: int, *, window: int, n_heads: int, d_k: int, repeats: int, device: str) -> dict:
    """Measure one (method, T) in this process: seconds (fastest), compile seconds, peak memory in MiB."""
    import warnings

    import torch
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from solutions.ch09_sparse_attention import sliding_window_attention, sliding_window_mask
    from solutions.ch12_flex_attention import sliding_window

    warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
    if device == "cpu":
        torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n_heads, T, d_k, generator=g).to(device) for _ in range(3))
    start = time.perf_counter()
    block_mask = create_block_mask(sliding_window(window), None, None, T, T, device=device)
    block_mask_seconds = time.perf_counter() - start
    compiled = torch.compile(flex_attention) if method == "flex_compiled" else None
    dense_mask = dense_mask_seconds = dense_mask_mib = None
    if method == "sdpa_dense":
        # Built outside the timed calls: what SDPA itself costs, not the (T, T) mask's construction.
        before_mask = _rss_kib() if device == "cpu" else 0
        if device == "cpu":
            pathlib.Path("/proc/self/clear_refs").write_text("5")
        start = time.perf_counter()
        dense_mask = sliding_window_mask(T, window, device=device)
        dense_mask_seconds = time.perf_counter() - start
        dense_mask_mib = round((_hwm_kib() - before_mask) / 1024, 1) if device == "cpu" else None

    def run():
        if method == "flex_eager":
            return flex_attention(q, k, v, block_mask=block_mask)
        if method == "flex_compiled":
            return compiled(q, k, v, block_mask=block_mask)  # type: ignore[misc]
        if method == "sdpa_dense":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=dense_mask)
        return sliding_window_attention(q, k, v, window)

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    with torch.no_grad():
        start = time.perf_counter()
        run()
        sync()
        first_call = time.perf_counter() - start
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        else:
            before = _rss_kib()
            pathlib.Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - start)
        if device == "cuda":
            peak_mib = (torch.cuda.max_memory_allocated() - before) / 2**20
        else:
            peak_mib = (_hwm_kib() - before) / 1024
    return {
        "method": method,
        "T": T,
        "seconds": min(times),
        "first_call_seconds": first_call,
        "compile_seconds": first_call - min(times) if method == "flex_compiled" else None,
        "peak_mib": round(max(peak_mib, 0.0), 1),
        "block_mask_seconds": block_mask_seconds,
        "sparsity": block_mask.sparsity(),
        "dense_mask_seconds": dense_mask_seconds,
        "dense_mask_mib": dense_mask_mib,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    p.add_argument("--window", type=int, default=64, help="one-sided causal window w (w + 1 keys per query)")
    p.add_argument("--n-heads", type=int, default=4)
    p.add_argument("--d-k", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--one", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)  # the child process
    p.add_argument("--out", default=None, help="default: benchmarks/results/flex_attention_<device>.json")
    args = p.parse_args(argv)
    settings = dict(window=args.window, n_heads=args.n_heads, d_k=args.d_k, repeats=args.repeats, device=args.device)
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), **settings)))
        return
    rows = []
    # A fixed mmap threshold: glibc's malloc then returns every block of 128 KiB or more to the system when it is freed
    # (its default raises the threshold after the warm-up's frees and keeps such blocks for reuse, so later peaks
    # would not show in the resident-memory high-water mark; chapter 9's blocked form read 0 MiB at T = 4096).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "131072"}
    for T in args.lengths:
        for method in args.methods:
            child = [sys.executable, "-m", "benchmarks.bench_flex_attention", "--one", method, str(T)]
            child += ["--window", str(args.window), "--n-heads", str(args.n_heads), "--d-k", str(args.d_k)]
            child += ["--repeats", str(args.repeats), "--device", args.device]
            out = subprocess.run(child, env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    import torch

    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared), 1 thread"
        if args.device == "cpu"
        else torch.cuda.get_device_name()
    )
    record = {
        "measured": str(datetime.date.today()),
        "machine": machine,
        "torch": torch.__version__,
        "how": (
            f"forward only, no gradients, q/k/v (1, {args.n_heads}, T, {args.d_k}) float32, causal window "
            f"w = {args.window}; fastest of {args.repeats} runs after a warm-up (the compile, for flex_compiled); "
            "peak resident memory during the timed runs above what the process held before them, glibc's mmap "
            "threshold fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_) so that freed blocks leave the process; "
            "sdpa_dense's (T, T) boolean mask built before the timed runs (its construction: dense_mask_seconds, "
            "dense_mask_mib, the peak resident memory while building it)"
        ),
        "config": {k: v for k, v in settings.items()},
        "rows": rows,
    }
    out = pathlib.Path(args.out or RESULTS / f"flex_attention_{args.device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
