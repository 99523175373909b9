"""Reproduce the shape of Bahdanau et al. (2014), Figure 2: translation quality vs. source length.

Trains, with the same data, batch size, number of steps and optimiser:
  * ``seq2seq``           plain LSTM encoder-decoder (chapter 1, Sutskever et al. 2014),
  * ``seq2seq_reversed``  the same with the source read backwards (Sutskever et al. 2014, sec. 3.3),
  * ``attention``         bidirectional GRU + additive attention (chapter 2, Bahdanau et al. 2014),
then translates the fixed test split greedily and measures corpus BLEU (sacrebleu) and exact match
per source-length bucket.

Writes into ``--out`` (default ``checkpoints/``):
  length_experiment.json   configuration, parameter counts, times, per-bucket results, loss curves
  length_experiment.csv    model,bucket,n,bleu,exact_match
  length_experiment.log    the training log
  seq2seq.pt, attention.pt float16 weights + vocabularies (the reversed model's weights are not kept)

Retrain (see the log for the measured time; defaults reproduce the committed results):
    python -m scripts.train_length_experiment --steps 1000 --seed 0 --out checkpoints

The spread over seeds (chapters 1 and 2 show it): further seeds without weights, then one summary of all runs,
  results/length_seeds/length_experiment_seeds.json  per model and bucket: each seed's BLEU and exact match,
                                                     their mean, sample standard deviation, min and max
    python -m scripts.train_length_experiment --seed 1 --no-checkpoints --out results/length_seeds/seed1
    python -m scripts.train_length_experiment --seed 2 --no-checkpoints --out results/length_seeds/seed2
    python -m scripts.train_length_experiment --summarize checkpoints/length_experiment.json \\
        results/length_seeds/seed1/length_experiment.json results/length_seeds/seed2/length_experiment.json \\
        --out results/length_seeds
"""

from __future__ import annotations

import argparse
import csv
import json
import time

import torch

from scripts.seeds import add_experiment_arguments, output_dir_unless_summarizing, summarize_runs
from solutions.ch01_seq2seq import Seq2Seq, evaluate_by_length, translate
from solutions.ch02_bahdanau_attention import AttentionSeq2Seq
from solutions.training import count_parameters, pick_device, run_log, save_checkpoint, train_seq2seq
from solutions.translation_data import TranslationData, infinite_batches, make_number_splits

DATA_ARGS = dict(n_train=20000, n_valid=500, n_test=1500, seed=0, max_digits=12, src_lang="en", tgt_lang="fr")
EDGES = (8, 12, 16, 20, 24, 28)
PLAIN_ARGS = dict(emb_dim=64, hidden_size=128, num_layers=2, dropout=0.0)
ATTN_ARGS = dict(emb_dim=64, enc_hidden_size=64, dec_hidden_size=128, attn_dim=64, dropout=0.0)


# what every run of a summary must share (everything but the seed, the machine and the times)
SHARED_CONFIG = ("steps", "batch_size", "lr", "data", "edges", "plain", "attention", "decoding", "max_new_tokens")
SEEDS_FILE = "length_experiment_seeds.json"


