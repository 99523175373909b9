"""Checks for chapter 7, BERT (notebook ``notebooks/ch07_bert.ipynb``).

References are independent of the course's solution: the MLM corruption is checked by its statistical
properties on 16,384 tokens with fixed seeds (selection rate 15% of ordinary tokens, 80/10/10 among the
selected, specials never selected, labels -100 off the selection, unselected inputs untouched); the embedding
sum is recomputed with ``F.embedding`` and ``F.layer_norm`` from the student's parameters; ALBERT's factorised
embedding (Lan et al. 2020, section 3.1) likewise, then ``F.linear`` with the student's projection.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from solutions.ch07_bert import AlbertConfig, BertConfig  # plain dataclasses of sizes: input plumbing, not a reference

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_dropout_modes,
    expect_half_precision,
    expect_seeded,
    expect_shape,
    expect_true,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch07_bert")

PAD, UNK, CLS, SEP, MASK = range(5)


# ---------------------------------------------------------------- exercise 1: mask_tokens


def _batch(seed=0, B=64, T=256, V=1000):
    x = torch.randint(5, V, (B, T), generator=rng(seed))
    x[:, 0], x[:, T // 2] = CLS, SEP
    x[::2, -40:] = PAD
    x[1::4, 7] = UNK
    return x


def _run(fn, x, p=0.15, seed=0, V=1000):
    before = x.clone()
    result = call(
        Message(
            "mask_tokens(input_ids, mask_id=4, vocab_size={V}, special_ids=range(5), mlm_probability={p})", V=V, p=p
        ),
        fn,
        x,
        mask_id=MASK,
        vocab_size=V,
        special_ids=range(5),
        mlm_probability=p,
        generator=rng(seed),
    )
    expect_true(isinstance(result, tuple) and len(result) == 2, "mask_tokens should return (inputs, labels).")
    expect_true(torch.equal(x, before), "mask_tokens modified input_ids in place; work on new tensors.")
    inputs, labels = result
    for name, t in (("inputs", inputs), ("labels", labels)):
        expect_true(
            isinstance(t, torch.Tensor) and t.shape == x.shape and t.dtype == x.dtype,
            Message("{name} should be an int64 tensor shaped like input_ids {shape}.", name=name, shape=tuple(x.shape)),
        )
    return inputs, labels


@EXERCISES.check("mask_tokens", points=4)
def _mask_bookkeeping(fn):
    """special tokens never selected; labels = original id where selected, -100 elsewhere; the rest untouched"""
    x = _batch()
    inputs, labels = _run(fn, x)
    selected = labels != -100
    special = x < 5
    expect_true(bool(selected.any()), "No position was selected (every label is -100).")
    expect_true(
        not bool((selected & special).any()),
        "A special token ([CLS], [SEP], [PAD], [UNK] …) was selected: they must never be (set their "
        "selection probability to 0).",
    )
    expect_true(
        torch.equal(labels[selected], x[selected]), "At selected positions the label must be the original token id."
    )
    expect_true(
        torch.equal(inputs[~selected], x[~selected]),
        "A position that was not selected was changed: only selected positions may be corrupted "
        "(and every changed position must have a label, or the loss cannot learn from it).",
    )
    ordinary = (~special).sum().item()
    expect_true(
        selected.sum().item() < 0.5 * ordinary,
        "More than half of the positions carry a label: the loss must be taken only on the ~15% selected "
        "(set the labels of all other positions to -100).",
    )


@EXERCISES.check("mask_tokens")
def _mask_proportions(fn):
    """15% of ordinary tokens selected; of those 80% [MASK], 10% random, 10% unchanged"""
    x = _batch(seed=1)
    inputs, labels = _run(fn, x, seed=1)
    selected = labels != -100
    rate = selected.sum().item() / (x >= 5).sum().item()
    expect_true(
        abs(rate - 0.15) < 0.015,
        Message("{rate} of the ordinary tokens were selected; expected 15%.", rate=f"{rate:.1%}"),
    )
    n = selected.sum().item()
    masked = (inputs[selected] == MASK).sum().item() / n
    kept = (inputs[selected] == x[selected]).sum().item() / n
    random = 1 - masked - kept
    expect_true(
        abs(masked - 0.8) < 0.03 and abs(random - 0.1) < 0.025 and abs(kept - 0.1) < 0.025,
        Message(
            "Of the selected tokens {masked} became [MASK], {random} a random token and {kept} stayed; expected "
            "80% / 10% / 10% (Devlin et al. 2019, section 3.1).",
            masked=f"{masked:.1%}",
            random=f"{random:.1%}",
            kept=f"{kept:.1%}",
        ),
    )


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="honours `mlm_probability` and spreads random replacements over the vocabulary",
)
def _mask_other_rate(fn):
    """honours mlm_probability (0.3), spreads random replacements over the vocabulary"""
    x = _batch(seed=2, B=32, T=300, V=500)
    inputs, labels = _run(fn, x, p=0.3, seed=2, V=500)
    selected = labels != -100
    rate = selected.sum().item() / (x >= 5).sum().item()
    expect_true(abs(rate - 0.3) < 0.02, "mlm_probability=0.3 should select 30% of the ordinary tokens.")
    expect_true(not bool((selected & (x < 5)).any()), "A special token was selected.")
    replaced = inputs[selected & (inputs != MASK) & (inputs != x)]
    expect_true(
        replaced.numel() > 0 and replaced.unique().numel() > 50 and bool((replaced < 500).all()),
        "Random replacements should be uniform token ids in [0, vocab_size).",
    )


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="draws all its randomness from `generator` and leaves the global random state untouched",
)
def _mask_seeded(fn):
    """all randomness from `generator`: equal seeds give equal results; the global random state is untouched"""
    x = _batch(seed=5)
    expect_seeded(
        "mask_tokens",
        lambda g: call("mask_tokens", fn, x, mask_id=MASK, vocab_size=1000, special_ids=range(5), generator=g),
    )


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="uses the given `special_ids` and `mask_id`, not hard-coded ones",
)
def _mask_other_specials(fn):
    """uses the given special_ids (not a hard-coded list) and the given mask_id"""
    x = torch.randint(0, 300, (40, 200), generator=rng(3))
    specials = (0, 17, 250)
    result = call("mask_tokens", fn, x, mask_id=299, vocab_size=300, special_ids=specials, generator=rng(4))
    expect_true(isinstance(result, tuple) and len(result) == 2, "mask_tokens should return (inputs, labels).")
    inputs, labels = result
    expect_shape("inputs", inputs, tuple(x.shape))
    expect_shape("labels", labels, tuple(x.shape))
    selected = labels != -100
    is_special = (x == 0) | (x == 17) | (x == 250)
    expect_true(not bool((selected & is_special).any()), "A token listed in special_ids was selected.")
    expect_true(
        bool(selected[x == 1].any()) and bool(selected[x == 3].any()),
        "Ordinary tokens with small ids were never selected: use special_ids, not a fixed list.",
    )
    frac_mask = (inputs[selected] == 299).float().mean().item()
    expect_true(abs(frac_mask - 0.8) < 0.05, "Selected tokens should become mask_id (here 299) 80% of the time.")


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="draws random replacements uniformly from the vocabulary, not from the batch",
)
def _mask_random_from_vocabulary(fn):
    """random replacements are drawn uniformly from the vocabulary, not from the batch (a batch of two tokens)"""
    V = 40
    x = torch.where(torch.rand(128, 160, generator=rng(60)) < 0.5, 7, 8)  # two distinct tokens only
    x[:, 0] = CLS
    inputs, labels = _run(fn, x, p=0.5, seed=61, V=V)
    selected = labels != -100
    replaced = inputs[selected & (inputs != MASK) & (inputs != x)]
    expect_true(
        replaced.numel() > 0 and bool(((replaced >= 0) & (replaced < V)).all()),
        "Random replacements should be token ids in [0, vocab_size).",
    )
    counts = torch.bincount(replaced, minlength=V)[5:].float()  # the ordinary ids 5 ... V-1
    expect_true(
        bool((counts > 0).all()) and counts.max().item() < 3 * counts.mean().item(),
        "The random replacements of a batch made of two distinct tokens should still be spread uniformly over "
        "the whole vocabulary: draw them with torch.randint(vocab_size, ...), not from the batch's own tokens.",
    )


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="selects each token on its own (a Bernoulli draw), so the count varies from row to row",
)
def _mask_independent_per_token(fn):
    """each token is selected on its own (a Bernoulli draw), so the number selected varies from row to row"""
    x = torch.randint(5, 300, (64, 200), generator=rng(64))
    _, labels = _run(fn, x, p=0.15, seed=65, V=300)
    per_row = (labels != -100).sum(-1).float()  # Binomial(200, 0.15) per row: mean 30, std about 5
    expect_true(
        per_row.std().item() > 2.0,
        Message(
            "Every row has (almost) the same number of selected tokens (std {std} over 64 rows; independent draws "
            "give about 5): select each token on its own with probability p (torch.rand(...) < p), not a fixed "
            "count per row.",
            std=f"{per_row.std().item():.2f}",
        ),
    )


@EXERCISES.check(
    "mask_tokens",
    hidden=True,
    requires="accepts `input_ids` of any shape (1-D, 3-D) and keeps it",
)
def _mask_any_shape(fn):
    """input_ids of any shape: a 1-D sequence and a (2, 3, 200) batch keep their shape and bookkeeping"""
    for shape, seed in (((4000,), 62), ((2, 3, 200), 63)):
        x = torch.randint(0, 300, shape, generator=rng(seed))
        what = str(Message("mask_tokens(input_ids of shape {shape}, ...)", shape=shape))
        result = call(what, fn, x, mask_id=MASK, vocab_size=300, special_ids=range(5), generator=rng(seed + 10))
        expect_true(isinstance(result, tuple) and len(result) == 2, "mask_tokens should return (inputs, labels).")
        inputs, labels = result
        expect_shape(Message("inputs for input_ids of shape {shape}", shape=shape), inputs, shape)
        expect_shape(Message("labels for input_ids of shape {shape}", shape=shape), labels, shape)
        selected = labels != -100
        rate = selected.sum().item() / (x >= 5).sum().item()
        expect_true(
            abs(rate - 0.15) < 0.03
            and not bool((selected & (x < 5)).any())
            and torch.equal(labels[selected], x[selected])
            and torch.equal(inputs[~selected], x[~selected]),
            Message(
                "For input_ids of shape {shape} the selection or the labels are wrong: the docstring allows any "
                "shape (draw the coins with input_ids.shape).",
                shape=shape,
            ),
        )


# ---------------------------------------------------------------- exercise 2: BertEmbeddings


def _emb_oracle(m, config, ids, types):
    """LayerNorm(token + position + segment) from the module's tables and LayerNorm weights, with the check's own
    ``config.layer_norm_eps`` (not the module's ``eps``: a LayerNorm built without the config's eps must fail)."""
    T = ids.shape[1]
    x = (
        F.embedding(ids, m.word_embeddings.weight)
        + m.position_embeddings.weight[:T]
        + F.embedding(types, m.token_type_embeddings.weight)
    )
    return F.layer_norm(x, (x.shape[-1],), m.LayerNorm.weight, m.LayerNorm.bias, config.layer_norm_eps)


def _randomised(what, cls, config, seed, param_seed):
    """``cls(config)`` built after ``torch.manual_seed(seed)``, then every parameter (LayerNorm's included) drawn
    from N(0, 1) with the generator ``param_seed``; in eval mode."""
    torch.manual_seed(seed)
    m = call(Message("{what}({config})", what=what, config=config), cls, config)
    g = rng(param_seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return m.eval()


def _build_emb(cls, config, seed=0):
    return _randomised("BertEmbeddings", cls, config, seed, seed + 100)


def _expect_default_segments(m, config, oracle, ids):
    """Without token_type_ids the result is the oracle's with every token in segment 0."""
    with torch.no_grad():
        expected = oracle(m, config, ids, torch.zeros_like(ids))
        expect_close("embeddings(ids)", call("embeddings(ids)", m, ids), expected)


def _expect_segments_hidden(m, config, oracle, ids, types):
    with torch.no_grad():
        expected = oracle(m, config, ids, types)
        expect_close("embeddings(ids, token_type_ids)", call("embeddings", m, ids, types), expected, hidden=True)


def _expect_dropout_after_norm(what, cls, config_with_dropout, ids):
    """Dropout is off in eval mode and on in training mode (``config_with_dropout(p)`` is the config with
    dropout ``p``)."""
    expect_dropout_modes(
        what,
        lambda p: call(Message("{what}(config)", what=what), cls, config_with_dropout(p)),
        lambda m: call("embeddings", m, ids),
    )


@EXERCISES.check("BertEmbeddings", points=3)
def _emb_basic(cls):
    """LayerNorm(token + position + segment) for ids (2, 7), segments 0 then 1"""
    config = BertConfig(vocab_size=20, context_length=10, d_model=8)
    m = _build_emb(cls, config)
    ids = torch.randint(20, (2, 7), generator=rng(5))
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        got = call("embeddings(ids, token_type_ids)", m, ids, types)
    hint = ""
    if isinstance(got, torch.Tensor) and got.shape == (2, 7, 8):
        if torch.allclose(got, _emb_oracle(m, config, ids, torch.zeros_like(types)), atol=1e-5):
            hint = "token_type_ids are ignored: add the segment embeddings."
    expect_close("embeddings(ids, token_type_ids)", got, _emb_oracle(m, config, ids, types), hint=hint)


@EXERCISES.check("BertEmbeddings")
def _emb_default_types(cls):
    """without token_type_ids every token is in segment 0"""
    config = BertConfig(vocab_size=20, context_length=10, d_model=8)
    m = _build_emb(cls, config, seed=1)
    _expect_default_segments(m, config, _emb_oracle, torch.randint(20, (3, 5), generator=rng(6)))


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="works for other sizes and random segments, with BERT's `layer_norm_eps` 1e-12",
)
def _emb_other_sizes(cls):
    """other sizes, random segments, BERT's eps 1e-12"""
    config = BertConfig(vocab_size=31, context_length=16, d_model=12, type_vocab_size=3)
    m = _build_emb(cls, config, seed=2)
    ids = torch.randint(31, (4, 11), generator=rng(7))
    _expect_segments_hidden(m, config, _emb_oracle, ids, torch.randint(3, (4, 11), generator=rng(8)))


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _emb_dropout(cls):
    """dropout after the LayerNorm: off in eval mode, on in training mode"""
    _expect_dropout_after_norm(
        "BertEmbeddings",
        cls,
        lambda p: BertConfig(vocab_size=30, context_length=10, d_model=8, dropout=p),
        torch.randint(0, 30, (2, 7), generator=rng(31)),
    )


