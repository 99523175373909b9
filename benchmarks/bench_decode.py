"""Benchmark: one decode step of MHA, GQA, MQA and MLA against the context length — a step reads the whole cache.

Shazeer (2019) proposed multi-query attention because incremental decoding is bound by memory bandwidth: each
step does little arithmetic per number it loads, and it loads every cached key and value. This script measures
it with the chapter 8 modules, one attention layer of a 1k-wide model (``d_model`` 1024, 16 query heads of width
64, float32, batch 1):

* MHA, GQA, MQA: :class:`~solutions.ch08_kv_cache.GroupedQueryAttention` with 16, 4 and 1 key/value heads;
* MLA: :class:`~solutions.ch08_kv_cache.MultiHeadLatentAttention` with ``d_c = 4·d_head = 256``, ``d_rope = 32``.

One decode step = the projections of one new token, its query attending to ``T`` cached tokens plus itself, and
the output projection. The cache holds random keys and values (their content does not change the time); every
timed step starts from the same ``T`` cached tokens. Two forms of the step, on the same weights and the same cache,
checked to give the same output (``max_abs_diff``):

* ``module``: the modules' own ``forward(x, cache=KVCache)`` as the chapter writes them — ``KVCache.update``
  appends with ``torch.cat`` (a copy of the whole cache per step), ``repeat_kv`` copies the shared heads up to 16,
  and MLA up-projects every cached latent to per-head keys and values at every step;
* ``lean``: what an inference engine does — a preallocated cache written in place, each key/value head read
  once by its group of query heads (the queries of a group form the rows of one product), and MLA with
  ``W^UK`` absorbed into the query and ``W^UV`` applied after the attention (DeepSeek-AI 2024, section 2.1.2),
  so that attention runs on the cached latents directly.

Each round visits every length and, at each length, times every (variant, form) pair once, in an order that
rotates from round to round, so that a machine that gets busier slows them alike. The CSV gives the median seconds
per step over the rounds, tokens/s (its inverse), the rounds' fastest and slowest tokens/s, the median over the
rounds of the speed-up against the same round's MHA step of the same form, and the cache and weight bytes of the
layer (computed with ``kv_cache_bytes`` / ``mla_cache_bytes`` and from the parameters).

    python -m benchmarks.bench_decode                     # CPU, 1 thread, T = 256 ... 16384: about 2 minutes
    python -m benchmarks.bench_decode --device cuda --lengths 1024 4096 16384 65536
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import time

import torch

from benchmarks.results_io import write_results
from solutions.ch03_self_attention import scaled_dot_product_attention
from solutions.ch04_multi_head_attention import merge_heads, split_heads
from solutions.ch08_kv_cache import (
    GroupedQueryAttention,
    KVCache,
    MultiHeadLatentAttention,
    apply_rope,
    kv_cache_bytes,
    mla_cache_bytes,
    rope_angles,
)

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
D_MODEL, N_HEADS, D_HEAD = 1024, 16, 64
VARIANTS = {"MHA": 16, "GQA": 4, "MQA": 1, "MLA": None}  # key/value heads; None: the latent
D_C, D_ROPE = 4 * D_HEAD, D_HEAD // 2


def make_modules(device: torch.device, seed: int = 0) -> dict[str, torch.nn.Module]:
    """The four attention layers of the benchmark, seeded, in eval mode on ``device``."""
    torch.manual_seed(seed)
    modules: dict[str, torch.nn.Module] = {}
    for name, n_kv_heads in VARIANTS.items():
        if n_kv_heads is None:
            modules[name] = MultiHeadLatentAttention(D_MODEL, N_HEADS, d_c=D_C, d_head=D_HEAD, d_rope=D_ROPE)
        else:
            modules[name] = GroupedQueryAttention(D_MODEL, N_HEADS, n_kv_heads, d_head=D_HEAD)
    return {name: m.to(device).eval() for name, m in modules.items()}


def cache_bytes(name: str, T: int, bytes_per_element: int = 4) -> int:
    """Bytes of one layer's cache of ``T`` tokens for variant ``name`` (one sequence)."""
    n_kv_heads = VARIANTS[name]
    if n_kv_heads is None:
        return mla_cache_bytes(1, D_C, D_ROPE, T, bytes_per_element)
    return kv_cache_bytes(1, n_kv_heads, D_HEAD, T, bytes_per_element)


