"""Checks for chapter 6, GPT (notebook ``notebooks/ch06_gpt.ipynb``).

References are computed independently of the course's solution: the block and the model are recomputed
with PyTorch's functional ops (``F.layer_norm``, ``F.scaled_dot_product_attention(is_causal=True)``,
``F.gelu(approximate="tanh")``) from the check's own inputs and config (heads, ``layer_norm_eps``) and the student's
parameters, the model's blocks included: no oracle is computed from an output of part of the answer (issue 46: blocks
called by the check could echo what the wrong GPT computed); generation is checked against a toy
language model defined here (its logits depend on the token, the position id and the first token of the
window, so cropping and position ids show) and, for sampling, against the frequencies of 4000 draws with a
fixed seed (top-k / top-p support computed by sorting; temperature by ``softmax(logits / T)``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.functional import scaled_dot_product_attention as _torch_sdpa

from solutions.ch06_gpt import GPTConfig  # a plain dataclass of sizes: input plumbing, not a reference

from .core import (
    CheckFailed,
    Exercises,
    call,
    expect_close,
    expect_dropout_modes,
    expect_equal,
    expect_half_precision,
    expect_seeded,
    expect_true,
    observe,
    rng,
)
from .wording import Message

EXERCISES = Exercises("ch06_gpt")


def _randomise(module: nn.Module, seed: int) -> nn.Module:
    """Random values for every parameter (layer norms and biases included), so nothing is left at 0 or 1."""
    g = rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return module


# ---------------------------------------------------------------- exercise 1: Block (pre-LN, causal)


def _attention(block, h, config, causal=True):
    """The block's causal self-attention recomputed from its weights (its W_qkv and W_o) with PyTorch's SDPA, with
    the check's own ``config.n_heads``."""
    B, T, C = h.shape
    H = config.n_heads
    q, k, v = F.linear(h, block.attn.W_qkv.weight, block.attn.W_qkv.bias).split(C, dim=-1)
    q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
    y = _torch_sdpa(q, k, v, is_causal=causal).transpose(1, 2).reshape(B, T, C)
    return F.linear(y, block.attn.W_o.weight, block.attn.W_o.bias)


def _mlp(block, h):
    """The block's MLP recomputed from its weights: W_2 GELU_tanh(W_1 h)."""
    return F.linear(
        F.gelu(F.linear(h, block.mlp.W_1.weight, block.mlp.W_1.bias), approximate="tanh"),
        block.mlp.W_2.weight,
        block.mlp.W_2.bias,
    )


def _layer_norm(ln, x, config):
    """``ln``'s weight and bias with the check's own ``config.layer_norm_eps`` (not the module's ``eps``: a layer norm
    built without the config's eps must fail "uses config.layer_norm_eps")."""
    return F.layer_norm(x, x.shape[-1:], ln.weight, ln.bias, config.layer_norm_eps)


def _block_oracle(block, x, config):
    """Block(x) from the block's weights and the check's ``config``: x + attn(LN_1(x)), then + mlp(LN_2(x))."""
    x = x + _attention(block, _layer_norm(block.ln_1, x, config), config)
    return x + _mlp(block, _layer_norm(block.ln_2, x, config))


def _block_hint(block, x, got, config):
    """Name a known mistake when the student's output matches it (each recomputed from the block's weights)."""
    ln1, ln2 = (lambda t: _layer_norm(block.ln_1, t, config)), (lambda t: _layer_norm(block.ln_2, t, config))
    with torch.no_grad():
        x1 = ln1(x + _attention(block, x, config))
        post = ln2(x1 + _mlp(block, x1))
        nomask = x + _attention(block, ln1(x), config, causal=False)
        nomask = nomask + _mlp(block, ln2(nomask))
    if isinstance(got, torch.Tensor) and got.shape == post.shape:
        if torch.allclose(got, post, atol=1e-5):
            return "This is post-LN, LN(x + Sublayer(x)); GPT-2 is pre-LN: x + Sublayer(LN(x))."
        if torch.allclose(got, nomask, atol=1e-5):
            return "The attention is not causal: call self.attn(..., is_causal=True)."
    return ""


