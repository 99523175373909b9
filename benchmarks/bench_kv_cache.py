"""Benchmark: greedy generation with and without the KV cache, chapter 6's GPT, side by side in one run.

The model has the chapter 6 yardstick's sizes (4 layers, 4 heads, d_model 128, 94 characters) with random
weights. Two position tables:

* ``context_length = prompt + 1024``: every generated token fits in the window, so the cache is used at every
  step (prefill once, then one token per step) — the regime the cache is for;
* ``context_length = 64`` (the trained checkpoint's): past 64 tokens chapter 6's ``generate`` crops the window and
  restarts the learned positions at 0, every cached key is stale, and the exact cached generation recomputes the
  window at each step — no faster than without a cache.

Both paths produce the same tokens (asserted here too). Each round times every (length, variant) pair once, so
a machine that gets busier slows them alike; the CSV gives the median tokens/s of the rounds and the ratio
cached / uncached. Also: the cache's bytes at the end of generation, measured from the tensors.

    python -m benchmarks.bench_kv_cache --threads 1                  # ~5 min on a laptop core
    python -m benchmarks.bench_kv_cache --device cuda --rounds 5
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import time

import torch

from benchmarks.results_io import write_results
from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.ch08_kv_cache import CachedGPT

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--new_tokens", type=int, nargs="+", default=[128, 512, 1024])
    p.add_argument("--prompt", type=int, default=16, help="prompt length in tokens")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    return p.parse_args(argv)


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    sizes = dict(vocab_size=94, n_layers=4, n_heads=4, d_model=128)
    prompt = torch.randint(94, (1, args.prompt), generator=torch.Generator().manual_seed(0)).to(device)
    long_context = args.prompt + max(args.new_tokens)
    cases = [(long_context, n) for n in args.new_tokens] + [(64, max(min(args.new_tokens), 128))]
    models = {}
    for context_length in {c for c, _ in cases}:
        torch.manual_seed(0)
        models[context_length] = GPT(GPTConfig(context_length=context_length, **sizes)).to(device).eval()

    def run(context_length, n, cached):
        model = models[context_length]
        wrapped = CachedGPT(model) if cached else model
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = generate(wrapped, prompt, n, temperature=0.0)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out, wrapped

    times = {(c, n, cached): [] for c, n in cases for cached in (False, True)}
    cache_bytes = {}
    for r in range(args.rounds):
        for c, n in cases:
            seconds_plain, out_plain, _ = run(c, n, cached=False)
            seconds_cached, out_cached, wrapped = run(c, n, cached=True)
            if not torch.equal(out_plain, out_cached):
                raise AssertionError(f"context {c}, {n} new tokens: cached and uncached tokens differ")
            times[(c, n, False)].append(seconds_plain)
            times[(c, n, True)].append(seconds_cached)
            cache_bytes[(c, n)] = wrapped.cache.nbytes()
            print(
                f"round {r}: context {c:5d}, {n:5d} new: {seconds_plain:7.2f} s without, {seconds_cached:6.2f} s with"
            )
    rows = []
    for c, n in cases:
        plain = n / statistics.median(times[(c, n, False)])
        cached = n / statistics.median(times[(c, n, True)])
        rows.append(
            {
                "context_length": c,
                "prompt": args.prompt,
                "new_tokens": n,
                "device": device.type,
                "tokens_per_s_no_cache": round(plain, 1),
                "tokens_per_s_kv_cache": round(cached, 1),
                "speedup": round(cached / plain, 2),
                "cache_bytes_at_end": cache_bytes[(c, n)],
            }
        )
        print(rows[-1])
    how = (
        f"chapter 6 sizes (4 layers, 4 heads, d_model 128), random weights, greedy, batch 1, prompt {args.prompt}; "
        f"median of {args.rounds} interleaved rounds; identical tokens checked"
    )
    write_results(RESULTS / f"ch08_kv_cache_{device.type}.csv", rows, device.type, how)
    return rows


if __name__ == "__main__":
    main()
