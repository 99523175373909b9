"""Chapter 7: what the second direction buys, on synthetic tasks where only the right-hand side decides the blank.

On real text at the page's budget BERT has not yet learned enough for bidirectionality to show
(``scripts/train_bert.py``). Here the blank is *decided by the right-hand context* and the left-hand context is
independent of it by construction, so the best any model can do from the left alone is exactly chance:

* ``copy`` — the blank is a letter that reappears later, as the one capital letter right of the blank:
  ``[CLS] k D a [MASK] f b C g [SEP]`` → ``c``. Capitals left of the blank are distractors, drawn on their own.
  The answer is drawn uniformly from the ``n_letters`` letters, on its own random stream: chance from the left is
  exactly ``1 / n_letters``.
* ``brackets`` — the blank is an opening bracket; the bracket that closes it, further right, says which:
  ``[CLS] a ( b ) [MASK] [ c ] d > e [SEP]`` → ``<``. Between the blank and its closer sits a balanced string
  with brackets of every kind, so the nearest closing bracket is often the wrong one: the model has to count
  depth. The kind is uniform over ``n_brackets``: chance from the left is exactly ``1 / n_brackets``.

Three models per task and seed, the same sizes, steps, batch, learning rate and training items:

* ``bert`` — chapter 7's ``BertForMaskedLM``, the loss at the blank (``[MASK]``), both sides visible;
* ``bert_right_masked`` — the same network, trained and tested with an attention mask that hides every key to the
  right of the blank, at every layer (so the blank's output depends on nothing right of the blank);
* ``gpt`` — chapter 6's ``GPT`` (causal), trained to predict the blank from the position before it.

All trained with chapter 6–7's recipe (``solutions.training.train``: AdamW, warm-up, cosine decay, clipping), on
fresh items each step. Each seed draws the initialisation and the training items; the test items (``--n_test``
per task) are one fixed draw, the same for every model and seed. Accuracy on them with a Wilson score interval
(95%), a paired bootstrap interval for the differences between models (same items), and the spread over seeds.

The committed run (all tasks × models × seeds, about 11 minutes on one thread of a shared 2-core CPU):

    python -m scripts.train_bidirectional --threads 1

Writes ``--out``/``results.json`` (after every run, so an interrupted run keeps what it finished) and
``--out``/``train.log``.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import random
import time

import torch
import torch.nn.functional as F

from scripts.seeds import spread
from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch07_bert import SPECIAL_TOKENS, BertConfig, BertForMaskedLM, mlm_loss
from solutions.training import Part, count_parameters, once_per_iteration, pick_device, run_log, train

PAD, UNK, CLS, SEP, MASK = range(len(SPECIAL_TOKENS))
TASKS = ("copy", "brackets")
MODELS = ("bert", "bert_right_masked", "gpt")
LETTERS = [chr(ord("a") + i) for i in range(16)]
CAPITALS = [c.upper() for c in LETTERS]
OPENERS, CLOSERS = "([{<", ")]}>"
VOCAB = [*SPECIAL_TOKENS, *LETTERS, *CAPITALS, *OPENERS, *CLOSERS]
ID = {t: i for i, t in enumerate(VOCAB)}


# --------------------------------------------------------------------------------------------------
# The tasks: [CLS] left [MASK] right [SEP]; the answer is drawn first, on its own stream
# --------------------------------------------------------------------------------------------------


def balanced(n: int, rng: random.Random, *, n_brackets: int, n_letters: int, max_depth: int) -> list[str]:
    """A random balanced string of exactly ``n`` tokens: brackets of the first ``n_brackets`` kinds, nested at most
    ``max_depth`` deep, and letters. Each token is an opening bracket, a closing one or a letter, with equal weight
    among those that still let the string close within ``n`` tokens."""
    out: list[str] = []
    stack: list[int] = []
    for i in range(n):
        room = n - i - 1  # tokens left after this one
        options = []
        if room >= len(stack):
            options.append("letter")
        if room >= len(stack) + 1 and len(stack) < max_depth:
            options.append("open")
        if stack:
            options.append("close")
        choice = rng.choice(options)
        if choice == "letter":
            out.append(rng.choice(LETTERS[:n_letters]))
        elif choice == "open":
            stack.append(rng.randrange(n_brackets))
            out.append(OPENERS[stack[-1]])
        else:
            out.append(CLOSERS[stack.pop()])
    return out


def draw_items(
    task: str, n: int, seed: str, *, T: int, n_letters: int, n_brackets: int, left_seed: str | None = None
) -> dict[str, torch.Tensor]:
    """``n`` items of ``task``, each ``T`` tokens: ``[CLS] left [MASK] right [SEP]``.

    Three independent random streams (``random.Random`` seeded with ``seed`` and the stream's name): ``left``
    draws the left part and its length (so the blank's position), ``answer`` draws the answers — uniformly, before
    and apart from anything else — and ``right`` draws the rest of the right part, built around the answer. The
    answers are therefore independent of the left parts by construction: changing the left stream's seed
    (``left_seed``, default ``seed``) changes the left parts and no answer.

    Returns ``{"ids": (n, T) int64 with [MASK] at the blank, "blank": (n,) int64 positions,
    "answer": (n,) int64 token ids}``.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    left_rng = random.Random(f"{task}/{seed if left_seed is None else left_seed}/left")
    answer_rng, right_rng = (random.Random(f"{task}/{seed}/{s}") for s in ("answer", "right"))
    n_answers = n_letters if task == "copy" else n_brackets
    kw = dict(n_brackets=n_brackets, n_letters=n_letters, max_depth=2)
    ids, blanks, answers = [], [], []
    for _ in range(n):
        answer = answer_rng.randrange(n_answers)  # first, on its own stream: independent of the left
        a = left_rng.randrange(2, T // 2)  # left length; the blank sits at 1 + a
        if task == "copy":  # letters, a tenth of them capitals (distractors: not the answer's)
            left = [
                left_rng.choice(CAPITALS[:n_letters] if left_rng.random() < 0.1 else LETTERS[:n_letters])
                for _ in range(a)
            ]
        else:
            left = balanced(a, left_rng, **kw)
        b = T - 3 - a  # right length
        if task == "copy":
            right = [right_rng.choice(LETTERS[:n_letters]) for _ in range(b)]
            right[right_rng.randrange(b)] = CAPITALS[answer]  # the one capital right of the blank
            target = LETTERS[answer]
        else:
            m = right_rng.randrange(min(b - 1, 12) + 1)  # the balanced string between the blank and its closer
            inner = balanced(m, right_rng, **kw)
            right = inner + [CLOSERS[answer]] + balanced(b - 1 - m, right_rng, **kw)
            target = OPENERS[answer]
        ids.append([CLS, *(ID[t] for t in left), MASK, *(ID[t] for t in right), SEP])
        blanks.append(1 + a)
        answers.append(ID[target])
    return {"ids": torch.tensor(ids), "blank": torch.tensor(blanks), "answer": torch.tensor(answers)}


def answer_from_the_right(task: str, right: list[str]) -> str:
    """The answer as the right part (the tokens after the blank) decides it: the one capital letter, in lower case,
    or the opening bracket of the kind that closes the blank (the first closer that takes the depth back to zero)."""
    if task == "copy":
        (capital,) = (t for t in right if t in CAPITALS)
        return capital.lower()
    depth = 1
    for t in right:
        depth += (t in OPENERS) - (t in CLOSERS)
        if depth == 0:
            return OPENERS[CLOSERS.index(t)]
    raise ValueError("the blank is never closed")


def nearest_closer(right: list[str]) -> str | None:
    """The brackets baseline that ignores nesting: the opening bracket matching the first closer after the blank."""
    return next((OPENERS[CLOSERS.index(t)] for t in right if t in CLOSERS), None)


# --------------------------------------------------------------------------------------------------
# Models and their predictions at the blank
# --------------------------------------------------------------------------------------------------


def build(model_name: str, args) -> torch.nn.Module:
    """The model of ``model_name`` at the shared sizes (BERT with ``d_ff = 4 d_model``, the GPT's MLP width)."""
    sizes = dict(
        vocab_size=len(VOCAB), context_length=args.seq_len, n_layers=args.n_layers, n_heads=args.n_heads,
        d_model=args.d_model, dropout=0.0,
    )  # fmt: skip
    if model_name == "gpt":
        return GPT(GPTConfig(**sizes))
    return BertForMaskedLM(BertConfig(**sizes, d_ff=4 * args.d_model))


def logits_at_blank(model_name: str, m, ids: torch.Tensor, blank: torch.Tensor) -> torch.Tensor:
    """``(B, V)`` scores for the token at the blank. BERT reads its output at the blank (``[MASK]``); the
    right-masked BERT does the same with every key right of the blank hidden (``attention_mask`` True at positions
    ``<= blank``); the GPT reads its output one position before the blank (a causal model's next-token scores)."""
    rows = torch.arange(len(ids), device=ids.device)
    if model_name == "gpt":
        return m(ids)[rows, blank - 1]  # (B, V): position blank - 1 sees ids[:, :blank] only
    mask = None
    if model_name == "bert_right_masked":
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] <= blank[:, None]  # (B, T), True = may attend
    return m(ids, None, mask)[rows, blank]  # (B, V)


def loss_at_blank(model_name: str, m, ids: torch.Tensor, blank: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
    """Cross-entropy at the blank: chapter 7's ``mlm_loss`` with the label at the blank and -100 elsewhere."""
    labels = torch.full_like(ids, -100)
    labels[torch.arange(len(ids), device=ids.device), blank] = answer
    if model_name == "gpt":
        labels = labels[:, 1:]  # position t predicts token t + 1
        return mlm_loss(m(ids)[:, :-1], labels)
    return mlm_loss(logits_at_blank(model_name, m, ids, blank)[:, None], answer[:, None])


# --------------------------------------------------------------------------------------------------
# Intervals
# --------------------------------------------------------------------------------------------------


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion ``hits / n`` (95% for the default ``z``)."""
    if n <= 0:
        raise ValueError(f"need n > 0 items, got {n}")
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_bootstrap(a: torch.Tensor, b: torch.Tensor, *, n_resamples: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile bootstrap interval of ``mean(a) - mean(b)`` for per-item hits ``a``, ``b`` (bool, the same
    items), resampling items."""
    g = torch.Generator().manual_seed(seed)
    ix = torch.randint(len(a), (n_resamples, len(a)), generator=g)
    diffs = a.float()[ix].mean(1) - b.float()[ix].mean(1)
    lo, hi = torch.quantile(diffs, torch.tensor([0.025, 0.975])).tolist()
    return [lo, hi]


# --------------------------------------------------------------------------------------------------
# One run: a task, a model, a seed
# --------------------------------------------------------------------------------------------------


def run_one(task: str, model_name: str, seed: int, train_items, test_items, args, device, log) -> dict:
    """Train ``model_name`` on ``task`` with ``seed`` (its initialisation; ``train_items`` are the seed's items,
    one batch per step) and test it on ``test_items``. The two BERTs of a seed start from the same weights."""
    log(f"{task} {model_name} seed {seed}: training")
    torch.manual_seed(seed)
    model = build(model_name, args).to(device)
    train_items = {k: v.to(device) for k, v in train_items.items()}
    test_items = {k: v.to(device) for k, v in test_items.items()}
    B = args.batch_size
    batch = once_per_iteration(lambda it: {k: v[it * B : (it + 1) * B] for k, v in train_items.items()})

    def loss_fn(m, it, part: Part):
        b = {k: v[part.rows(B)] for k, v in batch(it).items()}  # every model meets the same items in the same order
        return loss_at_blank(model_name, m, b["ids"], b["blank"], b["answer"]), b["ids"].numel()

    def eval_fn(m):
        scores = logits_at_blank(model_name, m, test_items["ids"], test_items["blank"])
        return {
            "loss": F.cross_entropy(scores.float(), test_items["answer"]).item(),
            "accuracy": (scores.argmax(-1) == test_items["answer"]).float().mean().item(),
        }

    t0 = time.time()
    hist = train(
        model,
        loss_fn,
        max_iters=args.max_iters,
        lr=args.lr,
        warmup=args.warmup,
        weight_decay=0.0,  # fresh items every step: nothing to regularise
        eval_fn=eval_fn,
        eval_interval=args.eval_interval,
        device=device,
        progress=not args.no_progress,
        find_unused_parameters=True,  # BERT's pooler gets no gradient
    )
    model.eval()
    with torch.no_grad():
        hits = logits_at_blank(model_name, model, test_items["ids"], test_items["blank"]).argmax(-1)
        hits = (hits == test_items["answer"]).cpu()
    n, k = len(hits), int(hits.sum())
    every = max(1, args.max_iters // 60)  # the training curve, averaged over windows of `every` steps
    curve = [
        (hist["train"][i][0], sum(v for _, v in hist["train"][i : i + every]) / len(hist["train"][i : i + every]))
        for i in range(0, len(hist["train"]), every)
    ]
    log(
        f"{task} {model_name} seed {seed}: accuracy {k / n:.4f} ({k}/{n}), test loss {hist['eval'][-1][1]['loss']:.4f}, "
        f"{time.time() - t0:.0f} s"
    )
    return {
        "seed": seed,
        "parameters": count_parameters(model),
        "accuracy": k / n,
        "hits": k,
        "n": n,
        "wilson_95": list(wilson(k, n)),
        "train_curve": curve,
        "eval": hist["eval"],
        "seconds": round(time.time() - t0, 1),
        "tokens_per_s": round(hist["tokens_per_s"]),
        "_hits": hits,  # per-item, for the paired intervals (not saved)
    }


def summarise(task: str, runs: dict[str, list[dict]], chance: float, n_test: int) -> dict:
    """Per model: the spread over seeds; per pair of models: each seed's paired bootstrap interval."""
    models = {
        name: {
            "parameters": rs[0]["parameters"],
            "seeds": [{k: v for k, v in r.items() if k != "_hits"} for r in rs],
            "accuracy": spread([r["accuracy"] for r in rs]),
        }
        for name, rs in runs.items()
    }
    differences = {}
    if "bert" in runs:
        for other in (m for m in runs if m != "bert"):
            pairs = zip(runs["bert"], runs[other])
            differences[f"bert - {other}"] = [
                {
                    "seed": a["seed"],
                    "difference": a["accuracy"] - b["accuracy"],
                    "bootstrap_95": paired_bootstrap(a["_hits"], b["_hits"], seed=a["seed"]),
                }
                for a, b in pairs
            ]
    # a model that can only guess is right on each item with probability `chance`: its accuracy on n_test items has
    # this standard error whatever it predicts (the answers are independent of what it sees)
    return {
        "chance": chance,
        "chance_standard_error": math.sqrt(chance * (1 - chance) / n_test),
        "models": models,
        "differences": differences,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--n_letters", type=int, default=16, help="copy: the answers (and the filler letters)")
    p.add_argument("--n_brackets", type=int, default=4, help="brackets: kinds of brackets (the answers)")
    p.add_argument("--seq_len", type=int, default=24)
    p.add_argument("--n_layers", type=int, default=2)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--d_model", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--max_iters", type=int, default=1500)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval_interval", type=int, default=150)
    p.add_argument("--n_test", type=int, default=2000, help="test items per task (one fixed draw)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, ... (the committed run: cpu)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: PyTorch's default)")
    p.add_argument("--out", default="results/ch07_bert/bidirectional")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if not 2 <= args.n_letters <= len(LETTERS) or not 2 <= args.n_brackets <= len(OPENERS):
        raise ValueError(f"need 2 <= n_letters <= {len(LETTERS)} and 2 <= n_brackets <= {len(OPENERS)}")
    if args.seq_len < 10:
        raise ValueError(f"seq_len must be at least 10, got {args.seq_len}")
    device = pick_device(args.device)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = run_log(out / "train.log", device)
    sizes = dict(T=args.seq_len, n_letters=args.n_letters, n_brackets=args.n_brackets)
    results: dict = {
        "args": vars(args),
        "vocabulary": VOCAB,
        "machine": {
            "device": str(device),
            "cpu_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "measured": time.strftime("%Y-%m-%d"),
        "tasks": {},
    }
    start = time.time()
    for task in args.tasks:
        n_answers = args.n_letters if task == "copy" else args.n_brackets
        test_items = draw_items(task, args.n_test, "test", **sizes)
        rights = [
            [VOCAB[i] for i in row[b + 1 : -1]]
            for row, b in zip(test_items["ids"].tolist(), test_items["blank"].tolist())
        ]
        baselines = {}
        if task == "brackets":
            hits = sum(nearest_closer(r) == VOCAB[a] for r, a in zip(rights, test_items["answer"].tolist()))
            baselines["nearest_closer"] = {"hits": hits, "accuracy": hits / args.n_test}
        runs: dict[str, list[dict]] = {m: [] for m in args.models}
        test_set = set(map(tuple, test_items["ids"].tolist()))
        seen: dict[str, int] = {}
        for seed in args.seeds:
            train_items = draw_items(task, args.max_iters * args.batch_size, f"train{seed}", **sizes)
            seen[str(seed)] = sum(tuple(row) in test_set for row in train_items["ids"].tolist())
            for model_name in args.models:
                runs[model_name].append(run_one(task, model_name, seed, train_items, test_items, args, device, log))
                results["tasks"][task] = {
                    "n_answers": n_answers,
                    "chance_fraction": f"1/{n_answers}",
                    "example": " ".join(VOCAB[i] for i in test_items["ids"][0].tolist())
                    + f"  ->  {VOCAB[int(test_items['answer'][0])]}",
                    "baselines": baselines,
                    "training_items_per_seed": args.max_iters * args.batch_size,
                    "training_items_that_are_test_items": seen,
                    **summarise(task, {m: r for m, r in runs.items() if r}, 1 / n_answers, args.n_test),
                }
                results["seconds"] = round(time.time() - start, 1)
                (out / "results.json").write_text(json.dumps(results, indent=1))  # after every run
    log(f"all runs: {time.time() - start:.0f} s; {out / 'results.json'}")
    return results


if __name__ == "__main__":
    main()
