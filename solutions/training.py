"""Training plumbing shared by the chapters and the scripts (not a chapter's idea).

* :func:`pick_device`, :func:`autocast_for` (bf16 on CUDA; CPU runs stay in fp32: CPU autocast is slower on
  most machines), :func:`count_parameters`;
* :func:`train_loop` — the one training loop: a per-batch loss callback, an optimiser, a per-iteration learning
  rate, optional gradient clipping, periodic evaluation, ``torch.compile``, a tqdm bar and a log;
* two recipes on top of it: :func:`train` (AdamW with linear warm-up and cosine decay, clipping at 1.0: GPT and
  BERT, chapters 6–7) and :func:`train_seq2seq` (chapter 1's teacher-forced Adam recipe, also used for chapter 2);
* :func:`save_checkpoint` / :func:`load_checkpoint` (float16 weights + config) and :func:`run_log` for scripts;
* past one machine: :func:`init_distributed` (the process group ``torchrun`` describes, or none), :class:`Part`
  (which rows of an iteration's global batch one rank computes in one micro-step) and :func:`once_per_iteration`;
  :func:`train_loop` wraps the model in ``DistributedDataParallel`` when a process group is up and accumulates
  gradients over ``grad_accum`` micro-steps, so the global batch is the same at every world size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypedDict, TypeVar, cast

import torch
from torch import nn

from solutions.ch01_seq2seq import sequence_loss, shift_for_teacher_forcing
from solutions.translation_data import PAD_ID, Batch

__all__ = [
    "pick_device",
    "autocast_for",
    "count_parameters",
    "lr_at",
    "History",
    "train_loop",
    "train",
    "train_seq2seq",
    "save_checkpoint",
    "load_checkpoint",
    "run_log",
    "Part",
    "Distributed",
    "init_distributed",
    "close_distributed",
    "once_per_iteration",
]


@dataclasses.dataclass(frozen=True)
class Part:
    """Which share of an iteration's global batch one call of the loss function computes.

    An iteration's global batch is cut into ``count = world_size · grad_accum`` equal parts; rank ``r`` computes
    parts ``r·grad_accum … r·grad_accum + grad_accum - 1``, one per micro-step. One process without accumulation
    gets ``Part(0, 1)``: the whole batch.
    """

    index: int = 0
    count: int = 1

    def rows(self, n: int) -> slice:
        """The rows of a global batch of ``n`` rows that are this part's (a slice along dim 0).

        Raises:
            ValueError: if ``n`` is not a multiple of ``count`` (the parts would differ in size, so their mean
                losses would not average to the global batch's mean loss).
        """
        if n % self.count:
            raise ValueError(
                f"a global batch of {n} rows cannot be cut into {self.count} equal parts "
                "(world_size × grad_accum must divide the batch size)"
            )
        k = n // self.count
        return slice(self.index * k, (self.index + 1) * k)


LossFn = Callable[[nn.Module, int, Part], tuple[torch.Tensor, int]]
"""``loss_fn(model, it, part) -> (loss, n_tokens)``: the mean loss of ``part`` of iteration ``it``'s global batch
(``part.rows(batch_size)``) and how many tokens that part held (for the tokens/second figure). Every rank must
draw the same global batch for ``it`` (same seed) and keep only its part; :func:`once_per_iteration` draws it once
for all of a rank's micro-steps."""

T = TypeVar("T")


def once_per_iteration(draw: Callable[[int], T]) -> Callable[[int], T]:
    """Wrap ``draw(it) -> global batch`` so that the micro-steps of one iteration share one draw.

    ``draw`` is called once per new ``it`` (in the order the iterations come), so a batch stream drawn from a
    seeded generator is the same whatever the world size or the number of micro-steps.
    """
    last: dict[str, Any] = {}

    def get(it: int) -> T:
        if last.get("it") != it:
            last["it"], last["batch"] = it, draw(it)
        return cast(T, last["batch"])

    return get


@dataclasses.dataclass(frozen=True)
class Distributed:
    """This process's place in a ``torchrun`` job (one process, rank 0 of 1, when not launched by it)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes checkpoints, logs and results."""
        return self.rank == 0


def init_distributed(device: str | torch.device | None = None) -> tuple[Distributed, torch.device]:
    """Join the process group that ``torchrun`` describes in the environment (``RANK``, ``LOCAL_RANK``,
    ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), if any, and pick this process's device.

    Backend: NCCL for CUDA, gloo for CPU. On CUDA, local rank ``i`` uses GPU ``i`` of its node. Without
    ``WORLD_SIZE`` (or with 1) nothing is initialised and the result is ``(Distributed(), pick_device(device))``,
    so one script runs unchanged on one process or many.
    """
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Distributed(), pick_device(device)
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    dev = pick_device(device)
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")
    return Distributed(rank, local_rank, world), dev


def close_distributed() -> None:
    """Leave the process group, if one is up (call at the end of a script)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _world() -> tuple[int, int]:
    """(rank, world_size) of the process group, (0, 1) when there is none."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """``device`` if given, else CUDA when available, else CPU."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def autocast_for(device: torch.device) -> AbstractContextManager[Any]:
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


def lr_at(it: int, *, lr: float, warmup: int, max_iters: int, min_lr_ratio: float = 0.1) -> float:
    """Linear warm-up over ``warmup`` iterations, then cosine decay to ``lr·min_lr_ratio`` at ``max_iters``."""
    if it < warmup:
        return lr * (it + 1) / warmup
    progress = min(1.0, (it - warmup) / max(1, max_iters - warmup))
    return lr * (min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


class History(TypedDict):
    """What :func:`train_loop` returns (and the scripts save as JSON)."""

    train: list[tuple[int, float]]  # (iteration, loss of that batch)
    eval: list[tuple[int, dict[str, float]]]  # (iteration, eval_fn's result)
    tokens_per_s: float  # training throughput, the first iterations (allocation, compilation) left out
    seconds: float  # time those timed iterations took


# --------------------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------------------


def train_loop(
    model: nn.Module,
    loss_fn: LossFn,
    optimizer: torch.optim.Optimizer,
    *,
    max_iters: int,
    lr_schedule: Callable[[int], float] | None = None,
    clip: float | None = None,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_interval: int = 250,
    device: torch.device | str | None = None,
    compile: bool = False,
    progress: bool = True,
    desc: str | None = None,
    log: Callable[[str], None] | None = None,
    log_every: int = 100,
    grad_accum: int = 1,
    find_unused_parameters: bool = False,
) -> History:
    """Train ``model`` in place for ``max_iters`` optimiser steps.

    Each iteration ``it``: set every parameter group's learning rate to ``lr_schedule(it)`` (when given); for
    each of ``grad_accum`` micro-steps compute ``loss_fn(model, it, part)`` under :func:`autocast_for` and
    back-propagate it divided by ``grad_accum``; clip the gradient norm to ``clip`` (when given) and step
    ``optimizer``.

    Past one process: when a ``torch.distributed`` process group is up (:func:`init_distributed`), the model is
    wrapped in ``DistributedDataParallel`` (Li et al. 2020), which averages the gradients over the ranks during
    the last micro-step's backward pass (the others run under ``no_sync``). The ``world_size · grad_accum``
    parts are equal shares of one global batch, so the update equals one process's on the whole batch (up to
    float rounding). The logged loss is averaged over all parts; evaluation, the progress bar and ``log`` run on
    rank 0 only (the other ranks record no evaluations).

    Args:
        loss_fn: ``loss_fn(model, it, part) -> (loss, n_tokens)``, see :data:`LossFn` and :class:`Part`.
        optimizer: built on ``model``'s parameters.
        lr_schedule: ``it -> learning rate`` (absolute, not a factor); None keeps the optimiser's.
        eval_fn: ``eval_fn(model) -> {name: float}``, called (in eval mode, without gradients) every
            ``eval_interval`` iterations and at the end.
        device: where ``model`` lives (default: the device of its parameters); it decides autocast.
        compile: run ``loss_fn`` on ``torch.compile(model)``.
        log: called with one line (mean loss of the last ``log_every`` iterations, learning rate, elapsed time)
            every ``log_every`` iterations and at the last one.
        grad_accum: micro-steps per iteration on each rank (>= 1).
        find_unused_parameters: passed to ``DistributedDataParallel``: True when some parameters get no gradient
            (e.g. BERT's pooler during masked-LM pretraining); costs a graph traversal per step.

    Returns:
        :class:`History`; ``tokens_per_s`` counts the tokens of all ranks. The model is left in training mode.

    Raises:
        ValueError: if ``grad_accum < 1``.
    """
    from tqdm.auto import tqdm

    if grad_accum < 1:
        raise ValueError(f"grad_accum must be >= 1, got {grad_accum}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    rank, world = _world()
    net: nn.Module = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            find_unused_parameters=find_unused_parameters,
        )
    step_model = cast(nn.Module, torch.compile(net)) if compile else net  # an OptimizedModule
    eval_model = cast(nn.Module, torch.compile(model)) if compile and world > 1 else step_model
    history: History = {"train": [], "eval": [], "tokens_per_s": float("nan"), "seconds": 0.0}

    def evaluate(it: int) -> None:
        if eval_fn is None or rank != 0:
            return
        model.eval()
        with torch.no_grad(), autocast_for(device):
            history["eval"].append((it, eval_fn(eval_model)))  # the bare model: no collectives on one rank
        model.train()

    def micro_steps() -> Iterator[tuple[Part, AbstractContextManager[Any]]]:
        for micro in range(grad_accum):
            last = micro == grad_accum - 1
            sync = net.no_sync() if world > 1 and not last else contextlib.nullcontext()  # type: ignore[operator]
            yield Part(rank * grad_accum + micro, world * grad_accum), sync

    model.train()
    tokens, seconds, start = 0, 0.0, time.time()
    bar = tqdm(range(max_iters), desc=desc, disable=not progress or rank != 0, mininterval=2.0)
    for it in bar:
        if it % eval_interval == 0:
            evaluate(it)
        if lr_schedule is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_schedule(it)
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        total, n = torch.zeros((), device=device), 0
        for part, sync in micro_steps():
            with sync:
                with autocast_for(device):
                    loss, n_part = loss_fn(step_model, it, part)
                (loss / grad_accum).backward()
            total += loss.detach().float()
            n += n_part
        if world > 1:  # the mean loss over every rank's parts, for the log
            import torch.distributed as dist

            dist.all_reduce(total)
            total /= world
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if it >= min(10, max_iters // 10):  # leave out the first steps (allocation, compilation)
            seconds += time.perf_counter() - t0
            tokens += n * world
        history["train"].append((it, total.item() / grad_accum))
        bar.set_postfix(loss=f"{history['train'][-1][1]:.3f}", refresh=False)  # drawn at most every 2 s
        if log is not None and rank == 0 and ((it + 1) % log_every == 0 or it + 1 == max_iters):
            recent = [value for _, value in history["train"][-log_every:]]
            log(
                f"{desc or 'train'} step {it + 1}/{max_iters} loss {sum(recent) / len(recent):.4f} "
                f"lr {optimizer.param_groups[0]['lr']:.2e} elapsed {time.time() - start:.1f}s"
            )
    bar.close()
    evaluate(max_iters)
    history["tokens_per_s"] = tokens / seconds if seconds else float("nan")
    history["seconds"] = seconds
    return history


# --------------------------------------------------------------------------------------------------
# Recipes
# --------------------------------------------------------------------------------------------------


def train(
    model: nn.Module,
    loss_fn: LossFn,
    *,
    max_iters: int,
    lr: float = 1e-3,
    warmup: int = 100,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.99),
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_interval: int = 250,
    device: torch.device | str | None = None,
    compile: bool = False,
    progress: bool = True,
    grad_accum: int = 1,
    find_unused_parameters: bool = False,
) -> History:
    """GPT/BERT pretraining and fine-tuning (chapters 6–7): :func:`train_loop` with AdamW, :func:`lr_at`'s warm-up
    and cosine decay (Loshchilov & Hutter 2019; the schedule of GPT-2/nanoGPT) and gradient clipping at 1.0.

    Weight decay applies to matrices only (biases, norms and other 1-D parameters are not decayed). Arguments as
    :func:`train_loop`.
    """
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas
    )
    return train_loop(
        model,
        loss_fn,
        opt,
        max_iters=max_iters,
        lr_schedule=lambda it: lr_at(it, lr=lr, warmup=warmup, max_iters=max_iters),
        clip=1.0,
        eval_fn=eval_fn,
        eval_interval=eval_interval,
        device=device,
        compile=compile,
        progress=progress,
        grad_accum=grad_accum,
        find_unused_parameters=find_unused_parameters,
    )


def train_seq2seq(
    model: nn.Module,
    batches: Iterator[Batch],
    steps: int,
    lr: float = 2e-3,
    clip: float = 5.0,
    device: str | torch.device | None = None,
    log_every: int = 100,
    desc: str = "train",
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> list[float]:
    """Teacher-forced training of a translation model (chapters 1–2) with Adam and gradient-norm clipping.

    Sutskever et al. trained with plain SGD (lr 0.7, halved each half epoch after 5 epochs) and clipped the
    gradient norm at 5 (sec. 3.4); we keep the clipping but use Adam, which reaches a good model in far fewer
    steps — what a CPU budget needs — with a linear warm-down of the learning rate to 10% over the run.

    Args:
        model: a module with ``forward(src, src_lens, dec_in) -> (B, T, V)`` logits.
        batches: iterator of :class:`~solutions.translation_data.Batch` (e.g. ``infinite_batches``).
        steps: number of optimiser updates.
        device: where to train (default: CUDA if available, else CPU); the model is moved there.
        log: optional callable receiving one progress line (str) every ``log_every`` steps.

    Returns:
        the training loss (nats / token) of every step, as Python floats; the model is left in eval mode.
    """
    device = pick_device(device)
    model.to(device)

    def loss_fn(m: nn.Module, it: int, part: Part) -> tuple[torch.Tensor, int]:
        batch = next(batches).to(device)  # one process: part is always the whole batch
        dec_in, dec_out = shift_for_teacher_forcing(batch.tgt)  # (B, T-1) each
        logits = m(batch.src, batch.src_lens, dec_in)  # (B, T-1, V)
        return sequence_loss(logits.float(), dec_out), int((dec_out != PAD_ID).sum())

    history = train_loop(
        model,
        loss_fn,
        torch.optim.Adam(model.parameters(), lr=lr),
        max_iters=steps,
        lr_schedule=lambda it: lr * (1.0 - 0.9 * it / max(1, steps)),
        clip=clip,
        device=device,
        progress=progress,
        desc=desc,
        log=log,
        log_every=log_every,
    )
    model.eval()
    return [value for _, value in history["train"]]


# --------------------------------------------------------------------------------------------------
# Checkpoints and logs
# --------------------------------------------------------------------------------------------------


def save_checkpoint(model: nn.Module, path: str | Path, half: bool = True, **extra: Any) -> None:
    """Save ``model.config`` and its weights (as float16 when ``half``, to keep files small) plus
    any ``extra`` metadata (e.g. vocabularies) with :func:`torch.save`."""
    state = {k: (v.half() if half and v.is_floating_point() else v).cpu() for k, v in model.state_dict().items()}
    torch.save({"config": model.config, "state_dict": state, **extra}, path)


def load_checkpoint(
    path: str | Path, model_cls: Callable[..., nn.Module], device: str | torch.device | None = None
) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild ``model_cls(**config)`` from :func:`save_checkpoint`'s file, weights cast back to
    float32, in eval mode on ``device`` (default CPU).  Returns ``(model, checkpoint_dict)``."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    model = model_cls(**ckpt["config"])
    model.load_state_dict({k: (v.float() if v.is_floating_point() else v) for k, v in ckpt["state_dict"].items()})
    return model.to(device or "cpu").eval(), ckpt


def run_log(path: str | Path, device: torch.device) -> Callable[[str], None]:
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