def _compare_block(cls, config, x, *, hidden=False, use_sdpa=None):
    torch.manual_seed(0)
    block = _randomise(call(Message("Block({config})", config=config), cls, config), seed=1)
    if use_sdpa is not None:
        block.use_sdpa = use_sdpa
    block.eval()
    with torch.no_grad():
        expected = _block_oracle(block, x, config)  # from the weights and inputs, read before the call
        got = call("Block.forward(x)", block, x)
        hint = "" if hidden else _block_hint(block, x, got, config)
    expect_close("Block(x)", got, expected, hidden=hidden, hint=hint)


@EXERCISES.check("Block", points=3)
def _block_basic(cls):
    """Block(d_model=16, n_heads=4) on x (2, 7, 16) is x + attn(LN1(x)) then + mlp(LN2(x)), causal"""
    _compare_block(
        cls,
        GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=4, d_model=16),
        torch.randn(2, 7, 16, generator=rng(2)),
    )


@EXERCISES.check("Block")
def _block_causal(cls):
    """output at position t does not change when tokens after t change"""
    torch.manual_seed(0)
    block = _randomise(
        call("Block(config)", cls, GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=2, d_model=8)), seed=3
    ).eval()
    x = torch.randn(1, 6, 8, generator=rng(4))
    y = x.clone()
    y[:, 4:] = torch.randn(1, 2, 8, generator=rng(5))
    with torch.no_grad():
        a, b = call("Block.forward", block, x), call("Block.forward", block, y)
    expect_true(
        torch.allclose(a[:, :4], b[:, :4], atol=1e-6),
        "Changing tokens 4 and 5 changed the output at positions 0-3: the block looks into the future. "
        "Make the attention causal: self.attn(..., is_causal=True).",
    )


@EXERCISES.check(
    "Block",
    hidden=True,
    requires="works for other sizes, with `use_sdpa` on and off",
)
def _block_other_sizes(cls):
    """other sizes (B=3, T=9, d_model=24, 3 heads), both attention paths"""
    config = GPTConfig(vocab_size=10, context_length=12, n_layers=2, n_heads=3, d_model=24)
    x = torch.randn(3, 9, 24, generator=rng(6))
    _compare_block(cls, config, x, hidden=True, use_sdpa=True)
    _compare_block(cls, config, x, hidden=True, use_sdpa=False)


def _silenced(module: nn.Module) -> nn.Module:
    """Every parameter of ``module`` set to 0 (a pre-LN sub-layer, or a whole block, then adds exactly 0)."""
    with torch.no_grad():
        for p in module.parameters():
            p.zero_()
    return module


@EXERCISES.check(
    "Block",
    hidden=True,
    requires="keeps the attention's and the MLP's own dropout, each active in training mode",
)
def _block_dropout_sites(cls):
    """each dropout site on its own: the attention's (MLP silenced, both paths) and the MLP's (attention silenced)"""
    x = torch.randn(2, 6, 8, generator=rng(40))
    for silent, site in (("mlp", Message("the attention's")), ("attn", Message("the MLP's"))):

        def build(p, silent=silent):
            config = GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=2, d_model=8, dropout=p)
            block = _randomise(call("Block(config)", cls, config), seed=41)
            expect_true(
                hasattr(block, silent),
                Message("Block should keep the attribute {name} created in __init__.", name=repr(silent)),
            )
            _silenced(getattr(block, silent))
            return block

        for use_sdpa in (True, False) if silent == "mlp" else (True,):  # the MLP's dropout is path-free

            def forward(m, use_sdpa=use_sdpa):
                m.use_sdpa = use_sdpa
                return call("Block.forward", m, x)

            expect_dropout_modes(
                Message(
                    "Block with its {silent} silenced (only {site} dropout acts; use_sdpa={use_sdpa})",
                    silent=silent,
                    site=site,
                    use_sdpa=use_sdpa,
                ),
                build,
                forward,
            )


