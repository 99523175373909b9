"""Convert the trained chapter 6 GPT to grouped-query / multi-query attention by mean-pooling key/value heads
(Ainslie et al. 2023, section 2.1), then uptrain each converted model briefly; record validation losses.

    python -m scripts.convert_gqa     # ~11 min on one CPU core; writes results/ch08_kv_cache/gqa_conversion.json

Reads ``results/ch06_gpt/gpt_char.pt`` (written by ``scripts/train_gpt.py``). The validation loss is the mean
next-token cross-entropy over the same 50 seeded batches of 12 × 64 characters that ``train_gpt.py`` uses, on the
last 10 % of the Python-docs text. Uptraining: ``--uptrain_iters`` steps of chapter 6's training loop (AdamW,
warm-up, cosine), batch 12, learning rate ``--lr``, every parameter trained, once per seed of ``--seeds`` (the
seed draws the uptraining batches): each row keeps every seed's loss and their spread. The book page reads the JSON.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time

import torch
import torch.nn.functional as F

from scripts.seeds import spread
from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch08_kv_cache import convert_to_gqa, kv_cache_bytes
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text, train_val_split
from solutions.training import train

ROOT = pathlib.Path(__file__).resolve().parent.parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", default=str(ROOT / "results/ch06_gpt/gpt_char.pt"))
    p.add_argument("--uptrain_iters", type=int, default=200)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--batch_size", type=int, default=12)
    p.add_argument("--eval_iters", type=int, default=50)
    p.add_argument("--seeds", default="1337,1338,1339", help="comma-separated uptraining seeds (batch order)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "results/ch08_kv_cache/gqa_conversion.json"))
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    ck = torch.load(args.checkpoint, map_location="cpu")
    config = GPTConfig(**ck["config"])
    mha = GPT(config).eval()
    mha.load_state_dict(ck["model"])
    tok = CharTokenizer(ck["alphabet"])
    train_data, val_data = train_val_split(torch.tensor(tok.encode(python_docs_text()), dtype=torch.long), 0.1)
    T = config.context_length

    @torch.no_grad()
    def val_loss(model) -> float:
        model.eval()
        g = torch.Generator().manual_seed(0)  # the same batches for every model (as train_gpt.py's evaluation)
        losses = []
        for _ in range(args.eval_iters):
            x, y = get_lm_batch(val_data, T, args.batch_size, generator=g)
            losses.append(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item())
        return sum(losses) / len(losses)

    base = val_loss(mha)
    print(f"MHA ({config.n_heads} kv heads): val loss {base:.4f}")
    d_head = config.d_model // config.n_heads
    seeds = [int(x) for x in args.seeds.split(",")]
    rows = []
    for n_kv_heads in [h for h in range(config.n_heads, 0, -1) if config.n_heads % h == 0]:
        model_converted = convert_to_gqa(mha, n_kv_heads)
        converted = val_loss(model_converted)
        uptrained, seconds = [], []
        for seed in seeds:
            torch.manual_seed(seed)
            model = convert_to_gqa(mha, n_kv_heads)
            g = torch.Generator().manual_seed(seed)

            def loss_fn(m, it, part, g=g):  # one process: part is the whole batch
                x, y = get_lm_batch(train_data, T, args.batch_size, generator=g)
                return F.cross_entropy(m(x).flatten(0, 1), y.flatten()), x.numel()

            t0 = time.time()
            train(model, loss_fn, max_iters=args.uptrain_iters, lr=args.lr, warmup=20, progress=False)
            uptrained.append(round(val_loss(model), 4))
            seconds.append(round(time.time() - t0, 1))
        row = {
            "n_kv_heads": n_kv_heads,
            "cache_bytes_per_token": kv_cache_bytes(config.n_layers, n_kv_heads, d_head, 1, 4),
            "val_loss_converted": round(converted, 4),
            "val_loss_uptrained": uptrained,
            "val_loss_uptrained_spread": spread(uptrained),
            "uptrain_seconds": seconds,
        }
        print(row)
        rows.append(row)
    record = {
        "checkpoint": str(pathlib.Path(args.checkpoint).relative_to(ROOT)),
        "config": dataclasses_asdict(config),
        "args": {k: v for k, v in vars(args).items() if k not in ("checkpoint", "out")},
        "val_loss_mha": round(base, 4),
        "rows": rows,
        "machine": f"{platform.machine()}, {platform.system()}, torch {torch.__version__}, {args.threads} thread(s)",
        "date": time.strftime("%Y-%m-%d"),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", out)
    return record


def dataclasses_asdict(config) -> dict:
    import dataclasses

    return dataclasses.asdict(config)


if __name__ == "__main__":
    main()
