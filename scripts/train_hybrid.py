"""Chapter 14's measurements: a small hybrid next to chapter 6's GPT, and the recall task (MQAR).

    python -m scripts.train_hybrid                 # every part, one CPU thread: about 12 CPU-minutes
    python -m scripts.train_hybrid --parts mqar --mqar_pairs 8    # one part, one setting

Three parts, each writing its own file under ``--out`` (default ``results/ch14_linear_attention/``), read by the
book page instead of training:

* ``lm`` -> ``hybrid_lm.json`` (+ ``gpt.pt``, ``hybrid.pt``): chapter 6's GPT and ``hybrid_gpt(config,
  full_attention_interval=4)`` (three Gated DeltaNet layers in every four) trained side by side on chapter 6's
  character-level Python documentation — same sizes, seed, batches and schedule; loss curves, parameters,
  throughput. The checkpoints and the results are written as soon as each model is trained.
* ``decode`` -> ``decode.json``: the two trained models decode with a cache (chapter 8's KV cache for softmax
  layers, the recurrent state for linear ones); the logits are checked against each model's full forward pass.
  Then two untrained models of the same widths but a ``--decode_context``-token position table decode that many
  tokens greedily, ``--decode_repeats`` times: milliseconds per token (each window's fastest run) and the bytes held (from the tensors, and from ``decode_state_bytes``)
  along the way. Decode time does not depend on the weights' values.
* ``mqar`` -> ``mqar_<n_pairs>.json``: multi-query associative recall (Arora et al. 2023) with ``--mqar_pairs``
  key-value pairs: two-layer models with a token shift in front (:class:`RecallModel`) that differ only in their
  attention layers (softmax, linear, DeltaNet, Gated DeltaNet), trained from the same seed on the same fresh
  batches; accuracy on held-out rows at the query positions.

Every file records its arguments, seeds, machine, torch version and date. The decoding path for the hybrid is
written here (the module's layers compute whole sequences); its logits are compared with the module's forward pass
and the difference is saved with the results.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import time

import torch
import torch.nn.functional as F

from scripts.train_gpt import lm_eval_fn
from solutions.ch04_multi_head_attention import FusedMultiHeadSelfAttention, merge_heads, split_heads
from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch08_kv_cache import KVCache, attend_with_cache, gpt_forward_with_cache
from solutions.ch14_linear_attention import (
    DeltaNetAttention,
    decode_state_bytes,
    gated_delta_rule_recurrent,
    hybrid_gpt,
    mqar_batch,
)
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text, train_val_split
from solutions.training import count_parameters, train

MQAR_MODELS = ("delta", "gated_delta", "linear", "softmax")
# The recall models' gate bias: alpha = sigmoid(4) = 0.98 per token at the start. The module's layer starts at
# W_g = 0, alpha = 0.5: a memory that halves at every token, which forgets 8 pairs before they are asked for.
GATE_BIAS = 4.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", nargs="+", choices=["lm", "decode", "mqar"], default=["lm", "decode", "mqar"])
    # the language models (chapter 6's yardstick, narrower and shorter: a few minutes on one core)
    p.add_argument("--n_layers", type=int, default=4)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--d_model", type=int, default=64)
    p.add_argument("--context_length", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--max_iters", type=int, default=500)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--eval_interval", type=int, default=100)
    p.add_argument("--eval_iters", type=int, default=20)
    p.add_argument("--full_attention_interval", type=int, default=4)
    # decoding
    p.add_argument("--decode_context", type=int, default=2048, help="tokens decoded by the untrained copies")
    p.add_argument("--decode_every", type=int, default=256, help="report time and memory every n tokens")
    p.add_argument("--decode_repeats", type=int, default=3, help="decode runs; each window keeps its fastest")
    # the recall task
    p.add_argument("--mqar_pairs", type=int, nargs="+", default=[8, 16])
    p.add_argument("--mqar_models", nargs="+", choices=MQAR_MODELS, default=list(MQAR_MODELS))
    p.add_argument("--mqar_vocab", type=int, default=64)
    p.add_argument("--mqar_d_model", type=int, default=64)
    p.add_argument("--mqar_n_heads", type=int, default=1)
    p.add_argument("--mqar_layers", type=int, default=2)
    p.add_argument("--mqar_steps", type=int, default=1000)
    p.add_argument("--mqar_batch_size", type=int, default=64)
    p.add_argument("--mqar_lr", type=float, default=3e-3)
    p.add_argument("--mqar_eval_rows", type=int, default=256)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: PyTorch's default)")
    p.add_argument("--out", default="results/ch14_linear_attention")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def machine() -> dict:
    return {
        "device": "cpu",
        "cpu_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "measured": time.strftime("%Y-%m-%d"),
    }


def write(path: pathlib.Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))


# --------------------------------------------------------------------------------------------------
# The two language models
# --------------------------------------------------------------------------------------------------


def build(kind: str, config: GPTConfig, interval: int) -> GPT:
    """``"gpt"``: chapter 6's GPT; ``"hybrid"``: its layers ``i`` with ``(i+1) % interval`` linear (Gated DeltaNet)."""
    return GPT(config) if kind == "gpt" else hybrid_gpt(config, full_attention_interval=interval)