@EXERCISES.check(
    "Block",
    hidden=True,
    requires="uses `config.layer_norm_eps` in its layer norms",
)
def _block_layer_norm_eps(cls):
    """the layer norms' own eps (config.layer_norm_eps = 0.01, inputs of small variance)"""
    config = GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=2, d_model=8, layer_norm_eps=0.01)
    _compare_block(cls, config, 0.05 * torch.randn(2, 5, 8, generator=rng(42)), hidden=True)


@EXERCISES.check(
    "Block",
    hidden=True,
    requires="works after `.half()`, with `use_sdpa` on and off: float16 output, as in float32",
)
def _block_half(cls):
    """after .half() (a Colab GPU's dtype), both attention paths: float16 output, as in float32"""
    torch.manual_seed(0)
    block = _randomise(
        call("Block(config)", cls, GPTConfig(vocab_size=10, context_length=8, n_layers=1, n_heads=2, d_model=8)),
        seed=43,
    ).eval()
    x = torch.randn(2, 7, 8, generator=rng(44))
    for use_sdpa in (True, False):
        block.use_sdpa = use_sdpa

        def run(dtype):
            with torch.no_grad():
                return call(Message("Block.forward after .to({dtype})", dtype=dtype), block.to(dtype), x.to(dtype))

        expect_half_precision(Message("Block (use_sdpa={use_sdpa})", use_sdpa=use_sdpa), run)
        block.float()


class _BlockReference(nn.Module):
    """The course's Block, used while checking GPT (whose ``__init__`` builds Blocks), so that a mistake in Block
    costs Block's points only: the layout of the given ``__init__`` (``ln_1``, ``attn.W_qkv``, ``attn.W_o``,
    ``ln_2``, ``mlp.W_1``, ``mlp.W_2``), the forward pass recomputed by :func:`_block_oracle` (no dropout: a GPT
    check that needs the blocks' dropout passes with the student's own Block, which is tried next)."""

    def __init__(self, config):
        super().__init__()
        self._config = config
        C = config.d_model
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=config.layer_norm_eps), nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.attn, self.mlp = nn.Module(), nn.Module()
        self.attn.n_heads = config.n_heads
        self.attn.W_qkv, self.attn.W_o = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.mlp.W_1, self.mlp.W_2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.use_sdpa = True

    def forward(self, x):
        return _block_oracle(self, x, self._config)


EXERCISES.reference("Block")(_BlockReference)


# ---------------------------------------------------------------- exercise 2: GPT (weight tying, final LN)


def _gpt_oracle(model, config, idx, position_ids=None):
    """The logits from the model's weights and the check's own ``config`` and inputs: wte and wpe, every block
    recomputed by :func:`_block_oracle` from its weights (never by calling it: a block of the answer could return
    whatever makes a wrong GPT agree), ln_f with ``config.layer_norm_eps``, the tied head."""
    return _final(model, config, _through_blocks(model, config, _embedded(model, idx, position_ids)))


def _embedded(model, idx, position_ids=None):
    pos = torch.arange(idx.shape[1]) if position_ids is None else position_ids
    return F.embedding(idx, model.wte.weight) + F.embedding(pos, model.wpe.weight)


def _through_blocks(model, config, x):
    """``x`` through the model's blocks, each recomputed from its own weights (:func:`_block_oracle`), in order."""
    for block in list(model.h.children())[: config.n_layers]:
        x = _block_oracle(block, x, config)
    return x


def _final(model, config, x):
    return _layer_norm(model.ln_f, x, config) @ model.wte.weight.T


def _build_gpt(cls, config, seed=0):
    torch.manual_seed(seed)
    model = call(Message("GPT({config})", config=config), cls, config)
    for name in ("wte", "wpe", "h", "ln_f", "lm_head"):
        expect_true(
            hasattr(model, name), Message("GPT should keep the attribute {name} created in __init__.", name=repr(name))
        )
    expect_true(
        isinstance(model.h, nn.Module) and len(list(model.h.children())) == config.n_layers,
        Message("GPT should keep the config.n_layers = {n} blocks created in __init__ (model.h).", n=config.n_layers),
    )
    return model.eval()


