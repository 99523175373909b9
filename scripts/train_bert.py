"""Chapter 7 experiments on the Python docs: WordPiece, BERT pretraining, fine-tuning, BERT vs GPT fill-in.

    python -m scripts.train_bert --part tokenizer     # WordPiece vocabulary (seconds)
    python -m scripts.train_bert --part bert          # MLM pretraining           } these two can run
    python -m scripts.train_bert --part gpt           # a GPT of the same size     } in parallel
    python -m scripts.train_bert --part eval          # MLM accuracy, fine-tuning, fill-in-the-blank
    python -m scripts.train_bert                      # all four in turn

Data: the documentation topics of this Python (``solutions.text_data``); every 10th topic is held out, so
validation sentences come from pages the models never saw. BERT is pretrained on consecutive sentence pairs
``[CLS] A [SEP] B [SEP]`` (segments 0/1, no next-sentence loss: see the book), the GPT on the same sentences
as one stream ``[CLS] s1 [SEP] [CLS] s2 [SEP] …``; both with the same sizes, steps, batch and sequence length.

Writes into ``--out``: ``wordpiece.json``, ``bert_mlm.pt``, ``gpt_wordpiece.pt`` and ``bert_results.json`` (the
book reads the JSON and the BERT checkpoint).

Runs unchanged under ``torchrun --nproc_per_node N -m scripts.train_bert`` (DistributedDataParallel with gloo, on
CPU): ``--batch_size`` is the global batch of one optimiser step, cut into ``N × --grad_accum`` equal parts; every
rank draws (and masks) the same global batch and trains on its own parts; rank 0 alone trains the tokenizer, prints
and writes files.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import random
import time

import torch
import torch.nn.functional as F
from torch import distributed as torch_distributed

from solutions.ch06_gpt import GPT, GPTConfig
from solutions.ch07_bert import (
    SPECIAL_TOKENS,
    Bert,
    BertClassifier,
    BertConfig,
    BertForMaskedLM,
    mask_tokens,
    mlm_loss,
    train_wordpiece,
)
from solutions.text_data import python_docs, sentences
from solutions.training import Part, close_distributed, count_parameters, init_distributed, once_per_iteration, train

PAD, UNK, CLS, SEP, MASK = range(len(SPECIAL_TOKENS))
MAIN = True  # rank 0 (or the only process): the one that prints and writes files


def say(*args) -> None:
    if MAIN:
        print(*args)


def split_sentences() -> tuple[list[list[str]], list[list[str]]]:
    """Sentences per topic: (train topics, held-out topics); every 10th topic (sorted by name) is held out."""
    topics = list(python_docs().values())
    per_topic = [sentences(t) for t in topics]
    train_t = [s for i, s in enumerate(per_topic) if i % 10 != 9 and s]
    val_t = [s for i, s in enumerate(per_topic) if i % 10 == 9 and s]
    return train_t, val_t


def load_tokenizer(out: pathlib.Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(out / "wordpiece.json"))


def encode_pairs(tok, topics, T: int):
    """``[CLS] s_i [SEP] s_{i+1} [SEP]`` for consecutive sentences of a topic, truncated/padded to ``T``."""
    tok.enable_truncation(T)
    tok.enable_padding(length=T, pad_id=PAD)
    pairs = [(s[i], s[i + 1]) for s in topics for i in range(len(s) - 1)]
    enc = tok.encode_batch(pairs)
    tok.no_truncation(), tok.no_padding()
    ids = torch.tensor([e.ids for e in enc])
    types = torch.tensor([e.type_ids for e in enc])
    att = torch.tensor([e.attention_mask for e in enc])
    return ids, types, att


def encode_stream(tok, topics) -> torch.Tensor:
    return torch.tensor([i for s in topics for e in tok.encode_batch([x for x in s]) for i in e.ids])


def part_tokenizer(args, out):
    if not MAIN:
        return  # the other ranks wait at the barrier in main(), then read rank 0's file
    train_t, _ = split_sentences()
    tok = train_wordpiece([s for t in train_t for s in t], vocab_size=args.vocab_size)
    tok.save(str(out / "wordpiece.json"))
    say(f"WordPiece: {tok.get_vocab_size()} tokens; e.g. {tok.encode('Decorators wrap functions.').tokens}")


def part_bert(args, out):
    torch.manual_seed(args.seed)
    tok = load_tokenizer(out)
    train_t, val_t = split_sentences()
    ids, types, att = encode_pairs(tok, train_t, args.seq_len)
    config = BertConfig(
        vocab_size=tok.get_vocab_size(),
        context_length=args.seq_len,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_model=args.d_model,
        d_ff=4 * args.d_model,
        dropout=args.dropout,
    )
    model = BertForMaskedLM(config)
    g = torch.Generator().manual_seed(args.seed)
    v_ids, v_types, v_att = encode_pairs(tok, val_t, args.seq_len)

    def draw(it):  # the global batch, the same on every rank: rows, then their masking
        ix = torch.randint(len(ids), (args.batch_size,), generator=g)
        x, labels = mask_tokens(ids[ix], mask_id=MASK, vocab_size=config.vocab_size, special_ids=range(5), generator=g)
        return ix, x, labels

    global_batch = once_per_iteration(draw)

    def loss_fn(m, it, part: Part):
        ix_all, x_all, labels_all = global_batch(it)
        rows = part.rows(args.batch_size)
        ix, x, labels = ix_all[rows], x_all[rows], labels_all[rows]  # this rank's part
        # mlm_loss is a mean over the selected positions, whose number varies between parts: sum this part's
        # losses and divide by its even share of the global batch's selected positions, so the mean over the
        # parts is the global batch's mlm_loss (and a part with no selected position adds 0, not 0/0).
        logits = m(x, types[ix], att[ix])
        total = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
        return total * part.count / (labels_all != -100).sum().clamp(min=1), int(att[ix].sum())

    def eval_fn(m):
        return mlm_eval(m, v_ids, v_types, v_att, config.vocab_size)

    say(f"BERT: {count_parameters(model):,} parameters, {len(ids):,} training pairs")
    hist = train(
        model,
        loss_fn,
        max_iters=args.max_iters,
        lr=args.lr,
        warmup=50,
        eval_fn=eval_fn,
        eval_interval=args.eval_interval,
        progress=not args.no_progress,
        grad_accum=args.grad_accum,
        find_unused_parameters=True,  # the pooler gets no gradient from the masked-LM loss
    )
    if MAIN:
        print("BERT final", hist["eval"][-1], f"{hist['tokens_per_s']:.0f} tokens/s")
        torch.save({"config": vars(config), "model": model.state_dict()}, out / "bert_mlm.pt")
        (out / "bert_history.json").write_text(json.dumps(hist))


@torch.no_grad()
def mlm_eval(m, ids, types, att, vocab_size, n=512):
    """MLM loss and accuracy (argmax = original token) on the selected positions of ``n`` held-out pairs,
    corrupted with a fixed seed (the same corruption at every evaluation)."""
    g = torch.Generator().manual_seed(0)
    x, labels = mask_tokens(ids[:n], mask_id=MASK, vocab_size=vocab_size, special_ids=range(5), generator=g)
    logits = m(x, types[:n], att[:n])
    sel = labels != -100
    return {
        "loss": mlm_loss(logits, labels).item(),
        "accuracy": (logits.argmax(-1)[sel] == labels[sel]).float().mean().item(),
        "accuracy_at_mask": (logits.argmax(-1)[sel & (x == MASK)] == labels[sel & (x == MASK)]).float().mean().item(),
    }


def part_gpt(args, out):
    torch.manual_seed(args.seed)
    tok = load_tokenizer(out)
    train_t, val_t = split_sentences()
    stream, v_stream = encode_stream(tok, train_t), encode_stream(tok, val_t)
    config = GPTConfig(
        vocab_size=tok.get_vocab_size(),
        context_length=args.seq_len,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_model=args.d_model,
        dropout=args.dropout,
    )
    model = GPT(config)
    g = torch.Generator().manual_seed(args.seed)
    from solutions.text_data import get_lm_batch

    global_batch = once_per_iteration(lambda it: get_lm_batch(stream, args.seq_len, args.batch_size, generator=g))

    def loss_fn(m, it, part: Part):
        x, y = (t[part.rows(args.batch_size)] for t in global_batch(it))
        return F.cross_entropy(m(x).flatten(0, 1), y.flatten()), x.numel()

    def eval_fn(m):
        gv = torch.Generator().manual_seed(0)
        x, y = get_lm_batch(v_stream, args.seq_len, 256, generator=gv)
        return {"loss": F.cross_entropy(m(x).flatten(0, 1), y.flatten()).item()}

    say(f"GPT: {model.num_parameters():,} parameters, {len(stream):,} training tokens")
    hist = train(
        model,
        loss_fn,
        max_iters=args.max_iters,
        lr=args.lr,
        warmup=50,
        eval_fn=eval_fn,
        eval_interval=args.eval_interval,
        progress=not args.no_progress,
        grad_accum=args.grad_accum,
    )
    if MAIN:
        print("GPT final", hist["eval"][-1], f"{hist['tokens_per_s']:.0f} tokens/s")
        torch.save({"config": vars(config), "model": model.state_dict()}, out / "gpt_wordpiece.pt")
        (out / "gpt_history.json").write_text(json.dumps(hist))


def shuffled_task(tok, topics, T, seed):
    """Sentences of >= 6 words; half get their words shuffled (label 1). Returns ids, attention mask, labels."""
    rng = random.Random(seed)
    texts, labels = [], []
    for s in (s for t in topics for s in t if len(s.split()) >= 6):
        words = s.split()
        if rng.random() < 0.5:
            shuffled = words[:]
            while shuffled == words:
                rng.shuffle(shuffled)
            texts.append(" ".join(shuffled)), labels.append(1)
        else:
            texts.append(s), labels.append(0)
    tok.enable_truncation(T)
    tok.enable_padding(length=T, pad_id=PAD)
    enc = tok.encode_batch(texts)
    tok.no_truncation(), tok.no_padding()
    return (
        torch.tensor([e.ids for e in enc]),
        torch.tensor([e.attention_mask for e in enc]),
        torch.tensor(labels),
        texts,
    )


def fine_tune(bert, data, test, args, seed):
    """Train a BertClassifier on ``data`` for ``args.ft_iters`` steps; return test accuracy and the history."""
    torch.manual_seed(seed)
    model = BertClassifier(bert, 2)
    ids, att, y, _ = data
    g = torch.Generator().manual_seed(seed)

    global_rows = once_per_iteration(lambda it: torch.randint(len(ids), (args.batch_size,), generator=g))

    def loss_fn(m, it, part: Part):
        ix = global_rows(it)[part.rows(args.batch_size)]
        return F.cross_entropy(m(ids[ix], None, att[ix]), y[ix]), int(att[ix].sum())

    def eval_fn(m):
        t_ids, t_att, t_y, _ = test
        pred = torch.cat(
            [m(t_ids[i : i + 256], None, t_att[i : i + 256]).argmax(-1) for i in range(0, len(t_ids), 256)]
        )
        return {"accuracy": (pred == t_y).float().mean().item()}

    hist = train(
        model,
        loss_fn,
        max_iters=args.ft_iters,
        lr=args.ft_lr,
        warmup=20,
        weight_decay=0.01,
        eval_fn=eval_fn,
        eval_interval=max(1, args.ft_iters // 4),
        progress=not args.no_progress,
        grad_accum=args.grad_accum,
    )
    return hist


@torch.no_grad()
def fill_in_the_blank(bert, gpt, tok, topics, n_max, seed):
    """Blank one whole-word token with >= 3 tokens on each side (up to three different blanks per held-out
    sentence, each on its own); top-1 accuracy of
    BERT (both sides), BERT given only the left side, and the GPT (left side, by construction)."""
    rng = random.Random(seed)
    cases = []
    for s in (s for t in topics for s in t):
        e = tok.encode(s)
        ids, toks = e.ids, e.tokens
        if len(ids) > 60:
            continue
        ok = [
            k
            for k in range(4, len(ids) - 4)
            if toks[k].isalpha() and not toks[k].startswith("##") and not toks[k + 1].startswith("##")
        ]
        for k in rng.sample(ok, min(3, len(ok))):  # up to three blanks per sentence, one at a time
            cases.append((ids, k))
    rng.shuffle(cases)
    cases = cases[:n_max]
    hits = {"bert_both_sides": 0, "bert_left_only": 0, "gpt_left_only": 0}
    examples = []
    for ids, k in cases:
        both = torch.tensor([ids[:k] + [MASK] + ids[k + 1 :]])
        left = torch.tensor([ids[:k] + [MASK, SEP]])
        p_both = bert(both)[0, k, 5:].argmax().item() + 5  # never predict a special token
        p_left = bert(left)[0, k, 5:].argmax().item() + 5
        p_gpt = gpt(torch.tensor([ids[:k]]))[0, -1, 5:].argmax().item() + 5
        hits["bert_both_sides"] += p_both == ids[k]
        hits["bert_left_only"] += p_left == ids[k]
        hits["gpt_left_only"] += p_gpt == ids[k]
        if len(examples) < 8:
            examples.append(
                {
                    "text": tok.decode(ids[1:k]) + " ____ " + tok.decode(ids[k + 1 : -1]),
                    "answer": tok.id_to_token(ids[k]),
                    "bert": tok.id_to_token(p_both),
                    "bert_left": tok.id_to_token(p_left),
                    "gpt": tok.id_to_token(p_gpt),
                }
            )
    return {"n": len(cases), **{k: v / len(cases) for k, v in hits.items()}, "examples": examples}


def part_eval(args, out):
    tok = load_tokenizer(out)
    train_t, val_t = split_sentences()
    ck = torch.load(out / "bert_mlm.pt")
    config = BertConfig(**ck["config"])
    mlm = BertForMaskedLM(config)
    mlm.load_state_dict(ck["model"])
    mlm.eval()
    gk = torch.load(out / "gpt_wordpiece.pt")
    gpt = GPT(GPTConfig(**gk["config"]))
    gpt.load_state_dict(gk["model"])
    gpt.eval()
    v_ids, v_types, v_att = encode_pairs(tok, val_t, args.seq_len)
    mlm_final = mlm_eval(mlm, v_ids, v_types, v_att, config.vocab_size, n=len(v_ids))
    say("MLM on held-out topics:", mlm_final)
    blank = fill_in_the_blank(mlm, gpt, tok, val_t, 1000, args.seed)
    say("fill in the blank:", {k: v for k, v in blank.items() if k != "examples"})

    data = shuffled_task(tok, train_t, args.seq_len, args.seed)
    test = shuffled_task(tok, val_t, args.seq_len, args.seed + 1)
    pre = fine_tune(mlm.bert, data, test, args, args.seed)
    scratch = fine_tune(Bert(config).apply(_bert_init()), data, test, args, args.seed)
    if not MAIN:
        return  # rank 0 evaluated the fine-tuned models and writes the results
    print("fine-tuned:", pre["eval"][-1], " from scratch:", scratch["eval"][-1])
    results = {
        "args": vars(args),
        "bert_config": ck["config"],
        "gpt_config": gk["config"],
        "bert_parameters": count_parameters(mlm),
        "gpt_parameters": gpt.num_parameters(),
        "bert_history": json.loads((out / "bert_history.json").read_text()),
        "gpt_history": json.loads((out / "gpt_history.json").read_text()),
        "mlm_heldout": mlm_final,
        "fill_in_the_blank": blank,
        "shuffled_task": {
            "train_examples": len(data[0]),
            "test_examples": len(test[0]),
            "test_positive_rate": test[2].float().mean().item(),
            "example": {
                "original": next(t for t, y in zip(test[3], test[2]) if y == 0),
                "shuffled": next(t for t, y in zip(test[3], test[2]) if y == 1),
            },
            "pretrained": pre["eval"],
            "from_scratch": scratch["eval"],
        },
        "machine": {
            "cpu_threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "measured": time.strftime("%Y-%m-%d"),
    }
    (out / "bert_results.json").write_text(json.dumps(results, indent=1))


def _bert_init():
    from solutions.ch07_bert import _init_bert

    return _init_bert


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["all", "tokenizer", "bert", "gpt", "eval"], default="all")
    p.add_argument("--vocab_size", type=int, default=2000)
    p.add_argument("--n_layers", type=int, default=4)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--d_model", type=int, default=128)
    p.add_argument("--seq_len", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=32, help="global batch of one optimiser step (all ranks)")
    p.add_argument("--grad_accum", type=int, default=1, help="micro-steps per optimiser step on each rank")
    p.add_argument("--max_iters", type=int, default=900)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eval_interval", type=int, default=150)
    p.add_argument("--ft_iters", type=int, default=300)
    p.add_argument("--ft_lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="results/ch07_bert")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    global MAIN
    dist, _ = init_distributed("cpu")  # this script trains on the CPU: gloo under torchrun
    MAIN = dist.is_main
    Part(0, dist.world_size * args.grad_accum).rows(args.batch_size)  # ValueError now if the parts can't be equal
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["tokenizer", "bert", "gpt", "eval"] if args.part == "all" else [args.part]
    for part in parts:
        t0 = time.time()
        globals()[f"part_{part}"](args, out)
        if dist.world_size > 1:
            torch_distributed.barrier()  # e.g. the tokenizer file exists before any rank reads it
        say(f"[{part}: {time.time() - t0:.0f} s]")
    close_distributed()


if __name__ == "__main__":
    main()