# ---------------------------------------------------------------- exercise 3: AlbertEmbeddings (factorised)


def _albert_oracle(m, config, ids, types):
    x = _emb_oracle(m, config, ids, types)  # LayerNorm(token + position + segment) in the small space E
    return F.linear(x, m.projection.weight, m.projection.bias)  # then E -> d_model


def _build_albert(cls, config, seed=0):
    return _randomised("AlbertEmbeddings", cls, config, seed, seed + 200)


@EXERCISES.check("AlbertEmbeddings", points=3)
def _albert_basic(cls):
    """LayerNorm(token + position + segment) in width E = 6, then the projection to d_model = 10; ids (2, 7)"""
    config = AlbertConfig(vocab_size=20, context_length=10, embedding_size=6, d_model=10)
    m = _build_albert(cls, config)
    ids = torch.randint(20, (2, 7), generator=rng(15))
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        got = call("embeddings(ids, token_type_ids)", m, ids, types)
    hint = ""
    if isinstance(got, torch.Tensor) and got.shape == (2, 7, 6):
        hint = "The output has width E = embedding_size: project it to d_model with self.projection."
    elif isinstance(got, torch.Tensor) and got.shape == (2, 7, 10):
        if torch.allclose(got, _albert_oracle(m, config, ids, torch.zeros_like(types)), atol=1e-5):
            hint = "token_type_ids are ignored: add the segment embeddings."
    expect_close("embeddings(ids, token_type_ids)", got, _albert_oracle(m, config, ids, types), hint=hint)