def _expect_tied(model):
    expect_true(
        observe("model.lm_head.weight is model.wte.weight", lambda: model.lm_head.weight is model.wte.weight),
        "model.lm_head.weight should be the very same Parameter as model.wte.weight (weight tying): "
        "assign it, `self.lm_head.weight = self.wte.weight`; a copy (clone, nn.Parameter(...), .data "
        "copy) is two tensors that drift apart as soon as training starts.",
    )


@EXERCISES.check("GPT", points=3)
def _gpt_tied(cls):
    """the LM head and the token embedding are one Parameter"""
    _expect_tied(_build_gpt(cls, GPTConfig(vocab_size=13, context_length=8, n_layers=2, n_heads=2, d_model=8)))


@EXERCISES.check("GPT")
def _gpt_logits(cls):
    """GPT(vocab 13, block 8, 2 layers, width 8) on idx (2, 6): logits = LN_f(blocks(wte + wpe)) @ wte^T"""
    config = GPTConfig(vocab_size=13, context_length=8, n_layers=2, n_heads=2, d_model=8)
    model = _build_gpt(cls, config)
    with torch.no_grad():
        model.ln_f.weight.normal_(1.0, 0.3, generator=rng(7))
        model.ln_f.bias.normal_(0.0, 0.3, generator=rng(8))
    idx = torch.randint(13, (2, 6), generator=rng(9))
    with torch.no_grad():
        hidden = _through_blocks(model, config, _embedded(model, idx))  # read before the call
        expected = _final(model, config, hidden)
        got = call("model(idx)", model, idx)
    hint = ""
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        with torch.no_grad():
            if torch.allclose(got, hidden @ model.wte.weight.T, atol=1e-5):
                hint = "The final layer norm ln_f is missing (GPT-2 applies it after the last block)."
    expect_close("logits", got, expected, hint=hint)


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="uses explicit `position_ids` when given, and lets the head's gradient reach the tied embedding",
)
def _gpt_positions_and_gradient(cls):
    """uses explicit position_ids, other sizes; the head's gradient reaches the embedding"""
    config = GPTConfig(vocab_size=17, context_length=12, n_layers=1, n_heads=3, d_model=12)
    model = _build_gpt(cls, config, seed=1)
    _expect_tied(model)
    idx = torch.randint(17, (3, 7), generator=rng(10))
    pos = torch.arange(7) + 4
    with torch.no_grad():
        expected = _gpt_oracle(model, config, idx, pos), _gpt_oracle(model, config, idx)  # before the calls
        expect_close(
            "model(idx, position_ids)", call("model(idx, position_ids)", model, idx, pos), expected[0], hidden=True
        )
        expect_close("model(idx)", call("model(idx)", model, idx), expected[1], hidden=True)
    model.zero_grad()
    logits = call("model(idx)", model, idx[:, :3] % 5)  # tokens 5..16 never appear in the input
    call("backward", lambda: F.cross_entropy(logits.flatten(0, 1), (idx[:, :3] % 5).flatten()).backward())
    grad = observe("model.wte.weight.grad", lambda: model.wte.weight.grad)
    expect_true(
        grad is not None and bool(grad[5:].abs().sum() > 0),
        "Embedding rows of tokens absent from the input get no gradient: the logits must come from the tied "
        "matrix itself (self.lm_head(x) or x @ self.wte.weight.T), not from a detached or copied weight.",
    )


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="works after `model.half()`: float16 logits, as in float32",
)
def _gpt_half(cls):
    """after model.half() (a Colab GPU's dtype): float16 logits, as in float32"""
    model = _build_gpt(cls, GPTConfig(vocab_size=13, context_length=8, n_layers=2, n_heads=2, d_model=8))
    idx = torch.randint(13, (2, 7), generator=rng(17))

    def run(dtype):
        with torch.no_grad():
            return call(Message("GPT.forward after .to({dtype})", dtype=dtype), model.to(dtype), idx)

    expect_half_precision("GPT", run)


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="applies dropout (embeddings, attention, MLP) in training mode only",
)
def _gpt_dropout(cls):
    """dropout (embeddings, attention, MLP) is off in eval mode and on in training mode"""
    idx = torch.randint(13, (2, 6), generator=rng(16))
    expect_dropout_modes(
        "GPT",
        lambda p: call(
            "GPT(config)", cls, GPTConfig(vocab_size=13, context_length=8, n_layers=1, n_heads=2, d_model=8, dropout=p)
        ),
        lambda m: call("GPT.forward", m, idx),
    )


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="applies the embeddings' dropout to their sum (token + position)",
)
def _gpt_embedding_dropout(cls):
    """the embeddings' dropout acts on their sum (blocks silenced): on the token part and on the position part"""
    idx = torch.randint(3, (2, 6), generator=rng(45))  # tokens 0, 1, 2 only

    def build(p, zero):
        model = call(
            "GPT(config)", cls, GPTConfig(vocab_size=13, context_length=8, n_layers=1, n_heads=2, d_model=8, dropout=p)
        )
        expect_true(hasattr(model, "h") and hasattr(model, "wte"), "GPT should keep the attributes h and wte.")
        _silenced(model.h)  # every block adds 0: only the embeddings' dropout can act
        with torch.no_grad():
            if zero == "tokens":
                model.wte.weight[:3] = 0.0  # the input's tokens: the sum is the position embedding alone
            else:
                model.wpe.weight.zero_()  # the sum is the token embedding alone
        return model

    for zero, what in (
        (
            "tokens",
            Message(
                "GPT with its blocks silenced and the tokens' embeddings zero (only the position embeddings are dropped)"
            ),
        ),
        (
            "positions",
            Message(
                "GPT with its blocks silenced and the positions' embeddings zero (only the token embeddings are dropped)"
            ),
        ),
    ):
        expect_dropout_modes(
            what,
            lambda p, zero=zero: build(p, zero),
            lambda m: call("GPT.forward", m, idx),
        )


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="uses `config.layer_norm_eps` in `ln_f`",
)
def _gpt_layer_norm_eps(cls):
    """ln_f's own eps (config.layer_norm_eps = 0.001 on GPT-2's small initial embeddings)"""
    config = GPTConfig(vocab_size=13, context_length=8, n_layers=1, n_heads=2, d_model=8, layer_norm_eps=1e-3)
    model = _build_gpt(cls, config, seed=2)
    idx = torch.randint(13, (2, 6), generator=rng(46))
    with torch.no_grad():
        expected = _gpt_oracle(model, config, idx)
        expect_close("model(idx)", call("model(idx)", model, idx), expected, hidden=True)


