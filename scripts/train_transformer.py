"""Train the chapter 5 Transformer on the translation chapters' task and compare it with Bahdanau attention.

Same data (``solutions.translation_data.make_number_splits`` with the length experiment's arguments), same
batch size and number of optimiser steps for every model:

  * ``transformer``        post-LN (the paper), label smoothing 0.1, Adam(0.9, 0.98, 1e-9), eq. 3 warm-up schedule;
  * ``transformer_preln``  the same with ``norm_first=True`` (pre-LN), same schedule;
  * ``bahdanau``           chapter 2's bidirectional GRU + additive attention, trained by chapter 1's
                           recipe ``solutions.training.train_seq2seq`` (Adam 2e-3, clipping 5).

Then every model translates the test split greedily (corpus BLEU and exact match per source-length bucket),
and the post-LN Transformer also with beam search (beam 4, α = 0.6) on a subset.

Writes into ``--out`` (default ``checkpoints/``):
  transformer_experiment.json   config, parameter counts, train wall time, loss curves, per-bucket results
  transformer_experiment.csv    model,decoding,bucket,n,bleu,exact_match
  transformer_experiment.log    the log
  transformer.pt                float16 weights + vocabularies of the post-LN model (for the book pages)

Retrain with the defaults:
    python -m scripts.train_transformer --steps 1500 --seed 0 --threads 1 --out checkpoints

(about 30 minutes on 2 CPU cores shared with other jobs, with --threads 1; about 15 on a quiet core.)

The spread over seeds (chapter 5 shows it): further seeds without weights, then one summary of all runs,
  results/transformer_seeds/transformer_experiment_seeds.json   per model and bucket: each seed's greedy BLEU and
                                                                exact match, their mean, sample standard deviation,
                                                                min and max; each seed's training and decoding time
    python -m scripts.train_transformer --seed 1 --threads 1 --no-checkpoints --out results/transformer_seeds/seed1
    python -m scripts.train_transformer --seed 2 --threads 1 --no-checkpoints --out results/transformer_seeds/seed2
    python -m scripts.train_transformer --summarize checkpoints/transformer_experiment.json \\
        results/transformer_seeds/seed1/transformer_experiment.json \\
        results/transformer_seeds/seed2/transformer_experiment.json --out results/transformer_seeds
"""

from __future__ import annotations

import argparse
import csv
import json
import time

import torch

from scripts.seeds import add_experiment_arguments, output_dir_unless_summarizing, summarize_runs
from solutions.ch01_seq2seq import evaluate_by_length, shift_for_teacher_forcing, translate
from solutions.ch02_bahdanau_attention import AttentionSeq2Seq
from solutions.ch05_transformer import Transformer, beam_search, greedy_decode, label_smoothed_loss, noam_lr
from solutions.training import count_parameters, pick_device, run_log, save_checkpoint, train_loop, train_seq2seq
from solutions.translation_data import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    TranslationData,
    infinite_batches,
    iterate_batches,
    make_number_splits,
)

DATA_ARGS = dict(n_train=20000, n_valid=500, n_test=1500, seed=0, max_digits=12, src_lang="en", tgt_lang="fr")
EDGES = (8, 12, 16, 20, 24, 28)
TRANSFORMER_ARGS = dict(d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0)
ATTN_ARGS = dict(emb_dim=64, enc_hidden_size=128, dec_hidden_size=192, attn_dim=128, dropout=0.0)

# what every run of a summary must share (everything but the seed, the machine and the times)
SHARED_CONFIG = (
    "steps", "batch_size", "warmup", "lr_factor", "smoothing", "data", "edges", "transformer", "bahdanau",
    "max_new_tokens", "beam_subset",
)  # fmt: skip
SEEDS_FILE = "transformer_experiment_seeds.json"


def summarize_seeds(runs: list[dict], sources: list[str] | None = None) -> dict:
    """One summary of several runs of this script that differ only in ``--seed`` (:func:`scripts.seeds.summarize_runs`).

    ``runs`` are the parsed ``transformer_experiment.json`` files (``sources``: where they came from). The seed
    sets the models' initialisation and the batch order; the data split is the same in every run. Per model:
    ``parameters``, ``train_seconds`` and ``eval_seconds`` (one per seed) and ``buckets``: the greedy decoding's
    BLEU and exact match per source-length bucket, each seed's and their mean, sample standard deviation, min and
    max. Raises ``ValueError`` when fewer than two runs are given, a seed repeats, or the runs differ in anything in
    :data:`SHARED_CONFIG`, in their models or buckets.
    """
    return summarize_runs(
        runs, SHARED_CONFIG, buckets_key="greedy", per_seed=("train_seconds", "eval_seconds"), sources=sources
    )


