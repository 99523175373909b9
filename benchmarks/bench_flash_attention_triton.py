"""Benchmark (GPU only): chapter 11's Triton FlashAttention against ``F.scaled_dot_product_attention`` and the naive form.

Three implementations of a causal attention, forward and backward, ``B = 4``, ``H = 8``, ``d_k = d_v = 64`` by
default, float16:

* triton: chapter 11's ``flash_attention_triton`` (its kernels, 64 × 64 blocks; the backward recomputes);
* sdpa: PyTorch's ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` (on a GPU its FlashAttention-2 or
  memory-efficient kernel);
* naive: chapter 3's ``scaled_dot_product_attention`` with ``causal_mask(T)`` (materialises the ``T × T`` scores and
  weights) and autograd.

Time is the median of ``triton.testing.do_bench`` (CUDA events, the L2 cache flushed before each call), forward +
backward, in milliseconds; the script also records the largest absolute difference of each output from the sdpa
output. Without a CUDA device it prints that there is nothing to measure and exits 0 (the kernels' correctness on a
CPU is tested under Triton's interpreter in ``tests/test_ch11_flash_attention_triton.py``; timing the interpreter
would measure numpy, not the algorithm).

    python -m benchmarks.bench_flash_attention_triton                      # T = 1k ... 8k, float16
    python -m benchmarks.bench_flash_attention_triton --lengths 1024 2048

Writes ``benchmarks/results/ch11_flash_attention_triton_cuda.json``, which the book page reads when it exists.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
IMPLS = ("triton", "sdpa", "naive")


def _attention(impl: str):
    from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
    from solutions.ch11_flash_attention_triton import flash_attention_triton

    if impl == "triton":
        return lambda q, k, v: flash_attention_triton(q, k, v, causal=True, block_q=64, block_k=64)
    if impl == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if impl == "naive":
        return lambda q, k, v: scaled_dot_product_attention(q, k, v, causal_mask(q.shape[-2], device=q.device))[0]
    raise ValueError(f"unknown implementation {impl!r}; expected one of {IMPLS}")


def run(
    lengths: list[int], dtype: torch.dtype = torch.float16, d: int = 64, B: int = 4, H: int = 8, rounds: int = 5
) -> list[dict]:
    """Time forward + backward of each implementation at each length on the current CUDA device.

    Returns:
        One dict per (implementation, length): ``impl``, ``T``, ``ms`` (median over ``rounds`` of
        ``triton.testing.do_bench``), ``max_abs_diff`` (from sdpa's output).

    Raises:
        RuntimeError: without a CUDA device.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("the benchmark needs a CUDA device")
    import triton.testing

    rows = []
    g = torch.Generator(device="cuda").manual_seed(0)
    for T in lengths:
        q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=dtype, generator=g, requires_grad=True) for _ in "qkv")
        do = torch.randn(B, H, T, d, device="cuda", dtype=dtype, generator=g)
        reference = _attention("sdpa")(q, k, v).detach()
        for impl in IMPLS:
            fn = _attention(impl)

            def step(fn=fn, q=q, k=k, v=v, do=do):
                torch.autograd.grad(fn(q, k, v), (q, k, v), do)

            try:
                diff = (fn(q, k, v).detach().float() - reference.float()).abs().max().item()
                times = [triton.testing.do_bench(step, return_mode="median") for _ in range(rounds)]
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                continue  # the naive form's T × T tables no longer fit
            rows.append({"impl": impl, "T": T, "ms": statistics.median(times), "max_abs_diff": diff})
            print(f"T = {T:6d}  {impl:7s} {rows[-1]['ms']:9.3f} ms  max |o - sdpa| = {diff:.1e}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_flash_attention_triton", description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--dtype", choices=["float16", "bfloat16", "float32"], default="float16")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (the kernels are checked on a CPU under Triton's interpreter)")
        return 0
    rows = run(args.lengths, dtype=getattr(torch, args.dtype), rounds=args.rounds)
    import triton

    meta = {
        "measured": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "dtype": args.dtype,
        "how": "median of triton.testing.do_bench (forward + backward, causal, B = 4, H = 8, d = 64)",
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "ch11_flash_attention_triton_cuda.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print("wrote", out.relative_to(RESULTS.parent.parent))
    return 0


if __name__ == "__main__":
    sys.exit(main())
