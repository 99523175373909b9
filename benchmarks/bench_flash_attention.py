"""Benchmark: memory that attention allocates, and time, of naive, tiled and PyTorch's fused attention (fwd + bwd).

Three implementations of a causal attention (B = H = 1, d_k = d_v = 64 by default, float32), forward and backward:

* naive: chapter 3's ``scaled_dot_product_attention`` with ``causal_mask(T)`` (materialises the T × T scores and
  weights) + autograd;
* tiled: chapter 10's ``flash_attention`` (block_q = block_k = 256 by default; the backward recomputes);
* sdpa: PyTorch's own ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` (on a CPU its fused
  FlashAttention-style kernel, ``aten::_scaled_dot_product_flash_attention_for_cpu``).

**Memory** is what the call allocates, not what the process holds. On a CPU the call runs once under
``torch.profiler.profile(profile_memory=True)``, which records every allocation and free of PyTorch's CPU allocator
in order; the running sum of those made during the call, at its highest, is the peak (the inputs q, k, v exist
before the call and are not counted; the output and the gradients are). On CUDA it is
``torch.cuda.max_memory_allocated()`` minus the memory allocated before the call. Neither depends on how the C
allocator (glibc's ``malloc``) caches freed blocks. Peak resident memory (RSS), which this script measured before,
does: glibc raises its mmap threshold up to 32 MiB as large blocks are freed, and keeps freed blocks below it in
its heap, so the 16 MiB T × T tables at T = 2048 stayed resident after being freed and added up (121 MiB of RSS
where 61 MiB are allocated at the peak), while the 64 MiB ones at T = 4096 are returned to the system at once —
the RSS only doubled from 2048 to 4096. With ``MALLOC_MMAP_THRESHOLD_=131072`` (a fixed threshold) the RSS agrees
with the allocations to within 2 MiB (T = 1024 … 4096).

**Time** is the median wall-clock time of forward + backward over ``--rounds`` rounds, without the profiler; each
round times every implementation at a length once, one after the other in an order that rotates with the round
(one warm-up call per implementation and length first). Also checks, for the smaller lengths, that the three give
the same output (largest absolute difference from the naive form).

    python -m benchmarks.bench_flash_attention                          # CPU, T = 1k ... 16k: 2-3 minutes
    python -m benchmarks.bench_flash_attention --lengths 1024 2048      # quicker

Writes ``benchmarks/results/ch10_flash_attention_<device>.json``, which the book page reads.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import pathlib
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from solutions.ch03_self_attention import causal_mask, scaled_dot_product_attention
from solutions.ch10_flash_attention import flash_attention

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
IMPLS = ("naive", "tiled", "sdpa")


def attention(impl: str, block: int) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    """The causal attention ``(q, k, v) -> o`` of implementation ``impl`` (``naive``, ``tiled`` or ``sdpa``)."""
    if impl == "naive":
        return lambda q, k, v: scaled_dot_product_attention(q, k, v, causal_mask(q.shape[-2], device=q.device))[0]
    if impl == "tiled":
        return lambda q, k, v: flash_attention(q, k, v, causal=True, block_q=block, block_k=block)
    if impl == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    raise ValueError(f"unknown implementation {impl!r}; expected one of {IMPLS}")


def peak_allocated_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak bytes allocated by PyTorch while ``fn()`` runs, above what was allocated before it (see the module doc).

    CPU: the highest running sum of the ``[memory]`` events (+bytes allocated, -bytes freed) that
    ``torch.profiler`` records during the call, in time order. ``fn`` must not free what existed before it: the
    profiler leaves out the free of a block allocated before profiling started, unless an earlier profiled call
    allocated it, and then that free would lower the sum (:func:`clear_grads` runs outside). CUDA:
    ``torch.cuda.max_memory_allocated`` minus ``torch.cuda.memory_allocated`` before the call.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()  # type: ignore[union-attr]
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def make_inputs(T: int, d_k: int, device: torch.device) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(T)
    return [torch.randn(1, 1, T, d_k, generator=g).to(device).requires_grad_() for _ in range(3)]


def clear_grads(qkv: list[torch.Tensor]) -> None:
    """Free the gradients of the previous call *before* the next is measured: a block freed during a profiled call
    that an earlier profiled call allocated is reported as a free and would lower the sum."""
    for t in qkv:
        t.grad = None


def forward_backward(fn, qkv: list[torch.Tensor]) -> None:
    fn(*qkv).sum().backward()  # the gradients of q, k, v are allocated here, and counted


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    p.add_argument("--d-k", type=int, default=64)
    p.add_argument("--block", type=int, default=256, help="block_q = block_k of the tiled form")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds; memory is measured once (it is exact)")
    p.add_argument("--compare-up-to", type=int, default=4096, help="check the outputs agree for T up to this")
    p.add_argument("--naive-up-to", type=int, default=8192, help="skip the naive form above this T")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="default: benchmarks/results/ch10_flash_attention_<device>.json")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    rows = []
    for T in args.lengths:
        impls = [impl for impl in IMPLS if impl != "naive" or T <= args.naive_up_to]
        fns = {impl: attention(impl, args.block) for impl in impls}
        qkv = make_inputs(T, args.d_k, device)
        for impl in impls:  # warm-up: lazy initialisation is not part of any measurement
            clear_grads(qkv)
            forward_backward(fns[impl], qkv)
        sync()
        peaks = {}
        for impl in impls:
            clear_grads(qkv)
            peaks[impl] = peak_allocated_bytes(functools.partial(forward_backward, fns[impl], qkv), device)
        seconds: dict[str, list[float]] = {impl: [] for impl in impls}
        for r in range(args.rounds):
            for impl in impls[r % len(impls) :] + impls[: r % len(impls)]:
                clear_grads(qkv)
                sync()
                start = time.perf_counter()
                forward_backward(fns[impl], qkv)
                sync()
                seconds[impl].append(time.perf_counter() - start)
        diffs = {}
        if T <= args.compare_up_to:
            with torch.no_grad():
                reference = fns["naive"](*qkv)
                diffs = {impl: float((fns[impl](*qkv) - reference).abs().max()) for impl in impls if impl != "naive"}
        for impl in impls:
            row = dict(
                impl=impl,
                T=T,
                d_k=args.d_k,
                block=args.block if impl == "tiled" else None,
                peak_alloc_mib=round(peaks[impl] / 2**20, 2),
                peak_alloc_bytes=peaks[impl],
                seconds=round(statistics.median(seconds[impl]), 4),
                seconds_all_rounds=[round(s, 4) for s in seconds[impl]],
            )
            if impl in diffs:
                row["max_abs_diff_vs_naive"] = diffs[impl]
            rows.append(row)
            print(row, flush=True)

    out = pathlib.Path(args.out or RESULTS / f"ch10_flash_attention_{device.type}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
        if device.type == "cpu"
        else torch.cuda.get_device_name(device)
    )
    method = (
        "peak of the allocations made during the call (torch.profiler profile_memory events; the inputs q, k, v "
        "not counted)"
        if device.type == "cpu"
        else "torch.cuda.max_memory_allocated minus the memory allocated before the call"
    )
    meta = dict(
        measured=str(datetime.date.today()),
        machine=machine,
        device=device.type,
        torch=torch.__version__,
        threads=args.threads,
        how=f"causal; float32; B = H = 1, d_k = {args.d_k}; forward + backward; memory = {method}; "
        f"time = median of {args.rounds} interleaved rounds",
    )
    out.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
