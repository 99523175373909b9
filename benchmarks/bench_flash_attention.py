"""Benchmark: peak memory and time of naive vs tiled (FlashAttention-style) attention, forward + backward, on CPU.

Each configuration (implementation × sequence length T) runs in a *fresh* subprocess, so that one measurement
cannot inherit another's allocations or the allocator's cache. The child imports torch, makes q, k, v
(B = 1, H = 1, d_k = d_v = 64 by default; float32; causal mask), reads its resident memory (VmRSS from
/proc/self/status: the baseline), then runs forward + backward once. The parent reads the child's peak resident
memory from the kernel (``os.wait4`` → ``ru_maxrss``, the high-water mark of that one process) and records

    extra memory = peak RSS - baseline RSS,

the memory the attention itself needed on top of the interpreter, torch and the inputs. Time is the child's
wall-clock time for the one forward + backward (after one small warm-up call), so it is indicative only.

* naive: chapter 3's ``scaled_dot_product_attention`` (materialises the T × T scores and weights) + autograd;
* tiled: chapter 10's ``flash_attention`` (block_q = block_k = 256 by default; the backward recomputes).

Also checks, for the smaller lengths, that both give the same output (largest absolute difference).

    python -m benchmarks.bench_flash_attention                          # CPU, T = 1k ... 16k
    python -m benchmarks.bench_flash_attention --lengths 1024 2048      # quicker

Writes ``benchmarks/results/ch10_flash_attention_cpu.json``, which the book page reads.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def _rss_kib(field: str) -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(impl: str, T: int, d_k: int, block: int, compare: bool) -> None:
    """Run one configuration and print one JSON line (baseline RSS, time, and the output difference if asked)."""
    import torch

    from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
    from solutions.ch10_flash_attention import flash_attention

    torch.set_num_threads(1)

    def run(q, k, v):
        if impl == "naive":
            return scaled_dot_product_attention(q, k, v, causal_mask(q.shape[-2]))[0]
        return flash_attention(q, k, v, causal=True, block_q=block, block_k=block)

    small = [torch.randn(1, 1, 64, d_k, requires_grad=True) for _ in range(3)]
    run(*small).sum().backward()  # warm-up: lazy initialisation is not part of the measurement
    g = torch.Generator().manual_seed(T)
    q, k, v = (torch.randn(1, 1, T, d_k, generator=g).requires_grad_() for _ in range(3))
    baseline = _rss_kib("VmRSS")
    start = time.perf_counter()
    out = run(q, k, v)
    out.sum().backward()
    seconds = time.perf_counter() - start
    record = dict(baseline_kib=baseline, seconds=seconds)
    if compare:
        with torch.no_grad():
            other = scaled_dot_product_attention(q, k, v, causal_mask(T))[0]
            record["max_abs_diff_vs_naive"] = float((out - other).abs().max())
    print(json.dumps(record))


def measure(impl: str, T: int, d_k: int, block: int, compare: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.bench_flash_attention",
        "--child",
        impl,
        str(T),
        str(d_k),
        str(block),
        str(int(compare)),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: ru_maxrss is its peak RSS (KiB on Linux)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{impl} T={T} failed ({proc.returncode}): {stderr.decode()[-2000:]}")
    record = json.loads(stdout.decode().strip().splitlines()[-1])
    peak_kib = usage.ru_maxrss
    row = dict(
        impl=impl,
        T=T,
        d_k=d_k,
        block=block if impl == "tiled" else None,
        baseline_mib=round(record["baseline_kib"] / 1024, 1),
        peak_mib=round(peak_kib / 1024, 1),
        extra_mib=round((peak_kib - record["baseline_kib"]) / 1024, 1),
        seconds=round(record["seconds"], 3),
    )
    if "max_abs_diff_vs_naive" in record:
        row["max_abs_diff_vs_naive"] = record["max_abs_diff_vs_naive"]
    return row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument("--block", type=int, default=256, help="block_q = block_k of the tiled form")
    p.add_argument("--compare-up-to", type=int, default=4096, help="check the outputs agree for T up to this")
    p.add_argument("--naive-up-to", type=int, default=16384, help="skip the naive form above this T")
    p.add_argument("--out", default=str(RESULTS / "ch10_flash_attention_cpu.json"))
    p.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        impl, T, d_k, block, compare = args.child
        return child(impl, int(T), int(d_k), int(block), bool(int(compare)))
    rows = []
    for T in args.lengths:
        for impl in ("tiled", "naive"):
            if impl == "naive" and T > args.naive_up_to:
                continue
            rows.append(measure(impl, T, args.d_k, args.block, compare=False))
            if impl == "tiled" and T <= args.compare_up_to:  # in its own process: not part of the memory measured
                rows[-1]["max_abs_diff_vs_naive"] = measure(impl, T, args.d_k, args.block, compare=True)[
                    "max_abs_diff_vs_naive"
                ]
            print(rows[-1], flush=True)
    import torch

    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(
        measured=str(datetime.date.today()),
        machine=f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        torch=torch.__version__,
        threads=1,
        how="causal mask; float32; B = H = 1; forward + backward once in a fresh process per row; "
        "extra = peak RSS (os.wait4 ru_maxrss) - RSS after making q, k, v",
    )
    out.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