@EXERCISES.check("AlbertEmbeddings")
def _albert_default_types(cls):
    """without token_type_ids every token is in segment 0"""
    config = AlbertConfig(vocab_size=20, context_length=10, embedding_size=4, d_model=12)
    m = _build_albert(cls, config, seed=1)
    _expect_default_segments(m, config, _albert_oracle, torch.randint(20, (3, 5), generator=rng(16)))


@EXERCISES.check(
    "AlbertEmbeddings",
    hidden=True,
    requires="works for other sizes (E larger than `d_model` too) and random segments",
)
def _albert_other_sizes(cls):
    """other sizes (E larger than d_model too), random segments"""
    config = AlbertConfig(vocab_size=31, context_length=16, embedding_size=14, d_model=8, type_vocab_size=3)
    m = _build_albert(cls, config, seed=2)
    ids = torch.randint(31, (4, 11), generator=rng(17))
    _expect_segments_hidden(m, config, _albert_oracle, ids, torch.randint(3, (4, 11), generator=rng(18)))


@EXERCISES.check(
    "AlbertEmbeddings",
    hidden=True,
    requires="applies dropout in training mode only",
)
def _albert_dropout(cls):
    """dropout after the LayerNorm: off in eval mode, on in training mode"""
    _expect_dropout_after_norm(
        "AlbertEmbeddings",
        cls,
        lambda p: AlbertConfig(vocab_size=30, context_length=10, embedding_size=4, d_model=8, dropout=p),
        torch.randint(0, 30, (2, 7), generator=rng(32)),
    )


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="works after `.half()`, with and without segments: float16 results, as in float32",
)
def _emb_half(cls):
    """after .half() (a Colab GPU's dtype), with and without segments: float16 results, as in float32"""
    m = _build_emb(cls, BertConfig(vocab_size=20, context_length=10, d_model=8), seed=3).eval()
    ids = torch.randint(20, (2, 6), generator=rng(32))
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1]])

    def run(dtype):
        with torch.no_grad():
            model = m.to(dtype)
            what = str(Message("embeddings in {dtype}", dtype=dtype))
            return call(what, model, ids, types), call(what, model, ids)

    expect_half_precision("BertEmbeddings", run)


