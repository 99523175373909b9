"""Post-LN against pre-LN without learning-rate warm-up, on a deeper Transformer (Xiong et al. 2020).

Trains the chapter 5 Transformer twice on the number-translation task — ``norm_first=False`` (post-LN, the
paper) and ``norm_first=True`` (pre-LN) — with the same seed, data order, depth and a *constant* learning rate
from the first step (no eq. 3 warm-up), and records the training loss of every step.

Writes ``--out``/layer_norm_comparison.json (config, loss curves, wall time).

    python -m scripts.compare_layer_norm --steps 200 --layers 6 --lr 2e-3 --threads 1 --out checkpoints
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from solutions.ch01_seq2seq import shift_for_teacher_forcing
from solutions.ch05_transformer import Transformer, label_smoothed_loss
from solutions.training import pick_device, train_loop
from solutions.translation_data import PAD_ID, TranslationData, infinite_batches, make_number_splits

DATA_ARGS = dict(n_train=20000, n_valid=500, n_test=1500, seed=0, max_digits=12, src_lang="en", tgt_lang="fr")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3, help="constant learning rate, no warm-up")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    device = pick_device(args.device)
    data = TranslationData(make_number_splits(**DATA_ARGS))
    sizes = dict(d_model=args.d_model, n_heads=4, n_layers=args.layers, d_ff=4 * args.d_model, dropout=0.0)
    result = {
        "config": {
            **vars(args),
            "model": sizes,
            "data": DATA_ARGS,
            "device": str(device),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "measured": time.strftime("%Y-%m-%d"),
        },
        "runs": {},
    }
    for norm_first in (False, True):
        name = "pre-LN" if norm_first else "post-LN"
        torch.manual_seed(args.seed)
        model = (
            Transformer(
                len(data.src_vocab),
                len(data.tgt_vocab),
                norm_first=norm_first,
                pad_id=PAD_ID,
                context_length=64,
                **sizes,
            )
            .to(device)
            .train()
        )
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
        batches = infinite_batches(data.encoded["train"], args.batch_size, seed=args.seed)

        def loss_fn(m, it, part, batches=batches):  # one process: part is the whole batch
            batch = next(batches).to(device)
            tgt_in, tgt_out = shift_for_teacher_forcing(batch.tgt)
            return label_smoothed_loss(m(batch.src, tgt_in), tgt_out, 0.1, PAD_ID), tgt_out.numel()

        t0 = time.time()
        history = train_loop(model, loss_fn, opt, max_iters=args.steps, desc=name, progress=not args.no_progress)
        losses = [round(loss, 4) for _, loss in history["train"]]
        result["runs"][name] = {"losses": losses, "seconds": round(time.time() - t0, 1)}
        print(
            f"{name}: final loss (mean of last 20) {sum(losses[-20:]) / 20:.3f} in {time.time() - t0:.0f}s", flush=True
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "layer_norm_comparison.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