def lm_data():
    text = python_docs_text()
    tok = CharTokenizer.from_text(text)
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    return tok, *train_val_split(data, 0.1)


def run_lm(args, out: pathlib.Path) -> dict:
    tok, train_data, val_data = lm_data()
    config = GPTConfig(
        vocab_size=tok.vocab_size,
        context_length=args.context_length,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_model=args.d_model,
    )
    results: dict = {"args": vars(args), "config": vars(config), "models": {}, "machine": machine()}
    eval_fn = lm_eval_fn({"train": train_data, "val": val_data}, args.context_length, args.batch_size, args.eval_iters)
    for kind in ("gpt", "hybrid"):
        torch.manual_seed(args.seed)  # the same seed for both models' initial weights
        model = build(kind, config, args.full_attention_interval)
        g_train = torch.Generator().manual_seed(args.seed)  # ... and the same batches

        def loss_fn(m, it, part, g_train=g_train):
            x, y = get_lm_batch(train_data, args.context_length, args.batch_size, generator=g_train)
            return F.cross_entropy(m(x).flatten(0, 1), y.flatten()), x.numel()

        t0 = time.time()
        history = train(
            model,
            loss_fn,
            max_iters=args.max_iters,
            lr=args.lr,
            warmup=args.warmup,
            eval_fn=eval_fn,  # the same batches at every evaluation, for both models
            eval_interval=args.eval_interval,
            progress=not args.no_progress,
        )
        layers = [
            "softmax" if isinstance(b.attn, FusedMultiHeadSelfAttention) else type(b.attn).__name__ for b in model.h
        ]
        results["models"][kind] = {
            "layers": layers,
            "parameters": count_parameters(model),
            "train_curve": history["train"][::10],
            "eval_curve": history["eval"],
            "final": history["eval"][-1][1],
            "tokens_per_s": history["tokens_per_s"],
            "wall_seconds": time.time() - t0,
        }
        # Written now: whatever fails later, the trained model and its curves are kept.
        torch.save({"config": vars(config), "kind": kind, "model": model.half().state_dict()}, out / f"{kind}.pt")
        write(out / "hybrid_lm.json", results)
        final = results["models"][kind]["final"]
        print(f"{kind}: {results['models'][kind]['parameters']:,} parameters, val loss {final['val']:.3f}")
    return results


# --------------------------------------------------------------------------------------------------
# Decoding with a cache: chapter 8's for softmax layers, the recurrent state for linear ones
# --------------------------------------------------------------------------------------------------


class DecodeState:
    """What one sequence holds while decoding: a KV cache for the softmax layers, one matrix per Gated DeltaNet
    layer (``(B, H, d_k, d_v)``), and the number of tokens seen."""

    def __init__(self) -> None:
        self.cache = KVCache()
        self.states: dict[int, torch.Tensor] = {}
        self.length = 0

    def nbytes(self) -> int:
        return self.cache.nbytes() + sum(S.numel() * S.element_size() for S in self.states.values())


def _linear_step(attn: DeltaNetAttention, h: torch.Tensor, state: torch.Tensor | None):
    """One token ``h (B, 1, d_model)`` through a (gated) DeltaNet layer with its recurrent state: the layer's own
    projections, the module's recurrence (:func:`gated_delta_rule_recurrent`)."""
    q, k, v = (split_heads(t, attn.n_heads) for t in attn.W_qkv(h).split(attn.d_model, dim=-1))  # (B, H, 1, d_k)
    q = F.normalize(q, dim=-1) / math.sqrt(q.shape[-1])  # as DeltaNetAttention.forward
    k = F.normalize(k, dim=-1)
    beta = torch.sigmoid(attn.W_beta(h)).transpose(1, 2)  # (B, H, 1)
    g = F.logsigmoid(attn.W_g(h)).transpose(1, 2) if attn.W_g is not None else None
    o, state = gated_delta_rule_recurrent(q, k, v, beta, g, state=state)  # (B, H, 1, d_v)
    return attn.W_o(merge_heads(o)), state


