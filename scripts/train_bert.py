"""Chapter 7 experiments on the Python docs: WordPiece, BERT pretraining, fine-tuning, BERT vs GPT fill-in.

The committed 900-step runs (the split without validation topics; ``--lr 1e-3`` fixed in advance):

    python -m scripts.train_bert --part tokenizer                 # both WordPiece vocabularies (seconds)
    python -m scripts.train_bert --part bert --n_layers 4 --d_model 128 --max_iters 900 --eval_interval 150
    python -m scripts.train_bert --part gpt  --n_layers 4 --d_model 128 --max_iters 900 --eval_interval 150
    python -m scripts.train_bert --part eval --n_layers 4 --d_model 128 --max_iters 900   # fine-tuning, fill-in
    python -m scripts.train_bert --part analysis                  # why BERT loses fill-in (inference only)

With validation topics (the default sizes: 2 layers, 64 wide):

    python -m scripts.train_bert --part sweep_bert                # learning rates judged on validation topics
    python -m scripts.train_bert --part sweep_gpt
    python -m scripts.train_bert --part masking_dynamic --eval_interval 40   # RoBERTa's dynamic masking vs
    python -m scripts.train_bert --part masking_static  --eval_interval 40   # static, on 256 pairs

Further seeds (the book shows seeds 0, 1, 2; the seed draws the initialisation, the batches, the masks, the
masking experiment's pairs, the fill-in blanks and the shuffled sentences). Each seed's folder gets a copy of
seed 0's two vocabularies, so that only the seed differs (a retrained vocabulary can differ in a few tokens: the
trainer breaks ties between equally frequent merges differently from run to run); the weights are not kept:

    python -m scripts.train_bert --part masking_dynamic --eval_interval 40 --seed 1 --out results/ch07_bert/seeds/seed1
    python -m scripts.train_bert --part masking_static  --eval_interval 40 --seed 1 --out results/ch07_bert/seeds/seed1
    for p in bert gpt eval; do python -m scripts.train_bert --part $p --n_layers 4 --d_model 128 --max_iters 900 \\
        --eval_interval 150 --seed 1 --out results/ch07_bert/seeds/seed1; done

Data: the documentation topics of this Python (``solutions.text_data``), split by topic (sorted by name): every
10th topic (index 9, 19, ...) is the **test** set; in the three-way split every 10th from index 4 on is the
**validation** set used to choose learning rates; the rest trains. Test sentences come from pages the models never
saw. BERT is pretrained on consecutive sentence pairs ``[CLS] A [SEP] B [SEP]`` (segments 0/1, no next-sentence
loss: see the book), the GPT on the same sentences as one stream ``[CLS] s1 [SEP] [CLS] s2 [SEP] …``; both with
the same sizes, steps, batch and sequence length.

Runs unchanged under ``torchrun --nproc_per_node N -m scripts.train_bert`` (DistributedDataParallel with gloo, on
CPU): ``--batch_size`` is the global batch of one optimiser step, cut into ``N × --grad_accum`` equal parts; every
rank draws (and masks) the same global batch and trains on its own parts; rank 0 alone trains the tokenizer, prints
and writes files.

Writes into ``--out``: ``wordpiece.json`` / ``wordpiece_validation_split.json``, ``bert_mlm.pt``,
``gpt_wordpiece.pt``, ``bert_results.json``, ``analysis.json``, ``sweep_{bert,gpt}.json``,
``masking_{dynamic,static}.json`` (the book reads the JSON files and the BERT checkpoint).
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


def split_sentences(three_way: bool = True) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
    """Sentences per topic: (train, validation, test) topics; topic ``i`` (sorted by name) is test when
    ``i % 10 == 9``, validation when ``i % 10 == 4``, training otherwise. With ``three_way=False`` (the split of
    the committed 900-step runs, which had no validation topics) validation is empty and those topics train."""
    topics = list(python_docs().values())
    per_topic = [sentences(t) for t in topics]
    held = (4, 9) if three_way else (9,)
    train_t = [s for i, s in enumerate(per_topic) if i % 10 not in held and s]
    val_t = [s for i, s in enumerate(per_topic) if i % 10 == 4 and s] if three_way else []
    test_t = [s for i, s in enumerate(per_topic) if i % 10 == 9 and s]
    return train_t, val_t, test_t


def tokenizer_file(out: pathlib.Path, three_way: bool) -> pathlib.Path:
    """Each split has its own WordPiece vocabulary, trained on its training topics only."""
    return out / ("wordpiece_validation_split.json" if three_way else "wordpiece.json")


def load_tokenizer(out: pathlib.Path, three_way: bool = False):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(tokenizer_file(out, three_way)))


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
        return  # the other ranks wait at the barrier in main(), then read rank 0's files
    for three_way in (False, True):
        train_t, _, _ = split_sentences(three_way)
        tok = train_wordpiece([s for t in train_t for s in t], vocab_size=args.vocab_size)
        tok.save(str(tokenizer_file(out, three_way)))
    print(f"WordPiece: {tok.get_vocab_size()} tokens; e.g. {tok.encode('Decorators wrap functions.').tokens}")


def _sizes(args, tok) -> dict:
    """The sizes BERT and GPT share (same tokenizer, same options), as config keywords."""
    return dict(
        vocab_size=tok.get_vocab_size(),
        context_length=args.seq_len,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_model=args.d_model,
        dropout=args.dropout,
    )


def _pretrain(what: str, model, loss_fn, eval_fn, args, *, lr: float, max_iters: int, **options) -> dict:
    """``train`` with the pretraining options of ``args`` (and ``options``); rank 0 prints the final evaluation."""
    hist = train(
        model,
        loss_fn,
        max_iters=max_iters,
        lr=lr,
        warmup=args.warmup,
        eval_fn=eval_fn,
        eval_interval=args.eval_interval,
        progress=not args.no_progress,
        grad_accum=args.grad_accum,
        **options,
    )
    if MAIN:  # only rank 0 evaluates
        print(f"{what} final", hist["eval"][-1], f"{hist['tokens_per_s']:.0f} tokens/s")
    return hist


def pretrain_bert(
    args, out, *, lr: float, masking: str, eval_on: str, max_iters: int, three_way: bool, train_pairs: int = 0
):
    """MLM pretraining of a BertForMaskedLM; ``masking`` is ``"dynamic"`` (a new corruption each time a pair
    is drawn: RoBERTa, Liu et al. 2019, section 4.1) or ``"static"`` (one corruption per pair, drawn once before
    training, as in BERT's data preparation). Evaluates on the ``eval_on`` topics (validation or test).
    ``train_pairs``: if > 0, train on that many pairs only (chosen with the seed), so the budget covers many
    passes over them."""
    torch.manual_seed(args.seed)
    tok = load_tokenizer(out, three_way)
    train_t, val_t, test_t = split_sentences(three_way)
    ids, types, att = encode_pairs(tok, train_t, args.seq_len)
    if train_pairs:
        keep = torch.randperm(len(ids), generator=torch.Generator().manual_seed(args.seed))[:train_pairs]
        ids, types, att = ids[keep], types[keep], att[keep]
    config = BertConfig(**_sizes(args, tok), d_ff=4 * args.d_model)
    model = BertForMaskedLM(config)
    g = torch.Generator().manual_seed(args.seed)
    v_ids, v_types, v_att = encode_pairs(tok, val_t if eval_on == "validation" else test_t, args.seq_len)
    corrupt = dict(mask_id=MASK, vocab_size=config.vocab_size, special_ids=range(5))
    if masking == "static":
        static_x, static_labels = mask_tokens(ids, **corrupt, generator=torch.Generator().manual_seed(args.seed + 1))

    def draw(it):  # the global batch, the same on every rank: rows, then their masking
        ix = torch.randint(len(ids), (args.batch_size,), generator=g)
        if masking == "static":
            x, labels = static_x[ix], static_labels[ix]
        else:
            x, labels = mask_tokens(ids[ix], **corrupt, generator=g)
        return ix, x, labels

    global_batch = once_per_iteration(draw)

    def loss_fn(m, it, part: Part):
        ix_all, x_all, labels_all = global_batch(it)
        rows = part.rows(args.batch_size)
        ix, x, labels = ix_all[rows], x_all[rows], labels_all[rows]  # this rank's part
        # The whole model's forward (under torchrun `m` is the DistributedDataParallel wrapper, whose forward is what
        # synchronises the gradients). mlm_loss is a mean over the selected positions, whose number varies between
        # parts: sum this part's losses and divide by its even share of the global batch's selected positions, so
        # the mean over the parts is the global batch's mlm_loss (and a part with no selected position adds 0).
        logits = m(x, types[ix], att[ix])  # (B, T, V)
        total = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
        return total * part.count / (labels_all != -100).sum().clamp(min=1), int(att[ix].sum())

    def eval_fn(m):
        return mlm_eval(m, v_ids, v_types, v_att, config.vocab_size)

    say(f"BERT ({masking} masking, lr {lr}): {count_parameters(model):,} parameters, {len(ids):,} training pairs")
    hist = _pretrain(
        f"BERT ({masking})",
        model,
        loss_fn,
        eval_fn,
        args,
        lr=lr,
        max_iters=max_iters,
        find_unused_parameters=True,  # the pooler gets no gradient from the masked-LM loss
    )
    return model, config, hist


def part_bert(args, out):
    """The committed 900-step BERT (``--lr 1e-3 --n_layers 4 --d_model 128 --max_iters 900 --eval_interval 150``,
    the split without validation topics)."""
    model, config, hist = pretrain_bert(
        args, out, lr=args.lr, masking="dynamic", eval_on="test", max_iters=args.max_iters, three_way=False
    )
    if MAIN:
        torch.save({"config": vars(config), "model": model.state_dict()}, out / "bert_mlm.pt")
        (out / "bert_history.json").write_text(json.dumps(hist))


def _masking(args, out, kind: str) -> None:
    """Static vs dynamic masking (RoBERTa, Liu et al. 2019, section 4.1): the same BERT, budget and learning rate
    (``--lr``), trained on ``--masking_pairs`` pairs so that the budget makes many passes
    over them; held-out MLM on the test topics. Writes ``masking_<kind>.json``."""
    lr = args.lr
    _, _, hist = pretrain_bert(
        args,
        out,
        lr=lr,
        masking=kind,
        eval_on="test",
        max_iters=args.masking_iters,
        three_way=True,
        train_pairs=args.masking_pairs,
    )
    result = {
        "seed": args.seed,
        "lr": lr,
        "train_pairs": args.masking_pairs,
        "iters": args.masking_iters,
        "batch_size": args.batch_size,
        "model": {k: getattr(args, k) for k in ("n_layers", "n_heads", "d_model", "seq_len")},
        "history": hist,
    }
    if MAIN:
        (out / f"masking_{kind}.json").write_text(json.dumps(result))


def part_masking_static(args, out):
    _masking(args, out, "static")


def part_masking_dynamic(args, out):
    _masking(args, out, "dynamic")


def _sweep(args, out, model: str, run) -> None:
    losses = {lr: run(lr)["eval"][-1][1]["loss"] for lr in args.sweep_lrs}
    result = {
        "iters": args.sweep_iters,
        "model": {k: getattr(args, k) for k in ("n_layers", "n_heads", "d_model", "seq_len", "batch_size")},
        "validation_loss": {str(k): v for k, v in losses.items()},
        "chosen_lr": min(losses, key=losses.__getitem__),
    }
    say(model, result)
    if MAIN:
        (out / f"sweep_{model}.json").write_text(json.dumps(result, indent=1))


def part_sweep_bert(args, out):
    """BERT: each learning rate of ``--sweep_lrs`` for ``--sweep_iters`` steps, judged by the MLM loss on the
    validation topics (never the test topics); writes ``sweep_bert.json``."""
    _sweep(
        args,
        out,
        "bert",
        lambda lr: pretrain_bert(
            args, out, lr=lr, masking="dynamic", eval_on="validation", max_iters=args.sweep_iters, three_way=True
        )[2],
    )


def part_sweep_gpt(args, out):
    """The GPT's learning rate, chosen the same way (next-token loss on the validation topics)."""
    _sweep(
        args,
        out,
        "gpt",
        lambda lr: pretrain_gpt(args, out, lr=lr, eval_on="validation", max_iters=args.sweep_iters, three_way=True)[2],
    )


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


def pretrain_gpt(args, out, *, lr: float, eval_on: str, max_iters: int, three_way: bool):
    """The GPT of the same size on the same training sentences as one stream; evaluated on ``eval_on``."""
    torch.manual_seed(args.seed)
    tok = load_tokenizer(out, three_way)
    train_t, val_t, test_t = split_sentences(three_way)
    stream = encode_stream(tok, train_t)
    v_stream = encode_stream(tok, val_t if eval_on == "validation" else test_t)
    config = GPTConfig(**_sizes(args, tok))
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

    say(f"GPT (lr {lr}): {model.num_parameters():,} parameters, {len(stream):,} training tokens")
    hist = _pretrain("GPT", model, loss_fn, eval_fn, args, lr=lr, max_iters=max_iters)
    return model, config, hist


def part_gpt(args, out):
    """The committed 900-step GPT (same options and split as :func:`part_bert`)."""
    model, config, hist = pretrain_gpt(args, out, lr=args.lr, eval_on="test", max_iters=args.max_iters, three_way=False)
    if MAIN:
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
def blank_cases(tok, topics, n_max, seed):
    """``(ids, k)`` pairs: a held-out sentence's token ids and the position of one whole-word alphabetic token with
    >= 3 tokens on each side (up to three different blanks per sentence, each on its own), shuffled, ``n_max``."""
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
    return cases[:n_max]


def fill_in_the_blank(bert, gpt, tok, topics, n_max, seed):
    """Top-1 accuracy on :func:`blank_cases` of BERT (both sides), BERT given only the left side, and the GPT
    (left side, by construction)."""
    cases = blank_cases(tok, topics, n_max, seed)
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


def load_models(out):
    """The committed BERT and GPT checkpoints, in eval mode, with their saved configs."""
    ck = torch.load(out / "bert_mlm.pt")
    mlm = BertForMaskedLM(BertConfig(**ck["config"]))
    mlm.load_state_dict(ck["model"])
    gk = torch.load(out / "gpt_wordpiece.pt")
    gpt = GPT(GPTConfig(**gk["config"]))
    gpt.load_state_dict(gk["model"])
    return mlm.eval(), gpt.eval(), ck, gk


@torch.no_grad()
def part_analysis(args, out):
    """Where and why the committed BERT loses the fill-in-the-blank comparison (inference only, seconds).

    Compares both models with the unigram baseline (the training text's token frequencies, no context at all):
    the MLM loss and accuracy at the masked test positions, and fill-in accuracy split into blanks whose answer is
    one of the 50 most frequent training words and the rest; and counts what BERT predicts. Writes
    ``analysis.json``."""
    tok = load_tokenizer(out)
    train_t, _, test_t = split_sentences(three_way=False)
    mlm, gpt, ck, _ = load_models(out)
    V = ck["config"]["vocab_size"]
    counts = torch.bincount(encode_stream(tok, train_t), minlength=V).float()
    counts[:5] = 0  # specials are never targets
    p_uni = counts / counts.sum()
    v_ids, v_types, v_att = encode_pairs(tok, test_t, args.seq_len)
    x, labels = mask_tokens(
        v_ids, mask_id=MASK, vocab_size=V, special_ids=range(5), generator=torch.Generator().manual_seed(0)
    )
    sel = labels != -100
    at_mask = sel & (x == MASK)
    logits = mlm(x, v_types, v_att)
    unigram = {
        "mlm_loss": -p_uni[labels[sel]].clamp_min(1e-12).log().mean().item(),
        "accuracy_at_mask": (labels[at_mask] == p_uni.argmax()).float().mean().item(),
    }
    bert_mlm = {
        "mlm_loss": mlm_loss(logits, labels).item(),
        "accuracy_at_mask": (logits.argmax(-1)[at_mask] == labels[at_mask]).float().mean().item(),
    }
    words = [i for i in counts.argsort(descending=True).tolist() if tok.id_to_token(i).isalpha()]
    frequent = set(words[:50])
    top_word = words[0]
    is_word = torch.tensor([tok.id_to_token(i).isalpha() for i in range(V)])  # whole-word alphabetic tokens
    rows = []
    for ids, k in blank_cases(tok, test_t, 1000, args.seed):
        s_both = mlm(torch.tensor([ids[:k] + [MASK] + ids[k + 1 :]]))[0, k]
        s_gpt = gpt(torch.tensor([ids[:k]]))[0, -1]
        s_both[:5], s_gpt[:5] = -torch.inf, -torch.inf  # never a special token
        words_only = [int(sc.masked_fill(~is_word, -torch.inf).argmax()) for sc in (s_both, s_gpt)]
        rows.append((ids[k], int(s_both.argmax()), int(s_gpt.argmax()), *words_only))

    def acc(subset, j):
        return sum(r[j] == r[0] for r in subset) / max(len(subset), 1)

    groups = {
        "all": rows,
        "frequent": [r for r in rows if r[0] in frequent],
        "rare": [r for r in rows if r[0] not in frequent],
    }
    fill = {
        name: {
            "n": len(g),
            "bert_both_sides": acc(g, 1),
            "gpt_left_only": acc(g, 2),
            "bert_both_sides_words_only": acc(g, 3),
            "gpt_left_only_words_only": acc(g, 4),
            "unigram": sum(r[0] == top_word for r in g) / max(len(g), 1),
        }
        for name, g in groups.items()
    }
    from collections import Counter

    def top(j):
        return [(tok.id_to_token(i), n) for i, n in Counter(r[j] for r in rows).most_common(5)]

    result = {
        "unigram": unigram,
        "bert": bert_mlm,
        "masked_positions": int(at_mask.sum()),
        "fill_in_the_blank": fill,
        "frequent_words": 50,
        "unigram_word": tok.id_to_token(top_word),
        "distinct_predictions": {
            "bert": len({r[1] for r in rows}),
            "gpt": len({r[2] for r in rows}),
            "answers": len({r[0] for r in rows}),
        },
        "most_common_predictions": {"bert": top(1), "gpt": top(2), "answers": top(0)},
    }
    say(json.dumps(result, indent=1))
    if MAIN:
        (out / "analysis.json").write_text(json.dumps(result, indent=1))


def part_eval(args, out):
    tok = load_tokenizer(out)
    train_t, _, test_t = split_sentences(three_way=False)
    mlm, gpt, ck, gk = load_models(out)
    config = BertConfig(**ck["config"])
    v_ids, v_types, v_att = encode_pairs(tok, test_t, args.seq_len)
    mlm_final = mlm_eval(mlm, v_ids, v_types, v_att, config.vocab_size, n=len(v_ids))
    say("MLM on held-out topics:", mlm_final)
    blank = fill_in_the_blank(mlm, gpt, tok, test_t, 1000, args.seed)
    say("fill in the blank:", {k: v for k, v in blank.items() if k != "examples"})

    data = shuffled_task(tok, train_t, args.seq_len, args.seed)
    test = shuffled_task(tok, test_t, args.seq_len, args.seed + 1)
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
    parts = [
        "tokenizer",
        "bert",
        "gpt",
        "eval",
        "analysis",
        "sweep_bert",
        "sweep_gpt",
        "masking_dynamic",
        "masking_static",
    ]
    p.add_argument("--part", choices=["all", *parts], default="all")
    p.add_argument("--vocab_size", type=int, default=2000)
    p.add_argument("--n_layers", type=int, default=2)
    p.add_argument("--n_heads", type=int, default=4)
    p.add_argument("--d_model", type=int, default=64)
    p.add_argument("--seq_len", type=int, default=64)
    p.add_argument("--batch_size", type=int, default=32, help="global batch of one optimiser step (all ranks)")
    p.add_argument("--grad_accum", type=int, default=1, help="micro-steps per optimiser step on each rank")
    p.add_argument("--max_iters", type=int, default=1500)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3, help="of the committed runs (bert, gpt)")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--sweep_lrs", type=float, nargs="+", default=[1e-3, 3e-3])
    p.add_argument("--sweep_iters", type=int, default=200)
    p.add_argument("--eval_interval", type=int, default=250)
    p.add_argument("--masking_pairs", type=int, default=256)
    p.add_argument("--masking_iters", type=int, default=240)
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
    for part in parts if args.part == "all" else [args.part]:
        t0 = time.time()
        globals()[f"part_{part}"](args, out)
        if dist.world_size > 1:
            torch_distributed.barrier()  # e.g. the tokenizer file exists before any rank reads it
        say(f"[{part}: {time.time() - t0:.0f} s]")
    close_distributed()


if __name__ == "__main__":
    main()