def _train_and_eval(m, ids):
    """``m(ids)`` in eval mode, then in training mode (torch's global random state restored afterwards)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            m.eval()
            quiet = call("embeddings in eval mode", m, ids)
            m.train()
            noisy = call("embeddings in training mode", m, ids)
    finally:
        torch.random.set_rng_state(state)
        m.eval()
    expect_shape("embeddings in training mode", noisy, tuple(quiet.shape))
    return quiet, noisy


def _expect_dropped_copy(what, noisy, quiet, p):
    """Every element of ``noisy`` is 0 or ``quiet / (1 - p)``, and both occur: dropout applied last."""
    zero = noisy.abs() < 1e-6
    kept = (noisy - quiet / (1 - p)).abs() < 1e-4 * (1 + quiet.abs())
    expect_true(
        bool((zero | kept).all()) and bool(zero.any()) and bool(kept.any()),
        Message(
            "{what} in training mode should be the normalised sum with some elements zeroed and the others scaled "
            "by 1/(1-p): the dropout goes after the LayerNorm.",
            what=what,
        ),
    )


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="applies the dropout after the LayerNorm",
)
def _emb_dropout_last(cls):
    """the dropout comes after the LayerNorm: in training mode each element is 0 or the eval value times 2"""
    m = _build_emb(cls, BertConfig(vocab_size=30, context_length=10, d_model=8, dropout=0.5), seed=4)
    quiet, noisy = _train_and_eval(m, torch.randint(30, (3, 7), generator=rng(64)))
    _expect_dropped_copy("BertEmbeddings", noisy, quiet, 0.5)


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="uses `config.layer_norm_eps` in its LayerNorm",
)
def _emb_layer_norm_eps(cls):
    """the LayerNorm's own eps (config.layer_norm_eps = 0.001, embeddings of small variance)"""
    config = BertConfig(vocab_size=20, context_length=10, d_model=8, layer_norm_eps=1e-3)
    m = _build_emb(cls, config, seed=5)
    with torch.no_grad():
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            getattr(m, name).weight.mul_(0.02)
    ids = torch.randint(20, (2, 7), generator=rng(65))
    _expect_segments_hidden(m, config, _emb_oracle, ids, torch.randint(2, (2, 7), generator=rng(66)))