@torch.no_grad()
def decode_step(model: GPT, idx: torch.Tensor, st: DecodeState) -> torch.Tensor:
    """Logits ``(B, 1, V)`` for one new token ``idx (B, 1)`` after the ``st.length`` tokens ``st`` holds."""
    if all(isinstance(b.attn, FusedMultiHeadSelfAttention) for b in model.h):
        logits = gpt_forward_with_cache(model, idx, st.cache)  # chapter 8, unchanged
        st.length += 1
        return logits
    x = model.drop(model.wte(idx) + model.wpe(torch.tensor([st.length])))  # (B, 1, C)
    n_softmax = 0  # the KV cache holds the softmax layers only, in order
    for layer, block in enumerate(model.h):
        h = block.ln_1(x)
        if isinstance(block.attn, DeltaNetAttention):
            out, st.states[layer] = _linear_step(block.attn, h, st.states.get(layer))
        else:
            attn = block.attn
            q, k, v = (split_heads(t, attn.n_heads) for t in attn.W_qkv(h).split(attn.d_model, dim=-1))
            out = attn.W_o(merge_heads(attend_with_cache(q, k, v, st.cache, n_softmax)))
            n_softmax += 1
        x = x + out
        x = x + block.mlp(block.ln_2(x))
    st.length += 1
    return model.lm_head(model.ln_f(x))