def train_transformer(
    model: Transformer,
    batches,
    steps: int,
    warmup: int,
    factor: float,
    smoothing: float,
    device: torch.device,
    desc: str,
    log,
    progress: bool,
) -> list[float]:
    """Teacher forcing, Adam(β=(0.9, 0.98), ε=1e-9) and the eq. 3 schedule (Vaswani et al. 2017, section 5.3)."""
    model.to(device)

    def loss_fn(m, it, part):  # one process: part is the whole batch
        batch = next(batches).to(device)
        tgt_in, tgt_out = shift_for_teacher_forcing(batch.tgt)  # (B, T-1) each
        logits = m(batch.src, tgt_in)  # (B, T-1, V)
        return label_smoothed_loss(logits.float(), tgt_out, smoothing, PAD_ID), int((tgt_out != PAD_ID).sum())

    history = train_loop(
        model,
        loss_fn,
        torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9),
        max_iters=steps,
        lr_schedule=lambda it: noam_lr(it + 1, model.d_model, warmup, factor),
        device=device,
        progress=progress,
        desc=desc,
        log=log,
    )
    return [loss for _, loss in history["train"]]


@torch.no_grad()
def transformer_translate(model: Transformer, pairs, vocab, max_new_tokens: int, beam: int = 0, batch_size: int = 250):
    """Token lists of greedy (``beam=0``) or beam-search translations of encoded pairs, in order."""
    model.eval()
    device = next(model.parameters()).device
    hyps = []
    for batch in iterate_batches(pairs, batch_size):
        src = batch.src.to(device)
        if beam:
            outs = beam_search(model, src, max_new_tokens, BOS_ID, EOS_ID, beam_size=beam, alpha=0.6)
        else:
            outs = greedy_decode(model, src, max_new_tokens, BOS_ID, EOS_ID).cpu()
        hyps += [vocab.decode(o if isinstance(o, list) else o) for o in outs]
    return hyps


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1500, help="optimiser steps per model (same for all)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=200, help="warmup_steps of eq. 3 (paper: 4000 of 100k steps)")
    ap.add_argument("--lr-factor", type=float, default=0.3, help="multiplies eq. 3")
    ap.add_argument("--smoothing", type=float, default=0.1, help="label smoothing ε_ls")
    ap.add_argument("--beam-subset", type=int, default=100, help="test sentences also decoded by beam search")
    add_experiment_arguments(
        ap,
        models="transformer,transformer_preln,bahdanau",
        run_file="transformer_experiment.json",
        seeds_file=SEEDS_FILE,
        seeds_dir="results/transformer_seeds/",
    )
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    out = output_dir_unless_summarizing(args, SEEDS_FILE, summarize_seeds)
    if out is None:
        return
    device = pick_device(args.device)
    log = run_log(out / "transformer_experiment.log", device)
    data = TranslationData(make_number_splits(**DATA_ARGS))
    test = data.encoded["test"]
    refs = [t for _, t in data.tokens["test"]]
    src_lengths = [len(s) for s, _ in data.tokens["test"]]
    max_new_tokens = max(len(p.tgt) for p in data.encoded["train"]) + 10
    V_src, V_tgt = len(data.src_vocab), len(data.tgt_vocab)
    log(f"data {DATA_ARGS}: src vocab {V_src}, tgt vocab {V_tgt}, max_new_tokens {max_new_tokens}")

    results = {
        "config": {
            "steps": args.steps,
            "batch_size": args.batch_size,
            "warmup": args.warmup,
            "lr_factor": args.lr_factor,
            "smoothing": args.smoothing,
            "seed": args.seed,
            "device": str(device),
            "threads": torch.get_num_threads(),
            "data": DATA_ARGS,
            "edges": list(EDGES),
            "transformer": TRANSFORMER_ARGS,
            "bahdanau": ATTN_ARGS,
            "torch": torch.__version__,
            "max_new_tokens": max_new_tokens,
            "beam_subset": args.beam_subset,
            "measured": time.strftime("%Y-%m-%d"),
        },
        "models": {},
    }
    rows = []

    def record(name, decoding, hyps, idx):
        buckets = evaluate_by_length(hyps, [refs[i] for i in idx], [src_lengths[i] for i in idx], EDGES)
        for r in buckets:
            rows.append({"model": name, "decoding": decoding, **r})
        log(f"{name} {decoding}: " + ", ".join(f"{r['bucket']}: {r['bleu']:.1f}" for r in buckets))
        return buckets

    def keep_training(name: str, entry: dict, losses: list[float]) -> None:
        """Record the loss curve and write the results so far: a failure while decoding keeps them."""
        entry["loss_curve_every_25"] = [
            round(sum(losses[i : i + 25]) / len(losses[i : i + 25]), 4) for i in range(0, len(losses), 25)
        ]
        entry["loss_kind"] = "label-smoothed CE" if name.startswith("transformer") else "CE"
        results["models"][name] = entry
        (out / "transformer_experiment.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))

    for name in args.models.split(","):
        torch.manual_seed(args.seed)
        batches = infinite_batches(data.encoded["train"], args.batch_size, seed=args.seed)
        entry = {}
        t1 = time.time()
        if name.startswith("transformer"):
            model = Transformer(
                V_src,
                V_tgt,
                norm_first=name.endswith("preln"),
                context_length=max_new_tokens + 2,
                pad_id=PAD_ID,
                **TRANSFORMER_ARGS,
            )
            entry["parameters"] = count_parameters(model, trainable_only=True)
            log(f"{name}: {entry['parameters']} parameters")
            losses = train_transformer(
                model,
                batches,
                args.steps,
                args.warmup,
                args.lr_factor,
                args.smoothing,
                device,
                name,
                log,
                not args.no_progress,
            )
            entry["train_seconds"] = round(time.time() - t1, 1)
            if (
                name == "transformer" and not args.no_checkpoints
            ):  # saved before decoding: a failure there must not lose the trained model
                save_checkpoint(
                    model,
                    out / "transformer.pt",
                    src_vocab=data.src_vocab.itos,
                    tgt_vocab=data.tgt_vocab.itos,
                    data=DATA_ARGS,
                    steps=args.steps,
                    seed=args.seed,
                )
            keep_training(name, entry, losses)
            t2 = time.time()
            hyps = transformer_translate(model, test, data.tgt_vocab, max_new_tokens)
            entry["greedy"] = record(name, "greedy", hyps, range(len(test)))
            entry["eval_seconds"] = round(time.time() - t2, 1)
            if name == "transformer" and args.beam_subset:
                sub = list(range(args.beam_subset))
                entry["greedy_subset"] = record(name, "greedy_subset", hyps[: args.beam_subset], sub)
                t3 = time.time()
                beam_hyps = transformer_translate(
                    model, test[: args.beam_subset], data.tgt_vocab, max_new_tokens, beam=4
                )
                entry["beam_subset"] = record(name, "beam4_subset", beam_hyps, sub)
                entry["beam_seconds"] = round(time.time() - t3, 1)
        else:
            model = AttentionSeq2Seq(V_src, V_tgt, **ATTN_ARGS)
            entry["parameters"] = count_parameters(model)
            log(f"{name}: {entry['parameters']} parameters")
            losses = train_seq2seq(
                model, batches, args.steps, device=device, desc=name, log=log, progress=not args.no_progress
            )
            entry["train_seconds"] = round(time.time() - t1, 1)
            keep_training(name, entry, losses)
            t2 = time.time()
            hyps = translate(model, test, data.tgt_vocab, max_new_tokens=max_new_tokens)
            entry["greedy"] = record(name, "greedy", hyps, range(len(test)))
            entry["eval_seconds"] = round(time.time() - t2, 1)
        entry["examples"] = [
            {"src": " ".join(data.tokens["test"][i][0]), "ref": " ".join(refs[i]), "hyp": " ".join(hyps[i])}
            for i in range(0, len(hyps), 250)
        ]
        log(f"{name}: trained in {entry['train_seconds']}s")
        results["models"][name] = entry
        (out / "transformer_experiment.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    with open(out / "transformer_experiment.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "decoding", "bucket", "n", "bleu", "exact_match"])
        w.writeheader()
        w.writerows(rows)
    log(
        f"retrain: python -m scripts.train_transformer --steps {args.steps} --seed {args.seed} --threads {args.threads} "
        f"--out {args.out}"
    )


if __name__ == "__main__":
    main()