@EXERCISES.check(
    "BertEmbeddings",
    hidden=True,
    requires="accepts a batch of one with T = `context_length`, `token_type_ids` by keyword, and a single token",
)
def _emb_input_forms(cls):
    """a batch of one with T = context_length, token_type_ids by keyword, a single token"""
    config = BertConfig(vocab_size=20, context_length=9, d_model=8)
    m = _build_emb(cls, config, seed=6)
    ids = torch.randint(20, (1, 9), generator=rng(67))
    types = torch.randint(2, (1, 9), generator=rng(68))
    with torch.no_grad():
        expected = _emb_oracle(m, config, ids, types), _emb_oracle(m, config, ids[:, :1], torch.zeros_like(ids[:, :1]))
        expect_close(
            "embeddings(ids, token_type_ids=types) for a batch of one with T = context_length",
            call("embeddings(ids, token_type_ids=types)", m, ids, token_type_ids=types),
            expected[0],
            hidden=True,
        )
        expect_close("embeddings(ids[:, :1])", call("embeddings(ids[:, :1])", m, ids[:, :1]), expected[1], hidden=True)


@EXERCISES.check(
    "AlbertEmbeddings",
    hidden=True,
    requires="applies the dropout between the LayerNorm and the projection",
)
def _albert_dropout_site(cls):
    """the dropout sits between the LayerNorm and the projection (projection set to [I; 0] plus a bias of 1)"""
    E, D = 4, 7
    m = _build_albert(
        cls, AlbertConfig(vocab_size=30, context_length=10, embedding_size=E, d_model=D, dropout=0.5), seed=7
    )
    expect_true(hasattr(m, "projection"), "AlbertEmbeddings should keep the attribute 'projection' of __init__.")
    with torch.no_grad():
        m.projection.weight.copy_(torch.eye(D, E))  # out[..., :E] = the normalised sum; out[..., E:] = the bias
        m.projection.bias.fill_(1.0)
    quiet, noisy = _train_and_eval(m, torch.randint(30, (3, 6), generator=rng(69)))
    expect_true(
        torch.allclose(noisy[..., E:], torch.ones_like(noisy[..., E:])),
        "AlbertEmbeddings in training mode changed the projection's bias: the dropout goes before the projection "
        "(after the LayerNorm, in width E), not after it.",
    )
    _expect_dropped_copy(
        Message("AlbertEmbeddings (before its projection)"), noisy[..., :E] - 1, quiet[..., :E] - 1, 0.5
    )