def random_cache(attn: torch.nn.Module, T: int, device: torch.device, seed: int = 1) -> torch.Tensor:
    """A preallocated cache of ``T + 1`` slots, the first ``T`` random: for GQA ``(2, B=1, H_kv, T + 1, d_head)``
    (keys, values), for MLA ``(B=1, T + 1, d_c + d_rope)`` (normalised latent | rotary key per token)."""
    g = torch.Generator(device=device).manual_seed(seed)
    if isinstance(attn, MultiHeadLatentAttention):
        buf = torch.zeros(1, T + 1, attn.d_c + attn.d_rope, device=device)
        buf[:, :T] = torch.randn(1, T, attn.d_c + attn.d_rope, generator=g, device=device)
        buf[:, :T, : attn.d_c] = attn.kv_norm(buf[:, :T, : attn.d_c])  # latents are cached after their RMS norm
        return buf
    assert isinstance(attn, GroupedQueryAttention)
    buf = torch.zeros(2, 1, attn.n_kv_heads, T + 1, attn.d_head, device=device)
    buf[:, :, :, :T] = torch.randn(2, 1, attn.n_kv_heads, T, attn.d_head, generator=g, device=device)
    return buf


def module_cache(attn: torch.nn.Module, buf: torch.Tensor, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``T`` cached tokens of ``buf`` as the two tensors a :class:`KVCache` holds for layer 0."""
    if isinstance(attn, MultiHeadLatentAttention):  # keys slot: c^KV (B, 1, T, d_c); values slot: k^R (B, 1, T, d_rope)
        return buf[:, None, :T, : attn.d_c].clone(), buf[:, None, :T, attn.d_c :].clone()
    return buf[0, :, :, :T].clone(), buf[1, :, :, :T].clone()  # (B, H_kv, T, d_head) each


@torch.no_grad()
def module_step(attn: torch.nn.Module, x: torch.Tensor, base: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """One decode step through the module's own cached forward, from the ``T`` cached tokens in ``base``."""
    cache = KVCache()
    cache.keys, cache.values = [base[0]], [base[1]]
    return attn(x, cache=cache)[0]  # (B, 1, d_model); the cache grew to T + 1 by torch.cat


@torch.no_grad()
def lean_gqa_step(attn: GroupedQueryAttention, x: torch.Tensor, buf: torch.Tensor, T: int) -> torch.Tensor:
    """One decode step of grouped-query attention that reads each cached key/value head once.

    ``x (B, 1, d_model)`` is the token at position ``T``; its key and value are written into slot ``T`` of
    ``buf (2, B, H_kv, T + 1, d_head)``. The ``g = H / H_kv`` query heads of group ``j`` (heads ``j·g … (j+1)·g -
    1``, the groups of ``repeat_kv``) become ``g`` query rows against key/value head ``j``: the same products as
    repeating the keys, without the copy. Returns ``(B, 1, d_model)``.
    """
    B, H, H_kv, d = x.shape[0], attn.n_heads, attn.n_kv_heads, attn.d_head
    q, k, v = attn.project(x, torch.arange(T, T + 1, device=x.device))  # (B, H, 1, d), (B, H_kv, 1, d) × 2
    buf[0, :, :, T : T + 1] = k  # in place: no copy of the cache
    buf[1, :, :, T : T + 1] = v
    q = q.reshape(B, H_kv, H // H_kv, d)  # (B, H_kv, g, d): a group's queries as rows
    heads, _ = scaled_dot_product_attention(q, buf[0, :, :, : T + 1], buf[1, :, :, : T + 1])  # (B, H_kv, g, d)
    return attn.W_o(merge_heads(heads.reshape(B, H, 1, d)))  # (B, 1, d_model)


@torch.no_grad()
def lean_mla_step(attn: MultiHeadLatentAttention, x: torch.Tensor, buf: torch.Tensor, T: int) -> torch.Tensor:
    r"""One decode step of MLA on the cached latents, with ``W^UK`` and ``W^UV`` absorbed (DeepSeek-V2, 2.1.2).

    Head ``h``'s score of cached token ``t`` is :math:`q^{C\top}_h W^{UK}_h c_t + q^{R\top}_h k^R_t`, so the
    query is mapped into the latent space once, :math:`\tilde q_h = W^{UK\top}_h q^C_h` (width ``d_c``), and all
    heads read the one cached row ``[c_t | k^R_t]``; the output of head ``h`` is :math:`W^{UV}_h \sum_t p_{ht}
    c_t`. ``x (B, 1, d_model)`` is the token at position ``T``; ``buf (B, T + 1, d_c + d_rope)`` gets its latent
    and rotary key in slot ``T``. Returns ``(B, 1, d_model)``, equal to the module's forward.
    """
    if attn.d_cq is not None:
        raise ValueError("lean_mla_step is written for queries without their own latent (d_cq=None)")
    B, H = x.shape[0], attn.n_heads
    angles = rope_angles(torch.arange(T, T + 1, device=x.device), attn.d_rope, attn.rope_theta)  # (1, d_rope/2)
    q = split_heads(attn.W_q(x), H)  # (B, H, 1, d_head + d_rope)
    q_c, q_r = q.split([attn.d_head, attn.d_rope], dim=-1)
    q_r = apply_rope(q_r, angles, interleaved=True)  # (B, H, 1, d_rope)
    buf[:, T, : attn.d_c] = attn.kv_norm(attn.W_dkv(x))[:, 0]  # c^KV of the new token, (B, d_c)
    buf[:, T, attn.d_c :] = apply_rope(attn.W_kr(x)[:, None], angles, interleaved=True)[:, 0, 0]  # k^R, (B, d_rope)
    W_uk = attn.W_uk.weight.view(H, attn.d_head, attn.d_c)  # W^{UK}_h: d_c -> d_head, per head
    q_latent = torch.einsum("bhd,hdc->bhc", q_c[:, :, 0], W_uk)  # (B, H, d_c): W^{UK}_h^T q^C_h
    q_all = torch.cat([q_latent, q_r[:, :, 0]], dim=-1)  # (B, H, d_c + d_rope): heads as rows
    cached = buf[:, : T + 1]  # (B, T + 1, d_c + d_rope), read once for all heads
    scores = q_all @ cached.transpose(-2, -1) / math.sqrt(attn.d_head + attn.d_rope)  # (B, H, T + 1)
    context = torch.softmax(scores, dim=-1) @ cached[..., : attn.d_c]  # (B, H, d_c): weighted latents
    W_uv = attn.W_uv.weight.view(H, attn.d_v, attn.d_c)  # W^{UV}_h: d_c -> d_v
    heads = torch.einsum("bhc,hvc->bhv", context, W_uv)  # (B, H, d_v)
    return attn.W_o(heads.reshape(B, 1, H * attn.d_v))  # (B, 1, d_model)


def lean_step(attn: torch.nn.Module, x: torch.Tensor, buf: torch.Tensor, T: int) -> torch.Tensor:
    """:func:`lean_mla_step` or :func:`lean_gqa_step`, whichever fits ``attn``."""
    if isinstance(attn, MultiHeadLatentAttention):
        return lean_mla_step(attn, x, buf, T)
    assert isinstance(attn, GroupedQueryAttention)
    return lean_gqa_step(attn, x, buf, T)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096, 8192, 16384])
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--sample_seconds", type=float, default=0.05, help="each timing repeats the step this long")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    return p.parse_args(argv)


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    modules = make_modules(device)
    x = torch.randn(1, 1, D_MODEL, generator=torch.Generator().manual_seed(2)).to(device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    pairs = [(name, form) for name in VARIANTS for form in ("lean", "module")]
    steps, repeats, diffs, keep = {}, {}, {}, []
    for T in args.lengths:  # every length's caches stay allocated: the rounds below visit all of them
        bufs = {name: random_cache(attn, T, device) for name, attn in modules.items()}
        bases = {name: module_cache(attn, bufs[name], T) for name, attn in modules.items()}
        keep.append((bufs, bases))
        for name in VARIANTS:
            steps[(T, name, "lean")] = lambda T=T, name=name, bufs=bufs: lean_step(modules[name], x, bufs[name], T)
            steps[(T, name, "module")] = lambda name=name, bases=bases: module_step(modules[name], x, bases[name])
        for name in VARIANTS:  # the two forms agree; warm-up, and how many steps fill one sample
            diffs[(T, name)] = float((steps[(T, name, "lean")]() - steps[(T, name, "module")]()).abs().max())
            for form in ("lean", "module"):
                sync()
                t0 = time.perf_counter()
                steps[(T, name, form)]()
                sync()
                repeats[(T, name, form)] = max(2, math.ceil(args.sample_seconds / (time.perf_counter() - t0)))
    seconds: dict[tuple, list[float]] = {key: [] for key in steps}
    for r in range(args.rounds):
        for T in args.lengths:
            order = pairs[r % len(pairs) :] + pairs[: r % len(pairs)]  # rotate: no pair always first or last
            for name, form in order:
                key, n = (T, name, form), repeats[(T, name, form)]
                sync()
                t0 = time.perf_counter()
                for _ in range(n):
                    steps[key]()
                sync()
                seconds[key].append((time.perf_counter() - t0) / n)
        print(f"round {r + 1}/{args.rounds}", flush=True)
    rows = []
    for T in args.lengths:
        for name, form in pairs:
            s = seconds[(T, name, form)]
            mha = seconds[(T, "MHA", form)]  # the same round's MHA step of the same form: measured side by side
            speedup = statistics.median(m / x for m, x in zip(mha, s))
            attn = modules[name]
            rows.append(
                {
                    "context_length": T,
                    "variant": name,
                    "form": form,
                    "n_kv_heads": VARIANTS[name] if VARIANTS[name] is not None else "",
                    "device": device.type,
                    "seconds_per_step": f"{statistics.median(s):.3e}",
                    "tokens_per_s": round(1 / statistics.median(s), 1),
                    "tokens_per_s_slowest_round": round(1 / max(s), 1),
                    "tokens_per_s_fastest_round": round(1 / min(s), 1),
                    "speedup_vs_mha": round(speedup, 2),
                    "steps_per_round": repeats[(T, name, form)],
                    "cache_bytes": cache_bytes(name, T),
                    "weight_bytes": sum(p.numel() * p.element_size() for p in attn.parameters()),
                    "max_abs_diff_lean_vs_module": f"{diffs[(T, name)]:.1e}",
                }
            )
            print({k: rows[-1][k] for k in ("context_length", "variant", "form", "tokens_per_s", "speedup_vs_mha")})
    worst = max(float(r["max_abs_diff_lean_vs_module"]) for r in rows)
    if worst > 1e-3:
        raise AssertionError(f"the lean and module steps differ by {worst:.1e}")
    how = (
        f"one attention layer, d_model {D_MODEL}, {N_HEADS} query heads x {D_HEAD}, float32, batch 1; "
        f"MHA/GQA/MQA = GroupedQueryAttention with 16/4/1 kv heads, MLA d_c {D_C}, d_rope {D_ROPE}; one decode step "
        f"over T cached tokens; median of {args.rounds} rounds, each visiting every length and variant (rotating order)"
    )
    write_results(RESULTS / f"ch08_decode_{device.type}.csv", rows, device.type, how)
    return rows


if __name__ == "__main__":
    main()
