"""Chapter 9's "Does it work?": retrieve a value planted far back, with full, windowed and window+global attention.

The task (associative recall with one pair, in the spirit of Ba et al. 2016's associative retrieval and Arora et al.
2023's recall probes): a sequence of ``T`` random filler tokens holds one key token ``k`` followed by a value token
``v``; the last token is ``k`` again and the model must output ``v`` there. The *distance* ``d`` is how many
positions the value lies before that query (``d = 1``: right before it). Fillers, keys and values use three
disjoint ranges of token ids, so the value is the one token of its kind in the sequence: the question is only
whether attention can *reach* it.

Three models of the same size, trained with the same batches, steps, learning rate and seed, differ only in the
boolean attention mask of every layer (True = may attend; chapter 9's masks):

  * ``full``           causal attention (chapter 3's ``causal_mask``),
  * ``window``         causal sliding window, ``w + 1`` keys per query (``sliding_window_mask``),
  * ``window_global``  the same window plus causal global tokens every ``--global-every`` positions
    (``global_token_mask(..., causal=True)``): a global token sees every earlier token and every later token sees
    it (Beltagy et al. 2020, section 3.2, made causal). The query position itself is not global.

The blocks are chapter 5's pre-LN ``EncoderLayer`` given the mask (with a causal mask a pre-LN encoder layer is a
GPT block), on chapter 5's token embedding and sinusoidal positions; the training recipe is
``solutions.training.train`` (AdamW, warm-up, cosine decay, clipping). The loss is the cross-entropy of the value
at the last position only; training distances are log-uniform over ``1 … T-2`` (:func:`training_distances`), each
iteration's batch drawn from its own seeded generator. Evaluation: accuracy of the arg-max at the query on a fixed set of sequences per
distance bucket. Cost: the number of (query, key) pairs each mask allows, against ``T²``. The masks are dense
here, so the training time does not show the saving (chapter 9's ``sliding_window_attention`` does).

Writes into ``--out`` (default ``results/ch09_sparse_attention``):
  long_context.json   configuration, torch version, device, per seed and model: parameters, training time,
                      loss curve, accuracy per distance bucket, mask cost; and the mean/spread over seeds
  long_context.log    the training log

Retrain: one seed (the default, seed 0) is the experiment, about 6 minutes on one core of a shared CPU machine; the
committed results repeat it with three seeds (the log gives the measured times):
    python -m scripts.train_long_context --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from scripts.seeds import spread
from solutions.ch03_self_attention import causal_mask
from solutions.ch05_transformer import EncoderLayer, PositionalEncoding, TokenEmbedding
from solutions.ch09_sparse_attention import global_token_mask, sliding_window_mask
from solutions.training import Part, count_parameters, pick_device, run_log, train

MODELS = ("full", "window", "window_global")


# --------------------------------------------------------------------------------------------------
# The task
# --------------------------------------------------------------------------------------------------


def vocabulary(n_filler: int, n_keys: int, n_values: int) -> dict[str, range]:
    """Token-id ranges of the task: fillers ``0 … n_filler-1``, then keys, then values (disjoint)."""
    return {
        "filler": range(0, n_filler),
        "keys": range(n_filler, n_filler + n_keys),
        "values": range(n_filler + n_keys, n_filler + n_keys + n_values),
    }


def make_recall_batch(
    distances: torch.Tensor,
    T: int,
    *,
    n_filler: int,
    n_keys: int,
    n_values: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of the recall task: filler, a (key, value) pair, and the key again as the last token.

    Sequence ``b`` holds its value at position ``T-1-d_b`` and its key right before it (``T-2-d_b``); its last
    token (position ``T-1``) repeats the key. All other positions are filler.

    Args:
        distances: int64 ``(B,)``, each ``1 <= d <= T-2``: how far before the query the value lies.
        T: sequence length (>= 3).
        n_filler, n_keys, n_values: sizes of the three token-id ranges (:func:`vocabulary`).
        generator: the random source (same generator state, same batch); tokens are drawn on CPU.

    Returns:
        ``(tokens (B, T) int64, targets (B,) int64)``: the sequences and the value token of each.

    Raises:
        ValueError: if ``distances`` is not 1-D or a distance lies outside ``[1, T-2]``.
    """
    if distances.ndim != 1:
        raise ValueError(f"distances must be (B,), got {tuple(distances.shape)}")
    if T < 3 or len(distances) and (int(distances.min()) < 1 or int(distances.max()) > T - 2):
        raise ValueError(f"distances must lie in [1, T-2] = [1, {T - 2}], got {distances.tolist()}")
    B = len(distances)
    vocab = vocabulary(n_filler, n_keys, n_values)
    tokens = torch.randint(0, n_filler, (B, T), generator=generator)  # (B, T) filler
    keys = torch.randint(0, n_keys, (B,), generator=generator) + vocab["keys"].start  # (B,)
    values = torch.randint(0, n_values, (B,), generator=generator) + vocab["values"].start  # (B,)
    rows = torch.arange(B)
    where = T - 1 - distances.long()  # (B,) position of the value
    tokens[rows, where] = values
    tokens[rows, where - 1] = keys
    tokens[:, -1] = keys  # the query
    return tokens, values


