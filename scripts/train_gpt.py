"""Train the chapter 6 GPT as a character-level language model and save a small checkpoint + results.

    python -m scripts.train_gpt                       # yardstick: 4 layers, 4 heads, 128 wide, 64 context,
                                                      # 2000 iterations of batch 12 on the Python docs
    python -m scripts.train_gpt --device cuda --compile --data shakespeare   # Colab, opt-in download
    torchrun --nproc_per_node 2 -m scripts.train_gpt  # DistributedDataParallel: 2 processes (gloo on CPU,
                                                      # NCCL on GPUs), the same global batch of 12

Writes ``<out>/gpt_char.pt`` (weights, config, alphabet) and ``<out>/gpt_char.json`` (config, loss curves,
tokens/second, final validation loss, samples, machine); ``gpt_char_shakespeare.*`` with ``--data shakespeare``.
The book page reads these files instead of training. Prints tokens/second and the validation loss.

The samples continue ``--prompt`` (by default a phrase of the chosen corpus), which is checked against the
corpus's alphabet before training starts; the checkpoint and results are written as soon as training ends, and
the results again once the samples are drawn, so a failure after training never loses the model.

Under ``torchrun`` (``--nproc_per_node N``, and ``--nnodes``/``--node_rank``/``--rdzv_endpoint`` across machines)
the script runs unchanged with ``DistributedDataParallel``: ``--batch_size`` stays the *global* batch of one
optimiser step, cut into ``world_size × --grad_accum`` equal parts; every rank draws the same window starts and
computes its own parts; only rank 0 prints, samples and writes files.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time

import torch

from solutions.ch06_gpt import GPT, GPTConfig, generate
from solutions.text_data import CharTokenizer, get_lm_batch, python_docs_text, tiny_shakespeare, train_val_split
from solutions.training import Part, close_distributed, init_distributed, once_per_iteration, train

# A prompt per corpus, made of characters that corpus has (the character tokenizer knows no others).
DEFAULT_PROMPTS = {"python-docs": 'The "with" statement', "shakespeare": "First Citizen:\n"}


def check_prompt(prompt: str, tok: CharTokenizer) -> None:
    """Raise ``ValueError`` naming the prompt's characters that ``tok``'s alphabet lacks (sorted, repr'd)."""
    try:
        tok.encode(prompt)
    except ValueError as err:
        raise ValueError(f"--prompt: {err}; the training text has no such characters") from None


def lm_eval_fn(splits: dict[str, torch.Tensor], context_length: int, batch_size: int, iters: int, device=None):
    """``train``'s ``eval_fn`` for a language model: ``m -> {name: mean loss}`` over ``iters`` batches of
    ``batch_size`` windows of ``context_length`` tokens from each 1-D int64 stream in ``splits``. Every call draws
    the same batches (a generator seeded 0), so evaluations, and models evaluated alike, see the same windows."""

    def eval_fn(m) -> dict[str, float]:
        out = {}
        for name, split in splits.items():
            g = torch.Generator().manual_seed(0)
            losses = []
            for _ in range(iters):
                x, y = get_lm_batch(split, context_length, batch_size, generator=g, device=device)
                logits = m(x)
                losses.append(torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten()).item())
            out[name] = sum(losses) / len(losses)
        return out

    return eval_fn


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n_layers", type=int, default=4)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--d_model", type=int, default=128)
    p.add_argument("--context_length", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=12, help="global batch of one optimiser step (all ranks)")
    p.add_argument("--grad_accum", type=int, default=1, help="micro-steps per optimiser step on each rank")
    p.add_argument("--max_iters", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval_interval", type=int, default=250)
    p.add_argument("--eval_iters", type=int, default=50)
    p.add_argument(
        "--data",
        choices=["python-docs", "shakespeare"],
        default="python-docs",
        help="python-docs needs no download; shakespeare downloads 1.1 MB once (sha256-verified)",
    )
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (needs a C++ compiler on CPU)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: PyTorch's default)")
    p.add_argument("--out", default="results/ch06_gpt")
    p.add_argument("--sample_tokens", type=int, default=300, help="length of each sample written to the results")
    p.add_argument("--prompt", default=None, help="text the samples continue (default: a phrase of the corpus)")
    p.add_argument("--curve_every", type=int, default=10, help="keep every n-th training loss in the results")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dist, device = init_distributed(args.device)  # one process, or this rank of a torchrun job
    Part(0, dist.world_size * args.grad_accum).rows(args.batch_size)  # ValueError now if the parts can't be equal
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    say = print if dist.is_main else (lambda *a, **k: None)
    text = python_docs_text() if args.data == "python-docs" else tiny_shakespeare()
    tok = CharTokenizer.from_text(text)
    prompt = DEFAULT_PROMPTS[args.data] if args.prompt is None else args.prompt
    check_prompt(prompt, tok)  # before training: an unusable prompt must not cost a training run
    data = torch.tensor(tok.encode(text), dtype=torch.long)
    train_data, val_data = train_val_split(data, 0.1)
    config = GPTConfig(
        vocab_size=tok.vocab_size,
        context_length=args.context_length,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_model=args.d_model,
        dropout=args.dropout,
    )
    model = GPT(config).to(device)
    say(
        f"{args.data}: {len(text):,} characters, vocabulary {tok.vocab_size}; "
        f"train {len(train_data):,} / val {len(val_data):,} tokens"
    )
    say(
        f"GPT: {model.num_parameters():,} parameters ({model.num_parameters(non_embedding=True):,} "
        f"without the position table)"
    )

    g_train = torch.Generator().manual_seed(args.seed)  # every rank draws the same global batches...
    global_batch = once_per_iteration(
        lambda it: get_lm_batch(train_data, args.context_length, args.batch_size, generator=g_train)
    )

    def loss_fn(m, it, part: Part):
        x, y = (t[part.rows(args.batch_size)].to(device) for t in global_batch(it))  # ...and keeps its part
        logits = m(x)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y.flatten()), x.numel()

    eval_fn = lm_eval_fn(
        {"train": train_data, "val": val_data}, args.context_length, args.batch_size, args.eval_iters, device
    )

    t0 = time.time()
    history = train(
        model,
        loss_fn,
        max_iters=args.max_iters,
        lr=args.lr,
        eval_fn=eval_fn,
        eval_interval=args.eval_interval,
        device=device,
        compile=args.compile,
        progress=not args.no_progress,
        grad_accum=args.grad_accum,
    )
    wall = time.time() - t0
    if not dist.is_main:  # rank 0 evaluates, samples and writes; the others are done
        close_distributed()
        return {}
    final = history["eval"][-1][1]
    print(
        f"tokens/s {history['tokens_per_s']:,.0f}   train loss {final['train']:.3f}   "
        f"val loss {final['val']:.3f}   ({wall:.0f} s wall)"
    )

    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "gpt_char" if args.data == "python-docs" else "gpt_char_shakespeare"
    torch.save({"config": vars(config), "alphabet": tok.alphabet, "model": model.state_dict()}, out_dir / f"{stem}.pt")
    results = {
        "args": vars(args),
        "config": vars(config),
        "parameters": model.num_parameters(),
        "train_curve": history["train"][:: args.curve_every],
        "eval_curve": history["eval"],
        "tokens_per_s": history["tokens_per_s"],
        "train_seconds": history["seconds"],
        "wall_seconds": wall,
        "final": final,
        "samples": {},  # filled in below, once drawn
        "prompt": prompt,
        "machine": {
            "device": str(device),
            "cpu_threads": torch.get_num_threads(),
            "world_size": dist.world_size,
            "torch": torch.__version__,
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
        },
        "measured": time.strftime("%Y-%m-%d"),
    }
    # Written now, before sampling: whatever fails from here on, the trained model and its curves are kept.
    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=1))
    close_distributed()  # sampling is rank 0's alone

    model.eval()
    idx = torch.tensor([tok.encode(prompt)], device=device)
    samples = results["samples"]
    for name, kw in {
        "greedy": dict(temperature=0.0),
        "T=1.0": dict(temperature=1.0),
        "T=0.8, top_k=10": dict(temperature=0.8, top_k=10),
        "T=1.0, top_p=0.9": dict(temperature=1.0, top_p=0.9),
    }.items():
        g = torch.Generator(device=device).manual_seed(args.seed)
        out = generate(model, idx, args.sample_tokens, generator=g, **kw)
        samples[name] = tok.decode(out[0].tolist())
        print(f"--- {name}\n{samples[name]}")

    (out_dir / f"{stem}.json").write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