def config_bytes(model: GPT, T: int, bytes_per_element: int = 4) -> int:
    """``decode_state_bytes`` for ``model``'s shape at ``T`` tokens."""
    c = model.config
    d_head = c.d_model // c.n_heads
    linear = [i for i, b in enumerate(model.h) if isinstance(b.attn, DeltaNetAttention)]
    interval = None if len(linear) == c.n_layers else (1 if not linear else c.n_layers // (c.n_layers - len(linear)))
    return decode_state_bytes(
        c.n_layers,
        T,
        full_attention_interval=interval,
        n_kv_heads=c.n_heads,
        d_head=d_head,
        n_linear_heads=c.n_heads,
        d_k=d_head,
        d_v=d_head,
        bytes_per_element=bytes_per_element,
    )


def run_decode(args, out: pathlib.Path) -> dict:
    tok, _, val_data = lm_data()
    results: dict = {"args": vars(args), "check": {}, "timing": {}, "machine": machine()}
    for kind in ("gpt", "hybrid"):  # the trained models: the cached path gives the full forward's logits
        ck = torch.load(out / f"{kind}.pt")
        config = GPTConfig(**ck["config"])
        model = build(kind, config, args.full_attention_interval)
        model.load_state_dict({k: v.float() for k, v in ck["model"].items()})
        model.eval()
        idx = val_data[: config.context_length][None]  # (1, T)
        st = DecodeState()
        steps = torch.cat([decode_step(model, idx[:, t : t + 1], st) for t in range(idx.shape[1])], dim=1)
        with torch.no_grad():
            full = model(idx)
        results["check"][kind] = {
            "max_abs_logit_difference": (steps - full).abs().max().item(),
            "tokens": idx.shape[1],
            "bytes_held": st.nbytes(),
            "decode_state_bytes": config_bytes(model, idx.shape[1]),
        }
    write(out / "decode.json", results)  # the check first, before the longer timing
    config = GPTConfig(**{**ck["config"], "context_length": args.decode_context})
    for kind in ("gpt", "hybrid"):
        torch.manual_seed(args.seed)
        model = build(kind, config, args.full_attention_interval).eval()
        best: dict[int, dict] = {}  # per window of tokens, the fastest of --decode_repeats runs (the least disturbed)
        for _ in range(args.decode_repeats):
            st = DecodeState()
            idx = torch.zeros(1, 1, dtype=torch.long)
            t0 = time.perf_counter()
            for t in range(1, args.decode_context + 1):
                idx = decode_step(model, idx, st)[:, -1].argmax(-1, keepdim=True)  # greedy
                if t % args.decode_every == 0:
                    ms = 1000 * (time.perf_counter() - t0) / args.decode_every
                    if t not in best or ms < best[t]["ms_per_token"]:
                        best[t] = {
                            "T": t,
                            "ms_per_token": ms,
                            "bytes_held": st.nbytes(),
                            "decode_state_bytes": config_bytes(model, t),
                        }
                    t0 = time.perf_counter()
        rows = [best[t] for t in sorted(best)]
        results["timing"][kind] = rows
        print(f"{kind}: {rows[-1]['ms_per_token']:.2f} ms/token at T={rows[-1]['T']}, {rows[-1]['bytes_held']:,} bytes")
    write(out / "decode.json", results)
    return results


# --------------------------------------------------------------------------------------------------
# Multi-query associative recall
# --------------------------------------------------------------------------------------------------


class RecallModel(torch.nn.Module):
    """The recall task's model: chapter 6's GPT of ``config.n_layers`` blocks whose attention layers are all of one
    ``kind`` (``"softmax"``: chapter 6's; ``"linear"``, ``"delta"``, ``"gated_delta"``: the module's layers), with a
    token shift in front of the blocks: ``x_t + W_shift x_{t-1}``, a causal convolution of width 2 on the embeddings.

    Mamba's and Gated DeltaNet's layers run a short causal convolution before their state (Yang et al. 2025, section
    3.4); this chapter's layers leave it out. The shift gives each value's position the key before it, so that one
    attention layer can look the key up (without it, a first layer must learn the shift, and small models take
    thousands of steps to). It is the same in every model: only the attention differs.
    """

    def __init__(self, kind: str, config: GPTConfig):
        super().__init__()
        if kind == "softmax":
            self.gpt = GPT(config)
        else:  # every layer linear: no (i + 1) is a multiple of n_layers + 1
            self.gpt = hybrid_gpt(config, full_attention_interval=config.n_layers + 1, linear=kind)
        self.shift = torch.nn.Linear(config.d_model, config.d_model, bias=False)
        torch.nn.init.normal_(self.shift.weight, std=0.02)
        for block in self.gpt.h:  # forget gates start near 1, as Mamba-2's and Gated DeltaNet's decays do
            if getattr(block.attn, "W_g", None) is not None:
                torch.nn.init.constant_(block.attn.W_g.bias, GATE_BIAS)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        g = self.gpt
        x = g.wte(idx) + g.wpe(torch.arange(idx.shape[1], device=idx.device))  # (B, T, C)
        x = x + F.pad(self.shift(x), (0, 0, 1, 0))[:, :-1]  # + W_shift x_{t-1}, zero before the first token
        for block in g.h:
            x = block(x)
        return g.lm_head(g.ln_f(x))  # (B, T, vocab_size)


def run_mqar(args, out: pathlib.Path) -> dict:
    every: dict = {}
    for n_pairs in args.mqar_pairs:  # one file per number of pairs: mqar_8.json, ...
        results: dict = {"args": vars(args), "n_pairs": n_pairs, "runs": [], "machine": machine()}
        every[n_pairs] = results
        T = 4 * n_pairs  # n_queries = n_pairs: 2N tokens of pairs, 2N of questions and answers
        config = GPTConfig(
            vocab_size=args.mqar_vocab,
            context_length=T,
            n_layers=args.mqar_layers,
            n_heads=args.mqar_n_heads,
            d_model=args.mqar_d_model,
        )
        x_eval, y_eval = mqar_batch(args.mqar_eval_rows, n_pairs, n_pairs, args.mqar_vocab, seed=10**6 + n_pairs)
        for kind in args.mqar_models:
            torch.manual_seed(args.seed)
            model = RecallModel(kind, config)

            def loss_fn(m, it, part, n_pairs=n_pairs):
                x, y = mqar_batch(args.mqar_batch_size, n_pairs, n_pairs, args.mqar_vocab, seed=args.seed + it)
                return F.cross_entropy(m(x).flatten(0, 1), y.flatten()), x.numel()

            t0 = time.time()
            history = train(
                model,
                loss_fn,
                max_iters=args.mqar_steps,
                lr=args.mqar_lr,
                warmup=min(50, args.mqar_steps // 10),
                weight_decay=0.0,
                progress=not args.no_progress,
            )
            model.eval()
            with torch.no_grad():
                pred = model(x_eval).argmax(-1)
            scored = y_eval != -100
            accuracy = (pred[scored] == y_eval[scored]).float().mean().item()
            results["runs"].append(
                {
                    "model": kind,
                    "n_pairs": n_pairs,
                    "T": T,
                    "parameters": count_parameters(model),
                    "accuracy": accuracy,
                    "final_train_loss": sum(loss for _, loss in history["train"][-20:]) / 20,
                    "seconds": time.time() - t0,
                }
            )
            write(out / f"mqar_{n_pairs}.json", results)
            print(f"MQAR {n_pairs:3d} pairs, {kind:12s} accuracy {accuracy:.3f} ({time.time() - t0:.0f} s)")
    return every


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    if "lm" in args.parts:
        results["lm"] = run_lm(args, out)
    if "decode" in args.parts:
        results["decode"] = run_decode(args, out)
    if "mqar" in args.parts:
        results["mqar"] = run_mqar(args, out)
    return results


if __name__ == "__main__":
    main()