@EXERCISES.check(
    "AlbertEmbeddings",
    hidden=True,
    requires="uses `config.layer_norm_eps` in its LayerNorm",
)
def _albert_layer_norm_eps(cls):
    """the LayerNorm's own eps (config.layer_norm_eps = 0.001, embeddings of small variance)"""
    config = AlbertConfig(vocab_size=20, context_length=10, embedding_size=6, d_model=9, layer_norm_eps=1e-3)
    m = _build_albert(cls, config, seed=8)
    with torch.no_grad():
        for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            getattr(m, name).weight.mul_(0.02)
    ids = torch.randint(20, (2, 7), generator=rng(70))
    _expect_segments_hidden(m, config, _albert_oracle, ids, torch.randint(2, (2, 7), generator=rng(71)))


@EXERCISES.check(
    "AlbertEmbeddings",
    hidden=True,
    requires="works after `.half()`, with and without segments: float16 results, as in float32",
)
def _albert_half(cls):
    """after .half() (a Colab GPU's dtype), with and without segments: float16 results, as in float32"""
    m = _build_albert(cls, AlbertConfig(vocab_size=20, context_length=10, embedding_size=6, d_model=9), seed=9)
    ids = torch.randint(20, (2, 6), generator=rng(72))
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1]])

    def run(dtype):
        with torch.no_grad():
            model = m.to(dtype)
            what = str(Message("embeddings in {dtype}", dtype=dtype))
            return call(what, model, ids, types), call(what, model, ids)

    expect_half_precision("AlbertEmbeddings", run)


__all__ = ["EXERCISES", "CheckFailed"]