def summarize_seeds(runs: list[dict], sources: list[str] | None = None) -> dict:
    """One summary of several runs of this script that differ only in ``--seed`` (:func:`scripts.seeds.summarize_runs`).

    ``runs`` are the parsed ``length_experiment.json`` files (``sources``: where they came from, kept in the
    summary). The seed sets the models' initialisation and the batch order; the data split is the same in every
    run. Per model: ``parameters``, ``train_seconds`` (one per seed) and ``buckets`` with each seed's BLEU and exact
    match and their mean, sample standard deviation, min and max. Raises ``ValueError`` when fewer than two runs
    are given, a seed repeats, the runs differ in anything in :data:`SHARED_CONFIG`, in their models or buckets.
    """
    return summarize_runs(runs, SHARED_CONFIG, sources=sources)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000, help="optimiser steps per model (same for all)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    add_experiment_arguments(
        ap,
        models="seq2seq,seq2seq_reversed,attention",
        run_file="length_experiment.json",
        seeds_file=SEEDS_FILE,
        seeds_dir="results/length_seeds/",
        threads=1,
    )
    args = ap.parse_args(argv)

    out = output_dir_unless_summarizing(args, SEEDS_FILE, summarize_seeds)
    if out is None:
        return
    device = pick_device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    log = run_log(out / "length_experiment.log", device)
    t0 = time.time()
    data = TranslationData(make_number_splits(**{k: v for k, v in DATA_ARGS.items()}))
    log(
        f"data: {DATA_ARGS}, src vocab {len(data.src_vocab)}, tgt vocab {len(data.tgt_vocab)}, built in {time.time() - t0:.1f}s"
    )

    test = data.encoded["test"]
    refs = [t for _, t in data.tokens["test"]]
    src_lengths = [len(s) for s, _ in data.tokens["test"]]
    max_new_tokens = max(len(p.tgt) for p in data.encoded["train"]) + 10

    factories = {
        "seq2seq": lambda: Seq2Seq(len(data.src_vocab), len(data.tgt_vocab), **PLAIN_ARGS),
        "seq2seq_reversed": lambda: Seq2Seq(
            len(data.src_vocab), len(data.tgt_vocab), reverse_source=True, **PLAIN_ARGS
        ),
        "attention": lambda: AttentionSeq2Seq(len(data.src_vocab), len(data.tgt_vocab), **ATTN_ARGS),
    }
    results = {
        "config": {
            "steps": args.steps,
            "batch_size": args.batch_size,
            "lr": args.lr,
            "seed": args.seed,
            "device": str(device),
            "data": DATA_ARGS,
            "edges": list(EDGES),
            "plain": PLAIN_ARGS,
            "attention": ATTN_ARGS,
            "torch": torch.__version__,
            "decoding": "greedy",
            "max_new_tokens": max_new_tokens,
        },
        "models": {},
    }
    rows = []
    for name in args.models.split(","):
        torch.manual_seed(args.seed)
        model = factories[name]()
        n_params = count_parameters(model, trainable_only=True)
        log(f"{name}: {n_params} parameters")
        t1 = time.time()
        losses = train_seq2seq(
            model,
            infinite_batches(data.encoded["train"], args.batch_size, seed=args.seed),
            args.steps,
            lr=args.lr,
            device=device,
            desc=name,
            log=log,
            log_every=100,
            progress=not args.no_progress,
        )
        train_s = time.time() - t1
        # saved before decoding: a failure there must not lose the model
        if name in ("seq2seq", "attention") and not args.no_checkpoints:
            save_checkpoint(
                model,
                out / f"{name}.pt",
                src_vocab=data.src_vocab.itos,
                tgt_vocab=data.tgt_vocab.itos,
                data=DATA_ARGS,
                steps=args.steps,
                seed=args.seed,
            )
        curve = [round(sum(losses[i : i + 25]) / len(losses[i : i + 25]), 4) for i in range(0, len(losses), 25)]
        results["models"][name] = {
            "parameters": n_params,
            "train_seconds": round(train_s, 1),
            "loss_curve_every_25": curve,
        }
        # written now: a failure while decoding keeps every trained model's curve (and the checkpoints above)
        (out / "length_experiment.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
        t2 = time.time()
        hyps = translate(model, test, data.tgt_vocab, max_new_tokens=max_new_tokens)
        buckets = evaluate_by_length(hyps, refs, src_lengths, EDGES)
        eval_s = time.time() - t2
        log(
            f"{name}: trained {train_s:.0f}s, evaluated {eval_s:.0f}s, final loss {sum(losses[-50:]) / len(losses[-50:]):.4f}"
        )
        for r in buckets:
            log(f"  {name:17s} {r['bucket']:>6s} n={r['n']:4d} BLEU={r['bleu']:6.2f} exact={r['exact_match']:.3f}")
            rows.append({"model": name, **r})
        results["models"][name] |= {
            "eval_seconds": round(eval_s, 1),
            "buckets": buckets,
            "examples": [
                {"src": " ".join(data.tokens["test"][i][0]), "ref": " ".join(refs[i]), "hyp": " ".join(hyps[i])}
                for i in range(0, len(hyps), 150)
            ],
        }
    results["total_seconds"] = round(time.time() - t0, 1)
    (out / "length_experiment.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    with open(out / "length_experiment.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "bucket", "n", "bleu", "exact_match"])
        w.writeheader()
        w.writerows(rows)
    log(f"total {results['total_seconds']:.0f}s; results in {out}/length_experiment.json and .csv")
    log(
        f"retrain: python -m scripts.train_length_experiment --steps {args.steps} --seed {args.seed} --out {args.out}"
        + (" --no-checkpoints" if args.no_checkpoints else "")
    )


if __name__ == "__main__":
    main()