def training_distances(n: int, T: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` distances in ``[1, T-2]``, log-uniform (``floor(exp(U·ln(T-1)))``): every octave of distance gets
    about the same share of the training batches, so the short pairs a window can reach are not drowned by far
    ones (uniform distances would give a window of 4 in 64 positions barely one batch row in eight).

    Returns:
        int64 ``(n,)``.
    """
    u = torch.rand(n, generator=generator)  # (n,) uniform in [0, 1)
    return torch.exp(u * math.log(T - 1)).floor().long().clamp(1, T - 2)


def attention_pattern(kind: str, T: int, window: int, global_every: int) -> torch.Tensor:
    """The ``(T, T)`` bool mask (True = may attend) of model ``kind`` (one of :data:`MODELS`).

    ``window``: causal sliding window of ``window + 1`` keys (:func:`sliding_window_mask`); ``window_global``: that
    window plus causal global tokens at positions ``global_every - 1, 2·global_every - 1, …`` before the last one
    (:func:`global_token_mask` with ``causal=True``).

    Raises:
        ValueError: for an unknown ``kind``.
    """
    if kind == "full":
        return causal_mask(T)
    if kind == "window":
        return sliding_window_mask(T, window, causal=True)
    if kind == "window_global":
        is_global = torch.zeros(T, dtype=torch.bool)
        is_global[global_every - 1 : T - 1 : global_every] = True  # the query position T-1 stays local
        return global_token_mask(sliding_window_mask(T, window, causal=True), is_global, causal=True)
    raise ValueError(f"unknown model kind {kind!r}; expected one of {MODELS}")


# --------------------------------------------------------------------------------------------------
# The model: chapter 5's pre-LN layers under a fixed mask
# --------------------------------------------------------------------------------------------------


class MaskedDecoder(nn.Module):
    """Token embedding + sinusoidal positions, ``n_layers`` pre-LN chapter-5 layers all given ``mask``, final
    LayerNorm, linear head: ``forward(tokens (B, T) int64) -> logits (B, T, vocab_size)``.

    ``mask`` is ``(context_length, context_length)`` bool, True = may attend; it must be causal for the model to
    be a decoder (every pattern of :func:`attention_pattern` is). Inputs shorter than ``context_length`` use its
    top-left corner.
    """

    mask: torch.Tensor

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_layers: int, mask: torch.Tensor):
        super().__init__()
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers)
        self.embed = TokenEmbedding(vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, context_length=mask.shape[-1])
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, 4 * d_model, norm_first=True, activation="gelu") for _ in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        T = tokens.shape[1]
        mask = self.mask[:T, :T]  # (T, T)
        x = self.positions(self.embed(tokens))  # (B, T, d_model)
        for layer in self.layers:
            x = layer(x, mask)  # (B, T, d_model)
        return self.head(self.norm(x))  # (B, T, vocab_size)


# --------------------------------------------------------------------------------------------------
# The experiment
# --------------------------------------------------------------------------------------------------


def bucket_label(lo: int, hi: int) -> str:
    return f"{lo}-{hi}"


def evaluate(model: nn.Module, args: argparse.Namespace, edges: list[int], device: torch.device) -> list[dict]:
    """Accuracy at the query per distance bucket ``[edges[i], edges[i+1])``, on sequences drawn from a fixed
    evaluation seed (the same for every model and training seed)."""
    model.eval()
    g = torch.Generator().manual_seed(10_000 + args.eval_seed)
    rows = []
    with torch.no_grad():
        for lo, hi in zip(edges[:-1], edges[1:]):
            d = torch.randint(lo, hi, (args.n_eval,), generator=g)
            tokens, targets = make_recall_batch(d, args.T, **task_sizes(args), generator=g)
            pred = model(tokens.to(device))[:, -1].argmax(-1).cpu()
            rows.append({"bucket": bucket_label(lo, hi - 1), "lo": lo, "hi": hi - 1, "n": args.n_eval,
                         "accuracy": round(float((pred == targets).float().mean()), 4)})  # fmt: skip
    model.train()
    return rows


def task_sizes(args: argparse.Namespace) -> dict[str, int]:
    return {"n_filler": args.n_filler, "n_keys": args.n_keys, "n_values": args.n_values}


def run_one(
    kind: str,
    seed: int,
    args: argparse.Namespace,
    edges: list[int],
    device: torch.device,
    log: Callable[[str], None],
    keep: Callable[[dict], None],
) -> dict:
    """Train and evaluate one model; returns its JSON record.

    ``keep(record)`` is called with the training record (loss curve, time, cost) before the evaluation, so a
    failure there does not lose what training produced; the buckets are then added to the same dict."""
    mask = attention_pattern(kind, args.T, args.window, args.global_every)
    vocab_size = args.n_filler + args.n_keys + args.n_values
    torch.manual_seed(seed)
    model = MaskedDecoder(vocab_size, args.d_model, args.n_heads, args.n_layers, mask).to(device)

    def loss_fn(m: nn.Module, it: int, part: Part) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(seed * 1_000_003 + it)  # iteration it's batch, whatever came before
        d = training_distances(args.batch_size, args.T, g)
        tokens, targets = make_recall_batch(d, args.T, **task_sizes(args), generator=g)
        rows = part.rows(args.batch_size)
        logits = m(tokens[rows].to(device))[:, -1]  # (b, V): the prediction at the query
        return F.cross_entropy(logits.float(), targets[rows].to(device)), int(tokens[rows].numel())

    t0 = time.time()
    history = train(
        model,
        loss_fn,
        max_iters=args.steps,
        lr=args.lr,
        warmup=args.warmup,
        weight_decay=0.0,
        device=device,
        progress=not args.no_progress,
    )
    train_s = time.time() - t0
    losses = [loss for _, loss in history["train"]]
    every = max(1, args.steps // 40)
    curve = [round(sum(losses[i : i + every]) / len(losses[i : i + every]), 4) for i in range(0, len(losses), every)]
    pairs = int(mask.sum())
    record = {
        "parameters": count_parameters(model),
        "train_seconds": round(train_s, 1),
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4),
        "loss_curve": curve,
        "loss_curve_every": every,
        "pairs": pairs,
        "pairs_over_T2": round(pairs / args.T**2, 4),
        "pairs_over_causal": round(pairs / (args.T * (args.T + 1) // 2), 4),
    }
    keep(record)
    buckets = record["buckets"] = evaluate(model, args, edges, device)
    accs = " ".join(f"{r['bucket']}:{r['accuracy']:.2f}" for r in buckets)
    log(f"seed {seed} {kind:13s} params {record['parameters']} pairs/T² {record['pairs_over_T2']:.3f} "
        f"train {train_s:.0f}s loss {record['final_loss']:.3f} | {accs}")  # fmt: skip
    return record


def summarise(per_seed: dict[str, dict[str, dict]], models: list[str]) -> dict[str, dict]:
    """Mean, min and max of the accuracy per model and bucket over the seeds (and the mean training time)."""
    out: dict[str, dict] = {}
    seeds = list(per_seed)
    for kind in models:
        first = per_seed[seeds[0]][kind]
        buckets = []
        for i, b in enumerate(first["buckets"]):
            acc = spread([per_seed[s][kind]["buckets"][i]["accuracy"] for s in seeds])
            buckets.append({"bucket": b["bucket"], "lo": b["lo"], "hi": b["hi"],
                            "mean": acc["mean"], "min": acc["min"], "max": acc["max"]})  # fmt: skip
        out[kind] = {
            "parameters": first["parameters"],
            "pairs": first["pairs"],
            "pairs_over_T2": first["pairs_over_T2"],
            "pairs_over_causal": first["pairs_over_causal"],
            "train_seconds_mean": round(statistics.fmean(per_seed[s][kind]["train_seconds"] for s in seeds), 1),
            "buckets": buckets,
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--T", type=int, default=64, help="sequence length (the query is the last token)")
    ap.add_argument("--window", type=int, default=4, help="causal window w: each query sees itself and w earlier")
    ap.add_argument("--global-every", type=int, default=8, help="a global token every this many positions")
    ap.add_argument("--n-filler", type=int, default=32)
    ap.add_argument("--n-keys", type=int, default=8)
    ap.add_argument("--n-values", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=32)
    ap.add_argument("--n-heads", type=int, default=2)
    ap.add_argument("--n-layers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=800, help="optimiser steps per model (the same for all)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--edges", default="1,5,9,17,33,63", help="distance bucket edges: [e_i, e_{i+1})")
    ap.add_argument("--n-eval", type=int, default=256, help="evaluation sequences per bucket")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--seeds", default="0", help="comma-separated training seeds (model init and batches)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--device", default="cpu", help="cpu (default: the committed results), cuda, ...")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for torch")
    ap.add_argument("--out", default="results/ch09_sparse_attention")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    edges = [int(e) for e in args.edges.split(",")]
    models = args.models.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if any(m not in MODELS for m in models):
        raise SystemExit(f"--models: each must be one of {MODELS}, got {models}")
    if edges != sorted(edges) or edges[0] < 1 or edges[-1] > args.T - 1:
        raise SystemExit(f"--edges must increase within [1, T-1 = {args.T - 1}], got {edges}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = pick_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    log = run_log(out / "long_context.log", device)
    config = {k: v for k, v in vars(args).items() if k not in ("out", "no_progress", "device", "seeds", "models")}
    results: dict = {
        "config": config | {"edges": edges, "receptive_field_window": args.n_layers * args.window},
        "seeds": seeds,
        "models": models,
        "torch": torch.__version__,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "per_seed": {},
    }
    t0 = time.time()
    for seed in seeds:
        results["per_seed"][str(seed)] = {}
        for kind in models:

            def keep(record: dict, seed: int = seed, kind: str = kind) -> None:  # written before evaluating
                results["per_seed"][str(seed)][kind] = record
                (out / "long_context.json").write_text(json.dumps(results, indent=1))

            run_one(kind, seed, args, edges, device, log, keep)
            (out / "long_context.json").write_text(json.dumps(results, indent=1))  # kept if a later model fails
    results["summary"] = summarise(results["per_seed"], models)
    results["total_seconds"] = round(time.time() - t0, 1)
    (out / "long_context.json").write_text(json.dumps(results, indent=1))
    for kind in models:
        s = results["summary"][kind]
        cells = " ".join(f"{b['bucket']}:{b['mean']:.2f}[{b['min']:.2f},{b['max']:.2f}]" for b in s["buckets"])
        log(f"mean over seeds {seeds}: {kind:13s} pairs/T² {s['pairs_over_T2']:.3f} | {cells}")
    log(f"total {results['total_seconds']:.0f}s; results in {out}/long_context.json")
    log(f"retrain: python -m scripts.train_long_context --seeds {args.seeds} --steps {args.steps} --out {args.out}")


if __name__ == "__main__":
    main()