@EXERCISES.check(
    "GPT",
    hidden=True,
    requires="accepts `position_ids` of shape `(B, T)`, a batch of one, a full window (T = `context_length`) and a single token",
)
def _gpt_input_forms(cls):
    """position_ids of shape (B, T), a batch of one, a full window (T = context_length), a single token"""
    config = GPTConfig(vocab_size=17, context_length=9, n_layers=1, n_heads=2, d_model=8)
    model = _build_gpt(cls, config, seed=3)
    idx = torch.randint(17, (3, 6), generator=rng(47))
    pos = torch.stack([torch.arange(6) + s for s in (0, 2, 3)])  # (B, T): another offset per row
    one = torch.randint(17, (1, 9), generator=rng(48))
    with torch.no_grad():
        for what, args in (
            ("model(idx, position_ids (B, T))", (idx, pos)),
            (Message("model(idx) for a batch of one with T = context_length"), (one,)),
            ("model(idx[:, :1])", (idx[:, :1],)),
        ):
            expected = _gpt_oracle(model, config, *args)
            expect_close(what, call(what, model, *args), expected, hidden=True)


class _FixedLM(nn.Module):
    context_length = 4

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, idx, position_ids=None):
        return self.logits.expand(idx.shape[0], idx.shape[1], -1)


_LOGITS = torch.tensor([1.0, 0.85, 0.7, 0.55, 0.4, 0.25, 0.1, -0.05, -0.2])


# ---------------------------------------------------------------- exercise 3: generate


