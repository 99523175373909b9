"""Training helpers shared across chapters: bf16 autocast (chapters 1, 5, 6, 7), parameter counting and the
small training loop of chapters 6 and 7 (GPT and BERT pretraining, fine-tuning).

AdamW with linear warm-up and cosine decay (Loshchilov & Hutter 2019; the schedule of GPT-2/nanoGPT),
gradient clipping at 1.0, bf16 autocast on CUDA (CPU runs stay in fp32: CPU autocast is slower on most
machines), optional ``torch.compile``. Prints nothing itself except a tqdm bar; returns a history.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable

import torch
from torch import nn

__all__ = ["lr_at", "autocast_for", "count_parameters", "train", "run_log"]


def lr_at(it: int, *, lr: float, warmup: int, max_iters: int, min_lr_ratio: float = 0.1) -> float:
    """Linear warm-up over ``warmup`` iterations, then cosine decay to ``lr·min_lr_ratio`` at ``max_iters``."""
    if it < warmup:
        return lr * (it + 1) / warmup
    progress = min(1.0, (it - warmup) / max(1, max_iters - warmup))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def autocast_for(device: torch.device):
    """bf16 autocast where the device supports it well (CUDA with bf16), a no-op context otherwise."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def count_parameters(model: nn.Module, *, trainable_only: bool = False) -> int:
    """Number of scalar parameters in ``model`` (embeddings included), each distinct tensor counted once.

    A tensor shared by two modules counts once: GPT's LM head tied to its token embedding adds nothing
    (``model.parameters()`` yields a shared tensor once). Buffers (e.g. running statistics) are not
    parameters and are not counted. ``trainable_only=True`` leaves out frozen tensors (``requires_grad=False``).
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def train(
    model: nn.Module,
    loss_fn: Callable[[nn.Module, int], tuple[torch.Tensor, int]],
    *,
    max_iters: int,
    lr: float = 1e-3,
    warmup: int = 100,
    weight_decay: float = 0.1,
    betas=(0.9, 0.99),
    eval_fn: Callable[[nn.Module], dict] | None = None,
    eval_interval: int = 250,
    device: torch.device | str = "cpu",
    compile: bool = False,
    progress: bool = True,
) -> dict:
    """Train ``model`` for ``max_iters`` steps.

    Args:
        loss_fn: ``loss_fn(model, it) -> (loss, n_tokens)`` draws batch ``it`` and returns its mean loss and
            how many tokens it held (for the tokens/second figure).
        eval_fn: ``eval_fn(model) -> {name: float}``, called (in eval mode, without gradients) every
            ``eval_interval`` steps and at the end.

    Returns:
        ``{"train": [(it, loss)], "eval": [(it, {..})], "tokens_per_s": float, "seconds": float}``.
        Weight decay applies to matrices only (biases, norms and embeddings' 1-D params are not decayed).
    """
    from tqdm.auto import tqdm

    device = torch.device(device)
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas
    )
    step_model = torch.compile(model) if compile else model
    history = {"train": [], "eval": []}

    def evaluate(it):
        if eval_fn is None:
            return
        model.eval()
        with torch.no_grad(), autocast_for(device):
            history["eval"].append((it, eval_fn(step_model)))
        model.train()

    model.train()
    tokens, seconds = 0, 0.0
    bar = tqdm(range(max_iters), disable=not progress, mininterval=2.0)
    for it in bar:
        if it % eval_interval == 0:
            evaluate(it)
        for group in opt.param_groups:
            group["lr"] = lr_at(it, lr=lr, warmup=warmup, max_iters=max_iters)
        t0 = time.perf_counter()
        with autocast_for(device):
            loss, n = loss_fn(step_model, it)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if it >= min(10, max_iters // 10):  # leave out the first steps (allocation, compilation)
            seconds += time.perf_counter() - t0
            tokens += n
        history["train"].append((it, loss.item()))
        bar.set_postfix(loss=f"{loss.item():.3f}")
    evaluate(max_iters)
    history["tokens_per_s"] = tokens / seconds if seconds else float("nan")
    history["seconds"] = seconds
    return history


def run_log(path, device: torch.device) -> Callable[[str], None]:
    """A logger for training scripts: prints each message with a time stamp and appends it to ``path``.

    Starts the log with the command line and the environment (torch version, device, threads, platform), so a
    committed log says how its numbers were produced.
    """
    import platform
    import sys

    handle = open(path, "w")

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        handle.write(line + "\n")
        handle.flush()

    log(f"command: {' '.join(sys.argv)}")
    log(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, {platform.platform()}")
    return log