class _ToyLM(nn.Module):
    """Logits from the token, its position id and the window's first token; refuses windows > context_length."""

    def __init__(self, V=11, context_length=6, seed=0):
        super().__init__()
        g = rng(seed)
        self.context_length = context_length
        self.tok, self.pos, self.first = (
            torch.randn(V, V, generator=g),
            torch.randn(context_length, V, generator=g),
            torch.randn(V, V, generator=g),
        )

    def forward(self, idx, position_ids=None):
        T = idx.shape[1]
        if T > self.context_length:
            raise ValueError(
                f"the model got {T} tokens but its context_length is {self.context_length}: crop the context"
            )
        if position_ids is None:
            position_ids = torch.arange(T, device=idx.device)
        if int(position_ids.max()) >= self.context_length:
            raise IndexError(
                f"position id {int(position_ids.max())} is outside the position table "
                f"(context_length={self.context_length})"
            )
        return 3 * self.tok[idx] + 2 * self.pos[position_ids] + self.first[idx[:, :1]]  # (B, T, V)


def _greedy_oracle(model, idx, n):
    for _ in range(n):
        window = idx[:, -model.context_length :]
        nxt = model(window, torch.arange(window.shape[1]))[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat([idx, nxt], 1)
    return idx


def _draw(fn, logits, n=4000, seed=0, **kw):
    out = call(
        Message("generate(model, idx, 1, {kwargs})", kwargs=", ".join(f"{k}={v}" for k, v in kw.items())),
        fn,
        _FixedLM(logits),
        torch.zeros(n, 1, dtype=torch.long),
        1,
        generator=rng(seed),
        **kw,
    )
    expect_true(
        isinstance(out, torch.Tensor) and out.shape == (n, 2),
        Message("generate should return (B, T0 + max_new_tokens) = ({n}, 2) tokens.", n=n),
    )
    return torch.bincount(out[:, 1], minlength=len(logits)).float() / n


def _nucleus(probs, p):
    order = torch.argsort(probs, descending=True)
    keep, mass = torch.zeros_like(probs, dtype=torch.bool), 0.0
    for i in order.tolist():
        keep[i] = True
        mass += probs[i].item()
        if mass >= p:
            break
    return keep


def _expect_support(what, freq, allowed, hidden=False):
    got = freq > 0
    expect_equal(Message("{what}: the set of tokens ever sampled", what=what), got, allowed, hidden=hidden)


@EXERCISES.check("generate", points=4)
def _generate_greedy_cropped(fn):
    """temperature=0 is greedy; runs past context_length with the context cropped and positions from 0"""
    model = _ToyLM()
    idx = torch.randint(11, (3, 4), generator=rng(11))
    got = call("generate(model, idx, 7, temperature=0)", fn, model, idx, 7, temperature=0.0)
    expect_equal("generate(model, idx, 7, temperature=0)", got, _greedy_oracle(model, idx, 7))


@EXERCISES.check("generate")
def _generate_top_k(fn):
    """top_k=3 samples only the 3 most likely tokens, in proportion to their probabilities"""
    freq = _draw(fn, _LOGITS, top_k=3)
    allowed = torch.zeros(len(_LOGITS), dtype=torch.bool)
    allowed[:3] = True
    _expect_support("top_k=3", freq, allowed)
    expected = torch.softmax(_LOGITS[:3], -1)
    expect_true(
        bool((freq[:3] - expected).abs().max() < 0.035),
        Message(
            "top_k=3: the three tokens should be drawn with probabilities {expected} (softmax over the kept logits); "
            "yours came out {got}.",
            expected=expected.numpy().round(3),
            got=freq[:3].numpy().round(3),
        ),
    )


@EXERCISES.check("generate")
def _generate_temperature(fn):
    """temperature=0.5 divides the logits before the softmax: frequencies follow softmax(logits / 0.5)"""
    logits = _LOGITS * 3
    freq = _draw(fn, logits, temperature=0.5)
    expected = torch.softmax(logits / 0.5, -1)
    expect_true(
        bool((freq - expected).abs().max() < 0.035),
        Message(
            "With temperature 0.5 the tokens should come with probabilities {expected}; yours came out {got}. "
            "Divide the logits by the temperature, then softmax.",
            expected=expected.numpy().round(3),
            got=freq.numpy().round(3),
        ),
    )


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="implements `top_p`: the smallest most-likely set whose probability reaches p, the crossing token included",
)
def _generate_top_p(fn):
    """top_p keeps the smallest most-likely set whose probability reaches p (the crossing token included)"""
    for p, T in ((0.5, 1.0), (0.8, 0.7), (0.3, 1.0)):
        freq = _draw(fn, _LOGITS * 2, top_p=p, temperature=T, seed=1)
        _expect_support(f"top_p={p}", freq, _nucleus(torch.softmax(_LOGITS * 2 / T, -1), p), hidden=True)


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="handles `top_k=1` (greedy), any k, and `top_k` with `top_p` together",
)
def _generate_top_k_edges(fn):
    """top_k=1 is greedy, other k, top_k and top_p together, shuffled logits"""
    perm = torch.randperm(len(_LOGITS), generator=rng(12))
    logits = _LOGITS[perm]
    for k in (1, 5):
        allowed = torch.zeros(len(logits), dtype=torch.bool)
        allowed[perm.argsort()[:k]] = True
        _expect_support(f"top_k={k}", _draw(fn, logits, top_k=k, seed=2), allowed, hidden=True)
    kept = torch.full_like(logits, float("-inf"))
    top4 = perm.argsort()[:4]
    kept[top4] = logits[top4]
    _expect_support(
        "top_k=4, top_p=0.6",
        _draw(fn, logits, top_k=4, top_p=0.6, seed=3),
        _nucleus(torch.softmax(kept, -1), 0.6),
        hidden=True,
    )


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="draws all its randomness from `generator` and leaves the global random state untouched",
)
def _generate_seeded(fn):
    """all randomness from `generator`: equal seeds give equal tokens; the global random state is untouched"""
    model = _ToyLM(V=7, context_length=5, seed=6)
    idx = torch.randint(7, (3, 2), generator=rng(14))
    expect_seeded(
        "generate(model, idx, 8, top_k=4)", lambda g: call("generate", fn, model, idx, 8, top_k=4, generator=g)
    )


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="grows a prompt to several times `context_length`",
)
def _generate_long(fn):
    """a one-token prompt grown to three times context_length, batch of 2"""
    model = _ToyLM(V=7, context_length=5, seed=4)
    idx = torch.randint(7, (2, 1), generator=rng(13))
    expect_equal(
        "generate(model, idx, 14, temperature=0)",
        call("generate", fn, model, idx, 14, temperature=0.0),
        _greedy_oracle(model, idx, 14),
        hidden=True,
    )


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="accepts a prompt longer than `context_length`, a batch of one, and `max_new_tokens=0` (the prompt back, unchanged)",
)
def _generate_prompt_forms(fn):
    """a prompt longer than context_length, a batch of one, max_new_tokens=0 (the prompt back, unchanged)"""
    model = _ToyLM(V=9, context_length=5, seed=7)
    for B, T0, n in ((2, 8, 4), (1, 3, 6), (2, 4, 0)):
        idx = torch.randint(9, (B, T0), generator=rng(49 + T0))
        expect_equal(
            Message(
                "generate(model, idx of shape {shape}, {n}, temperature=0) with context_length=5", shape=(B, T0), n=n
            ),
            call("generate", fn, model, idx, n, temperature=0.0),
            _greedy_oracle(model, idx, n),
            hidden=True,
        )


@EXERCISES.check(
    "generate",
    hidden=True,
    requires="applies `temperature` together with `top_k`: the kept tokens follow softmax(logits / temperature)",
)
def _generate_temperature_with_top_k(fn):
    """temperature=2 together with top_k=4: the kept tokens follow softmax(logits / 2)"""
    logits = _LOGITS * 4
    freq = _draw(fn, logits, temperature=2.0, top_k=4, seed=5)
    allowed = torch.zeros(len(logits), dtype=torch.bool)
    allowed[:4] = True
    _expect_support("temperature=2, top_k=4", freq, allowed, hidden=True)
    expect_true(
        bool((freq[:4] - torch.softmax(logits[:4] / 2.0, -1)).abs().max() < 0.035),
        "With temperature=2 and top_k=4 the four kept tokens should follow softmax(logits / temperature): "
        "divide by the temperature whether or not top_k is given.",
    )


__all__ = ["EXERCISES", "CheckFailed"]
